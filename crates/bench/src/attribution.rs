//! Which lost frames the host lost: nicsim records, per receive queue, the intervals in which
//! the driver left its tail alone while frames were dropped (`nicsim::port::TailStalls`), and
//! the times its engine's core was held; the kernel's trace events give those of the driver's
//! core ([`crate::kernel_trace`]). Drops inside a tail stall that a host stall covers are the
//! host's; every other drop is the driver's.

use crate::host::HostWindow;
use crate::rfc2544::Percentiles;
use nicsim::control::{PortStats, Stats};
use nicsim::port::TailStalls;
pub use nicsim::wire::SLOW_FRAME_NS;

/// How far a tail stall may reach past the host stall that covers it, at either end: frames
/// already in the rings when the host took the core, and the driver's first batch after it.
pub const MARGIN_NS: u64 = 100_000;

/// Frames dropped in tail stalls, and those of them in stalls a host window covers, with
/// what held the core in those windows (the one that covered the most drops first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attribution {
    pub tail_stall_drops: u64,
    pub host_stall_drops: u64,
    pub causes: Vec<String>,
}

/// Attributes the drops in `stats` (engine times, mapped by its `monotonic_start_ns`) to the
/// host `windows` (CLOCK_MONOTONIC).
pub fn attribute(stats: &Stats, windows: &[HostWindow]) -> Attribution {
    attribute_queues(stats.monotonic_start_ns, stats.ports.iter().flat_map(|p| &p.rx_tail_stalls), windows)
}

/// [`attribute`] for the queues' records, whose engine time 0 is CLOCK_MONOTONIC `monotonic_start_ns`.
pub fn attribute_queues<'a>(
    monotonic_start_ns: u64,
    queues: impl IntoIterator<Item = &'a TailStalls>,
    windows: &[HostWindow],
) -> Attribution {
    let mut a = Attribution::default();
    let mut by_cause: Vec<(String, u64)> = Vec::new();
    for q in queues {
        a.tail_stall_drops += q.drops_inside;
        for s in &q.recent {
            let (start, end) = (monotonic_start_ns + s.start_ns, monotonic_start_ns + s.end_ns);
            let Some(w) = windows.iter().find(|w| w.start_ns <= start + MARGIN_NS && end <= w.end_ns + MARGIN_NS)
            else {
                continue;
            };
            a.host_stall_drops += s.drops;
            match by_cause.iter_mut().find(|(c, _)| *c == w.cause) {
                Some((_, n)) => *n += s.drops,
                None => by_cause.push((w.cause.clone(), s.drops)),
            }
        }
    }
    by_cause.sort_by_key(|c| std::cmp::Reverse(c.1));
    a.causes = by_cause.into_iter().map(|(c, n)| format!("{c}: {n} frames")).collect();
    a
}

/// The latency percentiles of one direction without the frames that were in flight during a
/// host stall: the slow frames nicsim kept (`PortStats::slow_frames`, every frame of
/// [`SLOW_FRAME_NS`] or more) whose time from generator to sink overlaps a window are taken
/// out of every frame's. A percentile that falls below the slow frames is the lesser of every
/// frame's and [`SLOW_FRAME_NS`]. None if nicsim could not keep every slow frame.
pub fn latency_outside(port: &PortStats, monotonic_start_ns: u64, windows: &[HostWindow]) -> Option<Percentiles> {
    if port.slow_frames_not_kept > 0 {
        return None;
    }
    let all = &port.latency_ns;
    let in_stall = |&(end, latency): &(u64, u64)| {
        let (end, start) = (monotonic_start_ns + end, monotonic_start_ns + end.saturating_sub(latency));
        windows.iter().any(|w| w.start_ns < end && start < w.end_ns)
    };
    let mut kept: Vec<u64> = port.slow_frames.iter().filter(|f| !in_stall(f)).map(|f| f.1).collect();
    kept.sort_unstable_by(|a, b| b.cmp(a));
    let n = all.samples.saturating_sub((port.slow_frames.len() - kept.len()) as u64);
    // The value with `above` samples over it, counting from the largest.
    let at = |q: f64, every: u64| -> u64 {
        let rank = ((q * n as f64).ceil() as u64).max(1);
        let above = n.saturating_sub(rank) as usize;
        kept.get(above).copied().unwrap_or(every.min(SLOW_FRAME_NS))
    };
    Some(Percentiles {
        p50_ns: at(0.5, all.p50),
        p99_ns: at(0.99, all.p99),
        p999_ns: at(0.999, all.p999),
        max_ns: kept.first().copied().unwrap_or(all.max.min(SLOW_FRAME_NS)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nicsim::port::TailStall;

    fn queue(stalls: &[(u64, u64, u64)], outside: u64) -> TailStalls {
        let recent: Vec<TailStall> = stalls
            .iter()
            .map(|&(start_ns, end_ns, drops)| TailStall { start_ns, end_ns, drops, open: false })
            .collect();
        TailStalls {
            queue: 0,
            count: recent.len() as u64,
            drops_inside: recent.iter().map(|s| s.drops).sum(),
            drops_outside: outside,
            recent,
        }
    }

    #[test]
    fn frames_in_flight_during_a_host_stall_leave_the_percentiles() {
        let mut port: PortStats = serde_json::from_value(serde_json::json!({
            "port": 0, "generator_active": false, "generated": 0, "generated_bytes": 0,
            "generator_skipped": 0, "sink_packets": 0, "sink_bytes": 0, "sink_foreign": 0,
            "streams": [], "latency_ns": nicsim::wire::LatencySummary::default(),
            "device": nicsim::port::DeviceCounters::default(), "drops": nicsim::port::Drops::default(),
            "dma_faults": 0, "faults": [], "lint_warnings": 0, "resets": 0, "pcap_written": null,
            "rx_queues_enabled": 1, "tx_queues_enabled": 1, "tx_paused": false,
            "flow_control": nicsim::flow_control::FlowStats::default(),
            "in_flight": nicsim::port::InFlight::default(), "removed": false, "link_up": true,
            "injected": nicsim::chaos::Injected::default(), "fault_log": []
        }))
        .unwrap();
        // 10 000 frames: 9 970 fast ones and 30 slow ones, ten of which reached the sink just
        // after a host stall that ended at engine time 5.05 ms (monotonic 1 s + that).
        port.latency_ns = nicsim::wire::LatencySummary {
            samples: 10_000,
            min: 900,
            p50: 1_000,
            p90: 2_000,
            p99: 3_000,
            p999: 200_000,
            max: 900_000,
            mean: 1.0,
        };
        port.slow_frames = (0..10u64).map(|i| (5_100_000, 900_000 - i * 10_000)).collect();
        port.slow_frames.extend((0..20u64).map(|i| (9_000_000 + i * 1000, 200_000 - i * 5_000)));
        let stall = HostWindow { cpu: 1, start_ns: 1_004_500_000, end_ns: 1_005_050_000, cause: "x".into() };
        let p = latency_outside(&port, 1_000_000_000, &[stall]).unwrap();
        // 9 990 frames left: the p99.9 ranks 9 981st, under nine slow ones that are left.
        assert_eq!(p, Percentiles { p50_ns: 1_000, p99_ns: 3_000, p999_ns: 155_000, max_ns: 200_000 });
        let p = latency_outside(&port, 1_000_000_000, &[]).unwrap();
        assert_eq!((p.p999_ns, p.max_ns), (200_000, 900_000), "nothing in a stall: every frame's");
        port.slow_frames_not_kept = 1;
        assert_eq!(latency_outside(&port, 1_000_000_000, &[]), None);
    }

    #[test]
    fn drops_in_tail_stalls_covered_by_a_host_stall_are_the_hosts() {
        // Engine times; CLOCK_MONOTONIC = 1 s + engine time.
        const START: u64 = 1_000_000_000;
        let q = [queue(&[(10_000_000, 12_000_000, 500), (50_000_000, 50_400_000, 40)], 7)];
        let host = |start: u64, end: u64| HostWindow {
            cpu: 1,
            start_ns: START + start,
            end_ns: START + end,
            cause: "softirq RCU".into(),
        };
        // The first stall inside a host window that ended 30 µs before the tail moved again.
        let a = attribute_queues(START, &q, &[host(9_500_000, 11_970_000)]);
        assert_eq!(
            a,
            Attribution {
                tail_stall_drops: 540,
                host_stall_drops: 500,
                causes: vec!["softirq RCU: 500 frames".into()]
            }
        );
        // A host window that covers only part of a stall does not excuse it.
        let a = attribute_queues(START, &q, &[host(10_500_000, 12_000_000), host(49_000_000, 50_100_000)]);
        assert_eq!(a.host_stall_drops, 0);
        let a = attribute_queues(START, &q, &[host(9_990_000, 12_000_000), host(49_000_000, 50_500_000)]);
        assert_eq!(a.host_stall_drops, 540);
        assert_eq!(attribute_queues(START, &q, &[]).host_stall_drops, 0);
    }
}
