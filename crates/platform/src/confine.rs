//! Closing the file-system ways around the type system, once a driver starts giving a device
//! memory.
//!
//! Safe code can write any byte of its own process through `/proc/self/mem` (or another
//! process's through `/proc/<pid>/mem`), reach a device through `/sys` (config space, I/O BARs)
//! or `/dev/mem`, all with `std::fs` alone. [`confine_process`] takes that away for good: from
//! then on every thread of the process, and every program it starts, may open files for
//! writing only on storage file systems (listed below) and a few harmless devices; it may not
//! create device nodes, `ptrace`, `process_vm_writev` or change another process's limits. A
//! process whose queues have a keeper (`crate::keeper`) starts it first and may then signal
//! no process outside the restriction. A file already open for writing on anything else makes
//! it fail, since the restriction applies to opening only.
//!
//! # Soundness
//! Every public function only restricts the calling process (or reads whether it was): it
//! takes away writes, signals, tracing and root; nothing here gives a right back.

use crate::error::PlatformError;
use crate::landlock::{self, Ruleset, MAKE_BLOCK, MAKE_CHAR, TRUNCATE, WRITE_FILE};
use std::fs::OpenOptions;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// File systems that hold only files and directories, never a process's memory or a
/// device's registers: the only ones a confined process may write.
const STORAGE_TYPES: &[&str] = &[
    "tmpfs",
    "hugetlbfs",
    "ramfs",
    "ext2",
    "ext3",
    "ext4",
    "xfs",
    "btrfs",
    "bcachefs",
    "f2fs",
    "zfs",
    "overlay",
    "9p",
    "virtiofs",
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "vfat",
    "exfat",
    "ntfs3",
    "fuse",
    "fuseblk",
    "devpts",
];

/// What a confined process may still open for writing under `/dev`, whatever `/dev` is.
const DEV_ENTRIES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts", "shm", "hugepages"];

/// Character devices (major, minor) that hold no memory and no registers: the entries above.
fn harmless_device(major: u32, minor: u32) -> bool {
    matches!((major, minor), (1, 3 | 5 | 7 | 8 | 9) | (5, 0..=2)) || major == 4 || (136..=143).contains(&major)
}

static CONFINED: Mutex<bool> = Mutex::new(false);
static GAVE_UP_ROOT: AtomicBool = AtomicBool::new(false);

/// The user and group a process with a keeper becomes at its first queue: `nobody`'s on most
/// systems, which owns no file that a root service acts on.
pub const UNPRIVILEGED: u32 = 65534;

/// Whether this process gave up root at its first queue (one with a keeper does).
pub fn gave_up_root() -> bool {
    GAVE_UP_ROOT.load(Ordering::SeqCst)
}

/// Whether [`confine_process`] has run in this process.
pub fn is_confined() -> bool {
    *CONFINED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Confines this process as the module says. Later calls only check the open files again: a
/// refusal is not undone by asking twice.
pub fn confine_process() -> Result<(), PlatformError> {
    let mut confined = CONFINED.lock().unwrap_or_else(|e| e.into_inner());
    // valgrind passes no Landlock call to the kernel; the bench counts instructions under it.
    if crate::valgrind::running_on_valgrind() {
        return Ok(());
    }
    if !*confined {
        // The keeper is forked before the restriction, which then keeps the driver from
        // signalling it.
        let keeper = crate::keeper::keeps_queues();
        if keeper {
            crate::keeper::start_keeper()?;
        }
        restrict(keeper)?;
        if keeper {
            give_up_root()?;
        }
        *confined = true;
    }
    // Checked after: no thread can open another such file once all are restricted.
    check_open_files()
}

/// Confines this process, which must have one thread, as a sandbox for code it is about to
/// run (the isolation crate's helper, before it loads a library): no file opened for writing,
/// made or removed anywhere, no process outside the sandbox traced (its memory read or written
/// through `/proc/<pid>/mem` included), and, where the kernel offers those scopes (Landlock
/// ABI 6), none signalled or reached through an abstract socket; with the seccomp filter of
/// [`confine_process`]. Threads and programs it starts inherit all of it.
pub fn sandbox_this_process() -> Result<(), PlatformError> {
    let failed = |what: &str, e: std::io::Error| PlatformError::io(format!("sandboxing this process: {what}"), e);
    let abi = landlock::abi_version().map_err(|e| PlatformError::Unconfinable {
        why: format!("the kernel offers no Landlock ({e})"),
        fix: "use Linux 5.13 or later with Landlock enabled (`lsm=landlock,…` on the kernel command line)",
    })?;
    let scoped = if abi >= 6 { landlock::SCOPE_SIGNAL | landlock::SCOPE_ABSTRACT_UNIX_SOCKET } else { 0 };
    let ruleset = Ruleset::new(landlock::writing_rights(abi), scoped).map_err(|e| failed("creating the ruleset", e))?;
    landlock::restrict_single_thread(ruleset).map_err(|e| failed("restricting the thread", e))
}

/// Makes every thread of the process [`UNPRIVILEGED`], with no supplementary groups and, as
/// the kernel then clears them, no capabilities: whatever it asks of the system from then on,
/// any user could. Physical addresses of DMA memory allocated later are read through a
/// pagemap opened before (`Pagemap::own`).
fn give_up_root() -> Result<(), PlatformError> {
    crate::pagemap::Pagemap::own()?;
    let id = UNPRIVILEGED;
    // SAFETY: the three calls take integers (and no list for setgroups); glibc applies each
    // to every thread of the process before it returns.
    let refused = unsafe {
        libc::setgroups(0, std::ptr::null()) != 0
            || libc::setresgid(id, id, id) != 0
            || libc::setresuid(id, id, id) != 0
    };
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).unwrap_or("");
    let none = |name: &str| !field(name).is_empty() && field(name).bytes().all(|b| b == b'0');
    if refused || !none("CapEff:") || !none("CapPrm:") {
        return Err(PlatformError::Unconfinable {
            why: format!(
                "could not give up root ({}; capabilities now {})",
                std::io::Error::last_os_error(),
                field("CapEff:")
            ),
            fix: "run the driver as root: it gives root up itself once its devices are open",
        });
    }
    GAVE_UP_ROOT.store(true, Ordering::SeqCst);
    Ok(())
}

/// Restricts every thread; with `shield_keeper`, also keeps them, and every program they
/// start, from signalling a process outside the restriction, such as the keeper.
fn restrict(shield_keeper: bool) -> Result<(), PlatformError> {
    let abi = landlock::abi_version().map_err(|e| PlatformError::Unconfinable {
        why: format!("the kernel offers no Landlock ({e})"),
        fix: "use Linux 5.13 or later with Landlock enabled (`lsm=landlock,…` on the kernel command line)",
    })?;
    let mut scoped = 0;
    if shield_keeper {
        let errata = landlock::errata().unwrap_or(0);
        if abi < 6 || errata & landlock::ERRATUM_THREADS_SIGNAL == 0 {
            return Err(PlatformError::Unconfinable {
                why: format!(
                    "the kernel's Landlock (ABI {abi}, errata {errata:#x}) cannot keep the driver from signalling the \
                     keeper of its queues"
                ),
                fix: "use Linux 6.15 or later (Landlock ABI 6 with erratum 2)",
            });
        }
        scoped = landlock::SCOPE_SIGNAL;
    }
    let write = WRITE_FILE | if abi >= 3 { TRUNCATE } else { 0 };
    let failed = |what: &str, e: std::io::Error| PlatformError::io(format!("confining the process: {what}"), e);
    let ruleset =
        Ruleset::new(write | MAKE_CHAR | MAKE_BLOCK, scoped).map_err(|e| failed("creating the ruleset", e))?;
    let mounts = mount_points().map_err(|e| failed("reading /proc/self/mountinfo", e))?;
    for path in writable_paths(&mounts) {
        if let Some(fd) = open_path(&path) {
            ruleset.allow(&fd, write).map_err(|e| failed(&format!("allowing {}", path.display()), e))?;
        }
    }
    landlock::restrict_every_thread(ruleset).map_err(|e| failed("restricting every thread", e))
}

/// A mount point and its file-system type, the visible one last (mountinfo lists overmounts
/// after what they cover).
fn mount_points() -> std::io::Result<Vec<(PathBuf, String)>> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let point = left.split(' ').nth(4)?;
            let fstype = right.split(' ').next()?;
            Some((PathBuf::from(crate::fs::unescape_mount_path(point)), fstype.to_string()))
        })
        .collect())
}

fn fstype_of<'m>(mounts: &'m [(PathBuf, String)], path: &Path) -> &'m str {
    let mut best: Option<&(PathBuf, String)> = None;
    for m in mounts.iter().filter(|(p, _)| path.starts_with(p)) {
        if best.is_none_or(|b| m.0.components().count() >= b.0.components().count()) {
            best = Some(m);
        }
    }
    best.map_or("", |(_, t)| t.as_str())
}

fn is_storage(fstype: &str) -> bool {
    STORAGE_TYPES.contains(&fstype) || fstype.starts_with("fuse.")
}

/// The paths beneath which writing stays allowed: everything on storage file systems except
/// where another file system is mounted below, and the harmless entries of `/dev`.
pub fn writable_paths(mounts: &[(PathBuf, String)]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    grant(Path::new("/"), mounts, &mut out);
    out
}

fn grant(path: &Path, mounts: &[(PathBuf, String)], out: &mut Vec<PathBuf>) {
    let below: Vec<&PathBuf> = mounts.iter().map(|(p, _)| p).filter(|p| p.starts_with(path) && *p != path).collect();
    if path == Path::new("/dev") {
        out.extend(DEV_ENTRIES.iter().map(|e| path.join(e)).filter(|p| !below.contains(&p)));
        for m in below {
            let fstype = fstype_of(mounts, m);
            if is_storage(fstype) && fstype != "devtmpfs" {
                grant(m, mounts, out);
            }
        }
        return;
    }
    if !is_storage(fstype_of(mounts, path)) {
        return;
    }
    // Rules cover what lies beneath across mounts, so a tree whose mounts are all storage
    // (nicsim's FUSE file system under /dev/shm) is granted whole, new entries included.
    if below.iter().all(|m| is_storage(fstype_of(mounts, m))) {
        out.push(path.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else { return };
    for entry in entries.flatten() {
        let (p, symlink) = (entry.path(), entry.file_type().is_ok_and(|t| t.is_symlink()));
        if below.iter().any(|m| m.starts_with(&p)) {
            grant(&p, mounts, out);
        } else if !symlink {
            out.push(p);
        }
    }
}

/// An O_PATH descriptor of `path` itself (never what a symbolic link there points to), or
/// None if it went away meanwhile.
fn open_path(path: &Path) -> Option<OwnedFd> {
    let file = OpenOptions::new().read(true).custom_flags(libc::O_PATH | libc::O_NOFOLLOW).open(path).ok()?;
    Some(file.into())
}

/// Refuses a file open for writing that the restriction would not have allowed to open:
/// it would go on working after.
fn check_open_files() -> Result<(), PlatformError> {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else { return Ok(()) };
    let mounts = mount_points().unwrap_or_default();
    for fd in fds.flatten() {
        let Some(n) = fd.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        if !open_for_writing(n) || crate::pci::is_claim(n) || crate::pci::is_io_bar(n) {
            continue;
        }
        let link = fd.path();
        let target = std::fs::read_link(&link).map(|t| t.display().to_string()).unwrap_or_default();
        let Ok(meta) = std::fs::metadata(&link) else { continue };
        let ft = meta.file_type();
        let allowed = if ft.is_char_device() || ft.is_block_device() {
            ft.is_char_device() && harmless_device(rustix::fs::major(meta.rdev()), rustix::fs::minor(meta.rdev()))
        } else if ft.is_fifo() || ft.is_socket() || !target.starts_with('/') {
            true // pipes, sockets, event and memfd descriptors
        } else {
            is_storage(fstype_of(&mounts, Path::new(&target)))
        };
        if !allowed {
            return Err(PlatformError::Unconfinable {
                why: format!("file descriptor {n} has {target} open for writing"),
                fix: "close it before the first queue starts",
            });
        }
    }
    Ok(())
}

/// Whether descriptor `fd` of this process was opened for writing, from its fdinfo flags.
fn open_for_writing(fd: i32) -> bool {
    let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")) else { return false };
    info.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| i32::from_str_radix(f.trim(), 8).ok())
        .is_some_and(|flags| flags & libc::O_ACCMODE != libc::O_RDONLY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writing_stays_allowed_beside_a_mount_of_another_kind_never_beneath_it() {
        let scratch = crate::fs::ScratchDir::new("platform-unit", "confine").unwrap();
        let s = scratch.path();
        for d in ["files", "proc", "shm", "shm/deep"] {
            std::fs::create_dir(s.join(d)).unwrap();
        }
        std::os::unix::fs::symlink("/proc", s.join("link")).unwrap();
        let mounts = vec![
            (s.to_path_buf(), "tmpfs".to_string()),
            (s.join("proc"), "proc".to_string()),
            (s.join("shm"), "sysfs".to_string()),
            (s.join("shm"), "tmpfs".to_string()), // mounted over the one before
        ];
        let mut out = Vec::new();
        grant(s, &mounts, &mut out);
        out.sort();
        assert_eq!(out, [s.join("files"), s.join("shm")], "not proc, not the symbolic link to it");
        assert_eq!(fstype_of(&mounts, &s.join("shm/deep")), "tmpfs");
        assert_eq!(fstype_of(&mounts, &s.join("proc/self/mem")), "proc");
    }

    /// Another nicsim's FUSE file system in /dev/shm made every scratch directory created
    /// there after confinement read-only: a storage tree whose mounts are all storage is
    /// granted whole, so that what is created in it later stays writable.
    #[test]
    fn a_storage_tree_with_only_storage_mounts_beneath_is_granted_whole() {
        let scratch = crate::fs::ScratchDir::new("platform-unit", "confine-whole").unwrap();
        let s = scratch.path();
        std::fs::create_dir_all(s.join("shm/nicsim/io-bars")).unwrap();
        let mounts = vec![
            (s.to_path_buf(), "tmpfs".to_string()),
            (s.join("shm"), "tmpfs".to_string()),
            (s.join("shm/nicsim/io-bars"), "fuse.nicsim".to_string()),
        ];
        let mut out = Vec::new();
        grant(s, &mounts, &mut out);
        assert_eq!(out, [s.to_path_buf()]);
        let mounts = [mounts, vec![(s.join("shm/nicsim/proc"), "proc".to_string())]].concat();
        std::fs::create_dir(s.join("shm/nicsim/proc")).unwrap();
        let mut out = Vec::new();
        grant(s, &mounts, &mut out);
        out.sort();
        assert_eq!(out, [s.join("shm/nicsim/io-bars")], "around a mount that is not storage, never beneath it");
    }

    #[test]
    fn only_harmless_devices_may_stay_open_for_writing() {
        assert!(harmless_device(1, 3) && harmless_device(136, 0) && harmless_device(5, 0));
        assert!(
            !harmless_device(1, 1) && !harmless_device(1, 4) && !harmless_device(1, 11) && !harmless_device(10, 232)
        );
    }
}
