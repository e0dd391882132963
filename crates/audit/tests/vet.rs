//! The audit cannot be answered by what it audits. The outside review put a build script into
//! `ixgbe` that linked a small C library whose constructor made `safenic audit` (which ran
//! inside the binary it audits) print a forged "passed". Now the audit is a binary of its own
//! workspace that links no audited crate, and before anything is built it refuses every build
//! script, procedural macro, cargo configuration and toolchain file it has not pinned. These
//! tests give `safenic-audit vet` small workspaces that do what the review did, and check that
//! each is refused and that nothing of theirs ran.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A scratch workspace with an `ixgbe` crate, removed when dropped.
struct Fixture(PathBuf);

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Fixture {
    fn new(name: &str) -> Fixture {
        let dir = std::env::temp_dir().join(format!("audit-vet-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let f = Fixture(dir);
        f.write("Cargo.toml", "[workspace]\nresolver = \"2\"\nmembers = [\"crates/ixgbe\"]\n");
        f.write("crates/ixgbe/Cargo.toml", "[package]\nname = \"ixgbe\"\nversion = \"0.1.0\"\nedition = \"2021\"\n");
        f.write("crates/ixgbe/src/lib.rs", "#![forbid(unsafe_code)]\npub fn run() {}\n");
        f
    }

    fn write(&self, path: &str, text: &str) {
        let at = self.0.join(path);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(at, text).unwrap();
    }

    fn lock(&self) {
        let out = Command::new("cargo").args(["generate-lockfile", "--offline"]).current_dir(&self.0).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    /// `safenic-audit vet` on the fixture: whether it passed, and what it printed.
    fn vet(&self) -> (bool, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_safenic-audit"))
            .args(["vet", "--root"])
            .arg(&self.0)
            .current_dir(&self.0)
            .output()
            .unwrap();
        (
            out.status.success(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        )
    }
}

/// The review's build script: it compiles a C library whose constructor prints the audit's
/// verdict and exits 0, and links it into the crate; here it also leaves a mark if it runs.
fn forging_build_script(mark: &Path) -> String {
    format!(
        r##"fn main() {{
    std::fs::write("{}", "ran").unwrap();
    let out = std::env::var("OUT_DIR").unwrap();
    std::fs::write(format!("{{out}}/forge.c"), "#include <stdio.h>\n#include <stdlib.h>\n__attribute__((constructor)) static void forge(void) {{ puts(\"audit: passed\"); exit(0); }}\n").unwrap();
    std::process::Command::new("cc").args(["-c", "-fPIC", "-o"]).arg(format!("{{out}}/forge.o")).arg(format!("{{out}}/forge.c")).status().unwrap();
    std::process::Command::new("ar").args(["rcs"]).arg(format!("{{out}}/libforge.a")).arg(format!("{{out}}/forge.o")).status().unwrap();
    println!("cargo:rustc-link-search=native={{out}}");
    println!("cargo:rustc-link-lib=static:+whole-archive=forge");
}}
"##,
        mark.display()
    )
}

#[test]
fn a_build_script_that_answers_the_audit_is_refused_before_it_runs() {
    let f = Fixture::new("build-script");
    let mark = f.0.join("the build script ran");
    f.write("crates/ixgbe/build.rs", &forging_build_script(&mark));
    f.lock();
    let (passed, text) = f.vet();
    assert!(!passed, "a build script nobody pinned must fail the vet:\n{text}");
    assert!(
        text.contains("ixgbe's build-time code (its build script)") && text.contains("review it, then pin it"),
        "{text}"
    );
    assert!(!text.contains("audit: passed"), "{text}");
    assert!(!mark.exists(), "the vet ran the build script");
}

#[test]
fn cargo_configuration_toolchains_and_patches_are_refused() {
    let f = Fixture::new("configuration");
    f.write(".cargo/config.toml", "[target.x86_64-unknown-linux-gnu]\nlinker = \"./forge.sh\"\n");
    f.write("crates/ixgbe/rust-toolchain.toml", "[toolchain]\npath = \"/tmp/forged-toolchain\"\n");
    f.write(
        "Cargo.toml",
        "[workspace]\nresolver = \"2\"\nmembers = [\"crates/ixgbe\"]\n[patch.crates-io]\nlibc = { path = \"forged\" }\n",
    );
    let (passed, text) = f.vet();
    assert!(!passed, "{text}");
    for expected in [
        ".cargo/config.toml: changes how cargo builds",
        "rust-toolchain.toml: changes how cargo builds",
        "Cargo.toml: [patch]",
    ] {
        assert!(text.contains(expected), "expected `{expected}`:\n{text}");
    }
}

#[test]
fn a_procedural_macro_of_the_workspace_is_refused() {
    let f = Fixture::new("proc-macro");
    f.write("Cargo.toml", "[workspace]\nresolver = \"2\"\nmembers = [\"crates/ixgbe\", \"crates/forge\"]\n");
    f.write(
        "crates/forge/Cargo.toml",
        "[package]\nname = \"forge\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\nproc-macro = true\n",
    );
    f.write("crates/forge/src/lib.rs", "#![forbid(unsafe_code)]\n");
    f.write(
        "crates/ixgbe/Cargo.toml",
        "[package]\nname = \"ixgbe\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nforge = { path = \"../forge\" }\n",
    );
    f.lock();
    let (passed, text) = f.vet();
    assert!(!passed && text.contains("forge's build-time code (a procedural macro)"), "{text}");
}

#[test]
fn the_audit_links_no_crate_it_audits() {
    let out = Command::new("cargo")
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--manifest-path",
            concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let nodes = m["resolve"]["nodes"].as_array().unwrap();
    let packages = m["packages"].as_array().unwrap();
    let audit = packages.iter().find(|p| p["name"] == "audit").unwrap()["id"].as_str().unwrap();
    // What the audit's binary links: its normal dependencies, with its default features.
    let mut seen = std::collections::BTreeSet::new();
    let mut stack = vec![audit.to_string()];
    while let Some(id) = stack.pop() {
        if !seen.insert(id.clone()) {
            continue;
        }
        let node = nodes.iter().find(|n| n["id"] == id.as_str()).unwrap();
        for d in node["deps"].as_array().unwrap() {
            if d["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null()) {
                stack.push(d["pkg"].as_str().unwrap().to_string());
            }
        }
    }
    for id in seen {
        let p = packages.iter().find(|p| p["id"] == id.as_str()).unwrap();
        assert!(p["source"].is_string() || p["name"] == "audit", "the audit links the path crate {}", p["name"]);
    }
}
