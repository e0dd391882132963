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
        let n = unsafe { sys::safenic_rx_burst(self.port, self.queue, slots, room) };
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
        let n = unsafe { sys::safenic_tx_burst(self.port, self.queue, mbufs, len) };
        // SAFETY: the driver took the first n; it frees them once sent.
        unsafe { batch.gave_away(n) };
        n
    }
}
