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
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

/// 2 MiB: the granularity of physical contiguity we rely on.
pub const HUGEPAGE: u64 = 2 << 20;

/// Resolves physical addresses for the device engines.
pub trait DmaSpace {
    /// The memory at `phys`: a region, the offset of `phys` in it, and how many bytes from there
    /// are physically contiguous in that region. `None` is a DMA fault.
    fn lookup(&mut self, phys: u64) -> Option<(&MappedRegion, usize, usize)>;

    /// Periodic housekeeping from the engine's slow path (e.g. dropping memory of processes
    /// that exited).
    fn maintain(&mut self) {}
}

/// Reads `buf.len()` bytes at `phys`; `false` on a DMA fault (then nothing was read).
#[inline(always)]
pub fn read(space: &mut impl DmaSpace, phys: u64, buf: &mut [u8]) -> bool {
    // Fast path: one contiguous extent.
    if let Some((region, off, avail)) = space.lookup(phys) {
        if avail >= buf.len() {
            region.read_bytes(off, buf);
            return true;
        }
    }
    each_extent(space, phys, buf.len(), |r, off, done, n| r.read_bytes(off, &mut buf[done..done + n]))
}

/// Writes `data` at `phys`; `false` on a DMA fault (then nothing was written).
#[inline(always)]
pub fn write(space: &mut impl DmaSpace, phys: u64, data: &[u8]) -> bool {
    if let Some((region, off, avail)) = space.lookup(phys) {
        if avail >= data.len() {
            region.write_bytes(off, data);
            return true;
        }
    }
    each_extent(space, phys, data.len(), |r, off, done, n| r.write_bytes(off, &data[done..done + n]))
}

/// Reads a little-endian u64.
#[inline(always)]
pub fn read_u64(space: &mut impl DmaSpace, phys: u64) -> Option<u64> {
    if let Some((region, off, avail)) = space.lookup(phys) {
        if avail >= 8 {
            return Some(region.read_u64(off));
        }
    }
    let mut b = [0u8; 8];
    read(space, phys, &mut b).then(|| u64::from_le_bytes(b))
}

/// Writes a little-endian u64 (one store when it does not straddle extents).
#[inline(always)]
pub fn write_u64(space: &mut impl DmaSpace, phys: u64, value: u64) -> bool {
    if let Some((region, off, avail)) = space.lookup(phys) {
        if avail >= 8 {
            region.write_u64(off, value);
            return true;
        }
    }
    write(space, phys, &value.to_le_bytes())
}

/// Writes a little-endian u32.
#[inline(always)]
pub fn write_u32(space: &mut impl DmaSpace, phys: u64, value: u32) -> bool {
    if let Some((region, off, avail)) = space.lookup(phys) {
        if avail >= 4 {
            region.write_u32(off, value);
            return true;
        }
    }
    write(space, phys, &value.to_le_bytes())
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
        match space.lookup(at) {
            Some((_, _, avail)) if avail > 0 => done += avail.min(len - done),
            _ => return false,
        }
    }
    let mut done = 0;
    while done < len {
        let (region, off, avail) = space.lookup(phys + done as u64).expect("checked above");
        let n = avail.min(len - done);
        f(region, off, done, n);
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
    fn lookup(&mut self, phys: u64) -> Option<(&MappedRegion, usize, usize)> {
        let off = phys.checked_sub(self.base)?;
        let off = usize::try_from(off).ok().filter(|&o| o < self.region.len())?;
        Some((&self.region, off, self.region.len() - off))
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
    /// The extent of the last successful lookup, copied out so the common case (the next
    /// access falls in the same extent) is two compares and an add.
    hit: Hit,
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
            hit: Hit::NONE,
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
    pub fn rescan(&mut self, full: bool) {
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
            // Forget mappings that are gone (process exited or unmapped them), releasing pages.
            self.regions.retain(|r| seen.contains(&r.key));
            self.driver_pids = drivers;
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
        self.hit = Hit::NONE;
    }

    #[cold]
    fn lookup_slow(&mut self, phys: u64) -> Option<usize> {
        if let Some(i) = self.find(phys) {
            return Some(i);
        }
        // Unknown address: maybe the driver allocated memory since the last scan.
        let now = Instant::now();
        let stale = |t: Option<Instant>, d: Duration| t.is_none_or(|t| now.duration_since(t) > d);
        if stale(self.last_quick_scan, Duration::from_millis(2)) {
            self.last_quick_scan = Some(now);
            self.rescan(false);
            if let Some(i) = self.find(phys) {
                return Some(i);
            }
        }
        if stale(self.last_full_scan, Duration::from_millis(50)) {
            self.last_full_scan = Some(now);
            self.rescan(true);
            return self.find(phys);
        }
        None
    }
}

impl DmaSpace for ProcDmaSpace {
    #[inline(always)]
    fn lookup(&mut self, phys: u64) -> Option<(&MappedRegion, usize, usize)> {
        let h = self.hit;
        if phys.wrapping_sub(h.phys) >= h.len {
            let i = self.lookup_slow(phys)?;
            let e = self.extents[i];
            self.hit = Hit { phys: e.phys, len: e.len, region: e.region, offset: e.offset };
        }
        let h = self.hit;
        let within = (phys - h.phys) as usize;
        let region = &self.regions.get(h.region)?.map;
        Some((region, h.offset + within, h.len as usize - within))
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
            self.rescan(true);
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
}
