//! DMA faults: an access outside the memory the driver gave the device stops its queue, as an
//! IOMMU would stop it.

use super::Port;
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
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::DescriptorRead => "descriptor read",
            Access::DescriptorWriteBack => "descriptor write-back",
            Access::PacketBufferRead => "packet buffer read",
            Access::PacketBufferWrite => "packet buffer write",
            Access::HeadWriteBack => "head write-back",
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
}

impl Port {
    /// Records a fault of `queue` at `descriptor` and stops the queue.
    pub(super) fn fault(&mut self, direction: Direction, queue: u32, descriptor: u32, address: u64, access: Access) {
        self.fault_count += 1;
        if self.faults.len() < MAX_FAULTS {
            eprintln!(
                "nicsim: DMA fault: port {} {direction} queue {queue} descriptor {descriptor}: {access} at {address:#x} is not memory the driver gave the device; queue stopped",
                self.index
            );
            self.faults.push(DmaFault { port: self.index, direction, queue, descriptor, address, access });
        }
        match direction {
            Direction::Rx => self.rx[queue as usize].faulted = true,
            Direction::Tx => self.tx[queue as usize].faulted = true,
        }
    }
}
