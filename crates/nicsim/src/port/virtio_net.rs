//! A port that is a virtio-net function instead of an 82599 one [virtio 1.2 §5.1]: its
//! registers are [`crate::virtio::Registers`], its rings are split virtqueues, and the wire
//! side (generator, sink, cable, flow control, counters) is the port's as for the 82599. The
//! engine calls the same `Port` methods; each begins by handing a virtio port to this file.
//!
//! A frame that finds no receive buffer waits in the port's packet buffer, and the port's
//! flow control holds the link partner while it fills, as a virtio device holds its backend
//! (QEMU stops reading a TAP while the guest gives no buffers): nothing is lost to a driver
//! that is slow to refill.

use super::Port;
use crate::dma::DmaSpace;
use crate::flow_control::FlowConfig;
use crate::lint::Rule;
use crate::port::faults::{Access, DmaFault};
use crate::port::tx_output::TxOutput;
use crate::regs::Direction;
use crate::virtio::control::{self, ChainReader, Outcome, ReceiveFilter};
use crate::virtio::queue::{gather, scatter, DeviceQueue, QueueError, Segment};
use crate::virtio::{feature, status, Registers, Shared, CTRL, ISR_CONFIG, ISR_QUEUE, QUEUES, RX, TX};
use crate::wire::{FCS_LEN, MIN_FRAME};
use std::sync::Arc;

/// The net header without `VIRTIO_NET_F_MRG_RXBUF` or `VERSION_1`, and with `VERSION_1`
/// (`num_buffers` added) [virtio 1.2 §5.1.6].
const HEADER_LEGACY: usize = 10;
const HEADER_V1: usize = 12;
const HDR_F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
/// Largest frame a transmit chain may carry (no GSO is offered): 1514 bytes and a VLAN tag.
const MAX_TX_FRAME: usize = 1518;
/// Chains one queue hands over per engine iteration at most, as the 82599's transmit path.
const TX_CHAINS_PER_CALL: usize = 128;
/// The packet buffer a virtio port holds frames in: its size, and the marks at which it holds
/// and releases the link partner.
const PACKET_BUFFER: usize = 512 * 1024;

/// How a virtio port holds its link partner: at half its packet buffer, until a quarter.
const VIRTIO_FLOW: FlowConfig = FlowConfig {
    transmit: true,
    high: PACKET_BUFFER / 2,
    low: PACKET_BUFFER / 4,
    xon: true,
    pause_quanta: u16::MAX,
    refresh_quanta: u16::MAX / 2,
    receive: false,
};

/// The device state the engine keeps for a virtio-net port.
pub struct VirtioNet {
    pub shared: Arc<Shared>,
    /// The last register change taken ([`Shared::changes_since`]) and reset seen.
    seen: u64,
    resets: u64,
    /// DRIVER_OK without FAILED or NEEDS_RESET: the device may use its queues.
    live: bool,
    negotiated: u64,
    queues: [DeviceQueue; QUEUES],
    /// Receive filtering [virtio 1.2 §5.1.6.5.1]. Promiscuous after reset, as QEMU's device.
    filter: ReceiveFilter,
    mac: [u8; 6],
    /// The driver whose memory the device reaches, once it is in the port's DMA domain.
    driver: Option<u32>,
    adopted: Option<u32>,
    link_shown: bool,
    segments: Vec<Segment>,
    frame: Vec<u8>,
}

impl VirtioNet {
    fn header_len(&self) -> usize {
        if self.negotiated & feature::VERSION_1 != 0 {
            HEADER_V1
        } else {
            HEADER_LEGACY
        }
    }

    /// Takes the driver's register writes since the last look; true if they reset the device.
    fn apply(&mut self, r: &Registers) -> bool {
        let reset = r.resets != self.resets;
        if reset {
            self.resets = r.resets;
            self.queues = [DeviceQueue::default(); QUEUES];
            self.filter = ReceiveFilter::default();
        }
        for (q, regs) in self.queues.iter_mut().zip(r.queues.iter()) {
            if q.regs != *regs {
                *q = DeviceQueue::new(*regs);
            }
        }
        self.negotiated = r.driver_features & r.device_features;
        self.live = r.status & status::DRIVER_OK != 0 && r.status & (status::FAILED | status::NEEDS_RESET) == 0;
        self.mac = r.mac;
        self.driver = r.driver;
        reset
    }
}

/// The Internet checksum of `bytes` folded into 16 bits (RFC 1071).
fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// Completes a partial checksum as the header asks [virtio 1.2 §5.1.6.2]: the sum from
/// `csum_start` to the end goes into the 16 bits at `csum_start + csum_offset`. False if the
/// header points outside the frame.
fn complete_checksum(frame: &mut [u8], csum_start: usize, csum_offset: usize) -> bool {
    let at = csum_start + csum_offset;
    if csum_start >= frame.len() || at + 2 > frame.len() {
        return false;
    }
    let c = internet_checksum(&frame[csum_start..]);
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

impl Port {
    /// Makes this port a virtio-net function whose registers are `shared`.
    pub fn attach_virtio(&mut self, shared: Arc<Shared>) {
        {
            let mut r = shared.lock();
            (r.mac, r.permanent_mac) = (self.mac(), self.mac());
        }
        self.virtio = Some(Box::new(VirtioNet {
            shared,
            seen: 0,
            resets: 0,
            live: false,
            negotiated: 0,
            queues: [DeviceQueue::default(); QUEUES],
            filter: ReceiveFilter::default(),
            mac: self.mac(),
            driver: None,
            adopted: None,
            link_shown: false,
            segments: Vec::with_capacity(64),
            frame: Vec::with_capacity(2048),
        }));
        self.flow.config = VIRTIO_FLOW;
    }

    /// The port's virtio registers, if it is a virtio-net function.
    pub fn virtio_registers(&self) -> Option<&Arc<Shared>> {
        self.virtio.as_ref().map(|v| &v.shared)
    }

    /// Takes register writes (engine iteration and slow path alike).
    pub(super) fn virtio_poll(&mut self) {
        let Some(v) = self.virtio.as_mut() else { return };
        if let Some((n, regs)) = v.shared.changes_since(v.seen) {
            if v.apply(&regs) {
                // The counters count since the last device reset, as the 82599's do.
                self.counters = super::DeviceCounters::default();
            }
            let Some(v) = self.virtio.as_mut() else { return };
            v.seen = n;
            if !v.live {
                // A reset or a stop: what waited for the old rings is gone with them.
                self.fifo_clear();
            }
            self.scans_since_write = 0;
            let v = self.virtio.as_ref().expect("still virtio");
            v.shared.applied(n);
        }
    }

    /// The slow path of a virtio port: the link and the configuration space.
    pub(super) fn virtio_scan(&mut self) {
        self.advance_link();
        self.config.poll();
        self.scans_since_write = self.scans_since_write.saturating_add(1);
        self.virtio_poll();
        let up = self.link.up;
        let Some(v) = self.virtio.as_mut() else { return };
        if v.link_shown != up {
            v.link_shown = up;
            v.shared.lock().set_link(up);
            v.shared.raise(ISR_CONFIG);
        }
    }

    /// Whether the device may move frames now: live, bus mastering on, not stalled.
    fn virtio_running(&self) -> bool {
        self.virtio.as_ref().is_some_and(|v| v.live) && self.config.bus_master() && !self.stalled && !self.removed
    }

    /// Queue `q` met `error`: it stops, and the driver learns of it through NEEDS_RESET
    /// where the interface has it (virtio 1.x) [virtio 1.2 §2.1.2].
    fn virtio_queue_error(&mut self, dma: &impl DmaSpace, q: usize, head: u16, error: QueueError) {
        let index = self.index;
        let Some(v) = self.virtio.as_mut() else { return };
        v.queues[q].broken = true;
        if v.negotiated & feature::VERSION_1 != 0 {
            v.shared.lock().status |= status::NEEDS_RESET;
            v.shared.raise(ISR_CONFIG);
        }
        match error {
            QueueError::Malformed(why) => {
                let message = format!("virtqueue {q}, chain {head}: {why} [virtio 1.2 §2.7]; queue stopped");
                self.lint.warn_named("virtqueue", q as u32, u32::from(head), Rule::VirtqueueMalformed, message);
            }
            QueueError::Fault(address) => {
                self.fault_count += 1;
                if dma.translated(index) {
                    self.iommu_faults += 1;
                }
                let direction = if q == RX { Direction::Rx } else { Direction::Tx };
                eprintln!(
                    "nicsim: DMA fault: port {index} virtqueue {q} chain {head}: at {address:#x}: not memory the driver gave the device; queue stopped"
                );
                let owner = dma.owner(address);
                let fault = DmaFault {
                    port: index,
                    direction,
                    queue: q as u32,
                    descriptor: u32::from(head),
                    address,
                    access: Access::DescriptorRead,
                    owner,
                };
                self.faults.push(fault);
            }
        }
    }

    /// The driver's memory joins this function's DMA domain once it has spoken to the device.
    fn virtio_adopt(&mut self, dma: &mut impl DmaSpace) {
        let index = self.index;
        let Some(v) = self.virtio.as_mut() else { return };
        if v.driver != v.adopted {
            v.adopted = v.driver;
            if let Some(pid) = v.driver {
                dma.adopt(index, pid);
            }
        }
    }

    /// Transmit [virtio 1.2 §5.1.6.2]: the control queue, then chains of the transmit queue
    /// onto the wire at line rate, each returned on the used ring once its frame has left.
    pub(super) fn virtio_transmit(&mut self, dma: &mut impl DmaSpace, now_ps: u64, out: &mut impl TxOutput) {
        self.virtio_adopt(dma);
        if !self.virtio_running() {
            return;
        }
        self.virtio_control(dma);
        if !self.link.up || self.transmitter_paused(now_ps) {
            return;
        }
        self.tx_wire.set_ahead(0);
        let Some(mut v) = self.virtio.take() else { return };
        let header = v.header_len();
        let csum = v.negotiated & feature::CSUM != 0;
        let mut error = None;
        let mut q = v.queues[TX];
        let mut sent = 0;
        while q.usable() && sent < TX_CHAINS_PER_CALL && out.room() > 0 && self.tx_wire.ready(now_ps) {
            let head = match q.available(dma) {
                Ok(0) => break,
                Ok(_) => match q.pop(dma, &mut v.segments) {
                    Ok(h) => h,
                    Err(e) => {
                        error = Some((0, e));
                        break;
                    }
                },
                Err(e) => {
                    error = Some((0, e));
                    break;
                }
            };
            let fits = match gather(dma, &v.segments, header + MAX_TX_FRAME, &mut v.frame) {
                Ok(f) => f,
                Err(e) => {
                    error = Some((head, e));
                    break;
                }
            };
            if !fits || v.frame.len() < header {
                error = Some((
                    head,
                    QueueError::Malformed("a transmit chain shorter than the header or longer than a frame"),
                ));
                break;
            }
            let (flags, gso) = (v.frame[0], v.frame[1]);
            let csum_start = usize::from(u16::from_le_bytes([v.frame[6], v.frame[7]]));
            let csum_offset = usize::from(u16::from_le_bytes([v.frame[8], v.frame[9]]));
            let frame = &mut v.frame[header..];
            let ok = gso == GSO_NONE
                && (flags & HDR_F_NEEDS_CSUM == 0 || (csum && complete_checksum(frame, csum_start, csum_offset)));
            if ok && !frame.is_empty() {
                let len = frame.len().max(MIN_FRAME);
                let mut padded = [0u8; MIN_FRAME];
                let bytes: &[u8] = if frame.len() < MIN_FRAME {
                    padded[..frame.len()].copy_from_slice(frame);
                    &padded
                } else {
                    frame
                };
                let (broadcast, multicast) = super::tx::group_kind(bytes.first_chunk::<6>().copied());
                self.count_transmitted(0, 1, len as u64, broadcast, multicast);
                let end = self.tx_wire.send(now_ps, len);
                out.take(bytes, end);
            } else if !ok {
                let why = format!("transmit chain {head}: GSO or a checksum request the driver did not negotiate, or one outside the frame; frame dropped");
                self.lint.warn_named("virtio-net header", TX as u32, u32::from(flags), Rule::VirtioHeader, why);
            }
            if let Err(e) = q.push_used(dma, head, 0) {
                error = Some((head, e));
                break;
            }
            sent += 1;
        }
        if sent > 0 {
            v.shared.raise(ISR_QUEUE);
        }
        v.queues[TX] = q;
        self.virtio = Some(v);
        if let Some((head, e)) = error {
            self.virtio_queue_error(dma, TX, head, e);
        }
    }

    /// Answers the commands on the control queue [virtio 1.2 §5.1.6.5]: a command the device
    /// refuses is answered `VIRTIO_NET_ERR` and reported to lint; the queue goes on. Only a
    /// broken chain or a DMA fault stops it.
    fn virtio_control(&mut self, dma: &mut impl DmaSpace) {
        let Some(mut v) = self.virtio.take() else { return };
        let mut q = v.queues[CTRL];
        let mut error = None;
        let mut refused = Vec::new();
        while q.usable() {
            let head =
                match q
                    .available(dma)
                    .and_then(|n| if n == 0 { Ok(None) } else { q.pop(dma, &mut v.segments).map(Some) })
                {
                    Ok(Some(h)) => h,
                    Ok(None) => break,
                    Err(e) => {
                        error = Some((0, e));
                        break;
                    }
                };
            let mut chain = ChainReader::new(&v.segments);
            let length = chain.remaining();
            let mut mac = v.mac;
            let outcome = match control::execute(dma, &mut chain, &mut v.filter, &mut mac, v.negotiated) {
                Ok(o) => o,
                Err(e) => {
                    error = Some((head, e));
                    break;
                }
            };
            if mac != v.mac {
                v.mac = mac;
                v.shared.lock().mac = mac;
            }
            // The ack is the last device-writable byte [virtio 1.2 §5.1.6.5].
            let (written, no_ack) = match scatter(dma, &v.segments, &[&[outcome.ack()]]) {
                Ok(Some(n)) => (n, None),
                Ok(None) => (0, Some("a control command without a device-writable byte for its ack")),
                Err(e) => {
                    error = Some((head, e));
                    break;
                }
            };
            let refusal = if let Outcome::Refused(why) = outcome { Some(why) } else { None };
            if no_ack.is_some() || refusal.is_some() {
                let code = control::command_code(dma, &v.segments);
                refused.extend([no_ack, refusal].into_iter().flatten().map(|why| (head, length, code, why)));
            }
            if let Err(e) = q.push_used(dma, head, written) {
                error = Some((head, e));
                break;
            }
        }
        v.queues[CTRL] = q;
        self.virtio = Some(v);
        for (head, length, code, why) in refused {
            // One lint entry per class and command.
            let code = code.map_or(u32::MAX, u32::from);
            let message =
                format!("control chain {head} ({length} bytes): {why} [virtio 1.2 §5.1.6.5]; answered VIRTIO_NET_ERR");
            self.lint.warn_named("control class, command", code, code, Rule::VirtioControl, message);
        }
        if let Some((head, e)) = error {
            self.virtio_queue_error(dma, CTRL, head, e);
        }
    }

    /// A frame from the wire [virtio 1.2 §5.1.6.3, §5.1.6.4]: filtered, then written with its
    /// header into the next receive chain, or held in the packet buffer while there is none.
    pub(super) fn virtio_receive(&mut self, dma: &mut impl DmaSpace, frame: &[u8]) {
        if !self.virtio_running() {
            self.drops.rx_disabled += 1;
            return;
        }
        let Some(v) = self.virtio.as_ref() else { return };
        let c = &mut self.counters;
        c.tpr += 1;
        c.tor += (frame.len() + FCS_LEN) as u64;
        if frame.len() < MIN_FRAME {
            c.ruc += 1;
            return;
        }
        if frame.len() > MAX_TX_FRAME {
            c.roc += 1;
            return;
        }
        let dst: [u8; 6] = frame.first_chunk::<6>().copied().unwrap_or_default();
        let group = dst[0] & 1 != 0;
        let broadcast = dst == [0xFF; 6];
        if !v.filter.accepts(frame, &v.mac, v.negotiated) {
            self.drops.filtered += 1;
            return;
        }
        c.gprc += 1;
        c.gorc += frame.len() as u64;
        c.bprc += u64::from(broadcast);
        c.mprc += u64::from(group && !broadcast);
        if !v.queues[RX].usable() {
            self.drops.queue_disabled += 1;
            return;
        }
        if !self.fifo.is_empty() {
            self.fifo_push(frame);
            self.virtio_drain(dma);
            return;
        }
        if !self.virtio_write_rx(dma, frame) {
            self.fifo_push(frame);
        }
    }

    /// Moves held frames into receive chains while there are chains.
    pub(super) fn virtio_drain(&mut self, dma: &mut impl DmaSpace) {
        if self.fifo.is_empty() || !self.virtio_running() {
            return;
        }
        while let Some(frame) = self.fifo.pop_front() {
            if !self.virtio_write_rx(dma, &frame) {
                if self.virtio.as_ref().is_some_and(|v| v.queues[RX].usable()) {
                    self.fifo.push_front(frame);
                    return;
                }
                // The queue stopped: what it held can go nowhere.
                self.drops.queue_disabled += 1 + self.fifo.len() as u64;
                self.spare.push(frame);
                self.fifo_clear();
                return;
            }
            self.fifo_bytes -= frame.len();
            self.spare.push(frame);
        }
    }

    /// Writes `frame` into the next receive chain; false if there is none (or the queue broke).
    fn virtio_write_rx(&mut self, dma: &mut impl DmaSpace, frame: &[u8]) -> bool {
        if !self.virtio.as_ref().is_some_and(|v| v.queues[RX].usable()) {
            // Taken back (a reset, `queue_reset`, a page frame of 0): its memory is not the
            // device's any more, and what waits for it is dropped by the caller.
            return false;
        }
        let Some(mut v) = self.virtio.take() else { return false };
        let mut q = v.queues[RX];
        let header_len = v.header_len();
        let result = (|| {
            if q.available(dma)? == 0 {
                return Ok(None);
            }
            let head = q.pop(dma, &mut v.segments)?;
            // flags 0 (no checksum information), GSO_NONE; num_buffers 1 with VERSION_1.
            let mut header = [0u8; HEADER_V1];
            header[10] = 1;
            let written = scatter(dma, &v.segments, &[&header[..header_len], frame])?
                .ok_or(QueueError::Malformed("a receive chain too small for a frame (no mergeable buffers)"))?;
            q.push_used(dma, head, written)?;
            Ok(Some(head))
        })();
        v.queues[RX] = q;
        let taken = matches!(result, Ok(Some(_)));
        if taken {
            v.shared.raise(ISR_QUEUE);
            self.counters.qprc[0] += 1;
            self.counters.qbrc[0] += frame.len() as u64;
        }
        self.virtio = Some(v);
        if let Err(e) = result {
            self.virtio_queue_error(dma, RX, 0, e);
        }
        taken
    }

    /// A hostile used element ([`crate::chaos`]): the next used entry of the receive or the
    /// transmit queue, published, naming a chain the device never finished: half the time a
    /// head within the queue (one the driver may still have given the device), else any 16-bit
    /// value, and a length up to a frame's or any 32-bit value. `None` if neither queue is in use.
    pub(super) fn virtio_hostile_used(
        &mut self,
        dma: &mut impl DmaSpace,
        rng: &mut crate::chaos::Rng,
    ) -> Option<super::hostile::HostileWrite> {
        let v = self.virtio.as_mut()?;
        let first = rng.below(2) as usize;
        let q = [RX, TX].into_iter().cycle().skip(first).take(2).find(|&q| v.live && v.queues[q].usable())?;
        let r = rng.next_u64();
        let size = u64::from(v.queues[q].regs.size.max(1));
        let head = if r & 1 == 0 { ((r >> 1) % size) as u16 } else { (r >> 16) as u16 };
        let len = if r & 2 == 0 { ((r >> 32) % 1600) as u32 } else { rng.next_u64() as u32 };
        let mut queue = v.queues[q];
        let written = queue.push_used(dma, head, len).is_ok();
        v.queues[q] = queue;
        written.then_some(super::hostile::HostileWrite::UsedElement)
    }

    /// A virtio port's receive and transmit queues in use (live and given), if it is one.
    pub(super) fn virtio_enabled_queues(&self) -> Option<(usize, usize)> {
        let v = self.virtio.as_ref()?;
        let usable = |q: usize| usize::from(v.live && v.queues[q].usable());
        Some((usable(RX), usable(TX)))
    }

    /// Whether the engine must poll this port.
    pub(super) fn virtio_busy(&self) -> bool {
        let queues = self.virtio.as_ref().is_some_and(|v| v.live && v.queues.iter().any(|q| q.usable()));
        queues || !self.fifo.is_empty() || self.scans_since_write < super::QUIET_SCANS
    }

    /// Surprise removal: the registers read all-ones and the device does nothing more.
    pub(super) fn virtio_remove(&mut self) {
        if let Some(v) = self.virtio.as_mut() {
            v.live = false;
            v.shared.lock().removed = true;
        }
    }

    /// A reset the device does on its own (`nicsim fault reset`): the driver finds the
    /// status 0 and its queues gone.
    pub(super) fn virtio_reset(&mut self) {
        self.flow.config = VIRTIO_FLOW;
        if let Some(v) = self.virtio.as_ref() {
            v.shared.lock().reset();
            v.shared.changed();
        }
        self.virtio_poll();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_are_completed_where_the_header_says() {
        // RFC 1071's example: 0001 f203 f4f5 f6f7 sums to ddf2, complemented 220d.
        let mut f = vec![0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7, 0, 0];
        assert!(complete_checksum(&mut f, 0, 8));
        assert_eq!(&f[8..], &[0x22, 0x0d]);
        assert!(!complete_checksum(&mut f, 4, 6), "the field would end past the frame");
        assert!(!complete_checksum(&mut f, 10, 0));
    }
}
