//! A driver joins everything with one manifest entry: the conformance suite and the bench take
//! their drivers from drivers/drivers.toml (the audit's Table 2 too: crates/audit/tests).

use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The repository's manifest with one more entry, as a new driver would add it.
fn with_dummy() -> manifest::Manifest {
    let text = std::fs::read_to_string(repository().join(manifest::MANIFEST)).unwrap();
    let dummy = r#"
[[driver]]
name = "dummy"
language = "Zig"
build = "true"
command = "drivers/dummy/safenic-dummy-{mode} fwd"
sources = ["drivers/dummy/src"]
binary = "drivers/dummy/safenic-dummy-{mode}"
main_loop = "forward_{mode}"
conformance = true
bench = true
"#;
    manifest::Manifest::parse(&format!("{text}{dummy}")).unwrap()
}

#[test]
fn a_new_manifest_entry_joins_the_conformance_suite() {
    let entries = manifest::conformance_entries(&with_dummy());
    assert!(entries.contains("dummy => \"dummy\", \"drivers/dummy/safenic-dummy-{mode} fwd\";"), "{entries}");
    // The suite this binary was built with is the repository's: every listed driver is in it.
    let built = include_str!(concat!(env!("OUT_DIR"), "/conformance_drivers.rs"));
    let m = manifest::Manifest::load(&repository()).unwrap();
    assert_eq!(built, manifest::conformance_entries(&m));
}

#[test]
fn a_new_manifest_entry_joins_the_bench() {
    let root = repository();
    let drivers = bench::drivers_of(&with_dummy(), &root, Path::new("/build/safenic"));
    let names: Vec<&str> = drivers.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["rust", "c-clang", "c-gcc", "ada", "csharp", "dummy"]);
    let dummy = drivers.last().unwrap();
    assert_eq!(dummy.command[0], root.join("drivers/dummy/safenic-dummy-{mode}").display().to_string());
}
