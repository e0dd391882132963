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
//! from the `invariants` kernel, whose types make the per-packet code check-free.

#![forbid(unsafe_code)]

pub mod agent;
pub mod device;
pub mod memory;
pub mod queues;
pub mod regs;

pub use device::{Device, DriverError, Port, PresenceCheck};

/// Bytes per packet buffer.
pub const BUFFER_SIZE: usize = 2048;
/// A packet buffer in DMA memory, as 8-byte words: the type makes its alignment known, so constant byte
/// ranges (the MAC rewrite) are written with word stores.
pub type PacketData = [u64; BUFFER_SIZE / 8];
/// A packet length, at most one buffer.
pub type PacketLength = invariants::Bounded<BUFFER_SIZE>;
