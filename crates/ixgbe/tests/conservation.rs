//! Buffer conservation of the flexible model, against nicsim: after every call, the buffers in
//! the pool, in the RX ring, in the TX ring and in the caller's batch add up to the pool's
//! total, including while the TX ring is kept full by a held transmitter (a link partner's
//! flow-control pause) and after it drains again.
//! Needs root and hugepages (`make test` provides them).

mod common;

use ixgbe::queues::{Batch, BufferPool, QueueMemory, Receive, RxQueue, Transmit, TxQueue};
use nicsim::control::Stats;
use nicsim::session::Session;
use nicsim::wire::TrafficSpec;
use std::time::{Duration, Instant};

const RING: usize = 64;
const POOL: usize = 256;
const BATCH: usize = 32;
/// Frames of phase 2 offered at a time: half a ring.
const ROUND: u64 = RING as u64 / 2;

fn stats(server: &Session) -> Stats {
    server.stats().unwrap()
}

#[test]
fn flexible_queues_conserve_buffers_with_the_tx_ring_kept_full() {
    let server = common::nicsim("conservation");
    platform::sched::pin_current_thread(1).expect("pinning the driver thread");
    let (port_a, port_b) = (common::port(&server, 0), common::port(&server, 1));
    let (a, b) = (port_a.device(), port_b.device());
    let mut mem = QueueMemory::<RING>::allocate(POOL).unwrap();
    let parts = mem.parts().unwrap();
    let mut pool = parts.pool;
    let mut rx = RxQueue::<RING>::new(&a, parts.rx, &mut pool).unwrap();
    let mut tx = TxQueue::<RING>::new(&b, parts.tx).unwrap();
    let mut batch = Batch::<BATCH>::default();
    let total = pool.total();
    assert_eq!(total, POOL);

    let mut t = Tally::default();
    let mut step = |t: &mut Tally| forward_step(t, &mut pool, &mut rx, &mut tx, &mut batch, total);

    // Phase 1: B's transmitter is held; A receives 3 000 frames. The TX ring fills and stays
    // full; what does not fit is dropped by the caller, back into the pool.
    server.pause_tx(1, true).unwrap();
    let spec = TrafficSpec { rate_pps: Some(200_000.0), count: Some(3_000), ..Default::default() };
    server.start_traffic(0, spec.clone()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while t.received + stats_rx_drops(&server) < 3_000 {
        assert!(Instant::now() < deadline, "phase 1 did not receive all frames ({} received)", t.received);
        for _ in 0..1_000 {
            step(&mut t);
        }
    }
    eprintln!(
        "phase 1: received {}, queued {}, dropped {}, no-descriptor {}, sent {}",
        t.received,
        t.queued,
        t.dropped,
        stats_rx_drops(&server),
        stats(&server).ports[0].generated
    );
    assert_eq!(t.tx_held, RING - 1, "the TX ring is full while the transmitter is held");
    assert!(t.full_and_refusing > 0, "tx_batch refused packets while the ring was full");
    assert!(t.dropped > 0, "frames beyond the full TX ring were dropped by the caller");
    assert_eq!(stats(&server).ports[1].sink_packets, 0, "nothing left the held port");

    // Phase 2: release the transmitter and send 2 000 more, half a ring at a time, each round
    // once the last is received: the ring drains and recycles, and however the host schedules
    // this thread no frame of this phase finds the RX ring full.
    server.pause_tx(1, false).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut offered = 3_000;
    while offered < 5_000 {
        offered += ROUND;
        server.start_traffic(0, TrafficSpec { count: Some(ROUND), ..spec.clone() }).unwrap();
        while t.received + stats_rx_drops(&server) < offered {
            assert!(Instant::now() < deadline, "phase 2 did not finish: {} received, {} queued", t.received, t.queued);
            for _ in 0..1_000 {
                step(&mut t);
            }
        }
    }
    while stats(&server).ports[1].sink_packets != t.queued {
        assert!(Instant::now() < deadline, "phase 2: {} queued, not all sent", t.queued);
        for _ in 0..1_000 {
            step(&mut t);
        }
    }
    assert_eq!(t.received, t.queued + t.dropped, "every received packet was queued or dropped by the caller");
    assert!(t.queued > (RING as u64) * 2, "the ring recycled after the release ({} queued)", t.queued);
    let s = stats(&server);
    assert_eq!(s.ports[1].sink_packets, t.queued, "every queued packet left port B exactly once");
    for p in &s.ports {
        assert_eq!(p.dma_faults, 0, "port {}: DMA faults", p.port);
        assert_eq!(p.lint_warnings, 0, "port {}: lint warnings", p.port);
    }
    assert!(t.checks > 3_000);
    drop(server);
}

#[derive(Default)]
struct Tally {
    received: u64,
    queued: u64,
    dropped: u64,
    /// tx_batch calls that queued nothing from a non-empty batch.
    full_and_refusing: u64,
    checks: u64,
    tx_held: usize,
}

/// One forwarding step (receive, transmit, drop what did not fit), checking after each call
/// that pool + RX ring + TX ring + batch = `total`.
fn forward_step<'a>(
    t: &mut Tally,
    pool: &mut BufferPool<'a>,
    rx: &mut RxQueue<'a, RING>,
    tx: &mut TxQueue<'a, RING>,
    batch: &mut Batch<'a, BATCH>,
    total: usize,
) {
    let mut check = |what: &str, pool: &BufferPool<'a>, rx: &RxQueue<'a, RING>, tx: &TxQueue<'a, RING>, n: usize| {
        t.checks += 1;
        let (p, r, x) = (pool.available(), rx.held(), tx.held());
        assert_eq!(p + r + x + n, total, "after {what}: pool {p} + RX ring {r} + TX ring {x} + batch {n} != {total}");
    };
    let got = rx.rx_batch(pool, batch) as u64;
    check("rx_batch", pool, rx, tx, batch.len());
    let before = batch.len();
    let sent = tx.tx_batch(pool, batch) as u64;
    check("tx_batch", pool, rx, tx, batch.len());
    let refused = before > 0 && sent == 0;
    let left = batch.len() as u64;
    batch.release(pool);
    check("release", pool, rx, tx, batch.len());
    t.received += got;
    t.queued += sent;
    t.dropped += left;
    t.tx_held = tx.held();
    if refused {
        t.full_and_refusing += 1;
        assert_eq!(t.tx_held, RING - 1, "a refusing TX queue holds a full ring");
    }
}

/// Frames nicsim could not place in A's RX ring (no free descriptor).
fn stats_rx_drops(server: &Session) -> u64 {
    stats(server).ports[0].device.qprdc[0]
}
