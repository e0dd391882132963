//! The paper's Table 2: lines of code per driver, and x86 instructions in each main loop.

use crate::drivers::Driver;
use crate::elf::Binary;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The models every driver implements, in the table's column order.
pub const MODES: [&str; 3] = ["restricted", "const", "flexible"];

/// Where a driver's main loops are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoopCode {
    /// In a binary per model, relative to the repository, for the audit's instruction-set
    /// level; `{mode}` is the model.
    Binary(String),
    /// JIT-compiled: only in the running driver, which its manifest `command` starts
    /// (`safenic-audit jit` reads it).
    Jit,
}

/// What the table needs of one driver.
#[derive(Debug, Clone)]
pub struct TableDriver {
    /// The row's label.
    pub label: String,
    /// Source files and folders, relative to the repository.
    pub sources: Vec<String>,
    pub code: LoopCode,
    /// The main loop's symbol (a JIT's method, `Namespace.Type::Method`); `{mode}` is the model.
    pub main_loop: String,
    /// If the main loops are audited for run-time checks: the callees not followed.
    pub hot_loop_cold_calls: Option<Vec<String>>,
}

/// The drivers of the table: every manifest entry with a `main_loop` in a `binary` (built for
/// `isa`) or a perf map.
pub fn table_of(drivers: &[Driver], isa: &str) -> Vec<TableDriver> {
    drivers
        .iter()
        .filter_map(|d| {
            let code = match &d.binary {
                Some(b) => LoopCode::Binary(b.replace("{isa}", isa)),
                None if d.perf_map => LoopCode::Jit,
                None => return None,
            };
            Some(TableDriver {
                label: format!("{} ({})", d.name, d.language),
                sources: d.sources.clone(),
                code,
                main_loop: d.main_loop.clone()?,
                hot_loop_cold_calls: d.hot_loop_cold_calls.clone(),
            })
        })
        .collect()
}

/// A row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct SizeRow {
    pub driver: String,
    pub lines_of_code: usize,
    /// Model → x86 instructions of each compiled instance of its main loop; a model whose
    /// binary is not built is missing. For a JIT driver, one figure: the loop and the methods
    /// it calls per packet, which the JIT did not inline.
    pub loops: BTreeMap<String, Vec<usize>>,
    pub jit: bool,
}

/// The rows of `drivers` whose binaries exist under `root`, and of the JIT drivers audited
/// running (`jit`: label → model → instructions).
pub fn size_table(
    root: &Path,
    drivers: &[TableDriver],
    jit: &BTreeMap<String, BTreeMap<String, usize>>,
) -> Vec<SizeRow> {
    drivers
        .iter()
        .filter_map(|d| {
            let mut loops = BTreeMap::new();
            let mut binaries: BTreeMap<PathBuf, Option<Binary>> = BTreeMap::new();
            for mode in MODES {
                let count = match &d.code {
                    LoopCode::Binary(b) => {
                        let path = root.join(b.replace("{mode}", mode));
                        let binary = binaries.entry(path.clone()).or_insert_with(|| Binary::read(&path).ok());
                        let Some(binary) = binary else { continue };
                        let name = d.main_loop.replace("{mode}", mode);
                        binary.named(&name).map(|f| f.instructions.len()).collect()
                    }
                    LoopCode::Jit => match jit.get(&d.label).and_then(|m| m.get(mode)) {
                        Some(&n) => vec![n],
                        None => continue,
                    },
                };
                loops.insert(mode.to_string(), count);
            }
            (!loops.is_empty()).then(|| SizeRow {
                driver: d.label.clone(),
                lines_of_code: lines_of_code(&files_of(root, &d.sources)),
                loops,
                jit: d.code == LoopCode::Jit,
            })
        })
        .collect()
}

/// The source files named by `sources` (files, or folders whose files, at any depth, count).
pub fn files_of(root: &Path, sources: &[String]) -> Vec<PathBuf> {
    sources
        .iter()
        .flat_map(|s| {
            let p = root.join(s);
            if p.is_dir() {
                files_under(&p)
            } else {
                vec![p]
            }
        })
        .collect()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for p in entries.filter_map(|e| e.ok()).map(|e| e.path()) {
            if p.is_dir() {
                stack.push(p);
            } else if p.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Lines of code: non-blank lines that are not only a comment (`//` and `/* */` of Rust, C
/// and C#, `--` of Ada), up to a file's test module.
pub fn lines_of_code(files: &[PathBuf]) -> usize {
    files
        .iter()
        .filter_map(|f| {
            let ada = f.extension().is_some_and(|x| x == "ads" || x == "adb" || x == "gpr");
            std::fs::read_to_string(f).ok().map(|text| (ada, text))
        })
        .map(|(ada, text)| {
            text.lines()
                .take_while(|l| l.trim() != "#[cfg(test)]")
                .map(str::trim)
                .filter(|l| {
                    let comment = if ada {
                        l.starts_with("--")
                    } else {
                        l.starts_with("//") || l.starts_with("/*") || l.starts_with('*')
                    };
                    !l.is_empty() && !comment
                })
                .count()
        })
        .sum()
}
