//! `safenic fwd --filter`: the C packet filter in an isolation domain, called per burst. Frames
//! to the blocked UDP port (nicsim's generator sends to 20051) never reach the other port;
//! others all do. Every frame is accounted for: sinks, device drops, the driver's drops and
//! the filter's. In each backend the host has (MPK where it has PKU, and the process backend),
//! on 82599 ports, on virtio-net ports (lossless: every frame the filter passes arrives) and on
//! an 82599 beside a virtio port. Needs root, hugepages and /dev/fuse (`make test` provides them).

use crate::common;

use common::{device_drops, Sim, A, B, RUST};
use nicsim::control::Stats;
use nicsim::pciconfig::Kind;
use nicsim::wire::{TrafficSpec, NICSIM_UDP_PORT};

const FRAMES: u64 = 20_000;

/// The driver's two last lines: the filter's counts, then the summary.
struct Run {
    stats: Stats,
    forwarded: u64,
    dropped: u64,
    filtered: u64,
    violations: u64,
    backend: String,
}

const IXGBE: &[Kind] = &[Kind::Ixgbe];
const VIRTIO: &[Kind] = &[Kind::VirtioNet];
const MIXED: &[Kind] = &[Kind::Ixgbe, Kind::VirtioNet];

fn run(backend: &str, port: u16, devices: &[Kind]) -> Run {
    let kinds: String = format!("{devices:?}").chars().filter(char::is_ascii_alphanumeric).collect();
    let sim = Sim::start_devices(&format!("rust-filter-{backend}-{port}-{}", kinds.to_lowercase()), devices);
    let port = port.to_string();
    let mut child =
        sim.fwd_with_env(RUST, "flexible", &[A, B, "--filter", &port], &[("SAFENIC_ISOLATION_BACKEND", backend)]);
    sim.wait_driver_ready(&mut child);
    let stats =
        sim.send_both_ways(TrafficSpec { rate_pps: Some(200_000.0), count: Some(FRAMES), ..TrafficSpec::default() });
    let out = common::terminate(child);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{backend}: {stdout} {}", String::from_utf8_lossy(&out.stderr));
    let summary = common::summary(RUST, "flexible", &stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("safenic fwd filter ("))
        .unwrap_or_else(|| panic!("no filter line: {stdout}"));
    let words: Vec<&str> = line.split([' ', '(', ')', ',', ':']).filter(|w| !w.is_empty()).collect();
    let before = |word: &str| -> u64 {
        let at = words.iter().position(|w| *w == word).unwrap_or_else(|| panic!("`{word}` in `{line}`"));
        words[at - 1].parse().unwrap_or_else(|_| panic!("a number before `{word}` in `{line}`"))
    };
    Run {
        forwarded: summary.forwarded.iter().sum(),
        dropped: summary.dropped,
        filtered: before("filtered"),
        violations: before("bursts"),
        backend: words[3].to_string(),
        stats,
    }
}

fn backends() -> Vec<&'static str> {
    if isolation::pku::mpk_here() {
        vec!["mpk", "process"]
    } else {
        vec!["process"]
    }
}

/// Every frame goes to the blocked port: none reaches a sink, and each is filtered or counted
/// as dropped by the driver or the device.
fn blocked_port_never_reaches_the_other_side(devices: &[Kind]) {
    for backend in backends() {
        let r = run(backend, NICSIM_UDP_PORT, devices);
        assert_eq!(r.backend, backend);
        assert_eq!(r.violations, 0);
        let generated: u64 = r.stats.ports.iter().map(|p| p.generated).sum();
        let sunk: u64 = r.stats.ports.iter().map(|p| p.sink_packets).sum();
        let device: u64 = r.stats.ports.iter().map(device_drops).sum();
        assert_eq!((generated, sunk, r.forwarded), (2 * FRAMES, 0, 0), "{backend} {devices:?}");
        assert_eq!(r.filtered + r.dropped + device, generated, "{backend} {devices:?}: every frame accounted for");
        assert!(r.filtered > 0, "{backend} {devices:?}: the filter saw the frames");
    }
}

/// No frame goes to the blocked port: the filter drops none. With `lossless`, every frame
/// arrives; otherwise every frame is accounted for.
fn frames_to_other_ports_pass(devices: &[Kind], lossless: bool) {
    for backend in backends() {
        let r = run(backend, 9, devices);
        assert_eq!((r.backend.as_str(), r.violations, r.filtered), (backend, 0, 0), "{devices:?}");
        let generated: u64 = r.stats.ports.iter().map(|p| p.generated).sum();
        let sunk: u64 = r.stats.ports.iter().map(|p| p.sink_packets).sum();
        let device: u64 = r.stats.ports.iter().map(device_drops).sum();
        assert_eq!(sunk, r.forwarded, "{backend} {devices:?}: the sinks got what the driver forwarded");
        assert_eq!(sunk + r.dropped + device, generated, "{backend} {devices:?}: every frame accounted for");
        if lossless {
            assert_eq!(sunk, generated, "{backend} {devices:?}: every frame arrived");
        }
        assert!(sunk > 0);
    }
}

#[test]
fn the_blocked_port_never_reaches_the_other_side() {
    blocked_port_never_reaches_the_other_side(IXGBE);
}

#[test]
fn the_blocked_port_never_reaches_the_other_side_between_virtio_ports() {
    blocked_port_never_reaches_the_other_side(VIRTIO);
}

#[test]
fn the_blocked_port_never_reaches_the_other_side_between_an_82599_and_a_virtio_port() {
    blocked_port_never_reaches_the_other_side(MIXED);
}

#[test]
fn other_ports_pass() {
    frames_to_other_ports_pass(IXGBE, false);
}

#[test]
fn other_ports_pass_between_virtio_ports_losing_nothing() {
    frames_to_other_ports_pass(VIRTIO, true);
}

#[test]
fn other_ports_pass_between_an_82599_and_a_virtio_port_losing_nothing() {
    frames_to_other_ports_pass(MIXED, true);
}

#[test]
fn filter_outside_the_flexible_model_is_a_one_line_error() {
    let e = common::fwd_error(RUST, "const", &[A, B, "--filter", "53"]);
    assert!(e.contains("--filter applies to the flexible model"), "{e}");
}
