//! `safenic bench-xdp`: the Rust driver beside the C baseline over AF_XDP on veth pairs
//! (`bench::xdp`), printed and spliced into docs/results.md.

use std::path::PathBuf;

/// Where `--splice` puts the table.
pub const SPLICE_BEGIN: &str = "<!-- safenic bench-xdp: begin -->";
pub const SPLICE_END: &str = "<!-- safenic bench-xdp: end -->";

/// `safenic bench-xdp`'s options.
#[derive(clap::Args)]
pub struct Args {
    /// The repository, for the drivers' paths (default: the one this program was built in, else
    /// the current directory).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Seconds each driver runs under callgrind in each round.
    #[arg(long, default_value = "8", value_parser = cli::seconds)]
    pub callgrind_seconds: f64,
    /// Seconds each driver's rate is measured in each round.
    #[arg(long, default_value = "5", value_parser = cli::seconds)]
    pub rate_seconds: f64,
    /// Rounds, each measuring every driver once.
    #[arg(long, default_value_t = 3, value_parser = crate::repetitions)]
    pub rounds: usize,
    /// Replace the text between `<!-- safenic bench-xdp: begin -->` and `<!-- safenic
    /// bench-xdp: end -->` in this Markdown file with the table.
    #[arg(long)]
    pub splice: Option<PathBuf>,
}

pub fn run(a: &Args) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    let root = a.root.clone().or_else(|| manifest::repository_of(&exe)).unwrap_or_else(|| PathBuf::from("."));
    let m = manifest::Manifest::load(&root)?;
    let wanted = |name: &str| ["rust", "c-clang", "c-gcc"].contains(&name);
    let built: Vec<String> =
        m.drivers.iter().filter(|d| d.bench && wanted(&d.name)).flat_map(|d| d.built_paths()).collect();
    manifest::isa::check_built(&root, &built, "bench-xdp")?;
    let drivers = bench::xdp::drivers(&bench::drivers_of(&m, &root, &exe));
    let rounds =
        bench::xdp::run(&drivers, &exe, &bench::xdp::profile_dir(), a.callgrind_seconds, a.rate_seconds, a.rounds)?;
    let level = manifest::isa::compiled();
    let text = format!(
        "`make bench-xdp` (`safenic bench-xdp`), every driver built for {level}.\n\n{}",
        bench::xdp::markdown(&rounds, a.callgrind_seconds, a.rate_seconds)
    );
    println!("{text}");
    if let Some(file) = &a.splice {
        crate::report::splice_file(file, (SPLICE_BEGIN, SPLICE_END), &text)?;
    }
    Ok(())
}
