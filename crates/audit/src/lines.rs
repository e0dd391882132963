//! Source lines of machine code, through the inlining chain, from the DWARF line tables
//! (the `addr2line` crate).

use std::collections::BTreeMap;
use std::path::Path;

/// For each address, the first `file:line` of this repository in its inlining chain
/// (innermost first), relative to the repository; else the innermost line.
pub fn source_lines(binary: &Path, addresses: &[u64]) -> Result<BTreeMap<u64, String>, String> {
    let mut map = BTreeMap::new();
    if addresses.is_empty() {
        return Ok(map);
    }
    let loader = addr2line::Loader::new(binary)
        .map_err(|e| format!("reading the debug information of {}: {e}", binary.display()))?;
    for &address in addresses {
        let mut chain = Vec::new();
        let mut frames = loader.find_frames(address).map_err(|e| format!("line tables at {address:#x}: {e}"))?;
        while let Ok(Some(frame)) = frames.next() {
            if let Some(l) = frame.location {
                if let (Some(file), Some(line)) = (l.file, l.line) {
                    chain.push(format!("{file}:{line}"));
                }
            }
        }
        if let Some(l) = chain.iter().find(|l| is_ours(l)).or(chain.first()) {
            map.insert(address, relative(l));
        }
    }
    Ok(map)
}

/// Whether a `file:line` is in this repository's crates or drivers (not the standard
/// library's, a dependency's or a language run-time's).
pub fn is_ours(line: &str) -> bool {
    (line.contains("/crates/")
        || line.starts_with("crates/")
        || line.contains("/drivers/")
        || line.starts_with("drivers/"))
        && !line.contains("/.cargo/")
        && !line.contains("/rustc/")
}

/// `…/crates/x/src/y.rs:12` → `crates/x/src/y.rs:12`; `…/drivers/ada/src/y.adb:3` →
/// `drivers/ada/src/y.adb:3`.
pub fn relative(line: &str) -> String {
    let at = ["crates/", "drivers/"].iter().filter_map(|d| line.find(d)).min();
    match at {
        Some(i) if is_ours(line) => line[i..].to_string(),
        _ => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_this_repository_are_made_relative() {
        assert_eq!(relative("/home/x/safenic/crates/ixgbe/src/agent.rs:12"), "crates/ixgbe/src/agent.rs:12");
        assert!(!is_ours("/root/.cargo/registry/src/x/crates/y.rs:1"));
        assert!(!is_ours("/rustc/abc/library/core/src/slice/index.rs:9"));
        assert_eq!(relative("/rustc/abc/library/core/src/x.rs:1"), "/rustc/abc/library/core/src/x.rs:1");
        assert_eq!(relative("/home/x/safenic/drivers/ada/src/fwd.adb:90"), "drivers/ada/src/fwd.adb:90");
    }
}
