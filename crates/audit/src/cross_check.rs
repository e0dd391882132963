//! One cross-check against binutils: `objdump -d` must decode each registered hot path into
//! the same instructions, at the same addresses, as the audit's own decoder. A disagreement
//! means one of the two misreads the code, and the audit's verdict cannot be trusted.

use crate::elf::Function;
use std::path::Path;
use std::process::Command;

/// Instruction addresses `objdump -d` finds in `[start, end)` of `binary`.
fn objdump_addresses(binary: &Path, start: u64, end: u64) -> Result<Vec<u64>, String> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "--wide"])
        .arg(format!("--start-address={start:#x}"))
        .arg(format!("--stop-address={end:#x}"))
        .arg(binary)
        .output()
        .map_err(|e| format!("running objdump: {e} (install binutils; scripts/setup does)"))?;
    if !out.status.success() {
        return Err(format!("objdump -d {}: {}", binary.display(), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (addr, insn) = l.trim_start().split_once(":\t")?;
            (!insn.trim().is_empty()).then_some(())?;
            u64::from_str_radix(addr, 16).ok()
        })
        .collect())
}

/// Compares both decodings of `f`; `Err` names the first address where they differ.
pub fn agrees_with_objdump(binary: &Path, f: &Function) -> Result<(), String> {
    let theirs = objdump_addresses(binary, f.address, f.end())?;
    let ours: Vec<u64> = f.instructions.iter().map(|i| i.ip()).collect();
    if let Some(i) = (0..ours.len().max(theirs.len())).find(|&i| ours.get(i) != theirs.get(i)) {
        return Err(format!(
            "{}: objdump decodes {} instructions and the audit {}; they first differ at {:#x}",
            f.name,
            theirs.len(),
            ours.len(),
            ours.get(i).or(theirs.get(i)).copied().unwrap_or(f.address)
        ));
    }
    Ok(())
}
