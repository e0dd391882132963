//! The `nicsim` command: `serve` runs the simulated card; the other subcommands are clients of
//! its control socket, plus `exec` (run a driver where the fake functions appear under
//! /sys/bus/pci/devices), `reflect` (the reference peer driver) and `bench` (nicsim's ceiling).
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use nicsim::ceiling::mpps;
use nicsim::chaos::{Fault, WireFault};
use nicsim::control::{PortStats, Stats};
use nicsim::guardian::{self, Guardian};
use nicsim::server::{self, ServeOptions, Server};
use nicsim::session::Session;
use nicsim::wire::{line_rate_pps, Captured, TrafficSpec};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(name = "nicsim", version, about = "A software Intel 82599ES for user-space drivers")]
struct Cli {
    /// Directory of the simulated devices and control socket (default: $NICSIM_ROOT or /dev/shm/nicsim).
    #[arg(long, global = true)]
    root: Option<PathBuf>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SfpCage {
    Sr,
    None,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create the devices and run the engine until SIGINT/SIGTERM or `nicsim shutdown`.
    Serve {
        /// Ports (PCI functions), 1 to 16.
        #[arg(long, default_value_t = 2, value_parser = port_count)]
        ports: usize,
        /// Connect two ports with a cable, e.g. `--cable 0-1` (repeatable).
        #[arg(long, value_parser = parse_cable)]
        cable: Vec<(usize, usize)>,
        /// Modelled link speed.
        #[arg(long, default_value_t = 10.0, value_parser = link_speed)]
        link_gbps: f64,
        /// CPU for the engine thread.
        #[arg(long)]
        cpu: Option<usize>,
        /// Present the functions bound to a fake `ixgbe` kernel driver (unbind via sysfs).
        #[arg(long)]
        bound: bool,
        /// Milliseconds link setup takes after power-on, CTRL.LNK_RST or `nicsim link up`.
        #[arg(long, default_value_t = nicsim::port::DEFAULT_LINK_UP.as_millis() as u64)]
        link_up_ms: u64,
        /// What the SFP+ cages hold: an Intel 10GBASE-SR module, or nothing (the I2C bus then
        /// never answers, and drivers carry on without a module).
        #[arg(long, value_enum, default_value_t = SfpCage::Sr)]
        sfp: SfpCage,
        /// What the ports are: `82599` or `virtio-net` for all, or one per port, comma-separated
        /// (`--device 82599,virtio-net`; the last applies to the ports beyond the list).
        #[arg(long, value_delimiter = ',', value_parser = device_kind, default_value = "82599")]
        device: Vec<nicsim::pciconfig::Kind>,
        /// Attach the next port's wire to a new TAP interface instead of generator and sink:
        /// `--tap NAME` or `--tap NAME,netns=NS` (repeatable: the first for port 0, and so on).
        #[arg(long)]
        tap: Vec<nicsim::server::TapSpec>,
    },
    /// Run CMD in a private mount namespace where nicsim's functions are /sys/bus/pci/devices.
    Exec {
        /// Bind the functions to uio_pci_generic and add /sys/class/uio and /dev/uioN, as
        /// DPDK's EAL needs them.
        #[arg(long)]
        uio: bool,
        /// Bind every function to vfio-pci in an IOMMU group of its own and add /dev/vfio: the
        /// command's VFIO calls are answered and its functions' DMA goes through nicsim's IOMMU.
        #[arg(long, conflicts_with = "uio")]
        vfio: bool,
        /// Give the VFIO groups to this user (UID or UID:GID), as `chown` of /dev/vfio/N does,
        /// so that a driver run as that user can open them.
        #[arg(long, requires = "vfio", value_parser = user_ids)]
        vfio_user: Option<(u32, u32)>,
        /// Bytes of pinned DMA memory a process may map, in place of its RLIMIT_MEMLOCK: for
        /// hosts where the limit cannot be raised (a container without CAP_SYS_RESOURCE).
        #[arg(long, requires = "vfio")]
        vfio_memlock: Option<u64>,
        #[arg(trailing_var_arg = true, required = true)]
        command: Vec<String>,
    },
    /// Control a port's traffic generator.
    Traffic {
        #[command(subcommand)]
        action: TrafficCmd,
    },
    /// Print counters (once, or every second with --watch).
    Stats {
        #[arg(long)]
        json: bool,
        /// Print per-second rates for this many seconds.
        #[arg(long, value_parser = cli::at_least_one)]
        watch: Option<u64>,
    },
    /// Print driver lint warnings.
    Lint {
        #[arg(long)]
        json: bool,
    },
    /// Capture a port's frames into a pcap file (or stop a capture).
    Pcap {
        #[arg(long)]
        port: usize,
        #[arg(long)]
        file: Option<PathBuf>,
        #[arg(long, default_value = "tx", value_parser = parse_direction)]
        direction: Captured,
        /// Stop after this many frames.
        #[arg(long, value_parser = cli::at_least_one)]
        count: Option<u64>,
        #[arg(long)]
        stop: bool,
    },
    /// Zero all counters.
    ResetCounters,
    /// Pull a port's cable (`down`: the link goes down now) or plug it in (`up`: link setup
    /// starts); on a cabled port, both ends.
    Link {
        #[arg(value_parser = ["up", "down"])]
        state: String,
        #[arg(long)]
        port: usize,
    },
    /// Surprise-remove a port: its registers and configuration space read all-ones from now on.
    Remove {
        #[arg(long)]
        port: usize,
    },
    /// Inject a fault into a port's device or wire, reproducibly (a seed), counted in `stats`.
    Fault {
        #[command(subcommand)]
        fault: FaultCmd,
        #[arg(long, global = true)]
        port: Option<usize>,
    },
    /// Stop the server.
    Shutdown,
    /// Started by `serve`: waits for serve to end and, if it left its devices behind, makes
    /// them read all-ones and removes them.
    #[command(hide = true)]
    Guard {
        #[arg(long)]
        remove_root: bool,
    },
    /// The reference peer driver: forward both ways between two ports (TinyNF style).
    Reflect {
        a: String,
        b: String,
        /// Directory of PCI functions (default: <root>/devices).
        #[arg(long)]
        sysfs: Option<PathBuf>,
        #[arg(long, value_parser = cli::seconds)]
        seconds: Option<f64>,
        #[arg(long)]
        cpu: Option<usize>,
    },
    /// Measure what one register access through a virtio function's BAR files costs, beside a
    /// plain system call in the same run (the function must be one no driver uses).
    BenchAccess {
        /// The virtio port to measure.
        #[arg(long, default_value_t = 0)]
        port: usize,
        /// Rounds, each of `--count` accesses of every kind in turn.
        #[arg(long, default_value_t = 10, value_parser = cli::at_least_one)]
        rounds: u64,
        #[arg(long, default_value_t = 2000, value_parser = cli::at_least_one)]
        count: u64,
        #[arg(long)]
        json: bool,
    },
    /// Measure nicsim's ceiling: two ports at full rate with a reflecting peer.
    Bench {
        #[arg(long, default_value_t = 10.0, value_parser = cli::seconds)]
        seconds: f64,
        #[arg(long, default_value_t = 10.0, value_parser = link_speed)]
        link_gbps: f64,
        #[arg(long)]
        json: bool,
    },
    /// nicsim's receive path alone, in this process, for callgrind to count: one port's
    /// generator (1024 flows) delivering `--frames` frames to `--queues` RX queues that RSS
    /// spreads them over (`safenic bench-queues` counts `nicsim::rx_cost::deliver`).
    BenchRx {
        #[arg(long, default_value_t = 1)]
        queues: u32,
        #[arg(long, default_value_t = 100_000, value_parser = cli::at_least_one)]
        frames: u64,
        /// With one queue: program RSS anyway (every frame classified, all to queue 0).
        #[arg(long)]
        rss: bool,
    },
}

#[derive(Subcommand)]
enum FaultCmd {
    /// Hostile write-backs: random RX descriptor status, errors and lengths anywhere in the
    /// ring, TX head write-backs of any value, DD on TX descriptors.
    WriteBack {
        /// Write-backs per second.
        #[arg(long, default_value_t = 1_000_000.0, value_parser = cli::positive)]
        rate: f64,
        /// How many in all.
        #[arg(long, default_value_t = 1_000_000, value_parser = cli::at_least_one)]
        count: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Stop every ring of the port for a while, then resume.
    Stall {
        #[arg(long, default_value_t = 50)]
        ms: u64,
    },
    /// Surprise reset: every register back to its default, queues disabled.
    Reset,
    /// Surprise removal: registers and configuration space read all-ones from now on.
    Remove,
    /// Broken frames from the link partner (the port's generator).
    Wire {
        #[arg(value_parser = parse_wire_fault)]
        what: WireFault,
        /// Share of the frames hit, above 0 and at most 1.
        #[arg(long, default_value_t = 0.01)]
        probability: f64,
        /// How many frames in all.
        #[arg(long, default_value_t = 1000, value_parser = cli::at_least_one)]
        count: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// DMA outside what the driver mapped (random addresses, its other memory, addresses it
    /// unmapped): an IOMMU refuses each; none is performed.
    Dma {
        #[arg(long, default_value_t = 1000, value_parser = cli::at_least_one)]
        count: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// End the port's write-back and wire faults.
    Off,
}

/// `UID` or `UID:GID` (the group defaults to the user's number).
fn user_ids(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("`{s}`: give a numeric UID or UID:GID, e.g. 65534:65534");
    let (u, g) = s.split_once(':').unwrap_or((s, s));
    Ok((u.parse().map_err(|_| bad())?, g.parse().map_err(|_| bad())?))
}

fn parse_wire_fault(s: &str) -> Result<WireFault, String> {
    serde_json::from_value(serde_json::Value::String(s.into()))
        .map_err(|_| format!("`{s}`: give runt, oversize, corrupt, bad-fcs, duplicate or reorder"))
}

impl FaultCmd {
    fn fault(self) -> Fault {
        match self {
            FaultCmd::WriteBack { rate, count, seed } => Fault::WriteBack { rate, count, seed },
            FaultCmd::Stall { ms } => Fault::Stall { ms },
            FaultCmd::Reset => Fault::Reset,
            FaultCmd::Remove => Fault::Remove,
            FaultCmd::Wire { what, probability, count, seed } => Fault::Wire { what, probability, count, seed },
            FaultCmd::Dma { count, seed } => Fault::Dma { count, seed },
            FaultCmd::Off => Fault::Off,
        }
    }
}

#[derive(Subcommand)]
enum TrafficCmd {
    /// Start generating into a port.
    Start {
        #[arg(long)]
        port: usize,
        /// Rate: `100%` of line rate (at most), `5Mpps`, `200kpps`, or packets per second.
        #[arg(long, default_value = "100%", value_parser = parse_rate)]
        rate: Rate,
        /// Frame size without FCS (60–1514).
        #[arg(long, default_value_t = 60, value_parser = frame_size)]
        size: usize,
        /// Cycle frame sizes from --size to this, one byte longer each frame.
        #[arg(long, value_parser = frame_size)]
        size_max: Option<usize>,
        /// Flows (source address and port pairs), 1 to 2^20.
        #[arg(long, default_value_t = 1, value_parser = flow_count)]
        flows: u32,
        /// Stop after this many frames.
        #[arg(long, value_parser = cli::at_least_one)]
        count: Option<u64>,
        /// Stop after this many seconds.
        #[arg(long, value_parser = cli::seconds)]
        duration: Option<f64>,
    },
    /// Stop a port's generator.
    Stop {
        #[arg(long)]
        port: usize,
    },
    /// Hold a port's transmitter, as a link partner's flow-control pause does: TX rings fill.
    Pause {
        #[arg(long)]
        port: usize,
    },
    /// Release a held transmitter.
    Resume {
        #[arg(long)]
        port: usize,
    },
    /// Change a running generator's rate.
    Rate {
        #[arg(long)]
        port: usize,
        #[arg(long, value_parser = parse_rate)]
        rate: Rate,
    },
}

fn parse_cable(s: &str) -> Result<(usize, usize), String> {
    let (a, b) = s.split_once('-').ok_or("a cable is written A-B, e.g. 0-1")?;
    Ok((a.parse().map_err(|_| "bad port")?, b.parse().map_err(|_| "bad port")?))
}

fn device_kind(s: &str) -> Result<nicsim::pciconfig::Kind, String> {
    match s {
        "82599" => Ok(nicsim::pciconfig::Kind::Ixgbe),
        "virtio-net" => Ok(nicsim::pciconfig::Kind::VirtioNet),
        _ => Err("a device is 82599 or virtio-net".into()),
    }
}

fn parse_direction(s: &str) -> Result<Captured, String> {
    match s {
        "tx" => Ok(Captured::Tx),
        "rx" => Ok(Captured::Rx),
        "both" => Ok(Captured::Both),
        _ => Err("direction is tx, rx or both".into()),
    }
}

/// A generator rate as given on the command line.
#[derive(Debug, Clone, Copy)]
enum Rate {
    /// A share of the line rate, above 0 and at most 100.
    Percent(f64),
    /// Packets per second (nicsim checks it against the line rate of the frame size).
    Pps(f64),
}

impl Rate {
    /// Packets per second for frames of `size` bytes on a link of `gbps`; `None` = line rate.
    fn pps(self, size: usize, gbps: f64) -> Option<f64> {
        match self {
            Rate::Percent(p) if p >= 100.0 => None,
            Rate::Percent(p) => Some((p / 100.0 * line_rate_pps(size, gbps)).max(nicsim::wire::MIN_RATE_PPS)),
            Rate::Pps(v) => Some(v),
        }
    }
}

/// `100%`, `5Mpps`, `200kpps`, `1000pps` or `1000`.
fn parse_rate(s: &str) -> Result<Rate, String> {
    let t = s.trim().to_ascii_lowercase();
    let number = |n: &str| n.trim().parse::<f64>().ok().filter(|v| v.is_finite());
    let bad = || format!("`{s}` is not a rate: use 100%, 5Mpps, 200kpps or a number of packets per second");
    if let Some(p) = t.strip_suffix('%') {
        let p = number(p).ok_or_else(bad)?;
        return if p > 0.0 && p <= 100.0 {
            Ok(Rate::Percent(p))
        } else {
            Err(format!("`{s}`: a share of the line rate is above 0% and at most 100%"))
        };
    }
    let (n, scale) = if let Some(m) = t.strip_suffix("mpps") {
        (m, 1e6)
    } else if let Some(k) = t.strip_suffix("kpps") {
        (k, 1e3)
    } else {
        (t.strip_suffix("pps").unwrap_or(&t), 1.0)
    };
    let pps = number(n).ok_or_else(bad)? * scale;
    if pps >= nicsim::wire::MIN_RATE_PPS {
        Ok(Rate::Pps(pps))
    } else {
        Err(format!("`{s}`: give at least {} packet per second", nicsim::wire::MIN_RATE_PPS))
    }
}

/// `--size`, `--size-max`: frames of 60 to 1514 bytes without FCS.
fn frame_size(s: &str) -> Result<usize, String> {
    let range = nicsim::wire::MIN_FRAME..=nicsim::wire::MAX_FRAME;
    s.trim().parse().ok().filter(|n| range.contains(n)).ok_or_else(|| format!("`{s}`: frames are 60 to 1514 bytes"))
}

/// `--flows`: 1 to 2^20.
fn flow_count(s: &str) -> Result<u32, String> {
    s.trim().parse().ok().filter(|n| (1..=1 << 20).contains(n)).ok_or_else(|| format!("`{s}`: give 1 to 1048576 flows"))
}

/// `--ports`: 1 to 16 PCI functions.
fn port_count(s: &str) -> Result<usize, String> {
    let max = nicsim::wire::MAX_STREAMS;
    s.trim().parse().ok().filter(|n| (1..=max).contains(n)).ok_or_else(|| format!("`{s}`: give 1 to {max} ports"))
}

/// `--link-gbps`: above 0, at most 400 (the fastest Ethernet the model's clock resolves).
fn link_speed(s: &str) -> Result<f64, String> {
    cli::positive(s)
        .ok()
        .filter(|g| *g <= 400.0)
        .ok_or_else(|| format!("`{s}`: a link speed above 0 and at most 400 Gb/s"))
}

fn main() -> ExitCode {
    let args: Cli = cli::parse("nicsim");
    let root = args.root.clone().unwrap_or_else(server::default_root);
    cli::finish("nicsim", run(args.command, &root))
}

fn run(cmd: Cmd, root: &Path) -> Result<(), String> {
    let session = Session::connect(root);
    match cmd {
        Cmd::Serve { ports, cable, link_gbps, cpu, bound, link_up_ms, sfp, device, tap } => {
            platform::signals::install_termination_flag().map_err(|e| e.to_string())?;
            let link_up = Duration::from_millis(link_up_ms);
            let opts = ServeOptions {
                ports,
                root: root.to_path_buf(),
                cables: cable,
                gbps: link_gbps,
                cpu,
                bound,
                link_up,
                sfp: sfp == SfpCage::Sr,
                devices: device,
                taps: tap,
            };
            let creates_root = !root.exists();
            let server = Server::start(&opts)?;
            // Only now: a guardian of a server that did not start would remove another's devices.
            let exe = std::env::current_exe().map_err(|e| format!("finding nicsim's own binary: {e}"))?;
            let guardian = Guardian::spawn(&exe, root, creates_root)
                .map_err(|e| format!("starting the guardian ({} guard): {e}", exe.display()))?;
            let info: nicsim::control::Info = server.request(nicsim::control::Request::Info)?;
            // A server goes on serving if nobody reads what it says.
            for p in &info.ports {
                let _ = cli::outln!("nicsim: port {} at {} ({}), MAC {}", p.port, p.address, p.dir.display(), p.mac);
            }
            let _ = cli::outln!(
                "nicsim: control socket {}; drivers use --sysfs {} or `nicsim exec -- <driver>`",
                server::socket_path(root).display(),
                root.join("devices").display()
            );
            server.run_until_stopped();
            guardian.release();
            let _ = cli::outln!("nicsim: stopped; removed {}", root.join("devices").display());
            Ok(())
        }
        Cmd::Exec { uio, vfio, vfio_user, vfio_memlock, command } => {
            exec(root, uio, vfio.then_some((vfio_user, vfio_memlock)), &command)
        }
        Cmd::Traffic { action } => match action {
            TrafficCmd::Start { port, rate, size, size_max, flows, count, duration } => {
                let gbps = session.info()?.link_gbps;
                let spec = TrafficSpec {
                    rate_pps: rate.pps(size, gbps),
                    size,
                    flows,
                    count,
                    // Checked by nicsim: at least 1 ms.
                    duration_ms: duration.map(|s| (s * 1000.0).round() as u64),
                    dst_mac: None,
                    size_max,
                };
                session.start_traffic(port, spec)
            }
            TrafficCmd::Stop { port } => session.stop_traffic(port).map(drop),
            TrafficCmd::Pause { port } => session.pause_tx(port, true),
            TrafficCmd::Resume { port } => session.pause_tx(port, false),
            TrafficCmd::Rate { port, rate } => {
                let gbps = session.info()?.link_gbps;
                session.set_rate(port, rate.pps(60, gbps))
            }
        },
        Cmd::Stats { json, watch } => {
            let get = || session.stats();
            match watch {
                None if json => {
                    cli::outln!("{}", serde_json::to_string_pretty(&get()?).map_err(|e| e.to_string())?)?;
                    Ok(())
                }
                None => print_totals(&get()?),
                Some(secs) => {
                    let mut prev = get()?;
                    for _ in 0..secs {
                        std::thread::sleep(Duration::from_secs(1));
                        let cur = get()?;
                        print_rates(&prev, &cur)?;
                        prev = cur;
                    }
                    Ok(())
                }
            }
        }
        Cmd::Lint { json } => {
            let list = session.lint()?;
            if json {
                cli::outln!("{}", serde_json::to_string(&list).map_err(|e| e.to_string())?)?;
            } else {
                if list.is_empty() {
                    cli::outln!("no lint warnings")?;
                }
                for w in list {
                    cli::outln!(
                        "port {} {} = {:#010x} [{}] x{}: {}",
                        w.port,
                        w.register,
                        w.value,
                        w.rule,
                        w.count,
                        w.message
                    )?;
                }
            }
            Ok(())
        }
        Cmd::Pcap { port, file, direction, count, stop } => {
            if stop {
                let written = session.end_capture(port)?;
                cli::outln!("{written} frames written")?;
                return Ok(());
            }
            let file = file.ok_or("give --file FILE (or --stop)")?;
            let path = std::path::absolute(&file).map_err(|e| e.to_string())?;
            session.capture(port, &path, direction, count)
        }
        Cmd::ResetCounters => session.reset_counters(),
        Cmd::Link { state, port } => session.set_link(port, state == "up"),
        Cmd::Remove { port } => session.remove(port),
        Cmd::Fault { fault, port } => {
            let port = port.ok_or("give --port N: the port whose device or wire misbehaves")?;
            // Checked here too: NaN, for one, has no JSON form and would reach serve as null.
            let fault = fault.fault();
            fault.validate()?;
            session.fault(port, fault)
        }
        Cmd::Shutdown => session.shutdown(),
        Cmd::Guard { remove_root } => {
            guardian::report(&guardian::watch(root, remove_root));
            Ok(())
        }
        Cmd::Reflect { a, b, sysfs, seconds, cpu } => {
            platform::signals::install_termination_flag().map_err(|e| e.to_string())?;
            if let Some(c) = cpu {
                platform::sched::pin_current_thread(c).map_err(|e| format!("pinning to CPU {c}: {e}"))?;
            }
            let sysfs = sysfs.unwrap_or_else(|| root.join("devices"));
            let start = Instant::now();
            let limit = seconds.map(Duration::from_secs_f64);
            let n = nicsim::peer::reflect(&sysfs, &a, &b, |_| {
                platform::signals::terminate_requested() || limit.is_some_and(|l| start.elapsed() >= l)
            })?;
            cli::outln!("reflect: forwarded {n} packets in {:.1} s", start.elapsed().as_secs_f64())?;
            Ok(())
        }
        Cmd::Bench { seconds, link_gbps, json } => bench(seconds, link_gbps, json),
        Cmd::BenchRx { queues, frames, rss } => {
            let (received, per_queue) = nicsim::rx_cost::run(queues, rss, frames)?;
            cli::outln!("nicsim bench-rx: {received} of {frames} frames into {queues} queue(s): {per_queue:?}")
        }
        Cmd::BenchAccess { port, rounds, count, json } => {
            let dir = root.join("devices").join(nicsim::sysfs::port_address(port));
            let r = nicsim::access_cost::measure(&dir, rounds as usize, count as usize)?;
            if json {
                return cli::outln!("{}", serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?);
            }
            cli::outln!("nicsim bench-access: {}, {} rounds of {} of each", r.function, r.rounds, r.per_round)?;
            cli::outln!("{:<48} {:>9.2} µs", "plain system call (pread of /dev/zero)", r.syscall_ns / 1000.0)?;
            cli::outln!(
                "{:<48} {:>9.2} µs  {:>7.1} × the system call",
                "wake-up round trip (a sleeping thread, socket pair)",
                r.wakeup_ns / 1000.0,
                r.wakeup_ratio
            )?;
            for a in &r.accesses {
                cli::outln!("{:<48} {:>9.2} µs  {:>7.1} × the system call", a.access, a.ns / 1000.0, a.ratio)?;
            }
            Ok(())
        }
    }
}

/// The first line `nicsim exec` prints: the one difference a driver's own output can hide.
const EXEC_BANNER: &str = "nicsim exec: statistics registers count totals since reset and do not clear on read as on \
the card: a driver that adds up successive reads (DPDK does) over-counts after its second read, e.g. testpmd's \
--stats-period and `show port stats` (docs/dpdk.md); nicsim's exact counts follow when the command exits";

/// Runs `command` where nicsim's functions are the machine's (see `nicsim::exec`), then prints
/// nicsim's own counts beside whatever the command printed, and exits as the command did.
/// `--vfio`'s options: the groups' owner and the locked-memory limit.
type VfioOptions = (Option<(u32, u32)>, Option<u64>);

fn exec(root: &Path, uio: bool, vfio: Option<VfioOptions>, command: &[String]) -> Result<(), String> {
    let trapped = nicsim::exec::trapped_bars(root);
    let vfio = match vfio {
        Some((owner, memlock)) => Some(nicsim::exec::vfio::bind_all(root, &trapped, owner, memlock)?),
        None => None,
    };
    let entered = nicsim::exec::enter(root, uio, vfio.is_some());
    if let Err(e) = entered {
        if let Some((_, bound)) = &vfio {
            nicsim::exec::vfio::unbind_all(root, bound);
        }
        return Err(e);
    }
    eprintln!("{EXEC_BANNER}");
    platform::signals::install_termination_flag().map_err(|e| e.to_string())?;
    let mut cmd = std::process::Command::new(&command[0]);
    cmd.args(&command[1..]);
    if !trapped.is_empty() {
        let (state, bound) = vfio.map_or((None, Vec::new()), |(state, bound)| (Some(state), bound));
        let ran = nicsim::exec::run_trapping_bars(platform::process::die_with_parent(&mut cmd), &trapped, root, state);
        nicsim::exec::vfio::unbind_all(root, &bound);
        let code = ran?;
        print_own_counts(root);
        std::process::exit(code);
    }
    let mut child = platform::process::die_with_parent(&mut cmd)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e} (is it installed and on PATH?)", command[0]))?;
    let mut forwarded = false;
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| format!("waiting for {}: {e}", command[0]))? {
            break s;
        }
        // SIGINT from a terminal reaches the command too; SIGTERM is passed on once.
        if platform::signals::terminate_requested() && !forwarded {
            let _ = platform::signals::send(child.id(), platform::signals::Signal::Terminate);
            forwarded = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    print_own_counts(root);
    use std::os::unix::process::ExitStatusExt;
    std::process::exit(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// nicsim's exact counts, printed after the command's own.
fn print_own_counts(root: &Path) {
    if let Ok(stats) = Session::connect(root).stats() {
        eprintln!("nicsim exec: nicsim's own counts, exact (a driver's may differ: docs/nicsim.md, counters):");
        for p in &stats.ports {
            eprintln!(
                "nicsim exec:   port {} ({}): generated {} | sink {} (lost {}) | since the last device reset: to the driver {}, missed {}, no descriptor {}, driver sent {}",
                p.port,
                nicsim::sysfs::port_address(p.port),
                p.generated,
                p.sink_packets,
                p.streams.iter().map(|(_, st)| st.lost).sum::<u64>(),
                p.device.qprc.iter().sum::<u64>(),
                p.device.mpc,
                p.device.qprdc.iter().sum::<u64>(),
                p.device.gptc,
            );
        }
    }
}

fn print_totals(s: &Stats) -> Result<(), String> {
    cli::outln!("nicsim up {:.1} s", s.elapsed_ns as f64 / 1e9)?;
    for p in &s.ports {
        let lost: u64 = p.streams.iter().map(|(_, st)| st.lost).sum();
        let reordered: u64 = p.streams.iter().map(|(_, st)| st.reordered).sum();
        let flow_reordered: u64 = p.streams.iter().map(|(_, st)| st.flow_reordered).sum();
        cli::outln!(
            "port {}: generated {} (skipped {}) | to driver {} (no descriptor {}, missed {}, rx off {}) | driver sent {} | sink {} lost {} reordered {} (within a flow {}) | latency p50 {} ns p99 {} ns max {} ns | in flight: buffer {}, RX ring {}, TX ring {} | XOFF sent {}, received {} | DMA faults {} | lint {}",
            p.port,
            p.generated,
            p.generator_skipped,
            p.device.qprc.iter().sum::<u64>(),
            p.device.qprdc.iter().sum::<u64>(),
            p.device.mpc,
            p.drops.rx_disabled,
            p.device.gptc,
            p.sink_packets,
            lost,
            reordered,
            flow_reordered,
            p.latency_ns.p50,
            p.latency_ns.p99,
            p.latency_ns.max,
            p.in_flight.packet_buffer,
            p.in_flight.rx_ring,
            p.in_flight.tx_ring,
            p.flow_control.xoff_sent,
            p.flow_control.xoff_received,
            p.dma_faults,
            p.lint_warnings
        )?;
        let i = &p.injected;
        if *i != Default::default() {
            cli::outln!(
                "port {}: injected: write-backs {} (RX {}, head {}, TX {}, virtio used {}), stalls {}, resets {}, removals {}, runts {}, oversize {}, corrupted {}, bad FCS {}, duplicated {}, reordered {} | RUC {}, ROC {}, CRCERRS {}",
                p.port,
                i.write_backs(),
                i.rx_write_backs,
                i.head_write_backs,
                i.tx_write_backs,
                i.used_write_backs,
                i.stalls,
                i.resets,
                i.removals,
                i.runts,
                i.oversize,
                i.corrupted,
                i.bad_fcs,
                i.duplicated,
                i.reordered,
                p.device.ruc,
                p.device.roc,
                p.device.crcerrs
            )?;
        }
    }
    Ok(())
}

fn print_rates(a: &Stats, b: &Stats) -> Result<(), String> {
    let secs = (b.elapsed_ns.saturating_sub(a.elapsed_ns) as f64 / 1e9).max(1e-9);
    let mut line = format!("{:>6.1}s", b.elapsed_ns as f64 / 1e9);
    for (x, y) in a.ports.iter().zip(&b.ports) {
        // Counters only grow, unless someone reset them in between: then the second counts from 0.
        let grew = |f: fn(&PortStats) -> u64| f(y).saturating_sub(f(x));
        let rx = grew(|p| p.device.qprc.iter().sum());
        let drop = grew(|p| p.device.qprdc.iter().sum::<u64>() + p.device.mpc + p.drops.rx_disabled);
        line += &format!(
            " | port {}: gen {:6.2} Mpps (skipped {:4.2}), to driver {:6.2}, dropped {:6.2}, driver sent {:6.2}, sink {:6.2} Mpps, p99 {} ns",
            y.port,
            mpps(grew(|p| p.generated), secs),
            mpps(grew(|p| p.generator_skipped), secs),
            mpps(rx, secs),
            mpps(drop, secs),
            mpps(grew(|p| p.device.gptc), secs),
            mpps(grew(|p| p.sink_packets), secs),
            y.latency_ns.p99
        );
    }
    cli::outln!("{line}")
}

fn bench(seconds: f64, gbps: f64, json: bool) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let c = nicsim::ceiling::measure(&exe, seconds, gbps)?;
    if json {
        return cli::outln!("{}", serde_json::to_string(&c).map_err(|e| e.to_string())?);
    }
    let (line_rate, secs) = (c.line_rate_mpps_per_port, c.seconds);
    cli::outln!("nicsim ceiling, 64-byte frames, 2 ports, {gbps} Gb/s links ({line_rate:.2} Mpps line rate per port), {secs:.1} s, reflecting peer on the other core:")?;
    for p in &c.ports {
        cli::outln!(
            "  port {}: generated {:.2} Mpps (skipped {:.2}), written into RX ring {:.2} Mpps (no descriptor {:.2}), drained from TX ring {:.2} Mpps",
            p.port,
            p.generated_mpps,
            p.skipped_mpps,
            p.into_rx_ring_mpps,
            p.no_descriptor_mpps,
            p.drained_from_tx_ring_mpps
        )?;
    }
    let (total_rx, total_tx) = (c.total_into_rx_rings_mpps, c.total_drained_from_tx_rings_mpps);
    cli::outln!("  total: {total_rx:.2} Mpps into RX rings, {total_tx:.2} Mpps drained from TX rings (target 2 x {line_rate:.2})")?;
    cli::outln!(
        "  engine: {:.2} M iterations/s, {:.1} frames written per iteration",
        c.engine_iterations_per_second / 1e6,
        total_rx * 1e6 / c.engine_iterations_per_second.max(1.0)
    )?;
    let us = |ns: u64| ns as f64 / 1e3;
    let (d, s) = (&c.doorbell_interval_ns, &c.slow_path_ns);
    let (d50, d999, dmax) = (us(d.p50), us(d.p999), us(d.max));
    cli::outln!(
        "  doorbells looked at every {d50:.1} µs (median), {d999:.1} µs (99.9th percentile), {dmax:.1} µs at most"
    )?;
    let (s50, s99, smax) = (us(s.p50), us(s.p99), us(s.max));
    cli::outln!("  slow path: {s50:.1} µs a pass (median), {s99:.1} µs (99th percentile), {smax:.1} µs at most")
}
