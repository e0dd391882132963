//! `safenic-audit`: before the build, nothing unvetted runs when the workspace is built
//! (`vet`); after it, no run-time checks in the hot paths of the release build, the paper's
//! Table 2, the unsafe budget, the dependencies, the expanded code and the trusted crates'
//! public surface (`check`, the default); the surface's list for docs/safety.md (`surface`);
//! after that verdict, the JIT drivers' loops read from them running on a nicsim (`jit`).
//! Built from a workspace of its own, it links no crate it audits. Exits 1 if the audit fails.
#![forbid(unsafe_code)]

use audit::driver_loops::jit_driver_loops;
use audit::sizes::{table_of, LoopCode};
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "safenic-audit",
    version,
    about = "Prove the hot paths check-free, unsafe code confined and the build vetted"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    check: CheckArgs,
}

#[derive(clap::Args)]
struct CheckArgs {
    /// The release binary to audit.
    #[arg(long, default_value = "target/release/safenic")]
    binary: PathBuf,
    /// The repository.
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// The x86-64 level the drivers were built for (`make`'s ISA).
    #[arg(long, default_value = "x86-64-v3")]
    isa: String,
    /// The report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Before anything is built: what would run at build time, and the sources' unsafe code.
    Vet {
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
    /// After the verdict: the JIT drivers' loops (the C# one), read from them running on a
    /// server of the build's nicsim. It runs audited programs, so it says nothing of the
    /// verdict's; make audit runs it after.
    Jit(JitArgs),
    /// The trusted crates' public surface; with --splice, written into docs/safety.md.
    Surface {
        #[arg(long, default_value = ".")]
        root: PathBuf,
        #[arg(long)]
        splice: bool,
    },
}

#[derive(clap::Args)]
struct JitArgs {
    /// The repository.
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// The safenic whose build the drivers' commands name (`{safenic}`).
    #[arg(long, default_value = "target/release/safenic")]
    safenic: PathBuf,
    /// The nicsim the drivers run on.
    #[arg(long, default_value = "target/release/nicsim")]
    nicsim: PathBuf,
    /// The x86-64 level the drivers were built for (`make`'s ISA).
    #[arg(long, default_value = "x86-64-v3")]
    isa: String,
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Some(Command::Vet { root }) => {
            let findings = audit::vet::vet(&root)?;
            print(&audit::report::vet_text(&findings))?;
            findings.is_empty().then_some(()).ok_or_else(|| "vet failed: see the findings above".to_string())
        }
        Some(Command::Surface { root, splice }) => {
            let items = audit::surface::surface(&root)?;
            if splice {
                return audit::surface::splice(&root, &items);
            }
            print(&audit::surface::listing(&items))
        }
        Some(Command::Jit(args)) => jit(args),
        None => check(cli.check),
    }
}

fn jit(args: JitArgs) -> Result<(), String> {
    let drivers = audit::drivers::load(&args.root)?;
    let mut loops = Vec::new();
    for entry in drivers.iter().filter(|d| d.perf_map) {
        let Some(d) = table_of(std::slice::from_ref(entry), &args.isa).pop().filter(|d| d.code == LoopCode::Jit) else {
            return Err(format!(
                "{}: a perf_map driver needs a main_loop and no binary (drivers/drivers.toml)",
                entry.name
            ));
        };
        let command = entry.command_words(&args.root, &args.safenic, &args.isa);
        let cold = d.hot_loop_cold_calls.clone().unwrap_or_default();
        let result = audit::jit_run::audit_jit_driver(&args.nicsim, &command, &d.main_loop, &cold);
        for m in result.iter().flatten() {
            print(&format!(
                "{} {}: {} instructions in its loop and the methods it calls per packet\n",
                d.label, m.mode, m.instructions
            ))?;
        }
        loops.extend(jit_driver_loops(&d, &command, &result));
    }
    if loops.is_empty() {
        return Err("no JIT-compiled driver (perf_map = true) in drivers/drivers.toml: nothing to audit".into());
    }
    print(&audit::report::driver_loops_text(&loops))?;
    let passed = loops.iter().all(|l| l.checks() == 0 && l.error.is_none());
    if passed {
        print("jit audit: passed\n")
    } else {
        Err("jit audit failed: see the findings above".into())
    }
}

fn check(args: CheckArgs) -> Result<(), String> {
    if !args.binary.is_file() {
        return Err(format!("{}: no such binary: build it with `make build` or pass --binary", args.binary.display()));
    }
    let drivers = audit::drivers::load(&args.root)?;
    audit::drivers::check_built(&args.root, &drivers, &args.isa)?;
    let table = audit::sizes::table_of(&drivers, &args.isa);
    let report = audit::audit(&audit::Options { binary: args.binary, root: args.root, table })?;
    if args.json {
        print(&(serde_json::to_string_pretty(&report).map_err(|e| e.to_string())? + "\n"))?;
    } else {
        print(&audit::report::text(&report))?;
    }
    report.passed.then_some(()).ok_or_else(|| "audit failed: see the findings above".to_string())
}

fn print(text: &str) -> Result<(), String> {
    std::io::stdout().write_all(text.as_bytes()).map_err(|e| format!("writing the report: {e}"))
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let text = e.to_string();
            eprintln!("safenic-audit: {}", text.lines().next().unwrap_or("").trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("safenic-audit: {e}");
            ExitCode::FAILURE
        }
    }
}
