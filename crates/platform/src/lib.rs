//! The OS boundary of safenic and nicsim.
//!
//! Everything that talks to the kernel about memory lives here: shared mappings of files
//! (a device's `resource0`, a driver's hugepages as seen by nicsim), hugepage DMA memory with
//! physical addresses from `/proc/self/pagemap`, PCI functions through sysfs, mount
//! namespaces for `nicsim exec`, CPU pinning, and child processes and scratch directories that
//! never outlive their owner. Each `unsafe` block carries a `// SAFETY:`
//! comment; callers only see safe, bounds-checked interfaces.
//!
//! Every failure a user can cause or fix is a [`PlatformError`] whose message is one line that
//! names the fix.

pub mod before_main;
pub mod confine;
pub mod dma;
pub mod error;
pub mod fs;
pub mod fuse;
pub mod hugepage;
pub mod i82599;
pub mod keeper;
mod landlock;
mod mapped_once;
pub mod mem;
pub mod ns;
pub mod pagemap;
pub mod pci;
pub mod process;
pub mod sched;
pub mod signals;
pub mod tap;
pub mod trace;
pub mod valgrind;
pub mod vfio;
pub mod xdp;

pub use error::PlatformError;
pub use hugepage::{DmaBacking, DmaMemory};
pub use mapped_once::refuse_second_mappings;
pub use mem::{MappedRegion, Span};
pub use pci::PciFunction;
pub use process::Reaped;
