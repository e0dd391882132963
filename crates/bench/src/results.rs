//! What `safenic bench --out DIR` writes to `results.json`, read back and checked before the
//! bench calls a run good.

use serde::{Deserialize, Serialize};

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
        let n = sorted.len();
        let median = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
        Spread { median, min: sorted[0], max: sorted[n - 1], values: values.to_vec() }
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
    /// Frames forwarded per second at line rate offered, both directions, in millions.
    pub forwarded_mpps: Spread,
    /// What limited each repetition's window (`driver`, `nicsim`, `line rate`, …).
    pub limited_by: Vec<String>,
    /// callgrind: instructions per forwarded packet in the forwarding loop.
    pub instructions_per_packet: Spread,
    /// callgrind: estimated cycles per forwarded packet ([`Results::cycle_estimate`]).
    pub estimated_cycles_per_packet: Spread,
    /// Whether every callgrind run kept the driver saturated (no idle polls counted).
    pub saturated: bool,
}

/// A ratio of two drivers in one model, computed inside each repetition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    pub model: String,
    pub driver: String,
    pub baseline: String,
    pub instructions: Spread,
    pub estimated_cycles: Spread,
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
    pub throughput_seconds: f64,
    pub callgrind_seconds: f64,
    /// How the cycle estimate is computed from callgrind's events.
    pub cycle_estimate: String,
    pub rows: Vec<Row>,
    pub ratios: Vec<Ratio>,
}

impl Results {
    /// Checks that every driver × model has a row with sane figures (finite, positive, one
    /// per repetition) and every ratio is finite and positive.
    pub fn validate(&self, drivers: &[String], models: &[String]) -> Result<(), String> {
        for d in drivers {
            for m in models {
                let row = self
                    .rows
                    .iter()
                    .find(|r| &r.driver == d && &r.model == m)
                    .ok_or_else(|| format!("no result for {d} {m}"))?;
                for (what, s) in [
                    ("forwarded Mpps", &row.forwarded_mpps),
                    ("instructions per packet", &row.instructions_per_packet),
                    ("estimated cycles per packet", &row.estimated_cycles_per_packet),
                ] {
                    sane(s, self.repetitions).map_err(|e| format!("{d} {m}, {what}: {e}"))?;
                }
                if row.estimated_cycles_per_packet.min < row.instructions_per_packet.min {
                    return Err(format!("{d} {m}: fewer estimated cycles than instructions"));
                }
            }
        }
        for r in &self.ratios {
            for (what, s) in [("instructions", &r.instructions), ("estimated cycles", &r.estimated_cycles)] {
                sane(s, self.repetitions)
                    .map_err(|e| format!("{} / {} {}, {what}: {e}", r.driver, r.baseline, r.model))?;
            }
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
            forwarded_mpps: Spread::of(&[20.0, 21.0]),
            limited_by: vec!["driver".into(); 2],
            instructions_per_packet: Spread::of(ipp),
            estimated_cycles_per_packet: Spread::of(&ipp.iter().map(|v| v * 1.5).collect::<Vec<_>>()),
            saturated: true,
        }
    }

    fn results(rows: Vec<Row>) -> Results {
        Results {
            profile: "quick".into(),
            isa: "x86-64-v3".into(),
            host_cpu: "cpu".into(),
            repetitions: 2,
            throughput_seconds: 1.0,
            callgrind_seconds: 2.0,
            cycle_estimate: crate::callgrind::ESTIMATE_FORMULA.into(),
            rows,
            ratios: vec![],
        }
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
        assert_eq!(e, "no result for c-gcc const");
        let e = results(vec![row("rust", &[41.0, f64::NAN]), row("c-gcc", &[1.0, 1.0])])
            .validate(&drivers, &models)
            .unwrap_err();
        assert!(e.starts_with("rust const, instructions per packet: NaN"), "{e}");
        let e = results(vec![row("rust", &[41.0]), row("c-gcc", &[1.0])]).validate(&drivers, &models).unwrap_err();
        assert!(e.contains("1 values for 2 repetitions"), "{e}");
    }
}
