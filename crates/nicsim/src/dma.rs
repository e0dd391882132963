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

use platform::pagemap::Pagemap;
use platform::MappedRegion;
use std::cell::Cell;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

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

    /// Whether the ring still resolves the same way in `space`.
    #[inline(always)]
    pub fn valid_in(&self, space: &impl DmaSpace) -> bool {
        self.generation == space.generation()
    }

    /// Descriptor `index` (below the size given to [`Self::resolve`]) as two qwords.
    #[inline(always)]
    pub fn read(&self, space: &impl DmaSpace, index: u32) -> (u64, u64) {
        let r = space.region(self.location.region);
        let off = self.location.offset + index as usize * 16;
        (r.read_u64(off), r.read_u64(off + 8))
    }

    /// Copies `out.len() / 16` descriptors from `index` on, wrapping at the end of the ring,
    /// into `out`: at most two bulk reads, as the device fetches descriptors in bursts
    /// [DS 7.2.3.4.1].
    #[inline]
    pub fn read_run(&self, space: &impl DmaSpace, index: u32, out: &mut [u8]) {
        let r = space.region(self.location.region);
        let index = index.min(self.size) as usize;
        let first = out.len().min((self.size as usize - index) * 16);
        let (before_end, wrapped) = out.split_at_mut(first);
        r.read_bytes(self.location.offset + index * 16, before_end);
        if !wrapped.is_empty() {
            r.read_bytes(self.location.offset, wrapped);
        }
    }

    /// Qword 0 of descriptor `index`.
    #[inline(always)]
    pub fn read_qword0(&self, space: &impl DmaSpace, index: u32) -> u64 {
        space.region(self.location.region).read_u64(self.location.offset + index as usize * 16)
    }

    /// Writes qword 1 of descriptor `index`.
    #[inline(always)]
    pub fn write_qword1(&self, space: &impl DmaSpace, index: u32, value: u64) {
        space.region(self.location.region).write_u64(self.location.offset + index as usize * 16 + 8, value);
    }

    /// Writes the upper dword of descriptor `index` (the TX status write-back).
    #[inline(always)]
    pub fn write_dword3(&self, space: &impl DmaSpace, index: u32, value: u32) {
        space.region(self.location.region).write_u32(self.location.offset + index as usize * 16 + 12, value);
    }

    /// Writes descriptor `index`: qword 0, a release fence, qword 1.
    #[inline(always)]
    pub fn write(&self, space: &impl DmaSpace, index: u32, qword0: u64, qword1: u64) {
        let r = space.region(self.location.region);
        let off = self.location.offset + index as usize * 16;
        r.write_u64(off, qword0);
        fence(Ordering::Release);
        r.write_u64(off + 8, qword1);
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

/// A DMA space over one region at a fixed physical base: for unit tests of the device model.
pub struct FlatDmaSpace {
    pub region: MappedRegion,
    pub base: u64,
}

impl DmaSpace for FlatDmaSpace {
    fn locate(&self, phys: u64) -> Option<Location> {
        let off = phys.checked_sub(self.base)?;
        let offset = usize::try_from(off).ok().filter(|&o| o < self.region.len())?;
        Some(Location { region: 0, offset, avail: self.region.len() - offset })
    }

    fn window(&self, phys: u64) -> Option<Window> {
        self.locate(phys)?;
        Some(Window { phys: self.base, len: self.region.len() as u64, region: 0, offset: 0 })
    }

    fn region(&self, _index: usize) -> &MappedRegion {
        &self.region
    }
}

/// One physically contiguous piece of a driver's hugepage memory.
#[derive(Debug, Clone, Copy)]
struct Extent {
    phys: u64,
    len: u64,
    region: usize,
    offset: usize,
}

/// Identity of a mapping: a VMA of one process backed by one file at one offset.
#[derive(Debug, Clone, PartialEq, Eq)]
struct VmaKey {
    pid: u32,
    start: u64,
    end: u64,
    dev: (u32, u32),
    inode: u64,
    file_offset: u64,
}

#[derive(Debug, Clone, Copy)]
struct Hit {
    phys: u64,
    len: u64,
    region: usize,
    offset: usize,
}

impl Hit {
    /// Matches no address (`len` 0).
    const NONE: Hit = Hit { phys: 0, len: 0, region: 0, offset: 0 };
}

struct Region {
    key: VmaKey,
    map: MappedRegion,
}

/// The DMA space of real driver processes, discovered through /proc.
pub struct ProcDmaSpace {
    /// `(dev major, dev minor, inode)` of each BAR file nicsim serves.
    bars: Vec<((u32, u32), u64)>,
    regions: Vec<Region>,
    extents: Vec<Extent>,
    /// The extents of the last two look-ups that needed a search (the newest first), copied
    /// out so the common case is a compare and an add. Two, because drivers that allocate
    /// rings and packet buffers separately alternate between two extents.
    hit: Cell<[Hit; 2]>,
    /// Bumped when regions are dropped (their indices change).
    generation: u64,
    driver_pids: Vec<u32>,
    last_quick_scan: Option<Instant>,
    last_full_scan: Option<Instant>,
    last_maintain: Instant,
    /// How many scans ran (for diagnostics).
    pub scans: u64,
}

fn split_dev(dev: u64) -> (u32, u32) {
    // glibc's gnu_dev_major / gnu_dev_minor encoding of dev_t.
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

impl ProcDmaSpace {
    /// A space for the devices whose BAR files are `bar_files`.
    pub fn new(bar_files: &[&File]) -> std::io::Result<Self> {
        let mut bars = Vec::new();
        for f in bar_files {
            let m = f.metadata()?;
            bars.push((split_dev(m.dev()), m.ino()));
        }
        Ok(ProcDmaSpace {
            bars,
            regions: Vec::new(),
            extents: Vec::new(),
            hit: Cell::new([Hit::NONE; 2]),
            generation: 0,
            driver_pids: Vec::new(),
            last_quick_scan: None,
            last_full_scan: None,
            last_maintain: Instant::now(),
            scans: 0,
        })
    }

    /// Processes currently known to map a BAR.
    pub fn driver_pids(&self) -> &[u32] {
        &self.driver_pids
    }

    /// Bytes of driver memory currently resolvable.
    pub fn mapped_bytes(&self) -> u64 {
        self.extents.iter().map(|e| e.len).sum()
    }

    fn find(&self, phys: u64) -> Option<usize> {
        let i = self.extents.partition_point(|e| e.phys + e.len <= phys);
        (i < self.extents.len() && self.extents[i].phys <= phys).then_some(i)
    }

    /// Rescans: `full` looks at every process, otherwise only at known driver processes.
    /// Regions of mappings that are gone are dropped only with `forget` (from `maintain`),
    /// so that region indices stay valid between engine iterations.
    pub fn rescan(&mut self, full: bool, forget: bool) {
        self.scans += 1;
        let pids: Vec<u32> = if full {
            std::fs::read_dir("/proc")
                .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
                .unwrap_or_default()
        } else {
            self.driver_pids.clone()
        };
        let me = std::process::id();
        let mut seen: Vec<VmaKey> = Vec::new();
        let mut drivers = Vec::new();
        for pid in pids {
            let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else { continue };
            let vmas: Vec<VmaKey> = maps.lines().filter_map(|l| parse_maps_line(pid, l)).collect();
            let maps_bar = vmas.iter().any(|v| self.bars.iter().any(|&(d, i)| v.dev == d && v.inode == i));
            if !maps_bar {
                continue;
            }
            drivers.push(pid);
            for v in vmas {
                if self.bars.iter().any(|&(d, i)| v.dev == d && v.inode == i) {
                    continue;
                }
                // Our own views of drivers' memory are not memory a driver gave us.
                if pid == me && self.regions.iter().any(|r| r.map.virt_addr() as u64 == v.start) {
                    continue;
                }
                if !self.regions.iter().any(|r| r.key == v) {
                    if let Some(map) = open_vma(&v) {
                        self.regions.push(Region { key: v.clone(), map });
                    } else {
                        continue;
                    }
                }
                seen.push(v);
            }
        }
        if full {
            self.driver_pids = drivers;
        }
        if full && forget {
            // Forget mappings that are gone (process exited or unmapped them), releasing pages.
            let before = self.regions.len();
            self.regions.retain(|r| seen.contains(&r.key));
            if self.regions.len() != before {
                self.generation += 1;
            }
        }
        self.rebuild_extents();
    }

    fn rebuild_extents(&mut self) {
        let mut extents = Vec::new();
        for (ri, r) in self.regions.iter().enumerate() {
            let Ok(pagemap) = Pagemap::open(Some(r.key.pid)) else { continue };
            let mut va = r.key.start;
            while va < r.key.end {
                if let Ok(Some(phys)) = pagemap.translate(va as usize) {
                    let len = HUGEPAGE.min(r.key.end - va);
                    extents.push(Extent { phys, len, region: ri, offset: (va - r.key.start) as usize });
                }
                va += HUGEPAGE;
            }
        }
        extents.sort_by_key(|e| e.phys);
        extents.dedup_by_key(|e| e.phys);
        // Merge neighbours that are contiguous both physically and in one mapping.
        let mut merged: Vec<Extent> = Vec::with_capacity(extents.len());
        for e in extents {
            if let Some(last) = merged.last_mut() {
                if last.region == e.region
                    && last.phys + last.len == e.phys
                    && last.offset + last.len as usize == e.offset
                {
                    last.len += e.len;
                    continue;
                }
                if last.phys + last.len > e.phys {
                    continue; // overlapping duplicate view of the same pages
                }
            }
            merged.push(e);
        }
        self.extents = merged;
        self.hit.set([Hit::NONE; 2]);
    }

    fn location_of(h: Hit, phys: u64) -> Location {
        let within = (phys - h.phys) as usize;
        Location { region: h.region, offset: h.offset + within, avail: h.len as usize - within }
    }

    /// `phys` among the known extents (binary search), remembered as the latest hit.
    #[cold]
    fn locate_known(&self, phys: u64) -> Option<Location> {
        let e = self.extents[self.find(phys)?];
        let h = Hit { phys: e.phys, len: e.len, region: e.region, offset: e.offset };
        self.hit.set([h, self.hit.get()[0]]);
        Some(Self::location_of(h, phys))
    }
}

impl DmaSpace for ProcDmaSpace {
    #[inline(always)]
    fn locate(&self, phys: u64) -> Option<Location> {
        let hits = self.hit.get();
        if phys.wrapping_sub(hits[0].phys) < hits[0].len {
            return Some(Self::location_of(hits[0], phys));
        }
        if phys.wrapping_sub(hits[1].phys) < hits[1].len {
            // Not promoted: two extents used in turn then hit without rewriting the cache.
            return Some(Self::location_of(hits[1], phys));
        }
        self.locate_known(phys)
    }

    fn window(&self, phys: u64) -> Option<Window> {
        let e = self.extents[self.find(phys)?];
        Some(Window { phys: e.phys, len: e.len, region: e.region, offset: e.offset })
    }

    #[inline(always)]
    fn region(&self, index: usize) -> &MappedRegion {
        &self.regions[index].map
    }

    fn generation(&self) -> u64 {
        self.generation
    }

    fn discover(&mut self, phys: u64) -> bool {
        // Unknown address: maybe the driver allocated memory since the last scan.
        let now = Instant::now();
        let stale = |t: Option<Instant>, d: Duration| t.is_none_or(|t| now.duration_since(t) > d);
        if stale(self.last_quick_scan, Duration::from_millis(2)) {
            self.last_quick_scan = Some(now);
            self.rescan(false, false);
            if self.find(phys).is_some() {
                return true;
            }
        }
        if stale(self.last_full_scan, Duration::from_millis(50)) {
            self.last_full_scan = Some(now);
            self.rescan(true, false);
            return self.find(phys).is_some();
        }
        false
    }

    fn maintain(&mut self) {
        if self.last_maintain.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.last_maintain = Instant::now();
        // A driver that exited must not keep its hugepages alive through our mappings.
        let gone = self.regions.iter().any(|r| !std::path::Path::new(&format!("/proc/{}", r.key.pid)).exists());
        if gone {
            self.last_full_scan = Some(Instant::now());
            self.rescan(true, true);
        }
    }
}

/// Parses one line of /proc/<pid>/maps into a candidate DMA mapping: shared, readable and
/// writable, backed by a file (inode ≠ 0).
fn parse_maps_line(pid: u32, line: &str) -> Option<VmaKey> {
    let mut f = line.split_whitespace();
    let range = f.next()?;
    let perms = f.next()?;
    let offset = u64::from_str_radix(f.next()?, 16).ok()?;
    let dev = f.next()?;
    let inode: u64 = f.next()?.parse().ok()?;
    if inode == 0 || !perms.starts_with("rw") || perms.as_bytes().get(3) != Some(&b's') {
        return None;
    }
    let (s, e) = range.split_once('-')?;
    let (maj, min) = dev.split_once(':')?;
    Some(VmaKey {
        pid,
        start: u64::from_str_radix(s, 16).ok()?,
        end: u64::from_str_radix(e, 16).ok()?,
        dev: (u32::from_str_radix(maj, 16).ok()?, u32::from_str_radix(min, 16).ok()?),
        inode,
        file_offset: offset,
    })
}

/// Maps a driver's VMA into nicsim if it is hugetlbfs-backed.
fn open_vma(v: &VmaKey) -> Option<MappedRegion> {
    let path = format!("/proc/{}/map_files/{:x}-{:x}", v.pid, v.start, v.end);
    let file = std::fs::OpenOptions::new().read(true).write(true).open(path).ok()?;
    if !platform::fs::is_hugetlbfs(&file).ok()? {
        return None;
    }
    MappedRegion::map_file(&file, v.file_offset, (v.end - v.start) as usize, false).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_parse_and_filter() {
        let l = "7f0000000000-7f0000200000 rw-s 00000000 00:0f 123456 /anon_hugepage (deleted)";
        let v = parse_maps_line(7, l).unwrap();
        assert_eq!((v.start, v.end, v.dev, v.inode), (0x7f0000000000, 0x7f0000200000, (0, 0xf), 123456));
        assert!(parse_maps_line(7, "7f0-7f1 rw-p 00000000 00:0f 1 /x").is_none(), "private");
        assert!(parse_maps_line(7, "7f0-7f1 r--s 00000000 00:0f 1 /x").is_none(), "read-only");
        assert!(parse_maps_line(7, "7f0-7f1 rw-s 00000000 00:00 0 ").is_none(), "no file");
    }

    #[test]
    fn accesses_split_across_extents_or_fault_whole() {
        let mut space = FlatDmaSpace { region: MappedRegion::anonymous(8192).unwrap(), base: 0x10_0000 };
        assert!(write(&mut space, 0x10_0000 + 8188, &[1, 2, 3, 4]));
        assert!(!write(&mut space, 0x10_0000 + 8190, &[1, 2, 3, 4]), "runs past the end");
        let mut b = [0u8; 4];
        assert!(read(&mut space, 0x10_0000 + 8188, &mut b));
        assert_eq!(b, [1, 2, 3, 4]);
        assert!(read_u64(&mut space, 0x0F_FFFF).is_none(), "below the base");
        assert!(!write_u64(&mut space, u64::MAX - 2, 1), "address overflow");
    }

    /// A flat space whose regions can be "dropped", as `maintain` does.
    struct Churning {
        flat: FlatDmaSpace,
        generation: u64,
    }

    impl DmaSpace for Churning {
        fn locate(&self, phys: u64) -> Option<Location> {
            self.flat.locate(phys)
        }
        fn region(&self, index: usize) -> &MappedRegion {
            self.flat.region(index)
        }
        fn generation(&self) -> u64 {
            self.generation
        }
    }

    #[test]
    fn rings_resolve_as_one_piece_and_expire_with_the_generation() {
        let base = 0x40_0000;
        let mut space =
            Churning { flat: FlatDmaSpace { region: MappedRegion::anonymous(4096).unwrap(), base }, generation: 0 };
        assert_eq!(Ring::resolve(&mut space, base + 4096 - 16 * 4, 5), None, "a ring running past the memory");
        assert_eq!(Ring::resolve(&mut space, base - 16, 2), None, "a ring below the memory");
        let ring = Ring::resolve(&mut space, base + 256, 4).expect("a ring inside the memory");
        ring.write(&space, 3, 0x1111, 0x2222_0000_0000);
        assert_eq!(read_descriptor(&mut space, base + 256 + 48), Some((0x1111, 0x2222_0000_0000)));
        assert_eq!(ring.read(&space, 3), (0x1111, 0x2222_0000_0000));
        ring.write_qword1(&space, 2, 7);
        ring.write_dword3(&space, 2, 9);
        assert_eq!(ring.read(&space, 2), (0, 7 | 9 << 32));
        assert_eq!(ring.read_qword0(&space, 3), 0x1111);
        assert!(ring.valid_in(&space));
        space.generation += 1;
        assert!(!ring.valid_in(&space), "regions may have moved");
    }

    #[test]
    fn unknown_addresses_are_looked_for_before_they_fault() {
        /// Memory the driver maps only after `appears` looks.
        struct Late {
            flat: FlatDmaSpace,
            appears: u32,
            looked: u32,
        }
        impl DmaSpace for Late {
            fn locate(&self, phys: u64) -> Option<Location> {
                self.flat.locate(phys).filter(|_| self.looked >= self.appears)
            }
            fn region(&self, index: usize) -> &MappedRegion {
                self.flat.region(index)
            }
            fn discover(&mut self, _phys: u64) -> bool {
                self.looked += 1;
                self.looked >= self.appears
            }
        }
        let flat = || FlatDmaSpace { region: MappedRegion::anonymous(4096).unwrap(), base: 0 };
        let mut space = Late { flat: flat(), appears: 1, looked: 0 };
        assert!(write_u32(&mut space, 8, 5), "found by looking");
        assert_eq!(read_u64(&mut space, 8), Some(5));
        assert_eq!(space.looked, 1, "known memory needs no further look");
        let mut never = Late { flat: flat(), appears: u32::MAX, looked: 0 };
        assert!(!write_u32(&mut never, 8, 5), "a fault");
        assert!(read_u64(&mut never, 8).is_none(), "a fault");
        assert!(never.looked > 0);
    }

    /// Six physically separate pieces of 4 KiB, piece `i` at physical `(i + 1) << 20` in
    /// region 0 at offset `i * 4096`; counts the lookups `Windows` makes.
    struct Pieces {
        region: MappedRegion,
        lookups: std::cell::Cell<u32>,
    }

    impl DmaSpace for Pieces {
        fn locate(&self, phys: u64) -> Option<Location> {
            self.window(phys).map(|w| Location { region: 0, offset: w.offset, avail: w.len as usize })
        }
        fn window(&self, phys: u64) -> Option<Window> {
            self.lookups.set(self.lookups.get() + 1);
            let piece = (phys >> 20).checked_sub(1).filter(|&p| p < 6 && phys & 0xF_FFFF < 4096)?;
            Some(Window { phys: (piece + 1) << 20, len: 4096, region: 0, offset: piece as usize * 4096 })
        }
        fn region(&self, _index: usize) -> &MappedRegion {
            &self.region
        }
    }

    #[test]
    fn windows_keep_the_last_four_pieces_and_resolve_each_address_exactly() {
        let space = Pieces { region: MappedRegion::anonymous(6 * 4096).unwrap(), lookups: Default::default() };
        let addr = |piece: u64, at: u64| ((piece + 1) << 20) + at;
        let mut w = Windows::EMPTY;
        assert_eq!(w.offset_of(addr(0, 0), 1), None, "empty");
        // Buffers from four pieces in any order: one lookup per piece, then none.
        for round in 0..3 {
            for (piece, at) in [(2, 100), (0, 4000), (3, 0), (2, 2048), (1, 64), (0, 0)] {
                assert_eq!(w.find(&space, addr(piece, at), 64), Some((0, piece as usize * 4096 + at as usize)));
            }
            assert_eq!(space.lookups.get(), 4, "round {round}: four pieces, four lookups");
        }
        assert_eq!(w.find(&space, addr(1, 4090), 64), None, "runs past the end of its piece");
        assert_eq!(w.find(&space, addr(0, 5000), 1), None, "outside every piece");
        // A fifth piece replaces the oldest (piece 2); the other three still hit.
        let before = space.lookups.get();
        assert_eq!(w.find(&space, addr(4, 8), 64), Some((0, 4 * 4096 + 8)));
        for piece in [0, 3, 1, 4] {
            assert!(w.offset_of(addr(piece, 8), 64).is_some(), "piece {piece} kept");
        }
        assert_eq!(w.offset_of(addr(2, 8), 64), None, "piece 2 replaced");
        assert_eq!(space.lookups.get(), before + 1);
    }
}
