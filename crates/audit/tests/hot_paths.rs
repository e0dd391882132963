//! The hot-path audit on this test binary, which holds a function with a check on purpose.
//! Test builds keep bounds checks like release builds do, so the fixture needs no release build.

use audit::cross_check::agrees_with_objdump;
use audit::elf::Binary;
use audit::hot_paths::{audit_hot_paths, CheckKind};

/// A loop with a bounds check: the audit must find it, at this line.
#[inline(never)]
pub fn fixture_checked(values: &[u32], index: usize) -> u32 {
    values[index]
}
/// The line of the indexing expression above.
const FIXTURE_LINE: u32 = line!() - 3;

/// Calls the fixture through a function that has no check of its own.
#[inline(never)]
pub fn fixture_caller(values: &[u32], index: usize) -> u32 {
    fixture_checked(std::hint::black_box(values), index).wrapping_add(1)
}

fn this_binary() -> (std::path::PathBuf, Binary) {
    let exe = std::env::current_exe().unwrap();
    let binary = Binary::read(&exe).unwrap();
    // Keep both fixtures in the binary.
    assert_eq!(std::hint::black_box(fixture_caller as fn(&[u32], usize) -> u32)(&[1, 2], 1), 3);
    (exe, binary)
}

#[test]
fn a_bounds_check_is_found_at_its_source_line() {
    let (exe, binary) = this_binary();
    let reports = audit_hot_paths(&exe, &binary, &["hot_paths::fixture_checked".into()], &[]).unwrap();
    let checks: Vec<_> = reports.iter().flat_map(|r| &r.checks).collect();
    let want = format!("crates/audit/tests/hot_paths.rs:{FIXTURE_LINE}");
    assert!(
        checks.iter().any(|c| c.kind == CheckKind::BoundsCheck && c.source.starts_with(&want)),
        "the audit must flag the fixture's bounds check at {want}: {checks:#?}"
    );
}

#[test]
fn a_check_in_a_function_the_hot_path_calls_is_found() {
    let (exe, binary) = this_binary();
    let reports = audit_hot_paths(&exe, &binary, &["hot_paths::fixture_caller".into()], &[]).unwrap();
    assert!(reports.iter().any(|r| r.name == "hot_paths::fixture_checked" && !r.checks.is_empty()), "{reports:#?}");
    // Allowed (cold) calls are not followed.
    let cold = ["hot_paths::fixture_checked".to_string()];
    let reports = audit_hot_paths(&exe, &binary, &["hot_paths::fixture_caller".into()], &cold).unwrap();
    assert!(reports.iter().all(|r| r.checks.is_empty()), "{reports:#?}");
}

#[test]
fn a_missing_hot_path_is_an_error_that_says_why() {
    let (exe, binary) = this_binary();
    let e = audit_hot_paths(&exe, &binary, &["hot_paths::no_such_loop".into()], &[]).unwrap_err();
    assert!(e.contains("#[inline(never)]"), "{e}");
}

#[test]
fn objdump_decodes_the_fixtures_as_the_audit_does() {
    let (exe, binary) = this_binary();
    for name in ["hot_paths::fixture_checked", "hot_paths::fixture_caller"] {
        let f = binary.named(name).next().unwrap_or_else(|| panic!("{name} is in the binary"));
        agrees_with_objdump(&exe, f).unwrap();
    }
}
