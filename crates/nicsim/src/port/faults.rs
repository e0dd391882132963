//! DMA faults: an access outside the memory the driver gave the device stops its queue, as an
//! IOMMU would stop it.

use super::Port;
use crate::dma::DmaSpace;
use crate::regs::Direction;
use serde::{Deserialize, Serialize};
use std::fmt;

/// At most this many DMA faults are kept per port (all are counted).
const MAX_FAULTS: usize = 1024;

/// What the device was doing when a DMA access faulted.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    DescriptorRead,
    DescriptorWriteBack,
    PacketBufferRead,
    PacketBufferWrite,
    HeadWriteBack,
    /// A queue still enabled on a ring in memory the driver has released (unmapped, or its
    /// process exited): the device would read and write memory that may be another's now.
    ReleasedRing,
}

impl Access {
    /// Whether the device writes (else reads) in this access.
    pub fn is_write(self) -> bool {
        matches!(self, Access::DescriptorWriteBack | Access::PacketBufferWrite | Access::HeadWriteBack)
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::DescriptorRead => "descriptor read",
            Access::DescriptorWriteBack => "descriptor write-back",
            Access::PacketBufferRead => "packet buffer read",
            Access::PacketBufferWrite => "packet buffer write",
            Access::HeadWriteBack => "head write-back",
            Access::ReleasedRing => "ring",
        })
    }
}

/// A DMA access outside memory the driver gave the device.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DmaFault {
    pub port: usize,
    pub direction: Direction,
    pub queue: u32,
    pub descriptor: u32,
    pub address: u64,
    pub access: Access,
    /// The process whose memory the address is, if it is another driver's: one that does not
    /// map this function's BAR, so this function's DMA domain does not reach it.
    pub owner: Option<u32>,
}

impl Port {
    /// Stops, with a [`Access::ReleasedRing`] fault, every enabled queue whose ring was in
    /// driver memory and no longer resolves: the driver released the memory (or exited) with
    /// the queue still enabled. The engine asks after the DMA space forgot memory. Returns how
    /// many queues it stopped.
    pub fn stop_queues_on_released_memory(&mut self, dma: &impl DmaSpace) -> usize {
        let mut stopped = 0;
        for k in 0..self.active_rx.len() {
            let q = self.active_rx[k];
            let r = self.rx[q as usize];
            if !r.faulted && r.ring.is_some() && dma.locate_for(self.index, r.base).is_none() {
                self.fault(dma, Direction::Rx, q, r.head, r.base, Access::ReleasedRing);
                stopped += 1;
            }
        }
        for k in 0..self.active_tx.len() {
            let q = self.active_tx[k];
            let t = &self.tx[q as usize];
            let (base, head) = (t.base, t.head);
            if t.enabled && !t.faulted && t.ring_seen && dma.locate_for(self.index, base).is_none() {
                self.fault(dma, Direction::Tx, q, head, base, Access::ReleasedRing);
                stopped += 1;
            }
        }
        stopped
    }

    /// Records a fault of `queue` at `descriptor` and stops the queue.
    pub(super) fn fault(
        &mut self,
        dma: &impl DmaSpace,
        direction: Direction,
        queue: u32,
        descriptor: u32,
        address: u64,
        access: Access,
    ) {
        self.fault_count += 1;
        let translated = dma.translated(self.index);
        if translated {
            self.iommu_faults += 1;
        }
        if self.faults.len() < MAX_FAULTS {
            let owner = if translated { None } else { dma.owner(address) };
            let what = match (access, owner) {
                (Access::ReleasedRing, _) => "the driver released this memory with the queue still enabled".to_string(),
                (_, _) if translated => format!(
                    "IOMMU fault ({}): IOVA not mapped in the function's VFIO container; not performed",
                    if access.is_write() { "write" } else { "read" }
                ),
                (_, Some(pid)) => {
                    format!("is memory of process {pid}, which does not map this function's BAR (another function's domain)")
                }
                _ => "is not memory the driver gave the device".to_string(),
            };
            eprintln!(
                "nicsim: DMA fault: port {} {direction} queue {queue} descriptor {descriptor}: {access} at {address:#x}: {what}; queue stopped",
                self.index
            );
            self.faults.push(DmaFault { port: self.index, direction, queue, descriptor, address, access, owner });
        }
        match direction {
            Direction::Rx => self.rx[queue as usize].faulted = true,
            Direction::Tx => self.tx[queue as usize].faulted = true,
        }
    }
}
