//! JIT-compiled code as the audit sees it: the methods a .NET runtime wrote into its perf map
//! (`COMPlus_PerfMapEnabled=1`: one line per compiled method or stub block, `ADDRESS SIZE
//! NAME`), their machine code read from the process, and where their calls go. A JIT leaves
//! no symbols, so a call is named by what it reaches:
//! - a compiled method of the perf map;
//! - a precode stub, which jumps to its method once that is compiled and calls the runtime's
//!   `PrecodeFixupThunk` until then (a method never run so far);
//! - a routine of a shared library (the runtime's helpers, `JIT_RngChkFail` for a failed
//!   bounds check), named from that file's symbol table.
//!
//! [`CodeSource`] is the process; [`LiveProcess`] reads a running one through `/proc`.

use crate::elf::Function;
use iced_x86::{Code, Decoder, DecoderOptions, FlowControl, Instruction, OpKind, Register};
use object::{Object, ObjectSegment, ObjectSymbol};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// One line of a perf map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfEntry {
    pub address: u64,
    pub size: u64,
    /// As the runtime wrote it: `instance uint32 [asm] Ns.Type::Method(args)[Optimized]`.
    pub signature: String,
}

impl PerfEntry {
    pub fn end(&self) -> u64 {
        self.address + self.size
    }

    /// A block of stubs (`stub<N> …`) rather than a method.
    pub fn is_stub(&self) -> bool {
        self.signature.starts_with("stub<")
    }

    /// `Ns.Type::Method`: the signature without return type, assembly, parameters and tier.
    pub fn method(&self) -> &str {
        let before_args = self.signature.split('(').next().unwrap_or(&self.signature);
        before_args.rsplit(' ').next().unwrap_or(before_args)
    }
}

/// The entries of a perf map, by address (a malformed line is skipped).
pub fn parse_perf_map(text: &str) -> Vec<PerfEntry> {
    let mut entries: Vec<PerfEntry> = text
        .lines()
        .filter_map(|l| {
            let mut words = l.splitn(3, ' ');
            let address = u64::from_str_radix(words.next()?, 16).ok()?;
            let size = u64::from_str_radix(words.next()?, 16).ok()?;
            Some(PerfEntry { address, size, signature: words.next()?.to_string() })
        })
        .collect();
    entries.sort_by_key(|e| e.address);
    entries
}

/// A process's memory and the names of its shared libraries' routines.
pub trait CodeSource {
    fn read(&self, address: u64, len: usize) -> Option<Vec<u8>>;
    /// The routine of a mapped file that contains `address`.
    fn native_symbol(&self, address: u64) -> Option<String>;
}

/// What a call out of a method reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Callee {
    /// A compiled method (index into the perf map's entries).
    Method(usize),
    /// A routine of a shared library, by name.
    Native(String),
    /// A precode whose method was never compiled: it never ran in this process.
    NeverCompiled,
    /// Nothing the audit can name.
    Unknown(u64),
}

/// The JIT's code in one process.
pub struct JitImage<S: CodeSource> {
    pub entries: Vec<PerfEntry>,
    pub source: S,
}

/// How many jumps a chain of stubs may take before the audit gives up on it.
const STUB_HOPS: usize = 4;

impl<S: CodeSource> JitImage<S> {
    pub fn new(mut entries: Vec<PerfEntry>, source: S) -> JitImage<S> {
        entries.sort_by_key(|e| e.address);
        JitImage { entries, source }
    }

    fn entry_at(&self, address: u64) -> Option<usize> {
        let i = self.entries.partition_point(|e| e.address <= address).checked_sub(1)?;
        (address < self.entries[i].end()).then_some(i)
    }

    /// The compiled methods named `Ns.Type::Method` (every instance of a generic one).
    pub fn methods_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = usize> + 'a {
        (0..self.entries.len()).filter(move |&i| !self.entries[i].is_stub() && self.entries[i].method() == name)
    }

    /// The machine code of entry `i`, decoded.
    pub fn function(&self, i: usize) -> Result<Function, String> {
        let e = &self.entries[i];
        let bytes = self
            .source
            .read(e.address, e.size as usize)
            .ok_or_else(|| format!("cannot read the code of {} at {:#x}", e.signature, e.address))?;
        let instructions = Decoder::with_ip(64, &bytes, e.address, DecoderOptions::NONE).into_iter().collect();
        Ok(Function { name: e.method().to_string(), address: e.address, instructions })
    }

    /// Where a call or jump to `address` ends up.
    pub fn resolve(&self, address: u64) -> Callee {
        self.resolve_hops(address, STUB_HOPS)
    }

    fn resolve_hops(&self, address: u64, hops: usize) -> Callee {
        match self.entry_at(address) {
            Some(i) if !self.entries[i].is_stub() => Callee::Method(i),
            Some(_) if hops > 0 => self.through_stub(address, hops - 1),
            Some(_) => Callee::Unknown(address),
            None => self.source.native_symbol(address).map_or(Callee::Unknown(address), Callee::Native),
        }
    }

    /// A stub: a jump onwards (directly, through a cell, or `mov reg, imm64; jmp reg`), or a
    /// call into the runtime's precode fixup, which compiles the method on its first call.
    fn through_stub(&self, address: u64, hops: usize) -> Callee {
        let Some(bytes) = self.source.read(address, 32) else { return Callee::Unknown(address) };
        let code: Vec<Instruction> = Decoder::with_ip(64, &bytes, address, DecoderOptions::NONE).into_iter().collect();
        let Some(first) = code.first() else { return Callee::Unknown(address) };
        let onwards = match first.flow_control() {
            FlowControl::UnconditionalBranch => Some(first.near_branch_target()),
            FlowControl::IndirectBranch if first.is_ip_rel_memory_operand() => {
                self.pointer_at(first.ip_rel_memory_address())
            }
            FlowControl::Call => {
                return match self.resolve_hops(first.near_branch_target(), hops) {
                    Callee::Native(n) if is_precode_fixup(&n) => Callee::NeverCompiled,
                    _ => Callee::Unknown(address),
                };
            }
            _ => code.get(1).and_then(|jmp| loaded_register_target(first, jmp)),
        };
        match onwards {
            Some(to) => self.resolve_hops(to, hops),
            None => Callee::Unknown(address),
        }
    }

    /// The 8-byte pointer stored at `address`.
    pub fn pointer_at(&self, address: u64) -> Option<u64> {
        let b = self.source.read(address, 8)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }
}

/// The routine a precode calls until its method is compiled.
fn is_precode_fixup(name: &str) -> bool {
    name.contains("PrecodeFixupThunk") || name.contains("ThePreStub")
}

/// `mov reg, imm64` followed by a call or jump through `reg`: the immediate.
pub fn loaded_register_target(load: &Instruction, branch: &Instruction) -> Option<u64> {
    let through = branch.op0_kind() == OpKind::Register
        && matches!(branch.flow_control(), FlowControl::IndirectBranch | FlowControl::IndirectCall);
    (load.code() == Code::Mov_r64_imm64 && through && load.op0_register() == branch.op0_register())
        .then(|| load.immediate64())
}

/// RyuJIT's implicit null check: `cmp [reg], reg32`, a load whose only purpose is to fault
/// (a `NullReferenceException`) if `reg` is null. No call, one instruction.
pub fn is_implicit_null_check(insn: &Instruction) -> bool {
    insn.code() == Code::Cmp_rm32_r32
        && insn.op0_kind() == OpKind::Memory
        && insn.memory_index() == Register::None
        && insn.memory_displacement64() == 0
        && insn.memory_base().full_register() == insn.op1_register().full_register()
}

/// The name of a C++ symbol without its mangling, enough to read it (`_Z14JIT_RngChkFailv` →
/// `JIT_RngChkFail`); other names unchanged.
pub fn readable_symbol(name: &str) -> String {
    let Some(rest) = name.strip_prefix("_Z") else { return name.to_string() };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    match digits.parse::<usize>() {
        Ok(n) if rest.len() >= digits.len() + n => rest[digits.len()..digits.len() + n].to_string(),
        _ => name.to_string(),
    }
}

/// A mapping of `/proc/PID/maps`: `[start, end)` of `path` from file offset `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub path: Option<PathBuf>,
}

/// The mappings of a `/proc/PID/maps` text.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (start, end) = w.next()?.split_once('-')?;
            let _perms = w.next()?;
            let offset = u64::from_str_radix(w.next()?, 16).ok()?;
            let (_dev, _inode) = (w.next()?, w.next()?);
            let path = w.next().filter(|p| p.starts_with('/')).map(PathBuf::from);
            Some(Mapping {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                offset,
                path,
            })
        })
        .collect()
}

/// A shared library's routines by the file offset of their code.
struct Symbols {
    /// `(file offset, size, name)`, by offset.
    routines: Vec<(u64, u64, String)>,
}

impl Symbols {
    fn read(path: &Path) -> Option<Symbols> {
        let data = std::fs::read(path).ok()?;
        let file = object::File::parse(&*data).ok()?;
        let segments: Vec<(u64, u64, u64)> = file
            .segments()
            .filter_map(|s| {
                let (offset, size) = s.file_range();
                (size > 0).then_some((s.address(), offset, size))
            })
            .collect();
        let file_offset = |vaddr: u64| {
            segments.iter().find(|(a, _, size)| (*a..a + size).contains(&vaddr)).map(|(a, off, _)| vaddr - a + off)
        };
        let mut routines: Vec<(u64, u64, String)> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == object::SymbolKind::Text && !s.is_undefined())
            .filter_map(|s| Some((file_offset(s.address())?, s.size(), readable_symbol(s.name().ok()?))))
            .collect();
        routines.sort();
        routines.dedup_by_key(|r| r.0);
        Some(Symbols { routines })
    }

    fn at(&self, offset: u64) -> Option<&str> {
        let i = self.routines.partition_point(|r| r.0 <= offset).checked_sub(1)?;
        let (start, size, name) = &self.routines[i];
        // A size of 0 (hand-written assembly): up to the next symbol.
        let end = if *size == 0 { self.routines.get(i + 1).map_or(u64::MAX, |r| r.0) } else { start + size };
        (offset < end).then_some(name.as_str())
    }
}

/// A running process, read through `/proc/PID/mem` and `/proc/PID/maps` (its parent, or
/// root, may).
pub struct LiveProcess {
    mem: std::fs::File,
    maps: Vec<Mapping>,
    symbols: RefCell<BTreeMap<PathBuf, Option<Symbols>>>,
}

impl LiveProcess {
    pub fn open(pid: u32) -> Result<LiveProcess, String> {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .map_err(|e| format!("reading /proc/{pid}/maps: {e}"))?;
        let mem = std::fs::File::open(format!("/proc/{pid}/mem"))
            .map_err(|e| format!("opening /proc/{pid}/mem: {e} (the audit reads the driver's code as its parent)"))?;
        Ok(LiveProcess { mem, maps: parse_maps(&maps), symbols: RefCell::new(BTreeMap::new()) })
    }
}

impl CodeSource for LiveProcess {
    fn read(&self, address: u64, len: usize) -> Option<Vec<u8>> {
        let mut buf = vec![0; len];
        self.mem.read_exact_at(&mut buf, address).ok()?;
        Some(buf)
    }

    fn native_symbol(&self, address: u64) -> Option<String> {
        let m = self.maps.iter().find(|m| (m.start..m.end).contains(&address))?;
        let path = m.path.as_ref()?;
        let mut cache = self.symbols.borrow_mut();
        let symbols = cache.entry(path.clone()).or_insert_with(|| Symbols::read(path));
        let name = symbols.as_ref()?.at(address - m.start + m.offset)?;
        let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        Some(format!("{name}@{file}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_map_lines_name_methods_and_stubs() {
        let map = "7F2263261F10 182 instance uint32 [safenic-csharp] Safenic.Driver.Agent::Run(!!1&)[Optimized]\n\
                   7F2263260A28 8 stub<657> AllocateTemporaryEntryPoints<PRECODE_FIXUP>\nnot a line\n";
        let e = parse_perf_map(map);
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].address, e[0].end()), (0x7F2263260A28, 0x7F2263260A30));
        assert!(e[0].is_stub() && !e[1].is_stub());
        assert_eq!(e[1].method(), "Safenic.Driver.Agent::Run");
    }

    #[test]
    fn maps_and_mangled_names_are_read() {
        let maps = "7f00-7f10 r-xp 00001000 08:01 42 /opt/dotnet/libcoreclr.so\n7f10-7f20 rw-p 00000000 00:00 0 \n";
        let m = parse_maps(maps);
        assert_eq!(
            m[0],
            Mapping { start: 0x7f00, end: 0x7f10, offset: 0x1000, path: Some("/opt/dotnet/libcoreclr.so".into()) }
        );
        assert_eq!(m[1].path, None);
        assert_eq!(readable_symbol("_Z14JIT_RngChkFailv"), "JIT_RngChkFail");
        assert_eq!(readable_symbol("PrecodeFixupThunk"), "PrecodeFixupThunk");
        assert_eq!(readable_symbol("_Z99x"), "_Z99x");
    }

    #[test]
    fn null_checks_are_cmp_of_a_register_with_what_it_points_at() {
        let decode = |b: &[u8]| Decoder::with_ip(64, b, 0, DecoderOptions::NONE).decode();
        assert!(is_implicit_null_check(&decode(&[0x39, 0x3f]))); // cmp [rdi], edi
        assert!(!is_implicit_null_check(&decode(&[0x39, 0x37]))); // cmp [rdi], esi
        assert!(!is_implicit_null_check(&decode(&[0x39, 0x7f, 0x08]))); // cmp [rdi+8], edi
    }
}
