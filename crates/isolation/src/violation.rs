//! What a call into a domain can end in besides its result.

use crate::config::Backend;
use std::fmt;
use std::time::Duration;

/// A call that did not complete: the domain has been discarded and re-created (except for
/// [`ViolationKind::InputTooLarge`], which is refused before the domain runs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub kind: ViolationKind,
    pub backend: Backend,
    /// The domain's generation after the discard: it counts the discards so far.
    pub generation: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViolationKind {
    /// The domain's code raised a signal: a memory fault (`SIGSEGV`, `SIGBUS`; with MPK, a
    /// protection-key fault has `pkey`), an abort (`SIGABRT`, e.g. the stack protector), an
    /// illegal instruction or an arithmetic fault.
    Fault { signal: i32, code: i32, address: usize, pkey: Option<u32> },
    /// The call ran longer than [`crate::Config::timeout`].
    Timeout { after: Duration },
    /// The helper process ended during the call (process backend): killed by `signal` (`SIGSYS`
    /// for a system call outside its allowlist) or exited with `status`.
    Died { signal: Option<i32>, status: Option<i32> },
    /// The domain answered with something impossible (a result or length out of range).
    BadReply { what: &'static str },
    /// The calling thread could not be made ready to enter an MPK domain (its signal stack or
    /// its rseq area); the domain did not run.
    ThreadSetup { reason: String },
    /// The input did not fit the domain's input area; the domain did not run.
    InputTooLarge { len: usize, capacity: usize },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} domain: {} (domain discarded, now generation {})", self.backend, self.kind, self.generation)
    }
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ViolationKind::Fault { signal, code, address, pkey } => {
                write!(f, "{} (code {code}) at {address:#x}", signal_name(*signal))?;
                match pkey {
                    Some(k) => write!(f, ", protection key {k}"),
                    None => Ok(()),
                }
            }
            ViolationKind::Timeout { after } => write!(f, "no return after {after:?}"),
            ViolationKind::Died { signal: Some(s), .. } => write!(f, "helper process killed by {}", signal_name(*s)),
            ViolationKind::Died { status, .. } => write!(f, "helper process exited with status {status:?}"),
            ViolationKind::BadReply { what } => write!(f, "impossible reply: {what}"),
            ViolationKind::ThreadSetup { reason } => write!(f, "this thread cannot enter the domain: {reason}"),
            ViolationKind::InputTooLarge { len, capacity } => {
                write!(f, "input of {len} bytes exceeds the input area of {capacity} bytes (Config::input_bytes)")
            }
        }
    }
}

impl std::error::Error for Violation {}

/// The name of a signal, for messages.
pub fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGSYS => "SIGSYS",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTRAP => "SIGTRAP",
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}

/// A domain that could not be created (or re-created): the message names the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupError(pub String);

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetupError {}

impl SetupError {
    pub(crate) fn os(what: &str) -> SetupError {
        SetupError(format!("{what}: {}", std::io::Error::last_os_error()))
    }
}
