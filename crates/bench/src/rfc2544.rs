//! RFC 2544 throughput (section 26.1) and latency at fractions of it (section 26.2), as
//! searches over trials. The search is separate from how a trial runs, so that it can be tested
//! without a driver.

use nicsim::wire::LatencySummary;
use serde::{Deserialize, Serialize};

/// The frame sizes of RFC 2544 section 9.1 for Ethernet, with FCS.
pub const FRAME_SIZES: [usize; 7] = [64, 128, 256, 512, 1024, 1280, 1518];

/// How the throughput search runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Search {
    /// Seconds of traffic per trial.
    pub trial_seconds: f64,
    /// The search stops when the highest passing and the lowest failing rate are closer than
    /// this fraction of the line rate.
    pub resolution: f64,
    /// The fraction of offered frames a trial may lose and still pass (RFC 2544: zero).
    pub loss_tolerance: f64,
}

/// What one trial measured: every count over both directions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// The rate asked for, frames per second over both directions.
    pub rate_pps: f64,
    /// Frames nicsim put on the wires.
    pub offered: u64,
    /// Frames that came back out of the driver to nicsim's sinks.
    pub received: u64,
    /// Frames the rate owed that nicsim did not generate because its engine fell behind.
    pub skipped: u64,
    /// Of the frames lost, those that found no free receive descriptor (the driver did not give
    /// the slots back in time) and those the full packet buffer missed.
    pub no_descriptor: u64,
    pub missed: u64,
}

impl Trial {
    /// Whether nicsim fell behind the rate asked for (it skipped over 1% of the frames owed),
    /// so that the trial tested a lower rate than the one asked for.
    pub fn nicsim_fell_behind(&self) -> bool {
        self.skipped * 100 > self.offered + self.skipped
    }

    pub fn lost(&self) -> u64 {
        self.offered.saturating_sub(self.received)
    }

    /// Whether the driver forwarded what it was offered, within `tolerance` (a fraction).
    pub fn passed(&self, tolerance: f64) -> bool {
        self.offered > 0 && self.lost() as f64 <= tolerance * self.offered as f64
    }
}

/// Trials one rate may take: one in which nicsim fell behind tested nicsim, not the driver,
/// and is run again.
pub const TRIES: usize = 3;

/// Runs `trial` until nicsim keeps up in one, at most [`TRIES`] times; returns every try, the
/// one that counts last (the last of all if nicsim fell behind in each).
pub fn until_nicsim_keeps_up(mut trial: impl FnMut() -> Result<Trial, String>) -> Result<Vec<Trial>, String> {
    let mut tries = Vec::with_capacity(TRIES);
    loop {
        let t = trial()?;
        tries.push(t);
        if !t.nicsim_fell_behind() || tries.len() == TRIES {
            return Ok(tries);
        }
    }
}

/// The outcome of a search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Found {
    /// The highest rate that passed, in frames per second over both directions (0 if none).
    pub rate_pps: f64,
    /// The line rate of both directions at this frame size.
    pub line_rate_pps: f64,
    /// Trials run, repeats included.
    pub trials: usize,
    /// Rates at which nicsim fell behind in every try, so that the trial could not tell
    /// whether the driver would have passed; they count as failed, and the figure is then a
    /// lower bound set by nicsim.
    pub nicsim_limited_at: Vec<f64>,
    /// Every trial, in the order run.
    pub log: Vec<Trial>,
}

impl Found {
    /// What set the figure: `line rate` if it passed; else the lowest rate that failed above
    /// the figure, `nicsim` if nicsim fell behind there in every try (the figure is then a lower
    /// bound), `driver` if frames were lost there.
    pub fn limited_by(&self) -> &'static str {
        if self.rate_pps >= self.line_rate_pps {
            return "line rate";
        }
        let lowest_failed =
            self.log.iter().map(|t| t.rate_pps).filter(|r| *r > self.rate_pps).fold(f64::INFINITY, f64::min);
        if self.nicsim_limited_at.contains(&lowest_failed) {
            "nicsim"
        } else {
            "driver"
        }
    }
}

/// Runs `trial(rate_pps)` as RFC 2544 section 26.1 does: the line rate first, then a binary
/// search between the highest rate that passed and the lowest that failed.
pub fn throughput(
    line_rate_pps: f64,
    search: &Search,
    mut trial: impl FnMut(f64) -> Result<Trial, String>,
) -> Result<Found, String> {
    let mut found = Found { rate_pps: 0.0, line_rate_pps, trials: 0, nicsim_limited_at: vec![], log: vec![] };
    let mut passes = |rate: f64, found: &mut Found| -> Result<bool, String> {
        let tries = until_nicsim_keeps_up(|| trial(rate))?;
        found.trials += tries.len();
        found.log.extend_from_slice(&tries);
        let last = tries[tries.len() - 1];
        if last.nicsim_fell_behind() {
            found.nicsim_limited_at.push(rate);
            return Ok(false);
        }
        Ok(last.passed(search.loss_tolerance))
    };
    if passes(line_rate_pps, &mut found)? {
        found.rate_pps = line_rate_pps;
        return Ok(found);
    }
    let (mut low, mut high) = (0.0, line_rate_pps);
    let step = (search.resolution * line_rate_pps).max(1.0);
    while high - low > step {
        let mid = (low + high) / 2.0;
        if passes(mid, &mut found)? {
            low = mid;
        } else {
            high = mid;
        }
    }
    found.rate_pps = low;
    Ok(found)
}

/// The loads of the latency measurement: 10% to 100% of the throughput in steps of 10%.
pub const LOAD_PERCENTS: [u32; 10] = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];

/// Latency at one load: nanoseconds from the generator to the sink in nicsim (on the wire,
/// through the driver, back on the wire), of the slower direction at each percentile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadLatency {
    /// The load, in percent of the throughput found.
    pub percent: u32,
    pub trial: Trial,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl LoadLatency {
    /// From each direction's summary, the slower one's at each percentile.
    pub fn of(percent: u32, trial: Trial, directions: &[LatencySummary]) -> LoadLatency {
        let worst = |f: fn(&LatencySummary) -> u64| directions.iter().map(f).max().unwrap_or(0);
        LoadLatency {
            percent,
            trial,
            p50_ns: worst(|d| d.p50),
            p99_ns: worst(|d| d.p99),
            p999_ns: worst(|d| d.p999),
            max_ns: worst(|d| d.max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: f64 = 29_761_904.0;

    fn search() -> Search {
        Search { trial_seconds: 0.1, resolution: 0.01, loss_tolerance: 0.0 }
    }

    /// A driver that forwards everything up to `capacity` frames per second and loses the rest.
    fn driver(capacity: f64) -> impl FnMut(f64) -> Result<Trial, String> {
        move |rate| {
            let offered = (rate * 0.1) as u64;
            let received = (capacity.min(rate) * 0.1) as u64;
            Ok(Trial { rate_pps: rate, offered, received, skipped: 0, no_descriptor: offered - received, missed: 0 })
        }
    }

    #[test]
    fn a_driver_at_line_rate_takes_one_trial() {
        let f = throughput(LINE, &search(), driver(LINE * 2.0)).unwrap();
        assert_eq!((f.rate_pps, f.trials, f.log.len(), f.limited_by()), (LINE, 1, 1, "line rate"));
    }

    #[test]
    fn the_search_ends_within_the_resolution_below_the_capacity() {
        for capacity in [1e6, 12.5e6, 29e6] {
            let f = throughput(LINE, &search(), driver(capacity)).unwrap();
            assert!(f.rate_pps <= capacity && capacity - f.rate_pps <= 0.01 * LINE, "{capacity}: {f:?}");
            // Line rate, then halving a range of 100 resolutions: 1 + 7 trials.
            assert_eq!(f.trials, 8, "{f:?}");
            assert_eq!(f.limited_by(), "driver");
        }
        let f = throughput(LINE, &search(), driver(0.0)).unwrap();
        assert_eq!(f.rate_pps, 0.0);
    }

    #[test]
    fn loss_within_the_tolerance_passes() {
        let lossy = |rate: f64| {
            Ok(Trial { rate_pps: rate, offered: 1000, received: 999, skipped: 0, no_descriptor: 1, missed: 0 })
        };
        assert_eq!(throughput(LINE, &search(), lossy).unwrap().rate_pps, 0.0, "zero loss: no rate passes");
        let tolerant = Search { loss_tolerance: 0.001, ..search() };
        assert_eq!(throughput(LINE, &tolerant, lossy).unwrap().rate_pps, LINE);
    }

    #[test]
    fn a_trial_nicsim_fell_behind_in_is_repeated_and_never_blamed_on_the_driver() {
        // nicsim falls behind in the first try of every rate above 20 Mpps, and in every try
        // above 25 Mpps; the driver would forward anything.
        let mut tries_at = std::collections::HashMap::<u64, usize>::new();
        let f = throughput(LINE, &search(), |rate| {
            let n = tries_at.entry(rate as u64).or_default();
            *n += 1;
            let behind = rate > 25e6 || (rate > 20e6 && *n == 1);
            Ok(Trial {
                rate_pps: rate,
                offered: 100,
                received: 100,
                skipped: if behind { 2 } else { 1 },
                no_descriptor: 0,
                missed: 0,
            })
        })
        .unwrap();
        assert!(f.rate_pps > 20e6 && f.rate_pps <= 25e6, "{f:?}");
        assert!(!f.nicsim_limited_at.is_empty() && f.nicsim_limited_at.iter().all(|r| *r > 25e6), "{f:?}");
        assert_eq!(f.nicsim_limited_at[0], LINE, "the line rate itself was nicsim's");
        assert_eq!(f.limited_by(), "nicsim");
        // A rate nicsim limited took all its tries; one it limited once, two.
        assert!(tries_at.iter().all(|(r, n)| *n
            == if *r as f64 > 25e6 {
                TRIES
            } else if *r as f64 > 20e6 {
                2
            } else {
                1
            }));
    }
}
