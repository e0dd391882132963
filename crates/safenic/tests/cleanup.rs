//! A test that fails leaves nothing behind: no driver keeps polling, no nicsim runs, nothing
//! stays in /dev/shm. The helper below starts nicsim and a driver with traffic and a capture,
//! then fails; the test runs it in a subprocess, once failing as an assertion does (a panic
//! that unwinds) and once aborting (no unwinding: only the kernel can stop the driver).
//! Needs root and hugepages (`make test` provides them).

use crate::common;

use common::{Sim, A, B, RUST, SCRATCH_PREFIX};
use nicsim::wire::{Captured, TrafficSpec};
use platform::fs::ScratchDir;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
#[ignore = "a helper: a_failing_test_leaves_no_process_and_no_file_behind runs it in a subprocess"]
fn failing_helper() {
    let how = std::env::var("SAFENIC_FAIL_HOW").expect("run by a_failing_test_leaves_no_process_and_no_file_behind");
    let sim = Sim::start("failing");
    let mut child = sim.fwd(RUST, "flexible", &[A, B, "--flow-control"]);
    sim.wait_driver_ready(&mut child);
    let pcap = sim.scratch_file("port1.pcap");
    sim.capture(1, &pcap, Captured::Tx, None).unwrap();
    sim.start_both_ways(&TrafficSpec { rate_pps: Some(100_000.0), ..TrafficSpec::default() });
    std::thread::sleep(Duration::from_millis(300));
    assert!(pcap.exists(), "the capture is being written");
    println!("the driver runs as pid {}", child.id());
    match how.as_str() {
        "abort" => std::process::abort(),
        _ => panic!("a deliberate failure"),
    }
}

/// Live processes (zombies have no command line) whose command line contains `text`.
fn processes_naming(text: &str) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())))
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(text))
        .collect()
}

fn shm_entries_naming(text: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| d.flatten().filter_map(|e| e.file_name().into_string().ok()).filter(|n| n.contains(text)).collect())
        .unwrap_or_default()
}

#[test]
fn a_failing_test_leaves_no_process_and_no_file_behind() {
    // An aborted helper's driver is orphaned: it is reparented here, not to init (which may
    // never reap it), and reaped below once the kernel has killed it.
    platform::process::become_subreaper().unwrap();
    for how in ["panic", "abort"] {
        let tag = format!("cleanup{}{how}", std::process::id());
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "cleanup::failing_helper", "--test-threads=1", "--nocapture"])
            .env("SAFENIC_TEST_TAG", &tag)
            .env("SAFENIC_FAIL_HOW", how)
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!out.status.success(), "{how}: the helper fails: {text}");
        let driver: u32 = text
            .split_once("the driver runs as pid ")
            .and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("{how}: the helper got as far as running a driver: {text}"));
        // The kernel needs a moment to deliver the SIGKILL of an orphaned driver.
        let deadline = Instant::now() + Duration::from_secs(10);
        while (platform::process::reap_orphans() == 0 && std::path::Path::new(&format!("/proc/{driver}")).exists())
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            !std::path::Path::new(&format!("/proc/{driver}")).exists(),
            "{how}: the driver is gone, not even a zombie"
        );
        assert_eq!(processes_naming(&tag), Vec::<String>::new(), "{how}: no process of the failed run is left");
        if how == "abort" {
            // Nothing ran to remove its scratch directory: the next harness does, as it
            // starts (its owner is gone).
            drop(ScratchDir::new(SCRATCH_PREFIX, "sweep").unwrap());
        }
        assert_eq!(shm_entries_naming(&tag), Vec::<String>::new(), "{how}: nothing of it in /dev/shm");
    }
}
