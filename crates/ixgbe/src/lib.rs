//! A safe driver for the Intel 82599 10 GbE controller.
//!
//! - [`device`]: opening a PCI function and the datasheet initialisation.
//! - [`agent`]: the restricted (run-time output count) and const (compile-time output count)
//!   models of TinyNF: one ring per input shared as RX ring and TX ring of every output, no
//!   buffer ever moves.
//! - [`queues`]: the flexible model: `rx_batch`/`tx_batch` over a shared buffer pool, behind
//!   the device-independent [`queues::Receive`] and [`queues::Transmit`] traits.
//!
//! This crate has no `unsafe`: volatile memory, ring indices and run-time ranged arrays come
//! from the `invariants` kernel, whose types make the per-packet code check-free, and DMA
//! memory, descriptor rings and the registers that give the device memory from
//! `platform::dma` and `platform::i82599`, so that nothing this crate does can point the
//! device outside the memory it was given.

#![forbid(unsafe_code)]

pub mod agent;
pub mod device;
pub mod memory;
pub mod queues;
pub mod regs;

pub use device::{Device, DriverError, Port, PresenceCheck, RssQueue, RssQueues, RSS_KEY, RSS_QUEUES};

/// Bytes per packet buffer, packet buffers and their lengths: the trusted base's, which gives
/// the device no longer buffer and takes no longer length.
pub use platform::dma::{PacketData, PacketLength, BUFFER_SIZE};

/// Frames a driver refused because of what the device wrote back, by cause: indexed by the
/// descriptor's EOP bit, so counting needs no branch of its own [DS 7.1.5].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refused([u64; 2]);

impl Refused {
    /// Counts one frame refused with the written-back status `status` (qword 1).
    #[inline(always)]
    pub fn count(&mut self, status: u64) {
        self.0[((status & regs::RX_EOP) >> 33) as usize] += 1;
    }
    /// Frames whose length exceeds one buffer ([`BUFFER_SIZE`]).
    pub fn too_long(&self) -> u64 {
        self.0[1]
    }
    /// Frames without EOP: they would span buffers, which these drivers never ask for.
    pub fn not_end_of_packet(&self) -> u64 {
        self.0[0]
    }
    pub fn total(&self) -> u64 {
        self.0[0] + self.0[1]
    }
    /// Both counts added.
    pub fn add(&mut self, other: Refused) {
        self.0[0] += other.0[0];
        self.0[1] += other.0[1];
    }
}
