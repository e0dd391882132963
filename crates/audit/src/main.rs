//! `safenic-audit` (also run as `safenic audit`): no run-time checks in the hot paths of the
//! release build, the paper's Table 2, and the unsafe budget. Exits 1 if the audit fails.
#![forbid(unsafe_code)]

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "safenic-audit", version, about = "Prove the hot paths check-free and unsafe code confined")]
struct Cli {
    /// The release binary to audit (default: the `safenic` next to this program).
    #[arg(long)]
    binary: Option<PathBuf>,
    /// The repository (default: the one the binary was built in, else the current directory).
    #[arg(long)]
    root: Option<PathBuf>,
    /// The report as JSON.
    #[arg(long)]
    json: bool,
}

fn run(args: Cli) -> Result<(), String> {
    let binary = match args.binary {
        Some(b) => b,
        None => std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?.with_file_name("safenic"),
    };
    if !binary.is_file() {
        return Err(format!(
            "{}: no such binary: build it with `cargo build --release` or pass --binary",
            binary.display()
        ));
    }
    let root = args
        .root
        .or_else(|| manifest::repository_of(&binary))
        .or_else(|| std::env::current_exe().ok().and_then(|e| manifest::repository_of(&e)))
        .unwrap_or_else(|| PathBuf::from("."));
    let drivers = manifest::Manifest::load(&root)?;
    let built: Vec<String> = drivers.drivers.iter().flat_map(|d| d.built_paths()).collect();
    manifest::isa::check_built(&root, &built, "audit")?;
    let table = audit::sizes::table_of(&drivers, &root, &binary);
    let report = audit::audit(&audit::Options { binary, root, table })?;
    if args.json {
        cli::outln!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?)?;
    } else {
        audit::report::print_text(&report)?;
    }
    if report.passed {
        Ok(())
    } else {
        Err("audit failed: see the findings above".into())
    }
}

fn main() -> ExitCode {
    // Run as `safenic audit`, errors name the command the user typed.
    let invoked_as = std::env::args_os().next().map(PathBuf::from);
    let name = match invoked_as.as_deref().and_then(|p| p.file_name()).and_then(|n| n.to_str()) {
        Some("safenic") => "safenic",
        _ => "safenic-audit",
    };
    cli::finish(name, run(cli::parse(name)))
}
