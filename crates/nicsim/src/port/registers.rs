//! Driver writes to BAR0 and what the device does with them: self-clearing bits, resets,
//! queue enables, doorbells, read-only bits restored, and lint for what the datasheet forbids.

use super::order::applies_alone;
use super::{Port, RxQueue, DEFAULT_RX_QUEUE};
use crate::lint::Rule;
use crate::regs::*;

/// Dwords of BAR0 examined per [`Port::scan`] call besides the priority registers.
pub const SWEEP_DWORDS: usize = 2048;
/// Registers whose writes have side effects drivers wait for, examined at every scan, in this
/// order. FCTRL comes before RXCTRL: when both changed within one poll, the filter change is
/// judged against the receive-enable state before the poll, so "set filters, then enable"
/// is never reported (a disable-change-enable toggle inside one poll cannot be seen at all).
pub const PRIORITY_REGISTERS: &[u32] =
    &[CTRL, EIMS, EIMC, EICS, EICR, EERD, MSCA, AUTOC, I2CCTL, FCTRL, RXCTRL, SECRXCTRL, DMATXCTL, HLREG0];

impl Port {
    /// Applies what the driver wrote since the last look: the control registers in
    /// [`PRIORITY_REGISTERS`] every call, and the next [`SWEEP_DWORDS`] of the BAR, so a whole
    /// sweep takes `BAR0_DWORDS / SWEEP_DWORDS` calls. Reading all 128 KiB at every call would
    /// cost tens of microseconds of memory bandwidth.
    pub fn scan(&mut self) {
        if self.virtio.is_some() {
            return self.virtio_scan();
        }
        if self.removed {
            self.keep_reading_all_ones();
            return;
        }
        self.advance_link();
        self.scans_since_write = self.scans_since_write.saturating_add(1);
        self.apply_driver_writes();
        self.refresh_paths();
    }

    fn apply_driver_writes(&mut self) {
        self.publish_rx_head();
        if self.config.poll() {
            self.update_status();
        }
        for &offset in PRIORITY_REGISTERS {
            let value = self.bar.read_u32(offset as usize);
            if self.check_dword(offset as usize / 4, value) {
                return;
            }
        }
        self.sweep_differences(|port, j| {
            let value = port.bar.read_u32(j * 4);
            port.check_dword(j, value)
        });
    }

    /// A removed port: undoes what drivers wrote since, one sweep window at a time.
    fn keep_reading_all_ones(&mut self) {
        self.sweep_differences(|port, j| {
            port.bar.write_u32(j * 4, u32::MAX);
            false
        });
        self.config.remove();
    }

    /// Calls `on_difference` with each dword of the next [`SWEEP_DWORDS`] of the BAR that
    /// differs from the shadow, until it returns true.
    fn sweep_differences(&mut self, mut on_difference: impl FnMut(&mut Self, usize) -> bool) {
        let start = self.sweep;
        let end = (start + self.sweep_window).min(BAR0_DWORDS);
        self.sweep = end % BAR0_DWORDS;
        // One pass over BAR and shadow together: the sweep is memory-bound, and a copy into a
        // third array first made it take several microseconds of every scan period.
        let mut i = start;
        while let Some(k) = self.bar.first_difference(i * 4, &self.shadow[i..end]) {
            let j = i + k;
            if on_difference(self, j) {
                return;
            }
            i = j + 1;
        }
    }

    /// Scans the whole BAR at once (tests, and after a reset when nothing else is pending).
    pub fn scan_all(&mut self) {
        // One more window than a sweep needs, for a sweep placed off a window boundary.
        for _ in 0..=BAR0_DWORDS.div_ceil(self.sweep_window) {
            self.scan();
        }
    }

    /// Places the sweep at `offset` and makes each [`Port::scan`] look at `dwords` dwords
    /// besides the priority registers. Tests use it to make certain a race that the engine's
    /// timing makes rare: a driver that writes registers just after the sweep passed them.
    pub fn place_sweep(&mut self, offset: u32, dwords: usize) {
        self.sweep = (offset as usize / 4) % BAR0_DWORDS;
        self.sweep_window = dwords.clamp(1, BAR0_DWORDS);
    }

    /// Handles dword `j` if the driver changed it to `new`. Returns true after a reset.
    /// A write whose effect may read other registers first brings every pending write up to
    /// date ([`Port::apply_pending_writes`]), so the device never acts on a stale register.
    fn check_dword(&mut self, j: usize, new: u32) -> bool {
        if self.shadow[j] == new {
            return false;
        }
        if !self.applying_pending && !applies_alone((j * 4) as u32) {
            return self.apply_pending_writes();
        }
        self.apply_dword(j, new)
    }

    /// Applies the driver's write of `new` to dword `j`. Returns true after a reset.
    pub(super) fn apply_dword(&mut self, j: usize, new: u32) -> bool {
        let old = self.shadow[j];
        self.shadow[j] = new;
        self.scans_since_write = 0;
        let offset = (j * 4) as u32;
        if !self.config.memory_enabled() {
            // A master abort on real hardware: the write never arrives [PCI 3.0 6.2.2].
            self.lint.warn(
                offset,
                new,
                Rule::BarAccessWithoutMemorySpace,
                "BAR0 written while PCI COMMAND.MSE (memory space enable) is 0; the write is dropped".into(),
            );
            self.set_reg(offset, old);
            return false;
        }
        self.on_write(offset, old, new)
    }

    /// Publishes RDH of the enabled receive queues after the receive engine moved them. The
    /// engine calls this once per iteration instead of once per frame: a register store per
    /// frame costs more than the rest of the receive path, and drivers learn of new frames
    /// from DD or head write-back, not from RDH [DS 7.1.9].
    #[inline]
    pub fn publish_rx_head(&mut self) {
        // (A removed port has no queue enabled.)
        for k in 0..self.active_rx.len() {
            let q = self.active_rx[k];
            let head = self.rx[q as usize].head;
            if self.shadow[rdh(q) as usize / 4] != head {
                self.set_reg(rdh(q), head);
            }
        }
    }

    /// Reads the doorbells of enabled queues (called every engine iteration); `true` if the
    /// default RX queue was just enabled and the whole register file applied.
    #[inline]
    pub fn poll_doorbells(&mut self) -> bool {
        if self.virtio.is_some() {
            self.virtio_poll();
            return false;
        }
        if self.removed {
            return false;
        }
        let mut rescanned = false;
        let default = DEFAULT_RX_QUEUE;
        if !self.rx[default as usize].enabled {
            // A driver that sets RXDCTL.ENABLE and polls for it reads its own store back at
            // once, before the device has seen it (a plain memory read cannot be intercepted).
            // Looking at the RXDCTL of the queue frames go to every iteration shrinks that
            // window to well under a microsecond, so frames that arrive after the driver's
            // bring-up find the queue enabled, as on hardware [DS 4.6.7.1]. The enable applies
            // every pending write first, the ring among them.
            rescanned = self.apply_if_changed(rxdctl(default));
        }
        self.poll_queue_controls();
        // A reset is polled for 10 x 1 µs by DPDK's ixgbe_reset_hw_82599, which fails the port's
        // start if CTRL.RST is still set [DS 4.6.3.2: the reset completes in about a microsecond].
        self.apply_if_changed(CTRL);
        // Bit-banged buses are clocked every microsecond or so: answered every iteration.
        self.apply_if_changed(I2CCTL);
        self.apply_if_changed(EEC);
        for k in 0..self.active_rx.len() {
            let q = self.active_rx[k];
            if let Some(t) = self.doorbell(rdt(q)) {
                self.set_rx_tail(q, t);
            }
        }
        rescanned
    }

    /// Reads the transmit tails of enabled queues. The engine calls it for every port after
    /// [`Self::poll_doorbells`] of every port: a tail is never older than a receive tail
    /// written after it, on any port. The card sees a driver's writes in the order made; a
    /// driver that writes TDT on one port and then RDT on another (TinyNF's agents do, from
    /// the head the device wrote back) may rely on it: acting on the RDT without the TDT lets
    /// it fill a ring whose transmit work the device has not seen (docs/nicsim.md, "Doorbell
    /// intervals").
    pub fn poll_tx_doorbells(&mut self) {
        if self.virtio.is_some() || self.removed {
            return;
        }
        for k in 0..self.active_tx.len() {
            let q = self.active_tx[k];
            if let Some(t) = self.doorbell(tdt(q)) {
                self.set_tx_tail(q, t);
            }
        }
    }

    /// Applies a change of RXDCTL or TXDCTL of an enabled queue at once. A driver that
    /// disables a queue reads its own store back as "stopped" and may program the ring again
    /// and re-enable it within microseconds: left to the sweep, the toggle would go unseen and
    /// the head it writes meanwhile would be refused as written while enabled. The control
    /// registers share a cache line with the tails read here, so this costs little.
    #[inline(always)]
    fn poll_queue_controls(&mut self) {
        // By index: applying a disable removes the queue from its list.
        let mut k = 0;
        while k < self.active_rx.len() {
            self.apply_if_changed(rxdctl(self.active_rx[k]));
            k += 1;
        }
        let mut k = 0;
        while k < self.active_tx.len() {
            self.apply_if_changed(txdctl(self.active_tx[k]));
            k += 1;
        }
    }

    /// A driver's store of `value` to `offset`, taken at once: stored in BAR0 and applied with
    /// every write still pending, as the next look would, but before the store returns to a
    /// driver whose accesses to it are served one by one (`nicsim exec`).
    pub fn write_register_now(&mut self, offset: u32, value: u32) -> Result<(), String> {
        if offset % 4 != 0 || offset as usize >= BAR0_LEN {
            return Err(format!("register offset {offset:#x} is not a dword of BAR0 (0..{BAR0_LEN:#x})"));
        }
        if self.virtio.is_some() || self.removed {
            return Err(format!("port {} has no 82599 registers to write", self.index));
        }
        self.bar.write_u32(offset as usize, value);
        self.apply_if_changed(offset);
        Ok(())
    }

    /// Applies the register at `offset` if the driver changed it since the last look; true if
    /// it had.
    #[inline(always)]
    fn apply_if_changed(&mut self, offset: u32) -> bool {
        let j = offset as usize / 4;
        let value = self.bar.read_u32(j * 4);
        let changed = value != self.shadow[j];
        if changed {
            self.check_dword(j, value);
        }
        changed
    }

    /// The tail register at `offset` if the driver changed it since the last look.
    #[inline(always)]
    fn doorbell(&mut self, offset: u32) -> Option<u32> {
        let t = self.bar.read_u32(offset as usize);
        let seen = &mut self.shadow[offset as usize / 4];
        (t != *seen).then(|| {
            *seen = t;
            t
        })
    }

    /// Reacts to a driver write of `new` over `old` at `offset`. Returns true after a reset.
    fn on_write(&mut self, offset: u32, old: u32, new: u32) -> bool {
        let canon = alias_of(offset).unwrap_or(offset);
        let old = if canon != offset { self.reg(canon) } else { old };
        let mut value = new;
        if let Some(s) = spec_of(canon) {
            if s.read_only & (old ^ new) != 0 {
                value = (new & !s.read_only) | (old & s.read_only);
            }
            let changed_reserved = (value ^ old) & s.reserved;
            if changed_reserved != 0 && (value ^ s.reset) & s.reserved != 0 {
                self.lint.warn(
                    canon,
                    value,
                    Rule::ReservedBits,
                    {
                        let differ = (value ^ s.reset) & s.reserved;
                        format!(
                            "reserved bits {differ:#010x} written as {:#010x}, not as their reset value {:#010x} [DS {}: reserved bits must be written as read]",
                            value & differ,
                            s.reset & differ,
                            s.section
                        )
                    },
                );
            }
        }
        match canon {
            CTRL => {
                if value & CTRL_LNK_RST != 0 {
                    self.reset_with_link();
                    return true;
                }
                if value & CTRL_RST != 0 {
                    self.reset();
                    return true;
                }
                // Master disable stays set until the next reset [DS 5.2.5.3.2]; STATUS.GIO follows.
                value |= old & CTRL_GIO_DIS;
                self.store(canon, offset, new, value);
                self.update_status();
                return false;
            }
            EIMS => value |= old, // write 1 sets, 0 has no effect [DS 8.2.3.5.3]
            EIMC => {
                let eims = self.reg(EIMS) & !new;
                self.set_reg(EIMS, eims);
                value = 0; // write-only
            }
            EICS => {
                let eicr = self.reg(EICR) | new;
                self.set_reg(EICR, eicr);
                value = 0;
            }
            EICR => value = old & !new, // write 1 to clear
            EERD if new & 1 != 0 => {
                // EEPROM read: data in 31:16, DONE (bit 1), START cleared [DS 8.2.3.2.2].
                let addr = (new >> 2) & 0x3FFF;
                let data = self.eeprom.get(addr as usize).copied().unwrap_or(0xFFFF);
                value = (u32::from(data) << 16) | (addr << 2) | 0b10;
            }
            MSCA if new & (1 << 30) != 0 => {
                // MDIO command completes at once; no PHY answers (an SFP+ port has no MDIO PHY).
                value = new & !(1 << 30);
                let w = self.reg(MSRWD);
                self.set_reg(MSRWD, 0xFFFF_0000 | (w & 0xFFFF));
            }
            AUTOC => {
                // Self-clearing; the link stays up. The arbitration state machine leaves its
                // idle state at once (an SFI link partner is always there).
                if value & AUTOC_AN_RESTART != 0 {
                    self.set_reg(ANLP1, (self.reg(ANLP1) & !ANLP1_AN_STATE_MASK) | (1 << 16));
                }
                value &= !AUTOC_AN_RESTART;
            }
            EEC | I2CCTL => {
                self.drive_serial_pins(canon, new, value);
                return false;
            }
            // Promiscuous and all-multicast are switched at run time by Linux (set_rx_mode) and
            // DPDK (promiscuous_enable), receive enabled: only the other bits count.
            FCTRL if (old ^ value) & !(FCTRL_UPE | FCTRL_MPE) != 0 && self.reg(RXCTRL) & RXCTRL_RXEN != 0 => self.lint.warn(
                FCTRL,
                value,
                Rule::FctrlWhileRxEnabled,
                "FCTRL changed while RXCTRL.RXEN = 1 [DS 8.2.3.7.1: change filter control only while receive is disabled]".into(),
            ),
            // Where frames go changes at once [DS 7.1.2.8].
            _ if is_rss_register(canon) => {
                self.store(canon, offset, new, value);
                self.update_rss();
                return false;
            }
            _ if RAR_RANGE.contains(&canon) => {
                self.store(canon, offset, new, value);
                self.rebuild_rar();
                return false;
            }
            // The mapping applies at once, also to enabled queues [DS 8.2.3.8.9, 8.2.3.9.14].
            _ if QUEUE_STATISTICS_MAPS.iter().any(|m| m.contains(&canon)) => {
                self.store(canon, offset, new, value);
                self.map_queue_statistics();
                return false;
            }
            _ => self.on_queue_write(canon, old, &mut value),
        }
        self.store(canon, offset, new, value);
        false
    }

    /// EEC's EEPROM pins or I2CCTL's two-wire bus changed: the device answers on the input
    /// bits. The driver clocks these a bit per microsecond and may write again while nicsim
    /// answers, so the answer replaces only the value it answers ([`Port::publish_inputs`]).
    fn drive_serial_pins(&mut self, canon: u32, written: u32, value: u32) {
        let answer = if canon == EEC {
            // The grant comes at once: no firmware competes for the EEPROM [DS 8.2.3.2.1].
            let granted = value & EEC_REQ != 0;
            let dout =
                granted && self.spi.drive(&self.eeprom, value & EEC_SK != 0, value & EEC_CS != 0, value & EEC_DI != 0);
            (value & !(EEC_GNT | EEC_DO)) | if granted { EEC_GNT } else { 0 } | if dout { EEC_DO } else { 0 }
        } else {
            let (scl, sda) = self.sfp.drive(value & I2CCTL_SCL_OUT != 0, value & I2CCTL_SDA_OUT != 0);
            (value & !(I2CCTL_SCL_IN | I2CCTL_SDA_IN))
                | if scl { I2CCTL_SCL_IN } else { 0 }
                | if sda { I2CCTL_SDA_IN } else { 0 }
        };
        self.publish_inputs(canon, written, answer);
    }

    fn store(&mut self, canon: u32, offset: u32, written: u32, value: u32) {
        if value != written || canon != offset || alias_for(canon).is_some() {
            self.set_reg(canon, value);
        }
    }

    /// A write to a register of a queue's block [DS 8.2.3.8, 8.2.3.9]; `value` is what is
    /// stored, changed where the device keeps its own (the head of an enabled queue).
    fn on_queue_write(&mut self, canon: u32, old: u32, value: &mut u32) {
        let Some((direction, q, register)) = queue_register(canon) else { return };
        let i = q as usize;
        // RXDCTL.ENABLE and TXDCTL.ENABLE are the same bit [DS 8.2.3.8.6, 8.2.3.9.10].
        let enabling = *value & RXDCTL_ENABLE != 0 && old & RXDCTL_ENABLE == 0;
        let disabling = *value & RXDCTL_ENABLE == 0 && old & RXDCTL_ENABLE != 0;
        match (direction, register) {
            (Direction::Rx, QueueRegister::Head) => {
                let rq = self.rx[i];
                if rq.enabled && *value != rq.head {
                    self.lint.warn(canon, *value, Rule::HeadWrittenWhileEnabled, "RDH changed while the queue is enabled; ignored [DS 8.2.3.8.4: write RDH only while the queue is disabled]".into());
                    *value = rq.head;
                }
            }
            (Direction::Tx, QueueRegister::Head) => {
                let (enabled, head) = (self.tx[i].enabled, self.tx[i].head);
                if enabled && *value != head {
                    self.lint.warn(canon, *value, Rule::HeadWrittenWhileEnabled, "TDH changed while the queue is enabled; ignored [DS 8.2.3.9.8: write TDH only while the queue is disabled]".into());
                    *value = head;
                }
            }
            (Direction::Rx, QueueRegister::SplitReceiveControl) if self.rx[i].enabled => self.apply_srrctl(q, *value),
            (Direction::Rx, QueueRegister::Tail) => self.set_rx_tail(q, *value),
            (Direction::Tx, QueueRegister::Tail) => self.set_tx_tail(q, *value),
            (Direction::Rx, QueueRegister::Control) if enabling => self.enable_rx(q),
            (Direction::Rx, QueueRegister::Control) if disabling => {
                self.rx[i].enabled = false;
                self.active_rx.retain(|&a| a != q);
            }
            (Direction::Tx, QueueRegister::Control) => {
                *value &= !TXDCTL_SWFLSH; // self-clearing
                if enabling {
                    self.enable_tx(q, *value);
                } else if disabling {
                    self.tx[i].enabled = false;
                    self.active_tx.retain(|&a| a != q);
                }
            }
            (Direction::Tx, QueueRegister::HeadWriteBackLow) if self.tx[i].enabled => {
                self.apply_head_wb(q, *value, self.reg(tdwbah(q)));
            }
            (Direction::Tx, QueueRegister::HeadWriteBackHigh) if self.tx[i].enabled => {
                self.apply_head_wb(q, self.reg(tdwbal(q)), *value);
            }
            _ => {}
        }
    }

    /// The ring of queue `q` as its registers describe it: base address and descriptors, with
    /// lint for what the datasheet forbids; read when the queue is enabled.
    fn ring_geometry(&mut self, direction: Direction, q: u32) -> (u64, u32) {
        let (lo, hi, len, enable_reg) = match direction {
            Direction::Rx => (rdbal(q), rdbah(q), rdlen(q), rxdctl(q)),
            Direction::Tx => (tdbal(q), tdbah(q), tdlen(q), txdctl(q)),
        };
        let len_reg = len;
        let (base_lo, len) = (self.reg(lo), self.reg(len));
        let base = (u64::from(self.reg(hi)) << 32) | u64::from(base_lo);
        let what = format!("{} queue {q}", direction.to_string().to_uppercase());
        if base == 0 || len == 0 {
            self.lint.warn(
                enable_reg,
                self.reg(enable_reg),
                Rule::QueueEnabledBeforeRing,
                format!("{what} enabled before its ring base and length were programmed [DS 4.6.7 / 4.6.8: program the ring, then enable the queue]"),
            );
        }
        if !self.config.bus_master() {
            self.lint.warn(
                enable_reg,
                self.reg(enable_reg),
                Rule::DmaWithoutBusMaster,
                format!("{what} enabled while PCI COMMAND.BME (bus master enable) is 0; the device cannot reach its ring until it is set [PCI 3.0 6.2.2]"),
            );
        }
        if base % 128 != 0 {
            // The full base is used anyway: real parts accepted TinyNF's 64-byte-aligned rings.
            self.lint.warn(
                lo,
                base_lo,
                Rule::RingBaseAlignment,
                format!("{what} ring base {base:#x} is not 128-byte aligned [DS 8.2.3.8.1 / 8.2.3.9.5]"),
            );
        }
        if len % 128 != 0 || len > 0x80000 {
            self.lint.warn(
                len_reg,
                len,
                Rule::RingLength,
                format!(
                    "{what} ring length {len} is not a multiple of 128 bytes up to 512 KiB [DS 8.2.3.8.3 / 8.2.3.9.7]"
                ),
            );
        }
        (base, len / 16)
    }

    /// A head or tail register as the driver last left it, for a queue being enabled: what
    /// the BAR holds now, which the sweep may not have reached yet (a driver that re-enables
    /// a queue writes its head back to 0 just before [DS 8.2.3.8.4, 8.2.3.9.8]).
    fn latest(&mut self, offset: u32) -> u32 {
        let value = self.bar.read_u32(offset as usize);
        self.shadow[offset as usize / 4] = value;
        value
    }

    /// RXDCTL.ENABLE set: the queue takes its ring from the registers [DS 4.6.7.1].
    fn enable_rx(&mut self, q: u32) {
        let (base, size) = self.ring_geometry(Direction::Rx, q);
        let (head, tail) = (self.latest(rdh(q)), self.latest(rdt(q)));
        let rq = &mut self.rx[q as usize];
        *rq = RxQueue {
            enabled: true,
            faulted: false,
            base,
            size,
            head: if head < size { head } else { 0 },
            tail: if tail < size { tail } else { 0 },
            // The base may have changed since the queue was last enabled.
            ring: None,
            ..*rq
        };
        self.apply_srrctl(q, self.reg(srrctl(q)));
        let head = self.rx[q as usize].head;
        self.set_reg(rdh(q), head);
        if !self.active_rx.contains(&q) {
            self.active_rx.push(q);
        }
        self.queue_enables += 1;
    }

    /// RQSMR and TQSM: which of the 16 queue counter sets each queue counts in.
    pub(super) fn map_queue_statistics(&mut self) {
        let set = |map: u32, q: usize| ((map >> (8 * (q % 4))) & 0xF) as usize;
        for q in 0..QUEUES {
            self.rx[q].stat = set(self.reg(rqsmr(q as u32 / 4)), q);
            self.tx[q].stat = set(self.reg(tqsm(q as u32 / 4)), q);
        }
    }

    /// SRRCTL: buffer size, descriptor type and DROP_EN [DS 8.2.3.8.7].
    pub(super) fn apply_srrctl(&mut self, q: u32, s: u32) {
        let kb = (s & SRRCTL_BSIZEPACKET_MASK) as usize;
        let rq = &mut self.rx[q as usize];
        rq.advanced = (s & SRRCTL_DESCTYPE_MASK) >> SRRCTL_DESCTYPE_SHIFT != 0;
        rq.buf_size = if kb == 0 { 2048 } else { kb * 1024 };
        rq.drop_en = s & SRRCTL_DROP_EN != 0;
    }

    /// TXDCTL.ENABLE set: the queue takes its ring from the registers [DS 4.6.8].
    fn enable_tx(&mut self, q: u32, txdctl_value: u32) {
        let (base, size) = self.ring_geometry(Direction::Tx, q);
        let (head, tail) = (self.latest(tdh(q)), self.latest(tdt(q)));
        let tq = &mut self.tx[q as usize];
        tq.enabled = true;
        tq.faulted = false;
        tq.base = base;
        tq.size = size;
        tq.head = if head < size { head } else { 0 };
        tq.tail = if tail < size { tail } else { 0 };
        tq.wthresh = (txdctl_value >> TXDCTL_WTHRESH_SHIFT) & 0x7F;
        tq.frame.clear();
        tq.frame_bad = false;
        tq.ring_seen = false;
        tq.ring = None;
        let head = tq.head;
        self.apply_head_wb(q, self.reg(tdwbal(q)), self.reg(tdwbah(q)));
        self.set_reg(tdh(q), head);
        if !self.active_tx.contains(&q) {
            self.active_tx.push(q);
        }
        self.queue_enables += 1;
    }

    fn apply_head_wb(&mut self, q: u32, lo: u32, hi: u32) {
        let addr = (u64::from(hi) << 32) | u64::from(lo & !3);
        self.tx[q as usize].head_wb = (lo & TDWBAL_HEAD_WB_EN != 0).then_some(addr);
        if lo & TDWBAL_HEAD_WB_EN != 0 && addr % 16 != 0 {
            // Written anyway, although real parts ignore such addresses (see docs/nicsim.md).
            self.lint.warn(tdwbal(q), lo, Rule::HeadWriteBackAlignment, format!("head write-back address {addr:#x} is not 16-byte aligned; real 82599s do not write it back [DS 7.2.3.5.2; docs/nicsim.md, lint rules]"));
        }
    }

    fn set_rx_tail(&mut self, q: u32, value: u32) {
        let rq = &mut self.rx[q as usize];
        if !rq.enabled {
            return; // stored; read when the queue is enabled
        }
        if value >= rq.size {
            let size = rq.size;
            self.lint.warn(
                rdt(q),
                value,
                Rule::TailOutsideRing,
                format!("RDT {value} is outside the ring of {size} descriptors; ignored [DS 7.1.9]"),
            );
            return;
        }
        rq.tail = value;
    }

    fn set_tx_tail(&mut self, q: u32, value: u32) {
        let tq = &mut self.tx[q as usize];
        if !tq.enabled {
            return;
        }
        if value >= tq.size {
            let size = tq.size;
            self.lint.warn(
                tdt(q),
                value,
                Rule::TailOutsideRing,
                format!("TDT {value} is outside the ring of {size} descriptors; ignored [DS 7.2.3.3]"),
            );
            return;
        }
        tq.tail = value;
    }
}
