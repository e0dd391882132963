//! `nicsim serve`: creates the devices, runs the engine, answers the control socket, and
//! removes everything it created when it stops. Clients use [`crate::session::Session`].

use crate::control::{Answer, Envelope, Info, PortInfo, Reply, Request};
use crate::dma::ProcDmaSpace;
use crate::engine::{self, Command, Engine};
use crate::iofs::{IoFile, IoFs};
use crate::ownership::ClaimFile;
use crate::pciconfig::{Kind, PciConfig, CONFIG_LEN};
use crate::port::Port;
use crate::regs::BAR0_LEN;
use crate::sysfs;
use platform::MappedRegion;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where nicsim puts its devices and socket unless told otherwise (must be on tmpfs).
pub const DEFAULT_ROOT: &str = "/dev/shm/nicsim";

/// The root to use: `NICSIM_ROOT` or [`DEFAULT_ROOT`].
pub fn default_root() -> PathBuf {
    std::env::var_os("NICSIM_ROOT").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(DEFAULT_ROOT))
}

/// The control socket of a root.
pub fn socket_path(root: &Path) -> PathBuf {
    root.join("nicsim.sock")
}

/// Options of `nicsim serve`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub ports: usize,
    pub root: PathBuf,
    pub cables: Vec<(usize, usize)>,
    pub gbps: f64,
    pub cpu: Option<usize>,
    /// Present the functions bound to a fake `ixgbe` kernel driver (unbind through sysfs).
    pub bound: bool,
    /// How long link setup takes after power-on, CTRL.LNK_RST or a cable plugged in.
    pub link_up: std::time::Duration,
    /// An SFP+ module in every cage (false: the cages are empty).
    pub sfp: bool,
    /// What each port is (the last entry applies to ports beyond the list; empty: all 82599).
    pub devices: Vec<Kind>,
    /// TAP interfaces for the first ports' wires, in port order (`--tap`).
    pub taps: Vec<TapSpec>,
}

/// A TAP interface for a port's wire: its name, and the network namespace to move it to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapSpec {
    pub name: String,
    pub netns: Option<String>,
}

impl std::str::FromStr for TapSpec {
    type Err = String;
    /// `NAME` or `NAME,netns=NS`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, rest) = s.split_once(',').map_or((s, None), |(n, r)| (n, Some(r)));
        let netns = match rest {
            None => None,
            Some(r) => Some(
                r.strip_prefix("netns=")
                    .filter(|ns| !ns.is_empty())
                    .ok_or_else(|| format!("--tap {s}: write NAME or NAME,netns=NS"))?,
            ),
        };
        if name.is_empty() || name.len() > 15 {
            return Err(format!("--tap {s}: an interface name has 1 to 15 characters"));
        }
        Ok(TapSpec { name: name.to_string(), netns: netns.map(str::to_string) })
    }
}

/// Creates the TAP interface of `spec` and moves it to its namespace, if it names one.
fn create_tap(spec: &TapSpec) -> Result<platform::tap::Tap, String> {
    let tap = platform::tap::Tap::create(&spec.name).map_err(|e| e.to_string())?;
    if let Some(ns) = &spec.netns {
        let status = std::process::Command::new("ip")
            .args(["link", "set", &spec.name, "netns", ns])
            .status()
            .map_err(|e| format!("running ip (install iproute2): {e}"))?;
        if !status.success() {
            return Err(format!(
                "moving {} to network namespace {ns} failed: create it first (ip netns add {ns})",
                spec.name
            ));
        }
    }
    Ok(tap)
}

impl ServeOptions {
    /// What port `n` is.
    pub fn device(&self, n: usize) -> Kind {
        self.devices.get(n).or(self.devices.last()).copied().unwrap_or(Kind::Ixgbe)
    }
}

/// A running server.
pub struct Server {
    root: PathBuf,
    created_root: bool,
    stop: Arc<AtomicBool>,
    shutdown: Arc<AtomicBool>,
    engine: Option<std::thread::JoinHandle<Engine<ProcDmaSpace>>>,
    commands: Sender<Command>,
    bound: bool,
    /// The I/O BARs of the virtio functions, while any exist.
    io_bars: Option<IoFs>,
}

impl Server {
    /// Creates the devices and starts the engine and the control socket.
    pub fn start(opts: &ServeOptions) -> Result<Server, String> {
        if let Some(c) = opts.cpu {
            // The engine's core is its own, as the card's DMA engines are: nicsim's other
            // threads (control, FUSE, guardian), all started after this, run elsewhere, so
            // that answering a request never takes the core from a queue a driver waits on.
            if let Err(e) = platform::sched::avoid_cpu(c) {
                eprintln!("nicsim: could not keep nicsim's other threads off CPU {c}: {e}");
            }
        }
        if opts.ports == 0 || opts.ports > crate::wire::MAX_STREAMS {
            return Err(format!("--ports must be between 1 and {}", crate::wire::MAX_STREAMS));
        }
        for &(a, b) in &opts.cables {
            if a >= opts.ports || b >= opts.ports || a == b {
                return Err(format!("cable {a}-{b} must join two different ports below {}", opts.ports));
            }
        }
        if opts.taps.len() > opts.ports {
            return Err(format!("{} --tap for {} ports: one TAP per port at most", opts.taps.len(), opts.ports));
        }
        if !(opts.gbps > 0.0 && opts.gbps.is_finite()) {
            return Err("--link-gbps must be positive".into());
        }
        let socket = socket_path(&opts.root);
        if UnixStream::connect(&socket).is_ok() {
            return Err(format!(
                "another nicsim already serves {}: stop it with `nicsim shutdown` or pick another --root",
                opts.root.display()
            ));
        }
        let created_root = !opts.root.exists();
        // A previous server that was killed may have left its tree behind.
        for d in sysfs::TREES {
            let _ = std::fs::remove_dir_all(opts.root.join(d));
        }
        let _ = std::fs::remove_file(&socket);
        std::fs::create_dir_all(&opts.root).map_err(|e| format!("cannot create {}: {e}", opts.root.display()))?;

        let mut ports = Vec::new();
        let mut bar_files = Vec::new();
        let mut info_ports = Vec::new();
        // The virtio functions' registers first: their files must exist before the links to them.
        let io_dir = opts.root.join(sysfs::IO_BARS);
        let virtio: Vec<(usize, Arc<crate::virtio::Shared>)> = (0..opts.ports)
            .filter(|&n| opts.device(n) == Kind::VirtioNet)
            .map(|n| (n, crate::virtio::Shared::new(crate::port::default_mac(n), crate::virtio::feature::TRANSITIONAL)))
            .collect();
        let io_bars = if virtio.is_empty() {
            None
        } else {
            let files: Vec<(String, Arc<dyn IoFile>)> = virtio
                .iter()
                .flat_map(|(n, shared)| {
                    let legacy: Arc<dyn IoFile> = Arc::new(crate::virtio::legacy::LegacyBar { shared: shared.clone() });
                    let modern: Arc<dyn IoFile> = Arc::new(crate::virtio::modern::ModernBar { shared: shared.clone() });
                    let address = sysfs::port_address(*n);
                    [(format!("{address}-resource0"), legacy), (format!("{address}-resource4"), modern)]
                })
                .collect();
            Some(IoFs::mount(&io_dir, files).map_err(|e| format!("serving the virtio functions' I/O BARs: {e}"))?)
        };
        for n in 0..opts.ports {
            let map = |file: &std::fs::File, len| {
                MappedRegion::map_file(file, 0, len, true).map_err(|e| format!("mapping port {n}: {e}"))
            };
            let (address, dir, config_file, mut port) = match virtio.iter().find(|(v, _)| *v == n) {
                None => {
                    let f = sysfs::create_function(&opts.root, n, opts.bound)
                        .map_err(|e| format!("creating the PCI function of port {n}: {e}"))?;
                    let config = PciConfig::new(map(&f.config, CONFIG_LEN)?, sysfs::bar0_phys(n));
                    let bar = map(&f.resource0, BAR0_LEN)?;
                    let port = Port::new(n, bar, config, (n % 8) as u32, opts.gbps);
                    bar_files.push(f.resource0);
                    (f.address, f.dir, f.config, port)
                }
                Some((_, shared)) => {
                    let bar = |i: usize| {
                        io_bars
                            .as_ref()
                            .map(|b| b.path(&format!("{}-resource{i}", sysfs::port_address(n))))
                            .unwrap_or_default()
                    };
                    let (address, dir, config_file) =
                        sysfs::create_virtio_function(&opts.root, n, opts.bound, [&bar(0), &bar(4)])
                            .map_err(|e| format!("creating the PCI function of port {n}: {e}"))?;
                    let config = PciConfig::new_virtio(
                        map(&config_file, CONFIG_LEN)?,
                        sysfs::virtio_io_base(n),
                        sysfs::virtio_bar4_phys(n),
                    );
                    // The 82599 registers of a virtio port are nobody's: no file shows them.
                    let unused = MappedRegion::anonymous(BAR0_LEN).map_err(|e| format!("port {n}: {e}"))?;
                    let mut port = Port::new(n, unused, config, (n % 8) as u32, opts.gbps);
                    port.attach_virtio(shared.clone());
                    // No driver maps a legacy virtio function's files: its domain is whoever
                    // accesses its registers (`DmaSpace::adopt`); the config file holds the place.
                    bar_files.push(config_file.try_clone().map_err(|e| e.to_string())?);
                    (address, dir, config_file, port)
                }
            };
            port.claim_file = Some(ClaimFile::of(&config_file).map_err(|e| format!("port {n}'s config file: {e}"))?);
            port.set_link_setup(opts.link_up);
            port.set_sfp_module(opts.sfp);
            let m = port.mac();
            info_ports.push(PortInfo {
                port: n,
                address: address.clone(),
                dir: dir.clone(),
                mac: format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]),
                cable: opts.cables.iter().find_map(|&(a, b)| {
                    if a == n {
                        Some(b)
                    } else if b == n {
                        Some(a)
                    } else {
                        None
                    }
                }),
            });
            ports.push(port);
        }
        let dma = ProcDmaSpace::new(&bar_files.iter().collect::<Vec<_>>()).map_err(|e| format!("DMA space: {e}"))?;
        let info = Info {
            root: opts.root.clone(),
            devices: opts.root.join("devices"),
            socket: socket.clone(),
            link_gbps: opts.gbps,
            ports: info_ports,
        };
        let mut engine = Engine::new(ports, dma, opts.gbps, &opts.cables);
        for (wire, spec) in engine.wires.iter_mut().zip(&opts.taps) {
            wire.tap = Some(create_tap(spec)?);
        }
        engine.describe(info);
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let handle = engine::spawn(engine, opts.cpu, rx, stop.clone());
        let shutdown = Arc::new(AtomicBool::new(false));
        let listener =
            UnixListener::bind(&socket).map_err(|e| format!("cannot listen on {}: {e}", socket.display()))?;
        {
            let tx = tx.clone();
            let shutdown = shutdown.clone();
            std::thread::Builder::new()
                .name("nicsim-control".into())
                .spawn(move || {
                    for stream in listener.incoming().flatten() {
                        let tx = tx.clone();
                        let shutdown = shutdown.clone();
                        std::thread::spawn(move || serve_connection(stream, &tx, &shutdown));
                    }
                })
                .map_err(|e| e.to_string())?;
        }
        Ok(Server {
            root: opts.root.clone(),
            created_root,
            stop,
            shutdown,
            engine: Some(handle),
            commands: tx,
            bound: opts.bound,
            io_bars,
        })
    }

    /// Sends a request to the engine directly and returns its typed answer (in-process
    /// clients; see [`crate::session::Session`]).
    pub fn request<A: Answer>(&self, request: Request) -> Result<A, String> {
        let reply = ask(&self.commands, request.clone())?;
        crate::control::expect(&request, reply)
    }

    /// Whether a `shutdown` request arrived.
    pub fn shutdown_requested(&self) -> bool {
        self.shutdown.load(Ordering::Relaxed)
    }

    /// Runs until SIGINT/SIGTERM or a `shutdown` request, then cleans up.
    pub fn run_until_stopped(self) {
        while !self.shutdown_requested() && !platform::signals::terminate_requested() {
            if self.bound {
                for a in sysfs::process_unbind(&self.root) {
                    eprintln!("nicsim: {a} unbound from {}", sysfs::FAKE_DRIVER);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the engine and removes the devices, the socket and (if created) the root.
    pub fn stop(mut self) {
        self.cleanup();
    }

    fn cleanup(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.engine.take() {
            if let Ok(mut engine) = h.join() {
                // Drivers still mapping the BARs read all-ones from now on, as from a card
                // that is gone, instead of registers that no longer change.
                engine.ports.iter_mut().for_each(|p| p.remove());
            }
        }
        self.io_bars = None;
        remove_tree(&self.root, self.created_root);
    }
}

/// Removes what a server created under `root`: the socket, the devices and drivers trees and,
/// with `created_root`, the root itself.
pub fn remove_tree(root: &Path, created_root: bool) {
    let _ = std::fs::remove_file(socket_path(root));
    platform::fuse::unmount(&root.join(sysfs::IO_BARS));
    let _ = std::fs::remove_dir(root.join(sysfs::IO_BARS));
    for d in sysfs::TREES {
        let _ = std::fs::remove_dir_all(root.join(d));
    }
    if created_root {
        let _ = std::fs::remove_dir(root);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.engine.is_some() {
            self.cleanup();
        }
    }
}

fn ask(commands: &Sender<Command>, request: Request) -> Result<Reply, String> {
    let (reply, answer) = mpsc::channel();
    commands.send(Command { request, reply }).map_err(|_| "the engine has stopped".to_string())?;
    // Polled: a receiver asleep on the channel would make the engine's send a wake-up, tens
    // of microseconds in which the device does nothing.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match answer.try_recv() {
            Ok(answer) => return answer.into_reply(),
            Err(mpsc::TryRecvError::Disconnected) => return Err("the engine has stopped".into()),
            Err(mpsc::TryRecvError::Empty) if Instant::now() >= deadline => {
                return Err("the engine did not answer within 10 s".into())
            }
            Err(mpsc::TryRecvError::Empty) => std::thread::sleep(Duration::from_micros(50)),
        }
    }
}

fn serve_connection(stream: UnixStream, commands: &Sender<Command>, shutdown: &AtomicBool) {
    let Ok(mut out) = stream.try_clone() else { return };
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { return };
        if line.trim().is_empty() {
            continue;
        }
        let answer = match serde_json::from_str::<Request>(&line) {
            Ok(Request::Shutdown) => {
                shutdown.store(true, Ordering::Relaxed);
                Ok(Reply::Done(crate::control::Done {}))
            }
            Ok(req) => ask(commands, req),
            Err(e) => Err(format!("bad request: {e}")),
        };
        let Ok(json) = serde_json::to_string(&Envelope::of(answer)) else { return };
        if writeln!(out, "{json}").is_err() {
            return;
        }
    }
}
