//! `safenic bench-dpdk`: the Rust l2fwd beside DPDK's C l2fwd (`bench::l2fwd`), printed and
//! spliced into docs/results.md.

use std::path::PathBuf;

/// Where `--splice` puts the tables.
pub const SPLICE_BEGIN: &str = "<!-- safenic bench-dpdk: begin -->";
pub const SPLICE_END: &str = "<!-- safenic bench-dpdk: end -->";

/// `safenic bench-dpdk`'s options.
#[derive(clap::Args)]
pub struct Args {
    /// The repository, for the binaries' default paths (default: the one this program was
    /// built in, else the current directory).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// The Rust l2fwd (default: target/release/examples/l2fwd).
    #[arg(long)]
    pub rust: Option<PathBuf>,
    /// DPDK's C l2fwd (default: target/dpdk-l2fwd/l2fwd, which scripts/build-dpdk-l2fwd builds).
    #[arg(long)]
    pub c: Option<PathBuf>,
    /// Seconds each l2fwd runs under callgrind.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub callgrind_seconds: u64,
    /// Seconds of each overload trial's measured window.
    #[arg(long, default_value = "5", value_parser = cli::seconds)]
    pub overload_seconds: f64,
    /// Overload trials of each l2fwd on each device.
    #[arg(long, default_value_t = 5, value_parser = crate::repetitions)]
    pub repetitions: usize,
    /// Only callgrind's instructions and estimated cycles.
    #[arg(long, conflicts_with = "overload_only")]
    pub instructions_only: bool,
    /// Only the overload test.
    #[arg(long)]
    pub overload_only: bool,
    /// Replace the text between `<!-- safenic bench-dpdk: begin -->` and `<!-- safenic
    /// bench-dpdk: end -->` in this Markdown file with the tables.
    #[arg(long)]
    pub splice: Option<PathBuf>,
}

/// `path` if it exists, else an error naming what builds it.
fn built(path: PathBuf, what: &str, fix: &str) -> Result<PathBuf, String> {
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!("{what} {} is missing: {fix}", path.display()))
    }
}

pub fn run(a: &Args) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    let root = a.root.clone().or_else(|| manifest::repository_of(&exe)).unwrap_or_else(|| PathBuf::from("."));
    let l2fwd_dir = root.join("target/dpdk-l2fwd");
    let options = bench::l2fwd::Options {
        rust: built(
            a.rust.clone().unwrap_or_else(|| root.join("target/release/examples/l2fwd")),
            "the Rust l2fwd",
            "build it with `cargo build --release -p dpdk --examples` (make bench-dpdk does)",
        )?,
        c: built(
            a.c.clone().unwrap_or_else(|| l2fwd_dir.join("l2fwd")),
            "DPDK's C l2fwd",
            "build it with scripts/build-dpdk-l2fwd (make build does)",
        )?,
        burst_counts: built(
            l2fwd_dir.join("burst_counts.so"),
            "the burst counter",
            "build it with scripts/build-dpdk-l2fwd (make build does)",
        )?,
        nicsim: crate::beside_this_program("nicsim", "cargo build --release -p nicsim", "make build")?,
        callgrind_seconds: a.callgrind_seconds,
        overload_seconds: a.overload_seconds,
        repetitions: a.repetitions,
        measure_instructions: !a.overload_only,
        measure_overload: !a.instructions_only,
    };
    let report = bench::l2fwd::run(&options)?;
    let level = std::fs::read_to_string(l2fwd_dir.join("isa-level")).unwrap_or_default();
    let text = format!(
        "`make bench-dpdk` (`safenic bench-dpdk`), both l2fwds built for {}.\n\n{}",
        level.trim(),
        report.markdown(&options)
    );
    println!("{text}");
    if let Some(file) = &a.splice {
        crate::report::splice_file(file, (SPLICE_BEGIN, SPLICE_END), &text)?;
    }
    Ok(())
}
