//! The virtio-net driver beside the 82599 driver in one process, through the one queue API:
//! every frame received on an 82599 port forwarded exactly once to a virtio port. Its own test
//! binary: the 82599's first queue confines the process for good, and a confined process
//! cannot start another nicsim (which mounts FUSE). Needs root, hugepages and /dev/fuse.

mod common;

use common::{forward, nicsim, FRAMES, N, POOL};
use ixgbe::queues::QueueMemory;
use nicsim::wire::TrafficSpec;
use std::time::Duration;
use virtio::queues::{TxQueue, VirtioMemory};
use virtio::VirtioDevice;

#[test]
fn every_frame_crosses_from_an_82599_port_to_a_virtio_port() {
    let sim = nicsim("ixgbe-virtio", "82599,virtio-net");
    // Both functions opened before the first queue starts, which confines the process.
    let port_a = ixgbe::device::Port::open(&sim.devices(), &nicsim::sysfs::port_address(0)).unwrap();
    let b = VirtioDevice::open(&sim.devices(), &nicsim::sysfs::port_address(1)).unwrap();
    let a = port_a.device();
    a.init().unwrap();
    // Lossless: the 82599 holds the generator with 802.3x PAUSE while its ring is full, as a
    // virtio port does on its own.
    a.enable_flow_control().unwrap();
    a.wait_for_link(Duration::from_secs(10)).unwrap();
    let mut mem_a = QueueMemory::<N>::allocate(POOL).unwrap();
    let mut mem_b = VirtioMemory::<N>::allocate(16).unwrap();
    let (parts_a, parts_b) = (mem_a.parts().unwrap(), mem_b.parts().unwrap());
    let mut pool = parts_a.pool;
    let mut rx = ixgbe::queues::RxQueue::<N>::new(&a, parts_a.rx, &mut pool).unwrap();
    let mut tx = TxQueue::<N>::new(&b, parts_b.tx).unwrap();
    let _ctrl_b = b.start::<N>(parts_b.ctrl).unwrap();
    sim.start_traffic(0, TrafficSpec { count: Some(FRAMES), size: 128, ..Default::default() }).unwrap();
    forward(&sim, &mut pool, &mut rx, &mut tx);
}
