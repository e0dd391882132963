//! Virtual-to-physical translation through `/proc/<pid>/pagemap`.
//!
//! Each 8-byte entry describes one 4 KiB virtual page: bit 63 = present, bits 54:0 = page
//! frame number. Without CAP_SYS_ADMIN the kernel reports PFN 0 for present pages.
//!
//! # Soundness
//! Physical addresses are facts, read from the kernel: nothing here maps or writes memory, and
//! an address is of no use without a device's registers or rings, which only `crate::i82599`
//! writes, from its own typed addresses.

use crate::error::PlatformError;
use std::fs::File;
use std::os::unix::fs::FileExt;

const BASE_PAGE: u64 = 4096;
const PRESENT: u64 = 1 << 63;
const PFN_MASK: u64 = (1 << 55) - 1;

/// Reads `/proc/<pid>/pagemap` (or this process's when `pid` is `None`).
pub struct Pagemap {
    file: File,
}

impl Pagemap {
    /// Opens the pagemap of `pid`, or of this process.
    pub fn open(pid: Option<u32>) -> Result<Self, PlatformError> {
        let path = match pid {
            Some(p) => format!("/proc/{p}/pagemap"),
            None => "/proc/self/pagemap".to_string(),
        };
        let file = File::open(&path).map_err(|e| PlatformError::io(format!("opening {path}"), e))?;
        Ok(Pagemap { file })
    }

    /// This process's pagemap, opened once and kept: a process that gave up root
    /// (`crate::confine`) still reads physical addresses through it, since the kernel decides
    /// that when the file is opened.
    pub fn own() -> Result<&'static Pagemap, PlatformError> {
        static OWN: std::sync::OnceLock<Pagemap> = std::sync::OnceLock::new();
        if let Some(p) = OWN.get() {
            return Ok(p);
        }
        let opened = Pagemap::open(None)?;
        Ok(OWN.get_or_init(|| opened))
    }

    /// The physical address of virtual address `vaddr`, or `None` when the page is not present.
    pub fn translate(&self, vaddr: usize) -> Result<Option<u64>, PlatformError> {
        let vaddr = vaddr as u64;
        let mut entry = [0u8; 8];
        self.file
            .read_exact_at(&mut entry, vaddr / BASE_PAGE * 8)
            .map_err(|e| PlatformError::io("reading pagemap", e))?;
        let entry = u64::from_le_bytes(entry);
        if entry & PRESENT == 0 {
            return Ok(None);
        }
        let pfn = entry & PFN_MASK;
        if pfn == 0 {
            return Err(PlatformError::NotRoot { what: "reading physical addresses from /proc/self/pagemap" });
        }
        Ok(Some(pfn * BASE_PAGE + vaddr % BASE_PAGE))
    }
}
