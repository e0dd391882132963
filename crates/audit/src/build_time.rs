//! What runs when the workspace is built: every build script, every procedural macro, and
//! every crate either of them uses. Such code runs on the build machine, as whoever builds,
//! before any audit of what it produced; it can write any file (the audit's own binary among
//! them) or link native code into the driver. So before anything is built ([`crate::vet`]),
//! each crate of that closure must be one reviewed here: from crates.io at a version whose
//! `Cargo.lock` checksum is pinned in [`PINNED`], or a workspace crate whose build-time code
//! hashes to the digest pinned in [`WORKSPACE`]. Read with `cargo metadata` for x86-64 Linux,
//! the platform the workspace is built for.
//!
//! After `cargo update`, or a change to a workspace crate's build script or to a library a
//! build script uses, `safenic-audit vet` names each crate and its new checksum or digest:
//! review it, then pin it here.

use crate::dependencies::{lock_checksums, Metadata, Package, CRATES_IO};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates.io crates that run at build time: the build scripts and procedural macros of
/// the workspace's graph and everything they use (bindgen and clang-sys for dpdk's bindings,
/// cc and pkg-config for the C of dpdk and isolation, toml, serde and clap for the manifest
/// safenic's build script reads, syn, quote and proc-macro2 for the derives, and the feature
/// detection of libc, rustix, serde, zerocopy and their like), by name, version and checksum.
pub const PINNED: &[(&str, &str, &str)] = &[
    ("aho-corasick", "1.1.5", "c982642fa9e8606056828ee9a8505737230110bb1099153c79efe865c59d12ba"),
    ("anstream", "1.0.0", "824a212faf96e9acacdbd09febd34438f8f711fb84e09a8916013cd7815ca28d"),
    ("anstyle", "1.0.14", "940b3a0ca603d1eade50a4846a2afffd5ef57a9feac2c0e2ec2e14f9ead76000"),
    ("anstyle-parse", "1.0.0", "52ce7f38b242319f7cabaa6813055467063ecdc9d355bbb4ce0c68908cd8130e"),
    ("anstyle-query", "1.1.5", "40c48f72fd53cd289104fc64099abca73db4166ad86ea0b4341abe65af83dadc"),
    ("autocfg", "1.5.1", "f2032f911046de80f0a198e0901378627c33f59ea0ac00e363d481118bd70a53"),
    ("bindgen", "0.72.1", "993776b509cfb49c750f11b8f07a46fa23e0a1386ffc01fb1e7d343efc387895"),
    ("bitflags", "2.13.2", "3ded4057c258ba199e2d26386d3af3780957ecaee6c4ef4041c6b4b8b97c0b06"),
    ("cc", "1.11.3", "02f0e023adb368345ce0ca6cdfc0f24a06554468d0e8503e14a0841de79bfa69"),
    ("cexpr", "0.6.0", "6fac387a98bb7c37292057cffc56d62ecb629900026402633ae9160df93a8766"),
    ("cfg-if", "1.0.5", "4e7648175b45a9a48536d676f68d918270699102aa8dab5496df06904c914600"),
    ("clang-sys", "1.9.1", "157a8ba7b480713b56f4c09fd13fc3e0a22a5dfab8097ba61cbc5feef950788a"),
    ("clap", "4.6.7", "aa8876b300ab35ba921adea3dfd70157a46249b33f95c9084ae5709785478946"),
    ("clap_builder", "4.6.7", "ec0797fb7aeb1406c84efac526901f7ec3ead2124f946b494e72879d4b54704d"),
    ("clap_derive", "4.6.7", "f9c751b79415d4e559e3d1fcf128e09e720eb673a06d26cf6f392d37d75b66e0"),
    ("clap_lex", "1.1.1", "1c133bc6a41be0d194c306b5506d15e6feeea7b1d6604bd3f8310dfb2ca96486"),
    ("colorchoice", "1.0.5", "1d07550c9036bf2ae0c684c4297d503f838287c83c53686d05370d0e139ae570"),
    ("crc32fast", "1.5.5", "2b929dd2a135771f40afabd1073f85eed59c800b7c61901e5c254270497dad64"),
    ("either", "1.19.0", "0e9c71c2167ca323c882b99918929403426e2373ea17242ff5653e0d5e1058be"),
    ("equivalent", "1.0.3", "00d174d5400e5e8fd687ad1049e2f578285fa914201b1af7e8b112a4546bd826"),
    ("find-msvc-tools", "0.1.15", "1c66915cc5391097de7a2b0b972e8505aa33c0df401fd3a6811dbdb32881ba48"),
    ("glob", "0.3.4", "e4eba85ea1d0a966a983acd07deee566e67395d2d96b6fb39e62b5a833f1eb0b"),
    ("hashbrown", "0.17.1", "ed5909b6e89a2db4456e54cd5f673791d7eca6732202bbf2a9cc504fe2f9b84a"),
    ("heapless", "0.8.0", "0bfb9eb618601c89945a70e254898da93b13be0388091d42117462b265bb3fad"),
    ("heck", "0.5.0", "2304e00983f87ffb38b55b444b5e3b60a884b5d30c0fca7d82fe33449bbe55ea"),
    ("indexmap", "2.14.2", "cc4e190f5d26ca7051642629da2c52fc03bde85a03197c99408dcd291734c855"),
    ("is_terminal_polyfill", "1.70.2", "a6cb138bb79a146c1bd460005623e142ef0181e3d0219cb493e02f7d08a35695"),
    ("itertools", "0.13.0", "413ee7dfc52ee1a4949ceeb7dbc8a33f2d6c088194d9f922fb8318faf1f01186"),
    ("libc", "0.2.191", "65cd87c9a6d60536580b316ad985726104730a5151c99845f2490428ef91240a"),
    ("libloading", "0.8.9", "d7c4b02199fee7c5d21a5ae7d8cfa79a6ef5bb2fc834d6e9058e89c825efdc55"),
    ("memchr", "2.8.3", "cf8baf1c55e62ffcace7a9f06f4bd9cd3f0c4beb022d3b367256b91b87513d98"),
    ("minimal-lexical", "0.2.1", "68354c5c6bd36d73ff3feceb05efa59b6acb7626617f4962be322a825e61f79a"),
    ("nom", "7.1.3", "d273983c5a657a70a3e8f2a01329822f3b8c8172b73826411a55751e404a0a4a"),
    ("num-traits", "0.2.19", "071dfc062690e90b734c0b2273ce72ad0ffa95f0c74596bc250dcfd960262841"),
    ("pkg-config", "0.3.34", "f6b464fbc74e149a392436b17d523f769e057cb6877f6a5c4618bc6f11800548"),
    ("proc-macro2", "1.0.107", "985e7ec9bb745e6ce6535b544d84d6cd6f7ad8bd711c398938ae983b91a766d9"),
    ("quote", "1.0.47", "1fbf4db142a473a8d80c26bbf18454ed458bf8d26c8219c331daecfdbd079001"),
    ("regex", "1.13.2", "9807af0e638c12e753aa1b4e601791bf2a8f71274023c8bbeec12fc149950857"),
    ("regex-automata", "0.4.19", "41d60ef07df457506a0a1a2073112eb4aae5733dbd2813c3da77d1b0fd441158"),
    ("regex-syntax", "0.8.12", "d902046e6a28a1e4c3cab97258a0ce11e994903f01c2d97a9447a0b3df85f4f6"),
    ("rustc-hash", "2.1.3", "6b1e7f9a428571be2dc5bc0505c13fb6bf936822b894ec87abf8a08a4e51742d"),
    ("rustix", "1.1.6", "e5e76742e5294153d4dde1207dbec5bdd81eef6fabdc0d2118babadabfd858aa"),
    ("serde", "1.0.229", "4148590afebada386688f18773da617792bf2ef03ffc1e4cbd2b1d45b023e0ba"),
    ("serde_core", "1.0.229", "67dca2c9c51e58a4791a4b1ed58308b39c64224d349a935ab5039aa360942a48"),
    ("serde_derive", "1.0.229", "e7a5d71263a5a7d47b41f6b3f06ba276f10cc18b0931f1799f710578e2309348"),
    ("serde_json", "1.0.154", "e7e9cc8b1b85264074fbcc02a88680c4096b1e47df8f739dceb03bf482f04bd6"),
    ("serde_spanned", "0.6.9", "bf41e0cfaf7226dca15e8197172c295a782857fcb97fad1808a166870dee75a3"),
    ("shlex", "1.3.0", "0fda2ff0d084019ba4d7c6f371c95d8fd75ce3524c3cb8fb653a3023f6323e64"),
    ("shlex", "2.0.1", "f8fadd59c855ef2080decdef8ff161eb6661b86933c9d82e5ba29dc602a55aba"),
    ("smoltcp", "0.12.0", "dad095989c1533c1c266d9b1e8d70a1329dd3723c3edac6d03bbd67e7bf6f4bb"),
    ("strsim", "0.11.1", "7da8b5736845d9f2fcb837ea5d9e2628564b3b043a70948a3f0b778838c5fb4f"),
    ("syn", "2.0.119", "872831b642d1a07999a962a351ed35b955ea2cfc8f3862091e2a240a84f17297"),
    ("syn", "3.0.9", "d78c8dee4c7bf0e14673097256fed6142ce9d3b85a408189d07482442145823b"),
    ("toml", "0.8.23", "dc1beb996b9d83529a9e75c17a1686767d148d70663143c7854d8b4a09ced362"),
    ("toml_datetime", "0.6.11", "22cddaf88f4fbc13c51aebbf5f8eceb5c7c5a9da2ac40a13519eb5b0a0e8f11c"),
    ("toml_edit", "0.22.27", "41fe8c660ae4257887cf66394862d21dbca4a6ddd26f04a3560410406a2f819a"),
    ("unicode-ident", "1.0.27", "a2c754d6c33795a1c324727428e5a7dedb5b06195f9890bdbcba760d3e246563"),
    ("utf8parse", "0.2.2", "06abde3611657adf66d383f00b093d7faecc7fa57071cce2578660c9f1010821"),
    ("winnow", "0.7.15", "df79d97927682d2fd8adb29682d1140b343be4ac0f08fd68b7765d9c059d3945"),
    ("zerocopy", "0.8.63", "e5fe1f8f1b06191a00962174c61aa5005e0bb391a6d80d07e24d115c01a92ed8"),
    ("zerocopy-derive", "0.8.63", "863ad3ac83293fb4d740aedbfdc9240dd8d1a50c1099acd76ce80ce7c7230c7f"),
    ("zmij", "1.0.23", "29666d0abbfad1e3dc4dcf6144730dd3a3ab225bbbdac83319345b1b44ccfc1b"),
];

/// The workspace crates whose code runs at build time, and the SHA-256 of that code: for a
/// crate with a build script, the script; for a library a build script uses, its
/// `Cargo.toml` and every file under `src/` ([`digest`]).
pub const WORKSPACE: &[(&str, &str)] = &[
    ("dpdk", "0b0e54f7670a52e15c083baa154d828395ed0f50eda254919730c5b89b696c97"),
    ("isolation", "5a8384f65c2bb9ecbc2e0b8d677274b8b803b3f1bf92ae44edaa6dfed45e1c63"),
    ("safenic", "059fb621d1d22807e56a32bac66390129d38b868b7799b1d5705157005a7f313"),
    ("manifest", "8c7a39b4c82f02fccff67e545dc97fadd97596862015fc4be405c3b9532395e3"),
    ("cli", "0194642aede4be8822e47d654da2a00d31ab45e3d834cc0a7fd9ac64e3ea1a33"),
];

/// Dependency edges: a crate's build dependencies run in its build script, and a procedural
/// macro's normal dependencies in the compiler.
fn runs_at_build_time(m: &Metadata) -> BTreeMap<&str, BTreeSet<String>> {
    let packages: BTreeMap<&str, &Package> = m.packages.iter().map(|p| (p.id.as_str(), p)).collect();
    let nodes: BTreeMap<&str, _> = m.resolve.nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    let mut why: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let mut stack: Vec<(&str, String)> = Vec::new();
    for (id, p) in &packages {
        if !nodes.contains_key(id) {
            continue; // not built for this platform
        }
        if p.has_target("custom-build") {
            why.entry(id).or_default().insert("its build script".to_string());
            for d in &nodes[id].deps {
                if d.dep_kinds.iter().any(|k| k.kind.as_deref() == Some("build")) {
                    stack.push((d.pkg.as_str(), format!("{}'s build script uses it", p.name)));
                }
            }
        }
        if p.has_target("proc-macro") {
            stack.push((id, "a procedural macro".to_string()));
        }
    }
    while let Some((id, reason)) = stack.pop() {
        let Some(node) = nodes.get(id) else { continue };
        if !why.entry(id).or_default().insert(reason.clone()) {
            continue;
        }
        let name = packages.get(id).map_or("?", |p| p.name.as_str());
        for d in &node.deps {
            if d.dep_kinds.iter().any(|k| k.kind.is_none() || k.kind.as_deref() == Some("build")) {
                stack.push((d.pkg.as_str(), format!("{name} uses it at build time")));
            }
        }
    }
    why
}

/// Everything of the workspace's graph that runs at build time and is not pinned, as one line
/// each naming what to review.
pub(crate) fn check(root: &Path, m: &Metadata, lock: &str) -> Vec<String> {
    let sums = lock_checksums(lock);
    let packages: BTreeMap<&str, &Package> = m.packages.iter().map(|p| (p.id.as_str(), p)).collect();
    let mut findings = Vec::new();
    for (id, reasons) in runs_at_build_time(m) {
        let Some(p) = packages.get(id) else { continue };
        let why = reasons.into_iter().collect::<Vec<_>>().join("; ");
        let finding = match &p.source {
            Some(s) if s == CRATES_IO => {
                let sum = sums.get(&(p.name.clone(), p.version.clone(), s.clone())).map_or("(none)", String::as_str);
                let pinned = PINNED.iter().any(|(n, v, c)| *n == p.name && *v == p.version && *c == sum);
                (!pinned).then(|| {
                    format!(
                        "{} {} (checksum {sum}) runs at build time ({why}) and is not pinned in \
                         crates/audit/src/build_time.rs: review it, then pin it",
                        p.name, p.version
                    )
                })
            }
            Some(s) => Some(format!("{} from {s} runs at build time ({why}): only crates.io crates may", p.name)),
            None => workspace_finding(root, p, &why),
        };
        findings.extend(finding);
    }
    findings
}

/// A workspace crate's build-time code, unless it is the pinned one.
fn workspace_finding(root: &Path, p: &Package, why: &str) -> Option<String> {
    let home = root.join("crates").join(&p.name);
    if Path::new(&p.manifest_path) != home.join("Cargo.toml") {
        return Some(format!(
            "{} at {} runs at build time ({why}): only crates/<name> are workspace crates",
            p.name, p.manifest_path
        ));
    }
    let files = match p.targets.iter().find(|t| t.kind.iter().any(|k| k == "custom-build")) {
        Some(script) => {
            if let Err(e) = self_contained(Path::new(&script.src_path)) {
                return Some(format!("{}'s build script {e}: a build script is one file", p.name));
            }
            vec![PathBuf::from(&script.src_path)]
        }
        None => library_files(&home),
    };
    let digest = match digest(root, &files) {
        Ok(d) => d,
        Err(e) => return Some(format!("{}: {e}", p.name)),
    };
    let pinned = WORKSPACE.iter().any(|(n, d)| *n == p.name && *d == digest);
    (!pinned).then(|| {
        format!(
            "{}'s build-time code ({why}) has SHA-256 {digest}, not the one pinned in \
             crates/audit/src/build_time.rs: review it, then pin it",
            p.name
        )
    })
}

/// Refuses a build script that takes code from another file (`mod`, `include!`), which its
/// digest would not cover.
fn self_contained(script: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(script).map_err(|e| format!("cannot be read: {e}"))?;
    let file = syn::parse_file(&text).map_err(|e| format!("cannot be parsed: {e}"))?;
    if file.items.iter().any(|i| matches!(i, syn::Item::Mod(m) if m.content.is_none())) {
        return Err("declares a module in another file".to_string());
    }
    if text.contains("include!") {
        return Err("includes code from another file".to_string());
    }
    Ok(())
}

/// A library's `Cargo.toml` and every file under its `src/`.
fn library_files(home: &Path) -> Vec<PathBuf> {
    let mut files = vec![home.join("Cargo.toml")];
    let mut stack = vec![home.join("src")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for path in entries.filter_map(|e| e.ok()).map(|e| e.path()) {
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

/// SHA-256 over each file's path relative to `root` and its bytes, in path order.
pub fn digest(root: &Path, files: &[PathBuf]) -> Result<String, String> {
    let mut sorted: Vec<&PathBuf> = files.iter().collect();
    sorted.sort();
    let mut hash = Sha256::new();
    for f in sorted {
        let bytes = std::fs::read(f).map_err(|e| format!("reading {}: {e}", f.display()))?;
        hash.update(f.strip_prefix(root).unwrap_or(f).to_string_lossy().as_bytes());
        hash.update([0]);
        hash.update(&bytes);
        hash.update([0]);
    }
    Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
}
