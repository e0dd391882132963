//! Opening a virtio-net function and bringing it up [virtio 1.2 §3.1.1]: reset, ACKNOWLEDGE,
//! DRIVER, features (and FEATURES_OK through the modern interface), the queues, DRIVER_OK,
//! then promiscuous mode through the control queue, as ixy's virtio driver does.

use crate::transport::{Interface, Transport};
use crate::virtqueue::{desc_word, ring_bytes, Virtqueue, DESC_NEXT, DESC_WRITE};
use crate::DriverError;
use invariants::RingIndex;
use ixgbe::memory::RingArea;
use platform::dma::DeviceHold;
use platform::pci::PciFunction;
use std::path::Path;
use std::time::{Duration, Instant};

/// Device status bits [virtio 1.2 §2.1].
const ACKNOWLEDGE: u8 = 1;
const DRIVER: u8 = 2;
const DRIVER_OK: u8 = 4;
const FEATURES_OK: u8 = 8;
const NEEDS_RESET: u8 = 64;
const FAILED: u8 = 128;

/// The features this driver needs: the MAC address, the control queue and its receive-mode
/// commands [virtio 1.2 §5.1.3]. The net header always has its own descriptor, so
/// `ANY_LAYOUT` is not needed; no checksum or GSO offload is asked for.
const FEATURE_MAC: u64 = 1 << 5;
const FEATURE_CTRL_VQ: u64 = 1 << 17;
const FEATURE_CTRL_RX: u64 = 1 << 18;
const FEATURES: u64 = FEATURE_MAC | FEATURE_CTRL_VQ | FEATURE_CTRL_RX;
/// Through the modern interface: virtio 1.x, and per-queue reset where offered [virtio 1.2 §6].
const FEATURE_VERSION_1: u64 = 1 << 32;
pub(crate) const FEATURE_RING_RESET: u64 = 1 << 40;

/// Queue numbers [virtio 1.2 §5.1.2].
pub const RX_QUEUE: u16 = 0;
pub const TX_QUEUE: u16 = 1;
pub const CTRL_QUEUE: u16 = 2;

const VENDOR: u16 = 0x1AF4;
const DEVICE_NET_TRANSITIONAL: u16 = 0x1000;

/// An open, reset virtio-net function with its features negotiated. Dropping it resets the
/// device again; the queues borrow it, so they go first.
pub struct VirtioDevice {
    // The BAR before the function: the claim goes last.
    transport: Transport,
    function: PciFunction,
    mac: [u8; 6],
}

fn io(e: platform::PlatformError) -> DriverError {
    DriverError::Platform(e)
}

impl VirtioDevice {
    /// Opens function `address` under `sysfs` through its modern interface if it has one, else
    /// the legacy one (as Linux's virtio-pci does), resets it and negotiates features.
    pub fn open(sysfs: &Path, address: &str) -> Result<Self, DriverError> {
        Self::open_with(sysfs, address, None)
    }

    /// As [`Self::open`], through `interface` if given.
    pub fn open_with(sysfs: &Path, address: &str, interface: Option<Interface>) -> Result<Self, DriverError> {
        let function = PciFunction::open(sysfs, address).map_err(io)?;
        function
            .expect_ids(VENDOR, DEVICE_NET_TRANSITIONAL, "a transitional virtio-net device (1af4:1000)")
            .map_err(io)?;
        function.expect_unbound().map_err(io)?;
        let interface = match interface {
            Some(i) => i,
            None if Transport::has_modern(&function)? => Interface::Modern,
            None => Interface::Legacy,
        };
        let transport = Transport::open(&function, interface)?;
        function.enable_memory_and_bus_master().map_err(io)?;
        let mut d = VirtioDevice { transport, function, mac: [0; 6] };
        d.reset()?;
        d.transport.set_status(ACKNOWLEDGE)?;
        d.transport.set_status(ACKNOWLEDGE | DRIVER)?;
        let offered = d.transport.device_features()?;
        if offered & FEATURES != FEATURES {
            return Err(DriverError::Invalid(format!(
                "{address} offers virtio features {offered:#x} without MAC, CTRL_VQ or CTRL_RX ({FEATURES:#x}): this driver needs them"
            )));
        }
        let mut wanted = FEATURES;
        if interface == Interface::Modern {
            if offered & FEATURE_VERSION_1 == 0 {
                return Err(DriverError::Invalid(format!(
                    "{address} does not offer VERSION_1 through its modern interface: use the legacy interface"
                )));
            }
            wanted |= FEATURE_VERSION_1 | (offered & FEATURE_RING_RESET);
        }
        d.transport.set_driver_features(wanted)?;
        if interface == Interface::Modern {
            d.transport.set_status(ACKNOWLEDGE | DRIVER | FEATURES_OK)?;
            if d.transport.status()? & FEATURES_OK == 0 {
                return Err(DriverError::Invalid(format!(
                    "{address} refused the features {wanted:#x} (FEATURES_OK stayed clear)"
                )));
            }
        }
        d.mac = d.transport.config::<6>()?;
        Ok(d)
    }

    pub fn address(&self) -> &str {
        self.function.address()
    }

    /// The interface this driver uses.
    pub fn interface(&self) -> Interface {
        self.transport.interface()
    }

    /// Why the device can no longer be used as set up, if it says so: DEVICE_NEEDS_RESET, which
    /// a virtio 1.x device sets when it found a queue malformed and stopped it
    /// [virtio 1.2 §2.1.1], or a status that cannot be read. A device that completes chains it
    /// never had makes any driver offer more than the queue holds, so no driver can rule it
    /// out; what it can do is notice. (The legacy interface has no such bit.)
    pub fn broken(&self) -> Option<String> {
        match self.transport.status() {
            Ok(s) if s & NEEDS_RESET != 0 => Some(format!(
                "{}: the device set DEVICE_NEEDS_RESET (it stopped a queue it found malformed): start the driver again to set it up afresh",
                self.address()
            )),
            Ok(_) => None,
            Err(e) => Some(format!("{}: cannot read the device status: {e}", self.address())),
        }
    }

    /// The net header's bytes: 10 through the legacy interface (no mergeable buffers), 12 with
    /// VERSION_1 [virtio 1.2 §5.1.6].
    pub fn header_len(&self) -> usize {
        match self.interface() {
            Interface::Legacy => 10,
            Interface::Modern => 12,
        }
    }

    /// The MAC address from the device configuration.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The status bits the driver has set so far.
    fn driver_status(&self) -> u8 {
        match self.interface() {
            Interface::Legacy => ACKNOWLEDGE | DRIVER,
            Interface::Modern => ACKNOWLEDGE | DRIVER | FEATURES_OK,
        }
    }

    fn reset(&self) -> Result<(), DriverError> {
        self.transport.reset(self.address())
    }

    /// Gives queue `q` the ring of `n` entries whose descriptor table is at `desc`.
    pub(crate) fn set_queue(&self, q: u16, n: usize, rings: [u64; 3]) -> Result<(), DriverError> {
        self.transport.set_queue(self.address(), q, n, rings)
    }

    /// Takes queue `q` away from the device: returns once the device stopped using it.
    fn stop_queue(&self, q: u16) -> Result<(), DriverError> {
        self.transport.stop_queue(q, self.address())
    }

    /// Tells the device queue `q` has new buffers: a system call, made only for a device that
    /// asks to be notified ([`crate::virtqueue::Virtqueue::publish`]). Never inlined, so that
    /// the audit sees it as the one call out of the packet path.
    #[inline(never)]
    #[cold]
    pub fn notify(&self, q: u16) {
        self.transport.notify(q);
    }

    /// Sets DRIVER_OK (the queues are set up) and switches promiscuous mode on through the
    /// control queue in `area`, as ixy does. Returns the control queue, which must live as
    /// long as the device is used.
    pub fn start<'a, const N: usize>(&'a self, area: RingArea<'a>) -> Result<ControlQueue<'a, N>, DriverError> {
        let mut ctrl = ControlQueue::new(self, area)?;
        self.transport.set_status(self.driver_status() | DRIVER_OK)?;
        if self.transport.status()? & FAILED != 0 {
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
        let _ = self.transport.set_status(0);
    }
}

/// A queue the device was given, taken back when this is dropped (see
/// [`Transport::stop_queue`]). It holds DMA memory until then, and for ever if the device cannot
/// be told (`platform::dma::DeviceHold`).
pub(crate) struct GivenQueue<'a> {
    device: &'a VirtioDevice,
    queue: u16,
    hold: Option<DeviceHold>,
}

impl<'a> GivenQueue<'a> {
    /// Gives `device`'s queue `queue` the `rings` of `n` entries, holding DMA memory with `hold`.
    pub(crate) fn give(
        device: &'a VirtioDevice,
        queue: u16,
        n: usize,
        rings: [u64; 3],
        hold: DeviceHold,
    ) -> Result<Self, DriverError> {
        let given = GivenQueue { device, queue, hold: Some(hold) };
        device.set_queue(queue, n, rings)?;
        Ok(given)
    }

    pub(crate) fn device(&self) -> &'a VirtioDevice {
        self.device
    }
}

impl Drop for GivenQueue<'_> {
    fn drop(&mut self) {
        let hold = self.hold.take();
        if self.device.stop_queue(self.queue).is_err() {
            // The device may still use the memory: it stays mapped and is never handed out again.
            std::mem::forget(hold);
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
        let command_phys = area.device_address(ring_bytes(N), 4, "the control command")?;
        let given = GivenQueue::give(device, CTRL_QUEUE, N, q.rings(), area.hold())?;
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
