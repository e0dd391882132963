//! The device model's receive and transmit queues: descriptor formats and write-back, the
//! packet buffer, frames over several buffers, head write-back, DMA faults, L2 filtering.

use crate::common;

use common::rig::*;
use nicsim::regs::*;

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
    // On the fast path (memory in known windows) and on the general path.
    for windows in [true, false] {
        let mut r = Rig::new();
        r.dma.windows = windows;
        let head = 0x30000u64;
        let ring = r.tx_ring(0, 64, Some(DMA_BASE + head));
        for i in 0..64usize {
            r.mem().write_bytes(0x20000 + i * 64, &frame(60, i as u8));
            r.mem().write_u64(ring + i * 16, DMA_BASE + 0x20000 + i as u64 * 64);
            let rs = if i % 32 == 31 { 1u64 << 27 } else { 0 };
            r.mem().write_u64(ring + i * 16 + 8, 60 | (0b11 << 24) | rs);
        }
        r.mem().write_u32(head as usize, 0xDEAD);
        r.wr(tdt(0), 8);
        assert_eq!(r.transmit().len(), 8);
        assert_eq!(r.mem().read_u32(head as usize), 0xDEAD, "no RS descriptor done: nothing written back");
        r.wr(tdt(0), 40);
        assert_eq!(r.transmit().len(), 32);
        // The head as the RS descriptor completed, not where the pass stopped [DS 7.2.3.5.2]: a
        // driver that reads it only at its RS points sees only multiples of 32 here.
        assert_eq!(r.mem().read_u32(head as usize), 32, "windows {windows}");
        assert_eq!(r.rd(tdh(0)), 40);
        assert!((0..40).all(|i| r.mem().read_u32(ring + i * 16 + 12) & 1 == 0), "no DD in head write-back mode");
    }
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

#[test]
fn a_queue_left_enabled_on_released_memory_is_a_fault_and_a_disabled_one_is_not() {
    use nicsim::port::{Access, Direction};
    let mut r = Rig::new();
    r.rx_ring(8, false, true);
    r.wr(rdt(0), 7);
    let off = r.tx_ring(0, 8, None);
    r.port.receive(&mut r.dma, &frame(100, 1)); // the RX ring resolves
    r.mem().write_u64(off, DMA_BASE + 0x10000);
    r.mem().write_u64(off + 8, 60 | (0b1011u64 << 24)); // EOP, IFCS, RS
    r.wr(tdt(0), 1);
    assert_eq!(r.transmit().len(), 1, "the TX ring resolves");
    // The driver goes, its queues still enabled: both are stopped, with the reason.
    r.dma.released = true;
    assert_eq!(r.port.stop_queues_on_released_memory(&r.dma), 2);
    let kinds: Vec<_> = r.port.faults.iter().map(|f| (f.direction, f.access)).collect();
    assert_eq!(kinds, [(Direction::Rx, Access::ReleasedRing), (Direction::Tx, Access::ReleasedRing)]);
    assert!(r.port.rx_queue_state(0).faulted && r.port.tx_queue_state(0).faulted);
    assert_eq!(r.port.stop_queues_on_released_memory(&r.dma), 0, "reported once");

    // A driver that disables its queues first releases its memory without a fault.
    let mut r = Rig::new();
    r.rx_ring(8, false, true);
    r.wr(rdt(0), 7);
    r.port.receive(&mut r.dma, &frame(100, 1));
    r.wr(rxdctl(0), 0);
    r.dma.released = true;
    assert_eq!(r.port.stop_queues_on_released_memory(&r.dma), 0);
    assert!(r.port.faults.is_empty());
}

#[test]
fn drops_while_the_driver_leaves_its_tail_alone_are_a_tail_stall_until_it_writes_again() {
    const US: u64 = 1_000_000; // ps
    let mut r = Rig::new();
    r.rx_ring(8, true, true);
    r.wr(rdt(0), 2);
    r.port.watch_rx_tails(1000 * US);
    // Two frames fill the descriptors given; the next three are dropped at 1 010 µs, and the
    // driver writes its tail 200 µs later: one stall of 200 µs with three drops inside.
    for i in 0..5 {
        r.port.receive(&mut r.dma, &frame(60, i));
    }
    r.port.watch_rx_tails(1010 * US);
    r.port.watch_rx_tails(1100 * US);
    let under_way = r.port.tail_stalls(1150 * US);
    assert_eq!(under_way.len(), 1);
    assert!(under_way[0].recent[0].open && under_way[0].recent[0].end_ns == 1_150_000);
    r.wr(rdt(0), 4);
    r.port.watch_rx_tails(1210 * US);
    let s = r.port.tail_stalls(1300 * US);
    assert_eq!((s[0].queue, s[0].count, s[0].drops_inside, s[0].drops_outside), (0, 1, 3, 0), "{s:?}");
    assert_eq!(
        s[0].recent,
        [nicsim::port::TailStall { start_ns: 1_010_000, end_ns: 1_210_000, drops: 3, open: false }]
    );
    // A drop the driver answers within microseconds is its own, outside any stall.
    for i in 0..3 {
        r.port.receive(&mut r.dma, &frame(60, i));
    }
    r.port.watch_rx_tails(1300 * US);
    r.wr(rdt(0), 6);
    r.port.watch_rx_tails(1305 * US);
    let s = r.port.tail_stalls(1400 * US);
    assert_eq!((s[0].count, s[0].drops_inside, s[0].drops_outside), (1, 3, 1), "{s:?}");
    // The counters' reset starts the record afresh.
    r.port.reset_counters();
    assert_eq!(r.port.tail_stalls(1500 * US), []);
}
