//! What can go wrong, each as one line that says what to do.

use crate::sys;
use std::ffi::CStr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// DPDK initialises once per process, even after its cleanup.
    AlreadyInitialised,
    /// An EAL argument holds a NUL byte.
    NulInArgument(String),
    /// An EAL argument this API does not pass on (`eal_args`).
    RefusedArgument { argument: String, why: String },
    /// `rte_eal_init` refused the arguments, or could not set up the environment.
    Init { errno: i32 },
    /// A DPDK call failed with this error number.
    Call { call: &'static str, errno: i32 },
    /// No port has this id (DPDK numbers the ports it probed from 0).
    NoSuchPort(u16),
    /// The port is already open in this process.
    PortInUse(u16),
    /// A port's configuration that DPDK cannot take.
    Config(String),
    /// The pool has no free mbuf.
    PoolEmpty,
    /// An mbuf has less room (head or tail) or data than the operation needs.
    NoRoom { operation: &'static str, bytes: u16 },
}

/// DPDK's text for an error number (its own and the C library's).
pub(crate) fn describe(errno: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a NUL-terminated string, static or in a
    // per-thread buffer that lives until this thread's next call; it is copied out at once.
    let text = unsafe { CStr::from_ptr(sys::rte_strerror(errno)) };
    text.to_string_lossy().into_owned()
}

/// rte_errno of this thread: where DPDK's calls that return NULL or -1 leave the reason.
pub(crate) fn rte_errno() -> i32 {
    // SAFETY: reads a thread-local integer; no precondition.
    unsafe { sys::safenic_errno() }
}

/// DPDK's negative-errno return convention as a `Result`.
pub(crate) fn check(call: &'static str, ret: i32) -> Result<i32, Error> {
    if ret < 0 {
        Err(Error::Call { call, errno: -ret })
    } else {
        Ok(ret)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::AlreadyInitialised => {
                write!(f, "DPDK's EAL is already initialised in this process: keep the first `Eal` and pass it on")
            }
            Error::NulInArgument(a) => write!(f, "EAL argument {a:?} holds a NUL byte: remove it"),
            Error::RefusedArgument { argument, why } => write!(
                f,
                "EAL argument {argument:?} is refused ({why}): pass only the options of dpdk::ALLOWED_EAL_OPTIONS"
            ),
            Error::Init { errno } => write!(
                f,
                "DPDK's EAL did not start: {} (its log above says which argument or resource): fix the EAL arguments",
                describe(*errno)
            ),
            Error::Call { call, errno } => write!(f, "{call} failed: {}", describe(*errno)),
            Error::NoSuchPort(p) => {
                write!(f, "port {p} does not exist: name a device DPDK probes (-a BDF or --vdev), or a lower port")
            }
            Error::PortInUse(p) => write!(f, "port {p} is open already: open each port once"),
            Error::Config(why) => write!(f, "{why}"),
            Error::PoolEmpty => write!(f, "the mempool has no free mbuf: free some, or create a larger pool"),
            Error::NoRoom { operation, bytes } => {
                write!(f, "{operation} of {bytes} bytes does not fit this mbuf: use fewer bytes")
            }
        }
    }
}

impl std::error::Error for Error {}
