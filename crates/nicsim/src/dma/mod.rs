//! The device's view of memory: physical addresses resolved to memory a driver may legally
//! give a device.
//!
//! On real hardware without an IOMMU the 82599 can reach all of RAM. nicsim instead resolves
//! an address only if it falls in memory a user-space driver could have pinned for DMA:
//! hugetlbfs-backed **shared** mappings (files on hugetlbfs mounts, memfd or anonymous
//! `MAP_SHARED | MAP_HUGETLB` memory) of the processes that map one of nicsim's BARs. Those
//! mappings are found in `/proc/<pid>/maps`, opened through `/proc/<pid>/map_files/…`,
//! mapped into nicsim, and their physical addresses read from `/proc/<pid>/pagemap`. Any other
//! address is a DMA fault, as an IOMMU would report it; nicsim never reads or writes it.
//!
//! This module has the [`DmaSpace`] interface and what the device does through it (reads,
//! writes, rings); [`proc`] is the space of real driver processes and [`flat`] a fixed one for
//! unit tests.

mod flat;
pub mod iommu;
mod maps_reader;
mod proc;
#[cfg(test)]
mod tests;

pub use flat::FlatDmaSpace;
pub use proc::ProcDmaSpace;

use platform::MappedRegion;
use std::sync::atomic::{fence, Ordering};

/// 2 MiB: the granularity of physical contiguity we rely on.
pub const HUGEPAGE: u64 = 2 << 20;

/// Where a physical address lies: at `offset` in region `region` of a [`DmaSpace`], with
/// `avail` bytes from there physically contiguous in that region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub region: usize,
    pub offset: usize,
    pub avail: usize,
}

/// A whole physically contiguous piece of driver memory: `len` bytes from `phys`, found at
/// `offset` in region `region`. Packet buffers of one driver usually share a few such pieces,
/// so a burst of accesses keeps the last ones ([`Windows`]) and resolves most addresses with
/// a subtraction and a compare. Valid for the [`DmaSpace::generation`] it was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub phys: u64,
    pub len: u64,
    pub region: usize,
    pub offset: usize,
}

impl Window {
    /// Contains no address.
    pub const EMPTY: Window = Window { phys: 0, len: 0, region: 0, offset: 0 };

    /// The region offset of `[phys, phys + len)` if all of it lies in the window.
    #[inline(always)]
    pub fn offset_of(&self, phys: u64, len: usize) -> Option<usize> {
        // `within` wraps for an address below the window, so it is added only once it is known
        // to lie inside (an eager `then_some` would add first and overflow).
        let within = phys.wrapping_sub(self.phys);
        if within < self.len && len as u64 <= self.len - within {
            Some(self.offset + within as usize)
        } else {
            None
        }
    }
}

/// The last few [`Window`]s a run used. A driver's buffer pool spans several hugepages, each
/// its own window unless the pages happen to be physically adjacent, and a pool hands its
/// buffers out in any order: with one window, 6.5% of the buffers a flexible-model driver
/// gave the device missed it (0.8% for the restricted model's fixed ring of buffers), and a
/// miss also cost the transmit prefetch its frame.
#[derive(Debug, Clone, Copy)]
pub struct Windows {
    slots: [Window; WINDOWS],
    /// The slot the next miss replaces, round robin.
    next: usize,
}

/// Windows a [`Windows`] keeps.
const WINDOWS: usize = 4;

impl Windows {
    /// Contains no address.
    pub const EMPTY: Windows = Windows { slots: [Window::EMPTY; WINDOWS], next: 0 };

    /// The region and region offset of `[phys, phys + len)` if all of it lies in one window.
    #[inline(always)]
    pub fn offset_of(&self, phys: u64, len: usize) -> Option<(usize, usize)> {
        self.slots.iter().find_map(|w| w.offset_of(phys, len).map(|o| (w.region, o)))
    }

    /// [`Self::offset_of`], looking in `space` for the window around `phys` (and keeping it in
    /// place of the oldest) when no window holds the range.
    #[inline(always)]
    pub fn find(&mut self, space: &impl DmaSpace, phys: u64, len: usize) -> Option<(usize, usize)> {
        self.offset_of(phys, len).or_else(|| self.look_up(space, phys, len))
    }

    #[inline(never)]
    fn look_up(&mut self, space: &impl DmaSpace, phys: u64, len: usize) -> Option<(usize, usize)> {
        let w = space.window(phys)?;
        // Kept already if only the range did not fit (it runs past the piece's end).
        if !self.slots.contains(&w) {
            self.slots[self.next % WINDOWS] = w;
            self.next = self.next.wrapping_add(1);
        }
        w.offset_of(phys, len).map(|o| (w.region, o))
    }
}

/// [`Windows`] kept from one engine iteration to the next, with the [`DmaSpace::generation`]
/// they were found in: a port's next run starts with the pieces of memory its last run used,
/// unless the memory or the domains changed meanwhile, which changes the generation.
#[derive(Debug, Clone, Copy)]
pub struct KeptWindows {
    windows: Windows,
    generation: u64,
}

impl KeptWindows {
    /// Keeps no window.
    pub const EMPTY: KeptWindows = KeptWindows { windows: Windows::EMPTY, generation: u64::MAX };

    /// The windows kept, if `space` (the same function's domain they were found through) is
    /// still in the generation they were found in; none otherwise.
    #[inline(always)]
    pub fn get(&self, space: &impl DmaSpace) -> Windows {
        if self.generation == space.generation() {
            self.windows
        } else {
            Windows::EMPTY
        }
    }

    /// Keeps `windows`, found through `space` in its current generation.
    #[inline(always)]
    pub fn keep(&mut self, windows: Windows, space: &impl DmaSpace) {
        *self = KeptWindows { windows, generation: space.generation() };
    }
}

/// Resolves physical addresses for the device engines.
///
/// Resolution is split so that the per-frame paths hold no mutable borrow: [`Self::locate`]
/// looks only at memory already known, [`Self::discover`] looks for memory the driver mapped
/// since. Region indices stay valid until [`Self::maintain`] (the engine's slow path) drops
/// the memory of processes that exited, which changes [`Self::generation`]; a [`Location`]
/// kept across engine iterations must be checked against it.
pub trait DmaSpace {
    /// `phys` in the memory known now, without system calls. `None`: unknown (so far).
    fn locate(&self, phys: u64) -> Option<Location>;

    /// The whole contiguous piece of known memory around `phys`. Spaces that know only the
    /// bytes from `phys` on may return just those.
    fn window(&self, phys: u64) -> Option<Window> {
        self.locate(phys).map(|l| Window { phys, len: l.avail as u64, region: l.region, offset: l.offset })
    }

    /// The mapping of a region named by a [`Location`] of the current generation.
    fn region(&self, index: usize) -> &MappedRegion;

    /// Looks for driver memory mapped since the last look, after `phys` did not resolve;
    /// `true` if something new was found.
    fn discover(&mut self, _phys: u64) -> bool {
        false
    }

    /// Changes whenever region indices may have changed.
    fn generation(&self) -> u64 {
        0
    }

    /// Periodic housekeeping from the engine's slow path (e.g. dropping memory of processes
    /// that exited).
    fn maintain(&mut self) {}

    /// Forgets at once the memory that a live driver no longer maps (the engine asks when a
    /// queue was enabled, so that no queue starts on released memory).
    fn forget_released(&mut self) {}

    /// Per BAR, the processes other than nicsim that map it now (a look at every process:
    /// slow-path only). Spaces that know no processes return nothing.
    fn bar_mappers(&mut self) -> &[Vec<u32>] {
        &[]
    }

    /// Bytes of driver memory the space resolves now (for statistics).
    fn known_bytes(&self) -> u64 {
        0
    }

    /// Whether function `port`'s DMA reaches region `index`: on a machine with an IOMMU each
    /// function has its own domain. Spaces that know no owners reach everything.
    fn reaches(&self, _port: usize, _index: usize) -> bool {
        true
    }

    /// The process whose memory `phys` is, among all known driver memory (for fault reports).
    fn owner(&self, _phys: u64) -> Option<u32> {
        None
    }

    /// Process `pid` drives function `port` without mapping a BAR (through an I/O BAR): its
    /// memory joins that function's domain, as its mappings would if it mapped the BAR.
    fn adopt(&mut self, _port: usize, _pid: u32) {}

    /// `addr` as function `port` reaches it: through its IOMMU domain if it has one (an
    /// IOVA), else a physical address in the memory its domain reaches.
    #[inline(always)]
    fn locate_for(&self, port: usize, addr: u64) -> Option<Location> {
        self.locate(addr).filter(|l| self.reaches(port, l.region))
    }

    /// [`Self::window`] as function `port` reaches it.
    fn window_for(&self, port: usize, addr: u64) -> Option<Window> {
        self.window(addr).filter(|w| self.reaches(port, w.region))
    }

    /// Whether function `port` is behind an IOMMU domain (its addresses are IOVAs).
    fn translated(&self, _port: usize) -> bool {
        false
    }

    /// Changes the IOMMU's domains (`nicsim exec --vfio` asks on behalf of the driver's
    /// VFIO calls); answers the bytes an unmap removed. Spaces without an IOMMU refuse.
    fn iommu_op(&mut self, _op: &crate::control::IommuOp) -> Result<u64, String> {
        Err("this nicsim has no IOMMU".to_string())
    }

    /// The IOMMU, for statistics and `nicsim fault dma`.
    fn iommu(&self) -> Option<&iommu::Iommu> {
        None
    }
}

/// The part of a [`DmaSpace`] that one function reaches, as its IOMMU domain would allow:
/// what every access of that function's engines goes through. Addresses outside it resolve
/// nowhere, which is a DMA fault.
pub struct Domain<'a, D: DmaSpace> {
    space: &'a mut D,
    port: usize,
}

impl<'a, D: DmaSpace> Domain<'a, D> {
    #[inline(always)]
    pub fn new(space: &'a mut D, port: usize) -> Self {
        Domain { space, port }
    }
}

impl<D: DmaSpace> DmaSpace for Domain<'_, D> {
    #[inline(always)]
    fn locate(&self, phys: u64) -> Option<Location> {
        self.space.locate_for(self.port, phys)
    }
    fn window(&self, phys: u64) -> Option<Window> {
        self.space.window_for(self.port, phys)
    }
    #[inline(always)]
    fn region(&self, index: usize) -> &MappedRegion {
        self.space.region(index)
    }
    fn discover(&mut self, phys: u64) -> bool {
        // An IOVA is mapped by `MAP_DMA` alone: no look at the process finds more.
        !self.space.translated(self.port) && self.space.discover(phys)
    }
    #[inline(always)]
    fn generation(&self) -> u64 {
        self.space.generation()
    }
    fn maintain(&mut self) {
        self.space.maintain()
    }
    fn forget_released(&mut self) {
        self.space.forget_released()
    }
    fn known_bytes(&self) -> u64 {
        self.space.known_bytes()
    }
    fn reaches(&self, port: usize, index: usize) -> bool {
        self.space.reaches(port, index)
    }
    fn owner(&self, phys: u64) -> Option<u32> {
        self.space.owner(phys)
    }
    fn adopt(&mut self, port: usize, pid: u32) {
        self.space.adopt(port, pid)
    }
    fn locate_for(&self, port: usize, addr: u64) -> Option<Location> {
        self.space.locate_for(port, addr)
    }
    fn window_for(&self, port: usize, addr: u64) -> Option<Window> {
        self.space.window_for(port, addr)
    }
    fn translated(&self, port: usize) -> bool {
        self.space.translated(port)
    }
    fn iommu(&self) -> Option<&iommu::Iommu> {
        self.space.iommu()
    }
}

/// `phys` in `space`, looking for newly mapped memory if it is unknown. `None` is a DMA fault.
#[inline(always)]
pub fn resolve(space: &mut impl DmaSpace, phys: u64) -> Option<Location> {
    match space.locate(phys) {
        Some(l) => Some(l),
        None => discover_and_locate(space, phys),
    }
}

#[cold]
#[inline(never)]
fn discover_and_locate(space: &mut impl DmaSpace, phys: u64) -> Option<Location> {
    if space.discover(phys) {
        space.locate(phys)
    } else {
        None
    }
}

/// `len` contiguous bytes at `phys`, if they lie in one extent.
#[inline(always)]
pub fn resolve_range(space: &mut impl DmaSpace, phys: u64, len: usize) -> Option<Location> {
    resolve(space, phys).filter(|l| l.avail >= len)
}

/// Reads `buf.len()` bytes at `phys`; `false` on a DMA fault (then nothing was read).
#[inline(always)]
pub fn read(space: &mut impl DmaSpace, phys: u64, buf: &mut [u8]) -> bool {
    // Fast path: one contiguous extent.
    if let Some(l) = resolve_range(space, phys, buf.len()) {
        space.region(l.region).read_bytes(l.offset, buf);
        return true;
    }
    each_extent(space, phys, buf.len(), |r, off, done, n| r.read_bytes(off, &mut buf[done..done + n]))
}

/// Appends `len` bytes at `phys` to `buf`; `false` on a DMA fault (then `buf` is unchanged).
#[inline(always)]
pub fn read_append(space: &mut impl DmaSpace, phys: u64, len: usize, buf: &mut Vec<u8>) -> bool {
    if let Some(l) = resolve_range(space, phys, len) {
        space.region(l.region).read_append(l.offset, len, buf);
        return true;
    }
    let start = buf.len();
    buf.resize(start + len, 0);
    let ok = read(space, phys, &mut buf[start..]);
    if !ok {
        buf.truncate(start);
    }
    ok
}

/// Writes `data` at `phys`; `false` on a DMA fault (then nothing was written).
#[inline(always)]
pub fn write(space: &mut impl DmaSpace, phys: u64, data: &[u8]) -> bool {
    if let Some(l) = resolve_range(space, phys, data.len()) {
        space.region(l.region).write_bytes(l.offset, data);
        return true;
    }
    each_extent(space, phys, data.len(), |r, off, done, n| r.write_bytes(off, &data[done..done + n]))
}

/// Reads a little-endian u64.
#[inline(always)]
pub fn read_u64(space: &mut impl DmaSpace, phys: u64) -> Option<u64> {
    if let Some(l) = resolve_range(space, phys, 8) {
        return Some(space.region(l.region).read_u64(l.offset));
    }
    let mut b = [0u8; 8];
    read(space, phys, &mut b).then(|| u64::from_le_bytes(b))
}

/// Writes a little-endian u64 (one store when it does not straddle extents).
#[inline(always)]
pub fn write_u64(space: &mut impl DmaSpace, phys: u64, value: u64) -> bool {
    if let Some(l) = resolve_range(space, phys, 8) {
        space.region(l.region).write_u64(l.offset, value);
        return true;
    }
    write(space, phys, &value.to_le_bytes())
}

/// Reads a 16-byte descriptor as two little-endian qwords (one resolution).
#[inline(always)]
pub fn read_descriptor(space: &mut impl DmaSpace, phys: u64) -> Option<(u64, u64)> {
    if let Some(l) = resolve_range(space, phys, 16) {
        let r = space.region(l.region);
        return Some((r.read_u64(l.offset), r.read_u64(l.offset + 8)));
    }
    Some((read_u64(space, phys)?, read_u64(space, phys.checked_add(8)?)?))
}

/// Writes a little-endian u32.
#[inline(always)]
pub fn write_u32(space: &mut impl DmaSpace, phys: u64, value: u32) -> bool {
    if let Some(l) = resolve_range(space, phys, 4) {
        space.region(l.region).write_u32(l.offset, value);
        return true;
    }
    write(space, phys, &value.to_le_bytes())
}

/// A descriptor ring resolved once for a run of accesses: it lies in one extent. Valid for
/// the [`DmaSpace::generation`] it was made in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ring {
    location: Location,
    size: u32,
    generation: u64,
}

impl Ring {
    /// The ring of `size` 16-byte descriptors at `base`, if it resolves as one piece
    /// (otherwise every descriptor is resolved, and faults reported, on its own).
    #[inline]
    pub fn resolve(space: &mut impl DmaSpace, base: u64, size: u32) -> Option<Ring> {
        let location = resolve_range(space, base, size as usize * 16)?;
        Some(Ring { location, size, generation: space.generation() })
    }

    /// `kept` if it is still valid in `space`, else the ring of `size` descriptors at `base`
    /// resolved afresh, kept in its place (`None` if it does not resolve as one piece).
    #[inline]
    pub fn kept_or_resolve(kept: &mut Option<Ring>, space: &mut impl DmaSpace, base: u64, size: u32) -> Option<Ring> {
        match *kept {
            Some(r) if r.valid_in(space) => Some(r),
            _ => {
                *kept = Ring::resolve(space, base, size);
                *kept
            }
        }
    }

    /// Whether the ring still resolves the same way in `space`.
    #[inline(always)]
    pub fn valid_in(&self, space: &impl DmaSpace) -> bool {
        self.generation == space.generation()
    }

    /// The ring in `space`'s memory, where its descriptors are read and written: the region is
    /// looked up once for a run of accesses.
    #[inline(always)]
    pub fn in_space<'a>(&self, space: &'a impl DmaSpace) -> RingIn<'a> {
        RingIn { region: space.region(self.location.region), offset: self.location.offset, size: self.size }
    }
}

/// A [`Ring`] with its region looked up ([`Ring::in_space`]); valid while the space is
/// borrowed, so for one run of accesses.
#[derive(Clone, Copy)]
pub struct RingIn<'a> {
    region: &'a MappedRegion,
    offset: usize,
    size: u32,
}

impl RingIn<'_> {
    /// Descriptor `index` (below the size given to [`Ring::resolve`]) as two qwords.
    #[inline(always)]
    pub fn read(&self, index: u32) -> (u64, u64) {
        let off = self.offset + index as usize * 16;
        (self.region.read_u64(off), self.region.read_u64(off + 8))
    }

    /// Copies `out.len() / 16` descriptors from `index` on, wrapping at the end of the ring,
    /// into `out`: at most two bulk reads, as the device fetches descriptors in bursts
    /// [DS 7.2.3.4.1].
    #[inline]
    pub fn read_run(&self, index: u32, out: &mut [u8]) {
        let index = index.min(self.size) as usize;
        let first = out.len().min((self.size as usize - index) * 16);
        let (before_end, wrapped) = out.split_at_mut(first);
        self.region.read_bytes(self.offset + index * 16, before_end);
        if !wrapped.is_empty() {
            self.region.read_bytes(self.offset, wrapped);
        }
    }

    /// Qword 0 of descriptor `index`.
    #[inline(always)]
    pub fn read_qword0(&self, index: u32) -> u64 {
        self.region.read_u64(self.offset + index as usize * 16)
    }

    /// Writes qword 1 of descriptor `index`.
    #[inline(always)]
    pub fn write_qword1(&self, index: u32, value: u64) {
        self.region.write_u64(self.offset + index as usize * 16 + 8, value);
    }

    /// Writes the upper dword of descriptor `index` (the TX status write-back).
    #[inline(always)]
    pub fn write_dword3(&self, index: u32, value: u32) {
        self.region.write_u32(self.offset + index as usize * 16 + 12, value);
    }

    /// Writes descriptor `index`: qword 0, a release fence, qword 1.
    #[inline(always)]
    pub fn write(&self, index: u32, qword0: u64, qword1: u64) {
        let off = self.offset + index as usize * 16;
        self.region.write_u64(off, qword0);
        fence(Ordering::Release);
        self.region.write_u64(off + 8, qword1);
    }
}

/// Applies `f` to each contiguous piece of `[phys, phys + len)` after checking that the whole
/// range resolves, so a fault part-way never leaves a partial access.
fn each_extent(
    space: &mut impl DmaSpace,
    phys: u64,
    len: usize,
    mut f: impl FnMut(&MappedRegion, usize, usize, usize),
) -> bool {
    let mut done = 0;
    while done < len {
        let Some(at) = phys.checked_add(done as u64) else { return false };
        match resolve(space, at) {
            Some(l) if l.avail > 0 => done += l.avail.min(len - done),
            _ => return false,
        }
    }
    let mut done = 0;
    while done < len {
        let l = space.locate(phys + done as u64).expect("resolved above");
        let n = l.avail.min(len - done);
        f(space.region(l.region), l.offset, done, n);
        done += n;
    }
    true
}
