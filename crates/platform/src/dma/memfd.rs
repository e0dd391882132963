//! The file behind a region: a hugetlb memfd, sized and sealed before anything maps it.

use crate::error::PlatformError;
use rustix::fs::{memfd_create, MemfdFlags, SealFlags};
use std::fs::File;

pub(super) use crate::hugepage::hugepage_error;

/// A memfd of `len` bytes of 2 MiB hugepages that no descriptor can shrink, grow or unseal:
/// `ftruncate`, `O_TRUNC` and a write past the end fail on every path to it, this process's
/// and any other's. Hole punching, which the seals on a mapped hugetlb file cannot refuse, the
/// confinement refuses (`crate::landlock`).
pub(super) fn sealed_hugepages(len: usize) -> Result<File, PlatformError> {
    let flags = MemfdFlags::CLOEXEC | MemfdFlags::HUGETLB | MemfdFlags::HUGE_2MB | MemfdFlags::ALLOW_SEALING;
    let file = File::from(memfd_create(c"safenic-dma", flags).map_err(|e| hugepage_error(e.into(), len))?);
    file.set_len(len as u64).map_err(|e| hugepage_error(e, len))?;
    rustix::fs::fcntl_add_seals(&file, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
        .map_err(|e| PlatformError::io("sealing DMA memory", e.into()))?;
    // Another thread could have reopened the memfd through /proc/self/fd and resized it
    // before the seals: what is mapped is what the file holds now, checked once it cannot change.
    let size = file.metadata().map_err(|e| PlatformError::io("inspecting DMA memory", e))?.len();
    if size != len as u64 {
        return Err(PlatformError::io(
            "sealing DMA memory",
            std::io::Error::other(format!("its file was resized to {size} bytes before it was sealed")),
        ));
    }
    Ok(file)
}
