//! `safenic fwd --filter`: the C packet filter in an isolation domain, called per burst. Frames
//! to the blocked UDP port (nicsim's generator sends to 20051) never reach the other port;
//! others all do. Every frame is accounted for: sinks, device drops, the driver's drops and
//! the filter's. In each backend the host has (MPK where it has PKU, and the process backend).
//! Needs root and hugepages (`make test` provides them).

mod common;

use common::{device_drops, Sim, A, B, RUST};
use nicsim::control::Stats;
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

fn run(backend: &str, port: u16) -> Run {
    let sim = Sim::start(&format!("rust-filter-{backend}-{port}"));
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

#[test]
fn the_blocked_port_never_reaches_the_other_side() {
    for backend in backends() {
        let r = run(backend, NICSIM_UDP_PORT);
        assert_eq!(r.backend, backend);
        assert_eq!(r.violations, 0);
        let generated: u64 = r.stats.ports.iter().map(|p| p.generated).sum();
        let sunk: u64 = r.stats.ports.iter().map(|p| p.sink_packets).sum();
        let device: u64 = r.stats.ports.iter().map(device_drops).sum();
        assert_eq!((generated, sunk, r.forwarded), (2 * FRAMES, 0, 0), "{backend}");
        assert_eq!(r.filtered + r.dropped + device, generated, "{backend}: every frame accounted for");
        assert!(r.filtered > 0, "{backend}: the filter saw the frames");
    }
}

#[test]
fn other_ports_pass() {
    for backend in backends() {
        let r = run(backend, 9);
        assert_eq!((r.backend.as_str(), r.violations, r.filtered), (backend, 0, 0));
        let generated: u64 = r.stats.ports.iter().map(|p| p.generated).sum();
        let sunk: u64 = r.stats.ports.iter().map(|p| p.sink_packets).sum();
        let device: u64 = r.stats.ports.iter().map(device_drops).sum();
        assert_eq!(sunk, r.forwarded, "{backend}: the sinks got what the driver forwarded");
        assert_eq!(sunk + r.dropped + device, generated, "{backend}: every frame accounted for");
        assert!(sunk > 0);
    }
}

#[test]
fn filter_outside_the_flexible_model_is_a_one_line_error() {
    let e = common::fwd_error(RUST, "const", &[A, B, "--filter", "53"]);
    assert!(e.contains("--filter applies to the flexible model"), "{e}");
}
