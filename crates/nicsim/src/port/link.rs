//! The link: down at power-on and after CTRL.LNK_RST (not CTRL.RST), up once link setup
//! completes, and down while the cable is out (`nicsim link down`). LINKS, STATUS.LU and
//! EICR.LSC follow [DS 8.2.3.22.20, 8.2.3.1.2, 8.2.3.5.1]; while the link is down the port
//! sends nothing and its link partner (the generator, or the port at the other end of a cable)
//! sends nothing to it.

use super::Port;
use crate::regs::*;
use std::time::{Duration, Instant};

/// How long link setup takes after a reset, unless `nicsim serve --link-up-ms` says otherwise:
/// an SFP+ port at 10 Gb/s has no autonegotiation to wait for, only the MAC and PCS to
/// synchronise; drivers wait up to 9 s (Linux's IXGBE_LINK_UP_TIME) or 10 s (ixy).
pub const DEFAULT_LINK_UP: Duration = Duration::from_millis(100);

/// LINKS bits that read 1 only while the link is up: Link Up and Link Status.
const LINKS_UP_BITS: u32 = (1 << 30) | (1 << 7);
/// EICR.LSC: link status change [DS 8.2.3.5.1].
pub const EICR_LSC: u32 = 1 << 20;

/// The state of a port's link.
#[derive(Debug, Clone, Copy)]
pub struct Link {
    /// The cable is in (`nicsim link up`, the default).
    pub cable_in: bool,
    pub up: bool,
    /// When link setup completes, while it is under way.
    up_at: Option<Instant>,
    /// How long link setup takes.
    pub setup: Duration,
}

impl Link {
    pub fn new(setup: Duration) -> Link {
        Link { cable_in: true, up: false, up_at: None, setup }
    }
}

impl Port {
    /// Whether frames can cross the link now.
    #[inline(always)]
    pub fn link_up(&self) -> bool {
        self.link.up
    }

    /// The link goes down now and, with the cable in, starts link setup (a reset, CTRL.LNK_RST).
    pub(super) fn restart_link(&mut self) {
        self.set_link(false);
        self.link.up_at = self.link.cable_in.then(|| Instant::now() + self.link.setup);
        if self.link.setup.is_zero() {
            // (Tests that drive a port directly, without the slow path.)
            self.advance_link();
        }
    }

    /// Plugs the cable in (link setup starts) or pulls it (the link goes down now).
    pub fn set_cable(&mut self, cable_in: bool) {
        if cable_in == self.link.cable_in {
            return;
        }
        self.link.cable_in = cable_in;
        self.restart_link();
    }

    /// Brings the link up once setup has completed (the slow path asks).
    pub(super) fn advance_link(&mut self) {
        if self.link.up_at.is_some_and(|t| Instant::now() >= t) {
            self.link.up_at = None;
            self.set_link(true);
        }
    }

    fn set_link(&mut self, up: bool) {
        let changed = self.link.up != up;
        self.link.up = up;
        self.show_link();
        if changed {
            let eicr = self.reg(EICR) | EICR_LSC;
            self.set_reg(EICR, eicr);
        }
    }

    /// LINKS and STATUS.LU as the link is.
    pub(super) fn show_link(&mut self) {
        let up = self.link.up;
        let links = self.reg(LINKS);
        let links = if up { links | LINKS_UP_BITS } else { links & !LINKS_UP_BITS };
        if links != self.reg(LINKS) {
            self.set_reg(LINKS, links);
        }
        self.update_status();
    }
}
