//! How a domain is made: which library, which of its symbols, which backend, how much memory.

use crate::library::{Library, MAX_SYMBOLS};
use std::fmt;
use std::time::Duration;

/// The backend a domain runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// In process, under a memory protection key (needs PKU).
    Mpk,
    /// In a helper process.
    Process,
    /// In process without any protection: the direct call, for comparison (bench, tests).
    Unisolated,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Mpk => "mpk",
            Backend::Process => "process",
            Backend::Unisolated => "unisolated",
        })
    }
}

/// Which backend to use. `Auto` takes MPK where the CPU and kernel have PKU, the process
/// backend elsewhere; the environment variable `SAFENIC_ISOLATION_BACKEND` (`mpk`, `process`)
/// overrides `Auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    Auto,
    Require(Backend),
}

/// A domain's recipe.
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) c_library: Library,
    pub(crate) symbols: Vec<&'static str>,
    pub(crate) backend: BackendChoice,
    pub(crate) heap_bytes: usize,
    pub(crate) stack_bytes: usize,
    pub(crate) input_bytes: usize,
    pub(crate) output_bytes: usize,
    pub(crate) timeout: Option<Duration>,
    pub(crate) spin: Duration,
    pub(crate) caller_spin_limit: Duration,
    pub(crate) helper_cpu: Option<usize>,
}

impl Config {
    /// A domain for `library`, resolving `symbols` (at most [`MAX_SYMBOLS`]) in it.
    pub fn new(library: Library, symbols: &[&'static str]) -> Config {
        Config {
            c_library: library,
            symbols: symbols.to_vec(),
            backend: BackendChoice::Auto,
            heap_bytes: 64 << 20,
            stack_bytes: 1 << 20,
            input_bytes: 1 << 20,
            output_bytes: 1 << 20,
            timeout: Some(Duration::from_secs(10)),
            spin: Duration::from_micros(100),
            caller_spin_limit: Duration::from_millis(2),
            helper_cpu: None,
        }
    }

    pub fn backend(mut self, choice: BackendChoice) -> Config {
        self.backend = choice;
        self
    }

    /// The MPK domain's heap, where the library's `malloc` is served (default 64 MiB, reserved
    /// lazily by the kernel).
    pub fn heap_bytes(mut self, bytes: usize) -> Config {
        self.heap_bytes = bytes;
        self
    }

    /// The MPK domain's stack (default 1 MiB).
    pub fn stack_bytes(mut self, bytes: usize) -> Config {
        self.stack_bytes = bytes;
        self
    }

    /// The input and output areas of the domain's memory (default 1 MiB each).
    pub fn io_bytes(mut self, input: usize, output: usize) -> Config {
        self.input_bytes = input;
        self.output_bytes = output;
        self
    }

    /// A call that runs longer is stopped and reported (default 10 s; `None`: never).
    pub fn timeout(mut self, timeout: Option<Duration>) -> Config {
        self.timeout = timeout;
        self
    }

    /// How long the process backend's two sides poll for each other before they sleep (default
    /// 100 µs): a call that comes within it costs no system call.
    pub fn spin(mut self, spin: Duration) -> Config {
        self.spin = spin;
        self
    }

    /// How long the process backend's caller may poll for an answer (default 2 ms). It polls
    /// for twice as long as it waited for the previous one, at least `spin` and at most this:
    /// a call as long as the last is answered without a futex wake-up, which on a VM can cost
    /// more than the boundary itself (7–130 µs). The caller's core is busy while it polls.
    pub fn caller_spin_limit(mut self, limit: Duration) -> Config {
        self.caller_spin_limit = limit;
        self
    }

    /// Pins the process backend's helper to one CPU (a caller that polls on another one gets
    /// its answers without the two competing for a core).
    pub fn helper_cpu(mut self, cpu: Option<usize>) -> Config {
        self.helper_cpu = cpu;
        self
    }

    /// The case the symbols are resolved for ([`crate::frame::case_id`]).
    pub(crate) fn case(&self) -> u64 {
        crate::frame::case_id(self.c_library.name(), &self.symbols)
    }

    /// The backend `self.backend` stands for on this host: never one that loads a library
    /// into this process unless it is trusted ([`Library`]).
    pub(crate) fn resolve_backend(&self) -> Result<Backend, crate::SetupError> {
        let wanted = match self.backend {
            BackendChoice::Require(b) => b,
            BackendChoice::Auto => match std::env::var("SAFENIC_ISOLATION_BACKEND").as_deref() {
                Ok("mpk") => Backend::Mpk,
                Ok("process") => Backend::Process,
                Ok(other) => {
                    return Err(crate::SetupError(format!(
                        "SAFENIC_ISOLATION_BACKEND={other}: use mpk or process, or unset it to choose by the CPU"
                    )))
                }
                Err(_) if crate::pku::available() && self.c_library.is_trusted() => Backend::Mpk,
                Err(_) => Backend::Process,
            },
        };
        match wanted {
            Backend::Mpk => self.c_library.expect_trusted("the MPK backend")?,
            Backend::Unisolated => self.c_library.expect_trusted("the unisolated backend")?,
            Backend::Process => {}
        }
        if wanted == Backend::Mpk && !crate::pku::available() {
            return Err(crate::SetupError(
                "the MPK backend needs a CPU and kernel with protection keys (pku and ospke in /proc/cpuinfo): \
                 use the process backend here, or run the MPK tests in a guest (make test-mpk)"
                    .into(),
            ));
        }
        if self.symbols.len() > MAX_SYMBOLS {
            return Err(crate::SetupError(format!(
                "{} symbols asked for; a domain resolves at most {MAX_SYMBOLS}",
                self.symbols.len()
            )));
        }
        Ok(wanted)
    }
}
