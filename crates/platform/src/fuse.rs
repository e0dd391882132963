//! FUSE mounts: a file system whose every read and write a process answers itself. nicsim
//! serves the I/O BARs of its virtio-net functions this way, so that each `pread`/`pwrite` a
//! driver makes on `resource0` reaches the device model as one access, as an `in`/`out`
//! instruction reaches a device (docs/virtio.md).
//!
//! # Soundness
//! A mount and its device's descriptor, and an unmount: operations on the file system, through
//! the kernel, that reach no memory of this process but the buffers they are given.

use crate::error::PlatformError;
use rustix::mount::{MountFlags, UnmountFlags};
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;

/// Mounts a FUSE file system on `dir` (which must exist) and returns the connection: the file
/// its requests are read from and its replies written to. Needs root.
pub fn mount(dir: &Path) -> Result<File, PlatformError> {
    let device = OpenOptions::new().read(true).write(true).open("/dev/fuse").map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => PlatformError::io(
            "opening /dev/fuse (load the fuse module: modprobe fuse)",
            std::io::Error::other("no FUSE device"),
        ),
        std::io::ErrorKind::PermissionDenied => PlatformError::NotRoot { what: "serving a FUSE file system" },
        _ => PlatformError::io("opening /dev/fuse", e),
    })?;
    let options = format!(
        "fd={},rootmode=40000,user_id={},group_id={},allow_other",
        device.as_raw_fd(),
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw()
    );
    let options = CString::new(options).map_err(|e| PlatformError::io("FUSE mount options", e.into()))?;
    rustix::mount::mount("nicsim", dir, "fuse.nicsim", MountFlags::NOSUID | MountFlags::NODEV, Some(&*options))
        .map_err(|e| match e {
            rustix::io::Errno::PERM => PlatformError::NotRoot { what: "mounting a FUSE file system" },
            _ => PlatformError::io(format!("mounting FUSE on {}", dir.display()), e.into()),
        })?;
    Ok(device)
}

/// Makes reads of the connection return `WouldBlock` at once when no request waits, for a
/// server that polls for requests before it sleeps on them ([`wait_for_request`]).
pub fn set_nonblocking(connection: &File) -> Result<(), PlatformError> {
    let flags =
        rustix::fs::fcntl_getfl(connection).map_err(|e| PlatformError::io("FUSE connection flags", e.into()))?;
    rustix::fs::fcntl_setfl(connection, flags | rustix::fs::OFlags::NONBLOCK)
        .map_err(|e| PlatformError::io("FUSE connection flags", e.into()))
}

/// Sleeps until a request waits on the connection (or the mount went, which the next read
/// reports).
pub fn wait_for_request(connection: &File) -> Result<(), PlatformError> {
    let mut fds = [rustix::event::PollFd::new(connection, rustix::event::PollFlags::IN)];
    match rustix::event::poll(&mut fds, None) {
        Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
        Err(e) => Err(PlatformError::io("waiting for a FUSE request", e.into())),
    }
}

/// Detaches the mount on `dir`, if any: what is open on it stays usable until closed. A
/// server that died leaves its mount behind, unusable, and this removes it.
pub fn unmount(dir: &Path) {
    let _ = rustix::mount::unmount(dir, UnmountFlags::DETACH);
}

/// The user and group this process runs as: the owner its FUSE files show.
pub fn owner() -> (u32, u32) {
    (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw())
}
