//! The paper's Table 2: lines of code per driver, and x86 instructions in each main loop.

use crate::budget::rust_files;
use crate::elf::Binary;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The models every driver implements, in the table's column order.
pub const MODES: [&str; 3] = ["restricted", "const", "flexible"];

/// What the table needs of one driver.
#[derive(Debug, Clone)]
pub struct TableDriver {
    /// The row's label.
    pub label: String,
    /// Source files and folders, relative to the repository.
    pub sources: Vec<String>,
    /// The binary of a model, relative to the repository, for this program's instruction-set
    /// level; `{mode}` is the model.
    pub binary: String,
    /// The main loop's symbol; `{mode}` is the model.
    pub main_loop: String,
    /// If the main loops are audited for run-time checks: the callees not followed.
    pub hot_loop_cold_calls: Option<Vec<String>>,
}

/// The drivers of the table: every manifest entry with a `binary` and a `main_loop`.
pub fn table_of(m: &manifest::Manifest) -> Vec<TableDriver> {
    m.drivers
        .iter()
        .filter_map(|d| {
            Some(TableDriver {
                label: format!("{} ({})", d.name, d.language),
                sources: d.sources.clone(),
                binary: d.binary.as_deref().map(manifest::isa::resolve)?,
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
    /// binary is not built is missing.
    pub loops: BTreeMap<String, Vec<usize>>,
}

/// The rows of `drivers` whose binaries exist under `root`.
pub fn size_table(root: &Path, drivers: &[TableDriver]) -> Vec<SizeRow> {
    drivers
        .iter()
        .filter_map(|d| {
            let mut loops = BTreeMap::new();
            let mut binaries: BTreeMap<PathBuf, Option<Binary>> = BTreeMap::new();
            for mode in MODES {
                let path = root.join(d.binary.replace("{mode}", mode));
                let binary = binaries.entry(path.clone()).or_insert_with(|| Binary::read(&path).ok());
                let Some(binary) = binary else { continue };
                let name = d.main_loop.replace("{mode}", mode);
                loops.insert(mode.to_string(), binary.named(&name).map(|f| f.instructions.len()).collect());
            }
            (!loops.is_empty()).then(|| SizeRow {
                driver: d.label.clone(),
                lines_of_code: lines_of_code(&files_of(root, &d.sources)),
                loops,
            })
        })
        .collect()
}

/// The source files named by `sources` (files, or folders whose files count).
pub fn files_of(root: &Path, sources: &[String]) -> Vec<PathBuf> {
    sources
        .iter()
        .flat_map(|s| {
            let p = root.join(s);
            if p.is_dir() {
                let mut v: Vec<PathBuf> = std::fs::read_dir(&p)
                    .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_file()).collect())
                    .unwrap_or_default();
                v.extend(rust_files(&p).into_iter().filter(|f| f.parent() != Some(&p)));
                v.sort();
                v.dedup();
                v
            } else {
                vec![p]
            }
        })
        .collect()
}

/// Lines of code: non-blank lines that are not only a comment (`//` and `/* */` of Rust and C,
/// `--` of Ada), up to a file's test module.
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
