//! The legacy virtio PCI interface: registers in I/O BAR0 [virtio 1.2 §4.1.4.8], device
//! configuration from offset 20 (no MSI-X), queues at a page frame number in the layout of
//! [virtio 1.2 §2.7.2 "Legacy Interfaces: A Note on Virtqueue Layout"].

use super::{feature, Registers, Shared, Written};
use crate::iofs::IoFile;
use std::sync::Arc;

pub const HOST_FEATURES: u64 = 0;
pub const GUEST_FEATURES: u64 = 4;
pub const QUEUE_PFN: u64 = 8;
pub const QUEUE_NUM: u64 = 12;
pub const QUEUE_SEL: u64 = 14;
pub const QUEUE_NOTIFY: u64 = 16;
pub const STATUS: u64 = 18;
pub const ISR: u64 = 19;
/// Device configuration: the MAC address, then the link status [virtio 1.2 §5.1.4].
pub const CONFIG_MAC: u64 = 20;
pub const CONFIG_STATUS: u64 = 26;
/// Registers and configuration end at 28; an I/O BAR's size is a power of two.
pub const BAR_LEN: u64 = 32;
/// Legacy queues are aligned, and their used ring placed, on 4 KiB pages.
const ALIGN: u64 = 4096;
/// The link-up bit of the configuration's status field.
const NET_S_LINK_UP: u16 = 1;

/// `(desc, avail, used)` of a legacy queue of `size` entries at page frame `pfn`.
pub fn layout(pfn: u32, size: u16) -> (u64, u64, u64) {
    let desc = u64::from(pfn) * ALIGN;
    let avail = desc + 16 * u64::from(size);
    // flags, idx, ring[size], used_event
    let used = (avail + 2 * (3 + u64::from(size))).next_multiple_of(ALIGN);
    (desc, avail, used)
}

/// Legacy BAR0 of one function, answering each access.
pub struct LegacyBar {
    pub shared: Arc<Shared>,
}

impl LegacyBar {
    /// The BAR's bytes as a read of them would return them now, the ISR left out.
    fn image(r: &Registers) -> [u8; BAR_LEN as usize] {
        let mut b = [0u8; BAR_LEN as usize];
        if r.removed {
            return [0xFF; BAR_LEN as usize];
        }
        let mut put = |at: u64, bytes: &[u8]| b[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
        put(HOST_FEATURES, &(r.device_features as u32).to_le_bytes());
        put(GUEST_FEATURES, &(r.driver_features as u32).to_le_bytes());
        let q = r.queues.get(r.queue_select as usize).copied().unwrap_or_default();
        put(QUEUE_PFN, &((q.desc / ALIGN) as u32).to_le_bytes());
        put(QUEUE_NUM, &q.size.to_le_bytes());
        put(QUEUE_SEL, &r.queue_select.to_le_bytes());
        put(STATUS, &[r.status]);
        put(CONFIG_MAC, &r.mac);
        let link = if r.device_features & feature::STATUS != 0 && r.link_up { NET_S_LINK_UP } else { 0 };
        put(CONFIG_STATUS, &link.to_le_bytes());
        b
    }
}

impl IoFile for LegacyBar {
    fn size(&self) -> u64 {
        BAR_LEN
    }

    fn read(&self, offset: u64, buf: &mut [u8], pid: u32) {
        let mut r = self.shared.lock();
        let at = offset as usize;
        buf.copy_from_slice(&Self::image(&r)[at..at + buf.len()]);
        if (offset..offset + buf.len() as u64).contains(&ISR) && !r.removed {
            buf[(ISR - offset) as usize] = self.shared.take_isr();
        }
        r.driver.get_or_insert(pid);
    }

    fn write(&self, offset: u64, data: &[u8], pid: u32) {
        let mut r = self.shared.lock();
        let mut image = Self::image(&r);
        let at = offset as usize;
        image[at..at + data.len()].copy_from_slice(data);
        let w = Written { image: &image, offset, len: data.len() as u64 };
        let (touched, u16_at, u32_at) = (|reg, len| w.touched(reg, len), |o| w.u16(o), |o| w.u32(o));
        let mut change = false;
        {
            if r.removed {
                return;
            }
            r.driver = Some(pid);
            // In register order: a write that covers the selector and a queue's address (none
            // does in practice) selects first.
            if touched(GUEST_FEATURES, 4) {
                r.driver_features = u64::from(u32_at(GUEST_FEATURES));
                change = true;
            }
            if touched(QUEUE_SEL, 2) {
                r.queue_select = u16_at(QUEUE_SEL);
            }
            if touched(QUEUE_PFN, 4) {
                let pfn = u32_at(QUEUE_PFN);
                if let Some(q) = r.selected() {
                    (q.desc, q.avail, q.used) = layout(pfn, q.size);
                    q.ready = pfn != 0;
                    change = true;
                }
            }
            if touched(STATUS, 1) {
                let s = image[STATUS as usize];
                if s == 0 {
                    r.reset();
                } else {
                    r.status = s;
                }
                change = true;
            }
            if touched(CONFIG_MAC, 6) {
                // Legacy drivers set the address by writing the configuration [virtio 1.2 §5.1.6.5.1].
                r.mac.copy_from_slice(&image[CONFIG_MAC as usize..CONFIG_MAC as usize + 6]);
                change = true;
            }
        }
        drop(r);
        // QUEUE_NOTIFY needs nothing: the engine polls every available ring.
        if change {
            self.shared.change_and_wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::virtio::{status, QUEUE_SIZE, RX, TX};

    fn bar() -> LegacyBar {
        let bar = LegacyBar { shared: Shared::new([2, 0, 0, 0, 0, 1], feature::LEGACY) };
        // No engine here: every change counts as taken at once.
        bar.shared.applied(u64::MAX);
        bar
    }

    use crate::virtio::read_bytes as read;

    #[test]
    fn queue_address_goes_to_the_selected_queue() {
        let b = bar();
        b.write(QUEUE_SEL, &1u16.to_le_bytes(), 1);
        assert_eq!(read(&b, QUEUE_NUM, 2), QUEUE_SIZE.to_le_bytes());
        b.write(QUEUE_PFN, &0x1234u32.to_le_bytes(), 1);
        b.write(QUEUE_SEL, &0u16.to_le_bytes(), 1);
        b.write(QUEUE_PFN, &0x2000u32.to_le_bytes(), 1);
        let r = b.shared.lock().clone();
        assert_eq!(r.queues[TX].desc, 0x1234 * 4096);
        assert_eq!(r.queues[TX].avail, 0x1234 * 4096 + 4096);
        assert_eq!(r.queues[TX].used, 0x1234 * 4096 + 8192, "the used ring on the next page after 4096 + 518 bytes");
        assert_eq!(r.queues[RX].desc, 0x2000 * 4096);
        assert!(r.queues[RX].ready && r.queues[TX].ready);
        b.write(QUEUE_SEL, &7u16.to_le_bytes(), 1);
        assert_eq!(read(&b, QUEUE_NUM, 2), [0, 0], "no queue 7");
        assert_eq!(b.shared.lock().driver, Some(1));
    }

    #[test]
    fn status_zero_resets_and_the_isr_clears_on_read() {
        let b = bar();
        b.write(GUEST_FEATURES, &(feature::MAC as u32).to_le_bytes(), 1);
        b.write(STATUS, &[status::ACKNOWLEDGE | status::DRIVER | status::DRIVER_OK], 1);
        assert_eq!(read(&b, STATUS, 1), [7]);
        b.write(STATUS, &[0], 1);
        assert_eq!(read(&b, STATUS, 1), [0], "reset reads back 0 at once");
        assert_eq!(read(&b, GUEST_FEATURES, 4), [0; 4]);
        b.shared.raise(crate::virtio::ISR_QUEUE);
        assert_eq!(read(&b, STATUS, 2), [0, 1], "a 2-byte read covers status and ISR");
        assert_eq!(read(&b, ISR, 1), [0]);
        assert_eq!(read(&b, HOST_FEATURES, 4), (feature::LEGACY as u32).to_le_bytes());
        assert_eq!(read(&b, CONFIG_MAC, 6), [2, 0, 0, 0, 0, 1]);
        b.shared.lock().link_up = true;
        assert_eq!(read(&b, CONFIG_STATUS, 2), [1, 0]);
        b.shared.lock().removed = true;
        assert_eq!(read(&b, HOST_FEATURES, 4), [0xFF; 4], "a removed device reads all-ones");
    }
}
