//! DMA memory that a device may be given, in typed areas.
//!
//! A [`DmaRegion`] is hugepage memory laid out once ([`DmaLayout`]) in areas of four kinds:
//! packet buffers, descriptor rings, head write-back slots and plain device memory. What safe
//! code may do with each is what no device can turn into an access outside the region:
//!
//! - a buffer's bytes are the caller's to read and write (a device only copies packets in and
//!   out of them), and its bus address is a [`BufAddr`], which safe code can read but never
//!   make: it always names [`BUFFER_SIZE`] bytes of a live region, within one hugepage;
//! - a descriptor ring's bytes are written only through a device's ring type
//!   ([`crate::i82599::LegacyRing`]), whose every slot holds a `BufAddr` from the moment it
//!   exists, so whatever tail a driver writes, the device finds only such addresses;
//! - a head slot is 4 bytes the device writes back and the driver reads;
//! - plain memory (a simulated virtio device's rings) hands out raw addresses, which no real
//!   device's registers or rings take.
//!
//! The memory is a hugetlb memfd sealed against shrinking, growing and further seals before it
//! is mapped, so no reopened descriptor (`/proc/self/fd`, `/proc/self/map_files`) can free its
//! pages; the confinement refuses hole punching (`crate::confine`). It is mapped once, its file
//! is handed to the queues' keeper where there is one (`crate::keeper`) and then closed, and a
//! region dropped while any device may still use DMA memory ([`DeviceHold`]) stays mapped
//! until none does ([`retention`]).
//!
//! # Soundness
//! Every address a device can be handed through this module is inside a region that is mapped
//! until no [`DeviceHold`] is left (and for ever if one is leaked), and inside the area it was
//! made for; volatile views hand out no Rust reference. A `BufAddr` or `HeadSlot` borrows its
//! region, so a ring can only be filled while every region it names is alive.

mod memfd;
pub mod retention;

use crate::error::PlatformError;
use crate::hugepage::HUGEPAGE;
use crate::mem::MappedRegion;
use invariants::{Bounded, DeviceMemory, VolatileArray, VolatilePtr};
use std::marker::PhantomData;

pub use retention::DeviceHold;

/// Bytes per packet buffer: what a descriptor's buffer may hold, and the receive buffer size
/// the 82599 is given [DS 8.2.3.8.7].
pub const BUFFER_SIZE: usize = 2048;
/// A packet buffer in DMA memory, as 8-byte words: the type makes its alignment known, so
/// constant byte ranges (the MAC rewrite) are written with word stores.
pub type PacketData = [u64; BUFFER_SIZE / 8];
/// A packet length, at most one buffer.
pub type PacketLength = Bounded<BUFFER_SIZE>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Buffers,
    Descriptors,
    Head,
    Plain,
}

#[derive(Debug, Clone, Copy)]
struct Area {
    kind: Kind,
    offset: usize,
    len: usize,
    /// A buffer area of frames ([`DmaLayout::frames`]): each buffer is the second half of its
    /// [`FRAME_SIZE`] bytes.
    framed: bool,
}

/// Bytes per frame of a framed buffer area ([`DmaLayout::frames`]): an AF_XDP UMEM chunk.
pub const FRAME_SIZE: usize = 4096;
/// Where a frame's buffer starts: the kernel writes a received packet [`FRAME_HEADROOM`] bytes
/// into the chunk it was given (its own headroom and the UMEM's), so the packet starts at the
/// buffer's first byte, as on the 82599, and never reaches past the buffer's end.
pub const FRAME_HEADROOM: usize = FRAME_SIZE - BUFFER_SIZE;

/// Where the areas of a region go, decided before it is allocated: none overlaps another, and
/// none but a buffer area crosses a hugepage boundary (only memory within a page is physically
/// contiguous).
#[derive(Debug, Clone, Default)]
pub struct DmaLayout {
    areas: Vec<Area>,
    end: usize,
}

/// `count` packet buffers of a [`DmaLayout`].
#[derive(Debug, Clone, Copy)]
pub struct BuffersArea(usize);
/// A descriptor ring of a [`DmaLayout`].
#[derive(Debug, Clone, Copy)]
pub struct DescriptorArea(usize);
/// A head write-back slot of a [`DmaLayout`].
#[derive(Debug, Clone, Copy)]
pub struct HeadArea(usize);
/// Plain device memory of a [`DmaLayout`].
#[derive(Debug, Clone, Copy)]
pub struct PlainArea(usize);

impl DmaLayout {
    pub fn new() -> Self {
        DmaLayout::default()
    }

    fn push(&mut self, kind: Kind, offset: usize, len: usize) -> usize {
        self.areas.push(Area { kind, offset, len, framed: false });
        self.end = offset + len;
        self.areas.len() - 1
    }

    /// The offset of `size` bytes aligned to `align`, moved to the next hugepage rather than
    /// straddle one.
    fn place(&self, size: usize, align: usize, what: &str) -> Result<usize, PlatformError> {
        if size == 0 || size > HUGEPAGE || !align.is_power_of_two() {
            return Err(PlatformError::Refused(format!(
                "{what} of {size} bytes aligned to {align}: an area holds 1 byte to 2 MiB, aligned to a power of two"
            )));
        }
        let mut at = self.end.next_multiple_of(align);
        if at / HUGEPAGE != (at + size - 1) / HUGEPAGE {
            at = at.next_multiple_of(HUGEPAGE);
        }
        Ok(at)
    }

    /// `count` buffers of [`BUFFER_SIZE`] bytes, each aligned to its size (so none crosses a
    /// hugepage).
    pub fn buffers(&mut self, count: usize) -> Result<BuffersArea, PlatformError> {
        let len = count
            .checked_mul(BUFFER_SIZE)
            .filter(|&l| l > 0)
            .ok_or_else(|| PlatformError::Refused(format!("{count} buffers: a buffer area holds at least one")))?;
        let at = self.end.next_multiple_of(BUFFER_SIZE);
        Ok(BuffersArea(self.push(Kind::Buffers, at, len)))
    }

    /// `count` buffers of [`BUFFER_SIZE`] bytes, each the second half of a [`FRAME_SIZE`]-byte
    /// frame aligned to its size, whose first half belongs to no buffer: memory an AF_XDP
    /// socket may be given as its UMEM (`crate::xdp`), where the kernel writes a packet at
    /// the buffer's first byte and may use the bytes before it.
    pub fn frames(&mut self, count: usize) -> Result<BuffersArea, PlatformError> {
        let len = count
            .checked_mul(FRAME_SIZE)
            .filter(|&l| l > 0)
            .ok_or_else(|| PlatformError::Refused(format!("{count} frames: a frame area holds at least one")))?;
        let at = self.end.next_multiple_of(FRAME_SIZE);
        let index = self.push(Kind::Buffers, at, len);
        self.areas[index].framed = true;
        Ok(BuffersArea(index))
    }

    /// A ring of `entries` 16-byte descriptors, 128-byte aligned [DS 8.2.3.8.1, 8.2.3.9.5]:
    /// `entries` a power of two from 8 to 4096.
    pub fn descriptor_ring(&mut self, entries: usize) -> Result<DescriptorArea, PlatformError> {
        if !entries.is_power_of_two() || !(8..=4096).contains(&entries) {
            return Err(PlatformError::Refused(format!(
                "a ring of {entries} descriptors: give a power of two from 8 to 4096"
            )));
        }
        let at = self.place(entries * 16, 128, "a descriptor ring")?;
        Ok(DescriptorArea(self.push(Kind::Descriptors, at, entries * 16)))
    }

    /// A head write-back slot, in a cache line of its own (16-byte aligned at least, as the
    /// 82599 requires [DS 7.2.3.5.2]).
    pub fn head_slot(&mut self) -> Result<HeadArea, PlatformError> {
        let at = self.place(64, 64, "a head slot")?;
        Ok(HeadArea(self.push(Kind::Head, at, 64)))
    }

    /// `bytes` of plain device memory aligned to `align`, within one hugepage.
    pub fn plain(&mut self, bytes: usize, align: usize) -> Result<PlainArea, PlatformError> {
        let at = self.place(bytes, align, "plain memory")?;
        Ok(PlainArea(self.push(Kind::Plain, at, bytes)))
    }

    /// Bytes needed so far.
    pub fn size(&self) -> usize {
        self.end
    }
}

/// The bus address of one packet buffer: [`BUFFER_SIZE`] bytes of a live [`DmaRegion`],
/// within one hugepage, borrowing the region. Only [`DmaRegion::buffers`] makes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufAddr<'r> {
    phys: u64,
    // Tied to the region's lifetime, not to the region: an address is a number, as free to
    // move between threads as the buffer it names.
    _region: PhantomData<fn() -> &'r DmaRegion>,
}

impl BufAddr<'_> {
    /// The address, to write into a simulated device's descriptor or to read; it cannot be
    /// turned back into a `BufAddr`.
    #[inline(always)]
    pub fn get(self) -> u64 {
        self.phys
    }
}

/// One packet buffer: its bytes and its bus address.
#[derive(Clone, Copy)]
pub struct DmaBuffer<'r> {
    pub data: VolatilePtr<'r, PacketData>,
    pub addr: BufAddr<'r>,
}

/// A head write-back slot: the value the device writes, and where.
#[derive(Clone, Copy)]
pub struct HeadSlot<'r> {
    value: VolatilePtr<'r, u32>,
    phys: u64,
}

impl<'r> HeadSlot<'r> {
    /// The slot, as the device writes it back (untrusted).
    #[inline(always)]
    pub fn value(&self) -> VolatilePtr<'r, u32> {
        self.value
    }

    pub(crate) fn phys(&self) -> u64 {
        self.phys
    }
}

/// Plain device memory of a region: volatile access to the area, and the bus addresses of its
/// bytes for a simulated device.
#[derive(Clone, Copy)]
pub struct PlainMemory<'r> {
    memory: DeviceMemory<'r>,
    phys: u64,
}

impl<'r> PlainMemory<'r> {
    /// The area's bytes; offsets are within the area.
    pub fn memory(&self) -> DeviceMemory<'r> {
        self.memory
    }

    /// The bus address of `[at, at + len)`, if it lies in the area.
    pub fn device_address(&self, at: usize, len: usize) -> Option<u64> {
        (len > 0 && at.checked_add(len)? <= self.memory.len()).then(|| self.phys + at as u64)
    }
}

/// Hugepage memory laid out in areas ([`DmaLayout`]), the only memory given to a device.
pub struct DmaRegion {
    /// Under VFIO, the region's IOVAs (the bus addresses a device is given); dropped with the
    /// mapping.
    iova: Option<crate::vfio::IovaMapping>,
    /// `Some` until `Drop` hands it to [`retention`].
    mapping: Option<MappedRegion>,
    page_phys: Vec<u64>,
    areas: Vec<Area>,
    kept: bool,
}

impl std::fmt::Debug for DmaRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DmaRegion").field("len", &self.len()).field("areas", &self.areas.len()).finish()
    }
}

impl DmaRegion {
    /// Allocates `layout`'s areas in 2 MiB hugepages, zeroed, sealed and mapped once.
    pub fn allocate(layout: &DmaLayout) -> Result<DmaRegion, PlatformError> {
        let len = layout.size().max(1).div_ceil(HUGEPAGE) * HUGEPAGE;
        let file = memfd::sealed_hugepages(len)?;
        let mapping = MappedRegion::map_file(&file, 0, len, true).map_err(|e| memfd::hugepage_error(e, len))?;
        let pages = len / HUGEPAGE;
        for page in 0..pages {
            mapping.write_u64(page * HUGEPAGE, 0);
        }
        // Under VFIO the bus address is an IOVA of the process's container; else physical.
        let iova = crate::vfio::map_dma(&mapping)?;
        let page_phys = match &iova {
            Some(m) => (0..pages).map(|p| m.iova + (p * HUGEPAGE) as u64).collect(),
            None => physical_pages(&mapping, pages)?,
        };
        // The keeper maps the file too, so the pages outlive this process's mapping.
        let kept = crate::keeper::keeps_queues();
        if kept {
            crate::keeper::hold_memory(&file)?;
        }
        retention::made(kept);
        Ok(DmaRegion { iova, mapping: Some(mapping), page_phys, areas: layout.areas.clone(), kept })
    }

    fn mapping(&self) -> &MappedRegion {
        self.mapping.as_ref().expect("mapped until dropped")
    }

    /// Length in bytes (whole hugepages).
    pub fn len(&self) -> usize {
        self.mapping().len()
    }

    /// Never empty.
    pub fn is_empty(&self) -> bool {
        false
    }

    fn area(&self, index: usize, kind: Kind) -> Result<Area, PlatformError> {
        self.areas.get(index).copied().filter(|a| a.kind == kind).ok_or_else(|| {
            PlatformError::Refused(format!(
                "area {index} of this region is not {kind:?}: use an area of the layout the region was allocated with"
            ))
        })
    }

    /// The bus address of byte `offset` (inside the region).
    fn phys(&self, offset: usize) -> u64 {
        self.page_phys[offset / HUGEPAGE] + (offset % HUGEPAGE) as u64
    }

    /// Every buffer of `area`, in order.
    pub fn buffers(&self, area: BuffersArea) -> Result<Vec<DmaBuffer<'_>>, PlatformError> {
        let a = self.area(area.0, Kind::Buffers)?;
        Ok((0..a.len / stride(a)).map(|i| self.buffer_of(a, i)).collect())
    }

    /// Whether every area of the region is a frame area ([`DmaLayout::frames`]): then the
    /// kernel may write anywhere in it (`crate::xdp`) and reach no ring and no other memory.
    pub(crate) fn only_frames(&self) -> bool {
        self.areas.iter().all(|a| a.kind == Kind::Buffers && a.framed)
    }

    /// The region's bytes, for the kernel to be given as a UMEM.
    pub(crate) fn whole(&self) -> &MappedRegion {
        self.mapping()
    }

    /// Buffer `index` of `area`.
    pub fn buffer(&self, area: BuffersArea, index: usize) -> Result<DmaBuffer<'_>, PlatformError> {
        let a = self.area(area.0, Kind::Buffers)?;
        if index >= a.len / stride(a) {
            return Err(PlatformError::Refused(format!(
                "buffer {index} of an area of {}: give an index below that",
                a.len / stride(a)
            )));
        }
        Ok(self.buffer_of(a, index))
    }

    fn buffer_of(&self, a: Area, i: usize) -> DmaBuffer<'_> {
        let at = i * stride(a) + if a.framed { FRAME_HEADROOM } else { 0 };
        let data = self.sub_memory(a).ptr::<PacketData>(at).expect("a buffer area holds whole buffers");
        DmaBuffer { data, addr: BufAddr { phys: self.phys(a.offset + at), _region: PhantomData } }
    }

    /// The bytes of every buffer of `area`, as one block (buffer `i` at `i * BUFFER_SIZE`);
    /// not for a frame area, whose buffers are not adjacent.
    pub fn buffer_bytes(&self, area: BuffersArea) -> Result<DeviceMemory<'_>, PlatformError> {
        let a = self.area(area.0, Kind::Buffers)?;
        if a.framed {
            return Err(PlatformError::Refused(
                "a frame area's buffers are not one block: use DmaRegion::buffers".into(),
            ));
        }
        Ok(self.sub_memory(a))
    }

    /// The head write-back slot of `area`.
    pub fn head_slot(&self, area: HeadArea) -> Result<HeadSlot<'_>, PlatformError> {
        let a = self.area(area.0, Kind::Head)?;
        let value = self.mapping().device_memory().ptr::<u32>(a.offset).expect("a head area holds a u32");
        Ok(HeadSlot { value, phys: self.phys(a.offset) })
    }

    /// The plain memory of `area`.
    pub fn plain(&self, area: PlainArea) -> Result<PlainMemory<'_>, PlatformError> {
        let a = self.area(area.0, Kind::Plain)?;
        Ok(PlainMemory { memory: self.sub_memory(a), phys: self.phys(a.offset) })
    }

    /// The descriptors of `area`, `N` of them, and their bus address: for a device's ring type.
    pub(crate) fn descriptors<const N: usize>(
        &self,
        area: DescriptorArea,
    ) -> Result<(VolatileArray<'_, [u64; 2], N>, u64), PlatformError> {
        let a = self.area(area.0, Kind::Descriptors)?;
        if a.len != N * 16 {
            return Err(PlatformError::Refused(format!(
                "a ring of {N} descriptors on an area laid out for {}: use the same size for both",
                a.len / 16
            )));
        }
        let ring = self.sub_memory(a).array::<[u64; 2], N>(0).expect("the area holds N descriptors");
        Ok((ring, self.phys(a.offset)))
    }

    fn sub_memory(&self, a: Area) -> DeviceMemory<'_> {
        let whole = self.mapping();
        // SAFETY: the area lies inside the mapping (the layout placed it below `size()`, and
        // the mapping has at least that many bytes); it is borrowed with `self`, which keeps
        // the mapping alive, and the mapping is only ever accessed with volatile operations.
        unsafe { DeviceMemory::from_raw_parts(whole.as_ptr().add(a.offset), a.len) }
    }
}

impl Drop for DmaRegion {
    fn drop(&mut self) {
        if let Some(mapping) = self.mapping.take() {
            retention::dropped(retention::Retained { _iova: self.iova.take(), _mapping: mapping }, self.kept);
        }
    }
}

/// Bytes from one buffer of area `a` to the next.
fn stride(a: Area) -> usize {
    if a.framed {
        FRAME_SIZE
    } else {
        BUFFER_SIZE
    }
}

/// The physical address of each hugepage of `mapping`, from pagemap (needs root).
fn physical_pages(mapping: &MappedRegion, pages: usize) -> Result<Vec<u64>, PlatformError> {
    PHYSICAL_REGIONS.store(true, std::sync::atomic::Ordering::SeqCst);
    let pagemap = crate::pagemap::Pagemap::own()?;
    (0..pages)
        .map(|page| {
            pagemap.translate(mapping.virt_addr() + page * HUGEPAGE)?.ok_or_else(|| {
                PlatformError::io("hugepage not present after touching it", std::io::Error::other("pagemap"))
            })
        })
        .collect()
}

/// Set once a region was given physical addresses: a VFIO container joined later could not
/// translate them.
static PHYSICAL_REGIONS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether a region with physical addresses was made in this process.
pub(crate) fn physical_regions_made() -> bool {
    PHYSICAL_REGIONS.load(std::sync::atomic::Ordering::SeqCst)
}

#[cfg(test)]
mod tests;
