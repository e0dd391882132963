//! File-system facts (hugetlbfs mounts, whether a file lives on one) and scratch directories.
//!
//! # Soundness
//! Reads of file-system facts, and scratch directories made and removed with `std::fs`: nothing
//! here reaches memory, and nothing a safe caller could not do with `std` alone.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// `HUGETLBFS_MAGIC` from linux/magic.h.
const HUGETLBFS_MAGIC: i64 = 0x9584_58f6;

/// Whether `file` lives on hugetlbfs (also true for anonymous and memfd hugetlb mappings,
/// which the kernel backs with an internal hugetlbfs mount).
pub fn is_hugetlbfs(file: &File) -> io::Result<bool> {
    let st = rustix::fs::fstatfs(file)?;
    #[allow(clippy::useless_conversion)] // f_type is i64 on x86_64 but not on every target
    Ok(i64::from(st.f_type) == HUGETLBFS_MAGIC)
}

/// `SYSFS_MAGIC` from linux/magic.h.
const SYSFS_MAGIC: i64 = 0x6265_6572;

/// Whether `file` lives on sysfs (where a PCI function's BARs are files).
pub fn is_sysfs(file: &File) -> io::Result<bool> {
    let st = rustix::fs::fstatfs(file)?;
    #[allow(clippy::useless_conversion)] // f_type is i64 on x86_64 but not on every target
    Ok(i64::from(st.f_type) == SYSFS_MAGIC)
}

/// Whether `path` (followed if it is a symbolic link) lives on sysfs.
pub fn path_is_sysfs(path: &Path) -> bool {
    #[allow(clippy::useless_conversion)] // f_type is i64 on x86_64 but not on every target
    rustix::fs::statfs(path).is_ok_and(|st| i64::from(st.f_type) == SYSFS_MAGIC)
}

/// Mount points of hugetlbfs file systems with 2 MiB pages (the default size), from /proc/mounts.
pub fn hugetlbfs_mounts() -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/mounts") else { return Vec::new() };
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (_src, dir, fstype, opts) = (f.next()?, f.next()?, f.next()?, f.next().unwrap_or(""));
            let two_mb = !opts.split(',').any(|o| o.starts_with("pagesize=") && o != "pagesize=2M");
            (fstype == "hugetlbfs" && two_mb).then(|| PathBuf::from(unescape_mount_path(dir)))
        })
        .collect()
}

/// /proc/mounts escapes space, tab, newline and backslash as octal (`\040`).
pub(crate) fn unescape_mount_path(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A directory on tmpfs (`/dev/shm`) for one harness run: a nicsim root, captures, profiles.
/// It is removed with everything in it when dropped, also while a panic unwinds. Directories
/// of earlier runs whose process is gone (killed before it could clean up) are removed when a
/// new one is made with the same prefix.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// `/dev/shm/<prefix>-<pid>-<name>`, new and empty.
    pub fn new(prefix: &str, name: &str) -> io::Result<ScratchDir> {
        let shm = std::path::Path::new("/dev/shm");
        remove_stale(shm, prefix);
        let path = shm.join(format!("{prefix}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)?;
        Ok(ScratchDir { path })
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Removes `<dir>/<prefix>-<pid>-*` entries whose process no longer exists.
fn remove_stale(dir: &std::path::Path, prefix: &str) {
    for path in left_by_dead_processes(dir, prefix) {
        let _ = std::fs::remove_dir_all(&path);
        let _ = std::fs::remove_file(&path);
    }
}

/// The entries `<dir>/<prefix>-<pid>` and `<dir>/<prefix>-<pid>-…` whose process no longer
/// exists: what a process that was killed left behind.
pub fn left_by_dead_processes(dir: &std::path::Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(prefix)?.strip_prefix('-')) else {
                return false;
            };
            let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
            pid.is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
        })
        .map(|e| e.path())
        .collect()
}

/// Creates a named pipe at `path` (mode 0600), or leaves one that is already there.
pub fn make_fifo(path: &std::path::Path) -> io::Result<()> {
    use rustix::fs::{FileType, Mode, CWD};
    match rustix::fs::mknodat(CWD, path, FileType::Fifo, Mode::RUSR | Mode::WUSR, 0) {
        Err(rustix::io::Errno::EXIST) if std::fs::metadata(path)?.file_type().is_fifo() => Ok(()),
        r => r.map_err(io::Error::from),
    }
}

/// Takes an exclusive `flock` on `file` if no other open file holds one: `true` if taken. The
/// lock goes with the last descriptor of this open file.
pub fn try_lock_exclusive(file: &std::fs::File) -> std::io::Result<bool> {
    match rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes_octal() {
        assert_eq!(unescape_mount_path("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape_mount_path("/plain"), "/plain");
    }

    #[test]
    fn scratch_dirs_go_with_their_owner_and_stale_ones_with_the_next() {
        let d = ScratchDir::new("platform-test", "a").unwrap();
        std::fs::write(d.path().join("f"), b"x").unwrap();
        let path = d.path().to_path_buf();
        drop(d);
        assert!(!path.exists());
        // A directory left by a process that no longer exists (pid 0 never names one).
        let stale = std::path::Path::new("/dev/shm/platform-test-0-left");
        std::fs::create_dir_all(stale.join("sub")).unwrap();
        let d = ScratchDir::new("platform-test", "b").unwrap();
        assert!(!stale.exists(), "removed by the next one");
        assert!(d.path().is_dir());
    }

    #[test]
    fn tmpfs_is_not_hugetlbfs() {
        let f = File::open("/proc/self/status").unwrap();
        assert!(!is_hugetlbfs(&f).unwrap());
    }
}
