//! The device engine: one loop, on its own core, that runs every port.
//!
//! Each iteration reads the doorbells of enabled queues, runs the transmit engines (frames go to
//! the port's sink, across a cable to another port, or back into the port in loopback mode),
//! drains held receive frames, and lets the generators deliver frames that are due. Every
//! ~100 µs the slow path polls the whole register file and configuration space, publishes
//! statistics and answers control requests.

use crate::chaos::{Arrival, Chaos, Fault};
use crate::control::{CaptureEnd, Done, Info, IommuDone, IommuOp, Reply, Request, Stopped};
use crate::dma::{DmaSpace, Domain};
use crate::flow_control::Pause;
use crate::histogram::LatencyHistogram;
use crate::lint::LintWarning;
use crate::port::{HostileWrite, Port, TxBatch, QUEUE_BURST};
use crate::shared_log::SharedLog;
use crate::wire::{Captured, Generator, PcapWriter, Sink, WireClock};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod hostile_dma;
mod stats;

use hostile_dma::hostile_dma;
pub use stats::{Answer, StatsDraft};

/// Slow-path period.
const SCAN_PERIOD_PS: u64 = 100_000_000; // 100 µs
/// A doorbell interval longer than this is late: twice the time the card takes to see a
/// tail write.
const LATE_DOORBELL_NS: u64 = 2_000;
/// Late doorbell intervals kept for [`Stats::late_doorbells`].
const LATE_DOORBELLS_KEPT: usize = 256;
/// A doorbell interval this long, without the slow path's own time, is a stall of the
/// engine's core (an iteration takes about a microsecond: the host took the core), kept apart
/// so that the many short late intervals do not push it out; at most this many.
const ENGINE_STALL_NS: u64 = 20_000;
const ENGINE_STALLS_KEPT: usize = 1024;
/// Frames a tap delivers per iteration: as many as a generator delivers into one queue.
const TAP_BURST: usize = QUEUE_BURST;

/// A request with the channel its answer goes to. The asking thread polls that channel:
/// waking a thread that sleeps on it cost the engine 13–34 µs on the development host.
pub struct Command {
    pub request: Request,
    pub reply: Sender<Answer>,
}

/// What a port's wire is attached to.
pub struct PortWire {
    pub generator: Generator,
    pub sink: Sink,
    pub pcap: Option<PcapWriter>,
    /// The port at the other end of a cable, if any.
    pub cable: Option<usize>,
    /// Pacing of frames arriving at this port.
    pub rx_clock: WireClock,
    /// Faults injected into this port and its wire.
    pub chaos: Chaos,
    /// A TAP interface in place of generator and sink: the Linux network stack is the link
    /// partner (`nicsim serve --tap`).
    pub tap: Option<platform::tap::Tap>,
}

/// The device engine.
pub struct Engine<D: DmaSpace> {
    pub ports: Vec<Port>,
    pub wires: Vec<PortWire>,
    pub dma: D,
    gbps: f64,
    epoch: Instant,
    epoch_wall_ns: u64,
    batch: TxBatch,
    pub iterations: u64,
    /// Engine time of the last iteration (or idle poll): what the counters are up to date to.
    clock_ps: u64,
    next_scan_ps: u64,
    /// What the server says of itself; an engine without a server has none.
    info: Option<Info>,
    /// Time between two looks at the doorbells while busy, in ns: how long a tail write can
    /// go unseen (the card sees one within about a microsecond).
    doorbell_gaps: LatencyHistogram,
    /// When the doorbells were last looked at; 0 after an idle pause.
    last_doorbell_ps: u64,
    /// Late doorbell intervals since start: how many, and the latest as (start, end) in ns.
    late_count: u64,
    late_recent: SharedLog<(u64, u64)>,
    /// The late intervals of [`ENGINE_STALL_NS`] or more without nicsim's own work.
    engine_stalls: SharedLog<(u64, u64)>,
    /// nicsim's own work since the last look at the doorbells: slow-path passes, and the
    /// iteration itself when it delivered more than one queue's share of frames.
    own_work_ps: u64,
    /// The slow path's time per pass while queues run, in ns: time in which the device does
    /// nothing, as the host's preemptions are.
    slow_path: LatencyHistogram,
    /// The passes of [`ENGINE_STALL_NS`] or more, as (start, end) in ns.
    long_slow_passes: SharedLog<(u64, u64)>,
    monotonic_start_ns: u64,
    /// Device resets the slow path has checked for a second mapper: a reset may happen in
    /// the fast path's doorbell poll as well as in a sweep.
    resets_checked: u64,
    /// When the IOMMU's containers were last checked for processes that ended.
    last_orphan_look: Instant,
    /// Queue enables the slow path has checked against released memory.
    enables_checked: u64,
}

impl<D: DmaSpace> Engine<D> {
    /// An engine over `ports` with links of `gbps`; `cables` connect pairs of ports.
    pub fn new(ports: Vec<Port>, dma: D, gbps: f64, cables: &[(usize, usize)]) -> Self {
        let mut wires: Vec<PortWire> = (0..ports.len())
            .map(|i| PortWire {
                generator: Generator::new(i as u16),
                sink: Sink::new(),
                pcap: None,
                cable: None,
                rx_clock: WireClock::new(gbps),
                chaos: Chaos::default(),
                tap: None,
            })
            .collect();
        for &(a, b) in cables {
            wires[a].cable = Some(b);
            wires[b].cable = Some(a);
        }
        let monotonic_start_ns = platform::sched::monotonic_ns();
        let epoch_wall_ns = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        Engine {
            ports,
            wires,
            dma,
            gbps,
            epoch: Instant::now(),
            epoch_wall_ns,
            batch: TxBatch::new(128),
            iterations: 0,
            clock_ps: 0,
            next_scan_ps: 0,
            info: None,
            doorbell_gaps: LatencyHistogram::new(),
            last_doorbell_ps: 0,
            late_count: 0,
            late_recent: SharedLog::new(LATE_DOORBELLS_KEPT),
            engine_stalls: SharedLog::new(ENGINE_STALLS_KEPT),
            own_work_ps: 0,
            slow_path: LatencyHistogram::new(),
            long_slow_passes: SharedLog::new(ENGINE_STALLS_KEPT),
            monotonic_start_ns,
            resets_checked: 0,
            last_orphan_look: Instant::now(),
            enables_checked: 0,
        }
    }

    /// Engine time in picoseconds.
    pub fn now_ps(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64 * 1000
    }

    /// One iteration of the fast path at time `now_ps`. Never inlined, so that profiles
    /// (callgrind) can tell the per-frame work from the slow path.
    #[inline(never)]
    pub fn step(&mut self, now_ps: u64) {
        self.iterations += 1;
        self.clock_ps = now_ps;
        if self.last_doorbell_ps != 0 {
            let gap_ns = now_ps.saturating_sub(self.last_doorbell_ps) / 1000;
            self.doorbell_gaps.record(gap_ns);
            if gap_ns > LATE_DOORBELL_NS {
                self.note_late_doorbell(self.last_doorbell_ps / 1000, now_ps / 1000);
            }
        }
        self.own_work_ps = 0;
        self.last_doorbell_ps = now_ps;
        let Engine { ports, wires, dma, batch, .. } = self;
        let mut rescanned = false;
        for p in ports.iter_mut() {
            p.update_stall(now_ps);
            rescanned |= p.poll_doorbells();
        }
        if rescanned {
            // A driver that forwards between ports sets up the output's TX queue before the
            // input's RX queue (TinyNF does): it must be running before the first frame is
            // received, as on the card, not up to a slow-path period later.
            for p in ports.iter_mut() {
                p.apply_pending_writes();
            }
        }
        for p in ports.iter_mut() {
            p.poll_tx_doorbells();
        }
        for i in 0..ports.len() {
            let captured = wires[i].pcap.as_ref().is_some_and(|p| p.direction != Captured::Rx);
            if wires[i].cable.is_none() && !ports[i].loops_back() && !captured && wires[i].tap.is_none() {
                // Only the sink sees these frames: it reads them in driver memory.
                ports[i].transmit(&mut Domain::new(dma, i), now_ps, &mut wires[i].sink);
                continue;
            }
            batch.clear();
            batch.loopback = ports[i].loops_back();
            let receiver = if batch.loopback { Some(i) } else { wires[i].cable };
            batch.limit(receiver.map_or(usize::MAX, |j| ports[j].lossless_room()));
            ports[i].transmit(&mut Domain::new(dma, i), now_ps, batch);
            if batch.is_empty() {
                continue;
            }
            if let Some(pcap) = wires[i].pcap.as_mut().filter(|p| p.direction != Captured::Rx) {
                for (frame, end_ps) in batch.iter() {
                    let _ = pcap.record(frame, end_ps);
                }
            }
            let into = if batch.loopback { Some(i) } else { wires[i].cable };
            let Some(j) = into else {
                let w = &mut wires[i];
                for (frame, end_ps) in batch.iter() {
                    w.sink.consume(frame, end_ps);
                    if let Some(tap) = w.tap.as_mut() {
                        // A full kernel queue drops the frame, as a link partner that cannot keep up.
                        let _ = tap.send(frame);
                    }
                }
                continue;
            };
            let w = &mut wires[j];
            let port = &mut ports[j];
            let dma = &mut Domain::new(dma, j);
            let mut run = port.rx_run_begin(dma);
            for (frame, end_ps) in batch.iter() {
                if !batch.loopback {
                    // Across the cable: paced by the other port's receive side, seen by its capture.
                    w.rx_clock.send(now_ps, frame.len());
                    if let Some(pcap) = w.pcap.as_mut().filter(|p| p.direction != Captured::Tx) {
                        let _ = pcap.record(frame, end_ps);
                    }
                }
                port.rx_run_frame(dma, &mut run, frame);
            }
            port.rx_run_end(dma, &mut run);
        }
        // More than one queue's share of frames (RSS) makes a long iteration: its time is
        // nicsim's own work, not the host holding the core, as for a slow-path pass.
        let mut long_delivery = false;
        for i in 0..ports.len() {
            let dma = &mut Domain::new(dma, i);
            ports[i].drain_fifo(dma);
            let buffered = ports[i].packet_buffer_bytes();
            if let Some(pause) = ports[i].flow.update(buffered, now_ps) {
                send_pause(ports, wires[i].cable, pause, now_ps);
            }
            let w = &mut wires[i];
            if ports[i].flow.partner_paused(now_ps) || !ports[i].link_up() {
                // Our XOFF holds the link partner, or there is no link: the generator sends
                // nothing meanwhile.
                w.generator.hold(now_ps);
                continue;
            }
            if let Some(tap) = w.tap.as_mut() {
                let pcap = w.pcap.as_mut().filter(|p| p.direction != Captured::Tx);
                receive_from_tap(&mut ports[i], dma, tap, &mut w.rx_clock, pcap, now_ps);
            }
            // Frames through injected faults take the general path, frame by frame, with no
            // per-queue count: one queue's share per iteration, as before RSS.
            let cap = if w.chaos.wire.is_some() { QUEUE_BURST } else { ports[i].rx_iteration_cap(&w.generator) };
            let allowed = w.generator.allowance(now_ps, cap);
            if allowed == 0 {
                continue;
            }
            long_delivery |= allowed > QUEUE_BURST;
            let port = &mut ports[i];
            let mut pcap = w.pcap.as_mut().filter(|p| p.direction != Captured::Tx);
            if w.chaos.wire.is_some() {
                if let Some(pause) = deliver_through_faults(
                    port,
                    dma,
                    (&mut w.generator, &mut w.rx_clock, &mut w.chaos),
                    pcap,
                    now_ps,
                    allowed,
                ) {
                    send_pause(ports, wires[i].cable, pause, now_ps);
                }
                continue;
            }
            let mut run = port.rx_run_begin(dma);
            let mut allowed = allowed;
            if pcap.is_none() {
                allowed -=
                    port.rx_run_generated_burst(dma, &mut run, &mut w.generator, &mut w.rx_clock, now_ps, allowed);
            }
            let mut xoff = None;
            for _ in 0..allowed {
                let Some(mut due) = w.generator.next_due(now_ps, &mut w.rx_clock) else { break };
                if let Some(p) = pcap.as_mut() {
                    let end_ps = due.end_ps;
                    let _ = p.record(due.frame(), end_ps);
                }
                if port.rx_run_generated(dma, &mut run, &mut due) {
                    break;
                }
                // Frames wait in the packet buffer only when the ring is full; the XOFF goes
                // out as the buffer reaches its high water mark, not an iteration later.
                let buffered = port.packet_buffer_bytes();
                if port.flow.above_high(buffered) {
                    xoff = port.flow.update(buffered, now_ps);
                    if port.flow.partner_paused(now_ps) {
                        break;
                    }
                }
            }
            port.rx_run_end(dma, &mut run);
            if let Some(pause) = xoff {
                send_pause(ports, wires[i].cable, pause, now_ps);
            }
        }
        for p in ports.iter_mut() {
            p.publish_rx_head();
            p.watch_rx_tails(now_ps);
        }
        if long_delivery {
            self.own_work_ps = self.now_ps().saturating_sub(now_ps);
        }
    }

    /// Records a doorbell interval from `start_ns` to `end_ns` that came late.
    #[cold]
    fn note_late_doorbell(&mut self, start_ns: u64, end_ns: u64) {
        self.late_count += 1;
        self.late_recent.push((start_ns, end_ns));
        // The slow path's own time in the interval is nicsim's, not the host's.
        let start_ns = start_ns + self.own_work_ps / 1000;
        if end_ns.saturating_sub(start_ns) >= ENGINE_STALL_NS {
            self.engine_stalls.push((start_ns, end_ns));
        }
    }

    /// Records a slow-path pass from `start_ns` to `end_ns` while queues run.
    fn note_slow_pass(&mut self, start_ns: u64, end_ns: u64) {
        self.slow_path.record(end_ns - start_ns);
        if end_ns - start_ns >= ENGINE_STALL_NS {
            self.long_slow_passes.push((start_ns, end_ns));
        }
    }

    /// The slow path: register scan, statistics, housekeeping, hostile write-backs.
    pub fn scan(&mut self) {
        self.write_back_hostile(self.now_ps());
        for p in self.ports.iter_mut() {
            p.scan();
            p.publish_counters();
        }
        let resets = self.ports.iter().map(|p| p.resets).sum::<u64>();
        if resets != self.resets_checked {
            self.resets_checked = resets;
            // A driver resets a function as it takes it: is another process mapping it too?
            let mappers = self.dma.bar_mappers();
            for (p, pids) in self.ports.iter_mut().zip(mappers) {
                p.warn_if_shared(pids);
            }
        }
        let generation = self.dma.generation();
        let enables = self.ports.iter().map(|p| p.queue_enables).sum::<u64>();
        if enables != self.enables_checked {
            // A queue just started: on memory its driver still maps, or it is stopped below.
            self.enables_checked = enables;
            self.dma.forget_released();
        }
        self.dma.maintain();
        if self.last_orphan_look.elapsed() >= Duration::from_secs(1) {
            self.last_orphan_look = Instant::now();
            self.release_orphan_containers();
        }
        if self.dma.generation() != generation {
            for p in self.ports.iter_mut() {
                // What the driver wrote before it let its memory go counts first: a queue it
                // disabled (its store is in the BAR) is not one it left enabled, however
                // little of the BAR the last sweeps covered.
                p.scan_all();
                p.stop_queues_on_released_memory(&self.dma);
            }
        }
    }

    fn busy(&self) -> bool {
        self.ports.iter().any(|p| p.busy()) || self.wires.iter().any(|w| w.generator.active())
    }

    /// Runs until `stop` is set, answering `commands` from the slow path.
    pub fn run(&mut self, commands: &Receiver<Command>, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let mut now = self.now_ps();
            if now >= self.next_scan_ps {
                self.scan();
                if !self.busy() {
                    // Nothing moves while idle: the counters are up to date now.
                    self.clock_ps = now;
                }
                while let Ok(cmd) = commands.try_recv() {
                    let answer = match cmd.request {
                        Request::Stats => Answer::Stats(Box::new(self.stats_draft())),
                        request => Answer::Reply(self.handle(request, now)),
                    };
                    let _ = cmd.reply.send(answer);
                }
                // The iteration starts after the slow path, whose time the next doorbell
                // interval holds: nicsim's own, not the host's.
                let after = self.now_ps();
                self.own_work_ps += after.saturating_sub(now);
                self.next_scan_ps = now + SCAN_PERIOD_PS;
                if self.last_doorbell_ps != 0 {
                    self.note_slow_pass(now / 1000, after / 1000);
                }
                if !self.busy() {
                    // Nothing enabled: poll registers at 10 kHz without burning the core.
                    std::thread::sleep(Duration::from_micros(100));
                    self.last_doorbell_ps = 0;
                    continue;
                }
                now = after;
            }
            self.step(now);
        }
        for w in self.wires.iter_mut() {
            if let Some(p) = w.pcap.as_mut() {
                let _ = p.flush();
            }
        }
    }

    /// What [`Request::Info`] answers: the server's paths and ports.
    pub fn describe(&mut self, info: Info) {
        self.info = Some(info);
    }

    fn port_index(&self, port: usize) -> Result<usize, String> {
        if port < self.ports.len() {
            Ok(port)
        } else {
            Err(format!("no port {port}: this nicsim has ports 0..{}", self.ports.len()))
        }
    }

    /// Answers one control request.
    pub fn handle(&mut self, request: Request, now_ps: u64) -> Result<Reply, String> {
        match request {
            Request::Info => {
                self.info.clone().map(Reply::Info).ok_or_else(|| "this engine runs without a server".into())
            }
            Request::Start { port, spec } => {
                let i = self.port_index(port)?;
                spec.validate(self.gbps)?;
                let mac = self.ports[i].mac();
                self.wires[i].generator.start(spec, mac, self.gbps, now_ps);
                Ok(Reply::Done(Done {}))
            }
            Request::Stop { port } => {
                let i = self.port_index(port)?;
                self.wires[i].generator.stop();
                Ok(Reply::Stopped(Stopped { generated: self.wires[i].generator.sent }))
            }
            Request::SetRate { port, rate_pps } => {
                let i = self.port_index(port)?;
                if let Some(r) = rate_pps {
                    crate::wire::check_rate(r, self.wires[i].generator.spec().size, self.gbps)?;
                }
                self.wires[i].generator.set_rate(rate_pps, self.gbps);
                Ok(Reply::Done(Done {}))
            }
            Request::Stats => Ok(Reply::Stats(Box::new(self.stats()))),
            Request::Lint => {
                let all: Vec<LintWarning> = self.ports.iter().flat_map(|p| p.lint.entries().to_vec()).collect();
                Ok(Reply::Lint(all))
            }
            Request::ResetCounters => {
                for (p, w) in self.ports.iter_mut().zip(self.wires.iter_mut()) {
                    p.reset_counters();
                    w.sink.reset();
                    w.chaos.injected = Default::default();
                    w.generator.reset_counters();
                }
                self.doorbell_gaps = LatencyHistogram::new();
                self.slow_path = LatencyHistogram::new();
                self.long_slow_passes.clear();
                self.late_count = 0;
                self.late_recent.clear();
                self.engine_stalls.clear();
                Ok(Reply::Done(Done {}))
            }
            Request::Pcap { port, path, direction, count } => {
                let i = self.port_index(port)?;
                let w = PcapWriter::create(std::path::Path::new(&path), direction, count, self.epoch_wall_ns)
                    .map_err(|e| format!("cannot create {path}: {e}"))?;
                self.wires[i].pcap = Some(w);
                Ok(Reply::Done(Done {}))
            }
            Request::PcapStop { port } => {
                let i = self.port_index(port)?;
                match self.wires[i].pcap.take() {
                    Some(mut p) => {
                        p.flush().map_err(|e| e.to_string())?;
                        Ok(Reply::CaptureEnd(CaptureEnd { written: p.written }))
                    }
                    None => Err(format!("port {port} has no capture running")),
                }
            }
            Request::PauseTx { port, paused } => {
                let i = self.port_index(port)?;
                self.ports[i].tx_paused = paused;
                Ok(Reply::Done(Done {}))
            }
            Request::Link { port, up } => {
                let i = self.port_index(port)?;
                self.ports[i].set_cable(up);
                if let Some(j) = self.wires[i].cable {
                    self.ports[j].set_cable(up);
                }
                Ok(Reply::Done(Done {}))
            }
            Request::WriteRegister { port, offset, value } => {
                let i = self.port_index(port)?;
                self.ports[i].write_register_now(offset, value)?;
                Ok(Reply::Done(Done {}))
            }
            Request::Remove { port } => {
                let i = self.port_index(port)?;
                self.wires[i].generator.stop();
                self.ports[i].remove();
                Ok(Reply::Done(Done {}))
            }
            Request::Fault { port, fault } => {
                let i = self.port_index(port)?;
                fault.validate()?;
                self.inject(i, fault, now_ps);
                Ok(Reply::Done(Done {}))
            }
            Request::Iommu { op } => {
                let released = match &op {
                    IommuOp::Release { container } => {
                        self.dma.iommu().map(|iommu| iommu.ports_of(*container)).unwrap_or_default()
                    }
                    _ => Vec::new(),
                };
                let bytes = self.dma.iommu_op(&op)?;
                // vfio-pci resets a function its last user let go.
                for i in released {
                    self.ports[i].reset();
                }
                // A map only adds what a function reaches: DPDK makes hundreds at start.
                if !matches!(op, IommuOp::Map { .. }) {
                    self.stop_queues_outside_domains();
                }
                Ok(Reply::IommuDone(IommuDone { bytes }))
            }
            Request::ResetFunction { port } => {
                let i = self.port_index(port)?;
                self.ports[i].reset();
                Ok(Reply::Done(Done {}))
            }
            Request::Shutdown => Ok(Reply::Done(Done {})),
        }
    }

    /// After a change of the IOMMU's domains: every queue whose ring its function no longer
    /// reaches stops, as a queue on released memory does.
    fn stop_queues_outside_domains(&mut self) {
        for p in self.ports.iter_mut() {
            p.scan_all();
            p.stop_queues_on_released_memory(&self.dma);
        }
    }

    /// Releases the containers of processes that ended without their `nicsim exec` telling
    /// (it was killed too): their mappings go and their functions are reset.
    fn release_orphan_containers(&mut self) {
        let orphans = self.dma.iommu().map(|iommu| iommu.orphans()).unwrap_or_default();
        for container in orphans {
            let _ = self.handle(Request::Iommu { op: IommuOp::Release { container } }, self.clock_ps);
        }
    }

    /// Starts fault `fault` on port `i` (see [`crate::chaos`]).
    fn inject(&mut self, i: usize, fault: Fault, now_ps: u64) {
        eprintln!("nicsim: fault: port {i}: {fault:?}");
        let chaos = &mut self.wires[i].chaos;
        match fault {
            Fault::WriteBack { rate, count, seed } => chaos.start_write_backs(rate, count, seed, now_ps),
            Fault::Wire { what, probability, count, seed } => chaos.start_wire(what, probability, count, seed, now_ps),
            Fault::Stall { ms } => {
                chaos.injected.stalls += 1;
                chaos.log(now_ps, format!("stall for {ms} ms"));
                self.ports[i].stall_until(now_ps + ms * 1_000_000_000);
            }
            Fault::Reset => {
                chaos.injected.resets += 1;
                chaos.log(now_ps, "surprise reset".into());
                self.ports[i].reset();
            }
            Fault::Remove => {
                chaos.injected.removals += 1;
                chaos.log(now_ps, "surprise removal".into());
                self.wires[i].generator.stop();
                self.ports[i].remove();
            }
            Fault::Dma { count, seed } => {
                chaos.log(now_ps, format!("{count} DMA accesses outside the driver's mappings"));
                hostile_dma(&mut self.ports[i], &self.dma, count, seed);
            }
            Fault::Off => {
                if let Some(frame) = chaos.off(now_ps) {
                    self.ports[i].receive(&mut Domain::new(&mut self.dma, i), &frame);
                }
            }
        }
    }

    /// The hostile write-backs due now, on every port in that mode.
    fn write_back_hostile(&mut self, now_ps: u64) {
        /// At most this many per port and slow-path pass: an engine that was off its core
        /// catches up over several passes instead of stalling its ports.
        const MAX_PER_PASS: u64 = 4096;
        for i in 0..self.ports.len() {
            let chaos = &mut self.wires[i].chaos;
            let Some(mode) = chaos.write_back.as_mut() else { continue };
            let due = mode.due(now_ps, MAX_PER_PASS);
            let dma = &mut Domain::new(&mut self.dma, i);
            let mut done = 0;
            for _ in 0..due {
                match self.ports[i].hostile_write_back(dma, &mut mode.rng) {
                    Some(HostileWrite::RxDescriptor) => chaos.injected.rx_write_backs += 1,
                    Some(HostileWrite::Head) => chaos.injected.head_write_backs += 1,
                    Some(HostileWrite::TxDescriptor) => chaos.injected.tx_write_backs += 1,
                    Some(HostileWrite::UsedElement) => chaos.injected.used_write_backs += 1,
                    // No ring to write into: nothing owed is lost, the mode waits for one.
                    None => break,
                }
                done += 1;
            }
            chaos.wrote_back(done, now_ps);
        }
    }
}

/// Delivers up to `allowed` frames of the port's generator to `port` through its wire faults
/// ([`Chaos::arrive`]), frame by frame on the general receive path. Returns the XOFF the
/// port sends meanwhile, if any.
fn deliver_through_faults<D: DmaSpace>(
    port: &mut Port,
    dma: &mut D,
    (generator, rx_clock, chaos): (&mut Generator, &mut WireClock, &mut Chaos),
    mut pcap: Option<&mut PcapWriter>,
    now_ps: u64,
    allowed: usize,
) -> Option<Pause> {
    let mut arrivals = Vec::new();
    let mut xoff = None;
    for _ in 0..allowed {
        let Some(mut due) = generator.next_due(now_ps, rx_clock) else { break };
        let end_ps = due.end_ps;
        chaos.arrive(due.frame(), now_ps, &mut arrivals);
        for a in arrivals.drain(..) {
            match a {
                Arrival::Frame(f) => {
                    if let Some(p) = pcap.as_mut() {
                        let _ = p.record(&f, end_ps);
                    }
                    port.receive(dma, &f);
                }
                Arrival::BadFcs(f) => port.receive_bad_fcs(&f),
            }
        }
        let buffered = port.packet_buffer_bytes();
        if port.flow.above_high(buffered) {
            xoff = port.flow.update(buffered, now_ps);
            if port.flow.partner_paused(now_ps) {
                break;
            }
        }
    }
    xoff
}

/// Delivers what the kernel sent on `tap` to `port`, at most [`TAP_BURST`] frames and no faster
/// than line rate, each padded to the 60 bytes a frame has on the wire (the kernel's ARP frames
/// have 42). Frames wait in the kernel while the wire is busy.
fn receive_from_tap<D: DmaSpace>(
    port: &mut Port,
    dma: &mut D,
    tap: &mut platform::tap::Tap,
    clock: &mut WireClock,
    mut pcap: Option<&mut PcapWriter>,
    now_ps: u64,
) {
    let mut frame = [0u8; 1522];
    for _ in 0..TAP_BURST {
        if !clock.ready(now_ps) {
            return;
        }
        let Some(n) = tap.receive(&mut frame) else { return };
        let len = n.max(crate::wire::MIN_FRAME);
        frame[n..len].fill(0);
        let end_ps = clock.send(now_ps, len);
        if let Some(p) = pcap.as_mut() {
            let _ = p.record(&frame[..len], end_ps);
        }
        port.receive(dma, &frame[..len]);
    }
}

/// Delivers a PAUSE frame a port sends on its wire: the generator feeding the port learns of
/// it through [`crate::flow_control::FlowControl::partner_paused`]; a port at the other end of
/// a `cable` receives it as a PAUSE frame.
fn send_pause(ports: &mut [Port], cable: Option<usize>, pause: Pause, now_ps: u64) {
    if let Some(j) = cable {
        ports[j].flow.receive(pause, now_ps);
    }
}

/// Spawns the engine on its own thread (pinned to `cpu` if given).
pub fn spawn<D: DmaSpace + Send + 'static>(
    mut engine: Engine<D>,
    cpu: Option<usize>,
    commands: Receiver<Command>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Engine<D>> {
    std::thread::Builder::new()
        .name("nicsim-engine".into())
        .spawn(move || {
            if let Some(c) = cpu {
                if let Err(e) = platform::sched::pin_current_thread(c) {
                    eprintln!("nicsim: could not pin the engine to CPU {c}: {e}");
                }
            }
            engine.run(&commands, &stop);
            engine
        })
        .expect("spawning the engine thread")
}
