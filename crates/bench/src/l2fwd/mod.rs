//! The Rust l2fwd of `crates/dpdk` beside DPDK's own C l2fwd, paired in one run
//! (`safenic bench-dpdk`, `make bench-dpdk`; docs/dpdk.md):
//! - **instructions and estimated cycles per forwarded packet** ([`instructions`]): each l2fwd
//!   under callgrind on DPDK's `net_null` devices (a pure CPU measure: the device makes and
//!   takes the frames) and on nicsim through DPDK's ixgbe driver, counted inside its
//!   forwarding loop only;
//! - **the overload test** ([`overload`]): frames offered faster than one lcore forwards them,
//!   on `net_null` and on nicsim through DPDK's ixgbe driver; frames forwarded per second, the
//!   receive burst fill and the transmit drops, counted the same way in both l2fwds.

mod on_nicsim;
pub mod overload;
pub mod profile;
mod report;

use crate::callgrind::Events;
use nicsim::wire::TrafficSpec;
use overload::Device;
use platform::Reaped;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Frames per receive burst: both l2fwds ask for 32 (`MAX_PKT_BURST`).
pub const BURST: u64 = 32;
/// The lcore that forwards; nicsim's engine and this harness keep CPU 0.
pub const LCORE: &str = "1";
/// What both l2fwds log (unbuffered) as an lcore starts forwarding.
const FORWARDING: &str = "L2FWD: entering main loop";
/// Both ports on one lcore, no statistics screen while measuring.
const APP: [&str; 7] = ["--", "-p", "0x3", "-q", "2", "-T", "0"];

/// `net_null` devices, no hugepages, no PCI: the CPU-bound comparison.
fn null_eal() -> Vec<String> {
    let eal = ["-l", LCORE, "--no-pci", "--no-huge", "-m", "512", "--no-shconf"];
    let ports = ["--vdev", "net_null0", "--vdev", "net_null1"];
    eal.iter().chain(&ports).chain(&APP).map(|s| s.to_string()).collect()
}

/// What to measure, and with what.
#[derive(Debug, Clone)]
pub struct Options {
    /// The Rust l2fwd (`crates/dpdk/examples/l2fwd`, a release build).
    pub rust: PathBuf,
    /// DPDK's C l2fwd (`scripts/build-dpdk-l2fwd`).
    pub c: PathBuf,
    /// `burst_counts.so` (crates/bench/csrc, built beside the C l2fwd).
    pub burst_counts: PathBuf,
    /// nicsim's binary, for `nicsim exec --uio`.
    pub nicsim: PathBuf,
    /// Seconds each l2fwd runs under callgrind.
    pub callgrind_seconds: u64,
    /// Seconds of the overload test's measured window (after a warm-up).
    pub overload_seconds: f64,
    /// Overload trials of each l2fwd on each device, the two alternating.
    pub repetitions: usize,
    /// Which of the two measures to take.
    pub measure_instructions: bool,
    pub measure_overload: bool,
}

/// What callgrind counted in one l2fwd's forwarding loop.
#[derive(Debug, Clone)]
pub struct Instructions {
    pub name: String,
    pub device: Device,
    pub packets: u64,
    /// Frames per receive burst: 32 (full) when l2fwd, not the device, is the limit.
    pub burst_fill: f64,
    /// Every instruction of the loop, DPDK's driver and mbuf code included.
    pub all: u64,
    /// The l2fwd binary's own instructions in the loop (the Rust l2fwd's shim included).
    pub own: u64,
    /// Estimated cycles of the whole loop ([`crate::callgrind::ESTIMATE_FORMULA`]).
    pub cycles: u64,
}

impl Instructions {
    pub fn per_packet(&self, of: fn(&Instructions) -> u64) -> f64 {
        of(self) as f64 / self.packets.max(1) as f64
    }
}

/// The Rust l2fwd with each crate for the Ethernet header, then DPDK's C l2fwd, under
/// callgrind on `net_null` for `seconds` each.
///
/// Packets are what the receive bursts returned, counted by `burst_counts.so` in both l2fwds
/// alike (its own instructions, in its own object, are left out); the Rust l2fwd's count at
/// exit must agree.
pub fn instructions(o: &Options) -> Result<Vec<Instructions>, String> {
    let mut rows = Vec::new();
    for (device, headers) in [(Device::Null, "smoltcp"), (Device::Null, "etherparse"), (Device::Nicsim, "smoltcp")] {
        let run = under_callgrind(o, device, &o.rust, "*forward_loop*", &["--headers", headers])?;
        let printed = total(&run.output, "Total packets received:").ok_or("the Rust l2fwd printed no totals")?;
        if printed != run.packets {
            return Err(format!(
                "the receive bursts returned {} frames, the Rust l2fwd counted {printed}",
                run.packets
            ));
        }
        rows.push(run.counted(device, &format!("Rust, {headers}"), &o.rust));
        if headers == "smoltcp" && device == Device::Nicsim {
            let run = under_callgrind(o, device, &o.c, "l2fwd_launch_one_lcore", &[])?;
            rows.push(run.counted(device, "C", &o.c));
        }
        if headers == "etherparse" {
            let run = under_callgrind(o, Device::Null, &o.c, "l2fwd_launch_one_lcore", &[])?;
            rows.push(run.counted(Device::Null, "C", &o.c));
        }
    }
    Ok(rows)
}

/// One l2fwd's run under callgrind.
struct Run {
    profile: profile::Profile,
    output: String,
    /// Frames the receive bursts returned, and the bursts.
    packets: u64,
    rx_calls: u64,
}

impl Run {
    fn counted(&self, device: Device, name: &str, binary: &Path) -> Instructions {
        let p = &self.profile;
        let of = |suffix: &str| -> u64 {
            p.ir_by_object.iter().filter(|(object, _)| object.ends_with(suffix)).map(|(_, ir)| ir).sum()
        };
        let file = binary.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let counter = p.events_of(COUNTER);
        Instructions {
            name: name.to_string(),
            device,
            packets: self.packets,
            burst_fill: self.packets as f64 / self.rx_calls.max(1) as f64,
            all: p.total() - counter.ir,
            own: of(file),
            cycles: p.cycles - counter.estimated_cycles(),
        }
    }
}

/// The object of the burst counter (crates/bench/csrc/burst_counts.c).
const COUNTER: &str = "burst_counts.so";

/// Runs `binary` (with `extra` options and the burst counter) under callgrind, collecting inside
/// `loop_fn` only, for `seconds` from the moment it starts forwarding (EAL's start under
/// valgrind takes seconds of its own), then stops it with SIGTERM as a user would.
fn under_callgrind(o: &Options, device: Device, binary: &Path, loop_fn: &str, extra: &[&str]) -> Result<Run, String> {
    let scratch = platform::fs::ScratchDir::new("l2fwd-bench", "callgrind")
        .map_err(|e| format!("a scratch directory under /dev/shm: {e}"))?;
    let totals = scratch.path().join("totals");
    // Valgrind passes LD_PRELOAD on to l2fwd; the counter brings its DPDK libraries along.
    let mut words: Vec<String> = vec![
        "env".into(),
        format!("LD_PRELOAD={}", o.burst_counts.display()),
        format!("SAFENIC_BURST_TOTALS={}", totals.display()),
        "valgrind".into(),
        "--tool=callgrind".into(),
        // Fair scheduling hands SIGTERM to the signal thread at once, not after many seconds.
        "--fair-sched=yes".into(),
        "--cache-sim=yes".into(),
        "--branch-sim=yes".into(),
        // One profile per process, so that a child could not overwrite l2fwd's (profile_in).
        format!("--callgrind-out-file={}", scratch.path().join("callgrind.out.%p").display()),
        format!("--toggle-collect={loop_fn}"),
    ];
    let (mut child, log_path, sim) = match device {
        Device::Null => {
            let log_path = scratch.path().join("output");
            let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
            let err = log.try_clone().map_err(|e| e.to_string())?;
            words.push(binary.display().to_string());
            words.extend(null_eal().into_iter().chain(extra.iter().map(|s| s.to_string())));
            let child =
                Reaped::spawn(Command::new(&words[0]).args(&words[1..]).stdin(Stdio::null()).stdout(log).stderr(err))
                    .map_err(|e| format!("valgrind: {e} (scripts/setup installs it)"))?;
            (child, log_path, None)
        }
        Device::Nicsim => {
            // EAL's default place for its memory is one valgrind does not give out.
            let eal = ["--base-virtaddr", "0x2000000000", "-m", "256"];
            let run = on_nicsim::start(o, &words, binary, (&eal, extra), &scratch)?;
            // Line rate into both ports: under valgrind l2fwd forwards far less, so every burst is full.
            (0..2).try_for_each(|port| run.sim.start_traffic(port, TrafficSpec::default()))?;
            let log_path = run.log_path().to_path_buf();
            (run.child, log_path, Some(run.sim))
        }
    };
    let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let forwarding = || read_log().contains(FORWARDING);
    wait_until(&mut child, binary, Duration::from_secs(300), &format!("`{FORWARDING}`"), forwarding)
        .map_err(|e| format!("under callgrind, {e}\n{}", read_log()))?;
    std::thread::sleep(Duration::from_secs(o.callgrind_seconds));
    let status = child.terminate(Duration::from_secs(120)).map_err(|e| e.to_string())?.status;
    drop(sim);
    if !status.success() {
        return Err(format!("{} under callgrind: {status}\n{}", binary.display(), read_log()));
    }
    let text = profile_in(scratch.path())?;
    let events = Events::parse(&text).ok_or("a callgrind file without totals")?;
    let counts = std::fs::read_to_string(&totals).map_err(|e| format!("{}: {e}", totals.display()))?;
    let (packets, rx_calls) =
        overload::received(&counts).ok_or_else(|| format!("{}: not burst_counts.so's totals", totals.display()))?;
    Ok(Run { profile: profile::parse(&text, events.estimated_cycles()), output: read_log(), packets, rx_calls })
}

/// The one callgrind profile in `dir`: l2fwd starts no process, and a second profile would
/// leave it unknown which one counted the loop.
fn profile_in(dir: &Path) -> Result<String, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let profiles: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("callgrind.out.")))
        .collect();
    match profiles.as_slice() {
        [one] => std::fs::read_to_string(one).map_err(|e| format!("{}: {e}", one.display())),
        _ => Err(format!(
            "{} callgrind profiles in {}, not one: did l2fwd start a process?",
            profiles.len(),
            dir.display()
        )),
    }
}

/// Waits up to `patience` for `done`, while `binary` (`child`) runs; an error naming `what`
/// if it exits or time runs out first.
fn wait_until(
    child: &mut Reaped,
    binary: &Path,
    patience: Duration,
    what: &str,
    done: impl Fn() -> bool,
) -> Result<(), String> {
    let deadline = Instant::now() + patience;
    while !done() {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("{} exited with {status} before {what}: {}", binary.display(), child.output()));
        }
        if Instant::now() > deadline {
            return Err(format!("{}: no {what} after {} s", binary.display(), patience.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// `label   N` from l2fwd's statistics screen, the last one printed.
fn total(text: &str, label: &str) -> Option<u64> {
    text.lines().rev().find_map(|l| l.strip_prefix(label)).and_then(|v| v.trim().parse().ok())
}

/// Everything `safenic bench-dpdk` measured.
#[derive(Debug, Clone)]
pub struct Report {
    pub instructions: Vec<Instructions>,
    /// Per device, (Rust, C) trial pairs.
    pub overload: Vec<(overload::Device, Vec<(overload::Trial, overload::Trial)>)>,
}

/// Both measures, callgrind first (it needs no core of its own).
pub fn run(o: &Options) -> Result<Report, String> {
    let instructions = if o.measure_instructions { instructions(o)? } else { Vec::new() };
    let mut results = Vec::new();
    for device in [overload::Device::Null, overload::Device::Nicsim].into_iter().filter(|_| o.measure_overload) {
        results.push((device, overload::pairs(o, device)?));
    }
    Ok(Report { instructions, overload: results })
}
