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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Of the frames lost, those nicsim dropped while a receive tail stood still for longer
    /// than a stall (`nicsim::port::TAIL_STALL_NS`), and those among them whose stall a host
    /// stall covered (`crate::attribution`): lost to the host, not the driver.
    #[serde(default)]
    pub tail_stall_drops: u64,
    #[serde(default)]
    pub host_stall_drops: u64,
    /// Host stalls seen during the trial, and the longest (µs).
    #[serde(default)]
    pub host_stalls: u32,
    #[serde(default)]
    pub longest_host_stall_us: f64,
    /// What held the core in the host stalls that covered tail stalls with drops (the longest
    /// first), e.g. `softirq RCU` or `nicsim's core held`.
    #[serde(default)]
    pub host_stall_causes: Vec<String>,
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

    /// Whether the trial failed `tolerance` only because of the host: without the frames lost
    /// in tail stalls that host stalls covered, it would have passed.
    pub fn failed_by_host(&self, tolerance: f64) -> bool {
        !self.passed(tolerance)
            && self.host_stall_drops > 0
            && self.lost().saturating_sub(self.host_stall_drops) as f64 <= tolerance * self.offered as f64
    }

    /// Whether the trial failed `tolerance` only in receive-tail stalls: without the frames
    /// dropped while the driver left its receive tail alone for a stall's length, it would have
    /// passed. The driver kept up at this rate whenever it ran; whether the host or the driver
    /// stopped it, only a host stall covering the drops can say ([`Self::failed_by_host`]).
    pub fn failed_in_tail_stalls(&self, tolerance: f64) -> bool {
        !self.passed(tolerance)
            && self.lost().saturating_sub(self.tail_stall_drops) as f64 <= tolerance * self.offered as f64
    }

    /// Why a goal set this trial aside, in words.
    pub fn set_aside_reason(&self) -> String {
        format!(
            "{} of {} frames lost, all but {} in receive-tail stalls that host stalls covered ({} host stalls, the longest {:.0} µs; {})",
            self.lost(),
            self.offered,
            self.lost() - self.host_stall_drops.min(self.lost()),
            self.host_stalls,
            self.longest_host_stall_us,
            self.host_stall_causes.join("; ")
        )
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
        let behind = t.nicsim_fell_behind();
        tries.push(t);
        if !behind || tries.len() == TRIES {
            return Ok(tries);
        }
    }
}

/// A trial a goal set aside: the host, not the driver, lost its frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetAside {
    pub rate_pps: f64,
    pub reason: String,
}

/// The outcome of a search for one goal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Found {
    /// The highest rate that passed, in frames per second over both directions (0 if none).
    pub rate_pps: f64,
    /// The line rate of both directions at this frame size.
    pub line_rate_pps: f64,
    /// Trials run, repeats included (of every goal searched together).
    pub trials: usize,
    /// Rates at which nicsim fell behind in every try, so that the trial could not tell
    /// whether the driver would have passed; they count as failed, and the figure is then a
    /// lower bound set by nicsim.
    pub nicsim_limited_at: Vec<f64>,
    /// Trials this goal set aside as host stalls, and rates at which it set aside every try
    /// (they count as failed, and the figure is then a lower bound set by the host).
    #[serde(default)]
    pub set_aside: Vec<SetAside>,
    #[serde(default)]
    pub host_limited_at: Vec<f64>,
    /// Every trial, in the order run.
    pub log: Vec<Trial>,
    /// The fraction of frames a trial could lose and pass.
    #[serde(default)]
    pub loss_tolerance: f64,
}

impl Found {
    fn new(line_rate_pps: f64, loss_tolerance: f64) -> Found {
        Found {
            rate_pps: 0.0,
            line_rate_pps,
            trials: 0,
            nicsim_limited_at: vec![],
            set_aside: vec![],
            host_limited_at: vec![],
            log: vec![],
            loss_tolerance,
        }
    }

    /// What set the figure: `line rate` if it passed; else the lowest rate that failed above
    /// the figure, `nicsim` if nicsim fell behind there in every try (the figure is then a lower
    /// bound), `host` if the host lost the frames of every try there, [`UNSEEN_STALL`] if the
    /// driver's receive tail stood still in every try there and nothing seen explains it,
    /// `driver` if the driver lost frames while it ran.
    pub fn limited_by(&self) -> &'static str {
        if self.rate_pps >= self.line_rate_pps {
            return "line rate";
        }
        let lowest_failed = lowest_failed_above(&self.log, self.rate_pps);
        if self.nicsim_limited_at.contains(&lowest_failed) {
            "nicsim"
        } else if self.host_limited_at.contains(&lowest_failed) {
            "host"
        } else {
            driver_or_unseen_stall(&self.log, self.rate_pps, self.loss_tolerance)
        }
    }
}

/// What [`Found::limited_by`] calls a figure set by drops that all fell while the driver left
/// its receive tail alone, in stalls that no trace event and no stall of nicsim's core covers:
/// the driver paused, or the hypervisor took its core (which leaves no trace in the guest).
/// Either way the figure is not what the driver forwards while it runs.
pub const UNSEEN_STALL: &str = "unseen stall";

/// The lowest rate in `log` above `rate_pps` (a figure read back in Mpps may have lost its
/// last bits, and rates tried lie a resolution apart).
fn lowest_failed_above(log: &[Trial], rate_pps: f64) -> f64 {
    log.iter().map(|t| t.rate_pps).filter(|r| *r > rate_pps * (1.0 + 1e-9)).fold(f64::INFINITY, f64::min)
}

/// For a figure `rate_pps` that the driver, not nicsim or the host, set at `tolerance`:
/// [`UNSEEN_STALL`] if every try at the lowest rate that failed above it, but those in which
/// nicsim fell behind, lost too much only in receive-tail stalls; `driver` otherwise.
pub fn driver_or_unseen_stall(log: &[Trial], rate_pps: f64, tolerance: f64) -> &'static str {
    let lowest_failed = lowest_failed_above(log, rate_pps);
    let mut tries = log.iter().filter(|t| t.rate_pps == lowest_failed && !t.nicsim_fell_behind()).peekable();
    if tries.peek().is_some() && tries.all(|t| t.failed_in_tail_stalls(tolerance)) {
        UNSEEN_STALL
    } else {
        "driver"
    }
}

/// What a search looks for: the highest rate that loses at most `loss_tolerance` of the
/// frames offered, and whether trials the host failed are set aside and run again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Goal {
    pub loss_tolerance: f64,
    pub sets_aside_host_stalls: bool,
}

/// FD.io CSIT's two goals (its MLRsearch): the non-drop rate, no frame lost, and the partial
/// drop rate, at most 0.5 % lost; both with the trials the host failed set aside.
pub const NDR: Goal = Goal { loss_tolerance: 0.0, sets_aside_host_stalls: true };
pub const PDR: Goal = Goal { loss_tolerance: 0.005, sets_aside_host_stalls: true };

/// Tries one rate may take in all: nicsim's repeats and the set-aside ones together.
const TRIES_PER_RATE: usize = 2 * TRIES;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Verdict {
    Pass,
    Fail,
    SetAside,
}

fn verdict(goal: &Goal, t: &Trial) -> Verdict {
    if t.passed(goal.loss_tolerance) {
        Verdict::Pass
    } else if goal.sets_aside_host_stalls && t.failed_by_host(goal.loss_tolerance) {
        Verdict::SetAside
    } else {
        Verdict::Fail
    }
}

/// Runs `trial(rate_pps)` as RFC 2544 section 26.1 does: the line rate first, then a binary
/// search between the highest rate that passed and the lowest that failed.
pub fn throughput(
    line_rate_pps: f64,
    search: &Search,
    trial: impl FnMut(f64) -> Result<Trial, String>,
) -> Result<Found, String> {
    let goal = Goal { loss_tolerance: search.loss_tolerance, sets_aside_host_stalls: false };
    let mut found = searches(line_rate_pps, search, &[goal], trial)?;
    Ok(found.remove(0))
}

/// [`throughput`] for several goals at once, as MLRsearch does: every trial counts for each
/// goal whose interval it falls in, and the next rate halves the widest interval left. A
/// trial in which nicsim fell behind is run again for all; one a goal sets aside is run again
/// for it (up to [`TRIES_PER_RATE`] tries per rate); a goal that keeps no verdict at a rate
/// counts it as failed there, limited by nicsim or the host.
pub fn searches(
    line_rate_pps: f64,
    search: &Search,
    goals: &[Goal],
    mut trial: impl FnMut(f64) -> Result<Trial, String>,
) -> Result<Vec<Found>, String> {
    let mut found: Vec<Found> = goals.iter().map(|g| Found::new(line_rate_pps, g.loss_tolerance)).collect();
    // Each goal's interval: the highest rate passed, and the lowest failed (above the line
    // rate until the line rate was tried).
    let mut bounds: Vec<(f64, f64)> = goals.iter().map(|_| (0.0, f64::INFINITY)).collect();
    let step = (search.resolution * line_rate_pps).max(1.0);
    let mut log = Vec::new();
    let mut rate = line_rate_pps;
    loop {
        let open: Vec<usize> = (0..goals.len()).filter(|&g| bounds[g].0 < rate && rate < bounds[g].1).collect();
        let mut verdicts: Vec<Option<Verdict>> = goals.iter().map(|_| None).collect();
        let (mut behind, mut nicsim_every_try) = (0, true);
        for _ in 0..TRIES_PER_RATE {
            let t = trial(rate)?;
            log.push(t.clone());
            if t.nicsim_fell_behind() {
                behind += 1;
                if behind == TRIES {
                    break;
                }
                continue;
            }
            nicsim_every_try = false;
            for &g in &open {
                if verdicts[g].is_some() {
                    continue;
                }
                match verdict(&goals[g], &t) {
                    Verdict::SetAside => {
                        found[g].set_aside.push(SetAside { rate_pps: rate, reason: t.set_aside_reason() })
                    }
                    v => verdicts[g] = Some(v),
                }
            }
            if open.iter().all(|&g| verdicts[g].is_some()) {
                break;
            }
        }
        for &g in &open {
            let passed = match verdicts[g] {
                Some(v) => v == Verdict::Pass,
                None if nicsim_every_try => {
                    found[g].nicsim_limited_at.push(rate);
                    false
                }
                None => {
                    found[g].host_limited_at.push(rate);
                    false
                }
            };
            if passed {
                bounds[g].0 = rate;
            } else {
                bounds[g].1 = rate;
            }
        }
        // The widest interval left: an untried line rate first, then halving.
        let widest = (0..goals.len())
            .map(|g| (g, bounds[g].1.min(line_rate_pps * 2.0) - bounds[g].0))
            .filter(|&(g, w)| w > step && bounds[g].0 < line_rate_pps)
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let Some((g, _)) = widest else { break };
        rate = (bounds[g].0 + bounds[g].1) / 2.0;
    }
    for (f, (low, _)) in found.iter_mut().zip(bounds) {
        f.rate_pps = low;
        f.trials = log.len();
        f.log = log.clone();
    }
    Ok(found)
}

/// The loads of the latency measurement: 10% to 100% of the throughput in steps of 10%.
pub const LOAD_PERCENTS: [u32; 10] = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];

/// Latency at one load: nanoseconds from the generator to the sink in nicsim (on the wire,
/// through the driver, back on the wire), of the slower direction at each percentile; of all
/// frames, and of those not in flight during a host stall.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadLatency {
    /// The load, in percent of the throughput found.
    pub percent: u32,
    pub trial: Trial,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    #[serde(default)]
    pub outside_host_stalls: Option<Percentiles>,
}

/// The percentiles a latency figure gives, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl Percentiles {
    /// The slower direction's at each percentile.
    pub fn worst(directions: &[Percentiles]) -> Percentiles {
        let worst = |f: fn(&Percentiles) -> u64| directions.iter().map(f).max().unwrap_or(0);
        Percentiles {
            p50_ns: worst(|d| d.p50_ns),
            p99_ns: worst(|d| d.p99_ns),
            p999_ns: worst(|d| d.p999_ns),
            max_ns: worst(|d| d.max_ns),
        }
    }

    pub fn of(s: &LatencySummary) -> Percentiles {
        Percentiles { p50_ns: s.p50, p99_ns: s.p99, p999_ns: s.p999, max_ns: s.max }
    }
}

impl LoadLatency {
    /// From each direction's summary of all frames, and the slower direction's percentiles
    /// outside host stalls (if known).
    pub fn of(percent: u32, trial: Trial, all: &[LatencySummary], outside: Option<Percentiles>) -> LoadLatency {
        let p = Percentiles::worst(&all.iter().map(Percentiles::of).collect::<Vec<_>>());
        LoadLatency {
            percent,
            trial,
            p50_ns: p.p50_ns,
            p99_ns: p.p99_ns,
            p999_ns: p.p999_ns,
            max_ns: p.max_ns,
            outside_host_stalls: outside,
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
            Ok(Trial { rate_pps: rate, offered, received, no_descriptor: offered - received, ..Trial::default() })
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
            Ok(Trial { rate_pps: rate, offered: 1000, received: 999, no_descriptor: 1, ..Trial::default() })
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
                ..Trial::default()
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

    const GOALS: [Goal; 3] = [Goal { loss_tolerance: 0.0, sets_aside_host_stalls: false }, NDR, PDR];

    /// A driver that forwards up to `capacity` and loses `leak` (a fraction) above `leaky`,
    /// on a host whose stalls drop `host_drops` frames in the trials `stalled` picks (by rate
    /// and try at that rate).
    fn trial_on_host(
        capacity: f64,
        leak: (f64, f64),
        host_drops: u64,
        mut stalled: impl FnMut(f64, usize) -> bool,
    ) -> impl FnMut(f64) -> Result<Trial, String> {
        let mut tries = std::collections::HashMap::<u64, usize>::new();
        move |rate| {
            let n = tries.entry(rate as u64).or_default();
            *n += 1;
            let offered = (rate * 0.1) as u64;
            let mut lost = ((rate - capacity).max(0.0) * 0.1) as u64;
            if rate > leak.0 {
                lost += (offered as f64 * leak.1) as u64;
            }
            let host = if stalled(rate, *n) { host_drops } else { 0 };
            Ok(Trial {
                rate_pps: rate,
                offered,
                received: offered - lost - host,
                no_descriptor: lost + host,
                tail_stall_drops: host,
                host_stall_drops: host,
                host_stalls: u32::from(host > 0),
                longest_host_stall_us: if host > 0 { 2000.0 } else { 0.0 },
                ..Trial::default()
            })
        }
    }

    #[test]
    fn one_search_finds_every_goal_and_a_host_stall_fails_only_the_count_with_nothing_set_aside() {
        // A driver good for 20 Mpps; the host drops 3 000 frames in the first try at every rate.
        let f = searches(LINE, &search(), &GOALS, trial_on_host(20e6, (LINE, 0.0), 3000, |_, n| n == 1)).unwrap();
        let (raw, ndr, pdr) = (&f[0], &f[1], &f[2]);
        assert_eq!(raw.rate_pps, 0.0, "every first try lost frames: {raw:?}");
        assert!(ndr.rate_pps <= 20e6 && 20e6 - ndr.rate_pps <= 0.01 * LINE, "{ndr:?}");
        assert!(pdr.rate_pps >= ndr.rate_pps);
        assert_eq!(ndr.limited_by(), "driver");
        assert!(!ndr.set_aside.is_empty() && raw.set_aside.is_empty());
        assert!(ndr.set_aside[0].reason.contains("3000 of"), "{:?}", ndr.set_aside[0]);
        // The goals shared their trials: one log, and fewer trials than three searches.
        assert_eq!(raw.log, ndr.log);
        assert!(raw.trials < 3 * 16, "{}", raw.trials);
    }

    #[test]
    fn a_rate_the_host_fails_in_every_try_limits_the_figure_as_the_hosts() {
        let f = searches(LINE, &search(), &GOALS, trial_on_host(LINE, (LINE, 0.0), 3000, |r, _| r > 10e6)).unwrap();
        let ndr = &f[1];
        assert!(ndr.rate_pps <= 10e6 && 10e6 - ndr.rate_pps <= 0.01 * LINE, "{ndr:?}");
        assert_eq!(ndr.limited_by(), "host");
        assert!(ndr.host_limited_at.iter().all(|r| *r > 10e6) && !ndr.host_limited_at.is_empty());
        // Every set-aside rate took all its tries.
        assert_eq!(ndr.log.iter().filter(|t| t.rate_pps == LINE).count(), TRIES_PER_RATE);
    }

    /// A driver that forwards everything but whose receive tail stands still, with nothing on
    /// the host to explain it, for `stalled` frames of every trial above 10 Mpps, and that
    /// loses `leak` frames of its own there as well.
    fn unseen_stalls(stalled: u64, leak: u64) -> impl FnMut(f64) -> Result<Trial, String> {
        move |rate| {
            let offered = (rate * 0.1) as u64;
            let (stalled, leak) = if rate > 10e6 { (stalled, leak) } else { (0, 0) };
            Ok(Trial {
                rate_pps: rate,
                offered,
                received: offered - stalled - leak,
                no_descriptor: stalled + leak,
                tail_stall_drops: stalled,
                ..Trial::default()
            })
        }
    }

    #[test]
    fn drops_only_in_tail_stalls_that_nothing_explains_limit_a_figure_as_an_unseen_stall() {
        let f = searches(LINE, &search(), &GOALS, unseen_stalls(300, 0)).unwrap();
        for g in &f[..2] {
            assert!(g.rate_pps <= 10e6 && 10e6 - g.rate_pps <= 0.01 * LINE, "{g:?}");
            assert_eq!(g.limited_by(), UNSEEN_STALL, "{g:?}");
            assert!(g.set_aside.is_empty(), "no host stall covered them: nothing is set aside");
        }
        // 300 frames are within the PDR's 0.5 %.
        assert_eq!(f[2].limited_by(), "line rate");
        // One frame more, lost while the driver ran, makes the figure the driver's again.
        let f = searches(LINE, &search(), &GOALS, unseen_stalls(300, 1)).unwrap();
        assert_eq!((f[0].limited_by(), f[1].limited_by()), ("driver", "driver"));
        // So does a PDR failed by what the driver lost outside the stalls.
        let f = searches(LINE, &search(), &GOALS, unseen_stalls(300, 100_000)).unwrap();
        assert_eq!(f[2].limited_by(), "driver");
        let f = searches(LINE, &search(), &GOALS, unseen_stalls(100_000, 300)).unwrap();
        assert_eq!(f[2].limited_by(), UNSEEN_STALL);
    }

    #[test]
    fn the_pdr_passes_a_small_loss_that_the_ndr_does_not() {
        // 0.3 % lost above 15 Mpps, the rest forwarded up to 25 Mpps; no host stall.
        let f = searches(LINE, &search(), &GOALS, trial_on_host(25e6, (15e6, 0.003), 0, |_, _| false)).unwrap();
        let (ndr, pdr) = (&f[1], &f[2]);
        assert!(ndr.rate_pps <= 15e6 && 15e6 - ndr.rate_pps <= 0.01 * LINE, "{ndr:?}");
        // At 25 Mpps and a little above, 0.3 % + the overload is still within 0.5 %.
        assert!(pdr.rate_pps >= 25e6 - 0.01 * LINE && pdr.rate_pps <= 25.2e6, "{pdr:?}");
        assert!(ndr.set_aside.is_empty() && pdr.set_aside.is_empty());
        // Driver losses are never set aside, even with a host stall elsewhere in the trial.
        let t = Trial { offered: 1000, received: 990, host_stall_drops: 5, ..Trial::default() };
        assert!(!t.failed_by_host(0.0) && t.failed_by_host(0.005));
    }
}
