//! The drivers of `drivers/drivers.toml`, as the audit reads them: its own reader, since the
//! audit links no crate it audits (the `manifest` crate is one).

use serde::Deserialize;
use std::path::Path;

/// One `[[driver]]` of the manifest: what the audit needs of it.
#[derive(Debug, Clone, Deserialize)]
pub struct Driver {
    pub name: String,
    pub language: String,
    /// How to run it (`{safenic}`, `{mode}` and `{isa}` stand in): for a JIT driver.
    pub command: String,
    #[serde(default)]
    pub sources: Vec<String>,
    /// Its binary per model (`{mode}` and `{isa}` stand in).
    pub binary: Option<String>,
    pub main_loop: Option<String>,
    pub hot_loop_cold_calls: Option<Vec<String>>,
    #[serde(default)]
    pub perf_map: bool,
}

impl Driver {
    /// Its command's words: `{safenic}` replaced by `safenic`, `{isa}` by `isa`, and every
    /// relative path (a word with a `/`: the program, or the program a runtime runs) made
    /// absolute against `root`; `{mode}` is left for the caller.
    pub fn command_words(&self, root: &Path, safenic: &Path, isa: &str) -> Vec<String> {
        let words = self.command.split_whitespace();
        let words = words.map(|w| w.replace("{isa}", isa).replace("{safenic}", &safenic.display().to_string()));
        words
            .map(
                |w| if w.contains('/') && !w.starts_with(['/', '-']) { root.join(&w).display().to_string() } else { w },
            )
            .collect()
    }
}

#[derive(Deserialize)]
struct Manifest {
    driver: Vec<Driver>,
}

/// The manifest's path in a repository.
pub const MANIFEST: &str = "drivers/drivers.toml";

/// Every driver of the manifest under `root`.
pub fn load(root: &Path) -> Result<Vec<Driver>, String> {
    let path = root.join(MANIFEST);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("reading {}: {e}: pass the repository with --root", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The drivers of a manifest's text.
pub fn parse(text: &str) -> Result<Vec<Driver>, String> {
    let m: Manifest = toml::from_str(text).map_err(|e| e.to_string().lines().next().unwrap_or("").to_string())?;
    Ok(m.driver)
}

/// The x86-64 levels a manifest's `{isa}` may stand for.
pub const LEVELS: [&str; 4] = ["x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"];

/// Checks that every model's binary of every driver with one is built for `isa`: one line
/// naming what to build if not.
pub fn check_built(root: &Path, drivers: &[Driver], isa: &str) -> Result<(), String> {
    if !LEVELS.contains(&isa) {
        return Err(format!("--isa {isa}: give one of {}", LEVELS.join(", ")));
    }
    for binary in drivers.iter().filter_map(|d| d.binary.as_ref()) {
        for mode in crate::sizes::MODES {
            let path = binary.replace("{isa}", isa).replace("{mode}", mode);
            if !root.join(&path).exists() {
                return Err(format!("{path} is missing: build the drivers for {isa} first (`make build ISA={isa}`)"));
            }
        }
    }
    Ok(())
}
