//! `safenic bench-vfio`: each driver and model through sysfs and through VFIO (`bench::vfio`),
//! printed and spliced into docs/results.md.

use std::path::PathBuf;

/// Where `--splice` puts the table.
pub const SPLICE_BEGIN: &str = "<!-- safenic bench-vfio: begin -->";
pub const SPLICE_END: &str = "<!-- safenic bench-vfio: end -->";

/// `safenic bench-vfio`'s options.
#[derive(clap::Args)]
pub struct Args {
    /// The repository, for the drivers' paths (default: the one this program was built in, else
    /// the current directory).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Seconds each driver runs under callgrind through each path in each round.
    #[arg(long, default_value = "5", value_parser = cli::seconds)]
    pub callgrind_seconds: f64,
    /// Rounds, each measuring every driver and model through both paths.
    #[arg(long, default_value_t = 1, value_parser = crate::repetitions)]
    pub rounds: usize,
    /// Only these drivers (default: rust, c-clang, c-gcc).
    #[arg(long, value_delimiter = ',')]
    pub drivers: Vec<String>,
    /// Only these models (default: all three).
    #[arg(long, value_delimiter = ',')]
    pub modes: Vec<String>,
    /// Replace the text between `<!-- safenic bench-vfio: begin -->` and `<!-- safenic
    /// bench-vfio: end -->` in this Markdown file with the table.
    #[arg(long)]
    pub splice: Option<PathBuf>,
}

pub fn run(a: &Args) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    let root = a.root.clone().or_else(|| manifest::repository_of(&exe)).unwrap_or_else(|| PathBuf::from("."));
    let m = manifest::Manifest::load(&root)?;
    let names: Vec<String> =
        if a.drivers.is_empty() { ["rust", "c-clang", "c-gcc"].map(String::from).to_vec() } else { a.drivers.clone() };
    for n in &names {
        if !["rust", "c-clang", "c-gcc"].contains(&n.as_str()) {
            return Err(format!("--drivers {n}: give rust, c-clang or c-gcc (the drivers with a VFIO path)"));
        }
    }
    let modes: Vec<&str> =
        if a.modes.is_empty() { bench::MODES.to_vec() } else { a.modes.iter().map(String::as_str).collect() };
    if let Some(bad) = modes.iter().find(|m| !bench::MODES.contains(m)) {
        return Err(format!("--modes {bad}: give restricted, const or flexible"));
    }
    let built: Vec<String> =
        m.drivers.iter().filter(|d| names.contains(&d.name)).flat_map(|d| d.built_paths()).collect();
    manifest::isa::check_built(&root, &built, "bench-vfio")?;
    let drivers: Vec<bench::Driver> =
        bench::drivers_of(&m, &root, &exe).into_iter().filter(|d| names.contains(&d.name)).collect();
    let nicsim = exe.with_file_name("nicsim");
    if !nicsim.is_file() {
        return Err(format!("{} is missing: build the workspace (make build)", nicsim.display()));
    }
    let rounds = bench::vfio::run(&drivers, &modes, a.callgrind_seconds, a.rounds, &nicsim)?;
    let level = manifest::isa::compiled();
    let text = format!(
        "`make bench-vfio` (`safenic bench-vfio`), every driver built for {level}.\n\n{}",
        bench::vfio::markdown(&rounds, a.callgrind_seconds)
    );
    println!("{text}");
    if let Some(file) = &a.splice {
        crate::report::splice_file(file, (SPLICE_BEGIN, SPLICE_END), &text)?;
    }
    Ok(())
}
