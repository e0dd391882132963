//! The sink: counts, loss, order and latency of the generated frames a port transmits.

use super::frame::parse_min;
use super::MIN_FRAME;
use crate::histogram::LatencyHistogram;
use crate::shared_log::SharedLog;
use serde::{Deserialize, Serialize};

/// Per-stream sequence tracking at a sink.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamStats {
    pub received: u64,
    /// Sequence numbers skipped and not (yet) seen.
    pub lost: u64,
    /// Frames that arrived after a later sequence number.
    pub reordered: u64,
    /// One past the highest sequence number seen: frames from here to the generator's count
    /// never arrived (or have not yet), and are not among the gaps in `lost`.
    pub next_seq: u64,
    /// Frames that arrived after a later frame of their own flow (source address and port):
    /// what RSS must never cause, while frames of different flows may interleave.
    #[serde(default)]
    pub flow_reordered: u64,
}

/// Flows a sink tells apart per stream: by source port, the source address as a tag
/// (the generator's flows differ in both; see `FlowFields::of`).
const FLOW_SLOTS: usize = 1 << 16;

/// Per flow slot: the source address of the flow last seen there and one past its highest
/// sequence number.
type FlowTable = Box<[(u32, u64)]>;

/// The bytes of a frame a sink reads: headers and nicsim's payload fields.
pub const SINK_HEAD: usize = 64;

/// Maximum number of generator streams a sink tracks (one per port).
pub const MAX_STREAMS: usize = 16;

/// Counts and measures the frames a port transmits.
pub struct Sink {
    pub packets: u64,
    pub bytes: u64,
    /// Frames that were not nicsim generator frames.
    pub foreign: u64,
    pub streams: Vec<StreamStats>,
    /// Per stream, each flow's order (see [`StreamStats::flow_reordered`]), made at its first
    /// frame.
    flows: Vec<Option<FlowTable>>,
    pub latency_ns: LatencyHistogram,
    /// The frames that took [`SLOW_FRAME_NS`] or longer, each as (engine time it reached the
    /// sink, latency), the first [`SLOW_FRAMES_KEPT`]; and how many more there were. With
    /// them, a client that learns of stalls afterwards can give the percentiles without the
    /// frames in flight during one.
    pub slow_frames: SlowFrames,
    pub slow_frames_not_kept: u64,
}

/// Slow frames as (engine time in ns, latency in ns), in shared chunks so that a copy for a
/// statistics answer does not hold the engine while it copies 20 000 records.
pub type SlowFrames = SharedLog<(u64, u64)>;

/// A frame this slow is kept in [`Sink::slow_frames`]: a polling driver on a core of its own
/// forwards in microseconds.
pub const SLOW_FRAME_NS: u64 = 50_000;
/// Slow frames kept per sink between two resets.
pub const SLOW_FRAMES_KEPT: usize = 20_000;

impl Default for Sink {
    fn default() -> Self {
        Self::new()
    }
}

impl Sink {
    pub fn new() -> Self {
        Sink {
            packets: 0,
            bytes: 0,
            foreign: 0,
            streams: vec![StreamStats::default(); MAX_STREAMS],
            flows: (0..MAX_STREAMS).map(|_| None).collect(),
            latency_ns: LatencyHistogram::new(),
            slow_frames: SharedLog::new(usize::MAX),
            slow_frames_not_kept: 0,
        }
    }

    /// Accounts one frame whose last bit left the wire at `end_ps`.
    #[inline]
    pub fn consume(&mut self, frame: &[u8], end_ps: u64) {
        self.consume_head(&frame[..frame.len().min(SINK_HEAD)], frame.len(), end_ps);
    }

    /// [`Self::consume`] given only the first [`SINK_HEAD`] bytes (or all, if fewer) of a
    /// frame of `len` bytes: all a sink reads.
    #[inline]
    pub fn consume_head(&mut self, head: &[u8], len: usize, end_ps: u64) {
        self.packets += 1;
        self.bytes += len as u64;
        self.measure_head(head, end_ps);
    }

    /// [`Self::consume_head`] but for `packets` and `bytes`, which a caller that takes runs of
    /// frames adds once per run.
    #[inline]
    pub fn measure_head(&mut self, head: &[u8], end_ps: u64) {
        match head.first_chunk::<MIN_FRAME>() {
            Some(f) => self.measure_min(f, end_ps),
            None => self.foreign += 1,
        }
    }

    /// [`Self::consume_head`] given the first [`MIN_FRAME`] bytes of a frame of `len` bytes.
    #[inline(always)]
    pub fn consume_min(&mut self, head: &[u8; MIN_FRAME], len: usize, end_ps: u64) {
        self.packets += 1;
        self.bytes += len as u64;
        self.measure_min(head, end_ps);
    }

    /// [`Self::consume_min`] but for `packets` and `bytes`, which a caller that takes runs of
    /// frames adds once per run.
    #[inline(always)]
    pub fn measure_min(&mut self, head: &[u8; MIN_FRAME], end_ps: u64) {
        let Some((stream, seq, ts_ns)) = parse_min(head) else {
            self.foreign += 1;
            return;
        };
        let Some(s) = self.streams.get_mut(stream as usize) else {
            self.foreign += 1;
            return;
        };
        s.received += 1;
        // The sequence number comes from a frame the driver transmitted: any value is possible.
        if seq >= s.next_seq {
            s.lost = s.lost.saturating_add(seq - s.next_seq);
            s.next_seq = seq.saturating_add(1);
        } else {
            s.reordered += 1;
            s.lost = s.lost.saturating_sub(1);
        }
        if let Some(table) = self.flows.get_mut(stream as usize) {
            let table = table.get_or_insert_with(|| vec![(0, 0); FLOW_SLOTS].into_boxed_slice());
            let src_ip = u32::from_be_bytes([head[26], head[27], head[28], head[29]]);
            let slot = usize::from(u16::from_be_bytes([head[34], head[35]]));
            if let Some(e) = table.get_mut(slot) {
                match *e {
                    (ip, next) if ip == src_ip && seq < next => s.flow_reordered += 1,
                    _ => *e = (src_ip, seq.saturating_add(1)),
                }
            }
        }
        let latency = (end_ps / 1000).saturating_sub(ts_ns).max(1);
        self.latency_ns.record(latency);
        if latency >= SLOW_FRAME_NS {
            // Overloaded rings make most frames slow: past the limit, a count and no call.
            if self.slow_frames.len() < SLOW_FRAMES_KEPT {
                self.keep_slow(end_ps / 1000, latency);
            } else {
                self.slow_frames_not_kept += 1;
            }
        }
    }

    #[cold]
    fn keep_slow(&mut self, end_ns: u64, latency: u64) {
        self.slow_frames.push((end_ns, latency));
    }

    pub fn reset(&mut self) {
        *self = Sink::new();
    }
}

/// Latency percentiles in nanoseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LatencySummary {
    pub samples: u64,
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
}

impl LatencySummary {
    pub fn of(h: &LatencyHistogram) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            samples: h.len(),
            min: h.min(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
            mean: h.mean(),
        }
    }
}
