//! Faults injected on purpose (`nicsim fault`): where a hostile device writes, what a stall
//! and a bad FCS do to received frames.

use crate::common;

use common::rig::{frame, Rig, DMA_BASE};
use nicsim::chaos::Rng;
use nicsim::port::HostileWrite;
use nicsim::regs::*;

/// Offsets of the test memory that a hostile write may change: qword 1 of each of the 64
/// receive descriptors at 0, the upper dword of each of the 64 transmit descriptors at 0x8000,
/// and the head write-back slot at 0xA000.
fn writable(offset: usize) -> bool {
    (offset < 64 * 16 && offset % 16 >= 8)
        || ((0x8000..0x8000 + 64 * 16).contains(&offset) && offset % 16 >= 12)
        || (0xA000..0xA004).contains(&offset)
}

#[test]
fn hostile_write_backs_land_only_in_the_rings_and_the_head_slot_the_driver_gave() {
    let mut r = Rig::new();
    let size = 0x20000;
    for at in (0..size).step_by(8) {
        r.mem().write_u64(at, 0x5A5A_5A5A_5A5A_5A5A ^ at as u64);
    }
    r.rx_ring(64, false, true);
    r.tx_ring(0, 64, Some(DMA_BASE + 0xA000));
    let snapshot = |r: &Rig| {
        let mut bytes = vec![0u8; size];
        r.mem().read_bytes(0, &mut bytes);
        bytes
    };
    let before = snapshot(&r);
    let mut rng = Rng::new(7);
    let mut kinds = [0u32; 3];
    for _ in 0..20_000 {
        match r.port.hostile_write_back(&mut r.dma, &mut rng) {
            Some(HostileWrite::RxDescriptor) => kinds[0] += 1,
            Some(HostileWrite::Head) => kinds[1] += 1,
            Some(HostileWrite::TxDescriptor) => kinds[2] += 1,
            Some(HostileWrite::UsedElement) => panic!("an 82599 port has no used ring"),
            None => panic!("there are rings to write into"),
        }
    }
    assert!(kinds.iter().all(|&k| k > 5000), "every kind, about a third each: {kinds:?}");
    let after = snapshot(&r);
    let changed: Vec<usize> = (0..size).filter(|&at| after[at] != before[at]).collect();
    assert!(
        changed.iter().all(|&at| writable(at)),
        "written outside: {:x?}",
        changed.iter().find(|&&at| !writable(at))
    );
    assert!(changed.iter().any(|&at| at < 64 * 16) && changed.iter().any(|&at| at >= 0xA000));
    // Lengths up to 0xFFFF, beyond any buffer, and DD on descriptors the device does not own.
    let lengths: Vec<u64> = (0..64).map(|i| r.mem().read_u64(i * 16 + 8) & 0xFFFF).collect();
    assert!(lengths.iter().any(|&l| l > 2048));
    let dd = (0..64).filter(|&i| r.mem().read_u64(i * 16 + 8) & (1 << 32) != 0).count();
    assert!(dd > 32, "DD on {dd} of 64 descriptors, with none received");
}

#[test]
fn a_port_without_rings_has_nowhere_to_write() {
    let mut r = Rig::new();
    assert_eq!(r.port.hostile_write_back(&mut r.dma, &mut Rng::new(1)), None);
}

#[test]
fn a_stalled_port_holds_frames_in_its_packet_buffer_until_the_stall_ends() {
    let mut r = Rig::new();
    r.rx_ring(16, false, false);
    r.wr(rdt(0), 15);
    r.port.stall_until(1_000);
    r.port.update_stall(0);
    r.port.receive(&mut r.dma, &frame(60, 1));
    r.port.drain_fifo(&mut r.dma);
    assert_eq!(r.mem().read_u64(8) & (1 << 32), 0, "nothing written while stalled");
    assert_eq!(r.port.packet_buffer_bytes(), 60);
    r.port.update_stall(1_000);
    r.port.drain_fifo(&mut r.dma);
    assert_eq!(r.mem().read_u64(8), 60 | 0b11 << 32, "written once the stall ended: DD, EOP, 60 bytes");
    assert_eq!(r.port.packet_buffer_bytes(), 0);
}

#[test]
fn a_frame_with_a_bad_fcs_is_counted_in_crcerrs_and_dropped() {
    let mut r = Rig::new();
    r.rx_ring(16, false, true);
    r.port.receive_bad_fcs(&frame(60, 1));
    r.port.publish_counters();
    assert_eq!(r.rd(CRCERRS), 1);
    assert_eq!(r.rd(TPR), 1, "received on the wire");
    assert_eq!(r.rd(GPRC), 0, "not a good packet");
    assert_eq!(r.mem().read_u64(8), 0, "never written into the ring");
}
