//! DMA memory for the rings of a device other than the 82599 (`crates/virtio`), a simulated
//! one: plain areas of a region of the trusted base (`platform::dma`), and a pool of buffers
//! in the same region, which move between both kinds of device unchanged.

use crate::device::DriverError;
use crate::queues::BufferPool;
use invariants::{DeviceValue, VolatileArray, VolatilePtr};
use platform::dma::{BuffersArea, DeviceHold, DmaLayout, DmaRegion, PlainArea, PlainMemory};

/// Areas for a device's rings, each of its own size and alignment, and a pool of buffers, in
/// one region. A queue made on an area holds a [`DeviceHold`] ([`RingArea::hold`]) while the
/// device may use it, so the region outlives the device's use of it.
pub struct RingsAndPool {
    region: DmaRegion,
    areas: Vec<PlainArea>,
    buffers: BuffersArea,
}

impl RingsAndPool {
    /// Areas of `(size, alignment)` each, and a pool of `pool` buffers.
    pub fn allocate(areas: &[(usize, usize)], pool: usize) -> Result<Self, DriverError> {
        let mut layout = DmaLayout::new();
        let areas = areas.iter().map(|&(size, align)| layout.plain(size, align)).collect::<Result<Vec<_>, _>>()?;
        let buffers = layout.buffers(pool)?;
        Ok(RingsAndPool { region: DmaRegion::allocate(&layout)?, areas, buffers })
    }

    /// Every area, in the order allocated, and the pool; once per exclusive borrow, as
    /// [`crate::queues::QueueMemory::parts`].
    pub fn parts(&mut self) -> Result<(Vec<RingArea<'_>>, BufferPool<'_>), DriverError> {
        let region = &self.region;
        let areas = self
            .areas
            .iter()
            .map(|&a| Ok(RingArea { memory: region.plain(a)? }))
            .collect::<Result<_, DriverError>>()?;
        Ok((areas, BufferPool::new(region, self.buffers)?))
    }
}

/// One area of a [`RingsAndPool`]: volatile access to its bytes and their bus addresses.
/// Offsets are within the area; what lies outside it is out of reach.
pub struct RingArea<'a> {
    memory: PlainMemory<'a>,
}

impl<'a> RingArea<'a> {
    /// The `T` at `at`; `None` outside the area or misaligned.
    pub fn ptr<T: DeviceValue>(&self, at: usize) -> Option<VolatilePtr<'a, T>> {
        self.memory.memory().ptr(at)
    }

    /// `N` consecutive `T`s at `at`; `None` outside the area or misaligned.
    pub fn array<T: DeviceValue, const N: usize>(&self, at: usize) -> Option<VolatileArray<'a, T, N>> {
        self.memory.memory().array(at)
    }

    /// The bus address of `[at, at + len)`, which must lie in the area.
    pub fn device_address(&self, at: usize, len: usize, what: &str) -> Result<u64, DriverError> {
        self.memory.device_address(at, len).ok_or_else(|| DriverError::Invalid(format!("{what} outside its area")))
    }

    /// A hold on DMA memory for a device queue about to be given this area.
    pub fn hold(&self) -> DeviceHold {
        DeviceHold::new()
    }
}

/// Pools of buffers in frames ([`platform::dma::DmaLayout::frames`]), all in one region that
/// holds nothing else: memory an AF_XDP socket may take as its UMEM (`crates/afxdp`), whose
/// buffers also move to and from the other devices unchanged.
pub struct FramePools {
    region: DmaRegion,
    pools: Vec<BuffersArea>,
}

impl FramePools {
    /// One pool of `size` buffers for each entry of `sizes`.
    pub fn allocate(sizes: &[usize]) -> Result<Self, DriverError> {
        let mut layout = DmaLayout::new();
        let pools = sizes.iter().map(|&n| layout.frames(n)).collect::<Result<Vec<_>, _>>()?;
        Ok(FramePools { region: DmaRegion::allocate(&layout)?, pools })
    }

    /// The region (for the sockets' UMEM) and every pool, in the order allocated; once per
    /// exclusive borrow, as [`crate::queues::QueueMemory::parts`].
    pub fn parts(&mut self) -> Result<(&DmaRegion, Vec<BufferPool<'_>>), DriverError> {
        let region = &self.region;
        let pools = self.pools.iter().map(|&a| BufferPool::new(region, a)).collect::<Result<_, _>>()?;
        Ok((region, pools))
    }
}
