//! A split virtqueue of `N` entries as the driver sees it [virtio 1.2 §2.7]: the descriptor
//! table, the available ring (driver to device) and the used ring (device to driver), laid out
//! as legacy devices require [virtio 1.2 §2.7.2]. Every view is typed and bounds-checked once,
//! when the queue is made; indices into them are [`RingIndex<N>`], so later accesses need no check.

use crate::DriverError;
use invariants::{RingIndex, VolatileArray, VolatilePtr};
use ixgbe::memory::RingArea;
use std::sync::atomic::{fence, Ordering};

/// Descriptor flags [virtio 1.2 §2.7.5].
pub const DESC_NEXT: u64 = 1;
pub const DESC_WRITE: u64 = 2;
/// The device asks not to be notified [virtio 1.2 §2.7.10].
const USED_F_NO_NOTIFY: u16 = 1;
/// Legacy queues are aligned on 4 KiB, and so is their used ring.
pub const ALIGN: usize = 4096;

/// Bytes of a legacy queue of `n` entries: descriptors and available ring, then the used ring
/// on the next page.
pub const fn ring_bytes(n: usize) -> usize {
    (16 * n + 2 * (3 + n)).next_multiple_of(ALIGN) + (6 + 8 * n).next_multiple_of(ALIGN)
}

/// The second word of a descriptor: length, flags, next [virtio 1.2 §2.7.5].
#[inline(always)]
pub fn desc_word(len: u32, flags: u64, next: u16) -> u64 {
    u64::from(len) | (flags << 32) | (u64::from(next) << 48)
}

/// The driver's side of one split virtqueue in a [`RingArea`].
pub struct Virtqueue<'a, const N: usize> {
    pub desc: VolatileArray<'a, [u64; 2], N>,
    avail_idx: VolatilePtr<'a, u16>,
    avail_ring: VolatileArray<'a, u16, N>,
    used_flags: VolatilePtr<'a, u16>,
    used_idx: VolatilePtr<'a, u16>,
    used_ring: VolatileArray<'a, [u32; 2], N>,
    /// Free-running indices: the next available entry to fill, the next used entry to read.
    next_avail: u16,
    last_used: u16,
    /// The bus addresses of the descriptor table, the available ring and the used ring.
    rings: [u64; 3],
}

impl<'a, const N: usize> Virtqueue<'a, N> {
    /// The queue at the start of `area`, zeroed.
    pub fn new(area: &RingArea<'a>) -> Result<Self, DriverError> {
        let layout = |what: &str| DriverError::Invalid(format!("virtqueue layout: {what}"));
        let avail = 16 * N;
        let used = (avail + 2 * (3 + N)).next_multiple_of(ALIGN);
        let phys = area.device_address(0, ring_bytes(N), "a virtqueue")?;
        if phys % ALIGN as u64 != 0 || phys / ALIGN as u64 > u64::from(u32::MAX) {
            return Err(layout("a legacy queue needs a 4 KiB-aligned page frame number below 2^32"));
        }
        let q = Virtqueue {
            desc: area.array(0).ok_or_else(|| layout("descriptors"))?,
            avail_idx: area.ptr(avail + 2).ok_or_else(|| layout("available index"))?,
            avail_ring: area.array(avail + 4).ok_or_else(|| layout("available ring"))?,
            used_flags: area.ptr(used).ok_or_else(|| layout("used flags"))?,
            used_idx: area.ptr(used + 2).ok_or_else(|| layout("used index"))?,
            used_ring: area.array(used + 4).ok_or_else(|| layout("used ring"))?,
            next_avail: 0,
            last_used: 0,
            rings: [phys, phys + avail as u64, phys + used as u64],
        };
        for i in 0..N {
            q.desc.ring(RingIndex::wrapping(i)).write([0, 0]);
            q.avail_ring.ring(RingIndex::wrapping(i)).write(0);
            q.used_ring.ring(RingIndex::wrapping(i)).write([0, 0]);
        }
        // Polling: no interrupt wanted [virtio 1.2 §2.7.7].
        area.ptr::<u16>(avail).ok_or_else(|| layout("available flags"))?.write(1u16.to_le());
        q.avail_idx.write(0);
        q.used_flags.write(0);
        q.used_idx.write(0);
        Ok(q)
    }

    /// Where the device finds the rings: descriptors, available, used. A legacy device takes
    /// the first as a page frame number and finds the others by the legacy layout.
    pub fn rings(&self) -> [u64; 3] {
        self.rings
    }

    /// Descriptor `i`: its buffer's address, then length, flags and next.
    #[inline(always)]
    pub fn set_desc(&self, i: RingIndex<N>, addr: u64, word: u64) {
        self.desc.ring(i).write([addr.to_le(), word.to_le()]);
    }

    /// The buffer address of descriptor `i` alone (length and flags stay).
    #[inline(always)]
    pub fn set_desc_addr(&self, i: RingIndex<N>, addr: u64) {
        self.desc.ring(i).at::<0>().write(addr.to_le());
    }

    /// Puts chain `head` in the next available entry (published by [`Self::publish`]).
    #[inline(always)]
    pub fn offer(&mut self, head: RingIndex<N>) {
        let slot = RingIndex::<N>::wrapping(usize::from(self.next_avail));
        self.avail_ring.ring(slot).write((head.get() as u16).to_le());
        self.next_avail = self.next_avail.wrapping_add(1);
    }

    /// Makes the offered entries visible to the device; true if it wants a notification.
    #[inline(always)]
    pub fn publish(&self) -> bool {
        // The entries and descriptors before the index that hands them over.
        fence(Ordering::Release);
        self.avail_idx.write(self.next_avail.to_le());
        fence(Ordering::SeqCst);
        u16::from_le(self.used_flags.read()) & USED_F_NO_NOTIFY == 0
    }

    /// The next used element, if the device returned one: the chain's head as the device
    /// says it (untrusted: reduced modulo `N`) and the bytes it wrote. Not consumed until
    /// [`Self::consume`].
    #[inline(always)]
    pub fn peek_used(&self) -> Option<(RingIndex<N>, u32)> {
        if u16::from_le(self.used_idx.read()) == self.last_used {
            return None;
        }
        // The element after the index that published it.
        fence(Ordering::Acquire);
        let [id, len] = self.used_ring.ring(RingIndex::wrapping(usize::from(self.last_used))).read();
        Some((RingIndex::wrapping(u32::from_le(id) as usize), u32::from_le(len)))
    }

    /// Moves past the element [`Self::peek_used`] returned.
    #[inline(always)]
    pub fn consume(&mut self) {
        self.last_used = self.last_used.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legacy_queue_of_256_takes_three_pages() {
        // 4096 of descriptors + 518 of available ring, rounded up; 2054 of used ring, rounded up.
        assert_eq!(ring_bytes(256), 3 * 4096);
        assert_eq!(desc_word(10, DESC_WRITE | DESC_NEXT, 7), 10 | (3 << 32) | (7 << 48));
    }
}
