//! Receive and transmit queues of a virtio-net function behind ixgbe's device-independent
//! [`Receive`] and [`Transmit`] traits.
//!
//! A packet is a chain of two descriptors: the net header, in a slot of the queue's own
//! memory, then the packet buffer, so the frame starts at the buffer's first byte as on the
//! 82599 and buffers move between the two kinds of device unchanged. Chain `k` always uses
//! descriptors `2k` and `2k + 1`; only the buffer's address changes per packet. The device
//! names a finished chain by its head, a value it writes: reduced modulo `N`, it indexes the
//! table of held buffers without a check, and a head that holds no buffer (an odd one, or one
//! not given) is refused, not trusted.

use crate::device::{GivenQueue, VirtioDevice, RX_QUEUE, TX_QUEUE};
use crate::virtqueue::{desc_word, ring_bytes, Virtqueue, ALIGN, DESC_NEXT, DESC_WRITE};
use crate::DriverError;
use invariants::{RingArray, RingIndex};
use ixgbe::memory::{RingArea, RingsAndPool};
use ixgbe::queues::{Batch, Buffer, BufferPool, Receive, Transmit};
use ixgbe::{PacketLength, BUFFER_SIZE};

/// Bytes of one header slot (10 or 12 used, 16 so that slots stay aligned).
const HEADER_SLOT: usize = 16;

/// Memory for a receive, a transmit and a control queue of `N` entries, their header slots,
/// and a pool of buffers. Its parts are handed out once per exclusive borrow.
pub struct VirtioMemory<const N: usize> {
    mem: RingsAndPool,
}

/// What a [`VirtioMemory`] holds, each part for one user.
pub struct VirtioParts<'a> {
    pub rx: RingArea<'a>,
    pub tx: RingArea<'a>,
    pub ctrl: RingArea<'a>,
    pub pool: BufferPool<'a>,
}

impl<const N: usize> VirtioMemory<N> {
    /// Queues of `N` entries and a pool of `pool` buffers.
    pub fn allocate(pool: usize) -> Result<Self, DriverError> {
        let queue = (ring_bytes(N) + N * HEADER_SLOT, ALIGN);
        Ok(VirtioMemory { mem: RingsAndPool::allocate(&[queue, queue, queue], pool)? })
    }

    pub fn parts(&mut self) -> Result<VirtioParts<'_>, DriverError> {
        let (areas, pool) = self.mem.parts()?;
        let [rx, tx, ctrl]: [RingArea<'_>; 3] =
            areas.try_into().map_err(|_| DriverError::Invalid("three queue areas".into()))?;
        Ok(VirtioParts { rx, tx, ctrl, pool })
    }
}

/// Chain `k`'s header descriptor: `2k`.
fn heads<const N: usize>() -> impl Iterator<Item = RingIndex<N>> {
    (0..N / 2).map(|k| RingIndex::wrapping(2 * k))
}

/// The bus address of the header slot of the chain whose head is `head`.
fn header_phys<const N: usize>(area: &RingArea<'_>, head: RingIndex<N>) -> Result<u64, DriverError> {
    area.device_address(ring_bytes(N) + head.get() / 2 * HEADER_SLOT, HEADER_SLOT, "a net header slot")
}

/// The receive queue of a virtio-net function.
pub struct RxQueue<'a, const N: usize> {
    q: Virtqueue<'a, N>,
    /// The buffer of each chain, by head; `None` at odd indices.
    held: RingArray<Option<Buffer<'a>>, N>,
    /// Frames the device returned with a length that does not fit a buffer, or a head that
    /// held no buffer: dropped, their buffers recycled.
    pub refused: u64,
    /// The net header's bytes ([`VirtioDevice::header_len`]), before each frame.
    header_len: usize,
    given: GivenQueue<'a>,
}

impl<'a, const N: usize> RxQueue<'a, N> {
    /// Fills every chain with a buffer from `pool` and gives the queue to `device`.
    pub fn new(device: &'a VirtioDevice, area: RingArea<'a>, pool: &mut BufferPool<'a>) -> Result<Self, DriverError> {
        let mut q = Virtqueue::<N>::new(&area)?;
        if pool.available() < N / 2 {
            return Err(DriverError::Invalid(format!(
                "a pool of at least {} buffers is needed to fill the receive queue",
                N / 2
            )));
        }
        let mut held = RingArray::from_fn(|_| None);
        for head in heads::<N>() {
            let b = pool.take().ok_or_else(|| DriverError::Invalid("the pool ran out".into()))?;
            q.set_desc(
                head,
                header_phys(&area, head)?,
                desc_word(device.header_len() as u32, DESC_WRITE | DESC_NEXT, head.get() as u16 + 1),
            );
            q.set_desc(head.next(), b.device_address().get(), desc_word(BUFFER_SIZE as u32, DESC_WRITE, 0));
            held[head] = Some(b);
            q.offer(head);
        }
        let given = GivenQueue::give(device, RX_QUEUE, N, q.rings(), area.hold())?;
        if q.publish() {
            device.notify(RX_QUEUE);
        }
        Ok(RxQueue { q, held, refused: 0, header_len: device.header_len(), given })
    }
}

impl<'a, const N: usize> Receive<'a> for RxQueue<'a, N> {
    #[inline(always)]
    fn rx_batch<const B: usize>(&mut self, pool: &mut BufferPool<'a>, batch: &mut Batch<'a, B>) -> usize {
        let mut got = 0;
        let mut offered = false;
        while !batch.is_full() {
            let Some((head, len)) = self.q.peek_used() else { break };
            let Some(fresh) = pool.take() else { break };
            self.q.consume();
            let Some(mut old) = self.held[head].take() else {
                self.refused += 1;
                pool.give(fresh);
                continue;
            };
            self.q.set_desc_addr(head.next(), fresh.device_address().get());
            self.held[head] = Some(fresh);
            self.q.offer(head);
            offered = true;
            // The length is the device's: header and frame, converted once.
            match PacketLength::new((len as usize).wrapping_sub(self.header_len)) {
                Some(l) => {
                    old.length = l;
                    if let Err(b) = batch.push(old) {
                        pool.give(b);
                    }
                    got += 1;
                }
                None => {
                    self.refused += 1;
                    pool.give(old);
                }
            }
        }
        if offered && self.q.publish() {
            self.given.device().notify(RX_QUEUE);
        }
        got
    }
}

/// The transmit queue of a virtio-net function.
pub struct TxQueue<'a, const N: usize> {
    q: Virtqueue<'a, N>,
    held: RingArray<Option<Buffer<'a>>, N>,
    /// The next chain to use: chains are used in turn, and one still held stops the queue
    /// until the device returns it.
    next: RingIndex<N>,
    given: GivenQueue<'a>,
}

impl<'a, const N: usize> TxQueue<'a, N> {
    /// Writes every chain's header descriptor (all-zero headers: no offload) and gives the
    /// queue to `device`.
    pub fn new(device: &'a VirtioDevice, area: RingArea<'a>) -> Result<Self, DriverError> {
        let q = Virtqueue::<N>::new(&area)?;
        for head in heads::<N>() {
            let slot = ring_bytes(N) + head.get() / 2 * HEADER_SLOT;
            area.ptr::<[u8; HEADER_SLOT]>(slot)
                .ok_or_else(|| DriverError::Invalid("header layout".into()))?
                .write([0; HEADER_SLOT]);
            q.set_desc(
                head,
                header_phys(&area, head)?,
                desc_word(device.header_len() as u32, DESC_NEXT, head.get() as u16 + 1),
            );
        }
        let given = GivenQueue::give(device, TX_QUEUE, N, q.rings(), area.hold())?;
        Ok(TxQueue { q, held: RingArray::from_fn(|_| None), next: RingIndex::ZERO, given })
    }

    /// Gives back to `pool` every buffer the device has sent.
    #[inline(always)]
    fn reclaim(&mut self, pool: &mut BufferPool<'a>) {
        while let Some((head, _)) = self.q.peek_used() {
            self.q.consume();
            if let Some(b) = self.held[head].take() {
                pool.give(b);
            }
        }
    }
}

impl<'a, const N: usize> Transmit<'a> for TxQueue<'a, N> {
    #[inline(always)]
    fn tx_batch<const B: usize>(&mut self, pool: &mut BufferPool<'a>, batch: &mut Batch<'a, B>) -> usize {
        self.reclaim(pool);
        // Free chains from `next` on, as many as the batch needs.
        let mut count = 0;
        let mut head = self.next;
        while count < batch.len() && self.held[head].is_none() {
            count += 1;
            head = head.next().next();
        }
        let mut next = self.next;
        batch.take_front(count, |b| {
            self.q.set_desc(next.next(), b.device_address().get(), desc_word(b.length.get() as u32, 0, 0));
            self.held[next] = Some(b);
            self.q.offer(next);
            next = next.next().next();
        });
        self.next = next;
        if count > 0 && self.q.publish() {
            self.given.device().notify(TX_QUEUE);
        }
        count
    }
}
