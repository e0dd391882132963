//! Decoding the one x86-64 instruction that touched a trapped BAR: the moves a compiler emits
//! for a volatile load or store of 1, 2, 4 or 8 bytes (Intel SDM vol. 2, MOV and MOVZX/MOVSX),
//! and the arithmetic an optimizing compiler folds a volatile access into (`or (%r15),%r8d`
//! for `read(CTRL) | RST`, `orl $4,(%rax)` for `CTRL |= …`: ADD, OR, AND, SUB, XOR, CMP and
//! TEST with a memory operand). The fault gives the address; the instruction gives the width,
//! the direction, the register or immediate, and its own length so that execution can go on
//! after it.

/// What the instruction does with the memory operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads `size` bytes into general-purpose register `reg` (x86 numbering), as `into` says.
    Load { size: usize, reg: Reg, into: Extend },
    /// Writes the low `size` bytes of `value`.
    Store { size: usize, value: Source },
    /// Reads `size` bytes, combines them with `operand` by `op`, and writes the result back to
    /// memory or into a register (`into`), unless `op` only compares; sets the flags.
    Alu { op: AluOp, size: usize, operand: Source, into: AluInto },
}

/// An arithmetic or logic operation (SDM vol. 1, 7.3.2 and 7.3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AluOp {
    Add,
    Or,
    And,
    Sub,
    Xor,
    /// SUB without writing the result.
    Cmp,
    /// AND without writing the result.
    Test,
}

/// Where an [`Access::Alu`] puts its result; memory is then the left operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AluInto {
    Memory,
    /// The register is the left operand, memory the right.
    Register(Reg),
}

/// The group-1 operation numbered `n` (ModRM's reg field of opcodes 80, 81, 83, and bits 3–5
/// of opcodes 00–3F); ADC and SBB, which need the carry in, are not served.
fn group1(n: usize) -> Option<AluOp> {
    Some(match n & 7 {
        0 => AluOp::Add,
        1 => AluOp::Or,
        4 => AluOp::And,
        5 => AluOp::Sub,
        6 => AluOp::Xor,
        7 => AluOp::Cmp,
        _ => return None,
    })
}

/// EFLAGS bits the arithmetic sets: CF, PF, AF, ZF, SF, OF.
const ARITH_FLAGS: u64 = 1 | 1 << 2 | 1 << 4 | 1 << 6 | 1 << 7 | 1 << 11;

/// `left op right` on `size` bytes: the result and the new flags (in place of the arithmetic
/// flags of `flags`).
pub fn alu(op: AluOp, left: u64, right: u64, size: usize, flags: u64) -> (u64, u64) {
    let bits = size as u32 * 8;
    let mask = if size >= 8 { u64::MAX } else { (1u64 << bits) - 1 };
    let (a, b) = (left & mask, right & mask);
    let sign = |v: u64| (v >> (bits - 1)) & 1 == 1;
    let (result, carry, overflow) = match op {
        AluOp::Add => {
            let r = a.wrapping_add(b) & mask;
            (r, r < a, sign(a) == sign(b) && sign(r) != sign(a))
        }
        AluOp::Sub | AluOp::Cmp => {
            let r = a.wrapping_sub(b) & mask;
            (r, a < b, sign(a) != sign(b) && sign(r) != sign(a))
        }
        AluOp::Or => (a | b, false, false),
        AluOp::And | AluOp::Test => (a & b, false, false),
        AluOp::Xor => (a ^ b, false, false),
    };
    let adjust = matches!(op, AluOp::Add | AluOp::Sub | AluOp::Cmp) && (a ^ b ^ result) & 0x10 != 0;
    let mut f = flags & !ARITH_FLAGS;
    f |= u64::from(carry);
    f |= u64::from((result as u8).count_ones() % 2 == 0) << 2;
    f |= u64::from(adjust) << 4;
    f |= u64::from(result == 0) << 6;
    f |= u64::from(sign(result)) << 7;
    f |= u64::from(overflow) << 11;
    (result, f)
}

/// Whether `op` writes its result (CMP and TEST only set flags).
pub fn writes(op: AluOp) -> bool {
    !matches!(op, AluOp::Cmp | AluOp::Test)
}

/// A register operand: its number, or one of AH, CH, DH, BH (bits 8–15 of registers 0–3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reg {
    Low(usize),
    HighByte(usize),
}

/// How a loaded value lands in its register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extend {
    /// Replaces only the low `width` bytes (8- and 16-bit destinations).
    Merge { width: usize },
    /// Zero-extends to `width` bytes, and a 32-bit result clears the upper half.
    Zero { width: usize },
    /// Sign-extends to `width` bytes (MOVSX).
    Sign { width: usize },
}

/// Where a stored value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Register(Reg),
    Immediate(u64),
}

/// A decoded instruction: its access and its length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded {
    pub access: Access,
    pub len: usize,
}

/// Decodes the instruction at the start of `code` (at least 15 bytes, the longest x86
/// instruction, where available); `None` for anything but a move with a memory operand.
pub fn decode(code: &[u8]) -> Option<Decoded> {
    let mut at = 0;
    let mut operand16 = false;
    loop {
        match *code.get(at)? {
            0x66 => operand16 = true,
            // Segment overrides other than FS/GS mean nothing in 64-bit mode.
            0x2E | 0x36 | 0x3E | 0x26 => {}
            _ => break,
        }
        at += 1;
    }
    let rex = match *code.get(at)? {
        b @ 0x40..=0x4F => {
            at += 1;
            b
        }
        _ => 0,
    };
    let (w, r) = (rex & 8 != 0, usize::from(rex & 4 != 0) * 8);
    let width = if w {
        8
    } else if operand16 {
        2
    } else {
        4
    };
    let byte_reg = |n: usize| if rex == 0 && (4..8).contains(&n) { Reg::HighByte(n - 4) } else { Reg::Low(n) };
    let opcode = *code.get(at)?;
    at += 1;
    let two_byte = opcode == 0x0F;
    let op2 = if two_byte {
        at += 1;
        *code.get(at - 1)?
    } else {
        0
    };
    let modrm = *code.get(at)?;
    let reg = usize::from((modrm >> 3) & 7) + r;
    let operand_end = at + modrm_len(&code[at..])?;
    let access = match (two_byte, opcode, op2) {
        (false, 0x88, _) => Access::Store { size: 1, value: Source::Register(byte_reg(reg)) },
        (false, 0x89, _) => Access::Store { size: width, value: Source::Register(Reg::Low(reg)) },
        (false, 0x8A, _) => Access::Load { size: 1, reg: byte_reg(reg), into: Extend::Merge { width: 1 } },
        (false, 0x8B, _) => Access::Load { size: width, reg: Reg::Low(reg), into: loaded(width) },
        (false, 0xC6, _) if reg & 7 == 0 => {
            let imm = *code.get(operand_end)?;
            return Some(Decoded {
                access: Access::Store { size: 1, value: Source::Immediate(imm.into()) },
                len: operand_end + 1,
            });
        }
        (false, 0xC7, _) if reg & 7 == 0 => {
            // imm16 with the operand-size prefix, otherwise imm32 (sign-extended for REX.W).
            let (imm, n) = if width == 2 {
                (u64::from(u16::from_le_bytes(code.get(operand_end..operand_end + 2)?.try_into().ok()?)), 2)
            } else {
                (i32::from_le_bytes(code.get(operand_end..operand_end + 4)?.try_into().ok()?) as i64 as u64, 4)
            };
            return Some(Decoded {
                access: Access::Store { size: width, value: Source::Immediate(imm) },
                len: operand_end + n,
            });
        }
        // ADD, OR, AND, SUB, XOR, CMP in their memory forms: r/m ← r/m op r (even opcodes
        // 8-bit) and r ← r op r/m.
        (false, 0x00..=0x3B, _) if opcode & 7 < 4 => {
            let op = group1(usize::from(opcode >> 3))?;
            let size = if opcode & 1 == 0 { 1 } else { width };
            let reg = if size == 1 { byte_reg(reg) } else { Reg::Low(reg) };
            let into = if opcode & 2 == 0 { AluInto::Memory } else { AluInto::Register(reg) };
            Access::Alu { op, size, operand: Source::Register(reg), into }
        }
        (false, 0x84 | 0x85, _) => {
            let size = if opcode == 0x84 { 1 } else { width };
            let reg = if size == 1 { byte_reg(reg) } else { Reg::Low(reg) };
            Access::Alu { op: AluOp::Test, size, operand: Source::Register(reg), into: AluInto::Memory }
        }
        // Group 1 with an immediate: 80 ib (8-bit), 81 iw/id, 83 ib sign-extended.
        (false, 0x80 | 0x81 | 0x83, _) => {
            let op = group1(reg)?;
            let size = if opcode == 0x80 { 1 } else { width };
            let (imm, n) = immediate(code, operand_end, if opcode == 0x81 { size } else { 1 })?;
            return Some(Decoded {
                access: Access::Alu { op, size, operand: Source::Immediate(imm), into: AluInto::Memory },
                len: operand_end + n,
            });
        }
        // TEST r/m, imm: F6 /0 ib, F7 /0 iw/id.
        (false, 0xF6 | 0xF7, _) if reg & 7 == 0 => {
            let size = if opcode == 0xF6 { 1 } else { width };
            let (imm, n) = immediate(code, operand_end, size)?;
            return Some(Decoded {
                access: Access::Alu { op: AluOp::Test, size, operand: Source::Immediate(imm), into: AluInto::Memory },
                len: operand_end + n,
            });
        }
        (true, _, 0xB6 | 0xB7 | 0xBE | 0xBF) => {
            let size = if op2 & 1 == 0 { 1 } else { 2 };
            let into = if op2 >= 0xBE { Extend::Sign { width } } else { Extend::Zero { width } };
            Access::Load { size, reg: Reg::Low(reg), into }
        }
        _ => return None,
    };
    Some(Decoded { access, len: operand_end })
}

/// The immediate at `at` for an operand of `size` bytes: 1, 2, or 4 (also for 8-byte operands),
/// sign-extended; and its length.
fn immediate(code: &[u8], at: usize, size: usize) -> Option<(u64, usize)> {
    Some(match size {
        1 => (*code.get(at)? as i8 as i64 as u64, 1),
        2 => (i16::from_le_bytes(code.get(at..at + 2)?.try_into().ok()?) as i64 as u64, 2),
        _ => (i32::from_le_bytes(code.get(at..at + 4)?.try_into().ok()?) as i64 as u64, 4),
    })
}

/// A plain MOV load's effect: 8 and 4 bytes fill the register, 2 bytes leave the rest.
fn loaded(width: usize) -> Extend {
    if width == 2 {
        Extend::Merge { width }
    } else {
        Extend::Zero { width }
    }
}

/// The length of a ModRM byte with its SIB and displacement; `None` for a register operand.
fn modrm_len(code: &[u8]) -> Option<usize> {
    let modrm = *code.first()?;
    let (md, rm) = (modrm >> 6, modrm & 7);
    if md == 3 {
        return None;
    }
    let sib = rm == 4;
    let base = if sib { *code.get(1)? & 7 } else { rm };
    let disp = match md {
        0 if base == 5 => 4,
        0 => 0,
        1 => 1,
        _ => 4,
    };
    Some(1 + usize::from(sib) + disp)
}

/// Applies a load of `raw` (little-endian, `size` bytes) to register value `old`.
pub fn load_into(old: u64, raw: u64, size: usize, reg: Reg, into: Extend) -> u64 {
    let mask = |bytes: usize| if bytes >= 8 { u64::MAX } else { (1u64 << (bytes * 8)) - 1 };
    let raw = raw & mask(size);
    match (reg, into) {
        (Reg::HighByte(_), _) => (old & !0xFF00) | (raw << 8),
        (Reg::Low(_), Extend::Merge { width }) => (old & !mask(width)) | raw,
        (Reg::Low(_), Extend::Zero { width }) => {
            // Only a 16-bit destination keeps the bits above it; 32 and 64 clear them.
            if width == 2 {
                (old & !mask(2)) | raw
            } else {
                raw
            }
        }
        (Reg::Low(_), Extend::Sign { width }) => {
            let shift = 64 - size * 8;
            let wide = (((raw << shift) as i64) >> shift) as u64;
            if width == 2 {
                (old & !mask(2)) | (wide & mask(2))
            } else {
                wide & mask(width)
            }
        }
    }
}

/// The value a register operand holds, as a store would write it.
pub fn register_value(gp: &[u64; 16], reg: Reg) -> u64 {
    match reg {
        Reg::Low(n) => gp[n],
        Reg::HighByte(n) => gp[n] >> 8,
    }
}

/// The register a load writes.
pub fn register_index(reg: Reg) -> usize {
    match reg {
        Reg::Low(n) | Reg::HighByte(n) => n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(size: usize, reg: Reg, into: Extend) -> Access {
        Access::Load { size, reg, into }
    }

    /// Encodings as GNU as emits them, with the decoded access and length.
    #[test]
    fn the_moves_a_compiler_emits_for_volatile_accesses_decode_with_their_length() {
        let cases: &[(&[u8], Access, usize)] = &[
            (&[0x0f, 0xb6, 0x00], load(1, Reg::Low(0), Extend::Zero { width: 4 }), 3),
            (&[0x0f, 0xb7, 0x4a, 0x14], load(2, Reg::Low(1), Extend::Zero { width: 4 }), 4),
            (&[0x44, 0x8b, 0x0c, 0x98], load(4, Reg::Low(9), Extend::Zero { width: 4 }), 4),
            (&[0x66, 0x89, 0x42, 0x16], Access::Store { size: 2, value: Source::Register(Reg::Low(0)) }, 4),
            (&[0x44, 0x88, 0x07], Access::Store { size: 1, value: Source::Register(Reg::Low(8)) }, 3),
            (&[0x88, 0x27], Access::Store { size: 1, value: Source::Register(Reg::HighByte(0)) }, 2),
            (&[0xc6, 0x46, 0x14, 0x05], Access::Store { size: 1, value: Source::Immediate(5) }, 4),
            (
                &[0x66, 0xc7, 0x05, 0x16, 0, 0, 0, 0x34, 0x12],
                Access::Store { size: 2, value: Source::Immediate(0x1234) },
                9,
            ),
            (
                &[0xc7, 0x00, 0, 0, 0, 0x80],
                Access::Store { size: 4, value: Source::Immediate(0xFFFF_FFFF_8000_0000) },
                6,
            ),
            (
                &[0x48, 0xc7, 0x00, 0xff, 0xff, 0xff, 0xff],
                Access::Store { size: 8, value: Source::Immediate(u64::MAX) },
                7,
            ),
            (&[0x48, 0x8b, 0x84, 0x24, 0, 0x10, 0, 0], load(8, Reg::Low(0), Extend::Zero { width: 8 }), 8),
            (&[0x0f, 0xbe, 0x10], load(1, Reg::Low(2), Extend::Sign { width: 4 }), 3),
            (&[0x8a, 0x11], load(1, Reg::Low(2), Extend::Merge { width: 1 }), 2),
        ];
        for (code, access, len) in cases {
            let mut padded = code.to_vec();
            padded.extend([0x90; 8]);
            assert_eq!(decode(&padded), Some(Decoded { access: *access, len: *len }), "{code:02x?}");
        }
    }

    #[test]
    fn anything_else_is_refused() {
        // mov %esi,%eax (register operands); adc (%rax),%eax (needs the carry in); an
        // instruction cut short.
        for code in [&[0x89, 0xf0][..], &[0x13, 0x00], &[0x48, 0xc7, 0x00, 0xff]] {
            assert_eq!(decode(code), None, "{code:02x?}");
        }
    }

    /// What clang and rustc emit for `read(CTRL) | RST` and `CTRL |= …` on a volatile
    /// register, and their relatives, with the decoded access and length.
    #[test]
    fn arithmetic_folded_into_a_volatile_access_decodes_with_its_length() {
        let alu = |op, size, operand, into| Access::Alu { op, size, operand, into };
        let cases: &[(&[u8], Access, usize)] = &[
            // or (%r15),%r8d
            (&[0x45, 0x0b, 0x07], alu(AluOp::Or, 4, Source::Register(Reg::Low(8)), AluInto::Register(Reg::Low(8))), 3),
            // orl $4,(%rax)
            (&[0x83, 0x08, 0x04], alu(AluOp::Or, 4, Source::Immediate(4), AluInto::Memory), 3),
            // andl $0xfffffffb,0x10(%rdx)
            (
                &[0x83, 0x62, 0x10, 0xfb],
                alu(AluOp::And, 4, Source::Immediate(0xFFFF_FFFF_FFFF_FFFB), AluInto::Memory),
                4,
            ),
            // orl $0x4000000,(%rcx)
            (&[0x81, 0x09, 0, 0, 0, 0x04], alu(AluOp::Or, 4, Source::Immediate(0x0400_0000), AluInto::Memory), 6),
            // add %eax,(%rbx)
            (&[0x01, 0x03], alu(AluOp::Add, 4, Source::Register(Reg::Low(0)), AluInto::Memory), 2),
            // cmpl $0,(%rdi)
            (&[0x83, 0x3f, 0x00], alu(AluOp::Cmp, 4, Source::Immediate(0), AluInto::Memory), 3),
            // testl $0x1000000,(%rsi)
            (&[0xf7, 0x06, 0, 0, 0, 0x01], alu(AluOp::Test, 4, Source::Immediate(0x0100_0000), AluInto::Memory), 6),
            // test %ecx,(%rax)
            (&[0x85, 0x08], alu(AluOp::Test, 4, Source::Register(Reg::Low(1)), AluInto::Memory), 2),
            // xor (%rax),%ah... as orb (%rax),%ah: 8-bit forms
            (
                &[0x0a, 0x20],
                alu(AluOp::Or, 1, Source::Register(Reg::HighByte(0)), AluInto::Register(Reg::HighByte(0))),
                2,
            ),
            // subq $1,(%rax)
            (&[0x48, 0x83, 0x28, 0x01], alu(AluOp::Sub, 8, Source::Immediate(1), AluInto::Memory), 4),
        ];
        for (code, access, len) in cases {
            let mut padded = code.to_vec();
            padded.extend([0x90; 8]);
            assert_eq!(decode(&padded), Some(Decoded { access: *access, len: *len }), "{code:02x?}");
        }
    }

    /// Results and flags as the SDM defines them (CF 0, PF 2, AF 4, ZF 6, SF 7, OF 11).
    #[test]
    fn arithmetic_sets_the_flags_the_architecture_defines() {
        let (cf, pf, af, zf, sf, of) = (1, 1 << 2, 1 << 4, 1 << 6, 1 << 7, 1 << 11);
        // Other flags (IF, bit 9) stay.
        assert_eq!(alu(AluOp::Or, 0, 0, 4, 1 << 9), (0, 1 << 9 | zf | pf));
        assert_eq!(alu(AluOp::Or, 0x1, 0x0400_0000, 4, cf | of), (0x0400_0001, 0));
        assert_eq!(alu(AluOp::Add, 0x7FFF_FFFF, 1, 4, 0), (0x8000_0000, sf | of | af | pf));
        assert_eq!(alu(AluOp::Add, 0xFFFF_FFFF, 1, 4, 0), (0, cf | zf | af | pf));
        assert_eq!(alu(AluOp::Sub, 0, 1, 4, 0), (0xFFFF_FFFF, cf | sf | af | pf));
        assert_eq!(alu(AluOp::Cmp, 0x80, 1, 1, 0), (0x7F, of | af));
        assert_eq!(alu(AluOp::Test, 0xF0, 0x0F, 1, 0), (0, zf | pf));
        assert_eq!(alu(AluOp::Xor, u64::MAX, 1, 8, 0), (u64::MAX - 1, sf));
    }

    #[test]
    fn loads_land_in_their_register_as_the_architecture_says() {
        let old = 0x1111_2222_3333_4444;
        assert_eq!(load_into(old, 0xAB, 1, Reg::Low(0), Extend::Zero { width: 4 }), 0xAB);
        assert_eq!(load_into(old, 0xABCD, 2, Reg::Low(0), Extend::Merge { width: 2 }), 0x1111_2222_3333_ABCD);
        assert_eq!(load_into(old, 0xAB, 1, Reg::HighByte(0), Extend::Merge { width: 1 }), 0x1111_2222_3333_AB44);
        assert_eq!(load_into(old, 0x80, 1, Reg::Low(0), Extend::Sign { width: 4 }), 0xFFFF_FF80);
        assert_eq!(load_into(old, 0x80, 1, Reg::Low(0), Extend::Sign { width: 8 }), 0xFFFF_FFFF_FFFF_FF80);
        assert_eq!(load_into(old, 0xDEAD_BEEF, 4, Reg::Low(0), Extend::Zero { width: 4 }), 0xDEAD_BEEF);
    }
}
