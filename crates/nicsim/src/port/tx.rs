//! Transmit [DS 7.2]: descriptors from the rings of enabled queues, frames out at line rate,
//! descriptor or head write-back. A fast path takes runs of one-descriptor frames in known
//! memory; every other descriptor goes through the general path.

use super::tx_output::TxOutput;
use super::{descriptor_address, owned_between, Port, TxQueue, TX_DEXT, TX_EOP, TX_IFCS, TX_RS};
use crate::dma::{self, DmaSpace, Ring};
use crate::lint::Rule;
use crate::port::faults::Access;
use crate::regs::*;
use crate::wire::{FCS_LEN, MIN_FRAME};
use std::sync::atomic::{fence, Ordering};

const PREFETCH_AHEAD: usize = 8;
/// Descriptors one transmit queue processes per engine iteration at most.
pub(super) const TX_DESCRIPTORS_PER_CALL: usize = 128;
/// Largest frame a TX queue gathers before declaring it malformed.
const MAX_TX_FRAME: usize = 16 * 1024;

/// `(1, 0)` for a broadcast destination, `(0, 1)` for another group address, `(0, 0)` for a
/// unicast one or a frame too short to have one: what BPTC and MPTC add [DS 8.2.3.23].
#[inline(always)]
pub(super) fn group_kind(dst: Option<[u8; 6]>) -> (u64, u64) {
    match dst {
        Some(d) if d == [0xFF; 6] => (1, 0),
        Some(d) if d[0] & 1 != 0 => (0, 1),
        _ => (0, 0),
    }
}

impl Port {
    /// Runs the transmit queues [DS 7.2], handing finished frames to `out`. Frames
    /// leave no faster than line rate: a frame starts only when the wire is free, and is
    /// taken at most a packet buffer's worth of wire time before that.
    pub fn transmit(&mut self, dma: &mut impl DmaSpace, now_ps: u64, out: &mut impl TxOutput) {
        if self.virtio.is_some() {
            return self.virtio_transmit(dma, now_ps, out);
        }
        let n = self.active_tx.len();
        if n == 0 || !self.paths.tx_open || !self.link.up || self.stalled || self.transmitter_paused(now_ps) {
            return;
        }
        // A descriptor completes once its frame is in the transmit packet buffer, which the
        // wire drains at line rate [DS 7.2.3.5.2, 8.2.3.9.13 TXPBSIZE(0)].
        self.tx_wire.set_ahead(if out.takes_ahead_of_wire() { self.paths.tx_packet_buffer } else { 0 });
        for k in 0..n {
            if out.room() == 0 || !self.tx_wire.ready(now_ps) {
                break;
            }
            let q = self.active_tx[(self.tx_rr + k) % n];
            self.transmit_queue(dma, q, now_ps, out);
        }
        self.tx_rr = (self.tx_rr + 1) % n;
    }

    /// Processes queue `qi` from its head towards its tail, as far as the wire, the output and
    /// [`TX_DESCRIPTORS_PER_CALL`] allow, then publishes TDH and writes the head back.
    fn transmit_queue(&mut self, dma: &mut impl DmaSpace, qi: u32, now_ps: u64, out: &mut impl TxOutput) {
        let mut q = std::mem::take(&mut self.tx[qi as usize]);
        // Nothing to do, or stopped: the ring is not looked at (an unknown base would cost a
        // scan for driver memory on every pass).
        if !q.enabled || q.faulted || q.size == 0 || q.head == q.tail {
            self.tx[qi as usize] = q;
            return;
        }
        let start_head = q.head;
        let ring = Ring::kept_or_resolve(&mut q.ring, dma, q.base, q.size);
        q.ring_seen |= ring.is_some();
        // In head write-back mode, the head after the last RS descriptor processed: what the
        // card writes back on completing that descriptor [DS 7.2.3.5.2].
        let mut write_head_back = None;
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
        if let Some(value) = write_head_back {
            let addr = q.head_wb.unwrap_or(0);
            fence(Ordering::Release);
            if !dma::write_u32(dma, addr, value) {
                self.fault(&*dma, Direction::Tx, qi, value, addr, Access::HeadWriteBack);
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
        write_head_back: &mut Option<u32>,
        processed: usize,
    ) -> usize {
        let cfg = self.paths;
        let (mut head, tail, size) = (q.head, q.tail, q.size);
        let head_wb = q.head_wb.is_some();
        let always_write_back = q.wthresh > 0;
        let limit = (TX_DESCRIPTORS_PER_CALL - processed).min(out.room());
        let mut buffers = self.tx_windows.get(dma);
        let (mut bytes, mut broadcast, mut multicast) = (0u64, 0u64, 0u64);
        // What HLREG0 makes of a frame, fixed for the call: without IFCS (or with
        // HLREG0.TXCRCEN clear) the driver supplied the FCS as the last 4 bytes
        // [DS 7.2.3.2.2, IFCS]; TXPADEN pads to 64 bytes with FCS [DS 8.2.3.22.8].
        let fcs_with_ifcs = if cfg.tx_crc { 0 } else { FCS_LEN };
        let pad_to = if cfg.tx_pad { MIN_FRAME } else { 0 };
        let mut wire = self.tx_wire.run(now_ps);
        // The descriptors this call may process, fetched in one burst.
        let owned = owned_between(head, tail, size) as usize;
        let count = owned.min(limit);
        let mut all_fetched = std::mem::take(&mut self.tx_fetched);
        let fetched = &mut all_fetched[..count * 16];
        let ring_in = ring.in_space(dma);
        ring_in.read_run(head, fetched);
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
            bytes += padded as u64;
            // Group addresses are rare: the common frame tests one bit.
            if dst.is_some_and(|d| d[0] & 1 != 0) {
                let (b, m) = group_kind(dst);
                broadcast += b;
                multicast += m;
            }
            let done = head;
            head = if head + 1 == size { 0 } else { head + 1 };
            // Head write-back mode: no descriptor write-back at all [DS 7.2.3.5.2].
            if head_wb {
                if cmd & TX_RS != 0 {
                    *write_head_back = Some(head);
                }
            } else if cmd & TX_RS != 0 || always_write_back {
                // DD in the status byte, the rest of the upper dword kept [DS 7.2.3.2.2].
                ring_in.write_dword3(done, (qword1 >> 32) as u32 | 1);
            }
            n += 1;
        }
        self.tx_fetched = all_fetched;
        self.tx_windows.keep(buffers, dma);
        self.tx_wire.end_run(wire);
        q.head = head;
        out.took(n as u64, bytes);
        self.count_transmitted(q.stat, n as u64, bytes, broadcast, multicast);
        n
    }

    /// Transmit statistics for `packets` frames of `bytes` bytes in all (without FCS).
    #[inline(always)]
    pub(super) fn count_transmitted(&mut self, stat: usize, packets: u64, bytes: u64, broadcast: u64, multicast: u64) {
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
        write_head_back: &mut Option<u32>,
    ) -> bool {
        let desc = descriptor_address(q.base, q.head);
        let (addr, qword1) = match ring {
            Some(r) => r.in_space(dma).read(q.head),
            None => match dma::read_descriptor(dma, desc) {
                Some(d) => d,
                None => {
                    self.fault(&*dma, Direction::Tx, qi, q.head, desc, Access::DescriptorRead);
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
                        Rule::InvalidTxDescriptor,
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
                        Rule::TxFrameSize,
                        format!("frame grows beyond {MAX_TX_FRAME} bytes at descriptor {}; dropped", q.head),
                    );
                }
                q.frame_bad = true;
            } else if !dma::read_append(dma, addr, len, &mut q.frame) {
                self.fault(&*dma, Direction::Tx, qi, q.head, addr, Access::PacketBufferRead);
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
        let next = if q.head + 1 == q.size { 0 } else { q.head + 1 };
        if q.head_wb.is_some() {
            // Head write-back mode: no descriptor write-back at all [DS 7.2.3.5.2].
            if cmd & TX_RS != 0 {
                *write_head_back = Some(next);
            }
        } else if cmd & TX_RS != 0 || q.wthresh > 0 {
            // DD in the status byte, the rest of the upper dword kept [DS 7.2.3.2.2].
            let status = (qword1 >> 32) as u32 | 1;
            match ring {
                Some(r) => r.in_space(dma).write_dword3(q.head, status),
                None if dma::write_u32(dma, desc.wrapping_add(12), status) => {}
                None => {
                    self.fault(&*dma, Direction::Tx, qi, q.head, desc, Access::DescriptorWriteBack);
                    q.faulted = true;
                    return false;
                }
            }
        }
        q.head = next;
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
}
