//! Domains that a C library's memory error cannot escape (docs/isolation.md). A [`Domain`]
//! loads one C library and runs functions that call it; a fault inside (a wild write, a stack
//! smash, a null call, a time-out) comes back as an ordinary `Err(`[`Violation`]`)`, the
//! domain's memory is discarded and re-created, and the next call works.
//!
//! Two backends behind one API, chosen at run time ([`BackendChoice`]):
//! - **MPK**, in process: the domain's stack, heap and data sit under their own protection key;
//!   entering and leaving write PKRU once each. Needs a CPU and kernel with PKU.
//! - **Process**: a pre-spawned helper process per domain, the call's data in shared memory
//!   (memfd), restricted by a seccomp allowlist, restarted when it dies. Works everywhere.
//!
//! What crosses the boundary: arguments and results of [`Crossing`] types (plain bytes, every
//! bit pattern valid, no pointers: a domain's pointers mean nothing outside it, and whatever it
//! writes back must not be able to break an invariant), and byte buffers, which the domain reads
//! and writes in its own memory without a serializer.
//!
//! # Soundness
//!
//! For any safe caller, a C library's code changes no memory of the caller but the domain's:
//! - a library is loaded into the caller (the MPK and unisolated backends, [`Direct`]) only if
//!   it is trusted ([`Library`]: the project's own, the cases' two system libraries, or one the
//!   caller vouched for with an `unsafe` constructor); any other only by a helper process
//!   confined before its first instruction runs (the process backend);
//! - a function runs inside a domain on the domain's own memory, and what comes back is
//!   [`Crossing`] values (valid for every bit pattern, no pointers) and lengths the caller checks;
//! - a case's function ([`cases`]) calls symbols by index only when the domain resolved its own
//!   library's symbols in its order, and the broken library's misbehaving ones only inside a
//!   domain; a function the caller writes cannot call C without `unsafe`;
//! - the MPK backend protects against a buggy library, not a malicious one (docs/isolation.md,
//!   "Threat model"): hence only trusted libraries run under it.
//!
//! ```no_run
//! use isolation::{Config, Domain, Io, Library};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let mut domain = Domain::new(Config::new(Library::broken(), &["broken_sum"]))?;
//!     // A plain fn (or a closure that captures nothing) runs inside the domain.
//!     let sum = domain.call(&0u64, b"\x01\x02\x03", |_: &u64, io: &mut Io<'_>| io.input().len() as u64)?;
//!     assert_eq!(sum.value, 3);
//!     Ok(())
//! }
//! ```

mod config;
mod direct;
mod domain;
mod executor;
mod frame;
mod library;
mod mpk;
pub mod pku;
mod process;
mod region;
mod signal_stack;
mod unisolated;
mod violation;

pub mod cases;

pub use config::{Backend, BackendChoice, Config};
pub use direct::Direct;
pub use domain::{Domain, Reply};
pub use executor::Waits;
pub use frame::{Crossing, Io};
pub use library::{Library, MAX_SYMBOLS};
pub use violation::{SetupError, Violation, ViolationKind};
