//! `safenic fwd` against nicsim: every model forwards 10^6 packets each way, exactly once and
//! in order, with MACs rewritten as asked; every frame length; errors; clean exit on SIGTERM.
//! Needs root and hugepages (`make test` provides them); tests run one at a time.

use nicsim::engine::{Request, Stats};
use nicsim::server::{ServeOptions, Server};
use nicsim::wire::{parse_payload, read_pcap, Direction, TrafficSpec};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const SAFENIC: &str = env!("CARGO_BIN_EXE_safenic");
const A: &str = "0000:5e:00.0";
const B: &str = "0000:5e:00.1";
/// Low enough that a scheduler hiccup of a few milliseconds on a two-core machine fits in the
/// rings: these tests check exactly-once delivery, not speed.
const RATE_PPS: f64 = 100_000.0;

struct Sim {
    server: Option<Server>,
    root: PathBuf,
}

impl Sim {
    fn start(name: &str) -> Sim {
        // nicsim's engine runs on CPU 0 and the driver on CPU 1. This thread (and the server's
        // control thread it spawns) stays on CPU 0 too: when it wakes up on CPU 1 to read
        // statistics, it preempts the polling driver for milliseconds and the rings overflow.
        platform::sched::pin_current_thread(0).expect("pinning the test thread");
        let root = PathBuf::from(format!("/dev/shm/safenic-test-{}-{name}", std::process::id()));
        let opts =
            ServeOptions { ports: 2, root: root.clone(), cables: vec![], gbps: 10.0, cpu: Some(0), bound: false };
        Sim { server: Some(Server::start(&opts).expect("starting nicsim")), root }
    }
    fn req(&self, r: Request) -> serde_json::Value {
        self.server.as_ref().unwrap().request(r).unwrap()
    }
    fn stats(&self) -> Stats {
        serde_json::from_value(self.req(Request::Stats)).unwrap()
    }
    fn devices(&self) -> String {
        self.root.join("devices").display().to_string()
    }
    fn fwd(&self, args: &[&str]) -> Child {
        Command::new(SAFENIC)
            .args(["fwd"])
            .args(args)
            .args(["--sysfs", &self.devices(), "--cpu", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning safenic")
    }
    /// `nicsim exec -- safenic fwd ARGS`: no --sysfs; the driver finds the functions where it
    /// finds real ones, /sys/bus/pci/devices, in nicsim's private mount namespace.
    fn exec_fwd(&self, args: &[&str]) -> Child {
        let nicsim = std::path::Path::new(SAFENIC).with_file_name("nicsim");
        assert!(nicsim.exists(), "{} is missing: build the workspace first (make test does)", nicsim.display());
        Command::new(nicsim)
            .arg("--root")
            .arg(&self.root)
            .args(["exec", "--", SAFENIC, "fwd"])
            .args(args)
            .args(["--cpu", "1"])
            .env_remove("SAFENIC_SYSFS")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning nicsim exec")
    }
    /// Waits until the driver has both ports' receive queues up.
    fn wait_driver_ready(&self, child: &mut Child) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.stats();
            if s.ports.iter().all(|p| p.rx_queue0.0 && p.tx_queues_enabled > 0) {
                // Both agents are set up once both RX queues run; give the loop a moment.
                std::thread::sleep(Duration::from_millis(100));
                return;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("safenic exited early with {status}");
            }
            assert!(Instant::now() < deadline, "safenic did not bring the ports up");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    /// Starts both generators and waits until every frame has reached a sink or the sinks
    /// stop moving.
    fn send_both_ways(&self, spec: TrafficSpec) -> Stats {
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
fn terminate(child: Child) -> Output {
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    child.wait_with_output().unwrap()
}

/// Every frame generated on each port arrived at the other port's sink at most once (in order
/// if asked), and every one that did not arrive is a drop the device counted because the ring
/// was full. On a two-vCPU virtual machine the polling driver is sometimes descheduled for
/// milliseconds, which no ring absorbs; such drops must stay below 0.1%.
fn assert_exactly_once_in_order(s: &Stats, n: u64, in_order: bool) {
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
             (no descriptor {}, missed {})",
            p.port,
            dev.qprdc[0],
            dev.mpc
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

fn assert_no_lint(sim: &Sim) {
    let lint = sim.req(Request::Lint);
    assert_eq!(lint.as_array().unwrap().len(), 0, "nicsim's lint on our driver: {lint}");
}

/// Forwards 10^6 packets each way with `args`, checks delivery and the driver's exit.
fn forward_a_million(name: &str, args: &[&str], in_order: bool) {
    forward(name, args, 1_000_000, RATE_PPS, in_order);
}

/// Forwards `n` packets each way at `rate` with `args`, checks delivery and the driver's exit.
fn forward(name: &str, args: &[&str], n: u64, rate: f64, in_order: bool) {
    let sim = Sim::start(name);
    let mut child = sim.fwd(args);
    sim.wait_driver_ready(&mut child);
    let pcap = sim.root.with_extension("pcap");
    sim.req(Request::Pcap { port: 1, path: pcap.display().to_string(), direction: Direction::Tx, count: Some(100) });
    let s = sim.send_both_ways(TrafficSpec { rate_pps: Some(rate), count: Some(n), ..TrafficSpec::default() });
    let out = terminate(child);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "safenic exits 0 on SIGTERM: {:?} {stdout} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_exactly_once_in_order(&s, n, in_order);
    let summary = stdout.lines().last().unwrap_or("");
    assert!(
        summary.starts_with("safenic fwd ") && summary.contains(&format!("{A} -> {B} {n} packets")),
        "summary: {summary}"
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

#[test]
fn restricted_one_output_forwards_a_million_each_way() {
    forward_a_million("r1", &["restricted", A, B], true);
}

#[test]
fn restricted_three_outputs_forwards_a_million_each_way() {
    // Packets go to three TX queues of the output port in turn; order holds per queue only.
    forward_a_million("r3", &["restricted", A, B, "--outputs", "3"], false);
}

#[test]
fn restricted_sixty_four_outputs_forwards_each_way() {
    // Every packet costs nicsim 64 TX descriptors per direction (63 of them null), so the rate
    // and count are lower to keep nicsim, not the driver, from being the limit.
    forward("r64", &["restricted", A, B, "--outputs", "64"], 200_000, 20_000.0, false);
}

#[test]
fn const_forwards_a_million_each_way() {
    forward_a_million("const", &["const", A, B], true);
}

#[test]
fn flexible_forwards_a_million_each_way() {
    forward_a_million("flex", &["flexible", A, B], true);
}

/// The unmodified driver under `nicsim exec`, with its default sysfs path and DMA memory
/// from hugetlbfs files, as it would run on a machine with the card.
#[test]
fn runs_unmodified_under_nicsim_exec() {
    let sim = Sim::start("exec");
    let mut child = sim.exec_fwd(&["flexible", A, B]);
    sim.wait_driver_ready(&mut child);
    let n = 100_000;
    let s = sim.send_both_ways(TrafficSpec { rate_pps: Some(RATE_PPS), count: Some(n), ..TrafficSpec::default() });
    let out = terminate(child);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{:?} {stdout} {}", out.status, String::from_utf8_lossy(&out.stderr));
    assert_exactly_once_in_order(&s, n, true);
    assert!(stdout.contains(&format!("{A} -> {B} {n} packets")), "summary: {stdout}");
    assert_no_lint(&sim);
}

/// Every length from 60 to 1514 bytes, both with the paper's rewrite and unchanged.
#[test]
fn every_frame_length_in_every_model() {
    for (mode, rewrite) in [("restricted", "paper"), ("const", "none"), ("flexible", "paper"), ("flexible", "none")] {
        let sim = Sim::start(&format!("len-{mode}-{rewrite}"));
        let mut child = sim.fwd(&[mode, A, B, "--mac-rewrite", rewrite]);
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
        assert!(out.status.success());
        assert_exactly_once_in_order(&s, n, true);
        let frames = read_pcap(&pcap).unwrap();
        let lengths: Vec<usize> = frames.iter().map(|f| f.len()).collect();
        assert_eq!(lengths, (60..=1514).collect::<Vec<_>>(), "{mode}: every length, in order");
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
            assert_eq!(&f[0..12], &expected_macs, "{mode} {rewrite}");
            let sum: u32 = f[14..34].chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
            assert_eq!((sum & 0xFFFF) + (sum >> 16), 0xFFFF, "IP header intact");
        }
        assert_no_lint(&sim);
        let _ = std::fs::remove_file(pcap);
    }
}

fn fwd_error(args: &[&str]) -> String {
    let out = Command::new(SAFENIC).arg("fwd").args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} must fail");
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn platform_failures_are_one_line_that_names_the_fix() {
    let empty = std::env::temp_dir().join(format!("safenic-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let e = fwd_error(&["restricted", A, B, "--sysfs", empty.to_str().unwrap()]);
    assert!(e.contains("not found") && e.contains("--sysfs"), "{e}");
    let e = fwd_error(&["restricted", "nonsense", B, "--sysfs", empty.to_str().unwrap()]);
    assert!(e.contains("not a PCI address"), "{e}");
    let e = fwd_error(&["const", A, B, "--outputs", "3"]);
    assert!(e.contains("restricted model only"), "{e}");
    let e = fwd_error(&["restricted", A, B, "--outputs", "65"]);
    assert!(e.contains("1 to 64"), "{e}");
    // Wrong device and a device bound to a kernel driver, on nicsim's functions.
    let sim = Sim::start("errors");
    let dev = sim.root.join("devices").join(A);
    std::fs::write(dev.join("device"), "0x1234\n").unwrap();
    let e = fwd_error(&["restricted", A, B, "--sysfs", &sim.devices()]);
    assert!(e.contains("8086:1234") && e.contains("not an Intel 82599ES"), "{e}");
    drop(sim);
    let root = PathBuf::from(format!("/dev/shm/safenic-test-{}-bound", std::process::id()));
    let opts = ServeOptions { ports: 2, root: root.clone(), cables: vec![], gbps: 10.0, cpu: Some(0), bound: true };
    let server = Server::start(&opts).unwrap();
    let e = fwd_error(&["restricted", A, B, "--sysfs", root.join("devices").to_str().unwrap()]);
    assert!(e.contains("bound to the kernel driver `ixgbe`") && e.contains("unbind"), "{e}");
    server.stop();
    let _ = std::fs::remove_dir(&empty);
}
