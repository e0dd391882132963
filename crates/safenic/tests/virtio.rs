//! `safenic fwd flexible` between two virtio-net ports of nicsim, and between an 82599 and a
//! virtio port either way round (docs/virtio.md): lossless and exactly accounted both ways, in
//! order, with and without the paper's MAC rewrite, through the modern and the legacy
//! interface; the C baseline's virtio driver likewise (and under the sanitizers); and the models
//! that are the 82599's refused in one line.
//! Needs root, hugepages and /dev/fuse (`make test` provides them); tests run one at a time.

use crate::common;

use common::{Driver, Sim, A, B, RATE_PPS, RUST};
use nicsim::pciconfig::Kind;
use nicsim::wire::TrafficSpec;
use std::time::{Duration, Instant};

const VIRTIO: &[Kind] = &[Kind::VirtioNet];
/// The C baseline's virtio-net driver (legacy interface), optimised and under the sanitizers.
const C_CLANG: Driver = Driver { name: "c-clang", command: "drivers/c/build/{isa}/clang/safenic-c-{mode} fwd" };
const C_ASAN: Driver = Driver { name: "c-asan", command: "drivers/c/build/asan/safenic-c-{mode} fwd" };

fn forward(name: &str, devices: &[Kind], args: &[&str]) {
    forward_with(RUST, name, devices, args);
}

fn forward_with(driver: Driver, name: &str, devices: &[Kind], args: &[&str]) {
    let sim = Sim::start_devices(name, devices);
    let mut child = sim.fwd(driver, "flexible", &[&[A, B], args].concat());
    sim.wait_driver_ready(&mut child);
    let n = 200_000;
    let s = sim.send_both_ways(TrafficSpec { rate_pps: Some(RATE_PPS), count: Some(n), ..TrafficSpec::default() });
    let summary = common::stop_driver(driver, "flexible", child);
    common::assert_lossless(&s, &summary, n, true);
    common::assert_no_lint(&sim);
}

#[test]
fn flexible_forwards_every_frame_once_between_virtio_ports() {
    forward("virtio-fwd", VIRTIO, &[]);
}

#[test]
fn flexible_forwards_every_frame_once_between_virtio_ports_through_the_legacy_interface() {
    forward("virtio-fwd-legacy", VIRTIO, &["--virtio-interface", "legacy"]);
}

#[test]
fn flexible_forwards_every_frame_once_between_an_82599_and_a_virtio_port() {
    forward("ixgbe-virtio-fwd", &[Kind::Ixgbe, Kind::VirtioNet], &[]);
}

#[test]
fn flexible_forwards_every_frame_once_between_a_virtio_and_an_82599_port() {
    forward("virtio-ixgbe-fwd", &[Kind::VirtioNet, Kind::Ixgbe], &[]);
}

#[test]
fn flexible_forwards_unchanged_frames_between_virtio_ports() {
    forward("virtio-fwd-none", VIRTIO, &["--mac-rewrite", "none"]);
}

#[test]
fn the_c_baseline_forwards_every_frame_once_between_virtio_ports() {
    forward_with(C_CLANG, "c-virtio-fwd", VIRTIO, &[]);
    forward_with(C_CLANG, "c-virtio-fwd-none", VIRTIO, &["--mac-rewrite", "none"]);
}

#[test]
fn the_c_baseline_under_the_sanitizers_forwards_between_virtio_ports() {
    forward_with(C_ASAN, "c-asan-virtio-fwd", VIRTIO, &[]);
}

#[test]
fn the_c_baseline_refuses_an_82599_beside_a_virtio_port_in_one_line() {
    let sim = Sim::start_devices("c-virtio-mixed", &[Kind::Ixgbe, Kind::VirtioNet]);
    let err = common::fwd_error(C_CLANG, "flexible", &[A, B, "--sysfs", &sim.devices()]);
    assert!(err.contains("forwards between two of a kind"), "{err}");
}

/// `driver` forwards while both virtio devices return chains they never finished (used
/// elements with heads the driver may not have given, and lengths up to any 32-bit value): it
/// keeps running, and the device reaches nothing outside the driver's memory. Under the
/// sanitizers (c-asan), a read or write outside an object would abort the C driver instead.
/// Such completions make any driver offer more chains than the queue holds, and the device
/// then stops the queue; with `watches_status` (the Rust driver, modern interface) the driver
/// must not stay silently stuck: either every frame of a second round arrives, or it has ended
/// by itself with its summary and one line naming DEVICE_NEEDS_RESET. Without it, the driver
/// must exit 0 with its summary on SIGTERM.
fn survives_a_hostile_virtio_device(driver: Driver, name: &str, watches_status: bool) {
    use nicsim::chaos::Fault;
    const WRITES: u64 = 5_000;
    let sim = Sim::start_devices(name, VIRTIO);
    let mut child = sim.fwd(driver, "flexible", &[A, B]);
    sim.wait_driver_ready(&mut child);
    sim.start_both_ways(&TrafficSpec { rate_pps: Some(RATE_PPS), count: Some(2_000_000), ..TrafficSpec::default() });
    for port in 0..2 {
        sim.fault(port, Fault::WriteBack { rate: 50_000.0, count: WRITES, seed: 7 + port as u64 }).unwrap();
    }
    // The writes land while a queue of the port is in use; once the driver's answers to them
    // have made the device stop both, the rest has nowhere to go. How many land first depends
    // on how the two processes were scheduled, so either end is the end.
    let pending = |p: &nicsim::control::PortStats| {
        p.injected.used_write_backs < WRITES && p.rx_queues_enabled + p.tx_queues_enabled > 0
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while sim.stats().ports.iter().any(pending) {
        let ended = child.try_wait().unwrap().is_some();
        if ended && watches_status {
            break;
        }
        assert!(!ended, "{} died under a hostile device: {}", driver.name, child.output());
        assert!(Instant::now() < deadline, "the hostile writes did not all land: {:?}", sim.stats().ports);
        std::thread::sleep(Duration::from_millis(10));
    }
    let summary = if watches_status && ends_or_forwards_a_second_round(&sim, &mut child, driver) {
        let out = child.wait_for_exit(Duration::from_secs(10)).expect("the ended driver's output");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(
            !out.status.success() && stderr.lines().count() == 1 && stderr.contains("DEVICE_NEEDS_RESET"),
            "{}: a driver that stops ends non-zero with one line naming DEVICE_NEEDS_RESET: {:?} {stderr}",
            driver.name,
            out.status
        );
        common::summary(driver, "flexible", &stdout)
    } else {
        common::stop_driver(driver, "flexible", child)
    };
    let stats = sim.stats();
    assert!(
        stats.ports.iter().all(|p| p.dma_faults == 0),
        "{:?}",
        stats.ports.iter().map(|p| &p.faults).collect::<Vec<_>>()
    );
    assert!(summary.malformed > 0, "{}: some hostile elements were refused and counted: {summary:?}", driver.name);
}

/// Whether the driver ended by itself (true), or (false) forwarded every frame of a second
/// round once the first had gone quiet; a driver that does neither within 30 s each is stuck.
fn ends_or_forwards_a_second_round(sim: &Sim, child: &mut platform::Reaped, driver: Driver) -> bool {
    const AFTER: u64 = 100_000;
    let mut ended = || child.try_wait().unwrap().is_some();
    let Some(before) = sim.wait_quiet_unless(Duration::from_secs(30), &mut ended) else { return true };
    sim.start_both_ways(&TrafficSpec { rate_pps: Some(RATE_PPS), count: Some(AFTER), ..TrafficSpec::default() });
    let Some(after) = sim.wait_quiet_unless(Duration::from_secs(30), &mut ended) else { return true };
    for (p, b) in after.ports.iter().zip(&before.ports) {
        assert_eq!(
            p.sink_packets - b.sink_packets,
            AFTER,
            "{}: port {} forwards every frame of a second round",
            driver.name,
            p.port
        );
    }
    false
}

#[test]
fn a_hostile_virtio_device_cannot_break_the_rust_driver() {
    survives_a_hostile_virtio_device(RUST, "virtio-hostile-rust", true);
}

#[test]
fn a_hostile_virtio_device_cannot_break_the_c_baseline_under_the_sanitizers() {
    survives_a_hostile_virtio_device(C_ASAN, "virtio-hostile-c-asan", false);
}

#[test]
fn the_agent_models_and_several_queues_are_refused_on_virtio_ports() {
    let sim = Sim::start_devices("virtio-agents", VIRTIO);
    let devices = sim.devices();
    for (driver, mode) in [(RUST, "restricted"), (RUST, "const"), (C_CLANG, "restricted"), (C_CLANG, "const")] {
        let err = common::fwd_error(driver, mode, &[A, B, "--sysfs", &devices]);
        assert!(err.contains("use flexible on virtio ports"), "{} {mode}: {err}", driver.name);
    }
    for driver in [RUST, C_CLANG] {
        let err = common::fwd_error(driver, "flexible", &[A, B, "--sysfs", &devices, "--queues", "2"]);
        assert!(err.contains("are for 82599 ports"), "{}: {err}", driver.name);
    }
}
