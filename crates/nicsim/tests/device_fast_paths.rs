//! The device model's fast paths (receive runs, generated bursts, the transmit fast path, the
//! sink reading driver memory) do and count exactly what the general paths do.

use crate::common;

use common::rig::*;
use nicsim::lint::Rule;
use nicsim::port::TxBatch;
use nicsim::regs::*;
use nicsim::wire::{Generator, LatencySummary, Sink, TrafficSpec, WireClock};

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
                    assert!(round > 0 || run.any_open(), "a fresh, enabled queue starts a run");
                    for f in &frames {
                        r.port.rx_run_frame(&mut r.dma, &mut run, f);
                    }
                    r.port.rx_run_end(&r.dma, &mut run);
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
        taken = r.port.rx_run_generated_burst(&mut r.dma, &mut run, generator, wire, now, allowed);
        allowed -= taken;
    }
    for _ in 0..allowed {
        let Some(mut due) = generator.next_due(now, wire) else { break };
        r.port.rx_run_generated(&mut r.dma, &mut run, &mut due);
    }
    r.port.rx_run_end(&r.dma, &mut run);
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
            let taken = r.port.rx_run_generated_burst(&mut r.dma, &mut run, &mut g, &mut wire, now, allowed);
            let filled = ring - 1;
            assert!(taken > filled, "{what}: {taken} frames, more than the ring holds (DROP_EN drops the rest)");
            let whole = filled / chunk * chunk;
            for i in 0..filled {
                assert_eq!(written_back(&r, i, advanced).is_some(), i < whole, "{what}: descriptor {i} during the run");
            }
            r.port.rx_run_end(&r.dma, &mut run);
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
                r.port.rx_run_generated_burst(&mut r.dma, &mut run, &mut g, &mut wire, now, allowed);
                r.port.rx_run_end(&r.dma, &mut run);
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
                        let taken = r.port.rx_run_generated_burst(
                            &mut r.dma,
                            &mut run,
                            &mut generator,
                            &mut wire,
                            now,
                            allowed,
                        );
                        assert_eq!(taken, 10, "{what}: one burst takes all");
                        r.port.rx_run_end(&r.dma, &mut run);
                    }
                    "run" => {
                        for k in 0..10 {
                            r.port.rx_run_frame(&mut r.dma, &mut run, &frame(60, k));
                        }
                        r.port.rx_run_end(&r.dma, &mut run);
                    }
                    _ => {
                        r.port.rx_run_end(&r.dma, &mut run);
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
