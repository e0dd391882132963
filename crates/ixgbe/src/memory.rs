//! DMA memory for rings, head write-back slots and packet buffers.

use crate::device::DriverError;
use invariants::DeviceMemory;
use platform::hugepage::HUGEPAGE;
use platform::{DmaBacking, DmaMemory};
use std::cell::Cell;
use std::marker::PhantomData;
use std::rc::Rc;

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
///
/// Its mapping is shared with a [`DmaLease`] per device queue that uses it: dropping the block
/// unmaps the memory only once every lease is gone, and a lease goes only when its queue was
/// confirmed stopped. A queue that is leaked (`mem::forget`, an `Rc` cycle, `Box::leak`) leaks
/// its lease, so the memory stays mapped for ever and the block refuses to hand it out again
/// ([`DmaBlock::check_not_given`]): a leak may leak memory, never free it under the device.
pub struct DmaBlock {
    shared: Rc<Shared>,
}

struct Shared {
    mem: DmaMemory,
    /// Device queues enabled on this memory and not confirmed stopped.
    leases: Cell<usize>,
}

/// A device queue's hold on the memory it was given; see [`DmaBlock`].
pub(crate) struct DmaLease {
    shared: Rc<Shared>,
}

impl DmaLease {
    /// The file behind the memory, for the queue's keeper (hugetlbfs memory always has one).
    pub(crate) fn file(&self) -> Option<&std::fs::File> {
        self.shared.mem.file()
    }
}

impl Drop for DmaLease {
    fn drop(&mut self) {
        self.shared.leases.set(self.shared.leases.get() - 1);
    }
}

impl DmaBlock {
    /// At least `len` bytes, zeroed, in 2 MiB hugepages.
    pub fn allocate(len: usize) -> Result<DmaBlock, DriverError> {
        let mem = DmaMemory::allocate(len, DmaBacking::HugetlbfsFile(None))?;
        Ok(DmaBlock { shared: Rc::new(Shared { mem, leases: Cell::new(0) }) })
    }

    /// Volatile access to the block, for as long as it is borrowed. Crate-private: whoever
    /// writes descriptors decides where the device reads and writes.
    pub(crate) fn memory(&self) -> DeviceMemory<'_> {
        DeviceMemory::from_region(self.shared.mem.region())
    }

    /// A hold on this memory for a device queue about to be enabled on it.
    pub(crate) fn lease(&self) -> DmaLease {
        self.shared.leases.set(self.shared.leases.get() + 1);
        DmaLease { shared: Rc::clone(&self.shared) }
    }

    /// Refuses when a device queue that was never confirmed stopped still uses this memory:
    /// only a leaked queue (or one whose device would not stop) outlives its borrow of it.
    pub(crate) fn check_not_given(&self) -> Result<(), DriverError> {
        match self.shared.leases.get() {
            0 => Ok(()),
            n => Err(DriverError::Invalid(format!(
                "this DMA memory is still given to the device by {n} queue(s) that were never stopped (leaked with \
                 mem::forget, an Rc cycle or Box::leak, or a device that would not stop): it cannot be handed out \
                 again; drop queues and agents instead of leaking them, and allocate new memory"
            ))),
        }
    }

    /// `[offset, offset + len)` as one piece of memory for the device, its physical address:
    /// inside the block and within one hugepage, or an error naming `what` (a buffer, a ring)
    /// that would straddle.
    pub fn device_range(&self, offset: usize, len: usize, what: &str) -> Result<DmaAddr<'_>, DriverError> {
        let mem = &self.shared.mem;
        let inside = len > 0 && offset.checked_add(len).is_some_and(|end| end <= mem.len());
        // Within one page, whether or not the next page happens to follow it physically.
        if !inside || offset / HUGEPAGE != (offset + len - 1) / HUGEPAGE {
            return Err(DriverError::Invalid(format!(
                "{what} at offset {offset:#x} ({len} bytes) is outside its DMA block or crosses a hugepage \
                 boundary: the device needs physically contiguous memory, so place it within one 2 MiB page"
            )));
        }
        Ok(DmaAddr { phys: mem.phys(offset), _memory: PhantomData })
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
