//! DPDK's own drivers, unmodified, on nicsim: Debian's `dpdk-testpmd` forwards a known number
//! of frames each way in io mode, through the 82599 driver (`net_ixgbe`) and through the
//! virtio driver (`net_virtio`, modern interface, its mapped BAR served access by access),
//! and nicsim's sinks receive every one exactly once (docs/dpdk.md).
//!
//! The verdict does not depend on the host: flow control holds the generators whenever
//! testpmd falls behind (no frame is missed), and testpmd retries a full transmit ring instead
//! of dropping. DPDK's port start has deadlines of microseconds (10 µs for a reset): `nicsim
//! exec` serves the registers they are on access by access, so they are met on a shared core.

use crate::common;

use common::serve::{start_dpdk, Nicsim, A, B, BIN};
use nicsim::wire::TrafficSpec;
use platform::Reaped;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FRAMES: u64 = 200_000;
/// Forwarding in io mode with retries, and 802.3x flow control on both ports (high and low
/// water in KiB of the 512 KiB packet buffer, the longest pause, XON on).
const COMMANDS: &str = "set fwd io retry
set burst tx delay 10 retry 1000000
set flow_ctrl rx on tx on 480 400 65535 1 mac_ctrl_frame_fwd off autoneg off 0
set flow_ctrl rx on tx on 480 400 65535 1 mac_ctrl_frame_fwd off autoneg off 1
";

fn testpmd() -> &'static str {
    let found =
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("dpdk-testpmd").is_file()));
    assert!(found, "dpdk-testpmd is not installed: run scripts/setup (it installs Debian's dpdk-dev)");
    "dpdk-testpmd"
}

/// testpmd's "Accumulated forward statistics" figure after `label` (e.g. "RX-packets:").
fn accumulated(log: &str, label: &str) -> Option<u64> {
    let tail = &log[log.find("Accumulated forward statistics")?..];
    let after = &tail[tail.find(label)? + label.len()..];
    after.split_whitespace().next()?.parse().ok()
}

use nicsim::exec::dpdk_missed_a_deadline as missed_reset_poll;

/// testpmd, forwarding, and the path of its log; `Err` with the log when DPDK gave up on a
/// port after its reset poll ([`missed_reset_poll`]).
fn start_testpmd(sim: &Nicsim, script: &str, exec: &[&str]) -> Result<(Reaped, std::path::PathBuf), String> {
    let commands = sim.scratch_file("testpmd.cmd");
    std::fs::write(&commands, script).unwrap();
    let log_path = sim.scratch_file("testpmd.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let root = sim.root.to_str().unwrap().to_string();
    let mut run = Reaped::spawn(
        Command::new(BIN)
            // Line-buffered, so that "Press enter to exit" (forwarding has started) shows at once.
            .args(["--root", &root, "exec"])
            .args(&exec[..1])
            .args(["--", "stdbuf", "-oL", testpmd(), "-l", "0-1", "-n", "1"])
            .args(&exec[1..])
            .arg("--in-memory")
            // Names the virtio interface DPDK chose ("modern virtio pci detected").
            .arg("--log-level=pmd.net.virtio.init:debug")
            .args(["-a", A, "-a", B, "--", "--auto-start", &format!("--cmdline-file={}", commands.display())])
            .stdin(Stdio::piped())
            .stdout(log.try_clone().unwrap())
            .stderr(log),
    )
    .expect("starting nicsim exec");
    let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !read_log().contains("Press enter to exit") {
        if run.try_wait().unwrap().is_some() && missed_reset_poll(&read_log()) {
            return Err(read_log());
        }
        assert!(run.try_wait().unwrap().is_none(), "testpmd exited before forwarding:\n{}", read_log());
        assert!(Instant::now() < deadline, "testpmd did not start forwarding in 120 s:\n{}", read_log());
        std::thread::sleep(Duration::from_millis(100));
    }
    if missed_reset_poll(&read_log()) {
        run.take_stdin().unwrap().write_all(b"\n").unwrap();
        let _ = run.wait_for_exit(Duration::from_secs(60));
        return Err(read_log());
    }
    Ok((run, log_path))
}

const UIO: &[&str] = &["--uio"];

#[test]
fn testpmd_forwards_every_frame_exactly_once() {
    let sim = Nicsim::start("testpmd", &[]);
    forward_every_frame_exactly_once(&sim, COMMANDS, UIO);
}

/// On functions bound to vfio-pci, DMA addresses being virtual addresses (`--iova-mode=va`,
/// DPDK's default without root) and physical ones (`pa`): each is an IOVA of DPDK's container.
#[test]
fn testpmd_forwards_every_frame_exactly_once_through_vfio_in_both_iova_modes() {
    for mode in ["va", "pa"] {
        let sim = Nicsim::start(&format!("testpmd-vfio-{mode}"), &[]);
        let eal = format!("--iova-mode={mode}");
        let log = forward_every_frame_exactly_once(&sim, COMMANDS, &["--vfio", &eal]);
        let selected = format!("Selected IOVA mode '{}'", mode.to_uppercase());
        for line in ["VFIO support initialized", "Using IOMMU type 1", selected.as_str()] {
            assert!(log.contains(line), "{line}:\n{log}");
        }
        let gone = sim.stats();
        assert!(gone.ports.iter().all(|p| p.iommu.is_none() && p.iommu_faults == 0), "{:?}", gone.ports[0].iommu);
    }
}

/// virtio-net has no 802.3x settings: nicsim holds the generator while a receive queue is full.
#[test]
fn testpmd_forwards_every_frame_exactly_once_on_virtio_net() {
    let sim = Nicsim::start("testpmd-virtio", &["--device", "virtio-net"]);
    // An address added makes net_virtio send the whole MAC table over the control queue
    // (VIRTIO_NET_CTRL_MAC_TABLE_SET): it must be taken, and lint stays silent.
    let script = "mac_addr add 0 02:00:00:00:00:99\nmac_addr add 1 02:00:00:00:00:98\n\
                  set fwd io retry\nset burst tx delay 10 retry 1000000\n";
    let log = forward_every_frame_exactly_once(&sim, script, UIO);
    assert!(log.contains("modern virtio pci detected"), "DPDK uses the modern interface:\n{log}");
    assert!(!log.contains("mac_addr_cmd error"), "the MAC table was refused:\n{log}");
}

/// net_virtio on virtio-net functions bound to vfio-pci: BAR4 mapped through the device
/// descriptor (served access by access), the rings IOVAs of DPDK's container.
#[test]
fn testpmd_forwards_every_frame_exactly_once_on_virtio_net_through_vfio() {
    let sim = Nicsim::start("testpmd-virtio-vfio", &["--device", "virtio-net"]);
    let script = "set fwd io retry\nset burst tx delay 10 retry 1000000\n";
    let log = forward_every_frame_exactly_once(&sim, script, &["--vfio", "--iova-mode=va"]);
    for line in ["VFIO support initialized", "modern virtio pci detected"] {
        assert!(log.contains(line), "{line}:\n{log}");
    }
    assert!(sim.stats().ports.iter().all(|p| p.iommu.is_none() && p.iommu_faults == 0));
}

/// Runs testpmd with `script` on `sim`'s two ports, sends FRAMES each way, checks that each
/// arrived exactly once, and returns testpmd's log.
fn forward_every_frame_exactly_once(sim: &Nicsim, script: &str, exec: &[&str]) -> String {
    let (mut run, log_path) = start_dpdk("testpmd", || start_testpmd(sim, script, exec));
    let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    if let Err(e) = sim.wait_ports_up(Duration::from_secs(30), || Ok(())) {
        panic!("{e}; testpmd's log:\n{}", read_log());
    }
    for port in [0, 1] {
        sim.start_traffic(port, TrafficSpec { count: Some(FRAMES), ..TrafficSpec::default() }).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while sim.stats().ports.iter().any(|p| p.sink_packets < FRAMES) {
        assert!(Instant::now() < deadline, "frames missing after 120 s: {:?}", sim.stats().ports);
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats = sim.stats();
    let lint = sim.lint().unwrap();
    run.take_stdin().unwrap().write_all(b"\n").unwrap();
    let out = run.wait_for_exit(Duration::from_secs(60)).unwrap();
    let log = read_log();
    assert!(out.status.success(), "testpmd (through nicsim exec) failed: {:?}\n{log}", out.status);
    for p in &stats.ports {
        let lost: u64 = p.streams.iter().map(|(_, s)| s.lost).sum();
        let reordered: u64 = p.streams.iter().map(|(_, s)| s.reordered).sum();
        assert_eq!(
            (p.generated, p.sink_packets, lost, reordered, p.device.mpc),
            (FRAMES, FRAMES, 0, 0, 0),
            "port {}: every frame once, none missed",
            p.port
        );
    }
    // Read at start and at stop only, testpmd's figures are exact on nicsim too.
    assert_eq!(accumulated(&log, "RX-packets:"), Some(2 * FRAMES), "{log}");
    assert_eq!(accumulated(&log, "TX-packets:"), Some(2 * FRAMES), "{log}");
    assert_eq!(accumulated(&log, "RX-dropped:"), Some(0), "{log}");
    assert!(lint.is_empty(), "lint is silent for DPDK: {lint:?}");
    assert!(log.contains("nicsim exec:   port 1 (0000:5e:00.1): generated 200000 | sink 200000 (lost 0)"), "{log}");
    log
}
