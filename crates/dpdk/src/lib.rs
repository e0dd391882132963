//! A safe Rust API over DPDK 22.11 (docs/dpdk.md, "The Rust API"). Code using it writes no
//! `unsafe`: EAL initialises once ([`Eal`]), pools and mbufs are owned ([`Mempool`], [`Mbuf`]),
//! a port hands out each of its queues once ([`Port::queues`]), and a queue is `Send` but not
//! `Sync`. Every unsafe block of this work is in this crate, each with a `// SAFETY:` comment.
//!
//! # Soundness
//!
//! DPDK itself is trusted C, as the libraries a program links are. Where its contract is
//! weaker than Rust's, this API closes the gap:
//! - EAL takes only arguments that load, map and run nothing of their own
//!   ([`ALLOWED_EAL_OPTIONS`], [`VIRTUAL_DEVICES`]): no `-d`, no secondary process, no device
//!   that shares memory with another process. It still loads the drivers of its installation
//!   (a shared build's plugin directory), trusted as the installed DPDK is.
//! - EAL does not start in a process that opened a simulated device, and such a process opens
//!   none afterwards (`platform::pci::refuse_simulated_devices`): a simulated device's DMA
//!   reaches any hugepage of its owner, where mbufs hold pointers.
//! - `rte_eth_rx_burst` and `rte_eth_tx_burst` check neither the port nor the queue id (in a
//!   release build of DPDK): a queue handle exists only for a queue that was set up.
//! - Two threads bursting on one queue corrupt its ring: a queue handle is not `Sync`, and
//!   `&mut` to burst.
//! - An mbuf pointer may be freed twice or used after free: `Mbuf` is an owned handle, and a
//!   transmit burst removes from the batch exactly the mbufs the driver took.
//! - A device writes `data_len`: [`Mbuf::data`] caps it at the buffer's room.
//! - Freeing a pool or cleaning up EAL while a device still writes into its memory: a pool is
//!   freed only when no port refills from it and every mbuf is back, EAL only when no pool or
//!   port is alive; a leaked one (`mem::forget`) leaks them instead of freeing.
//!
//! A port that sends back what it receives, with the MAC addresses swapped:
//!
//! ```no_run
//! use dpdk::{Batch, Eal, Mempool, PortConfig};
//!
//! fn main() -> Result<(), dpdk::Error> {
//!     let (eal, _args) = Eal::init(std::env::args())?;
//!     let pool = Mempool::new(&eal, "mbufs", 8191, 256, Mempool::DEFAULT_DATA_ROOM)?;
//!     let port = PortConfig::new(0).promiscuous(true).start(&pool)?;
//!     let (mut rx, mut tx) = port.queues();
//!     let mut batch: Batch<'_, 32> = Batch::new();
//!     loop {
//!         rx[0].rx_burst(&mut batch);
//!         for m in batch.iter_mut() {
//!             if let Some((dst, src)) = m.data_mut().get_mut(..12).map(|h| h.split_at_mut(6)) {
//!                 dst.swap_with_slice(src);
//!             }
//!         }
//!         tx[0].tx_burst(&mut batch);
//!         batch.clear(); // what the ring did not take is freed, once
//!     }
//! }
//! ```
//!
//! ```compile_fail,E0277
//! // A queue cannot be shared between lcores: it is not Sync.
//! fn shared<T: Sync>(_: &T) {}
//! fn f(q: &dpdk::RxQueue<'_>) { shared(q) }
//! ```
//!
//! ```compile_fail,E0277
//! // An mbuf has one owner: it is neither Clone nor Copy.
//! fn owned_twice<T: Clone>() {}
//! owned_twice::<dpdk::Mbuf<'static>>();
//! ```
//!
//! ```compile_fail,E0515
//! // An mbuf cannot outlive its pool.
//! fn f(eal: &dpdk::Eal) -> dpdk::Mbuf<'static> {
//!     let pool = dpdk::Mempool::new(eal, "p", 63, 0, 2176).unwrap();
//!     pool.alloc().unwrap()
//! }
//! ```
//!
//! ```compile_fail,E0505
//! // A port cannot be closed while one of its queues is alive.
//! fn f(port: dpdk::Port<'_>) {
//!     let (rx, _tx) = port.queues();
//!     drop(port);
//!     drop(rx);
//! }
//! ```

mod batch;
mod cycles;
mod eal;
mod eal_args;
mod error;
mod lcore;
mod mbuf;
mod mempool;
mod port;
mod queue;
mod sys;

pub use batch::{Batch, Drain};
pub use cycles::{cycles, cycles_per_second};
pub use eal::{Eal, EalBuilder};
pub use eal_args::{ALLOWED_EAL_OPTIONS, VIRTUAL_DEVICES};
pub use error::Error;
pub use lcore::{request_stop, stop_on_signals, stop_requested, Lcore, Scope};
pub use mbuf::Mbuf;
pub use mempool::Mempool;
pub use port::{Port, PortConfig, Stats};
pub use queue::{RxQueue, TxQueue};
