//! `nicsim fault dma`: a device that reads and writes where the driver gave it nothing. Each
//! access is aimed outside the function's mappings and put through the same translation as
//! the device's own DMA; behind an IOMMU domain every one is refused. None is ever performed,
//! with or without a domain: nicsim only counts what would have reached driver memory.

use crate::dma::DmaSpace;
use crate::port::Port;

/// Makes `count` such accesses on `port` now; the results are in `port.hostile_dma`.
pub(super) fn hostile_dma(port: &mut Port, dma: &impl DmaSpace, count: u64, seed: u64) {
    let mut rng = seed.max(1);
    let mut next = move || {
        // xorshift64: reproducible from the seed, no allocation.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let targets = Targets::of(port.index, dma);
    let mut logged = 0;
    for n in 0..count {
        let Some(addr) = targets.pick(n, &mut next, dma) else { continue };
        let write = n % 2 == 1;
        port.hostile_dma.attempted += 1;
        if dma.locate_for(port.index, addr).is_some() {
            port.hostile_dma.reached += 1;
            continue;
        }
        port.hostile_dma.refused += 1;
        if targets.container.is_some() {
            port.iommu_faults += 1;
            if logged < 3 {
                logged += 1;
                eprintln!(
                    "nicsim: IOMMU fault: port {} hostile {} at IOVA {addr:#x}: not mapped in the function's container; refused",
                    port.index,
                    if write { "write" } else { "read" }
                );
            }
        }
    }
    eprintln!(
        "nicsim: port {}: {} hostile DMA accesses so far, {} refused, {} would have reached driver memory (none performed)",
        port.index, port.hostile_dma.attempted, port.hostile_dma.refused, port.hostile_dma.reached
    );
}

/// Where the hostile accesses go.
struct Targets {
    container: Option<u64>,
    /// The driver's own mappings (virtual address ranges), which its container does not map.
    driver_memory: Vec<(u64, u64)>,
    /// Ranges the container unmapped lately, or else the ends of its mappings.
    unmapped: Vec<(u64, u64)>,
}

impl Targets {
    fn of(port: usize, dma: &impl DmaSpace) -> Targets {
        let iommu = dma.iommu();
        let container = iommu.and_then(|i| i.domain_of(port));
        let (mut driver_memory, mut unmapped) = (Vec::new(), Vec::new());
        if let (Some(iommu), Some(id)) = (iommu, container) {
            if let Some(c) = iommu.containers().iter().find(|c| c.id == id) {
                driver_memory = process_ranges(c.pid);
                unmapped = c.unmapped.clone();
            }
            if unmapped.is_empty() {
                unmapped = iommu.ranges(id).into_iter().map(|(iova, len)| (iova + len, 4096)).collect();
            }
        }
        Targets { container, driver_memory, unmapped }
    }

    /// Access `n`'s address, outside every mapping of the container (`None`: none found).
    fn pick(&self, n: u64, next: &mut impl FnMut() -> u64, dma: &impl DmaSpace) -> Option<u64> {
        let within = |(start, len): (u64, u64), r: u64| start + (r % len.max(1)) / 8 * 8;
        for _ in 0..16 {
            let r = next();
            let addr = match n % 3 {
                1 if !self.driver_memory.is_empty() => {
                    within(self.driver_memory[(r as usize >> 3) % self.driver_memory.len()], r >> 11)
                }
                2 if !self.unmapped.is_empty() => {
                    within(self.unmapped[(r as usize >> 3) % self.unmapped.len()], r >> 11)
                }
                _ => (r >> 16) & ((1 << 48) - 8),
            };
            let mapped = match (dma.iommu(), self.container) {
                (Some(iommu), Some(id)) => iommu.is_mapped(id, addr),
                _ => false,
            };
            if !mapped {
                return Some(addr);
            }
        }
        None
    }
}

/// The address ranges process `pid` maps, from `/proc/<pid>/maps`.
fn process_ranges(pid: u32) -> Vec<(u64, u64)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    maps.lines()
        .filter_map(|l| {
            let (s, e) = l.split_whitespace().next()?.split_once('-')?;
            let (s, e) = (u64::from_str_radix(s, 16).ok()?, u64::from_str_radix(e, 16).ok()?);
            (e > s).then_some((s, e - s))
        })
        .collect()
}
