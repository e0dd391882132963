//! A queue the driver drops is disabled on the device, and the device has confirmed it, before
//! the memory it used can be released: the queue borrows the memory, and dropping it clears
//! RXDCTL/TXDCTL.ENABLE and waits until the bit reads back 0 [DS 4.6.7.1.2, 4.6.8]. Before this,
//! `safenic fwd` returned from its restricted loop, dropped the agent's memory and left both
//! queues enabled with RDBA pointing at the freed hugepage. A queue leaked instead of dropped
//! keeps its memory mapped, and safe code may write only registers that cannot reach memory.
//! Needs root and hugepages (`make test` provides them); against nicsim in this process.

use ixgbe::agent::{Agent, AgentMemory, ConstOutputs, Outputs};
mod common;

use common::enabled_queues;
use ixgbe::queues::{QueueMemory, RxQueue, TxQueue};
use ixgbe::regs::{
    is_application_writable, rdbal, reg, rxdctl, txdctl, QueueIndex, APPLICATION_WRITABLE, BAR0_DWORDS, EIMC,
    RXDCTL_ENABLE, TXDCTL_ENABLE,
};
use nicsim::session::Session;
use std::time::Duration;

const RING: usize = 64;

/// nicsim applies register writes on its own poll: give it a moment.
fn settle() {
    std::thread::sleep(Duration::from_millis(20));
}

/// Waits until nicsim's queue counts of the first ports are `expected`.
fn expect_enabled(sim: &Session, expected: &[(usize, usize)], what: &str) {
    let mut now = Vec::new();
    let reached = common::within_a_minute(|| {
        now = enabled_queues(sim);
        now.len() >= expected.len() && now[..expected.len()] == *expected
    });
    assert!(reached, "{what}: enabled queues per port {now:?}, not {expected:?}");
}

#[test]
fn dropped_queues_are_disabled_before_their_memory_goes() {
    let sim = common::nicsim("queue-lifetime");
    let (port_a, port_b) = (common::port(&sim, 0), common::port(&sim, 1));
    let (a, b) = (port_a.device(), port_b.device());
    let q0 = QueueIndex::new(0);

    // The flexible model's queues.
    let mut mem = QueueMemory::<RING>::allocate(2 * RING).unwrap();
    {
        let parts = mem.parts().unwrap();
        let mut pool = parts.pool;
        let rx = RxQueue::<RING>::new(&a, parts.rx, &mut pool).unwrap();
        let tx = TxQueue::<RING>::new(&b, parts.tx).unwrap();
        expect_enabled(&sim, &[(1, 0), (0, 1)], "queues enabled");
        drop((rx, tx));
        // Read straight after the drop: the device had confirmed before it returned.
        assert_eq!(a.read(rxdctl(q0)) & RXDCTL_ENABLE, 0, "RX queue disabled on drop");
        assert_eq!(b.read(txdctl(q0)) & TXDCTL_ENABLE, 0, "TX queue disabled on drop");
    }
    drop(mem);
    expect_enabled(&sim, &[(0, 0), (0, 0)], "nothing left enabled on the freed memory");

    // An agent: its RX queue on one port and TX queue on the other.
    let mut agent_mem = AgentMemory::<256>::allocate(1).unwrap();
    {
        let one = ConstOutputs::<1>;
        let agent = Agent::<_, 256>::new(&mut agent_mem, &a, &one.array(|_| b), one).unwrap();
        expect_enabled(&sim, &[(1, 0), (0, 1)], "queues enabled");
        assert_ne!(a.read(rdbal(q0)), 0, "the ring is in the agent's memory");
        drop(agent);
        assert_eq!(a.read(rxdctl(q0)) & RXDCTL_ENABLE, 0);
        assert_eq!(b.read(txdctl(q0)) & TXDCTL_ENABLE, 0);
    }
    drop(agent_mem);
    expect_enabled(&sim, &[(0, 0), (0, 0)], "nothing left enabled on the freed memory");
}

#[test]
fn queues_enabled_before_an_error_are_disabled_again() {
    let sim = common::nicsim("queue-error");
    let port_a = common::port(&sim, 0);
    let a = port_a.device();
    // RX queue 0 is taken, so an agent's set-up fails after it enabled its TX queue.
    let mut mem = QueueMemory::<RING>::allocate(2 * RING).unwrap();
    let parts = mem.parts().unwrap();
    let mut pool = parts.pool;
    let rx = RxQueue::<RING>::new(&a, parts.rx, &mut pool).unwrap();
    let mut agent_mem = AgentMemory::<256>::allocate(1).unwrap();
    let one = ConstOutputs::<1>;
    let e = Agent::<_, 256>::new(&mut agent_mem, &a, &one.array(|_| a), one).err().expect("RX queue 0 is in use");
    assert!(e.to_string().contains("RX queue 0"), "{e}");
    expect_enabled(&sim, &[(1, 0)], "the agent's TX queue was disabled again; the RX queue stays");
    drop(rx);
}

/// Every register through which the device could be made to read or write memory, as an
/// attacker would list them from the datasheet: ring bases, lengths, buffer sizes, heads,
/// tails, enables, head write-back, DCA and RSC per queue [DS 8.2.3.8, 8.2.3.9, 8.2.3.11], for
/// all 128 queues, then the global switches, resets and the FCoE DMA context [DS 8.2.3.19].
fn registers_that_reach_memory() -> Vec<(usize, &'static str)> {
    let mut all = Vec::new();
    for q in 0..128 {
        let rx = if q < 64 { 0x01000 + 0x40 * q } else { 0x0D000 + 0x40 * (q - 64) };
        for (at, name) in [(0x00, "RDBAL"), (0x04, "RDBAH"), (0x08, "RDLEN"), (0x0C, "DCA_RXCTRL"), (0x10, "RDH")] {
            all.push((rx + at, name));
        }
        for (at, name) in [(0x14, "SRRCTL"), (0x18, "RDT"), (0x28, "RXDCTL"), (0x2C, "RSCCTL")] {
            all.push((rx + at, name));
        }
        let tx = 0x06000 + 0x40 * q;
        for (at, name) in [(0x00, "TDBAL"), (0x04, "TDBAH"), (0x08, "TDLEN"), (0x0C, "DCA_TXCTRL"), (0x10, "TDH")] {
            all.push((tx + at, name));
        }
        for (at, name) in [(0x18, "TDT"), (0x28, "TXDCTL"), (0x38, "TDWBAL"), (0x3C, "TDWBAH")] {
            all.push((tx + at, name));
        }
    }
    all.extend([
        (0x00000, "CTRL"),
        (0x00018, "CTRL_EXT"),
        (0x00898, "GPIE"),
        (0x02410, "FCPTRL"),
        (0x02414, "FCPTRH"),
        (0x02418, "FCBUFF"),
        (0x02420, "FCDMARW"),
        (0x02F00, "RDRXCTL"),
        (0x03000, "RXCTRL"),
        (0x03C00, "RXPBSIZE"),
        (0x04240, "HLREG0"),
        (0x04268, "MAXFRS"),
        (0x04A80, "DMATXCTL"),
        (0x051E0, "PFVFRE"),
        (0x05100, "FCRXCTRL"),
        (0x08100, "DTXMXSZRQ"),
        (0x08110, "PFVFTE"),
        (0x08800, "SECTXCTRL"),
        (0x08D00, "SECRXCTRL"),
        (0x0CC00, "TXPBSIZE"),
        (0x0EA00, "PSRTYPE"),
        (0x0EC80, "MRQC"),
        (0x11070, "DCA_ID"),
        (0x11074, "DCA_CTRL"),
    ]);
    all
}

#[test]
fn safe_code_cannot_point_enable_or_size_the_device_s_dma() {
    let sim = common::nicsim("register-allowlist");
    let port = common::port(&sim, 0);
    let d = port.device();
    for (offset, name) in registers_that_reach_memory() {
        let r = reg(offset);
        let before = d.read(r);
        let e = d.write_register(r, before ^ 0x0200_1000).expect_err(name);
        assert!(e.to_string().contains("not one an application may write"), "{name}: {e}");
        assert_eq!(d.read(r), before, "{name} left alone");
    }
    // An allowlist: what is open is exactly the listed ranges, nothing of the list above.
    let open = (0..BAR0_DWORDS).filter(|&i| is_application_writable(reg(4 * i))).count();
    assert_eq!(open, APPLICATION_WRITABLE.iter().map(|(s, e, _)| (e - s) / 4).sum::<usize>());
    d.write_register(EIMC, 0x7FFF_FFFF).expect("an interrupt mask may be written");
    d.write_register(reg(0x0A200 + 8 * 5), 0x1234_5678).expect("a receive address may be written");
    settle();
    assert_eq!(d.read(reg(0x0A200 + 8 * 5)), 0x1234_5678);

    // Below ixgbe, the trusted base's registers of the other port, which any code may open:
    // of the list, only what holds no address, length or enable may be written, and the queue
    // controls only with the enable bit clear.
    let other = platform::i82599::Function::open(&sim.devices(), &nicsim::sysfs::port_address(1)).unwrap();
    let r = other.registers();
    for (offset, name) in registers_that_reach_memory() {
        let writable = platform::i82599::writable::entry(offset);
        if writable.is_some_and(|w| w.rule == platform::i82599::writable::Rule::Any) {
            continue; // a switch, a reset or a threshold: stops or shapes DMA, never points it
        }
        let before = r.read(reg(offset));
        let e = r.write(reg(offset), before | RXDCTL_ENABLE | 0x1000).expect_err(name).to_string();
        assert!(e.contains("enable_rx"), "{name}: {e}");
        assert_eq!(r.read(reg(offset)), before, "{name} left alone");
    }
}

/// Run in a child by the test below (a leak lasts for the process's life): an attacker with
/// only safe code leaks an enabled queue, so that its `Drop` (the disable) never runs, then
/// drops the memory. A leak may leak memory, never free it under the device: the memory stays
/// mapped for as long as the process lives (`platform::dma::retention`).
#[test]
#[ignore = "helper: run by a_leaked_queue_keeps_the_memory_it_may_use"]
fn helper_leak_queues() {
    use platform::dma::retention::kept_regions;
    let sysfs = std::path::PathBuf::from(std::env::var("LEAK_TEST_SYSFS").expect("run by its test"));
    let (port_a, port_b) = (common::port_at(&sysfs, 0), common::port_at(&sysfs, 1));
    let (a, b) = (port_a.device(), port_b.device());

    // Dropped normally: disabled, then the memory goes.
    let mut mem = QueueMemory::<RING>::allocate(2 * RING).unwrap();
    let parts = mem.parts().unwrap();
    let mut pool = parts.pool;
    drop(RxQueue::<RING>::new(&a, parts.rx, &mut pool).unwrap());
    drop(pool);
    drop(mem);
    println!("kept after a drop {}", kept_regions());

    // Leaked: the device still owns the ring and buffers.
    let mut mem = QueueMemory::<RING>::allocate(2 * RING).unwrap();
    let parts = mem.parts().unwrap();
    let mut pool = parts.pool;
    std::mem::forget(RxQueue::<RING>::new(&a, parts.rx, &mut pool).unwrap());
    drop(pool);
    drop(mem);
    println!("kept after a leak {}", kept_regions());
    println!("enabled after a leak {}", (a.read(rxdctl(QueueIndex::new(0))) & RXDCTL_ENABLE) / RXDCTL_ENABLE);

    // The same with an agent, leaked in an Rc cycle rather than forgotten.
    let mut agent_mem = AgentMemory::<256>::allocate(1).unwrap();
    let one = ConstOutputs::<1>;
    let agent = Agent::<_, 256>::new(&mut agent_mem, &b, &one.array(|_| b), one).unwrap();
    struct Cycle<'a> {
        _agent: Agent<'a, ConstOutputs<1>, 256>,
        next: std::cell::RefCell<Option<std::rc::Rc<Cycle<'a>>>>,
    }
    let cycle = std::rc::Rc::new(Cycle { _agent: agent, next: std::cell::RefCell::new(None) });
    *cycle.next.borrow_mut() = Some(cycle.clone());
    drop(cycle);
    drop(agent_mem);
    println!("kept after a cycle {}", kept_regions());
    common::checkpoint();
}

#[test]
fn a_leaked_queue_keeps_the_memory_it_may_use() {
    let sim = common::nicsim("queue-leak");
    let look = |text: &str| {
        // Frames for both leaked queues' rings: into memory the driver no longer names.
        for port in [0, 1] {
            sim.start_traffic(port, nicsim::wire::TrafficSpec { count: Some(8), ..Default::default() }).unwrap();
        }
        let received = || sim.stats().unwrap().ports.iter().map(|p| p.device.gprc).sum::<u64>() >= 16;
        assert!(common::within_a_minute(received), "the leaked queues took no frames:\n{text}");
        let faults: Vec<String> =
            sim.stats().unwrap().ports.iter().flat_map(|p| p.faults.iter().map(|f| format!("{f:?}"))).collect();
        assert!(faults.is_empty(), "the device reached memory the driver let go: {faults:#?}");
    };
    let text = common::run_helper_with_checkpoint("helper_leak_queues", &[("LEAK_TEST_SYSFS", &sim.devices())], look);
    assert_eq!(common::reported(&text, "kept after a drop"), 0, "memory of a stopped queue is unmapped:\n{text}");
    assert_eq!(common::reported(&text, "kept after a leak"), 1, "the leaked queue's memory stays mapped:\n{text}");
    assert_eq!(common::reported(&text, "enabled after a leak"), 1, "and the queue still runs on it:\n{text}");
    assert_eq!(common::reported(&text, "kept after a cycle"), 2, "the agent's memory stays mapped too:\n{text}");
}
