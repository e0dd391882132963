//! `safenic-audit`: before the build, nothing unvetted runs when the workspace is built
//! (`vet`); after it, no run-time checks in the hot paths of the release build, the paper's
//! Table 2, the unsafe budget, the dependencies, the expanded code and the trusted crates'
//! public surface (`check`, the default); the surface's list for docs/safety.md (`surface`).
//! Built from a workspace of its own, it links no crate it audits. Exits 1 if the audit fails.
#![forbid(unsafe_code)]

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
    /// The trusted crates' public surface; with --splice, written into docs/safety.md.
    Surface {
        #[arg(long, default_value = ".")]
        root: PathBuf,
        #[arg(long)]
        splice: bool,
    },
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
        None => check(cli.check),
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
