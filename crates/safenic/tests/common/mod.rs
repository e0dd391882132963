//! What the forwarding tests and the conformance suite share: an in-process nicsim, a driver
//! that follows the command-line contract, and the checks every driver must pass.
//!
//! Nothing a test starts outlives it: drivers are [`Reaped`] (killed and reaped when dropped,
//! and by the kernel if the test process dies), nicsim's root and captures live in a
//! [`ScratchDir`] that is removed with the [`Sim`].
//! Needs root and hugepages (`make test` provides them); tests run one at a time.

use nicsim::control::{PortStats, Stats};
use nicsim::session::{Session, SessionOptions};
use nicsim::wire::{parse_payload, read_pcap, Captured, TrafficSpec};
use platform::fs::ScratchDir;
use platform::signals::Signal;
use platform::Reaped;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const SAFENIC: &str = env!("CARGO_BIN_EXE_safenic");
pub const A: &str = "0000:5e:00.0";
pub const B: &str = "0000:5e:00.1";
/// Frames per second per port in the lossless tests. With flow control the rate decides only
/// how long a test takes: a driver that falls behind makes the generator wait, not drop.
pub const RATE_PPS: f64 = 2_000_000.0;
/// Prefix of the scratch directories of these tests under /dev/shm.
pub const SCRATCH_PREFIX: &str = "safenic-test";
/// The unprivileged user drivers run as over VFIO (`nobody` on most systems).
pub const NOBODY: u32 = 65534;

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
        let words: Vec<String> = manifest::command_words(self.command, &root, Path::new(SAFENIC))
            .into_iter()
            .map(|w| w.replace("{mode}", mode))
            .collect();
        assert!(
            Path::new(&words[0]).exists(),
            "{}: {} is missing: build it first (`safenic-drivers build`; make test does)",
            self.name,
            words[0]
        );
        words
    }
}

pub const RUST: Driver = Driver { name: "rust", command: "{safenic} fwd" };

/// An in-process nicsim with two ports, in its own scratch directory; its control calls are
/// those of [`Session`].
pub struct Sim {
    session: Session,
    pub root: PathBuf,
}

impl std::ops::Deref for Sim {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.session
    }
}

impl Sim {
    pub fn start(name: &str) -> Sim {
        Self::start_with(name, false)
    }

    /// Ports of these kinds, the last for the ports beyond the list (docs/virtio.md).
    pub fn start_devices(name: &str, devices: &[nicsim::pciconfig::Kind]) -> Sim {
        Self::start_opts(name, SessionOptions { devices: devices.to_vec(), ..SessionOptions::default() })
    }

    /// With `bound`, the functions appear bound to a kernel driver.
    pub fn start_with(name: &str, bound: bool) -> Sim {
        Self::start_opts(name, SessionOptions { bound, ..SessionOptions::default() })
    }

    fn start_opts(name: &str, opts: SessionOptions) -> Sim {
        // nicsim's engine runs on CPU 0 and the driver on CPU 1. This thread (and the server's
        // control thread it spawns) stays on CPU 0 too: when it wakes up on CPU 1 to read
        // statistics, it preempts the polling driver.
        platform::sched::pin_current_thread(0).expect("pinning the test thread");
        let tag = std::env::var("SAFENIC_TEST_TAG").map(|t| format!("{t}-{name}")).unwrap_or_else(|_| name.into());
        let session = Session::start(SCRATCH_PREFIX, &tag, &opts).expect("starting nicsim");
        let root = session.root().to_path_buf();
        Sim { session, root }
    }
    pub fn stats(&self) -> Stats {
        self.session.stats().unwrap()
    }
    pub fn devices(&self) -> String {
        self.session.devices().display().to_string()
    }
    /// A file in this test's scratch directory, removed with it.
    pub fn scratch_file(&self, name: &str) -> PathBuf {
        self.root.with_file_name(name)
    }
    /// `driver mode args… --sysfs <devices> --cpu 1`.
    pub fn fwd(&self, driver: Driver, mode: &str, args: &[&str]) -> Reaped {
        self.fwd_with_env(driver, mode, args, &[])
    }
    /// [`Self::fwd`] with these environment variables set.
    pub fn fwd_with_env(&self, driver: Driver, mode: &str, args: &[&str], env: &[(&str, &str)]) -> Reaped {
        self.fwd_placed(driver, mode, &[args, &["--cpu", "1"]].concat(), env)
    }
    /// `driver mode args… --sysfs <devices>`, with `env`: where its threads run is for `args`
    /// to say (`--cpu`, `--cores`).
    pub fn fwd_placed(&self, driver: Driver, mode: &str, args: &[&str], env: &[(&str, &str)]) -> Reaped {
        let words = driver.words(mode);
        Reaped::spawn(
            Command::new(&words[0])
                .args(&words[1..])
                .envs(env.iter().copied())
                .arg(mode)
                .args(args)
                .args(["--sysfs", &self.devices()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .unwrap_or_else(|e| panic!("spawning {}: {e}", driver.name))
    }
    /// `nicsim exec -- driver mode args… --cpu 1`: no --sysfs; the driver finds the functions
    /// where it finds real ones, /sys/bus/pci/devices, in nicsim's private mount namespace.
    pub fn exec_fwd(&self, driver: Driver, mode: &str, args: &[&str]) -> Reaped {
        self.exec_fwd_with(&[], &[], driver, mode, args)
    }
    /// `nicsim exec --vfio <exec_args…> -- setpriv … -- driver mode args… --cpu 1`: the
    /// functions bound to vfio-pci, the driver run as `nobody` with no capability from its
    /// first instruction (`--vfio-user 65534` among `exec_args` gives it the groups).
    pub fn exec_fwd_vfio(&self, driver: Driver, mode: &str, args: &[&str], exec_args: &[&str]) -> Reaped {
        let (uid, gid) = (format!("--reuid={NOBODY}"), format!("--regid={NOBODY}"));
        let exec_args: Vec<&str> = [&["--vfio"], exec_args].concat();
        let setpriv = ["setpriv", &uid, &gid, "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--"];
        self.exec_fwd_with(&exec_args, &setpriv, driver, mode, args)
    }
    /// `nicsim exec <exec_args…> -- <prefix…> driver mode args… --cpu 1`.
    fn exec_fwd_with(&self, exec_args: &[&str], prefix: &[&str], driver: Driver, mode: &str, args: &[&str]) -> Reaped {
        let nicsim = Path::new(SAFENIC).with_file_name("nicsim");
        assert!(nicsim.exists(), "{} is missing: build the workspace first (make test does)", nicsim.display());
        Reaped::spawn(
            Command::new(nicsim)
                .arg("--root")
                .arg(&self.root)
                .arg("exec")
                .args(exec_args)
                .arg("--")
                .args(prefix)
                .args(driver.words(mode))
                .arg(mode)
                .args(args)
                .args(["--cpu", "1"])
                .env_remove("SAFENIC_SYSFS")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .expect("spawning nicsim exec")
    }
    /// Waits until the driver has both ports' receive and transmit queues up.
    pub fn wait_driver_ready(&self, child: &mut Reaped) {
        let alive = || match child.try_wait() {
            Ok(Some(status)) => Err(format!("the driver exited early with {status}: {}", child.output())),
            _ => Ok(()),
        };
        self.session.wait_ports_up(Duration::from_secs(30), alive).unwrap();
        // Both agents are set up once both RX queues run; give the loop a moment.
        std::thread::sleep(Duration::from_millis(100));
    }
    /// Starts both generators with `spec`.
    pub fn start_both_ways(&self, spec: &TrafficSpec) {
        for port in 0..2 {
            self.start_traffic(port, spec.clone()).unwrap();
        }
    }
    /// Waits until the generators have sent everything and the sinks stop moving: every frame
    /// has then arrived or been dropped somewhere. Returns the statistics at that moment.
    pub fn wait_quiet(&self) -> Stats {
        self.wait_quiet_unless(Duration::from_secs(180), || false).expect("nothing ends the wait early")
    }
    /// [`Self::wait_quiet`] within `within`, or `None` as soon as `ended` says so (a driver
    /// that ended by itself).
    pub fn wait_quiet_unless(&self, within: Duration, mut ended: impl FnMut() -> bool) -> Option<Stats> {
        let deadline = Instant::now() + within;
        let (mut last, mut quiet) = (u64::MAX, 0);
        loop {
            std::thread::sleep(Duration::from_millis(100));
            if ended() {
                return None;
            }
            let s = self.stats();
            let total: u64 = s.ports.iter().map(|p| p.sink_packets).sum();
            let generated: u64 = s.ports.iter().map(|p| p.generated).sum();
            let done = s.ports.iter().all(|p| !p.generator_active);
            // Every frame arrived or was dropped by a device, with nothing left in nicsim: no
            // frame can come any more (one the driver holds would be missing from the sum).
            let dropped: u64 = s.ports.iter().map(device_drops).sum();
            let held: u64 = s.ports.iter().map(|p| in_flight(p, p)).sum();
            let accounted = total + dropped == generated && held == 0;
            // Accounted for, or nothing moved for a second after the generators ended.
            quiet = if done && (accounted || total == last) { quiet + 1 } else { 0 };
            if quiet >= if accounted { 2 } else { 10 } {
                return Some(s);
            }
            assert!(
                Instant::now() < deadline,
                "traffic did not end within {} s: {total} of {generated} delivered",
                within.as_secs()
            );
            last = total;
        }
    }
    /// Starts both generators and waits until every frame has reached a sink or the sinks
    /// stop moving.
    pub fn send_both_ways(&self, spec: TrafficSpec) -> Stats {
        self.start_both_ways(&spec);
        self.wait_quiet()
    }
}

/// SIGTERM, then the exit status and output (killed after 30 s).
pub fn terminate(child: Reaped) -> Output {
    child.terminate(Duration::from_secs(30)).expect("stopping the driver")
}

/// What a driver's summary line says: forwarded per direction, and what it discarded itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub forwarded: [u64; 2],
    pub malformed: u64,
    pub dropped: u64,
    /// Times the driver set its queues up again because a ring was stuck (the Rust driver
    /// says; others do not restart).
    pub restarts: Option<u64>,
}

/// Reads the summary line every driver prints at exit:
/// `… fwd <mode>: A -> B n packets, B -> A m packets, T s, X Mpps, k malformed, d dropped`.
pub fn summary(driver: Driver, mode: &str, stdout: &str) -> Summary {
    let line = stdout.lines().last().unwrap_or("");
    parse_summary(mode, line).unwrap_or_else(|| panic!("{}: not a summary line: `{line}`", driver.name))
}

fn parse_summary(mode: &str, line: &str) -> Option<Summary> {
    let rest = line.split_once(&format!(" fwd {mode}: {A} -> {B} "))?.1;
    let words: Vec<&str> = rest.split([' ', ',']).filter(|w| !w.is_empty()).collect();
    let number_before = |word: &str| -> Option<u64> {
        let at = words.iter().position(|w| *w == word)?;
        words.get(at.checked_sub(1)?)?.parse().ok()
    };
    let ab = words.first()?.parse().ok()?;
    let ba = words.get(words.iter().position(|w| *w == "->")? + 2)?.parse().ok()?;
    Some(Summary {
        forwarded: [ab, ba],
        malformed: number_before("malformed")?,
        dropped: number_before("dropped")?,
        restarts: number_before("ring"),
    })
}

/// Frames port `p`'s device dropped before they reached the driver, for any reason.
pub fn device_drops(p: &PortStats) -> u64 {
    let (c, d) = (&p.device, &p.drops);
    c.qprdc.iter().sum::<u64>()
        + c.mpc
        + c.ruc
        + c.roc
        + c.crcerrs
        + d.rx_disabled
        + d.filtered
        + d.queue_disabled
        + d.dma_fault
}

/// Frames of the direction `from` → `to` that nicsim holds: in `from`'s packet buffer and RX
/// ring (not yet taken by the driver), and in `to`'s TX rings (not yet sent).
pub fn in_flight(from: &PortStats, to: &PortStats) -> u64 {
    from.in_flight.packet_buffer + from.in_flight.rx_ring + to.in_flight.tx_ring
}

/// Every frame accounted for, exactly: what the generators made equals what the sinks
/// received from the other port, plus what the devices dropped, what the driver discarded
/// (its summary) and what nicsim still holds. Per direction, each sink saw only the other
/// port's stream, each frame at most once: the frames it did not receive are its sequence gaps
/// and those after the last one it saw. The driver's forwarded counts are what the sinks
/// received.
pub fn assert_conservation(s: &Stats, driver: &Summary, in_order: bool) {
    let (mut generated, mut accounted) = (0, 0);
    for p in &s.ports {
        let other = 1 - p.port;
        assert_eq!(p.streams.len(), 1, "port {} sink saw only port {other}'s stream: {:?}", p.port, p.streams);
        let (stream, st) = &p.streams[0];
        assert_eq!(*stream, other);
        assert_eq!(p.sink_foreign, 0, "port {}: frames that were not generated", p.port);
        assert_eq!(p.dma_faults, 0, "{:?}", p.faults);
        if in_order {
            assert_eq!(st.reordered, 0);
        }
        let from = &s.ports[other];
        assert_eq!(
            st.lost + (from.generated - st.next_seq),
            from.generated - st.received,
            "port {other} -> port {}: every frame not received is a gap or after the last one received: {st:?}",
            p.port
        );
        assert_eq!(driver.forwarded[other], st.received, "the driver's count for port {other} -> port {}", p.port);
        generated += from.generated;
        accounted += st.received + device_drops(from) + in_flight(from, p);
    }
    accounted += driver.malformed + driver.dropped;
    assert_eq!(
        generated,
        accounted,
        "generated = delivered + dropped by the devices + discarded by the driver ({driver:?}) + in flight; \
         port 0: {:?} {:?} {:?}, port 1: {:?} {:?} {:?}",
        s.ports[0].device,
        s.ports[0].drops,
        s.ports[0].in_flight,
        s.ports[1].device,
        s.ports[1].drops,
        s.ports[1].in_flight
    );
}

/// [`assert_conservation`] with nothing lost anywhere: `n` frames each way all delivered.
pub fn assert_lossless(s: &Stats, driver: &Summary, n: u64, in_order: bool) {
    assert_conservation(s, driver, in_order);
    for p in &s.ports {
        let from = &s.ports[1 - p.port];
        assert_eq!(
            (p.streams[0].1.received, device_drops(from), in_flight(from, p)),
            (n, 0, 0),
            "port {} -> port {}: every frame delivered, none dropped, none left; {:?} {:?}",
            from.port,
            p.port,
            from.device,
            from.drops
        );
    }
    assert_eq!((driver.malformed, driver.dropped), (0, 0), "the driver discarded nothing");
    assert_eq!(driver.restarts.unwrap_or(0), 0, "an honest device leaves no ring stuck");
}

pub fn assert_no_lint(sim: &Sim) {
    let lint = sim.lint().unwrap();
    assert!(lint.is_empty(), "nicsim's lint on the driver: {lint:?}");
}

/// After a driver exited: waits until nicsim has let go of its memory (it notices within a
/// second) and checks that no queue was still enabled on it. A driver that exits with a queue
/// enabled leaves the device DMAing into memory that is free for anyone.
pub fn assert_queues_stopped_before_memory_went(sim: &Sim, driver: Driver) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let s = loop {
        let s = sim.stats();
        if s.driver_memory_bytes == 0 {
            break s;
        }
        assert!(Instant::now() < deadline, "nicsim still reaches {} bytes of the exited driver", s.driver_memory_bytes);
        std::thread::sleep(Duration::from_millis(100));
    };
    let released: Vec<_> =
        s.ports.iter().flat_map(|p| &p.faults).filter(|f| f.access == nicsim::port::Access::ReleasedRing).collect();
    assert!(released.is_empty(), "{}: queues left enabled on memory it released: {released:?}", driver.name);
}

/// Stops `child` with SIGTERM and checks it exits 0 with a summary line; returns the summary.
pub fn stop_driver(driver: Driver, mode: &str, child: Reaped) -> Summary {
    let out = terminate(child);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} exits 0 on SIGTERM: {:?} {stdout} {}",
        driver.name,
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    summary(driver, mode, &stdout)
}

/// Forwards `n` packets each way at `rate` with `driver mode args --flow-control`; checks that
/// every frame arrived once (in order if asked), exact conservation, the paper's MAC rewrite on
/// the first 100 frames, the summary line and a clean exit on SIGTERM.
pub fn forward(driver: Driver, mode: &str, args: &[&str], n: u64, rate: f64, in_order: bool) {
    let sim = Sim::start(&format!("{}-{mode}", driver.name));
    let mut child = sim.fwd(driver, mode, &[&[A, B, "--flow-control"], args].concat());
    sim.wait_driver_ready(&mut child);
    let pcap = sim.scratch_file("port1.pcap");
    sim.capture(1, &pcap, Captured::Tx, Some(100)).unwrap();
    let s = sim.send_both_ways(TrafficSpec { rate_pps: Some(rate), count: Some(n), ..TrafficSpec::default() });
    let summary = stop_driver(driver, mode, child);
    assert_lossless(&s, &summary, n, in_order);
    assert_no_lint(&sim);
    assert_queues_stopped_before_memory_went(&sim, driver);
    // The paper's rewrite: destination 00:00:00:00:00:01, source 00:00:00:00:00:00.
    sim.end_capture(1).unwrap();
    let frames = read_pcap(&pcap).unwrap();
    assert_eq!(frames.len(), 100);
    for f in &frames {
        assert_eq!(&f[0..12], &[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(parse_payload(f).map(|p| p.0), Some(0), "the rest of the frame is unchanged");
    }
}

/// Every length from 60 to 1514 bytes through `driver mode`, with `rewrite` (paper or none).
pub fn every_frame_length(driver: Driver, mode: &str, rewrite: &str) {
    let sim = Sim::start(&format!("{}-len-{mode}-{rewrite}", driver.name));
    let mut child = sim.fwd(driver, mode, &[A, B, "--mac-rewrite", rewrite, "--flow-control"]);
    sim.wait_driver_ready(&mut child);
    let pcap = sim.scratch_file("port1.pcap");
    sim.capture(1, &pcap, Captured::Tx, None).unwrap();
    let n = 1514 - 60 + 1;
    let spec = TrafficSpec {
        rate_pps: Some(RATE_PPS / 4.0),
        size: 60,
        size_max: Some(1514),
        count: Some(n),
        ..TrafficSpec::default()
    };
    let s = sim.send_both_ways(spec);
    sim.end_capture(1).unwrap();
    let summary = stop_driver(driver, mode, child);
    assert_lossless(&s, &summary, n, true);
    let frames = read_pcap(&pcap).unwrap();
    let lengths: Vec<usize> = frames.iter().map(|f| f.len()).collect();
    assert_eq!(lengths, (60..=1514).collect::<Vec<_>>(), "{} {mode}: every length, in order", driver.name);
    for f in &frames {
        let expected_macs: [u8; 12] = if rewrite == "paper" {
            [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]
        } else {
            // Unchanged: generated for port 0's own address, from nicsim's generator.
            let mut m = [0u8; 12];
            m[..6].copy_from_slice(&nicsim::port::default_mac(0));
            m[6..].copy_from_slice(&f[6..12]);
            m
        };
        assert_eq!(&f[0..12], &expected_macs, "{} {mode} {rewrite}", driver.name);
        let sum: u32 = f[14..34].chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        assert_eq!((sum & 0xFFFF) + (sum >> 16), 0xFFFF, "IP header intact");
    }
    assert_no_lint(&sim);
}

/// A driver frozen with SIGSTOP while traffic runs, until nicsim shows the consequence, then
/// continued. Without flow control the device drops what finds no descriptor, and the sinks'
/// sequence gaps are exactly those drops; with it, the device pauses the generators and
/// nothing is lost. Either way every frame is accounted for, with no tolerance.
pub fn stopped_driver(driver: Driver, mode: &str, flow_control: bool) {
    let sim = Sim::start(&format!("{}-stop-{mode}-{flow_control}", driver.name));
    let args: &[&str] = if flow_control { &[A, B, "--flow-control"] } else { &[A, B] };
    let mut child = sim.fwd(driver, mode, args);
    sim.wait_driver_ready(&mut child);
    let n = 200_000;
    sim.start_both_ways(&TrafficSpec { rate_pps: Some(500_000.0), count: Some(n), ..TrafficSpec::default() });
    std::thread::sleep(Duration::from_millis(50));
    child.signal(Signal::Stop).expect("stopping the driver");
    // Frozen until nicsim has dropped frames (or, with flow control, paused both generators):
    // the effect is waited for, not assumed from a duration.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = sim.stats();
        let seen = if flow_control {
            s.ports.iter().all(|p| p.flow_control.partner_paused || !p.generator_active)
                && s.ports.iter().any(|p| p.flow_control.xoff_sent > 0)
        } else {
            s.ports.iter().all(|p| device_drops(p) > 0)
        };
        if seen {
            break;
        }
        assert!(Instant::now() < deadline, "nicsim never saw the stopped driver: {:?}", s.ports[0].device);
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    child.signal(Signal::Continue).expect("continuing the driver");
    let s = sim.wait_quiet();
    let summary = stop_driver(driver, mode, child);
    if flow_control {
        assert_lossless(&s, &summary, n, true);
        assert!(s.ports.iter().all(|p| p.flow_control.xoff_sent > 0), "both ports sent XOFF");
    } else {
        assert_conservation(&s, &summary, true);
        // The frames the sinks missed (gaps, and any after the last one they saw) are exactly
        // the drops the devices counted, plus what the driver discarded itself: a flexible
        // driver that wakes up to a full RX ring fills its TX ring faster than the line
        // drains it, and drops the rest (its summary counts them, for both directions).
        let (mut missed, mut counted_all) = (0, summary.malformed + summary.dropped);
        for p in &s.ports {
            let (from, st) = (&s.ports[1 - p.port], &p.streams[0].1);
            let counted = from.device.qprdc.iter().sum::<u64>() + from.device.mpc;
            assert!(counted > 0, "port {}: the stop made the device drop frames", from.port);
            assert_eq!(device_drops(from), counted, "every drop is a QPRDC or MPC drop");
            let missed_here = st.lost + (from.generated - st.next_seq);
            if summary.malformed + summary.dropped == 0 {
                assert_eq!(
                    missed_here,
                    counted + in_flight(from, p),
                    "the frames port {} missed are exactly the drops port {} counted",
                    p.port,
                    from.port
                );
            }
            missed += missed_here;
            counted_all += counted + in_flight(from, p);
        }
        assert_eq!(missed, counted_all, "the frames the sinks missed are the drops counted ({summary:?})");
    }
    assert_no_lint(&sim);
}

/// A driver forwarding at full rate when its output port is surprise-removed (its registers
/// read all-ones, as a pulled card's do) notices within its presence period, prints its
/// summary and exits non-zero with one line naming the port.
pub fn removed_device(driver: Driver, mode: &str) {
    let sim = Sim::start(&format!("{}-removed-{mode}", driver.name));
    let mut child = sim.fwd(driver, mode, &[A, B]);
    sim.wait_driver_ready(&mut child);
    sim.start_both_ways(&TrafficSpec::default());
    std::thread::sleep(Duration::from_millis(100));
    sim.remove(1).unwrap();
    assert!(sim.stats().ports[1].removed);
    let out = child.wait_for_exit(Duration::from_secs(20)).expect("waiting for the driver");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.code().is_some_and(|c| c != 0),
        "{} {mode}: exits non-zero by itself (not killed after 20 s): {:?} {stdout} {stderr}",
        driver.name,
        out.status
    );
    let err = stderr.trim();
    assert_eq!(err.lines().count(), 1, "{} {mode}: one line: {err}", driver.name);
    assert!(err.contains(B) && err.contains("gone") && err.contains("all-ones"), "{} {mode}: {err}", driver.name);
    let forwarded = summary(driver, mode, &stdout).forwarded;
    assert!(forwarded.iter().all(|&n| n > 0), "{} {mode}: forwarded before the removal: {forwarded:?}", driver.name);
}

/// A second driver started on functions that `driver` runs, itself or the Rust driver, is
/// refused with one line naming the owner's PID before it touches the device; the first one
/// forwards on undisturbed and nicsim counts no further reset.
pub fn device_in_use(driver: Driver) {
    let sim = Sim::start(&format!("{}-in-use", driver.name));
    // Lossless, so that the count below holds on a loaded host too.
    let mut first = sim.fwd(driver, "restricted", &[A, B, "--flow-control"]);
    sim.wait_driver_ready(&mut first);
    let resets: Vec<u64> = sim.stats().ports.iter().map(|p| p.resets).collect();
    for second in [driver, RUST] {
        for args in [[A, B], [B, A]] {
            let out = sim.fwd(second, "const", &args).wait_for_exit(Duration::from_secs(20)).expect("waiting");
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            assert!(out.status.code().is_some_and(|c| c != 0), "{} after {}: refused: {err}", second.name, driver.name);
            assert_eq!(err.lines().count(), 1, "one line: {err}");
            let owner = format!("{} is in use by process {} (", args[0], first.id());
            assert!(err.contains(&owner) && err.contains("stop that driver first"), "{err}");
        }
    }
    let s = sim.stats();
    assert_eq!(s.ports.iter().map(|p| p.resets).collect::<Vec<_>>(), resets, "nothing reset the first driver's device");
    let n = 10_000;
    let s = sim.send_both_ways(TrafficSpec { rate_pps: Some(RATE_PPS), count: Some(n), ..TrafficSpec::default() });
    let summary = stop_driver(driver, "restricted", first);
    assert_lossless(&s, &summary, n, true);
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
    let empty = ScratchDir::new(SCRATCH_PREFIX, &format!("empty-{}", driver.name)).unwrap();
    let empty = empty.path().to_str().unwrap().to_string();
    let e = fwd_error(driver, "restricted", &[A, B, "--sysfs", &empty]);
    assert!(e.contains("not found") && e.contains("--sysfs"), "{e}");
    let e = fwd_error(driver, "restricted", &["nonsense", B, "--sysfs", &empty]);
    assert!(e.contains("not a PCI address"), "{e}");
    // Wrong device and a device bound to a kernel driver, on nicsim's functions.
    let sim = Sim::start(&format!("{}-errors", driver.name));
    let dev = sim.root.join("devices").join(A);
    std::fs::write(dev.join("device"), "0x1234\n").unwrap();
    let e = fwd_error(driver, "restricted", &[A, B, "--sysfs", &sim.devices()]);
    assert!(e.contains("8086:1234") && e.contains("not an Intel 82599ES"), "{e}");
    drop(sim);
    let sim = Sim::start_with(&format!("{}-bound", driver.name), true);
    let e = fwd_error(driver, "restricted", &[A, B, "--sysfs", &sim.devices()]);
    assert!(e.contains("bound to the kernel driver `ixgbe`") && e.contains("unbind"), "{e}");
}

/// `ip netns exec NS cmd…` as a command.
pub use bench::xdp::in_ns;

/// `ping -s size` from namespace `ns` to `to`: three replies, 200 ms apart (root may ask for
/// less than ping's default second), with up to a minute for them (ARP first), so that only a
/// path that does not work fails.
pub fn ping_from(ns: &str, to: &str, size: usize) {
    let size = size.to_string();
    let out = in_ns(ns, &["ping", "-c", "3", "-i", "0.2", "-s", &size, "-w", "60", to])
        .output()
        .expect("running ping (iputils-ping)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains(" 0% packet loss"), "ping -s {size} from {ns}: {text}");
}

/// An iperf3 transfer from namespace `client` to a server at `address` in namespace `server`
/// (`udp`: 100 Mb/s of UDP): what the client says.
pub fn iperf_between(client: &str, server: &str, address: &str, udp: bool) -> String {
    let mut listening = Reaped::spawn(
        in_ns(server, &["iperf3", "-s", "-1", "-B", address]).stdout(Stdio::null()).stderr(Stdio::null()),
    )
    .expect("running iperf3");
    let mut args = vec!["iperf3", "-c", address, "-t", "1", "--connect-timeout", "2000"];
    if udp {
        args.extend(["-u", "-b", "100M"]);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = in_ns(client, &args).output().expect("running iperf3");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if out.status.success() {
            let _ = listening.try_wait();
            return text;
        }
        // The server may not listen yet.
        assert!(Instant::now() < deadline, "iperf3 {args:?}: {text} {}", String::from_utf8_lossy(&out.stderr));
        std::thread::sleep(Duration::from_millis(200));
    }
}
