//! The main loops of the drivers in a checked language other than Rust (manifest entries with
//! `hot_loop_cold_calls`, the Ada driver): each model's loop in its binary, and everything it
//! calls, through the same audit as the Rust hot paths. A call to a check routine of the
//! language's run-time (GNAT's `__gnat_rcheck_*`) is a finding, with its source line. A JIT
//! driver's loops (the C# one) are audited while it runs ([`crate::jit_run`]) and reported here
//! the same way (`safenic-audit jit`).

use crate::elf::Binary;
use crate::hot_paths::{audit_hot_paths, FunctionReport};
use crate::sizes::{LoopCode, TableDriver, MODES};
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
        let (Some(cold), LoopCode::Binary(binary)) = (&d.hot_loop_cold_calls, &d.code) else { continue };
        for mode in MODES {
            let rel = binary.replace("{mode}", mode);
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

/// One model of a JIT driver, audited (`safenic-audit jit`).
pub struct JitModel {
    pub mode: String,
    /// Every run's methods together ([`crate::jit_loops::merge`]).
    pub functions: Vec<FunctionReport>,
    /// Instructions of the loop and the methods it calls per packet, in the default run.
    pub instructions: usize,
}

/// The loops of a JIT driver as [`DriverLoop`]s: its models, or the error for each.
pub fn jit_driver_loops(
    d: &TableDriver,
    command: &[String],
    result: &Result<Vec<JitModel>, String>,
) -> Vec<DriverLoop> {
    let binary = command.join(" ");
    match result {
        Ok(models) => models
            .iter()
            .map(|m| DriverLoop {
                driver: d.label.clone(),
                mode: m.mode.clone(),
                binary: binary.clone(),
                functions: m.functions.clone(),
                error: None,
            })
            .collect(),
        Err(e) => vec![DriverLoop {
            driver: d.label.clone(),
            mode: MODES.join(", "),
            binary,
            functions: Vec::new(),
            error: Some(e.clone()),
        }],
    }
}
