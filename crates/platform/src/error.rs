//! Errors that name their fix.
//!
//! # Soundness
//! An error is a value: it holds strings and numbers, and reaches no memory or device.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A failure at the OS boundary. `Display` is one line that tells the user what to do.
#[derive(Debug)]
pub enum PlatformError {
    /// The operation needs root (CAP_SYS_ADMIN), e.g. reading physical addresses.
    NotRoot { what: &'static str },
    /// Not enough 2 MiB hugepages are reserved.
    NoHugepages { requested_bytes: usize },
    /// No hugetlbfs mount exists, so no hugepage file can be created.
    HugetlbfsNotMounted,
    /// DMA memory was asked for in a directory that is not on hugetlbfs: its pages would be
    /// 4 KiB, neither contiguous nor pinned.
    NotHugetlbfs { dir: PathBuf },
    /// The PCI function directory does not exist under the sysfs root.
    DeviceNotFound { address: String, root: PathBuf },
    /// The PCI address is not of the form `DDDD:BB:DD.F` or `BB:DD.F`.
    BadAddress { address: String },
    /// The function exists but is not the expected device.
    WrongDevice { address: String, vendor: u16, device: u16, expected: &'static str },
    /// The function is bound to a kernel driver that we must not take it from.
    BoundToKernelDriver { address: String, driver: String, root: PathBuf },
    /// Another live process owns the function (holds its lock, see `PciFunction::claim`).
    InUse { address: String, owner: Option<(u32, String)> },
    /// The process cannot be confined (`confine::confine_process`), so no queue may start.
    Unconfinable { why: String, fix: &'static str },
    /// A port was opened after the process was confined: its configuration space can no
    /// longer be written.
    OpenedAfterConfinement { address: String },
    /// A real device that this process did not open before `main` (`before_main`), or
    /// could not.
    NotOpenedBeforeMain { address: String, why: String },
    /// A real device was to be opened while one file's pages are mapped twice in this process
    /// (`mapped_once`).
    MappedTwice { first: String, second: String },
    /// A request the trusted base refuses (a register no code may write, a layout it cannot
    /// place); the message names what to do instead.
    Refused(String),
    /// The device did not reach a state in time.
    DeviceTimeout { address: String, what: &'static str },
    /// Registers read all-ones: the device was removed, reset by someone else, or (under
    /// nicsim) the simulator stopped.
    DeviceGone { address: String },
    /// A function could not be opened or used through VFIO; the message names the fix.
    Vfio(String),
    /// An interface could not be opened or used through AF_XDP; the message names the fix.
    Xdp(String),
    /// Any other I/O failure, with what we were doing.
    Io { context: String, source: io::Error },
}

impl PlatformError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        PlatformError::Io { context: context.into(), source }
    }
}

impl fmt::Display for PlatformError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlatformError::NotRoot { what } => {
                write!(f, "{what} needs root (CAP_SYS_ADMIN): run the command as root, e.g. with sudo")
            }
            PlatformError::NoHugepages { requested_bytes } => write!(
                f,
                "not enough 2 MiB hugepages for {} MiB of DMA memory: reserve more with \
                 `echo 1024 > /proc/sys/vm/nr_hugepages` (scripts/setup does this)",
                requested_bytes.div_ceil(1 << 20)
            ),
            PlatformError::HugetlbfsNotMounted => write!(
                f,
                "no hugetlbfs mount found: mount one with `mkdir -p /dev/hugepages && \
                 mount -t hugetlbfs nodev /dev/hugepages` (scripts/setup does this)"
            ),
            PlatformError::NotHugetlbfs { dir } => write!(
                f,
                "{} is not on hugetlbfs, so its pages cannot be given to a device: pass a hugetlbfs \
                 mount (e.g. /dev/hugepages, which scripts/setup mounts)",
                dir.display()
            ),
            PlatformError::DeviceNotFound { address, root } => write!(
                f,
                "PCI function {address} not found under {}: list the functions with `ls {}` \
                 (for nicsim's devices pass --sysfs <nicsim root>/devices or use `nicsim exec`)",
                root.display(),
                root.display()
            ),
            PlatformError::BadAddress { address } => {
                write!(f, "`{address}` is not a PCI address: write it as DDDD:BB:DD.F (e.g. 0000:5e:00.0) or BB:DD.F")
            }
            PlatformError::WrongDevice { address, vendor, device, expected } => write!(
                f,
                "PCI function {address} is {vendor:04x}:{device:04x}, not {expected}: pass the address of {expected}"
            ),
            PlatformError::BoundToKernelDriver { address, driver, root } => write!(
                f,
                "PCI function {address} is bound to the kernel driver `{driver}`: if it is yours to take, \
                 unbind it with `echo {address} > {}/{address}/driver/unbind` (we never unbind automatically)",
                root.display()
            ),
            PlatformError::InUse { address, owner: Some((pid, name)) } => write!(
                f,
                "PCI function {address} is in use by process {pid} ({name}): stop that driver first, or give another port"
            ),
            PlatformError::InUse { address, owner: None } => write!(
                f,
                "PCI function {address} is in use by another process: stop that driver first, or give another port"
            ),
            PlatformError::Unconfinable { why, fix } => {
                write!(f, "cannot confine this process before giving a device memory: {why}: {fix}")
            }
            PlatformError::OpenedAfterConfinement { address } => write!(
                f,
                "PCI function {address} was opened after a queue started, when this process can no longer \
                 write device files: open every port before starting the first queue"
            ),
            PlatformError::NotOpenedBeforeMain { address, why } => {
                write!(f, "PCI function {address} is not open to this process: {why}")
            }
            PlatformError::MappedTwice { first, second } => write!(
                f,
                "this process maps one file twice ({first}, and again {second}), and a second mapping of a \
                 driver's memory reaches past the types that guard it: drop one mapping before opening a real device"
            ),
            PlatformError::Refused(what) | PlatformError::Vfio(what) | PlatformError::Xdp(what) => f.write_str(what),
            PlatformError::DeviceTimeout { address, what } => write!(
                f,
                "{address}: timed out waiting for {what}: check the cable and that no other program drives this port"
            ),
            PlatformError::DeviceGone { address } => write!(
                f,
                "{address}: the device is gone (its registers read all-ones): it was removed, or nicsim stopped; \
                 start the driver again once it is back"
            ),
            PlatformError::Io { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for PlatformError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PlatformError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
