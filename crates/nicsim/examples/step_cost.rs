//! The engine's work per frame, counted exactly: the setup of `nicsim bench` (two ports, both
//! generators at line rate, a TinyNF-style peer reflecting 0→1 and 1→0 through shared rings)
//! in one thread, with simulated time. The peer runs between engine iterations, so every run
//! does the same work: under `valgrind --tool=callgrind` the instruction count of
//! `Engine::step` divided by the frames printed is the engine's cost per frame, free of the
//! timing noise of a two-core run.
//!
//! Run: `valgrind --tool=callgrind --toggle-collect='*Engine*step*' \
//!       target/release/examples/step_cost [iterations]`, then divide the `Ir` total of
//! `callgrind_annotate` by the `frames` printed. Without valgrind it prints the same counts.

#![forbid(unsafe_code)]

use nicsim::control::Request;
use nicsim::dma::FlatDmaSpace;
use nicsim::engine::Engine;
use nicsim::pciconfig::{PciConfig, CONFIG_LEN};
use nicsim::port::Port;
use nicsim::regs::*;
use nicsim::wire::TrafficSpec;
use platform::MappedRegion;

const DMA_BASE: u64 = 0x4000_0000;
const RING: u32 = 256;
const BUF: usize = 2048;
/// Per direction: the shared ring, the head write-back word, the buffers.
const SPAN: usize = 1 << 20;
const HEAD_WB: usize = RING as usize * 16;
const BUFS: usize = 0x2000;
/// Simulated time per engine iteration: about 100 line-rate frames per port.
const STEP_PS: u64 = 6_700_000;

/// The shared ring of one direction, as TinyNF runs it: RX queue 0 of `input`, a TX queue of
/// `output`, head write-back, RDT following the transmit head.
struct Direction {
    input: usize,
    output: usize,
    base: usize,
    processed: u32,
}

fn main() {
    let iterations: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let dma = FlatDmaSpace { region: MappedRegion::anonymous(2 * SPAN).expect("memory"), base: DMA_BASE };
    let mut ports = Vec::new();
    for i in 0..2 {
        let bar = MappedRegion::anonymous(BAR0_LEN).expect("BAR");
        let cfg = MappedRegion::anonymous(CONFIG_LEN).expect("config space");
        // The in-process driver writes BAR0 and config space through the port's own mappings.
        let port = Port::new(i, bar, PciConfig::new(cfg, 0xF800_0000 + i as u64 * 0x10_0000), i as u32, 10.0);
        ports.push(port);
    }
    let mut engine = Engine::new(ports, dma, 10.0, &[]);
    let mut dirs = [
        Direction { input: 0, output: 1, base: 0, processed: 0 },
        Direction { input: 1, output: 0, base: SPAN, processed: 0 },
    ];
    for d in &dirs {
        bring_up(&mut engine, d);
    }
    for port in 0..2 {
        engine.handle(Request::Start { port, spec: TrafficSpec::default() }, 0).expect("start");
    }
    let mut now = 0;
    let mut in_step = std::time::Duration::ZERO;
    for _ in 0..iterations {
        now += STEP_PS;
        let t = std::time::Instant::now();
        engine.step(now);
        in_step += t.elapsed();
        for d in dirs.iter_mut() {
            reflect(&mut engine, d);
        }
    }
    let rx: u64 = engine.ports.iter().map(|p| p.counters.qprc[0]).sum();
    let tx: u64 = engine.ports.iter().map(|p| p.counters.gptc).sum();
    let dropped: u64 = engine.ports.iter().map(|p| p.counters.qprdc[0]).sum();
    println!("iterations {iterations} frames {rx} transmitted {tx} no_descriptor {dropped}");
    println!(
        "time in Engine::step: {:.1} ns per frame (one core, driver in the same thread)",
        in_step.as_nanos() as f64 / rx.max(1) as f64
    );
}

/// A driver register write, applied at once (the engine's slow path would find it).
fn write(engine: &mut Engine<FlatDmaSpace>, port: usize, reg: u32, value: u32) {
    engine.ports[port].bar().write_u32(reg as usize, value);
    engine.ports[port].scan_all();
}

fn bring_up(engine: &mut Engine<FlatDmaSpace>, d: &Direction) {
    let mem = &engine.dma.region;
    for i in 0..RING as usize {
        mem.write_u64(d.base + i * 16, DMA_BASE + (d.base + BUFS + i * BUF) as u64);
        mem.write_u64(d.base + i * 16 + 8, 0);
    }
    let ring = (DMA_BASE + d.base as u64) as u32;
    let cfg = engine.ports[d.input].config.region();
    cfg.write_u16(4, cfg.read_u16(4) | 0b110); // memory space + bus master
    let cfg = engine.ports[d.output].config.region();
    cfg.write_u16(4, cfg.read_u16(4) | 0b110);
    let (i, o) = (d.input, d.output);
    write(engine, o, tdbal(0), ring);
    write(engine, o, tdlen(0), RING * 16);
    write(engine, o, tdwbal(0), (DMA_BASE as u32 + (d.base + HEAD_WB) as u32) | TDWBAL_HEAD_WB_EN);
    let dmatxctl = engine.ports[o].bar().read_u32(DMATXCTL as usize);
    write(engine, o, DMATXCTL, dmatxctl | DMATXCTL_TE);
    write(engine, o, txdctl(0), TXDCTL_ENABLE);
    write(engine, i, rdbal(0), ring);
    write(engine, i, rdlen(0), RING * 16);
    write(engine, i, srrctl(0), (BUF / 1024) as u32 | SRRCTL_DROP_EN);
    write(engine, i, rxdctl(0), RXDCTL_ENABLE);
    write(engine, i, FCTRL, FCTRL_BAM);
    write(engine, i, RXCTRL, RXCTRL_RXEN);
    write(engine, i, rdt(0), RING - 1);
}

/// One pass of the peer: every received frame becomes a TX descriptor on the other port (RS
/// on every 32nd for head write-back), then RDT follows the written-back transmit head.
fn reflect(engine: &mut Engine<FlatDmaSpace>, d: &mut Direction) {
    let mem = &engine.dma.region;
    let mut moved = 0;
    loop {
        let desc = d.base + d.processed as usize * 16;
        let status = mem.read_u64(desc + 8);
        if status & (1 << 32) == 0 || moved == RING {
            break;
        }
        let rs = if d.processed % 32 == 31 { 1 << 3 } else { 0 };
        mem.write_u64(desc + 8, (status & 0xFFFF) | (0b11 | rs) << 24);
        d.processed = (d.processed + 1) % RING;
        moved += 1;
    }
    if moved > 0 {
        engine.ports[d.output].bar().write_u32(tdt(0) as usize, d.processed);
    }
    let head = mem.read_u32(d.base + HEAD_WB);
    engine.ports[d.input].bar().write_u32(rdt(0) as usize, (head + RING - 1) % RING);
}
