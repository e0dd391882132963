//! Both l2fwds on nicsim through DPDK's own 82599 driver (`net_ixgbe`), unmodified:
//! the Rust one of `crates/dpdk` and DPDK's C one (docs/dpdk.md). Each forwards a known number
//! of frames each way, and nicsim's sinks receive every one exactly once, in order.
//!
//! The verdict does not depend on the host: frames are sent in rounds of [`ROUND`] per port,
//! the next round only once the sinks have the last, so no ring can ever hold more than a
//! round and neither l2fwd (which drops what a full ring does not take, as DPDK's does) nor
//! the device can drop one, however the cores are shared. DPDK's port start has deadlines of
//! microseconds (10 µs for a reset, docs/dpdk.md): `nicsim exec` serves the registers they are
//! on access by access, so they are met on a shared core.

use crate::common;

use common::serve::{start_dpdk, Nicsim, A, B, BIN};
use nicsim::wire::TrafficSpec;
use platform::Reaped;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROUND: u64 = 256;
const ROUNDS: u64 = 200;
/// Rounds through VFIO: the forwarding is the same as through uio, only set-up differs.
const VFIO_ROUNDS: u64 = 50;

/// The Rust l2fwd, an example of crates/dpdk, which `cargo test` builds beside this test.
fn rust_l2fwd() -> PathBuf {
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    let path = deps.parent().unwrap().join("examples/l2fwd");
    assert!(path.is_file(), "{} is missing: build the workspace's tests (cargo test builds it)", path.display());
    path
}

/// DPDK's C l2fwd, built by `scripts/build-dpdk-l2fwd` (make test runs it).
fn c_l2fwd() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/dpdk-l2fwd/l2fwd");
    assert!(path.is_file(), "{} is missing: run scripts/build-dpdk-l2fwd (make test does)", path.display());
    path
}

use nicsim::exec::dpdk_missed_a_deadline as missed_reset_poll;

/// How `nicsim exec` presents the functions, and what DPDK's EAL is told beside.
#[derive(Clone, Copy)]
struct Binding {
    exec: &'static str,
    eal: &'static [&'static str],
    rounds: u64,
}

const UIO: Binding = Binding { exec: "--uio", eal: &[], rounds: ROUNDS };
/// vfio-pci, and DMA addresses that are the physical addresses DPDK reads from pagemap.
const VFIO_PA: Binding = Binding { exec: "--vfio", eal: &["--iova-mode=pa"], rounds: VFIO_ROUNDS };

/// `binary` under `nicsim exec` with `binding`, forwarding between both ports, and its log's
/// path; `Err` with the log when DPDK gave up on a port after its reset poll.
fn start_l2fwd(sim: &Nicsim, binary: &Path, binding: Binding) -> Result<(Reaped, PathBuf), String> {
    let log_path = sim.scratch_file("l2fwd.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let root = sim.root.to_str().unwrap().to_string();
    let mut run = Reaped::spawn(
        Command::new(BIN)
            .args(["--root", &root, "exec", binding.exec, "--", "stdbuf", "-oL"])
            .arg(binary)
            .args(["-l", "0-1", "-n", "1", "--in-memory"])
            .args(binding.eal)
            .args(["-a", A, "-a", B, "--", "-p", "0x3", "-T", "0"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log),
    )
    .expect("starting nicsim exec");
    let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !read_log().contains("Port 1 Link up") {
        if run.try_wait().unwrap().is_some() {
            if missed_reset_poll(&read_log()) {
                return Err(read_log());
            }
            panic!("{} exited before forwarding:\n{}", binary.display(), read_log());
        }
        assert!(Instant::now() < deadline, "{} did not start forwarding in 120 s:\n{}", binary.display(), read_log());
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok((run, log_path))
}

/// Runs `binary` on nicsim's two ports and checks every frame arrived once, in order.
fn forwards_every_frame_once(binary: &Path, name: &str, binding: Binding) -> String {
    let sim = Nicsim::start(name, &[]);
    let (run, log_path) = start_dpdk(name, || start_l2fwd(&sim, binary, binding));
    let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    if let Err(e) = sim.wait_ports_up(Duration::from_secs(30), || Ok(())) {
        panic!("{e}; {name}'s log:\n{}", read_log());
    }
    let through_iommu = sim.stats().ports.iter().all(|p| p.iommu.is_some());
    assert_eq!(through_iommu, binding.exec == "--vfio", "{name}: IOMMU domains: {:?}", sim.stats().ports[0].iommu);
    let rounds = binding.rounds;
    for round in 1..=rounds {
        for port in [0, 1] {
            sim.start_traffic(port, TrafficSpec { count: Some(ROUND), ..TrafficSpec::default() }).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while sim.stats().ports.iter().any(|p| p.sink_packets < round * ROUND) {
            assert!(
                Instant::now() < deadline,
                "round {round}: frames missing after 60 s: {:?}\n{}",
                sim.stats().ports,
                read_log()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let stats = sim.stats();
    let lint = sim.lint().unwrap();
    platform::signals::send(run.id(), platform::signals::Signal::Terminate).unwrap();
    let out = run.wait_for_exit(Duration::from_secs(60)).unwrap();
    let log = read_log();
    assert!(out.status.success(), "{name} (through nicsim exec) failed: {:?}\n{log}", out.status);
    assert!(log.contains("Bye..."), "{name} ended cleanly:\n{log}");
    for p in &stats.ports {
        let lost: u64 = p.streams.iter().map(|(_, s)| s.lost).sum();
        let reordered: u64 = p.streams.iter().map(|(_, s)| s.reordered).sum();
        assert_eq!(
            (p.generated, p.sink_packets, lost, reordered, p.device.mpc),
            (rounds * ROUND, rounds * ROUND, 0, 0, 0),
            "{name}, port {}: every frame once, none missed",
            p.port
        );
    }
    assert!(lint.is_empty(), "lint is silent for DPDK's driver under {name}: {lint:?}");
    log
}

#[test]
fn the_rust_l2fwd_forwards_every_frame_once_through_dpdks_ixgbe_driver() {
    let log = forwards_every_frame_once(&rust_l2fwd(), "l2fwd-rust", UIO);
    let frames = 2 * ROUNDS * ROUND;
    let lines = [
        format!("Total packets sent: {frames:>18}"),
        format!("Total packets received: {frames:>14}"),
        format!("Total packets dropped: {:>15}", 0),
    ];
    for line in lines {
        assert!(log.contains(&line), "{line}:\n{log}");
    }
}

#[test]
fn dpdks_c_l2fwd_forwards_every_frame_once_on_nicsim_too() {
    forwards_every_frame_once(&c_l2fwd(), "l2fwd-c", UIO);
}

/// The same C l2fwd on functions bound to vfio-pci (no `--uio`): DPDK's VFIO code opens the
/// container and groups, maps its hugepages into the IOMMU, and the device reaches them only
/// through it; its container goes when it exits.
#[test]
fn dpdks_c_l2fwd_forwards_every_frame_once_through_vfio() {
    let log = forwards_every_frame_once(&c_l2fwd(), "l2fwd-c-vfio", VFIO_PA);
    for line in ["VFIO support initialized", "Using IOMMU type 1", "Selected IOVA mode 'PA'"] {
        assert!(log.contains(line), "{line}:\n{log}");
    }
}
