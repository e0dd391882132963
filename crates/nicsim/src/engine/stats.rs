//! Statistics answers in two halves: what must be taken from the engine at one instant
//! (counters, and copies of the histograms and of the records' shared chunks), and the rest
//! (percentiles, the records laid out in lists), done by the thread that asked.
//! Built whole in the engine, an answer held the device for 100–200 µs under line rate, long
//! enough for a driver that waits on its transmit head to stall for good (docs/nicsim.md,
//! "TinyNF's agent").

use super::{Engine, ENGINE_STALL_NS, LATE_DOORBELL_NS};
use crate::control::{IommuDomain, LateDoorbells, PortStats, Reply, Stats};
use crate::dma::DmaSpace;
use crate::flow_control::FlowStats;
use crate::histogram::LatencyHistogram;
use crate::port::TailStallsDraft;
use crate::shared_log::SharedLog;
use crate::wire::{LatencySummary, SlowFrames};

/// A statistics answer as the engine hands it over.
pub struct StatsDraft {
    stats: Stats,
    /// Per port, its sink's latencies and slow frames, and its receive queues' tail stalls.
    ports: Vec<(LatencyHistogram, SlowFrames, Vec<TailStallsDraft>)>,
    doorbell_gaps: LatencyHistogram,
    slow_path: LatencyHistogram,
    /// Late doorbell intervals, the host's absences and the slow path's long passes.
    late: [SharedLog<(u64, u64)>; 3],
}

impl StatsDraft {
    /// The answer, summarized off the engine's thread.
    pub fn finish(self) -> Stats {
        let StatsDraft { mut stats, ports, doorbell_gaps, slow_path, late: [recent, stalls, slow_passes] } = self;
        for (port, (latency, slow, tails)) in stats.ports.iter_mut().zip(ports) {
            port.latency_ns = LatencySummary::of(&latency);
            port.slow_frames = slow.to_vec();
            port.rx_tail_stalls = tails.into_iter().map(TailStallsDraft::finish).collect();
        }
        let late = &mut stats.late_doorbells;
        (late.recent, late.stalls, late.slow_passes) = (recent.to_vec(), stalls.to_vec(), slow_passes.to_vec());
        stats.doorbell_interval_ns = LatencySummary::of(&doorbell_gaps);
        stats.slow_path_ns = LatencySummary::of(&slow_path);
        stats
    }
}

/// What the engine sends back for a request.
pub enum Answer {
    Reply(Result<Reply, String>),
    Stats(Box<StatsDraft>),
}

impl Answer {
    /// The reply, finished by the thread that asked.
    pub fn into_reply(self) -> Result<Reply, String> {
        match self {
            Answer::Reply(r) => r,
            Answer::Stats(draft) => Ok(Reply::Stats(Box::new(draft.finish()))),
        }
    }
}

impl<D: DmaSpace> Engine<D> {
    /// A snapshot of every counter.
    pub fn stats(&self) -> Stats {
        self.stats_draft().finish()
    }

    /// The part of [`Engine::stats`] that must be taken in the engine.
    pub fn stats_draft(&self) -> StatsDraft {
        let now_ps = self.clock_ps;
        let ports = self
            .ports
            .iter()
            .zip(self.wires.iter())
            .map(|(p, w)| (p, w, p.enabled_queues()))
            .map(|(p, w, (rx_queues, tx_queues))| PortStats {
                port: p.index,
                generator_active: w.generator.active(),
                generated: w.generator.sent,
                generated_bytes: w.generator.bytes,
                generator_skipped: w.generator.skipped,
                sink_packets: w.sink.packets,
                sink_bytes: w.sink.bytes,
                sink_foreign: w.sink.foreign,
                streams: w
                    .sink
                    .streams
                    .iter()
                    .cloned()
                    .enumerate()
                    .filter(|(_, s)| s.received > 0 || s.lost > 0)
                    .collect(),
                latency_ns: LatencySummary::default(),
                slow_frames: Vec::new(),
                slow_frames_not_kept: w.sink.slow_frames_not_kept,
                device: p.counters.clone(),
                drops: p.drops.clone(),
                dma_faults: p.fault_count,
                faults: p.faults.clone(),
                lint_warnings: p.lint.entries().len(),
                resets: p.resets,
                pcap_written: w.pcap.as_ref().map(|c| c.written),
                rx_queues_enabled: rx_queues,
                tx_queues_enabled: tx_queues,
                tx_paused: p.tx_paused,
                flow_control: FlowStats {
                    partner_paused: p.flow.partner_paused(now_ps),
                    transmitter_paused: p.transmitter_paused(now_ps),
                    ..p.flow.stats.clone()
                },
                in_flight: p.in_flight(&self.dma),
                removed: p.removed,
                link_up: p.link_up(),
                injected: w.chaos.injected.clone(),
                fault_log: w.chaos.log.iter().cloned().collect(),
                rx_tail_stalls: Vec::new(),
                iommu: self.dma.iommu().and_then(|iommu| {
                    let id = iommu.domain_of(p.index)?;
                    let pid = iommu.containers().iter().find(|c| c.id == id)?.pid;
                    Some(IommuDomain { container: id, pid, mapped_bytes: iommu.mapped_bytes(id) })
                }),
                iommu_faults: p.iommu_faults,
                hostile_dma: p.hostile_dma,
            })
            .collect();
        let stats = Stats {
            elapsed_ns: now_ps / 1000,
            iterations: self.iterations,
            driver_memory_bytes: self.dma.known_bytes(),
            doorbell_interval_ns: LatencySummary::default(),
            slow_path_ns: LatencySummary::default(),
            late_doorbells: LateDoorbells {
                threshold_ns: LATE_DOORBELL_NS,
                count: self.late_count,
                recent: Vec::new(),
                stall_threshold_ns: ENGINE_STALL_NS,
                stalls: Vec::new(),
                slow_passes: Vec::new(),
            },
            monotonic_start_ns: self.monotonic_start_ns,
            ports,
        };
        StatsDraft {
            stats,
            ports: self
                .ports
                .iter()
                .zip(&self.wires)
                .map(|(p, w)| (w.sink.latency_ns.snapshot(), w.sink.slow_frames.clone(), p.tail_stall_drafts(now_ps)))
                .collect(),
            doorbell_gaps: self.doorbell_gaps.snapshot(),
            slow_path: self.slow_path.snapshot(),
            late: [self.late_recent.clone(), self.engine_stalls.clone(), self.long_slow_passes.clone()],
        }
    }
}
