//! The audit's report as text.

use crate::budget::{FFI_ROOMS, UNSAFE_ROOMS};
use crate::registry::REGISTRY;
use crate::sizes::MODES;
use crate::unsafe_code::UnsafeKind;
use crate::Report;

pub fn print_text(r: &Report) -> Result<(), String> {
    cli::outln!("Hot paths of {} (registered in {REGISTRY}, and what they call):", r.binary)?;
    for f in &r.functions {
        let verdict = if f.checks.is_empty() { "no checks".to_string() } else { format!("{} CHECKS", f.checks.len()) };
        cli::outln!("  {:<55} {:>5} instructions  {verdict}", f.name, f.instructions)?;
        for c in &f.checks {
            cli::outln!("      {} at {}: call to {} ({})", c.kind.describe(), c.source, c.callee, c.address)?;
        }
    }
    for (name, why) in &r.cold_calls {
        cli::outln!("  allowed call, not followed: {name}: {why}")?;
    }
    cli::outln!("Checks in hot paths: {}", r.hot_path_checks)?;
    if r.cross_check_failures.is_empty() {
        cli::outln!("Cross-check: objdump -d decodes every registered loop as the audit does")?;
    }
    for e in &r.cross_check_failures {
        cli::outln!("  CROSS-CHECK FAILED: {e}")?;
    }
    if !r.driver_loops.is_empty() {
        cli::outln!("")?;
        cli::outln!(
            "Main loops of the drivers in other checked languages (drivers/drivers.toml), and what they call:"
        )?;
    }
    for l in &r.driver_loops {
        if let Some(e) = &l.error {
            cli::outln!("  {} {}: CANNOT AUDIT: {e}", l.driver, l.mode)?;
            continue;
        }
        for f in &l.functions {
            let verdict =
                if f.checks.is_empty() { "no checks".to_string() } else { format!("{} CHECKS", f.checks.len()) };
            let nulls = match f.implicit_null_checks {
                0 => String::new(),
                n => format!(" ({n} implicit null checks)"),
            };
            cli::outln!(
                "  {:<14} {:<10} {:<30} {:>5} instructions  {verdict}{nulls}",
                l.driver,
                l.mode,
                f.name,
                f.instructions
            )?;
            for c in &f.checks {
                cli::outln!("      {} at {}: call to {} ({})", c.kind.describe(), c.source, c.callee, c.address)?;
            }
        }
    }
    if !r.driver_loops.is_empty() {
        cli::outln!("Checks in those main loops: {}", r.driver_loop_checks)?;
    }
    cli::outln!("")?;
    cli::outln!("Size (paper Table 2): lines of code, and x86 instructions in each main loop")?;
    cli::outln!("  {:<40} {:>6}  {:<22} {:<22} {:<22}", "driver", "lines", MODES[0], MODES[1], MODES[2])?;
    for s in &r.sizes {
        let cell = |m: &str| s.loops.get(m).map(|v| format!("{v:?}")).unwrap_or_else(|| "-".into());
        cli::outln!(
            "  {:<40} {:>6}  {:<22} {:<22} {:<22}",
            s.driver,
            s.lines_of_code,
            cell(MODES[0]),
            cell(MODES[1]),
            cell(MODES[2])
        )?;
    }
    if r.sizes.iter().any(|s| s.jit) {
        cli::outln!(
            "  (a JIT driver's figure: its loop and the methods it calls per packet, read from the running driver)"
        )?;
    }
    cli::outln!("")?;
    cli::outln!("Unsafe budget (allowed only in {}; {} only in src/):", UNSAFE_ROOMS.join(", "), FFI_ROOMS.join(", "))?;
    for c in &r.crates {
        let others: Vec<String> = c
            .sites
            .iter()
            .filter(|(k, _)| ![UnsafeKind::Block.describe(), UnsafeKind::Impl.describe()].contains(&k.as_str()))
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        let others = if others.is_empty() { String::new() } else { format!(" ({})", others.join(", ")) };
        let mark = if !c.passed() { "  FAILED" } else { "" };
        cli::outln!(
            "  {:<12} {:>3} unsafe blocks, {:>4} lines{others}{mark}",
            c.name,
            c.unsafe_blocks,
            c.unsafe_lines
        )?;
        for u in &c.undocumented {
            cli::outln!("      no // SAFETY: comment above the unsafe code at {u}")?;
        }
        for u in &c.not_allowed {
            cli::outln!("      not allowed here (only in {}): {u}", UNSAFE_ROOMS.join(", "))?;
        }
        for u in &c.unparsed {
            cli::outln!("      cannot parse, so cannot count its unsafe code: {u}")?;
        }
        if !c.allowed && !c.forbids_unsafe_code {
            cli::outln!("      a crate root lacks #![forbid(unsafe_code)]")?;
        }
    }
    for a in &r.ada {
        let mark = if a.passed() { "" } else { "  FAILED" };
        cli::outln!("Unsafe features of {} (allowed only in its Platform packages): {}{mark}", a.driver, a.total())?;
        for f in a.files.iter().filter(|f| !f.sites.is_empty()) {
            let sites: Vec<String> = f.sites.iter().map(|(k, n)| format!("{n} {k}")).collect();
            cli::outln!("  {:<40} {}", f.file, sites.join(", "))?;
        }
        for u in &a.not_allowed {
            cli::outln!("      not allowed outside the Platform packages: {u}")?;
        }
        for u in &a.checks_off {
            cli::outln!("      checks turned off (pragma Suppress or -gnatp): {u}")?;
        }
    }
    cli::outln!("Trusted kernel (crates/invariants): {} lines of code", r.trusted_kernel_lines)?;
    for deps in &r.dependencies {
        cli::outln!(
            "Dependencies of {}: {} crates besides the trusted path crates, {}",
            deps.roots.join(", "),
            deps.external.len(),
            if deps.not_allowed.is_empty() { "all allowed, from crates.io, pinned" } else { "SOME NOT ALLOWED" }
        )?;
        for d in &deps.not_allowed {
            cli::outln!("      not allowed (crates/audit/src/dependencies.rs, tool_dependencies.rs): {d}")?;
        }
    }
    for e in &r.expanded {
        let verdict = if e.findings.is_empty() { "no unsafe code" } else { "UNSAFE CODE" };
        cli::outln!("Expanded code of {} (after every macro): {verdict}", e.krate)?;
        for f in &e.findings {
            cli::outln!("      {f}")?;
        }
    }
    cli::outln!("audit: {}", if r.passed { "passed" } else { "FAILED" })?;
    Ok(())
}
