//! Receive and transmit queues of an AF_XDP socket behind ixgbe's device-independent
//! [`Receive`] and [`Transmit`] traits. What the kernel writes in a ring is untrusted:
//!
//! - A buffer given to the kernel to receive into (on the fill ring) is held by the receive
//!   queue in a table indexed by its UMEM chunk: a zero-copy driver, or the kernel's own
//!   recycling of a buffer it could not deliver, may return frames in another order than it
//!   was given buffers. The kernel names a received frame by its UMEM offset: reduced to a
//!   chunk number modulo [`CHUNKS`] it indexes the table without a check, and an offset whose
//!   chunk holds no buffer, or that is not where the buffer starts, is refused, not trusted.
//!   So is a length longer than a buffer.
//! - A buffer given to the kernel to send is held by the transmit queue in order, as the
//!   82599's transmit queue holds its buffers: the kernel completes frames in the order it took
//!   them from the transmit ring, so the completion ring's count (never more than what is
//!   queued) says how many of the oldest are done, and they go back to the pool in block
//!   copies. Its offsets are not read.

use invariants::{RingArray, RingIndex, RingQueue};
use ixgbe::queues::{Batch, Buffer, BufferPool, Receive, Transmit};
use ixgbe::PacketLength;
use platform::dma::{FRAME_HEADROOM, FRAME_SIZE};
use platform::xdp::{Producer, RxRings, TxRings, XdpSocket};

/// Chunks of the largest UMEM a receive queue can hold buffers of: 4096 frames, 16 MiB.
pub const CHUNKS: usize = 4096;

/// The UMEM offset of `b`'s first byte, in a UMEM that starts at address `base`.
#[inline(always)]
fn offset(b: &Buffer<'_>, base: usize) -> u64 {
    b.data().address().wrapping_sub(base) as u64
}

/// Whether `offset` is where a buffer starts in its chunk (the kernel moved no frame start).
#[inline(always)]
fn at_buffer_start(offset: u64) -> bool {
    offset % FRAME_SIZE as u64 == FRAME_HEADROOM as u64
}

/// The buffers a receive queue gave the kernel, by UMEM chunk.
struct Held<'a> {
    slots: RingArray<Option<Buffer<'a>>, CHUNKS>,
}

impl<'a> Held<'a> {
    fn new(umem_len: usize) -> Result<Self, String> {
        if umem_len > CHUNKS * FRAME_SIZE {
            return Err(format!(
                "a UMEM of {} frames: an AF_XDP queue holds at most {CHUNKS}; give smaller pools",
                umem_len / FRAME_SIZE
            ));
        }
        Ok(Held { slots: RingArray::from_fn(|_| None) })
    }

    #[inline(always)]
    fn slot(&mut self, offset: u64) -> &mut Option<Buffer<'a>> {
        &mut self.slots[RingIndex::wrapping((offset / FRAME_SIZE as u64) as usize)]
    }

    /// The buffer held in `offset`'s chunk, if any, which the chunk then no longer holds. Tested
    /// before it is taken: `Option::take` alone stores a whole `None`, whose unused words the
    /// compiler fills with stale registers, two stores and two moves more per frame.
    #[inline(always)]
    fn take(&mut self, offset: u64) -> Option<Buffer<'a>> {
        let slot = self.slot(offset);
        if slot.is_some() {
            slot.take()
        } else {
            None
        }
    }

    /// Holds `b`, whose offset is `offset`. Each buffer has a chunk of its own, and one taken
    /// from the pool is held nowhere, so the slot is empty.
    #[inline(always)]
    fn hold(&mut self, offset: u64, b: Buffer<'a>) {
        *self.slot(offset) = Some(b);
    }
}

/// Writes the offsets of as many buffers from `pool` as `fill` has room for, holding each
/// buffer in `held`; returns how many to submit. A function of its own: its `&mut` arguments
/// are known not to alias, so nothing is reloaded after each ring write.
#[inline(never)]
fn give_kernel<'a, const N: usize>(
    fill: &mut Producer<u64, N>,
    held: &mut Held<'a>,
    base: usize,
    pool: &mut BufferPool<'a>,
) -> usize {
    let mut given = 0;
    pool.take_each(fill.free(), |mut b| {
        // A buffer lent to receive into holds no packet yet. Stored as a constant, its length is
        // not copied: the copy of its last 16 bytes went through the stack, 2 instructions more.
        b.length = PacketLength::ZERO;
        let offset = offset(&b, base);
        held.hold(offset, b);
        fill.write(given, offset);
        given += 1;
    });
    given
}

/// The receive queue of an AF_XDP socket: `N` entries in its fill and receive rings.
pub struct RxQueue<'a, const N: usize> {
    rings: RxRings<N>,
    socket: XdpSocket,
    held: Held<'a>,
    /// The UMEM's first byte (a buffer's offset is its address less this).
    base: usize,
    /// Frames the kernel named by an offset that holds no buffer of this queue, or with a
    /// length longer than a buffer: dropped, their buffers (if any) recycled.
    pub refused: u64,
}

/// The fill ring is topped up once this many entries are free, so each refill is a burst.
const REFILL_AT: usize = 32;

impl<'a, const N: usize> RxQueue<'a, N> {
    /// The receive queue over `rings` of `socket`, whose UMEM starts at `umem_base` and holds
    /// `umem_len` bytes; its fill ring filled from `pool`.
    pub fn new(
        rings: RxRings<N>,
        socket: XdpSocket,
        umem_base: usize,
        umem_len: usize,
        pool: &mut BufferPool<'a>,
    ) -> Result<Self, String> {
        let mut q = RxQueue { rings, socket, held: Held::new(umem_len)?, base: umem_base, refused: 0 };
        q.refill(pool);
        Ok(q)
    }

    /// Gives the kernel as many buffers from `pool` as its fill ring has room for.
    #[inline(always)]
    fn refill(&mut self, pool: &mut BufferPool<'a>) {
        let given = give_kernel(&mut self.rings.fill, &mut self.held, self.base, pool);
        self.rings.fill.submit(given);
    }

    /// Nothing received: the kernel is woken if it asks to be before it fills the ring again.
    #[inline(always)]
    fn wake_if_asked(&self) {
        if self.rings.fill.needs_wakeup() {
            self.socket.wake_rx();
        }
    }

    /// The socket, for its counters.
    pub fn socket(&self) -> &XdpSocket {
        &self.socket
    }

    /// Refills the fill ring if it has room for a burst, then moves what the kernel received
    /// to `batch`. Not inlined, as ixgbe's `rx_batch`: as a function of its own, its `&mut`
    /// arguments are known not to alias, so the pool's and the batch's counts stay in
    /// registers across the ring writes.
    #[inline(never)]
    fn receive<const B: usize>(&mut self, pool: &mut BufferPool<'a>, batch: &mut Batch<'a, B>) -> usize {
        if self.rings.fill.free() >= REFILL_AT {
            self.refill(pool);
        }
        let n = self.rings.rx.available().min(B - batch.len());
        if n == 0 {
            self.wake_if_asked();
            return 0;
        }
        // In locals: reached through `self`, they would be reloaded after every buffer moved.
        let (rx, held) = (&self.rings.rx, &mut self.held);
        let mut refused = 0;
        let received = batch.push_each(n, |k| {
            let (addr, len) = rx.read_desc(k);
            let frame = held.take(addr);
            match (frame, PacketLength::new(len as usize)) {
                (Some(mut b), Some(length)) if at_buffer_start(addr) => {
                    b.length = length;
                    Some(b)
                }
                (frame, _) => {
                    refused += 1;
                    if let Some(b) = frame {
                        pool.give(b);
                    }
                    None
                }
            }
        });
        self.refused += refused;
        self.rings.rx.release(n);
        received
    }
}

impl<'a, const N: usize> Receive<'a> for RxQueue<'a, N> {
    // Most polls find nothing to receive and no burst of the fill ring to give: answered in
    // the caller's loop, without a call.
    #[inline(always)]
    fn rx_batch<const B: usize>(&mut self, pool: &mut BufferPool<'a>, batch: &mut Batch<'a, B>) -> usize {
        if self.rings.rx.available() == 0 && self.rings.fill.free() < REFILL_AT {
            self.wake_if_asked();
            return 0;
        }
        self.receive(pool, batch)
    }
}

/// The transmit queue of an AF_XDP socket: `N` entries in its transmit and completion rings.
pub struct TxQueue<'a, const N: usize> {
    rings: TxRings<N>,
    socket: XdpSocket,
    /// The buffers on the transmit ring or in the kernel, oldest first.
    sent: RingQueue<Buffer<'a>, N>,
    /// The UMEM's first byte (a buffer's offset is its address less this).
    base: usize,
}

impl<'a, const N: usize> TxQueue<'a, N> {
    /// The transmit queue over `rings` of `socket`, whose UMEM starts at `umem_base`.
    pub fn new(rings: TxRings<N>, socket: XdpSocket, umem_base: usize) -> Self {
        TxQueue { rings, socket, sent: RingQueue::new(), base: umem_base }
    }

    /// Buffers of frames the kernel has sent, back to `pool`: as many of the oldest as the
    /// completion ring counts, never more than are queued.
    #[inline(always)]
    fn reclaim(&mut self, pool: &mut BufferPool<'a>) {
        let done = self.rings.completion.available().min(self.sent.len());
        if done != 0 {
            let end = RingIndex::wrapping(self.sent.front().get() + done);
            pool.give_sent(&mut self.sent, end);
            self.rings.completion.release(done);
        }
    }

    /// Wakes the kernel if frames wait on the transmit ring and it asks to be woken (in copy
    /// mode always: it sends at most a burst per call). Frames it took and has not completed
    /// need no call.
    #[inline(always)]
    fn kick(&mut self) {
        if self.rings.tx.unconsumed() && self.rings.tx.needs_wakeup() {
            self.socket.wake_tx();
        }
    }

    /// Frames on the transmit ring the kernel has not completed yet.
    pub fn in_flight(&self) -> usize {
        self.sent.len()
    }

    /// The socket, for its counters.
    pub fn socket(&self) -> &XdpSocket {
        &self.socket
    }
}

impl<'a, const N: usize> Transmit<'a> for TxQueue<'a, N> {
    // Not inlined, as `rx_batch`.
    #[inline(never)]
    fn tx_batch<const B: usize>(&mut self, pool: &mut BufferPool<'a>, batch: &mut Batch<'a, B>) -> usize {
        self.reclaim(pool);
        // The transmit ring has room for what the queue does not hold (both have N entries,
        // and the queue one less): its free count is read only for the kernel's consumer.
        let (tx, base) = (&mut self.rings.tx, self.base);
        let first = self.sent.back();
        let k = batch.move_to(&mut self.sent, |slot, b| {
            tx.write_desc(first.distance_to(slot), offset(b, base), b.length.get() as u32);
        });
        self.rings.tx.submit(k);
        self.kick();
        k
    }

    /// With nothing in flight there is nothing to reclaim or to wake the kernel for: most
    /// idle polls end at that test.
    #[inline(always)]
    fn idle(&mut self, pool: &mut BufferPool<'a>) {
        if self.sent.is_empty() {
            return;
        }
        self.reclaim(pool);
        self.kick();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ixgbe::memory::FramePools;

    #[test]
    fn a_buffer_is_found_by_the_offset_the_kernel_names_and_by_no_other() {
        // Needs hugepages (make test provides them).
        let mut frames = FramePools::allocate(&[8]).unwrap();
        let (region, mut pools) = frames.parts().unwrap();
        let pool = &mut pools[0];
        let mut held = Held::new(region.len()).unwrap();
        let mut all: Vec<_> = std::iter::from_fn(|| pool.take()).collect();
        let base = all.iter().map(|b| b.data().address()).min().unwrap() - FRAME_HEADROOM;
        let b = all.pop().unwrap();
        let at = offset(&b, base);
        assert!(at_buffer_start(at), "a buffer starts FRAME_HEADROOM into its chunk");
        assert!(at < region.len() as u64);
        held.hold(at, b);
        assert!(!at_buffer_start(at + 1) && !at_buffer_start(at - FRAME_HEADROOM as u64));
        assert!(held.slot(at + FRAME_SIZE as u64).is_none(), "the next chunk holds nothing");
        let again = held.take(at - 1);
        assert!(again.is_some(), "an offset in the same chunk names the same slot; the start check is the caller's");
        assert!(held.take(at).is_none(), "taken once, a buffer is not found twice");
        assert!(Held::new((CHUNKS + 1) * FRAME_SIZE).is_err(), "a UMEM larger than the table is refused");
    }
}
