//! The audit reads the driver manifest itself (it links no crate it audits): a new entry joins
//! Table 2, and an entry without a binary (a sanitizer build) has no row.

use audit::sizes::{table_of, LoopCode};
use std::path::Path;

fn repository() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

#[test]
fn a_new_manifest_entry_joins_table_2() {
    let text = std::fs::read_to_string(repository().join(audit::drivers::MANIFEST)).unwrap();
    let dummy = r#"
[[driver]]
name = "dummy"
language = "Zig"
build = "true"
command = "drivers/dummy/safenic-dummy-{mode} fwd"
sources = ["drivers/dummy/src"]
binary = "drivers/dummy/{isa}/safenic-dummy-{mode}"
main_loop = "forward_{mode}"
conformance = true
bench = true
"#;
    let drivers = audit::drivers::parse(&format!("{text}{dummy}")).unwrap();
    let table = table_of(&drivers, "x86-64-v2");
    let dummy = table.iter().find(|t| t.label.starts_with("dummy")).expect("the dummy driver has a row");
    assert_eq!(dummy.code, LoopCode::Binary("drivers/dummy/x86-64-v2/safenic-dummy-{mode}".into()));
    assert_eq!(dummy.main_loop, "forward_{mode}");
    assert!(!table.iter().any(|t| t.label.starts_with("c-asan")), "a sanitizer build has no binary, and no row");
    assert!(table.iter().any(|t| t.code == LoopCode::Jit), "the C# driver's loops are in its perf map");
}

#[test]
fn a_manifest_that_does_not_parse_is_refused_in_one_line() {
    let e = audit::drivers::parse("[[driver]]\nname = 3\n").unwrap_err();
    assert!(!e.contains('\n') && !e.is_empty(), "{e}");
}
