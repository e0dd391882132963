//! The one API over every backend: make a domain, call into it, get a result or a violation.

use crate::config::{Backend, Config};
use crate::executor::{Executor, Waits};
use crate::frame::{run, Crossing, Entry, Io, ARGS_MAX, RESULT_MAX};
use crate::region::IoArea;
use crate::violation::{SetupError, Violation, ViolationKind};

/// A loaded C library in its own domain. Calls take `&mut self`: one call at a time, and the
/// domain's memory is the caller's to fill and read between calls.
pub struct Domain {
    executor: Box<dyn Executor>,
    backend: Backend,
    generation: u64,
}

/// A call's result and the part of the output area the call filled (valid until the next call).
#[derive(Debug)]
pub struct Reply<'d, R> {
    pub value: R,
    pub output: &'d [u8],
}

impl Domain {
    pub fn new(config: Config) -> Result<Domain, SetupError> {
        let backend = config.resolve_backend()?;
        let executor: Box<dyn Executor> = match backend {
            Backend::Mpk => Box::new(crate::mpk::MpkDomain::new(&config)?),
            Backend::Process => Box::new(crate::process::ProcessDomain::new(&config)?),
            Backend::Unisolated => Box::new(crate::unisolated::Unisolated::new(&config)?),
        };
        Ok(Domain { executor, backend, generation: 0 })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// How the caller has waited for answers (the process backend's; zero for the others).
    pub fn waits(&self) -> Waits {
        self.executor.waits()
    }

    /// How many times the domain has been discarded and re-created.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Runs `function` inside the domain with a copy of `args` and of `input`. A function that
    /// captures nothing (a `fn` item or such a closure) is all that can run there: it is found
    /// in the helper process by its address.
    pub fn call<A: Crossing, R: Crossing>(
        &mut self,
        args: &A,
        input: &[u8],
        function: fn(&A, &mut Io<'_>) -> R,
    ) -> Result<Reply<'_, R>, Violation> {
        let area = self.executor.area();
        if input.len() > area.input_cap {
            let kind = ViolationKind::InputTooLarge { len: input.len(), capacity: area.input_cap };
            return Err(Violation { kind, backend: self.backend, generation: self.generation });
        }
        // SAFETY: the input area holds input_cap bytes of domain memory that nothing borrows
        // while the domain is not running (&mut self); `input` is the caller's.
        unsafe { std::ptr::copy_nonoverlapping(input.as_ptr(), area.input(), input.len()) };
        self.run_in(area, args, input.len(), function)
    }

    /// The input area, to be filled in place and passed to [`Domain::call_prepared`]: the
    /// bytes reach the domain without a copy.
    pub fn input_area(&mut self) -> &mut [u8] {
        let area = self.executor.area();
        // SAFETY: input_cap bytes of domain memory, borrowed as long as &mut self is, and the
        // domain does not run while it is.
        unsafe { std::slice::from_raw_parts_mut(area.input(), area.input_cap) }
    }

    /// As [`Domain::call`], with the first `input_len` bytes of [`Domain::input_area`] as input.
    pub fn call_prepared<A: Crossing, R: Crossing>(
        &mut self,
        args: &A,
        input_len: usize,
        function: fn(&A, &mut Io<'_>) -> R,
    ) -> Result<Reply<'_, R>, Violation> {
        let area = self.executor.area();
        self.run_in(area, args, input_len, function)
    }

    /// The call, with the I/O area the executor gave for it (looked up once per call).
    fn run_in<A: Crossing, R: Crossing>(
        &mut self,
        area: IoArea,
        args: &A,
        input_len: usize,
        function: fn(&A, &mut Io<'_>) -> R,
    ) -> Result<Reply<'_, R>, Violation> {
        const { assert!(std::mem::size_of::<A>() <= ARGS_MAX && std::mem::size_of::<R>() <= RESULT_MAX) };
        let input_len = input_len.min(area.input_cap);
        let entry: Entry = run::<A, R>;
        // SAFETY: the frame is domain memory, not running and not borrowed (&mut self).
        let frame = unsafe { &mut *area.frame() };
        frame.run = entry as usize;
        frame.function = function as usize;
        frame.input_len = input_len as u64;
        frame.output_cap = area.output_cap as u64;
        frame.output_len = 0;
        frame.args[..std::mem::size_of::<A>()].copy_from_slice(args.as_bytes());
        frame.result[..std::mem::size_of::<R>()].fill(0);
        if let Err(kind) = self.executor.execute(entry) {
            return Err(self.discard(kind));
        }
        // SAFETY: as above; the call has ended.
        let frame = unsafe { &*area.frame() };
        let output_len = frame.output_len as usize;
        if output_len > area.output_cap {
            return Err(self.discard(ViolationKind::BadReply { what: "output length beyond the output area" }));
        }
        let Ok((value, _)) = R::read_from_prefix(&frame.result) else {
            return Err(self.discard(ViolationKind::BadReply { what: "result" }));
        };
        // SAFETY: output_len ≤ output_cap bytes of domain memory, borrowed with &mut self.
        let output = unsafe { std::slice::from_raw_parts(area.output(), output_len) };
        Ok(Reply { value, output })
    }

    fn discard(&mut self, kind: ViolationKind) -> Violation {
        self.executor.discard();
        self.generation += 1;
        Violation { kind, backend: self.backend, generation: self.generation }
    }
}
