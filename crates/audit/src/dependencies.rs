//! The driver's dependencies: a dependency's unsafe code is ours too, so the driver crates may
//! depend (transitively, for the code they run) only on crates listed here, each with the
//! reason it is trusted. Read with `cargo metadata`, for the platform the audit reads code of.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// The driver library; its normal dependencies include the two rooms, `invariants` and
/// `platform`.
pub const DRIVER_CRATES: [&str; 1] = ["ixgbe"];

/// The platform whose dependency graph is checked (the audit reads x86-64 Linux code).
pub const PLATFORM: &str = "x86_64-unknown-linux-gnu";

/// Crates outside the workspace that the driver may depend on, and why each is trusted.
pub const ALLOWED: &[(&str, &str)] = &[
    ("libc", "declarations of the C library's system calls and types, for platform"),
    ("rustix", "safe system calls (fstatfs, sched_setaffinity, kill, mount, prctl, waitpid)"),
    ("linux-raw-sys", "rustix's Linux ABI definitions"),
    ("bitflags", "rustix's flag types"),
    ("errno", "reading and setting errno, for rustix"),
    ("zerocopy", "FromBytes/FromZeros: which types any DMA bytes are a valid value of"),
    ("zerocopy-derive", "zerocopy's derives (a proc macro: runs at build time)"),
    ("proc-macro2", "for zerocopy-derive, at build time"),
    ("quote", "for zerocopy-derive, at build time"),
    ("syn", "for zerocopy-derive, at build time"),
    ("unicode-ident", "for syn, at build time"),
];

#[derive(Deserialize)]
struct Metadata {
    packages: Vec<Package>,
    workspace_members: Vec<String>,
    resolve: Resolve,
}

#[derive(Deserialize)]
struct Package {
    id: String,
    name: String,
}

#[derive(Deserialize)]
struct Resolve {
    nodes: Vec<Node>,
}

#[derive(Deserialize)]
struct Node {
    id: String,
    deps: Vec<NodeDep>,
}

#[derive(Deserialize)]
struct NodeDep {
    pkg: String,
    dep_kinds: Vec<DepKind>,
}

#[derive(Deserialize)]
struct DepKind {
    /// `None` for a normal dependency, `dev` or `build` otherwise.
    kind: Option<String>,
}

/// What the check found.
#[derive(Debug, Clone, Serialize)]
pub struct DependencyReport {
    /// Every crate outside the workspace the driver crates depend on.
    pub external: Vec<String>,
    /// Those not in [`ALLOWED`], with the driver crate that pulls each in.
    pub not_allowed: Vec<String>,
}

/// Runs `cargo metadata` on the workspace at `root` and checks the driver crates' dependencies.
pub fn check(root: &Path) -> Result<DependencyReport, String> {
    let out = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--filter-platform", PLATFORM, "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .output()
        .map_err(|e| format!("running cargo metadata: {e} (the audit needs cargo on PATH)"))?;
    if !out.status.success() {
        return Err(format!("cargo metadata: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    check_metadata(&String::from_utf8_lossy(&out.stdout), &DRIVER_CRATES, ALLOWED)
}

/// [`check`] on `cargo metadata` output.
pub fn check_metadata(json: &str, roots: &[&str], allowed: &[(&str, &str)]) -> Result<DependencyReport, String> {
    let m: Metadata = serde_json::from_str(json).map_err(|e| format!("reading cargo metadata: {e}"))?;
    let names: BTreeMap<&str, &str> = m.packages.iter().map(|p| (p.id.as_str(), p.name.as_str())).collect();
    let nodes: BTreeMap<&str, &Node> = m.resolve.nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    let workspace: BTreeSet<&str> = m.workspace_members.iter().map(String::as_str).collect();
    let mut external = BTreeSet::new();
    let mut not_allowed = BTreeSet::new();
    for root in roots {
        let id = workspace
            .iter()
            .find(|id| names.get(*id) == Some(root))
            .ok_or_else(|| format!("driver crate {root} is not in the workspace"))?;
        let mut seen = BTreeSet::new();
        let mut stack = vec![*id];
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            let node = nodes.get(id).ok_or_else(|| format!("cargo metadata lists no node {id}"))?;
            for d in &node.deps {
                if d.dep_kinds.iter().any(|k| k.kind.is_none()) {
                    stack.push(d.pkg.as_str());
                }
            }
        }
        for id in seen.into_iter().filter(|id| !workspace.contains(id)) {
            let name = names.get(id).copied().unwrap_or(id);
            external.insert(name.to_string());
            if !allowed.iter().any(|(a, _)| *a == name) {
                not_allowed.insert(format!("{name} (through {root})"));
            }
        }
    }
    Ok(DependencyReport { external: external.into_iter().collect(), not_allowed: not_allowed.into_iter().collect() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace of `drv` and `cli`: drv needs `libc` and, through `helper`, `leftpad`; only
    /// a dev-dependency brings `mock`; `cli` alone needs `clap`.
    const METADATA: &str = r#"{
      "packages": [
        {"id": "drv", "name": "drv"}, {"id": "cli", "name": "cli"}, {"id": "helper", "name": "helper"},
        {"id": "libc", "name": "libc"}, {"id": "leftpad", "name": "leftpad"},
        {"id": "mock", "name": "mock"}, {"id": "clap", "name": "clap"}
      ],
      "workspace_members": ["drv", "cli", "helper"],
      "resolve": {"nodes": [
        {"id": "drv", "deps": [
          {"pkg": "helper", "dep_kinds": [{"kind": null}]},
          {"pkg": "libc", "dep_kinds": [{"kind": null}]},
          {"pkg": "mock", "dep_kinds": [{"kind": "dev"}]}]},
        {"id": "helper", "deps": [{"pkg": "leftpad", "dep_kinds": [{"kind": null}]}]},
        {"id": "cli", "deps": [{"pkg": "clap", "dep_kinds": [{"kind": null}]}]},
        {"id": "libc", "deps": []}, {"id": "leftpad", "deps": []}, {"id": "mock", "deps": []},
        {"id": "clap", "deps": []}
      ]}
    }"#;

    #[test]
    fn a_dependency_outside_the_allowlist_is_reported_with_who_pulls_it_in() {
        let r = check_metadata(METADATA, &["drv"], &[("libc", "system calls")]).unwrap();
        assert_eq!(r.external, ["leftpad", "libc"], "dev-dependencies and other crates' do not count");
        assert_eq!(r.not_allowed, ["leftpad (through drv)"]);
        let ok = check_metadata(METADATA, &["drv"], &[("libc", "x"), ("leftpad", "y")]).unwrap();
        assert!(ok.not_allowed.is_empty());
        assert!(check_metadata(METADATA, &["nope"], &[]).is_err());
    }

    #[test]
    fn the_drivers_dependencies_are_all_allowed() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let r = check(&root).unwrap();
        assert!(r.not_allowed.is_empty(), "{r:?}");
        assert!(r.external.iter().any(|e| e == "zerocopy"), "{r:?}");
    }
}
