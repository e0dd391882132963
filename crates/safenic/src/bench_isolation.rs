//! `safenic bench-isolation`: the cost of crates/isolation's domains against the direct call
//! (`bench::isolation`), printed and spliced into docs/results.md.

use std::path::{Path, PathBuf};
use std::time::Duration;

pub const SPLICE_BEGIN: &str = "<!-- safenic bench-isolation: begin -->";
pub const SPLICE_END: &str = "<!-- safenic bench-isolation: end -->";

/// `safenic bench-isolation`'s options.
#[derive(clap::Args)]
pub struct Args {
    /// Interleaved rounds per workload (the figures are their medians).
    #[arg(long, default_value_t = 21, value_parser = crate::repetitions)]
    pub rounds: usize,
    /// Milliseconds each route's timing aims at per round.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub window_ms: u64,
    /// Replace the text between `<!-- safenic bench-isolation: begin -->` and `<!-- safenic
    /// bench-isolation: end -->` in this Markdown file with the table.
    #[arg(long)]
    pub splice: Option<PathBuf>,
}

pub fn run(a: &Args) -> Result<(), String> {
    let options = bench::isolation::Options { rounds: a.rounds, window: Duration::from_millis(a.window_ms) };
    let report = bench::isolation::run(&options)?;
    let text =
        format!("`make bench-isolation` (`safenic bench-isolation`).\n\n{}", bench::isolation::markdown(&report));
    println!("{text}");
    if let Some(file) = &a.splice {
        splice_into(file, &text)?;
    }
    Ok(())
}

fn splice_into(file: &Path, text: &str) -> Result<(), String> {
    let old = std::fs::read_to_string(file).map_err(|e| format!("reading {}: {e}", file.display()))?;
    let new = crate::report::splice_between(&old, (SPLICE_BEGIN, SPLICE_END), text)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    std::fs::write(file, new).map_err(|e| format!("writing {}: {e}", file.display()))
}
