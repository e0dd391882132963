//! The packet filter (csrc/filter.c) that `safenic fwd --filter` calls once per burst: the
//! burst's first bytes of each frame in the input, one verdict byte per frame in the output.

use crate::frame::case_id;
use crate::{Config, Io, Library};

pub const SYMBOLS: [&str; 1] = ["filter_burst"];
/// The symbol's signature below holds for this library only.
const CASE: u64 = case_id(Library::filter().name(), &SYMBOLS);

/// Bytes of each frame the filter sees (Ethernet, IPv4 and UDP headers without options).
pub const STRIDE: usize = 64;

pub fn config(burst: usize) -> Config {
    Config::new(Library::filter(), &SYMBOLS).io_bytes(burst * STRIDE, burst)
}

/// `args`: [frames in the input, UDP destination port to drop]. Returns how many to forward;
/// the output holds one verdict per frame (1 forward, 0 drop). A domain that resolved other
/// symbols forwards nothing and writes no verdict.
pub fn burst(args: &[u32; 2], io: &mut Io<'_>) -> u64 {
    if !io.is_case(CASE) {
        io.set_output_len(0);
        return 0;
    }
    // SAFETY: symbol 0 is `size_t filter_burst(const uint8_t *, size_t, size_t, uint8_t *, uint16_t)`.
    let f: extern "C" fn(*const u8, usize, usize, *mut u8, u16) -> usize = unsafe { std::mem::transmute(io.symbol(0)) };
    let count = (args[0] as usize).min(io.input().len() / STRIDE).min(io.output().len());
    let input = io.input().as_ptr();
    let forwarded = f(input, STRIDE, count, io.output().as_mut_ptr(), args[1] as u16);
    io.set_output_len(count);
    forwarded as u64
}
