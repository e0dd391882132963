//! File-system facts: hugetlbfs mounts and whether a file lives on one.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

/// `HUGETLBFS_MAGIC` from linux/magic.h.
const HUGETLBFS_MAGIC: i64 = 0x9584_58f6;

/// Whether `file` lives on hugetlbfs (also true for anonymous and memfd hugetlb mappings,
/// which the kernel backs with an internal hugetlbfs mount).
pub fn is_hugetlbfs(file: &File) -> io::Result<bool> {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: `st` is a writable buffer of exactly `struct statfs`; the fd is open for the
    // duration of the call.
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatfs returned 0, so it initialised the whole struct (and it was zeroed anyway).
    let st = unsafe { st.assume_init() };
    #[allow(clippy::useless_conversion)] // f_type is i64 on x86_64 but not on every target
    Ok(i64::from(st.f_type) == HUGETLBFS_MAGIC)
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
fn unescape_mount_path(s: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes_octal() {
        assert_eq!(unescape_mount_path("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape_mount_path("/plain"), "/plain");
    }

    #[test]
    fn tmpfs_is_not_hugetlbfs() {
        let f = File::open("/proc/self/status").unwrap();
        assert!(!is_hugetlbfs(&f).unwrap());
    }
}
