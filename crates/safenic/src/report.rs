//! `safenic bench`: every driver and model measured on nicsim, repeated with the drivers of a
//! model interleaved, printed as Markdown (the form docs/results.md keeps) and, with `--out`,
//! written as `results.json` and `results.md`.

use bench::callgrind::ESTIMATE_FORMULA;
use bench::results::{Ratio, Results, Row, Spread};
use bench::{Driver, Instructions, Throughput};
use std::path::PathBuf;
use std::time::Instant;

/// How long and how often to measure.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub repetitions: usize,
    pub seconds: f64,
    pub callgrind_seconds: f64,
}

impl Profile {
    /// `quick` (a smoke test, under 2 minutes), `standard` or `full`.
    pub fn named(name: &str) -> Profile {
        let (repetitions, seconds, callgrind_seconds) = match name {
            "quick" => (2, 1.0, 1.5),
            "full" => (5, 10.0, 20.0),
            _ => (3, 5.0, 10.0),
        };
        Profile { name: name.to_string(), repetitions, seconds, callgrind_seconds }
    }
}

pub struct Options {
    pub drivers: Vec<Driver>,
    pub modes: Vec<String>,
    pub profile: Profile,
    pub throughput: bool,
    pub instructions: bool,
    /// Where to write results.json and results.md.
    pub out: Option<PathBuf>,
}

/// Every measurement of one driver in one model, one per repetition.
struct Measured {
    driver: String,
    mode: String,
    throughput: Vec<Throughput>,
    instructions: Vec<Instructions>,
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
    let p = &o.profile;
    let mut all: Vec<Measured> = Vec::new();
    for mode in &o.modes {
        for d in &o.drivers {
            all.push(Measured { driver: d.name.clone(), mode: mode.clone(), throughput: vec![], instructions: vec![] });
        }
    }
    let phases = usize::from(o.throughput) + usize::from(o.instructions);
    let mut progress = Progress { total: all.len() * p.repetitions * phases, done: 0, started: Instant::now() };
    let n = o.drivers.len();
    // Every throughput window first, then every callgrind run: a throughput window measured
    // right after a callgrind run came out 30-60% low, whichever the driver. Within a phase,
    // model by model, the drivers take turns in each repetition, each repetition starting
    // with the next one: this host's speed drifts by up to 2x over minutes, and ratios are
    // taken between neighbours.
    for phase in ["throughput", "instructions"] {
        if (phase == "throughput" && !o.throughput) || (phase == "instructions" && !o.instructions) {
            continue;
        }
        for (m, mode) in o.modes.iter().enumerate() {
            for rep in 0..p.repetitions {
                for k in 0..n {
                    let d = &o.drivers[(rep + k) % n];
                    let slot = &mut all[m * n + (rep + k) % n];
                    progress.note(&format!("{phase} of {} {mode}, repetition {}/{}", d.name, rep + 1, p.repetitions));
                    if phase == "throughput" {
                        slot.throughput.push(bench::throughput(d, mode, p.seconds)?);
                    } else {
                        slot.instructions.push(bench::instructions(d, mode, p.callgrind_seconds)?);
                    }
                }
            }
        }
    }
    let ratios = ratios(o, &all);
    let text = markdown(o, &all, &ratios);
    cli::outln!("{}", text.trim_end())?;
    if let Some(dir) = &o.out {
        write_results(dir, o, &all, ratios, &text)?;
    }
    Ok(())
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
            out.push(Ratio {
                model: mode.clone(),
                driver: subject.to_string(),
                baseline: base.name.clone(),
                instructions: Spread::of(&per_rep(Instructions::per_packet)),
                estimated_cycles: Spread::of(&per_rep(Instructions::cycles_per_packet)),
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

fn markdown(o: &Options, all: &[Measured], ratios: &[Ratio]) -> String {
    let p = &o.profile;
    let mut t = format!(
        "Profile `{}`: {} repetitions, throughput windows of {} s, {} s under callgrind. Every driver \
         compiled for {} (Rust `-C target-cpu`, C `-march`); host CPU: {}. Figures are the median \
         (range) over repetitions; 64-byte frames at line rate into both ports.\n\n",
        p.name,
        p.repetitions,
        p.seconds,
        p.callgrind_seconds,
        manifest::isa::compiled(),
        host_cpu()
    );
    t += "| driver | model | forwarded Mpps | limited by | instructions/packet | estimated cycles/packet |\n";
    t += "|---|---|---|---|---|---|\n";
    for m in all {
        let fwd = spread_of(&m.throughput, |t| t.forwarded_mpps).map_or("–".into(), |s| s.show(2));
        let limits: Vec<String> = m.throughput.iter().map(|t| t.limited_by.to_string()).collect();
        let unsaturated = if m.instructions.iter().all(|i| i.saturated) { "" } else { " (not saturated)" };
        let ipp = spread_of(&m.instructions, Instructions::per_packet).map_or("–".into(), |s| s.show(1));
        let cpp = spread_of(&m.instructions, Instructions::cycles_per_packet).map_or("–".into(), |s| s.show(1));
        let limits = if limits.is_empty() { "–".to_string() } else { limits.join(", ") };
        t += &format!("| {} | {} | {fwd} | {limits} | {ipp}{unsaturated} | {cpp}{unsaturated} |\n", m.driver, m.mode);
    }
    if !ratios.is_empty() {
        t += "\nRatios inside each repetition (below 1: fewer than the baseline):\n\n";
        t += "| model | ratio | instructions/packet | estimated cycles/packet |\n|---|---|---|---|\n";
        for r in ratios {
            t += &format!(
                "| {} | {} / {} | {} | {} |\n",
                r.model,
                r.driver,
                r.baseline,
                r.instructions.show(3),
                r.estimated_cycles.show(3)
            );
        }
    }
    t += &format!("\nEstimated cycles = {ESTIMATE_FORMULA} (callgrind's events in the forwarding loop).\n");
    t
}

fn spread_of<T>(values: &[T], f: impl Fn(&T) -> f64) -> Option<Spread> {
    (!values.is_empty()).then(|| Spread::of(&values.iter().map(f).collect::<Vec<_>>()))
}

/// Writes results.json and results.md into `dir`, then reads the JSON back and checks it.
fn write_results(
    dir: &std::path::Path,
    o: &Options,
    all: &[Measured],
    ratios: Vec<Ratio>,
    text: &str,
) -> Result<(), String> {
    let p = &o.profile;
    let rows = all
        .iter()
        .map(|m| Row {
            driver: m.driver.clone(),
            model: m.mode.clone(),
            frame_size: 64,
            forwarded_mpps: Spread::of(&m.throughput.iter().map(|t| t.forwarded_mpps).collect::<Vec<_>>()),
            limited_by: m.throughput.iter().map(|t| t.limited_by.to_string()).collect(),
            instructions_per_packet: Spread::of(
                &m.instructions.iter().map(Instructions::per_packet).collect::<Vec<_>>(),
            ),
            estimated_cycles_per_packet: Spread::of(
                &m.instructions.iter().map(Instructions::cycles_per_packet).collect::<Vec<_>>(),
            ),
            saturated: m.instructions.iter().all(|i| i.saturated),
        })
        .collect();
    let results = Results {
        profile: p.name.clone(),
        isa: manifest::isa::compiled().to_string(),
        host_cpu: host_cpu(),
        repetitions: p.repetitions,
        throughput_seconds: p.seconds,
        callgrind_seconds: p.callgrind_seconds,
        cycle_estimate: ESTIMATE_FORMULA.to_string(),
        rows,
        ratios,
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let json_path = dir.join("results.json");
    let json = serde_json::to_string_pretty(&results).map_err(|e| format!("encoding results: {e}"))?;
    std::fs::write(&json_path, json).map_err(|e| format!("writing {}: {e}", json_path.display()))?;
    let md_path = dir.join("results.md");
    std::fs::write(&md_path, text).map_err(|e| format!("writing {}: {e}", md_path.display()))?;
    let back: Results = std::fs::read_to_string(&json_path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|e| format!("reading back {}: {e}", json_path.display()))?;
    let drivers: Vec<String> = o.drivers.iter().map(|d| d.name.clone()).collect();
    back.validate(&drivers, &o.modes).map_err(|e| format!("{}: {e}", json_path.display()))?;
    eprintln!("safenic bench: wrote {} and {}", json_path.display(), md_path.display());
    Ok(())
}
