//! The audit's report as text.

use crate::budget::{FFI_ROOMS, UNSAFE_ROOMS};
use crate::registry::REGISTRY;
use crate::sizes::MODES;
use crate::unsafe_code::UnsafeKind;
use crate::Report;
use std::fmt::Write;

/// The report of a check, as printed.
pub fn text(r: &Report) -> String {
    let mut out = String::new();
    write_report(&mut out, r);
    out
}

fn write_report(out: &mut String, r: &Report) {
    let _ = writeln!(out, "Hot paths of {} (registered in {REGISTRY}, and what they call):", r.binary);
    for f in &r.functions {
        let verdict = if f.checks.is_empty() { "no checks".to_string() } else { format!("{} CHECKS", f.checks.len()) };
        let _ = writeln!(out, "  {:<55} {:>5} instructions  {verdict}", f.name, f.instructions);
        for c in &f.checks {
            let _ = writeln!(out, "      {} at {}: call to {} ({})", c.kind.describe(), c.source, c.callee, c.address);
        }
    }
    for (name, why) in &r.cold_calls {
        let _ = writeln!(out, "  allowed call, not followed: {name}: {why}");
    }
    let _ = writeln!(out, "Checks in hot paths: {}", r.hot_path_checks);
    if r.cross_check_failures.is_empty() {
        let _ = writeln!(out, "Cross-check: objdump -d decodes every registered loop as the audit does");
    }
    for e in &r.cross_check_failures {
        let _ = writeln!(out, "  CROSS-CHECK FAILED: {e}");
    }
    if !r.driver_loops.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Main loops of the drivers in other checked languages (drivers/drivers.toml), and what they call:"
        );
    }
    write_driver_loops(out, &r.driver_loops);
    if !r.driver_loops.is_empty() {
        let _ = writeln!(out, "Checks in those main loops: {}", r.driver_loop_checks);
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "Size (paper Table 2): lines of code, and x86 instructions in each main loop");
    let _ = writeln!(out, "  {:<40} {:>6}  {:<22} {:<22} {:<22}", "driver", "lines", MODES[0], MODES[1], MODES[2]);
    for s in &r.sizes {
        let cell = |m: &str| s.loops.get(m).map(|v| format!("{v:?}")).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "  {:<40} {:>6}  {:<22} {:<22} {:<22}",
            s.driver,
            s.lines_of_code,
            cell(MODES[0]),
            cell(MODES[1]),
            cell(MODES[2])
        );
    }
    if r.sizes.iter().any(|s| s.jit) {
        let _ = writeln!(
            out,
            "  (a JIT driver's figure: its loop and the methods it calls per packet, read from the running driver)"
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Unsafe budget (allowed only in {}; {} only in src/):",
        UNSAFE_ROOMS.join(", "),
        FFI_ROOMS.join(", ")
    );
    for c in &r.crates {
        let others: Vec<String> = c
            .sites
            .iter()
            .filter(|(k, _)| ![UnsafeKind::Block.describe(), UnsafeKind::Impl.describe()].contains(&k.as_str()))
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        let others = if others.is_empty() { String::new() } else { format!(" ({})", others.join(", ")) };
        let mark = if !c.passed() { "  FAILED" } else { "" };
        let _ = writeln!(
            out,
            "  {:<12} {:>3} unsafe blocks, {:>4} lines{others}{mark}",
            c.name, c.unsafe_blocks, c.unsafe_lines
        );
        for u in &c.undocumented {
            let _ = writeln!(out, "      no // SAFETY: comment above the unsafe code at {u}");
        }
        for u in &c.not_allowed {
            let _ = writeln!(out, "      not allowed here (only in {}): {u}", UNSAFE_ROOMS.join(", "));
        }
        for u in &c.unparsed {
            let _ = writeln!(out, "      cannot parse, so cannot count its unsafe code: {u}");
        }
        if !c.allowed && !c.forbids_unsafe_code {
            let _ = writeln!(out, "      a crate root lacks #![forbid(unsafe_code)]");
        }
    }
    for a in &r.ada {
        let mark = if a.passed() { "" } else { "  FAILED" };
        let _ = writeln!(
            out,
            "Unsafe features of {} (allowed only in its Platform packages): {}{mark}",
            a.driver,
            a.total()
        );
        for f in a.files.iter().filter(|f| !f.sites.is_empty()) {
            let sites: Vec<String> = f.sites.iter().map(|(k, n)| format!("{n} {k}")).collect();
            let _ = writeln!(out, "  {:<40} {}", f.file, sites.join(", "));
        }
        for u in &a.not_allowed {
            let _ = writeln!(out, "      not allowed outside the Platform packages: {u}");
        }
        for u in &a.checks_off {
            let _ = writeln!(out, "      checks turned off (pragma Suppress or -gnatp): {u}");
        }
    }
    let _ = writeln!(out, "Trusted kernel (crates/invariants): {} lines of code", r.trusted_kernel_lines);
    for deps in &r.dependencies {
        let _ = writeln!(
            out,
            "Dependencies of {}: {} crates besides the trusted path crates, {}",
            deps.roots.join(", "),
            deps.external.len(),
            if deps.not_allowed.is_empty() { "all allowed, from crates.io, pinned" } else { "SOME NOT ALLOWED" }
        );
        for d in &deps.not_allowed {
            let _ = writeln!(out, "      not allowed (crates/audit/src/dependencies.rs, tool_dependencies.rs): {d}");
        }
    }
    for e in &r.expanded {
        let verdict = if e.findings.is_empty() { "no unsafe code" } else { "UNSAFE CODE" };
        let _ = writeln!(out, "Expanded code of {} (after every macro): {verdict}", e.krate);
        for f in &e.findings {
            let _ = writeln!(out, "      {f}");
        }
    }
    write_vet(out, &r.vet);
    let uncovered: Vec<_> = r.surface.uncovered().collect();
    let _ = writeln!(
        out,
        "Public surface of {} (crates/audit/src/surface.rs): {} items, {}",
        crate::surface::TRUSTED.join(", "),
        r.surface.items.len(),
        if uncovered.is_empty() { "each covered by a # Soundness note" } else { "SOME WITHOUT A NOTE" }
    );
    for i in uncovered {
        let _ = writeln!(out, "      no # Soundness note covers {} ({})", i.path, i.kind);
    }
    if !r.surface.documented {
        let _ = writeln!(
            out,
            "      {} does not list this surface: `safenic-audit surface --splice {}` writes it; review the difference",
            crate::surface::DOCUMENT,
            crate::surface::DOCUMENT
        );
    }
    let _ = writeln!(out, "audit: {}", if r.passed { "passed" } else { "FAILED" });
}

/// The loops of drivers in other languages, and what they call.
pub fn driver_loops_text(loops: &[crate::driver_loops::DriverLoop]) -> String {
    let mut out = String::new();
    write_driver_loops(&mut out, loops);
    out
}

fn write_driver_loops(out: &mut String, loops: &[crate::driver_loops::DriverLoop]) {
    for l in loops {
        if let Some(e) = &l.error {
            let _ = writeln!(out, "  {} {}: CANNOT AUDIT: {e}", l.driver, l.mode);
            continue;
        }
        for f in &l.functions {
            let verdict =
                if f.checks.is_empty() { "no checks".to_string() } else { format!("{} CHECKS", f.checks.len()) };
            let nulls = match f.implicit_null_checks {
                0 => String::new(),
                n => format!(" ({n} implicit null checks)"),
            };
            let _ = writeln!(
                out,
                "  {:<14} {:<10} {:<30} {:>5} instructions  {verdict}{nulls}",
                l.driver, l.mode, f.name, f.instructions
            );
            for c in &f.checks {
                let _ =
                    writeln!(out, "      {} at {}: call to {} ({})", c.kind.describe(), c.source, c.callee, c.address);
            }
        }
    }
}

/// What [`crate::vet`] found, one line each.
pub fn vet_text(findings: &[String]) -> String {
    let mut out = String::new();
    write_vet(&mut out, findings);
    out
}

fn write_vet(out: &mut String, findings: &[String]) {
    let verdict = if findings.is_empty() { "nothing unvetted runs when the workspace is built" } else { "FOUND" };
    let _ = writeln!(out, "Before the build (crates/audit/src/vet.rs): {verdict}");
    for f in findings {
        let _ = writeln!(out, "      {f}");
    }
}
