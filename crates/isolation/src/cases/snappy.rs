//! snappy (Debian's libsnappy1v5), through its C API (snappy-c.h): compression and
//! decompression of the input into the output area. A C++ library: its `operator new` reaches
//! `malloc`, which in an MPK domain is the domain heap.

use crate::frame::case_id;
use crate::library::Source;
use crate::{Config, Io, Library};

pub const LIBRARY: Library = Library::vetted(Source::System("libsnappy.so.1"));
pub const SYMBOLS: [&str; 3] = ["snappy_compress", "snappy_uncompress", "snappy_max_compressed_length"];
/// The symbols' signatures below hold for this library and this order only.
const CASE: u64 = case_id(LIBRARY.name(), &SYMBOLS);

/// What a call returns when snappy reports an error or the output area is too small, or the
/// domain resolved other symbols than [`SYMBOLS`] of [`LIBRARY`].
pub const FAILED: u64 = u64::MAX;

pub fn config() -> Config {
    Config::new(LIBRARY, &SYMBOLS)
}

type Codec = extern "C" fn(*const u8, usize, *mut u8, *mut usize) -> i32;

/// Compresses the input; returns the compressed length (also the output's), or [`FAILED`].
pub fn compress(_: &u64, io: &mut Io<'_>) -> u64 {
    if !io.is_case(CASE) {
        return FAILED;
    }
    // SAFETY: symbol 2 is `size_t snappy_max_compressed_length(size_t)`.
    let bound: extern "C" fn(usize) -> usize = unsafe { std::mem::transmute(io.symbol(2)) };
    if bound(io.input().len()) > io.output().len() {
        return FAILED;
    }
    // SAFETY: symbol 0 is snappy_compress, of type Codec.
    let codec: Codec = unsafe { std::mem::transmute(io.symbol(0)) };
    code(codec, io)
}

/// Uncompresses the input; returns the uncompressed length, or [`FAILED`] (corrupt input, or
/// an output area too small).
pub fn uncompress(_: &u64, io: &mut Io<'_>) -> u64 {
    if !io.is_case(CASE) {
        return FAILED;
    }
    // SAFETY: symbol 1 is snappy_uncompress, of type Codec.
    let codec: Codec = unsafe { std::mem::transmute(io.symbol(1)) };
    code(codec, io)
}

fn code(codec: Codec, io: &mut Io<'_>) -> u64 {
    let (input, len) = (io.input().as_ptr(), io.input().len());
    let output = io.output();
    let mut written = output.len();
    if codec(input, len, output.as_mut_ptr(), &mut written) != 0 {
        return FAILED;
    }
    io.set_output_len(written);
    written as u64
}
