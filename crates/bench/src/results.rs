//! What `safenic bench --out DIR` writes to `results.json`, read back and checked before the
//! bench calls a run good.

use crate::rfc2544::{self, Found, SetAside};
use serde::{Deserialize, Serialize};

/// The median of `values`; NaN if there are none.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// A figure measured once per repetition: every value, and its median and range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub values: Vec<f64>,
}

impl Spread {
    /// The spread of `values` (at least one).
    pub fn of(values: &[f64]) -> Spread {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        Spread { median: median(values), min: sorted[0], max: sorted[sorted.len() - 1], values: values.to_vec() }
    }

    /// `median (min–max)` with `digits` decimals; just the value when there is one.
    pub fn show(&self, digits: usize) -> String {
        if self.values.len() == 1 {
            format!("{:.digits$}", self.median)
        } else {
            format!("{:.digits$} ({:.digits$}–{:.digits$})", self.median, self.min, self.max)
        }
    }
}

/// One driver in one model at one frame size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub driver: String,
    pub model: String,
    /// Bytes per frame with FCS, as RFC 2544 counts them.
    pub frame_size: usize,
    /// Both directions' line rate at this frame size, in millions of frames per second.
    pub line_rate_mpps: f64,
    /// RFC 2544 throughput: the highest rate, both directions together, that lost no frame
    /// (or no more than the loss tolerance), in millions of frames per second.
    pub throughput_mpps: Spread,
    /// What set each repetition's figure: `line rate`, `driver` or `nicsim` (a lower bound).
    pub limited_by: Vec<String>,
    /// Frames forwarded per second, both directions, in the trials at line rate (the best try
    /// of each repetition), in millions: what the driver moves when overloaded.
    pub forwarded_at_line_rate_mpps: Spread,
    /// Latency at 10% to 100% of each repetition's throughput.
    pub latency: Vec<LatencyStep>,
    /// callgrind: instructions per forwarded packet in the forwarding loop (64-byte frames
    /// only: the loops never touch the payload).
    pub instructions_per_packet: Option<Spread>,
    /// callgrind: estimated cycles per forwarded packet ([`Results::cycle_estimate`]).
    pub estimated_cycles_per_packet: Option<Spread>,
    /// Whether every callgrind run kept the driver saturated (no idle polls counted).
    pub saturated: Option<bool>,
    /// Every repetition's search, trial by trial.
    pub searches: Vec<Found>,
    /// The non-drop and partial-drop rates (FD.io CSIT's NDR, zero loss, and PDR, at most
    /// 0.5 % lost) with the trials the host failed set aside, in millions of frames per
    /// second; per repetition, what set each, the trials each set aside, and why.
    #[serde(default)]
    pub ndr_mpps: Option<Spread>,
    #[serde(default)]
    pub pdr_mpps: Option<Spread>,
    #[serde(default)]
    pub ndr_limited_by: Vec<String>,
    #[serde(default)]
    pub pdr_limited_by: Vec<String>,
    #[serde(default)]
    pub ndr_set_aside: Vec<Vec<SetAside>>,
    #[serde(default)]
    pub pdr_set_aside: Vec<Vec<SetAside>>,
}

/// Latency at one load, over the repetitions whose throughput was not zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyStep {
    /// Percent of the throughput found.
    pub percent: u32,
    pub rate_mpps: Spread,
    pub p50_ns: Spread,
    pub p99_ns: Spread,
    pub p999_ns: Spread,
    pub max_ns: Spread,
    /// The same percentiles of the frames not in flight during a host stall.
    #[serde(default)]
    pub outside_host_stalls: Option<[Spread; 4]>,
}

/// A ratio of two drivers in one model, computed inside each repetition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    pub model: String,
    pub driver: String,
    pub baseline: String,
    pub instructions: Spread,
    pub estimated_cycles: Spread,
    /// NDR and PDR at 64 bytes, driver over baseline, in the repetitions where the
    /// baseline's was not zero.
    #[serde(default)]
    pub ndr: Option<Spread>,
    #[serde(default)]
    pub pdr: Option<Spread>,
}

/// The host-stall recorders' findings, per core.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostStalls {
    pub before: Vec<crate::host::CoreStalls>,
    pub after: Vec<crate::host::CoreStalls>,
}

/// Everything one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub profile: String,
    /// The x86-64 level every driver was compiled for.
    pub isa: String,
    /// The host's CPU model, from /proc/cpuinfo.
    pub host_cpu: String,
    pub repetitions: usize,
    /// RFC 2544 settings: seconds per trial, resolution and loss tolerance (fractions of the
    /// line rate and of the offered frames), frame sizes.
    pub trial_seconds: f64,
    pub resolution: f64,
    pub loss_tolerance: f64,
    pub frame_sizes: Vec<usize>,
    pub callgrind_seconds: f64,
    /// How the cycle estimate is computed from callgrind's events.
    pub cycle_estimate: String,
    /// nicsim's own ceiling (`nicsim bench`), before and after the drivers, in millions of
    /// frames per second into both ports' receive rings: above the line rate (29.76 at 64
    /// bytes), nicsim is not what limits the drivers.
    pub nicsim_ceiling_mpps: Spread,
    /// The host's own stalls on the bench's cores (`crate::host`), before and after the
    /// drivers: what a throughput or latency figure of this run may owe to the host.
    #[serde(default)]
    pub host_stalls: HostStalls,
    pub rows: Vec<Row>,
    pub ratios: Vec<Ratio>,
}

impl Results {
    /// Names by [`rfc2544::driver_or_unseen_stall`] every figure written as the driver's:
    /// results written before that rule existed get it from their own trial logs.
    pub fn name_unseen_stalls(&mut self) {
        for row in &mut self.rows {
            for (r, found) in row.searches.iter().enumerate() {
                let relabel = |label: &mut String, rate_mpps: f64, tolerance: f64| {
                    if label == "driver" {
                        *label = rfc2544::driver_or_unseen_stall(&found.log, rate_mpps * 1e6, tolerance).to_string();
                    }
                };
                if let (Some(label), Some(&rate)) = (row.limited_by.get_mut(r), row.throughput_mpps.values.get(r)) {
                    relabel(label, rate, found.loss_tolerance);
                }
                for (labels, rate, goal) in [
                    (&mut row.ndr_limited_by, &row.ndr_mpps, rfc2544::NDR),
                    (&mut row.pdr_limited_by, &row.pdr_mpps, rfc2544::PDR),
                ] {
                    let rate = rate.as_ref().and_then(|s| s.values.get(r));
                    if let (Some(label), Some(&rate)) = (labels.get_mut(r), rate) {
                        relabel(label, rate, goal.loss_tolerance);
                    }
                }
            }
        }
    }

    /// Checks that every driver × model × frame size has a row with sane figures (one per
    /// repetition; finite; throughput between zero and the line rate; latency percentiles
    /// positive and in order; instructions and cycles positive, cycles above instructions),
    /// and that every ratio is finite and positive.
    pub fn validate(&self, drivers: &[String], models: &[String]) -> Result<(), String> {
        for d in drivers {
            for m in models {
                for &size in &self.frame_sizes {
                    let row = self
                        .rows
                        .iter()
                        .find(|r| &r.driver == d && &r.model == m && r.frame_size == size)
                        .ok_or_else(|| format!("no result for {d} {m} at {size} bytes"))?;
                    row.validate(self.repetitions).map_err(|e| format!("{d} {m} at {size} bytes, {e}"))?;
                }
            }
        }
        for r in &self.ratios {
            for (what, s) in [("instructions", &r.instructions), ("estimated cycles", &r.estimated_cycles)] {
                sane(s, self.repetitions)
                    .map_err(|e| format!("{} / {} {}, {what}: {e}", r.driver, r.baseline, r.model))?;
            }
        }
        sane(&self.nicsim_ceiling_mpps, self.nicsim_ceiling_mpps.values.len().max(1))
            .map_err(|e| format!("nicsim's ceiling: {e}"))?;
        for (when, cores) in [("before", &self.host_stalls.before), ("after", &self.host_stalls.after)] {
            if cores.is_empty() {
                return Err(format!("no host-stall record {when} the drivers"));
            }
            if let Some(c) = cores.iter().find(|c| {
                !(c.seconds > 0.0 && c.longest_us >= 0.0 && (0.0..=1.0).contains(&c.lost_fraction))
                    || c.per_second_over.windows(2).any(|w| w[0] < w[1])
            }) {
                return Err(format!("host stalls {when} the drivers, CPU {}: not a sane record: {c:?}", c.cpu));
            }
        }
        Ok(())
    }
}

impl Row {
    fn validate(&self, repetitions: usize) -> Result<(), String> {
        let t = &self.throughput_mpps;
        if t.values.len() != repetitions || self.limited_by.len() != repetitions {
            return Err(format!("throughput: {} values for {repetitions} repetitions", t.values.len()));
        }
        if let Some(v) = t.values.iter().find(|v| !(0.0..=self.line_rate_mpps * (1.0 + 1e-9)).contains(*v)) {
            return Err(format!("throughput: {v} Mpps is not between 0 and the line rate {}", self.line_rate_mpps));
        }
        for (what, rate, limited) in
            [("NDR", &self.ndr_mpps, &self.ndr_limited_by), ("PDR", &self.pdr_mpps, &self.pdr_limited_by)]
        {
            let Some(rate) = rate else { continue };
            if rate.values.len() != repetitions || limited.len() != repetitions {
                return Err(format!("{what}: {} values for {repetitions} repetitions", rate.values.len()));
            }
            if let Some(v) = rate.values.iter().find(|v| !(0.0..=self.line_rate_mpps * (1.0 + 1e-9)).contains(*v)) {
                return Err(format!("{what}: {v} Mpps is not between 0 and the line rate {}", self.line_rate_mpps));
            }
        }
        if let (Some(ndr), Some(pdr)) = (&self.ndr_mpps, &self.pdr_mpps) {
            // A trial that lost nothing passes both goals, so the PDR search can only go higher.
            if ndr.values.iter().zip(&pdr.values).any(|(n, p)| n > p) {
                return Err(format!("NDR {:?} above PDR {:?} Mpps", ndr.values, pdr.values));
            }
        }
        let f = &self.forwarded_at_line_rate_mpps;
        if f.values.len() != repetitions || f.values.iter().any(|v| !v.is_finite() || *v < 0.0) {
            return Err(format!("forwarded at line rate: {:?} for {repetitions} repetitions", f.values));
        }
        for step in &self.latency {
            let p = [&step.p50_ns, &step.p99_ns, &step.p999_ns, &step.max_ns];
            for s in p.iter().chain([&&step.rate_mpps]) {
                sane(s, s.values.len().clamp(1, repetitions))
                    .map_err(|e| format!("latency at {}%: {e}", step.percent))?;
            }
            for w in p.windows(2) {
                if w[0].values.iter().zip(&w[1].values).any(|(a, b)| a > b) {
                    return Err(format!("latency at {}%: percentiles out of order", step.percent));
                }
            }
        }
        match (&self.instructions_per_packet, &self.estimated_cycles_per_packet) {
            (Some(i), Some(c)) => {
                sane(i, repetitions).map_err(|e| format!("instructions per packet: {e}"))?;
                sane(c, repetitions).map_err(|e| format!("estimated cycles per packet: {e}"))?;
                if c.min < i.min {
                    return Err("fewer estimated cycles than instructions".into());
                }
            }
            (None, None) if self.frame_size != 64 => {}
            _ => return Err("instructions and estimated cycles missing".into()),
        }
        Ok(())
    }
}

fn sane(s: &Spread, repetitions: usize) -> Result<(), String> {
    if s.values.len() != repetitions {
        return Err(format!("{} values for {repetitions} repetitions", s.values.len()));
    }
    if let Some(v) = s.values.iter().find(|v| !v.is_finite() || **v <= 0.0) {
        return Err(format!("{v} is not a positive figure"));
    }
    if !(s.min <= s.median && s.median <= s.max) {
        return Err(format!("median {} outside {}–{}", s.median, s.min, s.max));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(driver: &str, ipp: &[f64]) -> Row {
        Row {
            driver: driver.into(),
            model: "const".into(),
            frame_size: 64,
            line_rate_mpps: 29.76,
            throughput_mpps: Spread::of(&[20.0, 0.0]),
            limited_by: vec!["driver".into(); 2],
            forwarded_at_line_rate_mpps: Spread::of(&[25.0, 26.0]),
            latency: vec![LatencyStep {
                percent: 10,
                rate_mpps: Spread::of(&[2.0]),
                p50_ns: Spread::of(&[900.0]),
                p99_ns: Spread::of(&[1500.0]),
                p999_ns: Spread::of(&[3000.0]),
                max_ns: Spread::of(&[9000.0]),
                outside_host_stalls: None,
            }],
            instructions_per_packet: Some(Spread::of(ipp)),
            estimated_cycles_per_packet: Some(Spread::of(&ipp.iter().map(|v| v * 1.5).collect::<Vec<_>>())),
            saturated: Some(true),
            searches: vec![],
            ndr_mpps: Some(Spread::of(&[20.0, 1.0])),
            pdr_mpps: Some(Spread::of(&[21.0, 1.0])),
            ndr_limited_by: vec!["driver".into(), "host".into()],
            pdr_limited_by: vec!["driver".into(); 2],
            ndr_set_aside: vec![vec![], vec![SetAside { rate_pps: 2e6, reason: "host".into() }]],
            pdr_set_aside: vec![vec![]; 2],
        }
    }

    fn results(rows: Vec<Row>) -> Results {
        Results {
            profile: "quick".into(),
            isa: "x86-64-v3".into(),
            host_cpu: "cpu".into(),
            repetitions: 2,
            trial_seconds: 0.1,
            resolution: 0.1,
            loss_tolerance: 0.0,
            frame_sizes: vec![64],
            callgrind_seconds: 2.0,
            cycle_estimate: crate::callgrind::ESTIMATE_FORMULA.into(),
            nicsim_ceiling_mpps: Spread::of(&[30.0, 31.0]),
            host_stalls: HostStalls {
                before: vec![crate::host::CoreStalls::of(0, 1.0, &[200_000])],
                after: vec![crate::host::CoreStalls::of(0, 1.0, &[])],
            },
            rows,
            ratios: vec![],
        }
    }

    #[test]
    fn a_run_without_a_sane_host_stall_record_is_refused() {
        let (drivers, models) = (vec!["rust".to_string()], vec!["const".to_string()]);
        let mut r = results(vec![row("rust", &[41.0, 41.5])]);
        r.validate(&drivers, &models).unwrap();
        r.host_stalls.after.clear();
        assert_eq!(r.validate(&drivers, &models).unwrap_err(), "no host-stall record after the drivers");
        r.host_stalls.after =
            vec![crate::host::CoreStalls { seconds: 0.0, ..crate::host::CoreStalls::of(1, 1.0, &[]) }];
        assert!(r.validate(&drivers, &models).unwrap_err().contains("CPU 1: not a sane record"));
    }

    #[test]
    fn results_written_before_the_rule_name_their_unseen_stalls_from_their_own_logs() {
        // One search: 20 Mpps passed; 21 Mpps failed, by 40 frames all in receive-tail stalls
        // no host stall covered (repetition 0), or by 40 frames of which 1 outside (repetition 1).
        let trial = |rate_mpps: f64, lost: u64, in_stalls: u64| crate::rfc2544::Trial {
            rate_pps: rate_mpps * 1e6,
            offered: 2_000_000,
            received: 2_000_000 - lost,
            tail_stall_drops: in_stalls,
            ..Default::default()
        };
        let search = |lost_outside: u64| {
            let mut f: Found = serde_json::from_value(serde_json::json!({
                "rate_pps": 20e6, "line_rate_pps": 29.76e6, "trials": 2, "nicsim_limited_at": [], "log": []
            }))
            .unwrap();
            f.log = vec![trial(20.0, 0, 0), trial(21.0, 40, 40 - lost_outside)];
            f
        };
        let mut r = results(vec![row("rust", &[41.0, 41.5])]);
        let row = &mut r.rows[0];
        row.searches = vec![search(0), search(1)];
        row.throughput_mpps = Spread::of(&[20.0, 20.0]);
        row.ndr_mpps = Some(Spread::of(&[20.0, 20.0]));
        row.ndr_limited_by = vec!["driver".into(), "driver".into()];
        row.pdr_limited_by = vec!["driver".into(), "host".into()];
        r.name_unseen_stalls();
        let row = &r.rows[0];
        assert_eq!(row.limited_by, ["unseen stall", "driver"]);
        assert_eq!(row.ndr_limited_by, ["unseen stall", "driver"]);
        // The PDR's own figure (21 Mpps) has no failed rate above it in this log; a label other
        // than the driver's is kept.
        assert_eq!(row.pdr_limited_by, ["driver", "host"]);
    }

    #[test]
    fn spreads_have_a_median_and_a_range() {
        let s = Spread::of(&[3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(Spread::of(&[1.0, 4.0]).median, 2.5);
        assert_eq!(Spread::of(&[1.0, 4.0]).show(1), "2.5 (1.0–4.0)");
        assert_eq!(Spread::of(&[41.25]).show(1), "41.2");
    }

    #[test]
    fn results_survive_json_and_missing_or_insane_figures_are_named() {
        let (drivers, models) = (vec!["rust".to_string(), "c-gcc".to_string()], vec!["const".to_string()]);
        let good = results(vec![row("rust", &[41.0, 41.5]), row("c-gcc", &[43.0, 43.5])]);
        let back: Results = serde_json::from_str(&serde_json::to_string(&good).unwrap()).unwrap();
        assert_eq!(back, good);
        back.validate(&drivers, &models).unwrap();
        let e = results(vec![row("rust", &[41.0, 41.5])]).validate(&drivers, &models).unwrap_err();
        assert_eq!(e, "no result for c-gcc const at 64 bytes");
        let e = results(vec![row("rust", &[41.0, f64::NAN]), row("c-gcc", &[1.0, 1.0])])
            .validate(&drivers, &models)
            .unwrap_err();
        assert!(e.starts_with("rust const at 64 bytes, instructions per packet: NaN"), "{e}");
        let e = results(vec![row("rust", &[41.0]), row("c-gcc", &[1.0])]).validate(&drivers, &models).unwrap_err();
        assert!(e.contains("1 values for 2 repetitions"), "{e}");
        let mut fast = row("rust", &[41.0, 41.5]);
        fast.throughput_mpps = Spread::of(&[29.0, 31.0]);
        let e = results(vec![fast, row("c-gcc", &[1.0, 1.0])]).validate(&drivers, &models).unwrap_err();
        assert!(e.contains("31 Mpps is not between 0 and the line rate"), "{e}");
        let mut disordered = row("rust", &[41.0, 41.5]);
        disordered.latency[0].p99_ns = Spread::of(&[800.0]);
        let e = results(vec![disordered, row("c-gcc", &[1.0, 1.0])]).validate(&drivers, &models).unwrap_err();
        assert!(e.contains("latency at 10%: percentiles out of order"), "{e}");
        let mut inverted = row("rust", &[41.0, 41.5]);
        inverted.pdr_mpps = Some(Spread::of(&[19.0, 1.0]));
        let e = results(vec![inverted, row("c-gcc", &[1.0, 1.0])]).validate(&drivers, &models).unwrap_err();
        assert!(e.contains("NDR [20.0, 1.0] above PDR [19.0, 1.0]"), "{e}");
    }
}
