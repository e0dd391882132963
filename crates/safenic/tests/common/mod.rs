//! What the forwarding tests and the conformance suite share: an in-process nicsim, a driver
//! that follows the command-line contract, and the checks every driver must pass.
//! Needs root and hugepages (`make test` provides them); tests run one at a time.
#![allow(dead_code)] // each test binary uses a different part

use nicsim::engine::{Request, Stats};
use nicsim::server::{ServeOptions, Server};
use nicsim::wire::{parse_payload, read_pcap, Direction, TrafficSpec};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const SAFENIC: &str = env!("CARGO_BIN_EXE_safenic");
pub const A: &str = "0000:5e:00.0";
pub const B: &str = "0000:5e:00.1";
/// Low enough that the host descheduling the polling driver's vCPU for up to 10 ms (seen on
/// this two-vCPU VM) fits in a ring of 512: these tests check exactly-once delivery, not speed.
pub const RATE_PPS: f64 = 50_000.0;

/// A driver following the contract: `<command…> <mode> <BDF-in> <BDF-out> [--sysfs DIR] …`.
/// `{mode}` in the command is replaced by the mode (for one-binary-per-model drivers) and
/// `{safenic}` by this build's safenic; relative paths are from the repository root.
#[derive(Clone, Copy)]
pub struct Driver {
    pub name: &'static str,
    pub command: &'static str,
}

impl Driver {
    pub fn words(&self, mode: &str) -> Vec<String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let words: Vec<String> =
            self.command.split_whitespace().map(|w| w.replace("{mode}", mode).replace("{safenic}", SAFENIC)).collect();
        let program = if words[0].contains('/') && !words[0].starts_with('/') {
            root.join(&words[0]).display().to_string()
        } else {
            words[0].clone()
        };
        assert!(
            Path::new(&program).exists(),
            "{}: {program} is missing: build it first (`make -C drivers/c` for the C drivers; make test does)",
            self.name
        );
        std::iter::once(program).chain(words[1..].iter().cloned()).collect()
    }
}

pub const RUST: Driver = Driver { name: "rust", command: "{safenic} fwd" };

pub struct Sim {
    server: Option<Server>,
    pub root: PathBuf,
}

impl Sim {
    pub fn start(name: &str) -> Sim {
        // nicsim's engine runs on CPU 0 and the driver on CPU 1. This thread (and the server's
        // control thread it spawns) stays on CPU 0 too: when it wakes up on CPU 1 to read
        // statistics, it preempts the polling driver for milliseconds and the rings overflow.
        platform::sched::pin_current_thread(0).expect("pinning the test thread");
        let root = PathBuf::from(format!("/dev/shm/safenic-test-{}-{name}", std::process::id()));
        let opts =
            ServeOptions { ports: 2, root: root.clone(), cables: vec![], gbps: 10.0, cpu: Some(0), bound: false };
        Sim { server: Some(Server::start(&opts).expect("starting nicsim")), root }
    }
    pub fn req(&self, r: Request) -> serde_json::Value {
        self.server.as_ref().unwrap().request(r).unwrap()
    }
    pub fn stats(&self) -> Stats {
        serde_json::from_value(self.req(Request::Stats)).unwrap()
    }
    pub fn devices(&self) -> String {
        self.root.join("devices").display().to_string()
    }
    /// `driver mode args… --sysfs <devices> --cpu 1`.
    pub fn fwd(&self, driver: Driver, mode: &str, args: &[&str]) -> Child {
        let words = driver.words(mode);
        Command::new(&words[0])
            .args(&words[1..])
            .arg(mode)
            .args(args)
            .args(["--sysfs", &self.devices(), "--cpu", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {}: {e}", driver.name))
    }
    /// `nicsim exec -- driver mode args… --cpu 1`: no --sysfs; the driver finds the functions
    /// where it finds real ones, /sys/bus/pci/devices, in nicsim's private mount namespace.
    pub fn exec_fwd(&self, driver: Driver, mode: &str, args: &[&str]) -> Child {
        let nicsim = Path::new(SAFENIC).with_file_name("nicsim");
        assert!(nicsim.exists(), "{} is missing: build the workspace first (make test does)", nicsim.display());
        Command::new(nicsim)
            .arg("--root")
            .arg(&self.root)
            .arg("exec")
            .arg("--")
            .args(driver.words(mode))
            .arg(mode)
            .args(args)
            .args(["--cpu", "1"])
            .env_remove("SAFENIC_SYSFS")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning nicsim exec")
    }
    /// Waits until the driver has both ports' receive queues up.
    pub fn wait_driver_ready(&self, child: &mut Child) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.stats();
            if s.ports.iter().all(|p| p.rx_queue0.0 && p.tx_queues_enabled > 0) {
                // Both agents are set up once both RX queues run; give the loop a moment.
                std::thread::sleep(Duration::from_millis(100));
                return;
            }
            if let Ok(Some(status)) = child.try_wait() {
                let out = bench::output_of(child);
                panic!("the driver exited early with {status}: {out}");
            }
            assert!(Instant::now() < deadline, "the driver did not bring the ports up");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    /// Starts both generators and waits until every frame has reached a sink or the sinks
    /// stop moving.
    pub fn send_both_ways(&self, spec: TrafficSpec) -> Stats {
        let n = spec.count.unwrap();
        for port in 0..2 {
            self.req(Request::Start { port, spec: spec.clone() });
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        let (mut last, mut quiet) = (0, 0);
        loop {
            std::thread::sleep(Duration::from_millis(250));
            let s = self.stats();
            let total: u64 = s.ports.iter().map(|p| p.sink_packets).sum();
            if total == 2 * n {
                return s;
            }
            quiet = if total == last && s.ports.iter().all(|p| !p.generator_active) { quiet + 1 } else { 0 };
            if quiet >= 8 || Instant::now() > deadline {
                return s;
            }
            last = total;
        }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
        }
    }
}

/// SIGTERM, then the exit status and output.
pub fn terminate(child: Child) -> Output {
    platform::signals::send_terminate(child.id()).expect("signalling the driver");
    child.wait_with_output().unwrap()
}

/// Every frame generated on each port arrived at the other port's sink at most once (in order
/// if asked), and every one that did not arrive is a drop the device counted because the ring
/// was full. On a two-vCPU virtual machine the polling driver is sometimes descheduled for
/// milliseconds, which no ring absorbs; such drops must stay below 0.1%.
pub fn assert_exactly_once_in_order(s: &Stats, n: u64, in_order: bool) {
    for p in &s.ports {
        let other = 1 - p.port;
        assert_eq!(p.streams.len(), 1, "port {} sink saw only port {other}'s stream: {:?}", p.port, p.streams);
        let (stream, st) = &p.streams[0];
        assert_eq!(*stream, other);
        let dev = &s.ports[other].device;
        let dropped = dev.qprdc[0] + dev.mpc;
        assert_eq!(
            st.received + dropped,
            n,
            "port {other} -> port {}: {st:?}; every frame forwarded once or counted as dropped at port {other} \
             (no descriptor {}, missed {}; nicsim's other drops at port {other}: {:?}, transmitted by port {}: {})",
            p.port,
            dev.qprdc[0],
            dev.mpc,
            s.ports[other].drops,
            p.port,
            p.device.gptc
        );
        assert_eq!(st.lost, dropped, "sequence gaps are exactly the counted drops");
        assert!(dropped * 1000 <= n, "port {other}: {dropped} of {n} frames dropped for want of descriptors");
        if in_order {
            assert_eq!(st.reordered, 0);
        }
        assert_eq!(p.sink_foreign, 0);
        assert_eq!(p.dma_faults, 0, "{:?}", p.faults);
    }
}

pub fn assert_no_lint(sim: &Sim) {
    let lint = sim.req(Request::Lint);
    assert_eq!(lint.as_array().unwrap().len(), 0, "nicsim's lint on the driver: {lint}");
}

/// Forwards `n` packets each way at `rate` with `driver mode args`; checks delivery, the
/// paper's MAC rewrite on the first 100 frames, the summary line and a clean exit on SIGTERM.
pub fn forward(driver: Driver, mode: &str, args: &[&str], n: u64, rate: f64, in_order: bool) {
    let sim = Sim::start(&format!("{}-{mode}", driver.name));
    let mut child = sim.fwd(driver, mode, &[&[A, B], args].concat());
    sim.wait_driver_ready(&mut child);
    let pcap = sim.root.with_extension("pcap");
    sim.req(Request::Pcap { port: 1, path: pcap.display().to_string(), direction: Direction::Tx, count: Some(100) });
    let s = sim.send_both_ways(TrafficSpec { rate_pps: Some(rate), count: Some(n), ..TrafficSpec::default() });
    let out = terminate(child);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} exits 0 on SIGTERM: {:?} {stdout} {}",
        driver.name,
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_exactly_once_in_order(&s, n, in_order);
    // The summary counts what the driver forwarded: what each sink received.
    let (ab, ba) = (s.ports[1].streams[0].1.received, s.ports[0].streams[0].1.received);
    let summary = stdout.lines().last().unwrap_or("");
    assert!(
        summary.contains(&format!(" fwd {mode}: {A} -> {B} {ab} packets, {B} -> {A} {ba} packets, ")),
        "{}: summary line: {summary}",
        driver.name
    );
    assert_no_lint(&sim);
    // The paper's rewrite: destination 00:00:00:00:00:01, source 00:00:00:00:00:00.
    sim.req(Request::PcapStop { port: 1 });
    let frames = read_pcap(&pcap).unwrap();
    assert_eq!(frames.len(), 100);
    for f in &frames {
        assert_eq!(&f[0..12], &[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(parse_payload(f).map(|p| p.0), Some(0), "the rest of the frame is unchanged");
    }
    let _ = std::fs::remove_file(pcap);
}

/// Every length from 60 to 1514 bytes through `driver mode`, with `rewrite` (paper or none).
pub fn every_frame_length(driver: Driver, mode: &str, rewrite: &str) {
    let sim = Sim::start(&format!("{}-len-{mode}-{rewrite}", driver.name));
    let mut child = sim.fwd(driver, mode, &[A, B, "--mac-rewrite", rewrite]);
    sim.wait_driver_ready(&mut child);
    let pcap = sim.root.with_extension("pcap");
    sim.req(Request::Pcap { port: 1, path: pcap.display().to_string(), direction: Direction::Tx, count: None });
    let n = 1514 - 60 + 1;
    let spec = TrafficSpec {
        rate_pps: Some(50_000.0),
        size: 60,
        size_max: Some(1514),
        count: Some(n),
        ..TrafficSpec::default()
    };
    let s = sim.send_both_ways(spec);
    sim.req(Request::PcapStop { port: 1 });
    let out = terminate(child);
    assert!(out.status.success(), "{}: {:?}", driver.name, out);
    assert_exactly_once_in_order(&s, n, true);
    let frames = read_pcap(&pcap).unwrap();
    let lengths: Vec<usize> = frames.iter().map(|f| f.len()).collect();
    assert_eq!(lengths, (60..=1514).collect::<Vec<_>>(), "{} {mode}: every length, in order", driver.name);
    for f in &frames {
        let expected_macs: [u8; 12] = if rewrite == "paper" {
            [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]
        } else {
            // Unchanged: generated for port 0's own address, from nicsim's generator.
            let mut m = [0u8; 12];
            m[..6].copy_from_slice(&nicsim::device::default_mac(0));
            m[6..].copy_from_slice(&f[6..12]);
            m
        };
        assert_eq!(&f[0..12], &expected_macs, "{} {mode} {rewrite}", driver.name);
        let sum: u32 = f[14..34].chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        assert_eq!((sum & 0xFFFF) + (sum >> 16), 0xFFFF, "IP header intact");
    }
    assert_no_lint(&sim);
    let _ = std::fs::remove_file(pcap);
}

/// Runs `driver mode args` (no nicsim needed) and returns its one-line error.
pub fn fwd_error(driver: Driver, mode: &str, args: &[&str]) -> String {
    let words = driver.words(mode);
    let out = Command::new(&words[0]).args(&words[1..]).arg(mode).args(args).output().unwrap();
    assert!(!out.status.success(), "{} {mode} {args:?} must fail", driver.name);
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(err.lines().count(), 1, "{}: one line: {err}", driver.name);
    err
}

/// The platform failures every driver reports in one line that names the fix: function not
/// found, bad address, wrong device, device bound to a kernel driver.
pub fn platform_failures_name_the_fix(driver: Driver) {
    let empty = std::env::temp_dir().join(format!("safenic-empty-{}-{}", std::process::id(), driver.name));
    std::fs::create_dir_all(&empty).unwrap();
    let e = fwd_error(driver, "restricted", &[A, B, "--sysfs", empty.to_str().unwrap()]);
    assert!(e.contains("not found") && e.contains("--sysfs"), "{e}");
    let e = fwd_error(driver, "restricted", &["nonsense", B, "--sysfs", empty.to_str().unwrap()]);
    assert!(e.contains("not a PCI address"), "{e}");
    // Wrong device and a device bound to a kernel driver, on nicsim's functions.
    let sim = Sim::start(&format!("{}-errors", driver.name));
    let dev = sim.root.join("devices").join(A);
    std::fs::write(dev.join("device"), "0x1234\n").unwrap();
    let e = fwd_error(driver, "restricted", &[A, B, "--sysfs", &sim.devices()]);
    assert!(e.contains("8086:1234") && e.contains("not an Intel 82599ES"), "{e}");
    drop(sim);
    let root = PathBuf::from(format!("/dev/shm/safenic-test-{}-{}-bound", std::process::id(), driver.name));
    let opts = ServeOptions { ports: 2, root: root.clone(), cables: vec![], gbps: 10.0, cpu: Some(0), bound: true };
    let server = Server::start(&opts).unwrap();
    let e = fwd_error(driver, "restricted", &[A, B, "--sysfs", root.join("devices").to_str().unwrap()]);
    assert!(e.contains("bound to the kernel driver `ixgbe`") && e.contains("unbind"), "{e}");
    server.stop();
    let _ = std::fs::remove_dir(&empty);
}
