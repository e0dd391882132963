//! Writes the conformance suite's list of drivers from the driver manifest
//! (drivers/drivers.toml), so that a driver added there is tested without other edits.
#![forbid(unsafe_code)]

use std::path::Path;

fn main() {
    // Read when the script runs, not when it was compiled: a build script reused from another
    // checkout would read that checkout's manifest.
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&dir).join("../..");
    println!("cargo:rerun-if-changed={}", root.join(manifest::MANIFEST).display());
    let m = manifest::Manifest::load(&root).unwrap_or_else(|e| panic!("{e}"));
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("conformance_drivers.rs");
    std::fs::write(&out, manifest::conformance_entries(&m)).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
}
