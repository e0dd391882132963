//! The control API: each request and its typed answer, in one place.
//!
//! On the socket a request is one JSON object per line, tagged by `cmd`; the answer is one line,
//! `{"ok":true,"result":…}` or `{"ok":false,"error":"…"}`. Both ends use these types with serde,
//! and an unknown or missing field is an error, never a default. In process the engine answers
//! with a [`Reply`] that is converted to the expected type without passing through JSON.

use crate::chaos::{Fault, FaultEvent, Injected};
use crate::flow_control::FlowStats;
use crate::lint::LintWarning;
use crate::port::{DeviceCounters, DmaFault, Drops, InFlight};
use crate::wire::{Captured, LatencySummary, StreamStats, TrafficSpec};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A control request.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Ports, PCI addresses and paths: answers [`Info`].
    Info,
    /// Start (or restart) the generator of a port: answers [`Done`].
    Start { port: usize, spec: TrafficSpec },
    /// Stop the generator of a port: answers [`Stopped`].
    Stop { port: usize },
    /// Change the rate of a running generator (`None` = line rate): answers [`Done`].
    SetRate { port: usize, rate_pps: Option<f64> },
    /// Counters, latency, faults: answers [`Stats`].
    Stats,
    /// Lint warnings of every port: answers a list of [`LintWarning`].
    Lint,
    /// Zero sinks, generator counts and device statistics: answers [`Done`].
    ResetCounters,
    /// Capture frames of a port into a pcap file: answers [`Done`].
    Pcap { port: usize, path: String, direction: Captured, count: Option<u64> },
    /// Stop a capture and flush the file: answers [`CaptureEnd`].
    PcapStop { port: usize },
    /// Hold (or release) a port's transmitter, as a link partner's flow-control pause does:
    /// answers [`Done`].
    PauseTx { port: usize, paused: bool },
    /// Plug a port's cable in (`up`: link setup starts) or pull it (the link goes down now);
    /// on a cabled port both ends: answers [`Done`].
    Link { port: usize, up: bool },
    /// A driver's 32-bit store to `offset` of a port's BAR0, taken now as the card takes a
    /// posted write (whatever it does, a reset or an I2C clock edge, is done): answers
    /// [`Done`]. `nicsim exec` serves the stores to BAR0's first page through it.
    WriteRegister { port: usize, offset: u32, value: u32 },
    /// Surprise-remove a port: its BAR0 and configuration space read all-ones from now on,
    /// and its generator stops: answers [`Done`].
    Remove { port: usize },
    /// Inject a fault into a port's device or wire (see [`crate::chaos`]): answers [`Done`].
    Fault { port: usize, fault: Fault },
    /// Change an IOMMU domain, as a driver's VFIO call does (`nicsim exec --vfio` asks):
    /// answers [`IommuDone`].
    Iommu { op: IommuOp },
    /// Reset a function as vfio-pci does on `VFIO_DEVICE_RESET` (a function-level reset):
    /// answers [`Done`].
    ResetFunction { port: usize },
    /// Stop the server: answers [`Done`].
    Shutdown,
}

/// What a driver's VFIO call does to the IOMMU's domains (one per container).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum IommuOp {
    /// `VFIO_GROUP_SET_CONTAINER`: port `port`'s group joins container `container` of process
    /// `pid`; from now on the function's DMA reaches only that container's IOVAs.
    Attach { container: u64, pid: u32, port: usize },
    /// `VFIO_IOMMU_MAP_DMA`: `[iova, iova + len)` translates to `vaddr` of process `pid`.
    Map { container: u64, pid: u32, vaddr: u64, iova: u64, len: u64 },
    /// `VFIO_IOMMU_UNMAP_DMA`: answers the bytes unmapped.
    Unmap { container: u64, iova: u64, len: u64 },
    /// The container's process closed it or ended: its mappings go and its functions are
    /// reset.
    Release { container: u64 },
}

/// The answer to [`Request::Iommu`]: bytes an unmap removed (0 otherwise).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct IommuDone {
    pub bytes: u64,
}

/// A port's IOMMU domain, while it has one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct IommuDomain {
    pub container: u64,
    pub pid: u32,
    pub mapped_bytes: u64,
}

/// `nicsim fault dma`'s accesses on a port: each aimed outside what the driver mapped.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HostileDma {
    pub attempted: u64,
    /// Refused by the IOMMU: never performed.
    pub refused: u64,
    /// Would have reached driver memory (only without an IOMMU domain; never performed).
    pub reached: u64,
}

/// The answer to a request that returns nothing but success.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Done {}

/// The answer to [`Request::Stop`]: frames the generator sent in all.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Stopped {
    pub generated: u64,
}

/// The answer to [`Request::PcapStop`]: frames written to the file.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CaptureEnd {
    pub written: u64,
}

/// The answer to [`Request::Info`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Info {
    pub root: PathBuf,
    /// What drivers pass as `--sysfs`.
    pub devices: PathBuf,
    pub socket: PathBuf,
    pub link_gbps: f64,
    pub ports: Vec<PortInfo>,
}

/// One port of [`Info`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PortInfo {
    pub port: usize,
    /// PCI address, e.g. `0000:5e:00.0`.
    pub address: String,
    /// The function's directory.
    pub dir: PathBuf,
    /// MAC address as `02:00:00:00:00:00`.
    pub mac: String,
    /// The port at the other end of a cable, if any.
    pub cable: Option<usize>,
}

/// Per-port statistics as reported on the control socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortStats {
    pub port: usize,
    pub generator_active: bool,
    pub generated: u64,
    pub generated_bytes: u64,
    /// Frames the generator's rate owed but never offered because nicsim fell behind
    /// (see `Generator::skipped`).
    pub generator_skipped: u64,
    pub sink_packets: u64,
    pub sink_bytes: u64,
    pub sink_foreign: u64,
    /// Per generator stream (index = generating port) as seen by this port's sink.
    pub streams: Vec<(usize, StreamStats)>,
    pub latency_ns: LatencySummary,
    /// The frames that took `wire::SLOW_FRAME_NS` or longer, as (engine ns at the sink,
    /// latency ns), the first 20 000 since the counters were reset, and how many more.
    #[serde(default)]
    pub slow_frames: Vec<(u64, u64)>,
    #[serde(default)]
    pub slow_frames_not_kept: u64,
    pub device: DeviceCounters,
    pub drops: Drops,
    pub dma_faults: u64,
    pub faults: Vec<DmaFault>,
    pub lint_warnings: usize,
    pub resets: u64,
    pub pcap_written: Option<u64>,
    /// Enabled receive and transmit queues.
    pub rx_queues_enabled: usize,
    pub tx_queues_enabled: usize,
    /// Whether the transmitter is held (`nicsim traffic pause`).
    pub tx_paused: bool,
    /// 802.3x flow control: PAUSE frames sent and received, and who is held now.
    pub flow_control: FlowStats,
    /// Frames the port holds at the moment of the snapshot.
    pub in_flight: InFlight,
    /// Surprise-removed (`nicsim remove`).
    pub removed: bool,
    /// The link is up (LINKS.LINK_UP).
    pub link_up: bool,
    /// Faults injected on purpose, by kind, and the latest of them with their time.
    pub injected: Injected,
    pub fault_log: Vec<FaultEvent>,
    /// Per receive queue, the intervals in which the driver left its tail alone while frames
    /// were dropped (engine ns), and the drops inside and outside them.
    #[serde(default)]
    pub rx_tail_stalls: Vec<crate::port::TailStalls>,
    /// The function's IOMMU domain, if a VFIO container holds it.
    #[serde(default)]
    pub iommu: Option<IommuDomain>,
    /// DMA faults the IOMMU reported on this port (translation failures), all counted.
    #[serde(default)]
    pub iommu_faults: u64,
    #[serde(default)]
    pub hostile_dma: HostileDma,
}

/// The whole engine's statistics.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stats {
    /// Engine time up to which every counter is up to date: the last iteration's. A rate
    /// between two snapshots is exact even if the engine's core was stopped just before one.
    pub elapsed_ns: u64,
    pub iterations: u64,
    /// Bytes of driver memory nicsim can reach now; 0 once every driver that ran has exited
    /// (or released its memory) and nicsim noticed, within a second.
    pub driver_memory_bytes: u64,
    /// Time between two looks at the doorbells (RDT, TDT) while queues run, in ns, since start
    /// or the last reset of the counters.
    pub doorbell_interval_ns: LatencySummary,
    /// The slow path's passes while queues run (register sweep, statistics, control
    /// requests), in ns: time in which the device neither receives nor transmits.
    pub slow_path_ns: LatencySummary,
    /// Looks at the doorbells that came late: the engine was off its core (or overloaded)
    /// while a driver may have been waiting for the device to react.
    pub late_doorbells: LateDoorbells,
    /// CLOCK_MONOTONIC at engine time 0: maps engine times onto another process's clock.
    pub monotonic_start_ns: u64,
    pub ports: Vec<PortStats>,
}

/// Doorbell intervals longer than [`LateDoorbells::threshold_ns`]: how many since start (or
/// the last reset of the counters) and the latest few.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LateDoorbells {
    /// Twice the time the card takes to see a tail write (about a microsecond).
    pub threshold_ns: u64,
    pub count: u64,
    /// The latest ones, oldest first, as (start, end) in engine ns.
    pub recent: Vec<(u64, u64)>,
    /// Those at least `stall_threshold_ns` long (the engine's core was taken from it), the
    /// latest 1024, kept apart from the short ones.
    #[serde(default)]
    pub stall_threshold_ns: u64,
    #[serde(default)]
    pub stalls: Vec<(u64, u64)>,
    /// The slow path's passes at least `stall_threshold_ns` long, the latest 1024: nicsim's
    /// own absences, or the host's that fell in a pass.
    #[serde(default)]
    pub slow_passes: Vec<(u64, u64)>,
}

/// What the engine answers, in process; on the socket each variant is the bare `result`.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Reply {
    Done(Done),
    Stopped(Stopped),
    CaptureEnd(CaptureEnd),
    Info(Info),
    Stats(Box<Stats>),
    Lint(Vec<LintWarning>),
    IommuDone(IommuDone),
}

/// An answer type: how it is taken out of a [`Reply`] in process, and read from JSON on the
/// socket.
pub trait Answer: DeserializeOwned + Sized {
    /// What the answer is, for the message when another came.
    const WHAT: &'static str;
    fn from_reply(reply: Reply) -> Option<Self>;
}

macro_rules! answer {
    ($type:ty, $variant:ident, $what:literal) => {
        impl Answer for $type {
            const WHAT: &'static str = $what;
            fn from_reply(reply: Reply) -> Option<Self> {
                match reply {
                    Reply::$variant(a) => Some(a),
                    _ => None,
                }
            }
        }
    };
}
answer!(Done, Done, "an acknowledgement");
answer!(Stopped, Stopped, "a generator's total");
answer!(CaptureEnd, CaptureEnd, "a capture's total");
answer!(Info, Info, "the server's description");
answer!(Vec<LintWarning>, Lint, "lint warnings");
answer!(IommuDone, IommuDone, "an IOMMU change's result");

impl Answer for Stats {
    const WHAT: &'static str = "statistics";
    fn from_reply(reply: Reply) -> Option<Self> {
        match reply {
            Reply::Stats(s) => Some(*s),
            _ => None,
        }
    }
}

/// Takes the answer of type `A` out of `reply`, or says which request got which answer.
pub fn expect<A: Answer>(request: &Request, reply: Reply) -> Result<A, String> {
    A::from_reply(reply).ok_or_else(|| format!("nicsim answered {request:?} with something other than {}", A::WHAT))
}

/// One answer line on the socket.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope<T> {
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl<T> Envelope<T> {
    pub fn of(answer: Result<T, String>) -> Self {
        match answer {
            Ok(result) => Envelope { ok: true, result: Some(result), error: None },
            Err(error) => Envelope { ok: false, result: None, error: Some(error) },
        }
    }

    /// The result, or the server's error.
    pub fn into_result(self) -> Result<T, String> {
        match (self.ok, self.result, self.error) {
            (true, Some(r), None) => Ok(r),
            (false, None, Some(e)) => Err(e),
            _ => Err("nicsim's answer has neither a result nor an error".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_field_in_a_request_is_an_error() {
        let good = r#"{"cmd":"stop","port":1}"#;
        assert_eq!(serde_json::from_str::<Request>(good).unwrap(), Request::Stop { port: 1 });
        for bad in [r#"{"cmd":"stop","port":1,"prot":2}"#, r#"{"cmd":"stop"}"#, r#"{"cmd":"stpo","port":1}"#] {
            assert!(serde_json::from_str::<Request>(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn an_answer_must_have_every_field_and_no_other() {
        let info = r#"{"root":"/r","devices":"/r/devices","socket":"/r/s","link_gbps":10.0,"ports":[]}"#;
        assert_eq!(serde_json::from_str::<Info>(info).unwrap().link_gbps, 10.0);
        let misspelt = info.replace("link_gbps", "link_gpbs");
        assert!(serde_json::from_str::<Info>(&misspelt).is_err(), "a misspelt field became a default");
        let extra = info.replace("\"ports\"", "\"speed\":1,\"ports\"");
        assert!(serde_json::from_str::<Info>(&extra).is_err());
        assert!(serde_json::from_str::<Envelope<Done>>(r#"{"ok":true,"result":{"x":1}}"#).is_err());
    }

    #[test]
    fn replies_round_trip_through_the_socket_form() {
        let line = serde_json::to_string(&Envelope::of(Ok(Reply::Stopped(Stopped { generated: 7 })))).unwrap();
        assert_eq!(line, r#"{"ok":true,"result":{"generated":7}}"#);
        let back: Envelope<Stopped> = serde_json::from_str(&line).unwrap();
        assert_eq!(back.into_result(), Ok(Stopped { generated: 7 }));
        let err: Envelope<Done> = serde_json::from_str(r#"{"ok":false,"error":"no port 9"}"#).unwrap();
        assert_eq!(err.into_result(), Err("no port 9".to_string()));
    }

    #[test]
    fn the_wrong_answer_in_process_is_named() {
        let e = expect::<Info>(&Request::Info, Reply::Done(Done {})).unwrap_err();
        assert!(e.contains("the server's description"), "{e}");
    }
}
