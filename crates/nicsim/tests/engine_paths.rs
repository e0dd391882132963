//! The engine's delivery paths in one process: frames a port transmits cross a cable to the
//! other port or, with HLREG0.LPBK, loop back into the port's own receive ring; generated
//! frames fill the receive ring in sequence. A minimal driver writes the BARs through second
//! mappings; DMA goes to a flat test region.

use crate::common;

use common::twice;
use nicsim::control::Request;
use nicsim::dma::FlatDmaSpace;
use nicsim::engine::Engine;
use nicsim::pciconfig::{PciConfig, CONFIG_LEN};
use nicsim::port::Port;
use nicsim::regs::*;
use nicsim::wire::{parse_payload, TrafficSpec};
use platform::MappedRegion;

const DMA_BASE: u64 = 0x4000_0000;
const DMA_LEN: usize = 1 << 21;
/// Each port's share of the DMA region: RX ring, TX ring, RX buffers, TX buffers.
const PORT_SPAN: usize = 0x80000;
const RX_RING: usize = 0;
const TX_RING: usize = 0x1000;
const RX_BUFS: usize = 0x10000;
const TX_BUFS: usize = 0x40000;
const RING: u32 = 32;
/// Engine time advances by this much per step: about 15 minimum-size frames' worth.
const STEP_PS: u64 = 1_000_000;

/// Two ports in an engine, with the driver's views of their BARs.
struct Rig {
    engine: Engine<FlatDmaSpace>,
    bars: Vec<MappedRegion>,
    _cfgs: Vec<MappedRegion>,
    now: u64,
    tx_tail: [u32; 2],
}

impl Rig {
    fn new(cables: &[(usize, usize)]) -> Rig {
        let mut ports = Vec::new();
        let (mut bars, mut cfgs) = (Vec::new(), Vec::new());
        for i in 0..2 {
            let (bar_dev, bar) = twice(BAR0_LEN, &format!("bar{i}"));
            let (cfg_dev, cfg) = twice(CONFIG_LEN, &format!("cfg{i}"));
            let mut port =
                Port::new(i, bar_dev, PciConfig::new(cfg_dev, 0xF800_0000 + i as u64 * 0x10_0000), i as u32, 10.0);
            port.set_link_setup(std::time::Duration::ZERO);
            ports.push(port);
            cfg.write_u16(4, cfg.read_u16(4) | 0b110); // memory space + bus master
            bars.push(bar);
            cfgs.push(cfg);
        }
        let dma = FlatDmaSpace { region: MappedRegion::anonymous(DMA_LEN).unwrap(), base: DMA_BASE };
        let engine = Engine::new(ports, dma, 10.0, cables);
        let mut r = Rig { engine, bars, _cfgs: cfgs, now: 0, tx_tail: [0; 2] };
        for p in 0..2 {
            r.bring_up(p);
        }
        r
    }
    fn mem(&self) -> &MappedRegion {
        &self.engine.dma.region
    }
    fn at(p: usize, offset: usize) -> usize {
        p * PORT_SPAN + offset
    }
    fn wr(&mut self, p: usize, reg: u32, v: u32) {
        self.bars[p].write_u32(reg as usize, v);
        self.engine.ports[p].scan_all();
    }
    fn rd(&self, p: usize, reg: u32) -> u32 {
        self.bars[p].read_u32(reg as usize)
    }
    /// Legacy RX queue 0 (2 KB buffers, DROP_EN, all descriptors but one given to the device)
    /// and legacy TX queue 0, as a TinyNF-style driver sets them up.
    fn bring_up(&mut self, p: usize) {
        for i in 0..RING as usize {
            let rx = Self::at(p, RX_RING + i * 16);
            self.mem().write_u64(rx, DMA_BASE + Self::at(p, RX_BUFS + i * 2048) as u64);
            self.mem().write_u64(rx + 8, 0);
        }
        self.wr(p, rdbal(0), (DMA_BASE as usize + Self::at(p, RX_RING)) as u32);
        self.wr(p, rdlen(0), RING * 16);
        self.wr(p, srrctl(0), 2 | SRRCTL_DROP_EN);
        self.wr(p, rxdctl(0), RXDCTL_ENABLE);
        self.wr(p, FCTRL, FCTRL_BAM);
        self.wr(p, RXCTRL, RXCTRL_RXEN);
        self.wr(p, rdt(0), RING - 1);
        self.wr(p, tdbal(0), (DMA_BASE as usize + Self::at(p, TX_RING)) as u32);
        self.wr(p, tdlen(0), RING * 16);
        self.wr(p, DMATXCTL, self.rd(p, DMATXCTL) | DMATXCTL_TE);
        self.wr(p, txdctl(0), TXDCTL_ENABLE);
    }
    /// Queues `frame` on port `p`'s TX queue 0 (EOP, IFCS, RS).
    fn send(&mut self, p: usize, frame: &[u8]) {
        let i = self.tx_tail[p] as usize;
        let buf = Self::at(p, TX_BUFS + i * 2048);
        self.mem().write_bytes(buf, frame);
        let desc = Self::at(p, TX_RING + i * 16);
        self.mem().write_u64(desc, DMA_BASE + buf as u64);
        self.mem().write_u64(desc + 8, frame.len() as u64 | 0b1011 << 24);
        self.tx_tail[p] = (self.tx_tail[p] + 1) % RING;
        self.bars[p].write_u32(tdt(0) as usize, self.tx_tail[p]);
    }
    fn run(&mut self, steps: usize) {
        for _ in 0..steps {
            self.now += STEP_PS;
            self.engine.step(self.now);
        }
        self.engine.scan();
    }
    /// The frames written into port `p`'s RX ring, in ring order from descriptor 0.
    fn received(&self, p: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for i in 0..RING as usize {
            let status = self.mem().read_u64(Self::at(p, RX_RING + i * 16 + 8));
            if (status >> 32) & 0b11 != 0b11 {
                break; // DD | EOP
            }
            let mut f = vec![0u8; (status & 0xFFFF) as usize];
            self.mem().read_bytes(Self::at(p, RX_BUFS + i * 2048), &mut f);
            out.push(f);
        }
        out
    }
}

/// A frame to port `dst`'s own address (02:00:00:00:00:0n), `len` bytes, marked with `tag`.
fn frame_to(dst: u8, len: usize, tag: u8) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(13) ^ tag).collect();
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, dst]);
    f[12..14].copy_from_slice(&[0x88, 0xB5]); // local experimental EtherType
    f
}

#[test]
fn transmitted_frames_cross_the_cable_or_loop_back() {
    let mut r = Rig::new(&[(0, 1)]);
    let across: Vec<Vec<u8>> = (0..10).map(|i| frame_to(1, 60 + i * 7, i as u8)).collect();
    for f in &across {
        r.send(0, f);
    }
    r.run(10);
    assert_eq!(r.received(1), across, "port 1 receives what port 0 sent, in order");
    assert!(r.received(0).is_empty(), "nothing loops back without LPBK");
    let c1 = &r.engine.ports[1].counters;
    assert_eq!((c1.gprc, c1.qprc[0]), (10, 10));
    assert_eq!(r.engine.ports[0].counters.gptc, 10);
    assert_eq!(r.rd(1, rdh(0)), 10, "RDH published");

    // HLREG0.LPBK: port 0's frames come back into its own ring, none cross the cable.
    r.wr(0, HLREG0, r.rd(0, HLREG0) | HLREG0_LPBK);
    let back: Vec<Vec<u8>> = (0..5).map(|i| frame_to(0, 64 + i, 100 + i as u8)).collect();
    for f in &back {
        r.send(0, f);
    }
    r.run(10);
    assert_eq!(r.received(0), back, "port 0 receives its own frames");
    assert_eq!(r.received(1).len(), 10, "port 1 got nothing more");
    assert_eq!(r.engine.ports[0].counters.qprc[0], 5);
}

#[test]
fn generated_frames_fill_the_receive_ring_in_sequence_and_drop_beyond_it() {
    let mut r = Rig::new(&[]);
    let spec = TrafficSpec { count: Some(100), ..Default::default() };
    r.engine.handle(Request::Start { port: 1, spec }, r.now).unwrap();
    r.run(20);
    let got = r.received(1);
    assert_eq!(got.len(), RING as usize - 1, "every descriptor the driver gave is filled");
    let mut last_timestamp = 0;
    for (i, f) in got.iter().enumerate() {
        let (stream, seq, timestamp) = parse_payload(f).expect("a generator frame");
        assert_eq!((stream, seq), (1, i as u64));
        assert!(timestamp > last_timestamp, "frame {i}: timestamps increase frame by frame");
        last_timestamp = timestamp;
    }
    let c = &r.engine.ports[1].counters;
    assert_eq!((c.gprc, c.qprc[0], c.qprdc[0]), (100, 31, 69), "the rest dropped for want of descriptors");
    assert_eq!(c.gorc, 100 * 60);
    assert_eq!(r.engine.wires[1].generator.sent, 100);
    assert!(r.received(0).is_empty(), "port 0's generator is off");
}

#[test]
fn generated_flows_reach_the_ring_with_their_addresses_and_valid_checksums() {
    let mut r = Rig::new(&[]);
    let spec = TrafficSpec { count: Some(20), flows: 4, ..Default::default() };
    r.engine.handle(Request::Start { port: 0, spec }, r.now).unwrap();
    r.run(5);
    let got = r.received(0);
    assert_eq!(got.len(), 20);
    let ip_sum = |f: &[u8]| -> u32 { f[14..34].chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum() };
    for (i, f) in got.iter().enumerate() {
        let mut sum = ip_sum(f);
        while sum > 0xFFFF {
            sum = (sum & 0xFFFF) + (sum >> 16);
        }
        assert_eq!(sum, 0xFFFF, "frame {i}: IP header checksum");
        assert_eq!(f[26..30], got[i % 4][26..30], "frame {i}: the source address repeats every 4 frames");
        assert_eq!(f[34..36], got[i % 4][34..36], "frame {i}: so does the source port");
        assert_eq!(parse_payload(f).map(|p| p.1), Some(i as u64));
    }
    assert_ne!(got[0][26..30], got[1][26..30], "flows differ in their source address");
    assert_ne!(got[0][34..36], got[1][34..36], "and in their source port");
}

/// Port `p` in lossless mode: no DROP_EN, a packet buffer of `buffer_kb`, 802.3x XOFF at
/// `buffer_kb - 2` KB and XON below half of it, a pause of 1000 quanta refreshed every 500.
fn lossless(r: &mut Rig, p: usize, buffer_kb: u32) {
    r.wr(p, srrctl(0), 2);
    r.wr(p, rxpbsize(0), buffer_kb << 10);
    r.wr(p, fcrth(0), ((buffer_kb - 2) << 10) | FCRTH_FCEN);
    r.wr(p, fcrtl(0), (buffer_kb << 9) | FCRTL_XONE);
    r.wr(p, fcttv(0), 1000);
    r.wr(p, FCRTV, 500);
    r.wr(p, FCCFG, FCCFG_TFCE_802_3X);
}

/// What a polling driver does on port `p`: takes every frame written back from `*next` on,
/// gives its descriptor back (DD cleared, RDT moved), and returns the frames' sequence numbers.
fn take(r: &mut Rig, p: usize, next: &mut usize) -> Vec<u64> {
    let mut seqs = Vec::new();
    loop {
        let desc = Rig::at(p, RX_RING + *next * 16);
        let status = r.mem().read_u64(desc + 8);
        if (status >> 32) & 1 == 0 {
            break;
        }
        let mut f = vec![0u8; (status & 0xFFFF) as usize];
        r.mem().read_bytes(Rig::at(p, RX_BUFS + *next * 2048), &mut f);
        seqs.push(parse_payload(&f).expect("a generator frame").1);
        r.mem().write_u64(desc + 8, 0);
        let returned = *next as u32;
        *next = (*next + 1) % RING as usize;
        r.bars[p].write_u32(rdt(0) as usize, returned);
    }
    seqs
}

#[test]
fn with_flow_control_a_full_packet_buffer_pauses_the_generator_and_nothing_is_lost() {
    let mut r = Rig::new(&[]);
    lossless(&mut r, 1, 16);
    let n = 5_000;
    r.engine
        .handle(Request::Start { port: 1, spec: TrafficSpec { count: Some(n), ..Default::default() } }, r.now)
        .unwrap();
    // The driver takes nothing: the ring fills, then the packet buffer up to its high mark.
    r.run(200);
    let p = &r.engine.ports[1];
    assert!(p.flow.stats.xoff_sent >= 1, "XOFF sent");
    assert!(p.flow.partner_paused(r.now), "and refreshed while the buffer stays full");
    assert_eq!((p.counters.mpc, p.counters.qprdc[0]), (0, 0), "nothing dropped");
    let held = p.packet_buffer_bytes();
    assert!((14 * 1024..16 * 1024).contains(&held), "the buffer stopped at its high mark: {held} bytes");
    let sent = r.engine.wires[1].generator.sent;
    assert!(sent < n, "the generator holds its frames");
    r.run(200);
    assert_eq!(r.engine.wires[1].generator.sent, sent, "and goes on holding them");
    assert_eq!(r.engine.wires[1].generator.skipped, 0, "a paused generator skips nothing");
    // The driver comes back: everything arrives, in order, once.
    let (mut next, mut seqs) = (0, Vec::new());
    for _ in 0..20_000 {
        seqs.extend(take(&mut r, 1, &mut next));
        r.run(1);
        if seqs.len() as u64 == n {
            break;
        }
    }
    assert_eq!(seqs, (0..n).collect::<Vec<_>>(), "every frame once, in order");
    let p = &r.engine.ports[1];
    assert!(p.flow.stats.xon_sent >= 1, "XON once the buffer drained");
    assert_eq!((p.counters.mpc, p.counters.qprdc[0]), (0, 0));
    assert_eq!(r.rd(1, LXOFFTXC) as u64, p.flow.stats.xoff_sent, "LXOFFTXC counts the XOFF frames");
}

#[test]
fn without_flow_control_a_full_packet_buffer_misses_frames_and_counts_them() {
    let mut r = Rig::new(&[]);
    lossless(&mut r, 1, 16);
    r.wr(1, fcrth(0), 14 << 10); // FCEN clear: no XOFF
    let n = 5_000;
    r.engine
        .handle(Request::Start { port: 1, spec: TrafficSpec { count: Some(n), ..Default::default() } }, r.now)
        .unwrap();
    r.run(400);
    let p = &r.engine.ports[1];
    assert_eq!(p.flow.stats.xoff_sent, 0);
    let held = p.in_flight(&r.engine.dma);
    assert_eq!(held.rx_ring, RING as u64 - 1, "the driver took nothing from the ring");
    assert_eq!(r.engine.wires[1].generator.sent, n);
    assert!(p.counters.mpc > 0);
    assert_eq!(
        p.counters.mpc + held.rx_ring + held.packet_buffer,
        n,
        "generated = missed + in the ring + in the buffer"
    );
}

#[test]
fn a_partner_pause_holds_the_transmitter_only_with_rfce() {
    let mut r = Rig::new(&[]);
    r.engine.handle(Request::PauseTx { port: 0, paused: true }, r.now).unwrap();
    r.send(0, &frame_to(9, 60, 1));
    r.run(5);
    assert_eq!(r.engine.ports[0].counters.gptc, 1, "MFLCN.RFCE clear: the pause is ignored");
    r.wr(0, MFLCN, MFLCN_RFCE);
    r.send(0, &frame_to(9, 60, 2));
    r.run(5);
    assert_eq!(r.engine.ports[0].counters.gptc, 1, "held");
    assert_eq!(r.engine.ports[0].in_flight(&r.engine.dma).tx_ring, 1, "the frame waits in the TX ring");
    r.engine.handle(Request::PauseTx { port: 0, paused: false }, r.now).unwrap();
    r.run(5);
    assert_eq!(r.engine.ports[0].counters.gptc, 2);
}

#[test]
fn an_xoff_across_a_cable_holds_the_other_ports_transmitter() {
    let mut r = Rig::new(&[(0, 1)]);
    lossless(&mut r, 1, 4);
    r.wr(0, MFLCN, MFLCN_RFCE);
    // Port 0 sends more than port 1's ring and buffer hold; port 1's driver takes nothing.
    for round in 0..2 {
        for k in 0..RING - 1 {
            r.send(0, &frame_to(1, 1000, (round * RING + k) as u8));
        }
        r.run(50);
    }
    let p1 = &r.engine.ports[1];
    assert!(p1.flow.stats.xoff_sent >= 1);
    assert_eq!(p1.counters.mpc, 0, "nothing missed");
    let p0 = &r.engine.ports[0];
    assert!(p0.flow.stats.xoff_received >= 1 && p0.transmitter_paused(r.now), "port 0 is held");
    assert!(p0.in_flight(&r.engine.dma).tx_ring > 0, "its frames wait in its TX ring");
}
