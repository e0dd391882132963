//! A TinyNF-style agent written from the datasheet alone, as drivers we did not write behave:
//! one 256-descriptor ring shared by RX on one port and TX on the other (base only 64-byte
//! aligned), legacy descriptors, RS on every 64th descriptor, TDT after at most 8 packets, TX
//! head write-back, and RDT = the written-back head, read only at RS points. It forwards only
//! if nicsim writes back the head after each RS descriptor [DS 7.2.3.5.2] and sees every tail
//! write before the agent laps the ring; otherwise it stalls for good. Needs root and
//! hugepages (`make test` provides them); one test at a time.

use crate::common;

use common::serve::{Nicsim, A, B};
use nicsim::lint::Rule;
use nicsim::peer::{rewrite_macs, Device, TinyAgent, TinyStyle};
use nicsim::regs::*;
use nicsim::wire::TrafficSpec;
use platform::sched::monotonic_ns;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Frames each direction must forward.
const FRAMES: u64 = 10_000_000;
/// 64-byte frames at 10 Gb/s [IEEE 802.3: 84 bytes on the wire each].
const LINE_RATE_PPS: f64 = 10e9 / (84.0 * 8.0);
/// No frame forwarded for this long while traffic is offered: a stall, not a slow host.
const STALL: Duration = Duration::from_secs(3);

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
         TX paused {}, drops {:?}, {} lint warnings",
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
        p.lint_warnings
    )
}

/// What one direction's agent saw last, times in CLOCK_MONOTONIC ns: when the head the device
/// writes back last moved, to what and how often, and when it last received a frame.
#[derive(Default)]
struct Seen {
    head_moved_ns: AtomicU64,
    frame_ns: AtomicU64,
    head: AtomicU32,
    head_moves: AtomicU64,
}

/// Offers `percent` of line rate on each input port of `directions` (0 → 1, 1 → 0) until
/// every direction forwarded [`FRAMES`] frames, then checks nothing went astray.
///
/// The card completes transmit descriptors within about a microsecond of a tail write, so
/// the written-back head never lags the agent by a whole ring. nicsim does too while its
/// engine runs; when the host takes the engine's core away for longer than the agent needs
/// to work through its ring, the head lags, the agent sets RDT to a head a lap stale and
/// stops for good. nicsim reports every such late look at the doorbells
/// (`Stats::late_doorbells`). A stall while the head stood still across one of them is the
/// host's: the run starts again on a fresh device and the frames forwarded so far count. A
/// stall without one is nicsim's and fails the test.
fn forward(name: &str, percent: f64, directions: &[(usize, usize)]) {
    let mut done = vec![0u64; directions.len()];
    for attempt in 0..MAX_ATTEMPTS {
        match attempt_forwarding(&format!("{name}-{attempt}"), percent, directions, &done) {
            Ok(()) => return,
            Err(so_far) => done = so_far,
        }
    }
    panic!("{percent} % of line rate: nicsim's late doorbell looks caused a stall {MAX_ATTEMPTS} times");
}

/// Fresh starts after a stall the host caused before the test gives up.
const MAX_ATTEMPTS: usize = 50;
/// How often the test looks at nicsim's statistics: often enough that the late doorbell
/// intervals nicsim keeps (the latest 256) are all seen.
const POLL: Duration = Duration::from_millis(10);

/// One run of [`forward`] from `done` frames forwarded; `Err` with the new totals after a stall
/// the host caused.
fn attempt_forwarding(name: &str, percent: f64, directions: &[(usize, usize)], done: &[u64]) -> Result<(), Vec<u64>> {
    // The engine and the agent each on a core of their own, as the card and a forwarder are:
    // sharing one, each waits for the other's time slice, and a busy host then stretches
    // this test from seconds to half an hour.
    let cpus = platform::sched::available_cpus();
    let sim = Nicsim::start(name, if cpus > 1 { &["--cpu", "0"] } else { &[] });
    let devices = [sim.open(A), sim.open(B)];
    for d in &devices {
        d.init_tinynf().unwrap();
    }
    let mut agents: Vec<TinyAgent> = directions
        .iter()
        .map(|&(i, o)| TinyAgent::with_style(&devices[i], &devices[o], TinyStyle::Strict).unwrap())
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Arc<Vec<Seen>> = Arc::new(directions.iter().map(|_| Seen::default()).collect());
    let worker = {
        let (stop, seen, dirs) = (stop.clone(), seen.clone(), directions.to_vec());
        let devices = [sim.open(A), sim.open(B)];
        std::thread::spawn(move || {
            if cpus > 1 {
                platform::sched::pin_current_thread(cpus - 1).unwrap();
            }
            let mut heads: Vec<u32> = agents.iter().map(|a| a.head()).collect();
            while !stop.load(Ordering::Relaxed) {
                for (k, (agent, &(i, o))) in agents.iter_mut().zip(&dirs).enumerate() {
                    let n = agent.run_once(&devices[i], &devices[o], |f, l| {
                        rewrite_macs(f);
                        l
                    });
                    if n > 0 {
                        let now = monotonic_ns();
                        seen[k].frame_ns.store(now, Ordering::Relaxed);
                        let head = agent.head();
                        if head != heads[k] {
                            heads[k] = head;
                            seen[k].head_moved_ns.store(now, Ordering::Relaxed);
                            seen[k].head.store(head, Ordering::Relaxed);
                            seen[k].head_moves.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
        })
    };
    // Fed once the agents run and both links are up, as a forwarder is: a ring filled before
    // the agent starts, or behind an output whose link is down, makes this pattern stall on
    // the card too (it reads a head that did not move).
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
    // Late doorbell intervals as (start, end) in CLOCK_MONOTONIC ns, from before the first
    // frame: a poll that finds more late looks than nicsim keeps counts the whole time since
    // the last poll, and that time must include the first lap of every agent.
    let (mut late, mut late_count, mut polled_ns): (Vec<(u64, u64)>, u64, u64) = (Vec::new(), 0, monotonic_ns());
    let rate = LINE_RATE_PPS * percent / 100.0;
    for &(input, _) in directions {
        sim.start_traffic(input, TrafficSpec { rate_pps: Some(rate), ..TrafficSpec::default() }).unwrap();
    }
    let forwarded = |s: &nicsim::control::Stats| -> Vec<u64> {
        directions.iter().zip(done).map(|(&(_, o), d)| d + s.ports[o].sink_packets).collect()
    };
    // When each direction last forwarded a frame: one direction may stall while the other runs.
    let (mut last, mut progress) = (done.to_vec(), vec![Instant::now(); directions.len()]);
    let outcome = loop {
        std::thread::sleep(POLL);
        // Every late interval that ended before nicsim answered is in its answer, and none can
        // be under way while it answers: the next poll's intervals start after `asked_ns`.
        let asked_ns = monotonic_ns();
        let s = sim.stats();
        let recent = &s.late_doorbells.recent;
        if s.late_doorbells.count - late_count > recent.len() as u64 {
            // More late looks than nicsim keeps since the last poll: the whole time between
            // the two polls counts as late.
            late.push((polled_ns, monotonic_ns()));
        }
        for &(a, b) in recent {
            let interval = (s.monotonic_start_ns + a, s.monotonic_start_ns + b);
            if late.last().is_none_or(|&l| interval > l) {
                late.push(interval);
            }
        }
        (late_count, polled_ns) = (s.late_doorbells.count, asked_ns);
        let now = forwarded(&s);
        if now.iter().all(|&n| n >= FRAMES) {
            break Ok(s);
        }
        for k in 0..now.len() {
            if now[k] != last[k] {
                progress[k] = Instant::now();
            }
        }
        last = now;
        let Some(k) = (0..last.len()).find(|&k| last[k] < FRAMES && progress[k].elapsed() > STALL) else {
            continue;
        };
        // The head stood still from when it last moved until the agent's last frame.
        let still = (seen[k].head_moved_ns.load(Ordering::Relaxed), seen[k].frame_ns.load(Ordering::Relaxed));
        if late.iter().any(|&(a, b)| a <= still.1 && b >= still.0) {
            break Err(last);
        }
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
        let near: Vec<(u64, u64)> =
            late.iter().copied().filter(|&(a, b)| b + 50_000_000 >= still.0 && a <= still.1 + 50_000_000).collect();
        let faults: Vec<String> = s.ports.iter().flat_map(|p| p.faults.iter().map(|f| format!("{f:?}"))).collect();
        let ports: Vec<String> = s.ports.iter().map(port_state).collect();
        panic!(
            "{percent} % of line rate: direction {k} stalled at {last:?} frames forwarded; {}; the head stood still \
             for {} µs with nicsim looking at the doorbells at least every {} µs meanwhile ({} late looks in all); \
             window {still:?} ns; late intervals within 50 ms of it: {near:?}; DMA faults: {faults:?}; {}",
            at.join("; "),
            still.1.saturating_sub(still.0) / 1000,
            s.late_doorbells.threshold_ns / 1000,
            s.late_doorbells.count,
            ports.join("; ")
        );
    };
    stop.store(true, Ordering::Relaxed);
    worker.join().unwrap();
    for &(input, _) in directions {
        sim.stop_traffic(input).unwrap();
    }
    let s = match outcome {
        Ok(s) => s,
        Err(so_far) => {
            eprintln!("{name}: nicsim looked at the doorbells late while the head stood still; starting again");
            return Err(so_far);
        }
    };
    // A direction that forwarded all its frames before a fresh start may have sent none since.
    for &(input, output) in directions {
        let received = s.ports[output].sink_packets > 0;
        assert_eq!(!s.ports[output].streams.is_empty(), received, "port {output}: frames received, and their streams");
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
    Ok(())
}

#[test]
fn tinynf_pattern_forwards_at_ten_percent_of_line_rate() {
    forward("tinynf-10", 10.0, &[(0, 1)]);
}

#[test]
fn tinynf_pattern_forwards_at_half_line_rate() {
    forward("tinynf-50", 50.0, &[(0, 1)]);
}

#[test]
fn tinynf_pattern_forwards_at_line_rate() {
    forward("tinynf-100", 100.0, &[(0, 1)]);
}

#[test]
fn tinynf_pattern_forwards_both_ways_at_ten_percent() {
    forward("tinynf-both-10", 10.0, &[(0, 1), (1, 0)]);
}

#[test]
fn tinynf_pattern_forwards_both_ways_at_half_line_rate() {
    forward("tinynf-both-50", 50.0, &[(0, 1), (1, 0)]);
}

#[test]
fn tinynf_pattern_forwards_both_ways_at_line_rate() {
    forward("tinynf-both-100", 100.0, &[(0, 1), (1, 0)]);
}
