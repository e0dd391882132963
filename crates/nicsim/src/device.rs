//! One 82599ES port: register semantics, receive and transmit queue engines, statistics.
//!
//! The driver reads and writes BAR0 as plain shared memory. nicsim keeps a shadow copy of the
//! register file and [`Port::scan`] compares the two: every difference is a driver write, to
//! which the device reacts (self-clearing bits, resets, queue enables, read-only bits restored).
//! Doorbells (RDT, TDT) of enabled queues are read on every engine iteration instead
//! ([`Port::poll_doorbells`]). What nicsim itself changes (heads, status, counters) it writes to
//! both the BAR and the shadow.

use crate::dma::{self, DmaSpace, Ring, Windows};
use crate::flow_control::{FlowConfig, FlowControl};
use crate::lint::{rule, Lints};
use crate::pciconfig::PciConfig;
use crate::regs::*;
use crate::wire::{
    crc32, DueFrame, FlowFields, GeneratedBurst, Generator, Sink, WireClock, FCS_LEN, MIN_FRAME, SEQUENCE_AT,
    SINK_HEAD, TIMESTAMP_AT,
};
use platform::MappedRegion;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::atomic::{fence, Ordering};

/// Receive descriptor status bits (legacy byte 12 / advanced status_error) [DS 7.1.5, 7.1.6].
const RX_DD: u64 = 1 << 0;
const RX_EOP: u64 = 1 << 1;
/// Transmit command bits in descriptor byte 11 [DS 7.2.3.2.2, 7.2.3.2.4].
const TX_EOP: u8 = 1 << 0;
const TX_IFCS: u8 = 1 << 1;
const TX_RS: u8 = 1 << 3;
const TX_DEXT: u8 = 1 << 5;
/// Receive descriptors a run fetches at once.
const RX_FETCH: usize = 64;
/// Receive descriptors written back together: sixteen 64-byte lines (ring bases are 128-byte
/// aligned [DS 8.2.3.8.1]), or fewer at the end of the ring, so a chunk never wraps. A
/// polling driver spins on the line of its next descriptor, and every write-back moves that
/// line between its core and ours while both use it; the fewer write-backs, the less the
/// engine pays for a fast driver (chunks of 4, 16, 32 and 64 descriptors were timed: see
/// docs/results.md, seventh round). A run also writes back when it ends, so no frame waits
/// beyond the engine iteration that wrote it.
pub const RX_WRITE_BACK_CHUNK: u32 = 64;
const _: () = assert!(RX_WRITE_BACK_CHUNK.is_power_of_two(), "chunks are found by masking the index");

/// The place of receive descriptor `index` in its write-back chunk.
#[inline(always)]
fn chunk_slot(index: u32) -> u32 {
    index & (RX_WRITE_BACK_CHUNK - 1)
}
/// How many descriptors ahead the transmit path prefetches packet buffers.
const PREFETCH_AHEAD: usize = 8;
/// Descriptors one transmit queue processes per engine iteration at most.
const TX_DESCRIPTORS_PER_CALL: usize = 128;
/// Largest untagged frame on the wire with its FCS, plus a VLAN tag: what one frame can add
/// to a packet buffer.
const MAX_TX_FRAME_ON_WIRE: usize = 1522;
/// Largest frame a TX queue gathers before declaring it malformed.
const MAX_TX_FRAME: usize = 16 * 1024;
/// At most this many DMA faults are kept per port (all are counted).
const MAX_FAULTS: usize = 1024;
/// Dwords of BAR0 examined per [`Port::scan`] call besides the priority registers.
pub const SWEEP_DWORDS: usize = 2048;
/// Registers whose writes have side effects drivers wait for, examined at every scan, in this
/// order. FCTRL comes before RXCTRL: when both changed within one poll, the filter change is
/// judged against the receive-enable state before the poll, so "set filters, then enable"
/// is never reported (a disable-change-enable toggle inside one poll cannot be seen at all).
pub const PRIORITY_REGISTERS: &[u32] =
    &[CTRL, EIMS, EIMC, EICS, EICR, EERD, MSCA, AUTOC, I2CCTL, FCTRL, RXCTRL, SECRXCTRL, DMATXCTL, HLREG0];

#[derive(Debug, Clone, Copy, Default)]
struct RxQueue {
    enabled: bool,
    faulted: bool,
    base: u64,
    size: u32,
    head: u32,
    tail: u32,
    advanced: bool,
    buf_size: usize,
    drop_en: bool,
    stat: usize,
    /// The ring, resolved at its first use (see [`dma::Ring`]).
    ring: Option<dma::Ring>,
}

#[derive(Debug, Default)]
struct TxQueue {
    enabled: bool,
    faulted: bool,
    base: u64,
    size: u32,
    head: u32,
    tail: u32,
    head_wb: Option<u64>,
    wthresh: u32,
    frame: Vec<u8>,
    frame_bad: bool,
    stat: usize,
}

/// The device's statistics, as 64-bit totals since the last reset.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DeviceCounters {
    pub gprc: u64,
    pub bprc: u64,
    pub mprc: u64,
    pub gorc: u64,
    pub gptc: u64,
    pub gotc: u64,
    pub bptc: u64,
    pub mptc: u64,
    pub tpr: u64,
    pub tor: u64,
    pub tpt: u64,
    pub ruc: u64,
    pub roc: u64,
    /// MPC(0): frames missed because packet buffer 0 was full.
    pub mpc: u64,
    pub qprc: [u64; 16],
    pub qbrc: [u64; 16],
    pub qprdc: [u64; 16],
    pub qptc: [u64; 16],
    pub qbtc: [u64; 16],
}

/// Frames that never reached the driver, by reason (beyond what the registers count).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Drops {
    /// RXCTRL.RXEN = 0, SECRXCTRL.RX_DIS = 1, no bus mastering, or master disable.
    pub rx_disabled: u64,
    /// Rejected by L2 filtering (FCTRL, RAR).
    pub filtered: u64,
    /// Queue 0 disabled or stopped by a DMA fault.
    pub queue_disabled: u64,
    /// Lost to DMA faults.
    pub dma_fault: u64,
}

/// Frames a port holds at one moment, by place. With what the sinks received and what the
/// device and the driver counted as dropped, they account for every frame generated.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct InFlight {
    /// In the receive packet buffer, waiting for a descriptor.
    pub packet_buffer: u64,
    /// Written into RX queue 0's ring and not yet taken by the driver: descriptors the driver
    /// owns whose DD and EOP are still as the device wrote them back.
    pub rx_ring: u64,
    /// Queued in enabled TX rings and not yet sent: data descriptors with EOP from head to tail.
    pub tx_ring: u64,
}

/// A DMA access outside memory the driver gave the device.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DmaFault {
    pub port: usize,
    pub direction: String,
    pub queue: u32,
    pub descriptor: u32,
    pub address: u64,
    pub access: String,
}

/// Where [`Port::transmit`] puts the frames it sends.
pub trait TxOutput {
    /// How many more frames it takes.
    fn room(&self) -> usize;
    /// Takes the `len` bytes at `offset` in `region`, zero-padded to `padded` bytes, as one
    /// frame whose last bit leaves the wire at `end_ps`. Returns the frame's first 6 bytes
    /// (its destination, for statistics) if it has them.
    fn take_from(
        &mut self,
        region: &MappedRegion,
        offset: usize,
        len: usize,
        padded: usize,
        end_ps: u64,
    ) -> Option<[u8; 6]>;
    /// Takes a frame gathered from several descriptors.
    fn take(&mut self, frame: &[u8], end_ps: u64);
}

/// A sink takes frames straight from driver memory: it reads only the headers and payload
/// fields it measures, so a port without a cable, loopback or capture copies no whole frame.
impl TxOutput for Sink {
    fn room(&self) -> usize {
        usize::MAX
    }
    #[inline(always)]
    fn take_from(
        &mut self,
        region: &MappedRegion,
        offset: usize,
        len: usize,
        padded: usize,
        end_ps: u64,
    ) -> Option<[u8; 6]> {
        if let Some(span) = region.span::<MIN_FRAME>(offset, len) {
            // The common case: every field the sink reads is in the frame's first bytes.
            let head: [u8; MIN_FRAME] = span.read_head();
            self.consume_min(&head, padded, end_ps);
            return head.first_chunk::<6>().copied();
        }
        let mut head = [0u8; SINK_HEAD];
        region.read_bytes(offset, &mut head[..len.min(SINK_HEAD)]);
        // Padding bytes are the zeros already there.
        self.consume_head(&head[..padded.min(SINK_HEAD)], padded, end_ps);
        (padded >= 6).then(|| [head[0], head[1], head[2], head[3], head[4], head[5]])
    }
    fn take(&mut self, frame: &[u8], end_ps: u64) {
        self.consume(frame, end_ps);
    }
}

/// Frames produced by one [`Port::transmit`] call, back to back in one reused buffer.
#[derive(Debug)]
pub struct TxBatch {
    data: Vec<u8>,
    /// Each frame's end in `data` and when its last bit leaves the wire; it starts where the
    /// previous one ends.
    frames: Vec<(usize, u64)>,
    capacity: usize,
    /// Frames taken at most (see [`Self::limit`]).
    limit: usize,
    /// HLREG0.LPBK when the frames were sent: they loop back into the port's own receive path.
    pub loopback: bool,
}

impl TxBatch {
    /// A batch of at most `capacity` frames.
    pub fn new(capacity: usize) -> Self {
        TxBatch {
            data: Vec::with_capacity(capacity * 2 * 1024),
            frames: Vec::with_capacity(capacity),
            capacity,
            limit: capacity,
            loopback: false,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
    pub fn clear(&mut self) {
        self.data.clear();
        self.frames.clear();
    }
    /// Takes at most `frames` frames (at least one) until the next call, within its capacity.
    pub fn limit(&mut self, frames: usize) {
        self.limit = frames.clamp(1, self.capacity);
    }
    /// The frames in order, each with the time its last bit leaves the wire.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> {
        let mut start = 0;
        self.frames.iter().map(move |&(end, t)| {
            let f = &self.data[start..end];
            start = end;
            (f, t)
        })
    }
}

impl TxOutput for TxBatch {
    fn room(&self) -> usize {
        self.limit.saturating_sub(self.frames.len())
    }
    #[inline(always)]
    fn take_from(
        &mut self,
        region: &MappedRegion,
        offset: usize,
        len: usize,
        padded: usize,
        end_ps: u64,
    ) -> Option<[u8; 6]> {
        let start = self.data.len();
        region.read_append(offset, len, &mut self.data);
        if padded > len {
            self.data.resize(start + padded, 0);
        }
        self.frames.push((self.data.len(), end_ps));
        self.data.get(start..start + 6).map(|d| [d[0], d[1], d[2], d[3], d[4], d[5]])
    }
    fn take(&mut self, frame: &[u8], end_ps: u64) {
        self.data.extend_from_slice(frame);
        self.frames.push((self.data.len(), end_ps));
    }
}

enum RxWrite {
    Written,
    NoRoom,
    Fault,
}

/// A run of receives into queue 0 on the fast path: what [`Port::receive`] checks per frame
/// that cannot change during the run is checked once ([`Port::rx_run_begin`]), the queue's
/// state is kept here, and statistics are added when the run ends. It takes unicast frames
/// to the port's own address (or any unicast frame in promiscuous mode) that fit one buffer
/// and whose buffer lies in known driver memory; any other frame ends the run and goes
/// through [`Port::receive`], so both paths write and count frames alike.
#[derive(Debug, Clone, Copy)]
pub struct RxRun {
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
    /// The pieces of memory the last packet buffers were in.
    buffers: Windows,
    /// Buffer addresses of the descriptors from the one at `head` when they were fetched:
    /// `fetched` of them, the first `used` taken. The device fetches descriptors in bursts
    /// too [DS 7.1.3.3]; the driver may not touch descriptors it gave the device.
    addresses: [u64; RX_FETCH],
    fetched: usize,
    used: usize,
    /// Descriptors from here to `head` are filled but not yet written back; their lengths
    /// by index modulo [`RX_WRITE_BACK_CHUNK`].
    written_back_to: u32,
    pending_lens: [u16; RX_WRITE_BACK_CHUNK as usize],
    /// Frames written into the ring and their bytes (without FCS), and frames dropped for
    /// want of a descriptor and theirs; accepted frames are both together.
    written: u64,
    written_bytes: u64,
    no_descriptor: u64,
    no_descriptor_bytes: u64,
}

impl RxRun {
    /// Writes `frame` into the ring, or drops it for want of a descriptor (SRRCTL.DROP_EN);
    /// `false` (and nothing done) if the fast path does not cover it.
    #[inline(always)]
    fn push(&mut self, dma: &impl DmaSpace, bar: &MappedRegion, frame: &[u8]) -> bool {
        self.push_with(dma, bar, frame, |_, _| {})
    }

    /// [`Self::push`] for a generated frame given as its template and the sequence fields
    /// still to be written into it (see [`DueFrame`]).
    #[inline(always)]
    fn push_generated(&mut self, dma: &impl DmaSpace, bar: &MappedRegion, due: &DueFrame) -> bool {
        let (at, seq, timestamp) = due.sequence_fields();
        match due.flow_fields() {
            None => self.push_with(dma, bar, due.template(), |region, offset| {
                region.write_u64(offset + at, seq);
                region.write_u64(offset + at + 8, timestamp);
            }),
            Some(f) => self.push_with(dma, bar, due.template(), |region, offset| {
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
    fn push_burst(&mut self, dma: &impl DmaSpace, bar: &MappedRegion, burst: &GeneratedBurst) -> usize {
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
                self.fetch(dma);
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
                let buf = self.addresses[(self.used + done) % RX_FETCH];
                // Unknown so far: the general path looks for new memory or reports the fault.
                let Some((region, offset)) = self.buffers.find(dma, buf, len) else { break };
                let Some(span) = dma.region(region).span::<MIN_FRAME>(offset, len) else { break };
                let (seq, timestamp, _) = burst.fields(k + done);
                span.write_from(frame);
                span.write_u64::<SEQUENCE_AT>(seq);
                span.write_u64::<TIMESTAMP_AT>(timestamp);
                self.pending_lens[chunk_slot(self.head + done as u32) as usize] = len as u16;
                done += 1;
            }
            self.used += done;
            self.written += done as u64;
            self.written_bytes += (done * len) as u64;
            k += done;
            let next = self.head + done as u32;
            self.head = if next == self.size { 0 } else { next };
            if chunk_slot(self.head) == 0 {
                self.write_back(dma);
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
        newer_rx_tail(bar, self.size, self.tail).map(|t| self.tail = t).is_some()
    }

    /// [`Self::push`], with `finish(region, offset)` called after `frame` is copied to
    /// `offset` in `region` and before its descriptor is written back.
    #[inline(always)]
    fn push_with(
        &mut self,
        dma: &impl DmaSpace,
        bar: &MappedRegion,
        frame: &[u8],
        finish: impl FnOnce(&MappedRegion, usize),
    ) -> bool {
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
            self.fetch(dma);
        }
        let buf = self.addresses[self.used % RX_FETCH];
        // Unknown so far: the slow path looks for new memory or reports the fault.
        let Some((region, offset)) = self.buffers.find(dma, buf, len) else { return false };
        let region = dma.region(region);
        region.write_bytes(offset, frame);
        finish(region, offset);
        self.used += 1;
        self.pending_lens[chunk_slot(head) as usize] = len as u16;
        let next = if head + 1 == self.size { 0 } else { head + 1 };
        self.head = next;
        self.written += 1;
        self.written_bytes += n;
        if chunk_slot(next) == 0 {
            self.write_back(dma);
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
    fn write_back(&mut self, dma: &impl DmaSpace) {
        // The data must be visible before DD [DS 7.1.6].
        fence(Ordering::Release);
        let mut i = self.written_back_to;
        while i != self.head {
            let n = u64::from(self.pending_lens[chunk_slot(i) as usize]);
            if self.advanced {
                // Advanced write-back overwrites qword 0 (no RSS, no packet type) [DS 7.1.6.2].
                self.ring.write(dma, i, 0, RX_DD | RX_EOP | n << 32);
            } else {
                // Legacy write-back leaves qword 0 (the buffer address) untouched [DS 7.1.5].
                self.ring.write_qword1(dma, i, n | (RX_DD | RX_EOP) << 32);
            }
            i = if i + 1 == self.size { 0 } else { i + 1 };
        }
        self.written_back_to = self.head;
    }

    /// Fetches the buffer addresses of up to [`RX_FETCH`] descriptors from `head`.
    #[inline(never)]
    fn fetch(&mut self, dma: &impl DmaSpace) {
        let count = (self.owned() as usize).min(RX_FETCH);
        let mut raw = [0u8; 16 * RX_FETCH];
        let raw = &mut raw[..count * 16];
        self.ring.read_run(dma, self.head, raw);
        for (a, d) in self.addresses.iter_mut().zip(raw.chunks_exact(16)) {
            *a = u64::from_le_bytes(d[..8].try_into().unwrap_or_default());
        }
        self.fetched = count;
        self.used = 0;
    }
}

/// The bus address of descriptor `index` of a ring at `base`. Both come from the driver: an
/// address that wraps past 2^64 resolves nowhere and is reported as a DMA fault.
#[inline(always)]
fn descriptor_address(base: u64, index: u32) -> u64 {
    base.wrapping_add(u64::from(index) * 16)
}

/// Descriptors from `head` up to (not including) `tail` in a ring of `size`: what the device
/// owns [DS 7.1.9 receive, 7.2.3.3 transmit].
#[inline(always)]
fn owned_between(head: u32, tail: u32, size: u32) -> u32 {
    if tail >= head {
        tail - head
    } else {
        tail + size - head
    }
}

/// RDT(0) as the driver last wrote it in `bar` (its side of BAR0), if it differs from `tail` and
/// lies inside a ring of `size`. Receive paths that find no descriptor look once more: the
/// device sees tail writes as they happen [DS 7.1.9], the engine polls them once per
/// iteration, and a driver that returns descriptors promptly should not lose frames to that
/// period. A value outside the ring is left to the engine's poll, which ignores it and
/// reports it (lint).
#[inline(always)]
fn newer_rx_tail(bar: &MappedRegion, size: u32, tail: u32) -> Option<u32> {
    let now = bar.read_u32(rdt(0) as usize);
    // The driver writes descriptors before the tail: descriptors read after this load must
    // see them (free on x86, which keeps loads in order).
    fence(Ordering::Acquire);
    (now < size && now != tail).then_some(now)
}

/// What the per-frame receive and transmit paths need from the registers. Registers change
/// only when [`Port::scan`] applies driver writes (or on reset), so it is derived there, and
/// the per-frame paths read no register.
#[derive(Debug, Clone, Copy, Default)]
struct PathConfig {
    /// RXCTRL.RXEN, SECRXCTRL.RX_DIS clear, bus mastering, no master disable.
    rx_open: bool,
    /// DMATXCTL.TE, bus mastering, no master disable.
    tx_open: bool,
    /// HLREG0.RXCRCSTRP [DS 8.2.3.22.8].
    strip_crc: bool,
    /// Longest accepted frame on the wire, FCS included, untagged and VLAN-tagged: MAXFRS.MFS
    /// with HLREG0.JUMBOEN, otherwise 1518 / 1522 [DS 8.2.3.22.13].
    max_untagged: usize,
    max_tagged: usize,
    /// FCTRL [DS 8.2.3.7.1].
    fctrl: u32,
    /// HLREG0.TXCRCEN, TXPADEN, LPBK.
    tx_crc: bool,
    tx_pad: bool,
    loopback: bool,
}

/// A minimal EEPROM image: firmware pointers that pass DPDK's version check
/// and a valid checksum (word 0x3F = 0xBABA − sum of words 0x00–0x3E).
fn eeprom_image() -> [u16; 128] {
    let mut e = [0u16; 128];
    e[0x0F] = 0x0040;
    e[0x44] = 0x004B;
    e[0x52] = 0x0006;
    let sum = e[..0x3F].iter().fold(0u16, |a, &w| a.wrapping_add(w));
    e[0x3F] = 0xBABAu16.wrapping_sub(sum);
    e
}

/// A port of the simulated card.
pub struct Port {
    pub index: usize,
    mac: [u8; 6],
    lan_id: u32,
    bar: MappedRegion,
    shadow: Vec<u32>,
    pub config: PciConfig,
    rx: Vec<RxQueue>,
    tx: Vec<TxQueue>,
    active_tx: Vec<u32>,
    tx_rr: usize,
    /// Where the transmit fast path fetches descriptors: kept between calls, because a fresh
    /// array would be zeroed whole on every call, most of it unused.
    tx_fetched: Box<[u8]>,
    /// The link partner asks us to stop sending (802.3x XOFF), held until released: with
    /// MFLCN.RFCE the transmitter sends nothing and TX rings fill, as behind a paused link.
    pub tx_paused: bool,
    /// 802.3x flow control: XOFF/XON to the link partner, PAUSE frames from it.
    pub flow: FlowControl,
    /// Valid receive addresses (RAL/RAH with AV), as [`mac_key`]s.
    rar: Vec<u64>,
    paths: PathConfig,
    pub counters: DeviceCounters,
    pub drops: Drops,
    pub lint: Lints,
    pub faults: Vec<DmaFault>,
    pub fault_count: u64,
    fifo: VecDeque<Vec<u8>>,
    fifo_bytes: usize,
    spare: Vec<Vec<u8>>,
    eeprom: [u16; 128],
    pub tx_wire: WireClock,
    pub resets: u64,
    sweep: usize,
}

/// `(1, 0)` for a broadcast destination, `(0, 1)` for another group address, `(0, 0)` for a
/// unicast one or a frame too short to have one: what BPTC and MPTC add [DS 8.2.3.23].
#[inline(always)]
fn group_kind(dst: Option<[u8; 6]>) -> (u64, u64) {
    match dst {
        Some(d) if d == [0xFF; 6] => (1, 0),
        Some(d) if d[0] & 1 != 0 => (0, 1),
        _ => (0, 0),
    }
}

/// The MAC address nicsim gives port `n`: locally administered 02:00:00:00:00:0n.
pub fn default_mac(n: usize) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, n as u8]
}

/// A MAC address (the first 6 bytes of `bytes`) as one integer, so that filtering compares
/// words instead of byte slices.
#[inline(always)]
fn mac_key(bytes: &[u8]) -> u64 {
    let mut k = [0u8; 8];
    k[..6].copy_from_slice(&bytes[..6]);
    u64::from_le_bytes(k)
}

const BROADCAST_KEY: u64 = 0xFFFF_FFFF_FFFF;

impl Port {
    /// A port whose registers live in `bar` (BAR0, [`BAR0_LEN`] bytes) and whose PCI
    /// configuration space is `config`. `lan_id` is the PCI function number.
    pub fn new(index: usize, bar: MappedRegion, config: PciConfig, lan_id: u32, gbps: f64) -> Self {
        assert_eq!(bar.len(), BAR0_LEN, "BAR0 must be {BAR0_LEN:#x} bytes");
        let mut p = Port {
            index,
            mac: default_mac(index),
            lan_id,
            bar,
            shadow: vec![0; BAR0_DWORDS],
            config,
            rx: vec![RxQueue::default(); QUEUES],
            tx: (0..QUEUES).map(|_| TxQueue::default()).collect(),
            active_tx: Vec::new(),
            tx_rr: 0,
            tx_fetched: vec![0; 16 * TX_DESCRIPTORS_PER_CALL].into_boxed_slice(),
            tx_paused: false,
            flow: FlowControl::new(gbps),
            rar: Vec::new(),
            paths: PathConfig::default(),
            counters: DeviceCounters::default(),
            drops: Drops::default(),
            lint: Lints::new(index),
            faults: Vec::new(),
            fault_count: 0,
            fifo: VecDeque::new(),
            fifo_bytes: 0,
            spare: Vec::new(),
            eeprom: eeprom_image(),
            tx_wire: WireClock::new(gbps),
            resets: 0,
            sweep: 0,
        };
        p.reset();
        p.resets = 0;
        p
    }

    /// HLREG0.LPBK: transmitted frames loop back into this port's receive path.
    pub fn loops_back(&self) -> bool {
        self.paths.loopback
    }

    /// The device's mapping of BAR0. A driver in the same process (examples, tests) may
    /// write registers through it as through its own mapping of the file.
    pub fn bar(&self) -> &MappedRegion {
        &self.bar
    }

    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The current value of a register as the device sees it.
    pub fn reg(&self, offset: u32) -> u32 {
        self.shadow[offset as usize / 4]
    }

    /// Device-side register write (BAR and shadow, and the 82598 alias address if any).
    fn set_reg(&mut self, offset: u32, value: u32) {
        let i = offset as usize / 4;
        self.shadow[i] = value;
        self.bar.write_u32(offset as usize, value);
        if let Some(a) = alias_for(offset) {
            let j = a as usize / 4;
            self.shadow[j] = value;
            self.bar.write_u32(a as usize, value);
        }
    }

    /// Power-on / software reset [DS 4.6.3.2]: every register to its reset
    /// value, queues disabled, statistics zero, MAC reloaded into RAR0, EEPROM auto-read and
    /// DMA init done. Done synchronously, so the reset bits read 0 at once.
    pub fn reset(&mut self) {
        self.resets += 1;
        self.shadow.iter_mut().for_each(|v| *v = 0);
        self.bar.fill(0, BAR0_LEN, 0);
        for (offset, value) in nonzero_reset_values() {
            self.set_reg(offset, value);
        }
        let m = self.mac;
        self.set_reg(ral(0), u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
        self.set_reg(rah(0), u32::from(u16::from_le_bytes([m[4], m[5]])) | RAH_AV);
        self.rx.iter_mut().for_each(|q| *q = RxQueue::default());
        self.tx.iter_mut().for_each(|q| *q = TxQueue::default());
        self.active_tx.clear();
        self.counters = DeviceCounters::default();
        self.flow.reset();
        self.fifo_clear();
        self.rebuild_rar();
        self.update_status();
        self.refresh_paths();
    }

    fn update_status(&mut self) {
        let mut s = (self.lan_id & 3) << 2 | STATUS_LINK_UP;
        if self.config.bus_master() && self.reg(CTRL) & CTRL_GIO_DIS == 0 {
            s |= STATUS_GIO;
        }
        if self.reg(STATUS) != s {
            self.set_reg(STATUS, s);
        }
    }

    fn rebuild_rar(&mut self) {
        self.rar.clear();
        for n in 0..128 {
            let h = self.reg(rah(n));
            if h & RAH_AV != 0 {
                let l = self.reg(ral(n)).to_le_bytes();
                let h = h.to_le_bytes();
                self.rar.push(mac_key(&[l[0], l[1], l[2], l[3], h[0], h[1]]));
            }
        }
    }

    /// Derives [`PathConfig`] from the registers.
    fn refresh_paths(&mut self) {
        let dma_allowed = self.config.bus_master() && self.reg(CTRL) & CTRL_GIO_DIS == 0;
        let hl = self.reg(HLREG0);
        let (max_untagged, max_tagged) = if hl & HLREG0_JUMBOEN != 0 {
            let mfs = (self.reg(MAXFRS) >> 16) as usize;
            (mfs, mfs)
        } else {
            (1518, 1522)
        };
        self.paths = PathConfig {
            rx_open: self.reg(RXCTRL) & RXCTRL_RXEN != 0 && self.reg(SECRXCTRL) & SECRXCTRL_RX_DIS == 0 && dma_allowed,
            tx_open: self.reg(DMATXCTL) & DMATXCTL_TE != 0 && dma_allowed,
            strip_crc: hl & HLREG0_RXCRCSTRP != 0,
            max_untagged,
            max_tagged,
            fctrl: self.reg(FCTRL),
            tx_crc: hl & HLREG0_TXCRCEN != 0,
            tx_pad: hl & HLREG0_TXPADEN != 0,
            loopback: hl & HLREG0_LPBK != 0,
        };
        let (high, low) = (self.reg(fcrth(0)), self.reg(fcrtl(0)));
        self.flow.config = FlowConfig {
            transmit: self.reg(FCCFG) & FCCFG_TFCE_MASK == FCCFG_TFCE_802_3X && high & FCRTH_FCEN != 0,
            high: (high & FC_THRESHOLD_MASK) as usize,
            low: (low & FC_THRESHOLD_MASK) as usize,
            xon: low & FCRTL_XONE != 0,
            pause_quanta: self.reg(fcttv(0)) as u16,
            refresh_quanta: self.reg(FCRTV) as u16,
            receive: self.reg(MFLCN) & MFLCN_RFCE != 0,
        };
    }

    /// Whether any queue is enabled (the engine may idle when none is).
    pub fn busy(&self) -> bool {
        self.rx[0].enabled || !self.active_tx.is_empty() || !self.fifo.is_empty()
    }

    // ---------------------------------------------------------------- register writes

    /// Applies what the driver wrote since the last look: the control registers in
    /// [`PRIORITY_REGISTERS`] every call, and the next [`SWEEP_DWORDS`] of the BAR, so a whole
    /// sweep takes `BAR0_DWORDS / SWEEP_DWORDS` calls. Reading all 128 KiB at every call would
    /// cost tens of microseconds of memory bandwidth.
    pub fn scan(&mut self) {
        self.apply_driver_writes();
        self.refresh_paths();
    }

    fn apply_driver_writes(&mut self) {
        self.publish_rx_head();
        if self.config.poll() {
            self.update_status();
        }
        for &offset in PRIORITY_REGISTERS {
            let value = self.bar.read_u32(offset as usize);
            if self.check_dword(offset as usize / 4, value) {
                return;
            }
        }
        let start = self.sweep;
        let end = start + SWEEP_DWORDS;
        self.sweep = end % BAR0_DWORDS;
        // One pass over BAR and shadow together: the sweep is memory-bound, and a copy into a
        // third array first made it take several microseconds of every scan period.
        let mut i = start;
        while let Some(k) = self.bar.first_difference(i * 4, &self.shadow[i..end]) {
            let j = i + k;
            let value = self.bar.read_u32(j * 4);
            if self.check_dword(j, value) {
                return;
            }
            i = j + 1;
        }
    }

    /// Scans the whole BAR at once (tests, and after a reset when nothing else is pending).
    pub fn scan_all(&mut self) {
        for _ in 0..BAR0_DWORDS / SWEEP_DWORDS {
            self.scan();
        }
    }

    /// Handles dword `j` if the driver changed it to `new`. Returns true after a reset.
    fn check_dword(&mut self, j: usize, new: u32) -> bool {
        let old = self.shadow[j];
        if old == new {
            return false;
        }
        self.shadow[j] = new;
        let offset = (j * 4) as u32;
        if !self.config.memory_enabled() {
            // A master abort on real hardware: the write never arrives [PCI 3.0 6.2.2].
            self.lint.warn(
                offset,
                new,
                rule::BAR_WITHOUT_MSE,
                "BAR0 written while PCI COMMAND.MSE (memory space enable) is 0; the write is dropped".into(),
            );
            self.set_reg(offset, old);
            return false;
        }
        self.on_write(offset, old, new)
    }

    /// Publishes RDH(0) after the receive engine moved it. The engine calls this once per
    /// iteration instead of once per frame: a register store per frame costs more than the
    /// rest of the receive path, and drivers learn of new frames from DD or head write-back,
    /// not from RDH [DS 7.1.9].
    #[inline]
    pub fn publish_rx_head(&mut self) {
        let head = self.rx[0].head;
        if self.rx[0].enabled && self.shadow[rdh(0) as usize / 4] != head {
            self.set_reg(rdh(0), head);
        }
    }

    /// Reads the doorbells of enabled queues (called every engine iteration).
    #[inline]
    pub fn poll_doorbells(&mut self) {
        if !self.rx[0].enabled {
            // A driver that sets RXDCTL.ENABLE and polls for it reads its own store back at
            // once, before the device has seen it (a plain memory read cannot be intercepted).
            // Looking at RXDCTL(0) every iteration shrinks that window to well under a
            // microsecond, so frames that arrive after the driver's bring-up find the queue
            // enabled, as on hardware [DS 4.6.7.1]. The driver programmed the ring before
            // enabling the queue, so the whole BAR is applied in address order, ring first.
            if self.bar.read_u32(rxdctl(0) as usize) != self.reg(rxdctl(0)) {
                self.sweep = 0;
                self.scan_all();
            }
        }
        if self.rx[0].enabled {
            let off = rdt(0);
            let t = self.bar.read_u32(off as usize);
            if t != self.shadow[off as usize / 4] {
                self.shadow[off as usize / 4] = t;
                self.set_rx_tail(0, t);
            }
        }
        for k in 0..self.active_tx.len() {
            let q = self.active_tx[k];
            let off = tdt(q);
            let t = self.bar.read_u32(off as usize);
            if t != self.shadow[off as usize / 4] {
                self.shadow[off as usize / 4] = t;
                self.set_tx_tail(q, t);
            }
        }
    }

    /// Reacts to a driver write of `new` over `old` at `offset`. Returns true after a reset.
    fn on_write(&mut self, offset: u32, old: u32, new: u32) -> bool {
        let canon = alias_of(offset).unwrap_or(offset);
        let old = if canon != offset { self.reg(canon) } else { old };
        let mut value = new;
        if let Some(s) = spec_of(canon) {
            if s.read_only & (old ^ new) != 0 {
                value = (new & !s.read_only) | (old & s.read_only);
            }
            let changed_reserved = (value ^ old) & s.reserved;
            if changed_reserved != 0 && (value ^ s.reset) & s.reserved != 0 {
                self.lint.warn(
                    canon,
                    value,
                    rule::RESERVED_BITS,
                    format!(
                        "reserved bits {:#010x} changed from their reset value {:#010x} [DS {}: reserved bits must be written as read]",
                        (value ^ s.reset) & s.reserved,
                        s.reset & s.reserved,
                        s.section
                    ),
                );
            }
        }
        match canon {
            CTRL => {
                if value & (CTRL_RST | CTRL_LNK_RST) != 0 {
                    self.reset();
                    return true;
                }
                // Master disable stays set until the next reset [DS 5.2.5.3.2]; STATUS.GIO follows.
                value |= old & CTRL_GIO_DIS;
                self.store(canon, offset, new, value);
                self.update_status();
                return false;
            }
            EIMS => value |= old, // write 1 sets, 0 has no effect [DS 8.2.3.5.3]
            EIMC => {
                let eims = self.reg(EIMS) & !new;
                self.set_reg(EIMS, eims);
                value = 0; // write-only
            }
            EICS => {
                let eicr = self.reg(EICR) | new;
                self.set_reg(EICR, eicr);
                value = 0;
            }
            EICR => value = old & !new, // write 1 to clear
            EERD if new & 1 != 0 => {
                // EEPROM read: data in 31:16, DONE (bit 1), START cleared [DS 8.2.3.2.2].
                let addr = (new >> 2) & 0x3FFF;
                let data = self.eeprom.get(addr as usize).copied().unwrap_or(0xFFFF);
                value = (u32::from(data) << 16) | (addr << 2) | 0b10;
            }
            MSCA if new & (1 << 30) != 0 => {
                // MDIO command completes at once; no PHY answers (an SFP+ port has no MDIO PHY).
                value = new & !(1 << 30);
                let w = self.reg(MSRWD);
                self.set_reg(MSRWD, 0xFFFF_0000 | (w & 0xFFFF));
            }
            AUTOC => value &= !AUTOC_AN_RESTART, // self-clearing; link stays up
            I2CCTL => value = (value & 0b1010) | ((value >> 1) & 0b0101), // empty cage: inputs follow outputs
            FCTRL if old != value && self.reg(RXCTRL) & RXCTRL_RXEN != 0 => self.lint.warn(
                FCTRL,
                value,
                rule::FCTRL_WHILE_RXEN,
                "FCTRL changed while RXCTRL.RXEN = 1 [DS 8.2.3.7.1: change filter control only while receive is disabled]".into(),
            ),
            0x0A200..=0x0A5FC => {
                self.store(canon, offset, new, value);
                self.rebuild_rar();
                return false;
            }
            _ => self.on_queue_write(canon, old, &mut value),
        }
        self.store(canon, offset, new, value);
        false
    }

    fn store(&mut self, canon: u32, offset: u32, written: u32, value: u32) {
        if value != written || canon != offset || alias_for(canon).is_some() {
            self.set_reg(canon, value);
        }
    }

    fn on_queue_write(&mut self, canon: u32, old: u32, value: &mut u32) {
        let rx_q = match canon {
            0x01000..=0x01FFF => Some((canon - 0x01000) / 0x40),
            0x0D000..=0x0DFFF => Some(64 + (canon - 0x0D000) / 0x40),
            _ => None,
        };
        if let Some(q) = rx_q {
            match canon - rx_block(q) {
                0x10 => {
                    let rq = self.rx[q as usize];
                    if rq.enabled && *value != rq.head {
                        self.lint.warn(canon, *value, rule::HEAD_WRITE, "RDH changed while the queue is enabled; ignored [DS 8.2.3.8.4: write RDH only while the queue is disabled]".into());
                        *value = rq.head;
                    }
                }
                0x14 if self.rx[q as usize].enabled => self.apply_srrctl(q, *value),
                0x18 => self.set_rx_tail(q, *value),
                0x28 => {
                    if *value & RXDCTL_ENABLE != 0 && old & RXDCTL_ENABLE == 0 {
                        self.enable_rx(q);
                    } else if *value & RXDCTL_ENABLE == 0 && old & RXDCTL_ENABLE != 0 {
                        self.rx[q as usize].enabled = false;
                    }
                }
                _ => {}
            }
            return;
        }
        if (0x06000..0x08000).contains(&canon) {
            let q = (canon - 0x06000) / 0x40;
            match canon - tx_block(q) {
                0x10 => {
                    let tq = &self.tx[q as usize];
                    if tq.enabled && *value != tq.head {
                        let head = tq.head;
                        self.lint.warn(canon, *value, rule::HEAD_WRITE, "TDH changed while the queue is enabled; ignored [DS 8.2.3.9.8: write TDH only while the queue is disabled]".into());
                        *value = head;
                    }
                }
                0x18 => self.set_tx_tail(q, *value),
                0x28 => {
                    *value &= !TXDCTL_SWFLSH; // self-clearing
                    if *value & TXDCTL_ENABLE != 0 && old & TXDCTL_ENABLE == 0 {
                        self.enable_tx(q, *value);
                    } else if *value & TXDCTL_ENABLE == 0 && old & TXDCTL_ENABLE != 0 {
                        self.tx[q as usize].enabled = false;
                        self.active_tx.retain(|&a| a != q);
                    }
                }
                0x38 | 0x3C if self.tx[q as usize].enabled => {
                    let (lo, hi) = if canon - tx_block(q) == 0x38 {
                        (*value, self.reg(tdwbah(q)))
                    } else {
                        (self.reg(tdwbal(q)), *value)
                    };
                    self.apply_head_wb(q, lo, hi);
                }
                _ => {}
            }
        }
    }

    fn ring_geometry(&mut self, base_lo: u32, base_hi: u32, len: u32, enable_reg: u32, what: &str) -> (u64, u32) {
        let base = (u64::from(base_hi) << 32) | u64::from(base_lo);
        if base == 0 || len == 0 {
            self.lint.warn(
                enable_reg,
                self.reg(enable_reg),
                rule::QUEUE_BEFORE_RING,
                format!("{what} enabled before its ring base and length were programmed [DS 4.6.7 / 4.6.8: program the ring, then enable the queue]"),
            );
        }
        if base % 128 != 0 {
            // The full base is used anyway: real parts accepted TinyNF's 64-byte-aligned rings.
            self.lint.warn(
                enable_reg,
                base_lo,
                rule::RING_ALIGNMENT,
                format!("{what} ring base {base:#x} is not 128-byte aligned [DS 8.2.3.8.1 / 8.2.3.9.5]"),
            );
        }
        if len % 128 != 0 || len > 0x80000 {
            self.lint.warn(
                enable_reg,
                len,
                rule::RING_LENGTH,
                format!(
                    "{what} ring length {len} is not a multiple of 128 bytes up to 512 KiB [DS 8.2.3.8.3 / 8.2.3.9.7]"
                ),
            );
        }
        (base, len / 16)
    }

    fn enable_rx(&mut self, q: u32) {
        let (base, size) = self.ring_geometry(
            self.reg(rdbal(q)),
            self.reg(rdbah(q)),
            self.reg(rdlen(q)),
            rxdctl(q),
            &format!("RX queue {q}"),
        );
        let head = self.reg(rdh(q));
        let tail = self.reg(rdt(q));
        let rq = &mut self.rx[q as usize];
        *rq = RxQueue {
            enabled: true,
            faulted: false,
            base,
            size,
            head: if head < size { head } else { 0 },
            tail: if tail < size { tail } else { 0 },
            // The base may have changed since the queue was last enabled.
            ring: None,
            ..*rq
        };
        self.apply_srrctl(q, self.reg(srrctl(q)));
        self.rx[q as usize].stat = ((self.reg(rqsmr(q / 4)) >> (8 * (q % 4))) & 0xF) as usize;
        let head = self.rx[q as usize].head;
        self.set_reg(rdh(q), head);
    }

    fn apply_srrctl(&mut self, q: u32, s: u32) {
        let kb = (s & SRRCTL_BSIZEPACKET_MASK) as usize;
        let rq = &mut self.rx[q as usize];
        rq.advanced = (s & SRRCTL_DESCTYPE_MASK) >> SRRCTL_DESCTYPE_SHIFT != 0;
        rq.buf_size = if kb == 0 { 2048 } else { kb * 1024 };
        rq.drop_en = s & SRRCTL_DROP_EN != 0;
    }

    fn enable_tx(&mut self, q: u32, txdctl_value: u32) {
        let (base, size) = self.ring_geometry(
            self.reg(tdbal(q)),
            self.reg(tdbah(q)),
            self.reg(tdlen(q)),
            txdctl(q),
            &format!("TX queue {q}"),
        );
        let head = self.reg(tdh(q));
        let tail = self.reg(tdt(q));
        let stat = ((self.reg(tqsm(q / 4)) >> (8 * (q % 4))) & 0xF) as usize;
        let tq = &mut self.tx[q as usize];
        tq.enabled = true;
        tq.faulted = false;
        tq.base = base;
        tq.size = size;
        tq.head = if head < size { head } else { 0 };
        tq.tail = if tail < size { tail } else { 0 };
        tq.wthresh = (txdctl_value >> TXDCTL_WTHRESH_SHIFT) & 0x7F;
        tq.frame.clear();
        tq.frame_bad = false;
        tq.stat = stat;
        let head = tq.head;
        self.apply_head_wb(q, self.reg(tdwbal(q)), self.reg(tdwbah(q)));
        self.set_reg(tdh(q), head);
        if !self.active_tx.contains(&q) {
            self.active_tx.push(q);
        }
    }

    fn apply_head_wb(&mut self, q: u32, lo: u32, hi: u32) {
        let addr = (u64::from(hi) << 32) | u64::from(lo & !3);
        self.tx[q as usize].head_wb = (lo & TDWBAL_HEAD_WB_EN != 0).then_some(addr);
        if lo & TDWBAL_HEAD_WB_EN != 0 && addr % 16 != 0 {
            // Written anyway, although real parts ignore such addresses (see docs/nicsim.md).
            self.lint.warn(tdwbal(q), lo, rule::HEAD_WB_ALIGNMENT, format!("head write-back address {addr:#x} is not 16-byte aligned; real 82599s do not write it back [DS 7.2.3.5.2, TinyNF observation]"));
        }
    }

    fn set_rx_tail(&mut self, q: u32, value: u32) {
        let rq = &mut self.rx[q as usize];
        if !rq.enabled {
            return; // stored; read when the queue is enabled
        }
        if value >= rq.size {
            let size = rq.size;
            self.lint.warn(
                rdt(q),
                value,
                rule::TAIL_OUTSIDE_RING,
                format!("RDT {value} is outside the ring of {size} descriptors; ignored [DS 7.1.9]"),
            );
            return;
        }
        rq.tail = value;
    }

    fn set_tx_tail(&mut self, q: u32, value: u32) {
        let tq = &mut self.tx[q as usize];
        if !tq.enabled {
            return;
        }
        if value >= tq.size {
            let size = tq.size;
            self.lint.warn(
                tdt(q),
                value,
                rule::TAIL_OUTSIDE_RING,
                format!("TDT {value} is outside the ring of {size} descriptors; ignored [DS 7.2.3.3]"),
            );
            return;
        }
        tq.tail = value;
    }

    // ---------------------------------------------------------------- DMA faults

    fn fault(&mut self, direction: &str, queue: u32, descriptor: u32, address: u64, access: &str) {
        self.fault_count += 1;
        if self.faults.len() < MAX_FAULTS {
            eprintln!(
                "nicsim: DMA fault: port {} {direction} queue {queue} descriptor {descriptor}: {access} at {address:#x} is not memory the driver gave the device; queue stopped",
                self.index
            );
            self.faults.push(DmaFault {
                port: self.index,
                direction: direction.into(),
                queue,
                descriptor,
                address,
                access: access.into(),
            });
        }
        match direction {
            "rx" => self.rx[queue as usize].faulted = true,
            _ => self.tx[queue as usize].faulted = true,
        }
    }

    // ---------------------------------------------------------------- receive

    /// A frame (without FCS) arrives from the wire [DS 7.1].
    #[inline]
    pub fn receive(&mut self, dma: &mut impl DmaSpace, frame: &[u8]) {
        let cfg = self.paths;
        if !cfg.rx_open {
            self.drops.rx_disabled += 1;
            return;
        }
        let wire_len = frame.len() + FCS_LEN;
        let c = &mut self.counters;
        c.tpr += 1;
        c.tor += wire_len as u64;
        if wire_len < MIN_FRAME + FCS_LEN {
            c.ruc += 1;
            return;
        }
        if wire_len > cfg.max_untagged && (wire_len > cfg.max_tagged || frame[12..14] != [0x81, 0x00]) {
            c.roc += 1;
            return;
        }
        // L2 filtering [DS 7.1.1.1].
        let dst = mac_key(frame);
        let group = frame[0] & 1 != 0;
        let accepted = if dst == BROADCAST_KEY {
            cfg.fctrl & (FCTRL_MPE | FCTRL_BAM) != 0
        } else {
            let promiscuous = if group { FCTRL_MPE } else { FCTRL_UPE };
            cfg.fctrl & promiscuous != 0 || self.rar.contains(&dst)
        };
        if !accepted {
            self.drops.filtered += 1;
            return;
        }
        let c = &mut self.counters;
        c.gprc += 1;
        c.gorc += if cfg.strip_crc { frame.len() } else { wire_len } as u64;
        if dst == BROADCAST_KEY {
            c.bprc += 1;
        } else if group {
            c.mprc += 1;
        }
        // Without RSS, VT or filters every accepted frame goes to queue 0 [DS 7.1.2].
        let q = &self.rx[0];
        if !q.enabled || q.faulted {
            self.drops.queue_disabled += 1;
            return;
        }
        if !self.fifo.is_empty() {
            self.fifo_push(frame);
            self.drain_fifo(dma);
            return;
        }
        match self.write_rx(dma, frame, cfg.strip_crc) {
            RxWrite::Written => {}
            RxWrite::Fault => self.drops.dma_fault += 1,
            RxWrite::NoRoom => {
                let q = &self.rx[0];
                if q.drop_en {
                    self.counters.qprdc[q.stat] += 1;
                } else {
                    self.fifo_push(frame);
                }
            }
        }
    }

    /// Packet-buffer capacity from RXPBSIZE(0) (bits 19:10, KB).
    fn fifo_capacity(&self) -> usize {
        ((self.reg(rxpbsize(0)) >> 10) & 0x3FF) as usize * 1024
    }

    /// Frames this port may receive from a cable or loopback in one engine iteration without
    /// overrunning its packet buffer before its XOFF takes effect: all of them without flow
    /// control; with it, as many maximum-size frames as fit above the high water mark. A port
    /// sends its frames one by one, and a PAUSE stops the partner within a frame or two; the
    /// engine hands them over an iteration at a time, so it holds the batch to that room.
    pub fn lossless_room(&self) -> usize {
        if !self.flow.config.transmit {
            return usize::MAX;
        }
        let above = self.fifo_capacity().saturating_sub(self.flow.config.high.max(self.fifo_bytes));
        above / (MAX_TX_FRAME_ON_WIRE)
    }

    /// Bytes of frames waiting in the receive packet buffer (what flow control watches).
    #[inline(always)]
    pub fn packet_buffer_bytes(&self) -> usize {
        self.fifo_bytes
    }

    /// Whether the link partner's PAUSE holds the transmitter at `now_ps`: one it sent on
    /// the wire, or `nicsim traffic pause`; both only with MFLCN.RFCE [DS 8.2.3.22.34].
    #[inline]
    pub fn transmitter_paused(&self, now_ps: u64) -> bool {
        (self.tx_paused && self.flow.config.receive) || self.flow.transmitter_paused(now_ps)
    }

    fn fifo_push(&mut self, frame: &[u8]) {
        if self.fifo_bytes + frame.len() > self.fifo_capacity() {
            self.counters.mpc += 1; // [DS 8.2.3.23.4]
            return;
        }
        let mut b = self.spare.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(frame);
        self.fifo_bytes += b.len();
        self.fifo.push_back(b);
    }

    fn fifo_clear(&mut self) {
        while let Some(b) = self.fifo.pop_front() {
            self.spare.push(b);
        }
        self.fifo_bytes = 0;
    }

    /// Moves frames held in the packet buffer (SRRCTL.DROP_EN = 0) into the ring once the
    /// driver has given descriptors back.
    pub fn drain_fifo(&mut self, dma: &mut impl DmaSpace) {
        if self.fifo.is_empty() {
            return;
        }
        if !self.paths.rx_open || !self.rx[0].enabled || self.rx[0].faulted {
            return;
        }
        let strip = self.paths.strip_crc;
        while let Some(frame) = self.fifo.pop_front() {
            match self.write_rx(dma, &frame, strip) {
                RxWrite::NoRoom => {
                    self.fifo.push_front(frame);
                    return;
                }
                RxWrite::Fault => {
                    // The queue has stopped: the frames still held can go nowhere, and are
                    // dropped without another DMA attempt at the descriptor that faulted.
                    self.drops.dma_fault += 1;
                    self.drops.queue_disabled += self.fifo.len() as u64;
                    self.spare.push(frame);
                    self.fifo_clear();
                    return;
                }
                RxWrite::Written => {}
            }
            self.fifo_bytes -= frame.len();
            self.spare.push(frame);
        }
    }

    /// The ring of queue 0 resolved as one piece of driver memory, resolving it again if the
    /// DMA space changed since.
    #[inline]
    fn rx_ring(&mut self, dma: &mut impl DmaSpace) -> Option<Ring> {
        let q = &self.rx[0];
        match q.ring {
            Some(r) if r.valid_in(dma) => Some(r),
            _ => {
                let r = Ring::resolve(dma, q.base, q.size)?;
                self.rx[0].ring = Some(r);
                Some(r)
            }
        }
    }

    /// Starts a run of receives on the fast path (see [`RxRun`]) if the port is in the state
    /// it covers: receiving, CRC stripped, queue 0 enabled with its ring in one piece of
    /// driver memory, nothing held in the packet buffer. Every frame of the run must then go
    /// through [`Self::rx_run_frame`], and the run end with [`Self::rx_run_end`].
    #[inline]
    pub fn rx_run_begin(&mut self, dma: &mut impl DmaSpace) -> Option<RxRun> {
        let cfg = self.paths;
        let q = &self.rx[0];
        if !(cfg.rx_open && cfg.strip_crc && q.enabled && !q.faulted && q.size > 0 && self.fifo.is_empty()) {
            return None;
        }
        let ring = self.rx_ring(dma)?;
        let q = &self.rx[0];
        Some(RxRun {
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
            buffers: Windows::EMPTY,
            addresses: [0; RX_FETCH],
            fetched: 0,
            used: 0,
            written_back_to: q.head,
            pending_lens: [0; RX_WRITE_BACK_CHUNK as usize],
            written: 0,
            written_bytes: 0,
            no_descriptor: 0,
            no_descriptor_bytes: 0,
        })
    }

    /// One frame from the wire during a run: on the fast path if it takes it, otherwise
    /// through [`Self::receive`], after which a new run starts if the state allows.
    #[inline(always)]
    pub fn rx_run_frame(&mut self, dma: &mut impl DmaSpace, run: &mut Option<RxRun>, frame: &[u8]) {
        if let Some(r) = run.as_mut() {
            if r.push(&*dma, &self.bar, frame) {
                return;
            }
        }
        self.rx_run_slow(dma, run, frame);
    }

    /// [`Self::rx_run_frame`] for a generated frame. The fast path writes the template and
    /// then the sequence fields into the buffer. Patching the template first and copying it
    /// would load bytes just stored, and that load waits until the stores reach the cache,
    /// which happens only after the previous frame's buffer line arrived from the driver's
    /// core.
    #[inline(always)]
    pub fn rx_run_generated(&mut self, dma: &mut impl DmaSpace, run: &mut Option<RxRun>, due: &mut DueFrame) {
        if let Some(r) = run.as_mut() {
            if r.push_generated(&*dma, &self.bar, due) {
                return;
            }
        }
        self.rx_run_slow(dma, run, due.frame());
    }

    /// Delivers what the generator has due at `now_ps` (at most `max`) on the fast path, as
    /// one burst (see [`Generator::deliver_burst`]); returns how many frames it took. The
    /// rest, if any, go frame by frame through [`Self::rx_run_generated`].
    #[inline(always)]
    pub fn rx_run_generated_burst(
        &mut self,
        dma: &impl DmaSpace,
        run: &mut Option<RxRun>,
        generator: &mut Generator,
        wire: &mut WireClock,
        now_ps: u64,
        max: usize,
    ) -> usize {
        let Some(r) = run.as_mut() else { return 0 };
        let bar = &self.bar;
        generator.deliver_burst(now_ps, wire, max, |burst| r.push_burst(dma, bar, burst))
    }

    #[inline(never)]
    fn rx_run_slow(&mut self, dma: &mut impl DmaSpace, run: &mut Option<RxRun>, frame: &[u8]) {
        self.rx_run_end(&*dma, run.take());
        self.receive(dma, frame);
        *run = self.rx_run_begin(dma);
    }

    /// Ends a run: the queue's head and the statistics take what the run did.
    #[inline]
    pub fn rx_run_end(&mut self, dma: &impl DmaSpace, run: Option<RxRun>) {
        let Some(mut r) = run else { return };
        r.write_back(dma);
        let c = &mut self.counters;
        let q = &mut self.rx[0];
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
    }

    /// Writes one frame into the ring of queue 0 [DS 7.1.5, 7.1.6].
    #[inline]
    fn write_rx(&mut self, dma: &mut impl DmaSpace, frame: &[u8], strip: bool) -> RxWrite {
        let q = &self.rx[0];
        if !(strip && frame.len() <= q.buf_size) {
            return self.write_rx_chained(dma, frame, strip);
        }
        // The common case: one buffer, no FCS. The device owns descriptors from head up to (not
        // including) tail [DS 7.1.9], so it owns one if head != tail.
        if q.head == q.tail {
            let Some(tail) = newer_rx_tail(&self.bar, q.size, q.tail) else { return RxWrite::NoRoom };
            self.rx[0].tail = tail;
        }
        let Some(ring) = self.rx_ring(dma) else {
            // Not one piece of driver memory: resolve (and report) descriptor by descriptor.
            return self.write_rx_chained(dma, frame, strip);
        };
        let q = &self.rx[0];
        let (head, advanced, stat) = (q.head, q.advanced, q.stat);
        let next = if head + 1 == q.size { 0 } else { head + 1 };
        let buf = ring.read_qword0(dma, head);
        if !dma::write(dma, buf, frame) {
            self.fault("rx", 0, head, buf, "packet buffer write");
            return RxWrite::Fault;
        }
        // The data must be visible before DD [DS 7.1.6].
        fence(Ordering::Release);
        let n = frame.len() as u64;
        if advanced {
            // Advanced write-back overwrites qword 0 (no RSS, no packet type) [DS 7.1.6.2].
            ring.write(dma, head, 0, RX_DD | RX_EOP | n << 32);
        } else {
            // Legacy write-back leaves qword 0 (the buffer address) untouched [DS 7.1.5].
            ring.write_qword1(dma, head, n | (RX_DD | RX_EOP) << 32);
        }
        self.rx[0].head = next; // RDH itself is published once per engine iteration
        self.counters.qprc[stat] += 1;
        self.counters.qbrc[stat] += n;
        RxWrite::Written
    }

    /// [`Self::write_rx`] for frames that span several buffers or carry the FCS.
    #[cold]
    fn write_rx_chained(&mut self, dma: &mut impl DmaSpace, frame: &[u8], strip: bool) -> RxWrite {
        let q = self.rx[0];
        let total = frame.len() + if strip { 0 } else { FCS_LEN };
        let need = total.div_ceil(q.buf_size) as u32;
        let owned = owned_between(q.head, q.tail, q.size);
        if q.size == 0 || owned < need {
            return RxWrite::NoRoom;
        }
        // The FCS is computed only when the driver keeps it (HLREG0.RXCRCSTRP = 0).
        let fcs = if strip { [0; FCS_LEN] } else { crc32(frame).to_le_bytes() };
        let mut head = q.head;
        let mut done = 0;
        while done < total {
            let desc = descriptor_address(q.base, head);
            let Some(buf) = dma::read_u64(dma, desc) else {
                self.fault("rx", 0, head, desc, "descriptor read");
                return RxWrite::Fault;
            };
            let n = q.buf_size.min(total - done);
            // Bytes [done, done + n) of frame ++ FCS.
            let from_frame = frame.len().saturating_sub(done).min(n);
            let mut ok = dma::write(dma, buf, &frame[done.min(frame.len())..done.min(frame.len()) + from_frame]);
            if ok && from_frame < n {
                let fcs_start = done + from_frame - frame.len();
                ok =
                    dma::write(dma, buf.wrapping_add(from_frame as u64), &fcs[fcs_start..fcs_start + (n - from_frame)]);
            }
            if !ok {
                self.fault("rx", 0, head, buf, "packet buffer write");
                return RxWrite::Fault;
            }
            // The data must be visible before DD [DS 7.1.6].
            fence(Ordering::Release);
            let status = RX_DD | if done + n == total { RX_EOP } else { 0 };
            let ok = if q.advanced {
                // Advanced write-back overwrites qword 0 (no RSS, no packet type) [DS 7.1.6.2].
                dma::write_u64(dma, desc, 0) && {
                    fence(Ordering::Release);
                    dma::write_u64(dma, desc.wrapping_add(8), status | (n as u64) << 32)
                }
            } else {
                // Legacy write-back leaves qword 0 (the buffer address) untouched [DS 7.1.5].
                dma::write_u64(dma, desc.wrapping_add(8), n as u64 | status << 32)
            };
            if !ok {
                self.fault("rx", 0, head, desc, "descriptor write-back");
                return RxWrite::Fault;
            }
            head = if head + 1 == q.size { 0 } else { head + 1 };
            done += n;
        }
        self.rx[0].head = head; // RDH itself is published once per engine iteration
        self.counters.qprc[q.stat] += 1;
        self.counters.qbrc[q.stat] += total as u64;
        RxWrite::Written
    }

    // ---------------------------------------------------------------- transmit

    /// Runs the transmit queues [DS 7.2], appending finished frames to `batch`. Frames
    /// leave no faster than line rate: a frame starts only when the wire is free.
    pub fn transmit(&mut self, dma: &mut impl DmaSpace, now_ps: u64, out: &mut impl TxOutput) {
        let n = self.active_tx.len();
        if n == 0 || !self.paths.tx_open || self.transmitter_paused(now_ps) {
            return;
        }
        for k in 0..n {
            if out.room() == 0 || !self.tx_wire.ready(now_ps) {
                break;
            }
            let q = self.active_tx[(self.tx_rr + k) % n];
            self.transmit_queue(dma, q, now_ps, out);
        }
        self.tx_rr = (self.tx_rr + 1) % n;
    }

    fn transmit_queue(&mut self, dma: &mut impl DmaSpace, qi: u32, now_ps: u64, out: &mut impl TxOutput) {
        let mut q = std::mem::take(&mut self.tx[qi as usize]);
        if !q.enabled || q.faulted || q.size == 0 {
            self.tx[qi as usize] = q;
            return;
        }
        let start_head = q.head;
        let ring = Ring::resolve(dma, q.base, q.size);
        let mut write_head_back = false;
        let mut processed = 0;
        while q.head != q.tail && processed < TX_DESCRIPTORS_PER_CALL && out.room() > 0 {
            if q.frame.is_empty() && !self.tx_wire.ready(now_ps) {
                break;
            }
            if let (Some(r), true) = (ring, q.frame.is_empty()) {
                processed += self.transmit_simple(&*dma, &mut q, r, now_ps, out, &mut write_head_back, processed);
                if q.head == q.tail || processed >= TX_DESCRIPTORS_PER_CALL || out.room() == 0 {
                    break;
                }
                if !self.tx_wire.ready(now_ps) {
                    break;
                }
            }
            // A descriptor the fast path does not take.
            if !self.transmit_descriptor(dma, qi, &mut q, ring, now_ps, out, &mut write_head_back) {
                break;
            }
            processed += 1;
        }
        if q.head != start_head {
            self.set_reg(tdh(qi), q.head);
        }
        if write_head_back {
            let addr = q.head_wb.unwrap_or(0);
            fence(Ordering::Release);
            if !dma::write_u32(dma, addr, q.head) {
                self.fault("tx", qi, q.head, addr, "head write-back");
                q.faulted = true;
            }
        }
        self.tx[qi as usize] = q;
    }

    /// The fast path of [`Self::transmit_queue`]: consecutive descriptors that each carry one
    /// whole frame (legacy or advanced data, EOP set, non-empty) in known driver memory, with
    /// no frame gathered before them. Stops at the first other descriptor, leaving it to
    /// [`Self::transmit_descriptor`]; returns how many it processed. Frames are handled
    /// exactly as there; statistics are added once at the end.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn transmit_simple<D: DmaSpace>(
        &mut self,
        dma: &D,
        q: &mut TxQueue,
        ring: Ring,
        now_ps: u64,
        out: &mut impl TxOutput,
        write_head_back: &mut bool,
        processed: usize,
    ) -> usize {
        let cfg = self.paths;
        let (mut head, tail, size) = (q.head, q.tail, q.size);
        let head_wb = q.head_wb.is_some();
        let always_write_back = q.wthresh > 0;
        let limit = (TX_DESCRIPTORS_PER_CALL - processed).min(out.room());
        let mut buffers = Windows::EMPTY;
        let (mut packets, mut bytes, mut broadcast, mut multicast) = (0u64, 0u64, 0u64, 0u64);
        // What HLREG0 makes of a frame, fixed for the call: without IFCS (or with
        // HLREG0.TXCRCEN clear) the driver supplied the FCS as the last 4 bytes
        // [DS 7.2.3.2.2, IFCS]; TXPADEN pads to 64 bytes with FCS [DS 8.2.3.22.8].
        let fcs_with_ifcs = if cfg.tx_crc { 0 } else { FCS_LEN };
        let pad_to = if cfg.tx_pad { MIN_FRAME } else { 0 };
        // The command bytes of the frames sent, for RS in head write-back mode.
        let mut commands = 0u8;
        let mut wire = self.tx_wire.run(now_ps);
        // The descriptors this call may process, fetched in one burst.
        let owned = owned_between(head, tail, size) as usize;
        let count = owned.min(limit);
        let mut all_fetched = std::mem::take(&mut self.tx_fetched);
        let fetched = &mut all_fetched[..count * 16];
        ring.read_run(dma, head, fetched);
        let fetched = &*fetched;
        let mut n = 0;
        for (k, descriptor) in fetched.chunks_exact(16).enumerate() {
            if !wire.ready() {
                break;
            }
            // The buffer a few frames on comes from the driver's core: start its transfer now,
            // so that it overlaps this frame's work.
            if let Some(ahead) = fetched.get((k + PREFETCH_AHEAD) * 16..).and_then(|d| d.first_chunk::<8>()) {
                if let Some((region, o)) = buffers.find(dma, u64::from_le_bytes(*ahead), 1) {
                    dma.region(region).prefetch_read(o);
                }
            }
            let (addr, qword1) = descriptor.split_at(8);
            let addr = u64::from_le_bytes(addr.try_into().unwrap_or_default());
            let qword1 = u64::from_le_bytes(qword1.try_into().unwrap_or_default());
            let cmd = (qword1 >> 24) as u8;
            let len = (qword1 & 0xFFFF) as usize;
            // Legacy [DS 7.2.3.2.2] or advanced data (DTYP 0011) [DS 7.2.3.2.4].
            let data = cmd & TX_DEXT == 0 || (qword1 >> 20) & 0xF == 0b0011;
            let fcs = if cmd & TX_IFCS != 0 { fcs_with_ifcs } else { FCS_LEN };
            if !data || cmd & TX_EOP == 0 || len <= fcs || len > MAX_TX_FRAME {
                break;
            }
            let keep = len - fcs;
            let Some((region, offset)) = buffers.find(dma, addr, len) else { break };
            let padded = keep.max(pad_to);
            let end = wire.send(padded);
            let dst = out.take_from(dma.region(region), offset, keep, padded, end);
            packets += 1;
            bytes += padded as u64;
            let (b, m) = group_kind(dst);
            broadcast += b;
            multicast += m;
            commands |= cmd;
            // Head write-back mode: no descriptor write-back at all [DS 7.2.3.5.2].
            if !head_wb && (cmd & TX_RS != 0 || always_write_back) {
                // DD in the status byte, the rest of the upper dword kept [DS 7.2.3.2.2].
                ring.write_dword3(dma, head, (qword1 >> 32) as u32 | 1);
            }
            head = if head + 1 == size { 0 } else { head + 1 };
            n += 1;
        }
        self.tx_fetched = all_fetched;
        self.tx_wire.end_run(wire);
        *write_head_back |= head_wb && commands & TX_RS != 0;
        q.head = head;
        self.count_transmitted(q.stat, packets, bytes, broadcast, multicast);
        n
    }

    /// Transmit statistics for `packets` frames of `bytes` bytes in all (without FCS).
    #[inline(always)]
    fn count_transmitted(&mut self, stat: usize, packets: u64, bytes: u64, broadcast: u64, multicast: u64) {
        let c = &mut self.counters;
        c.gptc += packets;
        c.tpt += packets;
        c.gotc += bytes + packets * FCS_LEN as u64;
        c.qptc[stat] += packets;
        c.qbtc[stat] += bytes;
        c.bptc += broadcast;
        c.mptc += multicast;
    }

    /// Processes the descriptor at the queue's head in every case the datasheet allows
    /// (context and null descriptors, frames over several descriptors, unknown memory);
    /// `false` if it faulted and the queue stopped.
    #[allow(clippy::too_many_arguments)]
    fn transmit_descriptor(
        &mut self,
        dma: &mut impl DmaSpace,
        qi: u32,
        q: &mut TxQueue,
        ring: Option<Ring>,
        now_ps: u64,
        out: &mut impl TxOutput,
        write_head_back: &mut bool,
    ) -> bool {
        let desc = descriptor_address(q.base, q.head);
        let (addr, qword1) = match ring {
            Some(r) => r.read(dma, q.head),
            None => match dma::read_descriptor(dma, desc) {
                Some(d) => d,
                None => {
                    self.fault("tx", qi, q.head, desc, "descriptor read");
                    q.faulted = true;
                    return false;
                }
            },
        };
        let cmd = (qword1 >> 24) as u8;
        let len = (qword1 & 0xFFFF) as usize;
        let carries_data = if cmd & TX_DEXT != 0 {
            match (qword1 >> 20) & 0xF {
                0b0011 => true,  // advanced data [DS 7.2.3.2.4]
                0b0010 => false, // context: consumed, nothing sent [DS 7.2.3.2.3]
                dtyp => {
                    self.lint.warn(
                        tdt(qi),
                        q.head,
                        rule::TX_DESCRIPTOR,
                        format!(
                            "descriptor {} has DEXT = 1 and invalid DTYP {dtyp:#06b}; consumed without sending",
                            q.head
                        ),
                    );
                    false
                }
            }
        } else {
            true // legacy [DS 7.2.3.2.2]; length 0 = null descriptor
        };
        if carries_data && len > 0 {
            if q.frame.len() + len > MAX_TX_FRAME {
                if !q.frame_bad {
                    self.lint.warn(
                        tdt(qi),
                        q.head,
                        rule::TX_FRAME_SIZE,
                        format!("frame grows beyond {MAX_TX_FRAME} bytes at descriptor {}; dropped", q.head),
                    );
                }
                q.frame_bad = true;
            } else if !dma::read_append(dma, addr, len, &mut q.frame) {
                self.fault("tx", qi, q.head, addr, "packet buffer read");
                q.faulted = true;
                q.frame.clear();
                return false;
            }
        }
        if carries_data && cmd & TX_EOP != 0 {
            if q.frame_bad {
                q.frame.clear();
                q.frame_bad = false;
            } else if !q.frame.is_empty() {
                self.emit(q, cmd & TX_IFCS != 0, now_ps, out);
            }
        }
        if q.head_wb.is_some() {
            // Head write-back mode: no descriptor write-back at all [DS 7.2.3.5.2].
            *write_head_back |= cmd & TX_RS != 0;
        } else if cmd & TX_RS != 0 || q.wthresh > 0 {
            // DD in the status byte, the rest of the upper dword kept [DS 7.2.3.2.2].
            let status = (qword1 >> 32) as u32 | 1;
            match ring {
                Some(r) => r.write_dword3(dma, q.head, status),
                None if dma::write_u32(dma, desc.wrapping_add(12), status) => {}
                None => {
                    self.fault("tx", qi, q.head, desc, "descriptor write-back");
                    q.faulted = true;
                    return false;
                }
            }
        }
        q.head = if q.head + 1 == q.size { 0 } else { q.head + 1 };
        true
    }

    /// Sends the frame gathered in `q.frame`.
    fn emit(&mut self, q: &mut TxQueue, ifcs: bool, now_ps: u64, out: &mut impl TxOutput) {
        let cfg = self.paths;
        if !(ifcs && cfg.tx_crc) {
            // The driver supplied the FCS as the last 4 bytes [DS 7.2.3.2.2, IFCS].
            let l = q.frame.len().saturating_sub(FCS_LEN);
            q.frame.truncate(l);
        }
        if q.frame.len() < MIN_FRAME && cfg.tx_pad {
            q.frame.resize(MIN_FRAME, 0); // pad to 64 bytes with FCS [DS 8.2.3.22.8]
        }
        if q.frame.is_empty() {
            return;
        }
        let (broadcast, multicast) = group_kind(q.frame.first_chunk::<6>().copied());
        self.count_transmitted(q.stat, 1, q.frame.len() as u64, broadcast, multicast);
        let end = self.tx_wire.send(now_ps, q.frame.len());
        out.take(&q.frame, end);
        q.frame.clear();
    }

    // ---------------------------------------------------------------- statistics

    /// Writes the statistics registers. Counters are totals since reset, truncated to the
    /// register width (32 bits; 36 bits for octet L/H pairs): a plain memory read cannot clear
    /// them (see docs/nicsim.md).
    pub fn publish_counters(&mut self) {
        let c = self.counters.clone();
        let put = |p: &mut Self, off: u32, v: u64| {
            if p.reg(off) != v as u32 {
                p.set_reg(off, v as u32);
            }
        };
        for (off, v) in [
            (GPRC, c.gprc),
            (BPRC, c.bprc),
            (MPRC, c.mprc),
            (GPTC, c.gptc),
            (BPTC, c.bptc),
            (MPTC, c.mptc),
            (TPR, c.tpr),
            (TPT, c.tpt),
            (RUC, c.ruc),
            (ROC, c.roc),
            (mpc(0), c.mpc),
            (LXONTXC, self.flow.stats.xon_sent),
            (LXOFFTXC, self.flow.stats.xoff_sent),
            (LXONRXCNT, self.flow.stats.xon_received),
            (LXOFFRXCNT, self.flow.stats.xoff_received),
        ] {
            put(self, off, v);
        }
        for (lo, hi, v) in [(GORCL, GORCH, c.gorc), (GOTCL, GOTCH, c.gotc), (TORL, TORH, c.tor)] {
            put(self, lo, v);
            put(self, hi, (v >> 32) & 0xF);
        }
        for n in 0..16u32 {
            let i = n as usize;
            put(self, qprc(n), c.qprc[i]);
            put(self, qprdc(n), c.qprdc[i]);
            put(self, qptc(n), c.qptc[i]);
            put(self, qbrc_l(n), c.qbrc[i]);
            put(self, qbrc_h(n), (c.qbrc[i] >> 32) & 0xF);
            put(self, qbtc_l(n), c.qbtc[i]);
            put(self, qbtc_h(n), (c.qbtc[i] >> 32) & 0xF);
        }
    }

    /// Zeroes the statistics (control socket `reset_counters`).
    pub fn reset_counters(&mut self) {
        self.counters = DeviceCounters::default();
        self.drops = Drops::default();
        self.flow.stats = Default::default();
        self.publish_counters();
    }

    /// The frames this port holds at this moment (see [`InFlight`]). Reads descriptor rings,
    /// so it is for snapshots (statistics), not for the per-frame paths.
    pub fn in_flight(&self, dma: &impl DmaSpace) -> InFlight {
        let peek = |base: u64, i: u32| {
            let l = dma.locate(descriptor_address(base, i)).filter(|l| l.avail >= 16)?;
            Some(dma.region(l.region).read_u64(l.offset + 8))
        };
        let rx = &self.rx[0];
        let mut rx_ring = 0;
        if rx.enabled && rx.size > 0 {
            // The driver owns the descriptors from tail up to head; those it has not taken
            // yet still carry DD and EOP as the device wrote them back [DS 7.1.5, 7.1.6].
            let (dd, eop) = if rx.advanced { (RX_DD, RX_EOP) } else { (RX_DD << 32, RX_EOP << 32) };
            let driver_owned = rx.size - owned_between(rx.head, rx.tail, rx.size);
            for k in 0..driver_owned {
                let i = (rx.tail + k) % rx.size;
                if peek(rx.base, i).is_some_and(|q1| q1 & (dd | eop) == dd | eop) {
                    rx_ring += 1;
                }
            }
        }
        let mut tx_ring = 0;
        for &q in &self.active_tx {
            let t = &self.tx[q as usize];
            if !t.enabled || t.size == 0 {
                continue;
            }
            for k in 0..owned_between(t.head, t.tail, t.size) {
                let Some(q1) = peek(t.base, (t.head + k) % t.size) else { continue };
                let cmd = (q1 >> 24) as u8;
                let data = cmd & TX_DEXT == 0 || (q1 >> 20) & 0xF == 0b0011;
                if data && cmd & TX_EOP != 0 && q1 & 0xFFFF != 0 {
                    tx_ring += 1;
                }
            }
        }
        InFlight { packet_buffer: self.fifo.len() as u64, rx_ring, tx_ring }
    }

    /// Queue state for diagnostics: `(enabled, faulted, head, tail, size)`.
    pub fn rx_queue_state(&self, q: usize) -> (bool, bool, u32, u32, u32) {
        let r = &self.rx[q];
        (r.enabled, r.faulted, r.head, r.tail, r.size)
    }

    /// Transmit queue state: `(enabled, faulted, head, tail, size)`.
    pub fn tx_queue_state(&self, q: usize) -> (bool, bool, u32, u32, u32) {
        let t = &self.tx[q];
        (t.enabled, t.faulted, t.head, t.tail, t.size)
    }

    /// Enabled TX queues.
    pub fn active_tx_queues(&self) -> &[u32] {
        &self.active_tx
    }
}
