//! The virtio-net control queue as the specification has it [virtio 1.2 §5.1.6.5], through the
//! legacy and the virtio 1.x interface: MAC tables of any length over any number of
//! descriptors, the extra RX modes, `MAC_ADDR_SET`, the VLAN commands; a malformed command is
//! answered `VIRTIO_NET_ERR`, named by lint, and the queue goes on; a reset restores the
//! function's address and zeroes the counters. Needs root, hugepages and /dev/fuse (`make test`
//! sets them up); one test at a time.

use crate::common;

use common::serve::{Nicsim, A};
use common::virtio_peer::{VirtioPeer, IXY_FEATURES};
use nicsim::virtio::control::*;
use nicsim::virtio::{feature, status, RX};
use nicsim::wire::TrafficSpec;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(10);
/// Every control class nicsim offers.
const FEATURES: u64 = IXY_FEATURES | feature::CTRL_RX_EXTRA | feature::CTRL_MAC_ADDR | feature::CTRL_VLAN;
const LISTED: [u8; 6] = [0x02, 0, 0, 0, 0, 0x55];
const UNLISTED: [u8; 6] = [0x02, 0, 0, 0, 0, 0x56];

fn serve(name: &str) -> Nicsim {
    let sim = Nicsim::start(name, &["--device", "virtio-net"]);
    let deadline = Instant::now() + WAIT;
    while !sim.stats().ports.iter().all(|p| p.link_up) {
        assert!(Instant::now() < deadline, "the links did not come up");
        std::thread::sleep(Duration::from_millis(5));
    }
    sim
}

/// `VIRTIO_NET_CTRL_MAC_TABLE_SET`'s bytes: two `virtio_net_ctrl_mac` lists.
fn mac_table(unicast: &[[u8; 6]], multicast: &[[u8; 6]]) -> Vec<u8> {
    let mut b = vec![CLASS_MAC, MAC_TABLE_SET];
    for list in [unicast, multicast] {
        b.extend((list.len() as u32).to_le_bytes());
        list.iter().for_each(|a| b.extend(a));
    }
    b
}

/// Waits until `done` holds for port 0's statistics.
fn wait_for(sim: &Nicsim, what: &str, done: impl Fn(&nicsim::control::PortStats) -> bool) {
    let deadline = Instant::now() + WAIT;
    loop {
        let s = sim.stats().ports[0].clone();
        if done(&s) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {s:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn control_queue_by_the_spec(name: &str, modern: bool) {
    let sim = serve(name);
    let mut peer = if modern {
        VirtioPeer::open_modern(&sim.devices(), A, FEATURES)
    } else {
        VirtioPeer::open(&sim.devices(), A, FEATURES)
    };
    peer.driver_ok();
    let own = peer.config_mac();
    assert_eq!(peer.control(CLASS_RX, RX_PROMISC, &[0]), OK);

    // Three unicast and twelve multicast addresses (100 bytes), seven bytes a descriptor.
    let unicast = [LISTED, [0x02, 0, 0, 0, 0, 0x57], [0x02, 0, 0, 0, 0, 0x58]];
    let multicast: Vec<[u8; 6]> = (0..12).map(|k| [0x01, 0, 0x5E, 0, 0, k]).collect();
    let table = mac_table(&unicast, &multicast);
    assert_eq!(table.len(), 100);
    let pieces: Vec<&[u8]> = table.chunks(7).collect();
    assert_eq!(peer.control_chain(&pieces), OK, "MAC_TABLE_SET over {} descriptors", pieces.len());
    for k in 0..60 {
        peer.post_rx(k);
    }
    let traffic =
        |dst| TrafficSpec { count: Some(10), rate_pps: Some(100_000.0), dst_mac: Some(dst), ..Default::default() };
    sim.start_traffic(0, traffic(LISTED)).unwrap();
    assert_eq!(peer.wait_used(RX, 10, WAIT).len(), 10, "frames to a listed address arrive");
    sim.start_traffic(0, traffic(UNLISTED)).unwrap();
    wait_for(&sim, "frames to an unlisted address are filtered", |s| s.drops.filtered == 10);
    assert!(peer.used(RX).is_empty());

    // A table whose count promises more addresses than it has: refused, the table stays, and
    // the queue answers the next command.
    let mut short = mac_table(&unicast[..2], &[]);
    short[2] = 5;
    assert_eq!(peer.control_chain(&[&short[..2], &short[2..]]), ERR);
    assert_eq!(peer.control(CLASS_RX, RX_NOBCAST, &[1]), OK, "the queue goes on after a refusal");
    assert_eq!(peer.control(9, 9, &[]), ERR, "an unknown class");
    assert_eq!(peer.status() & status::NEEDS_RESET, 0, "a refused command needs no reset");
    let lint = sim.lint().unwrap();
    assert!(lint.iter().all(|w| w.rule.name() == "virtio-control"), "{lint:?}");
    assert!(lint.iter().any(|w| w.message.contains("fewer addresses than its entry count")), "{lint:?}");
    assert!(lint.iter().any(|w| w.message.contains("does not know")), "{lint:?}");
    sim.start_traffic(0, traffic(LISTED)).unwrap();
    assert_eq!(peer.wait_used(RX, 10, WAIT).len(), 10, "the table survived the refused command");

    // MAC_ADDR_SET: the configuration shows the new address and the filter takes it.
    assert_eq!(peer.control(CLASS_MAC, MAC_ADDR_SET, &UNLISTED), OK);
    assert_eq!(peer.config_mac(), UNLISTED);
    sim.start_traffic(0, traffic(UNLISTED)).unwrap();
    assert_eq!(peer.wait_used(RX, 10, WAIT).len(), 10, "frames to the address set arrive");

    // A reset: the function's own address again, and the counters count from it.
    wait_for(&sim, "the frames received are counted", |s| s.device.gprc == 30 && s.device.qprc[0] == 30);
    peer.set_status(0);
    assert_eq!(peer.config_mac(), own, "a reset restores the function's address");
    wait_for(&sim, "a device reset zeroes the counters", |s| {
        s.device.gprc == 0 && s.device.qprc[0] == 0 && s.device.tpr == 0
    });
}

#[test]
fn the_control_queue_keeps_the_spec_through_the_legacy_interface() {
    control_queue_by_the_spec("virtio-ctrl-legacy", false);
}

#[test]
fn the_control_queue_keeps_the_spec_through_the_modern_interface() {
    control_queue_by_the_spec("virtio-ctrl-modern", true);
}

#[test]
fn a_multicast_list_longer_than_the_table_lets_every_group_through() {
    let sim = serve("virtio-ctrl-vlan");
    let mut peer = VirtioPeer::open(&sim.devices(), A, FEATURES);
    peer.driver_ok();
    assert_eq!(peer.control(CLASS_RX, RX_PROMISC, &[0]), OK);
    // 100 multicast addresses: more than the table holds, so every multicast address passes.
    let many: Vec<[u8; 6]> = (0..100).map(|k| [0x01, 0, 0x5E, 1, 0, k]).collect();
    let table = mac_table(&[], &many);
    assert_eq!(peer.control_chain(&table.chunks(512).collect::<Vec<_>>()), OK);
    for k in 0..40 {
        peer.post_rx(k);
    }
    let spec =
        |dst| TrafficSpec { count: Some(5), rate_pps: Some(100_000.0), dst_mac: Some(dst), ..Default::default() };
    sim.start_traffic(0, spec([0x01, 0, 0x5E, 7, 7, 7])).unwrap();
    assert_eq!(peer.wait_used(RX, 5, WAIT).len(), 5, "an overflowing multicast list lets all multicast through");
    assert_eq!(peer.control(CLASS_RX, RX_NOMULTI, &[1]), OK);
    sim.start_traffic(0, spec([0x01, 0, 0x5E, 7, 7, 7])).unwrap();
    wait_for(&sim, "NOMULTI drops multicast", |s| s.drops.filtered == 5);
    // VLAN commands are answered (the filter itself: `virtio::control`'s unit tests).
    assert_eq!(peer.control(CLASS_VLAN, VLAN_ADD, &5u16.to_le_bytes()), OK);
    assert_eq!(peer.control(CLASS_VLAN, VLAN_DEL, &5u16.to_le_bytes()), OK);
    assert!(sim.lint().unwrap().is_empty(), "{:?}", sim.lint());
}
