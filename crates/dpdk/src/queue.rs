//! A port's receive and transmit queues: one handle each, `Send` but not `Sync`, because
//! DPDK's bursts on one queue must not run on two threads at once.

use crate::batch::Batch;
use crate::sys;
use std::cell::Cell;
use std::marker::PhantomData;

/// Receive queue `queue` of port `port`. Made only by [`crate::Port::queues`], so the ids are
/// valid (DPDK's `rte_eth_rx_burst` checks neither) and there is one handle per queue.
#[derive(Debug)]
pub struct RxQueue<'a> {
    port: u16,
    queue: u16,
    /// `Send`, not `Sync`; borrows the port, which stops the queue when dropped.
    _owner: PhantomData<(&'a (), Cell<()>)>,
}

/// Transmit queue `queue` of port `port`; as [`RxQueue`].
#[derive(Debug)]
pub struct TxQueue<'a> {
    port: u16,
    queue: u16,
    _owner: PhantomData<(&'a (), Cell<()>)>,
}

impl<'a> RxQueue<'a> {
    pub(crate) fn new(port: u16, queue: u16) -> Self {
        RxQueue { port, queue, _owner: PhantomData }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Receives into the free slots of `batch` (`rte_eth_rx_burst`); returns how many came.
    #[inline(always)]
    pub fn rx_burst<const N: usize>(&mut self, batch: &mut Batch<'a, N>) -> u16 {
        let (slots, room) = batch.spare();
        // SAFETY: port and queue were set up and the port is started while `'a` lasts; slots
        // has room for `room` pointers; `&mut self` keeps this queue on one thread.
        let n = unsafe { rx_burst(self.port, self.queue, slots, room) };
        // SAFETY: DPDK wrote n pointers to mbufs it handed over.
        unsafe { batch.filled(n) };
        n
    }
}

impl<'a> TxQueue<'a> {
    pub(crate) fn new(port: u16, queue: u16) -> Self {
        TxQueue { port, queue, _owner: PhantomData }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Sends from the front of `batch` (`rte_eth_tx_burst`): what the ring took is the
    /// driver's now and leaves the batch; what it did not take stays, at the front. Returns how
    /// many were sent.
    #[inline(always)]
    pub fn tx_burst<const N: usize>(&mut self, batch: &mut Batch<'_, N>) -> u16 {
        let (mbufs, len) = batch.owned();
        // SAFETY: as in `rx_burst`; mbufs holds len owned mbufs.
        let n = unsafe { tx_burst(self.port, self.queue, mbufs, len) };
        // SAFETY: the driver took the first n; it frees them once sent.
        unsafe { batch.gave_away(n) };
        n
    }
}

#[cfg(feature = "shim-burst")]
use sys::{safenic_rx_burst as rx_burst, safenic_tx_burst as tx_burst};

// The bursts below are DPDK 22.11's, built with Rx/Tx callbacks (rte_config.h); another DPDK
// needs them compared with its rte_ethdev.h first.
const _: () = assert!(sys::RTE_VER_YEAR == 22 && sys::RTE_VER_MONTH == 11, "written for DPDK 22.11");
const _: u32 = sys::RTE_ETHDEV_RXTX_CALLBACKS;

/// DPDK 22.11's inline `rte_eth_rx_burst` (rte_ethdev.h, a release build) written out in Rust
/// over bindgen's layout: a call per burst less than the shim (docs/dpdk.md measures both).
///
/// # Safety
/// As `rte_eth_rx_burst`: `port`'s queue `queue` set up and started, `pkts` room for `n`.
#[cfg(not(feature = "shim-burst"))]
#[inline(always)]
unsafe fn rx_burst(port: u16, queue: u16, pkts: *mut *mut sys::rte_mbuf, n: u16) -> u16 {
    use std::sync::atomic::{AtomicPtr, Ordering};
    // SAFETY: port < RTE_MAX_ETHPORTS (a started port); rte_eth_dev_start filled its entry,
    // whose queue arrays hold RTE_MAX_QUEUES_PER_PORT entries, queue among them.
    unsafe {
        let p = (&raw const sys::rte_eth_fp_ops).cast::<sys::rte_eth_fp_ops>().add(usize::from(port));
        let q = usize::from(queue);
        let Some(burst) = (*p).rx_pkt_burst else { return 0 };
        let got = burst(*(*p).rxq.data.add(q), pkts, n);
        // DPDK stores the callback list with release order and loads it relaxed, as here.
        let cb = AtomicPtr::from_ptr((*p).rxq.clbk.add(q)).load(Ordering::Relaxed);
        if cb.is_null() {
            got
        } else {
            sys::rte_eth_call_rx_callbacks(port, queue, pkts, got, n, cb)
        }
    }
}

/// DPDK 22.11's inline `rte_eth_tx_burst`, as [`rx_burst`].
///
/// # Safety
/// As `rte_eth_tx_burst`: `port`'s queue `queue` set up and started, `pkts` `n` owned mbufs.
#[cfg(not(feature = "shim-burst"))]
#[inline(always)]
unsafe fn tx_burst(port: u16, queue: u16, pkts: *mut *mut sys::rte_mbuf, mut n: u16) -> u16 {
    use std::sync::atomic::{AtomicPtr, Ordering};
    // SAFETY: as in rx_burst.
    unsafe {
        let p = (&raw const sys::rte_eth_fp_ops).cast::<sys::rte_eth_fp_ops>().add(usize::from(port));
        let q = usize::from(queue);
        let cb = AtomicPtr::from_ptr((*p).txq.clbk.add(q)).load(Ordering::Relaxed);
        if !cb.is_null() {
            n = sys::rte_eth_call_tx_callbacks(port, queue, pkts, n, cb);
        }
        let Some(burst) = (*p).tx_pkt_burst else { return 0 };
        burst(*(*p).txq.data.add(q), pkts, n)
    }
}
