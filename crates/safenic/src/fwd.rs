//! `safenic fwd`: forward both directions between two ports.

use crate::filter::Filter;
use crate::fwd_options::{stop_on_signals_and_pin, Options, BATCH, POOL, RING};
use crate::fwd_queues::{serve_on_cores, QueuePlan, Shared};
use crate::{MacRewrite, Mode};
use invariants::{with_len, BrandedLen, VolatilePtr};
use ixgbe::agent::{rewrite_macs, Agent, AgentMemory, ConstOutputs, Outputs};
use ixgbe::queues::{Batch, BufferPool, QueueMemory, QueueParts, Receive, RxQueue, Transmit, TxQueue};
use ixgbe::{Device, DriverError, PacketData, PacketLength, Port, PresenceCheck, Refused, RssQueues};
use std::time::{Duration, Instant};

/// Loop iterations between looks at the clock and the signal flag.
const CHECK_EVERY: usize = 1024;

/// The per-packet code, for `safenic-audit`: these loops (every instantiation) and every
/// function they call that is not inlined must contain no run-time check. The agents' `run`,
/// `rx_batch` and `tx_batch` are inlined into them; if one ever is not, the audit finds and
/// audits it as a callee. The audit reads both lists from this source (crates/audit's
/// registry); the driver itself only tests that they name its functions.
#[cfg_attr(not(test), allow(dead_code))]
pub const HOT_PATHS: &[&str] = &[
    "safenic::fwd::forward_restricted",
    "safenic::fwd::forward_const",
    "safenic::fwd::forward_flexible",
    "safenic::fwd_virtio::forward_virtio",
];

/// Calls out of the hot paths that the audit allows and does not follow, with the reason.
#[cfg_attr(not(test), allow(dead_code))]
pub const COLD_CALLS: &[(&str, &str)] = &[
    (
        "safenic::fwd::Meter::tick",
        "once every 1 024 loop iterations, not per packet: clock, signal flag, progress line",
    ),
    (
        "safenic::fwd::Meter::look_at_rings",
        "once per presence period (100 ms), not per packet: asks each ring whether it is stuck, through the two below",
    ),
    (
        "ixgbe::agent::Agent::desynchronised",
        "once per presence period (100 ms), not per packet: reads RDH and TDH to find a ring a hostile device stopped",
    ),
    (
        "ixgbe::queues::RxQueue::desynchronised",
        "once per presence period (100 ms), not per packet: reads RDH to find a ring a hostile device stopped",
    ),
    ("safenic::fwd_virtio::StopWhen::due", "once every 1 024 loop iterations, not per packet: clock and signal flag, and every 16th time the watched ports' status (virtio devices, AF_XDP interfaces)"),
    (
        "virtio::device::VirtioDevice::notify",
        "only for a device that asks to be notified (nicsim's does not): one write to a BAR's file per burst",
    ),
    (
        "platform::xdp::XdpSocket::wake_rx",
        "only when the kernel asks (need-wakeup on the fill ring) and nothing arrived: one system call",
    ),
    (
        "platform::xdp::XdpSocket::wake_tx",
        "only when the kernel asks (need-wakeup on the transmit ring; in copy mode once per burst): one system call, the kernel's send path",
    ),
];

/// Stop conditions (time, signal, a device gone) and the per-second throughput line.
pub struct Meter<'d> {
    start: Instant,
    last: Instant,
    last_total: u64,
    until: Option<Instant>,
    progress: bool,
    devices: [&'d Device<'d>; 2],
    presence: PresenceCheck,
    /// Why forwarding stopped, if a device went away or was reset.
    gone: Option<DriverError>,
    /// The loop stopped because a ring is stuck (see `Agent::desynchronised`): the model
    /// sets its queues up again and goes on.
    restart: bool,
    /// What the last look at the rings found stuck, per direction of each queue pair: the
    /// driver's position.
    suspect: Vec<Option<usize>>,
    /// IEEE 802.3x flow control and RSS, set up again with the devices at a restart.
    flow_control: bool,
    rss: Option<RssQueues>,
    link_timeout: Duration,
    /// With several forwarding threads: this one's number, and what they share.
    thread: usize,
    shared: Option<&'d Shared>,
}

/// What the forwarding loop does after a look at the meter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tick {
    Go,
    /// Go on once the rings have been checked: the devices were looked at just now.
    Check,
    Stop,
}

impl<'d> Meter<'d> {
    fn new(o: &Options, devices: [&'d Device<'d>; 2], rss: Option<RssQueues>) -> Meter<'d> {
        let (seconds, progress) = (o.seconds, o.progress);
        let now = Instant::now();
        Meter {
            start: now,
            last: now,
            last_total: 0,
            until: seconds.map(|s| now + Duration::from_secs_f64(s)),
            progress,
            devices,
            presence: PresenceCheck::new(),
            gone: None,
            restart: false,
            suspect: Vec::new(),
            flow_control: o.flow_control,
            rss,
            link_timeout: o.link_timeout,
            thread: 0,
            shared: None,
        }
    }

    /// The meter of forwarding thread `thread` of several, which share `shared`: the same
    /// end and devices; only the first prints progress, of every thread's counts.
    pub fn for_thread<'s>(&self, thread: usize, shared: &'s Shared) -> Meter<'s>
    where
        'd: 's,
    {
        Meter {
            start: self.start,
            last: self.last,
            last_total: 0,
            until: self.until,
            progress: self.progress && thread == 0,
            devices: self.devices,
            presence: PresenceCheck::new(),
            gone: None,
            restart: false,
            suspect: Vec::new(),
            flow_control: self.flow_control,
            rss: self.rss,
            link_timeout: self.link_timeout,
            thread,
            shared: Some(shared),
        }
    }

    /// Takes on what a thread's meter found: a device gone, a ring to restart.
    pub fn absorb(&mut self, thread: Meter<'_>) {
        self.restart |= thread.restart;
        if self.gone.is_none() {
            self.gone = thread.gone;
        }
    }

    /// Before the queues come back after a restart: both devices set up from scratch. A queue
    /// only disabled and enabled again is a toggle that a device which polls its registers
    /// (nicsim) does not see if it is held off the CPU meanwhile, and then it keeps its old
    /// ring position while the driver starts at 0. A reset is a handshake: CTRL.RST clears
    /// only once the device has done it [DS 4.6.3.2].
    fn bring_up_again(&self) -> Result<(), DriverError> {
        bring_up(self.devices, self.flow_control, self.rss, self.link_timeout)
    }

    /// Whether the loop stopped for a restart of the queues (and forgets it, with what the
    /// looks at the rings found).
    fn take_restart(&mut self) -> bool {
        self.suspect.clear();
        std::mem::take(&mut self.restart)
    }

    /// Whether to go on, given the packets forwarded so far in each direction. Every
    /// [`PresenceCheck::PERIOD`] it also checks that both devices are still there and were not
    /// reset under the driver, and asks the loop to check its rings.
    #[inline(never)]
    fn tick(&mut self, counts: [u64; 2]) -> Tick {
        if platform::signals::terminate_requested() || self.shared.is_some_and(|s| s.stopping()) {
            return Tick::Stop;
        }
        let counts = match self.shared {
            Some(s) => s.publish(self.thread, counts),
            None => counts,
        };
        let now = Instant::now();
        let looked = self.presence.due(now);
        if looked {
            if let Err(e) = self.devices.iter().try_for_each(|d| d.check_running()) {
                self.gone = Some(e);
                if let Some(s) = self.shared {
                    s.stop_all();
                }
                return Tick::Stop;
            }
        }
        if self.progress && now.duration_since(self.last) >= Duration::from_secs(1) {
            let total = counts[0] + counts[1];
            let mpps = (total - self.last_total) as f64 / now.duration_since(self.last).as_secs_f64() / 1e6;
            let printed = cli::outln!(
                "{:6.1} s  {mpps:7.3} Mpps  ({} in->out, {} out->in)",
                now.duration_since(self.start).as_secs_f64(),
                counts[0],
                counts[1]
            );
            if printed.is_err() {
                // Whoever read the progress (`| head -1`) has gone: stop as on SIGTERM, so
                // the queues are left as they would be then.
                return Tick::Stop;
            }
            self.last = now;
            self.last_total = total;
        }
        match (self.until.is_none_or(|u| now < u), looked) {
            (false, _) => Tick::Stop,
            (true, true) => Tick::Check,
            (true, false) => Tick::Go,
        }
    }

    /// After [`Tick::Check`], given where each ring is stuck (if it is), in the same order at
    /// every look: stops the loop for a restart of the queues if a ring was stuck at the same
    /// place at the last look too, a presence period ago. One look can be wrong for a moment
    /// (the device's head register lags the descriptors it wrote); a ring that has not moved
    /// for a period is not.
    #[inline(never)]
    fn look_at_rings<I: Iterator<Item = Option<usize>>>(&mut self, stuck: I) -> bool {
        let stuck: Vec<Option<usize>> = stuck.collect();
        let again = stuck.iter().zip(&self.suspect).any(|(now, before)| now.is_some() && now == before);
        self.suspect = stuck;
        self.restart = again;
        if again {
            if let Some(s) = self.shared {
                s.stop_all();
            }
        }
        !again
    }
}

/// What a run forwarded, and what the driver discarded itself.
#[derive(Default)]
pub struct Totals {
    pub forwarded: [u64; 2],
    /// Frames whose written-back length or flags the driver refused, by cause.
    pub refused: Refused,
    /// Frames received and then dropped because the TX ring was full (flexible model without
    /// flow control), or still waiting in a batch when the driver stopped.
    pub dropped: u64,
    /// Times the queues were set up again because a ring was stuck (see
    /// `Agent::desynchronised`).
    pub restarts: u64,
}

impl Totals {
    fn add(&mut self, forwarded: [u64; 2], refused: [Refused; 2]) {
        self.forwarded[0] += forwarded[0];
        self.forwarded[1] += forwarded[1];
        refused.into_iter().for_each(|r| self.refused.add(r));
    }
}

/// `safenic fwd` between two 82599 ports (crate::ports chooses by the ports' kinds).
pub fn run(o: &Options) -> Result<(), String> {
    if !(1..=64).contains(&o.outputs) {
        return Err(format!("--outputs {}: an agent has 1 to 64 outputs", o.outputs));
    }
    if o.outputs != 1 && o.mode != Mode::Restricted {
        return Err("--outputs applies to the restricted model only (const has 1, flexible has 1 queue)".into());
    }
    if o.filter.is_some() && (o.mode != Mode::Flexible || o.flow_control) {
        return Err(
            "--filter applies to the flexible model without --flow-control (it filters each received batch)".into()
        );
    }
    let plan = QueuePlan::of(o)?;
    // Before the devices: the process backend starts its helper now.
    let mut filter = o.filter.map(|port| Filter::new(port, BATCH)).transpose()?;
    stop_on_signals_and_pin(o)?;
    let port_a = Port::open(&o.sysfs, &o.input).map_err(|e| e.to_string())?;
    let port_b = Port::open(&o.sysfs, &o.output).map_err(|e| e.to_string())?;
    if port_a.address() == port_b.address() {
        return Err(format!("{} is both input and output: give two different ports", o.input));
    }
    let (a, b) = (port_a.device(), port_b.device());
    // One queue pair needs no RSS: every frame reaches queue 0 as before it existed.
    let rss = (plan.queues.get() > 1).then_some(plan.queues);
    bring_up([&a, &b], o.flow_control, rss, o.link_timeout).map_err(|e| e.to_string())?;
    let mut meter = Meter::new(o, [&a, &b], rss);
    let start = Instant::now();
    let rewrite = o.mac_rewrite == MacRewrite::Paper;
    let totals = match o.mode {
        Mode::Restricted => restricted(&a, &b, o.outputs, rewrite, &plan, &mut meter),
        Mode::Const => const_model(&a, &b, rewrite, &plan, &mut meter),
        Mode::Flexible => flexible(&a, &b, rewrite, o.flow_control, filter.as_mut(), &plan, &mut meter),
    };
    // A device that went away also fails the stopping of the queues: its error is the one.
    let gone = meter.gone.take();
    let totals = match (&gone, totals) {
        (Some(gone), Err(_)) => return Err(gone.to_string()),
        (_, totals) => totals.map_err(|e| e.to_string())?,
    };
    if let Some(f) = &filter {
        cli::outln!("{}", f.summary())?;
    }
    let secs = start.elapsed().as_secs_f64();
    let total = totals.forwarded[0] + totals.forwarded[1];
    cli::outln!(
        "safenic fwd {}: {} -> {} {} packets, {} -> {} {} packets, {:.1} s, {:.3} Mpps, {} malformed ({} too long, {} not end of packet), {} dropped, {} ring restarts",
        format!("{:?}", o.mode).to_lowercase(),
        o.input,
        o.output,
        totals.forwarded[0],
        o.output,
        o.input,
        totals.forwarded[1],
        secs,
        total as f64 / secs.max(1e-9) / 1e6,
        totals.refused.total(),
        totals.refused.too_long(),
        totals.refused.not_end_of_packet(),
        totals.dropped,
        totals.restarts
    )?;
    match gone {
        Some(e) => Err(e.to_string()),
        None => Ok(()),
    }
}

/// Sets both devices up from scratch: reset and configuration [DS 4.6.3], flow control and
/// RSS if asked, and the link.
fn bring_up(
    devices: [&Device<'_>; 2],
    flow_control: bool,
    rss: Option<RssQueues>,
    link_timeout: Duration,
) -> Result<(), DriverError> {
    for d in devices {
        d.init()?;
        if flow_control {
            d.enable_flow_control()?;
        }
        if let Some(queues) = rss {
            d.enable_rss(queues)?;
        }
    }
    devices.iter().try_for_each(|d| d.wait_for_link(link_timeout))
}

fn restricted(
    a: &Device<'_>,
    b: &Device<'_>,
    outputs: usize,
    rewrite: bool,
    plan: &QueuePlan,
    meter: &mut Meter,
) -> Result<Totals, DriverError> {
    let mut mems = plan
        .queues
        .all()
        .map(|_| Ok([AgentMemory::<RING>::allocate(outputs)?, AgentMemory::<RING>::allocate(outputs)?]))
        .collect::<Result<Vec<_>, DriverError>>()?;
    let mut totals = Totals::default();
    with_len(outputs, |outs| loop {
        if totals.restarts > 0 {
            meter.bring_up_again()?;
        }
        let mut pairs = Vec::with_capacity(mems.len());
        for (q, [mem_ab, mem_ba]) in plan.queues.all().zip(mems.iter_mut()) {
            let ab = Agent::<_, RING>::on(mem_ab, a, q, &outs.vec(|_| *b), outs)?;
            let ba = Agent::<_, RING>::on(mem_ba, b, q, &outs.vec(|_| *a), outs)?;
            pairs.push([ab, ba]);
        }
        let forwarded = if rewrite {
            serve_on_cores(plan, &mut pairs, meter, |p, m| forward_restricted::<true>(p, outs, m))?
        } else {
            serve_on_cores(plan, &mut pairs, meter, |p, m| forward_restricted::<false>(p, outs, m))?
        };
        totals.add(forwarded, [Refused::default(); 2]);
        pairs.iter().for_each(|[ab, ba]| totals.add([0, 0], [ab.refused, ba.refused]));
        drop(pairs);
        if !meter.take_restart() {
            return Ok(totals);
        }
        // A stuck ring: the agents go (their queues are disabled first) and come back on
        // the same memory, rings as at start, after both devices were reset.
        totals.restarts += 1;
    })
    .unwrap_or(Err(DriverError::Invalid("no outputs".into())))
}

/// The restricted model's loop: each packet goes to the next output in turn.
#[inline(never)]
pub fn forward_restricted<'a, 'id, const REWRITE: bool>(
    pairs: &mut [[Agent<'a, BrandedLen<'id>, RING>; 2]],
    outs: BrandedLen<'id>,
    meter: &mut Meter,
) -> [u64; 2] {
    forward_agents::<_, _, REWRITE, true>(pairs, outs, |o| outs.next_wrapping(o), meter)
}

/// Both directions of every queue pair through their agents until the meter says stop;
/// `next` picks the output of the packet after one sent to `o`. `APART`: through
/// [`Agent::run_apart`], not inlined.
#[inline(always)]
fn forward_agents<'a, O: Outputs, const N: usize, const REWRITE: bool, const APART: bool>(
    pairs: &mut [[Agent<'a, O, N>; 2]],
    outputs: O,
    next: impl Fn(O::Index) -> O::Index,
    meter: &mut Meter,
) -> [u64; 2] {
    let mut counts = [0u64; 2];
    let (mut out_ab, mut out_ba) = (outputs.first(), outputs.first());
    loop {
        for _ in 0..CHECK_EVERY {
            for [ab, ba] in pairs.iter_mut() {
                counts[0] += run_agent::<_, N, APART>(ab, |packet, len, lengths| {
                    forward_packet::<O, REWRITE>(packet, len, lengths, &mut out_ab, &next)
                }) as u64;
                counts[1] += run_agent::<_, N, APART>(ba, |packet, len, lengths| {
                    forward_packet::<O, REWRITE>(packet, len, lengths, &mut out_ba, &next)
                }) as u64;
            }
        }
        let go_on = match meter.tick(counts) {
            Tick::Go => true,
            Tick::Check => meter.look_at_rings(pairs.iter().flatten().map(|agent| agent.desynchronised())),
            Tick::Stop => false,
        };
        if !go_on {
            return counts;
        }
    }
}

/// One call of `agent`'s loop, through [`Agent::run_apart`] if `APART`.
#[inline(always)]
fn run_agent<'a, O: Outputs, const N: usize, const APART: bool>(
    agent: &mut Agent<'a, O, N>,
    handler: impl for<'p> FnMut(VolatilePtr<'p, PacketData>, PacketLength, &mut O::Array<PacketLength>),
) -> usize {
    if APART {
        agent.run_apart(handler)
    } else {
        agent.run(handler)
    }
}

/// The handler of both directions: rewrite the MACs if asked, send the packet to output `out`,
/// and move `out` on to the next output.
#[inline(always)]
fn forward_packet<O: Outputs, const REWRITE: bool>(
    packet: VolatilePtr<'_, PacketData>,
    len: PacketLength,
    lengths: &mut O::Array<PacketLength>,
    out: &mut O::Index,
    next: &impl Fn(O::Index) -> O::Index,
) {
    if REWRITE {
        rewrite_macs(packet);
    }
    lengths[*out] = len;
    *out = next(*out);
}

fn const_model(
    a: &Device<'_>,
    b: &Device<'_>,
    rewrite: bool,
    plan: &QueuePlan,
    meter: &mut Meter,
) -> Result<Totals, DriverError> {
    let one = ConstOutputs::<1>;
    let mut mems = plan
        .queues
        .all()
        .map(|_| Ok([AgentMemory::<RING>::allocate(1)?, AgentMemory::<RING>::allocate(1)?]))
        .collect::<Result<Vec<_>, DriverError>>()?;
    let mut totals = Totals::default();
    loop {
        if totals.restarts > 0 {
            meter.bring_up_again()?;
        }
        let mut pairs = Vec::with_capacity(mems.len());
        for (q, [mem_ab, mem_ba]) in plan.queues.all().zip(mems.iter_mut()) {
            let ab = Agent::<_, RING>::on(mem_ab, a, q, &one.array(|_| *b), one)?;
            let ba = Agent::<_, RING>::on(mem_ba, b, q, &one.array(|_| *a), one)?;
            pairs.push([ab, ba]);
        }
        let forwarded = if rewrite {
            serve_on_cores(plan, &mut pairs, meter, forward_const::<true>)?
        } else {
            serve_on_cores(plan, &mut pairs, meter, forward_const::<false>)?
        };
        totals.add(forwarded, [Refused::default(); 2]);
        pairs.iter().for_each(|[ab, ba]| totals.add([0, 0], [ab.refused, ba.refused]));
        drop(pairs);
        if !meter.take_restart() {
            return Ok(totals);
        }
        totals.restarts += 1;
    }
}

/// The const model's loop: one output per direction.
#[inline(never)]
pub fn forward_const<'a, const REWRITE: bool>(
    pairs: &mut [[Agent<'a, ConstOutputs<1>, RING>; 2]],
    meter: &mut Meter,
) -> [u64; 2] {
    forward_agents::<_, _, REWRITE, false>(pairs, ConstOutputs::<1>, |only| only, meter)
}

/// The queues and pools of one flexible queue pair. "Pool inversion": the RX queue of one
/// port and the TX queue of the other share a pool.
struct Lane<'a> {
    rx_a: RxQueue<'a, RING>,
    tx_b: TxQueue<'a, RING>,
    pool_ab: BufferPool<'a>,
    rx_b: RxQueue<'a, RING>,
    tx_a: TxQueue<'a, RING>,
    pool_ba: BufferPool<'a>,
}

impl Lane<'_> {
    /// Whatever the device wrote, every buffer is in exactly one place.
    fn check_conservation(&self) -> Result<(), DriverError> {
        for (pool, rx, tx) in [(&self.pool_ab, &self.rx_a, &self.tx_b), (&self.pool_ba, &self.rx_b, &self.tx_a)] {
            let counted = pool.available() + rx.held() + tx.held();
            if counted != pool.total() {
                return Err(DriverError::Invalid(format!(
                    "buffers not conserved: {counted} of {} found (a bug: please report it)",
                    pool.total()
                )));
            }
        }
        Ok(())
    }
}

/// Buffers per direction's pool with `queues` queue pairs: [`POOL`] shared out, and never
/// fewer than fill an RX ring, a TX ring and a batch.
fn pool_per_queue(queues: RssQueues) -> usize {
    (POOL / queues.get()).max(2 * RING + 2 * BATCH)
}

fn flexible(
    a: &Device<'_>,
    b: &Device<'_>,
    rewrite: bool,
    lossless: bool,
    mut filter: Option<&mut Filter>,
    plan: &QueuePlan,
    meter: &mut Meter,
) -> Result<Totals, DriverError> {
    let pool = pool_per_queue(plan.queues);
    let mut mems = plan
        .queues
        .all()
        .map(|_| Ok([QueueMemory::<RING>::allocate(pool)?, QueueMemory::<RING>::allocate(pool)?]))
        .collect::<Result<Vec<_>, DriverError>>()?;
    let mut totals = Totals::default();
    loop {
        if totals.restarts > 0 {
            meter.bring_up_again()?;
        }
        let mut lanes = Vec::with_capacity(mems.len());
        for (q, [mem_ab, mem_ba]) in plan.queues.all().zip(mems.iter_mut()) {
            let QueueParts { rx: rx_ring_ab, tx: tx_ring_ab, pool: mut pool_ab } = mem_ab.parts()?;
            let QueueParts { rx: rx_ring_ba, tx: tx_ring_ba, pool: mut pool_ba } = mem_ba.parts()?;
            let rx_a = RxQueue::<RING>::on(a, q, rx_ring_ab, &mut pool_ab)?;
            let rx_b = RxQueue::<RING>::on(b, q, rx_ring_ba, &mut pool_ba)?;
            let tx_b = TxQueue::<RING>::new(b, tx_ring_ab)?;
            let tx_a = TxQueue::<RING>::new(a, tx_ring_ba)?;
            lanes.push(Lane { rx_a, tx_b, pool_ab, rx_b, tx_a, pool_ba });
        }
        let mut pairs: Vec<[Direction; 2]> = lanes
            .iter_mut()
            .map(|l| {
                [
                    Direction::new(&mut l.rx_a, &mut l.tx_b, &mut l.pool_ab),
                    Direction::new(&mut l.rx_b, &mut l.tx_a, &mut l.pool_ba),
                ]
            })
            .collect();
        let forwarded = match (rewrite, lossless, filter.as_deref_mut(), pairs.first_mut()) {
            (_, _, Some(f), Some([ab, ba])) => forward_filtered(ab, ba, f, rewrite, meter),
            (true, false, ..) => serve_on_cores(plan, &mut pairs, meter, forward_flexible::<true, false>)?,
            (false, false, ..) => serve_on_cores(plan, &mut pairs, meter, forward_flexible::<false, false>)?,
            (true, true, ..) => serve_on_cores(plan, &mut pairs, meter, forward_flexible::<true, true>)?,
            (false, true, ..) => serve_on_cores(plan, &mut pairs, meter, forward_flexible::<false, true>)?,
        };
        totals.dropped += pairs.iter_mut().flatten().map(|d| d.stop()).sum::<u64>();
        drop(pairs);
        totals.add(forwarded, [Refused::default(); 2]);
        for lane in &lanes {
            totals.add([0, 0], [lane.rx_a.refused, lane.rx_b.refused]);
            lane.check_conservation()?;
        }
        drop(lanes);
        if !meter.take_restart() {
            return Ok(totals);
        }
        // A stuck ring: the queues go (disabled first) and come back on the same memory,
        // every buffer back in a fresh pool, after both devices were reset.
        totals.restarts += 1;
    }
}

/// One direction of the flexible forwarder.
pub struct Direction<'q, 'a> {
    rx: &'q mut RxQueue<'a, RING>,
    tx: &'q mut TxQueue<'a, RING>,
    pool: &'q mut ixgbe::queues::BufferPool<'a>,
    batch: Batch<'a, BATCH>,
    /// Frames received and dropped because the TX ring was full.
    dropped: u64,
}

impl<'q, 'a> Direction<'q, 'a> {
    fn new(
        rx: &'q mut RxQueue<'a, RING>,
        tx: &'q mut TxQueue<'a, RING>,
        pool: &'q mut ixgbe::queues::BufferPool<'a>,
    ) -> Self {
        Direction { rx, tx, pool, batch: Batch::default(), dropped: 0 }
    }

    /// One burst: receive into the batch's free room, rewrite what arrived, transmit. What did
    /// not fit into the TX ring is dropped (back to the pool, counted), DPDK's usual policy;
    /// with `LOSSLESS` it stays in the batch for the next burst and the driver receives only as
    /// much as the batch has room for. A full TX ring then backs up into the RX ring and the
    /// packet buffer, whose XOFF pauses the link partner: nothing is lost anywhere.
    #[inline(always)]
    fn burst<const REWRITE: bool, const LOSSLESS: bool>(&mut self) -> u64 {
        let waiting = if LOSSLESS { self.batch.len() } else { 0 };
        if self.rx.rx_batch(self.pool, &mut self.batch) == 0 && waiting == 0 {
            return 0;
        }
        if REWRITE {
            for b in self.batch.iter_mut().skip(waiting) {
                rewrite_macs(b.data());
            }
        }
        let sent = self.tx.tx_batch(self.pool, &mut self.batch);
        if !LOSSLESS {
            self.dropped += self.batch.len() as u64;
            self.batch.release(self.pool);
        }
        sent as u64
    }

    /// As `burst` (not lossless), with `filter` deciding which received frames go on.
    fn burst_filtered(&mut self, filter: &mut Filter, rewrite: bool) -> u64 {
        if self.rx.rx_batch(self.pool, &mut self.batch) == 0 {
            return 0;
        }
        filter.apply(&mut self.batch, self.pool, 0);
        if rewrite {
            for b in self.batch.iter_mut() {
                rewrite_macs(b.data());
            }
        }
        let sent = self.tx.tx_batch(self.pool, &mut self.batch);
        self.dropped += self.batch.len() as u64;
        self.batch.release(self.pool);
        sent as u64
    }

    /// Frames this direction dropped, counting any still waiting in its batch, which go
    /// back to the pool now that forwarding has stopped.
    fn stop(&mut self) -> u64 {
        self.dropped += self.batch.len() as u64;
        self.batch.release(self.pool);
        self.dropped
    }
}

/// The flexible model's loop.
#[inline(never)]
pub fn forward_flexible<const REWRITE: bool, const LOSSLESS: bool>(
    pairs: &mut [[Direction<'_, '_>; 2]],
    meter: &mut Meter,
) -> [u64; 2] {
    let mut counts = [0u64; 2];
    loop {
        for _ in 0..CHECK_EVERY {
            for [ab, ba] in pairs.iter_mut() {
                counts[0] += ab.burst::<REWRITE, LOSSLESS>();
                counts[1] += ba.burst::<REWRITE, LOSSLESS>();
            }
        }
        let go_on = match meter.tick(counts) {
            Tick::Go => true,
            Tick::Check => meter.look_at_rings(pairs.iter().flatten().map(|d| d.rx.desynchronised())),
            Tick::Stop => false,
        };
        if !go_on {
            return counts;
        }
    }
}

/// The flexible model's loop with a filter in an isolation domain, called once per burst: not
/// one of the audited hot paths (it crosses into C by design).
#[inline(never)]
fn forward_filtered(
    ab: &mut Direction<'_, '_>,
    ba: &mut Direction<'_, '_>,
    filter: &mut Filter,
    rewrite: bool,
    meter: &mut Meter,
) -> [u64; 2] {
    let mut counts = [0u64; 2];
    loop {
        for _ in 0..CHECK_EVERY {
            counts[0] += ab.burst_filtered(filter, rewrite);
            counts[1] += ba.burst_filtered(filter, rewrite);
        }
        let go_on = match meter.tick(counts) {
            Tick::Go => true,
            Tick::Check => meter.look_at_rings([ab.rx.desynchronised(), ba.rx.desynchronised()].into_iter()),
            Tick::Stop => false,
        };
        if !go_on {
            return counts;
        }
    }
}

#[cfg(test)]
mod registry_tests {
    use super::*;

    /// The name of a function as the audit sees it, without generic arguments anywhere in it
    /// (`Meter<'_>::tick` is `Meter::tick`).
    fn name_of<T>(_: T) -> String {
        let mut depth = 0;
        std::any::type_name::<T>()
            .chars()
            .filter(|&c| {
                depth += i32::from(c == '<');
                let keep = depth == 0;
                depth -= i32::from(c == '>');
                keep && c != '>'
            })
            .collect()
    }

    #[test]
    fn the_registered_hot_paths_and_cold_calls_name_real_functions() {
        let loops = [
            name_of(forward_restricted::<false>),
            name_of(forward_const::<false>),
            name_of(forward_flexible::<false, false>),
            name_of(
                crate::fwd_virtio::forward_virtio::<false, RxQueue<RING>, TxQueue<RING>, RxQueue<RING>, TxQueue<RING>>,
            ),
        ];
        assert_eq!(HOT_PATHS, loops.map(|n| n.trim_end_matches("::").to_string()));
        let cold = [
            name_of(Meter::tick),
            name_of(Meter::look_at_rings::<std::iter::Empty<Option<usize>>>),
            name_of(Agent::<ConstOutputs<1>, RING>::desynchronised),
            name_of(RxQueue::<RING>::desynchronised),
            name_of(crate::fwd_virtio::StopWhen::due),
            name_of(virtio::VirtioDevice::notify),
            name_of(platform::xdp::XdpSocket::wake_rx),
            name_of(platform::xdp::XdpSocket::wake_tx),
        ];
        assert_eq!(
            COLD_CALLS.iter().map(|c| c.0).collect::<Vec<_>>(),
            cold.map(|n| n.trim_end_matches("::").to_string())
        );
    }
}
