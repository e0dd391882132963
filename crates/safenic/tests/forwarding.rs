//! `safenic fwd` beyond the conformance suite (tests/conformance.rs, which runs every model
//! for every driver): several outputs per agent, the unmodified driver under `nicsim exec`,
//! and the errors of safenic's own options. Lossless (`--flow-control`) and exactly accounted,
//! as the conformance suite.
//! Needs root and hugepages (`make test` provides them); tests run one at a time.

use crate::common;

use common::{Sim, A, B, RATE_PPS, RUST};
use nicsim::session::Session;
use nicsim::wire::TrafficSpec;
use platform::fs::ScratchDir;
use platform::signals::Signal;
use platform::Reaped;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

/// A driver that names its ports on its command line, on functions `platform` is told to take
/// as real (`SAFENIC_DEVICES_AS_REAL`, nicsim's): they are opened and the process confined
/// before its `main` runs (`platform::before_main`), so the driver forwards as `nobody`, with
/// a keeper, and no code of its own ever ran as root.
#[test]
fn a_driver_confined_before_main_forwards_as_nobody() {
    let sim = Sim::start("before-main");
    let devices = sim.devices();
    let env = [(platform::before_main::AS_REAL_ENV, devices.as_str())];
    let mut child = sim.fwd_with_env(RUST, "restricted", &[A, B, "--flow-control"], &env);
    sim.wait_driver_ready(&mut child);
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap_or_default().to_string();
    let unprivileged = platform::confine::UNPRIVILEGED;
    let n = 100_000;
    let s = sim.send_both_ways(TrafficSpec { rate_pps: Some(RATE_PPS), count: Some(n), ..TrafficSpec::default() });
    let summary = common::stop_driver(RUST, "restricted", child);
    assert_eq!(uid, format!("Uid:\t{unprivileged}\t{unprivileged}\t{unprivileged}\t{unprivileged}"));
    common::assert_lossless(&s, &summary, n, true);
    common::assert_no_lint(&sim);
    common::assert_queues_stopped_before_memory_went(&sim, RUST);
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
/// know yet at each use, however soon after its last look. Each driver is stopped once frames
/// it forwarded left both ports, not after a fixed time, which a loaded host may take whole.
#[test]
fn a_hundred_starts_into_running_traffic_report_no_dma_fault() {
    let sim = Sim::start("starts");
    sim.start_both_ways(&TrafficSpec::default());
    let modes = ["restricted", "const", "flexible"];
    let sent = |sim: &Sim| -> Vec<u64> { sim.stats().ports.iter().map(|p| p.sink_packets).collect() };
    for start in 0..100 {
        let mode = modes[start % modes.len()];
        let before = sent(&sim);
        let child = sim.fwd(RUST, mode, &[A, B]);
        // A bound for a driver that never forwards, not a verdict on how fast one starts.
        let deadline = Instant::now() + Duration::from_secs(60);
        while sent(&sim).iter().zip(&before).any(|(now, then)| now == then) {
            assert!(Instant::now() < deadline, "start {start} ({mode}) forwarded nothing both ways in 60 s");
            std::thread::sleep(Duration::from_millis(1));
        }
        let forwarded = common::stop_driver(RUST, mode, child).forwarded;
        let s = sim.stats();
        let faults: Vec<_> = s.ports.iter().flat_map(|p| &p.faults).collect();
        assert!(faults.is_empty(), "start {start} ({mode}): {faults:?}");
        assert!(forwarded.iter().all(|&n| n > 0), "start {start} ({mode}) forwarded both ways: {forwarded:?}");
    }
}

/// `kill -9` of `nicsim serve` under a forwarding driver: serve's guardian makes every
/// register read all-ones, as a card pulled from its slot, and the driver exits non-zero with
/// one line instead of polling a dead device forever.
#[test]
fn a_killed_nicsim_ends_the_driver_with_one_line() {
    // serve's guardian outlives it: reparented here, and reaped here.
    platform::process::become_subreaper().unwrap();
    let scratch = ScratchDir::new(common::SCRATCH_PREFIX, "killed").unwrap();
    let root = scratch.path().join("root");
    let nicsim = Path::new(common::SAFENIC).with_file_name("nicsim");
    let serve = Reaped::spawn(
        Command::new(&nicsim).arg("--root").arg(&root).args(["serve", "--cpu", "0"]).stdout(Stdio::null()),
    )
    .expect("spawning nicsim serve");
    let session = Session::connect(&root);
    session.wait_answering(Duration::from_secs(10)).expect("nicsim serve answers");
    let guardian = platform::process::children(serve.id());
    assert_eq!(guardian.len(), 1, "serve runs one guardian: {guardian:?}");
    let devices = root.join("devices");
    let mut driver = Reaped::spawn(
        Command::new(common::SAFENIC)
            .args(["fwd", "const", A, B, "--cpu", "1", "--sysfs"])
            .arg(&devices)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .expect("spawning safenic fwd");
    let alive = || match driver.try_wait() {
        Ok(Some(status)) => Err(format!("the driver exited early with {status}: {}", driver.output())),
        _ => Ok(()),
    };
    session.wait_ports_up(Duration::from_secs(30), alive).unwrap();
    for port in 0..2 {
        session.start_traffic(port, TrafficSpec::default()).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    serve.signal(Signal::Kill).unwrap();
    let out = driver.wait_for_exit(Duration::from_secs(20)).expect("waiting for the driver");
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert!(out.status.code().is_some_and(|c| c != 0), "exits non-zero by itself: {:?} {err}", out.status);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("gone") && err.contains("nicsim stopped"), "{err}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while root.exists() || !platform::process::reap(guardian[0]) {
        assert!(Instant::now() < deadline, "the guardian removed the killed serve's tree and exited");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// With a port's cable out the driver waits for its link, forwards once it comes up, and
/// when it never comes gives up after its `--link-timeout` (10 s unless given) with one line
/// that names the cable.
#[test]
fn a_driver_waits_for_the_link_and_says_when_it_never_comes() {
    let sim = Sim::start("link");
    sim.set_link(0, false).unwrap();
    let mut child = sim.fwd(RUST, "const", &[A, B, "--flow-control"]);
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "still waiting for the link: {}", child.output());
    let s = sim.stats();
    assert!(!s.ports[0].link_up && s.ports[1].link_up);
    assert_eq!(s.ports[0].rx_queues_enabled, 0, "no queue before the link is up");
    sim.set_link(0, true).unwrap();
    sim.wait_driver_ready(&mut child);
    let n = 10_000;
    let s =
        sim.send_both_ways(TrafficSpec { rate_pps: Some(common::RATE_PPS), count: Some(n), ..TrafficSpec::default() });
    let summary = common::stop_driver(RUST, "const", child);
    common::assert_lossless(&s, &summary, n, true);

    sim.set_link(1, false).unwrap();
    let started = Instant::now();
    let out = sim
        .fwd(RUST, "const", &[A, B, "--link-timeout", "1.5"])
        .wait_for_exit(Duration::from_secs(60))
        .expect("waiting");
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert!(out.status.code().is_some_and(|c| c != 0), "gives up by itself: {:?} {err}", out.status);
    assert!(started.elapsed() >= Duration::from_millis(1_500), "after its --link-timeout");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains(B) && err.contains("link up") && err.contains("cable"), "{err}");
}
