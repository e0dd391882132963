//! nicsim never panics on what a driver writes: random register writes, descriptor and
//! buffer contents, PCI config writes and control requests, from a fixed seed, against an
//! engine of three ports (a cable between 0 and 1). After every case the engine still answers
//! its control requests, and no byte around the driver's DMA memory has changed: the device
//! writes only memory the driver gave it. A second phase runs the engine on its own thread, as
//! `nicsim serve` does, while the test writes at random, and checks it still answers.
//!
//! `make test` runs 10^5 cases from the default seed; `make fuzz` runs many more from a new
//! seed. `NICSIM_FUZZ_CASES` and `NICSIM_FUZZ_SEED` choose; a failure names the seed and case,
//! and the same seed replays the same sequence.

use crate::common;

use common::twice;
use nicsim::chaos::{Fault, WireFault};
use nicsim::control::Request;
use nicsim::dma::{DmaSpace, Location, Window};
use nicsim::engine::{self, Command, Engine};
use nicsim::pciconfig::{PciConfig, CONFIG_LEN};
use nicsim::port::Port;
use nicsim::regs::*;
use nicsim::wire::{TrafficSpec, MAX_FRAME, MIN_FRAME};
use platform::MappedRegion;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Bus address of the driver's DMA memory, and its size.
const DMA_BASE: u64 = 0x4000_0000;
const DMA_LEN: usize = 1 << 20;
/// Bytes of the mapping before and after the driver's memory that the device must never touch.
const GUARD: usize = 4096;
const GUARD_BYTE: u8 = 0xA5;
const PORTS: usize = 3;

/// SplitMix64: small, fast, and the same sequence for the same seed everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// The driver's memory with guard zones on both sides in one mapping: only the middle
/// resolves, so a device access computed wrongly from a driver value lands in a guard.
struct GuardedDma {
    region: MappedRegion,
}

impl GuardedDma {
    fn new(region: MappedRegion) -> Self {
        region.fill(0, GUARD, GUARD_BYTE);
        region.fill(GUARD + DMA_LEN, GUARD, GUARD_BYTE);
        GuardedDma { region }
    }
}

/// The first byte of a guard zone that is not the guard pattern, if any.
fn guard_damage(region: &MappedRegion) -> Option<usize> {
    let mut buf = vec![0u8; GUARD];
    for start in [0, GUARD + DMA_LEN] {
        region.read_bytes(start, &mut buf);
        if let Some(i) = buf.iter().position(|&b| b != GUARD_BYTE) {
            return Some(start + i);
        }
    }
    None
}

impl DmaSpace for GuardedDma {
    fn locate(&self, phys: u64) -> Option<Location> {
        let off = usize::try_from(phys.checked_sub(DMA_BASE)?).ok().filter(|&o| o < DMA_LEN)?;
        Some(Location { region: 0, offset: GUARD + off, avail: DMA_LEN - off })
    }
    fn window(&self, phys: u64) -> Option<Window> {
        self.locate(phys)?;
        Some(Window { phys: DMA_BASE, len: DMA_LEN as u64, region: 0, offset: GUARD })
    }
    fn region(&self, _index: usize) -> &MappedRegion {
        &self.region
    }
}

/// The engine, and the driver's views of BARs, config spaces and DMA memory.
struct Rig {
    engine: Engine<GuardedDma>,
    bars: Vec<MappedRegion>,
    cfgs: Vec<MappedRegion>,
    now: u64,
    /// The TX queue each port's last bring-up enabled.
    tx_queue: [u32; PORTS],
}

impl Rig {
    fn new() -> Rig {
        let (dma_dev, _) = twice(DMA_LEN + 2 * GUARD, "dma");
        let (engine, bars, cfgs) = engine_with(GuardedDma::new(dma_dev));
        let mut rig = Rig { engine, bars, cfgs, now: 0, tx_queue: [0; PORTS] };
        let mut r = Rng(0);
        for p in 0..PORTS {
            bring_up(&mut rig, &mut r, p);
        }
        rig
    }
    fn mem(&self) -> &MappedRegion {
        &self.engine.dma.region
    }
}

fn engine_with<D: DmaSpace>(dma: D) -> (Engine<D>, Vec<MappedRegion>, Vec<MappedRegion>) {
    let (mut ports, mut bars, mut cfgs) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..PORTS {
        let (bar_dev, bar) = twice(BAR0_LEN, &format!("fuzz-bar{i}"));
        let (cfg_dev, cfg) = twice(CONFIG_LEN, &format!("fuzz-cfg{i}"));
        let config = PciConfig::new(cfg_dev, 0xF800_0000 + i as u64 * 0x10_0000);
        let mut port = Port::new(i, bar_dev, config, i as u32, 10.0);
        // The fuzzer's own `link` actions take it down and up.
        port.set_link_setup(std::time::Duration::ZERO);
        ports.push(port);
        cfg.write_u16(4, cfg.read_u16(4) | 0b110);
        bars.push(bar);
        cfgs.push(cfg);
    }
    let mut engine = Engine::new(ports, dma, 10.0, &[(0, 1)]);
    engine.describe(nicsim::control::Info {
        root: "fuzz".into(),
        devices: "fuzz/devices".into(),
        socket: "fuzz/nicsim.sock".into(),
        link_gbps: 10.0,
        ports: Vec::new(),
    });
    (engine, bars, cfgs)
}

/// Registers whose writes the device acts on, for queue `q`.
fn interesting_register(rng: &mut Rng) -> u32 {
    let q = if rng.chance(4) { rng.below(QUEUES as u64) as u32 } else { rng.below(2) as u32 };
    let per_queue = [
        rdbal(q),
        rdbah(q),
        rdlen(q),
        rdh(q),
        rdt(q),
        srrctl(q),
        rxdctl(q),
        tdbal(q),
        tdbah(q),
        tdlen(q),
        tdh(q),
        tdt(q),
        txdctl(q),
        tdwbal(q),
        tdwbah(q),
        rqsmr(q / 4),
        tqsm(q / 4),
    ];
    let global = [
        CTRL,
        CTRL_EXT,
        EICR,
        EICS,
        EIMS,
        EIMC,
        EERD,
        MSCA,
        AUTOC,
        I2CCTL,
        HLREG0,
        MAXFRS,
        RXCTRL,
        RDRXCTL,
        FCTRL,
        SECRXCTRL,
        DMATXCTL,
        0x03C00, // RXPBSIZE(0)
        0x03D00, // FCCFG
        0x03200, // FCTTV(0)
        0x03220, // FCRTL(0)
        0x03260, // FCRTH(0)
        0x032A0, // FCRTV
        0x04294, // MFLCN
        ral(rng.below(128) as u32),
        rah(rng.below(128) as u32),
        0x02100 + 4 * rng.below(16) as u32, // SRRCTL alias
        0x05400 + 4 * rng.below(32) as u32, // RAL/RAH alias
    ];
    if rng.chance(3) {
        rng.pick(&global)
    } else {
        rng.pick(&per_queue)
    }
}

/// A DMA address: inside the driver's memory, at or across its edges, or anywhere.
fn address(rng: &mut Rng) -> u64 {
    match rng.below(8) {
        0 => rng.next(),
        1 => u64::MAX - rng.below(64),
        2 => DMA_BASE - 1 - rng.below(4096),
        3 => DMA_BASE + DMA_LEN as u64 - rng.below(4096),
        4 => DMA_BASE + DMA_LEN as u64 + rng.below(4096),
        _ => DMA_BASE + rng.below(DMA_LEN as u64),
    }
}

fn value(rng: &mut Rng) -> u32 {
    match rng.below(8) {
        0 => rng.next() as u32,
        1 => [0, u32::MAX, 1, 0x8000_0000][rng.below(4) as usize],
        2 => 1 << rng.below(32),
        // Ring lengths and tails: small values, multiples of 128 bytes, or just past them.
        3 => (rng.below(64) as u32 * 128).wrapping_add(rng.below(3) as u32 * 8),
        4 => rng.below(1024) as u32,
        5 => address(rng) as u32,
        6 => (address(rng) >> 32) as u32,
        // An enable bit: any register takes any of them.
        _ => rng.pick(&[RXDCTL_ENABLE, TXDCTL_ENABLE, RXCTRL_RXEN, DMATXCTL_TE, SRRCTL_DROP_EN, HLREG0_LPBK, 1]),
    }
}

/// Writes something into driver memory: a descriptor, a buffer, or a frame nicsim's sink
/// would recognise as its own.
fn write_memory(rng: &mut Rng, mem: &MappedRegion) {
    let off = GUARD + rng.below(DMA_LEN as u64 - 64) as usize;
    match rng.below(4) {
        0 => {
            for k in 0..rng.below(8) as usize + 1 {
                mem.write_u64(off + k * 8, rng.next());
            }
        }
        1 => {
            // A descriptor: an address and a length/command or status word.
            let off = off & !15;
            mem.write_u64(off, address(rng));
            let len = rng.pick(&[0, 1, 14, 59, 60, 64, 1514, 1518, 2048, 2049, 9000, 0xFFFF]) as u64;
            mem.write_u64(off + 8, len | (rng.next() & 0xFFFF_FFFF_FFFF_0000));
        }
        2 => {
            // A generator frame with any sequence number and stream.
            let mut f = [0u8; 64];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[23] = 17;
            f[36..38].copy_from_slice(&nicsim::wire::NICSIM_UDP_PORT.to_be_bytes());
            f[42..50].copy_from_slice(&rng.next().to_le_bytes());
            f[50..58].copy_from_slice(&rng.next().to_le_bytes());
            f[58..60].copy_from_slice(&(rng.below(20) as u16).to_le_bytes());
            mem.write_bytes(off, &f);
        }
        _ => mem.fill(off, rng.below(64) as usize, rng.next() as u8),
    }
}

/// Where port `p`'s rings and buffers go when a case brings it up properly: each port has its
/// own quarter of the driver's memory (rings in the first 64 KiB of it, buffers after).
fn port_area(p: usize) -> u64 {
    DMA_BASE + (p as u64) * (DMA_LEN as u64 / 4)
}

/// A bring-up as a correct driver does it, with random choices, so that cases reach the
/// receive and transmit paths and then mutate a working queue.
fn bring_up(rig: &mut Rig, r: &mut Rng, p: usize) {
    let bar = &rig.bars[p];
    let area = port_area(p);
    let n = r.pick(&[8u32, 16, 32, 64, 72, 256]);
    // Rings 128-byte aligned, or (as TinyNF's were) only 16.
    let align = if r.chance(4) { 16 } else { 128 };
    let rx_ring = area + r.below(8) * align;
    let tx_ring = area + 0x8000 + r.below(8) * align;
    let buffers = area + 0x10000;
    for i in 0..u64::from(n) {
        let desc = (rx_ring - DMA_BASE) as usize + GUARD + i as usize * 16;
        rig.engine.dma.region.write_u64(desc, buffers + i * 2048);
        rig.engine.dma.region.write_u64(desc + 8, 0);
    }
    let q = if r.chance(4) { r.below(4) as u32 } else { 0 };
    rig.tx_queue[p] = q;
    bar.write_u32(rdbal(0) as usize, rx_ring as u32);
    bar.write_u32(rdbah(0) as usize, (rx_ring >> 32) as u32);
    bar.write_u32(rdlen(0) as usize, n * 16);
    let advanced = if r.chance(3) { 1 << SRRCTL_DESCTYPE_SHIFT } else { 0 };
    let drop_en = if r.chance(2) { SRRCTL_DROP_EN } else { 0 };
    bar.write_u32(srrctl(0) as usize, r.pick(&[1, 2, 2, 16]) | advanced | drop_en);
    bar.write_u32(rxdctl(0) as usize, RXDCTL_ENABLE);
    bar.write_u32(
        HLREG0 as usize,
        HLREG0_RXCRCSTRP | HLREG0_TXCRCEN | HLREG0_TXPADEN | r.pick(&[0, 0, 0, HLREG0_LPBK]),
    );
    bar.write_u32(FCTRL as usize, FCTRL_UPE | FCTRL_MPE | FCTRL_BAM);
    bar.write_u32(RXCTRL as usize, RXCTRL_RXEN);
    bar.write_u32(tdbal(q) as usize, tx_ring as u32);
    bar.write_u32(tdbah(q) as usize, (tx_ring >> 32) as u32);
    bar.write_u32(tdlen(q) as usize, n * 16);
    if r.chance(2) {
        let head = area + 0xF000 + r.below(4) * 8;
        bar.write_u32(tdwbal(q) as usize, head as u32 | TDWBAL_HEAD_WB_EN);
        bar.write_u32(tdwbah(q) as usize, (head >> 32) as u32);
    }
    bar.write_u32(DMATXCTL as usize, DMATXCTL_TE);
    bar.write_u32(txdctl(q) as usize, TXDCTL_ENABLE | (r.below(4) as u32) << TXDCTL_WTHRESH_SHIFT);
    rig.engine.ports[p].scan_all();
    bar.write_u32(rdt(0) as usize, n - 1);
    let now = rig.now;
    let _ = rig
        .engine
        .handle(Request::Start { port: p, spec: TrafficSpec { rate_pps: Some(2e6), ..Default::default() } }, now);
}

/// What a running driver does: gives receive descriptors back, or queues frames to send
/// (buffers in its own area, lengths and commands mostly sane).
fn drive(rig: &mut Rig, r: &mut Rng, p: usize) {
    let bar = &rig.bars[p];
    let area = port_area(p);
    let size = bar.read_u32(rdlen(0) as usize) / 16;
    let q = if r.chance(8) { r.below(4) as u32 } else { rig.tx_queue[p] };
    if r.chance(2) {
        bar.write_u32(rdt(0) as usize, r.below(u64::from(size.max(1))) as u32);
        return;
    }
    let tx_size = bar.read_u32(tdlen(q) as usize) / 16;
    let base = u64::from(bar.read_u32(tdbal(q) as usize)) | u64::from(bar.read_u32(tdbah(q) as usize)) << 32;
    let tail = bar.read_u32(tdt(q) as usize);
    let room = (DMA_LEN as u64).checked_sub(u64::from(tx_size) * 16);
    let Some(off) = base.checked_sub(DMA_BASE).filter(|&o| room.is_some_and(|room| o <= room)) else {
        return;
    };
    let count = r.below(u64::from(tx_size.max(1))) as u32;
    for k in 0..count {
        let i = tail.wrapping_add(k) % tx_size.max(1);
        let desc = GUARD + off as usize + i as usize * 16;
        let len = if r.chance(8) { r.below(0x10000) } else { 60 + r.below(1455) };
        let cmd: u64 = if r.chance(8) { r.below(256) } else { 0b1011 }; // EOP | IFCS | RS
        rig.engine.dma.region.write_u64(desc, area + 0x40000 + r.below(0x30000));
        rig.engine.dma.region.write_u64(desc + 8, len | cmd << 24);
    }
    bar.write_u32(tdt(q) as usize, tail.wrapping_add(count) % tx_size.max(1));
}

fn traffic(rng: &mut Rng) -> TrafficSpec {
    let size = if rng.chance(8) { rng.below(2000) as usize } else { MIN_FRAME + rng.below(64) as usize };
    TrafficSpec {
        rate_pps: if rng.chance(3) { None } else { Some(f64::from_bits(rng.next()).abs() % 2e7) },
        size,
        flows: rng.below(5) as u32,
        count: rng.chance(2).then(|| rng.below(500)),
        duration_ms: rng.chance(4).then(|| rng.below(3)),
        dst_mac: rng.chance(4).then(|| {
            let b = rng.next().to_le_bytes();
            [b[0], b[1], b[2], b[3], b[4], b[5]]
        }),
        size_max: rng.chance(6).then(|| size + rng.below(100) as usize).filter(|&m| m <= MAX_FRAME + 8),
    }
}

fn control(rng: &mut Rng) -> Request {
    let port = if rng.chance(16) { PORTS + rng.below(3) as usize } else { rng.below(PORTS as u64) as usize };
    match rng.below(8) {
        0 | 1 => Request::Start { port, spec: traffic(rng) },
        2 => Request::Stop { port },
        3 => Request::SetRate { port, rate_pps: rng.chance(2).then(|| f64::from_bits(rng.next())) },
        4 => Request::PauseTx { port, paused: rng.chance(2) },
        5 => Request::ResetCounters,
        6 => Request::Link { port, up: rng.chance(2) },
        // Rare, short stalls, and never on port 2, whose sane driver keeps the receive and
        // transmit paths busy (hostile write-backs into its rings would stop it).
        7 if rng.chance(16) => Request::Fault { port: port % 2, fault: fault(rng) },
        _ => Request::Lint,
    }
}

/// Any fault but removal (which would leave the port dead for every later case) and reset
/// (which random CTRL writes cover, and which would stop the sane driver's port), with numbers
/// from anywhere, nonsense included.
fn fault(rng: &mut Rng) -> Fault {
    let number = |rng: &mut Rng| if rng.chance(4) { f64::from_bits(rng.next()) } else { (rng.below(4_000_000)) as f64 };
    match rng.below(4) {
        0 => Fault::WriteBack { rate: number(rng), count: rng.below(100_000), seed: rng.next() },
        1 => Fault::Stall { ms: rng.below(3) },
        2 => {
            let what = [
                WireFault::Runt,
                WireFault::Oversize,
                WireFault::Corrupt,
                WireFault::BadFcs,
                WireFault::Duplicate,
                WireFault::Reorder,
            ][rng.below(6) as usize];
            Fault::Wire { what, probability: number(rng) / 4e6, count: rng.below(1000), seed: rng.next() }
        }
        _ => Fault::Off,
    }
}

/// One case: a few driver actions, then the engine runs for a while.
fn run_case(rig: &mut Rig, r: &mut Rng) {
    for _ in 0..r.below(8) + 1 {
        // Ports 0 and 1 get anything; port 2's driver only brings it up and drives it, so
        // that the receive and transmit paths run all the time while the others are broken.
        let p = r.below(PORTS as u64) as usize;
        let chaos = p < 2;
        match r.below(16) {
            0..=6 if chaos => {
                let reg = interesting_register(r);
                let v = value(r);
                rig.bars[p].write_u32(reg as usize, v);
            }
            7 if chaos => {
                let reg = (r.below(BAR0_LEN as u64 / 4) * 4) as usize;
                rig.bars[p].write_u32(reg, r.next() as u32);
            }
            8 if chaos || r.chance(8) => write_memory(r, rig.mem()),
            9 if r.chance(if chaos { 2 } else { 16 }) => bring_up(rig, r, p),
            0..=11 => drive(rig, r, p),
            12 if chaos => {
                // PCI COMMAND: memory space and bus mastering on and off.
                let cmd = rig.cfgs[p].read_u16(4);
                rig.cfgs[p].write_u16(4, cmd ^ (1 << r.below(3)));
            }
            13 if chaos => {
                let off = (r.below(CONFIG_LEN as u64 / 4) * 4) as usize;
                rig.cfgs[p].write_u32(off, r.next() as u32);
            }
            _ => {
                let req = control(r);
                let now = rig.now;
                // Errors are answers too; what matters is that there is one.
                let _ = rig.engine.handle(req, now);
            }
        }
    }
    if r.chance(8) {
        let p = r.below(PORTS as u64) as usize;
        rig.engine.ports[p].scan_all();
    }
    for _ in 0..r.below(6) {
        rig.now += match r.below(8) {
            0 => 0,
            1 => 1_000_000_000 * r.below(100), // the engine was away for up to 0.1 s
            _ => r.below(4_000_000),
        };
        rig.engine.step(rig.now);
    }
    rig.engine.scan();
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn no_driver_input_makes_nicsim_panic_or_write_outside_driver_memory() {
    // 30 000 in `make test`; `make test-slow` runs the first 100 000 of the same seed.
    let cases = env_u64("NICSIM_FUZZ_CASES", 30_000);
    let seed = env_u64("NICSIM_FUZZ_SEED", 0x5AFE_0417);
    let mut rig = Rig::new();
    let mut r = Rng(seed);
    let started = Instant::now();
    let (mut received, mut sent, mut faults) = (0u64, 0u64, 0u64);
    for case in 0..cases {
        let outcome = catch_unwind(AssertUnwindSafe(|| run_case(&mut rig, &mut r)));
        let replay = format!("NICSIM_FUZZ_SEED={seed} NICSIM_FUZZ_CASES={}", case + 1);
        assert!(outcome.is_ok(), "case {case} panicked nicsim (replay: {replay})");
        if let Some(at) = guard_damage(rig.mem()) {
            panic!("case {case}: the device wrote outside the driver's memory, at mapping offset {at:#x} (replay: {replay})");
        }
        if case % 64 == 0 {
            for req in [Request::Stats, Request::Info, Request::Lint] {
                let now = rig.now;
                assert!(
                    rig.engine.handle(req, now).is_ok(),
                    "case {case}: a control request failed (replay: {replay})"
                );
            }
        }
        for p in rig.engine.ports.iter_mut() {
            // Totals across resets, to show the cases reach the receive and transmit paths.
            received += p.counters.qprc.iter().sum::<u64>();
            sent += p.counters.gptc;
            faults += p.fault_count;
            p.reset_counters();
            p.fault_count = 0;
        }
        if case % 4096 == 0 && rig.engine.ports.iter().all(|p| p.lint.entries().len() > 200) {
            // Lint keeps every warning it sees; start afresh now and then so the cases stay cheap.
            rig = Rig::new();
        }
    }
    eprintln!(
        "{cases} cases from seed {seed:#x} in {:.1} s: {received} frames received, {sent} sent, {faults} DMA faults",
        started.elapsed().as_secs_f64()
    );
    assert!(received > 0 && sent > 0 && faults > 0, "the cases reach the receive path, the transmit path and faults");
}

#[test]
fn the_engine_thread_keeps_answering_while_a_driver_writes_at_random() {
    let (dma_dev, dma_driver) = twice(DMA_LEN + 2 * GUARD, "dma-threaded");
    let (engine, bars, _cfgs) = engine_with(GuardedDma::new(dma_dev));
    let (commands, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let handle = engine::spawn(engine, None, rx, stop.clone());
    let ask = |request: Request| {
        let (reply, answer) = mpsc::channel();
        commands.send(Command { request, reply }).expect("the engine thread is gone");
        answer.recv_timeout(Duration::from_secs(10)).expect("the engine did not answer").into_reply()
    };
    let mut r = Rng(env_u64("NICSIM_FUZZ_SEED", 0x5AFE_0417) ^ 0xFFFF);
    for port in 0..PORTS {
        ask(Request::Start { port, spec: TrafficSpec::default() }).expect("traffic starts");
    }
    let deadline = Instant::now() + Duration::from_millis(500);
    let mut writes = 0u64;
    while Instant::now() < deadline {
        for _ in 0..64 {
            let p = r.below(PORTS as u64) as usize;
            let reg = interesting_register(&mut r);
            let v = value(&mut r);
            bars[p].write_u32(reg as usize, v);
            write_memory(&mut r, &dma_driver);
            writes += 1;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    let stats = ask(Request::Stats).expect("statistics after the random writes");
    let stats: nicsim::control::Stats = nicsim::control::expect(&Request::Stats, stats).expect("statistics");
    assert_eq!(stats.ports.len(), PORTS);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let engine = handle.join().expect("the engine thread panicked");
    assert!(engine.iterations > 0, "the engine ran");
    assert_eq!(guard_damage(&dma_driver), None, "the device wrote outside the driver's memory");
    eprintln!("{writes} random writes while the engine ran {} iterations", engine.iterations);
}
