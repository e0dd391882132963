//! The DMA space of real drivers: hugetlbfs-backed shared mappings of the processes that map
//! a BAR, found in `/proc/<pid>/maps` and resolved through `/proc/<pid>/pagemap`.

use super::iommu::{Iommu, MapError, IOMMU_REGIONS};
use super::maps_reader::{MapsRead, MapsReader};
use super::{DmaSpace, Location, Window, HUGEPAGE};
use crate::control::IommuOp;
use platform::pagemap::Pagemap;
use platform::MappedRegion;
use std::cell::Cell;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

/// How often the drivers' maps are compared with the memory nicsim keeps, besides at every
/// queue enable: how long a live driver's released memory can stay reachable by the device.
pub const RELEASE_LOOK_PERIOD: Duration = Duration::from_millis(100);

#[derive(Debug, Clone, Copy)]
struct Extent {
    phys: u64,
    len: u64,
    region: usize,
    offset: usize,
}

/// Identity of a mapping: a VMA of one process backed by one file at one offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct VmaKey {
    pub(super) pid: u32,
    pub(super) start: u64,
    end: u64,
    dev: (u32, u32),
    inode: u64,
    file_offset: u64,
}

impl VmaKey {
    /// The link to exactly this mapping's file, which the kernel resolves under the process's
    /// mmap lock; it does not exist once the mapping is gone.
    fn map_files_path(&self) -> String {
        format!("/proc/{}/map_files/{:x}-{:x}", self.pid, self.start, self.end)
    }
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
    /// Bit `n`: function `n` reaches this memory. Its process maps function `n`'s BAR, or
    /// another process that maps the same file (memory shared on purpose) does.
    ports: u32,
    /// When nicsim found it: a read of the maps begun before then says nothing of it.
    found: Instant,
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
    /// Per BAR (in the order given to [`ProcDmaSpace::new`]): the processes other than
    /// nicsim that map it, as of the last full scan.
    bar_mappers: Vec<Vec<u32>>,
    /// Per process seen mapping a BAR: bit `n` if it maps function `n`'s, as of its last scan.
    pid_ports: Vec<(u32, u32)>,
    /// Processes that drive a function through its I/O BAR ([`DmaSpace::adopt`]), with the
    /// functions as a bit mask.
    adopted: Vec<(u32, u32)>,
    last_maintain: Instant,
    /// When the drivers' maps were last compared with the memory nicsim keeps.
    last_release_look: Instant,
    /// Reads the drivers' maps off the engine's thread; without it (it could not start) the
    /// engine reads them itself.
    reader: Option<MapsReader>,
    /// The domains of functions bound to vfio-pci (`nicsim exec --vfio`).
    iommu: Iommu,
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
            bar_mappers: vec![Vec::new(); bar_files.len()],
            pid_ports: Vec::new(),
            adopted: Vec::new(),
            last_maintain: Instant::now(),
            last_release_look: Instant::now(),
            reader: MapsReader::start().ok(),
            iommu: Iommu::default(),
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
        let mut mappers = vec![Vec::new(); self.bars.len()];
        for pid in pids {
            let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else { continue };
            let vmas: Vec<VmaKey> = maps.lines().filter_map(|l| parse_maps_line(pid, l)).collect();
            let mut ports = self.adopted.iter().filter(|(p, _)| *p == pid).fold(0, |m, (_, b)| m | b);
            for (b, &(d, i)) in self.bars.iter().enumerate() {
                if vmas.iter().any(|v| v.dev == d && v.inode == i) {
                    ports |= 1 << b;
                    if pid != me {
                        mappers[b].push(pid);
                    }
                }
            }
            self.pid_ports.retain(|&(p, _)| p != pid);
            if ports == 0 {
                continue;
            }
            self.pid_ports.push((pid, ports));
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
                        self.regions.push(Region { key: v.clone(), map, ports: 0, found: Instant::now() });
                    } else {
                        continue;
                    }
                }
                seen.push(v);
            }
        }
        if full {
            self.driver_pids = drivers;
            self.bar_mappers = mappers;
            self.pid_ports.retain(|(p, _)| self.driver_pids.contains(p));
        }
        if full && forget {
            // Forget mappings that are gone (process exited or unmapped them), releasing pages.
            let before = self.regions.len();
            self.regions.retain(|r| !released(&r.key, &seen));
            if self.regions.len() != before {
                self.generation += 1;
            }
        }
        self.assign_domains();
        self.rebuild_extents();
    }

    /// Forgets the memory a live driver no longer maps (it unmapped it, or freed and mapped
    /// something else there): nicsim's own mapping would otherwise keep the pages alive and
    /// the device writing into them. One read of each driver's `/proc/<pid>/maps`, now. The
    /// generation changes if anything was forgotten, so the engine stops queues left on it.
    fn forget_released_now(&mut self) {
        let read = MapsRead::now(self.region_pids());
        self.forget_released_in(read);
    }

    /// The processes whose memory nicsim keeps, whether or not the last full scan saw them
    /// map a BAR.
    fn region_pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self.regions.iter().map(|r| r.key.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// [`ProcDmaSpace::forget_released_now`] with a read made elsewhere: it judges only the
    /// memory of the processes it read that nicsim had found before the read began.
    fn forget_released_in(&mut self, read: MapsRead) {
        self.last_release_look = Instant::now();
        let judged = |r: &Region| r.found <= read.started && read.pids.contains(&r.key.pid);
        // Pages one process let go may still be held by another that maps a BAR too (a
        // driver's keeper holds a queue's memory until it has stopped the queue): find those
        // first, so that their mappings keep the pages reachable, as the pages stay allocated.
        // (The regions this adds were found after the read: it does not judge them.)
        if self.regions.iter().any(|r| judged(r) && released(&r.key, &read.lines)) {
            self.rescan(true, false);
        }
        let before = self.regions.len();
        self.regions.retain(|r| !(judged(r) && released(&r.key, &read.lines)));
        if self.regions.len() != before {
            self.generation += 1;
            self.assign_domains();
            self.rebuild_extents();
        }
    }

    /// Which functions reach each region: those whose BAR its process maps, and those of
    /// every other process that maps the same file. A change re-resolves what the engines
    /// keep (the generation changes; region indices do not).
    fn assign_domains(&mut self) {
        let ports_of = |pid: u32| self.pid_ports.iter().find(|(p, _)| *p == pid).map_or(0, |(_, m)| *m);
        let masks: Vec<u32> = self
            .regions
            .iter()
            .map(|r| {
                self.regions
                    .iter()
                    .filter(|o| o.key.dev == r.key.dev && o.key.inode == r.key.inode)
                    .fold(0, |m, o| m | ports_of(o.key.pid))
            })
            .collect();
        let mut changed = false;
        for (r, m) in self.regions.iter_mut().zip(masks) {
            changed |= r.ports != m;
            r.ports = m;
        }
        if changed {
            self.generation += 1;
        }
    }

    fn rebuild_extents(&mut self) {
        if let Some(reader) = self.reader.as_ref() {
            reader.watch(self.region_pids());
        }
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
        if index >= IOMMU_REGIONS {
            return self.iommu.region(index);
        }
        &self.regions[index].map
    }

    #[inline(always)]
    fn locate_for(&self, port: usize, addr: u64) -> Option<Location> {
        match self.iommu.domain_of(port) {
            Some(c) => self.iommu.locate(c, addr),
            None => self.locate(addr).filter(|l| self.reaches(port, l.region)),
        }
    }

    fn window_for(&self, port: usize, addr: u64) -> Option<Window> {
        match self.iommu.domain_of(port) {
            Some(c) => self.iommu.window(c, addr),
            None => self.window(addr).filter(|w| self.reaches(port, w.region)),
        }
    }

    fn translated(&self, port: usize) -> bool {
        self.iommu.domain_of(port).is_some()
    }

    fn iommu(&self) -> Option<&Iommu> {
        Some(&self.iommu)
    }

    fn iommu_op(&mut self, op: &IommuOp) -> Result<u64, String> {
        let done = match *op {
            IommuOp::Attach { container, pid, port } => {
                self.iommu.attach(container, pid, port);
                Ok(0)
            }
            IommuOp::Map { container, pid, vaddr, iova, len } => {
                pin(pid, vaddr, len).and_then(|pieces| self.iommu.map(container, iova, len, pieces)).map(|()| 0)
            }
            IommuOp::Unmap { container, iova, len } => self.iommu.unmap(container, iova, len),
            IommuOp::Release { container } => {
                self.iommu.release(container);
                Ok(0)
            }
        };
        // Whatever changed, no engine keeps a translation from before (an IOTLB flush).
        self.generation += 1;
        done.map_err(|e| e.to_errno_message())
    }

    fn generation(&self) -> u64 {
        self.generation
    }

    fn discover(&mut self, phys: u64) -> bool {
        // Unknown address: maybe the driver mapped or touched memory since the last scan.
        // Every miss scans afresh: an answer kept from an earlier scan may predate the
        // mapping, and a miss is a fault. Misses are rare (a fault stops its queue), so the
        // cost is a driver's start-up and its faults, not its traffic.
        self.rescan(false, false);
        if self.find(phys).is_some() {
            return true;
        }
        // Not in the known drivers' memory: maybe a process that mapped a BAR since.
        self.rescan(true, false);
        self.find(phys).is_some()
    }

    fn known_bytes(&self) -> u64 {
        self.mapped_bytes()
    }

    #[inline(always)]
    fn reaches(&self, port: usize, index: usize) -> bool {
        index < IOMMU_REGIONS && self.regions[index].ports & (1 << port) != 0
    }

    fn owner(&self, phys: u64) -> Option<u32> {
        self.find(phys).map(|i| self.regions[self.extents[i].region].key.pid)
    }

    fn bar_mappers(&mut self) -> &[Vec<u32>] {
        self.rescan(true, false);
        &self.bar_mappers
    }

    fn forget_released(&mut self) {
        self.forget_released_now();
    }

    fn adopt(&mut self, port: usize, pid: u32) {
        if self.adopted.iter().any(|&(p, m)| p == pid && m & (1 << port) != 0) {
            return;
        }
        // A function has one driver at a time: the one before it lets go.
        for (_, m) in self.adopted.iter_mut() {
            *m &= !(1 << port);
        }
        self.adopted.retain(|&(_, m)| m != 0);
        match self.adopted.iter_mut().find(|(p, _)| *p == pid) {
            Some((_, m)) => *m |= 1 << port,
            None => self.adopted.push((pid, 1 << port)),
        }
        self.rescan(true, false);
    }

    fn maintain(&mut self) {
        match self.reader.as_ref() {
            Some(reader) => {
                if let Some(read) = reader.take() {
                    self.forget_released_in(read);
                }
            }
            None if self.last_release_look.elapsed() >= RELEASE_LOOK_PERIOD => self.forget_released_now(),
            None => {}
        }
        if self.last_maintain.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.last_maintain = Instant::now();
        // A driver that exited must not keep its hugepages alive through our mappings.
        let gone = self.regions.iter().any(|r| !std::path::Path::new(&format!("/proc/{}", r.key.pid)).exists());
        if gone {
            self.rescan(true, true);
        }
    }
}

/// Whether the mapping `key` is gone, given `lines`: what one read of its process's maps
/// showed. One read is no proof that a mapping is gone: the kernel writes the file a page at
/// a time and lets the process change its address space in between (Documentation/
/// filesystems/proc.rst), and Linux 6.17 and 6.18 can leave out a range that stayed mapped
/// while mappings there were split or merged (a driver that guards part of its memory with
/// `mprotect` splits it). A mapping missing from the read is gone only if
/// another mapping covers its addresses now, or the kernel has no mapping of that exact
/// range of that file (`/proc/<pid>/map_files`, looked up under the process's mmap lock).
fn released(key: &VmaKey, lines: &[VmaKey]) -> bool {
    if lines.contains(key) {
        return false;
    }
    if lines.iter().any(|l| l.pid == key.pid && l.start < key.end && key.start < l.end) {
        return true;
    }
    !std::fs::metadata(key.map_files_path()).is_ok_and(|m| split_dev(m.dev()) == key.dev && m.ino() == key.inode)
}

/// The candidate DMA mappings of `pids`, one read of each process's maps.
pub(super) fn read_maps(pids: &[u32]) -> Vec<VmaKey> {
    let mut lines = Vec::new();
    for &pid in pids {
        if let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) {
            lines.extend(maps.lines().filter_map(|l| parse_maps_line(pid, l)));
        }
    }
    lines
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

/// Pins `[vaddr, vaddr + len)` of process `pid` for the IOMMU: nicsim maps the memory behind
/// it, one piece per mapping of the process, and keeps it until the IOVAs are unmapped. Each
/// piece is `(nicsim's mapping, where the range starts in it, its length)`. Only shared
/// mappings of files can be shared with nicsim; private memory is refused (docs/nicsim.md).
fn pin(pid: u32, vaddr: u64, len: u64) -> Result<Vec<(MappedRegion, usize, u64)>, MapError> {
    let end = vaddr.checked_add(len).ok_or_else(|| MapError::Invalid(format!("{vaddr:#x}+{len:#x} wraps")))?;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| MapError::Fault(format!("reading the maps of process {pid}: {e}")))?;
    let shared: Vec<VmaKey> = maps.lines().filter_map(|l| parse_maps_line(pid, l)).collect();
    let mut pieces = Vec::new();
    let mut at = vaddr;
    while at < end {
        let v = shared.iter().find(|v| v.start <= at && at < v.end).ok_or_else(|| {
            MapError::Fault(format!(
                "process {pid} has no shared, writable file mapping at {at:#x}: nicsim's IOMMU pins only such memory (hugepages)"
            ))
        })?;
        let piece_end = end.min(v.end);
        // Whole hugepages around the piece, within the mapping: hugetlbfs maps no less.
        let from = (at & !(HUGEPAGE - 1)).max(v.start);
        let to = piece_end.next_multiple_of(HUGEPAGE).min(v.end);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(v.map_files_path())
            .map_err(|e| MapError::Fault(format!("opening the memory of process {pid} at {at:#x}: {e}")))?;
        let map = MappedRegion::map_file(&file, v.file_offset + (from - v.start), (to - from) as usize, false)
            .map_err(|e| MapError::Fault(format!("mapping the memory of process {pid} at {at:#x}: {e}")))?;
        pieces.push((map, (at - from) as usize, piece_end - at));
        at = piece_end;
    }
    Ok(pieces)
}

/// Maps a driver's VMA into nicsim if it is hugetlbfs-backed.
fn open_vma(v: &VmaKey) -> Option<MappedRegion> {
    let file = std::fs::OpenOptions::new().read(true).write(true).open(v.map_files_path()).ok()?;
    if !platform::fs::is_hugetlbfs(&file).ok()? {
        return None;
    }
    MappedRegion::map_file(&file, v.file_offset, (v.end - v.start) as usize, false).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use platform::{DmaBacking, DmaMemory};

    /// Memory a driver maps right after the device looked for it is found on its first use,
    /// however soon after the last look. (Scans skipped for 2 or 50 ms after the previous one
    /// reported such memory as a DMA fault.) Needs root and hugepages, as `make test` runs it.
    #[test]
    fn memory_mapped_between_two_looks_is_found() {
        let dir = platform::fs::ScratchDir::new("nicsim-unit", "discover").unwrap();
        let bar_path = dir.path().join("resource0");
        let bar =
            std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&bar_path).unwrap();
        bar.set_len(4096).unwrap();
        // This process maps the "BAR", so it is a driver to the space.
        let _bar_map = MappedRegion::map_file(&bar, 0, 4096, false).unwrap();
        let mut space = ProcDmaSpace::new(&[&bar]).unwrap();
        let mut blocks = Vec::new();
        for round in 0..10 {
            let backing = if round % 2 == 0 { DmaBacking::AnonymousHugetlb } else { DmaBacking::HugetlbfsFile(None) };
            let block = DmaMemory::allocate(HUGEPAGE as usize, backing).expect("a hugepage (make test reserves them)");
            let phys = block.phys(4096);
            assert!(space.locate(phys).is_none(), "round {round}: not known before it is looked for");
            assert!(space.discover(phys), "round {round}: memory mapped since the last look is found");
            assert!(space.locate(phys).is_some(), "round {round}");
            blocks.push(block);
        }
        // Memory this process did not give a device is still not found.
        let private = Box::new([0u8; 64]);
        let pagemap = Pagemap::open(None).unwrap();
        let private_phys = pagemap.translate(private.as_ptr() as usize).unwrap().unwrap_or(0x1000);
        assert!(!space.discover(private_phys), "private heap memory is not DMA memory");
    }

    /// A mapping left out of a read of the maps (as a read racing with changes to the address
    /// space may leave it out) is kept while the kernel still has it; one that another
    /// mapping replaced, or that is unmapped, is released. Needs hugepages, as `make test`
    /// provides.
    #[test]
    fn a_mapping_missing_from_one_read_of_the_maps_is_released_only_if_gone() {
        let block = DmaMemory::allocate(HUGEPAGE as usize, DmaBacking::AnonymousHugetlb).expect("a hugepage");
        let me = std::process::id();
        let start = block.region().virt_addr() as u64;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let key = maps.lines().filter_map(|l| parse_maps_line(me, l)).find(|v| v.start == start).unwrap();
        assert!(!released(&key, std::slice::from_ref(&key)), "in the read");
        assert!(!released(&key, &[]), "left out of the read, still mapped");
        let other = VmaKey { inode: key.inode + 1, ..key.clone() };
        assert!(released(&key, &[other]), "another mapping at its addresses");
        let other_offset = VmaKey { file_offset: key.file_offset + HUGEPAGE, ..key.clone() };
        assert!(released(&key, &[other_offset]), "the same file at another offset");
        drop(block);
        assert!(released(&key, &[]), "unmapped");
    }

    #[test]
    fn maps_lines_parse_and_filter() {
        let l = "7f0000000000-7f0000200000 rw-s 00000000 00:0f 123456 /anon_hugepage (deleted)";
        let v = parse_maps_line(7, l).unwrap();
        assert_eq!((v.start, v.end, v.dev, v.inode), (0x7f0000000000, 0x7f0000200000, (0, 0xf), 123456));
        assert!(parse_maps_line(7, "7f0-7f1 rw-p 00000000 00:0f 1 /x").is_none(), "private");
        assert!(parse_maps_line(7, "7f0-7f1 r--s 00000000 00:0f 1 /x").is_none(), "read-only");
        assert!(parse_maps_line(7, "7f0-7f1 rw-s 00000000 00:00 0 ").is_none(), "no file");
    }
}
