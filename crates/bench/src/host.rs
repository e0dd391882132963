//! The host's own stalls on the cores the bench uses, measured as `cyclictest` does: one
//! thread per core, pinned, reads the monotonic clock in a tight loop and records every gap
//! between two reads longer than [`RECORDED_NS`]. On a dedicated core the gaps are below a
//! microsecond; a gap of milliseconds is time the host (hypervisor or kernel) took the core
//! away, in which a polling driver forwards nothing and its rings fill. The bench measures
//! this before and after the drivers and prints it beside their figures (docs/results.md).

use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// Gaps shorter than this are the loop itself and the clock's cost, not the host.
pub const RECORDED_NS: u64 = 20_000;
/// The thresholds the report counts gaps over: 100 µs, 1 ms and 10 ms.
pub const THRESHOLDS_NS: [u64; 3] = [100_000, 1_000_000, 10_000_000];
/// At most this many gaps are kept per core (a pathological host keeps the longest).
const MAX_GAPS: usize = 100_000;

/// What one core's recorder saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoreStalls {
    pub cpu: usize,
    /// How long the recorder ran, in seconds.
    pub seconds: f64,
    /// The longest gap, in microseconds.
    pub longest_us: f64,
    /// Gaps per second over 100 µs, 1 ms and 10 ms.
    pub per_second_over: [f64; 3],
    /// Time lost in gaps over 100 µs, as a fraction of the run.
    pub lost_fraction: f64,
}

impl CoreStalls {
    /// The summary of `gaps_ns` (each gap's length) seen on `cpu` over `seconds`.
    pub fn of(cpu: usize, seconds: f64, gaps_ns: &[u64]) -> CoreStalls {
        let over = |t: u64| gaps_ns.iter().filter(|&&g| g > t).count() as f64 / seconds.max(1e-9);
        let lost: u64 = gaps_ns.iter().filter(|&&g| g > THRESHOLDS_NS[0]).sum();
        CoreStalls {
            cpu,
            seconds,
            longest_us: gaps_ns.iter().max().copied().unwrap_or(0) as f64 / 1e3,
            per_second_over: THRESHOLDS_NS.map(over),
            lost_fraction: lost as f64 / 1e9 / seconds.max(1e-9),
        }
    }

    /// One line for reports: `CPU 1: longest 3.2 ms; per second over 100 µs 1.0, over 1 ms 0.5, over 10 ms 0.0`.
    pub fn line(&self) -> String {
        let [a, b, c] = self.per_second_over;
        format!(
            "CPU {}: longest {}; per second over 100 µs {a:.2}, over 1 ms {b:.2}, over 10 ms {c:.2}; {:.3} % of the time lost",
            self.cpu,
            if self.longest_us >= 1000.0 {
                format!("{:.1} ms", self.longest_us / 1e3)
            } else {
                format!("{:.0} µs", self.longest_us)
            },
            self.lost_fraction * 100.0
        )
    }
}

/// The gaps longer than [`RECORDED_NS`] between successive reads of `now` while it runs for
/// `run`: the recorder's loop, apart from the thread and the clock, so that it can be tested.
/// A gap that runs past the end of the window counts up to the end: the gaps then lie inside
/// the window, and the time they lose is never more than `run`.
fn record_gaps(run: Duration, mut now: impl FnMut() -> Instant) -> Vec<u64> {
    let start = now();
    let end = start + run;
    let mut last = start;
    let mut gaps = Vec::new();
    loop {
        let t = now();
        let gap = t.min(end).saturating_duration_since(last).as_nanos() as u64;
        if gap > RECORDED_NS {
            if gaps.len() == MAX_GAPS {
                // Keep the longest: drop the shortest kept so far if this one is longer.
                if let Some((i, &shortest)) = gaps.iter().enumerate().min_by_key(|&(_, g)| *g) {
                    if gap > shortest {
                        gaps[i] = gap;
                    }
                }
            } else {
                gaps.push(gap);
            }
        }
        last = t;
        if t.duration_since(start) >= run {
            return gaps;
        }
    }
}

/// Runs a recorder on each of `cpus` at once for `seconds` and returns what each saw. Each
/// thread is pinned to its core and busy for the whole time: run it when nothing else is
/// measured.
pub fn measure(cpus: &[usize], seconds: f64) -> Result<Vec<CoreStalls>, String> {
    let run = Duration::from_secs_f64(seconds);
    let threads: Vec<_> = cpus
        .iter()
        .map(|&cpu| {
            std::thread::spawn(move || -> Result<CoreStalls, String> {
                platform::sched::pin_current_thread(cpu)
                    .map_err(|e| format!("pinning a recorder to CPU {cpu}: {e}"))?;
                let gaps = record_gaps(run, Instant::now);
                Ok(CoreStalls::of(cpu, seconds, &gaps))
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().map_err(|_| "a host-stall recorder panicked".to_string())?).collect()
}

/// A time the host (the kernel, another task, or the hypervisor) held a core, in
/// CLOCK_MONOTONIC ns, and what held it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostWindow {
    pub cpu: usize,
    pub start_ns: u64,
    pub end_ns: u64,
    pub cause: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_are_counted_per_threshold_and_second() {
        let gaps = [30_000, 150_000, 2_000_000, 20_000_000];
        let s = CoreStalls::of(1, 2.0, &gaps);
        assert_eq!(s.longest_us, 20_000.0);
        assert_eq!(s.per_second_over, [1.5, 1.0, 0.5]);
        // 0.15 + 2 + 20 ms lost in 2 s.
        assert!((s.lost_fraction - 0.011_075).abs() < 1e-12, "{s:?}");
        assert_eq!(
            s.line(),
            "CPU 1: longest 20.0 ms; per second over 100 µs 1.50, over 1 ms 1.00, over 10 ms 0.50; 1.107 % of the time lost"
        );
        assert_eq!(CoreStalls::of(0, 1.0, &[]).longest_us, 0.0);
    }

    #[test]
    fn the_recorder_sees_every_gap_of_a_scripted_clock_and_ends_on_time() {
        // A clock that advances 1 µs per read, with a 5 ms and a 50 µs jump among them.
        let origin = Instant::now();
        let mut t = 0u64;
        let mut reads = 0u64;
        let gaps = record_gaps(Duration::from_millis(10), || {
            reads += 1;
            t += match reads {
                100 => 5_000_000,
                200 => 50_000,
                _ => 1_000,
            };
            origin + Duration::from_nanos(t)
        });
        assert_eq!(gaps, [5_000_000, 50_000]);
        assert!((10_000_000..10_100_000).contains(&t), "stopped after 10 ms of clock: {t}");
    }

    #[test]
    fn a_stall_across_the_end_of_the_window_counts_up_to_it() {
        // 10 ms of reads 1 µs apart, then the core is taken away for 75 ms of a 50 ms window.
        let origin = Instant::now();
        let mut t = 0u64;
        let gaps = record_gaps(Duration::from_millis(50), || {
            t += if t == 10_000_000 { 75_000_000 } else { 1_000 };
            origin + Duration::from_nanos(t)
        });
        // The first read is at 1 µs, so the window ends at 50.001 ms.
        assert_eq!(gaps, [40_001_000]);
        let s = CoreStalls::of(0, 0.05, &gaps);
        assert!((s.lost_fraction - 0.800_02).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn a_real_recorder_runs_for_its_time_on_its_core() {
        let s = measure(&[0], 0.05).unwrap();
        assert_eq!((s.len(), s[0].cpu, s[0].seconds), (1, 0, 0.05));
        assert!(s[0].lost_fraction <= 1.0, "{s:?}");
    }
}
