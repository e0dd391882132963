//! One mapping per page of a file, in a process that drives a real device.
//!
//! Two [`MappedRegion`]s over the same pages are two ways to one memory that no type ties
//! together: each is `!Sync`, yet two threads can use one each at once. Worse, root can open
//! `/proc/self/map_files/<range>` of a driver's DMA memory and map it again, and through that
//! second mapping rewrite the descriptor rings that the driver's types own, pointing a real
//! device's DMA anywhere. So every file-backed (and, where the process could reach it through
//! `map_files`, every anonymous shared) mapping made here is registered by the file's device,
//! inode and byte range, and a mapping that overlaps a live one is refused.
//!
//! The refusal starts when the process opens a real device (before `main`,
//! [`crate::before_main`]) or asks for it ([`refuse_second_mappings`]), and lasts until the
//! process ends.
//! Before then, and in processes that only drive nicsim's devices, a second mapping is allowed:
//! there it is the device itself (nicsim in the driver's process maps the driver's hugepages
//! and its BAR files), and nicsim checks every address a descriptor holds.

use crate::error::PlatformError;
use crate::mem::MappedRegion;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::sync::{Mutex, MutexGuard};

/// The pages of one file that a mapping covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileRange {
    dev: u64,
    ino: u64,
    start: u64,
    end: u64,
}

impl FileRange {
    /// `len` bytes of `file` from `offset`.
    pub(crate) fn of_file(file: &File, offset: u64, len: usize) -> io::Result<Self> {
        let m = file.metadata()?;
        Ok(FileRange { dev: m.dev(), ino: m.ino(), start: offset, end: offset.saturating_add(len as u64) })
    }

    fn overlaps(&self, other: &FileRange) -> bool {
        self.dev == other.dev && self.ino == other.ino && self.start < other.end && other.start < self.end
    }

    fn describe(&self) -> String {
        let (major, minor) = (rustix::fs::major(self.dev), rustix::fs::minor(self.dev));
        format!("bytes {:#x}..{:#x} of inode {} on device {major}:{minor}", self.start, self.end, self.ino)
    }
}

struct Registry {
    /// Whether a mapping that overlaps a live one is refused (for good, once set).
    refusing: bool,
    /// Live mappings by their first virtual address.
    live: Vec<(usize, FileRange)>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { refusing: false, live: Vec::new() });

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Maps `range` with `map` and registers the mapping, unless the process refuses second
/// mappings and a live one overlaps `range`. The check and the mapping happen under one lock,
/// so two threads cannot both pass the check for the same pages.
pub(crate) fn map(range: FileRange, map: impl FnOnce() -> io::Result<MappedRegion>) -> io::Result<MappedRegion> {
    let mut registry = registry();
    if registry.refusing {
        if let Some((_, live)) = registry.live.iter().find(|(_, live)| live.overlaps(&range)) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} is already mapped in this process ({}), which drives a real device: a second mapping \
                     would reach what the first one's owner guards; use the first mapping",
                    range.describe(),
                    live.describe()
                ),
            ));
        }
    }
    let region = map()?;
    registry.live.push((region.virt_addr(), range));
    Ok(region)
}

/// Registers a fresh anonymous shared mapping by the file the kernel backs it with, as
/// `/proc/self/map_files` would open it. A process that cannot look the link up (it lacks
/// CAP_SYS_ADMIN, or has no /proc) cannot open it either, and nothing is registered.
pub(crate) fn register_anonymous(region: &MappedRegion) {
    let (start, len) = (region.virt_addr(), region.len());
    let link = format!("/proc/self/map_files/{start:x}-{:x}", start + len);
    if let Ok(m) = std::fs::metadata(link) {
        let range = FileRange { dev: m.dev(), ino: m.ino(), start: 0, end: len as u64 };
        registry().live.push((start, range));
    }
}

/// Runs `f` while no mapping is made or unmapped through this crate, giving it a test of
/// whether the live mapping that starts at an address maps a range: what `f` finds stays true
/// until it returns (a fork in `f` gives the child exactly those mappings).
pub(crate) fn frozen<R>(f: impl FnOnce(&dyn Fn(usize, &FileRange) -> bool) -> R) -> R {
    let registry = registry();
    f(&|addr, range| registry.live.iter().any(|(start, live)| *start == addr && live == range))
}

/// Unmaps the mapping that starts at `addr` with `unmap` and forgets it, under the lock, so no
/// new mapping can take the address in between and be forgotten in its place.
pub(crate) fn unmap(addr: usize, unmap: impl FnOnce()) {
    let mut registry = registry();
    unmap();
    registry.live.retain(|(start, _)| *start != addr);
}

/// From now until the process ends, refuses a mapping of any page of a file that a live
/// mapping of this process already covers. Fails, and refuses nothing yet, if two live
/// mappings already overlap: drop one first. Opening a real device does this; a program that
/// drives only nicsim's devices may call it too (it can only make the process stricter).
///
/// # Soundness
/// It only makes the process stricter: mappings it refuses are never made.
pub fn refuse_second_mappings() -> Result<(), PlatformError> {
    let mut registry = registry();
    let live = &registry.live;
    for (i, (_, a)) in live.iter().enumerate() {
        if let Some((_, b)) = live[i + 1..].iter().find(|(_, b)| b.overlaps(a)) {
            return Err(PlatformError::MappedTwice { first: a.describe(), second: b.describe() });
        }
    }
    registry.refusing = true;
    Ok(())
}
