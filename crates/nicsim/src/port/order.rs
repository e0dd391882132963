//! The order in which driver writes take effect. On PCIe, posted writes from one CPU arrive in
//! the order they were made [PCIe 2.0 2.4.1], so a card never sees a queue enable before the
//! ring base written just before it. nicsim finds writes by comparing the BAR with its shadow,
//! a window at a time, and cannot see in which order two pending writes were made. So before
//! it acts on any write that may read another register, it applies every write still pending,
//! in the order the datasheet's sequences make them: what disables the device's access to
//! memory first, then configuration, then what acts on configuration, each in address order.

use super::Port;
use crate::regs::*;

/// The three steps of [`Port::apply_pending_writes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A queue, receive, transmit or bus mastering turned off: before a ring is reprogrammed
    /// [DS 4.6.7.1.2, 4.6.8.1.2, 8.2.3.7.1].
    Disable,
    /// Everything the device only stores, or derives state from.
    Configure,
    /// What reads other registers when written: a queue enable takes its ring, buffer size,
    /// head write-back and statistics mapping [DS 4.6.7, 4.6.8]; receive and transmit enable
    /// act on the filters and flow control; a reset; an MDIO command takes its data.
    Act,
}

/// Whether a write to `offset` is applied as soon as it is found, without the writes pending
/// elsewhere: its effect reads no register the driver programs. These are the registers a
/// driver writes at run time or a bit at a time (tails, the bit-banged EEPROM and I2C pins,
/// EEPROM reads), and the interrupt registers, which read only each other
/// ([`super::PRIORITY_REGISTERS`] orders them).
pub(super) fn applies_alone(offset: u32) -> bool {
    let canon = alias_of(offset).unwrap_or(offset);
    matches!(canon, EEC | I2CCTL | EERD | EICR | EICS | EIMS | EIMC)
        || matches!(queue_register(canon), Some((_, _, QueueRegister::Tail)))
}

/// The phase of a write of `new` over `old` to the register at `offset`.
fn phase_of(offset: u32, old: u32, new: u32) -> Phase {
    let canon = alias_of(offset).unwrap_or(offset);
    let turns_off = |bit: u32| old & bit != 0 && new & bit == 0;
    match canon {
        CTRL if new & (CTRL_RST | CTRL_LNK_RST) == 0 && new & !old & CTRL_GIO_DIS != 0 => Phase::Disable,
        CTRL | MSCA => Phase::Act,
        RXCTRL if turns_off(RXCTRL_RXEN) => Phase::Disable,
        DMATXCTL if turns_off(DMATXCTL_TE) => Phase::Disable,
        SECRXCTRL if new & !old & SECRXCTRL_RX_DIS != 0 => Phase::Disable,
        RXCTRL | DMATXCTL | SECRXCTRL => Phase::Act,
        _ => match queue_register(canon) {
            // RXDCTL.ENABLE and TXDCTL.ENABLE are the same bit [DS 8.2.3.8.6, 8.2.3.9.10].
            Some((_, _, QueueRegister::Control)) if turns_off(RXDCTL_ENABLE) => Phase::Disable,
            Some((_, _, QueueRegister::Control)) if new & !old & RXDCTL_ENABLE != 0 => Phase::Act,
            _ => Phase::Configure,
        },
    }
}

impl Port {
    /// Applies every write the driver has made that nicsim has not seen yet, phase by phase
    /// (see the module's comment), then derives the data paths again. Returns true after a
    /// reset, which ends it: the reset put every register back.
    ///
    /// It looks twice. A write the first look finds at a high address may have been made after
    /// the look passed a lower one the driver had written just before it; the second look,
    /// made after, finds every write made before any the first one saw. So only the actions
    /// the first look saw are taken, with the values it saw, after the configuration both
    /// found; an action first seen by the second look waits for the next time.
    pub fn apply_pending_writes(&mut self) -> bool {
        if self.virtio.is_some() || self.removed {
            // A virtio port's 82599 registers are nobody's, and a removed card acts on no
            // write: deriving paths from them would, for one, switch its flow control off.
            return false;
        }
        let mut first = std::mem::take(&mut self.first_look);
        first.clear();
        let mut i = 0;
        while let Some(k) = self.bar.first_difference(i * 4, &self.shadow[i..]) {
            let j = i + k;
            first.push((j, self.bar.read_u32(j * 4)));
            if let Some(hook) = self.first_look_hook.as_mut() {
                hook(&self.bar, j);
            }
            i = j + 1;
        }
        let mut pending = std::mem::take(&mut self.pending);
        pending.clear();
        i = 0;
        while let Some(k) = self.bar.first_difference(i * 4, &self.shadow[i..]) {
            pending.push(i + k);
            i += k + 1;
        }
        let ctrl = CTRL as usize / 4;
        let reset_seen = first.iter().find(|&&(j, v)| j == ctrl && v & (CTRL_RST | CTRL_LNK_RST) != 0);
        if let Some(&(_, value)) = reset_seen {
            let written = pending.iter().filter(|&&j| j != ctrl).map(|&j| (j, self.bar.read_u32(j * 4))).collect();
            (self.pending, self.first_look) = (pending, first);
            return self.reset_before(value, written);
        }
        self.applying_pending = true;
        let reset = self.apply_phase(Phase::Disable, &pending)
            || self.apply_phase(Phase::Configure, &pending)
            || self.apply_actions(&first);
        self.applying_pending = false;
        self.pending = pending;
        self.first_look = first;
        self.refresh_paths();
        reset
    }

    /// Takes the reset that CTRL `value` asks for before the other writes found with it
    /// (`written`, dword and value), which then apply as made after it. A driver resets before
    /// it configures [DS 4.6.3], right after waiting for the device to stop mastering [DS
    /// 5.2.5.3.2], so nicsim had seen what came before the reset; one that sleeps after it
    /// instead of polling for CTRL.RST to clear (TinyNF: 11 ms) configures in that sleep, and
    /// an engine kept off its core that long finds the reset and the configuration together.
    fn reset_before(&mut self, value: u32, written: Vec<(usize, u32)>) -> bool {
        self.applying_pending = true;
        self.apply_dword(CTRL as usize / 4, value);
        self.applying_pending = false;
        for (j, v) in written {
            // The reset value is in the BAR now, unless the driver has written the register again.
            let _ = self.bar.compare_exchange_u32(j * 4, self.shadow[j], v);
        }
        self.apply_pending_writes();
        true
    }

    /// Applies, in address order, each of the `pending` dwords whose write is of `phase`
    /// (Disable or Configure), with the value it holds now. True after a reset.
    fn apply_phase(&mut self, phase: Phase, pending: &[usize]) -> bool {
        for &j in pending {
            let new = self.bar.read_u32(j * 4);
            if new != self.shadow[j] && self.phase(j, new) == phase && self.apply_dword(j, new) {
                return true;
            }
        }
        false
    }

    /// Takes, in address order, the actions among `seen` (dword, value). True after a reset.
    fn apply_actions(&mut self, seen: &[(usize, u32)]) -> bool {
        for &(j, new) in seen {
            if new != self.shadow[j] && self.phase(j, new) == Phase::Act && self.apply_dword(j, new) {
                return true;
            }
        }
        false
    }

    fn phase(&self, j: usize, new: u32) -> Phase {
        let offset = (j * 4) as u32;
        phase_of(offset, self.reg(alias_of(offset).unwrap_or(offset)), new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_follow_the_datasheet_sequences() {
        assert_eq!(phase_of(txdctl(18), TXDCTL_ENABLE, 0), Phase::Disable);
        assert_eq!(phase_of(txdctl(18), 0, TXDCTL_ENABLE), Phase::Act);
        assert_eq!(phase_of(rxdctl(70), 0, RXDCTL_ENABLE), Phase::Act);
        assert_eq!(phase_of(tdbal(18), 0, 0x1000), Phase::Configure);
        assert_eq!(phase_of(0x02100 + 4 * 3, 0x402, 0x2000_0402), Phase::Configure, "SRRCTL alias");
        assert_eq!(phase_of(RXCTRL, RXCTRL_RXEN, 0), Phase::Disable);
        assert_eq!(phase_of(RXCTRL, 0, RXCTRL_RXEN), Phase::Act);
        assert_eq!(phase_of(CTRL, 0, CTRL_GIO_DIS), Phase::Disable);
        assert_eq!(phase_of(CTRL, 0, CTRL_GIO_DIS | CTRL_RST), Phase::Act);
        assert_eq!(phase_of(MSCA, 0, 1 << 30), Phase::Act);
        assert!(applies_alone(tdt(127)) && applies_alone(rdt(64)) && applies_alone(I2CCTL));
        assert!(!applies_alone(txdctl(0)) && !applies_alone(tdbal(0)) && !applies_alone(RXCTRL));
    }
}
