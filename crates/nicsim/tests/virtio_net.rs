//! nicsim's virtio-net function driven by a legacy driver written from the specification
//! (`common/virtio_peer.rs`) in another process than the device: initialisation, the control
//! queue, receive and transmit with the net header, checksum completion, holding frames for a
//! slow driver (beside an 82599 port too), reset, FAILED, a queue taken back, and what a bad
//! driver gets. Needs root, hugepages and /dev/fuse (`make test` sets them up); run one test
//! at a time.

use crate::common;

use common::serve::{Nicsim, A, B};
use common::virtio_peer::{VirtioPeer, HEADER, IXY_FEATURES};
use nicsim::peer::IxyQueue;
use nicsim::virtio::queue::{DESC_NEXT, DESC_WRITE};
use nicsim::virtio::{RX, TX};
use nicsim::wire::{parse_payload, read_pcap, Captured, TrafficSpec};
use platform::DmaBacking;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(10);

fn serve(name: &str) -> Nicsim {
    serve_devices(name, "virtio-net")
}

/// nicsim with the ports `devices` says (`--device`), once every link is up.
fn serve_devices(name: &str, devices: &str) -> Nicsim {
    let sim = Nicsim::start(name, &["--device", devices]);
    let deadline = Instant::now() + WAIT;
    while !sim.stats().ports.iter().all(|p| p.link_up) {
        assert!(Instant::now() < deadline, "the links did not come up");
        std::thread::sleep(Duration::from_millis(5));
    }
    sim
}

fn traffic(count: u64, rate_pps: Option<f64>, dst_mac: Option<[u8; 6]>) -> TrafficSpec {
    TrafficSpec { count: Some(count), rate_pps, dst_mac, ..Default::default() }
}

#[test]
fn a_legacy_driver_receives_and_sends_through_the_virtqueues() {
    let sim = serve("virtio-rxtx");
    let mut peer = VirtioPeer::open(&sim.devices(), A, IXY_FEATURES);
    peer.driver_ok();
    assert_eq!(peer.control(0, 0, &[1]), 0, "promiscuous mode on: VIRTIO_NET_OK");
    assert_eq!(peer.control(9, 9, &[1]), 1, "an unknown command: VIRTIO_NET_ERR");
    for k in 0..64 {
        peer.post_rx(k);
    }
    sim.start_traffic(0, traffic(64, Some(100_000.0), None)).unwrap();
    let used = peer.wait_used(RX, 64, WAIT);
    for (i, &(head, len)) in used.iter().enumerate() {
        assert_eq!(head, 2 * i as u16, "chains come back in order (the device does them in order)");
        assert_eq!(len as usize, HEADER + 60, "header and a 60-byte frame");
        let (header, frame) = peer.received(i as u16, len);
        assert_eq!(header, vec![0; HEADER], "no checksum or GSO information");
        let (_, seq, _) = parse_payload(&frame).expect("a frame of nicsim's generator");
        assert_eq!(seq, i as u64, "frame {i} in sequence");
    }

    let capture = sim.scratch_file("tx.pcap");
    sim.capture(0, &capture, Captured::Tx, Some(11)).unwrap();
    for k in 0..10u16 {
        let mut frame = vec![0u8; 100];
        frame[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 9]);
        frame[12] = k as u8;
        peer.send(k, [0; HEADER], &frame);
    }
    // A UDP datagram whose checksum the device completes: the sum from byte 34 on goes to 40.
    let mut udp = vec![0u8; 80];
    udp[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 9]);
    udp[34..42].copy_from_slice(&[0x12, 0x34, 0x56, 0x78, 0, 46, 0, 0]);
    let mut header = [0u8; HEADER];
    header[0] = 1; // NEEDS_CSUM
    header[6..8].copy_from_slice(&34u16.to_le_bytes());
    header[8..10].copy_from_slice(&6u16.to_le_bytes());
    peer.send(10, header, &udp);
    let used = peer.wait_used(TX, 11, WAIT);
    assert!(used.iter().all(|&(_, len)| len == 0), "transmit chains come back with nothing written");
    let deadline = Instant::now() + WAIT;
    while sim.stats().ports[0].pcap_written != Some(11) {
        assert!(Instant::now() < deadline, "the capture did not get 11 frames");
        std::thread::sleep(Duration::from_millis(5));
    }
    sim.end_capture(0).unwrap();
    let frames = read_pcap(&capture).unwrap();
    assert_eq!(frames[3].len(), 100);
    assert_eq!(frames[3][12], 3, "frames leave in order, without their net header");
    let sum = frames[10][34..].chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum::<u32>();
    assert_eq!((sum & 0xFFFF) + (sum >> 16), 0xFFFF, "the completed checksum sums to all ones");
    let s = sim.stats().ports[0].clone();
    assert_eq!(s.device.gptc, 11);
    let lint = sim.lint().unwrap();
    assert!(lint.len() == 1 && lint[0].rule.name() == "virtio-control", "only the unknown command: {lint:?}");
}

#[test]
fn frames_wait_for_a_slow_driver_and_none_is_lost() {
    let sim = serve("virtio-slow");
    let mut peer = VirtioPeer::open(&sim.devices(), A, IXY_FEATURES);
    peer.driver_ok();
    receive_slowly_without_loss(&sim, &mut peer);
}

/// The same beside an 82599 port whose queues a driver enables after the virtio port is
/// running: the 82599's bring-up leaves the virtio port's flow control as it was.
#[test]
fn frames_wait_for_a_slow_driver_beside_an_82599_port() {
    let sim = serve_devices("virtio-slow-mixed", "virtio-net,82599");
    let mut peer = VirtioPeer::open(&sim.devices(), A, IXY_FEATURES);
    peer.driver_ok();
    let ixgbe = sim.open(B);
    ixgbe.init_ixy().unwrap();
    let _queue = IxyQueue::new(&ixgbe, 512, DmaBacking::HugetlbfsFile(None)).unwrap();
    receive_slowly_without_loss(&sim, &mut peer);
}

fn receive_slowly_without_loss(sim: &Nicsim, peer: &mut VirtioPeer) {
    // 5000 frames of 1000 bytes at line rate (5 MB, ten packet buffers) into 100 buffers
    // that come back only as the test returns them.
    sim.start_traffic(0, TrafficSpec { size: 1000, ..traffic(5000, None, None) }).unwrap();
    for k in 0..100 {
        peer.post_rx(k);
    }
    let mut seen = 0u64;
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen < 5000 {
        for (head, len) in peer.used(RX) {
            let k = head / 2;
            let (_, frame) = peer.received(k, len);
            let (_, seq, _) = parse_payload(&frame).unwrap();
            assert_eq!(seq, seen, "no frame lost or reordered");
            seen += 1;
            peer.post_rx(k);
        }
        assert!(Instant::now() < deadline, "{seen} of 5000 frames after 30 s");
        std::thread::sleep(Duration::from_micros(200));
    }
    let s = sim.stats().ports[0].clone();
    assert_eq!(s.device.mpc, 0, "no frame dropped for want of room");
    assert!(s.flow_control.xoff_sent > 0, "the generator was held: {:?}", s.flow_control);
}

#[test]
fn promiscuous_mode_off_keeps_only_our_address() {
    let sim = serve("virtio-filter");
    let mut peer = VirtioPeer::open(&sim.devices(), A, IXY_FEATURES);
    peer.driver_ok();
    assert_eq!(peer.control(0, 0, &[0]), 0);
    for k in 0..40 {
        peer.post_rx(k);
    }
    sim.start_traffic(0, traffic(20, Some(100_000.0), Some([0x02, 0, 0, 0, 0, 0x55]))).unwrap();
    let deadline = Instant::now() + WAIT;
    while sim.stats().ports[0].drops.filtered < 20 {
        assert!(Instant::now() < deadline, "frames for another address were not filtered");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(peer.used(RX).is_empty());
    sim.start_traffic(0, traffic(20, Some(100_000.0), None)).unwrap(); // to the port's own address
    assert_eq!(peer.wait_used(RX, 20, WAIT).len(), 20);
}

/// A device with receive buffers posted, then the status `status` written: eight frames
/// arrive, each counted as arriving at a disabled device, and none is written into the buffers.
fn no_frame_reaches_a_device_after(name: &str, status: u8, what: &str) {
    let sim = serve(name);
    let mut peer = VirtioPeer::open(&sim.devices(), A, IXY_FEATURES);
    peer.driver_ok();
    for k in 0..8 {
        peer.post_rx(k);
    }
    peer.write(nicsim::virtio::legacy::STATUS, &[status]);
    assert_eq!(peer.status(), status);
    sim.start_traffic(0, traffic(8, Some(100_000.0), None)).unwrap();
    let deadline = Instant::now() + WAIT;
    while sim.stats().ports[0].drops.rx_disabled < 8 {
        assert!(Instant::now() < deadline, "frames reached the queue of a device after {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(peer.used(RX).is_empty(), "nothing written after {what}");
}

#[test]
fn a_reset_stops_the_device_before_the_write_returns() {
    no_frame_reaches_a_device_after("virtio-reset", 0, "the reset");
}

#[test]
fn a_driver_that_sets_failed_stops_the_device() {
    use nicsim::virtio::status::{ACKNOWLEDGE, DRIVER, DRIVER_OK, FAILED};
    // The driver gave up [virtio 1.2 §2.1]: the device leaves its queues alone from then on.
    no_frame_reaches_a_device_after("virtio-failed", ACKNOWLEDGE | DRIVER | DRIVER_OK | FAILED, "FAILED");
}

#[test]
fn a_queue_taken_back_while_frames_wait_is_never_touched_again() {
    use nicsim::virtio::legacy::{QUEUE_PFN, QUEUE_SEL};
    let sim = serve("virtio-take-back");
    let mut peer = VirtioPeer::open(&sim.devices(), A, IXY_FEATURES);
    peer.driver_ok();
    for k in 0..10 {
        peer.post_rx(k);
    }
    // More frames than chains: the rest wait in the packet buffer for chains that never come.
    sim.start_traffic(0, traffic(2000, None, None)).unwrap();
    assert_eq!(peer.wait_used(RX, 10, WAIT).len(), 10);
    peer.write(QUEUE_SEL, &(RX as u16).to_le_bytes());
    peer.write(QUEUE_PFN, &0u32.to_le_bytes());
    let deadline = Instant::now() + WAIT;
    while sim.stats().ports[0].drops.queue_disabled == 0 {
        assert!(Instant::now() < deadline, "the waiting frames were neither delivered nor dropped");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    let s = sim.stats().ports[0].clone();
    assert_eq!(s.dma_faults, 0, "the device reached for the rings it was given back");
    assert!(sim.lint().unwrap().is_empty(), "{:?}", sim.lint());
}

#[test]
fn a_bad_chain_stops_its_queue_and_is_reported() {
    let sim = serve("virtio-bad");
    let mut peer = VirtioPeer::open(&sim.devices(), A, IXY_FEATURES);
    peer.driver_ok();
    // A receive chain whose second descriptor points outside the table.
    peer.raw_desc(RX, 0, peer.mem.phys(0x10_0000), 10, DESC_WRITE | DESC_NEXT, 300);
    peer.offer(RX, 0);
    // A transmit chain whose buffer is not the driver's memory.
    peer.raw_desc(TX, 0, 0xDEAD_0000, 64, 0, 0);
    peer.offer(TX, 0);
    sim.start_traffic(0, traffic(1, None, None)).unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        let s = sim.stats().ports[0].clone();
        if s.lint_warnings > 0 && s.dma_faults > 0 {
            assert_eq!(s.faults[0].address, 0xDEAD_0000);
            break;
        }
        assert!(Instant::now() < deadline, "no lint or fault: {s:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    let lint = sim.lint().unwrap();
    assert!(lint.iter().any(|w| w.rule.name() == "virtqueue-malformed"), "{lint:?}");
    assert!(peer.used(RX).is_empty() && peer.used(TX).is_empty(), "neither chain came back");
}

#[test]
fn register_accesses_are_measured_beside_a_system_call() {
    // `nicsim bench-access`: every access reaches the device (the status read back is the one
    // it holds, or the measurement fails), and each kind is reported beside the system call.
    let sim = serve("virtio-access");
    let r = nicsim::access_cost::measure(&sim.devices().join(A), 3, 50).unwrap();
    assert_eq!((r.rounds, r.per_round, r.accesses.len()), (3, 50, 4));
    assert!(r.syscall_ns > 0.0 && r.wakeup_ns > 0.0 && r.wakeup_ratio > 0.0, "{r:?}");
    for a in &r.accesses {
        assert!(a.ns > 0.0 && a.ratio > 0.0, "{a:?}");
    }
    let peer = VirtioPeer::open(&sim.devices(), A, IXY_FEATURES);
    assert_eq!(peer.status(), nicsim::virtio::status::ACKNOWLEDGE | nicsim::virtio::status::DRIVER);
}
