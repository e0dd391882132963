//! nicsim acts on a driver's writes in the order the driver made them, wherever its sweep is.
//! Each test places the sweep (`Port::place_sweep`, one dword per look) so that the driver
//! writes its configuration just after the sweep passed those registers and the register that
//! acts on them is the next one the sweep looks at: the race that made a fresh `make test`
//! fail at random, made certain. The device must act on what the driver had written by then.

use crate::common;

use common::rig::*;
use nicsim::port::{QueueSetup, SWEEP_DWORDS};
use nicsim::regs::*;

/// A driver write that the device has not looked at yet.
fn write(r: &Rig, reg: u32, value: u32) {
    r.bar.write_u32(reg as usize, value);
}

/// The sweep looks at `reg` next, one dword per scan; the registers below it were just passed.
fn sweep_arrives_at(r: &mut Rig, reg: u32) {
    r.port.place_sweep(reg, 1);
}

/// One look: the priority registers and the one dword the sweep is at.
fn one_look(r: &mut Rig) {
    r.port.scan();
    r.port.place_sweep(0, SWEEP_DWORDS);
}

fn no_lint(r: &Rig) {
    assert!(r.port.lint.entries().is_empty(), "lint: {:#?}", r.port.lint.entries());
}

/// Queue `q`'s counter set is `q % 16`, in the byte of its map register [DS 8.2.3.8.9, 8.2.3.9.14].
fn statistics_map(r: &Rig, map: u32, q: u32) -> u32 {
    let shift = 8 * (q % 4);
    (r.rd(map) & !(0xF << shift)) | ((q % 16) << shift)
}

#[test]
fn every_transmit_queue_enable_finds_what_was_written_before_it() {
    let mut r = Rig::new();
    for q in 0..QUEUES as u32 {
        let base = DMA_BASE + 0x1000 * u64::from(q) + 0x1_0000_0000;
        let len = 128 * (q % 8 + 1);
        let head_wb = DMA_BASE + 0x10_0000 + 16 * u64::from(q);
        let map = statistics_map(&r, tqsm(q / 4), q);
        sweep_arrives_at(&mut r, txdctl(q));
        write(&r, tdbal(q), base as u32);
        write(&r, tdbah(q), (base >> 32) as u32);
        write(&r, tdlen(q), len);
        write(&r, tdwbal(q), head_wb as u32 | TDWBAL_HEAD_WB_EN);
        write(&r, tdwbah(q), (head_wb >> 32) as u32);
        write(&r, tqsm(q / 4), map);
        write(&r, txdctl(q), TXDCTL_ENABLE);
        one_look(&mut r);
        assert!(r.port.tx_queue_state(q as usize).enabled, "TX queue {q} enabled");
        let expected = QueueSetup {
            base,
            size: len / 16,
            head_write_back: Some(head_wb),
            statistics: (q % 16) as usize,
            ..Default::default()
        };
        assert_eq!(r.port.tx_queue_setup(q as usize), expected, "TX queue {q}");
    }
    no_lint(&r);
}

#[test]
fn every_receive_queue_enable_finds_what_was_written_before_it() {
    let mut r = Rig::new();
    for q in 0..QUEUES as u32 {
        let base = DMA_BASE + 0x1000 * u64::from(q) + 0x2_0000_0000;
        let len = 128 * (q % 8 + 1);
        let kib = q % 15 + 1;
        let (advanced, drop_en) = (q % 2 == 1, q % 3 == 0);
        let srr = 0x400
            | kib
            | if advanced { 1 << SRRCTL_DESCTYPE_SHIFT } else { 0 }
            | if drop_en { SRRCTL_DROP_EN } else { 0 };
        // DPDK and Linux write SRRCTL of queues 0-15 at its 82598 address, above RXDCTL's.
        let srrctl_at = if q < 16 { 0x02100 + 4 * q } else { srrctl(q) };
        let map = statistics_map(&r, rqsmr(q / 4), q);
        sweep_arrives_at(&mut r, rxdctl(q));
        write(&r, rdbal(q), base as u32);
        write(&r, rdbah(q), (base >> 32) as u32);
        write(&r, rdlen(q), len);
        write(&r, srrctl_at, srr);
        write(&r, rqsmr(q / 4), map);
        write(&r, rxdctl(q), RXDCTL_ENABLE);
        one_look(&mut r);
        assert!(r.port.rx_queue_state(q as usize).enabled, "RX queue {q} enabled");
        let expected = QueueSetup {
            base,
            size: len / 16,
            buffer_size: kib as usize * 1024,
            advanced,
            drop_en,
            head_write_back: None,
            statistics: (q % 16) as usize,
        };
        assert_eq!(r.port.rx_queue_setup(q as usize), expected, "RX queue {q}");
    }
    no_lint(&r);
}

#[test]
fn the_engine_enables_the_default_queue_with_its_ring() {
    // The engine looks at RXDCTL(0) on every iteration, outside the sweep.
    let mut r = Rig::new();
    sweep_arrives_at(&mut r, LEDCTL);
    write(&r, rdbal(0), DMA_BASE as u32 + 0x8000);
    write(&r, rdlen(0), 4096);
    write(&r, 0x02100, 0x400 | 4);
    write(&r, rxdctl(0), RXDCTL_ENABLE);
    assert!(r.port.poll_doorbells(), "the enable was seen");
    r.port.place_sweep(0, SWEEP_DWORDS);
    let setup = r.port.rx_queue_setup(0);
    assert_eq!((setup.base, setup.size, setup.buffer_size), (DMA_BASE + 0x8000, 256, 4096));
    no_lint(&r);
}

#[test]
fn receive_and_transmit_enables_find_their_configuration() {
    let mut r = Rig::new();
    let hlreg0 = r.rd(HLREG0) | HLREG0_JUMBOEN | HLREG0_RXCRCSTRP | HLREG0_TXCRCEN | HLREG0_TXPADEN;
    let (mflcn, dmatxctl) = (r.rd(MFLCN) | MFLCN_RFCE, r.rd(DMATXCTL) | DMATXCTL_TE);
    sweep_arrives_at(&mut r, LEDCTL);
    write(&r, FCTRL, FCTRL_BAM | FCTRL_UPE);
    write(&r, MAXFRS, 9018 << 16);
    write(&r, HLREG0, hlreg0);
    write(&r, fcrth(0), FCRTH_FCEN | 0x7000);
    write(&r, fcrtl(0), FCRTL_XONE | 0x6000);
    write(&r, FCCFG, FCCFG_TFCE_802_3X);
    write(&r, fcttv(0), 0x680);
    write(&r, FCRTV, 0x340);
    write(&r, MFLCN, mflcn);
    write(&r, txpbsize(0), 160 << 10);
    write(&r, RXCTRL, RXCTRL_RXEN);
    write(&r, DMATXCTL, dmatxctl);
    one_look(&mut r);
    let paths = r.port.path_config();
    assert!(paths.rx_open && paths.tx_open, "{paths:?}");
    assert_eq!((paths.max_untagged, paths.max_tagged), (9018, 9018), "MAXFRS with JUMBOEN");
    assert!(paths.strip_crc && paths.tx_crc && paths.tx_pad, "{paths:?}");
    assert_eq!(paths.tx_packet_buffer, 160 * 1024, "TXPBSIZE(0)");
    assert_eq!(paths.fctrl, FCTRL_BAM | FCTRL_UPE);
    let flow = r.port.flow.config;
    assert!(flow.transmit && flow.receive && flow.xon, "{flow:?}");
    assert_eq!((flow.high, flow.low, flow.pause_quanta, flow.refresh_quanta), (0x7000, 0x6000, 0x680, 0x340));
    no_lint(&r);
}

#[test]
fn an_mdio_command_takes_the_data_written_before_it() {
    let mut r = Rig::new();
    sweep_arrives_at(&mut r, LEDCTL);
    write(&r, MSRWD, 0x1234);
    write(&r, MSCA, (1 << 30) | (1 << 26) | 0x0123); // MDI command, write, register 0x123
    one_look(&mut r);
    assert_eq!(r.rd(MSCA) & (1 << 30), 0, "command done");
    assert_eq!(r.rd(MSRWD), 0xFFFF_1234, "the write data kept; no PHY answers a read");
}

#[test]
fn a_receive_address_becomes_valid_with_the_address_written_before_it() {
    let mut r = Rig::new();
    for n in [1u32, 5, 127] {
        let mac = [0x02, 0x11, 0x22, 0x33, 0x44, n as u8];
        sweep_arrives_at(&mut r, rah(n));
        write(&r, ral(n), u32::from_le_bytes([mac[0], mac[1], mac[2], mac[3]]));
        write(&r, rah(n), u32::from(u16::from_le_bytes([mac[4], mac[5]])) | RAH_AV);
        one_look(&mut r);
        let addresses = r.port.receive_addresses();
        assert!(addresses.contains(&mac), "RAR({n}): {addresses:02x?}");
        assert!(!addresses.iter().any(|a| a[..4] == [0, 0, 0, 0]), "no address from a stale RAL: {addresses:02x?}");
    }
    no_lint(&r);
}

#[test]
fn a_queue_disabled_and_rewound_in_one_look_is_disabled_first() {
    let mut r = Rig::new();
    let ring = r.tx_ring(3, 8, None);
    r.mem().write_u64(ring, DMA_BASE + 0x10000);
    r.mem().write_u64(ring + 8, 60 | (0b1011 << 24)); // EOP, IFCS, RS
    r.wr(tdt(3), 1);
    assert_eq!(r.transmit().len(), 1);
    assert_eq!(r.port.tx_queue_state(3).head, 1);
    // Disable, then rewind head and tail [DS 4.6.8.1.2]: the head write comes after the disable.
    sweep_arrives_at(&mut r, tdh(3));
    write(&r, txdctl(3), 0);
    write(&r, tdh(3), 0);
    write(&r, tdt(3), 0);
    one_look(&mut r);
    assert!(!r.port.tx_queue_state(3).enabled);
    assert_eq!(r.rd(tdh(3)), 0, "the head written after the disable is kept");
    no_lint(&r);
}

/// TinyNF sets CTRL.RST, sleeps 11 ms and configures without reading CTRL back: an engine
/// kept off its core for that long finds the reset and the configuration in one look. The
/// reset comes first; the queue it then finds enabled is running on its ring.
#[test]
fn writes_found_with_a_reset_apply_after_it() {
    let mut r = Rig::new();
    r.tx_ring(2, 8, None);
    sweep_arrives_at(&mut r, LEDCTL);
    write(&r, CTRL, CTRL_RST);
    // Read-modify-write of the reset values: CRC stripping off, transmit enabled.
    let hlreg0 = 0x0801_2C0B & !HLREG0_RXCRCSTRP;
    write(&r, HLREG0, hlreg0);
    write(&r, tdbal(5), DMA_BASE as u32);
    write(&r, tdbah(5), 0);
    write(&r, tdlen(5), 8 * 16);
    write(&r, DMATXCTL, 0x4 | DMATXCTL_TE);
    write(&r, txdctl(5), TXDCTL_ENABLE);
    one_look(&mut r);
    assert_eq!(r.port.resets, 1);
    assert_eq!((r.rd(HLREG0), r.rd(CTRL) & CTRL_RST), (hlreg0, 0));
    assert_eq!(r.port.active_tx_queues(), [5], "queue 2 stopped by the reset, queue 5 enabled after it");
    assert_eq!(r.port.tx_queue_setup(5).base, DMA_BASE);
    no_lint(&r);
}

#[test]
fn statistics_mapping_applies_to_enabled_queues() {
    let mut r = Rig::new();
    r.tx_ring(6, 8, None);
    r.rx_ring(8, false, false);
    assert_eq!((r.port.tx_queue_setup(6).statistics, r.port.rx_queue_setup(0).statistics), (0, 0));
    r.wr(tqsm(1), 9 << 16);
    r.wr(rqsmr(0), 4);
    assert_eq!((r.port.tx_queue_setup(6).statistics, r.port.rx_queue_setup(0).statistics), (9, 4));
}

/// While nicsim looks for pending writes, the driver on its other core writes a queue's ring
/// (below where the look is) and then its enable (above): the look sees the enable and not the
/// ring. The hook makes that certain: it runs when the look reaches `at`, a register the
/// driver had written just before (SRRCTL, or DCA_TXCTRL as DPDK clears its relaxed-ordering
/// bit), and writes the rest as the driver would. The enable must find its ring all the same.
fn write_during_the_look(r: &mut Rig, at: u32, writes: Vec<(u32, u32)>) {
    let mut writes = Some(writes);
    r.port.first_look_hook = Some(Box::new(move |bar, dword| {
        if dword == at as usize / 4 {
            for (reg, value) in writes.take().unwrap_or_default() {
                bar.write_u32(reg as usize, value);
            }
        }
    }));
    r.port.apply_pending_writes();
    r.port.first_look_hook = None;
}

#[test]
fn a_receive_enable_made_while_nicsim_looks_finds_its_ring() {
    let mut r = Rig::new();
    for q in [0u32, 5, 70] {
        let base = DMA_BASE + 0x1000 * u64::from(q) + 0x2_0000_0000;
        write(&r, srrctl(q), 0x400 | 4);
        let ring = vec![
            (rdbal(q), base as u32),
            (rdbah(q), (base >> 32) as u32),
            (rdlen(q), 1024),
            (rxdctl(q), RXDCTL_ENABLE),
        ];
        write_during_the_look(&mut r, srrctl(q), ring);
        assert!(r.port.rx_queue_state(q as usize).enabled, "RX queue {q} enabled");
        let setup = r.port.rx_queue_setup(q as usize);
        assert_eq!((setup.base, setup.size, setup.buffer_size), (base, 64, 4096), "RX queue {q}");
    }
    no_lint(&r);
}

#[test]
fn a_transmit_enable_made_while_nicsim_looks_finds_its_ring() {
    let mut r = Rig::new();
    for q in [0u32, 5, 127] {
        let base = DMA_BASE + 0x1000 * u64::from(q) + 0x4_0000_0000;
        write(&r, dca_txctrl(q), r.rd(dca_txctrl(q)) & !(1 << 11));
        let ring = vec![
            (tdbal(q), base as u32),
            (tdbah(q), (base >> 32) as u32),
            (tdlen(q), 2048),
            (txdctl(q), TXDCTL_ENABLE),
        ];
        write_during_the_look(&mut r, dca_txctrl(q), ring);
        assert!(r.port.tx_queue_state(q as usize).enabled, "TX queue {q} enabled");
        let setup = r.port.tx_queue_setup(q as usize);
        assert_eq!((setup.base, setup.size), (base, 128), "TX queue {q}");
    }
    no_lint(&r);
}

#[test]
fn transmit_tails_are_read_after_every_receive_tail() {
    // A driver that writes TDT on one port and then RDT on another (TinyNF's agents, from the
    // head the device wrote back) must never find the device acting on the RDT without the TDT:
    // the engine reads every port's RDTs (`poll_doorbells`) before any TDT (`poll_tx_doorbells`).
    let mut r = Rig::new();
    r.tx_ring(0, 64, None);
    r.rx_ring(64, false, true);
    r.sync();
    write(&r, tdt(0), 8);
    write(&r, rdt(0), 40);
    r.port.poll_doorbells();
    assert_eq!(r.port.rx_queue_state(0).tail, 40, "the receive tail is read");
    assert_eq!(r.port.tx_queue_state(0).tail, 0, "no transmit tail is read with the receive tails");
    r.port.poll_tx_doorbells();
    assert_eq!(r.port.tx_queue_state(0).tail, 8, "the transmit tail is read after them");
    no_lint(&r);
}
