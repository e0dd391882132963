//! The Rust driver against a hostile device, per model (`make test-chaos`; `make soak
//! SECONDS=…` for longer): at least 10^6 hostile write-backs, a stall and every wire fault,
//! each followed by an exact check that traffic flows again; then a surprise reset and a
//! surprise removal, after each of which the driver must exit non-zero with one line. The
//! driver is this build's `safenic`, with debug assertions, so an overflow or a failed
//! assertion is a crash. nicsim must see no DMA outside the driver's memory, and the flexible
//! model checks at exit that every buffer is in exactly one place (its summary line, which
//! the campaign requires on SIGTERM).
//! Needs root and hugepages (`make test` provides them); tests run one at a time.

use bench::chaos::{campaign, Dose, Kind, Outcome, Verdict};

const SAFENIC: &str = env!("CARGO_BIN_EXE_safenic");

/// `SAFENIC_SOAK_SECONDS` (set by `make soak`) for about that many seconds of each fault,
/// with `SAFENIC_SOAK_SEED` (default 1); otherwise the test's dose.
fn dose() -> Dose {
    match std::env::var("SAFENIC_SOAK_SECONDS") {
        Ok(s) => {
            let seconds: f64 = s.parse().expect("SAFENIC_SOAK_SECONDS: give a number of seconds");
            let seed =
                std::env::var("SAFENIC_SOAK_SEED").map_or(1, |s| s.parse().expect("SAFENIC_SOAK_SEED: a number"));
            Dose::soak(seconds, seed)
        }
        Err(_) => Dose::TEST,
    }
}

fn chaos(mode: &str) {
    let driver = bench::Driver {
        name: "rust-debug".into(),
        command: vec![SAFENIC.into(), "fwd".into()],
        hot_function: String::new(),
        perf_map: false,
    };
    let dose = dose();
    let outcomes = campaign(&driver, mode, &Kind::ALL, dose).unwrap();
    for o in &outcomes {
        eprintln!("{mode}: {}: {} ({} injected): {} | {}", o.kind, o.verdict, o.injected, o.detail, o.summary);
    }
    let kinds: Vec<Kind> = outcomes.iter().map(|o| o.kind).collect();
    assert_eq!(kinds, Kind::ALL, "one outcome per kind");
    let of = |k: Kind| -> &Outcome { outcomes.iter().find(|o| o.kind == k).expect("every kind ran") };
    for o in &outcomes {
        let expected = if o.kind.ends_the_driver() { Verdict::CleanExit } else { Verdict::Survived };
        assert_eq!(o.verdict, expected, "{mode}: {}: {}", o.kind, o.detail);
        assert!(o.injected > 0, "{mode}: {}: nothing was injected", o.kind);
    }
    assert!(of(Kind::WriteBack).injected >= 2 * dose.write_backs_per_port);
    assert!(of(Kind::WriteBack).injected >= 1_000_000, "at least 10^6 hostile write-backs");
    assert!(of(Kind::Reset).detail.contains("was reset under the driver"), "{}", of(Kind::Reset).detail);
    assert!(of(Kind::Remove).detail.contains("all-ones"), "{}", of(Kind::Remove).detail);
    // The summary line at each end: after SIGTERM (exit 0, which for the flexible model also
    // means every buffer was found in exactly one place) and after the device went.
    for o in &outcomes {
        assert!(o.summary.contains("malformed (") && o.summary.contains("ring restarts"), "{}: {}", o.kind, o.summary);
    }
}

#[test]
fn the_restricted_model_survives_a_hostile_device() {
    chaos("restricted");
}

#[test]
fn the_const_model_survives_a_hostile_device() {
    chaos("const");
}

#[test]
fn the_flexible_model_survives_a_hostile_device() {
    chaos("flexible");
}
