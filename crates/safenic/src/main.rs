//! `safenic`: forward packets between two 82599 ports with the safe driver, or generate
//! traffic. The command-line contract of every safenic driver, in every language:
//! `<driver> fwd <restricted|const|flexible> <BDF-in> <BDF-out> [--sysfs DIR]` forwards both
//! directions until SIGINT/SIGTERM, then prints one summary line and exits 0.

#![forbid(unsafe_code)]

mod fwd;
mod gen;

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "safenic", version, about = "A memory-safe 82599 driver with no run-time checks on its packet path")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// The driver model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// TinyNF's agent, output count known at run time.
    Restricted,
    /// TinyNF's agent, output count a compile-time constant (1).
    Const,
    /// DPDK-like rx_batch/tx_batch over a buffer pool.
    Flexible,
}

/// What the forwarder does to each frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MacRewrite {
    /// Destination 00:00:00:00:00:01, source 00:00:00:00:00:00, as in the paper.
    Paper,
    /// Frames leave unchanged.
    None,
}

#[derive(Subcommand)]
enum Cmd {
    /// Forward both directions between two ports (in→out and out→in).
    Fwd {
        mode: Mode,
        /// PCI address of the first port (e.g. 0000:5e:00.0).
        input: String,
        /// PCI address of the second port.
        output: String,
        /// Directory holding the PCI function directories.
        #[arg(long, env = "SAFENIC_SYSFS", default_value = "/sys/bus/pci/devices")]
        sysfs: PathBuf,
        #[arg(long, value_enum, default_value = "paper")]
        mac_rewrite: MacRewrite,
        /// Restricted model: TX queues per direction on the output port (1 to 64); packets
        /// go to them in turn.
        #[arg(long, default_value_t = 1)]
        outputs: usize,
        /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
        #[arg(long)]
        seconds: Option<f64>,
        /// Print throughput every second (default: when standard output is a terminal).
        #[arg(long)]
        progress: bool,
        /// Pin the forwarding thread to this CPU.
        #[arg(long)]
        cpu: Option<usize>,
    },
    /// Send generated UDP frames out of one port.
    Gen {
        /// PCI address of the port.
        port: String,
        #[arg(long, env = "SAFENIC_SYSFS", default_value = "/sys/bus/pci/devices")]
        sysfs: PathBuf,
        /// Packets per second (default: as fast as the port takes them).
        #[arg(long)]
        rate: Option<f64>,
        /// Frame size without FCS, 60 to 1514.
        #[arg(long, default_value_t = 60)]
        size: usize,
        /// Stop after this many packets.
        #[arg(long)]
        count: Option<u64>,
        /// Stop after this many seconds.
        #[arg(long)]
        seconds: Option<f64>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Fwd { mode, input, output, sysfs, mac_rewrite, outputs, seconds, progress, cpu } => {
            let progress = progress || std::io::IsTerminal::is_terminal(&std::io::stdout());
            fwd::run(&fwd::Options { mode, input, output, sysfs, mac_rewrite, outputs, seconds, progress, cpu })
        }
        Cmd::Gen { port, sysfs, rate, size, count, seconds } => {
            gen::run(&gen::Options { port, sysfs, rate, size, count, seconds })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("safenic: {e}");
            ExitCode::FAILURE
        }
    }
}
