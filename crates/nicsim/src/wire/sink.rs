//! The sink: counts, loss, order and latency of the generated frames a port transmits.

use super::frame::parse_min;
use super::MIN_FRAME;
use crate::histogram::LatencyHistogram;
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
}

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
    /// Generator-to-sink latency of the frames generated after the latest host stall's end,
    /// and of the others: those in flight while the host held the engine's core (see
    /// `Engine::note_late_doorbell`). [`Self::latency_all`] is both.
    pub latency_ns: LatencyHistogram,
    pub latency_in_host_stalls_ns: LatencyHistogram,
    /// Engine time at which the latest host stall ended.
    pub host_stall_end_ns: u64,
}

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
            latency_ns: LatencyHistogram::new(),
            latency_in_host_stalls_ns: LatencyHistogram::new(),
            host_stall_end_ns: 0,
        }
    }

    /// Every frame's latency, in host stalls or not.
    pub fn latency_all(&self) -> LatencyHistogram {
        let mut all = self.latency_ns.clone();
        all.merge(&self.latency_in_host_stalls_ns);
        all
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
        match head.first_chunk::<MIN_FRAME>() {
            Some(f) => self.consume_min(f, len, end_ps),
            None => {
                self.packets += 1;
                self.bytes += len as u64;
                self.foreign += 1;
            }
        }
    }

    /// [`Self::consume_head`] given the first [`MIN_FRAME`] bytes of a frame of `len` bytes.
    #[inline(always)]
    pub fn consume_min(&mut self, head: &[u8; MIN_FRAME], len: usize, end_ps: u64) {
        self.packets += 1;
        self.bytes += len as u64;
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
        let latency = (end_ps / 1000).saturating_sub(ts_ns).max(1);
        if ts_ns >= self.host_stall_end_ns {
            self.latency_ns.record(latency);
        } else {
            self.latency_in_host_stalls_ns.record(latency);
        }
    }

    pub fn reset(&mut self) {
        *self = Sink { host_stall_end_ns: self.host_stall_end_ns, ..Sink::new() };
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
