//! Receive [DS 7.1]: L2 filtering, the queue a frame goes to, the packet buffer that holds
//! frames while no descriptor is free, and writing frames into a ring (one buffer, or chained
//! over several). The fast path for runs of frames is in `rx_run.rs`.

use super::{
    descriptor_address, mac_key, owned_between, Classified, Port, BROADCAST_KEY, DEFAULT_RX_QUEUE, RX_DD, RX_EOP,
};
use crate::dma::{self, DmaSpace, Ring};
use crate::port::faults::Access;
use crate::regs::*;
use crate::wire::{crc32, FCS_LEN, MIN_FRAME};
use platform::MappedRegion;
use std::sync::atomic::{fence, Ordering};

/// Largest untagged frame on the wire with its FCS, plus a VLAN tag: what one frame can add
/// to a packet buffer.
const MAX_FRAME_ON_WIRE: usize = 1522;

/// What became of a frame the device tried to write into a ring.
pub(super) enum RxWrite {
    Written,
    NoRoom,
    Fault,
}

/// RDT(`queue`) as the driver last wrote it in `bar` (its side of BAR0), if it differs from
/// `tail` and lies inside a ring of `size`. Receive paths that find no descriptor look once
/// more: the device sees tail writes as they happen [DS 7.1.9], the engine polls them once per
/// iteration, and a driver that returns descriptors promptly should not lose frames to that
/// period. A value outside the ring is left to the engine's poll, which ignores it and
/// reports it (lint).
#[inline(always)]
pub(super) fn newer_rx_tail(bar: &MappedRegion, queue: u32, size: u32, tail: u32) -> Option<u32> {
    let now = bar.read_u32(rdt(queue) as usize);
    // The driver writes descriptors before the tail: descriptors read after this load must
    // see them (free on x86, which keeps loads in order).
    fence(Ordering::Acquire);
    (now < size && now != tail).then_some(now)
}

impl Port {
    /// The receive queue an accepted frame goes to, and the RSS fields of its advanced
    /// write-back. Without RSS, VT or filters every frame goes to queue 0 [DS 7.1.2]; with
    /// RSS (MRQC.MRQE = 0001b) the hash of its header chooses [DS 7.1.2.8].
    #[inline(always)]
    pub(super) fn rx_queue_for(&self, frame: &[u8]) -> Classified {
        if self.rss.enabled() {
            return self.rss.classify(frame);
        }
        Classified { queue: DEFAULT_RX_QUEUE, info: 0 }
    }

    /// A frame (without FCS) arrives from the wire [DS 7.1].
    #[inline]
    pub fn receive(&mut self, dma: &mut impl DmaSpace, frame: &[u8]) {
        if self.virtio.is_some() {
            return self.virtio_receive(dma, frame);
        }
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
        let Classified { queue: qi, info } = self.rx_queue_for(frame);
        let q = &self.rx[qi as usize];
        if !q.enabled || q.faulted {
            self.drops.queue_disabled += 1;
            return;
        }
        if !self.fifo.is_empty() || self.stalled {
            // A stalled DMA engine leaves frames in the packet buffer too.
            self.fifo_push(frame);
            self.drain_fifo(dma);
            return;
        }
        match self.write_rx(dma, qi, frame, cfg.strip_crc, info) {
            RxWrite::Written => {}
            RxWrite::Fault => self.drops.dma_fault += 1,
            RxWrite::NoRoom => {
                let q = &mut self.rx[qi as usize];
                if q.drop_en {
                    q.dropped += 1;
                    self.counters.qprdc[q.stat] += 1;
                } else {
                    self.fifo_push(frame);
                }
            }
        }
    }

    /// Packet-buffer capacity from RXPBSIZE(0) (bits 19:10, KB) [DS 8.2.3.8.9]: without DCB
    /// every frame uses packet buffer 0.
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
        above / MAX_FRAME_ON_WIRE
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

    pub(super) fn fifo_push(&mut self, frame: &[u8]) {
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

    pub(super) fn fifo_clear(&mut self) {
        while let Some(b) = self.fifo.pop_front() {
            self.spare.push(b);
        }
        self.fifo_bytes = 0;
    }

    /// Moves frames held in the packet buffer (SRRCTL.DROP_EN = 0) into their rings once the
    /// driver has given descriptors back. The buffer is one FIFO: the frame at its head waits
    /// for its queue, and every frame behind it waits too.
    pub fn drain_fifo(&mut self, dma: &mut impl DmaSpace) {
        if self.virtio.is_some() {
            return self.virtio_drain(dma);
        }
        if self.fifo.is_empty() || !self.paths.rx_open || self.stalled {
            return;
        }
        let strip = self.paths.strip_crc;
        while let Some(frame) = self.fifo.pop_front() {
            let Classified { queue: qi, info } = self.rx_queue_for(&frame);
            let q = &self.rx[qi as usize];
            if !q.enabled || q.faulted {
                self.fifo.push_front(frame);
                return;
            }
            match self.write_rx(dma, qi, &frame, strip, info) {
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

    /// The ring of receive queue `qi` resolved as one piece of driver memory, resolving it
    /// again if the DMA space changed since.
    #[inline]
    pub(super) fn rx_ring(&mut self, dma: &mut impl DmaSpace, qi: u32) -> Option<Ring> {
        let q = &mut self.rx[qi as usize];
        Ring::kept_or_resolve(&mut q.ring, dma, q.base, q.size)
    }

    /// Writes one frame into the ring of queue `qi` [DS 7.1.5, 7.1.6]; `info` is the first
    /// qword of an advanced write-back (RSS type, packet type, RSS hash).
    #[inline]
    fn write_rx(&mut self, dma: &mut impl DmaSpace, qi: u32, frame: &[u8], strip: bool, info: u64) -> RxWrite {
        let q = &self.rx[qi as usize];
        if !(strip && frame.len() <= q.buf_size) {
            return self.write_rx_chained(dma, qi, frame, strip, info);
        }
        // The common case: one buffer, no FCS. The device owns descriptors from head up to (not
        // including) tail [DS 7.1.9], so it owns one if head != tail.
        if q.head == q.tail {
            let Some(tail) = newer_rx_tail(&self.bar, qi, q.size, q.tail) else { return RxWrite::NoRoom };
            self.rx[qi as usize].tail = tail;
        }
        let Some(ring) = self.rx_ring(dma, qi) else {
            // Not one piece of driver memory: resolve (and report) descriptor by descriptor.
            return self.write_rx_chained(dma, qi, frame, strip, info);
        };
        let q = &self.rx[qi as usize];
        let (head, advanced, stat) = (q.head, q.advanced, q.stat);
        let next = if head + 1 == q.size { 0 } else { head + 1 };
        let buf = ring.in_space(dma).read_qword0(head);
        if !dma::write(dma, buf, frame) {
            self.fault(&*dma, Direction::Rx, qi, head, buf, Access::PacketBufferWrite);
            return RxWrite::Fault;
        }
        // The data must be visible before DD [DS 7.1.6].
        fence(Ordering::Release);
        let n = frame.len() as u64;
        if advanced {
            // Advanced write-back overwrites qword 0 with the RSS fields [DS 7.1.6.2].
            ring.in_space(dma).write(head, info, RX_DD | RX_EOP | n << 32);
        } else {
            // Legacy write-back leaves qword 0 (the buffer address) untouched [DS 7.1.5].
            ring.in_space(dma).write_qword1(head, n | (RX_DD | RX_EOP) << 32);
        }
        self.rx[qi as usize].head = next; // RDH itself is published once per engine iteration
        self.counters.qprc[stat] += 1;
        self.counters.qbrc[stat] += n;
        RxWrite::Written
    }

    /// [`Self::write_rx`] for frames that span several buffers or carry the FCS.
    #[cold]
    fn write_rx_chained(&mut self, dma: &mut impl DmaSpace, qi: u32, frame: &[u8], strip: bool, info: u64) -> RxWrite {
        let q = self.rx[qi as usize];
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
                self.fault(&*dma, Direction::Rx, qi, head, desc, Access::DescriptorRead);
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
                self.fault(&*dma, Direction::Rx, qi, head, buf, Access::PacketBufferWrite);
                return RxWrite::Fault;
            }
            // The data must be visible before DD [DS 7.1.6].
            fence(Ordering::Release);
            let status = RX_DD | if done + n == total { RX_EOP } else { 0 };
            let ok = if q.advanced {
                // Advanced write-back overwrites qword 0 with the RSS fields [DS 7.1.6.2].
                dma::write_u64(dma, desc, info) && {
                    fence(Ordering::Release);
                    dma::write_u64(dma, desc.wrapping_add(8), status | (n as u64) << 32)
                }
            } else {
                // Legacy write-back leaves qword 0 (the buffer address) untouched [DS 7.1.5].
                dma::write_u64(dma, desc.wrapping_add(8), n as u64 | status << 32)
            };
            if !ok {
                self.fault(&*dma, Direction::Rx, qi, head, desc, Access::DescriptorWriteBack);
                return RxWrite::Fault;
            }
            head = if head + 1 == q.size { 0 } else { head + 1 };
            done += n;
        }
        self.rx[qi as usize].head = head; // RDH itself is published once per engine iteration
        self.counters.qprc[q.stat] += 1;
        self.counters.qbrc[q.stat] += total as u64;
        RxWrite::Written
    }
}
