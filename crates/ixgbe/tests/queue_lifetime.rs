//! A queue the driver drops is disabled on the device, and the device has confirmed it, before
//! the memory it used can be released: the queue borrows the memory, and dropping it clears
//! RXDCTL/TXDCTL.ENABLE and waits until the bit reads back 0 [DS 4.6.7.1.2, 4.6.8]. Before this,
//! `safenic fwd` returned from its restricted loop, dropped the agent's memory and left both
//! queues enabled with RDBA pointing at the freed hugepage.
//! Needs root and hugepages (`make test` provides them); against nicsim in this process.

use ixgbe::agent::{Agent, AgentMemory, ConstOutputs, Outputs};
mod common;

use ixgbe::queues::{QueueMemory, RxQueue, TxQueue};
use ixgbe::regs::{
    rdbah, rdbal, rxdctl, tdbah, tdbal, tdwbah, tdwbal, txdctl, QueueIndex, EIMC, RXDCTL_ENABLE, TXDCTL_ENABLE,
};
use nicsim::session::Session;
use std::time::Duration;

const RING: usize = 64;

fn enabled_queues(s: &Session) -> Vec<(usize, usize)> {
    s.stats().unwrap().ports.iter().map(|p| (p.rx_queues_enabled, p.tx_queues_enabled)).collect()
}

/// nicsim applies register writes on its own poll: give it a moment.
fn settle() {
    std::thread::sleep(Duration::from_millis(20));
}

#[test]
fn dropped_queues_are_disabled_before_their_memory_goes() {
    let sim = common::nicsim("queue-lifetime");
    let (port_a, port_b) = (common::port(&sim, 0), common::port(&sim, 1));
    let (a, b) = (port_a.device(), port_b.device());
    let q0 = QueueIndex::new(0);

    // The flexible model's queues.
    let mut mem = QueueMemory::allocate(RING, 2 * RING).unwrap();
    {
        let parts = mem.parts().unwrap();
        let mut pool = parts.pool;
        let rx = RxQueue::<RING>::new(&a, parts.rx, &mut pool).unwrap();
        let tx = TxQueue::<RING>::new(&b, parts.tx).unwrap();
        settle();
        assert_eq!(enabled_queues(&sim), [(1, 0), (0, 1)]);
        drop((rx, tx));
        // Read straight after the drop: the device had confirmed before it returned.
        assert_eq!(a.read(rxdctl(q0)) & RXDCTL_ENABLE, 0, "RX queue disabled on drop");
        assert_eq!(b.read(txdctl(q0)) & TXDCTL_ENABLE, 0, "TX queue disabled on drop");
    }
    drop(mem);
    settle();
    assert_eq!(enabled_queues(&sim), [(0, 0), (0, 0)], "nothing left enabled on the freed memory");

    // An agent: its RX queue on one port and TX queue on the other.
    let mut agent_mem = AgentMemory::allocate(1, 256).unwrap();
    {
        let one = ConstOutputs::<1>;
        let agent = Agent::<_, 256>::new(&mut agent_mem, &a, &one.array(|_| b), one).unwrap();
        settle();
        assert_eq!(enabled_queues(&sim), [(1, 0), (0, 1)]);
        assert_ne!(a.read(rdbal(q0)), 0, "the ring is in the agent's memory");
        drop(agent);
        assert_eq!(a.read(rxdctl(q0)) & RXDCTL_ENABLE, 0);
        assert_eq!(b.read(txdctl(q0)) & TXDCTL_ENABLE, 0);
    }
    drop(agent_mem);
    settle();
    assert_eq!(enabled_queues(&sim), [(0, 0), (0, 0)]);
}

#[test]
fn queues_enabled_before_an_error_are_disabled_again() {
    let sim = common::nicsim("queue-error");
    let port_a = common::port(&sim, 0);
    let a = port_a.device();
    // RX queue 0 is taken, so an agent's set-up fails after it enabled its TX queue.
    let mut mem = QueueMemory::allocate(RING, 2 * RING).unwrap();
    let parts = mem.parts().unwrap();
    let mut pool = parts.pool;
    let rx = RxQueue::<RING>::new(&a, parts.rx, &mut pool).unwrap();
    let mut agent_mem = AgentMemory::allocate(1, 256).unwrap();
    let one = ConstOutputs::<1>;
    let e = Agent::<_, 256>::new(&mut agent_mem, &a, &one.array(|_| a), one).err().expect("RX queue 0 is in use");
    assert!(e.to_string().contains("RX queue 0"), "{e}");
    settle();
    assert_eq!(enabled_queues(&sim)[0], (1, 0), "the agent's TX queue was disabled again; the RX queue stays");
    drop(rx);
}

#[test]
fn safe_code_cannot_give_the_device_an_address() {
    let sim = common::nicsim("register-allowlist");
    let port = common::port(&sim, 0);
    let d = port.device();
    let q = QueueIndex::new(3);
    for r in [rdbal(q), rdbah(q), tdbal(q), tdbah(q), tdwbal(q), tdwbah(q)] {
        let e = d.write_register(r, 0x1000).expect_err("a DMA-address register is refused");
        assert!(e.to_string().contains("holds a DMA address"), "{e}");
        assert_eq!(d.read(r), 0, "and left alone");
    }
    d.write_register(EIMC, 0x7FFF_FFFF).expect("other registers may be written");
}
