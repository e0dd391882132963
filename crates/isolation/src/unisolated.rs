//! The direct call through the same API: the library in the process's own namespace, no
//! protection. What the bench compares the backends against; a fault here ends the process.

use crate::config::Config;
use crate::executor::Executor;
use crate::frame::{Binding, Entry, Invocation};
use crate::library::MAX_SYMBOLS;
use crate::library::{Loaded, Namespace};
use crate::region::{io_bytes, IoArea, Mapping};
use crate::violation::{SetupError, ViolationKind};

pub(crate) struct Unisolated {
    memory: Mapping,
    area: IoArea,
    symbols: [usize; MAX_SYMBOLS],
    binding: Binding,
    _library: Loaded,
}

impl Unisolated {
    pub fn new(config: &Config) -> Result<Unisolated, SetupError> {
        let library = Loaded::open(&config.c_library, Namespace::Main, false)?;
        let symbols = library.symbols(&config.symbols)?;
        let memory =
            Mapping::new(io_bytes(config.input_bytes, config.output_bytes), libc::PROT_READ | libc::PROT_WRITE, None)?;
        let area = IoArea { base: memory.base, input_cap: config.input_bytes, output_cap: config.output_bytes };
        let binding = Binding { case: config.case(), isolated: false };
        Ok(Unisolated { memory, area, symbols, binding, _library: library })
    }
}

impl Executor for Unisolated {
    fn area(&self) -> IoArea {
        self.area
    }

    fn execute(&mut self, entry: Entry) -> Result<(), ViolationKind> {
        let invocation = Invocation {
            frame: self.area.frame(),
            input: self.area.input(),
            output: self.area.output(),
            // SAFETY: the frame is ours, written by Domain::call_prepared.
            function: unsafe { (*self.area.frame()).function },
            symbols: self.symbols.as_ptr(),
            binding: self.binding,
        };
        // SAFETY: the invocation's areas are mapped (self.memory) and the frame was prepared
        // for `entry`'s types by Domain::call_prepared.
        unsafe { entry(&invocation) };
        let _ = &self.memory;
        Ok(())
    }

    fn discard(&mut self) {}
}
