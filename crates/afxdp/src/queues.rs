//! Receive and transmit queues of an AF_XDP socket behind ixgbe's device-independent
//! [`Receive`] and [`Transmit`] traits.
//!
//! A buffer given to the kernel (on the fill ring to receive into, on the transmit ring to
//! send) is held by its queue in a table indexed by its UMEM chunk. The kernel names a
//! received or sent frame by its UMEM offset, a value it writes: reduced to a chunk number
//! modulo [`CHUNKS`] it indexes the table without a check, and an offset whose chunk holds no
//! buffer, or that is not where the buffer starts, is refused, not trusted. So is a length
//! longer than a buffer.

use invariants::{RingArray, RingIndex};
use ixgbe::queues::{Batch, Buffer, BufferPool, Receive, Transmit};
use ixgbe::PacketLength;
use platform::dma::{FRAME_HEADROOM, FRAME_SIZE};
use platform::xdp::{RxRings, TxRings, XdpDesc, XdpSocket};

/// Chunks of the largest UMEM a queue can hold buffers of: 4096 frames, 16 MiB.
pub const CHUNKS: usize = 4096;

/// The buffers a queue gave the kernel, by UMEM chunk.
struct Held<'a> {
    slots: RingArray<Option<Buffer<'a>>, CHUNKS>,
    /// The UMEM's first byte: a buffer's offset is its address less this.
    base: usize,
}

impl<'a> Held<'a> {
    fn new(base: usize, umem_len: usize) -> Result<Self, String> {
        if umem_len > CHUNKS * FRAME_SIZE {
            return Err(format!(
                "a UMEM of {} frames: an AF_XDP queue holds at most {CHUNKS}; give smaller pools",
                umem_len / FRAME_SIZE
            ));
        }
        Ok(Held { slots: RingArray::from_fn(|_| None), base })
    }

    /// The UMEM offset of `b`'s first byte.
    #[inline(always)]
    fn offset(&self, b: &Buffer<'a>) -> u64 {
        b.data().address().wrapping_sub(self.base) as u64
    }

    #[inline(always)]
    fn slot(&mut self, offset: u64) -> &mut Option<Buffer<'a>> {
        &mut self.slots[RingIndex::wrapping((offset / FRAME_SIZE as u64) as usize)]
    }

    /// Holds `b`, at `offset`; a buffer the slot held already goes back to `pool`.
    #[inline(always)]
    fn hold(&mut self, offset: u64, b: Buffer<'a>, pool: &mut BufferPool<'a>) {
        if let Some(old) = self.slot(offset).replace(b) {
            pool.give(old);
        }
    }

    /// Every buffer held, back to `pool`.
    fn release(&mut self, pool: &mut BufferPool<'a>) {
        for i in 0..CHUNKS {
            if let Some(b) = self.slots[RingIndex::wrapping(i)].take() {
                pool.give(b);
            }
        }
    }
}

/// Whether `offset` is where a buffer starts in its chunk (the kernel moved no frame start).
#[inline(always)]
fn at_buffer_start(offset: u64) -> bool {
    offset % FRAME_SIZE as u64 == FRAME_HEADROOM as u64
}

/// The receive queue of an AF_XDP socket: `N` entries in its fill and receive rings.
pub struct RxQueue<'a, const N: usize> {
    rings: RxRings<N>,
    socket: XdpSocket,
    held: Held<'a>,
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
        let mut q = RxQueue { rings, socket, held: Held::new(umem_base, umem_len)?, refused: 0 };
        q.refill(pool);
        Ok(q)
    }

    /// Gives the kernel as many buffers from `pool` as its fill ring has room for.
    #[inline(always)]
    fn refill(&mut self, pool: &mut BufferPool<'a>) {
        let room = self.rings.fill.free().min(pool.available());
        let mut given = 0;
        while given < room {
            let Some(b) = pool.take() else { break };
            let offset = self.held.offset(&b);
            self.rings.fill.write(given, offset);
            self.held.hold(offset, b, pool);
            given += 1;
        }
        self.rings.fill.submit(given);
    }

    /// Every buffer the queue holds, back to `pool` (the socket is about to close).
    pub fn release(&mut self, pool: &mut BufferPool<'a>) {
        self.held.release(pool);
    }

    /// The socket, for its counters.
    pub fn socket(&self) -> &XdpSocket {
        &self.socket
    }
}

impl<'a, const N: usize> Receive<'a> for RxQueue<'a, N> {
    #[inline(always)]
    fn rx_batch<const B: usize>(&mut self, pool: &mut BufferPool<'a>, batch: &mut Batch<'a, B>) -> usize {
        if self.rings.fill.free() >= REFILL_AT {
            self.refill(pool);
        }
        let n = self.rings.rx.available().min(B - batch.len());
        if n == 0 {
            if self.rings.fill.needs_wakeup() {
                self.socket.wake_rx();
            }
            return 0;
        }
        let before = batch.len();
        for k in 0..n {
            let d: XdpDesc = self.rings.rx.read(k);
            let frame = self.held.slot(d.addr).take();
            match (frame, PacketLength::new(d.len as usize)) {
                (Some(mut b), Some(length)) if at_buffer_start(d.addr) => {
                    b.length = length;
                    if let Err(b) = batch.push(b) {
                        pool.give(b);
                    }
                }
                (frame, _) => {
                    self.refused += 1;
                    if let Some(b) = frame {
                        pool.give(b);
                    }
                }
            }
        }
        self.rings.rx.release(n);
        batch.len() - before
    }
}

/// The transmit queue of an AF_XDP socket: `N` entries in its transmit and completion rings.
pub struct TxQueue<'a, const N: usize> {
    rings: TxRings<N>,
    socket: XdpSocket,
    held: Held<'a>,
    /// Frames on the transmit ring the kernel has not completed yet.
    outstanding: usize,
    /// The `errno` of the kernel's first refusal to send (the interface is gone or down).
    pub failed: Option<i32>,
}

impl<'a, const N: usize> TxQueue<'a, N> {
    /// The transmit queue over `rings` of `socket`, whose UMEM is as for [`RxQueue::new`].
    pub fn new(rings: TxRings<N>, socket: XdpSocket, umem_base: usize, umem_len: usize) -> Result<Self, String> {
        Ok(TxQueue { rings, socket, held: Held::new(umem_base, umem_len)?, outstanding: 0, failed: None })
    }

    /// Buffers of frames the kernel has sent, back to `pool`.
    #[inline(always)]
    fn reclaim(&mut self, pool: &mut BufferPool<'a>) {
        let done = self.rings.completion.available();
        for k in 0..done {
            let offset = self.rings.completion.read(k);
            if let Some(b) = self.held.slot(offset).take() {
                pool.give(b);
            }
        }
        self.rings.completion.release(done);
        self.outstanding = self.outstanding.saturating_sub(done);
    }

    /// Wakes the kernel if frames wait on the transmit ring and it asks to be woken (in copy
    /// mode always: it sends at most a burst per call).
    #[inline(always)]
    fn kick(&mut self) {
        if self.outstanding != 0 && self.rings.tx.needs_wakeup() {
            if let Err(errno) = self.socket.wake_tx() {
                self.failed.get_or_insert(errno);
            }
        }
    }

    /// Every buffer the queue holds, back to `pool` (the socket is about to close).
    pub fn release(&mut self, pool: &mut BufferPool<'a>) {
        self.held.release(pool);
        self.outstanding = 0;
    }

    /// The socket, for its counters.
    pub fn socket(&self) -> &XdpSocket {
        &self.socket
    }
}

impl<'a, const N: usize> Transmit<'a> for TxQueue<'a, N> {
    #[inline(always)]
    fn tx_batch<const B: usize>(&mut self, pool: &mut BufferPool<'a>, batch: &mut Batch<'a, B>) -> usize {
        self.reclaim(pool);
        let n = self.rings.tx.free().min(batch.len());
        let mut k = 0;
        let (rings, held) = (&mut self.rings, &mut self.held);
        batch.take_front(n, |b| {
            let offset = held.offset(&b);
            rings.tx.write(k, XdpDesc { addr: offset, len: b.length.get() as u32, options: 0 });
            held.hold(offset, b, pool);
            k += 1;
        });
        self.rings.tx.submit(k);
        self.outstanding += k;
        self.kick();
        k
    }

    #[inline(always)]
    fn idle(&mut self, pool: &mut BufferPool<'a>) {
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
        let mut held = Held::new(pool_base(pool), region.len()).unwrap();
        let b = pool.take().unwrap();
        let offset = held.offset(&b);
        assert!(at_buffer_start(offset), "a buffer starts FRAME_HEADROOM into its chunk");
        assert!(offset < region.len() as u64);
        held.hold(offset, b, pool);
        assert!(!at_buffer_start(offset + 1) && !at_buffer_start(offset - FRAME_HEADROOM as u64));
        assert!(held.slot(offset + FRAME_SIZE as u64).is_none(), "the next chunk holds nothing");
        let again = held.slot(offset - 1).take();
        assert!(again.is_some(), "an offset in the same chunk names the same slot; the length check is the caller's");
        assert!(held.slot(offset).is_none(), "taken once, a buffer is not found twice");
        assert!(Held::new(0, (CHUNKS + 1) * FRAME_SIZE).is_err(), "a UMEM larger than the table is refused");
    }

    /// The UMEM's base for `pool`'s region: its lowest buffer less FRAME_HEADROOM.
    fn pool_base(pool: &mut BufferPool<'_>) -> usize {
        let mut all = Vec::new();
        while let Some(b) = pool.take() {
            all.push(b);
        }
        let base = all.iter().map(|b| b.data().address()).min().unwrap() - FRAME_HEADROOM;
        for b in all {
            pool.give(b);
        }
        base
    }
}
