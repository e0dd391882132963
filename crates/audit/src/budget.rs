//! The unsafe budget: per crate of the workspace, its unsafe code as [`crate::unsafe_code`]
//! finds it. Only the two rooms may have any; every other crate must also forbid it at its
//! roots, so that the compiler refuses what a later change adds.

use crate::unsafe_code::{scan, UnsafeKind};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Crates allowed to contain unsafe code: the trusted kernel and the OS boundary, and the
/// crates whose own FFI needs it ([`FFI_ROOMS`]).
pub const UNSAFE_ROOMS: [&str; 4] = ["invariants", "platform", "dpdk", "isolation"];

/// Rooms for a C library's FFI, not linked into the drivers: unsafe code only in their `src/`
/// (the library and its safe API); their tests and examples are users of that API.
pub const FFI_ROOMS: [&str; 2] = ["dpdk", "isolation"];

/// Unsafe code of one crate.
#[derive(Debug, Clone, Serialize)]
pub struct CrateBudget {
    pub name: String,
    /// Unsafe blocks and impls, and the lines inside them.
    pub unsafe_blocks: usize,
    pub unsafe_lines: usize,
    /// Every kind of unsafe code, counted.
    pub sites: BTreeMap<String, usize>,
    /// `file:line` of blocks and impls without a `// SAFETY:` comment right above.
    pub undocumented: Vec<String>,
    /// `file:line kind` of unsafe code in a crate that may not have any.
    pub not_allowed: Vec<String>,
    /// Files that did not parse (their unsafe code cannot be counted).
    pub unparsed: Vec<String>,
    /// Whether every crate root (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`) forbids unsafe
    /// code; required outside the rooms.
    pub forbids_unsafe_code: bool,
    pub allowed: bool,
}

impl CrateBudget {
    pub fn passed(&self) -> bool {
        self.undocumented.is_empty()
            && self.not_allowed.is_empty()
            && self.unparsed.is_empty()
            && (self.allowed || self.forbids_unsafe_code)
    }
}

/// The budget of every crate under `root/crates`.
pub fn unsafe_budget(root: &Path) -> Result<Vec<CrateBudget>, String> {
    let crates = root.join("crates");
    let mut names: Vec<String> = std::fs::read_dir(&crates)
        .map_err(|e| format!("reading {}: {e} (run from the repository root or pass --root)", crates.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("Cargo.toml").exists())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    names.iter().map(|name| crate_budget(root, name)).collect()
}

fn crate_budget(root: &Path, name: &str) -> Result<CrateBudget, String> {
    let dir = root.join("crates").join(name);
    let allowed = UNSAFE_ROOMS.contains(&name);
    let mut b = CrateBudget {
        name: name.to_string(),
        unsafe_blocks: 0,
        unsafe_lines: 0,
        sites: BTreeMap::new(),
        undocumented: Vec::new(),
        not_allowed: Vec::new(),
        unparsed: Vec::new(),
        forbids_unsafe_code: true,
        allowed,
    };
    for file in rust_files(&dir) {
        let allowed = allowed && (!FFI_ROOMS.contains(&name) || file.starts_with(dir.join("src")));
        let text = std::fs::read_to_string(&file).map_err(|e| format!("reading {}: {e}", file.display()))?;
        let rel = file.strip_prefix(root).unwrap_or(&file).display().to_string();
        let sites = match scan(&text) {
            Ok(s) => s,
            Err(e) => {
                b.unparsed.push(format!("{rel}: {e}"));
                continue;
            }
        };
        for s in sites {
            *b.sites.entry(s.kind.describe().to_string()).or_default() += 1;
            if matches!(s.kind, UnsafeKind::Block | UnsafeKind::Impl) {
                b.unsafe_blocks += 1;
                b.unsafe_lines += s.lines;
            }
            if s.kind.needs_safety_comment() && !s.documented {
                b.undocumented.push(format!("{rel}:{}", s.line));
            }
            if !allowed {
                b.not_allowed.push(format!("{rel}:{} {}", s.line, s.kind.describe()));
            }
        }
        if is_crate_root(&dir, &file) && !forbids_unsafe_code(&text) {
            b.forbids_unsafe_code = false;
        }
    }
    Ok(b)
}

/// Whether `file` is the root of a library or binary target of the crate in `dir`.
fn is_crate_root(dir: &Path, file: &Path) -> bool {
    let src = dir.join("src");
    file == src.join("lib.rs") || file == src.join("main.rs") || file.parent() == Some(&src.join("bin"))
}

/// Whether the file has `#![forbid(unsafe_code)]` among its inner attributes.
fn forbids_unsafe_code(text: &str) -> bool {
    let Ok(file) = syn::parse_file(text) else { return false };
    file.attrs.iter().any(|a| {
        a.path().is_ident("forbid")
            && a.parse_args_with(syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated)
                .is_ok_and(|lints| lints.iter().any(|l| l.is_ident("unsafe_code")))
    })
}

/// Every `.rs` file below `dir`, except build output.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.filter_map(|e| e.ok()) {
            let p = e.path();
            if p.is_dir() && p.file_name().is_some_and(|n| n != "target") {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
