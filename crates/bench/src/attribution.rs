//! Which lost frames the host lost: nicsim records, per receive queue, the intervals in which
//! the driver left its tail alone while frames were dropped (`nicsim::port::TailStalls`), and
//! the times the host held its engine's core (doorbell intervals of 100 µs or more). Drops
//! inside a tail stall that a host stall covers are the host's; every other drop is the
//! driver's.

use crate::host::HostWindow;
use nicsim::control::Stats;
use nicsim::port::TailStalls;

/// How far a tail stall may reach past the host stall that covers it, at either end: frames
/// already in the rings when the host took the core, and the driver's first batch after it.
pub const MARGIN_NS: u64 = 100_000;

/// Frames dropped in tail stalls, and those of them in stalls a host window covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attribution {
    pub tail_stall_drops: u64,
    pub host_stall_drops: u64,
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
    for q in queues {
        a.tail_stall_drops += q.drops_inside;
        for s in &q.recent {
            let (start, end) = (monotonic_start_ns + s.start_ns, monotonic_start_ns + s.end_ns);
            if windows.iter().any(|w| w.start_ns <= start + MARGIN_NS && end <= w.end_ns + MARGIN_NS) {
                a.host_stall_drops += s.drops;
            }
        }
    }
    a
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
    fn drops_in_tail_stalls_covered_by_a_host_stall_are_the_hosts() {
        // Engine times; CLOCK_MONOTONIC = 1 s + engine time.
        const START: u64 = 1_000_000_000;
        let q = [queue(&[(10_000_000, 12_000_000, 500), (50_000_000, 50_400_000, 40)], 7)];
        let host = |start: u64, end: u64| HostWindow { cpu: 1, start_ns: START + start, end_ns: START + end };
        // The first stall inside a host window that ended 30 µs before the tail moved again.
        let a = attribute_queues(START, &q, &[host(9_500_000, 11_970_000)]);
        assert_eq!(a, Attribution { tail_stall_drops: 540, host_stall_drops: 500 });
        // A host window that covers only part of a stall does not excuse it.
        let a = attribute_queues(START, &q, &[host(10_500_000, 12_000_000), host(49_000_000, 50_100_000)]);
        assert_eq!(a.host_stall_drops, 0);
        let a = attribute_queues(START, &q, &[host(9_990_000, 12_000_000), host(49_000_000, 50_500_000)]);
        assert_eq!(a.host_stall_drops, 540);
        assert_eq!(attribute_queues(START, &q, &[]).host_stall_drops, 0);
    }
}
