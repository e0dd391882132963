//! A DMA space over one region at a fixed physical base, for unit tests of the device model.

use super::{DmaSpace, Location, Window};
use platform::MappedRegion;

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
