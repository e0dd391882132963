//! Opening a legacy virtio-net function and bringing it up [virtio 1.2 §3.1.1, §4.1.4.8]:
//! reset, ACKNOWLEDGE, DRIVER, features, the queues' page frame numbers, DRIVER_OK, then
//! promiscuous mode through the control queue, as ixy's virtio driver does.

use crate::virtqueue::{desc_word, ring_bytes, Virtqueue, DESC_NEXT, DESC_WRITE};
use crate::DriverError;
use invariants::RingIndex;
use ixgbe::memory::{DmaLease, RingArea};
use platform::pci::{IoBar, PciFunction};
use std::path::Path;
use std::time::{Duration, Instant};

/// Legacy register offsets in I/O BAR0 [virtio 1.2 §4.1.4.8].
const HOST_FEATURES: u64 = 0;
const GUEST_FEATURES: u64 = 4;
const QUEUE_PFN: u64 = 8;
const QUEUE_NUM: u64 = 12;
const QUEUE_SEL: u64 = 14;
const QUEUE_NOTIFY: u64 = 16;
const STATUS: u64 = 18;
/// Device configuration without MSI-X: the MAC address [virtio 1.2 §5.1.4].
const CONFIG_MAC: u64 = 20;

/// Device status bits [virtio 1.2 §2.1].
const ACKNOWLEDGE: u8 = 1;
const DRIVER: u8 = 2;
const DRIVER_OK: u8 = 4;
const FAILED: u8 = 128;

/// The features this driver needs: the MAC address, the control queue and its receive-mode
/// commands [virtio 1.2 §5.1.3]. The net header always has its own descriptor, so
/// `ANY_LAYOUT` is not needed; no checksum or GSO offload is asked for.
const FEATURE_MAC: u32 = 1 << 5;
const FEATURE_CTRL_VQ: u32 = 1 << 17;
const FEATURE_CTRL_RX: u32 = 1 << 18;
const FEATURES: u32 = FEATURE_MAC | FEATURE_CTRL_VQ | FEATURE_CTRL_RX;

/// Queue numbers [virtio 1.2 §5.1.2].
pub const RX_QUEUE: u16 = 0;
pub const TX_QUEUE: u16 = 1;
pub const CTRL_QUEUE: u16 = 2;

const VENDOR: u16 = 0x1AF4;
const DEVICE_NET_TRANSITIONAL: u16 = 0x1000;

/// An open, reset virtio-net function with its features negotiated. Dropping it resets the
/// device again; the queues borrow it, so they go first.
pub struct VirtioDevice {
    // The I/O BAR before the function: the claim goes last.
    bar: IoBar,
    function: PciFunction,
    mac: [u8; 6],
}

fn io(e: platform::PlatformError) -> DriverError {
    DriverError::Platform(e)
}

impl VirtioDevice {
    /// Opens function `address` under `sysfs`, resets it and negotiates features.
    pub fn open(sysfs: &Path, address: &str) -> Result<Self, DriverError> {
        let function = PciFunction::open(sysfs, address).map_err(io)?;
        function
            .expect_ids(VENDOR, DEVICE_NET_TRANSITIONAL, "a transitional virtio-net device (1af4:1000)")
            .map_err(io)?;
        function.expect_unbound().map_err(io)?;
        let bar = function.open_io_bar0().map_err(io)?;
        function.enable_memory_and_bus_master().map_err(io)?;
        let mut d = VirtioDevice { bar, function, mac: [0; 6] };
        d.reset()?;
        d.set_status(ACKNOWLEDGE)?;
        d.set_status(ACKNOWLEDGE | DRIVER)?;
        let offered = u32::from_le_bytes(d.bar.read::<4>(HOST_FEATURES).map_err(io)?);
        if offered & FEATURES != FEATURES {
            return Err(DriverError::Invalid(format!(
                "{address} offers virtio features {offered:#010x} without MAC, CTRL_VQ or CTRL_RX ({FEATURES:#010x}): this driver needs them"
            )));
        }
        d.bar.write(GUEST_FEATURES, &FEATURES.to_le_bytes()).map_err(io)?;
        d.mac = d.bar.read::<6>(CONFIG_MAC).map_err(io)?;
        Ok(d)
    }

    pub fn address(&self) -> &str {
        self.function.address()
    }

    /// The MAC address from the device configuration.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn status(&self) -> Result<u8, DriverError> {
        Ok(self.bar.read::<1>(STATUS).map_err(io)?[0])
    }

    fn set_status(&self, status: u8) -> Result<(), DriverError> {
        self.bar.write(STATUS, &[status]).map_err(io)
    }

    /// Writes 0 to the status and waits until it reads 0 [virtio 1.2 §4.1.4.3.2].
    fn reset(&self) -> Result<(), DriverError> {
        self.set_status(0)?;
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.status()? != 0 {
            if Instant::now() > deadline {
                return Err(DriverError::Timeout { address: self.address().into(), what: "the device reset" });
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(())
    }

    /// Gives queue `q` the ring at page frame `pfn`, after checking that the device's queue
    /// has `n` entries (legacy queues have the size the device says).
    pub(crate) fn set_queue(&self, q: u16, n: usize, pfn: u32) -> Result<(), DriverError> {
        self.bar.write(QUEUE_SEL, &q.to_le_bytes()).map_err(io)?;
        let size = u16::from_le_bytes(self.bar.read::<2>(QUEUE_NUM).map_err(io)?);
        if usize::from(size) != n {
            return Err(DriverError::Invalid(format!(
                "{}: queue {q} has {size} entries, the driver was built for {n}: use rings of {size}",
                self.address()
            )));
        }
        self.bar.write(QUEUE_PFN, &pfn.to_le_bytes()).map_err(io)
    }

    /// Takes queue `q` away from the device: the write returns once the device stopped
    /// using it (a legacy device handles the access synchronously).
    fn stop_queue(&self, q: u16) -> Result<(), DriverError> {
        self.bar.write(QUEUE_SEL, &q.to_le_bytes()).map_err(io)?;
        self.bar.write(QUEUE_PFN, &0u32.to_le_bytes()).map_err(io)
    }

    /// Tells the device queue `q` has new buffers: a system call, made only for a device that
    /// asks to be notified ([`crate::virtqueue::Virtqueue::publish`]). Never inlined, so that
    /// the audit sees it as the one call out of the packet path.
    #[inline(never)]
    #[cold]
    pub fn notify(&self, q: u16) {
        let _ = self.bar.write(QUEUE_NOTIFY, &q.to_le_bytes());
    }

    /// Sets DRIVER_OK (the queues are set up) and switches promiscuous mode on through the
    /// control queue in `area`, as ixy does. Returns the control queue, which must live as
    /// long as the device is used.
    pub fn start<'a, const N: usize>(&'a self, area: RingArea<'a>) -> Result<ControlQueue<'a, N>, DriverError> {
        let mut ctrl = ControlQueue::new(self, area)?;
        self.set_status(ACKNOWLEDGE | DRIVER | DRIVER_OK)?;
        if self.status()? & FAILED != 0 {
            return Err(DriverError::Invalid(format!("{}: the device refused DRIVER_OK (FAILED)", self.address())));
        }
        let ack = ctrl.command(0, 0, 1)?;
        if ack != 0 {
            return Err(DriverError::Invalid(format!(
                "{}: the device refused promiscuous mode (ack {ack})",
                self.address()
            )));
        }
        Ok(ctrl)
    }
}

impl Drop for VirtioDevice {
    fn drop(&mut self) {
        let _ = self.set_status(0);
    }
}

/// A queue the device was given, taken back when this is dropped: its page frame number set to
/// 0, which a legacy device handles before the write returns. It holds a lease on the queue's
/// memory until then, and for ever if the device cannot be told (see `ixgbe::memory::DmaBlock`).
pub(crate) struct GivenQueue<'a> {
    device: &'a VirtioDevice,
    queue: u16,
    lease: Option<DmaLease>,
}

impl<'a> GivenQueue<'a> {
    /// Gives `device`'s queue `queue` the ring at `pfn` of `n` entries in the memory `lease` holds.
    pub(crate) fn give(
        device: &'a VirtioDevice,
        queue: u16,
        n: usize,
        pfn: u32,
        lease: DmaLease,
    ) -> Result<Self, DriverError> {
        let given = GivenQueue { device, queue, lease: Some(lease) };
        device.set_queue(queue, n, pfn)?;
        Ok(given)
    }

    pub(crate) fn device(&self) -> &'a VirtioDevice {
        self.device
    }
}

impl Drop for GivenQueue<'_> {
    fn drop(&mut self) {
        let lease = self.lease.take();
        if self.device.stop_queue(self.queue).is_err() {
            // The device may still use the memory: it stays mapped and is never handed out again.
            std::mem::forget(lease);
        }
    }
}

/// The control queue [virtio 1.2 §5.1.6.5]: one command at a time, in the queue's area after its ring.
pub struct ControlQueue<'a, const N: usize> {
    q: Virtqueue<'a, N>,
    area: RingArea<'a>,
    /// Bus address of the command bytes: class, command, data, ack.
    command_phys: u64,
    given: GivenQueue<'a>,
}

impl<'a, const N: usize> ControlQueue<'a, N> {
    fn new(device: &'a VirtioDevice, area: RingArea<'a>) -> Result<Self, DriverError> {
        let q = Virtqueue::<N>::new(&area)?;
        let command_phys = area.device_address(ring_bytes(N), 4, "the control command")?.get();
        let given = GivenQueue::give(device, CTRL_QUEUE, N, q.pfn, area.lease())?;
        Ok(ControlQueue { q, area, command_phys, given })
    }

    /// Sends `class`/`command` with one byte of data and returns the device's ack (0: OK).
    /// Three descriptors, as ixy: the header, the data, the ack (QEMU wants them apart).
    pub fn command(&mut self, class: u8, command: u8, data: u8) -> Result<u8, DriverError> {
        let bytes = self
            .area
            .ptr::<[u8; 4]>(ring_bytes(N))
            .ok_or_else(|| DriverError::Invalid("control command layout".into()))?;
        bytes.write([class, command, data, 0xFF]);
        let (d0, d1, d2) = (RingIndex::<N>::wrapping(0), RingIndex::<N>::wrapping(1), RingIndex::<N>::wrapping(2));
        self.q.set_desc(d0, self.command_phys, desc_word(2, DESC_NEXT, 1));
        self.q.set_desc(d1, self.command_phys + 2, desc_word(1, DESC_NEXT, 2));
        self.q.set_desc(d2, self.command_phys + 3, desc_word(1, DESC_WRITE, 0));
        self.q.offer(d0);
        if self.q.publish() {
            self.given.device().notify(CTRL_QUEUE);
        }
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.q.peek_used().is_none() {
            if Instant::now() > deadline {
                let address = self.given.device().address().to_string();
                return Err(DriverError::Timeout { address, what: "the control queue's answer" });
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        self.q.consume();
        Ok(bytes.read()[3])
    }
}
