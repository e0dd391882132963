//! `safenic-jit-audit`: the loops of every JIT-compiled driver of the manifest (the C# one),
//! read from it while it runs on a nicsim ([`audit::jit_run`]), audited as the other drivers'
//! loops are. It runs audited code (nicsim, the driver), so it is built apart from
//! `safenic-audit` (the `jit` feature) and `make audit` runs it after that verdict: what it
//! says is about the JIT drivers alone. Exits 1 if a loop has a check.
#![forbid(unsafe_code)]

use audit::driver_loops::{jit_driver_loops, DriverLoop};
use audit::sizes::{table_of, LoopCode};
use clap::Parser;
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "safenic-jit-audit", version, about = "Read the JIT drivers' loops from them running on a nicsim")]
struct Cli {
    /// The repository.
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// The safenic whose build the drivers' commands name (`{safenic}`).
    #[arg(long, default_value = "target/release/safenic")]
    safenic: PathBuf,
}

fn run(cli: Cli) -> Result<(), String> {
    let drivers = audit::drivers::load(&cli.root)?;
    let mut loops: Vec<DriverLoop> = Vec::new();
    for entry in drivers.iter().filter(|d| d.perf_map) {
        let Some(d) = table_of(std::slice::from_ref(entry), "x86-64").pop().filter(|d| d.code == LoopCode::Jit) else {
            return Err(format!(
                "{}: a perf_map driver needs a main_loop and no binary (drivers/drivers.toml)",
                entry.name
            ));
        };
        let command = manifest::command_words(&entry.command, &cli.root, &cli.safenic);
        let cold = d.hot_loop_cold_calls.clone().unwrap_or_default();
        let result = audit::jit_run::audit_jit_driver(&d.label, &command, &d.main_loop, &cold);
        if let Ok(models) = &result {
            for m in models {
                println!(
                    "{} {}: {} instructions in its loop and the methods it calls per packet",
                    d.label, m.mode, m.instructions
                );
            }
        }
        loops.extend(jit_driver_loops(&d, &command, &result));
    }
    if loops.is_empty() {
        return Err("no JIT-compiled driver (perf_map = true) in drivers/drivers.toml: nothing to audit".into());
    }
    print!("{}", audit::report::driver_loops_text(&loops));
    let checks: usize = loops.iter().map(DriverLoop::checks).sum();
    if checks == 0 && loops.iter().all(|l| l.error.is_none()) {
        println!("jit audit: passed");
        Ok(())
    } else {
        Err("jit audit failed: see the findings above".into())
    }
}

fn main() -> std::process::ExitCode {
    match Cli::try_parse().map_err(|e| e.to_string().lines().next().unwrap_or("").to_string()).and_then(run) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("safenic-jit-audit: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
