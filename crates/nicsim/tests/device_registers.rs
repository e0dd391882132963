//! The device model's registers: reset, write semantics, master disable, lint, queue enables,
//! the link.
//! A "driver" writes the BAR through a second mapping of the same file (see common/rig.rs).

use crate::common;

use common::rig::*;
use nicsim::lint::Rule;
use nicsim::port::EICR_LSC;
use nicsim::regs::*;
use std::time::{Duration, Instant};

#[test]
fn reset_values_and_self_clearing_reset() {
    let mut r = Rig::new();
    assert_eq!(r.rd(EEC) & 0x300, 0x300, "EEPROM present and auto-read done");
    assert_eq!(r.rd(ANLP1) & ANLP1_AN_STATE_MASK, 0, "AN idle until restarted");
    assert_eq!(r.rd(RDRXCTL) & RDRXCTL_DMAIDONE, RDRXCTL_DMAIDONE);
    assert_eq!(r.rd(HLREG0), 0x0801_2C0B);
    assert_eq!(r.rd(LINKS) & (0b111 << 28), 0b111 << 28, "link up at 10 Gb/s");
    assert_eq!(r.rd(SECRXSTAT) & 1, 1);
    assert_eq!(r.rd(srrctl(5)), 0x402);
    assert_eq!(r.rd(0x02100 + 4 * 5), 0x402, "SRRCTL alias shares storage");
    assert_eq!((r.rd(ral(0)), r.rd(rah(0))), (0x0000_0002, 0x8000_0000), "MAC 02:00:00:00:00:00 valid");
    assert_eq!(r.rd(0x05400), 2, "RAL(0) alias");
    r.wr(HLREG0, 0);
    r.wr(srrctl(0), 0x1234_0002 & !0xE000_0000);
    r.wr(CTRL, CTRL_RST);
    assert_eq!(r.rd(CTRL) & CTRL_RST, 0, "RST self-clears");
    assert_eq!(r.rd(HLREG0), 0x0801_2C0B, "registers back to reset values");
    assert_eq!(r.rd(srrctl(0)), 0x402);
    r.wr(CTRL, CTRL_LNK_RST);
    assert_eq!(r.rd(CTRL), 0, "LNK_RST is a full reset too");
    assert_eq!(r.port.resets, 2);
}

#[test]
fn read_only_bits_and_write_semantics() {
    let mut r = Rig::new();
    r.wr(STATUS, 0);
    assert_ne!(r.rd(STATUS) & STATUS_LINK_UP, 0, "STATUS is read-only");
    r.wr(EEC, 0);
    assert_eq!(r.rd(EEC) & 0x300, 0x300, "EEC PRES/ARD are read-only");
    r.wr(RDRXCTL, 0);
    assert_eq!(r.rd(RDRXCTL) & RDRXCTL_DMAIDONE, RDRXCTL_DMAIDONE);
    r.wr(GPRC, 1234);
    assert_eq!(r.rd(GPRC), 0, "statistics are not writable");
    r.wr(EIMS, 0b1010);
    r.wr(EIMS, 0);
    assert_eq!(r.rd(EIMS), 0b1010, "EIMS: writing 0 has no effect");
    r.wr(EIMC, 0b0010);
    assert_eq!((r.rd(EIMS), r.rd(EIMC)), (0b1000, 0), "EIMC clears and reads 0");
    r.wr(AUTOC, r.rd(AUTOC) | AUTOC_AN_RESTART);
    assert_eq!(r.rd(AUTOC) & AUTOC_AN_RESTART, 0, "AN_RESTART self-clears");
    assert_ne!(r.rd(ANLP1) & ANLP1_AN_STATE_MASK, 0, "AN left its idle state");
    r.wr(EERD, (0x3F << 2) | 1);
    let eerd = r.rd(EERD);
    assert_eq!(eerd & 0b11, 0b10, "DONE set, START clear");
    let words: u32 = (0..0x40u32)
        .map(|a| {
            r.wr(EERD, (a << 2) | 1);
            r.rd(EERD) >> 16
        })
        .sum();
    assert_eq!(words & 0xFFFF, 0xBABA, "EEPROM checksum is valid");
    r.wr(0x02100, 0x0200_0402);
    assert_eq!(r.rd(srrctl(0)), 0x0200_0402, "a write through the alias reaches the register");
    r.wr(txdctl(3), TXDCTL_SWFLSH);
    assert_eq!(r.rd(txdctl(3)) & TXDCTL_SWFLSH, 0, "SWFLSH self-clears");
}

#[test]
fn master_disable_drops_status_gio() {
    let mut r = Rig::new();
    assert_ne!(r.rd(STATUS) & STATUS_GIO, 0);
    r.wr(CTRL, CTRL_GIO_DIS);
    assert_eq!(r.rd(STATUS) & STATUS_GIO, 0);
    r.wr(CTRL, 0);
    assert_ne!(r.rd(CTRL) & CTRL_GIO_DIS, 0, "GIO_DIS holds until reset");
    r.wr(CTRL, CTRL_RST);
    assert_ne!(r.rd(STATUS) & STATUS_GIO, 0);
}

#[test]
fn lint_reserved_bits_fctrl_and_ring_rules() {
    let mut r = Rig::new();
    assert!(r.lint_rules().is_empty());
    r.wr(EIMC, 0xFFFF_FFFF); // write-only: Linux, DPDK and ixy's C write all ones, rightly
    r.wr(DMATXCTL, 0x1); // clears reserved bits 2:1 (ixy does this)
    r.wr(RXCTRL, RXCTRL_RXEN);
    r.wr(FCTRL, FCTRL_UPE); // promiscuous at run time, as Linux and DPDK switch it: fine
    assert!(!r.lint_rules().contains(&Rule::FctrlWhileRxEnabled), "{:?}", r.port.lint.entries());
    r.wr(FCTRL, FCTRL_UPE | (1 << 1)); // store bad packets, receive enabled: not fine
    r.wr(rdt(0), 3); // tail of a disabled queue: stored only
    r.wr(rxdctl(0), RXDCTL_ENABLE); // no ring programmed
    r.wr(tdbal(1), (DMA_BASE + 0x40) as u32); // not 128-byte aligned
    r.wr(tdlen(1), 1000); // not a multiple of 128
    r.wr(txdctl(1), TXDCTL_ENABLE);
    r.wr(tdt(1), 5000); // outside a ring of 62 descriptors
    let rules = r.lint_rules();
    for want in [
        Rule::ReservedBits,
        Rule::FctrlWhileRxEnabled,
        Rule::QueueEnabledBeforeRing,
        Rule::RingBaseAlignment,
        Rule::RingLength,
        Rule::TailOutsideRing,
    ] {
        assert!(rules.contains(&want), "missing {want} in {rules:?}");
    }
    let of = |rule: Rule| -> Vec<(String, String)> {
        r.port
            .lint
            .entries()
            .iter()
            .filter(|w| w.rule == rule)
            .map(|w| (w.register.clone(), w.message.clone()))
            .collect()
    };
    let reserved = of(Rule::ReservedBits);
    assert_eq!(reserved.len(), 1, "DMATXCTL, not the write-only EIMC: {reserved:?}");
    assert_eq!(reserved[0].0, "DMATXCTL");
    assert!(reserved[0].1.contains("written as 0x00000000, not as their reset value 0x00000004"), "{reserved:?}");
    // Ring warnings name the register that holds the offending value.
    assert_eq!(of(Rule::RingBaseAlignment)[0].0, "TDBAL(1)");
    assert_eq!(of(Rule::RingLength)[0].0, "TDLEN(1)");
    assert_eq!(of(Rule::QueueEnabledBeforeRing)[0].0, "RXDCTL(0)");
    let msg = &r.port.lint.entries().iter().find(|w| w.rule == Rule::FctrlWhileRxEnabled).unwrap().message;
    assert!(msg.contains("8.2.3.7.1"), "cites the datasheet: {msg}");
    // A repeated warning shows its latest value and message together.
    r.wr(tdt(1), 6000);
    let tail = r.port.lint.entries().iter().find(|w| w.rule == Rule::TailOutsideRing).unwrap().clone();
    assert_eq!((tail.value, tail.count), (6000, 2));
    assert!(tail.message.contains("TDT 6000"), "{}", tail.message);
}

/// What Linux's ixgbe and DPDK's ixgbe PMD write while they bring an 82599 up (from their
/// public sources), and what they switch at run time: lint must say nothing of it.
#[test]
fn the_init_writes_of_linux_and_dpdk_raise_no_lint() {
    let mut r = Rig::new();
    let rmw = |r: &mut Rig, reg: u32, set: u32, clear: u32| {
        let v = (r.rd(reg) & !clear) | set;
        r.wr(reg, v);
    };
    r.wr(EIMC, 0xFFFF_0000); // Linux ixgbe_irq_disable on the 82599
    r.wr(EIMC, 0xFFFF_FFFF); // DPDK
    r.wr(CTRL, CTRL_RST | CTRL_LNK_RST); // ixy and DPDK's MAC reset
    rmw(&mut r, HLREG0, HLREG0_TXCRCEN | HLREG0_TXPADEN | HLREG0_RXCRCSTRP, HLREG0_LPBK);
    // RDRXCTL: CRCSTRIP, RSCACKC, FCOE_WRFIX set, RSCFRSTSIZE cleared (ixgbe_setup_rdrxctl).
    rmw(&mut r, RDRXCTL, (1 << 1) | (1 << 25) | (1 << 26), 0x1F << 17);
    r.wr(FCTRL, FCTRL_BAM | (1 << 12) | (1 << 13)); // BAM, PMCF, DPF with receive off
                                                    // RX queue 0: 128-byte aligned ring, SRRCTL as one plain write (2 KiB buffers, 256-byte
                                                    // header size, advanced one-buffer descriptors, DROP_EN).
    r.wr(rdbal(0), DMA_BASE as u32);
    r.wr(rdbah(0), 0);
    r.wr(rdlen(0), 512 * 16);
    r.wr(srrctl(0), 2 | (256 << 2) | (1 << 25) | SRRCTL_DROP_EN);
    r.wr(rdh(0), 0);
    r.wr(rdt(0), 0);
    rmw(&mut r, rxdctl(0), RXDCTL_ENABLE, 0);
    r.wr(rdt(0), 511);
    // TX queue 0: thresholds as Linux (PTHRESH 32, HTHRESH 1, WTHRESH 1), then enabled.
    r.wr(tdbal(0), (DMA_BASE + 0x8000) as u32);
    r.wr(tdbah(0), 0);
    r.wr(tdlen(0), 512 * 16);
    r.wr(tdh(0), 0);
    r.wr(tdt(0), 0);
    r.wr(txdctl(0), 32 | (1 << 8) | (1 << 16));
    rmw(&mut r, DMATXCTL, DMATXCTL_TE, 0);
    rmw(&mut r, txdctl(0), TXDCTL_ENABLE, 0);
    rmw(&mut r, RXCTRL, RXCTRL_RXEN | (1 << 1), 0); // DPDK sets DMBYPS too
                                                    // Interrupts on: IXGBE_EIMS_ENABLE_MASK without the queue bits (LSC, TCP timer, OTHER).
    r.wr(EIMS, (1 << 20) | (1 << 30) | (1 << 31));
    // At run time: promiscuous and all-multicast on and off.
    rmw(&mut r, FCTRL, FCTRL_UPE | FCTRL_MPE, 0);
    rmw(&mut r, FCTRL, 0, FCTRL_UPE);
    assert!(r.lint_rules().is_empty(), "{:#?}", r.port.lint.entries());
}

#[test]
fn a_correct_bring_up_has_no_lint() {
    let mut r = Rig::new();
    r.wr(EIMC, 0x7FFF_FFFF);
    r.rx_ring(64, true, true);
    r.tx_ring(0, 64, None);
    r.wr(rdt(0), 63);
    assert!(r.lint_rules().is_empty(), "{:?}", r.port.lint.entries());
}

#[test]
fn bar_writes_without_memory_space_are_dropped() {
    let mut r = Rig::new();
    r.cfg.write_u16(4, 0);
    r.wr(HLREG0, 0);
    assert_eq!(r.rd(HLREG0), 0x0801_2C0B);
    assert!(r.lint_rules().contains(&Rule::BarAccessWithoutMemorySpace));
}

#[test]
fn a_queue_enabled_without_bus_mastering_is_reported() {
    let mut r = Rig::new();
    r.cfg.write_u16(4, 0b010); // memory space, no bus master
    r.sync();
    r.rx_ring(64, true, true);
    assert!(r.lint_rules().contains(&Rule::DmaWithoutBusMaster), "{:?}", r.port.lint.entries());
}

#[test]
fn a_queue_enabled_again_uses_its_new_ring() {
    let mut r = Rig::new();
    r.rx_ring(8, false, true);
    r.wr(rdt(0), 7);
    r.port.receive(&mut r.dma, &frame(100, 1));
    // The driver stops the queue, gives it a ring elsewhere and starts it again.
    r.wr(rxdctl(0), 0);
    let ring = 0x4000;
    for i in 0..8u64 {
        r.mem().write_u64(ring + i as usize * 16, DMA_BASE + 0x30000 + i * 2048);
        r.mem().write_u64(ring + i as usize * 16 + 8, 0);
    }
    r.wr(rdbal(0), (DMA_BASE + ring as u64) as u32);
    r.wr(rdh(0), 0);
    r.wr(rxdctl(0), RXDCTL_ENABLE);
    r.wr(rdt(0), 7);
    let f = frame(80, 2);
    r.port.receive(&mut r.dma, &f);
    let mut got = vec![0u8; 80];
    r.mem().read_bytes(0x30000, &mut got);
    assert_eq!(got, f, "the frame is in the new ring's first buffer");
    assert_eq!((r.mem().read_u64(ring + 8) >> 32) & 1, 1, "DD in the new ring");
    assert_eq!(r.mem().read_u64(16 + 8), 0, "the old ring is left alone");
}

/// LINKS bits 30 (Link Up) and 7 (Link Status) [DS 8.2.3.22.20].
const LINKS_UP_BITS: u32 = (1 << 30) | (1 << 7);

/// Waits (through the slow path) until the link is up, at most `limit`; returns how long.
fn until_link_up(r: &mut Rig, limit: Duration) -> Duration {
    let start = Instant::now();
    while r.rd(LINKS) & LINKS_UP_BITS != LINKS_UP_BITS {
        assert!(start.elapsed() < limit, "link up within {limit:?}");
        std::thread::sleep(Duration::from_millis(1));
        r.sync();
    }
    start.elapsed()
}

#[test]
fn the_link_comes_up_after_setup_and_follows_resets_and_the_cable() {
    let setup = Duration::from_millis(30);
    let mut r = Rig::new();
    r.port.set_link_setup(setup);
    let down = |r: &Rig| r.rd(LINKS) & LINKS_UP_BITS == 0 && r.rd(STATUS) & STATUS_LINK_UP == 0;
    assert!(down(&r), "down while link setup runs: LINKS {:#x}", r.rd(LINKS));
    let took = until_link_up(&mut r, Duration::from_secs(5));
    assert!(took >= setup - Duration::from_millis(2), "not before setup completes: {took:?}");
    assert_ne!(r.rd(STATUS) & STATUS_LINK_UP, 0);
    assert_ne!(r.rd(EICR) & EICR_LSC, 0, "link status change");
    // (Writing back the 1 that EICR holds, to clear it, changes nothing nicsim can see.)

    // A software reset keeps the link; a link reset restarts it.
    r.wr(CTRL, CTRL_RST);
    assert_eq!(r.rd(LINKS) & LINKS_UP_BITS, LINKS_UP_BITS, "CTRL.RST leaves the link up");
    r.wr(CTRL, CTRL_LNK_RST);
    assert_eq!(r.rd(CTRL) & CTRL_LNK_RST, 0, "self-clearing");
    assert!(down(&r), "CTRL.LNK_RST takes the link down");
    until_link_up(&mut r, Duration::from_secs(5));

    // The cable out: down at once, with LSC, and nothing is sent; back in: up after setup.
    let ring = r.tx_ring(0, 8, None);
    // Write 1 to clear, with a bit more so that the write differs from what EICR holds.
    r.wr(EICR, EICR_LSC | 1);
    assert_eq!(r.rd(EICR) & EICR_LSC, 0, "LSC cleared");
    r.port.set_cable(false);
    assert!(down(&r) && r.rd(EICR) & EICR_LSC != 0);
    r.mem().write_bytes(0x20000, &frame(60, 1));
    r.mem().write_u64(ring, DMA_BASE + 0x20000);
    r.mem().write_u64(ring + 8, 60 | (0b1011 << 24));
    r.wr(tdt(0), 1);
    assert!(r.transmit().is_empty(), "nothing leaves a port without link");
    r.sync();
    assert!(down(&r), "no link without the cable, however long: LINKS {:#x}", r.rd(LINKS));
    r.port.set_cable(true);
    until_link_up(&mut r, Duration::from_secs(5));
    assert_eq!(r.transmit().len(), 1, "the queued frame leaves once the link is up");
}

/// EEC's grant and bit-banged serial interface, driven as `ixgbe_read_eeprom_bit_bang_generic`
/// in Linux and DPDK does: request, grant, status poll, READ with a 16-bit byte address.
#[test]
fn the_eeprom_is_granted_and_reads_the_same_words_bit_banged() {
    let mut r = Rig::new();
    r.wr(EEC, r.rd(EEC) | EEC_REQ);
    assert_ne!(r.rd(EEC) & EEC_GNT, 0, "EEC.GNT follows EEC.REQ");
    let mut eec = r.rd(EEC) & !(EEC_CS | EEC_SK);
    let pins = |r: &mut Rig, eec: &mut u32, set: u32, clear: u32| {
        *eec = (*eec & !clear) | set;
        r.wr(EEC, *eec);
        r.rd(EEC)
    };
    let word = |r: &mut Rig, eec: &mut u32, opcode: u32, address: Option<u32>, bits: u32| {
        pins(r, eec, EEC_CS, EEC_SK);
        pins(r, eec, 0, EEC_CS);
        let mut out = vec![(opcode, 8)];
        out.extend(address.map(|a| (a, 16)));
        for (v, n) in out {
            for i in (0..n).rev() {
                let di = if v >> i & 1 != 0 { EEC_DI } else { 0 };
                pins(r, eec, di, EEC_DI);
                pins(r, eec, EEC_SK, 0);
                pins(r, eec, 0, EEC_SK);
            }
        }
        let mut v = 0;
        for _ in 0..bits {
            v = v << 1 | u32::from(pins(r, eec, EEC_SK, 0) & EEC_DO != 0);
            pins(r, eec, 0, EEC_SK);
        }
        v
    };
    assert_eq!(word(&mut r, &mut eec, 0x05, None, 8), 0, "status: ready");
    for w in [0x00u32, 0x0F, 0x3F] {
        let bit_banged = (word(&mut r, &mut eec, 0x03, Some(w * 2), 16) as u16).swap_bytes();
        r.wr(EERD, (w << 2) | 1);
        assert_eq!(u32::from(bit_banged), r.rd(EERD) >> 16, "word {w:#x}");
    }
    r.wr(EEC, r.rd(EEC) & !EEC_REQ);
    assert_eq!(r.rd(EEC) & EEC_GNT, 0, "released");
}

/// I2CCTL's lines after the master drives `scl` and `sda`, as read back: (SCL, SDA).
fn i2c_lines(r: &mut Rig, scl: bool, sda: bool) -> (bool, bool) {
    let c = r.rd(I2CCTL) & !(I2CCTL_SCL_OUT | I2CCTL_SDA_OUT);
    r.wr(I2CCTL, c | if scl { I2CCTL_SCL_OUT } else { 0 } | if sda { I2CCTL_SDA_OUT } else { 0 });
    let v = r.rd(I2CCTL);
    (v & I2CCTL_SCL_IN != 0, v & I2CCTL_SDA_IN != 0)
}

/// Drives `steps` and returns SDA as read back after each.
fn i2c_steps(r: &mut Rig, steps: &[(bool, bool)]) -> Vec<bool> {
    steps.iter().map(|&(scl, sda)| i2c_lines(r, scl, sda).1).collect()
}

/// Clocks out `b` and returns whether the slave acknowledged it.
fn i2c_byte_out(r: &mut Rig, b: u8) -> bool {
    let bits: Vec<(bool, bool)> = (0..8)
        .rev()
        .flat_map(|i| [(false, b >> i & 1 != 0), (true, b >> i & 1 != 0), (false, b >> i & 1 != 0)])
        .collect();
    i2c_steps(r, &bits);
    !i2c_steps(r, &[(false, true), (true, true), (false, true)])[1]
}

/// One byte read as `ixgbe_read_i2c_byte_generic` (Linux, DPDK) does it, or `None` if a
/// byte was not acknowledged.
fn i2c_read(r: &mut Rig, device: u8, offset: u8) -> Option<u8> {
    let start = [(false, true), (true, true), (true, false), (false, false)];
    i2c_steps(r, &start);
    if !i2c_byte_out(r, device) || !i2c_byte_out(r, offset) {
        return None;
    }
    i2c_steps(r, &start);
    if !i2c_byte_out(r, device | 1) {
        return None;
    }
    let v = (0..8).fold(0u8, |v, _| v << 1 | u8::from(i2c_steps(r, &[(true, true), (false, true)])[0]));
    // NACK, then STOP.
    i2c_steps(r, &[(false, true), (true, true), (false, true), (false, false), (true, false), (true, true)]);
    Some(v)
}

/// The SFP+ module answers on I2CCTL as `ixgbe_read_i2c_byte_generic` drives it.
#[test]
fn the_sfp_module_identifies_itself_over_i2cctl() {
    let mut r = Rig::new();
    assert_eq!(i2c_read(&mut r, 0xA0, 0), Some(0x03), "SFF-8472 identifier: SFP");
    assert_eq!(i2c_read(&mut r, 0xA0, 3), Some(0x10), "10GBASE-SR");
    let oui = [37, 38, 39].map(|o| i2c_read(&mut r, 0xA0, o));
    assert_eq!(oui, [Some(0x00), Some(0x1B), Some(0x21)], "Intel's OUI");
    assert_eq!(i2c_read(&mut r, 0xA4, 0), None, "nothing else on the bus");
}
