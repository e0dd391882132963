//! A JIT-compiled driver's loops exist only while it runs: this starts it on a nicsim with the
//! runtime's perf map on, lets it forward until every per-packet path has been compiled, and
//! audits its loops ([`crate::jit_loops`]) from the process before stopping it.

use crate::driver_loops::JitModel;
use crate::hot_paths::CheckKind;
use crate::jit::{parse_perf_map, JitImage, LiveProcess};
use crate::jit_loops::{merge, option_sets, walk, JitWalk};
use crate::sizes::MODES;
use nicsim::session::{Session, SessionOptions};
use nicsim::wire::TrafficSpec;
use platform::Reaped;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The engine's core and the driver's, as in the bench.
const NICSIM_CPU: usize = 0;
const DRIVER_CPU: usize = 1;

/// Rounds of runs at most while a callee is left uncompiled ([`audit_jit_driver`]).
const ROUNDS: usize = 3;

/// Frames each sink must have counted before the code is read: every burst size and the
/// agents' recycle and flush periods have come round many times by then.
const FRAMES_BEFORE_READING: u64 = 50_000;
/// And the least time the driver forwards before the code is read: 50 000 frames take a few
/// milliseconds at line rate, too short a window for every path to have run once on a loaded
/// host (its presence check runs every 100 ms).
const FORWARDING_BEFORE_READING: Duration = Duration::from_secs(1);

/// Audits the loop `main_loop` (`{mode}` replaced) of the driver started by `command`, in
/// every model and every combination of [`option_sets`].
pub fn audit_jit_driver(
    label: &str,
    command: &[String],
    main_loop: &str,
    cold: &[String],
) -> Result<Vec<JitModel>, String> {
    let opts = SessionOptions { cpu: Some(NICSIM_CPU), ..SessionOptions::default() };
    let sim = Session::start("safenic-audit", label, &opts)?;
    let mut models = Vec::new();
    for mode in MODES {
        let root = main_loop.replace("{mode}", mode);
        let mut runs: Vec<JitWalk> = Vec::new();
        let mut functions = Vec::new();
        // The runtime compiles a method when it first runs, and what runs first on a loaded
        // host differs: a call whose callee no run compiled is code not yet read, so every
        // option set runs again, up to ROUNDS times, before that is reported as a finding.
        for _ in 0..ROUNDS {
            for options in option_sets(mode) {
                let run = run_once(&sim, command, mode, &options, &root, cold)
                    .map_err(|e| format!("{mode} {}: {e}", options.join(" ")))?;
                runs.push(run);
            }
            functions = merge(&runs);
            let unread = functions.iter().any(|f| f.checks.iter().any(|c| c.kind == CheckKind::NeverCompiled));
            if !unread {
                break;
            }
        }
        let instructions = runs[0].instructions;
        models.push(JitModel { mode: mode.to_string(), functions, instructions });
    }
    Ok(models)
}

fn run_once(
    sim: &Session,
    command: &[String],
    mode: &str,
    options: &[&str],
    root: &str,
    cold: &[String],
) -> Result<JitWalk, String> {
    // The runtime writes its perf maps into TMPDIR: the session's scratch directory, which
    // goes with the session.
    let scratch = sim.root().parent().ok_or("nicsim's directory has no parent")?.to_path_buf();
    let (program, args) = command.split_first().ok_or("the driver's command is empty")?;
    let mut child = Reaped::spawn(
        Command::new(program)
            .args(args)
            .args([mode, &nicsim::sysfs::port_address(0), &nicsim::sysfs::port_address(1)])
            .args(options)
            .arg("--sysfs")
            .arg(sim.devices())
            .env("COMPlus_PerfMapEnabled", "1")
            .env("TMPDIR", &scratch)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .map_err(|e| format!("starting {program}: {e} (build the drivers first: make audit does)"))?;
    platform::sched::pin_process(child.id(), DRIVER_CPU)
        .map_err(|e| format!("pinning the driver to CPU {DRIVER_CPU}: {e} (the audit needs two CPUs)"))?;
    let perf_map = scratch.join(format!("perf-{}.map", child.id()));
    let walked = forward_then_walk(sim, &mut child, &perf_map, root, cold);
    (0..2).try_for_each(|port| sim.stop_traffic(port).map(drop))?;
    let out = child.terminate(Duration::from_secs(30)).map_err(|e| format!("stopping the driver: {e}"))?;
    if !out.status.success() {
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        return Err(format!("the driver exited with {} after SIGTERM: {}", out.status, text.trim()));
    }
    walked
}

fn forward_then_walk(
    sim: &Session,
    child: &mut Reaped,
    perf_map: &std::path::Path,
    root: &str,
    cold: &[String],
) -> Result<JitWalk, String> {
    let before = sim.stats()?;
    (0..2).try_for_each(|port| sim.start_traffic(port, TrafficSpec::default()))?;
    let mut alive = || match child.try_wait() {
        Ok(Some(status)) => Err(format!("the driver exited with {status}: {}", child.output())),
        _ => Ok(()),
    };
    sim.wait_ports_up(Duration::from_secs(60), &mut alive)?;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(60);
    loop {
        let now = sim.stats()?;
        let least = before.ports.iter().zip(&now.ports).map(|(a, b)| b.sink_packets - a.sink_packets).min();
        if least.unwrap_or(0) >= FRAMES_BEFORE_READING && started.elapsed() >= FORWARDING_BEFORE_READING {
            break;
        }
        alive()?;
        if Instant::now() > deadline {
            return Err(format!("the driver did not forward {FRAMES_BEFORE_READING} frames each way within 60 s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let map = std::fs::read_to_string(perf_map)
        .map_err(|e| format!("reading the runtime's perf map {}: {e} (is it a .NET program?)", perf_map.display()))?;
    let image = JitImage::new(parse_perf_map(&map), LiveProcess::open(child.id())?);
    walk(&image, root, cold)
}
