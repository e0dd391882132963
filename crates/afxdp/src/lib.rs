//! A safe AF_XDP backend: any NIC that Linux drives, reached through the kernel's own driver
//! and an AF_XDP socket, behind ixgbe's device-independent [`Receive`](ixgbe::queues::Receive)
//! and [`Transmit`](ixgbe::queues::Transmit) traits (docs/afxdp.md).
//!
//! - [`port`]: `xdp:IFNAME[@QUEUE]`, the socket bound to that queue, and the XDP program that
//!   sends the queue's frames to it.
//! - [`queues`]: the receive and transmit queues over the socket's four rings.
//!
//! A buffer is, at any time, in one place, and the types say which: the pool, the fill ring
//! or the kernel (held by the receive queue), the application (a batch), the transmit ring or
//! the kernel (held by the transmit queue). What the kernel writes in a ring (an offset, a
//! length) is untrusted input, checked once where it is read. The socket, its rings, the UMEM
//! and the program are the trusted base's (`platform::xdp`); this crate has no `unsafe`.

#![forbid(unsafe_code)]

pub mod port;
pub mod queues;

pub use platform::xdp::{BindMode, Statistics};
pub use port::{Port, PortSpec};
