//! `safenic fwd` beyond the conformance suite (tests/conformance.rs, which runs every model
//! for every driver): several outputs per agent, the unmodified driver under `nicsim exec`,
//! and the errors of safenic's own options. Lossless (`--flow-control`) and exactly accounted,
//! as the conformance suite.
//! Needs root and hugepages (`make test` provides them); tests run one at a time.

mod common;

use common::{Sim, A, B, RATE_PPS, RUST};
use nicsim::wire::TrafficSpec;
use std::time::Duration;

#[test]
fn restricted_three_outputs_forwards_a_million_each_way() {
    // Packets go to three TX queues of the output port in turn; order holds per queue only.
    common::forward(RUST, "restricted", &["--outputs", "3"], 1_000_000, RATE_PPS, false);
}

#[test]
fn restricted_sixty_four_outputs_forwards_each_way() {
    // Every packet costs nicsim 64 TX descriptors per direction (63 of them null), so the rate
    // and count are lower to keep nicsim, not the driver, from being the limit.
    common::forward(RUST, "restricted", &["--outputs", "64"], 100_000, 20_000.0, false);
}

/// The unmodified driver under `nicsim exec`, with its default sysfs path and DMA memory
/// from hugetlbfs files, as it would run on a machine with the card.
#[test]
fn runs_unmodified_under_nicsim_exec() {
    let sim = Sim::start("exec");
    let mut child = sim.exec_fwd(RUST, "flexible", &[A, B, "--flow-control"]);
    sim.wait_driver_ready(&mut child);
    let n = 100_000;
    let s = sim.send_both_ways(TrafficSpec { rate_pps: Some(RATE_PPS), count: Some(n), ..TrafficSpec::default() });
    let summary = common::stop_driver(RUST, "flexible", child);
    common::assert_lossless(&s, &summary, n, true);
    common::assert_no_lint(&sim);
}

#[test]
fn output_count_errors_are_one_line() {
    let e = common::fwd_error(RUST, "const", &[A, B, "--outputs", "3"]);
    assert!(e.contains("restricted model only"), "{e}");
    let e = common::fwd_error(RUST, "restricted", &[A, B, "--outputs", "65"]);
    assert!(e.contains("1 to 64"), "{e}");
}

/// A driver started while both ports already receive at line rate finds nicsim reporting no
/// DMA fault on its own memory, start after start: the device looks for memory it does not
/// know yet at each use, however soon after its last look.
#[test]
fn a_hundred_starts_into_running_traffic_report_no_dma_fault() {
    let sim = Sim::start("starts");
    sim.start_both_ways(&TrafficSpec::default());
    let modes = ["restricted", "const", "flexible"];
    for start in 0..100 {
        let mode = modes[start % modes.len()];
        let child = sim.fwd(RUST, mode, &[A, B, "--seconds", "0.05"]);
        let out = child.wait_for_exit(Duration::from_secs(30)).expect("waiting for the driver");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "start {start} ({mode}): {:?} {stdout} {}", out.status, String::from_utf8_lossy(&out.stderr));
        let forwarded = common::summary(RUST, mode, &stdout).forwarded;
        let s = sim.stats();
        let faults: Vec<_> = s.ports.iter().flat_map(|p| &p.faults).collect();
        assert!(faults.is_empty(), "start {start} ({mode}): {faults:?}");
        assert!(forwarded.iter().all(|&n| n > 0), "start {start} ({mode}) forwarded both ways: {forwarded:?}");
    }
}
