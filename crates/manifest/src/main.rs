//! `safenic-drivers`: what the driver manifest says, and building its drivers.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use manifest::Manifest;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "safenic-drivers", version, about = "The drivers of drivers/drivers.toml: list or build them")]
struct Cli {
    /// The repository (default: the one this program was built in, else the current directory).
    #[arg(long, global = true)]
    root: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// One line per driver: name, language, what uses it, command.
    List,
    /// Run the build command of each named driver (default: all), from the repository, for
    /// the instruction-set level this program was compiled for (`{isa}`).
    Build { names: Vec<String> },
}

fn run(args: Cli) -> Result<(), String> {
    let root = match args.root {
        Some(r) => r,
        None => std::env::current_exe().ok().and_then(|e| manifest::repository_of(&e)).unwrap_or_else(|| ".".into()),
    };
    let m = Manifest::load(&root)?;
    match args.cmd {
        Cmd::List => {
            for d in &m.drivers {
                let uses: Vec<&str> =
                    [("conformance", d.conformance), ("bench", d.bench), ("table-2", d.main_loop.is_some())]
                        .into_iter()
                        .filter_map(|(u, on)| on.then_some(u))
                        .collect();
                cli::outln!("{:<10} {:<6} {:<28} {}", d.name, d.language, uses.join(","), d.command)?;
            }
            Ok(())
        }
        Cmd::Build { names } => {
            for n in &names {
                m.get(n)
                    .ok_or_else(|| format!("no driver `{n}` in {}: see `safenic-drivers list`", manifest::MANIFEST))?;
            }
            for d in m.drivers.iter().filter(|d| names.is_empty() || names.contains(&d.name)) {
                let Some(build) = d.build_command() else { continue };
                eprintln!("safenic-drivers: {}: {build}", d.name);
                let status = std::process::Command::new("sh")
                    .args(["-c", &build])
                    .current_dir(&root)
                    .status()
                    .map_err(|e| format!("running `{build}`: {e}"))?;
                if !status.success() {
                    return Err(format!("building {} failed ({status}): `{build}`", d.name));
                }
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    cli::finish("safenic-drivers", run(cli::parse("safenic-drivers")))
}
