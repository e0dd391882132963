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

/// The length of the frame a legacy receive write-back describes (qword 1, `status`), if it
/// is one whole frame that fits a buffer: EOP set and length at most [`BUFFER_SIZE`]
/// [DS 7.1.5]. The length is untrusted, so this is its one conversion. One comparison tests
/// both: without EOP the value keeps bit 33, and is too long.
#[inline(always)]
pub fn whole_frame_length(status: u64) -> Option<PacketLength> {
    PacketLength::new(((status ^ regs::RX_EOP) & (0xFFFF | regs::RX_EOP)) as usize)
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use regs::{RX_DD, RX_EOP};

    #[test]
    fn a_whole_frame_that_fits_has_its_length_and_any_other_is_refused_by_cause() {
        let ok = |len: u64| whole_frame_length(RX_DD | RX_EOP | len).map(PacketLength::get);
        assert_eq!(ok(60), Some(60));
        assert_eq!(ok(0), Some(0));
        assert_eq!(ok(BUFFER_SIZE as u64), Some(BUFFER_SIZE));
        assert_eq!(ok(BUFFER_SIZE as u64 + 1), None);
        assert_eq!(ok(0xFFFF), None);
        // Bits above the length field other than EOP (the status and errors) do not matter.
        assert_eq!(whole_frame_length(RX_EOP | 0xFF00_0000_0000 | 64).map(PacketLength::get), Some(64));
        let mut refused = Refused::default();
        for status in [RX_DD | 60, RX_DD | RX_EOP | 0x801, RX_DD | 0x801] {
            assert_eq!(whole_frame_length(status), None, "{status:#x}");
            refused.count(status);
        }
        assert_eq!((refused.too_long(), refused.not_end_of_packet()), (1, 2));
    }
}
