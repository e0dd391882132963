//! `safenic bench-queues`: each driver and model on 1, 2, 4 and 16 queue pairs of one core,
//! how evenly RSS spreads the flows, and what one and two cores forward (`bench::queues`),
//! printed and spliced into docs/results.md.

use std::path::PathBuf;

/// Where `--splice` puts the tables.
pub const SPLICE_BEGIN: &str = "<!-- safenic bench-queues: begin -->";
pub const SPLICE_END: &str = "<!-- safenic bench-queues: end -->";

/// The drivers with several queue pairs.
const DRIVERS: [&str; 4] = ["rust", "c-clang", "c-gcc", "ada"];

/// `safenic bench-queues`' options.
#[derive(clap::Args)]
pub struct Args {
    /// The repository, for the drivers' paths (default: the one this program was built in, else
    /// the current directory).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Seconds each driver runs under callgrind at each queue count in each round.
    #[arg(long, default_value = "3", value_parser = cli::seconds)]
    pub callgrind_seconds: f64,
    /// Rounds, each measuring every driver and model at every queue count.
    #[arg(long, default_value_t = 1, value_parser = crate::repetitions)]
    pub rounds: usize,
    /// Seconds of each forwarding-rate run of the two-core comparison (0: leave it out).
    #[arg(long, default_value = "3")]
    pub rate_seconds: f64,
    /// Only these drivers (default: rust, c-clang, c-gcc, ada).
    #[arg(long, value_delimiter = ',')]
    pub drivers: Vec<String>,
    /// Only these models (default: all three).
    #[arg(long, value_delimiter = ',')]
    pub modes: Vec<String>,
    /// Replace the text between `<!-- safenic bench-queues: begin -->` and `<!-- safenic
    /// bench-queues: end -->` in this Markdown file with the tables.
    #[arg(long)]
    pub splice: Option<PathBuf>,
}

pub fn run(a: &Args) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    let root = a.root.clone().or_else(|| manifest::repository_of(&exe)).unwrap_or_else(|| PathBuf::from("."));
    let m = manifest::Manifest::load(&root)?;
    let names: Vec<String> = if a.drivers.is_empty() { DRIVERS.map(String::from).to_vec() } else { a.drivers.clone() };
    if let Some(n) = names.iter().find(|n| !DRIVERS.contains(&n.as_str())) {
        return Err(format!("--drivers {n}: give rust, c-clang, c-gcc or ada (the drivers with several queue pairs)"));
    }
    let modes: Vec<&str> =
        if a.modes.is_empty() { bench::MODES.to_vec() } else { a.modes.iter().map(String::as_str).collect() };
    if let Some(bad) = modes.iter().find(|m| !bench::MODES.contains(m)) {
        return Err(format!("--modes {bad}: give restricted, const or flexible"));
    }
    if !(a.rate_seconds == 0.0 || (a.rate_seconds.is_finite() && a.rate_seconds >= 0.1)) {
        return Err(format!("--rate-seconds {}: give 0 (none) or at least 0.1", a.rate_seconds));
    }
    let built: Vec<String> =
        m.drivers.iter().filter(|d| names.contains(&d.name)).flat_map(|d| d.built_paths()).collect();
    manifest::isa::check_built(&root, &built, "bench-queues")?;
    let drivers: Vec<bench::Driver> =
        bench::drivers_of(&m, &root, &exe).into_iter().filter(|d| names.contains(&d.name)).collect();
    let rounds = bench::queues::run(&drivers, &modes, a.callgrind_seconds, a.rounds)?;
    let mut text = format!(
        "`make bench-queues` (`safenic bench-queues`), every driver built for {}.\n\n{}",
        manifest::isa::compiled(),
        bench::queues::markdown(&rounds, a.callgrind_seconds)
    );
    let nicsim = exe.with_file_name("nicsim");
    if !nicsim.is_file() {
        return Err(format!("{} is missing: build the workspace (make build)", nicsim.display()));
    }
    text += &format!("\n{}", bench::queues::nicsim_table(&bench::queues::nicsim_costs(&nicsim)?));
    if a.rate_seconds > 0.0 {
        text += &format!(
            "\nForwarded packets per second on this two-core host, not under callgrind, {} flows each way at \
             line rate, {} s: one queue pair on the driver's core, and two queue pairs with one thread on each \
             core, **the second shared with nicsim's engine**, which a host with dedicated cores would not \
             do.\n\n| driver | model | 1 queue, 1 core (Mpps) | 2 queues, 2 cores (Mpps) |\n|---|---|---:|---:|\n",
            bench::queues::FLOWS,
            a.rate_seconds
        );
        for d in &drivers {
            for &mode in &modes {
                let (one, two) = bench::queues::two_core_rates(d, mode, a.rate_seconds)?;
                text += &format!("| {} | {mode} | {:.3} | {:.3} |\n", d.name, one / 1e6, two / 1e6);
            }
        }
    }
    println!("{text}");
    if let Some(file) = &a.splice {
        crate::report::splice_file(file, (SPLICE_BEGIN, SPLICE_END), &text)?;
    }
    Ok(())
}
