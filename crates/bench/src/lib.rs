//! The benchmark harness: any driver that follows the command-line contract
//! (`<command…> <restricted|const|flexible> <BDF-in> <BDF-out> --sysfs DIR`, SIGTERM → summary
//! line and exit 0), measured on nicsim.
//!
//! Two measures per driver and model:
//! - **throughput**: nicsim generates 64-byte frames at line rate into both ports; the
//!   forwarded rate is what both sinks count per second. Whether the driver or nicsim was the
//!   limit is read from nicsim's counters: a driver that cannot keep up leaves frames without
//!   a free descriptor (counted as no-descriptor drops); if there are (almost) none, nicsim
//!   offered no more than the driver forwarded, and nicsim was the limit.
//! - **instructions per forwarded packet**: the driver runs under valgrind's callgrind with
//!   collection switched on only inside its forwarding loop (`--toggle-collect`), while nicsim
//!   offers line rate so that every poll finds a full batch; instructions are divided by the
//!   frames both sinks counted. Valgrind counts instructions exactly, so this is the
//!   deterministic measure on a noisy machine.

#![forbid(unsafe_code)]

pub mod callgrind;
pub mod results;

use callgrind::Events;
use nicsim::control::{PortStats, Stats};
use nicsim::session::{Session, SessionOptions};
use nicsim::wire::TrafficSpec;
use platform::Reaped;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

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
        Ok(Driver { name: name.to_string(), command, hot_function: "*forward_{mode}*".into() })
    }
}

/// The three driver models of the contract.
pub const MODES: [&str; 3] = ["restricted", "const", "flexible"];

/// Forwarding rate of one driver and model.
#[derive(Debug, Clone)]
pub struct Throughput {
    /// Frames forwarded per second, both directions together, in millions.
    pub forwarded_mpps: f64,
    /// Frames nicsim generated per second, both ports together.
    pub offered_mpps: f64,
    /// Frames that found no free RX descriptor, per second.
    pub no_descriptor_mpps: f64,
    /// Frames the line rate owed that nicsim never generated because its engine fell behind
    /// (`generator_skipped`), per second: nicsim's share of the limit.
    pub skipped_mpps: f64,
    pub limited_by: Limit,
    pub seconds: f64,
    /// Windows measured to get this one (see [`MAX_WINDOWS`]): more than one when nicsim was
    /// the limit of the earlier ones.
    pub windows: usize,
}

/// Throughput windows one measurement may take. A window in which nicsim fell behind (on a
/// virtual machine the host can halve what the two cores get, from one minute to the next)
/// measured nicsim, not the driver, so the driver, still running, is measured again.
pub const MAX_WINDOWS: usize = 3;

/// Measures windows with `window` until nicsim keeps up in one, at most [`MAX_WINDOWS`];
/// returns that one, or if nicsim fell behind in every window, the one in which the driver
/// forwarded the most, with the number of windows measured either way.
pub fn window_where_nicsim_kept_up(
    mut window: impl FnMut() -> Result<Throughput, String>,
) -> Result<Throughput, String> {
    let mut best = window()?;
    let mut last_skipped = best.skipped_mpps;
    let mut n = 1;
    while best.limited_by.nicsim_fell_behind() && n < MAX_WINDOWS {
        eprintln!(
            "bench: nicsim fell behind in window {n} (it skipped {last_skipped:.2} Mpps of the line rate); measuring again"
        );
        let t = window()?;
        n += 1;
        last_skipped = t.skipped_mpps;
        if !t.limited_by.nicsim_fell_behind() || t.forwarded_mpps > best.forwarded_mpps {
            best = t;
        }
    }
    Ok(Throughput { windows: n, ..best })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The driver left more than 1% of what nicsim offered without a descriptor, and nicsim
    /// kept up with the line rate.
    Driver,
    /// The driver took what nicsim offered, but nicsim skipped more than 1% of the line rate:
    /// a faster nicsim would have measured more.
    Nicsim,
    /// Both at once: nicsim fell behind and the driver still dropped. The host slowed both
    /// cores (or stopped them), and the window says little about either.
    DriverAndNicsim,
    /// The driver forwarded (almost) everything at line rate.
    LineRate,
}

impl Limit {
    /// The limit of a run from what nicsim offered, what found no descriptor and what nicsim
    /// skipped (any unit).
    pub fn of(offered: f64, no_descriptor: f64, skipped: f64) -> Limit {
        let drops = no_descriptor * 100.0 > offered;
        let behind = skipped * 100.0 > offered + skipped;
        match (drops, behind) {
            (true, false) => Limit::Driver,
            (false, true) => Limit::Nicsim,
            (true, true) => Limit::DriverAndNicsim,
            (false, false) => Limit::LineRate,
        }
    }

    /// Whether nicsim fell behind the line rate in the window, so that it measured nicsim (or
    /// the host) rather than only the driver.
    pub fn nicsim_fell_behind(self) -> bool {
        matches!(self, Limit::Nicsim | Limit::DriverAndNicsim)
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Limit::Driver => "driver",
            Limit::Nicsim => "nicsim",
            Limit::DriverAndNicsim => "driver and nicsim",
            Limit::LineRate => "line rate",
        })
    }
}

/// What callgrind counted in the forwarding loop, and the packets it forwarded meanwhile.
#[derive(Debug, Clone, Copy)]
pub struct Instructions {
    /// Every event: the instructions (`ir`) and what the cycle estimate needs
    /// ([`Events::estimated_cycles`]).
    pub events: Events,
    pub packets: u64,
    /// Whether the driver was the limit under callgrind (more than 1% of the frames offered in
    /// the middle half of the run found no descriptor), so that its loop never polled an empty
    /// ring. If not, the count includes idle polls and overstates the cost per packet.
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
        // This thread wakes up to read statistics; on the driver's core it would preempt it.
        platform::sched::pin_current_thread(NICSIM_CPU).map_err(|e| format!("pinning the harness: {e}"))?;
        let opts = SessionOptions { cpu: Some(NICSIM_CPU), ..SessionOptions::default() };
        Ok(Harness { sim: Session::start("safenic-bench", tag, &opts)? })
    }

    fn stats(&self) -> Result<Stats, String> {
        self.sim.stats()
    }

    fn start_traffic(&self) -> Result<(), String> {
        (0..2).try_for_each(|port| self.sim.start_traffic(port, TrafficSpec::default()))
    }

    fn stop_traffic(&self) -> Result<(), String> {
        (0..2).try_for_each(|port| self.sim.stop_traffic(port).map(drop))
    }

    /// Spawns `prefix… command… mode A B --sysfs DIR` on [`DRIVER_CPU`].
    fn spawn(&self, prefix: &[String], driver: &Driver, mode: &str) -> Result<Reaped, String> {
        // `{mode}` in the command picks a one-binary-per-model driver's binary.
        let words: Vec<String> =
            prefix.iter().cloned().chain(driver.command.iter().map(|w| w.replace("{mode}", mode))).collect();
        let child = Reaped::spawn(
            Command::new(&words[0])
                .args(&words[1..])
                .args([mode, &nicsim::sysfs::port_address(0), &nicsim::sysfs::port_address(1)])
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

fn mpps(n: u64, secs: f64) -> f64 {
    n as f64 / secs / 1e6
}

/// Forwarding rate of `driver` in `mode` over a window of `seconds`, after a warm-up of half
/// that, at most a second; more windows if nicsim was the limit ([`window_where_nicsim_kept_up`]).
pub fn throughput(driver: &Driver, mode: &str, seconds: f64) -> Result<Throughput, String> {
    let session = Harness::start(&format!("{}-{mode}", driver.name))?;
    let mut child = session.spawn(&[], driver, mode)?;
    session.wait_ready(&mut child, Duration::from_secs(30))?;
    session.start_traffic()?;
    std::thread::sleep(Duration::from_secs_f64((seconds / 2.0).min(1.0)));
    let result = window_where_nicsim_kept_up(|| {
        let s0 = session.stats()?;
        std::thread::sleep(Duration::from_secs_f64(seconds));
        let s1 = session.stats()?;
        Ok(window_between(&s0, &s1))
    });
    session.stop_traffic()?;
    terminate(child, Duration::from_secs(10))?;
    result
}

/// What one throughput window measured, from nicsim's statistics at its start and end.
fn window_between(s0: &Stats, s1: &Stats) -> Throughput {
    let secs = (s1.elapsed_ns - s0.elapsed_ns) as f64 / 1e9;
    let delta = |f: fn(&PortStats) -> u64| growth(s0, s1, f);
    let forwarded = delta(|p| p.sink_packets);
    let offered = delta(|p| p.generated);
    let no_descriptor = delta(|p| p.device.qprdc.iter().sum());
    let skipped = delta(|p| p.generator_skipped);
    Throughput {
        forwarded_mpps: mpps(forwarded, secs),
        offered_mpps: mpps(offered, secs),
        no_descriptor_mpps: mpps(no_descriptor, secs),
        skipped_mpps: mpps(skipped, secs),
        limited_by: Limit::of(offered as f64, no_descriptor as f64, skipped as f64),
        seconds: secs,
        windows: 1,
    }
}

/// Instructions per forwarded packet of `driver` in `mode`, under callgrind for `seconds`.
pub fn instructions(driver: &Driver, mode: &str, seconds: f64) -> Result<Instructions, String> {
    let session = Harness::start(&format!("{}-{mode}-cg", driver.name))?;
    // In the session's scratch directory, which goes with the session whatever happens.
    let out_file = session.sim.root().with_file_name("callgrind.out");
    count_instructions(&session, &out_file, driver, mode, seconds)
}

fn count_instructions(
    session: &Harness,
    out_file: &Path,
    driver: &Driver,
    mode: &str,
    seconds: f64,
) -> Result<Instructions, String> {
    let prefix = vec![
        "valgrind".to_string(),
        "--tool=callgrind".to_string(),
        // Cache and branch simulation, for the cycle estimate. They also slow the driver down
        // (not its instruction count), so that it stays slower than nicsim and every poll
        // finds a full batch.
        "--cache-sim=yes".to_string(),
        "--branch-sim=yes".to_string(),
        format!("--callgrind-out-file={}", out_file.display()),
        format!("--toggle-collect={}", driver.hot_function.replace("{mode}", mode)),
    ];
    // Traffic first, so the loop finds full rings from its first iteration: idle polls would
    // count instructions without packets.
    session.start_traffic()?;
    let mut child = session.spawn(&prefix, driver, mode).map_err(|e| {
        if e.contains("No such file") {
            format!("{e}: install valgrind (scripts/setup does)")
        } else {
            e
        }
    })?;
    session.wait_ready(&mut child, Duration::from_secs(120))?;
    // Saturation is judged over the middle of the run, away from the start-up, when frames
    // flood the rings before the loop runs.
    std::thread::sleep(Duration::from_secs_f64(seconds / 4.0));
    let s0 = session.stats()?;
    std::thread::sleep(Duration::from_secs_f64(seconds / 2.0));
    let s1 = session.stats()?;
    std::thread::sleep(Duration::from_secs_f64(seconds / 4.0));
    // Stop while traffic still flows, for the same reason.
    terminate(child, Duration::from_secs(60))?;
    session.stop_traffic()?;
    let s = session.stats()?;
    let packets: u64 = s.ports.iter().map(|p| p.sink_packets).sum();
    let (offered, no_descriptor) = (growth(&s0, &s1, |p| p.generated), growth(&s0, &s1, |p| p.device.qprdc[0]));
    let text = std::fs::read_to_string(out_file).map_err(|e| format!("reading {}: {e}", out_file.display()))?;
    let events = Events::parse(&text).ok_or_else(|| format!("no event totals in {}", out_file.display()))?;
    if events.ir == 0 {
        return Err(format!(
            "callgrind counted no instructions in {}: is the forwarding loop named forward_{mode}?",
            driver.hot_function.replace("{mode}", mode)
        ));
    }
    Ok(Instructions { events, packets, saturated: no_descriptor * 100 > offered })
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

    fn window(forwarded: f64, skipped: f64) -> Throughput {
        let offered = forwarded;
        Throughput {
            forwarded_mpps: forwarded,
            offered_mpps: offered,
            no_descriptor_mpps: 0.0,
            skipped_mpps: skipped,
            limited_by: Limit::of(offered, 0.0, skipped),
            seconds: 1.0,
            windows: 1,
        }
    }

    /// Runs [`window_where_nicsim_kept_up`] over `windows`; returns its pick and how many
    /// windows it asked for.
    fn pick(windows: &[Throughput]) -> (Throughput, usize) {
        let mut asked = 0;
        let t = window_where_nicsim_kept_up(|| {
            asked += 1;
            windows.get(asked - 1).cloned().ok_or_else(|| "asked for one window too many".to_string())
        })
        .unwrap();
        (t, asked)
    }

    #[test]
    fn a_window_nicsim_limited_is_measured_again() {
        let line = window(29.7, 0.05);
        let behind = window(27.0, 2.7);
        let (t, asked) = pick(std::slice::from_ref(&line));
        assert_eq!((t.limited_by, t.windows, asked), (Limit::LineRate, 1, 1), "one window is enough");
        let (t, asked) = pick(&[behind.clone(), behind.clone(), line.clone()]);
        assert_eq!((t.limited_by, t.windows, asked), (Limit::LineRate, 3, 3));
        assert_eq!(t.forwarded_mpps, 29.7);
        // Every window behind: the best of them, still labelled as nicsim's limit.
        let (t, asked) = pick(&[behind.clone(), window(28.0, 1.7), behind.clone()]);
        assert_eq!((t.limited_by, t.windows, asked), (Limit::Nicsim, MAX_WINDOWS, MAX_WINDOWS));
        assert_eq!(t.forwarded_mpps, 28.0);
        // A driver-limited window is an answer even if an earlier one forwarded more; one in
        // which the driver dropped while nicsim fell behind is not.
        let drops = |skipped| {
            let t = Throughput { no_descriptor_mpps: 3.0, skipped_mpps: skipped, ..window(26.0, 0.0) };
            Throughput { limited_by: Limit::of(t.offered_mpps, t.no_descriptor_mpps, t.skipped_mpps), ..t }
        };
        let (t, _) = pick(&[behind.clone(), drops(0.0)]);
        assert_eq!((t.limited_by, t.forwarded_mpps, t.windows), (Limit::Driver, 26.0, 2));
        let (t, _) = pick(&[drops(3.8), behind, drops(0.0)]);
        assert_eq!((t.limited_by, t.forwarded_mpps, t.windows), (Limit::Driver, 26.0, 3));
    }
}
