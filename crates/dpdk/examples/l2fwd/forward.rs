//! The forwarding loop of one lcore: receive a burst on each of its ports, rewrite the MAC
//! addresses, and send through the paired port's buffer, drained when full or every 100 µs.

use crate::args::Headers;
use dpdk::{Batch, RxQueue, TxQueue};
use etherparse::Ethernet2Header;
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
    pub headers: Headers,
    pub rx_counters: &'q PortCounters,
    pub tx_counters: &'q PortCounters,
    pending: Batch<'q, BURST>,
}

impl<'q> Route<'q> {
    pub fn new(
        rx: RxQueue<'q>,
        tx: TxQueue<'q>,
        macs: Option<([u8; 6], [u8; 6])>,
        headers: Headers,
        counters: (&'q PortCounters, &'q PortCounters),
    ) -> Self {
        let (rx_counters, tx_counters) = counters;
        Route { rx, tx, macs, headers, rx_counters, tx_counters, pending: Batch::new() }
    }

    /// One receive burst, straight into the transmit buffer's free slots, its frames
    /// readdressed there; the buffer is sent when it fills. No frame is moved.
    #[inline(always)]
    pub fn poll(&mut self) {
        let start = self.pending.len();
        let n = self.rx.rx_burst(&mut self.pending);
        if n == 0 {
            return;
        }
        self.rx_counters.received.fetch_add(u64::from(n), Relaxed);
        if let Some((dst, src)) = self.macs {
            let received = &mut self.pending.as_mut_slice()[start..];
            let short = match self.headers {
                Headers::Smoltcp => readdress_smoltcp(received, dst, src),
                Headers::Etherparse => readdress_etherparse(received, dst, src),
            };
            if short {
                // Shorter than an Ethernet header: counted and dropped.
                let before = self.pending.len();
                self.pending.retain(|m| m.len() >= EthernetFrame::<&[u8]>::header_len());
                self.tx_counters.dropped.fetch_add((before - self.pending.len()) as u64, Relaxed);
            }
        }
        if self.pending.is_full() {
            self.flush();
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

/// Writes the addresses into each frame with smoltcp; whether a frame was too short for them.
#[inline(always)]
fn readdress_smoltcp(frames: &mut [dpdk::Mbuf<'_>], dst: [u8; 6], src: [u8; 6]) -> bool {
    let (dst, src) = (EthernetAddress(dst), EthernetAddress(src));
    let mut short = false;
    for m in frames {
        match EthernetFrame::new_checked(m.data_mut()) {
            Ok(mut frame) => {
                frame.set_dst_addr(dst);
                frame.set_src_addr(src);
            }
            Err(_) => short = true,
        }
    }
    short
}

/// The same with etherparse: the header parsed, changed and written back.
#[inline(always)]
fn readdress_etherparse(frames: &mut [dpdk::Mbuf<'_>], dst: [u8; 6], src: [u8; 6]) -> bool {
    let mut short = false;
    for m in frames {
        let data = m.data_mut();
        match Ethernet2Header::from_slice(data) {
            Ok((mut header, _)) => {
                header.destination = dst;
                header.source = src;
                short |= header.write_to_slice(data).is_err();
            }
            Err(_) => short = true,
        }
    }
    short
}
