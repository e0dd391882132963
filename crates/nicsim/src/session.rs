//! A session with a nicsim: one in this process (tests, the bench) or a server reached through
//! its control socket (the CLI). Every client starts, asks and waits through this one type.

use crate::control::Stats;
use crate::control::{Answer, CaptureEnd, Done, Envelope, Info, IommuDone, IommuOp, Request, Stopped};
use crate::lint::LintWarning;
use crate::server::{socket_path, ServeOptions, Server};
use crate::wire::{Captured, TrafficSpec};
use platform::fs::ScratchDir;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

enum Link {
    InProcess(Server),
    Socket(PathBuf),
}

/// A nicsim to talk to. An in-process one stops, and its scratch directory goes, when the
/// session is dropped.
pub struct Session {
    link: Link,
    root: PathBuf,
    /// Dropped after the server (fields drop in order): removes what the server left beside it.
    _scratch: Option<ScratchDir>,
}

/// What [`Session::start`] serves.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    pub ports: usize,
    pub cables: Vec<(usize, usize)>,
    pub gbps: f64,
    /// The core the engine runs on.
    pub cpu: Option<usize>,
    /// Functions bound to a fake kernel driver.
    pub bound: bool,
    /// How long link setup takes.
    pub link_up: Duration,
    /// What each port is ([`ServeOptions::devices`]).
    pub devices: Vec<crate::pciconfig::Kind>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            ports: 2,
            cables: Vec::new(),
            gbps: 10.0,
            cpu: Some(0),
            bound: false,
            link_up: crate::port::DEFAULT_LINK_UP,
            devices: Vec::new(),
        }
    }
}

impl Session {
    /// An in-process nicsim in a new directory `/dev/shm/<prefix>-<tag>-…`, removed with the
    /// session (and by the next session with that prefix if this process dies first).
    pub fn start(prefix: &str, tag: &str, opts: &SessionOptions) -> Result<Session, String> {
        let scratch = ScratchDir::new(prefix, tag).map_err(|e| format!("a scratch directory under /dev/shm: {e}"))?;
        let root = scratch.path().join("nicsim");
        let serve = ServeOptions {
            ports: opts.ports,
            root: root.clone(),
            cables: opts.cables.clone(),
            gbps: opts.gbps,
            cpu: opts.cpu,
            bound: opts.bound,
            link_up: opts.link_up,
            sfp: true,
            devices: opts.devices.clone(),
            taps: Vec::new(),
        };
        Ok(Session { link: Link::InProcess(Server::start(&serve)?), root, _scratch: Some(scratch) })
    }

    /// The server that serves `root`, through its socket.
    pub fn connect(root: &Path) -> Session {
        Session { link: Link::Socket(socket_path(root)), root: root.to_path_buf(), _scratch: None }
    }

    /// Sends `request` and returns its answer.
    pub fn call<A: Answer>(&self, request: Request) -> Result<A, String> {
        match &self.link {
            Link::InProcess(server) => server.request(request),
            Link::Socket(socket) => over_socket(socket, &request),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What drivers pass as `--sysfs`.
    pub fn devices(&self) -> PathBuf {
        self.root.join("devices")
    }

    pub fn info(&self) -> Result<Info, String> {
        self.call(Request::Info)
    }

    pub fn stats(&self) -> Result<Stats, String> {
        self.call(Request::Stats)
    }

    pub fn lint(&self) -> Result<Vec<LintWarning>, String> {
        self.call(Request::Lint)
    }

    /// Starts (or restarts) the generator of `port`.
    pub fn start_traffic(&self, port: usize, spec: TrafficSpec) -> Result<(), String> {
        self.call::<Done>(Request::Start { port, spec }).map(drop)
    }

    /// Stops the generator of `port`; returns the frames it sent.
    pub fn stop_traffic(&self, port: usize) -> Result<u64, String> {
        self.call::<Stopped>(Request::Stop { port }).map(|s| s.generated)
    }

    pub fn set_rate(&self, port: usize, rate_pps: Option<f64>) -> Result<(), String> {
        self.call::<Done>(Request::SetRate { port, rate_pps }).map(drop)
    }

    /// A driver's store of `value` to `offset` of `port`'s BAR0, done by the device before
    /// this returns ([`Request::WriteRegister`]).
    pub fn write_register(&self, port: usize, offset: u32, value: u32) -> Result<(), String> {
        self.call::<Done>(Request::WriteRegister { port, offset, value }).map(drop)
    }

    /// Changes an IOMMU domain ([`Request::Iommu`]); answers the bytes an unmap removed.
    pub fn iommu(&self, op: IommuOp) -> Result<u64, String> {
        self.call::<IommuDone>(Request::Iommu { op }).map(|d| d.bytes)
    }

    /// Resets a function as `VFIO_DEVICE_RESET` does.
    pub fn reset_function(&self, port: usize) -> Result<(), String> {
        self.call::<Done>(Request::ResetFunction { port }).map(drop)
    }

    pub fn pause_tx(&self, port: usize, paused: bool) -> Result<(), String> {
        self.call::<Done>(Request::PauseTx { port, paused }).map(drop)
    }

    pub fn reset_counters(&self) -> Result<(), String> {
        self.call::<Done>(Request::ResetCounters).map(drop)
    }

    /// Captures the frames of `port` into the pcap file at `path`.
    pub fn capture(&self, port: usize, path: &Path, direction: Captured, count: Option<u64>) -> Result<(), String> {
        let path = path.display().to_string();
        self.call::<Done>(Request::Pcap { port, path, direction, count }).map(drop)
    }

    /// Ends the capture of `port`; returns the frames written.
    pub fn end_capture(&self, port: usize) -> Result<u64, String> {
        self.call::<CaptureEnd>(Request::PcapStop { port }).map(|c| c.written)
    }

    /// Plugs the cable of `port` in or pulls it (both ends of a cable).
    pub fn set_link(&self, port: usize, up: bool) -> Result<(), String> {
        self.call::<Done>(Request::Link { port, up }).map(drop)
    }

    /// Surprise-removes `port` (see [`crate::port::Port::remove`]).
    pub fn remove(&self, port: usize) -> Result<(), String> {
        self.call::<Done>(Request::Remove { port }).map(drop)
    }

    /// Injects `fault` into `port` (see [`crate::chaos`]).
    pub fn fault(&self, port: usize, fault: crate::chaos::Fault) -> Result<(), String> {
        self.call::<Done>(Request::Fault { port, fault }).map(drop)
    }

    pub fn shutdown(&self) -> Result<(), String> {
        self.call::<Done>(Request::Shutdown).map(drop)
    }

    /// Waits until the server answers (after starting it as a process).
    pub fn wait_answering(&self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.info() {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// Waits until a driver has a receive and a transmit queue enabled on every port.
    /// `driver_alive` is asked between looks and ends the wait with its error (a driver that
    /// exited early).
    pub fn wait_ports_up(
        &self,
        timeout: Duration,
        mut driver_alive: impl FnMut() -> Result<(), String>,
    ) -> Result<Stats, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.stats()?;
            if s.ports.iter().all(|p| p.rx_queues_enabled > 0 && p.tx_queues_enabled > 0) {
                return Ok(s);
            }
            driver_alive()?;
            if Instant::now() > deadline {
                return Err(format!("the driver did not bring the ports up within {} s", timeout.as_secs()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// One request over the socket at `socket`, and its answer.
fn over_socket<A: Answer>(socket: &Path, request: &Request) -> Result<A, String> {
    let mut s = UnixStream::connect(socket).map_err(|e| {
        format!("cannot reach nicsim at {}: {e} (start it with `nicsim serve --ports 2`)", socket.display())
    })?;
    let line = serde_json::to_string(request).map_err(|e| e.to_string())?;
    writeln!(s, "{line}").map_err(|e| e.to_string())?;
    let mut answer = String::new();
    BufReader::new(&s).read_line(&mut answer).map_err(|e| e.to_string())?;
    let envelope: Envelope<A> =
        serde_json::from_str(&answer).map_err(|e| format!("nicsim's answer is not {}: {e}", A::WHAT))?;
    envelope.into_result()
}
