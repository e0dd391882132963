//! The restricted and const models: TinyNF's agent [paper §VI; TinyNF `ixgbe_run`].
//!
//! An agent owns `N` packet buffers and one descriptor ring per output. Ring 0 is shared: it is
//! RX queue 0 of the input device and a TX queue of output 0; the other rings are TX queues of
//! the other outputs. Slot `i` of every ring points at buffer `i` for ever. Software only
//! rewrites the second quadword of descriptors; no buffer ever moves and no packet is copied.
//!
//! The number of outputs is either known at run time ([`BrandedLen`], the *restricted* model)
//! or a const generic ([`ConstOutputs`], the *const* model). Both index their per-output arrays
//! without checks and without padding to 256.

use crate::device::{Device, DriverError, RssQueue};
use crate::regs::RX_DD;
use crate::{PacketData, PacketLength, Refused};
use invariants::{BrandedIndex, BrandedLen, BrandedVec, ConstArray, ConstIndex, RingIndex, VolatileArray, VolatilePtr};
use platform::dma::{BuffersArea, DescriptorArea, DmaLayout, DmaRegion, HeadArea};
use platform::i82599::{Doorbell, EnabledQueue, LegacyRing, TxCommand};
use std::ops::{Index, IndexMut};

/// Packets processed before the TX tails are written.
pub const FLUSH_PERIOD: usize = 8;
/// Period of RS bits, head reads and RX tail updates.
pub const RECYCLE_PERIOD: usize = 64;

/// A set of outputs whose per-output arrays index without checks.
pub trait Outputs: Copy {
    type Index: Copy;
    type Array<T>: Index<Self::Index, Output = T> + IndexMut<Self::Index>;
    /// How many outputs.
    fn count(self) -> usize;
    /// Output 0 (the one that shares the receive ring); every set has one.
    fn first(self) -> Self::Index;
    /// Every output, in order.
    fn each(self) -> impl Iterator<Item = Self::Index>;
    /// Calls `f` for every output, in order; `f` returns whether its output is the last one,
    /// as the agent recorded in memory. The per-packet form of [`Self::each`].
    #[inline(always)]
    fn for_each(self, mut f: impl FnMut(Self::Index) -> bool) {
        for o in self.each() {
            f(o);
        }
    }
    /// An array with entry `o` = `f(o)`.
    fn array<T>(self, f: impl FnMut(Self::Index) -> T) -> Self::Array<T>;
    /// Converts `f` over indices into an array of results, stopping at the first error.
    fn try_array<T, E>(self, mut f: impl FnMut(Self::Index) -> Result<T, E>) -> Result<Self::Array<T>, E> {
        let mut made = Vec::with_capacity(self.count());
        for o in self.each() {
            made.push(f(o)?);
        }
        let mut made = made.into_iter();
        Ok(self.array(|_| made.next().expect("one value per output")))
    }
}

/// The restricted model: the output count is known at run time (1 to 64).
impl<'id> Outputs for BrandedLen<'id> {
    type Index = BrandedIndex<'id>;
    type Array<T> = BrandedVec<'id, T>;
    fn count(self) -> usize {
        self.get()
    }
    fn first(self) -> BrandedIndex<'id> {
        BrandedLen::first(self)
    }
    fn each(self) -> impl Iterator<Item = BrandedIndex<'id>> {
        self.indices()
    }
    /// Stops when `f` says its output was the last: an exit read from memory, whose trip
    /// count the optimiser cannot compute. A loop over `0..len` is unrolled four times at run
    /// time for targets such as x86-64-v3, which cost 16 instructions per packet with one
    /// output.
    #[inline(always)]
    fn for_each(self, mut f: impl FnMut(BrandedIndex<'id>) -> bool) {
        let mut o = self.first();
        while !f(o) {
            o = self.next_wrapping(o);
        }
    }
    fn array<T>(self, f: impl FnMut(BrandedIndex<'id>) -> T) -> BrandedVec<'id, T> {
        self.vec(f)
    }
}

/// The const model: `K` outputs, known at compile time.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConstOutputs<const K: usize>;

impl<const K: usize> Outputs for ConstOutputs<K> {
    type Index = ConstIndex<K>;
    type Array<T> = ConstArray<T, K>;
    fn count(self) -> usize {
        K
    }
    fn first(self) -> ConstIndex<K> {
        ConstIndex::new(0)
    }
    fn each(self) -> impl Iterator<Item = ConstIndex<K>> {
        ConstIndex::all()
    }
    fn array<T>(self, f: impl FnMut(ConstIndex<K>) -> T) -> ConstArray<T, K> {
        ConstArray::from_fn(f)
    }
}

/// Memory of one agent: `N` buffers, rings of `N` entries and head write-back slots, laid
/// out once. The ring size is in the type, so an agent of another size does not fit:
///
/// ```compile_fail,E0308
/// # use ixgbe::agent::{Agent, AgentMemory, ConstOutputs};
/// # fn f<'a>(mem: &'a mut AgentMemory<128>, d: &ixgbe::Device<'a>) {
/// let agent = Agent::<_, 256>::new(mem, d, &ConstOutputs::<1>.array(|_| *d), ConstOutputs::<1>);
/// # }
/// ```
pub struct AgentMemory<const N: usize> {
    region: DmaRegion,
    buffers: BuffersArea,
    rings: Vec<DescriptorArea>,
    heads: Vec<HeadArea>,
}

impl<const N: usize> AgentMemory<N> {
    /// Memory for an agent with `outputs` outputs and rings of `N` entries.
    pub fn allocate(outputs: usize) -> Result<Self, DriverError> {
        if !(1..=64).contains(&outputs) {
            return Err(DriverError::Invalid(format!("{outputs} outputs: an agent has 1 to 64 outputs")));
        }
        if N < 2 * RECYCLE_PERIOD {
            return Err(DriverError::Invalid(format!(
                "rings of {N} entries: an agent needs at least {}",
                2 * RECYCLE_PERIOD
            )));
        }
        let mut layout = DmaLayout::new();
        let buffers = layout.buffers(N)?;
        // Rings 128-byte aligned [DS 8.2.3.8.1]; heads in their own cache line, 16-byte
        // aligned as the device requires [DS 7.2.3.5.2].
        let rings = (0..outputs).map(|_| layout.descriptor_ring(N)).collect::<Result<_, _>>()?;
        let heads = (0..outputs).map(|_| layout.head_slot()).collect::<Result<_, _>>()?;
        Ok(AgentMemory { region: DmaRegion::allocate(&layout)?, buffers, rings, heads })
    }
}

/// Per-output state of an agent.
struct Output<'a, const N: usize> {
    ring: LegacyRing<'a, N>,
    head: VolatilePtr<'a, u32>,
    tail: Doorbell<'a, N>,
    /// The device queue, disabled when the agent is dropped (before its memory can go); its
    /// head register is read only by [`Agent::desynchronised`].
    queue: EnabledQueue<'a, N>,
    /// Whether this is the last output ([`Outputs::for_each`] stops after it).
    last: bool,
}

/// A TinyNF agent from one input to a set of outputs, with rings of `N` entries.
pub struct Agent<'a, O: Outputs, const N: usize> {
    outputs: O,
    buffers: VolatileArray<'a, PacketData, N>,
    shared_ring: LegacyRing<'a, N>,
    out: O::Array<Output<'a, N>>,
    lengths: O::Array<PacketLength>,
    receive_tail: Doorbell<'a, N>,
    /// RX queue 0 of the input, disabled when the agent is dropped; its head register is read
    /// only by [`Agent::desynchronised`].
    receive: EnabledQueue<'a, N>,
    /// The last value written to RDT (not read back: a register read costs a PCIe round trip).
    receive_tail_value: RingIndex<N>,
    processed: RingIndex<N>,
    /// Frames whose written-back length or flags the driver refused (sent nowhere).
    pub refused: Refused,
}

impl<'a, O: Outputs, const N: usize> Agent<'a, O, N> {
    /// Sets up the rings in `mem`, the TX queues on `outputs_devices[o]` and RX queue 0 on
    /// `input` [TinyNF `ixgbe_agent_init`; DS 4.6.7, 4.6.8]. The agent borrows `mem` alone
    /// while it lives, so no second agent shares its rings:
    ///
    /// ```compile_fail,E0499
    /// # use ixgbe::agent::{Agent, AgentMemory, ConstOutputs};
    /// # fn f<'a>(mem: &'a mut AgentMemory<256>, d: &ixgbe::Device<'a>) {
    /// let one = Agent::<_, 256>::new(mem, d, &ConstOutputs::<1>.array(|_| *d), ConstOutputs::<1>);
    /// let two = Agent::<_, 256>::new(mem, d, &ConstOutputs::<1>.array(|_| *d), ConstOutputs::<1>);
    /// # }
    /// ```
    pub fn new(
        mem: &'a mut AgentMemory<N>,
        input: &Device<'a>,
        output_devices: &O::Array<Device<'a>>,
        outputs: O,
    ) -> Result<Self, DriverError> {
        Self::on(mem, input, RssQueue::new(0), output_devices, outputs)
    }

    /// [`Self::new`] on RX queue `queue` of `input`: one of those [`Device::enable_rss`]
    /// spreads frames over. An agent is `Send`, for the thread that serves it, and not `Sync`:
    ///
    /// ```compile_fail,E0277
    /// # use ixgbe::agent::{Agent, ConstOutputs};
    /// fn share(a: &Agent<'_, ConstOutputs<1>, 256>) {
    ///     std::thread::scope(|s| {
    ///         s.spawn(|| a.desynchronised());
    ///         s.spawn(|| a.desynchronised());
    ///     });
    /// }
    /// ```
    pub fn on(
        mem: &'a mut AgentMemory<N>,
        input: &Device<'a>,
        queue: RssQueue,
        output_devices: &O::Array<Device<'a>>,
        outputs: O,
    ) -> Result<Self, DriverError> {
        if mem.rings.len() != outputs.count() {
            return Err(DriverError::Invalid(format!(
                "agent memory for {} outputs does not fit {} outputs",
                mem.rings.len(),
                outputs.count()
            )));
        }
        let region = &mem.region;
        let buffers = region.buffers(mem.buffers)?;
        let buffer_data = region
            .buffer_bytes(mem.buffers)?
            .array::<PacketData, N>(0)
            .ok_or(DriverError::Invalid("buffer layout".into()))?;
        // Slot `i` of every ring points at buffer `i` for ever. Every queue enabled so far is
        // disabled again if a later step fails.
        let mut rank = 0;
        let out = outputs.try_array(|o| {
            let ring = LegacyRing::new(region, mem.rings[rank], |i| buffers[i.get()].addr)?;
            let head = region.head_slot(mem.heads[rank])?;
            rank += 1;
            head.value().write(0);
            let queue = output_devices[o].add_output(ring, head)?;
            Ok::<_, DriverError>(Output {
                ring,
                head: head.value(),
                tail: queue.doorbell(),
                queue,
                last: rank == outputs.count(),
            })
        })?;
        let shared_ring = out[outputs.first()].ring;
        let receive = input.set_input(queue, shared_ring)?;
        Ok(Agent {
            outputs,
            buffers: buffer_data,
            shared_ring,
            out,
            lengths: outputs.array(|_| PacketLength::ZERO),
            receive_tail: receive.doorbell(),
            receive,
            // set_input handed the device every slot but one: RDT = N - 1 [DS 7.1.9].
            receive_tail_value: RingIndex::wrapping(N - 1),
            processed: RingIndex::ZERO,
            refused: Refused::default(),
        })
    }

    /// Processes up to [`FLUSH_PERIOD`] received packets: `handler(buffer, length, lengths)`
    /// sets `lengths[o]` to the number of bytes to send on output `o` (zero: not sent there;
    /// all are zero on entry). Returns how many packets were processed. The buffer is the
    /// handler's for that call only: once its descriptor is handed on, the device owns it.
    ///
    /// ```compile_fail
    /// # use ixgbe::agent::{Agent, ConstOutputs};
    /// # use ixgbe::PacketData;
    /// # use invariants::VolatilePtr;
    /// fn keep<'a>(agent: &mut Agent<'a, ConstOutputs<1>, 256>, kept: &mut Vec<VolatilePtr<'a, PacketData>>) {
    ///     agent.run(|packet, _, _| kept.push(packet)); // to write it while it is sent
    /// }
    /// ```
    #[inline(always)]
    pub fn run(
        &mut self,
        mut handler: impl for<'p> FnMut(VolatilePtr<'p, PacketData>, PacketLength, &mut O::Array<PacketLength>),
    ) -> usize {
        let mut n = 0;
        // The ring position in a local, written back once: in `self`, it would be stored
        // after every packet, as the descriptor writes may alias it.
        let mut processed = self.processed;
        // The rings' addresses in locals too, for the same reason.
        let (shared_ring, buffers) = (self.shared_ring, self.buffers);
        while n < FLUSH_PERIOD {
            let i = processed;
            let status = shared_ring.status(i);
            if status & RX_DD == 0 {
                if n == 0 {
                    // Idle: the receive side may be waiting for slots that the outputs sent
                    // after the last RS point. Without this, a device whose head write-back
                    // lags by more than a recycle period would never be given them back.
                    self.recycle(processed);
                }
                break;
            }
            // A frame that does not fit its buffer (or spans several) is sent nowhere.
            match crate::whole_frame_length(status) {
                Some(len) => handler(buffers.ring(i), len, &mut self.lengths),
                None => self.refused.count(status),
            }
            let report = i.get() % RECYCLE_PERIOD == RECYCLE_PERIOD - 1;
            let command = if report { TxCommand::SEND_AND_REPORT } else { TxCommand::SEND };
            self.outputs.for_each(|o| {
                // Length 0 is a null descriptor; writing bit 32 = 0 also clears RX DD, giving
                // the slot back to the receive side [DS 7.2.3.2.2].
                self.out[o].ring.transmit(i, self.lengths[o], command);
                self.lengths[o] = PacketLength::ZERO;
                self.out[o].last
            });
            processed = i.next();
            if report {
                self.recycle(processed);
            }
            n += 1;
        }
        self.processed = processed;
        if n > 0 {
            self.outputs.for_each(|o| {
                self.out[o].tail.ring(processed);
                self.out[o].last
            });
        }
        n
    }

    /// [`Agent::run`] as a function of its own, where its `&mut self` is known not to alias the
    /// rings: the agent's fields stay in registers across the descriptor writes. It pays when
    /// the output count is only known at run time (restricted: 3 % fewer instructions per
    /// packet); with one constant output, `run` inlined into the loop is cheaper.
    #[inline(never)]
    pub fn run_apart(
        &mut self,
        handler: impl for<'p> FnMut(VolatilePtr<'p, PacketData>, PacketLength, &mut O::Array<PacketLength>),
    ) -> usize {
        self.run(handler)
    }

    /// Whether the agent and the device disagree on where the shared ring is, so that neither
    /// will ever move again: every output has sent all it was given (TDH = TDT), the device
    /// owns no receive descriptor (RDH = RDT), and the slot the agent waits at has no DD. With
    /// an honest device that cannot happen: the device's receive head is then the agent's
    /// position and it owns every slot but one. A device that wrote DD into slots it did not
    /// own made the agent run ahead of it. Read in this order, the registers cannot change
    /// under the test: an idle transmitter and a device without descriptors stay so while the
    /// agent does not run. Register reads: call it from slow paths only.
    /// Returns the agent's position when they disagree: a caller that sees the same position
    /// twice, a presence period apart, knows the ring did not move meanwhile (nicsim, like the
    /// card, publishes RDH a little after the descriptors it wrote, so one look can catch it
    /// behind a frame the agent has already taken).
    #[inline(never)]
    #[cold]
    pub fn desynchronised(&self) -> Option<usize> {
        let processed = self.processed;
        let mut transmit_idle = true;
        self.outputs.for_each(|o| {
            transmit_idle &= RingIndex::<N>::wrapping(self.out[o].queue.device_head() as usize) == processed;
            self.out[o].last
        });
        let receive_head = RingIndex::<N>::wrapping(self.receive.device_head() as usize);
        let waiting = self.shared_ring.status(processed) & RX_DD == 0;
        (transmit_idle && receive_head == self.receive_tail_value && waiting).then_some(processed.get())
    }

    /// Gives the receive side every slot that all outputs have sent: RDT = the head of the
    /// output furthest behind, minus one so that RDT never equals RDH [DS 7.1.9]. The heads are
    /// written by the device and untrusted: reduced modulo N, they can only delay recycling.
    /// RDT is written only when it changes.
    #[inline(always)]
    fn recycle(&mut self, processed: RingIndex<N>) {
        let mut earliest = processed;
        let mut behind = 0;
        self.outputs.for_each(|o| {
            let head = RingIndex::<N>::wrapping(u32::from_le(self.out[o].head.read()) as usize);
            let pending = head.distance_to(processed);
            if pending > behind {
                behind = pending;
                earliest = head;
            }
            self.out[o].last
        });
        let tail = earliest.prev();
        if tail != self.receive_tail_value {
            self.receive_tail.ring(tail);
            self.receive_tail_value = tail;
        }
    }
}

/// The packet handler of the paper and TinyNF: destination MAC 00:00:00:00:00:01, source
/// 00:00:00:00:00:00, written with volatile stores.
#[inline(always)]
pub fn rewrite_macs(packet: VolatilePtr<'_, PacketData>) {
    packet.write_bytes::<0, 12>([0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
}
