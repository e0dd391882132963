//! Private mount namespaces, so that `nicsim exec` can show fake PCI functions under
//! `/sys/bus/pci/devices` to one command without touching the rest of the machine.

use crate::error::PlatformError;
use rustix::mount::{mount_bind, mount_change, MountPropagationFlags};
use std::path::Path;

fn errno_error(what: &'static str, context: String, e: std::io::Error) -> PlatformError {
    match e.raw_os_error() {
        Some(libc::EPERM) => PlatformError::NotRoot { what },
        _ => PlatformError::io(context, e),
    }
}

/// Moves the calling process into a new mount namespace whose mounts do not propagate back.
/// Call it while the process has a single thread.
pub fn enter_private_mount_namespace() -> Result<(), PlatformError> {
    // SAFETY: unshare(CLONE_NEWNS) only changes which mount table this process sees; it does
    // not touch memory or file descriptors.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(errno_error("creating a mount namespace", "unshare(CLONE_NEWNS)".into(), e));
    }
    mount_change("/", MountPropagationFlags::REC | MountPropagationFlags::PRIVATE)
        .map_err(|e| errno_error("making mounts private", "mount --make-rprivate /".into(), e.into()))
}

/// Bind-mounts `src` onto `dst` (both must exist).
pub fn bind_mount(src: &Path, dst: &Path) -> Result<(), PlatformError> {
    mount_bind(src, dst).map_err(|e| {
        errno_error("bind-mounting", format!("bind-mounting {} on {}", src.display(), dst.display()), e.into())
    })
}

/// Mounts a hugetlbfs of 2 MiB pages on `dst` (which must exist): in a private mount
/// namespace, seen only by this process and its children.
pub fn mount_hugetlbfs(dst: &Path) -> Result<(), PlatformError> {
    rustix::mount::mount("nodev", dst, "hugetlbfs", rustix::mount::MountFlags::empty(), Some(c"pagesize=2M"))
        .map_err(|e| errno_error("mounting hugetlbfs", format!("mount -t hugetlbfs nodev {}", dst.display()), e.into()))
}
