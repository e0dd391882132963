//! The hot paths: every registered function, and every function it calls that was not
//! inlined, transitively. A call or jump to a panic, bounds-check, overflow, unwrap/expect,
//! slice-index, allocation or formatting routine is a finding, with its source line.

use crate::elf::{external_target, Binary, Function, Slot, Target};
use crate::lines::source_lines;
use serde::Serialize;
use std::collections::{BTreeSet, VecDeque};
use std::path::Path;

/// A routine whose call means the compiler inserted a check (or worse) on the hot path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckKind {
    BoundsCheck,
    SliceIndex,
    Overflow,
    UnwrapOrExpect,
    Panic,
    Allocation,
    Formatting,
    IndirectCall,
    /// A check of GNAT's (index, range, overflow, access, discriminant, length, validity…).
    AdaCheck,
    /// An Ada exception raised or propagated.
    AdaException,
    /// JIT code: a call the JIT treated as never returning into a method never run (a managed
    /// throw helper), or into a runtime helper that throws.
    ThrowPath,
    /// JIT code: a call into a method that no run compiled, so its code was not audited.
    NeverCompiled,
}

impl CheckKind {
    pub fn describe(self) -> &'static str {
        match self {
            CheckKind::BoundsCheck => "bounds check",
            CheckKind::SliceIndex => "slice index check",
            CheckKind::Overflow => "arithmetic overflow check",
            CheckKind::UnwrapOrExpect => "unwrap/expect",
            CheckKind::Panic => "panic",
            CheckKind::Allocation => "allocation",
            CheckKind::Formatting => "formatting",
            CheckKind::IndirectCall => "indirect call (cannot be audited)",
            CheckKind::AdaCheck => "Ada run-time check",
            CheckKind::AdaException => "Ada exception",
            CheckKind::ThrowPath => "exception thrown (a check's failure path)",
            CheckKind::NeverCompiled => "call into code no run compiled (cannot be audited)",
        }
    }
}

/// Classifies a callee by its demangled name; `None` for an ordinary function.
pub fn classify(callee: &str) -> Option<CheckKind> {
    let has = |s: &str| callee.contains(s);
    if let Some(kind) = classify_ada(callee).or_else(|| classify_dotnet(callee)) {
        Some(kind)
    } else if has("panic_bounds_check") {
        Some(CheckKind::BoundsCheck)
    } else if has("slice_index_fail")
        || has("slice_start_index_len_fail")
        || has("slice_end_index_len_fail")
        || has("slice_index_order_fail")
        || has("str_index_overflow_fail")
    {
        Some(CheckKind::SliceIndex)
    } else if has("_overflow") && (has("panic_const") || has("panicking")) {
        Some(CheckKind::Overflow)
    } else if has("unwrap_failed") || has("expect_failed") {
        Some(CheckKind::UnwrapOrExpect)
    } else if has("panicking") || has("panic") || has("begin_unwind") {
        Some(CheckKind::Panic)
    } else if has("__rust_alloc")
        || has("__rust_realloc")
        || has("alloc::alloc::")
        || has("handle_alloc_error")
        || has("raw_vec")
        || callee.starts_with("malloc")
        || callee.starts_with("realloc")
        || callee.starts_with("calloc")
    {
        Some(CheckKind::Allocation)
    } else if has("core::fmt::") || has("alloc::fmt::") || has("std::io::stdio::_print") {
        Some(CheckKind::Formatting)
    } else {
        None
    }
}

/// GNAT's run-time routines: `__gnat_rcheck_<exception>_<check>` for a failed check (each
/// check calls one, so a call means the check is in the code), and the routines that raise,
/// propagate, allocate or print.
fn classify_ada(callee: &str) -> Option<CheckKind> {
    let name = callee.split('@').next().unwrap_or(callee);
    if name.starts_with("__gnat_rcheck_") {
        Some(CheckKind::AdaCheck)
    } else if name.starts_with("__gnat_raise")
        || name.starts_with("__gnat_reraise")
        || name.starts_with("__gnat_last_chance_handler")
        || name.starts_with("ada__exceptions__raise")
        || name.starts_with("ada__exceptions__reraise")
    {
        Some(CheckKind::AdaException)
    } else if name.starts_with("__gnat_malloc") || name.starts_with("system__secondary_stack__ss_allocate") {
        Some(CheckKind::Allocation)
    } else if name.starts_with("ada__text_io__") || name.starts_with("system__img_") {
        Some(CheckKind::Formatting)
    } else {
        None
    }
}

/// The .NET runtime's helpers that JIT code calls (libcoreclr's `JIT_*`, named with the file:
/// `JIT_RngChkFail@libcoreclr.so`), and managed methods that only throw.
fn classify_dotnet(callee: &str) -> Option<CheckKind> {
    let name = callee.split('@').next().unwrap_or(callee);
    let has = |s: &str| name.contains(s);
    if name == "JIT_RngChkFail" {
        Some(CheckKind::BoundsCheck)
    } else if name == "JIT_Overflow" {
        Some(CheckKind::Overflow)
    } else if name.starts_with("JIT_Throw")
        || name.starts_with("JIT_Rethrow")
        || name.starts_with("IL_Throw")
        || name.starts_with("IL_Rethrow")
        || name == "JIT_FailFast"
        || has("ThrowHelper::")
    {
        Some(CheckKind::ThrowPath)
    } else if name.starts_with("JIT_New")
        || name.starts_with("JIT_Box")
        || name.starts_with("JIT_TrialAlloc")
        || name.starts_with("AllocateObject")
        || name.starts_with("AllocateSzArray")
    {
        Some(CheckKind::Allocation)
    } else {
        None
    }
}

/// One problem found in a hot path.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub kind: CheckKind,
    /// The routine called (or `*` for an indirect call).
    pub callee: String,
    pub address: String,
    /// `file:line` in this repository that produced it, from the debug line tables.
    pub source: String,
}

/// One audited function: a registered hot path or a function it calls.
#[derive(Debug, Clone, Serialize)]
pub struct FunctionReport {
    pub name: String,
    pub address: String,
    pub instructions: usize,
    /// The hot path through which it was reached (itself for a registered one).
    pub reached_from: String,
    pub checks: Vec<Finding>,
    /// JIT code's implicit null checks (a load that faults on null; no call). Counted, not
    /// failed: they are one instruction each, and native code has none.
    pub implicit_null_checks: usize,
}

/// What a call out of a function reaches, by name, and the function if it is in the binary.
fn resolve(binary: &Binary, target: Target) -> Result<(String, Option<&Function>), String> {
    match target {
        Target::Direct(a) => match binary.at(a) {
            Some(f) => Ok((f.name.clone(), Some(f))),
            // A PLT stub: the shared-library routine it jumps to, by name.
            None => match binary.plt.get(&a) {
                Some(name) => Ok((name.clone(), None)),
                None => Ok((format!("{a:#x}"), None)),
            },
        },
        Target::Slot(a) => match binary.slots.get(&a) {
            Some(Slot::Symbol(name)) => Ok((name.clone(), None)),
            Some(Slot::Address(t)) => match binary.at(*t) {
                Some(f) => Ok((f.name.clone(), Some(f))),
                None => Ok((format!("{t:#x}"), None)),
            },
            None => Err(format!("*{a:#x}")),
        },
        Target::Indirect => Err("*".into()),
    }
}

/// Audits `roots` (demangled names; every instance matches) and what they call, except the
/// `cold` callees. Fails if a root is missing from the binary.
pub fn audit_hot_paths(
    path: &Path,
    binary: &Binary,
    roots: &[String],
    cold: &[String],
) -> Result<Vec<FunctionReport>, String> {
    let mut queue: VecDeque<(&Function, String)> = VecDeque::new();
    for root in roots {
        let found: Vec<&Function> = binary.named(root).collect();
        if found.is_empty() {
            return Err(format!(
                "hot path {root} is not in {}: was it renamed, or inlined (it must be #[inline(never)])?",
                path.display()
            ));
        }
        queue.extend(found.into_iter().map(|f| (f, root.clone())));
    }
    let is_cold = |callee: &str| cold.iter().any(|c| callee == c || callee.starts_with(&format!("{c}::<")));
    let mut seen: BTreeSet<u64> = BTreeSet::new();
    let mut reports = Vec::new();
    let mut pending_lines: Vec<u64> = Vec::new();
    while let Some((f, root)) = queue.pop_front() {
        if !seen.insert(f.address) {
            continue;
        }
        let mut checks = Vec::new();
        for insn in &f.instructions {
            let Some(target) = external_target(insn, f.address, f.end()) else { continue };
            match resolve(binary, target) {
                Err(callee) => checks.push((CheckKind::IndirectCall, callee, insn.ip())),
                Ok((callee, next)) => {
                    if let Some(kind) = classify(&callee) {
                        checks.push((kind, callee, insn.ip()));
                    } else if is_cold(&callee) {
                        // Allowed: does not run per packet.
                    } else if let Some(g) = next {
                        // A call that was not inlined: audit the callee too.
                        queue.push_back((g, root.clone()));
                    }
                }
            }
        }
        pending_lines.extend(checks.iter().map(|c| c.2));
        reports.push((f, root, checks));
    }
    let lines = source_lines(path, &pending_lines)?;
    Ok(reports
        .into_iter()
        .map(|(f, root, checks)| FunctionReport {
            name: f.name.clone(),
            address: format!("{:#x}", f.address),
            instructions: f.instructions.len(),
            reached_from: root,
            implicit_null_checks: 0,
            checks: checks
                .into_iter()
                .map(|(kind, callee, addr)| Finding {
                    kind,
                    callee,
                    address: format!("{addr:#x}"),
                    source: lines.get(&addr).cloned().unwrap_or_else(|| "(no line information)".into()),
                })
                .collect(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callees_are_classified() {
        assert_eq!(classify("core::panicking::panic_bounds_check"), Some(CheckKind::BoundsCheck));
        assert_eq!(classify("core::slice::index::slice_end_index_len_fail"), Some(CheckKind::SliceIndex));
        assert_eq!(classify("core::panicking::panic_const::panic_const_add_overflow"), Some(CheckKind::Overflow));
        assert_eq!(classify("core::option::unwrap_failed"), Some(CheckKind::UnwrapOrExpect));
        assert_eq!(classify("core::panicking::panic_fmt"), Some(CheckKind::Panic));
        assert_eq!(classify("__rust_alloc"), Some(CheckKind::Allocation));
        assert_eq!(classify("alloc::raw_vec::RawVec<T,A>::grow_one"), Some(CheckKind::Allocation));
        assert_eq!(classify("core::fmt::write"), Some(CheckKind::Formatting));
        assert_eq!(classify("safenic::fwd::Meter::tick"), None);
        assert_eq!(classify("memcpy"), None);
        assert_eq!(classify("__gnat_rcheck_CE_Index_Check"), Some(CheckKind::AdaCheck));
        assert_eq!(classify("__gnat_rcheck_CE_Invalid_Data@plt"), Some(CheckKind::AdaCheck));
        assert_eq!(classify("__gnat_raise_exception"), Some(CheckKind::AdaException));
        assert_eq!(classify("system__secondary_stack__ss_allocate"), Some(CheckKind::Allocation));
        assert_eq!(classify("ada__text_io__put_line__2"), Some(CheckKind::Formatting));
        assert_eq!(classify("fwd__tick"), None);
        assert_eq!(classify("JIT_RngChkFail@libcoreclr.so"), Some(CheckKind::BoundsCheck));
        assert_eq!(classify("JIT_ThrowNullRef@libcoreclr.so"), Some(CheckKind::ThrowPath));
        assert_eq!(classify("System.ThrowHelper::ThrowIndexOutOfRangeException"), Some(CheckKind::ThrowPath));
        assert_eq!(classify("JIT_NewS_MP_FastPortable@libcoreclr.so"), Some(CheckKind::Allocation));
        assert_eq!(classify("JIT_WriteBarrier@libcoreclr.so"), None);
        assert_eq!(classify("Safenic.Driver.Agent::Run"), None);
    }
}
