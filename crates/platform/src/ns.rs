//! Private mount namespaces, so that `nicsim exec` can show fake PCI functions under
//! `/sys/bus/pci/devices` to one command without touching the rest of the machine.

use crate::error::PlatformError;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn cstring(p: &Path) -> Result<CString, PlatformError> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| PlatformError::io(format!("path {} contains NUL", p.display()), std::io::Error::other("NUL")))
}

fn errno_error(what: &'static str, context: String) -> PlatformError {
    let e = std::io::Error::last_os_error();
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
        return Err(errno_error("creating a mount namespace", "unshare(CLONE_NEWNS)".into()));
    }
    let root = cstring(Path::new("/"))?;
    // SAFETY: all pointers are valid NUL-terminated strings or NULL, as mount(2) allows for a
    // propagation change; the call does not retain them.
    let rc = unsafe {
        libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(errno_error("making mounts private", "mount --make-rprivate /".into()));
    }
    Ok(())
}

/// Bind-mounts `src` onto `dst` (both must exist).
pub fn bind_mount(src: &Path, dst: &Path) -> Result<(), PlatformError> {
    let (s, d) = (cstring(src)?, cstring(dst)?);
    // SAFETY: valid NUL-terminated paths; NULL fstype and data are allowed with MS_BIND.
    let rc = unsafe { libc::mount(s.as_ptr(), d.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()) };
    if rc != 0 {
        return Err(errno_error("bind-mounting", format!("bind-mounting {} on {}", src.display(), dst.display())));
    }
    Ok(())
}
