//! The device model in one process: a "driver" writes the BAR through a second mapping of the
//! same file, the port is scanned as the engine would, and DMA goes to a flat test region.

mod common;

use common::twice;
use nicsim::dma::{DmaSpace, FlatDmaSpace, Location, Window};
use nicsim::lint::Rule;
use nicsim::pciconfig::{PciConfig, CONFIG_LEN};
use nicsim::port::{Port, TxBatch};
use nicsim::regs::*;
use nicsim::wire::{Generator, LatencySummary, Sink, TrafficSpec, WireClock};
use platform::MappedRegion;

const DMA_BASE: u64 = 0x4000_0000;
const DMA_LEN: usize = 1 << 21;

/// The flat test memory; with `windows` off it never reports a contiguous window, so the
/// receive and transmit fast paths decline every frame and the general paths do all the work.
struct TestDma {
    flat: FlatDmaSpace,
    windows: bool,
}

impl DmaSpace for TestDma {
    fn locate(&self, phys: u64) -> Option<Location> {
        self.flat.locate(phys)
    }
    fn window(&self, phys: u64) -> Option<Window> {
        if self.windows {
            self.flat.window(phys)
        } else {
            None
        }
    }
    fn region(&self, index: usize) -> &MappedRegion {
        self.flat.region(index)
    }
}

/// A port plus the driver's view of its BAR and config space.
struct Rig {
    port: Port,
    bar: MappedRegion,
    cfg: MappedRegion,
    dma: TestDma,
}

impl Rig {
    fn new() -> Rig {
        let (bar_dev, bar) = twice(BAR0_LEN, "bar");
        let (cfg_dev, cfg) = twice(CONFIG_LEN, "cfg");
        let port = Port::new(0, bar_dev, PciConfig::new(cfg_dev, 0xF800_0000), 0, 10.0);
        let flat = FlatDmaSpace { region: MappedRegion::anonymous(DMA_LEN).unwrap(), base: DMA_BASE };
        let dma = TestDma { flat, windows: true };
        let mut r = Rig { port, bar, cfg, dma };
        r.cfg.write_u16(4, r.cfg.read_u16(4) | 0b110); // memory space + bus master
        r.sync();
        r
    }
    fn rd(&self, reg: u32) -> u32 {
        self.bar.read_u32(reg as usize)
    }
    /// A driver write, then the device notices it.
    fn wr(&mut self, reg: u32, v: u32) {
        self.bar.write_u32(reg as usize, v);
        self.sync();
    }
    fn sync(&mut self) {
        self.port.scan_all();
        self.port.poll_doorbells();
    }
    fn lint_rules(&self) -> Vec<Rule> {
        self.port.lint.entries().iter().map(|w| w.rule).collect()
    }
    fn mem(&self) -> &MappedRegion {
        &self.dma.flat.region
    }

    /// RX queue 0 with `n` descriptors at DMA offset 0, buffers of 2 KiB from 0x10000.
    fn rx_ring(&mut self, n: u32, advanced: bool, drop_en: bool) {
        for i in 0..n as usize {
            self.mem().write_u64(i * 16, DMA_BASE + 0x10000 + i as u64 * 2048);
            self.mem().write_u64(i * 16 + 8, 0);
        }
        self.wr(rdbal(0), DMA_BASE as u32);
        self.wr(rdbah(0), 0);
        self.wr(rdlen(0), n * 16);
        let desc = if advanced { 1 << SRRCTL_DESCTYPE_SHIFT } else { 0 };
        self.wr(srrctl(0), 2 | desc | if drop_en { SRRCTL_DROP_EN } else { 0 });
        self.wr(rxdctl(0), RXDCTL_ENABLE);
        self.wr(FCTRL, FCTRL_UPE | FCTRL_MPE | FCTRL_BAM);
        self.wr(RXCTRL, RXCTRL_RXEN);
    }

    /// TX queue `q` with `n` descriptors at DMA offset 0x8000 + q * 0x1000.
    fn tx_ring(&mut self, q: u32, n: u32, head_wb: Option<u64>) -> usize {
        let off = 0x8000 + q as usize * 0x1000;
        self.wr(tdbal(q), (DMA_BASE + off as u64) as u32);
        self.wr(tdlen(q), n * 16);
        if let Some(h) = head_wb {
            self.wr(tdwbal(q), h as u32 | 1);
        }
        self.wr(DMATXCTL, self.rd(DMATXCTL) | DMATXCTL_TE);
        self.wr(txdctl(q), TXDCTL_ENABLE);
        off
    }

    fn transmit(&mut self) -> Vec<Vec<u8>> {
        let mut batch = TxBatch::new(64);
        let mut out = Vec::new();
        // Far in the future: the wire is always free.
        for k in 1..50 {
            batch.clear();
            self.port.transmit(&mut self.dma, k * 1_000_000_000, &mut batch);
            out.extend(batch.iter().map(|(f, _)| f.to_vec()));
        }
        out
    }
}

fn frame(len: usize, tag: u8) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(7) ^ tag).collect();
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0]);
    f
}

#[test]
fn reset_values_and_self_clearing_reset() {
    let mut r = Rig::new();
    assert_eq!(r.rd(EEC) & 0x300, 0x300, "EEPROM present and auto-read done");
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
    r.wr(EIMC, 0xFFFF_FFFF); // bit 31 reserved (ixy C does this)
    r.wr(DMATXCTL, 0x1); // clears reserved bits 2:1 (ixy does this)
    r.wr(RXCTRL, RXCTRL_RXEN);
    r.wr(FCTRL, FCTRL_UPE);
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
    let reserved: Vec<_> =
        r.port.lint.entries().iter().filter(|w| w.rule == Rule::ReservedBits).map(|w| w.register.clone()).collect();
    assert!(reserved.contains(&"EIMC".to_string()) && reserved.contains(&"DMATXCTL".to_string()), "{reserved:?}");
    let msg = &r.port.lint.entries().iter().find(|w| w.rule == Rule::FctrlWhileRxEnabled).unwrap().message;
    assert!(msg.contains("8.2.3.7.1"), "cites the datasheet: {msg}");
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

#[test]
fn legacy_receive_keeps_qword0_and_advanced_overwrites_it() {
    for advanced in [false, true] {
        let mut r = Rig::new();
        r.rx_ring(8, advanced, true);
        r.wr(rdt(0), 7);
        let f = frame(100, 1);
        r.port.receive(&mut r.dma, &f);
        let q0 = r.mem().read_u64(0);
        let q1 = r.mem().read_u64(8);
        let mut got = vec![0u8; 100];
        r.mem().read_bytes(0x10000, &mut got);
        assert_eq!(got, f, "frame written to the buffer (CRC stripped)");
        if advanced {
            assert_eq!(q0, 0, "advanced write-back overwrites the address");
            assert_eq!(q1 & 0b11, 0b11, "DD | EOP");
            assert_eq!(q1 >> 32, 100, "length");
        } else {
            assert_eq!(q0, DMA_BASE + 0x10000, "legacy write-back keeps the address");
            assert_eq!(q1 & 0xFFFF, 100);
            assert_eq!((q1 >> 32) & 0b11, 0b11);
        }
        r.sync();
        assert_eq!(r.rd(rdh(0)), 1);
    }
}

#[test]
fn no_descriptor_drops_are_counted_and_never_written() {
    let mut r = Rig::new();
    r.rx_ring(8, true, true);
    r.wr(rdt(0), 2); // two descriptors owned
    for i in 0..5 {
        r.port.receive(&mut r.dma, &frame(60, i));
    }
    assert_eq!(r.port.counters.qprc[0], 2);
    assert_eq!(r.port.counters.qprdc[0], 3, "DROP_EN: counted in QPRDC");
    assert_eq!(r.mem().read_u64(2 * 16 + 8), 0, "descriptor 2 (not owned) untouched");
    let mut untouched = [0u8; 60];
    r.mem().read_bytes(0x10000 + 2 * 2048, &mut untouched);
    assert_eq!(untouched, [0u8; 60]);
    r.port.publish_counters();
    assert_eq!((r.rd(qprdc(0)), r.rd(GPRC)), (3, 5));
}

#[test]
fn without_drop_en_frames_wait_in_the_packet_buffer() {
    let mut r = Rig::new();
    r.rx_ring(8, true, false);
    r.wr(0x03C00, 1 << 10); // RXPBSIZE(0) = 1 KB: room for ~16 small frames
    r.wr(rdt(0), 1);
    for i in 0..40 {
        r.port.receive(&mut r.dma, &frame(60, i));
    }
    assert_eq!(r.port.counters.qprc[0], 1);
    assert!(r.port.counters.mpc > 0, "a full packet buffer misses frames (MPC)");
    r.wr(rdt(0), 7);
    r.port.drain_fifo(&mut r.dma);
    assert_eq!(r.port.counters.qprc[0], 7, "held frames are delivered once descriptors come back");
}

#[test]
fn frames_longer_than_a_buffer_span_descriptors() {
    let mut r = Rig::new();
    r.rx_ring(8, true, true);
    r.wr(srrctl(0), (r.rd(srrctl(0)) & !0x1F) | 1); // 1 KB buffers
    r.wr(rdt(0), 7);
    r.port.receive(&mut r.dma, &frame(1500, 3));
    let (a, b) = (r.mem().read_u64(8), r.mem().read_u64(24));
    assert_eq!((a & 0b11, a >> 32), (0b01, 1024), "first: DD without EOP");
    assert_eq!((b & 0b11, b >> 32), (0b11, 476), "last: DD | EOP");
}

#[test]
fn transmit_with_dd_write_back_padding_and_null_descriptors() {
    let mut r = Rig::new();
    let ring = r.tx_ring(0, 8, None);
    let buf = 0x20000;
    r.mem().write_bytes(buf, &frame(42, 9));
    r.mem().write_bytes(buf + 2048, &frame(200, 5));
    let legacy = |len: u64, cmd: u64| len | (cmd << 24);
    // 0: legacy 42 bytes EOP|IFCS|RS (padded to 60); 1: null descriptor; 2: advanced 200 bytes.
    r.mem().write_u64(ring, DMA_BASE + buf as u64);
    r.mem().write_u64(ring + 8, legacy(42, 0b1011));
    r.mem().write_u64(ring + 16, 0);
    r.mem().write_u64(ring + 24, legacy(0, 0b0011));
    r.mem().write_u64(ring + 32, DMA_BASE + buf as u64 + 2048);
    r.mem().write_u64(ring + 40, 0x2B30_0000 | 200 | (200 << 46));
    r.wr(tdt(0), 3);
    let out = r.transmit();
    assert_eq!(out.len(), 2, "the null descriptor sends nothing");
    assert_eq!(out[0].len(), 60);
    assert_eq!(&out[0][..42], &frame(42, 9)[..]);
    assert!(out[0][42..].iter().all(|&b| b == 0), "padded with zeros");
    assert_eq!(out[1], frame(200, 5));
    assert_eq!(r.mem().read_u32(ring + 12) & 1, 1, "RS descriptor written back with DD");
    assert_eq!(r.mem().read_u32(ring + 28) & 1, 0, "no RS, WTHRESH 0: no write-back");
    assert_eq!(r.mem().read_u32(ring + 44) & 1, 1, "advanced descriptor with RS (as ixy writes it)");
    r.sync();
    assert_eq!(r.rd(tdh(0)), 3);
    r.port.publish_counters();
    assert_eq!((r.rd(GPTC), r.rd(qptc(0))), (2, 2));
    assert_eq!(r.rd(GOTCL), 60 + 4 + 200 + 4, "octets include the FCS");
}

#[test]
fn head_write_back_replaces_descriptor_write_back() {
    let mut r = Rig::new();
    let head = 0x30000u64;
    let ring = r.tx_ring(0, 64, Some(DMA_BASE + head));
    for i in 0..64usize {
        r.mem().write_bytes(0x20000 + i * 64, &frame(60, i as u8));
        r.mem().write_u64(ring + i * 16, DMA_BASE + 0x20000 + i as u64 * 64);
        let rs = if i % 32 == 31 { 1u64 << 27 } else { 0 };
        r.mem().write_u64(ring + i * 16 + 8, 60 | (0b11 << 24) | rs);
    }
    r.wr(tdt(0), 40);
    assert_eq!(r.transmit().len(), 40);
    assert_eq!(r.mem().read_u32(head as usize), 40, "head written back after the RS descriptor");
    assert!((0..40).all(|i| r.mem().read_u32(ring + i * 16 + 12) & 1 == 0), "no DD in head write-back mode");
}

#[test]
fn dma_outside_driver_memory_faults_and_stops_only_that_queue() {
    let mut r = Rig::new();
    let ring0 = r.tx_ring(0, 8, None);
    let ring1 = r.tx_ring(1, 8, None);
    r.mem().write_bytes(0x20000, &frame(60, 1));
    r.mem().write_u64(ring0, 0x1000); // not driver memory
    r.mem().write_u64(ring0 + 8, 60 | (0b1011 << 24));
    r.mem().write_u64(ring0 + 16, DMA_BASE + 0x20000);
    r.mem().write_u64(ring0 + 24, 60 | (0b1011 << 24));
    r.mem().write_u64(ring1, DMA_BASE + 0x20000);
    r.mem().write_u64(ring1 + 8, 60 | (0b1011 << 24));
    r.wr(tdt(0), 2);
    r.wr(tdt(1), 1);
    let out = r.transmit();
    assert_eq!(out.len(), 1, "queue 1 still transmits");
    assert_eq!(r.port.fault_count, 1);
    let f = &r.port.faults[0];
    assert_eq!((f.direction, f.queue, f.descriptor, f.address), (nicsim::regs::Direction::Tx, 0, 0, 0x1000));
    assert!(r.port.tx_queue_state(0).faulted, "queue 0 stopped");
    assert_eq!(r.port.tx_queue_state(0).head, 0, "and did not move past the bad descriptor");
    // Receive: a descriptor pointing beyond the region.
    r.rx_ring(8, false, true);
    r.mem().write_u64(0, DMA_BASE + DMA_LEN as u64 - 10);
    r.wr(rdt(0), 7);
    r.port.receive(&mut r.dma, &frame(60, 2));
    assert_eq!(r.port.fault_count, 2);
    assert!(r.port.rx_queue_state(0).faulted);
    assert_eq!(r.mem().read_u64(8), 0, "no write-back for the faulted descriptor");
    r.wr(rxdctl(0), 0);
    r.mem().write_u64(0, DMA_BASE + 0x10000);
    r.wr(rxdctl(0), RXDCTL_ENABLE);
    r.port.receive(&mut r.dma, &frame(60, 2));
    assert_eq!(r.port.counters.qprc[0], 1, "re-enabling the queue restarts it");
}

#[test]
fn l2_filtering_follows_fctrl_and_rar() {
    let mut r = Rig::new();
    r.rx_ring(16, true, true);
    r.wr(RXCTRL, 0);
    r.wr(FCTRL, 0);
    r.wr(RXCTRL, RXCTRL_RXEN);
    r.wr(rdt(0), 15);
    let mut other = frame(60, 0);
    other[0..6].copy_from_slice(&[0x02, 9, 9, 9, 9, 9]);
    let mut bcast = frame(60, 0);
    bcast[0..6].copy_from_slice(&[0xFF; 6]);
    r.port.receive(&mut r.dma, &frame(60, 0)); // our MAC: accepted
    r.port.receive(&mut r.dma, &other); // dropped
    r.port.receive(&mut r.dma, &bcast); // dropped without BAM
    assert_eq!((r.port.counters.qprc[0], r.port.drops.filtered), (1, 2));
    r.wr(RXCTRL, 0);
    r.wr(FCTRL, FCTRL_BAM | FCTRL_UPE);
    r.wr(RXCTRL, RXCTRL_RXEN);
    r.port.receive(&mut r.dma, &other);
    r.port.receive(&mut r.dma, &bcast);
    assert_eq!(r.port.counters.qprc[0], 3);
    assert_eq!(r.port.counters.bprc, 1);
}

/// Frames of every kind the receive path tells apart: unicast to the port of many lengths (a
/// runt, one filling a 1 KB buffer exactly and one spilling into the next, the longest
/// untagged frame and one byte more), other unicast, broadcast, multicast, VLAN-tagged.
fn assorted_frames() -> Vec<Vec<u8>> {
    let with_dst = |dst: [u8; 6], len: usize, tag: u8| {
        let mut f = frame(len, tag);
        f[..6].copy_from_slice(&dst);
        f
    };
    let mut v: Vec<Vec<u8>> =
        [60, 61, 64, 100, 1024, 1025, 1514, 1515, 59, 30, 60, 128].iter().map(|&len| frame(len, len as u8)).collect();
    v.push(with_dst([0x02, 9, 9, 9, 9, 9], 60, 20));
    v.push(with_dst([0xFF; 6], 60, 21));
    v.push(with_dst([0x01, 0, 0x5E, 0, 0, 1], 60, 22));
    let mut tagged = frame(1518, 23);
    tagged[12..14].copy_from_slice(&[0x81, 0x00]);
    v.push(tagged);
    v.extend((0..12).map(|i| frame(60 + i, 30 + i as u8)));
    v
}

/// Everything a driver or a statistics reader could observe of two ports is equal.
fn assert_same_observable_state(a: &Rig, b: &Rig) {
    assert_eq!(a.port.counters, b.port.counters, "statistics");
    assert_eq!(a.port.drops, b.port.drops, "drops");
    assert_eq!(a.port.rx_queue_state(0), b.port.rx_queue_state(0), "RX queue 0");
    for q in 0..2 {
        assert_eq!(a.port.tx_queue_state(q), b.port.tx_queue_state(q), "TX queue {q}");
    }
    assert_eq!(a.port.faults, b.port.faults, "DMA faults");
    assert_eq!(a.lint_rules(), b.lint_rules(), "lint warnings");
    let (mut x, mut y) = (vec![0u8; DMA_LEN], vec![0u8; DMA_LEN]);
    a.mem().read_bytes(0, &mut x);
    b.mem().read_bytes(0, &mut y);
    if let Some(at) = x.iter().zip(&y).position(|(p, q)| p != q) {
        panic!("DMA memory differs first at offset {at:#x}: {:#04x} vs {:#04x}", x[at], y[at]);
    }
}

#[test]
fn receive_runs_write_and_count_exactly_as_single_receives() {
    for advanced in [false, true] {
        for drop_en in [false, true] {
            for promiscuous in [false, true] {
                let mut rigs = [Rig::new(), Rig::new()];
                for r in rigs.iter_mut() {
                    r.rx_ring(16, advanced, drop_en);
                    r.wr(srrctl(0), (r.rd(srrctl(0)) & !0x1F) | 1); // 1 KB buffers
                    r.wr(0x03C00, 4 << 10); // RXPBSIZE(0) = 4 KB: some frames wait, some are missed
                    if !promiscuous {
                        r.wr(RXCTRL, 0);
                        r.wr(FCTRL, FCTRL_BAM);
                        r.wr(RXCTRL, RXCTRL_RXEN);
                    }
                    r.wr(rdt(0), 11);
                }
                let frames = assorted_frames();
                for round in 0..4 {
                    // Frame by frame, through the general path.
                    let r = &mut rigs[0];
                    for f in &frames {
                        r.port.receive(&mut r.dma, f);
                    }
                    // As the engine delivers a burst: one run.
                    let r = &mut rigs[1];
                    let mut run = r.port.rx_run_begin(&mut r.dma);
                    assert!(round > 0 || run.is_some(), "a fresh, enabled queue starts a run");
                    for f in &frames {
                        r.port.rx_run_frame(&mut r.dma, &mut run, f);
                    }
                    r.port.rx_run_end(&r.dma, run);
                    // The driver takes what arrived, re-arms every descriptor (advanced
                    // write-back overwrote the addresses) and gives all but one back.
                    for r in rigs.iter_mut() {
                        for i in 0..16usize {
                            r.mem().write_u64(i * 16, DMA_BASE + 0x10000 + i as u64 * 2048);
                        }
                        let head = r.port.rx_queue_state(0).head;
                        r.wr(rdt(0), (head + 15) % 16);
                        r.port.drain_fifo(&mut r.dma);
                    }
                }
                let what = format!("advanced {advanced}, DROP_EN {drop_en}, promiscuous {promiscuous}");
                let c = &rigs[1].port.counters;
                assert!(c.qprc[0] > 40 && c.ruc > 0 && c.roc > 0, "{what}: the frames exercise every check");
                assert!(c.qprdc[0] + c.mpc > 0, "{what}: the ring fills");
                assert_eq!(rigs[1].port.drops.filtered > 0, !promiscuous, "{what}");
                assert_same_observable_state(&rigs[0], &rigs[1]);
            }
        }
    }
}

#[test]
fn transmit_fast_path_sends_and_writes_back_exactly_as_the_general_path() {
    let legacy = |len: u64, cmd: u64| len | (cmd << 24);
    // Advanced data: DEXT, DTYP 0011, PAYLEN in bits 46+ [DS 7.2.3.2.4].
    let advanced = |len: u64, cmd: u64| len | (0b0011 << 20) | ((cmd | 0b10_0000) << 24) | (len << 46);
    let (eop, ifcs, rs) = (0b1u64, 0b10u64, 0b1000u64);
    let mut outputs = Vec::new();
    let mut rigs = [Rig::new(), Rig::new()];
    for (k, r) in rigs.iter_mut().enumerate() {
        r.dma.windows = k == 1;
        let head_wb = 0x3F000u64;
        for (q, wb) in [(0u32, None), (1, Some(DMA_BASE + head_wb))] {
            let ring = r.tx_ring(q, 32, wb);
            let bufs = 0x20000 + q as usize * 0x10000;
            let mut multicast = frame(60, 11);
            multicast[0] = 0x01;
            let mut broadcast = frame(60, 12);
            broadcast[..6].copy_from_slice(&[0xFF; 6]);
            let descriptors: Vec<(Vec<u8>, u64)> = vec![
                (frame(60, 1), legacy(60, eop | ifcs | rs)),
                (frame(42, 2), legacy(42, eop | ifcs)),       // padded to 60
                (frame(100, 3), legacy(100, eop)),            // FCS supplied by the driver
                (vec![], legacy(0, eop | ifcs)),              // null descriptor
                (vec![], (0b0010 << 20) | (0b10_0000 << 24)), // advanced context descriptor
                (frame(200, 4), advanced(200, eop | ifcs | rs)),
                (frame(30, 5), legacy(30, ifcs)), // a frame over two descriptors
                (frame(40, 6), legacy(40, eop | ifcs | rs)),
                (vec![0xAB; 4], legacy(4, eop)), // nothing left but the FCS
                (frame(60, 8), (0b0111 << 20) | ((eop | ifcs | 0b10_0000) << 24) | 60), // bad DTYP
                (broadcast, legacy(60, eop | ifcs | rs)),
                (multicast, advanced(60, eop | ifcs)),
            ];
            let mut all = descriptors;
            all.extend((0..12).map(|i| {
                (frame(60 + i, 20 + i as u8), legacy(60 + i as u64, eop | ifcs | if i % 4 == 3 { rs } else { 0 }))
            }));
            for (i, (data, qword1)) in all.iter().enumerate() {
                let buf = bufs + i * 2048;
                r.mem().write_bytes(buf, data);
                r.mem().write_u64(ring + i * 16, DMA_BASE + buf as u64);
                r.mem().write_u64(ring + i * 16 + 8, *qword1);
            }
            // The last one points past the driver's memory: the queue stops there.
            let last = all.len();
            r.mem().write_u64(ring + last * 16, DMA_BASE + DMA_LEN as u64 - 30);
            r.mem().write_u64(ring + last * 16 + 8, legacy(60, eop | ifcs | rs));
            r.wr(tdt(q), last as u32 + 1);
        }
        let mut batch = TxBatch::new(64);
        let mut out = Vec::new();
        for k in 1..20 {
            batch.clear();
            r.port.transmit(&mut r.dma, k * 1_000_000_000, &mut batch);
            out.extend(batch.iter().map(|(f, end)| (f.to_vec(), end)));
        }
        outputs.push(out);
    }
    assert_eq!(outputs[0].len(), 2 * 20, "the frames of both queues; null, context and bad descriptors send nothing");
    assert_eq!(outputs[0], outputs[1], "the same frames at the same times");
    assert_eq!(rigs[1].port.fault_count, 2, "both queues stop at the bad address");
    assert_eq!(rigs[1].port.counters.bptc, 2);
    assert_eq!(rigs[1].port.counters.mptc, 2);
    assert_same_observable_state(&rigs[0], &rigs[1]);
}

/// One engine iteration's delivery of generated frames: with `bursts`, as the engine does it
/// (one burst on the fast path, the rest frame by frame); otherwise frame by frame only.
/// Returns how many frames the burst took.
fn deliver_generated(r: &mut Rig, generator: &mut Generator, wire: &mut WireClock, now: u64, bursts: bool) -> usize {
    let mut allowed = generator.allowance(now, 128);
    let mut run = r.port.rx_run_begin(&mut r.dma);
    let mut taken = 0;
    if bursts {
        taken = r.port.rx_run_generated_burst(&r.dma, &mut run, generator, wire, now, allowed);
        allowed -= taken;
    }
    for _ in 0..allowed {
        let Some(mut due) = generator.next_due(now, wire) else { break };
        r.port.rx_run_generated(&mut r.dma, &mut run, &mut due);
    }
    r.port.rx_run_end(&r.dma, run);
    taken
}

#[test]
fn generated_bursts_write_and_count_exactly_as_frame_by_frame() {
    // (frame size, rate, the port's own address or another, promiscuous, count)
    let cases = [
        (60, None, true, false, None),
        (60, None, true, false, Some(151)), // the count ends in the middle of a burst
        (60, Some(5e6), true, false, None),
        (1000, None, true, true, None),
        (1500, None, true, true, None), // longer than the 1 KB buffers: never a burst
        (60, None, false, false, None), // filtered: never a burst
        (60, None, false, true, None),  // another address, accepted in promiscuous mode
    ];
    for advanced in [false, true] {
        for drop_en in [false, true] {
            for (size, rate_pps, own, promiscuous, count) in cases {
                let what = format!("advanced {advanced}, DROP_EN {drop_en}, size {size}, rate {rate_pps:?}, own address {own}, promiscuous {promiscuous}, count {count:?}");
                let mut rigs = [Rig::new(), Rig::new()];
                let mut gens = [Generator::new(3), Generator::new(3)];
                let mut wires = [WireClock::new(10.0), WireClock::new(10.0)];
                for (r, g) in rigs.iter_mut().zip(gens.iter_mut()) {
                    r.rx_ring(16, advanced, drop_en);
                    r.wr(srrctl(0), (r.rd(srrctl(0)) & !0x1F) | 1); // 1 KB buffers
                    if !promiscuous {
                        r.wr(RXCTRL, 0);
                        r.wr(FCTRL, FCTRL_BAM);
                        r.wr(RXCTRL, RXCTRL_RXEN);
                    }
                    r.wr(rdt(0), 13);
                    let dst_mac = if own { None } else { Some([0x02, 7, 7, 7, 7, 7]) };
                    let spec = TrafficSpec { size, rate_pps, count, dst_mac, ..Default::default() };
                    g.start(spec, r.port.mac(), 10.0, 0);
                }
                let mut burst_frames = 0;
                for round in 1..=24u64 {
                    if round == 20 {
                        // A buffer outside the driver's memory, met in the middle of a burst.
                        for r in rigs.iter_mut() {
                            let head = r.port.rx_queue_state(0).head as usize;
                            r.mem().write_u64(((head + 2) % 16) * 16, DMA_BASE + DMA_LEN as u64 + 4096);
                        }
                    }
                    // Engine time in uneven steps: bursts of different lengths.
                    let now = round * 1_300_000 + (round % 3) * 500_000;
                    for (k, ((r, g), w)) in rigs.iter_mut().zip(gens.iter_mut()).zip(wires.iter_mut()).enumerate() {
                        let taken = deliver_generated(r, g, w, now, k == 1);
                        if k == 1 {
                            burst_frames += taken;
                        }
                    }
                    // The driver takes what arrived, re-arms the descriptors it read and gives
                    // back all but three.
                    for r in rigs.iter_mut() {
                        for i in 0..16usize {
                            if round < 20 {
                                r.mem().write_u64(i * 16, DMA_BASE + 0x10000 + i as u64 * 2048);
                            }
                        }
                        let head = r.port.rx_queue_state(0).head;
                        r.wr(rdt(0), (head + 13) % 16);
                        r.port.drain_fifo(&mut r.dma);
                    }
                }
                assert_eq!((gens[0].sent, gens[0].bytes), (gens[1].sent, gens[1].bytes), "{what}: frames generated");
                assert!(gens[0].sent > 15, "{what}: traffic flowed");
                let c = &rigs[1].port.counters;
                let takes_bursts = size <= 1000 && (own || promiscuous);
                assert_eq!(burst_frames > 0, takes_bursts, "{what}: the burst path took {burst_frames} frames");
                if let Some(n) = count {
                    assert_eq!(gens[1].sent, n, "{what}: the count is kept");
                }
                if takes_bursts {
                    assert!(c.qprc[0] > 15, "{what}: frames written");
                    // Once: frames held in the packet buffer are dropped, not tried again.
                    let faults = if count.is_some() { 0 } else { 1 };
                    assert_eq!(rigs[1].port.fault_count, faults, "{what}: the bad buffer stops the queue");
                    // Minimum-size frames at line rate outrun the 13 descriptors per round.
                    let outrun = size == 60 && rate_pps.is_none();
                    assert!(drop_en || c.qprdc[0] == 0, "{what}: drops for want of descriptors only with DROP_EN");
                    assert!(!(drop_en && outrun) || c.qprdc[0] > 0, "{what}: the ring overflows");
                }
                assert_same_observable_state(&rigs[0], &rigs[1]);
            }
        }
    }
}

/// The length and DD of receive descriptor `i` in the ring at DMA offset 0, in either format.
fn written_back(r: &Rig, i: usize, advanced: bool) -> Option<u64> {
    let qword1 = r.mem().read_u64(i * 16 + 8);
    let (status, len) =
        if advanced { (qword1 & 0xF_FFFF, qword1 >> 32 & 0xFFFF) } else { (qword1 >> 32, qword1 & 0xFFFF) };
    (status & 1 != 0).then_some(len)
}

#[test]
fn receive_descriptors_are_written_back_by_chunks_and_all_when_the_run_ends() {
    use nicsim::port::RX_WRITE_BACK_CHUNK;
    let chunk = RX_WRITE_BACK_CHUNK as usize;
    // Rings shorter than a chunk, and longer ones whose last chunk is short: chunks end at the
    // end of the ring too.
    let rings = [8, 24, chunk + 8, 2 * chunk + 24];
    for ring in rings {
        for advanced in [false, true] {
            let what = format!("ring {ring}, advanced {advanced}");
            let mut r = Rig::new();
            r.rx_ring(ring as u32, advanced, true);
            r.wr(rdt(0), ring as u32 - 1);
            let mut g = Generator::new(0);
            let mut wire = WireClock::new(10.0);
            g.start(TrafficSpec::default(), r.port.mac(), 10.0, 0);
            // One run that fills every descriptor the driver gave: before it ends, DD shows on
            // whole chunks only; when it ends, on every frame written.
            // Long enough for more frames than the longest ring holds (67.2 ns each).
            let now = 19_000_000;
            let allowed = g.allowance(now, 4 * chunk);
            let mut run = r.port.rx_run_begin(&mut r.dma);
            let taken = r.port.rx_run_generated_burst(&r.dma, &mut run, &mut g, &mut wire, now, allowed);
            let filled = ring - 1;
            assert!(taken > filled, "{what}: {taken} frames, more than the ring holds (DROP_EN drops the rest)");
            let whole = filled / chunk * chunk;
            for i in 0..filled {
                assert_eq!(written_back(&r, i, advanced).is_some(), i < whole, "{what}: descriptor {i} during the run");
            }
            r.port.rx_run_end(&r.dma, run);
            for i in 0..ring {
                assert_eq!(
                    written_back(&r, i, advanced),
                    (i < filled).then_some(60),
                    "{what}: descriptor {i} after the run"
                );
            }
            // Many laps in bursts of every length: the driver finds each frame once, in order,
            // complete, and gives all its descriptors back at once.
            let mut next = 0usize;
            let mut last_seq = None;
            let mut received = 0u64;
            let mut now = now;
            for round in 1..400u64 {
                while let Some(len) = written_back(&r, next, advanced) {
                    let buf = 0x10000 + next * 2048;
                    let mut frame = vec![0u8; len as usize];
                    r.mem().read_bytes(buf, &mut frame);
                    let (_, seq, _) = nicsim::wire::parse_payload(&frame).expect("a generated frame");
                    assert!(last_seq.is_none_or(|l| seq > l), "{what}: frames in order");
                    last_seq = Some(seq);
                    received += 1;
                    r.mem().write_u64(next * 16, DMA_BASE + buf as u64);
                    r.mem().write_u64(next * 16 + 8, 0);
                    next = (next + 1) % ring;
                }
                r.wr(rdt(0), ((next + ring - 1) % ring) as u32);
                // Between 9 and 62 frame times at 10 Gb/s: bursts from short to overflowing.
                now += (round % 7 + 1) * 600_000;
                let allowed = g.allowance(now, 4 * chunk);
                let mut run = r.port.rx_run_begin(&mut r.dma);
                r.port.rx_run_generated_burst(&r.dma, &mut run, &mut g, &mut wire, now, allowed);
                r.port.rx_run_end(&r.dma, run);
            }
            let c = &r.port.counters;
            assert!(received > 20 * ring as u64, "{what}: {received} frames over many laps");
            assert_eq!(c.qprc[0], received + written_pending(&r, next, ring, advanced), "{what}: frames written");
            assert_eq!(g.sent, c.qprc[0] + c.qprdc[0], "{what}: every frame written or counted as dropped");
        }
    }
}

/// Frames written back and not yet taken by the driver from descriptor `next` on.
fn written_pending(r: &Rig, next: usize, ring: usize, advanced: bool) -> u64 {
    (0..ring).take_while(|k| written_back(r, (next + k) % ring, advanced).is_some()).count() as u64
}

#[test]
fn the_sink_measures_frames_in_driver_memory_as_it_measures_copies() {
    let (eop, ifcs) = (0b1u64, 0b10u64);
    let mut generator = Generator::new(2);
    let mut wire = WireClock::new(10.0);
    generator.start(TrafficSpec { size_max: Some(70), ..Default::default() }, [0x02, 0, 0, 0, 0, 0], 10.0, 0);
    let mut frames: Vec<(Vec<u8>, u64)> = Vec::new();
    for k in 0..40u64 {
        let (f, _) = generator.next_frame(1_000_000 + k * 10_000, &mut wire).expect("due");
        let mut f = f.to_vec();
        if k % 7 == 3 {
            // Latency spread: a timestamp after the frame leaves counts as the least latency.
            f[50..58].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
        }
        frames.push((f, ifcs));
    }
    frames.swap(5, 9); // reordered
    frames.remove(20); // lost
    let mut foreign = frame(80, 1);
    foreign[12..14].copy_from_slice(&[0x86, 0xDD]);
    frames.push((foreign, ifcs));
    frames.push((frame(40, 2), ifcs)); // padded to 60: the sink reads its zeros
    let mut with_fcs = frames[0].0.clone();
    with_fcs.extend_from_slice(&[1, 2, 3, 4]);
    frames.push((with_fcs, 0)); // FCS supplied by the driver
    let mut sinks = Vec::new();
    for direct in [false, true] {
        let mut r = Rig::new();
        let ring = r.tx_ring(0, 64, None);
        for (i, (data, cmd)) in frames.iter().enumerate() {
            let buf = 0x20000 + i * 2048;
            r.mem().write_bytes(buf, data);
            r.mem().write_u64(ring + i * 16, DMA_BASE + buf as u64);
            r.mem().write_u64(ring + i * 16 + 8, data.len() as u64 | (eop | cmd) << 24);
        }
        r.wr(tdt(0), frames.len() as u32);
        let mut sink = Sink::new();
        let mut batch = TxBatch::new(64);
        for k in 1..10 {
            let now = k * 1_000_000_000;
            if direct {
                r.port.transmit(&mut r.dma, now, &mut sink);
            } else {
                batch.clear();
                r.port.transmit(&mut r.dma, now, &mut batch);
                for (f, end) in batch.iter() {
                    sink.consume(f, end);
                }
            }
        }
        sinks.push(sink);
    }
    let summary = |s: &Sink| {
        (s.packets, s.bytes, s.foreign, serde_json::to_value(&s.streams).unwrap(), LatencySummary::of(&s.latency_ns))
    };
    let (a, b) = (summary(&sinks[0]), summary(&sinks[1]));
    assert_eq!(a, b);
    assert_eq!((a.0, a.2), (frames.len() as u64, 2), "every frame; the IPv6 one and the padded one are foreign");
    // Frames 5 and 9 swapped (6, 7, 8 and 5 late), 20 removed, 0 again at the end (late, and
    // it cancels the loss of 20 as the sink counts it).
    let stream = &sinks[1].streams[2];
    assert_eq!((stream.received, stream.lost, stream.reordered), (40, 0, 5));
    assert_eq!(a.4.min, 1, "the future timestamps reach the histogram");
    assert!(a.4.max > 100_000, "the others took the milliseconds to the first transmit");
}

#[test]
fn a_tail_moved_during_an_iteration_is_seen_before_frames_are_dropped() {
    // The engine polls RDT once per iteration. A driver that hands descriptors back in the
    // meantime must not lose the frames that arrive before the next poll, on any receive
    // path: generated bursts, frames one by one in a run, and the general path.
    for path in ["burst", "run", "general"] {
        for advanced in [false, true] {
            for new_tail in [15u32, 3, 99] {
                let what = format!("path {path}, advanced {advanced}, RDT moved to {new_tail}");
                let mut r = Rig::new();
                r.rx_ring(16, advanced, true);
                r.wr(rdt(0), 3); // three descriptors owned by the device
                let mut generator = Generator::new(1);
                let spec = TrafficSpec { count: Some(10), ..Default::default() };
                generator.start(spec, r.port.mac(), 10.0, 0);
                let mut wire = WireClock::new(10.0);
                let now = 10_000_000;
                let mut run = r.port.rx_run_begin(&mut r.dma);
                // The driver's write, not yet seen by any poll.
                r.bar.write_u32(rdt(0) as usize, new_tail);
                match path {
                    "burst" => {
                        let allowed = generator.allowance(now, 128);
                        let taken =
                            r.port.rx_run_generated_burst(&r.dma, &mut run, &mut generator, &mut wire, now, allowed);
                        assert_eq!(taken, 10, "{what}: one burst takes all");
                        r.port.rx_run_end(&r.dma, run);
                    }
                    "run" => {
                        for k in 0..10 {
                            r.port.rx_run_frame(&mut r.dma, &mut run, &frame(60, k));
                        }
                        r.port.rx_run_end(&r.dma, run);
                    }
                    _ => {
                        r.port.rx_run_end(&r.dma, run);
                        for k in 0..10 {
                            r.port.receive(&mut r.dma, &frame(60, k));
                        }
                    }
                }
                // 15: room for all ten; 3 (unchanged) and 99 (outside the ring): three.
                let room = if new_tail == 15 { 10 } else { 3 };
                let c = &r.port.counters;
                assert_eq!((c.qprc[0], c.qprdc[0]), (room, 10 - room), "{what}: written, dropped");
                for i in 0..16usize {
                    // DD: bit 0 of the advanced write-back's qword 1, of the legacy status byte.
                    let qword1 = r.mem().read_u64(i * 16 + 8);
                    let dd = if advanced { qword1 & 1 } else { qword1 >> 32 & 1 };
                    assert_eq!(dd == 1, (i as u64) < room, "{what}: DD of descriptor {i}");
                }
                let warned = r.lint_rules().contains(&Rule::TailOutsideRing);
                assert!(!warned, "{what}: nothing reported before the poll");
                r.sync();
                let warned = r.lint_rules().contains(&Rule::TailOutsideRing);
                assert_eq!(warned, new_tail == 99, "{what}: the poll reports a tail outside the ring");
                assert_eq!(r.port.rx_queue_state(0).head, room as u32, "{what}: head");
            }
        }
    }
}
