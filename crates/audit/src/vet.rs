//! What the audit checks before anything of the workspace is built or run, so that nothing
//! unvetted runs on the build machine (where it could rewrite the audit's binary or its
//! report), and nothing links into the driver what the sources do not show:
//!
//! - no cargo configuration (`.cargo/config.toml`: a linker, rustc wrapper, flags or source
//!   replacement of its own) and no toolchain file (`rust-toolchain.toml`: another compiler)
//!   anywhere in the repository; no `[patch]`, `[replace]` or `cargo-features` in a manifest;
//! - every build script and procedural macro of the workspace's graph, and what they use,
//!   pinned ([`crate::build_time`]);
//! - unsafe code, assembly, extern blocks and linker attributes only in the rooms, read from
//!   the sources ([`crate::budget`]);
//! - the driver crates' and the driver binary's dependencies on their allowlists, pinned
//!   ([`crate::dependencies`]).
//!
//! `make audit` and `make test` run it first, with the audit's binary built from its own
//! workspace; the rest of the audit, after the build, runs it again.

use std::path::{Path, PathBuf};

/// Files that change how cargo builds: none may be in the repository.
const BUILD_CONFIGURATION: [&str; 4] = ["config", "config.toml", "rust-toolchain", "rust-toolchain.toml"];

/// Every finding, one line each naming what to do; empty if the repository may be built.
pub fn vet(root: &Path) -> Result<Vec<String>, String> {
    let root = &std::fs::canonicalize(root).map_err(|e| format!("{}: {e}: pass the repository", root.display()))?;
    let mut findings = Vec::new();
    for file in files(root) {
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let in_cargo_dir = file.parent().and_then(Path::file_name).is_some_and(|d| d == ".cargo");
        let configures = (in_cargo_dir && name.starts_with("config")) || name.starts_with("rust-toolchain");
        if configures && BUILD_CONFIGURATION.contains(&name.as_str()) {
            findings.push(format!(
                "{}: changes how cargo builds (its configuration, or another toolchain): the project has none; remove it",
                relative(root, &file)
            ));
        }
        if name == "Cargo.toml" {
            findings.extend(manifest_findings(root, &file));
        }
    }
    // With a configuration of the repository's own, even `cargo metadata` would read it.
    if !findings.is_empty() {
        return Ok(findings);
    }
    let (json, lock) = crate::dependencies::metadata(root)?;
    let metadata = serde_json::from_str(&json).map_err(|e| format!("reading cargo metadata: {e}"))?;
    findings.extend(crate::build_time::check(root, &metadata, &lock));
    let budget = crate::budget::unsafe_budget(root).unwrap_or_else(|e| {
        findings.push(e);
        Vec::new()
    });
    for c in budget.iter().filter(|c| !c.passed()) {
        let first = c.not_allowed.iter().chain(&c.undocumented).chain(&c.unparsed).next();
        findings.push(match first {
            Some(site) => {
                format!("crate {}: {site}: unsafe code, assembly or a linker attribute outside the rooms", c.name)
            }
            None => format!("crate {}: its root does not forbid unsafe code: add #![forbid(unsafe_code)]", c.name),
        });
    }
    match crate::dependencies::check(root) {
        Ok(reports) => {
            for report in reports {
                findings.extend(report.not_allowed.iter().map(|d| format!("dependency not allowed: {d}")));
            }
        }
        Err(e) => findings.push(e),
    }
    Ok(findings)
}

/// A manifest's keys that change what is built: `[patch]` and `[replace]` swap a dependency's
/// source for another, `cargo-features` turns on unstable ones.
fn manifest_findings(root: &Path, file: &Path) -> Vec<String> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => return vec![format!("{}: {e}", relative(root, file))],
    };
    let table: toml::Table = match toml::from_str(&text) {
        Ok(t) => t,
        Err(e) => return vec![format!("{}: not a manifest cargo reads: {}", relative(root, file), one_line(&e))],
    };
    ["patch", "replace", "cargo-features"]
        .iter()
        .filter(|key| table.contains_key(**key))
        .map(|key| format!("{}: [{key}] changes what is built: the project has none; remove it", relative(root, file)))
        .collect()
}

fn one_line(e: &impl std::fmt::Display) -> String {
    e.to_string().lines().next().unwrap_or("").to_string()
}

fn relative(root: &Path, file: &Path) -> String {
    file.strip_prefix(root).unwrap_or(file).display().to_string()
}

/// Every file of the repository but the build's and git's own.
fn files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.filter_map(|e| e.ok()) {
            let path = entry.path();
            let name = entry.file_name();
            let skipped = dir == root && (name == "target" || name == ".git");
            match entry.file_type() {
                Ok(t) if t.is_dir() && !skipped => stack.push(path),
                Ok(t) if t.is_file() || t.is_symlink() => out.push(path),
                _ => {}
            }
        }
    }
    out.sort();
    out
}
