//! A virtio-net device [virtio 1.2 §5.1], nicsim's second kind of PCI function.
//!
//! Its registers live in [`Registers`], shared between the two transports that drivers access
//! (the legacy I/O BAR of [`legacy`] and the virtio 1.x memory BAR of [`modern`], both served
//! through [`crate::iofs`], so that each access is seen) and the engine, which moves frames through the split virtqueues ([`queue`]) in the port's
//! receive and transmit paths (`port/virtio_net.rs`). A register write that changes what the
//! engine does (a queue address, the status, a reset) returns only once the engine has taken
//! it, as the write completes on a device: a driver that resets the device and frees its rings
//! never has them used after that. docs/virtio.md describes the device; docs/nicsim.md says
//! where it differs from the specification.

pub mod control;
pub mod legacy;
pub mod modern;
pub mod queue;

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Red Hat's PCI vendor ID, which every virtio device has [virtio 1.2 §4.1.2].
pub const VENDOR_VIRTIO: u16 = 0x1AF4;
/// The transitional virtio-net device: 0x1000 + device type 1 − 1 [virtio 1.2 §4.1.2.3].
pub const DEVICE_NET_TRANSITIONAL: u16 = 0x1000;
/// A transitional device's subsystem device ID is its device type: 1, network.
pub const SUBSYSTEM_NET: u16 = 1;

/// Queues: receive 0, transmit 1, control 2 (no `VIRTIO_NET_F_MQ`) [virtio 1.2 §5.1.2].
pub const RX: usize = 0;
pub const TX: usize = 1;
pub const CTRL: usize = 2;
pub const QUEUES: usize = 3;
/// Entries per queue. Legacy queues have the size the device says [virtio 1.2 §4.1.5.1.3.1].
pub const QUEUE_SIZE: u16 = 256;

/// Feature bits [virtio 1.2 §5.1.3, §6].
pub mod feature {
    pub const CSUM: u64 = 1 << 0;
    pub const GUEST_CSUM: u64 = 1 << 1;
    pub const MAC: u64 = 1 << 5;
    pub const STATUS: u64 = 1 << 16;
    pub const CTRL_VQ: u64 = 1 << 17;
    pub const CTRL_RX: u64 = 1 << 18;
    pub const CTRL_VLAN: u64 = 1 << 19;
    pub const CTRL_RX_EXTRA: u64 = 1 << 20;
    pub const CTRL_MAC_ADDR: u64 = 1 << 23;
    /// Legacy only: the net header need not have a descriptor of its own [virtio 1.2 §2.7.4.3].
    pub const ANY_LAYOUT: u64 = 1 << 27;
    pub const VERSION_1: u64 = 1 << 32;
    /// One queue can be reset and re-enabled alone [virtio 1.2 §2.6.1].
    pub const RING_RESET: u64 = 1 << 40;
    /// What the device offers through the legacy interface (which shows bits 0-31 only).
    /// Every control-queue class QEMU's device offers but multiqueue and announcements.
    pub const LEGACY: u64 =
        CSUM | GUEST_CSUM | MAC | STATUS | CTRL_VQ | CTRL_RX | CTRL_VLAN | CTRL_RX_EXTRA | CTRL_MAC_ADDR | ANY_LAYOUT;
    /// What a transitional device offers: the legacy bits, and through the modern interface
    /// virtio 1.x with per-queue reset.
    pub const TRANSITIONAL: u64 = LEGACY | VERSION_1 | RING_RESET;
}

/// Device status bits [virtio 1.2 §2.1].
pub mod status {
    pub const ACKNOWLEDGE: u8 = 1;
    pub const DRIVER: u8 = 2;
    pub const DRIVER_OK: u8 = 4;
    pub const FEATURES_OK: u8 = 8;
    pub const NEEDS_RESET: u8 = 64;
    pub const FAILED: u8 = 128;
}

/// ISR status bits [virtio 1.2 §4.1.4.5]: a used buffer, a configuration change.
pub const ISR_QUEUE: u8 = 1;
pub const ISR_CONFIG: u8 = 2;

/// One queue's registers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueRegs {
    pub size: u16,
    /// Guest-physical addresses of the descriptor table, the available ring and the used ring.
    pub desc: u64,
    pub avail: u64,
    pub used: u64,
    /// The driver gave the queue to the device (legacy: a non-zero page frame number; modern:
    /// `queue_enable`).
    pub ready: bool,
    /// The driver reset this queue alone (modern `queue_reset`), and has not enabled it since.
    pub reset: bool,
}

/// The device's registers, as the transport shows them and the engine uses them.
#[derive(Debug, Clone)]
pub struct Registers {
    pub device_features: u64,
    pub driver_features: u64,
    pub status: u8,
    /// Which 32 bits of the features the modern interface shows and takes [virtio 1.2 §4.1.4.3].
    pub device_feature_select: u32,
    pub driver_feature_select: u32,
    /// Changes whenever the device configuration does (the link) [virtio 1.2 §2.5.1].
    pub config_generation: u8,
    pub queue_select: u16,
    pub queues: [QueueRegs; QUEUES],
    /// Device configuration [virtio 1.2 §5.1.4]: the MAC address and the link state.
    pub mac: [u8; 6],
    /// The function's own address, which a reset restores after `MAC_ADDR_SET` (as QEMU).
    pub permanent_mac: [u8; 6],
    pub link_up: bool,
    /// Device resets since start (a status write of 0).
    pub resets: u64,
    /// The process that last accessed the registers: the driver, whose memory the device may
    /// reach (its DMA domain).
    pub driver: Option<u32>,
    /// The function is gone: registers read all-ones and writes are dropped.
    pub removed: bool,
}

impl Registers {
    fn new(mac: [u8; 6], device_features: u64) -> Self {
        Registers {
            device_features,
            driver_features: 0,
            status: 0,
            device_feature_select: 0,
            driver_feature_select: 0,
            config_generation: 0,
            queue_select: 0,
            queues: [QueueRegs { size: QUEUE_SIZE, ..Default::default() }; QUEUES],
            mac,
            permanent_mac: mac,
            link_up: false,
            resets: 0,
            driver: None,
            removed: false,
        }
    }

    /// A device reset [virtio 1.2 §2.4]: everything the driver set goes back to its initial
    /// value, the MAC address to the function's own; the link stays as it is.
    pub fn reset(&mut self) {
        self.mac = self.permanent_mac;
        self.driver_features = 0;
        self.status = 0;
        self.device_feature_select = 0;
        self.driver_feature_select = 0;
        self.queue_select = 0;
        self.queues = [QueueRegs { size: QUEUE_SIZE, ..Default::default() }; QUEUES];
        self.resets += 1;
    }

    /// The selected queue's registers, if the selector names one.
    pub fn selected(&mut self) -> Option<&mut QueueRegs> {
        self.queues.get_mut(self.queue_select as usize)
    }

    /// The link went up or down: the configuration changed, and with it its generation.
    pub fn set_link(&mut self, up: bool) {
        if self.link_up != up {
            self.link_up = up;
            self.config_generation = self.config_generation.wrapping_add(1);
        }
    }

    /// Whether both sides agreed on `bit`.
    pub fn negotiated(&self, bit: u64) -> bool {
        self.driver_features & self.device_features & bit != 0
    }
}

/// How long a register write waits for the engine at most: the engine takes changes within
/// one slow-path period (100 µs) even when idle, so only a stopped engine is this slow.
const APPLY_TIMEOUT: Duration = Duration::from_secs(1);

/// Registers shared by the transport (a driver's accesses) and the engine.
pub struct Shared {
    registers: Mutex<Registers>,
    /// Bumped by every write the engine must act on; the engine stores in `applied` what it
    /// has taken.
    changes: AtomicU64,
    applied: AtomicU64,
    /// ISR status: set by the engine, cleared by a read of it.
    isr: AtomicU8,
}

impl Shared {
    /// The registers of a device with address `mac`, offering `device_features`.
    pub fn new(mac: [u8; 6], device_features: u64) -> Arc<Shared> {
        Arc::new(Shared {
            registers: Mutex::new(Registers::new(mac, device_features)),
            changes: AtomicU64::new(0),
            applied: AtomicU64::new(0),
            isr: AtomicU8::new(0),
        })
    }

    /// The registers, locked.
    pub fn lock(&self) -> MutexGuard<'_, Registers> {
        self.registers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks a change the engine must take and waits until it has (a transport's write that
    /// changes what the device does returns only then).
    pub fn change_and_wait(&self) {
        let n = self.changed();
        self.wait_applied(n);
    }

    /// Marks a change the engine must take; returns its number for [`Self::wait_applied`].
    pub fn changed(&self) -> u64 {
        self.changes.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Waits until the engine has taken change `n` (or is gone).
    pub fn wait_applied(&self, n: u64) {
        let start = Instant::now();
        while self.applied.load(Ordering::Acquire) < n && start.elapsed() < APPLY_TIMEOUT {
            if self.lock().removed {
                return;
            }
            std::thread::sleep(Duration::from_micros(10));
        }
    }

    /// For the engine: the registers if something changed since change `seen`, with the
    /// change number to pass to [`Self::applied`] once they are taken.
    pub fn changes_since(&self, seen: u64) -> Option<(u64, Registers)> {
        let now = self.changes.load(Ordering::Acquire);
        (now != seen).then(|| (now, self.lock().clone()))
    }

    /// For the engine: change `n` and those before it are taken.
    pub fn applied(&self, n: u64) {
        self.applied.store(n, Ordering::Release);
    }

    /// Sets ISR status bits (the engine, on used buffers or a configuration change).
    pub fn raise(&self, bits: u8) {
        self.isr.fetch_or(bits, Ordering::Relaxed);
    }

    /// Reads and clears the ISR status [virtio 1.2 §4.1.4.5.1].
    pub fn take_isr(&self) -> u8 {
        self.isr.swap(0, Ordering::Relaxed)
    }
}

/// A transport's register bytes with a driver's write of `len` bytes at `offset` laid over
/// them: which registers the write touched, and their new values (little-endian).
pub(crate) struct Written<'a> {
    pub image: &'a [u8],
    pub offset: u64,
    pub len: u64,
}

impl Written<'_> {
    /// Whether the write covered any byte of the register at `reg` of `len` bytes.
    pub fn touched(&self, reg: u64, len: u64) -> bool {
        self.offset < reg + len && reg < self.offset + self.len
    }

    pub fn u16(&self, at: u64) -> u16 {
        u16::from_le_bytes([self.image[at as usize], self.image[at as usize + 1]])
    }

    pub fn u32(&self, at: u64) -> u32 {
        u32::from_le_bytes(self.image[at as usize..at as usize + 4].try_into().unwrap_or([0; 4]))
    }

    pub fn u64(&self, at: u64) -> u64 {
        u64::from(self.u32(at)) | u64::from(self.u32(at + 4)) << 32
    }
}

/// For the transports' tests: `len` bytes read at `at` by process 1.
#[cfg(test)]
pub(crate) fn read_bytes(file: &impl crate::iofs::IoFile, at: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    file.read(at, &mut v, 1);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_keeps_the_address_and_clears_the_rest() {
        let shared = Shared::new([2, 0, 0, 0, 0, 7], feature::LEGACY);
        {
            let mut r = shared.lock();
            r.driver_features = feature::MAC;
            r.status = status::DRIVER_OK;
            r.queues[TX] =
                QueueRegs { size: QUEUE_SIZE, desc: 0x1000, avail: 0x2000, used: 0x3000, ready: true, reset: false };
            r.reset();
        }
        let r = shared.lock();
        assert_eq!((r.driver_features, r.status, r.resets), (0, 0, 1));
        assert!(!r.queues[TX].ready);
        assert_eq!(r.mac, [2, 0, 0, 0, 0, 7]);
    }

    #[test]
    fn a_write_waits_for_the_engine() {
        let shared = Shared::new([0; 6], 0);
        let n = shared.changed();
        let engine = {
            let shared = shared.clone();
            std::thread::spawn(move || loop {
                if let Some((c, _)) = shared.changes_since(0) {
                    std::thread::sleep(Duration::from_millis(20));
                    shared.applied(c);
                    return;
                }
            })
        };
        let t = Instant::now();
        shared.wait_applied(n);
        assert!(t.elapsed() >= Duration::from_millis(20), "returned before the engine took the change");
        engine.join().unwrap();
        assert_eq!(shared.take_isr(), 0);
        shared.raise(ISR_QUEUE);
        assert_eq!((shared.take_isr(), shared.take_isr()), (ISR_QUEUE, 0), "the ISR clears when read");
    }
}
