//! `safenic`: forward packets between two 82599 ports with the safe driver, or generate
//! traffic. The command-line contract of every safenic driver, in every language:
//! `<driver> fwd <restricted|const|flexible> <BDF-in> <BDF-out> [--sysfs DIR]` forwards both
//! directions until SIGINT/SIGTERM, then prints one summary line and exits 0.

#![forbid(unsafe_code)]

mod bench_dpdk;
mod bench_isolation;
mod bench_queues;
mod bench_vfio;
mod bench_virtio;
mod bench_xdp;
mod chaos;
mod filter;
mod fwd;
mod fwd_options;
mod fwd_queues;
mod fwd_virtio;
mod fwd_xdp;
mod gen;
mod ports;
mod report;

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

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

impl Mode {
    /// The name on command lines.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Restricted => "restricted",
            Mode::Const => "const",
            Mode::Flexible => "flexible",
        }
    }
}

/// The PCI interface of a virtio-net port (docs/virtio.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VirtioInterface {
    Legacy,
    Modern,
}

/// How an AF_XDP port is bound (docs/afxdp.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum XdpBind {
    Auto,
    Copy,
    ZeroCopy,
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
        /// The first port: a PCI address (e.g. 0000:5e:00.0) of an 82599 or virtio-net
        /// function, or xdp:IFNAME[@QUEUE] for any interface Linux drives, through AF_XDP.
        input: String,
        /// The second port, as the first.
        output: String,
        /// Directory holding the PCI function directories.
        #[arg(long, env = "SAFENIC_SYSFS", default_value = "/sys/bus/pci/devices")]
        sysfs: PathBuf,
        #[arg(long, value_enum, default_value = "paper")]
        mac_rewrite: MacRewrite,
        /// Restricted model: TX queues per direction on the output port (1 to 64); packets
        /// go to them in turn.
        #[arg(long, default_value_t = 1, value_parser = outputs)]
        outputs: usize,
        /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
        #[arg(long, value_parser = cli::seconds)]
        seconds: Option<f64>,
        /// Print throughput every second (default: when standard output is a terminal).
        #[arg(long)]
        progress: bool,
        /// Pin the forwarding thread to this CPU.
        #[arg(long)]
        cpu: Option<usize>,
        /// 82599 ports: forward on this many queue pairs (1 to 16), over which RSS spreads
        /// the flows by their addresses and ports; each flow stays on one queue, in order.
        #[arg(long, default_value_t = 1)]
        queues: usize,
        /// 82599 ports: the CPUs of the forwarding threads, comma-separated (e.g. 0,1): one
        /// thread per CPU, each serving an even share of the queue pairs.
        #[arg(long, value_delimiter = ',', value_name = "LIST")]
        cores: Option<Vec<usize>>,
        /// IEEE 802.3x flow control: a port whose receive buffer fills sends XOFF and its link
        /// partner waits; the flexible model then keeps frames that do not fit into the TX ring
        /// instead of dropping them. Nothing is lost to a slow or descheduled driver.
        #[arg(long)]
        flow_control: bool,
        /// Seconds an 82599 port's link may take to come up before the driver gives up
        /// (ixy's and DPDK's drivers wait about as long).
        #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = link_timeout)]
        link_timeout: Duration,
        /// Flexible model: drop IPv4 UDP frames to this destination port, decided per burst by
        /// a packet filter written in C that runs in an isolation domain (docs/isolation.md):
        /// MPK where the CPU has protection keys, a helper process elsewhere
        /// (SAFENIC_ISOLATION_BACKEND=mpk|process chooses).
        #[arg(long, value_name = "UDP_PORT")]
        filter: Option<u16>,
        /// A virtio-net port's interface: modern (virtio 1.x) where the device has it, as
        /// Linux chooses, unless this says legacy (as ixy's driver).
        #[arg(long, value_enum)]
        virtio_interface: Option<VirtioInterface>,
        /// An AF_XDP port's bind mode: zero-copy where the interface's driver has it, else
        /// copy (auto, the kernel's choice), or either one forced.
        #[arg(long, value_enum, default_value = "auto")]
        xdp_bind: XdpBind,
    },
    /// Send generated UDP frames out of one port.
    Gen {
        /// PCI address of an 82599 port, or xdp:IFNAME[@QUEUE] for any interface through AF_XDP.
        port: String,
        #[arg(long, env = "SAFENIC_SYSFS", default_value = "/sys/bus/pci/devices")]
        sysfs: PathBuf,
        /// Packets per second (default: as fast as the port takes them).
        #[arg(long, value_parser = cli::positive)]
        rate: Option<f64>,
        /// Frame size without FCS, 60 to 1514.
        #[arg(long, default_value_t = 60, value_parser = frame_size)]
        size: usize,
        /// Stop after this many packets.
        #[arg(long, value_parser = cli::at_least_one)]
        count: Option<u64>,
        /// Stop after this many seconds.
        #[arg(long, value_parser = cli::seconds)]
        seconds: Option<f64>,
    },
    /// Run drivers of the manifest against a hostile device (nicsim's fault injection): in
    /// every model, each kind of fault under traffic with flow control, then a check that
    /// traffic flows again exactly; a table of verdicts (survived, clean exit, crashed,
    /// stalled, corrupted memory, wrong frames). Needs root and hugepages.
    Chaos {
        /// Only these drivers of the manifest (default: every one with `conformance = true`).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Models (default: all three).
        #[arg(long, value_enum, value_delimiter = ',')]
        modes: Vec<Mode>,
        /// About this many seconds of each fault (default: `make test`'s dose, 2 × 500 000
        /// hostile write-backs and 20 000 frames per wire fault).
        #[arg(long, value_parser = cli::seconds)]
        seconds: Option<f64>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Also write chaos.json into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Replace the text between `<!-- safenic chaos: begin -->` and `<!-- safenic chaos:
        /// end -->` in this Markdown file with the table.
        #[arg(long)]
        splice: Option<PathBuf>,
    },
    /// Draw the bench's figures again from a results.json it wrote (SVG and PNG into DIR), with
    /// what set each figure named by the current rules from the run's own trial logs.
    Figures {
        /// The results.json of a `safenic bench --out` run.
        results: PathBuf,
        /// Where to write the figures.
        dir: PathBuf,
        /// Also write the tables: results.md beside RESULTS, RESULTS itself with the labels
        /// named again, and FILE between its `safenic bench` markers (as `bench --splice`).
        #[arg(long, value_name = "FILE")]
        splice: Option<PathBuf>,
    },
    /// Measure drivers on nicsim: forwarded Mpps, instructions and estimated cycles per packet
    /// (callgrind), the drivers of a model interleaved and repeated, as Markdown (and JSON with
    /// --out). Needs root, hugepages and valgrind (scripts/setup).
    Bench {
        /// Models to measure (default: all three).
        #[arg(long, value_enum, value_delimiter = ',')]
        modes: Vec<Mode>,
        /// Measure only these drivers of the manifest (drivers/drivers.toml; default: every one
        /// with `bench = true`, the Rust one as this safenic).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Another driver following the contract, as NAME=COMMAND (the words before the mode;
        /// `{mode}` is replaced by the model), e.g. `mine=./my-driver-{mode} fwd`. Repeatable.
        #[arg(long = "driver")]
        drivers: Vec<String>,
        /// The repository, for the manifest and relative paths (default: the one this program
        /// was built in, else the current directory).
        #[arg(long)]
        root: Option<PathBuf>,
        /// How long and how often: quick (1 repetition, trials of 0.1 s to 10% of the line
        /// rate, 1 s under callgrind; a smoke test), standard (3, 1 s to 1%, 10 s) or full (3,
        /// 2 s to 0.5%, 20 s, and every RFC 2544 frame size from 64 to 1518 bytes).
        #[arg(long, value_enum, default_value = "standard")]
        profile: BenchProfile,
        /// Repetitions of every measurement (default: the profile's).
        #[arg(long, value_parser = repetitions)]
        repetitions: Option<usize>,
        /// Seconds of traffic in each RFC 2544 trial (default: the profile's). A trial in which
        /// nicsim fell behind the rate asked for is run again, up to three times.
        #[arg(long, value_parser = cli::seconds)]
        trial_seconds: Option<f64>,
        /// The throughput search stops within this many percent of the line rate (default:
        /// the profile's).
        #[arg(long, value_parser = percent_above_zero)]
        resolution: Option<f64>,
        /// Percent of the offered frames a trial may lose and still pass (RFC 2544: 0).
        #[arg(long, value_parser = percent, default_value = "0")]
        loss_tolerance: f64,
        /// Seconds each driver runs under callgrind (default: the profile's).
        #[arg(long, value_parser = cli::seconds)]
        callgrind_seconds: Option<f64>,
        /// Only RFC 2544 throughput and latency (no callgrind).
        #[arg(long, conflicts_with = "instructions_only")]
        throughput_only: bool,
        /// Only callgrind's instructions and estimated cycles (no RFC 2544).
        #[arg(long)]
        instructions_only: bool,
        /// Also write results.json and results.md into this directory (read back and
        /// checked before the bench exits 0).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Keep every callgrind profile in this directory (DRIVER-MODEL-REPETITION.callgrind),
        /// to compare the loops per source line with `callgrind_annotate --auto=yes`.
        #[arg(long)]
        profiles: Option<PathBuf>,
        /// Draw the figures here instead of in OUT/figures (needs --out).
        #[arg(long)]
        figures: Option<PathBuf>,
        /// Replace the text between `<!-- safenic bench: begin -->` and `<!-- safenic bench:
        /// end -->` in this Markdown file with the results (needs --out; make bench updates
        /// docs/results.md so).
        #[arg(long)]
        splice: Option<PathBuf>,
    },
    /// The Rust l2fwd of crates/dpdk beside DPDK's own C l2fwd, paired in one run:
    /// instructions and estimated cycles per packet under callgrind on `net_null`, and the
    /// overload test (frames forwarded per second, RX burst fill, TX drops) on `net_null` and
    /// on nicsim through DPDK's ixgbe driver. Needs root, valgrind and DPDK (scripts/setup).
    BenchDpdk(bench_dpdk::Args),
    /// The cost of isolating a C library (crates/isolation): the empty call, buffers, snappy
    /// and libpng, each called directly, in an MPK domain (on a host with PKU) and in a helper
    /// process, interleaved in rounds.
    BenchIsolation(bench_isolation::Args),
    /// The Rust virtio-net driver (modern and legacy interface) beside the C baseline's (legacy)
    /// between nicsim's virtio-net functions: instructions and estimated cycles per forwarded
    /// packet under callgrind, in interleaved rounds. Needs root and valgrind (scripts/setup).
    BenchVirtio(bench_virtio::Args),
    /// The Rust driver beside the C baseline (libxdp) over AF_XDP between two veth pairs of
    /// namespaces it makes, in copy mode: instructions and estimated cycles per forwarded
    /// packet under callgrind, packets per second and CPU time per packet in user space and in
    /// the kernel, in interleaved rounds. Needs root and valgrind (scripts/setup).
    BenchXdp(bench_xdp::Args),
    /// Each driver and model through sysfs (root, physical addresses) and through VFIO (as
    /// nobody under `nicsim exec --vfio`, IOVAs): instructions and estimated cycles per
    /// forwarded packet under callgrind, paired in one run. Needs root and valgrind.
    BenchVfio(bench_vfio::Args),
    /// Each driver and model on 1, 2, 4 and 16 queue pairs of one core, RSS spreading 1024
    /// flows: instructions and estimated cycles per forwarded packet under callgrind, how
    /// evenly the flows spread, and what one and two cores forward. Needs root and valgrind.
    BenchQueues(bench_queues::Args),
}

/// Which drivers `safenic bench` measures.
struct Selection {
    only: Vec<String>,
    extra: Vec<String>,
    root: Option<PathBuf>,
}

/// `safenic bench --profile`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum BenchProfile {
    Quick,
    Standard,
    Full,
}

fn bench_options(modes: Vec<Mode>, selection: Selection, profile: report::Profile) -> Result<report::Options, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    let root = selection.root.or_else(|| manifest::repository_of(&exe)).unwrap_or_else(|| PathBuf::from("."));
    let drivers = manifest::Manifest::load(&root)?;
    let chosen = |name: &str| selection.only.is_empty() || selection.only.iter().any(|o| o == name);
    let built: Vec<String> =
        drivers.drivers.iter().filter(|d| d.bench && chosen(&d.name)).flat_map(|d| d.built_paths()).collect();
    manifest::isa::check_built(&root, &built, "bench")?;
    let listed = bench::drivers_of(&drivers, &root, &exe);
    for name in &selection.only {
        if !listed.iter().any(|d| &d.name == name) {
            return Err(format!("--only {name}: no driver of that name with `bench = true` in {}", manifest::MANIFEST));
        }
    }
    let mut all: Vec<bench::Driver> =
        listed.into_iter().filter(|d| selection.only.is_empty() || selection.only.contains(&d.name)).collect();
    for d in &selection.extra {
        all.push(bench::Driver::parse(d)?);
    }
    let modes = if modes.is_empty() { vec![Mode::Restricted, Mode::Const, Mode::Flexible] } else { modes };
    Ok(report::Options {
        drivers: all,
        modes: modes.iter().map(|m| format!("{m:?}").to_lowercase()).collect(),
        profile,
        throughput: true,
        instructions: true,
        out: None,
        profiles: None,
        figures: None,
        splice: None,
    })
}

/// `--link-timeout`: 0.1 to 600 seconds.
fn link_timeout(s: &str) -> Result<Duration, String> {
    s.parse()
        .ok()
        .filter(|t: &f64| (0.1..=600.0).contains(t))
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("`{s}`: give 0.1 to 600 seconds"))
}

/// `--repetitions`: 1 to 100.
pub(crate) fn repetitions(s: &str) -> Result<usize, String> {
    s.parse().ok().filter(|n| (1..=100).contains(n)).ok_or_else(|| format!("`{s}`: repeat 1 to 100 times"))
}

/// `--loss-tolerance`: 0 to 100 percent.
fn percent(s: &str) -> Result<f64, String> {
    s.parse()
        .ok()
        .filter(|p: &f64| (0.0..=100.0).contains(p))
        .ok_or_else(|| format!("`{s}`: give a percentage from 0 to 100"))
}

/// `--resolution`: above 0, at most 100 percent.
fn percent_above_zero(s: &str) -> Result<f64, String> {
    percent(s).and_then(|p| if p > 0.0 { Ok(p) } else { Err(format!("`{s}`: give a percentage above 0, e.g. 1")) })
}

/// `--outputs`: an agent has 1 to 64.
fn outputs(s: &str) -> Result<usize, String> {
    s.parse().ok().filter(|n| (1..=64).contains(n)).ok_or_else(|| format!("`{s}`: an agent has 1 to 64 outputs"))
}

/// `--size`: a frame of 60 to 1514 bytes without its FCS.
fn frame_size(s: &str) -> Result<usize, String> {
    s.parse().ok().filter(|n| (60..=1514).contains(n)).ok_or_else(|| format!("`{s}`: frames are 60 to 1514 bytes"))
}

/// The program `name` from the same build as this one; if it is missing, an error naming the
/// `command` that builds it and the `make` target that does so too.
pub(crate) fn beside_this_program(name: &str, command: &str, make: &str) -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    let program = me.with_file_name(name);
    if !program.exists() {
        return Err(format!("{} is missing: build it with `{command}` ({make} does)", program.display()));
    }
    Ok(program)
}

fn main() -> ExitCode {
    let args: Cli = cli::parse("safenic");
    let result = match args.cmd {
        Cmd::Fwd {
            mode,
            input,
            output,
            sysfs,
            mac_rewrite,
            outputs,
            seconds,
            progress,
            cpu,
            flow_control,
            link_timeout,
            filter,
            virtio_interface,
            queues,
            cores,
            xdp_bind,
        } => {
            let progress = progress || std::io::IsTerminal::is_terminal(&std::io::stdout());
            ports::forward(&fwd_options::Options {
                mode,
                input,
                output,
                sysfs,
                mac_rewrite,
                outputs,
                seconds,
                progress,
                cpu,
                flow_control,
                link_timeout,
                filter,
                virtio_interface: virtio_interface.map(|i| match i {
                    VirtioInterface::Legacy => virtio::Interface::Legacy,
                    VirtioInterface::Modern => virtio::Interface::Modern,
                }),
                queues,
                cores,
                xdp_bind: match xdp_bind {
                    XdpBind::Auto => afxdp::BindMode::Auto,
                    XdpBind::Copy => afxdp::BindMode::Copy,
                    XdpBind::ZeroCopy => afxdp::BindMode::ZeroCopy,
                },
            })
        }
        Cmd::Gen { port, sysfs, rate, size, count, seconds } => {
            gen::run(&gen::Options { port, sysfs, rate, size, count, seconds })
        }
        Cmd::Figures { results, dir, splice } => report::redraw(&results, &dir, splice.as_deref()),
        Cmd::Chaos { only, modes, seconds, seed, out, splice } => {
            let modes = if modes.is_empty() { vec![Mode::Restricted, Mode::Const, Mode::Flexible] } else { modes };
            let dose = seconds
                .map_or(bench::chaos::Dose { seed, ..bench::chaos::Dose::TEST }, |s| bench::chaos::Dose::soak(s, seed));
            chaos::run(&chaos::Options { only, modes: modes.iter().map(|m| m.name()).collect(), dose, out, splice })
        }
        Cmd::Bench {
            modes,
            only,
            drivers,
            root,
            profile,
            repetitions,
            trial_seconds,
            resolution,
            loss_tolerance,
            callgrind_seconds,
            throughput_only,
            instructions_only,
            out,
            profiles,
            figures,
            splice,
        } => {
            let selection = Selection { only, extra: drivers, root };
            let mut p = report::Profile::named(&format!("{profile:?}").to_lowercase());
            p.repetitions = repetitions.unwrap_or(p.repetitions);
            p.search.trial_seconds = trial_seconds.unwrap_or(p.search.trial_seconds);
            p.search.resolution = resolution.map_or(p.search.resolution, |r| r / 100.0);
            p.search.loss_tolerance = loss_tolerance / 100.0;
            p.callgrind_seconds = callgrind_seconds.unwrap_or(p.callgrind_seconds);
            bench_options(modes, selection, p).and_then(|mut o| {
                o.throughput = !instructions_only;
                o.instructions = !throughput_only;
                o.out = out;
                o.profiles = profiles;
                o.figures = figures;
                o.splice = splice;
                report::run(&o)
            })
        }
        Cmd::BenchDpdk(args) => bench_dpdk::run(&args),
        Cmd::BenchIsolation(args) => bench_isolation::run(&args),
        Cmd::BenchVirtio(args) => bench_virtio::run(&args),
        Cmd::BenchXdp(args) => bench_xdp::run(&args),
        Cmd::BenchVfio(args) => bench_vfio::run(&args),
        Cmd::BenchQueues(args) => bench_queues::run(&args),
    };
    cli::finish("safenic", result)
}
