//! The driver's dependencies: a dependency's unsafe code is ours too, so the driver crates may
//! depend (transitively, for the code they run) only on crates listed here, each with the
//! reason it is trusted, and the driver binary only on these and those of
//! `tool_dependencies.rs`. Read with `cargo metadata`, for the platform the audit reads code of.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// The driver libraries (the 82599's, and virtio-net's and AF_XDP's, which build on the
/// 82599's queue API); their normal dependencies include the two rooms, `invariants` and
/// `platform`.
pub const DRIVER_CRATES: [&str; 3] = ["ixgbe", "virtio", "afxdp"];

/// The platform whose dependency graph is checked (the audit reads x86-64 Linux code).
pub const PLATFORM: &str = "x86_64-unknown-linux-gnu";

/// The path crates trusted as the driver's own, each only at `crates/<name>` of the workspace:
/// a path crate anywhere else, workspace member or not, is a dependency like any other.
pub const TRUSTED_PATH_CRATES: &[&str] = &["ixgbe", "virtio", "afxdp", "invariants", "platform"];

/// The one source allowed dependencies come from.
pub const CRATES_IO: &str = "registry+https://github.com/rust-lang/crates.io-index";

/// Crates outside the workspace that the driver may depend on, and why each is trusted.
pub const ALLOWED: &[(&str, &str)] = &[
    ("libc", "declarations of the C library's system calls and types, for platform"),
    ("rustix", "safe system calls (fstatfs, sched_setaffinity, kill, mount, prctl, waitpid, AF_XDP sockets)"),
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

/// Crates whose build script (`build.rs`, run on the build machine, able to compile and link
/// native code into the driver) was reviewed: each only detects the compiler's features and
/// links nothing (no crate in the graph may declare `links`).
pub const BUILD_SCRIPTS: &[(&str, &str)] = &[
    ("libc", "detects the rustc version and target for cfgs"),
    ("rustix", "detects the target and rustc features for cfgs"),
    ("zerocopy", "detects the rustc version for cfgs"),
    ("proc-macro2", "detects rustc features for cfgs, at build time"),
    ("quote", "detects the rustc version for cfgs, at build time"),
];

/// The exact versions reviewed, by the checksum Cargo.lock records (cargo verifies every
/// download against it): a crate of an allowed name with other contents is not allowed. After
/// `cargo update`, review the new version and pin its checksum here.
pub const PINNED: &[(&str, &str, &str)] = &[
    ("bitflags", "2.13.2", "3ded4057c258ba199e2d26386d3af3780957ecaee6c4ef4041c6b4b8b97c0b06"),
    ("errno", "0.3.15", "e35d6e78f4cebb90e51d543db8fe41528851d6deeef6ef21ebd4bfdc1e784776"),
    ("libc", "0.2.191", "65cd87c9a6d60536580b316ad985726104730a5151c99845f2490428ef91240a"),
    ("linux-raw-sys", "0.12.1", "32a66949e030da00e8c7d4434b251670a91556f4144941d37452769c25d58a53"),
    ("proc-macro2", "1.0.107", "985e7ec9bb745e6ce6535b544d84d6cd6f7ad8bd711c398938ae983b91a766d9"),
    ("quote", "1.0.47", "1fbf4db142a473a8d80c26bbf18454ed458bf8d26c8219c331daecfdbd079001"),
    ("rustix", "1.1.6", "e5e76742e5294153d4dde1207dbec5bdd81eef6fabdc0d2118babadabfd858aa"),
    ("syn", "2.0.119", "872831b642d1a07999a962a351ed35b955ea2cfc8f3862091e2a240a84f17297"),
    ("unicode-ident", "1.0.27", "a2c754d6c33795a1c324727428e5a7dedb5b06195f9890bdbcba760d3e246563"),
    ("zerocopy", "0.8.63", "e5fe1f8f1b06191a00962174c61aa5005e0bb391a6d80d07e24d115c01a92ed8"),
    ("zerocopy-derive", "0.8.63", "863ad3ac83293fb4d740aedbfdc9240dd8d1a50c1099acd76ce80ce7c7230c7f"),
];

#[derive(Deserialize)]
pub(crate) struct Metadata {
    pub packages: Vec<Package>,
    pub workspace_members: Vec<String>,
    pub resolve: Resolve,
    pub workspace_root: String,
}

#[derive(Deserialize)]
pub(crate) struct Package {
    pub id: String,
    pub name: String,
    pub version: String,
    pub source: Option<String>,
    pub manifest_path: String,
    #[serde(default)]
    pub targets: Vec<Target>,
    pub links: Option<String>,
}

impl Package {
    pub fn has_target(&self, kind: &str) -> bool {
        self.targets.iter().any(|t| t.kind.iter().any(|k| k == kind))
    }
}

#[derive(Deserialize)]
pub(crate) struct Target {
    pub kind: Vec<String>,
    #[serde(default)]
    pub src_path: String,
}

#[derive(Deserialize)]
pub(crate) struct Resolve {
    pub nodes: Vec<Node>,
}

#[derive(Deserialize)]
pub(crate) struct Node {
    pub id: String,
    pub deps: Vec<NodeDep>,
}

#[derive(Deserialize)]
pub(crate) struct NodeDep {
    pub pkg: String,
    pub dep_kinds: Vec<DepKind>,
}

#[derive(Deserialize)]
pub(crate) struct DepKind {
    /// `None` for a normal dependency, `dev` or `build` otherwise.
    pub kind: Option<String>,
}

/// `cargo metadata` of the workspace at `root` for [`PLATFORM`], with `Cargo.lock` as it is
/// (`--locked`: a lock that would change is an error): its JSON and the lock's text.
pub(crate) fn metadata(root: &Path) -> Result<(String, String), String> {
    let out = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--locked", "--filter-platform", PLATFORM, "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .current_dir(root)
        .output()
        .map_err(|e| format!("running cargo metadata: {e} (the audit needs cargo on PATH)"))?;
    if !out.status.success() {
        return Err(format!("cargo metadata: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let lock = std::fs::read_to_string(root.join("Cargo.lock"))
        .map_err(|e| format!("reading Cargo.lock: {e} (run cargo metadata once to write it)"))?;
    Ok((String::from_utf8_lossy(&out.stdout).into_owned(), lock))
}

/// What the check found for one set of root crates.
#[derive(Debug, Clone, Serialize)]
pub struct DependencyReport {
    /// The crates whose graph was checked.
    pub roots: Vec<String>,
    /// Every crate outside the trusted path crates the driver crates depend on.
    pub external: Vec<String>,
    /// Those not allowed (by name, source and pinned checksum), with the driver crate that
    /// pulls each in and why.
    pub not_allowed: Vec<String>,
}

/// What the allowlist is checked against.
pub struct Allowlist<'a> {
    pub trusted_path_crates: &'a [&'a str],
    pub build_scripts: &'a [(&'a str, &'a str)],
    pub allowed: &'a [(&'a str, &'a str)],
    pub pinned: &'a [(&'a str, &'a str, &'a str)],
}

/// The project's own allowlist.
pub const ALLOWLIST: Allowlist<'static> = Allowlist {
    trusted_path_crates: TRUSTED_PATH_CRATES,
    build_scripts: BUILD_SCRIPTS,
    allowed: ALLOWED,
    pinned: PINNED,
};

/// Runs `cargo metadata` on the workspace at `root` and checks the checksums of `Cargo.lock`
/// and the dependencies of the driver crates against [`ALLOWLIST`], and those of the driver
/// binary against it and the binary's own lists (`tool_dependencies.rs`).
pub fn check(root: &Path) -> Result<Vec<DependencyReport>, String> {
    let (json, lock) = metadata(root)?;
    use crate::tool_dependencies as tool;
    let rooms: Vec<&str> = tool::TOOL_ROOMS.iter().map(|(name, _)| *name).collect();
    let path = [TRUSTED_PATH_CRATES, tool::TOOL_PATH_CRATES, &rooms].concat();
    let build_scripts = [BUILD_SCRIPTS, tool::TOOL_BUILD_SCRIPTS].concat();
    let allowed = [ALLOWED, tool::TOOL_ALLOWED].concat();
    let pinned = [PINNED, tool::TOOL_PINNED].concat();
    let binary =
        Allowlist { trusted_path_crates: &path, build_scripts: &build_scripts, allowed: &allowed, pinned: &pinned };
    Ok(vec![
        check_metadata(&json, &lock, &DRIVER_CRATES, &ALLOWLIST)?,
        check_metadata(&json, &lock, &tool::BINARY_CRATES, &binary)?,
    ])
}

/// Checksums in a `Cargo.lock`, by (name, version, source).
pub(crate) fn lock_checksums(lock: &str) -> BTreeMap<(String, String, String), String> {
    let mut sums = BTreeMap::new();
    for package in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            package.lines().find_map(|l| l.strip_prefix(key)?.trim().strip_prefix("= \"")?.strip_suffix('"'))
        };
        if let (Some(n), Some(v), Some(s), Some(c)) =
            (field("name "), field("version "), field("source "), field("checksum "))
        {
            sums.insert((n.to_string(), v.to_string(), s.to_string()), c.to_string());
        }
    }
    sums
}

/// [`check`] on `cargo metadata` output and the text of `Cargo.lock`.
pub fn check_metadata(json: &str, lock: &str, roots: &[&str], list: &Allowlist) -> Result<DependencyReport, String> {
    let m: Metadata = serde_json::from_str(json).map_err(|e| format!("reading cargo metadata: {e}"))?;
    let packages: BTreeMap<&str, &Package> = m.packages.iter().map(|p| (p.id.as_str(), p)).collect();
    let nodes: BTreeMap<&str, &Node> = m.resolve.nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    let sums = lock_checksums(lock);
    let trusted_path = |p: &Package| {
        let expected = Path::new(&m.workspace_root).join("crates").join(&p.name).join("Cargo.toml");
        p.source.is_none()
            && list.trusted_path_crates.contains(&p.name.as_str())
            && Path::new(&p.manifest_path) == expected
    };
    let mut external = BTreeSet::new();
    let mut not_allowed = BTreeSet::new();
    for root in roots {
        let id = m
            .workspace_members
            .iter()
            .find(|id| packages.get(id.as_str()).is_some_and(|p| p.name == *root))
            .ok_or_else(|| format!("driver crate {root} is not in the workspace"))?;
        let mut seen = BTreeSet::new();
        let mut stack = vec![id.as_str()];
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
        for id in seen {
            let p = packages.get(id).ok_or_else(|| format!("cargo metadata lists no package {id}"))?;
            let builds = p.targets.iter().any(|t| t.kind.iter().any(|k| k == "custom-build"));
            if builds && !list.build_scripts.iter().any(|(n, _)| *n == p.name) {
                not_allowed.insert(format!("{} (through {root}): has a build script that is not on the list", p.name));
            }
            if let Some(native) = &p.links {
                not_allowed.insert(format!("{} (through {root}): links native library {native}", p.name));
            }
            if trusted_path(p) {
                continue;
            }
            external.insert(p.name.clone());
            let why = match &p.source {
                None => Some(format!(
                    "a path crate at {}; only {} at crates/<name> are trusted as path crates",
                    p.manifest_path,
                    list.trusted_path_crates.join(", ")
                )),
                Some(s) if s != CRATES_IO || !list.allowed.iter().any(|(a, _)| *a == p.name) => {
                    Some(format!("from {s}: not on the allowlist of crates.io crates"))
                }
                Some(s) => {
                    let sum = sums.get(&(p.name.clone(), p.version.clone(), s.clone()));
                    let pinned = list
                        .pinned
                        .iter()
                        .any(|(n, v, c)| *n == p.name && *v == p.version && Some(&c.to_string()) == sum);
                    (!pinned).then(|| {
                        format!(
                            "{} with checksum {} in Cargo.lock is not a pinned version: review it, then pin it",
                            p.version,
                            sum.map_or("(none)", String::as_str)
                        )
                    })
                }
            };
            if let Some(why) = why {
                not_allowed.insert(format!("{} (through {root}): {why}", p.name));
            }
        }
    }
    Ok(DependencyReport {
        roots: roots.iter().map(|r| r.to_string()).collect(),
        external: external.into_iter().collect(),
        not_allowed: not_allowed.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const IO: &str = CRATES_IO;

    /// A workspace at /ws of `drv` and `cli`: drv needs `libc` and, through `helper` (a path
    /// crate outside crates/), `leftpad`; only a dev-dependency brings `mock`; `cli` alone
    /// needs `clap`.
    fn metadata(libc_source: &str, helper_path: &str) -> String {
        format!(
            r#"{{
      "workspace_root": "/ws",
      "packages": [
        {{"id": "drv", "name": "drv", "version": "0.1.0", "source": null, "manifest_path": "/ws/crates/drv/Cargo.toml"}},
        {{"id": "cli", "name": "cli", "version": "0.1.0", "source": null, "manifest_path": "/ws/crates/cli/Cargo.toml"}},
        {{"id": "helper", "name": "helper", "version": "0.1.0", "source": null, "manifest_path": "{helper_path}"}},
        {{"id": "libc", "name": "libc", "version": "0.2.1", "source": {libc_source}, "manifest_path": "/r/libc/Cargo.toml"}},
        {{"id": "leftpad", "name": "leftpad", "version": "1.0.0", "source": "{IO}", "manifest_path": "/r/l/Cargo.toml"}},
        {{"id": "mock", "name": "mock", "version": "1.0.0", "source": "{IO}", "manifest_path": "/r/m/Cargo.toml"}},
        {{"id": "clap", "name": "clap", "version": "4.0.0", "source": "{IO}", "manifest_path": "/r/c/Cargo.toml"}}
      ],
      "workspace_members": ["drv", "cli", "helper"],
      "resolve": {{"nodes": [
        {{"id": "drv", "deps": [
          {{"pkg": "helper", "dep_kinds": [{{"kind": null}}]}},
          {{"pkg": "libc", "dep_kinds": [{{"kind": null}}]}},
          {{"pkg": "mock", "dep_kinds": [{{"kind": "dev"}}]}}]}},
        {{"id": "helper", "deps": [{{"pkg": "leftpad", "dep_kinds": [{{"kind": null}}]}}]}},
        {{"id": "cli", "deps": [{{"pkg": "clap", "dep_kinds": [{{"kind": null}}]}}]}},
        {{"id": "libc", "deps": []}}, {{"id": "leftpad", "deps": []}}, {{"id": "mock", "deps": []}},
        {{"id": "clap", "deps": []}}
      ]}}
    }}"#
        )
    }

    fn lock(libc_sum: &str) -> String {
        format!(
            "[[package]]\nname = \"libc\"\nversion = \"0.2.1\"\nsource = \"{IO}\"\nchecksum = \"{libc_sum}\"\n\n\
             [[package]]\nname = \"leftpad\"\nversion = \"1.0.0\"\nsource = \"{IO}\"\nchecksum = \"bb\"\n"
        )
    }

    const TRUSTED: &[&str] = &["drv", "helper"];
    const ALLOW: &[(&str, &str)] = &[("libc", "system calls"), ("leftpad", "padding")];
    const PINS: &[(&str, &str, &str)] = &[("libc", "0.2.1", "aa"), ("leftpad", "1.0.0", "bb")];
    const BUILDS: &[(&str, &str)] = &[("libc", "cfgs")];
    const LIST: Allowlist<'static> =
        Allowlist { trusted_path_crates: TRUSTED, build_scripts: BUILDS, allowed: ALLOW, pinned: PINS };

    fn check_with(libc_source: &str, helper_path: &str, libc_sum: &str) -> DependencyReport {
        check_metadata(&metadata(libc_source, helper_path), &lock(libc_sum), &["drv"], &LIST).unwrap()
    }

    #[test]
    fn allowed_pinned_crates_io_dependencies_pass() {
        let r = check_with(&format!("\"{IO}\""), "/ws/crates/helper/Cargo.toml", "aa");
        assert_eq!(r.external, ["leftpad", "libc"], "dev-dependencies and other crates' do not count");
        assert!(r.not_allowed.is_empty(), "{r:?}");
        assert!(check_metadata(&metadata("null", "/x"), &lock("aa"), &["nope"], &LIST).is_err());
    }

    #[test]
    fn a_crate_that_borrows_an_allowed_name_is_refused() {
        // A path crate named libc (e.g. through [patch.crates-io]), another registry's libc,
        // and crates.io's libc with other contents than the pinned ones.
        let r = check_with("null", "/ws/crates/helper/Cargo.toml", "aa");
        assert!(r.not_allowed.iter().any(|n| n.starts_with("libc (through drv): a path crate")), "{r:?}");
        let r = check_with("\"registry+https://example.com/index\"", "/ws/crates/helper/Cargo.toml", "aa");
        assert!(r.not_allowed.iter().any(|n| n.contains("not on the allowlist")), "{r:?}");
        let r = check_with(&format!("\"{IO}\""), "/ws/crates/helper/Cargo.toml", "cc");
        assert!(r.not_allowed.iter().any(|n| n.contains("checksum cc")), "{r:?}");
    }

    #[test]
    fn a_build_script_or_native_library_off_the_list_is_refused() {
        let json = metadata(&format!("\"{IO}\""), "/ws/crates/helper/Cargo.toml").replace(
            r#""manifest_path": "/r/l/Cargo.toml""#,
            r#""manifest_path": "/r/l/Cargo.toml", "links": "evil", "targets": [{"kind": ["custom-build"]}]"#,
        );
        let r = check_metadata(&json, &lock("aa"), &["drv"], &LIST).unwrap();
        assert!(
            r.not_allowed.iter().any(|n| n == "leftpad (through drv): has a build script that is not on the list"),
            "{r:?}"
        );
        assert!(r.not_allowed.iter().any(|n| n == "leftpad (through drv): links native library evil"), "{r:?}");
    }

    #[test]
    fn a_trusted_name_outside_crates_is_any_other_dependency() {
        let r = check_with(&format!("\"{IO}\""), "/ws/elsewhere/helper/Cargo.toml", "aa");
        assert_eq!(r.not_allowed.len(), 1, "{r:?}");
        assert!(r.not_allowed[0].starts_with("helper (through drv): a path crate at /ws/elsewhere"), "{r:?}");
    }

    #[test]
    fn the_drivers_and_the_binarys_dependencies_are_all_allowed() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let [driver, binary] = <[DependencyReport; 2]>::try_from(check(&root).unwrap()).unwrap();
        assert_eq!(driver.roots, DRIVER_CRATES);
        assert!(driver.not_allowed.is_empty(), "{driver:?}");
        assert!(driver.external.iter().any(|e| e == "zerocopy"), "{driver:?}");
        assert!(!driver.external.iter().any(|e| e == "clap"), "the driver library links no command line: {driver:?}");
        assert_eq!(binary.roots, crate::tool_dependencies::BINARY_CRATES);
        assert!(binary.not_allowed.is_empty(), "{binary:?}");
        for linked in ["zerocopy", "clap", "plotters", "serde_json"] {
            assert!(binary.external.iter().any(|e| e == linked), "{linked}: {binary:?}");
        }
    }

    #[test]
    fn the_binarys_lists_do_not_widen_the_drivers() {
        // A crate allowed for the command line is refused in the driver library's graph.
        let json = metadata(&format!("\"{IO}\""), "/ws/crates/helper/Cargo.toml");
        let lock = lock("aa")
            + &format!("\n[[package]]\nname = \"clap\"\nversion = \"4.0.0\"\nsource = \"{IO}\"\nchecksum = \"dd\"\n");
        let driver_json =
            json.replace(r#"{"pkg": "libc""#, r#"{"pkg": "clap", "dep_kinds": [{"kind": null}]}, {"pkg": "libc""#);
        let r = check_metadata(&driver_json, &lock, &["drv"], &LIST).unwrap();
        assert!(r.not_allowed.iter().any(|n| n.starts_with("clap (through drv)")), "{r:?}");
        let allowed = [ALLOW, &[("clap", "the command line")]].concat();
        let pinned = [PINS, &[("clap", "4.0.0", "dd")]].concat();
        let binary =
            Allowlist { trusted_path_crates: &["cli"], build_scripts: BUILDS, allowed: &allowed, pinned: &pinned };
        let r = check_metadata(&json, &lock, &["cli"], &binary).unwrap();
        assert_eq!((r.external.as_slice(), r.not_allowed.len()), (&["clap".to_string()][..], 0), "{r:?}");
    }
}
