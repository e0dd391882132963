//! The two PCI interfaces of a virtio device, as this driver reaches them: the legacy
//! registers in I/O BAR0 [virtio 1.2 §4.1.4.8] and the virtio 1.x structures that
//! capabilities in configuration space point to [virtio 1.2 §4.1.4]. Both through
//! `pread`/`pwrite` on the BAR's file, so that every access reaches the device.

use crate::DriverError;
use platform::pci::{IoBar, PciFunction};
use std::time::{Duration, Instant};

/// Which interface a driver uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interface {
    /// Legacy (virtio 0.9.5), as ixy's driver: page frame numbers, a 10-byte net header.
    Legacy,
    /// virtio 1.x: 64-bit queue addresses, FEATURES_OK, a 12-byte net header.
    Modern,
}

/// Legacy register offsets in I/O BAR0 [virtio 1.2 §4.1.4.8].
mod legacy {
    pub const HOST_FEATURES: u64 = 0;
    pub const GUEST_FEATURES: u64 = 4;
    pub const QUEUE_PFN: u64 = 8;
    pub const QUEUE_NUM: u64 = 12;
    pub const QUEUE_SEL: u64 = 14;
    pub const QUEUE_NOTIFY: u64 = 16;
    pub const STATUS: u64 = 18;
    /// Device configuration without MSI-X: the MAC address [virtio 1.2 §5.1.4].
    pub const CONFIG: u64 = 20;
}

/// Common configuration fields [virtio 1.2 §4.1.4.3].
mod common {
    pub const DEVICE_FEATURE_SELECT: u64 = 0x00;
    pub const DEVICE_FEATURE: u64 = 0x04;
    pub const DRIVER_FEATURE_SELECT: u64 = 0x08;
    pub const DRIVER_FEATURE: u64 = 0x0C;
    pub const DEVICE_STATUS: u64 = 0x14;
    pub const CONFIG_GENERATION: u64 = 0x15;
    pub const QUEUE_SELECT: u64 = 0x16;
    pub const QUEUE_SIZE: u64 = 0x18;
    pub const QUEUE_ENABLE: u64 = 0x1C;
    pub const QUEUE_NOTIFY_OFF: u64 = 0x1E;
    pub const QUEUE_DESC: u64 = 0x20;
    pub const QUEUE_DRIVER: u64 = 0x28;
    pub const QUEUE_DEVICE: u64 = 0x30;
    pub const QUEUE_RESET: u64 = 0x3A;
}

/// Capability types [virtio 1.2 §4.1.4].
const CAP_VENDOR: u16 = 0x09;
const CAP_COMMON: u8 = 1;
const CAP_NOTIFY: u8 = 2;
const CAP_DEVICE: u8 = 4;

/// Where the virtio 1.x structures are in their BAR.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    bar: u8,
    common: u64,
    notify: u64,
    multiplier: u64,
    device: u64,
}

/// Finds the structures through the capability list; `None` if the function has none (a
/// legacy-only device). A list that loops or points outside the header is cut after 48 entries.
fn find_layout(function: &PciFunction) -> Result<Option<Layout>, DriverError> {
    let io = DriverError::Platform;
    if function.config_read_u16(0x06).map_err(io)? & (1 << 4) == 0 {
        return Ok(None);
    }
    let byte = |at: u64| -> Result<u8, DriverError> {
        Ok((function.config_read_u16(at & !1).map_err(io)? >> (8 * (at & 1))) as u8)
    };
    let (mut common, mut notify, mut device) = (None, None, None);
    let mut at = u64::from(byte(0x34)? & !3);
    for _ in 0..48 {
        if at < 0x40 {
            break;
        }
        if u16::from(byte(at)?) == CAP_VENDOR {
            let (cfg_type, bar) = (byte(at + 3)?, byte(at + 4)?);
            let offset = u64::from(function.config_read_u32(at + 8).map_err(io)?);
            match cfg_type {
                CAP_COMMON => common = common.or(Some((bar, offset))),
                CAP_DEVICE => device = device.or(Some((bar, offset))),
                CAP_NOTIFY => {
                    let multiplier = u64::from(function.config_read_u32(at + 16).map_err(io)?);
                    notify = notify.or(Some((bar, offset, multiplier)));
                }
                _ => {}
            }
        }
        at = u64::from(byte(at + 1)? & !3);
    }
    let (Some((bar, common)), Some((nbar, notify, multiplier)), Some((dbar, device))) = (common, notify, device) else {
        return Ok(None);
    };
    if nbar != bar || dbar != bar || bar > 5 {
        return Err(DriverError::Invalid(format!(
            "{}: its virtio structures are spread over BARs {bar}, {nbar} and {dbar}: this driver wants them in one",
            function.address()
        )));
    }
    Ok(Some(Layout { bar, common, notify, multiplier, device }))
}

/// One interface of an open function.
pub(crate) enum Transport {
    Legacy(IoBar),
    Modern { bar: IoBar, layout: Layout, notify: [u64; 3], ring_reset: bool },
}

fn io(e: platform::PlatformError) -> DriverError {
    DriverError::Platform(e)
}

impl Transport {
    /// Opens `interface` of `function`: modern only if the capabilities say where it is.
    pub(crate) fn open(function: &PciFunction, interface: Interface) -> Result<Self, DriverError> {
        match interface {
            Interface::Legacy => Ok(Transport::Legacy(function.open_io_bar(0).map_err(io)?)),
            Interface::Modern => {
                let layout = find_layout(function)?.ok_or_else(|| {
                    DriverError::Invalid(format!(
                        "{} has no virtio 1.x capabilities (a legacy-only device): use the legacy interface",
                        function.address()
                    ))
                })?;
                let bar = function.open_io_bar(layout.bar).map_err(io)?;
                let mut t = Transport::Modern { bar, layout, notify: [0; 3], ring_reset: false };
                // Where each queue is notified [virtio 1.2 §4.1.4.4].
                let mut notify = [0; 3];
                for (q, at) in (0u16..).zip(notify.iter_mut()) {
                    t.write(common::QUEUE_SELECT, &q.to_le_bytes())?;
                    let off = u64::from(u16::from_le_bytes(t.read::<2>(common::QUEUE_NOTIFY_OFF)?));
                    *at = layout.notify + off * layout.multiplier;
                }
                if let Transport::Modern { notify: n, .. } = &mut t {
                    *n = notify;
                }
                Ok(t)
            }
        }
    }

    /// Whether `function` offers the modern interface.
    pub(crate) fn has_modern(function: &PciFunction) -> Result<bool, DriverError> {
        Ok(find_layout(function)?.is_some())
    }

    pub(crate) fn interface(&self) -> Interface {
        match self {
            Transport::Legacy(_) => Interface::Legacy,
            Transport::Modern { .. } => Interface::Modern,
        }
    }

    fn read<const N: usize>(&self, offset: u64) -> Result<[u8; N], DriverError> {
        match self {
            Transport::Legacy(bar) => bar.read::<N>(offset),
            Transport::Modern { bar, layout, .. } => bar.read::<N>(layout.common + offset),
        }
        .map_err(io)
    }

    fn write(&self, offset: u64, bytes: &[u8]) -> Result<(), DriverError> {
        match self {
            Transport::Legacy(bar) => bar.write(offset, bytes),
            Transport::Modern { bar, layout, .. } => bar.write(layout.common + offset, bytes),
        }
        .map_err(io)
    }

    pub(crate) fn status(&self) -> Result<u8, DriverError> {
        let at = if matches!(self, Transport::Legacy(_)) { legacy::STATUS } else { common::DEVICE_STATUS };
        Ok(self.read::<1>(at)?[0])
    }

    pub(crate) fn set_status(&self, status: u8) -> Result<(), DriverError> {
        let at = if matches!(self, Transport::Legacy(_)) { legacy::STATUS } else { common::DEVICE_STATUS };
        self.write(at, &[status])
    }

    /// The features the device offers (the legacy interface shows bits 0-31 only).
    pub(crate) fn device_features(&self) -> Result<u64, DriverError> {
        if matches!(self, Transport::Legacy(_)) {
            return Ok(u64::from(u32::from_le_bytes(self.read::<4>(legacy::HOST_FEATURES)?)));
        }
        let mut features = 0;
        for half in 0..2u32 {
            self.write(common::DEVICE_FEATURE_SELECT, &half.to_le_bytes())?;
            features |= u64::from(u32::from_le_bytes(self.read::<4>(common::DEVICE_FEATURE)?)) << (32 * half);
        }
        Ok(features)
    }

    /// Writes the features the driver takes; per-queue reset is used if among them.
    pub(crate) fn set_driver_features(&mut self, features: u64) -> Result<(), DriverError> {
        if let Transport::Modern { ring_reset, .. } = self {
            *ring_reset = features & crate::device::FEATURE_RING_RESET != 0;
        }
        if matches!(self, Transport::Legacy(_)) {
            return self.write(legacy::GUEST_FEATURES, &(features as u32).to_le_bytes());
        }
        for half in 0..2u32 {
            self.write(common::DRIVER_FEATURE_SELECT, &half.to_le_bytes())?;
            self.write(common::DRIVER_FEATURE, &((features >> (32 * half)) as u32).to_le_bytes())?;
        }
        Ok(())
    }

    /// The device configuration's first `N` bytes, read until its generation is stable
    /// [virtio 1.2 §4.1.4.3.1].
    pub(crate) fn config<const N: usize>(&self) -> Result<[u8; N], DriverError> {
        match self {
            Transport::Legacy(bar) => bar.read::<N>(legacy::CONFIG).map_err(io),
            Transport::Modern { bar, layout, .. } => {
                // A device whose configuration never holds still gets a bounded number of tries.
                for _ in 0..100 {
                    let before = self.read::<1>(common::CONFIG_GENERATION)?;
                    let bytes = bar.read::<N>(layout.device).map_err(io)?;
                    if self.read::<1>(common::CONFIG_GENERATION)? == before {
                        return Ok(bytes);
                    }
                }
                Err(DriverError::Invalid("the device configuration changed on every one of 100 reads".into()))
            }
        }
    }

    /// Gives queue `q` of `n` entries the rings at `desc`, `avail` and `used` (legacy: one
    /// page-aligned block at `desc`, its page frame number).
    pub(crate) fn set_queue(
        &self,
        name: &str,
        q: u16,
        n: usize,
        [desc, avail, used]: [u64; 3],
    ) -> Result<(), DriverError> {
        let (select, size_at) = match self {
            Transport::Legacy(_) => (legacy::QUEUE_SEL, legacy::QUEUE_NUM),
            Transport::Modern { .. } => (common::QUEUE_SELECT, common::QUEUE_SIZE),
        };
        self.write(select, &q.to_le_bytes())?;
        let size = usize::from(u16::from_le_bytes(self.read::<2>(size_at)?));
        match self {
            // Legacy queues have the size the device says [virtio 1.2 §4.1.5.1.3.1].
            Transport::Legacy(_) if size != n => Err(DriverError::Invalid(format!(
                "{name}: queue {q} has {size} entries, the driver was built for {n}: use rings of {size}"
            ))),
            Transport::Legacy(_) => self.write(legacy::QUEUE_PFN, &((desc / 4096) as u32).to_le_bytes()),
            // A modern driver may make a queue smaller than the device's maximum.
            Transport::Modern { .. } if size < n => Err(DriverError::Invalid(format!(
                "{name}: queue {q} has at most {size} entries, the driver was built for {n}: use rings of {size} or fewer"
            ))),
            Transport::Modern { .. } => {
                self.write(common::QUEUE_SIZE, &(n as u16).to_le_bytes())?;
                // 64-bit fields as two 32-bit writes, low first [virtio 1.2 §4.1.3.1].
                for (at, value) in [(common::QUEUE_DESC, desc), (common::QUEUE_DRIVER, avail), (common::QUEUE_DEVICE, used)] {
                    self.write(at, &(value as u32).to_le_bytes())?;
                    self.write(at + 4, &((value >> 32) as u32).to_le_bytes())?;
                }
                self.write(common::QUEUE_ENABLE, &1u16.to_le_bytes())
            }
        }
    }

    /// Takes queue `q` away from the device; returns once the device stopped using it. A
    /// legacy device handles the page frame write synchronously; a modern one resets the
    /// queue alone if per-queue reset was negotiated [virtio 1.2 §2.6.1], else the device.
    pub(crate) fn stop_queue(&self, q: u16, name: &str) -> Result<(), DriverError> {
        match self {
            Transport::Legacy(_) => {
                self.write(legacy::QUEUE_SEL, &q.to_le_bytes())?;
                self.write(legacy::QUEUE_PFN, &0u32.to_le_bytes())
            }
            Transport::Modern { ring_reset: true, .. } => {
                self.write(common::QUEUE_SELECT, &q.to_le_bytes())?;
                self.write(common::QUEUE_RESET, &1u16.to_le_bytes())?;
                wait_until(name, "a queue reset", || Ok(self.read::<2>(common::QUEUE_RESET)? == [1, 0]))
            }
            Transport::Modern { .. } => self.reset(name),
        }
    }

    /// Writes 0 to the status and waits until it reads 0 [virtio 1.2 §4.1.4.3.2].
    pub(crate) fn reset(&self, name: &str) -> Result<(), DriverError> {
        self.set_status(0)?;
        wait_until(name, "the device reset", || Ok(self.status()? == 0))
    }

    /// Tells the device queue `q` has new buffers.
    pub(crate) fn notify(&self, q: u16) {
        let _ = match self {
            Transport::Legacy(bar) => bar.write(legacy::QUEUE_NOTIFY, &q.to_le_bytes()),
            Transport::Modern { bar, notify, .. } => match notify.get(usize::from(q)) {
                Some(&at) => bar.write(at, &q.to_le_bytes()),
                None => Ok(()),
            },
        };
    }
}

/// Polls `done` for up to a second.
fn wait_until(
    address: &str,
    what: &'static str,
    mut done: impl FnMut() -> Result<bool, DriverError>,
) -> Result<(), DriverError> {
    let deadline = Instant::now() + Duration::from_secs(1);
    while !done()? {
        if Instant::now() > deadline {
            return Err(DriverError::Timeout { address: address.into(), what });
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    Ok(())
}
