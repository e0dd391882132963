//! A TinyNF-style agent written from the datasheet alone, as drivers we did not write behave,
//! and as TinyNF's C agent does: one 256-descriptor ring shared by RX on one port and TX on the
//! other (base only 64-byte aligned), legacy descriptors, RS on every 64th descriptor, TDT after
//! at most 8 packets, TX head write-back, RDT = the written-back head, written at RS points in
//! the middle of a batch, before that batch's TDT; both directions' agents in one thread. It
//! forwards only if nicsim writes back the head after each RS descriptor [DS 7.2.3.5.2] and
//! never acts on an RDT while missing a TDT the agent wrote before it (docs/nicsim.md, "Doorbell
//! intervals"); otherwise it stalls for good, which fails the test: there is no retry.
//!
//! `NICSIM_TINYNF_FRAMES` (frames per direction, 10^7 by default) and `NICSIM_TINYNF_RUNS`
//! (runs of the test from full rings, 1 by default) make it a stress test (`make
//! test-tinynf-stress`). Needs root and hugepages (`make test` provides them); one test at a
//! time.

use crate::common;

use common::serve::{Nicsim, A, B};
use nicsim::lint::Rule;
use nicsim::peer::{rewrite_macs, Device, TinyAgent, TinyStyle};
use nicsim::regs::*;
use nicsim::wire::TrafficSpec;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// 64-byte frames at 10 Gb/s [IEEE 802.3: 84 bytes on the wire each].
const LINE_RATE_PPS: f64 = 10e9 / (84.0 * 8.0);
/// No frame forwarded for this long while traffic is offered: a stall for good, not a slow
/// host (the agents poll without end; only a dead ring stops them for seconds).
const STALL: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(10);

fn env_count(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Frames each direction must forward.
fn frames() -> u64 {
    env_count("NICSIM_TINYNF_FRAMES", 10_000_000)
}

/// The ring indices of the queue pair `input` RX 0 → `output` TX 0, for a stall message.
fn indices(input: &Device, output: &Device) -> String {
    format!(
        "RDH = {:#x}, RDT = {:#x}, TDH = {:#x}, TDT = {:#x}",
        input.read(rdh(0)),
        input.read(rdt(0)),
        output.read(tdh(0)),
        output.read(tdt(0))
    )
}

/// What nicsim says of a port, for a stall message: what could stop a direction other than
/// the agent.
fn port_state(p: &nicsim::control::PortStats) -> String {
    format!(
        "port {}: generator {} ({} generated), link {}, {} RX and {} TX queues enabled, resets {}, removed {}, \
         TX paused {}, drops {:?}, no descriptor {}, driver sent {}, {} lint warnings",
        p.port,
        if p.generator_active { "on" } else { "off" },
        p.generated,
        if p.link_up { "up" } else { "down" },
        p.rx_queues_enabled,
        p.tx_queues_enabled,
        p.resets,
        p.removed,
        p.tx_paused,
        p.drops,
        p.device.qprdc.iter().sum::<u64>(),
        p.device.gptc,
        p.lint_warnings
    )
}

/// What one direction's agent saw last: the head the device wrote back and how often it moved.
#[derive(Default)]
struct Seen {
    head: AtomicU32,
    head_moves: AtomicU64,
    /// When the head last moved, or the agents started (monotonic ns).
    moved_ns: AtomicU64,
}

/// Time the hypervisor ran something else on `cpu`'s virtual CPU since boot, in ms (the
/// steal column of /proc/stat), where the kernel counts it.
fn stolen_ms(cpu: usize) -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with(&format!("cpu{cpu} ")))?;
    let ticks: u64 = line.split_whitespace().nth(8)?.parse().ok()?;
    // USER_HZ is 100 in the x86-64 Linux ABI.
    Some(ticks * 10)
}

/// What took the engine from its doorbells around `t_ns` (monotonic): its own slow path, and
/// the times the host held its core (from a snapshot taken soon after).
fn absences_near(s: &nicsim::control::Stats, t_ns: u64) -> String {
    let t = t_ns.saturating_sub(s.monotonic_start_ns);
    let near = |intervals: &[(u64, u64)]| -> String {
        let near: Vec<String> = intervals
            .iter()
            .filter(|&&(a, b)| b + 1_000_000 >= t && a <= t + 200_000)
            .map(|&(a, b)| format!("{} µs from {} µs before", (b - a) / 1000, (t as i64 - a as i64) / 1000))
            .collect();
        match intervals.first() {
            Some(&(a, _)) if a > t => format!("{} (kept from {} µs after it only)", near.join(", "), (a - t) / 1000),
            _ => near.join(", "),
        }
    };
    format!(
        "near the last head move the host held the engine's core [{}] and its slow path took it [{}]; slow path {:?}",
        near(&s.late_doorbells.stalls),
        near(&s.late_doorbells.slow_passes),
        s.slow_path_ns
    )
}

/// Keeps the calling thread off `cpu` while it lives (when there is another CPU).
struct OffCpu;

impl OffCpu {
    fn new(cpu: usize, cpus: usize) -> OffCpu {
        if cpus > 1 {
            platform::sched::avoid_cpu(cpu).unwrap();
        }
        OffCpu
    }
}

impl Drop for OffCpu {
    fn drop(&mut self) {
        let _ = platform::sched::unpin_current_thread();
    }
}

/// When the first frames arrive.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    /// Traffic starts once the agents poll.
    AgentsFirst,
    /// Traffic first, until every input's ring is full and frames are dropped for want of a
    /// descriptor, then the agents: each begins with a whole ring to work through, as TinyNF's
    /// C agent does when traffic is already on.
    RingsFull,
    /// Bursts of [`BURST`] frames at line rate on each input, each once the last is
    /// accounted for (forwarded, or dropped for want of a descriptor). The agent never has more
    /// than half a ring to work through, so the written-back head is never a lap behind it
    /// however late nicsim looks: the verdict cannot depend on the host.
    Bursts,
}

/// Frames per burst of [`Start::Bursts`], and frames each direction forwards in that mode.
const BURST: u64 = 128;
const BURST_FRAMES: u64 = 100_000;

/// Offers `percent` of line rate on each input port of `directions` (0 → 1, 1 → 0) until
/// every direction forwarded [`frames`] frames, then checks nothing went astray. A direction
/// that forwards nothing for [`STALL`] fails the test with the rings' state.
fn forward(name: &str, percent: f64, directions: &[(usize, usize)], start: Start) {
    let frames = if start == Start::Bursts { BURST_FRAMES } else { frames() };
    // The engine and the agent each on a core of their own, as the card and a forwarder are.
    let cpus = platform::sched::available_cpus();
    let sim = Nicsim::start(name, if cpus > 1 { &["--cpu", "0"] } else { &[] });
    // This thread polls nicsim beside the agents, off the engine's core.
    let _off_engine = OffCpu::new(0, cpus);
    let devices = [sim.open(A), sim.open(B)];
    for d in &devices {
        d.init_tinynf().unwrap();
    }
    let agents: Vec<TinyAgent> = directions
        .iter()
        .map(|&(i, o)| TinyAgent::with_style(&devices[i], &devices[o], TinyStyle::Strict).unwrap())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = sim.stats();
        if directions.iter().all(|&(i, o)| {
            let (input, output) = (&s.ports[i], &s.ports[o]);
            input.rx_queues_enabled > 0 && output.tx_queues_enabled > 0 && input.link_up && output.link_up
        }) {
            break;
        }
        if Instant::now() >= deadline {
            let ports: Vec<String> = s.ports.iter().map(port_state).collect();
            panic!("nicsim did not see the agents' queues enabled and the links up: {}", ports.join("; "));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let rate = LINE_RATE_PPS * percent / 100.0;
    let count = (start == Start::Bursts).then_some(BURST);
    let start_traffic = || {
        for &(input, _) in directions {
            sim.start_traffic(input, TrafficSpec { rate_pps: Some(rate), count, ..TrafficSpec::default() }).unwrap();
        }
    };
    if start == Start::RingsFull {
        start_traffic();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !directions.iter().all(|&(i, _)| sim.stats().ports[i].device.qprdc[0] > 0) {
            assert!(Instant::now() < deadline, "the input rings did not fill");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Arc<Vec<Seen>> = Arc::new(directions.iter().map(|_| Seen::default()).collect());
    let worker = {
        let (stop, seen, dirs) = (stop.clone(), seen.clone(), directions.to_vec());
        let devices = [sim.open(A), sim.open(B)];
        let mut agents = agents;
        std::thread::spawn(move || {
            if cpus > 1 {
                platform::sched::pin_current_thread(cpus - 1).unwrap();
            }
            let mut heads: Vec<u32> = agents.iter().map(|a| a.head()).collect();
            // A head that never moves dates from the agents' start.
            for s in seen.iter() {
                s.moved_ns.store(platform::sched::monotonic_ns(), Ordering::Relaxed);
            }
            while !stop.load(Ordering::Relaxed) {
                for (k, (agent, &(i, o))) in agents.iter_mut().zip(&dirs).enumerate() {
                    let n = agent.run_once(&devices[i], &devices[o], |f, l| {
                        rewrite_macs(f);
                        l
                    });
                    if n > 0 && agent.head() != heads[k] {
                        heads[k] = agent.head();
                        seen[k].moved_ns.store(platform::sched::monotonic_ns(), Ordering::Relaxed);
                        seen[k].head.store(heads[k], Ordering::Relaxed);
                        seen[k].head_moves.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        })
    };
    if start != Start::RingsFull {
        start_traffic();
    }
    let forwarded =
        |s: &nicsim::control::Stats| -> Vec<u64> { directions.iter().map(|&(_, o)| s.ports[o].sink_packets).collect() };
    // When each direction last forwarded a frame: one direction may stall while the other runs.
    let (mut last, mut progress) = (vec![0; directions.len()], vec![Instant::now(); directions.len()]);
    // Bursts follow one another as fast as nicsim's answers come (each a slow-path period).
    let poll = if start == Start::Bursts { Duration::ZERO } else { POLL };
    // Taken as soon as a direction stops, while nicsim still holds the intervals around it.
    let mut early: Option<nicsim::control::Stats> = None;
    let stolen_before = stolen_ms(0);
    let outcome = loop {
        std::thread::sleep(poll);
        let s = sim.stats();
        let now = forwarded(&s);
        if now.iter().all(|&n| n >= frames) {
            break Ok(s);
        }
        // The next burst once every frame of the last went out or was dropped.
        let accounted = |&(i, o): &(usize, usize)| {
            let (input, output) = (&s.ports[i], &s.ports[o]);
            !input.generator_active && output.sink_packets + input.device.qprdc[0] == input.generated
        };
        if start == Start::Bursts && directions.iter().all(accounted) {
            start_traffic();
        }
        for k in 0..now.len() {
            if now[k] != last[k] {
                progress[k] = Instant::now();
            }
        }
        last = now;
        let stopping = |k: usize| last[k] < frames && progress[k].elapsed() > Duration::from_millis(50);
        if early.is_none() && (0..last.len()).any(stopping) {
            early = Some(sim.stats());
        }
        if let Some(k) = (0..last.len()).find(|&k| last[k] < frames && progress[k].elapsed() > STALL) {
            break Err((k, s));
        }
    };
    stop.store(true, Ordering::Relaxed);
    worker.join().unwrap();
    for &(input, _) in directions {
        sim.stop_traffic(input).unwrap();
    }
    let s = match outcome {
        Ok(s) => {
            eprintln!("{name}: doorbell intervals {:?}, slow path {:?}", s.doorbell_interval_ns, s.slow_path_ns);
            s
        }
        Err((k, s)) => {
            let near = early.as_ref().map(|e| absences_near(e, seen[k].moved_ns.load(Ordering::Relaxed)));
            // The engine runs on CPU 0 (`--cpu 0`) when there are two.
            let stolen = match stolen_before.zip(stolen_ms(0)) {
                Some((before, after)) => format!("{} ms", after - before),
                None => "an unknown time".into(),
            };
            let at: Vec<String> = directions
                .iter()
                .zip(seen.iter())
                .map(|(&(i, o), seen)| {
                    format!(
                        "{}; the agent read head {:#x} last, after {} moves",
                        indices(&devices[i], &devices[o]),
                        seen.head.load(Ordering::Relaxed),
                        seen.head_moves.load(Ordering::Relaxed)
                    )
                })
                .collect();
            let ports: Vec<String> = s.ports.iter().map(port_state).collect();
            panic!(
                "{name}: {percent} % of line rate: direction {k} stalled for good at {last:?} frames forwarded; {}; {}; \
                 doorbell intervals {:?}, late {:?}; {}; the hypervisor took {} of the engine's CPU",
                at.join("; "),
                ports.join("; "),
                s.doorbell_interval_ns,
                (s.late_doorbells.count, s.late_doorbells.stalls.len(), s.late_doorbells.recent.iter().map(|(a, b)| b - a).max()),
                near.unwrap_or_default(),
                stolen
            );
        }
    };
    for &(input, output) in directions {
        assert!(!s.ports[output].streams.is_empty(), "port {output}: frames received, and their streams");
        for (stream, st) in &s.ports[output].streams {
            assert_eq!(*stream, input, "port {output} receives what port {input} generated");
            assert_eq!(st.reordered, 0, "forwarded in order");
        }
        assert_eq!(s.ports[output].sink_foreign, 0);
    }
    for p in &s.ports {
        assert_eq!((p.dma_faults, &p.faults), (0, &vec![]), "port {}", p.port);
    }
    // The ring base is deliberately only 64-byte aligned; nothing else is worth a warning.
    let lint = sim.lint().unwrap();
    assert!(lint.iter().all(|w| w.rule == Rule::RingBaseAlignment), "{lint:?}");
}

#[test]
fn tinynf_pattern_forwards_in_bursts_of_half_a_ring() {
    forward("tinynf-bursts", 100.0, &[(0, 1)], Start::Bursts);
}

#[test]
fn tinynf_pattern_forwards_both_ways_in_bursts_of_half_a_ring() {
    forward("tinynf-both-bursts", 100.0, &[(0, 1), (1, 0)], Start::Bursts);
}

// Offered without pause, the agent may have a whole ring to work through while nicsim is not
// looking (its slow path, or the host holding its core), and then stalls for good as it would on
// a card that took as long (docs/nicsim.md, "TinyNF's agent"). `make test-tinynf` runs these.
#[test]
#[ignore = "its verdict depends on the host: make test-tinynf"]
fn tinynf_pattern_forwards_at_ten_percent_of_line_rate() {
    forward("tinynf-10", 10.0, &[(0, 1)], Start::AgentsFirst);
}

#[test]
#[ignore = "its verdict depends on the host: make test-tinynf"]
fn tinynf_pattern_forwards_at_line_rate() {
    forward("tinynf-100", 100.0, &[(0, 1)], Start::AgentsFirst);
}

#[test]
#[ignore = "its verdict depends on the host: make test-tinynf"]
fn tinynf_pattern_forwards_both_ways_at_line_rate() {
    forward("tinynf-both-100", 100.0, &[(0, 1), (1, 0)], Start::AgentsFirst);
}

#[test]
#[ignore = "its verdict depends on the host: make test-tinynf"]
fn tinynf_pattern_forwards_both_ways_at_line_rate_from_full_rings() {
    for run in 0..env_count("NICSIM_TINYNF_RUNS", 1) {
        forward(&format!("tinynf-full-{run}"), 100.0, &[(0, 1), (1, 0)], Start::RingsFull);
    }
}
