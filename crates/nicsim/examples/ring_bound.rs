//! An upper bound for nicsim's ceiling on a given machine: the same data movement as
//! `nicsim bench` (a device core writes 64-byte frames and RX descriptors into a ring, a
//! TinyNF-style peer on the other core turns each into a TX descriptor, the device core reads
//! the descriptor and the frame back and counts it), with no device model at all: no register
//! file, no DMA address resolution, no statistics, no line-rate clock, no sink.
//!
//! Whatever this reaches, nicsim cannot exceed, because nicsim does all of this and more.
//!
//! Run: `cargo run --release -p nicsim --example ring_bound -- [seconds] [ports]`

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RING: u32 = 512;
/// 2 KiB buffers, as u64 words.
const BUF_WORDS: usize = 256;
/// A 64-byte frame without FCS is 60 bytes; we move 64 (8 words) to keep it simple.
const FRAME_WORDS: usize = 8;
const DD: u64 = 1 << 32;
/// Same periods as the restricted driver: flush every 8, recycle every 64.
const FLUSH: u32 = 8;
const RECYCLE: u32 = 64;

/// Keeps each doorbell on its own cache line, as device registers and the head write-back are.
#[repr(align(64))]
struct Line(AtomicU32);

/// One port's shared state: the TinyNF shared ring, its buffers and the three doorbells.
struct Port {
    /// Descriptor i: word 2i = buffer index (never changes), word 2i+1 = status/length.
    desc: Vec<AtomicU64>,
    bufs: Vec<AtomicU64>,
    rx_tail: Line,
    tx_tail: Line,
    head_writeback: Line,
}

impl Port {
    fn new() -> Self {
        let desc =
            (0..RING as usize * 2).map(|i| AtomicU64::new(if i % 2 == 0 { (i / 2) as u64 } else { 0 })).collect();
        let bufs = (0..RING as usize * BUF_WORDS).map(|_| AtomicU64::new(0)).collect();
        Port {
            desc,
            bufs,
            rx_tail: Line(AtomicU32::new(RING - 1)),
            tx_tail: Line(AtomicU32::new(0)),
            head_writeback: Line(AtomicU32::new(0)),
        }
    }
}

/// The device side of one port: where its RX and TX heads are.
struct DeviceSide {
    rx_head: u32,
    tx_head: u32,
    seq: u64,
    drained: u64,
    checksum: u64,
}

fn next(i: u32) -> u32 {
    (i + 1) & (RING - 1)
}

/// Writes up to `burst` frames into the ring, then drains up to `burst` transmitted ones.
fn device_step(p: &Port, d: &mut DeviceSide, burst: u32) {
    let rx_tail = p.rx_tail.0.load(Ordering::Acquire);
    for _ in 0..burst {
        if d.rx_head == rx_tail {
            break;
        }
        let i = d.rx_head as usize;
        let buf = p.desc[2 * i].load(Ordering::Relaxed) as usize * BUF_WORDS;
        for w in 0..FRAME_WORDS {
            p.bufs[buf + w].store(d.seq.wrapping_add(w as u64), Ordering::Relaxed);
        }
        d.seq += 1;
        p.desc[2 * i + 1].store(DD | 60, Ordering::Release);
        d.rx_head = next(d.rx_head);
    }
    let tx_tail = p.tx_tail.0.load(Ordering::Acquire);
    let start = d.tx_head;
    for _ in 0..burst {
        if d.tx_head == tx_tail {
            break;
        }
        let i = d.tx_head as usize;
        let len = p.desc[2 * i + 1].load(Ordering::Relaxed) & 0xFFFF;
        let buf = p.desc[2 * i].load(Ordering::Relaxed) as usize * BUF_WORDS;
        for w in 0..FRAME_WORDS {
            d.checksum = d.checksum.wrapping_add(p.bufs[buf + w].load(Ordering::Relaxed));
        }
        d.checksum = d.checksum.wrapping_add(len);
        d.drained += 1;
        d.tx_head = next(d.tx_head);
    }
    if d.tx_head != start {
        p.head_writeback.0.store(d.tx_head, Ordering::Release);
    }
}

/// The TinyNF-style peer of one port: receive in place, rewrite a MAC word, send from the same
/// descriptor, flush every 8, give descriptors back to RX every 64.
struct PeerSide {
    index: u32,
    since_flush: u32,
    since_recycle: u32,
}

fn peer_step(p: &Port, s: &mut PeerSide) -> bool {
    let i = s.index as usize;
    let status = p.desc[2 * i + 1].load(Ordering::Acquire);
    if status & DD == 0 {
        if s.since_flush > 0 {
            p.tx_tail.0.store(s.index, Ordering::Release);
            s.since_flush = 0;
        }
        recycle(p);
        return false;
    }
    let buf = p.desc[2 * i].load(Ordering::Relaxed) as usize * BUF_WORDS;
    p.bufs[buf].store(1, Ordering::Relaxed); // the MAC rewrite
    p.desc[2 * i + 1].store(status & 0xFFFF, Ordering::Relaxed); // TX: length, DD cleared
    s.index = next(s.index);
    s.since_flush += 1;
    if s.since_flush == FLUSH {
        p.tx_tail.0.store(s.index, Ordering::Release);
        s.since_flush = 0;
    }
    s.since_recycle += 1;
    if s.since_recycle == RECYCLE {
        recycle(p);
        s.since_recycle = 0;
    }
    true
}

fn recycle(p: &Port) {
    let head = p.head_writeback.0.load(Ordering::Acquire);
    p.rx_tail.0.store(head.wrapping_sub(1) & (RING - 1), Ordering::Release);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seconds: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5.0);
    let nports: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2);
    let ports: Arc<Vec<Port>> = Arc::new((0..nports).map(|_| Port::new()).collect());
    let stop = Arc::new(AtomicBool::new(false));

    let peer = {
        let (ports, stop) = (ports.clone(), stop.clone());
        std::thread::spawn(move || {
            let _ = platform::sched::pin_current_thread(1);
            let mut sides: Vec<PeerSide> =
                (0..ports.len()).map(|_| PeerSide { index: 0, since_flush: 0, since_recycle: 0 }).collect();
            while !stop.load(Ordering::Relaxed) {
                for (p, s) in ports.iter().zip(sides.iter_mut()) {
                    for _ in 0..32 {
                        if !peer_step(p, s) {
                            break;
                        }
                    }
                }
            }
        })
    };

    let _ = platform::sched::pin_current_thread(0);
    let mut sides: Vec<DeviceSide> =
        (0..nports).map(|_| DeviceSide { rx_head: 0, tx_head: 0, seq: 0, drained: 0, checksum: 0 }).collect();
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    while Instant::now() < end {
        for _ in 0..64 {
            for (p, d) in ports.iter().zip(sides.iter_mut()) {
                device_step(p, d, 64);
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    peer.join().expect("peer thread");
    let total: u64 = sides.iter().map(|d| d.drained).sum();
    let check: u64 = sides.iter().fold(0, |a, d| a ^ d.checksum);
    println!(
        "ring bound, {nports} port(s), 64-byte frames, device core 0, peer core 1, {elapsed:.1} s: \
         {:.2} Mpps written and drained in total (checksum {check:x})",
        total as f64 / elapsed / 1e6
    );
}
