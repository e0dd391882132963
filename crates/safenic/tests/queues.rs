//! `safenic fwd --queues N --cores LIST`: every model on N queue pairs, one thread per core,
//! RSS spreading the generator's flows [DS 7.1.2.8]. Each run is lossless (flow control),
//! every frame accounted for, each flow in order (frames of different flows may interleave),
//! and each queue received exactly the frames that a Toeplitz hash computed here, bit by
//! bit from the generated 5-tuples and the driver's key, sends it.
//! Needs root and hugepages (`make test` provides them); tests run one at a time.

use crate::common;

use common::{Sim, A, B, RUST};
use nicsim::wire::TrafficSpec;
use std::time::{Duration, Instant};

/// Flows per generator, and frames each way: every flow sends as many.
const FLOWS: u32 = 64;
const FRAMES: u64 = 32_000;
/// (queue pairs, cores) of every run: N = 1, 2, 4, 16 on one core, and on two.
/// nicsim's engine runs on CPU 0 (`Sim`), so one core is CPU 1; two share CPU 0 with it.
const PLANS: [(usize, &str); 7] = [(1, "1"), (2, "1"), (4, "1"), (16, "1"), (2, "0,1"), (4, "0,1"), (16, "0,1")];

#[test]
fn restricted_spreads_flows_over_queue_pairs_and_cores() {
    every_plan("restricted");
}

#[test]
fn const_spreads_flows_over_queue_pairs_and_cores() {
    every_plan("const");
}

#[test]
fn flexible_spreads_flows_over_queue_pairs_and_cores() {
    every_plan("flexible");
}

fn every_plan(mode: &str) {
    for (queues, cores) in PLANS {
        forward_on_queues(mode, queues, cores);
    }
}

fn forward_on_queues(mode: &str, queues: usize, cores: &str) {
    let sim = Sim::start(&format!("queues-{mode}-{queues}"));
    let q = queues.to_string();
    let mut child = sim.fwd_placed(RUST, mode, &[A, B, "--flow-control", "--queues", &q, "--cores", cores], &[]);
    wait_for_queues(&sim, queues, &mut child);
    let spec =
        TrafficSpec { rate_pps: Some(common::RATE_PPS), count: Some(FRAMES), flows: FLOWS, ..Default::default() };
    let s = sim.send_both_ways(spec);
    let summary = common::stop_driver(RUST, mode, child);
    let what = format!("{mode} on {queues} queue pairs, cores {cores}");
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
    common::assert_queues_stopped_before_memory_went(&sim, RUST);
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

/// Frames each RX queue of a port receives from the generator of stream `stream`: its flows
/// as nicsim's generator makes them (source 10.<stream>.0.<flow>, UDP port 1024 + flow, to
/// 10.255.<stream>.1, port 20051), each hashed here and looked up in the redirection table the
/// driver programs (entry i names queue i mod N).
fn per_queue(stream: u8, queues: usize) -> [u64; 16] {
    let mut counts = [0u64; 16];
    for flow in 0..FLOWS {
        let mut input = Vec::new();
        input.extend([10, stream, 0, flow as u8]);
        input.extend([10, 255, stream, 1]);
        input.extend((1024 + flow as u16).to_be_bytes());
        input.extend(20051u16.to_be_bytes());
        let hash = toeplitz(&ixgbe::RSS_KEY, &input);
        counts[(hash & 0x7F) as usize % queues] += FRAMES / u64::from(FLOWS);
    }
    counts
}

/// The Toeplitz hash, bit by bit as its definition reads: for every set bit of the input, the
/// 32 key bits from that position on [DS 7.1.2.8.2].
fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let key_bit = |i: usize| i < key.len() * 8 && key[i / 8] & (0x80 >> (i % 8)) != 0;
    let mut hash = 0u32;
    for i in 0..input.len() * 8 {
        if input[i / 8] & (0x80 >> (i % 8)) != 0 {
            hash ^= (0..32).fold(0u32, |w, k| (w << 1) | u32::from(key_bit(i + k)));
        }
    }
    hash
}

#[test]
fn the_bitwise_toeplitz_matches_the_verification_suite() {
    // 66.9.149.187:2794 -> 161.142.100.80:1766, the suite's first line [DS 7.1.2.8.3].
    let input = [66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6];
    assert_eq!(toeplitz(&ixgbe::RSS_KEY, &input), 0x51cc_c178);
    assert_eq!(toeplitz(&ixgbe::RSS_KEY, &input[..8]), 0x323e_8fc2);
}

#[test]
fn queue_and_core_errors_are_one_line() {
    for (args, expect) in [
        (&["--queues", "17"][..], "give 1 to 16 queue pairs"),
        (&["--queues", "0"], "give 1 to 16 queue pairs"),
        (&["--queues", "2", "--cores", "0,1,1"], "at most as many cores"),
        (&["--queues", "4", "--cores", "0,0"], "listed twice"),
        (&["--queues", "4", "--cores", "4096"], "does not exist here"),
        (&["--queues", "2", "--cpu", "0", "--cores", "0"], "--cpu or --cores"),
        (&["--queues", "16", "--outputs", "8"], "give fewer"),
    ] {
        let e = common::fwd_error(RUST, "restricted", &[&[A, B][..], args].concat());
        assert!(e.contains(expect), "{args:?}: {e}");
    }
}
