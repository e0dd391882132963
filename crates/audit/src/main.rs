//! `safenic-audit` (also run as `safenic audit`): no run-time checks in the hot paths of the
//! release build, the paper's Table 2, and the unsafe budget. Exits 1 if the audit fails.
#![forbid(unsafe_code)]

use audit::sizes::TableDriver;
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

fn table() -> Vec<TableDriver> {
    let c = |compiler: &str| TableDriver {
        label: format!("c, {compiler} (drivers/c/src)"),
        sources: vec!["drivers/c/src".into()],
        binary: format!("drivers/c/build/{compiler}/safenic-c-{{mode}}"),
        main_loop: "forward_{mode}".into(),
    };
    vec![
        TableDriver {
            label: "rust (crates/ixgbe + safenic fwd.rs)".into(),
            sources: vec!["crates/ixgbe/src".into(), "crates/safenic/src/fwd.rs".into()],
            binary: "target/release/safenic".into(),
            main_loop: "safenic::fwd::forward_{mode}".into(),
        },
        c("clang"),
        c("gcc"),
    ]
}

fn run(args: Cli) -> Result<(), String> {
    let binary = match args.binary {
        Some(b) => b,
        None => std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?.with_file_name("safenic"),
    };
    let root = args.root.or_else(|| audit::repository_of(&binary)).unwrap_or_else(|| PathBuf::from("."));
    let report = audit::audit(&audit::Options { binary, root, table: table() })?;
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
    cli::finish("safenic-audit", run(cli::parse("safenic-audit")))
}
