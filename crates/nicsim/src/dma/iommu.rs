//! An IOMMU of the VT-d kind, as VFIO's type1 back end drives it: one translation domain per
//! container, holding the I/O virtual addresses (IOVAs) its process mapped, and the functions
//! whose groups are attached to it. A function attached to a container reaches those IOVAs
//! and nothing else: every other address is a fault, reported as a DMAR fault is, and the
//! access is never performed. Mapped memory is pinned: nicsim maps it at `MAP_DMA` and keeps it
//! until `UNMAP_DMA` or the container goes, whatever the process does with its own mapping.
//!
//! Translations live at region indices from [`IOMMU_REGIONS`] up, beside the physical
//! address space of [`super::ProcDmaSpace`]; every change bumps that space's generation, so no
//! engine keeps a translation across an unmap (an IOTLB invalidation).

use super::{Location, Window};
use platform::MappedRegion;

/// Region indices from here on name IOMMU mappings.
pub const IOMMU_REGIONS: usize = 1 << 24;

/// The IOVA ranges the domain accepts: a 48-bit address width, less the interrupt window
/// that x86 IOMMUs reserve (0xfee0_0000..=0xfeef_ffff), as the kernel reports them.
pub const IOVA_RANGES: [(u64, u64); 2] = [(0, 0xfedf_ffff), (0xfef0_0000, (1 << 48) - 1)];

/// The unmapped ranges a container remembers, for `nicsim fault dma`.
const REMEMBERED_UNMAPS: usize = 64;

/// One `MAP_DMA`, or the part of one that lies in one mapping of its process.
struct IovaMap {
    container: u64,
    iova: u64,
    len: u64,
    /// nicsim's mapping of the memory, and where the IOVA range starts in it.
    map: MappedRegion,
    offset: usize,
}

/// A container: a process's IOMMU domain.
#[derive(Debug, Clone)]
pub struct Container {
    pub id: u64,
    pub pid: u32,
    /// Ranges unmapped lately (newest last).
    pub unmapped: Vec<(u64, u64)>,
}

/// Every container and the functions attached to them.
#[derive(Default)]
pub struct Iommu {
    containers: Vec<Container>,
    maps: Vec<IovaMap>,
    /// Per port: the container it is attached to.
    attached: Vec<Option<u64>>,
}

/// Why a `MAP_DMA` was refused, as the kernel's errno.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapError {
    /// Not page-aligned, empty, or outside [`IOVA_RANGES`] (EINVAL).
    Invalid(String),
    /// Overlaps an existing mapping (EEXIST).
    Exists(String),
    /// The process has no such memory, or memory nicsim cannot share (EFAULT).
    Fault(String),
}

impl MapError {
    /// The message, led by the errno name the VFIO call fails with.
    pub fn to_errno_message(&self) -> String {
        match self {
            MapError::Invalid(m) => format!("EINVAL: {m}"),
            MapError::Exists(m) => format!("EEXIST: {m}"),
            MapError::Fault(m) => format!("EFAULT: {m}"),
        }
    }
}

impl Iommu {
    /// The container port `port` is attached to.
    #[inline(always)]
    pub fn domain_of(&self, port: usize) -> Option<u64> {
        self.attached.get(port).copied().flatten()
    }

    pub fn containers(&self) -> &[Container] {
        &self.containers
    }

    /// Attaches `port` to container `id` of process `pid` (made if new). A port attached to
    /// another container leaves it.
    pub fn attach(&mut self, id: u64, pid: u32, port: usize) {
        if !self.containers.iter().any(|c| c.id == id) {
            self.containers.push(Container { id, pid, unmapped: Vec::new() });
        }
        if self.attached.len() <= port {
            self.attached.resize(port + 1, None);
        }
        self.attached[port] = Some(id);
    }

    /// Maps `[iova, iova + len)` of container `id` onto `pieces`: nicsim's mappings of the
    /// process's memory at `vaddr`, in order, each with the offset where the range starts.
    pub fn map(
        &mut self,
        id: u64,
        iova: u64,
        len: u64,
        pieces: Vec<(MappedRegion, usize, u64)>,
    ) -> Result<(), MapError> {
        if !self.containers.iter().any(|c| c.id == id) {
            return Err(MapError::Invalid(format!("container {id} has no group attached")));
        }
        check_range(iova, len)?;
        if let Some(m) = self.maps.iter().find(|m| m.container == id && m.iova < iova + len && iova < m.iova + m.len) {
            return Err(MapError::Exists(format!(
                "IOVA {iova:#x}+{len:#x} overlaps the mapping at {:#x}+{:#x}",
                m.iova, m.len
            )));
        }
        let mut at = iova;
        for (map, offset, piece) in pieces {
            self.maps.push(IovaMap { container: id, iova: at, len: piece, map, offset });
            at += piece;
        }
        Ok(())
    }

    /// Unmaps every mapping of container `id` inside `[iova, iova + len)`; returns the bytes
    /// unmapped, or an error if the range cuts a mapping in two (type1 v2 refuses that).
    pub fn unmap(&mut self, id: u64, iova: u64, len: u64) -> Result<u64, MapError> {
        let end = iova.saturating_add(len);
        let cut = |m: &IovaMap| m.container == id && m.iova < end && iova < m.iova + m.len;
        if self.maps.iter().any(|m| cut(m) && (m.iova < iova || m.iova + m.len > end)) {
            return Err(MapError::Invalid(format!("{iova:#x}+{len:#x} unmaps part of a mapping: unmap it whole")));
        }
        let mut bytes = 0;
        let mut gone = Vec::new();
        self.maps.retain(|m| {
            if cut(m) {
                bytes += m.len;
                gone.push((m.iova, m.len));
                false
            } else {
                true
            }
        });
        if let Some(c) = self.containers.iter_mut().find(|c| c.id == id) {
            c.unmapped.extend(gone);
            let excess = c.unmapped.len().saturating_sub(REMEMBERED_UNMAPS);
            c.unmapped.drain(..excess);
        }
        Ok(bytes)
    }

    /// Removes container `id` with its mappings; returns the ports that were attached to it,
    /// which the caller resets (as vfio-pci resets a function its last user released).
    pub fn release(&mut self, id: u64) -> Vec<usize> {
        self.maps.retain(|m| m.container != id);
        self.containers.retain(|c| c.id != id);
        let mut ports = Vec::new();
        for (port, a) in self.attached.iter_mut().enumerate() {
            if *a == Some(id) {
                *a = None;
                ports.push(port);
            }
        }
        ports
    }

    /// The ports attached to container `id`.
    pub fn ports_of(&self, id: u64) -> Vec<usize> {
        (0..self.attached.len()).filter(|&p| self.attached[p] == Some(id)).collect()
    }

    /// Containers whose process is gone.
    pub fn orphans(&self) -> Vec<u64> {
        self.containers
            .iter()
            .filter(|c| !std::path::Path::new(&format!("/proc/{}", c.pid)).exists())
            .map(|c| c.id)
            .collect()
    }

    /// Bytes container `id` maps.
    pub fn mapped_bytes(&self, id: u64) -> u64 {
        self.maps.iter().filter(|m| m.container == id).map(|m| m.len).sum()
    }

    /// Whether `iova` is mapped in container `id`.
    pub fn is_mapped(&self, id: u64, iova: u64) -> bool {
        self.maps.iter().any(|m| m.container == id && iova.wrapping_sub(m.iova) < m.len)
    }

    /// The mappings of container `id` as `(iova, len)`.
    pub fn ranges(&self, id: u64) -> Vec<(u64, u64)> {
        self.maps.iter().filter(|m| m.container == id).map(|m| (m.iova, m.len)).collect()
    }

    /// `iova` translated in container `id`.
    pub fn window(&self, id: u64, iova: u64) -> Option<Window> {
        let (k, m) =
            self.maps.iter().enumerate().find(|(_, m)| m.container == id && iova.wrapping_sub(m.iova) < m.len)?;
        Some(Window { phys: m.iova, len: m.len, region: IOMMU_REGIONS + k, offset: m.offset })
    }

    pub fn locate(&self, id: u64, iova: u64) -> Option<Location> {
        let w = self.window(id, iova)?;
        let within = iova - w.phys;
        Some(Location { region: w.region, offset: w.offset + within as usize, avail: (w.len - within) as usize })
    }

    /// The mapping behind region index `index` (at least [`IOMMU_REGIONS`]).
    #[inline(always)]
    pub fn region(&self, index: usize) -> &MappedRegion {
        &self.maps[index - IOMMU_REGIONS].map
    }
}

fn check_range(iova: u64, len: u64) -> Result<(), MapError> {
    const PAGE: u64 = 4096;
    if len == 0 || iova % PAGE != 0 || len % PAGE != 0 {
        return Err(MapError::Invalid(format!("IOVA {iova:#x}+{len:#x}: give whole 4 KiB pages")));
    }
    let end = iova.checked_add(len - 1).ok_or_else(|| MapError::Invalid(format!("IOVA {iova:#x}+{len:#x} wraps")))?;
    if !IOVA_RANGES.iter().any(|&(s, e)| s <= iova && end <= e) {
        return Err(MapError::Invalid(format!(
            "IOVA {iova:#x}+{len:#x} is outside the domain's ranges (VFIO_IOMMU_GET_INFO lists them)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anon(len: usize) -> MappedRegion {
        MappedRegion::anonymous(len).expect("anonymous memory")
    }

    #[test]
    fn a_domain_translates_only_what_its_container_mapped() {
        let mut iommu = Iommu::default();
        iommu.attach(1, 10, 0);
        iommu.attach(2, 20, 1);
        iommu.map(1, 0x10_0000, 0x2000, vec![(anon(0x3000), 0x1000, 0x2000)]).unwrap();
        let l = iommu.locate(1, 0x10_1800).unwrap();
        assert_eq!((l.region, l.offset, l.avail), (IOMMU_REGIONS, 0x1000 + 0x1800, 0x800));
        assert!(iommu.locate(1, 0x10_2000).is_none(), "one past the end");
        assert!(iommu.locate(1, 0x0f_f000).is_none(), "below the start");
        assert!(iommu.locate(2, 0x10_1800).is_none(), "another container's mapping");
        assert_eq!(iommu.domain_of(1), Some(2));
    }

    #[test]
    fn overlaps_partial_unmaps_and_the_interrupt_window_are_refused() {
        let mut iommu = Iommu::default();
        iommu.attach(1, 10, 0);
        iommu.map(1, 0x20_0000, 0x4000, vec![(anon(0x4000), 0, 0x4000)]).unwrap();
        assert!(matches!(iommu.map(1, 0x20_3000, 0x1000, vec![]), Err(MapError::Exists(_))));
        assert!(matches!(iommu.map(1, 0xfee0_0000, 0x1000, vec![]), Err(MapError::Invalid(_))));
        assert!(matches!(iommu.map(1, 0x1000, 0x800, vec![]), Err(MapError::Invalid(_))));
        assert!(matches!(iommu.unmap(1, 0x20_1000, 0x1000), Err(MapError::Invalid(_))));
        assert_eq!(iommu.unmap(1, 0x20_0000, 0x4000), Ok(0x4000));
        assert!(iommu.locate(1, 0x20_0000).is_none());
        assert_eq!(iommu.containers()[0].unmapped, vec![(0x20_0000, 0x4000)]);
    }

    #[test]
    fn a_released_container_frees_its_ports_and_mappings() {
        let mut iommu = Iommu::default();
        iommu.attach(7, 10, 0);
        iommu.attach(7, 10, 2);
        iommu.map(7, 0x1000, 0x1000, vec![(anon(0x1000), 0, 0x1000)]).unwrap();
        assert_eq!(iommu.release(7), vec![0, 2]);
        assert_eq!(iommu.domain_of(0), None);
        assert_eq!(iommu.mapped_bytes(7), 0);
        assert!(iommu.containers().is_empty());
    }
}
