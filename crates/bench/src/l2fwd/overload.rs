//! The overload test of the study that first wrapped DPDK in safe Rust: frames offered faster
//! than l2fwd forwards them, so that every poll finds work; frames forwarded per second, the
//! mean receive burst (its "RX burst fill") and the transmit drops.
//!
//! Both l2fwds run unmodified with `burst_counts.so` preloaded (crates/bench/csrc), which
//! counts what every receive and transmit burst returns over a window after a warm-up; the
//! two pay the same wrapper. Devices: `net_null` (it answers every burst with 32 frames and
//! takes every frame: the CPU is the only limit) and nicsim's two ports through DPDK's ixgbe
//! driver, both generators at line rate (nicsim's engine may then be the limit; the offered
//! rate says so).

use super::{null_eal, Options};
use crate::NICSIM_CPU;
use nicsim::wire::TrafficSpec;
use platform::Reaped;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where the frames come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    Null,
    Nicsim,
}

impl Device {
    pub fn name(self) -> &'static str {
        match self {
            Device::Null => "net_null",
            Device::Nicsim => "nicsim, net_ixgbe",
        }
    }
}

/// One l2fwd's window of one trial, both ports together.
#[derive(Debug, Clone, Copy, Default)]
pub struct Trial {
    pub seconds: f64,
    pub rx_calls: u64,
    pub received: u64,
    pub offered_to_tx: u64,
    pub forwarded: u64,
    /// What nicsim counted over the same window (none on `net_null`).
    pub nicsim: Option<NicsimWindow>,
}

/// nicsim's counters over an l2fwd's window, both ports together.
#[derive(Debug, Clone, Copy, Default)]
pub struct NicsimWindow {
    pub seconds: f64,
    /// Frames its generators sent.
    pub offered: u64,
    /// Frames its sinks received.
    pub delivered: u64,
    /// Frames it dropped for want of a receive descriptor (its MPC counter).
    pub missed: u64,
}

impl NicsimWindow {
    pub fn offered_mpps(&self) -> f64 {
        self.offered as f64 / self.seconds / 1e6
    }
    pub fn delivered_mpps(&self) -> f64 {
        self.delivered as f64 / self.seconds / 1e6
    }
}

impl Trial {
    pub fn forwarded_mpps(&self) -> f64 {
        self.forwarded as f64 / self.seconds / 1e6
    }
    /// Receive bursts per second, empty polls included.
    pub fn polls_mps(&self) -> f64 {
        self.rx_calls as f64 / self.seconds / 1e6
    }
    /// Frames per receive burst, empty polls included.
    pub fn burst_fill(&self) -> f64 {
        self.received as f64 / self.rx_calls.max(1) as f64
    }
    /// Of the frames l2fwd handed to a transmit burst, the share the ring did not take.
    pub fn tx_dropped(&self) -> f64 {
        (self.offered_to_tx - self.forwarded) as f64 / self.offered_to_tx.max(1) as f64
    }
}

/// Warm-up before the window: EAL, the ports, the link check and nicsim's generators start.
pub const WARMUP: Duration = Duration::from_secs(4);

/// `repetitions` trials of each l2fwd on `device`, alternating which goes first.
pub fn pairs(o: &Options, device: Device) -> Result<Vec<(Trial, Trial)>, String> {
    // This thread wakes up to read statistics; on the forwarding core it would preempt it.
    platform::sched::pin_current_thread(NICSIM_CPU).map_err(|e| format!("pinning the harness: {e}"))?;
    let mut pairs = Vec::new();
    for rep in 0..o.repetitions {
        let (rust, c) = if rep % 2 == 0 {
            let rust = trial(o, &o.rust, device)?;
            (rust, trial(o, &o.c, device)?)
        } else {
            let c = trial(o, &o.c, device)?;
            (trial(o, &o.rust, device)?, c)
        };
        pairs.push((rust, c));
    }
    Ok(pairs)
}

fn trial(o: &Options, binary: &Path, device: Device) -> Result<Trial, String> {
    let scratch = platform::fs::ScratchDir::new("l2fwd-overload", "counts")
        .map_err(|e| format!("a scratch directory under /dev/shm: {e}"))?;
    let counts = scratch.path().join("burst-counts");
    let env = [
        ("LD_PRELOAD", o.burst_counts.display().to_string()),
        ("SAFENIC_BURST_COUNTS", counts.display().to_string()),
        ("SAFENIC_BURST_WARMUP_MS", WARMUP.as_millis().to_string()),
        ("SAFENIC_BURST_WINDOW_MS", ((o.overload_seconds * 1000.0) as u64).to_string()),
    ];
    let env_words: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let patience = WARMUP + Duration::from_secs_f64(o.overload_seconds) + Duration::from_secs(60);
    match device {
        Device::Null => {
            let mut child = Reaped::spawn(
                Command::new("env")
                    .args(&env_words)
                    .arg(binary)
                    .args(null_eal())
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped()),
            )
            .map_err(|e| format!("starting {}: {e}", binary.display()))?;
            wait_for_file(&counts, patience, &mut child, binary)?;
            stop(child, binary)?;
            read_counts(&counts, None)
        }
        Device::Nicsim => on_nicsim(o, binary, &env_words, &counts, patience, &scratch),
    }
}

fn on_nicsim(
    o: &Options,
    binary: &Path,
    env: &[String],
    counts: &Path,
    patience: Duration,
    scratch: &platform::fs::ScratchDir,
) -> Result<Trial, String> {
    let prefix: Vec<String> = std::iter::once("env".to_string()).chain(env.iter().cloned()).collect();
    let mut run = super::on_nicsim::start(o, &prefix, binary, (&[], &[]), scratch)?;
    (0..2).try_for_each(|port| run.sim.start_traffic(port, TrafficSpec::default()))?;
    // nicsim's counters at the window's two ends, read as soon as l2fwd's are.
    let mut start_mark = counts.as_os_str().to_owned();
    start_mark.push(".start");
    let super::on_nicsim::Running { child, sim, .. } = &mut run;
    let window = wait_for_file(Path::new(&start_mark), patience, child, binary)
        .and_then(|()| Ok((sim.stats()?, Instant::now())))
        .and_then(|(before, t0)| {
            wait_for_file(counts, patience, child, binary)?;
            Ok((before, sim.stats()?, t0.elapsed().as_secs_f64()))
        });
    (0..2).try_for_each(|port| run.sim.stop_traffic(port).map(drop))?;
    let (before, after, seconds) = window.map_err(|e| format!("{e}\n{}", run.log()))?;
    let log = run.log();
    let super::on_nicsim::Running { child, sim: _sim, .. } = run;
    stop(child, binary).map_err(|e| format!("{e}\n{log}"))?;
    let window = NicsimWindow {
        seconds,
        offered: crate::growth(&before, &after, |p| p.generated),
        delivered: crate::growth(&before, &after, |p| p.sink_packets),
        missed: crate::growth(&before, &after, |p| p.device.mpc),
    };
    read_counts(counts, Some(window))
}

fn wait_for_file(path: &Path, patience: Duration, child: &mut Reaped, binary: &Path) -> Result<(), String> {
    super::wait_until(child, binary, patience, &format!("{}", path.display()), || path.exists())
}

/// SIGTERM, as a user stops l2fwd; it must exit 0.
fn stop(child: Reaped, binary: &Path) -> Result<(), String> {
    crate::terminate(child, Duration::from_secs(60)).map(drop).map_err(|e| format!("{}: {e}", binary.display()))
}

/// The window between the two snapshots `burst_counts.so` wrote; both ports must have
/// received in the first, or the warm-up was too short to mean anything.
fn read_counts(path: &Path, nicsim: Option<NicsimWindow>) -> Result<Trial, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_counts(&text, nicsim).ok_or_else(|| format!("{}: not what burst_counts.so writes:\n{text}", path.display()))
}

/// burst_counts.so's snapshots: (time, per port [rx_calls, rx_frames, tx_calls, tx_offered,
/// tx_sent]).
type Snapshots = Vec<(u64, Vec<[u64; 5]>)>;

fn snapshots(text: &str) -> Option<Snapshots> {
    let mut snaps: Snapshots = Vec::new();
    for line in text.lines() {
        let words: Vec<u64> = line.split_whitespace().skip(1).map(str::parse).collect::<Result<_, _>>().ok()?;
        match (line.split_whitespace().next()?, words.as_slice()) {
            ("snapshot", [_, time]) => snaps.push((*time, Vec::new())),
            ("port", [_, rest @ ..]) if rest.len() == 5 => snaps.last_mut()?.1.push(rest.try_into().ok()?),
            _ => return None,
        }
    }
    Some(snaps)
}

/// The frames every receive burst returned, and the bursts, from burst_counts.so's totals at
/// exit.
pub fn received(text: &str) -> Option<(u64, u64)> {
    let [(_, ports)] = <[_; 1]>::try_from(snapshots(text)?).ok()?;
    Some((ports.iter().map(|p| p[1]).sum(), ports.iter().map(|p| p[0]).sum()))
}

fn parse_counts(text: &str, nicsim: Option<NicsimWindow>) -> Option<Trial> {
    let [(t0, first), (t1, last)] = <[_; 2]>::try_from(snapshots(text)?).ok()?;
    let used: Vec<usize> = (0..first.len().min(last.len())).filter(|&p| last[p][0] > 0).collect();
    if used.len() != 2 || used.iter().any(|&p| first[p][1] == 0) || t1 <= t0 {
        return None;
    }
    let grew = |i: usize| used.iter().map(|&p| last[p][i] - first[p][i]).sum::<u64>();
    Some(Trial {
        seconds: (t1 - t0) as f64 / 1e9,
        rx_calls: grew(0),
        received: grew(1),
        offered_to_tx: grew(3),
        forwarded: grew(4),
        nicsim,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_PORTS: &str = "snapshot 0 1000000000
port 0 10 300 10 300 300
port 1 10 320 10 320 310
port 2 0 0 0 0 0
snapshot 1 3000000000
port 0 110 3300 110 3300 3200
port 1 110 3320 110 3320 3310
port 2 0 0 0 0 0
";

    #[test]
    fn the_window_is_the_growth_between_the_snapshots() {
        let t = parse_counts(TWO_PORTS, None).unwrap();
        assert_eq!((t.rx_calls, t.received, t.offered_to_tx, t.forwarded), (200, 6000, 6000, 5900));
        assert_eq!(t.seconds, 2.0);
        assert_eq!(t.burst_fill(), 30.0);
        assert!((t.forwarded_mpps() - 0.00295).abs() < 1e-12);
    }

    #[test]
    fn the_totals_at_exit_are_every_frame_received() {
        let totals: String = TWO_PORTS.lines().skip(4).map(|l| format!("{l}\n")).collect();
        assert_eq!(received(&totals), Some((6620, 220)));
        assert_eq!(received(TWO_PORTS), None, "two snapshots are a window, not totals");
    }

    #[test]
    fn a_port_without_frames_at_the_first_snapshot_or_a_torn_file_is_refused() {
        let idle = TWO_PORTS.replace("port 1 10 320 10 320 310", "port 1 10 0 10 0 0");
        assert!(parse_counts(&idle, None).is_none(), "the warm-up was too short");
        let torn: String = TWO_PORTS.lines().take(6).map(|l| format!("{l}\n")).collect();
        assert!(parse_counts(&torn, None).is_none());
        assert!(parse_counts(&TWO_PORTS.replace("3320 110", "x 110"), None).is_none());
    }
}
