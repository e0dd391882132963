//! IEEE 802.3x link flow control of one port [DS 3.7.7, 8.2.3.3].
//!
//! Receive side: frames that find no free descriptor wait in the packet buffer (SRRCTL.DROP_EN
//! clear). When it fills to the high water mark (FCRTH(0).RTH, with FCRTH(0).FCEN and
//! FCCFG.TFCE = 01b) the port sends XOFF with the pause time of FCTTV(0).TTV0, and its link
//! partner stops sending. While the buffer stays above the low water mark the XOFF is sent
//! again every FCRTV quanta; once it drains below FCRTL(0).RTL the port sends XON (if
//! FCRTL(0).XONE) and the partner resumes at once, otherwise when its pause time runs out.
//!
//! Transmit side: a PAUSE frame from the partner holds the transmitter for its pause time,
//! if MFLCN.RFCE is set; XON releases it.
//!
//! Pause times count quanta of 512 bit times (51.2 ns at 10 Gb/s).

use serde::{Deserialize, Serialize};

/// What the flow-control registers say, derived once per register scan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowConfig {
    /// XOFF/XON may be sent: FCCFG.TFCE = 01b and FCRTH(0).FCEN.
    pub transmit: bool,
    /// Packet-buffer bytes at which XOFF is sent (FCRTH(0).RTH).
    pub high: usize,
    /// Below this many bytes the XOFF state ends (FCRTL(0).RTL).
    pub low: usize,
    /// FCRTL(0).XONE: an XON frame ends the pause at once.
    pub xon: bool,
    /// FCTTV(0).TTV0: pause time sent in XOFF frames, in quanta.
    pub pause_quanta: u16,
    /// FCRTV: the XOFF is repeated after this many quanta while it holds (0: never).
    pub refresh_quanta: u16,
    /// MFLCN.RFCE: received PAUSE frames hold our transmitter.
    pub receive: bool,
}

/// A PAUSE frame this port sends to its link partner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pause {
    /// Stop sending for this many picoseconds.
    Xoff { ps: u64 },
    /// Resume now.
    Xon,
}

/// Flow-control counters, as the LXON/LXOFF registers count them [DS 8.2.3.23].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FlowStats {
    /// LXOFFTXC, LXONTXC.
    pub xoff_sent: u64,
    pub xon_sent: u64,
    /// LXOFFRXCNT, LXONRXCNT.
    pub xoff_received: u64,
    pub xon_received: u64,
    /// Whether our XOFF holds the link partner now.
    pub partner_paused: bool,
    /// Whether the partner's XOFF holds our transmitter now (`nicsim traffic pause` included).
    pub transmitter_paused: bool,
}

/// One port's flow-control state.
#[derive(Debug, Clone, Default)]
pub struct FlowControl {
    pub config: FlowConfig,
    /// One pause quantum at the port's link speed, in picoseconds.
    quantum_ps: u64,
    /// The buffer passed the high water mark and has not yet drained below the low one.
    xoff_state: bool,
    last_xoff_ps: u64,
    /// Our last XOFF holds the partner until then (0: not held).
    partner_paused_until_ps: u64,
    /// A PAUSE frame from the partner holds our transmitter until then (0: not held).
    transmitter_paused_until_ps: u64,
    pub stats: FlowStats,
}

impl FlowControl {
    /// Flow control on a link of `gbps`, off until the registers enable it.
    pub fn new(gbps: f64) -> Self {
        FlowControl { quantum_ps: (512.0 * 1000.0 / gbps).round() as u64, ..Default::default() }
    }

    fn quanta_ps(&self, quanta: u16) -> u64 {
        u64::from(quanta) * self.quantum_ps
    }

    /// Whether the packet buffer, now `buffered` bytes, calls for an XOFF right away: the
    /// receive path asks after each frame it holds, so the partner stops within a frame.
    #[inline(always)]
    pub fn above_high(&self, buffered: usize) -> bool {
        self.config.transmit && buffered >= self.config.high
    }

    /// The PAUSE frame to send at `now_ps`, if any, given `buffered` bytes in the packet
    /// buffer; updates the state and counters as if it were sent.
    pub fn update(&mut self, buffered: usize, now_ps: u64) -> Option<Pause> {
        let c = self.config;
        if !c.transmit {
            // Flow control switched off: whatever we said last stands until it expires.
            self.xoff_state = false;
            return None;
        }
        let partner_held = now_ps < self.partner_paused_until_ps;
        if self.xoff_state && buffered < c.low {
            self.xoff_state = false;
            if c.xon && partner_held {
                self.partner_paused_until_ps = 0;
                self.stats.xon_sent += 1;
                return Some(Pause::Xon);
            }
            return None;
        }
        let crossing = buffered >= c.high && !partner_held;
        let refresh = self.xoff_state
            && c.refresh_quanta > 0
            && buffered >= c.low
            && now_ps.saturating_sub(self.last_xoff_ps) >= self.quanta_ps(c.refresh_quanta);
        if !(crossing || refresh) {
            return None;
        }
        self.xoff_state = true;
        self.last_xoff_ps = now_ps;
        let ps = self.quanta_ps(c.pause_quanta);
        self.partner_paused_until_ps = now_ps.saturating_add(ps);
        self.stats.xoff_sent += 1;
        Some(Pause::Xoff { ps })
    }

    /// Whether our XOFF holds the link partner at `now_ps`.
    #[inline(always)]
    pub fn partner_paused(&self, now_ps: u64) -> bool {
        now_ps < self.partner_paused_until_ps
    }

    /// A PAUSE frame from the partner arrives at `now_ps`.
    pub fn receive(&mut self, pause: Pause, now_ps: u64) {
        match pause {
            Pause::Xoff { ps } => {
                self.stats.xoff_received += 1;
                if self.config.receive {
                    self.transmitter_paused_until_ps = now_ps.saturating_add(ps);
                }
            }
            Pause::Xon => {
                self.stats.xon_received += 1;
                self.transmitter_paused_until_ps = 0;
            }
        }
    }

    /// Whether a PAUSE from the partner holds our transmitter at `now_ps`.
    #[inline(always)]
    pub fn transmitter_paused(&self, now_ps: u64) -> bool {
        now_ps < self.transmitter_paused_until_ps
    }

    /// Back to the reset state: no pause in either direction, counters zero.
    pub fn reset(&mut self) {
        *self = FlowControl { quantum_ps: self.quantum_ps, ..Default::default() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: u64 = 51_200; // one quantum at 10 Gb/s, in ps

    fn on(xon: bool, refresh: u16) -> FlowControl {
        let mut f = FlowControl::new(10.0);
        f.config = FlowConfig {
            transmit: true,
            high: 1000,
            low: 500,
            xon,
            pause_quanta: 100,
            refresh_quanta: refresh,
            receive: true,
        };
        f
    }

    #[test]
    fn xoff_at_the_high_mark_then_xon_below_the_low_one() {
        let mut f = on(true, 0);
        assert_eq!(f.update(999, 0), None);
        assert_eq!(f.update(1000, 10), Some(Pause::Xoff { ps: 100 * Q }));
        assert!(f.partner_paused(10 + 100 * Q - 1));
        // Above the low mark: still held, nothing more to say.
        assert_eq!(f.update(600, 20), None);
        assert_eq!(f.update(499, 30), Some(Pause::Xon));
        assert!(!f.partner_paused(31));
        assert_eq!((f.stats.xoff_sent, f.stats.xon_sent), (1, 1));
    }

    #[test]
    fn without_xone_the_pause_runs_out_and_a_full_buffer_sends_xoff_again() {
        let mut f = on(false, 0);
        assert!(f.update(2000, 0).is_some());
        assert_eq!(f.update(100, 5), None, "no XON frame");
        assert!(f.partner_paused(5), "held until the time runs out");
        assert!(!f.partner_paused(100 * Q));
        assert!(f.update(1500, 100 * Q).is_some(), "full again after the pause: a new XOFF");
    }

    #[test]
    fn the_xoff_is_refreshed_while_the_buffer_stays_above_the_low_mark() {
        let mut f = on(true, 50);
        assert!(f.update(1200, 0).is_some());
        assert_eq!(f.update(800, 49 * Q), None);
        assert_eq!(f.update(800, 50 * Q), Some(Pause::Xoff { ps: 100 * Q }));
        assert!(f.partner_paused(149 * Q));
        assert_eq!(f.stats.xoff_sent, 2);
    }

    #[test]
    fn nothing_is_sent_unless_enabled_and_pauses_are_honoured_only_with_rfce() {
        let mut off = FlowControl::new(10.0);
        assert_eq!(off.update(1 << 20, 0), None);
        assert!(!off.above_high(1 << 20));
        off.receive(Pause::Xoff { ps: 1000 }, 0);
        assert!(!off.transmitter_paused(1), "MFLCN.RFCE clear: PAUSE frames are ignored");
        assert_eq!(off.stats.xoff_received, 1, "but counted");
        let mut f = on(true, 0);
        f.receive(Pause::Xoff { ps: 1000 }, 0);
        assert!(f.transmitter_paused(999) && !f.transmitter_paused(1000));
        f.receive(Pause::Xoff { ps: 1000 }, 0);
        f.receive(Pause::Xon, 1);
        assert!(!f.transmitter_paused(2), "XON releases at once");
    }
}
