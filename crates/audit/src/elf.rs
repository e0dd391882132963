//! A compiled binary as the audit sees it: its functions (from the symbol table, demangled),
//! their instructions (decoded from the text), and what its GOT slots hold (from the dynamic
//! relocations). Read with the `object`, `iced-x86` and `rustc-demangle` crates, so nothing
//! depends on the text format or exit status of a tool.

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction};
use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationFlags, RelocationTarget, SymbolKind};
use std::collections::BTreeMap;
use std::path::Path;

/// One function of the binary.
#[derive(Debug, Clone)]
pub struct Function {
    /// Demangled, without the hash: `safenic::fwd::forward_flexible`.
    pub name: String,
    pub address: u64,
    pub instructions: Vec<Instruction>,
}

/// What a GOT slot holds: a symbol from a shared library, or a function of this binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    Symbol(String),
    Address(u64),
}

/// Where a call or jump that leaves a function goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A direct call or jump to this address.
    Direct(u64),
    /// Through the pointer in memory at this address (a GOT slot).
    Slot(u64),
    /// Through a register or a computed pointer: cannot be followed.
    Indirect,
}

/// A binary's functions, GOT slots and PLT stubs.
pub struct Binary {
    pub functions: Vec<Function>,
    pub slots: BTreeMap<u64, Slot>,
    /// The shared-library routine each PLT stub jumps to, by the stub's address: a call to
    /// `__gnat_rcheck_CE_Index_Check@plt` is a call to that routine.
    pub plt: BTreeMap<u64, String>,
}

/// ELF relocation types of x86-64 that fill GOT slots [System V x86-64 psABI, 4.4].
const R_X86_64_GLOB_DAT: u32 = 6;
const R_X86_64_JUMP_SLOT: u32 = 7;
const R_X86_64_RELATIVE: u32 = 8;

/// The symbol's name demangled (Rust, without its hash) or as it is (C).
pub fn demangle(name: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(name))
}

impl Binary {
    pub fn read(path: &Path) -> Result<Binary, String> {
        let data = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        Binary::parse(&data).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(data: &[u8]) -> Result<Binary, String> {
        let file = object::File::parse(data).map_err(|e| format!("not an object file the audit reads: {e}"))?;
        if file.architecture() != object::Architecture::X86_64 {
            return Err(format!("an {:?} binary: the audit reads x86-64 code only", file.architecture()));
        }
        let mut functions = Vec::new();
        for symbol in file.symbols() {
            if symbol.kind() != SymbolKind::Text || symbol.size() == 0 || symbol.is_undefined() {
                continue;
            }
            let (Ok(name), Some(index)) = (symbol.name(), symbol.section_index()) else { continue };
            let section = file.section_by_index(index).map_err(|e| e.to_string())?;
            let bytes = section.data_range(symbol.address(), symbol.size()).map_err(|e| e.to_string())?;
            let Some(bytes) = bytes else { continue };
            functions.push(Function {
                name: demangle(name),
                address: symbol.address(),
                instructions: decode(bytes, symbol.address()),
            });
        }
        functions.sort_by_key(|f| f.address);
        // Aliases (several symbols, one body) are audited once.
        functions.dedup_by_key(|f| f.address);
        let slots = slots(&file);
        let plt = plt_stubs(&file, &slots);
        Ok(Binary { functions, slots, plt })
    }

    /// Every function whose name is `name` or an instance of it (`name::<…>`, `name.cold`).
    pub fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Function> + 'a {
        self.functions.iter().filter(move |f| {
            f.name == name
                || f.name.strip_prefix(name).is_some_and(|rest| rest.starts_with("::<") || rest.starts_with('.'))
        })
    }

    /// The function that contains `address` (a call or jump may enter a function past its
    /// start, e.g. into a part the compiler split off).
    pub fn at(&self, address: u64) -> Option<&Function> {
        let i = self.functions.partition_point(|f| f.address <= address).checked_sub(1)?;
        let f = &self.functions[i];
        (address < f.end()).then_some(f)
    }
}

fn decode(bytes: &[u8], address: u64) -> Vec<Instruction> {
    Decoder::with_ip(64, bytes, address, DecoderOptions::NONE).into_iter().collect()
}

/// What each GOT slot holds, from the dynamic relocations.
fn slots(file: &object::File) -> BTreeMap<u64, Slot> {
    let mut m = BTreeMap::new();
    let Some(relocations) = file.dynamic_relocations() else { return m };
    let symbols = file.dynamic_symbol_table();
    for (offset, r) in relocations {
        let RelocationFlags::Elf { r_type } = r.flags() else { continue };
        match (r_type, r.target()) {
            (R_X86_64_RELATIVE, _) => {
                m.insert(offset, Slot::Address(r.addend() as u64));
            }
            (R_X86_64_GLOB_DAT | R_X86_64_JUMP_SLOT, RelocationTarget::Symbol(index)) => {
                let name = symbols.as_ref().and_then(|t| t.symbol_by_index(index).ok()).and_then(|s| s.name().ok());
                if let Some(name) = name {
                    m.insert(offset, Slot::Symbol(demangle(name)));
                }
            }
            _ => {}
        }
    }
    m
}

/// The routine behind each PLT stub: every stub of `.plt`, `.plt.sec` and `.plt.got` is a
/// 16-byte entry whose indirect jump goes through a GOT slot [System V x86-64 psABI, 5.2].
fn plt_stubs(file: &object::File, slots: &BTreeMap<u64, Slot>) -> BTreeMap<u64, String> {
    let mut m = BTreeMap::new();
    for section in file.sections() {
        if !section.name().is_ok_and(|n| n.starts_with(".plt")) {
            continue;
        }
        let Ok(bytes) = section.data() else { continue };
        for insn in decode(bytes, section.address()) {
            if insn.flow_control() == FlowControl::IndirectBranch && insn.is_ip_rel_memory_operand() {
                if let Some(Slot::Symbol(name)) = slots.get(&insn.ip_rel_memory_address()) {
                    m.insert(insn.ip() & !0xF, name.clone());
                }
            }
        }
    }
    m
}

/// Where `insn`, a call or a jump, goes if it leaves the function `[start, end)`.
pub fn external_target(insn: &Instruction, start: u64, end: u64) -> Option<Target> {
    match insn.flow_control() {
        FlowControl::Call | FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch => {
            let to = insn.near_branch_target();
            (!(start..end).contains(&to)).then_some(Target::Direct(to))
        }
        FlowControl::IndirectCall | FlowControl::IndirectBranch => {
            if insn.is_ip_rel_memory_operand() {
                Some(Target::Slot(insn.ip_rel_memory_address()))
            } else if insn.flow_control() == FlowControl::IndirectCall {
                Some(Target::Indirect)
            } else {
                // A jump through a register: a jump table inside the function.
                None
            }
        }
        _ => None,
    }
}

impl Function {
    /// The address just past the function's last instruction.
    pub fn end(&self) -> u64 {
        self.instructions.last().map_or(self.address, |i| i.next_ip())
    }
}
