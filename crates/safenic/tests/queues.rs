//! `safenic fwd --queues N --cores LIST`: every model on N queue pairs, one thread per core,
//! RSS spreading the generator's flows [DS 7.1.2.8]. Each run is lossless (flow control),
//! every frame accounted for, each flow in order (frames of different flows may interleave),
//! and each queue received exactly the frames that the Toeplitz hash, computed bit by bit
//! from the generated 5-tuples and the driver's key, sends it.
//! Needs root and hugepages (`make test` provides them); tests run one at a time.

use crate::common;

use common::{Driver, Sim, A, B, RUST};
use nicsim::wire::TrafficSpec;
use std::time::{Duration, Instant};

/// The C baseline and the Ada driver do the same (drivers/c/src/fwd.c, drivers/ada/src/cli.adb),
/// so the comparison stays like with like.
const C_CLANG: Driver = Driver { name: "c-clang", command: "drivers/c/build/{isa}/clang/safenic-c-{mode} fwd" };
const ADA: Driver = Driver { name: "ada", command: "drivers/ada/build/{isa}/safenic-ada fwd" };

/// Flows per generator, and frames each way: every flow sends as many. Not a power of two:
/// the hash is linear, so 2^k consecutive flows spread exactly evenly, and an even spread
/// would not tell one queue from another.
const FLOWS: u32 = 100;
const FRAMES: u64 = 32_000;
/// (queue pairs, cores) of every run: N = 1, 2, 4, 16 on one core, and on two.
/// nicsim's engine runs on CPU 0 (`Sim`), so one core is CPU 1; two share CPU 0 with it.
const PLANS: [(usize, &str); 7] = [(1, "1"), (2, "1"), (4, "1"), (16, "1"), (2, "0,1"), (4, "0,1"), (16, "0,1")];

#[test]
#[ignore = "make test-slow runs it; make test keeps the flexible model's"]
fn restricted_spreads_flows_over_queue_pairs_and_cores() {
    every_plan("restricted");
}

#[test]
#[ignore = "make test-slow runs it; make test keeps the flexible model's"]
fn const_spreads_flows_over_queue_pairs_and_cores() {
    every_plan("const");
}

#[test]
fn flexible_spreads_flows_over_queue_pairs_and_cores() {
    every_plan("flexible");
}

/// The C baseline's and the Ada driver's plans: queues on one core and on two (the Rust driver
/// runs them all).
const OTHER_PLANS: [(usize, &str); 2] = [(4, "1"), (16, "0,1")];

fn every_plan(mode: &str) {
    for (queues, cores) in PLANS {
        forward_on_queues(RUST, mode, queues, cores);
    }
    for driver in [C_CLANG, ADA] {
        for (queues, cores) in OTHER_PLANS {
            forward_on_queues(driver, mode, queues, cores);
        }
    }
}

fn forward_on_queues(driver: Driver, mode: &str, queues: usize, cores: &str) {
    let sim = Sim::start(&format!("queues-{}-{mode}-{queues}", driver.name));
    let q = queues.to_string();
    let mut child = sim.fwd_placed(driver, mode, &[A, B, "--flow-control", "--queues", &q, "--cores", cores], &[]);
    wait_for_queues(&sim, queues, &mut child);
    let spec =
        TrafficSpec { rate_pps: Some(common::RATE_PPS), count: Some(FRAMES), flows: FLOWS, ..Default::default() };
    let s = sim.send_both_ways(spec);
    let summary = common::stop_driver(driver, mode, child);
    let what = format!("{} {mode} on {queues} queue pairs, cores {cores}", driver.name);
    common::assert_lossless(&s, &summary, FRAMES, false);
    common::assert_no_lint(&sim);
    for p in &s.ports {
        let st = &p.streams[0].1;
        assert_eq!(st.flow_reordered, 0, "{what}: port {} received a flow out of order", p.port);
        let stream = p.port as u8;
        let predicted = per_queue(stream, queues);
        let sender = &s.ports[p.port];
        assert_eq!(&sender.device.qprc[..16], &predicted[..], "{what}: port {}'s queues", p.port);
    }
    common::assert_queues_stopped_before_memory_went(&sim, driver);
}

/// Waits until the driver has every RX queue of both ports enabled: RSS sends frames to all.
fn wait_for_queues(sim: &Sim, queues: usize, child: &mut platform::Reaped) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = sim.stats();
        if s.ports.iter().all(|p| p.rx_queues_enabled == queues && p.tx_queues_enabled == queues) {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the driver exited early with {status}: {}", child.output());
        }
        assert!(Instant::now() < deadline, "the driver did not enable {queues} queues per port within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(100));
}

/// Frames each RX queue of a port receives from the generator of stream `stream`: each flow's
/// 5-tuple hashed bit by bit (`bench::rss`: the hash's definition, not nicsim's tables) and looked up in
/// the redirection table the driver programs (entry i names queue i mod N).
fn per_queue(stream: u8, queues: usize) -> [u64; 16] {
    let mut counts = [0u64; 16];
    let spread = bench::rss::per_queue(&ixgbe::RSS_KEY, stream, FLOWS, queues, FRAMES / u64::from(FLOWS));
    counts[..queues].copy_from_slice(&spread);
    counts
}

#[test]
fn the_bench_and_the_drivers_use_one_key() {
    assert_eq!(bench::queues::KEY, ixgbe::RSS_KEY);
}

#[test]
fn queue_and_core_errors_are_one_line() {
    let e = common::fwd_error(RUST, "restricted", &[A, B, "--queues", "4", "--cores", "4096"]);
    assert!(e.contains("does not exist here"), "{e}");
    for (args, expect) in [
        (&["--queues", "17"][..], "give 1 to 16 queue pairs"),
        (&["--queues", "0"], "give 1 to 16 queue pairs"),
        (&["--queues", "2", "--cores", "0,1,2"], "at most as many cores"),
        (&["--queues", "4", "--cores", "0,0"], "listed twice"),
        (&["--queues", "2", "--cpu", "0", "--cores", "0"], "--cpu or --cores"),
        (&["--queues", "16", "--outputs", "8"], "give fewer"),
    ] {
        for driver in [RUST, C_CLANG, ADA] {
            let e = common::fwd_error(driver, "restricted", &[&[A, B][..], args].concat());
            assert!(e.contains(expect), "{}: {args:?}: {e}", driver.name);
        }
    }
}
