//! `safenic audit`: proves from the compiled release code that the hot paths contain no
//! run-time checks, and that unsafe code stays in its two crates.
//!
//! - **Hot paths.** Every function in [`crate::fwd::HOT_PATHS`] is disassembled (objdump), with
//!   every function it calls that is not inlined, transitively. A call or tail jump to a panic,
//!   bounds-check, overflow, unwrap/expect, slice-index, allocation or formatting routine is a
//!   finding. Its source line comes from the debug line tables (addr2line, through the inlining
//!   chain, to the first line in this repository). Calls listed in [`crate::fwd::COLD_CALLS`]
//!   are allowed, each for a stated reason, and are not followed.
//! - **Table 2 of the paper.** Lines of code per driver and instructions in each main loop, for
//!   the Rust driver and the C baseline.
//! - **Unsafe budget.** Per crate: unsafe blocks and the lines inside them. Only `invariants`
//!   and `platform` may have any, and each block needs a `// SAFETY:` comment.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The keyword the unsafe budget counts (spelled in two pieces so that this file, which has
/// none, does not appear to have any to a text search).
const KEYWORD: &str = concat!("un", "safe");

/// Crates allowed to contain unsafe code.
pub const UNSAFE_ROOMS: [&str; 2] = ["invariants", "platform"];

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
        }
    }
}

/// Classifies a callee by its demangled name; `None` for an ordinary function.
pub fn classify(callee: &str) -> Option<CheckKind> {
    let c = callee;
    let has = |s: &str| c.contains(s);
    if has("panic_bounds_check") {
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
        || c.starts_with("malloc")
        || c.starts_with("realloc")
        || c.starts_with("calloc")
    {
        Some(CheckKind::Allocation)
    } else if has("core::fmt::") || has("alloc::fmt::") || has("std::io::stdio::_print") {
        Some(CheckKind::Formatting)
    } else {
        None
    }
}

/// One function of the disassembly.
#[derive(Debug, Clone)]
pub struct Function {
    pub name: String,
    pub address: u64,
    pub instructions: Vec<(u64, String)>,
}

/// Parses `objdump -d --no-show-raw-insn -C` output.
pub fn parse_objdump(text: &str) -> Vec<Function> {
    let mut out: Vec<Function> = Vec::new();
    for line in text.lines() {
        if let Some((addr, rest)) = line.split_once(" <") {
            if let (Ok(address), Some(name)) = (u64::from_str_radix(addr.trim(), 16), rest.strip_suffix(">:")) {
                out.push(Function { name: name.to_string(), address, instructions: Vec::new() });
                continue;
            }
        }
        let Some(f) = out.last_mut() else { continue };
        let trimmed = line.trim_start();
        if let Some((addr, insn)) = trimmed.split_once(":\t") {
            if let Ok(a) = u64::from_str_radix(addr, 16) {
                f.instructions.push((a, insn.trim().to_string()));
            }
        }
    }
    out
}

pub fn disassemble(binary: &Path) -> Result<Vec<Function>, String> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "-C"])
        .arg(binary)
        .output()
        .map_err(|e| format!("running objdump: {e} (install binutils; scripts/setup does)"))?;
    if !out.status.success() {
        return Err(format!("objdump {}: {}", binary.display(), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(parse_objdump(&String::from_utf8_lossy(&out.stdout)))
}

/// Where a call or jump outside the current function goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// A named function (`call 1234 <name>`).
    Named(String),
    /// Through a pointer in memory at this address (`call *X(%rip)  # addr <…>`): a GOT slot,
    /// resolved with the dynamic relocations.
    Slot(u64),
    /// Through a register or computed pointer: cannot be followed.
    Indirect,
}

/// The target of a call or jump instruction that leaves `current`, if it is one.
fn external_target(insn: &str, current: &str) -> Option<Target> {
    let (op, operand) = insn.split_once(char::is_whitespace).unwrap_or((insn, ""));
    let is_call = op.starts_with("call");
    let is_jump = op.starts_with('j');
    if !is_call && !is_jump {
        return None;
    }
    let operand = operand.trim();
    if let Some(pointer) = operand.strip_prefix('*') {
        if pointer.contains("(%rip)") {
            // objdump writes the slot's address in the comment: `# 1d0748 <memmove@GLIBC_2.2.5>`.
            let slot = operand.split_once('#').and_then(|(_, c)| c.split_whitespace().next());
            if let Some(a) = slot.and_then(|a| u64::from_str_radix(a, 16).ok()) {
                return Some(Target::Slot(a));
            }
        }
        // Jump tables (`jmp *…`) stay inside the function; indirect calls leave it.
        return is_call.then_some(Target::Indirect);
    }
    let start = operand.find('<')?;
    let target = operand[start + 1..].strip_suffix('>')?;
    let base = target.split_once('+').map_or(target, |(b, _)| b);
    (base != current).then(|| Target::Named(base.to_string()))
}

/// What a GOT slot holds, from `objdump -R`: a symbol from a shared library, or the address of
/// a function in this binary.
#[derive(Debug, Clone)]
enum Slot {
    Symbol(String),
    Address(u64),
}

fn dynamic_slots(binary: &Path) -> Result<BTreeMap<u64, Slot>, String> {
    let out = Command::new("objdump")
        .arg("-R")
        .arg(binary)
        .output()
        .map_err(|e| format!("running objdump -R: {e} (install binutils; scripts/setup does)"))?;
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut f = line.split_whitespace();
        let (Some(off), Some(kind), Some(value)) = (f.next(), f.next(), f.next()) else { continue };
        let Ok(off) = u64::from_str_radix(off, 16) else { continue };
        if kind.ends_with("RELATIVE") {
            if let Some(a) = value.strip_prefix("*ABS*+0x").and_then(|h| u64::from_str_radix(h, 16).ok()) {
                m.insert(off, Slot::Address(a));
            }
        } else if kind.ends_with("GLOB_DAT") || kind.ends_with("JUMP_SLOT") {
            m.insert(off, Slot::Symbol(value.split('@').next().unwrap_or(value).to_string()));
        }
    }
    Ok(m)
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
}

/// Audits `roots` (demangled names; every instantiation matches, `name::<…>` included) and
/// what they call, except the `cold` callees. Fails if a root is missing from the binary.
pub fn audit_hot_paths(
    binary: &Path,
    functions: &[Function],
    roots: &[&str],
    cold: &[&str],
) -> Result<Vec<FunctionReport>, String> {
    let matches = |f: &Function, root: &str| f.name == root || f.name.starts_with(&format!("{root}::<"));
    let by_address: BTreeMap<u64, &Function> = functions.iter().map(|f| (f.address, f)).collect();
    let by_name: BTreeMap<&str, Vec<&Function>> = functions.iter().fold(BTreeMap::new(), |mut m, f| {
        m.entry(f.name.as_str()).or_default().push(f);
        m
    });
    let mut queue: VecDeque<(&Function, String)> = VecDeque::new();
    for root in roots {
        let found: Vec<&Function> = functions.iter().filter(|f| matches(f, root)).collect();
        if found.is_empty() {
            return Err(format!(
                "hot path {root} is not in {}: was it renamed, or inlined (it must be #[inline(never)])?",
                binary.display()
            ));
        }
        queue.extend(found.into_iter().map(|f| (f, root.to_string())));
    }
    let slots = dynamic_slots(binary)?;
    let mut seen: BTreeSet<u64> = BTreeSet::new();
    let mut reports = Vec::new();
    let mut pending_lines: Vec<u64> = Vec::new();
    while let Some((f, root)) = queue.pop_front() {
        if !seen.insert(f.address) {
            continue;
        }
        let mut checks = Vec::new();
        for (addr, insn) in &f.instructions {
            let Some(target) = external_target(insn, &f.name) else { continue };
            let callee = match target {
                Target::Named(c) => c,
                Target::Slot(a) => match slots.get(&a) {
                    Some(Slot::Symbol(name)) => name.clone(),
                    Some(Slot::Address(t)) => match by_address.get(t) {
                        Some(g) => g.name.clone(),
                        None => format!("{t:#x}"),
                    },
                    None => {
                        checks.push((CheckKind::IndirectCall, format!("*{a:#x}"), *addr));
                        continue;
                    }
                },
                Target::Indirect => {
                    checks.push((CheckKind::IndirectCall, "*".to_string(), *addr));
                    continue;
                }
            };
            if let Some(kind) = classify(&callee) {
                checks.push((kind, callee, *addr));
            } else if cold.iter().any(|c| callee == *c || callee.starts_with(&format!("{c}::<"))) {
                // Allowed: does not run per packet.
            } else if let Some(next) = by_name.get(callee.as_str()) {
                // A call that was not inlined: audit the callee too (the one at that address if
                // several share the name).
                let addr_in_insn = insn
                    .split_whitespace()
                    .nth(1)
                    .and_then(|a| u64::from_str_radix(a, 16).ok())
                    .and_then(|a| by_address.get(&a).copied());
                match addr_in_insn {
                    Some(g) => queue.push_back((g, root.clone())),
                    None => queue.extend(next.iter().map(|g| (*g, root.clone()))),
                }
            }
            // Anything else (a libc routine through the PLT, e.g. memcpy) is not a check.
        }
        pending_lines.extend(checks.iter().map(|c| c.2));
        reports.push((f, root, checks));
    }
    let lines = source_lines(binary, &pending_lines)?;
    Ok(reports
        .into_iter()
        .map(|(f, root, checks)| FunctionReport {
            name: f.name.clone(),
            address: format!("{:#x}", f.address),
            instructions: f.instructions.len(),
            reached_from: root,
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

/// For each address, the first `file:line` of this repository in its inlining chain
/// (innermost first), relative to the repository; else the innermost line.
pub fn source_lines(binary: &Path, addresses: &[u64]) -> Result<BTreeMap<u64, String>, String> {
    let mut map = BTreeMap::new();
    if addresses.is_empty() {
        return Ok(map);
    }
    let out = Command::new("addr2line")
        .args(["-i", "-f", "-C", "-a", "-e"])
        .arg(binary)
        .args(addresses.iter().map(|a| format!("{a:#x}")))
        .output()
        .map_err(|e| format!("running addr2line: {e} (install binutils; scripts/setup does)"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut current: Option<u64> = None;
    let mut frames: Vec<String> = Vec::new();
    let mut flush = |addr: Option<u64>, frames: &mut Vec<String>| {
        if let Some(a) = addr {
            let ours = frames.iter().find(|l| is_ours(l)).or(frames.first());
            if let Some(l) = ours {
                map.insert(a, relative(l));
            }
        }
        frames.clear();
    };
    for line in text.lines() {
        if let Some(hex) = line.strip_prefix("0x") {
            flush(current, &mut frames);
            current = u64::from_str_radix(hex, 16).ok();
        } else if line.contains(':') && !line.starts_with("??") {
            // `file:line` lines alternate with function-name lines.
            if line
                .rsplit_once(':')
                .is_some_and(|(_, n)| n.split_whitespace().next().is_some_and(|n| n.parse::<u32>().is_ok()))
            {
                frames.push(line.to_string());
            }
        }
    }
    flush(current, &mut frames);
    Ok(map)
}

fn is_ours(line: &str) -> bool {
    (line.contains("/crates/") || line.starts_with("crates/"))
        && !line.contains("/.cargo/")
        && !line.contains("/rustc/")
}

/// `…/crates/x/src/y.rs:12` → `crates/x/src/y.rs:12`.
fn relative(line: &str) -> String {
    let line = line.split(" (discriminator").next().unwrap_or(line);
    match line.find("crates/") {
        Some(i) if is_ours(line) => line[i..].to_string(),
        _ => line.to_string(),
    }
}

/// Unsafe code of one crate.
#[derive(Debug, Clone, Serialize)]
pub struct UnsafeBudget {
    pub name: String,
    pub unsafe_blocks: usize,
    pub unsafe_lines: usize,
    /// `file:line` of unsafe blocks without a `// SAFETY:` comment right above.
    pub undocumented: Vec<String>,
    pub allowed: bool,
}

/// Counts unsafe blocks and impls in one Rust source text: (blocks, lines
/// inside them, 1-based lines of those without a `// SAFETY:` comment right above).
pub fn count_unsafe(source: &str) -> (usize, usize, Vec<usize>) {
    let lines: Vec<&str> = source.lines().collect();
    let (mut blocks, mut inside, mut undocumented) = (0, 0, Vec::new());
    for (i, raw) in lines.iter().enumerate() {
        let code = raw.split("//").next().unwrap_or("");
        let Some(at) = find_unsafe(code) else { continue };
        blocks += 1;
        // Lines up to the brace that closes the one after `unsafe`.
        let mut depth = 0i32;
        let mut end = i;
        let mut started = false;
        'scan: for (j, l) in lines.iter().enumerate().skip(i) {
            let code = l.split("//").next().unwrap_or("");
            let code = if j == i { &code[at..] } else { code };
            for ch in code.chars() {
                match ch {
                    '{' => {
                        depth += 1;
                        started = true;
                    }
                    '}' => depth -= 1,
                    ';' if !started => {
                        end = j; // an item ending in `;` before any brace
                        break 'scan;
                    }
                    _ => {}
                }
                if started && depth == 0 {
                    end = j;
                    break 'scan;
                }
            }
        }
        inside += end - i + 1;
        // A `// SAFETY:` in the comment lines directly above (or on this line before `unsafe`).
        let mut documented = raw.contains("SAFETY:");
        let mut k = i;
        while !documented && k > 0 {
            k -= 1;
            let t = lines[k].trim_start();
            if t.starts_with("//") {
                documented |= t.contains("SAFETY:");
            } else if !(t.ends_with('=') || t.ends_with('(') || t.ends_with(',') || t.is_empty()) || k + 3 < i {
                break;
            }
        }
        if !documented {
            undocumented.push(i + 1);
        }
    }
    (blocks, inside, undocumented)
}

/// Where an unsafe block or impl starts in a line of code (comments removed).
fn find_unsafe(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(p) = code[from..].find(KEYWORD) {
        let at = from + p;
        let before_ok = at == 0 || !code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_');
        let rest = code[at + KEYWORD.len()..].trim_start();
        if before_ok && (rest.starts_with('{') || rest.starts_with("impl")) && !in_string(code, at) {
            return Some(at);
        }
        from = at + KEYWORD.len();
    }
    None
}

fn in_string(code: &str, at: usize) -> bool {
    code[..at].matches('"').count() % 2 == 1
}

/// The unsafe budget of every crate under `root/crates`.
pub fn unsafe_budget(root: &Path) -> Result<Vec<UnsafeBudget>, String> {
    let crates = root.join("crates");
    let mut names: Vec<String> = std::fs::read_dir(&crates)
        .map_err(|e| format!("reading {}: {e} (run from the repository root or pass --root)", crates.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("Cargo.toml").exists())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let dir = crates.join(&name);
        let (mut blocks, mut lines, mut undocumented) = (0, 0, Vec::new());
        for file in rust_files(&dir) {
            let text = std::fs::read_to_string(&file).map_err(|e| format!("reading {}: {e}", file.display()))?;
            let (b, l, u) = count_unsafe(&text);
            blocks += b;
            lines += l;
            let rel = file.strip_prefix(root).unwrap_or(&file).display().to_string();
            undocumented.extend(u.into_iter().map(|n| format!("{rel}:{n}")));
        }
        let allowed = UNSAFE_ROOMS.contains(&name.as_str());
        out.push(UnsafeBudget { name, unsafe_blocks: blocks, unsafe_lines: lines, undocumented, allowed });
    }
    Ok(out)
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.filter_map(|e| e.ok()) {
            let p = e.path();
            if p.is_dir() && p.file_name().is_some_and(|n| n != "target") {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Lines of code: non-blank lines that are not only a comment, up to a file's test module.
pub fn lines_of_code(files: &[PathBuf]) -> usize {
    files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .map(|text| {
            text.lines()
                .take_while(|l| l.trim() != "#[cfg(test)]")
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with("/*") && !l.starts_with('*'))
                .count()
        })
        .sum()
}

/// A row of the Table 2 comparison.
#[derive(Debug, Clone, Serialize)]
pub struct SizeRow {
    pub driver: String,
    pub lines_of_code: usize,
    /// Main loop → x86 instructions (one entry per compiled instance).
    pub loops: BTreeMap<String, Vec<usize>>,
}

fn loop_sizes(functions: &[Function], names: &[(&str, &str)]) -> BTreeMap<String, Vec<usize>> {
    let mut m = BTreeMap::new();
    for (model, name) in names {
        let sizes: Vec<usize> = functions
            .iter()
            .filter(|f| {
                f.name == *name || f.name.starts_with(&format!("{name}::<")) || f.name.starts_with(&format!("{name}."))
            })
            .map(|f| f.instructions.len())
            .collect();
        m.insert(model.to_string(), sizes);
    }
    m
}

/// Lines and loop sizes of the Rust driver (`functions` from its binary) and of each C build
/// found under `root/drivers/c/build`.
pub fn size_table(root: &Path, functions: &[Function]) -> Vec<SizeRow> {
    let rust_files: Vec<PathBuf> =
        [rust_files(&root.join("crates/ixgbe/src")), vec![root.join("crates/safenic/src/fwd.rs")]].concat();
    let mut rows = vec![SizeRow {
        driver: "rust (crates/ixgbe + safenic fwd.rs)".into(),
        lines_of_code: lines_of_code(&rust_files),
        loops: loop_sizes(
            functions,
            &[
                ("restricted", "safenic::fwd::forward_restricted"),
                ("const", "safenic::fwd::forward_const"),
                ("flexible", "safenic::fwd::forward_flexible"),
            ],
        ),
    }];
    let c_src = root.join("drivers/c/src");
    let c_files: Vec<PathBuf> =
        std::fs::read_dir(&c_src).map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect()).unwrap_or_default();
    let c_loc = lines_of_code(&c_files);
    for compiler in ["clang", "gcc"] {
        let mut loops = BTreeMap::new();
        for model in ["restricted", "const", "flexible"] {
            let bin = root.join(format!("drivers/c/build/{compiler}/safenic-c-{model}"));
            if let Ok(funcs) = disassemble(&bin) {
                let name = format!("forward_{model}");
                loops.extend(loop_sizes(&funcs, &[(model, name.as_str())]));
            }
        }
        if !loops.is_empty() {
            rows.push(SizeRow { driver: format!("c, {compiler} (drivers/c/src)"), lines_of_code: c_loc, loops });
        }
    }
    rows
}

/// Everything `safenic audit` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub binary: String,
    pub functions: Vec<FunctionReport>,
    pub cold_calls: Vec<(String, String)>,
    pub crates: Vec<UnsafeBudget>,
    pub sizes: Vec<SizeRow>,
    pub trusted_kernel_lines: usize,
    pub hot_path_checks: usize,
    pub passed: bool,
}

pub fn run(binary: &Path, root: &Path, json: bool) -> Result<bool, String> {
    if binary.components().any(|c| c.as_os_str() == "debug") {
        return Err(format!(
            "{} is a debug build, which keeps overflow checks: audit the release build (make audit does)",
            binary.display()
        ));
    }
    let functions = disassemble(binary)?;
    let cold: Vec<&str> = crate::fwd::COLD_CALLS.iter().map(|(n, _)| *n).collect();
    let reports = audit_hot_paths(binary, &functions, crate::fwd::HOT_PATHS, &cold)?;
    let crates = unsafe_budget(root)?;
    let sizes = size_table(root, &functions);
    let kernel_files = rust_files(&root.join("crates/invariants/src"));
    let hot_path_checks: usize = reports.iter().map(|r| r.checks.len()).sum();
    let unsafe_ok = crates.iter().all(|c| c.undocumented.is_empty() && (c.allowed || c.unsafe_blocks == 0));
    let report = Report {
        binary: binary.display().to_string(),
        functions: reports,
        cold_calls: crate::fwd::COLD_CALLS.iter().map(|(n, w)| (n.to_string(), w.to_string())).collect(),
        crates,
        sizes,
        trusted_kernel_lines: lines_of_code(&kernel_files),
        hot_path_checks,
        passed: hot_path_checks == 0 && unsafe_ok,
    };
    if json {
        cli::outln!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?)?;
    } else {
        print_text(&report)?;
    }
    Ok(report.passed)
}

fn print_text(r: &Report) -> Result<(), String> {
    cli::outln!("Hot paths of {} (registered in crates/safenic/src/fwd.rs, and what they call):", r.binary)?;
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
    cli::outln!("")?;
    cli::outln!("Size (paper Table 2): lines of code, and x86 instructions in each main loop")?;
    cli::outln!("  {:<40} {:>6}  {:<22} {:<22} {:<22}", "driver", "lines", "restricted", "const", "flexible")?;
    for s in &r.sizes {
        let cell = |m: &str| s.loops.get(m).map(|v| format!("{v:?}")).unwrap_or_else(|| "-".into());
        cli::outln!(
            "  {:<40} {:>6}  {:<22} {:<22} {:<22}",
            s.driver,
            s.lines_of_code,
            cell("restricted"),
            cell("const"),
            cell("flexible")
        )?;
    }
    cli::outln!("")?;
    cli::outln!("Unsafe budget (allowed only in {}):", UNSAFE_ROOMS.join(" and "))?;
    for c in &r.crates {
        let mark = if !c.allowed && c.unsafe_blocks > 0 {
            "  NOT ALLOWED"
        } else if !c.undocumented.is_empty() {
            "  MISSING // SAFETY:"
        } else {
            ""
        };
        cli::outln!("  {:<12} {:>3} unsafe blocks, {:>4} lines{mark}", c.name, c.unsafe_blocks, c.unsafe_lines)?;
        for u in &c.undocumented {
            cli::outln!("      no // SAFETY: comment above the unsafe block at {u}")?;
        }
    }
    cli::outln!("Trusted kernel (crates/invariants): {} lines of code", r.trusted_kernel_lines)?;
    cli::outln!("audit: {}", if r.passed { "passed" } else { "FAILED" })?;
    Ok(())
}

/// A function with a check on purpose: the audit's own tests prove it finds it, at this line.
#[inline(never)]
pub fn audit_fixture_checked(values: &[u32], index: usize) -> u32 {
    values[index]
}
/// The line of the indexing expression above.
#[cfg_attr(not(test), allow(dead_code))]
pub const FIXTURE_LINE: u32 = line!() - 4;

/// Keeps the fixture in every build of the binary, so the audit can be tested on it.
#[used]
static KEEP_FIXTURE: fn(&[u32], usize) -> u32 = audit_fixture_checked;

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
        assert_eq!(classify("memcpy@plt"), None);
    }

    #[test]
    fn objdump_output_parses_into_functions_and_external_targets() {
        let text = "\n0000000000001000 <a::hot>:\n    1000:\tmov    %rdi,%rax\n    1003:\tjne    1010 <a::hot+0x10>\n    1005:\tcall   2000 <core::panicking::panic_bounds_check>\n    100a:\tjmp    *%rax\n    100c:\tcall   *0x8(%rax)\n\n0000000000002000 <core::panicking::panic_bounds_check>:\n    2000:\tud2\n";
        let f = parse_objdump(text);
        assert_eq!(f.len(), 2);
        assert_eq!((f[0].name.as_str(), f[0].address, f[0].instructions.len()), ("a::hot", 0x1000, 5));
        let targets: Vec<_> = f[0].instructions.iter().filter_map(|(_, i)| external_target(i, "a::hot")).collect();
        assert_eq!(targets, vec![Target::Named("core::panicking::panic_bounds_check".to_string()), Target::Indirect]);
        assert_eq!(
            external_target("call   *0x14ea35(%rip)        # 1d0748 <memmove@GLIBC_2.2.5>", "a::hot"),
            Some(Target::Slot(0x1d0748))
        );
    }

    #[test]
    fn unsafe_blocks_are_counted_and_need_a_safety_comment() {
        let src = "fn a() {\n    // SAFETY: fine.\n    UNSAFE { x() };\n    let y =\n        // SAFETY: also fine,\n        // over two lines.\n        UNSAFE {\n            z()\n        };\n    UNSAFE { w() }\n    let s = \"UNSAFE { not code }\"; // UNSAFE { nor this }\n}\n"
            .replace("UNSAFE", KEYWORD);
        let (blocks, lines, undocumented) = count_unsafe(&src);
        assert_eq!(blocks, 3);
        assert_eq!(lines, 1 + 3 + 1);
        assert_eq!(undocumented, vec![10]);
    }

    #[test]
    fn unsafe_outside_the_two_rooms_is_refused() {
        let root = std::env::temp_dir().join(format!("safenic-audit-{}", std::process::id()));
        for (name, body) in [("ixgbe", "// SAFETY: documented.\nUNSAFE { f() }\n"), ("platform", "UNSAFE { g() }\n")] {
            let body = body.replace("UNSAFE", KEYWORD);
            let dir = root.join("crates").join(name);
            std::fs::create_dir_all(dir.join("src")).unwrap();
            std::fs::write(dir.join("Cargo.toml"), "[package]\n").unwrap();
            std::fs::write(dir.join("src/lib.rs"), format!("fn x() {{\n{body}}}\n")).unwrap();
        }
        let budget = unsafe_budget(&root).unwrap();
        let get = |n: &str| budget.iter().find(|c| c.name == n).unwrap().clone();
        let (ixgbe, platform) = (get("ixgbe"), get("platform"));
        assert_eq!((ixgbe.unsafe_blocks, ixgbe.allowed), (1, false), "ixgbe may not have unsafe");
        assert!(ixgbe.undocumented.is_empty());
        assert_eq!((platform.unsafe_blocks, platform.allowed), (1, true));
        assert_eq!(platform.undocumented, vec!["crates/platform/src/lib.rs:2".to_string()]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_checked_fixture_is_flagged_at_its_line() {
        // This test binary contains the fixture (kept by #[used]); it is a dev build, which is
        // fine: the bounds check is there in every profile.
        let exe = std::env::current_exe().unwrap();
        let functions = disassemble(&exe).unwrap();
        let reports = audit_hot_paths(&exe, &functions, &["safenic::audit::audit_fixture_checked"], &[]).unwrap();
        let checks: Vec<&Finding> = reports.iter().flat_map(|r| &r.checks).collect();
        assert!(
            checks.iter().any(|c| c.kind == CheckKind::BoundsCheck
                && c.source.starts_with(&format!("crates/safenic/src/audit.rs:{FIXTURE_LINE}"))),
            "the audit must flag the fixture's bounds check at audit.rs:{FIXTURE_LINE}: {checks:#?}"
        );
    }

    #[test]
    fn a_missing_hot_path_is_an_error_that_says_why() {
        let exe = std::env::current_exe().unwrap();
        let functions = disassemble(&exe).unwrap();
        let e = audit_hot_paths(&exe, &functions, &["safenic::no_such_loop"], &[]).unwrap_err();
        assert!(e.contains("#[inline(never)]"), "{e}");
    }
}
