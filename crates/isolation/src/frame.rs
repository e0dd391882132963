//! What a call puts into a domain's memory and how the domain side runs it. The same code runs
//! in every backend: in process on the domain's stack (MPK), or in the helper process.

use crate::library::MAX_SYMBOLS;
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// Bytes for a call's arguments, and for its result.
pub(crate) const ARGS_MAX: usize = 1024;
pub(crate) const RESULT_MAX: usize = 1024;

/// A type that may cross the boundary as an argument or a result: plain bytes (every bit
/// pattern a valid value, no padding, no pointers), copied. The domain's code may have written
/// any bytes into a result, so nothing else could be trusted to hold its invariants.
pub trait Crossing: FromBytes + IntoBytes + Immutable + Copy {}
impl<T: FromBytes + IntoBytes + Immutable + Copy> Crossing for T {}

/// The head of a domain's I/O area; the input and output areas follow it.
#[repr(C)]
pub(crate) struct Frame {
    /// The entry ([`run`] for the call's types) and the user's function, as addresses in the
    /// trusted process; the helper process adds its load offset.
    pub run: usize,
    pub function: usize,
    pub input_len: u64,
    pub output_cap: u64,
    /// Written by the domain: how much of the output area the call filled.
    pub output_len: u64,
    pub args: [u8; ARGS_MAX],
    pub result: [u8; RESULT_MAX],
}

/// Bytes the frame takes at the start of the I/O area (a page, so the input starts aligned).
pub(crate) const FRAME_BYTES: usize = 4096;
const _: () = assert!(std::mem::size_of::<Frame>() <= FRAME_BYTES);

/// Everything the domain side needs for one call, as addresses valid where it runs.
#[repr(C)]
pub(crate) struct Invocation {
    pub frame: *mut Frame,
    pub input: *const u8,
    pub output: *mut u8,
    pub function: usize,
    pub symbols: *const usize,
    pub binding: Binding,
}

/// Which library and list of symbol names a call's symbols were resolved from, and whether
/// it runs in a domain: what a case's function checks before it calls a symbol by its index,
/// so that no function meets a symbol of another signature, and none that misbehaves by
/// design runs unprotected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Binding {
    pub case: u64,
    pub isolated: bool,
}

/// FNV-1a over the library's name and its symbols' names, each ended by a zero byte.
pub(crate) const fn case_id(library: &str, symbols: &[&str]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01B3;
    let mut hash: u64 = 0xCBF2_9CE4_8422_2325;
    let mut n = 0;
    while n <= symbols.len() {
        let bytes = if n == 0 { library.as_bytes() } else { symbols[n - 1].as_bytes() };
        let mut i = 0;
        while i <= bytes.len() {
            let byte = if i < bytes.len() { bytes[i] } else { 0 };
            hash = (hash ^ byte as u64).wrapping_mul(PRIME);
            i += 1;
        }
        n += 1;
    }
    hash
}

/// The domain side's entry for a call with arguments `A` and result `R`.
pub(crate) type Entry = unsafe extern "C" fn(*const Invocation);

/// What a function running inside a domain sees: the input the caller passed, the output area
/// it may fill, and the library's symbols.
pub struct Io<'a> {
    input: &'a [u8],
    output: &'a mut [u8],
    output_len: usize,
    symbols: &'a [usize; MAX_SYMBOLS],
    binding: Binding,
}

impl<'a> Io<'a> {
    pub(crate) fn new(
        input: &'a [u8],
        output: &'a mut [u8],
        symbols: &'a [usize; MAX_SYMBOLS],
        binding: Binding,
    ) -> Io<'a> {
        Io { input, output, output_len: 0, symbols, binding }
    }

    /// Whether the symbols were resolved for the case `case` ([`case_id`]).
    pub(crate) fn is_case(&self, case: u64) -> bool {
        self.binding.case == case
    }

    /// Whether the call runs in a domain (MPK or a helper process), not directly.
    pub(crate) fn isolated(&self) -> bool {
        self.binding.isolated
    }

    pub(crate) fn output_len(&self) -> usize {
        self.output_len
    }

    pub fn input(&self) -> &[u8] {
        self.input
    }

    /// The whole output area; [`Io::set_output_len`] says how much of it the caller gets.
    pub fn output(&mut self) -> &mut [u8] {
        self.output
    }

    pub fn set_output_len(&mut self, len: usize) {
        self.output_len = len.min(self.output.len());
    }

    /// The address of the `index`th symbol of [`crate::Config::new`], 0 if out of range.
    pub fn symbol(&self, index: usize) -> usize {
        self.symbols.get(index).copied().unwrap_or(0)
    }
}

/// The domain side of a call: reads the arguments from the frame, runs the function, writes
/// its result and the output's length back. Runs on the domain's stack with the domain's
/// rights (MPK) or in the helper process: it touches only domain memory and the invocation.
///
/// # Safety
/// `invocation` points to an [`Invocation`] whose frame, input area (`input_len` bytes) and
/// output area (`output_cap` bytes) are mapped and not otherwise borrowed during the call,
/// whose `function` is a `fn(&A, &mut Io) -> R`, and whose symbol table has
/// [`MAX_SYMBOLS`] entries.
pub(crate) unsafe extern "C" fn run<A: Crossing, R: Crossing>(invocation: *const Invocation) {
    // SAFETY: the caller's contract: all of it is mapped, and nothing else borrows it now.
    let (inv, frame) = unsafe { (&*invocation, &mut *(*invocation).frame) };
    let args = A::read_from_prefix(&frame.args).map(|(a, _)| a);
    // SAFETY: the caller wrote `function` from a `fn(&A, &mut Io) -> R` of this call's types.
    let function: fn(&A, &mut Io<'_>) -> R =
        unsafe { std::mem::transmute::<usize, fn(&A, &mut Io<'_>) -> R>(inv.function) };
    // SAFETY: the input and output areas are as long as the frame says (the caller set and
    // checked both lengths), and the symbol table as long as MAX_SYMBOLS.
    let (input, output, symbols) = unsafe {
        (
            std::slice::from_raw_parts(inv.input, frame.input_len as usize),
            std::slice::from_raw_parts_mut(inv.output, frame.output_cap as usize),
            &*(inv.symbols as *const [usize; MAX_SYMBOLS]),
        )
    };
    let Ok(args) = args else { return };
    let mut io = Io::new(input, output, symbols, inv.binding);
    let result = function(&args, &mut io);
    frame.output_len = io.output_len as u64;
    if let Some(slot) = frame.result.get_mut(..std::mem::size_of::<R>()) {
        slot.copy_from_slice(result.as_bytes());
    }
}
