//! The Rust driver over VFIO (docs/vfio.md): nicsim binds the functions to vfio-pci under
//! `nicsim exec --vfio`, the driver starts as `nobody` with no capability, maps its DMA
//! memory into its container, and the device reaches only the IOVAs mapped there.
//!
//! Drivers map up to 10 MiB; this host's containers may not raise RLIMIT_MEMLOCK past
//! 8 MiB, so nicsim's type1 accounting is given 64 MiB instead (`--vfio-memlock`).

use crate::common::{self, Driver, Sim, A, B, NOBODY, RATE_PPS, RUST};
use nicsim::chaos::Fault;
use nicsim::control::Stats;
use nicsim::wire::TrafficSpec;
use platform::Reaped;
use std::time::{Duration, Instant};

/// The groups given to nobody, 64 MiB of pinned memory allowed.
const VFIO: [&str; 4] = ["--vfio-user", "65534", "--vfio-memlock", "67108864"];

/// The C baseline, which the bench compares with the Rust driver: over VFIO too.
const C_CLANG: Driver = Driver { name: "c-clang", command: "drivers/c/build/{isa}/clang/safenic-c-{mode} fwd" };
const C_GCC: Driver = Driver { name: "c-gcc", command: "drivers/c/build/{isa}/gcc/safenic-c-{mode} fwd" };

/// The driver under `nicsim exec` (its only child).
fn driver_pid(exec: &Reaped) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(&pid) = platform::process::children(exec.id()).first() {
            return pid;
        }
        assert!(Instant::now() < deadline, "nicsim exec started no driver");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `Uid:` and the capability sets of process `pid`, as /proc shows them.
fn credentials(pid: u32) -> Vec<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .filter(|l| ["Uid:", "CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"].iter().any(|k| l.starts_with(k)))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// Waits until no port has an IOMMU domain any more (the container went), within 10 s.
fn wait_containers_gone(sim: &Sim) -> Stats {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = sim.stats();
        if s.ports.iter().all(|p| p.iommu.is_none()) {
            return s;
        }
        assert!(Instant::now() < deadline, "a container outlived its driver: {:?}", s.ports[0].iommu);
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn every_model_forwards_losslessly_as_nobody_through_vfio() {
    every_model_through_vfio(RUST);
}

#[test]
fn the_c_baseline_forwards_losslessly_as_nobody_through_vfio() {
    every_model_through_vfio(C_CLANG);
    every_model_through_vfio(C_GCC);
}

/// Each model of `driver`, as nobody with no capability, with its DMA memory in its container
/// and nothing faulting: every frame once, in order.
fn every_model_through_vfio(driver: Driver) {
    let sim = Sim::start(&format!("vfio-{}", driver.name));
    for mode in ["restricted", "const", "flexible"] {
        sim.reset_counters().unwrap();
        let mut child = sim.exec_fwd_vfio(driver, mode, &[A, B, "--flow-control"], &VFIO);
        sim.wait_driver_ready(&mut child);
        let pid = driver_pid(&child);
        let zero = "0000000000000000";
        let expected = [
            format!("Uid: {NOBODY} {NOBODY} {NOBODY} {NOBODY}"),
            format!("CapInh: {zero}"),
            format!("CapPrm: {zero}"),
            format!("CapEff: {zero}"),
            format!("CapBnd: {zero}"),
            format!("CapAmb: {zero}"),
        ];
        assert_eq!(credentials(pid), expected, "{mode}: the driver runs as nobody with no capability");
        let s = sim.stats();
        for p in &s.ports {
            let domain = p.iommu.as_ref().unwrap_or_else(|| panic!("{mode}: port {} has no IOMMU domain", p.port));
            assert_eq!(domain.pid, pid, "{mode}: port {}'s container is the driver's", p.port);
            assert!(domain.mapped_bytes >= 2 << 20, "{mode}: the driver mapped its DMA memory: {domain:?}");
        }
        assert_eq!(s.ports[0].iommu.as_ref().map(|d| d.container), s.ports[1].iommu.as_ref().map(|d| d.container));
        let n = 50_000;
        let spec = TrafficSpec { rate_pps: Some(RATE_PPS), count: Some(n), ..TrafficSpec::default() };
        let s = sim.send_both_ways(spec);
        let summary = common::stop_driver(driver, mode, child);
        common::assert_lossless(&s, &summary, n, true);
        common::assert_no_lint(&sim);
        let after = wait_containers_gone(&sim);
        for p in &after.ports {
            assert_eq!((p.dma_faults, p.iommu_faults), (0, 0), "{mode}: port {}: {:?}", p.port, p.faults);
        }
    }
}

/// The virtio-net drivers through VFIO as nobody: the Rust one through the modern and the
/// legacy interface, the C baseline's (legacy); BAR4 and the I/O BAR are regions of the device
/// descriptor, every access served through it, and the rings IOVAs of the driver's container.
#[test]
fn the_virtio_drivers_forward_losslessly_as_nobody_through_vfio() {
    let sim = Sim::start_devices("vfio-virtio", &[nicsim::pciconfig::Kind::VirtioNet]);
    let legacy: &[&str] = &["--virtio-interface", "legacy"];
    for (driver, extra) in [(RUST, &[][..]), (RUST, legacy), (C_CLANG, &[][..])] {
        sim.reset_counters().unwrap();
        let mut child = sim.exec_fwd_vfio(driver, "flexible", &[&[A, B], extra].concat(), &VFIO);
        sim.wait_driver_ready(&mut child);
        let pid = driver_pid(&child);
        let s = sim.stats();
        assert!(s.ports.iter().all(|p| p.iommu.as_ref().is_some_and(|d| d.pid == pid)), "{:?}", s.ports[0].iommu);
        let n = 20_000;
        let s = sim.send_both_ways(TrafficSpec { rate_pps: Some(RATE_PPS), count: Some(n), ..TrafficSpec::default() });
        let summary = common::stop_driver(driver, "flexible", child);
        common::assert_lossless(&s, &summary, n, true);
        common::assert_no_lint(&sim);
        let after = wait_containers_gone(&sim);
        assert!(
            after.ports.iter().all(|p| p.dma_faults == 0 && p.iommu_faults == 0),
            "{}: {:?}",
            driver.name,
            after.ports[0].faults
        );
    }
}

/// A driver killed with SIGKILL under traffic: its container goes, the functions are reset,
/// nothing more reaches its memory, and the next driver starts cleanly on the same ports.
#[test]
fn a_driver_killed_under_traffic_leaves_nothing_the_device_can_reach() {
    let sim = Sim::start("vfio-kill");
    let mut child = sim.exec_fwd_vfio(RUST, "flexible", &[A, B], &VFIO);
    sim.wait_driver_ready(&mut child);
    sim.start_both_ways(&TrafficSpec { rate_pps: Some(RATE_PPS), ..TrafficSpec::default() });
    let forwarding = Instant::now() + Duration::from_secs(30);
    while sim.stats().ports.iter().any(|p| p.sink_packets == 0) {
        assert!(Instant::now() < forwarding, "the driver forwarded nothing both ways in 30 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    let resets_before: Vec<u64> = sim.stats().ports.iter().map(|p| p.resets).collect();
    platform::signals::send(driver_pid(&child), platform::signals::Signal::Kill).unwrap();
    let out = child.wait_for_exit(Duration::from_secs(30)).unwrap();
    assert_eq!(out.status.code(), Some(137), "nicsim exec exits as its command did (SIGKILL)");
    let gone = wait_containers_gone(&sim);
    for (p, before) in gone.ports.iter().zip(&resets_before) {
        assert!(p.resets > *before, "port {}: vfio-pci resets a function its process let go", p.port);
        assert_eq!((p.rx_queues_enabled, p.tx_queues_enabled), (0, 0), "port {}: queues stopped", p.port);
    }
    // Frames keep arriving: none reaches the dead driver's memory.
    std::thread::sleep(Duration::from_millis(300));
    let later = sim.stats();
    for p in &later.ports {
        assert_eq!(p.device.qprc.iter().sum::<u64>(), 0, "port {}: a frame went to the dead driver", p.port);
        assert!(p.drops.rx_disabled > 0 || p.device.mpc > 0, "port {}: frames kept coming and were dropped", p.port);
    }
    for port in 0..2 {
        sim.stop_traffic(port).unwrap();
    }
    sim.wait_quiet();
    sim.reset_counters().unwrap();
    let mut next = sim.exec_fwd_vfio(RUST, "restricted", &[A, B, "--flow-control"], &VFIO);
    sim.wait_driver_ready(&mut next);
    let n = 50_000;
    let s = sim.send_both_ways(TrafficSpec { rate_pps: Some(RATE_PPS), count: Some(n), ..TrafficSpec::default() });
    let summary = common::stop_driver(RUST, "restricted", next);
    common::assert_lossless(&s, &summary, n, true);
}

/// `nicsim fault dma` on a function behind the IOMMU: every access, at random IOVAs, at the
/// driver's own other memory and just past its mappings, is refused; the driver goes on.
#[test]
fn hostile_dma_is_refused_by_the_iommu_and_the_driver_goes_on() {
    let sim = Sim::start("vfio-hostile");
    let mut child = sim.exec_fwd_vfio(RUST, "flexible", &[A, B, "--flow-control"], &VFIO);
    sim.wait_driver_ready(&mut child);
    for port in 0..2 {
        sim.fault(port, Fault::Dma { count: 3000, seed: 7 + port as u64 }).unwrap();
    }
    let s = sim.stats();
    for p in &s.ports {
        let h = p.hostile_dma;
        assert_eq!((h.attempted, h.refused, h.reached), (3000, 3000, 0), "port {}", p.port);
        assert_eq!(p.iommu_faults, 3000, "port {}: each refusal counted as an IOMMU fault", p.port);
        assert_eq!(p.dma_faults, 0, "port {}: no queue stopped", p.port);
    }
    let n = 50_000;
    let s = sim.send_both_ways(TrafficSpec { rate_pps: Some(RATE_PPS), count: Some(n), ..TrafficSpec::default() });
    let summary = common::stop_driver(RUST, "flexible", child);
    common::assert_lossless(&s, &summary, n, false);
}

/// What a user can get wrong with VFIO, each one line that names the fix.
#[test]
fn vfio_failures_name_the_fix() {
    let sim = Sim::start("vfio-errors");
    let failure = |child: Reaped| -> String {
        let out = child.wait_for_exit(Duration::from_secs(60)).unwrap();
        assert!(!out.status.success(), "the driver failed");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let driver: Vec<&str> = stderr.lines().filter(|l| l.starts_with("safenic")).collect();
        assert_eq!(driver.len(), 1, "one line from the driver: {stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "{stderr}");
        driver[0].to_string()
    };
    // 4 MiB of pinned memory is less than any model maps.
    let e =
        failure(sim.exec_fwd_vfio(RUST, "flexible", &[A, B], &["--vfio-user", "65534", "--vfio-memlock", "4194304"]));
    assert!(e.contains("RLIMIT_MEMLOCK") && e.contains("MiB locked") && e.contains("raise it"), "{e}");
    // The groups were not given to nobody.
    let e = failure(sim.exec_fwd_vfio(RUST, "flexible", &[A, B], &VFIO[2..]));
    assert!(e.contains("no permission to open /dev/vfio/0") && e.contains("chown"), "{e}");
    // A group another driver holds.
    let mut first = sim.exec_fwd_vfio(RUST, "restricted", &[A, B], &VFIO);
    sim.wait_driver_ready(&mut first);
    let e = failure(sim.exec_fwd_vfio(RUST, "restricted", &[A, B], &VFIO));
    assert!(e.contains("is open in another process") && e.contains("stop that driver"), "{e}");
    common::stop_driver(RUST, "restricted", first);
}
