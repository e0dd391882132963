//! The virtio 1.x PCI interface [virtio 1.2 §4.1.4]: four structures in memory BAR4, each found
//! through a vendor-specific capability in configuration space (`crate::pciconfig`). The
//! layout is QEMU's: common configuration at 0, ISR status at 0x1000, device configuration at
//! 0x2000, notifications at 0x3000, four bytes apart.

use super::{feature, status, Registers, Shared, Written, QUEUES};
use crate::iofs::IoFile;
use std::sync::Arc;

/// The structures' offsets in BAR4, and what each capability says of them.
pub const COMMON: u64 = 0x0000;
pub const ISR: u64 = 0x1000;
pub const DEVICE: u64 = 0x2000;
pub const NOTIFY: u64 = 0x3000;
/// Common configuration up to and including `queue_reset` [virtio 1.2 §4.1.4.3].
pub const COMMON_LEN: u64 = 0x3C;
/// The net device configuration: the MAC address and the link status [virtio 1.2 §5.1.4].
pub const DEVICE_LEN: u64 = 8;
/// Queue `q` is notified at `NOTIFY + q * NOTIFY_MULTIPLIER` (`queue_notify_off` is `q`).
pub const NOTIFY_MULTIPLIER: u32 = 4;
pub const NOTIFY_LEN: u64 = QUEUES as u64 * NOTIFY_MULTIPLIER as u64;
/// BAR4's size: four pages, one structure each.
pub const BAR_LEN: u64 = 0x4000;

/// Common configuration fields [virtio 1.2 §4.1.4.3].
pub mod common {
    pub const DEVICE_FEATURE_SELECT: u64 = 0x00;
    pub const DEVICE_FEATURE: u64 = 0x04;
    pub const DRIVER_FEATURE_SELECT: u64 = 0x08;
    pub const DRIVER_FEATURE: u64 = 0x0C;
    pub const CONFIG_MSIX_VECTOR: u64 = 0x10;
    pub const NUM_QUEUES: u64 = 0x12;
    pub const DEVICE_STATUS: u64 = 0x14;
    pub const CONFIG_GENERATION: u64 = 0x15;
    pub const QUEUE_SELECT: u64 = 0x16;
    pub const QUEUE_SIZE: u64 = 0x18;
    pub const QUEUE_MSIX_VECTOR: u64 = 0x1A;
    pub const QUEUE_ENABLE: u64 = 0x1C;
    pub const QUEUE_NOTIFY_OFF: u64 = 0x1E;
    pub const QUEUE_DESC: u64 = 0x20;
    pub const QUEUE_DRIVER: u64 = 0x28;
    pub const QUEUE_DEVICE: u64 = 0x30;
    pub const QUEUE_NOTIFY_DATA: u64 = 0x38;
    pub const QUEUE_RESET: u64 = 0x3A;
}

/// What MSI-X vector fields read: no vector, as there is no MSI-X [virtio 1.2 §4.1.5.1.2].
const NO_VECTOR: u16 = 0xFFFF;
/// The link-up bit of the configuration's status field.
const NET_S_LINK_UP: u16 = 1;

/// BAR4 of one function, answering each access.
pub struct ModernBar {
    pub shared: Arc<Shared>,
}

impl ModernBar {
    /// The common configuration as a read of it would return it now.
    fn common_image(r: &Registers) -> [u8; COMMON_LEN as usize] {
        use common::*;
        let mut b = [0u8; COMMON_LEN as usize];
        let mut put = |at: u64, bytes: &[u8]| b[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
        let half = |v: u64, select: u32| if select < 2 { (v >> (32 * select)) as u32 } else { 0 };
        put(DEVICE_FEATURE_SELECT, &r.device_feature_select.to_le_bytes());
        put(DEVICE_FEATURE, &half(r.device_features, r.device_feature_select).to_le_bytes());
        put(DRIVER_FEATURE_SELECT, &r.driver_feature_select.to_le_bytes());
        put(DRIVER_FEATURE, &half(r.driver_features, r.driver_feature_select).to_le_bytes());
        put(CONFIG_MSIX_VECTOR, &NO_VECTOR.to_le_bytes());
        put(NUM_QUEUES, &(QUEUES as u16).to_le_bytes());
        put(DEVICE_STATUS, &[r.status]);
        put(CONFIG_GENERATION, &[r.config_generation]);
        put(QUEUE_SELECT, &r.queue_select.to_le_bytes());
        if let Some(q) = r.queues.get(r.queue_select as usize) {
            put(QUEUE_SIZE, &q.size.to_le_bytes());
            put(QUEUE_MSIX_VECTOR, &NO_VECTOR.to_le_bytes());
            put(QUEUE_ENABLE, &u16::from(q.ready).to_le_bytes());
            put(QUEUE_NOTIFY_OFF, &r.queue_select.to_le_bytes());
            put(QUEUE_DESC, &q.desc.to_le_bytes());
            put(QUEUE_DRIVER, &q.avail.to_le_bytes());
            put(QUEUE_DEVICE, &q.used.to_le_bytes());
            put(QUEUE_RESET, &u16::from(q.reset).to_le_bytes());
        }
        b
    }

    /// The device configuration as a read of it would return it now.
    fn device_image(r: &Registers) -> [u8; DEVICE_LEN as usize] {
        let mut b = [0u8; DEVICE_LEN as usize];
        b[..6].copy_from_slice(&r.mac);
        let link = if r.device_features & feature::STATUS != 0 && r.link_up { NET_S_LINK_UP } else { 0 };
        b[6..].copy_from_slice(&link.to_le_bytes());
        b
    }

    /// Applies a write of `data` at `offset` of the common configuration. Returns whether the
    /// engine must take it.
    fn write_common(r: &mut Registers, offset: u64, data: &[u8]) -> bool {
        use common::*;
        let mut image = Self::common_image(r);
        let at = offset as usize;
        let Some(target) = image.get_mut(at..at + data.len()) else { return false };
        target.copy_from_slice(data);
        let w = Written { image: &image, offset, len: data.len() as u64 };
        let (touched, u16_at, u32_at, u64_at) =
            (|reg, len| w.touched(reg, len), |o| w.u16(o), |o| w.u32(o), |o| w.u64(o));
        let mut change = false;
        if touched(DEVICE_FEATURE_SELECT, 4) {
            r.device_feature_select = u32_at(DEVICE_FEATURE_SELECT);
        }
        if touched(DRIVER_FEATURE_SELECT, 4) {
            r.driver_feature_select = u32_at(DRIVER_FEATURE_SELECT);
        }
        if touched(DRIVER_FEATURE, 4) && r.driver_feature_select < 2 {
            let shift = 32 * r.driver_feature_select;
            r.driver_features =
                r.driver_features & !(0xFFFF_FFFF << shift) | u64::from(u32_at(DRIVER_FEATURE)) << shift;
            change = true;
        }
        if touched(QUEUE_SELECT, 2) {
            r.queue_select = u16_at(QUEUE_SELECT);
        }
        let (size, enable, reset) = (u16_at(QUEUE_SIZE), u16_at(QUEUE_ENABLE), u16_at(QUEUE_RESET));
        let (desc, driver, device) = (u64_at(QUEUE_DESC), u64_at(QUEUE_DRIVER), u64_at(QUEUE_DEVICE));
        if let Some(q) = r.selected() {
            // A queue's fields change only while it is off [virtio 1.2 §4.1.4.3.2]; its size
            // to any power of two up to the maximum [virtio 1.2 §2.7].
            if !q.ready {
                if touched(QUEUE_SIZE, 2) && size.is_power_of_two() && size <= super::QUEUE_SIZE {
                    q.size = size;
                }
                if touched(QUEUE_DESC, 8) {
                    q.desc = desc;
                }
                if touched(QUEUE_DRIVER, 8) {
                    q.avail = driver;
                }
                if touched(QUEUE_DEVICE, 8) {
                    q.used = device;
                }
                if touched(QUEUE_ENABLE, 2) && enable == 1 {
                    q.ready = true;
                    q.reset = false;
                    change = true;
                }
            }
            if touched(QUEUE_RESET, 2) && reset == 1 {
                *q = super::QueueRegs { size: super::QUEUE_SIZE, reset: true, ..Default::default() };
                change = true;
            }
        }
        if touched(DEVICE_STATUS, 1) {
            Self::write_status(r, image[DEVICE_STATUS as usize]);
            change = true;
        }
        change
    }

    /// A status write: 0 resets [virtio 1.2 §2.4]; FEATURES_OK stays clear if the driver took
    /// a feature the device did not offer, or did not take VERSION_1 [virtio 1.2 §2.2.2, §6.1].
    fn write_status(r: &mut Registers, mut s: u8) {
        if s == 0 {
            r.reset();
            return;
        }
        let unoffered = r.driver_features & !r.device_features != 0;
        if s & status::FEATURES_OK != 0
            && r.status & status::FEATURES_OK == 0
            && (unoffered || r.driver_features & feature::VERSION_1 == 0)
        {
            s &= !status::FEATURES_OK;
        }
        r.status = s;
    }
}

impl IoFile for ModernBar {
    fn size(&self) -> u64 {
        BAR_LEN
    }

    fn read(&self, offset: u64, buf: &mut [u8], pid: u32) {
        let mut r = self.shared.lock();
        buf.fill(0);
        if r.removed {
            buf.fill(0xFF);
            return;
        }
        r.driver.get_or_insert(pid);
        let (common, device) = (Self::common_image(&r), Self::device_image(&r));
        for (i, b) in buf.iter_mut().enumerate() {
            let at = offset + i as u64;
            *b = match at {
                _ if at < COMMON + COMMON_LEN => common[(at - COMMON) as usize],
                _ if (DEVICE..DEVICE + DEVICE_LEN).contains(&at) => device[(at - DEVICE) as usize],
                _ => 0,
            };
        }
        if (offset..offset + buf.len() as u64).contains(&ISR) {
            buf[(ISR - offset) as usize] = self.shared.take_isr();
        }
    }

    fn write(&self, offset: u64, data: &[u8], pid: u32) {
        let mut r = self.shared.lock();
        if r.removed {
            return;
        }
        r.driver = Some(pid);
        // Device configuration is read-only to a modern driver, and notifications need nothing:
        // the engine polls every available ring.
        let change = offset < COMMON + COMMON_LEN && Self::write_common(&mut r, offset - COMMON, data);
        drop(r);
        if change {
            self.shared.change_and_wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::common::*;
    use super::*;
    use crate::virtio::{RX, TX};

    fn bar() -> ModernBar {
        let bar = ModernBar { shared: Shared::new([2, 0, 0, 0, 0, 1], feature::TRANSITIONAL) };
        // No engine here: every change counts as taken at once.
        bar.shared.applied(u64::MAX);
        bar
    }

    use crate::virtio::read_bytes as read;

    fn read32(b: &ModernBar, at: u64) -> u32 {
        u32::from_le_bytes(read(b, at, 4).try_into().unwrap())
    }

    #[test]
    fn features_are_shown_and_taken_32_bits_at_a_time() {
        let b = bar();
        assert_eq!(read32(&b, DEVICE_FEATURE), feature::TRANSITIONAL as u32);
        b.write(DEVICE_FEATURE_SELECT, &1u32.to_le_bytes(), 1);
        assert_eq!(read32(&b, DEVICE_FEATURE), (feature::TRANSITIONAL >> 32) as u32, "VERSION_1 and RING_RESET");
        b.write(DRIVER_FEATURE_SELECT, &1u32.to_le_bytes(), 1);
        b.write(DRIVER_FEATURE, &1u32.to_le_bytes(), 1);
        b.write(DRIVER_FEATURE_SELECT, &0u32.to_le_bytes(), 1);
        b.write(DRIVER_FEATURE, &(feature::MAC as u32).to_le_bytes(), 1);
        assert_eq!(b.shared.lock().driver_features, feature::MAC | feature::VERSION_1);
        b.write(DEVICE_STATUS, &[status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK], 1);
        assert_eq!(read(&b, DEVICE_STATUS, 1), [11], "FEATURES_OK kept");
        assert_eq!(read(&b, NUM_QUEUES, 2), [3, 0]);
    }

    #[test]
    fn features_ok_stays_clear_without_version_1_or_with_an_unoffered_bit() {
        let b = bar();
        b.write(DRIVER_FEATURE, &(feature::MAC as u32).to_le_bytes(), 1);
        b.write(DEVICE_STATUS, &[status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK], 1);
        assert_eq!(read(&b, DEVICE_STATUS, 1), [3], "no VERSION_1");
        b.write(DEVICE_STATUS, &[0], 1);
        b.write(DRIVER_FEATURE_SELECT, &1u32.to_le_bytes(), 1);
        b.write(DRIVER_FEATURE, &(1u32 | 1 << 20).to_le_bytes(), 1);
        b.write(DEVICE_STATUS, &[status::FEATURES_OK], 1);
        assert_eq!(read(&b, DEVICE_STATUS, 1), [0], "bit 52 was never offered");
    }

    #[test]
    fn a_queue_takes_its_fields_while_off_then_enables_and_resets_alone() {
        let b = bar();
        b.write(QUEUE_SELECT, &1u16.to_le_bytes(), 1);
        assert_eq!(read(&b, QUEUE_SIZE, 2), crate::virtio::QUEUE_SIZE.to_le_bytes());
        assert_eq!(read(&b, QUEUE_NOTIFY_OFF, 2), [1, 0]);
        b.write(QUEUE_SIZE, &128u16.to_le_bytes(), 1);
        b.write(QUEUE_SIZE, &100u16.to_le_bytes(), 1);
        // A 64-bit field in two 32-bit halves, as drivers write them.
        b.write(QUEUE_DESC, &0x1000u32.to_le_bytes(), 1);
        b.write(QUEUE_DESC + 4, &0x2u32.to_le_bytes(), 1);
        b.write(QUEUE_DRIVER, &0x2_0000_2000u64.to_le_bytes(), 1);
        b.write(QUEUE_DEVICE, &0x2_0000_3000u64.to_le_bytes(), 1);
        b.write(QUEUE_ENABLE, &1u16.to_le_bytes(), 1);
        let q = b.shared.lock().queues[TX];
        assert_eq!(
            (q.size, q.desc, q.avail, q.used, q.ready),
            (128, 0x2_0000_1000, 0x2_0000_2000, 0x2_0000_3000, true)
        );
        b.write(QUEUE_DESC, &0u64.to_le_bytes(), 1);
        assert_eq!(b.shared.lock().queues[TX].desc, 0x2_0000_1000, "an enabled queue keeps its address");
        assert!(!b.shared.lock().queues[RX].ready);
        b.write(QUEUE_RESET, &1u16.to_le_bytes(), 1);
        assert_eq!(read(&b, QUEUE_RESET, 2), [1, 0], "reads 1 once the queue is reset");
        assert_eq!(read(&b, QUEUE_ENABLE, 2), [0, 0]);
        b.write(QUEUE_ENABLE, &1u16.to_le_bytes(), 1);
        assert_eq!(read(&b, QUEUE_RESET, 2), [0, 0], "until it is enabled again");
        b.write(QUEUE_SELECT, &9u16.to_le_bytes(), 1);
        assert_eq!(read(&b, QUEUE_SIZE, 2), [0, 0], "no queue 9");
        assert_eq!(read(&b, QUEUE_MSIX_VECTOR, 2), [0, 0]);
    }

    #[test]
    fn isr_device_configuration_reset_and_removal() {
        let b = bar();
        assert_eq!(read(&b, DEVICE, 6), [2, 0, 0, 0, 0, 1]);
        b.write(DEVICE, &[9; 6], 1);
        assert_eq!(read(&b, DEVICE, 6), [2, 0, 0, 0, 0, 1], "read-only to a modern driver");
        let generation = read(&b, CONFIG_GENERATION, 1)[0];
        b.shared.lock().set_link(true);
        assert_eq!(read(&b, DEVICE + 6, 2), [1, 0]);
        assert_ne!(read(&b, CONFIG_GENERATION, 1)[0], generation, "the configuration changed");
        b.shared.raise(crate::virtio::ISR_QUEUE);
        assert_eq!((read(&b, ISR, 1), read(&b, ISR, 1)), (vec![1], vec![0]), "the ISR clears when read");
        assert_eq!(read(&b, CONFIG_MSIX_VECTOR, 2), NO_VECTOR.to_le_bytes());
        b.write(DEVICE_STATUS, &[status::ACKNOWLEDGE], 1);
        b.write(DEVICE_STATUS, &[0], 1);
        assert_eq!((read(&b, DEVICE_STATUS, 1), b.shared.lock().resets), (vec![0], 1));
        b.shared.lock().removed = true;
        assert_eq!(read32(&b, DEVICE_FEATURE), u32::MAX, "a removed device reads all-ones");
    }
}
