//! Private mount namespaces, so that `nicsim exec` can show fake PCI functions under
//! `/sys/bus/pci/devices` to one command without touching the rest of the machine.
//!
//! # Soundness
//! Mount operations on the calling thread's mount namespace, through the kernel: what root's
//! `std` could do with the `mount` program; they reach no memory of this process.

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

/// Replaces directory `dir`, for this mount namespace only, by a tmpfs that holds the same
/// entries (directories and files bind-mounted from the original, submounts included; symbolic
/// links copied) plus `extra`: each name bind-mounted from its source, taking the place of an
/// original entry of that name. This is how a name can be added to `/dev` or `/sys/class`,
/// where nothing can be created, without the host seeing it.
pub fn extend_directory(dir: &Path, extra: &[(String, std::path::PathBuf)]) -> Result<(), PlatformError> {
    use rustix::fs::{Mode, OFlags};
    use std::os::fd::AsRawFd;
    let fail = |what: &str, e: std::io::Error| errno_error("extending a directory", format!("{what}: {e}"), e);
    // The original stays reachable through this descriptor once the tmpfs covers its path.
    let original = rustix::fs::open(dir, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| fail(&format!("opening {}", dir.display()), e.into()))?;
    let through = std::path::PathBuf::from(format!("/proc/self/fd/{}", original.as_raw_fd()));
    let entries: Vec<std::fs::DirEntry> = std::fs::read_dir(&through)
        .map_err(|e| fail(&format!("listing {}", dir.display()), e))?
        .collect::<Result<_, _>>()
        .map_err(|e| fail(&format!("listing {}", dir.display()), e))?;
    rustix::mount::mount("tmpfs", dir, "tmpfs", rustix::mount::MountFlags::NOSUID, Some(c"mode=0755"))
        .map_err(|e| fail(&format!("mounting a tmpfs on {}", dir.display()), e.into()))?;
    let place = |name: &std::ffi::OsStr, src: &Path, is_dir: bool| -> Result<(), PlatformError> {
        let dst = dir.join(name);
        let made = if is_dir { std::fs::create_dir(&dst) } else { std::fs::File::create(&dst).map(drop) };
        made.map_err(|e| fail(&format!("creating {}", dst.display()), e))?;
        rustix::mount::mount_bind_recursive(src, &dst)
            .map_err(|e| fail(&format!("bind-mounting {} on {}", src.display(), dst.display()), e.into()))
    };
    for entry in entries {
        let name = entry.file_name();
        if extra.iter().any(|(n, _)| std::ffi::OsStr::new(n) == name) {
            continue;
        }
        let src = entry.path();
        let meta = std::fs::symlink_metadata(&src).map_err(|e| fail(&format!("reading {}", src.display()), e))?;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&src).map_err(|e| fail(&format!("reading {}", src.display()), e))?;
            std::os::unix::fs::symlink(target, dir.join(&name))
                .map_err(|e| fail(&format!("linking {}", dir.join(&name).display()), e))?;
        } else {
            place(&name, &src, meta.is_dir())?;
        }
    }
    for (name, src) in extra {
        let is_dir = std::fs::metadata(src).map_err(|e| fail(&format!("reading {}", src.display()), e))?.is_dir();
        place(std::ffi::OsStr::new(name), src, is_dir)?;
    }
    Ok(())
}

/// Mounts the kernel's trace file system on `dst` (which must exist), for reading trace events.
/// Every mount of it shows the same tracing instances; [`unmount`] takes this one away.
pub fn mount_tracefs(dst: &Path) -> Result<(), PlatformError> {
    rustix::mount::mount("nodev", dst, "tracefs", rustix::mount::MountFlags::empty(), None)
        .map_err(|e| errno_error("mounting tracefs", format!("mount -t tracefs nodev {}", dst.display()), e.into()))
}

/// Detaches the mount on `dir`, if any.
pub fn unmount(dir: &Path) {
    let _ = rustix::mount::unmount(dir, rustix::mount::UnmountFlags::DETACH);
}
