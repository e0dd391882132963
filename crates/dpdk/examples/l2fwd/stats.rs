//! l2fwd's statistics screen: per port, packets sent, received and dropped, and the totals.

use crate::forward::PortCounters;
use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

/// The screen, cleared first (`clear` the escape sequences l2fwd prints) when `clear` is set.
pub fn screen(ports: &[(u16, &PortCounters)], clear: bool) -> String {
    let mut out = String::new();
    if clear {
        out.push_str("\x1b[2J\x1b[1;1H");
    }
    out.push_str("\nPort statistics ====================================");
    let (mut sent, mut received, mut dropped) = (0, 0, 0);
    for &(port, c) in ports {
        let (s, r, d) = (c.sent.load(Relaxed), c.received.load(Relaxed), c.dropped.load(Relaxed));
        let _ = write!(
            out,
            "\nStatistics for port {port} ------------------------------\
             \nPackets sent: {s:>24}\nPackets received: {r:>20}\nPackets dropped: {d:>21}"
        );
        (sent, received, dropped) = (sent + s, received + r, dropped + d);
    }
    let _ = write!(
        out,
        "\nAggregate statistics ===============================\
         \nTotal packets sent: {sent:>18}\nTotal packets received: {received:>14}\nTotal packets dropped: {dropped:>15}\
         \n====================================================\n"
    );
    out
}
