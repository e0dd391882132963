//! `safenic bench-isolation`: the cost of crates/isolation's domains against the direct call
//! (`bench::isolation`), printed and spliced into docs/results.md.

use std::path::PathBuf;
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
        crate::report::splice_file(file, (SPLICE_BEGIN, SPLICE_END), &text)?;
    }
    Ok(())
}
