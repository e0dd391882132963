//! The main loops of the drivers in a checked language other than Rust (manifest entries with
//! `hot_loop_cold_calls`, the Ada driver): each model's loop in its binary, and everything it
//! calls, through the same audit as the Rust hot paths. A call to a check routine of the
//! language's run-time (GNAT's `__gnat_rcheck_*`) is a finding, with its source line.

use crate::elf::Binary;
use crate::hot_paths::{audit_hot_paths, FunctionReport};
use crate::sizes::{TableDriver, MODES};
use serde::Serialize;
use std::path::Path;

/// One model's main loop of one driver.
#[derive(Debug, Clone, Serialize)]
pub struct DriverLoop {
    pub driver: String,
    pub mode: String,
    pub binary: String,
    pub functions: Vec<FunctionReport>,
    /// Why the loop could not be audited (binary missing, loop not found): a failure.
    pub error: Option<String>,
}

impl DriverLoop {
    pub fn checks(&self) -> usize {
        self.functions.iter().map(|f| f.checks.len()).sum()
    }
}

/// Audits every model's loop of every driver in `table` that asks for it.
pub fn audit_driver_loops(root: &Path, table: &[TableDriver]) -> Vec<DriverLoop> {
    let mut out = Vec::new();
    for d in table {
        let Some(cold) = &d.hot_loop_cold_calls else { continue };
        for mode in MODES {
            let rel = d.binary.replace("{mode}", mode);
            let path = root.join(&rel);
            let root_name = d.main_loop.replace("{mode}", mode);
            let result = Binary::read(&path)
                .map_err(|e| format!("{e}: build it first (make audit does)"))
                .and_then(|binary| audit_hot_paths(&path, &binary, &[root_name], cold));
            let (functions, error) = match result {
                Ok(f) => (f, None),
                Err(e) => (Vec::new(), Some(e)),
            };
            out.push(DriverLoop { driver: d.label.clone(), mode: mode.to_string(), binary: rel, functions, error });
        }
    }
    out
}
