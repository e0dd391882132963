//! The audit: proves from the compiled release code that the hot paths contain no run-time
//! checks, from the sources that unsafe code stays in its rooms and that nothing unvetted runs
//! when the workspace is built, and lists the trusted crates' public surface. It is a
//! workspace of its own and links no crate it audits; the one part that runs audited
//! programs (the JIT drivers' loops) is a subcommand run after the verdict (docs/safety.md,
//! "The audit").
//!
//! - **Before anything is built** ([`vet`]): no cargo configuration, toolchain file, `[patch]`
//!   or unknown path crate in the repository; every build script and procedural macro of the
//!   workspace's graph pinned ([`build_time`]); no unsafe code, assembly or linker attribute
//!   outside the rooms ([`unsafe_code`]); the driver crates' dependencies allowed
//!   ([`dependencies`], [`tool_dependencies`]).
//! - **Hot paths** ([`hot_paths`]): every function registered in `crates/safenic/src/fwd.rs`
//!   ([`registry`]) and everything it calls that is not inlined, decoded from the binary
//!   ([`elf`]); a call to a panic, bounds-check, overflow, unwrap, allocation or formatting
//!   routine is a finding, with its source line from the DWARF line tables ([`lines`]). Each
//!   registered loop is also decoded by `objdump -d`, which must agree ([`cross_check`]).
//! - **Other drivers' main loops** ([`driver_loops`]): the loops of every driver in a checked
//!   language (the Ada driver, built with GNAT's checks on), audited the same way; a call to
//!   `__gnat_rcheck_*` is a finding with its source line. A JIT-compiled driver (C#) is run on
//!   a server of the build's nicsim by `safenic-audit jit` ([`jit_run`]), which reads its
//!   loops from the process ([`jit`], [`jit_loops`]); a call to a runtime helper that throws
//!   (`JIT_RngChkFail`) is a finding.
//! - **Table 2 of the paper** ([`sizes`]): lines of code and instructions per main loop.
//! - **Unsafe budget** ([`budget`], [`unsafe_code`]): every kind of unsafe code, per crate;
//!   for Ada ([`ada_features`]), its unsafe features per file, allowed only in its platform
//!   packages, and no check turned off anywhere.
//! - **Expanded code** ([`expanded`]): no macro emits unsafe code into the driver crates.
//! - **Public surface** ([`surface`]): every public item of the trusted crates, each covered by
//!   a `# Soundness` note, listed in docs/safety.md.
#![forbid(unsafe_code)]

pub mod ada_features;
pub mod budget;
pub mod build_time;
pub mod children;
pub mod cross_check;
pub mod dependencies;
pub mod driver_loops;
pub mod drivers;
pub mod elf;
pub mod expanded;
pub mod hot_paths;
pub mod jit;
pub mod jit_loops;
pub mod jit_run;
pub mod lines;
pub mod nicsim_cli;
pub mod registry;
pub mod report;
pub mod sizes;
pub mod surface;
pub mod tool_dependencies;
pub mod unsafe_code;
pub mod vet;

use budget::CrateBudget;
use hot_paths::FunctionReport;
use serde::Serialize;
use sizes::{SizeRow, TableDriver};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The target directory of the nightly builds the audit reads (the expanded code, rustdoc's
/// JSON): one for both, so that the second reuses the dependencies the first checked.
pub const NIGHTLY_TARGET: &str = "target/nightly";

/// Everything the audit reports.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub binary: String,
    pub functions: Vec<FunctionReport>,
    pub cold_calls: Vec<(String, String)>,
    /// Registered loops on which `objdump -d` and the audit's decoder disagree.
    pub cross_check_failures: Vec<String>,
    pub crates: Vec<CrateBudget>,
    pub dependencies: Vec<dependencies::DependencyReport>,
    /// Unsafe code in the driver crates' macro-expanded code.
    pub expanded: Vec<expanded::ExpandedReport>,
    pub sizes: Vec<SizeRow>,
    /// The main loops of the drivers in other checked languages.
    pub driver_loops: Vec<driver_loops::DriverLoop>,
    /// The unsafe features of the Ada drivers.
    pub ada: Vec<ada_features::AdaBudget>,
    pub trusted_kernel_lines: usize,
    pub hot_path_checks: usize,
    /// Checks found in [`Report::driver_loops`].
    pub driver_loop_checks: usize,
    /// What [`vet`] finds (it ran before the build too).
    pub vet: Vec<String>,
    pub surface: surface::SurfaceReport,
    pub passed: bool,
}

/// What to audit.
pub struct Options {
    /// The release binary with the hot paths.
    pub binary: PathBuf,
    /// The repository.
    pub root: PathBuf,
    /// The drivers of Table 2.
    pub table: Vec<TableDriver>,
}

pub fn audit(o: &Options) -> Result<Report, String> {
    if o.binary.components().any(|c| c.as_os_str() == "debug") {
        return Err(format!(
            "{} is a debug build, which keeps overflow checks: audit the release build (make audit does)",
            o.binary.display()
        ));
    }
    let binary = elf::Binary::read(&o.binary)?;
    let registry = registry::read(&o.root)?;
    let cold: Vec<String> = registry.cold_calls.iter().map(|(n, _)| n.clone()).collect();
    let functions = hot_paths::audit_hot_paths(&o.binary, &binary, &registry.hot_paths, &cold)?;
    let mut cross_check_failures = Vec::new();
    for root in &registry.hot_paths {
        for f in binary.named(root) {
            if let Err(e) = cross_check::agrees_with_objdump(&o.binary, f) {
                cross_check_failures.push(e);
            }
        }
    }
    let vet = vet::vet(&o.root)?;
    let surface = surface::check(&o.root)?;
    let crates = budget::unsafe_budget(&o.root)?;
    let dependencies = dependencies::check(&o.root)?;
    let expanded = expanded::check(&o.root)?;
    let kernel = budget::rust_files(&o.root.join("crates/invariants/src"));
    let hot_path_checks: usize = functions.iter().map(|r| r.checks.len()).sum();
    let driver_loops = driver_loops::audit_driver_loops(&o.root, &o.table);
    let jit_sizes: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    let driver_loop_checks: usize = driver_loops.iter().map(|l| l.checks()).sum();
    let mut ada = Vec::new();
    for d in &o.table {
        ada.extend(ada_features::ada_budget(&o.root, &d.label, &d.sources)?);
    }
    let passed = hot_path_checks == 0
        && driver_loop_checks == 0
        && driver_loops.iter().all(|l| l.error.is_none())
        && ada.iter().all(ada_features::AdaBudget::passed)
        && cross_check_failures.is_empty()
        && crates.iter().all(CrateBudget::passed)
        && dependencies.iter().all(|d| d.not_allowed.is_empty())
        && expanded.iter().all(|e| e.findings.is_empty())
        && vet.is_empty()
        && surface.passed();
    Ok(Report {
        binary: o.binary.display().to_string(),
        functions,
        cold_calls: registry.cold_calls,
        cross_check_failures,
        crates,
        dependencies,
        expanded,
        sizes: sizes::size_table(&o.root, &o.table, &jit_sizes),
        driver_loops,
        ada,
        trusted_kernel_lines: sizes::lines_of_code(&kernel),
        hot_path_checks,
        driver_loop_checks,
        vet,
        surface,
        passed,
    })
}
