//! A device that misbehaves on purpose (see [`crate::chaos`]): hostile write-backs into the
//! rings the driver gave it, stalls, and frames that arrive with a bad FCS.

use super::{Port, RX_DD, RX_EOP};
use crate::chaos::Rng;
use crate::dma::{self, DmaSpace, Ring};
use crate::wire::FCS_LEN;

/// Where a hostile write-back landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostileWrite {
    /// Qword 1 (and with advanced descriptors qword 0) of a receive descriptor.
    RxDescriptor,
    /// The head write-back slot of a transmit queue.
    Head,
    /// DD in the status of a transmit descriptor.
    TxDescriptor,
    /// A virtio used element for a chain the device never finished, published.
    UsedElement,
}

impl Port {
    /// Writes one hostile value, chosen by `rng`, where the device may write: a receive
    /// descriptor anywhere in an enabled ring (owned by the device or not) with random status,
    /// errors, length 0..=0xFFFF and VLAN; a transmit queue's head write-back slot with any
    /// 32-bit value; or DD on any transmit descriptor. On a virtio port, a used element
    /// (`Port::virtio_hostile_used`). `None` if no queue has a ring in driver memory.
    pub fn hostile_write_back(&mut self, dma: &mut impl DmaSpace, rng: &mut Rng) -> Option<HostileWrite> {
        if self.virtio_registers().is_some() {
            return self.virtio_hostile_used(dma, rng);
        }
        let first = rng.below(3);
        (0..3).find_map(|k| match (first + k) % 3 {
            0 => self.hostile_rx(dma, rng),
            1 => self.hostile_head(dma, rng),
            _ => self.hostile_tx(dma, rng),
        })
    }

    fn hostile_rx(&mut self, dma: &mut impl DmaSpace, rng: &mut Rng) -> Option<HostileWrite> {
        let q = *self.active_rx.get(rng.below(self.active_rx.len().max(1) as u64) as usize)?;
        let ring = self.rx_ring(dma, q)?;
        let (size, advanced) = (self.rx[q as usize].size, self.rx[q as usize].advanced);
        let index = rng.below(u64::from(size)) as u32;
        let r = rng.next_u64();
        // Mostly DD (and EOP), so that the driver takes what it finds; the rest random.
        let mut status = (r >> 16) & 0xFF;
        if r & 3 != 0 {
            status |= RX_DD;
        }
        if (r >> 2) & 3 != 0 {
            status |= RX_EOP;
        }
        let errors = if (r >> 4) & 7 == 0 { (r >> 24) & 0xFF } else { 0 };
        let length = rng.next_u64() & 0xFFFF;
        if advanced {
            // Advanced write-back: status and errors in the low dword, length in bits 32–47
            // [DS 7.1.6.2]; qword 0 holds RSS and packet type.
            ring.in_space(dma).write(index, rng.next_u64(), status | errors << 20 | length << 32 | (r >> 48) << 48);
        } else {
            // Legacy: length, checksum, status, errors, VLAN [DS 7.1.5].
            ring.in_space(dma)
                .write_qword1(index, length | (r & 0xFFFF_0000) | status << 32 | errors << 40 | (r >> 48) << 48);
        }
        Some(HostileWrite::RxDescriptor)
    }

    fn hostile_head(&mut self, dma: &mut impl DmaSpace, rng: &mut Rng) -> Option<HostileWrite> {
        let q = *self.active_tx.get(rng.below(self.active_tx.len().max(1) as u64) as usize)?;
        let t = &self.tx[q as usize];
        let (addr, size) = (t.head_wb?, t.size);
        let r = rng.next_u64();
        // Half inside the ring (plausible but wrong), half anywhere in 0..2^32.
        let value = if r & 1 == 0 { ((r >> 1) % u64::from(size.max(1))) as u32 } else { (r >> 32) as u32 };
        dma::write_u32(dma, addr, value).then_some(HostileWrite::Head)
    }

    fn hostile_tx(&mut self, dma: &mut impl DmaSpace, rng: &mut Rng) -> Option<HostileWrite> {
        let q = *self.active_tx.get(rng.below(self.active_tx.len().max(1) as u64) as usize)?;
        let t = &self.tx[q as usize];
        if !t.enabled || t.size == 0 {
            return None;
        }
        let (base, size) = (t.base, t.size);
        let ring = Ring::resolve(dma, base, size)?;
        let ring = ring.in_space(dma);
        let index = rng.below(u64::from(size)) as u32;
        let (_, qword1) = ring.read(index);
        ring.write_dword3(index, (qword1 >> 32) as u32 | 1);
        Some(HostileWrite::TxDescriptor)
    }

    /// Stops every ring of the port until `until_ps` ([`crate::chaos::Fault::Stall`]).
    pub fn stall_until(&mut self, until_ps: u64) {
        self.stall_until_ps = self.stall_until_ps.max(until_ps);
    }

    /// Whether the rings are stalled at `now_ps`; the engine asks once per iteration and the
    /// per-frame paths read the answer.
    #[inline(always)]
    pub fn update_stall(&mut self, now_ps: u64) {
        self.stalled = now_ps < self.stall_until_ps;
    }

    /// A frame whose FCS does not match arrives: counted in CRCERRS and dropped, as without
    /// FCTRL.SBP [DS 8.2.3.23.1, 8.2.3.7.1].
    pub fn receive_bad_fcs(&mut self, frame: &[u8]) {
        if !self.paths.rx_open {
            self.drops.rx_disabled += 1;
            return;
        }
        let c = &mut self.counters;
        c.tpr += 1;
        c.tor += (frame.len() + FCS_LEN) as u64;
        c.crcerrs += 1;
    }
}
