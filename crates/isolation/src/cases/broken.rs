//! The deliberately broken library (csrc/broken.c): its symbols, in [`SYMBOLS`] order, and
//! the domain functions that call them.

use crate::frame::case_id;
use crate::{Config, Io, Library};

pub const SYMBOLS: [&str; 9] = [
    "broken_sum",
    "broken_heap_overflow",
    "broken_wild_write",
    "broken_stack_smash",
    "broken_keep",
    "broken_use_after_free",
    "broken_null_call",
    "broken_spin",
    "broken_open_file",
];

/// The symbols' signatures below hold for this library and this order only.
const CASE: u64 = case_id(Library::broken().name(), &SYMBOLS);

/// What a function returns without calling the library: the domain resolved other symbols
/// than [`SYMBOLS`] of [`Library::broken`], or the function misbehaves on purpose and the
/// call is not in a domain (the unisolated backend, [`crate::Direct`]), where it would
/// corrupt the caller.
pub const REFUSED: u64 = u64::MAX;

pub fn config() -> Config {
    Config::new(Library::broken(), &SYMBOLS)
}

/// Whether `io` may call the library's functions that misbehave on purpose.
fn in_a_domain(io: &Io<'_>) -> bool {
    io.is_case(CASE) && io.isolated()
}

/// The sum of the input's bytes, computed by the library.
pub fn sum(_: &u64, io: &mut Io<'_>) -> u64 {
    if !io.is_case(CASE) {
        return REFUSED;
    }
    // SAFETY: symbol 0 is `uint64_t broken_sum(const uint8_t *, size_t)`.
    let f: extern "C" fn(*const u8, usize) -> u64 = unsafe { std::mem::transmute(io.symbol(0)) };
    f(io.input().as_ptr(), io.input().len())
}

/// Overflows a 64-byte heap block by `len` bytes.
pub fn heap_overflow(len: &u64, io: &mut Io<'_>) -> u64 {
    if !in_a_domain(io) {
        return REFUSED;
    }
    // SAFETY: symbol 1 is `void broken_heap_overflow(size_t)`.
    let f: extern "C" fn(usize) = unsafe { std::mem::transmute(io.symbol(1)) };
    f(*len as usize);
    0
}

/// Writes a word at `address`.
pub fn wild_write(address: &u64, io: &mut Io<'_>) -> u64 {
    if !in_a_domain(io) {
        return REFUSED;
    }
    // SAFETY: symbol 2 is `void broken_wild_write(uintptr_t)`.
    let f: extern "C" fn(usize) = unsafe { std::mem::transmute(io.symbol(2)) };
    f(*address as usize);
    0
}

/// Overflows a 16-byte stack buffer by `len` bytes.
pub fn stack_smash(len: &u64, io: &mut Io<'_>) -> u64 {
    if !in_a_domain(io) {
        return REFUSED;
    }
    // SAFETY: symbol 3 is `void broken_stack_smash(size_t)`.
    let f: extern "C" fn(usize) = unsafe { std::mem::transmute(io.symbol(3)) };
    f(*len as usize);
    0
}

/// Makes the library keep a pointer to the caller's object at `address`.
pub fn keep(address: &u64, io: &mut Io<'_>) -> u64 {
    if !in_a_domain(io) {
        return REFUSED;
    }
    // SAFETY: symbol 4 is `void broken_keep(uintptr_t)`.
    let f: extern "C" fn(usize) = unsafe { std::mem::transmute(io.symbol(4)) };
    f(*address as usize);
    0
}

/// Writes through the kept pointer.
pub fn use_after_free(_: &u64, io: &mut Io<'_>) -> u64 {
    if !in_a_domain(io) {
        return REFUSED;
    }
    // SAFETY: symbol 5 is `void broken_use_after_free(void)`.
    let f: extern "C" fn() = unsafe { std::mem::transmute(io.symbol(5)) };
    f();
    0
}

/// Calls through a null function pointer.
pub fn null_call(_: &u64, io: &mut Io<'_>) -> u64 {
    if !in_a_domain(io) {
        return REFUSED;
    }
    // SAFETY: symbol 6 is `void broken_null_call(void)`.
    let f: extern "C" fn() = unsafe { std::mem::transmute(io.symbol(6)) };
    f();
    0
}

/// Never returns.
pub fn spin(_: &u64, io: &mut Io<'_>) -> u64 {
    if !in_a_domain(io) {
        return REFUSED;
    }
    // SAFETY: symbol 7 is `void broken_spin(void)`.
    let f: extern "C" fn() = unsafe { std::mem::transmute(io.symbol(7)) };
    f();
    0
}

/// Opens a file: returns the descriptor it got (closed again), or -1 as u64.
pub fn open_file(_: &u64, io: &mut Io<'_>) -> u64 {
    if !in_a_domain(io) {
        return REFUSED;
    }
    // SAFETY: symbol 8 is `int broken_open_file(void)`.
    let f: extern "C" fn() -> i32 = unsafe { std::mem::transmute(io.symbol(8)) };
    f() as i64 as u64
}
