//! A JIT-compiled driver's loops exist only while it runs: this starts nicsim's server and the
//! driver, programs of the build that the audit runs but does not link ([`crate::children`],
//! [`crate::nicsim_cli`]), lets the driver forward until every per-packet path has been
//! compiled, and audits its loops ([`crate::jit_loops`]) from the process before stopping it.

use crate::children::{Running, Scratch};
use crate::driver_loops::JitModel;
use crate::hot_paths::CheckKind;
use crate::jit::{parse_perf_map, JitImage, LiveProcess};
use crate::jit_loops::{merge, option_sets, walk, JitWalk};
use crate::nicsim_cli::Nicsim;
use crate::sizes::MODES;
use std::path::Path;
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
/// every model and every combination of [`option_sets`], on a server of the `nicsim` program.
pub fn audit_jit_driver(
    nicsim: &Path,
    command: &[String],
    main_loop: &str,
    cold: &[String],
) -> Result<Vec<JitModel>, String> {
    let scratch = Scratch::new()?;
    let sim = Nicsim::start(nicsim, &scratch, NICSIM_CPU)?;
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
                let run = run_once(&sim, &scratch, command, mode, &options, &root, cold)
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
    sim: &Nicsim,
    scratch: &Scratch,
    command: &[String],
    mode: &str,
    options: &[&str],
    root: &str,
    cold: &[String],
) -> Result<JitWalk, String> {
    let (program, words) = command.split_first().ok_or("the driver's command is empty")?;
    let mut args: Vec<String> = words.to_vec();
    args.push(mode.to_string());
    args.extend(sim.port_addresses()?);
    args.extend(options.iter().map(|o| o.to_string()));
    args.extend(["--sysfs".to_string(), sim.devices().display().to_string()]);
    // The runtime writes its perf map into TMPDIR: the run's scratch directory.
    let perf_maps = scratch.path();
    let env = [("COMPlus_PerfMapEnabled", Path::new("1")), ("TMPDIR", perf_maps)];
    let log = scratch.path().join("driver.log");
    let mut driver = Running::spawn(Path::new(program), &args, Some(DRIVER_CPU), &env, log)
        .map_err(|e| format!("{e} (build the drivers first: make audit does)"))?;
    let perf_map = perf_maps.join(format!("perf-{}.map", driver.id()));
    let walked = forward_then_walk(sim, &mut driver, &perf_map, root, cold);
    (0..2).try_for_each(|port| sim.stop_traffic(port))?;
    let (status, output) =
        driver.terminate(Duration::from_secs(30)).map_err(|e| format!("stopping the driver: {e}"))?;
    if !status.success() {
        return Err(format!("the driver exited with {status} after SIGTERM: {output}"));
    }
    walked
}

fn forward_then_walk(
    sim: &Nicsim,
    driver: &mut Running,
    perf_map: &Path,
    root: &str,
    cold: &[String],
) -> Result<JitWalk, String> {
    let before = sim.sink_packets()?;
    (0..2).try_for_each(|port| sim.start_traffic(port))?;
    let mut alive = || driver.alive().map_err(|e| format!("the driver: {e}"));
    sim.wait_ports_up(Duration::from_secs(60), &mut alive)?;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(60);
    loop {
        let now = sim.sink_packets()?;
        let least = before.iter().zip(&now).map(|(a, b)| b - a).min();
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
    let image = JitImage::new(parse_perf_map(&map), LiveProcess::open(driver.id())?);
    walk(&image, root, cold)
}
