//! A safe driver for virtio-net [virtio 1.2 §5.1], through the modern (virtio 1.x) or the
//! legacy PCI interface, in the shape of `crates/ixgbe`'s flexible model.
//!
//! - [`device`]: opening a PCI function, feature negotiation, the control queue, reset.
//! - [`transport`]: the two interfaces' registers, reached with `pread`/`pwrite`.
//! - [`virtqueue`]: a split virtqueue's rings as typed volatile arrays, indexed by
//!   [`invariants::RingIndex`], so the packet path has no run-time check.
//! - [`queues`]: receive and transmit queues that implement ixgbe's device-independent
//!   [`ixgbe::queues::Receive`] and [`ixgbe::queues::Transmit`], over the same buffers and pools,
//!   so an application forwards between an 82599 and a virtio port without knowing which is which.
//!
//! This crate has no `unsafe`: volatile memory and ring indices come from the `invariants`
//! kernel, DMA memory from `ixgbe::memory` (on `platform::dma`), the BARs' files from `platform`.

#![forbid(unsafe_code)]

pub mod device;
pub mod queues;
pub mod transport;
pub mod virtqueue;

pub use device::VirtioDevice;
pub use ixgbe::DriverError;
pub use transport::Interface;
