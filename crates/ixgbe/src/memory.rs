//! DMA memory for rings, head write-back slots and packet buffers.

use crate::device::DriverError;
use invariants::DeviceMemory;
use platform::hugepage::HUGEPAGE;
use platform::{DmaBacking, DmaMemory};
use std::marker::PhantomData;

/// The bus address of a piece of DMA memory the driver owns, valid while that memory is
/// borrowed (`'mem`): the only kind of address [`crate::Device`] gives the device's
/// registers. It has no public constructor; [`DmaBlock::device_range`] makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaAddr<'mem> {
    phys: u64,
    _memory: PhantomData<&'mem DmaBlock>,
}

impl DmaAddr<'_> {
    /// The address, to read (e.g. in a message); it cannot be turned back into a `DmaAddr`.
    pub fn get(self) -> u64 {
        self.phys
    }
}

/// A block of hugepage memory (a file on hugetlbfs) that the driver gives the device.
pub struct DmaBlock {
    mem: DmaMemory,
}

impl DmaBlock {
    /// At least `len` bytes, zeroed, in 2 MiB hugepages.
    pub fn allocate(len: usize) -> Result<DmaBlock, DriverError> {
        Ok(DmaBlock { mem: DmaMemory::allocate(len, DmaBacking::HugetlbfsFile(None))? })
    }

    /// Volatile access to the block, for as long as it is borrowed. Crate-private: whoever
    /// writes descriptors decides where the device reads and writes.
    pub(crate) fn memory(&self) -> DeviceMemory<'_> {
        DeviceMemory::from_region(self.mem.region())
    }

    /// `[offset, offset + len)` as one piece of memory for the device, its physical address:
    /// inside the block and within one hugepage, or an error naming `what` (a buffer, a ring)
    /// that would straddle.
    pub fn device_range(&self, offset: usize, len: usize, what: &str) -> Result<DmaAddr<'_>, DriverError> {
        let inside = len > 0 && offset.checked_add(len).is_some_and(|end| end <= self.mem.len());
        // Within one page, whether or not the next page happens to follow it physically.
        if !inside || offset / HUGEPAGE != (offset + len - 1) / HUGEPAGE {
            return Err(DriverError::Invalid(format!(
                "{what} at offset {offset:#x} ({len} bytes) is outside its DMA block or crosses a hugepage \
                 boundary: the device needs physically contiguous memory, so place it within one 2 MiB page"
            )));
        }
        Ok(DmaAddr { phys: self.mem.phys(offset), _memory: PhantomData })
    }
}

/// Places objects in a block so that none crosses a hugepage boundary (only memory within a
/// page is physically contiguous).
#[derive(Debug, Default)]
pub struct Layout {
    end: usize,
}

impl Layout {
    /// The offset of a new object of `size` bytes aligned to `align` (a power of two).
    pub fn place(&mut self, size: usize, align: usize) -> usize {
        assert!(size <= HUGEPAGE, "objects larger than a hugepage are not contiguous");
        let mut at = self.end.next_multiple_of(align);
        if at / HUGEPAGE != (at + size - 1) / HUGEPAGE {
            at = at.next_multiple_of(HUGEPAGE);
        }
        self.end = at + size;
        at
    }

    /// Bytes needed so far.
    pub fn size(&self) -> usize {
        self.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_never_cross_a_hugepage() {
        let mut l = Layout::default();
        assert_eq!(l.place(100, 128), 0);
        assert_eq!(l.place(16, 64), 128);
        let big = l.place(HUGEPAGE - 100, 4096);
        assert_eq!(big, HUGEPAGE, "moved to the next page rather than straddle one");
        assert_eq!(l.place(8, 8), 2 * HUGEPAGE - 100 + 4);
        assert_eq!(l.size(), 2 * HUGEPAGE - 100 + 12);
    }
}
