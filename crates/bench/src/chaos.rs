//! Drivers against a hostile device: each fault kind of [`nicsim::chaos`], then a check that
//! traffic flows again and every frame is accounted for.
//!
//! A driver runs with flow control (so that nothing is lost to a slow core and a count is
//! exact whatever the host does) while nicsim injects one kind of fault. Then the faults stop
//! and the verdict comes from what follows:
//! - the process died: by a signal (crashed), with a sanitizer's report (corrupted memory), or
//!   by itself with one line on standard error (clean exit: what a reset or removal asks for);
//! - nicsim saw a DMA outside the driver's memory: corrupted memory;
//! - no probe of traffic got through within [`RECOVERY`]: stalled;
//! - frames were lost, duplicated or foreign once traffic flowed again, or the device's and
//!   sinks' counts disagree with what was injected: wrong frames;
//! - otherwise: survived.
//!
//! Nothing here depends on how fast the host is: faults are counted, not timed, traffic is
//! counted and paced by flow control, and every wait has a generous deadline whose expiry is
//! itself a verdict only where the driver had all that time to move.

use super::{Driver, Harness};
use nicsim::chaos::{Fault, Injected, WireFault};
use nicsim::control::{PortStats, Stats};
use nicsim::wire::TrafficSpec;
use platform::Reaped;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::Read;
use std::time::{Duration, Instant};

/// A kind of fault, as the report's rows name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    WriteBack,
    Stall,
    Wire(WireFault),
    Reset,
    Remove,
}

impl Kind {
    /// Every kind, in the report's order: those the driver is expected to survive, then the
    /// two after which it must stop.
    pub const ALL: [Kind; 10] = [
        Kind::WriteBack,
        Kind::Stall,
        Kind::Wire(WireFault::Runt),
        Kind::Wire(WireFault::Oversize),
        Kind::Wire(WireFault::Corrupt),
        Kind::Wire(WireFault::BadFcs),
        Kind::Wire(WireFault::Duplicate),
        Kind::Wire(WireFault::Reorder),
        Kind::Reset,
        Kind::Remove,
    ];

    /// Whether the device is lost for good: the driver must stop.
    pub fn ends_the_driver(self) -> bool {
        matches!(self, Kind::Reset | Kind::Remove)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::WriteBack => "hostile write-backs",
            Kind::Stall => "stall",
            Kind::Wire(WireFault::Runt) => "runt frames",
            Kind::Wire(WireFault::Oversize) => "oversize frames",
            Kind::Wire(WireFault::Corrupt) => "corrupted bytes",
            Kind::Wire(WireFault::BadFcs) => "bad FCS",
            Kind::Wire(WireFault::Duplicate) => "duplicated frames",
            Kind::Wire(WireFault::Reorder) => "reordered frames",
            Kind::Reset => "surprise reset",
            Kind::Remove => "surprise removal",
        })
    }
}

/// What became of a driver under one kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Survived,
    CleanExit,
    Crashed,
    Stalled,
    CorruptedMemory,
    WrongFrames,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Survived => "survived",
            Verdict::CleanExit => "clean exit",
            Verdict::Crashed => "crashed",
            Verdict::Stalled => "stalled",
            Verdict::CorruptedMemory => "corrupted memory",
            Verdict::WrongFrames => "wrong frames",
        })
    }
}

/// One kind of fault against one driver in one model.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    pub kind: Kind,
    pub verdict: Verdict,
    /// Faults nicsim injected, both ports together.
    pub injected: u64,
    /// What the verdict rests on, in a line.
    pub detail: String,
    /// The driver's summary line at the end of the session this kind ran in (its counts of
    /// refused frames and ring restarts), if it printed one.
    pub summary: String,
}

/// How much of each fault: the test's minimum, or more for a soak.
#[derive(Debug, Clone, Copy)]
pub struct Dose {
    /// Hostile write-backs per port (the issue asks for at least 10^6 in all).
    pub write_backs_per_port: u64,
    /// Frames per port sent while a wire fault is on.
    pub wire_frames: u64,
    pub seed: u64,
}

impl Dose {
    /// What `make test` runs: 2 × 500 000 write-backs, 20 000 frames per wire fault.
    pub const TEST: Dose = Dose { write_backs_per_port: 500_000, wire_frames: 20_000, seed: 1 };

    /// About `seconds` of faults per kind (`make soak`).
    pub fn soak(seconds: f64, seed: u64) -> Dose {
        let n = |per_second: f64| ((seconds * per_second) as u64).max(1);
        Dose { write_backs_per_port: n(WRITE_BACK_RATE), wire_frames: n(TRAFFIC_PPS), seed }
    }
}

/// Hostile write-backs per second per port.
const WRITE_BACK_RATE: f64 = 2_000_000.0;
/// Frames per second per port while faults are injected and in the checks; with flow control
/// the rate sets only how long a phase takes.
const TRAFFIC_PPS: f64 = 1_000_000.0;
/// Share of the frames a wire fault hits.
const WIRE_PROBABILITY: f64 = 0.05;
/// Frames per port of a probe: two laps of a 512-descriptor ring, so that every descriptor a
/// fault left behind has been rewritten by the device and the driver.
const PROBE: u64 = 2048;
/// Frames per port of the exact check after a fault.
const CHECK: u64 = 20_000;
/// How long a driver has to forward a probe once the faults stopped.
const RECOVERY: Duration = Duration::from_secs(15);
/// How long a driver has to exit by itself after its device was reset or removed: many
/// times its presence period.
const EXIT: Duration = Duration::from_secs(15);
/// Deadline for anything that only waits for counted traffic (generous: a loaded host).
const PATIENCE: Duration = Duration::from_secs(120);

/// Runs `kinds` against `driver` in `mode`, in order, as few sessions as possible: a session
/// goes on to the next kind while the driver survives, and a new one starts after a kind that
/// ended or broke the driver. `extra` are arguments after `--flow-control` (e.g. none).
pub fn campaign(driver: &Driver, mode: &str, kinds: &[Kind], dose: Dose) -> Result<Vec<Outcome>, String> {
    let mut outcomes = Vec::new();
    let mut rest = kinds;
    while !rest.is_empty() {
        let done = session(driver, mode, rest, dose, &mut outcomes)?;
        rest = &rest[done..];
    }
    Ok(outcomes)
}

/// One driver bring-up; returns how many of `kinds` it went through.
fn session(driver: &Driver, mode: &str, kinds: &[Kind], dose: Dose, out: &mut Vec<Outcome>) -> Result<usize, String> {
    let h = Harness::start(&format!("chaos-{}-{mode}", driver.name))?;
    let mut child = h.spawn_with(&[], driver, mode, &["--flow-control".into()])?;
    h.wait_ready(&mut child, Duration::from_secs(30))?;
    let first = out.len();
    let mut ran = kinds.len();
    for (k, &kind) in kinds.iter().enumerate() {
        h.sim.reset_counters()?;
        let outcome = match kind {
            Kind::Reset | Kind::Remove => lose_device(&h, &mut child, kind)?,
            _ => survive(&h, &mut child, kind, dose)?,
        };
        let go_on = outcome.verdict == Verdict::Survived;
        out.push(outcome);
        if !go_on {
            ran = k + 1;
            break;
        }
    }
    // Still running after the last kind (or stuck in one): SIGTERM, and its summary line.
    let printed = match child.try_wait() {
        Ok(Some(_)) => child.output(),
        _ => child.terminate(Duration::from_secs(30)).map_or_else(
            |e| e.to_string(),
            |o| format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)),
        ),
    };
    let summary = printed.lines().find(|l| l.contains(&format!(" fwd {mode}: "))).unwrap_or("").trim();
    out[first..].iter_mut().for_each(|o| o.summary = summary.to_string());
    Ok(ran)
}

/// A fault the driver should come through: inject it under traffic, then check.
fn survive(h: &Harness, child: &mut Reaped, kind: Kind, dose: Dose) -> Result<Outcome, String> {
    let sim = &h.sim;
    let mut consistent = Ok(());
    match kind {
        Kind::WriteBack => {
            both(|p| sim.start_traffic(p, rate(None)))?;
            let count = dose.write_backs_per_port;
            both(|p| sim.fault(p, Fault::WriteBack { rate: WRITE_BACK_RATE, count, seed: dose.seed + p as u64 }))?;
            let deadline = Instant::now() + PATIENCE + Duration::from_secs_f64(count as f64 / WRITE_BACK_RATE * 4.0);
            loop {
                if let Some(v) = exited(child) {
                    return Ok(outcome(kind, h, v.0, v.1));
                }
                if h.stats()?.ports.iter().all(|p| p.injected.write_backs() >= count) {
                    break;
                }
                if Instant::now() > deadline {
                    return Err("nicsim did not inject the write-backs in time".into());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            both(|p| sim.stop_traffic(p).map(drop))?;
        }
        Kind::Stall => {
            both(|p| sim.start_traffic(p, rate(None)))?;
            for p in 0..2 {
                sim.fault(p, Fault::Stall { ms: 50 })?;
                std::thread::sleep(Duration::from_millis(100));
            }
            both(|p| sim.stop_traffic(p).map(drop))?;
        }
        Kind::Wire(what) => {
            let count = dose.wire_frames;
            both(|p| {
                sim.fault(p, Fault::Wire { what, probability: WIRE_PROBABILITY, count, seed: dose.seed + p as u64 })
            })?;
            both(|p| sim.start_traffic(p, rate(Some(count))))?;
            let sent = |s: &Stats| s.ports.iter().all(|p| !p.generator_active && p.generated == count);
            settle(h, child, sent, patience(count))?;
            // A frame held back for reordering after the last one sent arrives now.
            both(|p| sim.fault(p, Fault::Off))?;
            let s = settle(h, child, |s| wire_consistent(s).is_ok(), patience(0))?;
            consistent = wire_consistent(&s);
        }
        Kind::Reset | Kind::Remove => unreachable!("lose_device"),
    }
    let injected = h.stats()?.ports.iter().map(|p| count_of(kind, &p.injected)).sum();
    if let Some((v, why)) = exited(child) {
        return Ok(Outcome { injected, ..outcome(kind, h, v, why) });
    }
    let verdict = match (consistent, recover(h, child)?) {
        (_, Err((v, why))) => (v, why),
        (Err(why), Ok(_)) => (Verdict::WrongFrames, why),
        (Ok(()), Ok(why)) => (Verdict::Survived, why),
    };
    Ok(Outcome { injected, ..outcome(kind, h, verdict.0, verdict.1) })
}

/// The device goes for good (reset or removal) under traffic: the driver must notice and exit
/// non-zero with one line.
fn lose_device(h: &Harness, child: &mut Reaped, kind: Kind) -> Result<Outcome, String> {
    both(|p| h.sim.start_traffic(p, rate(None)))?;
    std::thread::sleep(Duration::from_millis(100));
    h.sim.fault(1, if kind == Kind::Reset { Fault::Reset } else { Fault::Remove })?;
    let at_sinks = |s: Stats| s.ports.iter().map(|p| p.sink_packets).sum::<u64>();
    let before = at_sinks(h.stats()?);
    let deadline = Instant::now() + EXIT;
    while Instant::now() < deadline {
        if let Some((v, why)) = exited(child) {
            return Ok(Outcome { injected: 1, ..outcome(kind, h, v, why) });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let moved = at_sinks(h.stats()?) - before;
    let why = format!(
        "still running {} s after the {kind}, not noticing it; frames forwarded since: {moved}",
        EXIT.as_secs()
    );
    Ok(Outcome { injected: 1, ..outcome(kind, h, Verdict::Stalled, why) })
}

/// After the faults: probes until one gets through (or [`RECOVERY`] passes), then an exact
/// check. `Ok(Ok(detail))` if every frame of the check arrived exactly once.
fn recover(h: &Harness, child: &mut Reaped) -> Result<Result<String, (Verdict, String)>, String> {
    let deadline = Instant::now() + RECOVERY;
    let mut probes = 0;
    loop {
        probes += 1;
        h.sim.reset_counters()?;
        both(|p| h.sim.start_traffic(p, rate(Some(PROBE))))?;
        let s = settle(h, child, all_in(PROBE), deadline)?;
        if let Some(v) = exited(child) {
            return Ok(Err(v));
        }
        if delivered(&s) == [PROBE; 2] {
            break;
        }
        if Instant::now() > deadline {
            let got = delivered(&s);
            return Ok(Err((
                Verdict::Stalled,
                format!(
                    "no traffic through within {} s of the faults' end ({got:?} of {PROBE} each way)",
                    RECOVERY.as_secs()
                ),
            )));
        }
        both(|p| h.sim.stop_traffic(p).map(drop))?;
    }
    h.sim.reset_counters()?;
    both(|p| h.sim.start_traffic(p, rate(Some(CHECK))))?;
    let s = settle(h, child, all_in(CHECK), patience(CHECK))?;
    if let Some(v) = exited(child) {
        return Ok(Err(v));
    }
    let exact = s.ports.iter().all(|p| {
        let st = p.streams.iter().find(|(src, _)| *src != p.port).map(|(_, st)| st);
        p.sink_foreign == 0
            && p.sink_packets == CHECK
            && st.is_some_and(|st| st.received == CHECK && st.lost == 0 && st.reordered == 0)
    });
    Ok(if exact {
        Ok(format!("forwarding again after {probes} probe(s); {CHECK} frames each way then arrived exactly once"))
    } else {
        Err((
            Verdict::WrongFrames,
            format!("after the faults: {:?} of {CHECK} each way, foreign {:?}", delivered(&s), foreign(&s)),
        ))
    })
}

/// While a wire fault was on: each sink got what its partner generated, less the frames the
/// receiving device must drop (runts in RUC, oversize in ROC, bad FCS in CRCERRS), plus the
/// duplicates; the device's counters are exactly what was injected.
fn wire_consistent(s: &Stats) -> Result<(), String> {
    for p in &s.ports {
        let from = &s.ports[1 - p.port];
        let i = &from.injected;
        let expected = from.generated + i.duplicated - i.runts - i.oversize - i.bad_fcs;
        let counters = (from.device.ruc, from.device.roc, from.device.crcerrs);
        if p.sink_packets != expected || counters != (i.runts, i.oversize, i.bad_fcs) || p.dma_faults != 0 {
            return Err(format!(
                "port {} -> {}: {} frames arrived, {expected} expected; RUC/ROC/CRCERRS {counters:?}, injected {:?}",
                from.port,
                p.port,
                p.sink_packets,
                (i.runts, i.oversize, i.bad_fcs)
            ));
        }
    }
    Ok(())
}

/// The verdict of a driver that exited, if it did: how and why.
fn exited(child: &mut Reaped) -> Option<(Verdict, String)> {
    let status = child.try_wait().ok()??;
    let mut stderr = String::new();
    if let Some(mut e) = child.take_stderr() {
        let _ = e.read_to_string(&mut stderr);
    }
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
    let sanitizer = stderr.contains("AddressSanitizer") || stderr.contains("runtime error:");
    Some(match status.code() {
        _ if sanitizer => (Verdict::CorruptedMemory, format!("sanitizer: {}", first_report_line(&stderr))),
        None => (Verdict::Crashed, format!("killed by {status}: {last}")),
        Some(0) => (Verdict::Crashed, "exited 0 by itself, as if nothing had happened".into()),
        Some(_) if stderr.trim().lines().count() == 1 && !stderr.contains("panicked") => {
            (Verdict::CleanExit, format!("exit {}: {last}", status.code().unwrap_or(-1)))
        }
        Some(c) => (Verdict::Crashed, format!("exit {c}: {last}")),
    })
}

fn first_report_line(stderr: &str) -> String {
    stderr.lines().find(|l| l.contains("ERROR:") || l.contains("runtime error:")).unwrap_or("").trim().to_string()
}

/// An outcome; a DMA outside the driver's memory, seen by nicsim, overrides a milder verdict.
fn outcome(kind: Kind, h: &Harness, verdict: Verdict, detail: String) -> Outcome {
    let faults: u64 = h.stats().map(|s| s.ports.iter().map(|p| p.dma_faults).sum()).unwrap_or(0);
    let (verdict, detail) = if faults > 0 && verdict != Verdict::Crashed {
        (Verdict::CorruptedMemory, format!("{faults} DMA accesses outside the driver's memory; {detail}"))
    } else {
        (verdict, detail)
    };
    Outcome { kind, verdict, injected: 0, detail, summary: String::new() }
}

/// Faults of `kind` in `i`.
fn count_of(kind: Kind, i: &Injected) -> u64 {
    match kind {
        Kind::WriteBack => i.write_backs(),
        Kind::Stall => i.stalls,
        Kind::Reset => i.resets,
        Kind::Remove => i.removals,
        Kind::Wire(WireFault::Runt) => i.runts,
        Kind::Wire(WireFault::Oversize) => i.oversize,
        Kind::Wire(WireFault::Corrupt) => i.corrupted,
        Kind::Wire(WireFault::BadFcs) => i.bad_fcs,
        Kind::Wire(WireFault::Duplicate) => i.duplicated,
        Kind::Wire(WireFault::Reorder) => i.reordered,
    }
}

/// Traffic at [`TRAFFIC_PPS`], `count` frames (or until stopped).
fn rate(count: Option<u64>) -> TrafficSpec {
    TrafficSpec { rate_pps: Some(TRAFFIC_PPS), count, ..TrafficSpec::default() }
}

fn both(mut f: impl FnMut(usize) -> Result<(), String>) -> Result<(), String> {
    (0..2).try_for_each(&mut f)
}

/// Frames each sink received from the other port's generator.
fn delivered(s: &Stats) -> [u64; 2] {
    let from_other =
        |p: &PortStats| p.streams.iter().filter(|(src, _)| *src != p.port).map(|(_, st)| st.received).sum();
    [from_other(&s.ports[0]), from_other(&s.ports[1])]
}

fn foreign(s: &Stats) -> [u64; 2] {
    [s.ports[0].sink_foreign, s.ports[1].sink_foreign]
}

/// Waits until `done` holds and the sinks have not moved for a moment, or the generators have
/// ended and the sinks have not moved for a second (or `deadline` passed, or the driver
/// exited); returns the statistics then.
fn settle(h: &Harness, child: &mut Reaped, done: impl Fn(&Stats) -> bool, deadline: Instant) -> Result<Stats, String> {
    let mut last = u64::MAX;
    let mut still = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let s = h.stats()?;
        let at_sinks: u64 = s.ports.iter().map(|p| p.sink_packets).sum();
        if at_sinks != last {
            still = Instant::now();
            last = at_sinks;
        }
        let quiet_for = still.elapsed();
        if (done(&s) && quiet_for > Duration::from_millis(40))
            || quiet_for > Duration::from_secs(1) && s.ports.iter().all(|p| !p.generator_active)
            || Instant::now() > deadline
            || exited_quietly(child)
        {
            return Ok(s);
        }
    }
}

/// Both generators sent `count` and the sinks have at least that many each.
fn all_in(count: u64) -> impl Fn(&Stats) -> bool {
    move |s: &Stats| {
        s.ports.iter().all(|p| !p.generator_active && p.generated == count)
            && s.ports.iter().map(|p| p.sink_packets).sum::<u64>() >= 2 * count
    }
}

/// The deadline for `count` frames per port: [`PATIENCE`] beyond four times the time they
/// take at [`TRAFFIC_PPS`].
fn patience(count: u64) -> Instant {
    Instant::now() + PATIENCE + Duration::from_secs_f64(count as f64 / TRAFFIC_PPS * 4.0)
}

fn exited_quietly(child: &mut Reaped) -> bool {
    matches!(child.try_wait(), Ok(Some(_)))
}
