//! The flexible model: DPDK-like queues over a shared buffer pool [paper §VI; TinyNF queues].
//!
//! [`Receive`] and [`Transmit`] are the device-independent API: their signatures hold only
//! buffers, pools and batches, so an application written against them runs on any device that
//! implements them. [`RxQueue`] and [`TxQueue`] implement them for the 82599.
//!
//! Buffers are values that cannot be copied: each is, at any time, in exactly one place (the
//! pool, a ring, or a batch held by the caller), so none is leaked or handed out twice
//! ("buffers are conserved"). "Pool inversion": a receive queue and the transmit queue its
//! packets go to share one pool, so recycled TX buffers refill that RX ring.

use crate::device::{Device, DriverError, RssQueue};
use crate::regs::RX_DD;
use crate::{PacketData, PacketLength, Refused};
use invariants::{ArrayStack, RingArray, RingIndex, RingQueue, VolatilePtr};
use platform::dma::{BufAddr, BuffersArea, DescriptorArea, DmaLayout, DmaRegion, HeadArea};
use platform::i82599::{Doorbell, EnabledQueue, LegacyRing, TxCommand};

/// One packet buffer in DMA memory: its bytes, bus address and current length.
pub struct Buffer<'a> {
    data: VolatilePtr<'a, PacketData>,
    addr: BufAddr<'a>,
    /// Length of the packet in the buffer.
    pub length: PacketLength,
}

impl<'a> Buffer<'a> {
    /// The buffer's bytes (volatile access), for as long as the buffer is borrowed: once it
    /// moves (to a TX ring, the pool, another batch), its bytes are no longer the caller's.
    ///
    /// ```compile_fail,E0505
    /// # use ixgbe::queues::{Batch, Buffer};
    /// fn write_after_sending<'a>(b: Buffer<'a>, batch: &mut Batch<'a, 8>) {
    ///     let bytes = b.data();
    ///     let _ = batch.push(b); // handed on, e.g. to be sent
    ///     bytes.copy_from(0, &[0xFF; 64]); // while the device reads it
    /// }
    /// ```
    #[inline(always)]
    pub fn data(&self) -> VolatilePtr<'_, PacketData> {
        self.data
    }

    /// The bus address of the buffer, for a device crate's descriptors.
    #[inline(always)]
    pub fn device_address(&self) -> BufAddr<'a> {
        self.addr
    }
}

/// A pool of free buffers (LIFO, so recently used buffers are still in cache).
pub struct BufferPool<'a> {
    free: Vec<Buffer<'a>>,
    total: usize,
}

impl<'a> BufferPool<'a> {
    /// A pool of every buffer of `area` in `region`. Only [`QueueMemory::parts`] and
    /// [`crate::memory::RingsAndPool::parts`] make pools, one per memory at a time, so no two
    /// pools hold the same buffer.
    pub(crate) fn new(region: &'a DmaRegion, area: BuffersArea) -> Result<Self, DriverError> {
        let free: Vec<Buffer<'a>> = region
            .buffers(area)?
            .into_iter()
            .map(|b| Buffer { data: b.data, addr: b.addr, length: PacketLength::ZERO })
            .collect();
        let total = free.len();
        Ok(BufferPool { free, total })
    }

    /// A free buffer, if any.
    #[inline(always)]
    pub fn take(&mut self) -> Option<Buffer<'a>> {
        self.free.pop()
    }

    /// Returns a buffer. The pool has room for all of its buffers, so this never allocates.
    #[inline(always)]
    pub fn give(&mut self, buffer: Buffer<'a>) {
        if self.free.len() < self.free.capacity() {
            self.free.push(buffer);
        }
    }

    /// Takes the last `n` free buffers (as many as there are, if fewer), handing each to `f`:
    /// one count update for all, not one per buffer. Returns how many were taken.
    #[inline(always)]
    pub fn take_each(&mut self, n: usize, f: impl FnMut(Buffer<'a>)) -> usize {
        invariants::take_top(&mut self.free, n, f)
    }

    /// Takes back, in block copies, the buffers at the front of `sent` up to (not including)
    /// slot `end`: what a device has finished with, oldest first. Nothing moves if `end` is
    /// not between `sent`'s front and back (an untrusted count that went past what was
    /// queued). Returns whether it was.
    #[inline(always)]
    pub fn give_sent<const N: usize>(&mut self, sent: &mut RingQueue<Buffer<'a>, N>, end: RingIndex<N>) -> bool {
        sent.pop_front_into(end, &mut self.free)
    }

    /// Free buffers.
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Buffers the pool was made with.
    pub fn total(&self) -> usize {
        self.total
    }
}

/// Packets handed between queues and the application: at most `B` buffers, held inline.
pub struct Batch<'a, const B: usize> {
    items: ArrayStack<Buffer<'a>, B>,
}

impl<'a, const B: usize> Default for Batch<'a, B> {
    fn default() -> Self {
        Batch { items: ArrayStack::new() }
    }
}

impl<'a, const B: usize> Batch<'a, B> {
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.items.len()
    }
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    #[inline(always)]
    pub fn is_full(&self) -> bool {
        self.items.is_full()
    }
    /// Adds a buffer; gives it back if the batch is full.
    #[inline(always)]
    pub fn push(&mut self, b: Buffer<'a>) -> Result<(), Buffer<'a>> {
        self.items.push(b)
    }
    /// Calls `f` with 0, 1, … for `n` buffers (no more than there is room for), adding each it
    /// returns: what a receive queue does with the `n` descriptors it read. Returns how many
    /// were added.
    #[inline(always)]
    pub fn push_each(&mut self, n: usize, f: impl FnMut(usize) -> Option<Buffer<'a>>) -> usize {
        self.items.push_each(n, f)
    }

    /// Moves the buffers, oldest first, to the back of `queue`, as many as fit, showing each
    /// to `f` with the slot it takes: what a transmit queue that keeps its buffers in order
    /// takes. Returns how many moved.
    #[inline(always)]
    pub fn move_to<const N: usize>(
        &mut self,
        queue: &mut RingQueue<Buffer<'a>, N>,
        f: impl FnMut(RingIndex<N>, &Buffer<'a>),
    ) -> usize {
        let all = self.items.len();
        queue.push_back_from(&mut self.items, all, f)
    }

    /// Removes the oldest `n` buffers (all, if there are fewer), oldest first, handing each to
    /// `f`: what a transmit queue takes. Returns how many were removed.
    #[inline(always)]
    pub fn take_front(&mut self, n: usize, f: impl FnMut(Buffer<'a>)) -> usize {
        self.items.take_front(n, f)
    }
    /// The buffers, oldest first.
    #[inline(always)]
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Buffer<'a>> {
        self.items.as_mut_slice().iter_mut()
    }
    /// The buffers from the `first`th on (none, if there are fewer), oldest first: those a
    /// receive added to what was waiting.
    #[inline(always)]
    pub fn since(&mut self, first: usize) -> &mut [Buffer<'a>] {
        self.items.as_mut_slice().get_mut(first..).unwrap_or_default()
    }
    /// Keeps, in order, the buffers whose index `keep` accepts; the others go back to `pool`.
    pub fn retain(&mut self, pool: &mut BufferPool<'a>, mut keep: impl FnMut(usize) -> bool) {
        let items = self.items.as_mut_slice();
        let mut kept = 0;
        for i in 0..items.len() {
            if keep(i) {
                items.swap(kept, i);
                kept += 1;
            }
        }
        self.items.truncate_into(kept, |b| pool.give(b));
    }
    /// Returns every buffer left to `pool`.
    #[inline(always)]
    pub fn release(&mut self, pool: &mut BufferPool<'a>) {
        self.items.truncate_into(0, |b| pool.give(b));
    }
}

/// Receiving packets in batches (any device).
pub trait Receive<'a> {
    /// Appends up to the batch's free room of received packets, refilling the ring from
    /// `pool`. Returns how many were added.
    fn rx_batch<const B: usize>(&mut self, pool: &mut BufferPool<'a>, batch: &mut Batch<'a, B>) -> usize;
}

/// Transmitting packets in batches (any device).
pub trait Transmit<'a> {
    /// Queues packets from the front of `batch` until the ring is full; those queued leave the
    /// batch, the rest stay (DPDK's burst contract). Buffers the device has finished with go
    /// back to `pool`. Returns how many were queued.
    fn tx_batch<const B: usize>(&mut self, pool: &mut BufferPool<'a>, batch: &mut Batch<'a, B>) -> usize;

    /// A burst that had nothing to send: a device that sends only when woken (AF_XDP in
    /// copy mode) is woken for what its ring still holds. Nothing to do for the others.
    #[inline(always)]
    fn idle(&mut self, _pool: &mut BufferPool<'a>) {}
}

/// Memory for the rings of one RX and one TX queue of `N` entries, a head slot and a pool of
/// `pool` buffers. Its [`QueueMemory::parts`] are handed out together, once per exclusive
/// borrow, and each is consumed by what uses it: no two queues share a ring and no two pools
/// share a buffer. The ring size is in the type, so a queue of another size does not fit:
///
/// ```compile_fail,E0308
/// # use ixgbe::queues::{QueueMemory, RxQueue};
/// # fn f<'a>(device: &ixgbe::Device<'a>, mem: &'a mut QueueMemory<8>) {
/// let mut parts = mem.parts().unwrap();
/// let rx = RxQueue::<256>::new(device, parts.rx, &mut parts.pool); // rings of 8 entries
/// # }
/// ```
pub struct QueueMemory<const N: usize> {
    region: DmaRegion,
    rx_ring: DescriptorArea,
    tx_ring: DescriptorArea,
    head: HeadArea,
    buffers: BuffersArea,
}

impl<const N: usize> QueueMemory<N> {
    /// Rings of `N` entries and a pool of `pool` buffers.
    pub fn allocate(pool: usize) -> Result<Self, DriverError> {
        let mut l = DmaLayout::new();
        let rx_ring = l.descriptor_ring(N)?;
        let tx_ring = l.descriptor_ring(N)?;
        let head = l.head_slot()?;
        let buffers = l.buffers(pool)?;
        Ok(QueueMemory { region: DmaRegion::allocate(&l)?, rx_ring, tx_ring, head, buffers })
    }

    /// The RX ring, the TX ring and the pool of this memory. A second call while the first
    /// parts live does not compile:
    ///
    /// ```compile_fail,E0499
    /// # use ixgbe::queues::QueueMemory;
    /// let mut mem = QueueMemory::<8>::allocate(8).unwrap();
    /// let first = mem.parts().unwrap();
    /// let second = mem.parts().unwrap(); // a second pool over the same buffers
    /// drop((first, second));
    /// ```
    pub fn parts(&mut self) -> Result<QueueParts<'_, N>, DriverError> {
        let mem: &QueueMemory<N> = self;
        Ok(QueueParts { rx: RxRing { mem }, tx: TxRing { mem }, pool: BufferPool::new(&mem.region, mem.buffers)? })
    }
}

/// What a [`QueueMemory`] holds, each part for one user.
pub struct QueueParts<'a, const N: usize> {
    /// For one [`RxQueue`].
    pub rx: RxRing<'a, N>,
    /// For one [`TxQueue`].
    pub tx: TxRing<'a, N>,
    pub pool: BufferPool<'a>,
}

/// The RX ring of a [`QueueMemory`]; [`RxQueue::new`] consumes it.
pub struct RxRing<'a, const N: usize> {
    mem: &'a QueueMemory<N>,
}

/// The TX ring and head write-back slot of a [`QueueMemory`]; [`TxQueue::new`] consumes it.
///
/// ```compile_fail,E0382
/// # use ixgbe::queues::{QueueMemory, TxQueue};
/// # fn f<'a>(device: &ixgbe::Device<'a>, mem: &'a mut QueueMemory<8>) {
/// let parts = mem.parts().unwrap();
/// let one = TxQueue::<8>::new(device, parts.tx);
/// let two = TxQueue::<8>::new(device, parts.tx); // two queues on one ring
/// # }
/// ```
pub struct TxRing<'a, const N: usize> {
    mem: &'a QueueMemory<N>,
}

/// An RX queue of an 82599 with `N` legacy descriptors. It can be handed to the thread that
/// serves it (`Send`), never shared by two (`!Sync`):
///
/// ```compile_fail,E0277
/// # use ixgbe::queues::RxQueue;
/// fn share(q: &RxQueue<'_, 512>) {
///     std::thread::scope(|s| {
///         s.spawn(|| q.held());
///         s.spawn(|| q.held());
///     });
/// }
/// ```
///
/// and a queue handed to one thread is gone from the others:
///
/// ```compile_fail,E0382
/// # use ixgbe::queues::RxQueue;
/// fn hand_twice(q: RxQueue<'_, 512>) {
///     std::thread::scope(|s| {
///         s.spawn(move || drop(q));
///         s.spawn(move || drop(q));
///     });
/// }
/// ```
pub struct RxQueue<'a, const N: usize> {
    ring: LegacyRing<'a, N>,
    /// The buffer of every slot: an RX ring is always full, so no slot is ever empty.
    held: RingArray<Buffer<'a>, N>,
    tail: Doorbell<'a, N>,
    next: RingIndex<N>,
    /// Frames refused (length beyond the buffer, or spanning buffers) and recycled.
    pub refused: Refused,
    /// The device queue, disabled when this queue is dropped (before its memory can go); its
    /// head register is read only by [`RxQueue::desynchronised`].
    queue: EnabledQueue<'a, N>,
}

impl<'a, const N: usize> RxQueue<'a, N> {
    /// Fills the ring from `pool` and enables RX queue 0 of `device` [DS 4.6.7].
    pub fn new(device: &Device<'a>, ring: RxRing<'a, N>, pool: &mut BufferPool<'a>) -> Result<Self, DriverError> {
        Self::on(device, RssQueue::new(0), ring, pool)
    }

    /// Fills the ring from `pool` and enables RX queue `queue` of `device` [DS 4.6.7]: one of
    /// those [`Device::enable_rss`] spreads frames over.
    pub fn on(
        device: &Device<'a>,
        queue: RssQueue,
        ring: RxRing<'a, N>,
        pool: &mut BufferPool<'a>,
    ) -> Result<Self, DriverError> {
        let mem = ring.mem;
        let buffers: Vec<Buffer<'a>> = std::iter::from_fn(|| pool.take()).take(N).collect();
        if buffers.len() < N {
            buffers.into_iter().for_each(|b| pool.give(b));
            return Err(DriverError::Invalid(format!("a pool of at least {N} buffers is needed to fill the RX ring")));
        }
        let mut buffers = buffers.into_iter();
        let held = RingArray::from_fn(|_| buffers.next().expect("N buffers were taken"));
        let ring = LegacyRing::new(&mem.region, mem.rx_ring, |i| held[i].addr)?;
        let queue = device.set_input(queue, ring)?;
        Ok(RxQueue { ring, held, tail: queue.doorbell(), next: RingIndex::ZERO, refused: Refused::default(), queue })
    }

    /// Buffers in the ring: always all `N`.
    pub fn held(&self) -> usize {
        N
    }

    /// Whether the queue and the device disagree on where the ring is, so that neither will
    /// ever move again: the device owns no descriptor (RDH = RDT, which is the slot before
    /// ours) and ours has no DD. An honest device that owns nothing has filled every slot,
    /// ours included; one that wrote DD into slots it did not own made the queue run ahead
    /// of it. RDH is read first: a device without descriptors stays so while the queue does
    /// not run. Returns the queue's position when they disagree (see
    /// [`crate::agent::Agent::desynchronised`] for why a caller looks twice). A register read:
    /// call it from slow paths only.
    #[inline(never)]
    #[cold]
    pub fn desynchronised(&self) -> Option<usize> {
        let device_head = RingIndex::<N>::wrapping(self.queue.device_head() as usize);
        let waiting = self.ring.status(self.next) & RX_DD == 0;
        (device_head == self.next.prev() && waiting).then_some(self.next.get())
    }
}

impl<'a, const N: usize> Receive<'a> for RxQueue<'a, N> {
    // Not inlined: as a function of its own, its `&mut` arguments are known not to alias, so
    // the batch's and the pool's counts stay in registers across the descriptor writes.
    #[inline(never)]
    fn rx_batch<const B: usize>(&mut self, pool: &mut BufferPool<'a>, batch: &mut Batch<'a, B>) -> usize {
        // The loop stops before the batch is full, so every frame kept is pushed.
        let before = batch.len();
        // The ring position in a local, written back once: stored in `self`, it would be
        // written to memory after every packet, as the descriptor writes may alias it.
        let start = self.next;
        let mut next = start;
        while !batch.is_full() {
            let i = next;
            let status = self.ring.status(i);
            if status & RX_DD == 0 {
                break;
            }
            let Some(fresh) = pool.take() else { break };
            self.ring.receive_into(i, fresh.addr);
            next = i.next();
            let old = std::mem::replace(&mut self.held[i], fresh);
            // A frame that does not fit, or spans buffers, is dropped and its buffer recycled.
            match crate::whole_frame_length(status) {
                Some(length) => {
                    // Rebuilt field by field: with only its length set, the rest of `old` was
                    // copied through the stack, 2 instructions more per frame.
                    if let Err(b) = batch.push(Buffer { data: old.data, addr: old.addr, length }) {
                        pool.give(b);
                    }
                }
                _ => {
                    self.refused.count(status);
                    pool.give(old);
                }
            }
        }
        self.next = next;
        if next != start {
            // RDT = last descriptor handed back, so RDT never equals RDH [DS 7.1.9].
            self.tail.ring(next.prev());
        }
        batch.len() - before
    }
}

/// A TX queue of an 82599 with `N` legacy descriptors and head write-back; like
/// [`RxQueue`], `Send` and not `Sync`:
///
/// ```compile_fail,E0277
/// # use ixgbe::queues::TxQueue;
/// fn share(q: &TxQueue<'_, 512>) {
///     std::thread::scope(|s| {
///         s.spawn(|| q.held());
///         s.spawn(|| q.held());
///     });
/// }
/// ```
pub struct TxQueue<'a, const N: usize> {
    ring: LegacyRing<'a, N>,
    /// The buffers queued and not yet recycled: from the last recycled slot up to the tail.
    held: RingQueue<Buffer<'a>, N>,
    head: VolatilePtr<'a, u32>,
    tail: Doorbell<'a, N>,
    /// The device queue, disabled when this queue is dropped (before its memory can go); its
    /// head register (TDH) is read only by [`TxQueue::unsent`].
    queue: EnabledQueue<'a, N>,
}

/// RS is requested once per this many descriptors; buffers are recycled from the head then.
pub const TX_RECYCLE_PERIOD: usize = 32;

impl<'a, const N: usize> TxQueue<'a, N> {
    /// RS every [`TX_RECYCLE_PERIOD`] descriptors, or twice per ring if the ring is smaller,
    /// so that the head is always written back before the ring fills.
    const RS_PERIOD: usize = if N >= 2 * TX_RECYCLE_PERIOD { TX_RECYCLE_PERIOD } else { N / 2 };

    /// Enables the first free TX queue of `device` on this memory's TX ring [DS 4.6.8]. Its
    /// slots name the memory's first buffer until packets are queued (a slot always names one).
    pub fn new(device: &Device<'a>, ring: TxRing<'a, N>) -> Result<Self, DriverError> {
        let mem = ring.mem;
        let filler = mem.region.buffer(mem.buffers, 0)?.addr;
        let ring = LegacyRing::new(&mem.region, mem.tx_ring, |_| filler)?;
        let head = mem.region.head_slot(mem.head)?;
        head.value().write(0);
        let queue = device.add_output(ring, head)?;
        Ok(TxQueue { ring, held: RingQueue::new(), head: head.value(), tail: queue.doorbell(), queue })
    }

    /// Buffers in the ring.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Packets queued that the device has not sent yet, per its head register (TDH): what a
    /// driver waits for before it stops, since the head written back to memory lags by up to
    /// an RS period. The device's value is untrusted: one outside what was queued counts as
    /// nothing sent.
    pub fn unsent(&self) -> usize {
        let head = RingIndex::<N>::wrapping(self.queue.device_head() as usize);
        let queued = self.held.len();
        if self.held.front().distance_to(head) > queued {
            return queued;
        }
        head.distance_to(self.held.back())
    }

    /// Gives back to `pool` every buffer the device has sent (per the written-back head).
    #[inline(always)]
    fn recycle(&mut self, pool: &mut BufferPool<'a>) {
        // Untrusted: reduced modulo N, and never past what was queued.
        let head = RingIndex::<N>::wrapping(u32::from_le(self.head.read()) as usize);
        // In block copies, not a buffer at a time (about 15 instructions per packet less).
        self.held.pop_front_into(head, &mut pool.free);
    }
}

impl<'a, const N: usize> Transmit<'a> for TxQueue<'a, N> {
    // Not inlined, as `rx_batch`.
    #[inline(never)]
    fn tx_batch<const B: usize>(&mut self, pool: &mut BufferPool<'a>, batch: &mut Batch<'a, B>) -> usize {
        // Free slots: all but one, minus those queued and not yet recycled. Recycling reads
        // the head; it is done every two RS periods, or sooner when the batch would not fit
        // (a ring of up to 64 entries never has two periods in flight).
        let queued = self.held.len();
        if queued >= 2 * Self::RS_PERIOD || N - 1 - queued < batch.len() {
            self.recycle(pool);
        }
        // The whole batch, or as many as fit: `push_back_from` stops at the last free slot.
        let (ring, all) = (self.ring, batch.len());
        let sent = self.held.push_back_from(&mut batch.items, all, |i, b| {
            let report = i.get() % Self::RS_PERIOD == Self::RS_PERIOD - 1;
            let command = if report { TxCommand::SEND_AND_REPORT } else { TxCommand::SEND };
            ring.transmit_from(i, b.addr, b.length, command);
        });
        if sent > 0 {
            self.tail.ring(self.held.back());
        }
        sent
    }
}

#[cfg(test)]
mod memory_tests {
    use super::*;

    #[test]
    fn queue_memory_hands_out_its_parts_once_per_borrow() {
        // Needs root and hugepages (make test provides them).
        let mut mem = QueueMemory::<64>::allocate(128).unwrap();
        let parts = mem.parts().unwrap();
        assert_eq!(parts.pool.total(), 128);
        drop(parts);
        // Once the first parts are gone, the memory can be used again (a compile_fail
        // doctest on `parts` shows a second call while they live is refused).
        assert_eq!(mem.parts().unwrap().pool.available(), 128);
    }
}

#[cfg(test)]
mod thread_tests {
    use super::*;

    fn handed_to_a_thread<T: Send>() {}

    #[test]
    fn queues_pools_and_batches_can_be_handed_to_the_thread_that_serves_them() {
        handed_to_a_thread::<RxQueue<'static, 512>>();
        handed_to_a_thread::<TxQueue<'static, 512>>();
        handed_to_a_thread::<BufferPool<'static>>();
        handed_to_a_thread::<Batch<'static, 32>>();
        handed_to_a_thread::<crate::agent::Agent<'static, crate::agent::ConstOutputs<1>, 512>>();
    }
}
