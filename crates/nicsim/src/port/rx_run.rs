//! The receive fast path: runs of frames into one queue with what cannot change during the
//! run checked once, descriptors fetched in bursts and written back in chunks.

use super::rx::newer_rx_tail;
use super::{mac_key, owned_between, Classified, Port, RSS_QUEUES, RX_DD, RX_EOP};
use crate::dma::{DmaSpace, Ring, Windows};
use crate::regs::FCTRL_UPE;
use crate::wire::{
    DueFrame, FlowFields, GeneratedBurst, Generator, WireClock, FCS_LEN, MIN_FRAME, SEQUENCE_AT, TIMESTAMP_AT,
};
use platform::MappedRegion;
use std::sync::atomic::{fence, Ordering};

/// Frames an engine iteration delivers from a generator into one receive queue, at most: few
/// enough that the doorbells are looked at again before a driver can work through a quarter
/// of a 256-descriptor ring (docs/nicsim.md, "Doorbell intervals"). With RSS an iteration
/// takes this many for each queue its frames spread over ([`Port::rx_iteration_cap`]), so
/// that what a run costs to begin and end is shared by as many frames at 16 queues as at one.
pub const QUEUE_BURST: usize = 32;

/// Receive descriptors a run fetches at once, at most.
const RX_FETCH: usize = 64;
/// Receive descriptors written back together: sixteen 64-byte lines (ring bases are 128-byte
/// aligned [DS 8.2.3.8.1]), or fewer at the end of the ring, so a chunk never wraps. A
/// polling driver spins on the line of its next descriptor, and every write-back moves that
/// line between its core and ours while both use it; the fewer write-backs, the less the
/// engine pays for a fast driver (chunks of 4, 16, 32 and 64 descriptors were timed: see
/// docs/journal.md, seventh round). A run also writes back when it ends, so no frame waits
/// beyond the engine iteration that wrote it.
pub const RX_WRITE_BACK_CHUNK: u32 = 64;
const _: () = assert!(RX_WRITE_BACK_CHUNK.is_power_of_two(), "chunks are found by masking the index");

/// The place of receive descriptor `index` in its write-back chunk.
#[inline(always)]
fn chunk_slot(index: u32) -> u32 {
    index & (RX_WRITE_BACK_CHUNK - 1)
}

/// A run of receives into one queue on the fast path: what [`Port::receive`] checks per frame
/// that cannot change during the run is checked once ([`Port::rx_run_begin`]), the queue's
/// state is kept here, and statistics are added when the run ends. It takes unicast frames
/// to the port's own address (or any unicast frame in promiscuous mode) that fit one buffer
/// and whose buffer lies in known driver memory; any other frame ends the run and goes
/// through [`Port::receive`], so both paths write and count frames alike.
#[derive(Debug)]
pub struct RxRun {
    queue: u32,
    ring: Ring,
    head: u32,
    tail: u32,
    size: u32,
    advanced: bool,
    drop_en: bool,
    /// Longest frame taken: one receive buffer, and no longer than the untagged maximum.
    max_len: usize,
    own_key: u64,
    promiscuous_unicast: bool,
    /// Descriptors in [`RunRecords::descriptors`]: `fetched` of them, the first `used` taken.
    fetched: usize,
    used: usize,
    /// Descriptors from here to `head` are filled but not yet written back; their lengths
    /// are in [`RunRecords::pending_lens`].
    written_back_to: u32,
    /// Frames written into the ring and their bytes (without FCS), and frames dropped for
    /// want of a descriptor and theirs; accepted frames are both together.
    written: u64,
    written_bytes: u64,
    no_descriptor: u64,
    no_descriptor_bytes: u64,
}

/// The arrays of a run, kept by its port from one run to the next, so that starting a run
/// neither zeroes nor copies them: what a run reads of them it wrote itself first. A queue
/// has one run at a time (each ends before the next begins), so one set per queue serves.
#[derive(Debug)]
pub struct RunRecords {
    /// The descriptors from the one at the run's head as they were fetched (a descriptor's
    /// first 8 bytes are its buffer's address). The device fetches descriptors in bursts too
    /// [DS 7.1.3.3]; the driver may not touch descriptors it gave the device.
    descriptors: [[u8; 16]; RX_FETCH],
    /// The lengths of the frames not yet written back, by descriptor index modulo
    /// [`RX_WRITE_BACK_CHUNK`].
    pending_lens: [u16; RX_WRITE_BACK_CHUNK as usize],
    /// Their advanced write-backs' first qwords (RSS type, packet type and hash; 0 without RSS).
    pending_info: [u64; RX_WRITE_BACK_CHUNK as usize],
}

impl RunRecords {
    /// The buffer address in fetched descriptor `k`.
    #[inline(always)]
    fn buffer_address(&self, k: usize) -> u64 {
        let [a0, a1, a2, a3, a4, a5, a6, a7, ..] = self.descriptors[k % RX_FETCH];
        u64::from_le_bytes([a0, a1, a2, a3, a4, a5, a6, a7])
    }
}

impl Default for RunRecords {
    fn default() -> Self {
        RunRecords {
            descriptors: [[0; 16]; RX_FETCH],
            pending_lens: [0; RX_WRITE_BACK_CHUNK as usize],
            pending_info: [0; RX_WRITE_BACK_CHUNK as usize],
        }
    }
}

/// What a run writes a frame through besides its own state: the DMA space, the port's
/// registers (for a newer tail), the queue's [`RunRecords`] and the runs' windows (split
/// borrows of the port and its [`RxRuns`]).
struct RunPlaces<'p, D> {
    dma: &'p D,
    bar: &'p MappedRegion,
    rec: &'p mut RunRecords,
    buffers: &'p mut Windows,
}

impl RxRun {
    /// Writes `frame` into the ring, or drops it for want of a descriptor (SRRCTL.DROP_EN);
    /// `false` (and nothing done) if the fast path does not cover it.
    #[inline(always)]
    fn push(&mut self, to: RunPlaces<'_, impl DmaSpace>, frame: &[u8], info: u64) -> bool {
        self.push_with(to, frame, info, |_, _| {})
    }

    /// [`Self::push`] for a generated frame given as its template and the sequence fields
    /// still to be written into it (see [`DueFrame`]).
    #[inline(always)]
    fn push_generated(&mut self, to: RunPlaces<'_, impl DmaSpace>, due: &DueFrame, info: u64) -> bool {
        let (at, seq, timestamp) = due.sequence_fields();
        match due.flow_fields() {
            None => self.push_with(to, due.template(), info, |region, offset| {
                region.write_u64(offset + at, seq);
                region.write_u64(offset + at + 8, timestamp);
            }),
            Some(f) => self.push_with(to, due.template(), info, |region, offset| {
                // Big-endian in the frame: the little-endian stores of the swapped values.
                region.write_u16(offset + FlowFields::CHECKSUM_AT, f.checksum.swap_bytes());
                region.write_u32(offset + FlowFields::SRC_IP_AT, f.src_ip.swap_bytes());
                region.write_u16(offset + FlowFields::SRC_PORT_AT, f.src_port.swap_bytes());
                region.write_u64(offset + at, seq);
                region.write_u64(offset + at + 8, timestamp);
            }),
        }
    }

    /// Writes the frames of a generated burst into the ring (or drops them for want of a
    /// descriptor) as [`Self::push_generated`] would one by one, from the first; returns how
    /// many it took. It stops where `push_generated` would return `false`, so the caller
    /// passes the rest to the general path. The frame is checked once for the whole burst,
    /// and each buffer with one bounds check for the copy and both fields.
    #[inline(always)]
    fn push_burst(&mut self, to: RunPlaces<'_, impl DmaSpace>, burst: &GeneratedBurst, info: u64) -> usize {
        let RunPlaces { dma, bar, rec, buffers } = to;
        let frame = burst.frame;
        let len = frame.len();
        // The frames differ only in their payload: one check for all.
        if !self.takes(frame) {
            return 0;
        }
        let mut k = 0;
        while k < burst.count {
            if self.head == self.tail && !self.refresh_tail(bar) {
                // No descriptor for any of the rest: with DROP_EN each is dropped and
                // counted in QPRDC [DS 8.2.3.2.3]; without it the slow path holds them.
                if !self.drop_en {
                    break;
                }
                let rest = (burst.count - k) as u64;
                self.no_descriptor += rest;
                self.no_descriptor_bytes += rest * len as u64;
                k = burst.count;
                break;
            }
            if self.used == self.fetched {
                self.fetch(dma, rec, burst.count - k);
            }
            // Up to the next write-back point, the end of the fetched addresses, the tail or
            // the end of the burst, whichever comes first, the loop below keeps its state in
            // locals.
            let owned = self.owned();
            // Rings are multiples of 8 descriptors [DS 8.2.3.8.3], not of a chunk: the last
            // chunk of a ring may be short, and the head must wrap exactly at its end.
            let to_chunk = (RX_WRITE_BACK_CHUNK - chunk_slot(self.head)).min(self.size - self.head);
            let n = (burst.count - k).min((self.fetched - self.used).min(owned.min(to_chunk) as usize));
            let mut done = 0;
            while done < n {
                let buf = rec.buffer_address(self.used + done);
                // Unknown so far: the general path looks for new memory or reports the fault.
                let Some((region, offset)) = buffers.find(dma, buf, len) else { break };
                let Some(span) = dma.region(region).span::<MIN_FRAME>(offset, len) else { break };
                let (seq, timestamp, _) = burst.fields(k + done);
                span.write_from(frame);
                span.write_u64::<SEQUENCE_AT>(seq);
                span.write_u64::<TIMESTAMP_AT>(timestamp);
                let slot = chunk_slot(self.head + done as u32) as usize;
                rec.pending_lens[slot] = len as u16;
                rec.pending_info[slot] = info;
                done += 1;
            }
            self.used += done;
            self.written += done as u64;
            self.written_bytes += (done * len) as u64;
            k += done;
            let next = self.head + done as u32;
            self.head = if next == self.size { 0 } else { next };
            if chunk_slot(self.head) == 0 {
                self.write_back(dma, rec);
            }
            if done < n {
                break;
            }
        }
        k
    }

    /// Whether the run takes `frame` at all: its length fits a buffer and it passes the L2
    /// filter [DS 7.1.1.1] for the frames runs take (the port's own address, or any unicast
    /// address when promiscuous).
    #[inline(always)]
    fn takes(&self, frame: &[u8]) -> bool {
        (MIN_FRAME..=self.max_len).contains(&frame.len())
            && (mac_key(frame) == self.own_key || (self.promiscuous_unicast && frame[0] & 1 == 0))
    }

    /// Descriptors the device owns: from head up to (not including) tail [DS 7.1.9].
    #[inline(always)]
    fn owned(&self) -> u32 {
        owned_between(self.head, self.tail, self.size)
    }

    /// See [`newer_rx_tail`]; `true` if the tail moved.
    #[inline(never)]
    fn refresh_tail(&mut self, bar: &MappedRegion) -> bool {
        newer_rx_tail(bar, self.queue, self.size, self.tail).map(|t| self.tail = t).is_some()
    }

    /// [`Self::push`], with `finish(region, offset)` called after `frame` is copied to
    /// `offset` in `region` and before its descriptor is written back.
    #[inline(always)]
    fn push_with(
        &mut self,
        to: RunPlaces<'_, impl DmaSpace>,
        frame: &[u8],
        info: u64,
        finish: impl FnOnce(&MappedRegion, usize),
    ) -> bool {
        let RunPlaces { dma, bar, rec, buffers } = to;
        if !self.takes(frame) {
            return false;
        }
        let len = frame.len();
        let n = len as u64;
        let head = self.head;
        if head == self.tail && !self.refresh_tail(bar) {
            // No descriptor: dropped and counted in QPRDC, or held in the packet buffer,
            // which the slow path does [DS 8.2.3.2.3 DROP_EN].
            if !self.drop_en {
                return false;
            }
            self.no_descriptor += 1;
            self.no_descriptor_bytes += n;
            return true;
        }
        if self.used == self.fetched {
            // Frames one at a time: a few descriptors at once.
            self.fetch(dma, rec, 8);
        }
        let buf = rec.buffer_address(self.used);
        // Unknown so far: the slow path looks for new memory or reports the fault.
        let Some((region, offset)) = buffers.find(dma, buf, len) else { return false };
        let region = dma.region(region);
        region.write_bytes(offset, frame);
        finish(region, offset);
        self.used += 1;
        rec.pending_lens[chunk_slot(head) as usize] = len as u16;
        rec.pending_info[chunk_slot(head) as usize] = info;
        let next = if head + 1 == self.size { 0 } else { head + 1 };
        self.head = next;
        self.written += 1;
        self.written_bytes += n;
        if chunk_slot(next) == 0 {
            self.write_back(dma, rec);
        }
        true
    }

    /// Writes back the descriptors filled since the last write-back: at most one
    /// [`RX_WRITE_BACK_CHUNK`], when it is full or when the run ends, so that no frame waits
    /// beyond the engine iteration that wrote it. The device too writes back whole lines
    /// rather than single descriptors [DS 7.1.6]; one store burst per chunk instead of one per
    /// frame keeps lines from moving between our core and the polling driver's.
    ///
    /// Each word is stored once, in order: the driver may take a descriptor the moment its
    /// DD shows and rewrite it (a TinyNF-style driver turns it into a transmit descriptor),
    /// so a copy that stored some bytes twice could undo the driver's write.
    #[inline(always)]
    fn write_back(&mut self, dma: &impl DmaSpace, rec: &RunRecords) {
        // The data must be visible before DD [DS 7.1.6].
        fence(Ordering::Release);
        let ring = self.ring.in_space(dma);
        let mut i = self.written_back_to;
        let next = |i: u32| if i + 1 == self.size { 0 } else { i + 1 };
        if self.advanced {
            while i != self.head {
                let slot = chunk_slot(i) as usize;
                let n = u64::from(rec.pending_lens[slot]);
                // Advanced write-back overwrites qword 0 with the RSS fields [DS 7.1.6.2].
                ring.write(i, rec.pending_info[slot], RX_DD | RX_EOP | n << 32);
                i = next(i);
            }
        } else {
            while i != self.head {
                let n = u64::from(rec.pending_lens[chunk_slot(i) as usize]);
                // Legacy write-back leaves qword 0 (the buffer address) untouched [DS 7.1.5].
                ring.write_qword1(i, n | (RX_DD | RX_EOP) << 32);
                i = next(i);
            }
        }
        self.written_back_to = self.head;
    }

    /// Fetches the descriptors from `head` on (their buffer addresses), as many as `want` (at
    /// least one), the device owns and [`RX_FETCH`] allow: a run that ends keeps none of them,
    /// so it fetches no more than the frames it has.
    #[inline(never)]
    fn fetch(&mut self, dma: &impl DmaSpace, rec: &mut RunRecords, want: usize) {
        let count = (self.owned() as usize).min(RX_FETCH).min(want.max(1));
        self.ring.in_space(dma).read_run(self.head, &mut rec.descriptors.as_flattened_mut()[..count * 16]);
        self.fetched = count;
        self.used = 0;
    }
}

/// The runs of one engine iteration on a port: one per queue that frames went to, begun at
/// the first frame for it ([`Port::rx_run_begin`]). Without RSS that is queue 0 alone; with
/// it, a frame's queue comes from its hash, and the runs of other queues stay open.
pub struct RxRuns {
    runs: [Option<RxRun>; RSS_QUEUES],
    /// The queues whose run is open: bit q for queue q.
    open: u32,
    /// The pieces of memory the last packet buffers were in, whichever queue they were for:
    /// a driver's pools are few pieces, so the runs share one set.
    buffers: Windows,
}

impl RxRuns {
    /// Whether a run is open on any queue.
    pub fn any_open(&self) -> bool {
        self.open != 0
    }
}

impl Port {
    /// The runs of an engine iteration (see [`RxRuns`]): every frame of it must then go
    /// through [`Self::rx_run_frame`] (or the generated variants), and the runs end with
    /// [`Self::rx_run_end`].
    #[inline(always)]
    pub fn rx_run_begin(&mut self, dma: &mut impl DmaSpace) -> RxRuns {
        let mut runs = RxRuns { runs: Default::default(), open: 0, buffers: self.rx_windows.get(dma) };
        if !self.rss.enabled() {
            // Every frame goes to queue 0: its run starts now, as the only one.
            self.rx_run_begin_queue(dma, &mut runs, super::DEFAULT_RX_QUEUE);
        }
        runs
    }

    /// Starts a run of receives into `queue` on the fast path (see [`RxRun`]) if the port is in
    /// the state it covers: receiving, CRC stripped, the queue enabled with its ring in one
    /// piece of driver memory, nothing held in the packet buffer.
    #[inline(never)]
    fn rx_run_begin_queue(&mut self, dma: &mut impl DmaSpace, runs: &mut RxRuns, queue: u32) {
        if self.virtio.is_some() {
            return;
        }
        let cfg = self.paths;
        let q = &self.rx[queue as usize];
        if !(cfg.rx_open
            && cfg.strip_crc
            && q.enabled
            && !q.faulted
            && q.size > 0
            && self.fifo.is_empty()
            && !self.stalled)
        {
            return;
        }
        let Some(ring) = self.rx_ring(dma, queue) else { return };
        let q = &self.rx[queue as usize];
        runs.open |= 1 << queue;
        runs.runs[queue as usize] = Some(RxRun {
            queue,
            ring,
            head: q.head,
            tail: q.tail,
            size: q.size,
            advanced: q.advanced,
            drop_en: q.drop_en,
            max_len: q.buf_size.min(cfg.max_untagged.saturating_sub(FCS_LEN)),
            // RAR(0) holds the port's own address unless the driver cleared it; keys are 48
            // bits, so u64::MAX matches nothing.
            own_key: self.rar.first().copied().unwrap_or(u64::MAX),
            promiscuous_unicast: cfg.fctrl & FCTRL_UPE != 0,
            fetched: 0,
            used: 0,
            written_back_to: q.head,
            written: 0,
            written_bytes: 0,
            no_descriptor: 0,
            no_descriptor_bytes: 0,
        });
    }

    /// Whether the run of the queue `c` names is open, begun now if it was not; `false` if
    /// the fast path does not cover that queue now.
    #[inline(always)]
    fn run_open(&mut self, dma: &mut impl DmaSpace, runs: &mut RxRuns, c: Classified) -> bool {
        if c.queue as usize >= RSS_QUEUES {
            return false;
        }
        if runs.open & 1 << c.queue == 0 {
            self.rx_run_begin_queue(dma, runs, c.queue);
        }
        runs.open & 1 << c.queue != 0
    }

    /// One frame from the wire during the runs: on the fast path if it takes it, otherwise
    /// through [`Self::receive`].
    #[inline(always)]
    pub fn rx_run_frame(&mut self, dma: &mut impl DmaSpace, runs: &mut RxRuns, frame: &[u8]) {
        let c = self.rx_queue_for(frame);
        if self.run_open(dma, runs, c) {
            let RxRuns { runs: open, buffers, .. } = runs;
            if let Some(r) = open[c.queue as usize].as_mut() {
                let to = RunPlaces { dma: &*dma, bar: &self.bar, rec: &mut self.rx_records[c.queue as usize], buffers };
                if r.push(to, frame, c.info) {
                    return;
                }
            }
        }
        self.rx_run_slow(dma, runs, frame);
    }

    /// [`Self::rx_run_frame`] for a generated frame. The fast path writes the template and
    /// then the sequence fields into the buffer. Patching the template first and copying it
    /// would load bytes just stored, and that load waits until the stores reach the cache,
    /// which happens only after the previous frame's buffer line arrived from the driver's
    /// core.
    ///
    /// Returns `true` when the frame's queue has taken its [`QUEUE_BURST`] in this iteration:
    /// the caller delivers no more until the doorbells have been looked at again.
    #[inline(always)]
    pub fn rx_run_generated(&mut self, dma: &mut impl DmaSpace, runs: &mut RxRuns, due: &mut DueFrame) -> bool {
        let c = if self.rss.enabled() { self.rss.classify(&due.header()) } else { Classified::default() };
        if self.run_open(dma, runs, c) {
            let RxRuns { runs: open, buffers, .. } = runs;
            if let Some(r) = open[c.queue as usize].as_mut() {
                let to = RunPlaces { dma: &*dma, bar: &self.bar, rec: &mut self.rx_records[c.queue as usize], buffers };
                if r.push_generated(to, due, c.info) {
                    return r.written + r.no_descriptor >= QUEUE_BURST as u64;
                }
            }
        }
        self.rx_run_slow(dma, runs, due.frame());
        false
    }

    /// How many frames an engine iteration may take from `generator` for this port: a
    /// [`QUEUE_BURST`] for each queue they can go to (RETA's queues while RSS is on, and no
    /// more than the generator's flows, each of which keeps to one queue).
    #[inline]
    pub fn rx_iteration_cap(&self, generator: &Generator) -> usize {
        QUEUE_BURST * self.rss.spread().min(generator.spec().flows.max(1)) as usize
    }

    /// Delivers what the generator has due at `now_ps` (at most `max`) on the fast path, as
    /// one burst (see [`Generator::deliver_burst`]); returns how many frames it took. The
    /// rest, if any, go frame by frame through [`Self::rx_run_generated`].
    #[inline(always)]
    pub fn rx_run_generated_burst(
        &mut self,
        dma: &mut impl DmaSpace,
        runs: &mut RxRuns,
        generator: &mut Generator,
        wire: &mut WireClock,
        now_ps: u64,
        max: usize,
    ) -> usize {
        generator.deliver_burst(now_ps, wire, max, |burst| {
            // One flow: one queue for the whole burst.
            let c = self.rx_queue_for(burst.frame);
            if !self.run_open(dma, runs, c) {
                return 0;
            }
            let RxRuns { runs: open, buffers, .. } = &mut *runs;
            let Some(r) = open[c.queue as usize].as_mut() else { return 0 };
            let to = RunPlaces { dma: &*dma, bar: &self.bar, rec: &mut self.rx_records[c.queue as usize], buffers };
            r.push_burst(to, burst, c.info)
        })
    }

    #[inline(never)]
    fn rx_run_slow(&mut self, dma: &mut impl DmaSpace, runs: &mut RxRuns, frame: &[u8]) {
        // The slow path may hold the frame in the packet buffer, which every queue's frames
        // then wait behind: every run ends, and each begins again at its next frame.
        self.rx_run_end(&*dma, runs);
        self.receive(dma, frame);
    }

    /// Ends the runs: each queue's head and the statistics take what its run did.
    #[inline]
    pub fn rx_run_end(&mut self, dma: &impl DmaSpace, runs: &mut RxRuns) {
        while runs.open != 0 {
            let q = runs.open.trailing_zeros();
            runs.open &= runs.open - 1;
            // Ended in its slot: moving a run out would copy it.
            if let Some(r) = runs.runs[q as usize].as_mut() {
                self.end_run(dma, r);
            }
            runs.runs[q as usize] = None;
        }
        self.rx_windows.keep(runs.buffers, dma);
    }

    #[inline]
    fn end_run(&mut self, dma: &impl DmaSpace, r: &mut RxRun) {
        r.write_back(dma, &self.rx_records[r.queue as usize]);
        let r = &*r;
        let c = &mut self.counters;
        let q = &mut self.rx[r.queue as usize];
        // RDH itself is published once per engine iteration; the run may have seen a newer RDT.
        q.head = r.head;
        q.tail = r.tail;
        // What receive() counts for an accepted frame, CRC stripped [DS 8.2.3.23].
        let (frames, bytes) = (r.written + r.no_descriptor, r.written_bytes + r.no_descriptor_bytes);
        c.tpr += frames;
        c.tor += bytes + frames * FCS_LEN as u64;
        c.gprc += frames;
        c.gorc += bytes;
        c.qprc[q.stat] += r.written;
        c.qbrc[q.stat] += r.written_bytes;
        c.qprdc[q.stat] += r.no_descriptor;
        q.dropped += r.no_descriptor;
    }
}
