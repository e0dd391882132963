//! The forwarding loop of one lcore: receive a burst on each of its ports, rewrite the MAC
//! addresses, and send through the paired port's buffer, drained when full or every 100 µs.

use dpdk::{Batch, RxQueue, TxQueue};
use smoltcp::wire::{EthernetAddress, EthernetFrame};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Frames per receive burst and per transmit buffer (l2fwd's MAX_PKT_BURST).
pub const BURST: usize = 32;

/// Counters of one port, written by the lcore that receives on it (received, and what it sent
/// to its pair) and read by the statistics screen.
#[derive(Debug, Default)]
pub struct PortCounters {
    pub received: AtomicU64,
    pub sent: AtomicU64,
    pub dropped: AtomicU64,
}

/// One receive port, the paired transmit queue, and how to address what goes out.
pub struct Route<'q> {
    pub rx: RxQueue<'q>,
    pub tx: TxQueue<'q>,
    /// `Some((destination, source))` when MAC updating is on.
    pub macs: Option<([u8; 6], [u8; 6])>,
    pub rx_counters: &'q PortCounters,
    pub tx_counters: &'q PortCounters,
    pending: Batch<'q, BURST>,
}

impl<'q> Route<'q> {
    pub fn new(
        rx: RxQueue<'q>,
        tx: TxQueue<'q>,
        macs: Option<([u8; 6], [u8; 6])>,
        rx_counters: &'q PortCounters,
        tx_counters: &'q PortCounters,
    ) -> Self {
        Route { rx, tx, macs, rx_counters, tx_counters, pending: Batch::new() }
    }

    /// One receive burst, forwarded into the transmit buffer (sent whenever it fills).
    #[inline(always)]
    pub fn poll(&mut self) {
        let mut burst: Batch<'q, BURST> = Batch::new();
        let n = self.rx.rx_burst(&mut burst);
        if n == 0 {
            return;
        }
        self.rx_counters.received.fetch_add(u64::from(n), Relaxed);
        for mut m in burst.drain() {
            if let Some((dst, src)) = self.macs {
                match EthernetFrame::new_checked(m.data_mut()) {
                    Ok(mut frame) => {
                        frame.set_dst_addr(EthernetAddress(dst));
                        frame.set_src_addr(EthernetAddress(src));
                    }
                    Err(_) => {
                        // Shorter than an Ethernet header: counted and dropped.
                        self.tx_counters.dropped.fetch_add(1, Relaxed);
                        continue;
                    }
                }
            }
            if let Err(m) = self.pending.push(m) {
                self.flush();
                let _ = self.pending.push(m);
            }
            if self.pending.is_full() {
                self.flush();
            }
        }
    }

    /// Sends the buffer; what the ring did not take is dropped and counted, as l2fwd's
    /// `rte_eth_tx_buffer` error callback does.
    pub fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let sent = self.tx.tx_burst(&mut self.pending);
        self.tx_counters.sent.fetch_add(u64::from(sent), Relaxed);
        self.tx_counters.dropped.fetch_add(self.pending.len() as u64, Relaxed);
        self.pending.clear();
    }
}
