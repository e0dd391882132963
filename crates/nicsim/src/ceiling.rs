//! `nicsim bench`: nicsim's own ceiling, measured with the reflecting peer driver on the
//! other core and both generators at line rate.

use crate::control::Stats;
use crate::session::{Session, SessionOptions};
use crate::wire::{line_rate_pps, TrafficSpec};
use platform::Reaped;
use serde::Serialize;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// What one port moved during the measured window, in Mpps.
#[derive(Debug, Clone, Serialize)]
pub struct PortCeiling {
    pub port: usize,
    pub generated_mpps: f64,
    pub skipped_mpps: f64,
    pub into_rx_ring_mpps: f64,
    pub no_descriptor_mpps: f64,
    pub drained_from_tx_ring_mpps: f64,
    pub sink_mpps: f64,
}

/// nicsim's ceiling over one window.
#[derive(Debug, Clone, Serialize)]
pub struct Ceiling {
    pub link_gbps: f64,
    pub seconds: f64,
    pub line_rate_mpps_per_port: f64,
    pub ports: Vec<PortCeiling>,
    pub total_into_rx_rings_mpps: f64,
    pub total_drained_from_tx_rings_mpps: f64,
    pub engine_iterations_per_second: f64,
    /// Whole-run totals (warm-up included), to divide a profile of the whole run by.
    pub rx_frames_since_start: u64,
    pub engine_iterations_since_start: u64,
    /// Time between two looks at the doorbells over the window.
    pub doorbell_interval_ns: crate::wire::LatencySummary,
    /// The slow path's passes over the whole run.
    pub slow_path_ns: crate::wire::LatencySummary,
}

/// `n` frames over `secs` seconds, in millions per second.
pub fn mpps(n: u64, secs: f64) -> f64 {
    n as f64 / secs / 1e6
}

/// Measures the ceiling for `seconds` at `gbps`, running `nicsim` (the executable at
/// `nicsim_exe`) `reflect` as the peer.
pub fn measure(nicsim_exe: &Path, seconds: f64, gbps: f64) -> Result<Ceiling, String> {
    // The engine on CPU 0 and the peer on CPU 1: left to the scheduler, the engine can land on
    // the peer's core, and the two polling loops then share it (0.02 Mpps seen).
    let cpus = platform::sched::available_cpus();
    let opts = SessionOptions { gbps, cpu: (cpus > 1).then_some(0), ..SessionOptions::default() };
    let session = Session::start("nicsim-bench", &std::process::id().to_string(), &opts)?;
    let (a, b) = (crate::sysfs::port_address(0), crate::sysfs::port_address(1));
    let mut peer = Reaped::spawn(
        Command::new(nicsim_exe)
            .arg("--root")
            .arg(session.root())
            // Killed when the measurement ends; its own limit only bounds an orphan, and leaves
            // room for a slow bring-up (under callgrind in the host's slow phase, nicsim has
            // taken over 30 s to see the ports).
            .args(["reflect", &a, &b, "--seconds", &format!("{}", seconds + 120.0)])
            .args(if cpus > 1 { vec!["--cpu", "1"] } else { vec![] })
            .stdout(Stdio::null()),
    )
    .map_err(|e| format!("starting the peer: {e}"))?;
    session.wait_ports_up(Duration::from_secs(120), || match peer.try_wait() {
        Ok(Some(status)) => Err(format!("the reflecting peer exited with {status}")),
        _ => Ok(()),
    })?;
    for port in 0..2 {
        session.start_traffic(port, TrafficSpec::default())?;
    }
    std::thread::sleep(Duration::from_secs(1));
    // The doorbell intervals of the window only (deltas of the other counters do not mind).
    let warm_up = session.stats()?;
    session.reset_counters()?;
    let s0 = session.stats()?;
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let s1 = session.stats()?;
    for port in 0..2 {
        session.stop_traffic(port)?;
    }
    // Asked to stop, the peer disables its queues before it lets its memory go.
    let _ = peer.terminate(Duration::from_secs(10));
    let mut c = ceiling_between(&s0, &s1, gbps);
    c.rx_frames_since_start += warm_up.ports.iter().map(|p| p.device.qprc.iter().sum::<u64>()).sum::<u64>();
    Ok(c)
}

/// The ceiling from two snapshots of the same run.
fn ceiling_between(s0: &Stats, s1: &Stats, gbps: f64) -> Ceiling {
    let secs = (s1.elapsed_ns - s0.elapsed_ns) as f64 / 1e9;
    let into_rx = |s: &crate::control::PortStats| s.device.qprc.iter().sum::<u64>();
    let no_descriptor = |s: &crate::control::PortStats| s.device.qprdc.iter().sum::<u64>();
    let ports: Vec<PortCeiling> = s0
        .ports
        .iter()
        .zip(&s1.ports)
        .map(|(x, y)| PortCeiling {
            port: y.port,
            generated_mpps: mpps(y.generated - x.generated, secs),
            skipped_mpps: mpps(y.generator_skipped - x.generator_skipped, secs),
            into_rx_ring_mpps: mpps(into_rx(y) - into_rx(x), secs),
            no_descriptor_mpps: mpps(no_descriptor(y) - no_descriptor(x), secs),
            drained_from_tx_ring_mpps: mpps(y.device.gptc - x.device.gptc, secs),
            sink_mpps: mpps(y.sink_packets - x.sink_packets, secs),
        })
        .collect();
    Ceiling {
        link_gbps: gbps,
        seconds: secs,
        line_rate_mpps_per_port: line_rate_pps(60, gbps) / 1e6,
        total_into_rx_rings_mpps: ports.iter().map(|p| p.into_rx_ring_mpps).sum(),
        total_drained_from_tx_rings_mpps: ports.iter().map(|p| p.drained_from_tx_ring_mpps).sum(),
        ports,
        engine_iterations_per_second: (s1.iterations - s0.iterations) as f64 / secs,
        rx_frames_since_start: s1.ports.iter().map(into_rx).sum(),
        engine_iterations_since_start: s1.iterations,
        doorbell_interval_ns: s1.doorbell_interval_ns.clone(),
        slow_path_ns: s1.slow_path_ns.clone(),
    }
}
