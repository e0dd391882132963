//! DMA memory for rings, head write-back slots and packet buffers.

use crate::device::DriverError;
use invariants::{DeviceMemory, DeviceValue, VolatileArray, VolatilePtr};
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

/// A device queue's hold on the memory it was given; see [`DmaBlock`]. A queue of another
/// device crate ([`RingArea::lease`]) keeps it until its device confirmed the queue stopped.
pub struct DmaLease {
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

/// Memory for the rings of a device other than the 82599 (`crates/virtio`), each in an area of
/// its own, and a pool of buffers, in one block. A queue made on it holds a lease on the block
/// ([`RingArea::lease`]): the buffers it holds are in the same block, so they stay mapped as long
/// as the device may use them, and a leaked queue keeps the memory for ever (see [`DmaBlock`]).
pub struct RingsAndPool {
    block: DmaBlock,
    areas: Vec<(usize, usize)>,
    buffers: usize,
    pool: usize,
}

impl RingsAndPool {
    /// Areas of `(size, alignment)` each, and a pool of `pool` buffers.
    pub fn allocate(areas: &[(usize, usize)], pool: usize) -> Result<Self, DriverError> {
        let mut l = Layout::default();
        let areas: Vec<(usize, usize)> = areas.iter().map(|&(size, align)| (l.place(size, align), size)).collect();
        let buffers = l.place(crate::BUFFER_SIZE, crate::BUFFER_SIZE);
        let end = buffers + pool * crate::BUFFER_SIZE;
        Ok(RingsAndPool { block: DmaBlock::allocate(end)?, areas, buffers, pool })
    }

    /// Every area, in the order allocated, and the pool; refused while a queue made from
    /// earlier parts was leaked. Once per exclusive borrow, as [`crate::queues::QueueMemory::parts`].
    pub fn parts(&mut self) -> Result<(Vec<RingArea<'_>>, crate::queues::BufferPool<'_>), DriverError> {
        self.block.check_not_given()?;
        let block = &self.block;
        let areas = self.areas.iter().map(|&(offset, len)| RingArea { block, offset, len }).collect();
        Ok((areas, crate::queues::BufferPool::new(block, self.buffers, self.pool)?))
    }
}

/// One area of a [`RingsAndPool`]: volatile access to its bytes, their bus addresses, and
/// leases on the block. Offsets are within the area; what lies outside it is out of reach.
pub struct RingArea<'a> {
    block: &'a DmaBlock,
    offset: usize,
    len: usize,
}

impl<'a> RingArea<'a> {
    fn inside(&self, at: usize, len: usize) -> Option<usize> {
        (at.checked_add(len)? <= self.len).then_some(self.offset + at)
    }

    /// The `T` at `at`; `None` outside the area or misaligned.
    pub fn ptr<T: DeviceValue>(&self, at: usize) -> Option<VolatilePtr<'a, T>> {
        self.block.memory().ptr(self.inside(at, std::mem::size_of::<T>())?)
    }

    /// `N` consecutive `T`s at `at`; `None` outside the area or misaligned.
    pub fn array<T: DeviceValue, const N: usize>(&self, at: usize) -> Option<VolatileArray<'a, T, N>> {
        self.block.memory().array(self.inside(at, N * std::mem::size_of::<T>())?)
    }

    /// The bus address of `[at, at + len)`, which must lie in the area and in one hugepage.
    pub fn device_address(&self, at: usize, len: usize, what: &str) -> Result<DmaAddr<'a>, DriverError> {
        let offset = self.inside(at, len).ok_or_else(|| DriverError::Invalid(format!("{what} outside its area")))?;
        self.block.device_range(offset, len, what)
    }

    /// A hold on the block for a device queue about to be given this area.
    pub fn lease(&self) -> DmaLease {
        self.block.lease()
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
