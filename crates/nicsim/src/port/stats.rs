//! The port's statistics: counters as the registers show them [DS 8.2.3.23], frames dropped
//! before a driver could see them, and frames in flight at one moment.

use super::{descriptor_address, owned_between, Port, RX_DD, RX_EOP, TX_DEXT, TX_EOP};
use crate::dma::DmaSpace;
use crate::regs::*;
use serde::{Deserialize, Serialize};

/// The device's statistics, as 64-bit totals since the last reset.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
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
    /// CRCERRS: frames with a bad FCS, dropped.
    pub crcerrs: u64,
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
#[serde(deny_unknown_fields)]
pub struct Drops {
    /// RXCTRL.RXEN = 0, SECRXCTRL.RX_DIS = 1, no bus mastering, or master disable.
    pub rx_disabled: u64,
    /// Rejected by L2 filtering (FCTRL, RAR).
    pub filtered: u64,
    /// The queue it went to was disabled or stopped by a DMA fault.
    pub queue_disabled: u64,
    /// Lost to DMA faults.
    pub dma_fault: u64,
}

/// Frames a port holds at one moment, by place. With what the sinks received and what the
/// device and the driver counted as dropped, they account for every frame generated.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct InFlight {
    /// In the receive packet buffer, waiting for a descriptor.
    pub packet_buffer: u64,
    /// Written into an RX ring and not yet taken by the driver: descriptors the driver
    /// owns whose DD and EOP are still as the device wrote them back.
    pub rx_ring: u64,
    /// Queued in enabled TX rings and not yet sent: data descriptors with EOP from head to tail.
    pub tx_ring: u64,
}

/// One queue as the device sees it, for diagnostics.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct QueueState {
    pub enabled: bool,
    /// Stopped by a DMA fault until the queue is enabled again.
    pub faulted: bool,
    pub head: u32,
    pub tail: u32,
    /// Descriptors in the ring.
    pub size: u32,
}

/// What a queue took from its registers when it was enabled, and its statistics mapping:
/// for tests that check the device acted on what the driver wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueSetup {
    pub base: u64,
    pub size: u32,
    /// Receive buffer bytes (SRRCTL.BSIZEPACKET), advanced descriptors, DROP_EN; receive only.
    pub buffer_size: usize,
    pub advanced: bool,
    pub drop_en: bool,
    /// Head write-back address (TDWBAL/TDWBAH with the enable bit); transmit only.
    pub head_write_back: Option<u64>,
    /// The counter set of QPRC/QPTC this queue counts in (RQSMR / TQSM).
    pub statistics: usize,
}

impl Port {
    /// Writes the statistics registers. Counters are totals since reset, truncated to the
    /// register width (32 bits; 36 bits for octet L/H pairs): a plain memory read cannot clear
    /// them (see docs/nicsim.md).
    pub fn publish_counters(&mut self) {
        if self.removed {
            return;
        }
        let mut c = self.counters.clone();
        // The PAUSE frames the port sends count as good multicast 64-byte frames sent, as Linux
        // and DPDK expect (both subtract LXONTXC + LXOFFTXC from GPTC, MPTC and GOTC).
        let pauses = self.flow.stats.xon_sent + self.flow.stats.xoff_sent;
        c.gptc += pauses;
        c.mptc += pauses;
        c.tpt += pauses;
        c.gotc += pauses * 64;
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
            (CRCERRS, c.crcerrs),
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
        self.reset_tail_watch();
        self.publish_counters();
    }

    /// The frames this port holds at this moment (see [`InFlight`]). Reads descriptor rings,
    /// so it is for snapshots (statistics), not for the per-frame paths.
    pub fn in_flight(&self, dma: &impl DmaSpace) -> InFlight {
        let peek = |base: u64, i: u32| {
            let l = dma.locate(descriptor_address(base, i)).filter(|l| l.avail >= 16)?;
            Some(dma.region(l.region).read_u64(l.offset + 8))
        };
        let mut rx_ring = 0;
        for &q in &self.active_rx {
            let rx = &self.rx[q as usize];
            if !rx.enabled || rx.size == 0 {
                continue;
            }
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

    /// Receive queue `q` as the device sees it.
    pub fn rx_queue_state(&self, q: usize) -> QueueState {
        let r = &self.rx[q];
        QueueState { enabled: r.enabled, faulted: r.faulted, head: r.head, tail: r.tail, size: r.size }
    }

    /// Transmit queue `q` as the device sees it.
    pub fn tx_queue_state(&self, q: usize) -> QueueState {
        let t = &self.tx[q];
        QueueState { enabled: t.enabled, faulted: t.faulted, head: t.head, tail: t.tail, size: t.size }
    }

    /// Receive queue `q`'s setup as the device took it.
    pub fn rx_queue_setup(&self, q: usize) -> QueueSetup {
        let r = &self.rx[q];
        QueueSetup {
            base: r.base,
            size: r.size,
            buffer_size: r.buf_size,
            advanced: r.advanced,
            drop_en: r.drop_en,
            head_write_back: None,
            statistics: r.stat,
        }
    }

    /// Transmit queue `q`'s setup as the device took it.
    pub fn tx_queue_setup(&self, q: usize) -> QueueSetup {
        let t = &self.tx[q];
        QueueSetup { base: t.base, size: t.size, head_write_back: t.head_wb, statistics: t.stat, ..Default::default() }
    }

    /// What the receive and transmit paths took from the registers at the last look.
    pub fn path_config(&self) -> super::PathConfig {
        self.paths
    }

    /// The valid receive addresses (RAL/RAH with AV) as the filter holds them.
    pub fn receive_addresses(&self) -> Vec<[u8; 6]> {
        self.rar
            .iter()
            .map(|k| {
                let b = k.to_le_bytes();
                [b[0], b[1], b[2], b[3], b[4], b[5]]
            })
            .collect()
    }

    /// Enabled receive queues.
    /// Receive and transmit queues the device uses now: the 82599's enabled ones, or a live
    /// virtio function's receive and transmit virtqueues.
    pub fn enabled_queues(&self) -> (usize, usize) {
        match self.virtio_enabled_queues() {
            Some(counts) => counts,
            None => (self.active_rx.len(), self.active_tx.len()),
        }
    }

    pub fn active_rx_queues(&self) -> &[u32] {
        &self.active_rx
    }

    /// Enabled transmit queues.
    pub fn active_tx_queues(&self) -> &[u32] {
        &self.active_tx
    }
}
