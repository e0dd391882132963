//! The device side of a split virtqueue [virtio 1.2 §2.7]: taking descriptor chains from the
//! available ring, returning them on the used ring. Every address comes from the driver, so
//! every access goes through the function's DMA domain, and every index is checked against
//! the queue size before use: a hostile or buggy driver gets a [`QueueError`], never an access
//! outside its memory.

use super::QueueRegs;
use crate::dma::{self, DmaSpace};
use std::sync::atomic::{fence, Ordering};

/// Descriptor flags [virtio 1.2 §2.7.5].
pub const DESC_NEXT: u16 = 1;
pub const DESC_WRITE: u16 = 2;
pub const DESC_INDIRECT: u16 = 4;
/// Used-ring flag: the device needs no notification [virtio 1.2 §2.7.10].
pub const USED_F_NO_NOTIFY: u16 = 1;

/// One buffer of a chain: `len` bytes at `addr`, which the device reads, or writes if `writable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub addr: u64,
    pub len: u32,
    pub writable: bool,
}

/// Why a queue cannot go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueError {
    /// An access at this address left the driver's memory.
    Fault(u64),
    /// The driver broke the queue's rules (the reason, for the lint).
    Malformed(&'static str),
}

/// The device's state of one queue.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceQueue {
    pub regs: QueueRegs,
    /// The next available-ring entry to take and the next used-ring entry to fill (free
    /// running, wrapping at 2^16 as the indices in memory do).
    pub last_avail: u16,
    pub used_idx: u16,
    /// Stopped after a [`QueueError`] until the device is reset.
    pub broken: bool,
}

fn read_u16(dma: &mut impl DmaSpace, at: u64) -> Result<u16, QueueError> {
    let mut b = [0u8; 2];
    if dma::read(dma, at, &mut b) {
        Ok(u16::from_le_bytes(b))
    } else {
        Err(QueueError::Fault(at))
    }
}

fn write(dma: &mut impl DmaSpace, at: u64, bytes: &[u8]) -> Result<(), QueueError> {
    if dma::write(dma, at, bytes) {
        Ok(())
    } else {
        Err(QueueError::Fault(at))
    }
}

impl DeviceQueue {
    /// A queue at `regs`, from its first entries.
    pub fn new(regs: QueueRegs) -> Self {
        DeviceQueue { regs, ..Default::default() }
    }

    /// Whether the device may use the queue.
    pub fn usable(&self) -> bool {
        self.regs.ready && !self.broken && self.regs.size > 0
    }

    /// Chains the driver has made available and the device not yet taken.
    pub fn available(&self, dma: &mut impl DmaSpace) -> Result<u16, QueueError> {
        let idx = read_u16(dma, self.regs.avail + 2)?;
        let pending = idx.wrapping_sub(self.last_avail);
        if pending > self.regs.size {
            return Err(QueueError::Malformed("the available index moved by more than the queue size"));
        }
        // The ring entries and descriptors are read after the index that published them.
        fence(Ordering::Acquire);
        Ok(pending)
    }

    /// Takes the next available chain (the caller checked [`Self::available`]): its head
    /// index, with its buffers in `segments` (cleared first).
    pub fn pop(&mut self, dma: &mut impl DmaSpace, segments: &mut Vec<Segment>) -> Result<u16, QueueError> {
        let size = self.regs.size;
        let slot = u64::from(self.last_avail % size);
        let head = read_u16(dma, self.regs.avail + 4 + 2 * slot)?;
        self.last_avail = self.last_avail.wrapping_add(1);
        segments.clear();
        let mut i = head;
        // A chain has at most `size` descriptors; one longer loops [virtio 1.2 §2.7.5.2].
        for _ in 0..size {
            if i >= size {
                return Err(QueueError::Malformed("a descriptor index outside the table"));
            }
            let mut d = [0u8; 16];
            let at = self.regs.desc + 16 * u64::from(i);
            if !dma::read(dma, at, &mut d) {
                return Err(QueueError::Fault(at));
            }
            let addr = u64::from_le_bytes(d[0..8].try_into().unwrap_or([0; 8]));
            let len = u32::from_le_bytes(d[8..12].try_into().unwrap_or([0; 4]));
            let flags = u16::from_le_bytes([d[12], d[13]]);
            if flags & DESC_INDIRECT != 0 {
                return Err(QueueError::Malformed("an indirect descriptor, a feature the device does not offer"));
            }
            let writable = flags & DESC_WRITE != 0;
            if !writable && segments.last().is_some_and(|s| s.writable) {
                return Err(QueueError::Malformed("a device-readable descriptor after a device-writable one"));
            }
            segments.push(Segment { addr, len, writable });
            if flags & DESC_NEXT == 0 {
                return Ok(head);
            }
            i = u16::from_le_bytes([d[14], d[15]]);
        }
        Err(QueueError::Malformed("a descriptor chain that loops"))
    }

    /// Returns chain `head` with `len` bytes written into it, and publishes the used index.
    pub fn push_used(&mut self, dma: &mut impl DmaSpace, head: u16, len: u32) -> Result<(), QueueError> {
        let slot = u64::from(self.used_idx % self.regs.size);
        let mut elem = [0u8; 8];
        elem[..4].copy_from_slice(&u32::from(head).to_le_bytes());
        elem[4..].copy_from_slice(&len.to_le_bytes());
        write(dma, self.regs.used + 4 + 8 * slot, &elem)?;
        self.used_idx = self.used_idx.wrapping_add(1);
        // The element is visible before the index that hands it over. The flags ask the driver
        // not to notify: the engine polls every available ring [virtio 1.2 §2.7.10].
        fence(Ordering::Release);
        let [lo, hi] = self.used_idx.to_le_bytes();
        write(dma, self.regs.used, &[USED_F_NO_NOTIFY as u8, 0, lo, hi])
    }
}

/// Reads the device-readable bytes of `segments` into `out` (cleared first), at most `max`;
/// `Ok(false)` if there were more.
pub fn gather(
    dma: &mut impl DmaSpace,
    segments: &[Segment],
    max: usize,
    out: &mut Vec<u8>,
) -> Result<bool, QueueError> {
    out.clear();
    for s in segments.iter().filter(|s| !s.writable) {
        if out.len() + s.len as usize > max {
            return Ok(false);
        }
        if !dma::read_append(dma, s.addr, s.len as usize, out) {
            return Err(QueueError::Fault(s.addr));
        }
    }
    Ok(true)
}

/// Writes `parts` one after the other into the device-writable buffers of `segments`; the
/// bytes written, or `Ok(None)` if they do not fit.
pub fn scatter(dma: &mut impl DmaSpace, segments: &[Segment], parts: &[&[u8]]) -> Result<Option<u32>, QueueError> {
    let room: u64 = segments.iter().filter(|s| s.writable).map(|s| u64::from(s.len)).sum();
    let total: usize = parts.iter().map(|p| p.len()).sum();
    if (total as u64) > room {
        return Ok(None);
    }
    let mut bufs = segments.iter().filter(|s| s.writable);
    let (mut at, mut left) = (0u64, 0u64);
    for part in parts {
        let mut rest: &[u8] = part;
        while !rest.is_empty() {
            if left == 0 {
                let Some(s) = bufs.next() else { return Ok(None) };
                (at, left) = (s.addr, u64::from(s.len));
                continue;
            }
            let n = rest.len().min(left as usize);
            write(dma, at, &rest[..n])?;
            (at, left, rest) = (at + n as u64, left - n as u64, &rest[n..]);
        }
    }
    Ok(Some(total as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::FlatDmaSpace;

    const BASE: u64 = 0x10_0000;
    const SIZE: u16 = 8;
    const DESC: u64 = BASE;
    const AVAIL: u64 = BASE + 0x1000;
    const USED: u64 = BASE + 0x2000;

    fn space() -> FlatDmaSpace {
        FlatDmaSpace { region: platform::MappedRegion::anonymous(0x10000).unwrap(), base: BASE }
    }

    fn put(dma: &mut FlatDmaSpace, at: u64, bytes: &[u8]) {
        assert!(dma::write(dma, at, bytes));
    }

    fn desc(dma: &mut FlatDmaSpace, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let mut d = [0u8; 16];
        d[0..8].copy_from_slice(&addr.to_le_bytes());
        d[8..12].copy_from_slice(&len.to_le_bytes());
        d[12..14].copy_from_slice(&flags.to_le_bytes());
        d[14..16].copy_from_slice(&next.to_le_bytes());
        put(dma, DESC + 16 * u64::from(i), &d);
    }

    fn offer(dma: &mut FlatDmaSpace, slot: u16, head: u16, idx: u16) {
        put(dma, AVAIL + 4 + 2 * u64::from(slot), &head.to_le_bytes());
        put(dma, AVAIL + 2, &idx.to_le_bytes());
    }

    fn queue() -> DeviceQueue {
        DeviceQueue::new(QueueRegs { size: SIZE, desc: DESC, avail: AVAIL, used: USED, ready: true, reset: false })
    }

    #[test]
    fn a_chain_is_gathered_scattered_and_returned() {
        let mut dma = space();
        let mut q = queue();
        desc(&mut dma, 3, BASE + 0x4000, 10, DESC_NEXT, 5);
        desc(&mut dma, 5, BASE + 0x5000, 100, 0, 0);
        put(&mut dma, BASE + 0x4000, &[1; 10]);
        put(&mut dma, BASE + 0x5000, &[2; 100]);
        offer(&mut dma, 0, 3, 1);
        assert_eq!(q.available(&mut dma), Ok(1));
        let mut segs = Vec::new();
        assert_eq!(q.pop(&mut dma, &mut segs), Ok(3));
        assert_eq!(segs.len(), 2);
        let mut out = Vec::new();
        assert_eq!(gather(&mut dma, &segs, 200, &mut out), Ok(true));
        assert_eq!(out.len(), 110);
        assert_eq!(gather(&mut dma, &segs, 50, &mut out), Ok(false), "longer than allowed");
        q.push_used(&mut dma, 3, 0).unwrap();
        let mut used = [0u8; 12];
        assert!(dma::read(&mut dma, USED, &mut used));
        assert_eq!(u16::from_le_bytes([used[2], used[3]]), 1);
        assert_eq!(u32::from_le_bytes(used[4..8].try_into().unwrap()), 3);
        assert_eq!(q.available(&mut dma), Ok(0));

        desc(&mut dma, 0, BASE + 0x6000, 4, DESC_WRITE | DESC_NEXT, 1);
        desc(&mut dma, 1, BASE + 0x7000, 64, DESC_WRITE, 0);
        offer(&mut dma, 1, 0, 2);
        q.pop(&mut dma, &mut segs).unwrap();
        assert_eq!(scatter(&mut dma, &segs, &[&[9; 6], &[8; 10]]), Ok(Some(16)));
        let mut b = [0u8; 12];
        assert!(dma::read(&mut dma, BASE + 0x7000, &mut b));
        assert_eq!(b, [9, 9, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8], "the header's tail, then the frame, in the second buffer");
        assert_eq!(scatter(&mut dma, &segs, &[&[0; 69]]), Ok(None), "68 bytes of room");
    }

    #[test]
    fn what_a_hostile_driver_writes_is_refused() {
        let mut dma = space();
        let mut q = queue();
        let mut segs = Vec::new();
        offer(&mut dma, 0, 9, 1);
        assert_eq!(q.pop(&mut dma, &mut segs), Err(QueueError::Malformed("a descriptor index outside the table")));
        let mut q = queue();
        desc(&mut dma, 1, BASE, 1, DESC_NEXT, 2);
        desc(&mut dma, 2, BASE, 1, DESC_NEXT, 1);
        offer(&mut dma, 0, 1, 1);
        assert_eq!(q.pop(&mut dma, &mut segs), Err(QueueError::Malformed("a descriptor chain that loops")));
        let q = queue();
        put(&mut dma, AVAIL + 2, &100u16.to_le_bytes());
        assert!(matches!(q.available(&mut dma), Err(QueueError::Malformed(_))));
        let mut q = queue();
        desc(&mut dma, 4, 0xDEAD_0000, 64, 0, 0);
        offer(&mut dma, 0, 4, 1);
        q.pop(&mut dma, &mut segs).unwrap();
        assert_eq!(gather(&mut dma, &segs, 2048, &mut Vec::new()), Err(QueueError::Fault(0xDEAD_0000)));
        let mut q = queue();
        q.regs.used = 0xBAD0_0000;
        assert_eq!(q.push_used(&mut dma, 0, 0), Err(QueueError::Fault(0xBAD0_0004)));
    }
}
