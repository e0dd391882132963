//! The benchmark harness: any driver that follows the command-line contract
//! (`<command…> <restricted|const|flexible> <BDF-in> <BDF-out> --sysfs DIR`, SIGTERM → summary
//! line and exit 0), measured on nicsim.
//!
//! Two measures per driver and model:
//! - **RFC 2544 throughput and latency** ([`rfc2544()`]): nicsim offers frames of one size into
//!   both ports at a set rate for a trial time; the driver passes a trial if both sinks counted
//!   every frame offered (or all but the loss tolerance). The line rate is tried first, then a
//!   binary search (RFC 2544 section 26.1). A trial in which nicsim fell behind the rate asked
//!   for (it skipped over 1% of the frames owed) tested nicsim, not the driver, and is run
//!   again, up to three times; then the rate counts as failed and the figure is labelled as
//!   limited by nicsim. Latency (section 26.2) is nicsim's generator-to-sink time at 10% to
//!   100% of the throughput found.
//! - **instructions per forwarded packet** ([`instructions()`]): the driver runs under
//!   valgrind's callgrind with collection switched on only inside its forwarding loop
//!   (`--toggle-collect`), while nicsim offers line rate so that every poll finds a full batch;
//!   instructions are divided by the frames both sinks counted. Valgrind counts instructions
//!   exactly, so this is the deterministic measure on a noisy machine; its cache and branch
//!   simulation give an estimate of cycles ([`callgrind::Events::estimated_cycles`]).

#![forbid(unsafe_code)]

pub mod attribution;
pub mod callgrind;
pub mod chaos;
pub mod host;
pub mod isolation;
pub mod kernel_trace;
pub mod l2fwd;
pub mod queues;
pub mod results;
pub mod rfc2544;
pub mod rss;
pub mod vfio;
pub mod virtio;
pub mod xdp;

use callgrind::Events;
use nicsim::control::{PortStats, Stats};
use nicsim::session::{Session, SessionOptions};
use nicsim::wire::{line_rate_pps, TrafficSpec};
use platform::Reaped;
use rfc2544::{Found, LoadLatency, Search, Trial};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The CPU nicsim's engine (and this harness) runs on; the driver gets the other one.
pub const NICSIM_CPU: usize = 0;
pub const DRIVER_CPU: usize = 1;

/// A driver binary and how to call it.
#[derive(Debug, Clone)]
pub struct Driver {
    /// Name in reports (e.g. `rust`, `c-clang`).
    pub name: String,
    /// The command before the mode argument, e.g. `["target/release/safenic", "fwd"]`;
    /// `{mode}` in a word is replaced by the model (`drivers/c/build/clang/safenic-c-{mode}`).
    pub command: Vec<String>,
    /// callgrind `--toggle-collect` pattern of the forwarding loop; `{mode}` is replaced by the
    /// model's name. Every driver names its loops `forward_restricted`, `forward_const` and
    /// `forward_flexible`.
    pub hot_function: String,
    /// JIT-compiled: its loops are found through the runtime's perf map, not by symbol
    /// (the manifest's `perf_map`).
    pub perf_map: bool,
}

impl Driver {
    /// `NAME=COMMAND…` (words separated by spaces), as given on the command line.
    pub fn parse(spec: &str) -> Result<Driver, String> {
        let (name, command) = spec.split_once('=').ok_or_else(|| {
            format!("--driver {spec}: expected NAME=COMMAND, e.g. c-clang=drivers/c/build/clang/safenic-c-{{mode}} fwd")
        })?;
        let command: Vec<String> = command.split_whitespace().map(str::to_string).collect();
        if name.is_empty() || command.is_empty() {
            return Err(format!("--driver {spec}: expected NAME=COMMAND"));
        }
        Ok(Driver { name: name.to_string(), command, hot_function: "*forward_{mode}*".into(), perf_map: false })
    }
}

/// The three driver models of the contract.
pub const MODES: [&str; 3] = ["restricted", "const", "flexible"];

/// What callgrind counted in the forwarding loop, and the packets it forwarded meanwhile.
#[derive(Debug, Clone, Copy)]
pub struct Instructions {
    /// Every event: the instructions (`ir`) and what the cycle estimate needs
    /// ([`Events::estimated_cycles`]).
    pub events: Events,
    pub packets: u64,
    /// Whether the driver was the limit under callgrind all along (in each tenth of the run
    /// but the first and the last, more than 1% of the frames offered found no descriptor),
    /// so that its loop did not poll an empty ring. If not, the count may include idle polls
    /// and overstate the cost per packet; the bench measures again, up to
    /// [`rfc2544::TRIES`] runs, and labels the figure if no run was saturated.
    pub saturated: bool,
}

impl Instructions {
    pub fn per_packet(&self) -> f64 {
        self.events.ir as f64 / self.packets.max(1) as f64
    }

    /// Estimated cycles per forwarded packet.
    pub fn cycles_per_packet(&self) -> f64 {
        self.events.estimated_cycles() as f64 / self.packets.max(1) as f64
    }
}

/// A nicsim with two ports, its engine on [`NICSIM_CPU`], in a scratch directory that goes
/// with it (the profiles callgrind writes included), and the driver under measure.
struct Harness {
    sim: Session,
}

impl Harness {
    fn start(tag: &str) -> Result<Harness, String> {
        Self::start_with(tag, SessionOptions::default())
    }

    /// As [`Self::start`], with nicsim's `opts` (its engine still on [`NICSIM_CPU`]).
    fn start_with(tag: &str, opts: SessionOptions) -> Result<Harness, String> {
        // This thread wakes up to read statistics; on the driver's core it would preempt it.
        platform::sched::pin_current_thread(NICSIM_CPU).map_err(|e| format!("pinning the harness: {e}"))?;
        let opts = SessionOptions { cpu: Some(NICSIM_CPU), ..opts };
        Ok(Harness { sim: Session::start("safenic-bench", tag, &opts)? })
    }

    fn stats(&self) -> Result<Stats, String> {
        self.sim.stats()
    }

    /// Where callgrind writes the profile of process `pid` (`%p` for callgrind's own pattern),
    /// in the session's scratch directory.
    fn profile_of(&self, pid: &str) -> std::path::PathBuf {
        self.sim.root().with_file_name(format!("callgrind.out.{pid}"))
    }

    /// Line-rate traffic of minimum-size frames from both ports, in `flows` flows.
    fn start_traffic(&self, flows: u32) -> Result<(), String> {
        (0..2).try_for_each(|port| self.sim.start_traffic(port, TrafficSpec { flows, ..TrafficSpec::default() }))
    }

    fn stop_traffic(&self) -> Result<(), String> {
        (0..2).try_for_each(|port| self.sim.stop_traffic(port).map(drop))
    }

    /// Spawns `prefix… command… mode A B --sysfs DIR` on [`DRIVER_CPU`].
    fn spawn(&self, prefix: &[String], driver: &Driver, mode: &str) -> Result<Reaped, String> {
        self.spawn_with(prefix, driver, mode, &[])
    }

    /// [`Self::spawn`] with `extra` arguments after the ports.
    fn spawn_with(&self, prefix: &[String], driver: &Driver, mode: &str, extra: &[String]) -> Result<Reaped, String> {
        // `{mode}` in the command picks a one-binary-per-model driver's binary.
        let words: Vec<String> =
            prefix.iter().cloned().chain(driver.command.iter().map(|w| w.replace("{mode}", mode))).collect();
        let child = Reaped::spawn(
            platform::process::die_with_parent(&mut Command::new(&words[0]))
                .args(&words[1..])
                .args([mode, &nicsim::sysfs::port_address(0), &nicsim::sysfs::port_address(1)])
                .args(extra)
                .arg("--sysfs")
                .arg(self.sim.devices())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .map_err(|e| format!("starting {}: {e}", words[0]))?;
        // (Not conditional on available_cpus(): this thread is pinned, so it would say 1.)
        platform::sched::pin_process(child.id(), DRIVER_CPU)
            .map_err(|e| format!("pinning the driver to CPU {DRIVER_CPU}: {e} (the harness needs two CPUs)"))?;
        Ok(child)
    }

    /// Waits until the driver has the receive queues of both ports and a TX queue on each up.
    fn wait_ready(&self, child: &mut Reaped, timeout: Duration) -> Result<(), String> {
        let alive = || match child.try_wait() {
            Ok(Some(status)) => Err(format!("the driver exited during bring-up with {status}: {}", child.output())),
            _ => Ok(()),
        };
        self.sim.wait_ports_up(timeout, alive).map(drop)
    }
}

/// SIGTERM, then waits for a clean exit; returns what the driver printed.
fn terminate(child: Reaped, timeout: Duration) -> Result<String, String> {
    let out = child.terminate(timeout).map_err(|e| format!("stopping the driver: {e}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        Ok(text.trim().to_string())
    } else {
        Err(format!("the driver exited with {} after SIGTERM: {}", out.status, text.trim()))
    }
}

/// How much a per-port counter grew from `s0` to `s1`, both ports together.
fn growth(s0: &Stats, s1: &Stats, f: fn(&PortStats) -> u64) -> u64 {
    s0.ports.iter().zip(&s1.ports).map(|(a, b)| f(b) - f(a)).sum()
}

/// nicsim's own ceiling (`nicsim bench`, with `nicsim_exe` as the reflecting peer) over
/// `seconds` at 10 Gb/s: Mpps into both ports' receive rings.
pub fn nicsim_ceiling(nicsim_exe: &Path, seconds: f64) -> Result<f64, String> {
    Ok(nicsim::ceiling::measure(nicsim_exe, seconds, 10.0)?.total_into_rx_rings_mpps)
}

/// RFC 2544 throughput and latency of one driver in one model at one frame size.
#[derive(Debug, Clone)]
pub struct Rfc2544 {
    /// Bytes per frame with FCS.
    pub frame_size: usize,
    /// RFC 2544's zero-loss throughput with nothing set aside (or the loss tolerance asked
    /// for), then the NDR and the PDR with the trials the host failed set aside
    /// ([`rfc2544::NDR`], [`rfc2544::PDR`]), from one search.
    pub found: Found,
    pub ndr: Found,
    pub pdr: Found,
    /// At 10% to 100% of the NDR; none if it was zero.
    pub latency: Vec<LoadLatency>,
}

/// RFC 2544 throughput of `driver` in `mode` at each of `frame_sizes` (with FCS), both
/// directions at once, then its latency at 10% to 100% of it; one bring-up for all.
pub fn rfc2544(driver: &Driver, mode: &str, frame_sizes: &[usize], search: &Search) -> Result<Vec<Rfc2544>, String> {
    let session = Harness::start(&format!("{}-{mode}", driver.name))?;
    let mut child = session.spawn(&[], driver, mode)?;
    session.wait_ready(&mut child, Duration::from_secs(30))?;
    let gbps = session.sim.info()?.link_gbps;
    let trace = kernel_trace::CoreTrace::start(DRIVER_CPU)?;
    let watched = Watched { pid: child.id(), trace, last_windows: Default::default() };
    let measured = frame_sizes.iter().map(|&size| session.rfc2544_at(size, gbps, search, &watched)).collect();
    terminate(child, Duration::from_secs(10))?;
    measured
}

impl Harness {
    fn rfc2544_at(&self, frame_size: usize, gbps: f64, search: &Search, w: &Watched) -> Result<Rfc2544, String> {
        let line = 2.0 * line_rate_pps(frame_size - FCS, gbps);
        let zero_loss = rfc2544::Goal { loss_tolerance: search.loss_tolerance, sets_aside_host_stalls: false };
        let goals = [zero_loss, rfc2544::NDR, rfc2544::PDR];
        let mut found =
            rfc2544::searches(line, search, &goals, |rate| self.trial(rate, frame_size, search.trial_seconds, w))?;
        let (pdr, ndr, found) = (found.remove(2), found.remove(1), found.remove(0));
        let mut latency = Vec::new();
        for percent in rfc2544::LOAD_PERCENTS.into_iter().filter(|_| ndr.rate_pps > 0.0) {
            let rate = ndr.rate_pps * f64::from(percent) / 100.0;
            let tries = rfc2544::until_nicsim_keeps_up(|| self.trial(rate, frame_size, search.trial_seconds, w))?;
            // The latency histograms are those of the last trial (each starts from zero).
            let stats = self.stats()?;
            let all: Vec<_> = stats.ports.iter().map(|p| p.latency_ns.clone()).collect();
            let windows = w.last_windows.borrow();
            let outside: Option<Vec<_>> = stats
                .ports
                .iter()
                .map(|p| attribution::latency_outside(p, stats.monotonic_start_ns, &windows))
                .collect();
            let outside = outside.map(|o| rfc2544::Percentiles::worst(&o));
            latency.push(LoadLatency::of(percent, tries[tries.len() - 1].clone(), &all, outside));
        }
        Ok(Rfc2544 { frame_size, found, ndr, pdr, latency })
    }

    /// One trial: `rate_pps` (both directions) of `frame_size`-byte frames for `seconds`,
    /// counted from zero, until every frame has come out or is lost for good.
    fn trial(&self, rate_pps: f64, frame_size: usize, seconds: f64, w: &Watched) -> Result<Trial, String> {
        self.sim.reset_counters()?;
        let spec = TrafficSpec {
            rate_pps: Some(rate_pps / 2.0),
            size: frame_size - FCS,
            duration_ms: Some(((seconds * 1e3).round() as u64).max(1)),
            ..TrafficSpec::default()
        };
        // The driver's core is watched through the kernel's trace events, nicsim's by its
        // engine's own loop (docs/results.md).
        w.trace.begin()?;
        let counted = self.run_trial(spec, seconds);
        let mut windows = w.trace.end(&threads_of(w.pid))?;
        let last = counted?;
        windows.extend(last.late_doorbells.stalls.iter().map(|&(start, end)| host::HostWindow {
            cpu: NICSIM_CPU,
            start_ns: last.monotonic_start_ns + start,
            end_ns: last.monotonic_start_ns + end,
            cause: "nicsim's core held".into(),
        }));
        let sum = |f: fn(&PortStats) -> u64| last.ports.iter().map(f).sum::<u64>();
        let blame = attribution::attribute(&last, &windows);
        let longest_us = windows.iter().map(|w| w.end_ns - w.start_ns).max().unwrap_or(0) as f64 / 1e3;
        let count = windows.len() as u32;
        *w.last_windows.borrow_mut() = windows;
        Ok(Trial {
            rate_pps,
            offered: sum(|p| p.generated),
            received: sum(|p| p.sink_packets),
            skipped: sum(|p| p.generator_skipped),
            no_descriptor: sum(|p| p.device.qprdc.iter().sum()),
            missed: sum(|p| p.device.mpc),
            tail_stall_drops: blame.tail_stall_drops,
            host_stall_drops: blame.host_stall_drops,
            host_stalls: count,
            host_stall_causes: blame.causes,
            longest_host_stall_us: longest_us,
        })
    }

    /// The traffic of one trial, and the statistics once it has drained.
    fn run_trial(&self, spec: TrafficSpec, seconds: f64) -> Result<Stats, String> {
        for port in 0..2 {
            self.sim.start_traffic(port, spec.clone())?;
        }
        pause(Duration::from_secs_f64(seconds))?;
        // Drained when the generators have stopped, nicsim holds no frame (packet buffers, RX
        // and TX rings) and the sinks counted nothing new for DRAIN: the rings hold at most a
        // few microseconds of traffic at line rate. A driver held off its core longer than
        // DRAIN leaves frames in the rings, which the next trial would count as its own.
        let deadline = Instant::now() + Duration::from_secs(2);
        let received = |s: &Stats| s.ports.iter().map(|p| p.sink_packets).sum::<u64>();
        let held = |s: &Stats| {
            s.ports.iter().map(|p| p.in_flight.packet_buffer + p.in_flight.rx_ring + p.in_flight.tx_ring).sum::<u64>()
        };
        let mut last = self.stats()?;
        loop {
            pause(DRAIN)?;
            let s = self.stats()?;
            let drained =
                s.ports.iter().all(|p| !p.generator_active) && held(&s) == 0 && received(&s) == received(&last);
            last = s;
            if drained || Instant::now() > deadline {
                return Ok(last);
            }
        }
    }
}

/// The driver under measure: its process, and the trace of its core.
struct Watched {
    pid: u32,
    trace: kernel_trace::CoreTrace,
    /// The host stalls of the last trial.
    last_windows: std::cell::RefCell<Vec<host::HostWindow>>,
}

/// The threads of process `pid` (just the process if they cannot be listed).
fn threads_of(pid: u32) -> Vec<u32> {
    let listed = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect::<Vec<u32>>());
    listed.ok().filter(|t| !t.is_empty()).unwrap_or_else(|| vec![pid])
}

/// Bytes of the frame check sequence, which RFC 2544's frame sizes include and nicsim's
/// frame lengths do not.
const FCS: usize = 4;

/// Sleeps for `d`, or less if SIGINT or SIGTERM arrived (once the termination flag of
/// [`platform::signals`] is installed), in which case the measurement stops with an error: the
/// caller's harness then stops the driver and removes its files as it goes out of scope.
fn pause(d: Duration) -> Result<(), String> {
    let until = Instant::now() + d;
    loop {
        if platform::signals::terminate_requested() {
            return Err("interrupted: the driver was stopped and nicsim's files removed".into());
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// How long the sinks must count nothing new after a trial for it to be over.
const DRAIN: Duration = Duration::from_millis(10);

/// Instructions per forwarded packet of `driver` in `mode`, under callgrind for `seconds`;
/// callgrind's profile is copied to `keep` if given (for `callgrind_annotate`).
pub fn instructions(driver: &Driver, mode: &str, seconds: f64, keep: Option<&Path>) -> Result<Instructions, String> {
    let session = Harness::start(&format!("{}-{mode}-cg", driver.name))?;
    let how = Counting { mode, extra: &[], saturated: rings_overflowed, vfio: None, flows: 1 };
    let (mut counted, mut profile) = count_instructions(&session, driver, &how, seconds)?;
    let mut runs = 1;
    while !counted.saturated && runs < rfc2544::TRIES {
        eprintln!("bench: {} {mode} was not saturated under callgrind in run {runs}; measuring again", driver.name);
        (counted, profile) = count_instructions(&session, driver, &how, seconds)?;
        runs += 1;
    }
    if let Some(keep) = keep {
        std::fs::copy(&profile, keep).map_err(|e| format!("copying the profile to {}: {e}", keep.display()))?;
    }
    Ok(counted)
}

/// Whether a port's receive rings overflowed in a slice (`a` to `b`): more than 1 % of the
/// frames offered found no descriptor, so the driver, not nicsim, was the limit. (Each queue
/// counts in a QPRDC register of its own when the driver spreads frames over several.)
fn rings_overflowed(a: &PortStats, b: &PortStats) -> bool {
    let drops = |p: &PortStats| p.device.qprdc.iter().sum::<u64>();
    (drops(b) - drops(a)) * 100 > b.generated - a.generated
}

/// How a driver is run and judged under callgrind: its model, arguments after the ports, and
/// what says, per port and slice of the run, that the driver was the limit.
struct Counting<'a> {
    mode: &'a str,
    extra: &'a [String],
    saturated: fn(&PortStats, &PortStats) -> bool,
    /// Run through VFIO: these words (`nicsim exec --vfio … --`, [`vfio::through_vfio`])
    /// go before valgrind, and the profile is written to a directory the driver's user may
    /// write.
    vfio: Option<&'a vfio::Through>,
    /// Flows of the generators' traffic (RSS spreads them over the driver's queues).
    flows: u32,
}

/// One run of `driver` under callgrind for `seconds`: what it counted, and its profile's path.
fn count_instructions(
    session: &Harness,
    driver: &Driver,
    how: &Counting<'_>,
    seconds: f64,
) -> Result<(Instructions, std::path::PathBuf), String> {
    let mode = how.mode;
    let out_dir = match how.vfio {
        Some(through) => through.fresh_profile_dir(session)?,
        None => session.profile_of("%p").parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    let mut prefix = vec![
        "valgrind".to_string(),
        "--tool=callgrind".to_string(),
        // Cache and branch simulation, for the cycle estimate. They also slow the driver down
        // (not its instruction count), so that it stays slower than nicsim and every poll
        // finds a full batch.
        "--cache-sim=yes".to_string(),
        "--branch-sim=yes".to_string(),
        // Per instruction, so that `callgrind_annotate` and KCachegrind can show the machine code.
        "--dump-instr=yes".to_string(),
        // One profile per process: a driver that forks (the Rust driver's keeper) would have
        // the child's profile, with what was counted before the fork, overwrite its own.
        format!("--callgrind-out-file={}", out_dir.join("callgrind.out.%p").display()),
    ];
    if driver.perf_map {
        // The loop is counted from the whole profile afterwards (`Events::in_ranges`); `env`
        // execs valgrind, so the driver keeps the PID its perf map is named after.
        prefix.splice(0..0, ["env".to_string(), "COMPlus_PerfMapEnabled=1".to_string()]);
    } else {
        prefix.push(format!("--toggle-collect={}", driver.hot_function.replace("{mode}", mode)));
    }
    if let Some(through) = how.vfio {
        prefix.splice(0..0, through.words(session.sim.root()));
    }
    // Traffic first, so the loop finds full rings from its first iteration: idle polls would
    // count instructions without packets.
    let before = session.stats()?;
    session.start_traffic(how.flows)?;
    let mut child = session.spawn_with(&prefix, driver, mode, how.extra).map_err(|e| {
        if e.contains("No such file") {
            format!("{e}: install valgrind (scripts/setup does)")
        } else {
            e
        }
    })?;
    let driver_pid = child.id();
    let perf_maps = PerfMaps::of(driver_pid);
    session.wait_ready(&mut child, Duration::from_secs(120))?;
    // Saturation is judged in slices of a tenth of the run, away from the start-up, when
    // frames flood the rings before the loop runs: in every slice both rings must have
    // overflowed. A slice without drops may have let the loop drain the ring and poll it
    // empty (nicsim stalled), which a judgement over the whole run would miss.
    let slice = Duration::from_secs_f64(seconds / 10.0);
    pause(slice)?;
    let mut saturated = true;
    let mut last = session.stats()?;
    for _ in 0..8 {
        pause(slice)?;
        let now = session.stats()?;
        saturated &= last.ports.iter().zip(&now.ports).all(|(a, b)| (how.saturated)(a, b));
        last = now;
    }
    pause(slice)?;
    // Stop while traffic still flows, for the same reason.
    terminate(child, Duration::from_secs(60))?;
    session.stop_traffic()?;
    let s = session.stats()?;
    let packets = growth(&before, &s, |p| p.sink_packets);
    // `valgrind` (or `env`, which execs it) is the driver's own process; under `nicsim exec`
    // its only profile is in a directory of its own.
    let out_file = match how.vfio {
        Some(_) => vfio::only_profile(&out_dir)?,
        None => session.profile_of(&driver_pid.to_string()),
    };
    let text = std::fs::read_to_string(&out_file).map_err(|e| format!("reading {}: {e}", out_file.display()))?;
    let events = if driver.perf_map {
        perf_maps.loop_events(&text, mode)?
    } else {
        Events::parse(&text).ok_or_else(|| format!("no event totals in {}", out_file.display()))?
    };
    if events.ir == 0 {
        return Err(format!(
            "callgrind counted no instructions in {}: is the forwarding loop named forward_{mode}?",
            driver.hot_function.replace("{mode}", mode)
        ));
    }
    Ok((Instructions { events, packets, saturated }, out_file))
}

/// The perf map a .NET runtime writes for process `pid` (and its companion), removed when
/// this goes out of scope, however the measurement ends.
struct PerfMaps {
    map: std::path::PathBuf,
    info: std::path::PathBuf,
}

impl PerfMaps {
    fn of(pid: u32) -> PerfMaps {
        let tmp = std::env::temp_dir();
        PerfMaps { map: tmp.join(format!("perf-{pid}.map")), info: tmp.join(format!("perfinfo-{pid}.map")) }
    }

    /// The events of `forward_<mode>` and its callees in callgrind's whole-run profile `text`.
    fn loop_events(&self, text: &str, mode: &str) -> Result<Events, String> {
        let map = std::fs::read_to_string(&self.map).map_err(|e| {
            format!("reading the driver's perf map {}: {e} (is it a .NET program?)", self.map.display())
        })?;
        let ranges = callgrind::perf_map_ranges(&map, &format!("::forward_{mode}("));
        if ranges.is_empty() {
            return Err(format!("no method forward_{mode} in the perf map {}", self.map.display()));
        }
        Events::in_ranges(text, &ranges).ok_or_else(|| "callgrind's profile has no instruction positions".into())
    }
}

impl Drop for PerfMaps {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.map);
        let _ = std::fs::remove_file(&self.info);
    }
}

/// The drivers `safenic bench` measures: every entry of the driver manifest with
/// `bench = true`, its command resolved against the repository `root`, with `safenic` as
/// `{safenic}`.
pub fn drivers_of(m: &manifest::Manifest, root: &Path, safenic: &Path) -> Vec<Driver> {
    m.drivers
        .iter()
        .filter(|d| d.bench)
        .map(|d| Driver {
            name: d.name.clone(),
            command: d.command_words(root, safenic),
            hot_function: "*forward_{mode}*".into(),
            perf_map: d.perf_map,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_specs_parse_or_say_what_is_expected() {
        let d = Driver::parse("c-clang=drivers/c/build/fwd-clang --quiet").unwrap();
        assert_eq!(d.name, "c-clang");
        assert_eq!(d.command, ["drivers/c/build/fwd-clang", "--quiet"]);
        assert!(Driver::parse("no-equals").unwrap_err().contains("NAME=COMMAND"));
        assert!(Driver::parse("=cmd").is_err());
        assert!(Driver::parse("name=").is_err());
    }
}
