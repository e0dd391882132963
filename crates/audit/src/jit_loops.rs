//! The main loops of a JIT-compiled driver (the C# one), audited in its running code: each
//! model's loop and every method it calls, through the same classification as native code. A
//! call to a runtime helper that throws (`JIT_RngChkFail`: a bounds check) or allocates is a
//! finding, and so is a call the JIT treated as never returning into a method never run (a
//! managed throw helper). RyuJIT's implicit null checks are counted, not failed.
//!
//! A method is compiled on its first call, so one run leaves the branches it did not take
//! calling uncompiled precodes. The driver runs once per combination of the switches that
//! select code ([`OPTION_SETS`]); a callee uncompiled in one run must be audited in another.
//! The methods are the same in every run, so call sites are matched by their path from the
//! loop (the index of each call instruction along the way).

use crate::elf::{external_target, Function, Target};
use crate::hot_paths::{classify, CheckKind, Finding, FunctionReport};
use crate::jit::{is_implicit_null_check, loaded_register_target, Callee, CodeSource, JitImage};
use iced_x86::Mnemonic;
use std::collections::{BTreeMap, BTreeSet};

/// The contract's switches that select code (drivers/README.md), in every combination the
/// model reads: the MAC rewrite for all three, flow control (lossless bursts) for flexible.
pub fn option_sets(mode: &str) -> Vec<Vec<&'static str>> {
    let rewrite: [&[&str]; 2] = [&[], &["--mac-rewrite", "none"]];
    let lossless: &[&[&str]] = if mode == "flexible" { &[&[], &["--flow-control"]] } else { &[&[]] };
    rewrite.iter().flat_map(|r| lossless.iter().map(move |l| r.iter().chain(l.iter()).copied().collect())).collect()
}

/// A call site, by its path from the loop: the loop's instance, then the index of each call
/// instruction among its method's instructions.
pub type CallPath = Vec<usize>;

/// One run's walk from a loop.
#[derive(Debug, Clone, Default)]
pub struct JitWalk {
    /// Every method reached, with the path it was reached by (one method may be reached by
    /// several: the same address in the report), and whether its name is its only instance's
    /// (not a generic method, whose perf map name leaves out the type arguments).
    pub functions: Vec<(CallPath, FunctionReport, bool)>,
    /// Calls into methods never compiled in this run (not followed by a trap), by the path
    /// of the method they would reach, and where the call is.
    pub not_run: Vec<(CallPath, String)>,
    /// Instructions of the loop and the methods it reaches, each method once.
    pub instructions: usize,
}

/// How deep the walk follows calls (the C# loops are two calls deep).
const MAX_DEPTH: usize = 8;

/// Walks every compiled instance of the method `root` (`Ns.Type::Method`), and what it calls,
/// except the `cold` methods.
pub fn walk<S: CodeSource>(image: &JitImage<S>, root: &str, cold: &[String]) -> Result<JitWalk, String> {
    let roots: Vec<usize> = image.methods_named(root).collect();
    if roots.is_empty() {
        return Err(format!("the loop {root} is not in the runtime's perf map: was it renamed, or never run?"));
    }
    let mut out = JitWalk::default();
    let mut counted = BTreeSet::new();
    for (n, &i) in roots.iter().enumerate() {
        visit(image, i, vec![n], root, cold, &mut out, &mut counted)?;
    }
    Ok(out)
}

fn visit<S: CodeSource>(
    image: &JitImage<S>,
    entry: usize,
    path: CallPath,
    root: &str,
    cold: &[String],
    out: &mut JitWalk,
    counted: &mut BTreeSet<u64>,
) -> Result<(), String> {
    let f = image.function(entry)?;
    if counted.insert(f.address) {
        out.instructions += f.instructions.len();
    }
    let mut checks = Vec::new();
    let mut callees = Vec::new();
    for (k, insn) in f.instructions.iter().enumerate() {
        let Some(target) = external_target(insn, f.address, f.end()) else { continue };
        let at = site(&f, insn.ip());
        let callee = match target {
            Target::Direct(a) => image.resolve(a),
            Target::Slot(cell) => image.pointer_at(cell).map_or(Callee::Unknown(cell), |a| image.resolve(a)),
            Target::Indirect => {
                let loaded = k.checked_sub(1).and_then(|j| loaded_register_target(&f.instructions[j], insn));
                loaded.map_or(Callee::Unknown(0), |a| image.resolve(a))
            }
        };
        let mut finding = |kind: CheckKind, callee: String| {
            checks.push(Finding { kind, callee, address: format!("{:#x}", insn.ip()), source: at.clone() })
        };
        match callee {
            Callee::Method(i) => {
                let name = image.entries[i].method().to_string();
                if let Some(kind) = classify(&name) {
                    finding(kind, name);
                } else if !cold.contains(&name) && path.len() < MAX_DEPTH {
                    callees.push((i, k));
                }
            }
            Callee::Native(name) => {
                if let Some(kind) = classify(&name) {
                    finding(kind, name);
                }
            }
            Callee::NeverCompiled => {
                let traps = f.instructions.get(k + 1).is_none_or(|next| next.mnemonic() == Mnemonic::Int3);
                if traps {
                    finding(CheckKind::ThrowPath, "a method never run, the call never returns".into());
                } else {
                    out.not_run.push(([path.as_slice(), &[k]].concat(), at.clone()));
                }
            }
            Callee::Unknown(a) => finding(CheckKind::IndirectCall, format!("{a:#x}")),
        }
    }
    let report = FunctionReport {
        name: f.name.clone(),
        address: format!("{:#x}", f.address),
        instructions: f.instructions.len(),
        reached_from: root.to_string(),
        implicit_null_checks: f.instructions.iter().filter(|i| is_implicit_null_check(i)).count(),
        checks,
    };
    let one_instance = !image.entries[entry].signature.contains("!!");
    out.functions.push((path.clone(), report, one_instance));
    for (i, k) in callees {
        visit(image, i, [path.as_slice(), &[k]].concat(), root, cold, out, counted)?;
    }
    Ok(())
}

/// `Method+0xOFFSET`: the place of a call in JIT code, which has no line tables.
fn site(f: &Function, ip: u64) -> String {
    format!("{}+{:#x} (JIT code has no line tables)", f.name, ip - f.address)
}

/// The runs of one model together: each method once (by its path), with the calls into
/// methods that no run compiled as findings, since their code could not be audited.
pub fn merge(runs: &[JitWalk]) -> Vec<FunctionReport> {
    let mut by_path: BTreeMap<CallPath, (FunctionReport, bool)> = BTreeMap::new();
    for run in runs {
        for (path, f, one) in &run.functions {
            by_path.entry(path.clone()).or_insert_with(|| (f.clone(), *one));
        }
    }
    let mut unaudited: BTreeSet<(CallPath, String)> = BTreeSet::new();
    for run in runs {
        unaudited.extend(run.not_run.iter().filter(|(p, _)| !by_path.contains_key(p)).cloned());
    }
    for (path, at) in unaudited {
        if let Some((caller, _)) = by_path.get_mut(&path[..path.len() - 1]) {
            caller.checks.push(Finding {
                kind: CheckKind::NeverCompiled,
                callee: "a method no run compiled".into(),
                address: String::new(),
                source: at,
            });
        }
    }
    // Each instance once in the report: two paths reach the same one if they reach the same
    // address in some run, or the same method that has one instance.
    let address =
        |run: &JitWalk, p: &CallPath| run.functions.iter().find(|(q, ..)| q == p).map(|(_, f, _)| f.address.clone());
    let same_address =
        |p: &CallPath, q: &CallPath| runs.iter().any(|r| address(r, p).is_some() && address(r, p) == address(r, q));
    let mut kept: Vec<(CallPath, FunctionReport, bool)> = Vec::new();
    for (path, (f, one)) in by_path {
        let same = |(q, g, _): &(CallPath, FunctionReport, bool)| same_address(&path, q) || (one && g.name == f.name);
        if !kept.iter().any(same) {
            kept.push((path, f, one));
        }
    }
    kept.into_iter().map(|(_, f, _)| f).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jit::{parse_perf_map, CodeSource};

    /// Memory of a fake process: code at fixed addresses, and one native helper.
    struct Fake(BTreeMap<u64, Vec<u8>>);

    impl CodeSource for Fake {
        fn read(&self, address: u64, len: usize) -> Option<Vec<u8>> {
            let (start, bytes) = self.0.range(..=address).next_back()?;
            let from = (address - start) as usize;
            let mut v: Vec<u8> = bytes.get(from..)?.to_vec();
            v.resize(len, 0xcc);
            Some(v)
        }
        fn native_symbol(&self, address: u64) -> Option<String> {
            match address {
                0x9000 => Some("JIT_RngChkFail@libcoreclr.so".into()),
                0x9100 => Some("PrecodeFixupThunk@libcoreclr.so".into()),
                _ => None,
            }
        }
    }

    /// `call rel32` from `at` to `to`.
    fn call(at: u64, to: u64) -> Vec<u8> {
        let rel = (to as i64 - (at as i64 + 5)) as i32;
        [vec![0xe8], rel.to_le_bytes().to_vec()].concat()
    }

    fn jmp(at: u64, to: u64) -> Vec<u8> {
        let rel = (to as i64 - (at as i64 + 5)) as i32;
        [vec![0xe9], rel.to_le_bytes().to_vec()].concat()
    }

    const MAP: &str = "1000 10 void [d] Ns.Fwd::forward_x(int32)[Optimized]\n\
                       3000 10 instance void [d] Ns.Agent::Run(!!1&)[Optimized]\n\
                       4000 10 instance bool [d] Ns.Meter::Tick()[Optimized]\n\
                       2000 20 stub<1> AllocateTemporaryEntryPoints<PRECODE_FIXUP>\n";

    /// The loop calls Run through a compiled precode, Tick (cold), and an uncompiled precode
    /// whose call returns; Run's bounds check calls JIT_RngChkFail then traps.
    fn image(second_run: bool) -> JitImage<Fake> {
        let mut m = BTreeMap::new();
        let mut fwd = [call(0x1000, 0x2000), call(0x1005, 0x4000), call(0x100a, 0x2008)].concat();
        fwd.push(0xc3);
        m.insert(0x1000, fwd);
        m.insert(0x2000, jmp(0x2000, 0x3000));
        m.insert(0x2008, if second_run { jmp(0x2008, 0x3000) } else { call(0x2008, 0x9100) });
        let mut run = vec![0x39, 0x3f, 0xc3]; // cmp [rdi], edi; ret
        run.extend(call(0x3003, 0x9000));
        run.push(0xcc);
        m.insert(0x3000, run);
        m.insert(0x4000, vec![0xc3]);
        JitImage::new(parse_perf_map(MAP), Fake(m))
    }

    #[test]
    fn a_bounds_check_behind_a_precode_is_found_and_cold_calls_are_not_followed() {
        let w = walk(&image(false), "Ns.Fwd::forward_x", &["Ns.Meter::Tick".into()]).unwrap();
        let names: Vec<&str> = w.functions.iter().map(|(_, f, _)| f.name.as_str()).collect();
        assert_eq!(names, ["Ns.Fwd::forward_x", "Ns.Agent::Run"]);
        let run = &w.functions[1].1;
        assert_eq!((run.checks.len(), run.checks[0].kind, run.implicit_null_checks), (1, CheckKind::BoundsCheck, 1));
        assert!(run.checks[0].source.starts_with("Ns.Agent::Run+0x3"));
        assert_eq!(w.not_run, [(vec![0, 2], "Ns.Fwd::forward_x+0xa (JIT code has no line tables)".to_string())]);
        assert!(walk(&image(false), "Ns.Fwd::forward_y", &[]).is_err());
    }

    #[test]
    fn a_callee_no_run_compiled_is_a_finding_and_one_another_run_compiled_is_not() {
        let first = walk(&image(false), "Ns.Fwd::forward_x", &["Ns.Meter::Tick".into()]).unwrap();
        let alone = merge(std::slice::from_ref(&first));
        assert!(alone[0].checks.iter().any(|c| c.kind == CheckKind::NeverCompiled));
        let second = walk(&image(true), "Ns.Fwd::forward_x", &["Ns.Meter::Tick".into()]).unwrap();
        let both = merge(&[first, second]);
        assert!(both[0].checks.is_empty());
        assert_eq!(both.len(), 2, "Run reached along two paths is reported once");
    }

    #[test]
    fn every_switch_combination_is_run() {
        assert_eq!(option_sets("const"), [vec![], vec!["--mac-rewrite", "none"]]);
        assert_eq!(option_sets("flexible").len(), 4);
        assert!(option_sets("flexible").contains(&vec!["--mac-rewrite", "none", "--flow-control"]));
    }
}
