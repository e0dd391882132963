//! The benchmark harness measures safenic on nicsim: a short throughput window and a short
//! callgrind run of the restricted model. Needs root, hugepages and valgrind (`make test`
//! provides them); tests run one at a time.

use bench::{instructions, throughput, Driver, Limit};

fn safenic() -> Driver {
    bench::safenic_driver(std::path::Path::new(env!("CARGO_BIN_EXE_safenic")))
}

#[test]
fn throughput_is_measured_with_its_limit() {
    let t = throughput(&safenic(), "restricted", 1.0).expect("throughput run");
    assert!(t.seconds > 0.5, "{t:?}");
    assert!(t.offered_mpps > 0.5, "nicsim offered traffic: {t:?}");
    assert!(t.forwarded_mpps > 0.1, "safenic forwarded: {t:?}");
    assert!(t.forwarded_mpps <= t.offered_mpps * 1.01, "no more forwarded than offered: {t:?}");
    // The limit follows from the drops: more than 1% without a descriptor means the driver.
    assert_eq!(t.limited_by == Limit::Driver, t.no_descriptor_mpps * 100.0 > t.offered_mpps, "{t:?}");
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
