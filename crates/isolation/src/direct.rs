//! The same functions called directly, in the caller's process and on its buffers: what the
//! bench compares each backend against, and what a program without isolation would do.

use crate::frame::{case_id, Binding, Crossing, Io};
use crate::library::MAX_SYMBOLS;
use crate::library::{Library, Loaded, Namespace};
use crate::SetupError;

pub struct Direct {
    symbols: [usize; MAX_SYMBOLS],
    binding: Binding,
    _library: Loaded,
}

impl Direct {
    /// Loads `library` into the process's own namespace and resolves `symbols`.
    pub fn new(library: Library, symbols: &[&'static str]) -> Result<Direct, SetupError> {
        library.expect_trusted("isolation::Direct")?;
        let loaded = Loaded::open(&library, Namespace::Main, false)?;
        let binding = Binding { case: case_id(library.name(), symbols), isolated: false };
        let symbols = loaded.symbols(symbols)?;
        Ok(Direct { symbols, binding, _library: loaded })
    }

    /// Runs `function` here, on `input` and `output`; returns its result and how much of
    /// `output` it filled.
    pub fn call<A: Crossing, R: Crossing>(
        &self,
        args: &A,
        input: &[u8],
        output: &mut [u8],
        function: fn(&A, &mut Io<'_>) -> R,
    ) -> (R, usize) {
        let mut io = Io::new(input, output, &self.symbols, self.binding);
        let value = function(args, &mut io);
        (value, io.output_len())
    }
}
