//! DMA memory: 2 MiB hugepages with known physical addresses.
//!
//! A hugepage is physically contiguous, never swapped and never moved, so its physical address
//! (from pagemap) can be given to a device. Two backings are offered, matching the two driver
//! families we follow: a file on a hugetlbfs mount (ixy, DPDK) and an anonymous shared
//! hugetlb mapping (TinyNF). Both are shared mappings, which is what nicsim can resolve.
//!
//! # Soundness
//! [`DmaMemory`] is memory for *simulated* devices (nicsim's own peers and tests): its bytes and
//! physical addresses are the caller's, accessed only through [`crate::MappedRegion`]'s checked
//! volatile accesses. No real device can be given it: a real device's registers and rings are
//! reached only through [`crate::i82599`], which takes addresses of [`crate::dma`] regions
//! alone, and a process that drives a real device opens no simulated one
//! ([`crate::PciFunction::open`]). A file of it truncated under its mapping makes an access raise
//! SIGBUS, which ends the process: no access reaches outside the mapping.

use crate::error::PlatformError;
use crate::mem::MappedRegion;
use crate::pagemap::Pagemap;
use rustix::fs::{memfd_create, MemfdFlags};
use std::fs::{File, OpenOptions};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// Size of one hugepage.
pub const HUGEPAGE: usize = 2 << 20;

/// Where DMA memory comes from.
#[derive(Debug, Clone)]
pub enum DmaBacking {
    /// A file on a hugetlbfs mount: the given directory, or the first 2 MiB mount found.
    HugetlbfsFile(Option<PathBuf>),
    /// `MAP_SHARED | MAP_ANONYMOUS | MAP_HUGETLB`.
    AnonymousHugetlb,
}

/// A block of hugepage memory and the physical address of each of its pages.
#[derive(Debug)]
pub struct DmaMemory {
    region: MappedRegion,
    /// The file behind the mapping, when this process can name it.
    file: Option<File>,
    page_phys: Vec<u64>,
}

impl DmaMemory {
    /// Allocates at least `len` bytes (rounded up to whole hugepages), faulted in and zeroed.
    pub fn allocate(len: usize, backing: DmaBacking) -> Result<Self, PlatformError> {
        let len = len.max(1).div_ceil(HUGEPAGE) * HUGEPAGE;
        let (region, file) = match backing {
            // A process that gave up root may create no file in a hugetlbfs mount, nor look up
            // an anonymous mapping's file: its memory is a hugetlb memfd, as anonymous.
            DmaBacking::AnonymousHugetlb | DmaBacking::HugetlbfsFile(None) if crate::confine::gave_up_root() => {
                let flags = MemfdFlags::CLOEXEC | MemfdFlags::HUGETLB | MemfdFlags::HUGE_2MB;
                let file = File::from(memfd_create(c"dma", flags).map_err(|e| hugepage_error(e.into(), len))?);
                let region = file
                    .set_len(len as u64)
                    .and_then(|()| MappedRegion::map_file(&file, 0, len, true))
                    .map_err(|e| hugepage_error(e, len))?;
                (region, Some(file))
            }
            DmaBacking::AnonymousHugetlb => {
                let region = MappedRegion::anonymous_hugetlb(len).map_err(|e| hugepage_error(e, len))?;
                let (start, end) = (region.virt_addr(), region.virt_addr() + len);
                let link = format!("/proc/self/map_files/{start:x}-{end:x}");
                (region, OpenOptions::new().read(true).write(true).open(link).ok())
            }
            DmaBacking::HugetlbfsFile(dir) => {
                let dir = match dir {
                    Some(d) => d,
                    None => {
                        crate::fs::hugetlbfs_mounts().into_iter().next().ok_or(PlatformError::HugetlbfsNotMounted)?
                    }
                };
                static COUNTER: AtomicU64 = AtomicU64::new(0);
                let name = format!("dma-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
                let path = dir.join(name);
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .map_err(|e| open_error(e, &path))?;
                // Anywhere else the pages are 4 KiB: `phys` would be wrong for all but the first
                // of each 2 MiB, and the memory neither contiguous nor pinned.
                if !crate::fs::is_hugetlbfs(&file).unwrap_or(false) {
                    let _ = std::fs::remove_file(&path);
                    return Err(PlatformError::NotHugetlbfs { dir });
                }
                // The mapping keeps the pages alive; the name is not needed once mapped.
                let mapped = file
                    .set_len(len as u64)
                    .and_then(|()| MappedRegion::map_file(&file, 0, len, true))
                    .map_err(|e| hugepage_error(e, len));
                let _ = std::fs::remove_file(&path);
                (mapped?, Some(file))
            }
        };
        // Touch every page so it is present in our page tables, then look its frame up.
        let pagemap = Pagemap::own()?;
        let mut page_phys = Vec::with_capacity(len / HUGEPAGE);
        for page in 0..len / HUGEPAGE {
            region.write_u64(page * HUGEPAGE, 0);
            let phys = pagemap.translate(region.virt_addr() + page * HUGEPAGE)?.ok_or_else(|| {
                PlatformError::io("hugepage not present after touching it", std::io::Error::other("pagemap"))
            })?;
            page_phys.push(phys);
        }
        Ok(DmaMemory { region, file, page_phys })
    }

    /// The mapping, for reading and writing what the device sees.
    pub fn region(&self) -> &MappedRegion {
        &self.region
    }

    /// The file behind the mapping (writable), to hand to the queues' keeper
    /// (`crate::keeper`); `None` for anonymous memory whose file this process could not look up
    /// (it lacked CAP_SYS_ADMIN when it was allocated).
    pub fn file(&self) -> Option<&File> {
        self.file.as_ref()
    }

    /// Length in bytes (a multiple of [`HUGEPAGE`]).
    pub fn len(&self) -> usize {
        self.region.len()
    }

    /// Never empty.
    pub fn is_empty(&self) -> bool {
        self.region.is_empty()
    }

    /// Physical address of byte `offset`. Panics if `offset` is outside the block.
    pub fn phys(&self, offset: usize) -> u64 {
        assert!(offset < self.len(), "offset {offset:#x} outside DMA block of {:#x} bytes", self.len());
        self.page_phys[offset / HUGEPAGE] + (offset % HUGEPAGE) as u64
    }

    /// Whether `[offset, offset + len)` is physically contiguous (within one hugepage, or
    /// spanning pages that happen to be adjacent).
    pub fn is_contiguous(&self, offset: usize, len: usize) -> bool {
        if len == 0 || !self.region.contains(offset, len) {
            return false;
        }
        let (first, last) = (offset / HUGEPAGE, (offset + len - 1) / HUGEPAGE);
        (first..last).all(|p| self.page_phys[p] + HUGEPAGE as u64 == self.page_phys[p + 1])
    }
}

pub(crate) fn hugepage_error(e: std::io::Error, len: usize) -> PlatformError {
    match e.raw_os_error() {
        Some(libc::ENOMEM) | Some(libc::ENOSPC) | Some(libc::EINVAL) => {
            PlatformError::NoHugepages { requested_bytes: len }
        }
        Some(libc::EPERM) | Some(libc::EACCES) => PlatformError::NotRoot { what: "allocating hugepages" },
        _ => PlatformError::io("allocating hugepage memory", e),
    }
}

fn open_error(e: std::io::Error, path: &std::path::Path) -> PlatformError {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => PlatformError::NotRoot { what: "creating a hugepage file" },
        _ => PlatformError::io(format!("creating {}", path.display()), e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dma_memory_is_refused_outside_hugetlbfs() {
        // On /dev/shm (tmpfs) allocation used to succeed, with `phys` wrong for 511 of 512
        // pages and `is_contiguous` saying true.
        let dir = PathBuf::from("/dev/shm");
        match DmaMemory::allocate(HUGEPAGE, DmaBacking::HugetlbfsFile(Some(dir))) {
            Err(e @ PlatformError::NotHugetlbfs { .. }) => assert!(e.to_string().contains("/dev/shm"), "{e}"),
            other => panic!("DMA memory on tmpfs must be refused: {other:?}"),
        }
        let left: Vec<_> = std::fs::read_dir("/dev/shm")
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("dma-{}-", std::process::id())))
            .collect();
        assert!(left.is_empty(), "the refused file is removed");
    }

    #[test]
    fn dma_memory_on_hugetlbfs_has_a_physical_address_per_page() {
        // Needs root and reserved hugepages (make test provides both).
        let mem = DmaMemory::allocate(2 * HUGEPAGE, DmaBacking::HugetlbfsFile(None)).unwrap();
        assert_eq!(mem.len(), 2 * HUGEPAGE);
        assert_eq!(mem.phys(HUGEPAGE - 1) - mem.phys(0), HUGEPAGE as u64 - 1, "one page is contiguous");
        assert!(mem.is_contiguous(0, HUGEPAGE));
        assert_eq!(mem.phys(0) % HUGEPAGE as u64, 0, "hugepages are aligned");
    }
}
