//! The benchmark harness measures safenic on nicsim: a short throughput window and a short
//! callgrind run of the restricted model. Needs root, hugepages and valgrind (`make test`
//! provides them); tests run one at a time.

use bench::{instructions, throughput, Driver, Limit, MAX_WINDOWS};

/// The Rust driver as the manifest describes it, with this build's safenic.
fn safenic() -> Driver {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let m = manifest::Manifest::load(&root).unwrap();
    let all = bench::drivers_of(&m, &root, std::path::Path::new(env!("CARGO_BIN_EXE_safenic")));
    all.into_iter().find(|d| d.name == "rust").expect("the manifest lists the Rust driver")
}

#[test]
fn throughput_is_measured_with_its_limit() {
    let t = throughput(&safenic(), "restricted", 1.0).expect("throughput run");
    assert!(t.seconds > 0.5, "{t:?}");
    // Every frame offered in the window was forwarded or dropped for want of a descriptor,
    // but for those in the rings when it opened or closed (two rings of 512 per port).
    let rings = 2.0 * 2.0 * 512.0 / t.seconds / 1e6;
    assert!((t.offered_mpps - t.forwarded_mpps - t.no_descriptor_mpps).abs() <= rings, "{t:?}");
    // The limit follows from the drops and nicsim's skipped frames.
    assert_eq!(t.limited_by, Limit::of(t.offered_mpps, t.no_descriptor_mpps, t.skipped_mpps), "{t:?}");
    // A window nicsim limited is measured again: only the last window may be one.
    assert!((1..=MAX_WINDOWS).contains(&t.windows), "{t:?}");
    assert!(!t.limited_by.nicsim_fell_behind() || t.windows == MAX_WINDOWS, "stopped while nicsim was behind: {t:?}");
    // Offered and skipped add up to the line rate of both ports (2 x 14.88 Mpps): every frame
    // the rate owed is accounted for, however the host scheduled nicsim's core. Statistics are
    // as of the engine's last iteration, so the only slack is what may be owed and not yet
    // due at each end: the 20 µs catch-up plus the 2 µs look-ahead of each port.
    let owed = t.offered_mpps + t.skipped_mpps;
    let slack = 2.0 * 2.0 * 22e-6 * 14.880_952 / t.seconds;
    assert!((owed - 2.0 * 14.880_952).abs() <= slack + 1e-6, "offered + skipped = {owed}: {t:?}");
}

#[test]
fn the_limit_is_the_driver_nicsim_both_or_the_line() {
    assert_eq!(Limit::of(20.0, 0.3, 0.1), Limit::Driver);
    assert_eq!(Limit::of(20.0, 0.3, 9.0), Limit::DriverAndNicsim, "drops while nicsim fell behind");
    assert_eq!(Limit::of(20.0, 0.1, 9.0), Limit::Nicsim);
    assert_eq!(Limit::of(29.7, 0.1, 0.06), Limit::LineRate);
    assert_eq!(Limit::of(29.4, 0.2, 0.36), Limit::Nicsim, "1.2% of the line rate skipped");
}

#[test]
fn instructions_per_packet_come_from_the_forwarding_loop_only() {
    let i = instructions(&safenic(), "restricted", 2.0).expect("callgrind run");
    assert!(i.saturated, "under valgrind the driver is the limit: {i:?}");
    assert!(i.packets > 10_000, "{i:?}");
    // The loop's own work: tens to hundreds of instructions per packet, not the thousands
    // that setup or idle polling would add.
    let per = i.per_packet();
    assert!((20.0..1_000.0).contains(&per), "{per} instructions per packet: {i:?}");
    // The cache and branch simulations ran, and their misses add to the estimate.
    assert!(i.events.d1mr + i.events.bcm > 0, "{i:?}");
    assert!(i.cycles_per_packet() > per, "{i:?}");
    assert_eq!(leftovers(), Vec::<String>::new(), "the run leaves nothing in /dev/shm");
}

/// What this process's harness sessions left in /dev/shm.
fn leftovers() -> Vec<String> {
    let mine = format!("safenic-bench-{}-", std::process::id());
    std::fs::read_dir("/dev/shm")
        .map(|d| d.filter_map(|e| e.ok()?.file_name().into_string().ok()).filter(|n| n.starts_with(&mine)).collect())
        .unwrap_or_default()
}

#[test]
fn a_driver_without_the_named_loop_is_an_error() {
    let mut d = safenic();
    d.hot_function = "*no_such_function*".into();
    let e = instructions(&d, "restricted", 1.0).unwrap_err();
    assert!(e.contains("no instructions"), "{e}");
    assert_eq!(leftovers(), Vec::<String>::new(), "a failed run leaves nothing in /dev/shm either");
}
