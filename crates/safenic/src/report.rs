//! `safenic bench`: nicsim's ceiling, then every driver and model measured on nicsim (RFC 2544
//! throughput and latency, callgrind's instructions and estimated cycles), repeated with the
//! drivers of a model interleaved; printed as Markdown (the form docs/results.md keeps) and,
//! with `--out`, written as `results.json`, `results.md` and figures.

mod figures;
mod markdown;

use bench::callgrind::ESTIMATE_FORMULA;
use bench::results::{HostStalls, LatencyStep, Ratio, Results, Row, Spread};
use bench::rfc2544::{Search, FRAME_SIZES, LOAD_PERCENTS};
use bench::{Driver, Instructions, Rfc2544};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How long and how often to measure.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub repetitions: usize,
    pub search: Search,
    pub frame_sizes: Vec<usize>,
    pub callgrind_seconds: f64,
    /// Seconds of each of nicsim's two ceiling measurements.
    pub ceiling_seconds: f64,
    /// Seconds of each of the two host-stall records (`bench::host`), before and after.
    pub host_seconds: f64,
}

impl Profile {
    /// `quick` (a smoke test, under 2 minutes), `standard` or `full` (every RFC 2544 frame size).
    pub fn named(name: &str) -> Profile {
        let (repetitions, trial_seconds, resolution, callgrind_seconds, ceiling_seconds, host_seconds) = match name {
            "quick" => (1, 0.1, 0.1, 1.0, 0.5, 0.5),
            "full" => (3, 2.0, 0.005, 20.0, 10.0, 30.0),
            _ => (3, 1.0, 0.01, 10.0, 5.0, 10.0),
        };
        Profile {
            name: name.to_string(),
            repetitions,
            search: Search { trial_seconds, resolution, loss_tolerance: 0.0 },
            frame_sizes: if name == "full" { FRAME_SIZES.to_vec() } else { vec![64] },
            callgrind_seconds,
            ceiling_seconds,
            host_seconds,
        }
    }
}

pub struct Options {
    pub drivers: Vec<Driver>,
    pub modes: Vec<String>,
    pub profile: Profile,
    pub throughput: bool,
    pub instructions: bool,
    /// Where to write results.json, results.md and the figures.
    pub out: Option<PathBuf>,
    /// Where to keep every callgrind profile, as `DRIVER-MODEL-REPETITION.callgrind`.
    pub profiles: Option<PathBuf>,
    /// Where to draw the figures (default: `figures` in `out`).
    pub figures: Option<PathBuf>,
    /// A Markdown file whose text between [`SPLICE_BEGIN`] and [`SPLICE_END`] is replaced
    /// with the results (docs/results.md).
    pub splice: Option<PathBuf>,
}

pub const SPLICE_BEGIN: &str = "<!-- safenic bench: begin -->";
pub const SPLICE_END: &str = "<!-- safenic bench: end -->";

/// Every measurement of one driver in one model, one per repetition.
pub struct Measured {
    pub driver: String,
    pub mode: String,
    /// Per repetition, per frame size.
    pub rfc2544: Vec<Vec<Rfc2544>>,
    pub instructions: Vec<Instructions>,
}

/// Counts measurements done and says how long the rest will take.
struct Progress {
    total: usize,
    done: usize,
    started: Instant,
}

impl Progress {
    fn note(&mut self, what: &str) {
        let left = if self.done == 0 {
            "estimating time left".to_string()
        } else {
            let each = self.started.elapsed().as_secs_f64() / self.done as f64;
            let secs = (each * (self.total - self.done) as f64).round() as u64;
            format!("about {}m{:02}s left", secs / 60, secs % 60)
        };
        self.done += 1;
        eprintln!("safenic bench: [{}/{}] {what} ({left})", self.done, self.total);
    }
}

pub fn run(o: &Options) -> Result<(), String> {
    if o.drivers.is_empty() {
        return Err(format!("no driver to measure: none in {} has `bench = true`; pass --driver", manifest::MANIFEST));
    }
    if o.out.is_some() && !(o.throughput && o.instructions) {
        return Err("--out writes every figure: drop --throughput-only or --instructions-only".into());
    }
    if o.out.is_none() && (o.splice.is_some() || o.figures.is_some()) {
        return Err("--splice and --figures write checked results: add --out DIR".into());
    }
    if let Some(file) = &o.splice {
        // Checked before hours of measuring, and again when written.
        splice(&std::fs::read_to_string(file).map_err(|e| format!("reading {}: {e}", file.display()))?, "")
            .map_err(|e| format!("{}: {e}", file.display()))?;
    }
    if let Some(dir) = &o.profiles {
        if !o.instructions {
            return Err("--profiles keeps callgrind's profiles: drop --throughput-only".into());
        }
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    // SIGINT or SIGTERM ends the run between two looks at the clock; every driver and nicsim
    // session then goes with the harness that started it.
    platform::signals::install_termination_flag().map_err(|e| format!("installing signal handlers: {e}"))?;
    let p = &o.profile;
    let mut all: Vec<Measured> = Vec::new();
    for mode in &o.modes {
        for d in &o.drivers {
            all.push(Measured { driver: d.name.clone(), mode: mode.clone(), rfc2544: vec![], instructions: vec![] });
        }
    }
    let phases = usize::from(o.throughput) + usize::from(o.instructions);
    let mut progress = Progress { total: all.len() * p.repetitions * phases + 4, done: 0, started: Instant::now() };
    progress.note("the host's stalls, before");
    let stalls_before = host_stalls(p.host_seconds)?;
    progress.note("nicsim's ceiling, before");
    let mut ceiling = vec![nicsim_ceiling(p.ceiling_seconds)?];
    let n = o.drivers.len();
    // Every RFC 2544 search first, then every callgrind run: traffic measured right after a
    // callgrind run came out 30-60% low, whichever the driver. Within a phase, model by model,
    // the drivers take turns in each repetition, each repetition starting with the next one:
    // this host's speed drifts by up to 2x over minutes, and ratios are taken between neighbours.
    for phase in ["throughput and latency", "instructions"] {
        if (phase == "instructions" && !o.instructions) || (phase != "instructions" && !o.throughput) {
            continue;
        }
        for (m, mode) in o.modes.iter().enumerate() {
            for rep in 0..p.repetitions {
                for k in 0..n {
                    let d = &o.drivers[(rep + k) % n];
                    let slot = &mut all[m * n + (rep + k) % n];
                    progress.note(&format!("{phase} of {} {mode}, repetition {}/{}", d.name, rep + 1, p.repetitions));
                    if phase == "instructions" {
                        let keep =
                            o.profiles.as_ref().map(|dir| dir.join(format!("{}-{mode}-{}.callgrind", d.name, rep + 1)));
                        slot.instructions.push(bench::instructions(d, mode, p.callgrind_seconds, keep.as_deref())?);
                    } else {
                        slot.rfc2544.push(bench::rfc2544(d, mode, &p.frame_sizes, &p.search)?);
                    }
                }
            }
        }
    }
    progress.note("nicsim's ceiling, after");
    ceiling.push(nicsim_ceiling(p.ceiling_seconds)?);
    progress.note("the host's stalls, after");
    let stalls = HostStalls { before: stalls_before, after: host_stalls(p.host_seconds)? };
    let results = results(o, &all, &ceiling, stalls);
    let text = markdown::of(&results);
    cli::outln!("{}", text.trim_end())?;
    if let Some(dir) = &o.out {
        write_results(dir, o, &results, &text)?;
    }
    Ok(())
}

/// The host's stalls on the bench's two cores, both recorded at once (`bench::host`).
fn host_stalls(seconds: f64) -> Result<Vec<bench::host::CoreStalls>, String> {
    bench::host::measure(&[bench::NICSIM_CPU, bench::DRIVER_CPU], seconds)
}

/// nicsim's ceiling: Mpps into both ports' receive rings with a reflecting peer on the other
/// core (`nicsim bench`), from the nicsim built beside this program.
fn nicsim_ceiling(seconds: f64) -> Result<f64, String> {
    // The measurements pin this thread to nicsim's CPU; the ceiling places its engine and peer
    // on the CPUs this thread may use.
    platform::sched::unpin_current_thread().map_err(|e| format!("unpinning: {e}"))?;
    let nicsim = crate::beside_this_program("nicsim", "cargo build --release -p nicsim", "make build")?;
    bench::nicsim_ceiling(&nicsim, seconds)
}

/// The driver whose ratios to the others are reported: `rust` if measured, else the first.
fn subject(o: &Options) -> &str {
    o.drivers.iter().find(|d| d.name == "rust").unwrap_or(&o.drivers[0]).name.as_str()
}

fn ratios(o: &Options, all: &[Measured]) -> Vec<Ratio> {
    let subject = subject(o);
    let mut out = Vec::new();
    for mode in &o.modes {
        let of = |name: &str| all.iter().find(|m| m.driver == name && &m.mode == mode);
        let Some(s) = of(subject).filter(|s| !s.instructions.is_empty()) else { continue };
        for base in o.drivers.iter().filter(|d| d.name != subject) {
            let Some(b) = of(&base.name) else { continue };
            let per_rep = |f: fn(&Instructions) -> f64| -> Vec<f64> {
                s.instructions.iter().zip(&b.instructions).map(|(x, y)| f(x) / f(y)).collect()
            };
            // Throughput at 64 bytes, per repetition in which the baseline's was not zero.
            let rate_ratio = |f: fn(&Rfc2544) -> f64| -> Option<Spread> {
                let v: Vec<f64> = s
                    .rfc2544
                    .iter()
                    .zip(&b.rfc2544)
                    .filter_map(|(x, y)| Some((f(x.first()?), f(y.first()?))))
                    .filter(|(_, y)| *y > 0.0)
                    .map(|(x, y)| x / y)
                    .collect();
                spread_of(&v, |r| *r)
            };
            out.push(Ratio {
                model: mode.clone(),
                driver: subject.to_string(),
                baseline: base.name.clone(),
                instructions: Spread::of(&per_rep(Instructions::per_packet)),
                estimated_cycles: Spread::of(&per_rep(Instructions::cycles_per_packet)),
                ndr: rate_ratio(|r| r.ndr.rate_pps),
                pdr: rate_ratio(|r| r.pdr.rate_pps),
            });
        }
    }
    out
}

fn host_cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| l.strip_prefix("model name")?.split_once(':').map(|(_, v)| v.trim().to_string()))
        })
        .unwrap_or_else(|| "unknown".into())
}

fn spread_of<T>(values: &[T], f: impl Fn(&T) -> f64) -> Option<Spread> {
    (!values.is_empty()).then(|| Spread::of(&values.iter().map(f).collect::<Vec<_>>()))
}

/// One row per driver, model and frame size (nothing for a phase that did not run).
fn rows(p: &Profile, m: &Measured) -> Vec<Row> {
    let sizes = if m.rfc2544.is_empty() && !m.instructions.is_empty() { vec![64] } else { p.frame_sizes.clone() };
    sizes
        .iter()
        .enumerate()
        .map(|(k, &size)| {
            let at: Vec<&Rfc2544> = m.rfc2544.iter().filter_map(|rep| rep.get(k)).collect();
            let callgrind = if size == 64 { &m.instructions[..] } else { &[] };
            Row {
                driver: m.driver.clone(),
                model: m.mode.clone(),
                frame_size: size,
                line_rate_mpps: at.first().map_or(0.0, |r| r.found.line_rate_pps / 1e6),
                throughput_mpps: spread_of(&at, |r| r.found.rate_pps / 1e6).unwrap_or_else(|| Spread::of(&[0.0])),
                limited_by: at.iter().map(|r| r.found.limited_by().to_string()).collect(),
                forwarded_at_line_rate_mpps: spread_of(&at, |r| {
                    let best = r.found.log.iter().filter(|t| t.rate_pps == r.found.line_rate_pps).map(|t| t.received);
                    best.max().unwrap_or(0) as f64 / p.search.trial_seconds / 1e6
                })
                .unwrap_or_else(|| Spread::of(&[0.0])),
                latency: latency_steps(&at),
                instructions_per_packet: spread_of(callgrind, Instructions::per_packet),
                estimated_cycles_per_packet: spread_of(callgrind, Instructions::cycles_per_packet),
                saturated: (!callgrind.is_empty()).then(|| callgrind.iter().all(|i| i.saturated)),
                searches: at.iter().map(|r| r.found.clone()).collect(),
                ndr_mpps: spread_of(&at, |r| r.ndr.rate_pps / 1e6),
                pdr_mpps: spread_of(&at, |r| r.pdr.rate_pps / 1e6),
                ndr_limited_by: at.iter().map(|r| r.ndr.limited_by().to_string()).collect(),
                pdr_limited_by: at.iter().map(|r| r.pdr.limited_by().to_string()).collect(),
                ndr_set_aside: at.iter().map(|r| r.ndr.set_aside.clone()).collect(),
                pdr_set_aside: at.iter().map(|r| r.pdr.set_aside.clone()).collect(),
            }
        })
        .collect()
}

/// Each load step over the repetitions that measured it.
fn latency_steps(at: &[&Rfc2544]) -> Vec<LatencyStep> {
    LOAD_PERCENTS
        .iter()
        .filter_map(|&percent| {
            let steps: Vec<_> = at.iter().filter_map(|r| r.latency.iter().find(|l| l.percent == percent)).collect();
            let ns = |f: fn(&bench::rfc2544::LoadLatency) -> u64| spread_of(&steps, |l| f(l) as f64);
            Some(LatencyStep {
                percent,
                rate_mpps: spread_of(&steps, |l| l.trial.rate_pps / 1e6)?,
                p50_ns: ns(|l| l.p50_ns)?,
                p99_ns: ns(|l| l.p99_ns)?,
                p999_ns: ns(|l| l.p999_ns)?,
                max_ns: ns(|l| l.max_ns)?,
                outside_host_stalls: outside_host_stalls(&steps),
            })
        })
        .collect()
}

/// p50, p99, p99.9 and max of the frames outside host stalls, if every step has them.
fn outside_host_stalls(steps: &[&bench::rfc2544::LoadLatency]) -> Option<[Spread; 4]> {
    let all: Vec<_> = steps.iter().map(|l| l.outside_host_stalls).collect::<Option<_>>()?;
    let ns = |f: fn(&bench::rfc2544::Percentiles) -> u64| spread_of(&all, |p| f(p) as f64);
    Some([ns(|p| p.p50_ns)?, ns(|p| p.p99_ns)?, ns(|p| p.p999_ns)?, ns(|p| p.max_ns)?])
}

fn results(o: &Options, all: &[Measured], ceiling: &[f64], host_stalls: HostStalls) -> Results {
    let p = &o.profile;
    Results {
        profile: p.name.clone(),
        isa: manifest::isa::compiled().to_string(),
        host_cpu: host_cpu(),
        repetitions: p.repetitions,
        trial_seconds: p.search.trial_seconds,
        resolution: p.search.resolution,
        loss_tolerance: p.search.loss_tolerance,
        frame_sizes: p.frame_sizes.clone(),
        callgrind_seconds: p.callgrind_seconds,
        cycle_estimate: ESTIMATE_FORMULA.to_string(),
        nicsim_ceiling_mpps: Spread::of(ceiling),
        host_stalls,
        rows: all.iter().flat_map(|m| rows(p, m)).collect(),
        ratios: ratios(o, all),
    }
}

/// Writes results.json, results.md and the figures into `dir`, then reads the JSON back and
/// checks it.
fn write_results(dir: &Path, o: &Options, results: &Results, text: &str) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let json_path = dir.join("results.json");
    let json = serde_json::to_string_pretty(results).map_err(|e| format!("encoding results: {e}"))?;
    std::fs::write(&json_path, json).map_err(|e| format!("writing {}: {e}", json_path.display()))?;
    let md_path = dir.join("results.md");
    std::fs::write(&md_path, text).map_err(|e| format!("writing {}: {e}", md_path.display()))?;
    let back: Results = std::fs::read_to_string(&json_path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|e| format!("reading back {}: {e}", json_path.display()))?;
    let drivers: Vec<String> = o.drivers.iter().map(|d| d.name.clone()).collect();
    back.validate(&drivers, &o.modes).map_err(|e| format!("{}: {e}", json_path.display()))?;
    let figures_dir = o.figures.clone().unwrap_or_else(|| dir.join("figures"));
    let figures = figures::draw(&back, &figures_dir)?;
    eprintln!(
        "safenic bench: wrote {}, {} and {figures} figures in {}",
        json_path.display(),
        md_path.display(),
        figures_dir.display()
    );
    if let Some(file) = &o.splice {
        let old = std::fs::read_to_string(file).map_err(|e| format!("reading {}: {e}", file.display()))?;
        let new = splice(&old, text).map_err(|e| format!("{}: {e}", file.display()))?;
        std::fs::write(file, new).map_err(|e| format!("writing {}: {e}", file.display()))?;
        eprintln!("safenic bench: updated {}", file.display());
    }
    Ok(())
}

/// `safenic figures`: the figures of a results.json written by an earlier run, into `dir`.
/// With `splice`, also the tables: results.md beside `results`, `results` rewritten with the
/// labels named again, and the tables spliced into that file.
pub fn redraw(results: &Path, dir: &Path, splice: Option<&Path>) -> Result<(), String> {
    let mut r: Results = std::fs::read_to_string(results)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|e| format!("{}: {e} (give a results.json written by safenic bench --out)", results.display()))?;
    r.name_unseen_stalls();
    if let Some(file) = splice {
        let text = markdown::of(&r);
        // The file first: without its markers it is refused before anything is written.
        splice_file(file, (SPLICE_BEGIN, SPLICE_END), &text)?;
        let json = serde_json::to_string_pretty(&r).map_err(|e| format!("encoding results: {e}"))?;
        std::fs::write(results, json).map_err(|e| format!("writing {}: {e}", results.display()))?;
        let md = results.with_file_name("results.md");
        std::fs::write(&md, &text).map_err(|e| format!("writing {}: {e}", md.display()))?;
        eprintln!("safenic figures: rewrote {}, {} and {}", results.display(), md.display(), file.display());
    }
    let n = figures::draw(&r, dir)?;
    eprintln!("safenic figures: wrote {n} figures in {}", dir.display());
    Ok(())
}

/// `document` with its text between [`SPLICE_BEGIN`] and [`SPLICE_END`] replaced by `text`.
fn splice(document: &str, text: &str) -> Result<String, String> {
    splice_between(document, (SPLICE_BEGIN, SPLICE_END), text)
}

/// [`splice_between`] on the Markdown file `file`, written back.
pub(crate) fn splice_file(file: &std::path::Path, markers: (&str, &str), text: &str) -> Result<(), String> {
    let old = std::fs::read_to_string(file).map_err(|e| format!("reading {}: {e}", file.display()))?;
    let new = splice_between(&old, markers, text).map_err(|e| format!("{}: {e}", file.display()))?;
    std::fs::write(file, new).map_err(|e| format!("writing {}: {e}", file.display()))
}

/// Replaces what lies between the markers `begin` and `end` in `document` with `text`.
pub(crate) fn splice_between(document: &str, (begin, end): (&str, &str), text: &str) -> Result<String, String> {
    let missing = || format!("no `{begin}` … `{end}` markers: add them, on lines of their own, where the results go");
    let from = document.find(begin).ok_or_else(missing)? + begin.len();
    let to = document[from..].find(end).ok_or_else(missing)? + from;
    Ok(format!("{}\n\n{}\n\n{}", &document[..from], text.trim(), &document[to..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_results_replace_what_lies_between_the_markers_and_nothing_else() {
        let doc = format!("# Results\n\nbefore\n{SPLICE_BEGIN}\nold table\n{SPLICE_END}\nafter\n");
        let once = splice(&doc, "new table\n").unwrap();
        assert_eq!(once, format!("# Results\n\nbefore\n{SPLICE_BEGIN}\n\nnew table\n\n{SPLICE_END}\nafter\n"));
        assert_eq!(splice(&once, "new table").unwrap(), once, "splicing again changes nothing");
        assert!(splice("# Results\n", "x").unwrap_err().contains("markers"));
        assert!(splice(&format!("{SPLICE_BEGIN} only"), "x").unwrap_err().contains("markers"));
    }
}
