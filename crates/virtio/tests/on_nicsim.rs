//! The virtio-net driver against nicsim's virtio-net function, through each interface: every
//! frame forwarded exactly once from one virtio port to another through the device-independent
//! queue API, a queue reset alone and given again, and a device whose queues do not fit the
//! driver refused in one line.
//! Needs root, hugepages and /dev/fuse (`make test` provides them); one test at a time.

mod common;

use common::{forward, nicsim, FRAMES, N, POOL};
use nicsim::wire::TrafficSpec;
use virtio::queues::{RxQueue, TxQueue, VirtioMemory};
use virtio::{Interface, VirtioDevice};

#[test]
fn every_frame_crosses_from_one_virtio_port_to_another_through_the_modern_interface() {
    every_frame_crosses("virtio-modern", None, Interface::Modern);
}

#[test]
fn every_frame_crosses_from_one_virtio_port_to_another_through_the_legacy_interface() {
    every_frame_crosses("virtio-legacy", Some(Interface::Legacy), Interface::Legacy);
}

/// Opens both ports through `interface` (the driver's choice if `None`), checks that `expected`
/// is the one in use, and forwards every frame from port 0 to port 1.
fn every_frame_crosses(test: &str, interface: Option<Interface>, expected: Interface) {
    let sim = nicsim(test, "virtio-net");
    let a = VirtioDevice::open_with(&sim.devices(), &nicsim::sysfs::port_address(0), interface).unwrap();
    let b = VirtioDevice::open_with(&sim.devices(), &nicsim::sysfs::port_address(1), interface).unwrap();
    assert_eq!((a.interface(), b.interface()), (expected, expected));
    assert_eq!(a.header_len(), if expected == Interface::Modern { 12 } else { 10 });
    assert_eq!(a.mac(), nicsim::port::default_mac(0), "the MAC address from the device configuration");
    let (mut mem_a, mut mem_b) = (VirtioMemory::<N>::allocate(POOL).unwrap(), VirtioMemory::<N>::allocate(16).unwrap());
    let (parts_a, parts_b) = (mem_a.parts().unwrap(), mem_b.parts().unwrap());
    let mut pool = parts_a.pool;
    let mut rx = RxQueue::<N>::new(&a, parts_a.rx, &mut pool).unwrap();
    let mut tx = TxQueue::<N>::new(&b, parts_b.tx).unwrap();
    let _ctrl_a = a.start::<N>(parts_a.ctrl).unwrap();
    let _ctrl_b = b.start::<N>(parts_b.ctrl).unwrap();
    assert_eq!(pool.available(), POOL - N / 2, "a buffer in each receive chain");
    sim.start_traffic(0, TrafficSpec { count: Some(FRAMES), size: 128, ..Default::default() }).unwrap();
    forward(&sim, &mut pool, &mut rx, &mut tx);
    assert!(sim.lint().unwrap().is_empty(), "{:?}", sim.lint().unwrap());
    let stats = sim.stats().unwrap();
    assert_eq!(stats.ports[0].dma_faults + stats.ports[1].dma_faults, 0);
    drop((rx, tx));
    assert_eq!(sim.stats().unwrap().ports[0].drops.queue_disabled, 0);
}

#[test]
fn a_queue_reset_alone_is_given_again_while_the_device_runs() {
    let sim = nicsim("virtio-ring-reset", "virtio-net");
    let a = VirtioDevice::open(&sim.devices(), &nicsim::sysfs::port_address(0)).unwrap();
    let b = VirtioDevice::open(&sim.devices(), &nicsim::sysfs::port_address(1)).unwrap();
    let (mut first, mut second) = (VirtioMemory::<N>::allocate(N).unwrap(), VirtioMemory::<N>::allocate(POOL).unwrap());
    let mut mem_b = VirtioMemory::<N>::allocate(16).unwrap();
    let (mut parts_1, parts_2, parts_b) = (first.parts().unwrap(), second.parts().unwrap(), mem_b.parts().unwrap());
    let rx = RxQueue::<N>::new(&a, parts_1.rx, &mut parts_1.pool).unwrap();
    let mut tx = TxQueue::<N>::new(&b, parts_b.tx).unwrap();
    let _ctrl_a = a.start::<N>(parts_1.ctrl).unwrap();
    let _ctrl_b = b.start::<N>(parts_b.ctrl).unwrap();
    // The receive queue goes back (VIRTIO_F_RING_RESET: the device stops using its memory
    // before the drop returns), and a new one on other memory takes its place.
    drop(rx);
    let mut pool = parts_2.pool;
    let mut rx = RxQueue::<N>::new(&a, parts_2.rx, &mut pool).unwrap();
    sim.start_traffic(0, TrafficSpec { count: Some(FRAMES), size: 128, ..Default::default() }).unwrap();
    forward(&sim, &mut pool, &mut rx, &mut tx);
    assert!(sim.lint().unwrap().is_empty(), "{:?}", sim.lint().unwrap());
    assert_eq!(sim.stats().unwrap().ports[0].dma_faults, 0, "nothing reached the first queue's memory");
}

#[test]
fn a_device_with_other_queue_sizes_is_refused_in_one_line() {
    let sim = nicsim("virtio-size", "virtio-net");
    let a = VirtioDevice::open_with(&sim.devices(), &nicsim::sysfs::port_address(0), Some(Interface::Legacy)).unwrap();
    let mut mem = VirtioMemory::<64>::allocate(64).unwrap();
    let mut parts = mem.parts().unwrap();
    let e = RxQueue::<64>::new(&a, parts.rx, &mut parts.pool).err().expect("refused");
    assert!(e.to_string().contains("has 256 entries, the driver was built for 64"), "{e}");
    drop(a);
    // The modern interface lets the driver make a queue smaller.
    let a = VirtioDevice::open(&sim.devices(), &nicsim::sysfs::port_address(0)).unwrap();
    let mut mem = VirtioMemory::<64>::allocate(64).unwrap();
    let mut parts = mem.parts().unwrap();
    RxQueue::<64>::new(&a, parts.rx, &mut parts.pool).expect("a queue of 64 of at most 256");
    let e = VirtioDevice::open(&sim.devices(), "0000:5e:00.7").err().expect("no such function");
    assert!(!e.to_string().contains('\n'), "{e}");
}
