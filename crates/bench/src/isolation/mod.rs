//! The cost of isolation (docs/isolation.md): each workload called directly, through the MPK
//! backend and through the process backend, interleaved in rounds so that a slow minute of the
//! host touches all three alike. Reported per call: the median time of each, and each
//! backend's time over the direct call's, as the median and range of the per-round ratios.
//! The caller is pinned to one CPU and the helper process to the other; the process backend is
//! compared with the direct call timed on the helper's CPU, where its work runs.

mod report;
mod workloads;

use isolation::{Backend, BackendChoice, Config, Direct, Domain, Io};
pub use report::markdown;
use std::time::{Duration, Instant};
use workloads::Workload;

const CALLER_CPU: usize = 0;
const HELPER_CPU: usize = 1;

pub struct Options {
    /// Rounds of each workload; each round times every route once.
    pub rounds: usize,
    /// The wall time each route's timing aims at per round.
    pub window: Duration,
}

/// One workload's figures. Times in nanoseconds per call; `None` where a route cannot run here.
#[derive(Debug, Clone)]
pub struct Row {
    pub name: String,
    pub bytes: usize,
    pub in_place: bool,
    pub direct_ns: f64,
    /// The direct call timed on the helper's CPU (the process backend's basis), if it has one.
    pub direct_helper_cpu_ns: Option<f64>,
    pub mpk_ns: Option<f64>,
    pub process_ns: f64,
    /// Median, minimum and maximum over the rounds of (backend / direct).
    pub mpk_ratio: Option<(f64, f64, f64)>,
    pub process_ratio: (f64, f64, f64),
}

pub struct Report {
    pub rows: Vec<Row>,
    /// Per backend: nanoseconds from a call that faults to a domain ready for the next one
    /// (the fault, the discard and the re-creation), median of the calls made.
    pub recovery: Vec<(Backend, f64, usize)>,
    pub mpk_available: bool,
    pub rounds: usize,
    pub cpu: String,
    /// The caller's and the helper's CPU, if the host has two.
    pub cpus: Option<(usize, usize)>,
}

/// Runs every workload; an error names what is missing.
pub fn run(options: &Options) -> Result<Report, String> {
    let mpk_available = isolation::pku::available();
    // The caller on one CPU, the helper process on the other: each route measured alike,
    // without the two sides of the process backend taking turns on one core.
    let two_cpus = platform::sched::available_cpus() >= 2;
    if two_cpus {
        pin(CALLER_CPU)?;
    }
    let helper_cpu = two_cpus.then_some(HELPER_CPU);
    let mut rows = Vec::new();
    for workload in workloads::all() {
        rows.push(measure(&workload, options, mpk_available, helper_cpu)?);
    }
    let mut recovery = vec![(Backend::Process, recovery_ns(Backend::Process, 20, helper_cpu)?, 20)];
    if mpk_available {
        recovery.insert(0, (Backend::Mpk, recovery_ns(Backend::Mpk, 200, helper_cpu)?, 200));
    }
    Ok(Report {
        rows,
        recovery,
        mpk_available,
        rounds: options.rounds,
        cpu: cpu_model(),
        cpus: helper_cpu.map(|h| (CALLER_CPU, h)),
    })
}

/// The three routes of one workload, each a closure that makes `n` calls.
fn measure(w: &Workload, options: &Options, mpk_available: bool, helper_cpu: Option<usize>) -> Result<Row, String> {
    let config = || -> Config {
        w.config().io_bytes(8 << 20, 8 << 20).timeout(Some(Duration::from_secs(30))).helper_cpu(helper_cpu)
    };
    let direct = Direct::new(w.c_library, w.symbols).map_err(|e| format!("{}: {e}", w.name))?;
    let mut process = Domain::new(config().backend(BackendChoice::Require(Backend::Process)))
        .map_err(|e| format!("{}: {e}", w.name))?;
    let mut mpk = if mpk_available {
        Some(
            Domain::new(config().backend(BackendChoice::Require(Backend::Mpk)))
                .map_err(|e| format!("{}: {e}", w.name))?,
        )
    } else {
        None
    };
    let mut output = vec![0u8; 8 << 20];
    let function = w.function;
    let input = &w.input;
    let expected = direct.call(&0u64, input, &mut output, function);
    for d in std::iter::once(&mut process).chain(mpk.as_mut()) {
        let reply = d.call(&0u64, input, function).map_err(|v| format!("{}: {v}", w.name))?;
        if (reply.value, reply.output.len()) != expected {
            return Err(format!("{}: the {} backend's answer differs from the direct call's", w.name, d.backend()));
        }
    }
    let mut direct_call = |n: usize| {
        for _ in 0..n {
            std::hint::black_box(direct.call(&0u64, input, &mut output, function));
        }
    };
    let calls = calibrate(&mut direct_call, options.window);
    let (mut direct_ns, mut process_ns, mut mpk_ns) = (Vec::new(), Vec::new(), Vec::new());
    let mut direct_on_helper_cpu_ns = Vec::new();
    for _ in 0..options.rounds {
        direct_ns.push(time(&mut direct_call, calls));
        // The helper's work runs on its CPU: the direct call it is compared with does too.
        if let Some(cpu) = helper_cpu {
            pin(cpu)?;
            direct_on_helper_cpu_ns.push(time(&mut direct_call, calls));
            pin(CALLER_CPU)?;
        }
        process_ns.push(time(&mut |n| domain_calls(&mut process, input, w.in_place, function, n), calls));
        if let Some(d) = mpk.as_mut() {
            mpk_ns.push(time(&mut |n| domain_calls(d, input, w.in_place, function, n), calls));
        }
    }
    let ratios = |backend: &[f64], direct: &[f64]| spread(backend.iter().zip(direct).map(|(b, d)| b / d).collect());
    let process_direct = if direct_on_helper_cpu_ns.is_empty() { &direct_ns } else { &direct_on_helper_cpu_ns };
    Ok(Row {
        name: w.name.to_string(),
        bytes: w.input.len(),
        in_place: w.in_place,
        direct_ns: median(direct_ns.clone()),
        direct_helper_cpu_ns: (!direct_on_helper_cpu_ns.is_empty()).then(|| median(direct_on_helper_cpu_ns.clone())),
        mpk_ns: (!mpk_ns.is_empty()).then(|| median(mpk_ns.clone())),
        process_ns: median(process_ns.clone()),
        mpk_ratio: (!mpk_ns.is_empty()).then(|| ratios(&mpk_ns, &direct_ns)),
        process_ratio: ratios(&process_ns, process_direct),
    })
}

/// The median time of `calls` calls that each fault (a null call) and leave the domain ready.
fn recovery_ns(backend: Backend, calls: usize, helper_cpu: Option<usize>) -> Result<f64, String> {
    use isolation::cases::broken;
    let config = broken::config().backend(BackendChoice::Require(backend)).heap_bytes(1 << 20).helper_cpu(helper_cpu);
    let mut d = Domain::new(config).map_err(|e| format!("recovery: {e}"))?;
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        if d.call(&0u64, &[], broken::null_call).is_ok() {
            return Err(format!("recovery: a null call in the {backend} backend returned"));
        }
        times.push(start.elapsed().as_secs_f64() * 1e9);
    }
    if d.call(&0u64, &[1], broken::sum).map(|r| r.value) != Ok(1) {
        return Err(format!("recovery: the {backend} domain does not work after its violations"));
    }
    Ok(median(times))
}

fn pin(cpu: usize) -> Result<(), String> {
    platform::sched::pin_current_thread(cpu).map_err(|e| format!("pinning the bench to CPU {cpu}: {e}"))
}

fn domain_calls(d: &mut Domain, input: &[u8], in_place: bool, function: fn(&u64, &mut Io<'_>) -> u64, n: usize) {
    if in_place {
        d.input_area()[..input.len()].copy_from_slice(input);
    }
    for _ in 0..n {
        let reply =
            if in_place { d.call_prepared(&0u64, input.len(), function) } else { d.call(&0u64, input, function) };
        match reply {
            Ok(r) => {
                std::hint::black_box(r.value);
            }
            Err(v) => panic!("a measured call failed: {v}"),
        }
    }
}

/// Calls per timing so that the direct route takes about `window` (at least one).
fn calibrate(f: &mut dyn FnMut(usize), window: Duration) -> usize {
    let mut n = 1;
    loop {
        let start = Instant::now();
        f(n);
        let took = start.elapsed();
        if took >= window / 4 || n >= 1 << 24 {
            let per = took.as_secs_f64() / n as f64;
            return ((window.as_secs_f64() / per.max(1e-9)) as usize).clamp(1, 1 << 26);
        }
        n *= 4;
    }
}

/// Nanoseconds per call over `n` calls.
fn time(f: &mut dyn FnMut(usize), n: usize) -> f64 {
    let start = Instant::now();
    f(n);
    start.elapsed().as_secs_f64() * 1e9 / n as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn spread(v: Vec<f64>) -> (f64, f64, f64) {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (median(v), min, max)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}
