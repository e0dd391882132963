//! `safenic fwd`: forward both directions between two ports.

use crate::filter::Filter;
use crate::{MacRewrite, Mode};
use invariants::{with_len, BrandedLen, VolatilePtr};
use ixgbe::agent::{rewrite_macs, Agent, AgentMemory, ConstOutputs, Outputs};
use ixgbe::queues::{Batch, QueueMemory, QueueParts, Receive, RxQueue, Transmit, TxQueue};
use ixgbe::{Device, DriverError, PacketData, PacketLength, Port, PresenceCheck, Refused};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Descriptors per ring (a power of two; TinyNF uses 256).
pub const RING: usize = 512;
/// Flexible model: packets per batch.
pub const BATCH: usize = 32;
/// Flexible model: buffers per direction's pool.
pub const POOL: usize = 4096;
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
        "ixgbe::agent::Agent::desynchronised",
        "once per presence period (100 ms), not per packet: reads RDH and TDH to find a ring a hostile device stopped",
    ),
    (
        "ixgbe::queues::RxQueue::desynchronised",
        "once per presence period (100 ms), not per packet: reads RDH to find a ring a hostile device stopped",
    ),
    ("safenic::fwd_virtio::StopWhen::due", "once every 1 024 loop iterations, not per packet: clock and signal flag, and every 16th time the virtio devices' status"),
    (
        "virtio::device::VirtioDevice::notify",
        "only for a device that asks to be notified (nicsim's does not): one write to a BAR's file per burst",
    ),
];

pub struct Options {
    pub mode: Mode,
    pub input: String,
    pub output: String,
    pub sysfs: PathBuf,
    pub mac_rewrite: MacRewrite,
    pub outputs: usize,
    pub seconds: Option<f64>,
    pub progress: bool,
    pub cpu: Option<usize>,
    /// IEEE 802.3x flow control on both ports, and a lossless flexible model.
    pub flow_control: bool,
    /// How long an 82599 port's link may take to come up before the driver gives up.
    pub link_timeout: Duration,
    /// Flexible model: drop IPv4 UDP frames to this port, by a C filter in an isolation domain.
    pub filter: Option<u16>,
    /// A virtio-net port's interface; the driver's choice (modern where offered) if `None`.
    pub virtio_interface: Option<virtio::Interface>,
}

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
    /// What the last look at the rings found stuck, per direction: the driver's position.
    suspect: [Option<usize>; 2],
    /// IEEE 802.3x flow control, set up again with the devices at a restart.
    flow_control: bool,
    link_timeout: Duration,
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
    fn new(o: &Options, devices: [&'d Device<'d>; 2]) -> Meter<'d> {
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
            suspect: [None; 2],
            flow_control: o.flow_control,
            link_timeout: o.link_timeout,
        }
    }

    /// Before the queues come back after a restart: both devices set up from scratch. A queue
    /// only disabled and enabled again is a toggle that a device which polls its registers
    /// (nicsim) does not see if it is held off the CPU meanwhile, and then it keeps its old
    /// ring position while the driver starts at 0. A reset is a handshake: CTRL.RST clears
    /// only once the device has done it [DS 4.6.3.2].
    fn bring_up_again(&self) -> Result<(), DriverError> {
        bring_up(self.devices, self.flow_control, self.link_timeout)
    }

    /// Whether the loop stopped for a restart of the queues (and forgets it, with what the
    /// looks at the rings found).
    fn take_restart(&mut self) -> bool {
        self.suspect = [None; 2];
        std::mem::take(&mut self.restart)
    }

    /// Whether to go on, given the packets forwarded so far in each direction. Every
    /// [`PresenceCheck::PERIOD`] it also checks that both devices are still there and were not
    /// reset under the driver, and asks the loop to check its rings.
    #[inline(never)]
    fn tick(&mut self, counts: [u64; 2]) -> Tick {
        if platform::signals::terminate_requested() {
            return Tick::Stop;
        }
        let now = Instant::now();
        let looked = self.presence.due(now);
        if looked {
            if let Err(e) = self.devices.iter().try_for_each(|d| d.check_running()) {
                self.gone = Some(e);
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

    /// After [`Tick::Check`], given where each direction's ring is stuck (if it is): stops
    /// the loop for a restart of the queues if a ring was stuck at the same place at the last
    /// look too, a presence period ago. One look can be wrong for a moment (the device's head
    /// register lags the descriptors it wrote); a ring that has not moved for a period is not.
    #[inline(always)]
    fn go_on_unless(&mut self, stuck: [Option<usize>; 2]) -> bool {
        let again = stuck.iter().zip(&self.suspect).any(|(now, before)| now.is_some() && now == before);
        self.suspect = stuck;
        self.restart = again;
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

pub fn run(o: &Options) -> Result<(), String> {
    if crate::fwd_virtio::is_virtio(&o.sysfs, &o.input) || crate::fwd_virtio::is_virtio(&o.sysfs, &o.output) {
        return crate::fwd_virtio::run(o);
    }
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
    // Before the devices: the process backend starts its helper now.
    let mut filter = o.filter.map(|port| Filter::new(port, BATCH)).transpose()?;
    stop_on_signals_and_pin(o)?;
    let port_a = Port::open(&o.sysfs, &o.input).map_err(|e| e.to_string())?;
    let port_b = Port::open(&o.sysfs, &o.output).map_err(|e| e.to_string())?;
    if port_a.address() == port_b.address() {
        return Err(format!("{} is both input and output: give two different ports", o.input));
    }
    let (a, b) = (port_a.device(), port_b.device());
    bring_up([&a, &b], o.flow_control, o.link_timeout).map_err(|e| e.to_string())?;
    let mut meter = Meter::new(o, [&a, &b]);
    let start = Instant::now();
    let rewrite = o.mac_rewrite == MacRewrite::Paper;
    let totals = match o.mode {
        Mode::Restricted => restricted(&a, &b, o.outputs, rewrite, &mut meter),
        Mode::Const => const_model(&a, &b, rewrite, &mut meter),
        Mode::Flexible => flexible(&a, &b, rewrite, o.flow_control, filter.as_mut(), &mut meter),
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

/// SIGINT/SIGTERM end forwarding, and the process runs on `--cpu` if given.
pub fn stop_on_signals_and_pin(o: &Options) -> Result<(), String> {
    platform::signals::install_termination_flag().map_err(|e| format!("installing signal handlers: {e}"))?;
    if let Some(cpu) = o.cpu {
        platform::sched::pin_current_thread(cpu).map_err(|e| format!("pinning to CPU {cpu}: {e}"))?;
    }
    Ok(())
}

/// Sets both devices up from scratch: reset and configuration [DS 4.6.3], flow control if
/// asked, and the link.
fn bring_up(devices: [&Device<'_>; 2], flow_control: bool, link_timeout: Duration) -> Result<(), DriverError> {
    for d in devices {
        d.init()?;
        if flow_control {
            d.enable_flow_control()?;
        }
    }
    devices.iter().try_for_each(|d| d.wait_for_link(link_timeout))
}

fn restricted(
    a: &Device<'_>,
    b: &Device<'_>,
    outputs: usize,
    rewrite: bool,
    meter: &mut Meter,
) -> Result<Totals, DriverError> {
    let mut mem_ab = AgentMemory::<RING>::allocate(outputs)?;
    let mut mem_ba = AgentMemory::<RING>::allocate(outputs)?;
    let mut totals = Totals::default();
    with_len(outputs, |outs| loop {
        if totals.restarts > 0 {
            meter.bring_up_again()?;
        }
        let mut ab = Agent::<_, RING>::new(&mut mem_ab, a, &outs.vec(|_| *b), outs)?;
        let mut ba = Agent::<_, RING>::new(&mut mem_ba, b, &outs.vec(|_| *a), outs)?;
        let forwarded = if rewrite {
            forward_restricted::<true>(&mut ab, &mut ba, outs, meter)
        } else {
            forward_restricted::<false>(&mut ab, &mut ba, outs, meter)
        };
        totals.add(forwarded, [ab.refused, ba.refused]);
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
    ab: &mut Agent<'a, BrandedLen<'id>, RING>,
    ba: &mut Agent<'a, BrandedLen<'id>, RING>,
    outs: BrandedLen<'id>,
    meter: &mut Meter,
) -> [u64; 2] {
    forward_agents::<_, _, REWRITE, true>(ab, ba, outs, |o| outs.next_wrapping(o), meter)
}

/// Both directions through two agents until the meter says stop; `next` picks the output of
/// the packet after one sent to `o`. `APART`: through [`Agent::run_apart`], not inlined.
#[inline(always)]
fn forward_agents<'a, O: Outputs, const N: usize, const REWRITE: bool, const APART: bool>(
    ab: &mut Agent<'a, O, N>,
    ba: &mut Agent<'a, O, N>,
    outputs: O,
    next: impl Fn(O::Index) -> O::Index,
    meter: &mut Meter,
) -> [u64; 2] {
    let mut counts = [0u64; 2];
    let (mut out_ab, mut out_ba) = (outputs.first(), outputs.first());
    loop {
        for _ in 0..CHECK_EVERY {
            counts[0] += run_agent::<_, N, APART>(ab, |packet, len, lengths| {
                forward_packet::<O, REWRITE>(packet, len, lengths, &mut out_ab, &next)
            }) as u64;
            counts[1] += run_agent::<_, N, APART>(ba, |packet, len, lengths| {
                forward_packet::<O, REWRITE>(packet, len, lengths, &mut out_ba, &next)
            }) as u64;
        }
        let go_on = match meter.tick(counts) {
            Tick::Go => true,
            Tick::Check => meter.go_on_unless([ab.desynchronised(), ba.desynchronised()]),
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

fn const_model(a: &Device<'_>, b: &Device<'_>, rewrite: bool, meter: &mut Meter) -> Result<Totals, DriverError> {
    let one = ConstOutputs::<1>;
    let mut mem_ab = AgentMemory::<RING>::allocate(1)?;
    let mut mem_ba = AgentMemory::<RING>::allocate(1)?;
    let mut totals = Totals::default();
    loop {
        if totals.restarts > 0 {
            meter.bring_up_again()?;
        }
        let mut ab = Agent::<_, RING>::new(&mut mem_ab, a, &one.array(|_| *b), one)?;
        let mut ba = Agent::<_, RING>::new(&mut mem_ba, b, &one.array(|_| *a), one)?;
        let forwarded = if rewrite {
            forward_const::<true>(&mut ab, &mut ba, meter)
        } else {
            forward_const::<false>(&mut ab, &mut ba, meter)
        };
        totals.add(forwarded, [ab.refused, ba.refused]);
        if !meter.take_restart() {
            return Ok(totals);
        }
        totals.restarts += 1;
    }
}

/// The const model's loop: one output per direction.
#[inline(never)]
pub fn forward_const<'a, const REWRITE: bool>(
    ab: &mut Agent<'a, ConstOutputs<1>, RING>,
    ba: &mut Agent<'a, ConstOutputs<1>, RING>,
    meter: &mut Meter,
) -> [u64; 2] {
    forward_agents::<_, _, REWRITE, false>(ab, ba, ConstOutputs::<1>, |only| only, meter)
}

fn flexible(
    a: &Device<'_>,
    b: &Device<'_>,
    rewrite: bool,
    lossless: bool,
    mut filter: Option<&mut Filter>,
    meter: &mut Meter,
) -> Result<Totals, DriverError> {
    // One memory block and pool per direction; "pool inversion": the RX queue of one port and
    // the TX queue of the other share a pool.
    let mut mem_ab = QueueMemory::<RING>::allocate(POOL)?;
    let mut mem_ba = QueueMemory::<RING>::allocate(POOL)?;
    let mut totals = Totals::default();
    loop {
        if totals.restarts > 0 {
            meter.bring_up_again()?;
        }
        let QueueParts { rx: rx_ring_ab, tx: tx_ring_ab, pool: mut pool_ab } = mem_ab.parts()?;
        let QueueParts { rx: rx_ring_ba, tx: tx_ring_ba, pool: mut pool_ba } = mem_ba.parts()?;
        let mut rx_a = RxQueue::<RING>::new(a, rx_ring_ab, &mut pool_ab)?;
        let mut rx_b = RxQueue::<RING>::new(b, rx_ring_ba, &mut pool_ba)?;
        let mut tx_b = TxQueue::<RING>::new(b, tx_ring_ab)?;
        let mut tx_a = TxQueue::<RING>::new(a, tx_ring_ba)?;
        let mut dir_ab = Direction::new(&mut rx_a, &mut tx_b, &mut pool_ab);
        let mut dir_ba = Direction::new(&mut rx_b, &mut tx_a, &mut pool_ba);
        let forwarded = match (rewrite, lossless, filter.as_deref_mut()) {
            (_, _, Some(f)) => forward_filtered(&mut dir_ab, &mut dir_ba, f, rewrite, meter),
            (true, false, None) => forward_flexible::<true, false>(&mut dir_ab, &mut dir_ba, meter),
            (false, false, None) => forward_flexible::<false, false>(&mut dir_ab, &mut dir_ba, meter),
            (true, true, None) => forward_flexible::<true, true>(&mut dir_ab, &mut dir_ba, meter),
            (false, true, None) => forward_flexible::<false, true>(&mut dir_ab, &mut dir_ba, meter),
        };
        totals.dropped += dir_ab.stop() + dir_ba.stop();
        totals.add(forwarded, [rx_a.refused, rx_b.refused]);
        // Whatever the device wrote, every buffer is in exactly one place.
        for (pool, rx, tx) in [(&pool_ab, &rx_a, &tx_b), (&pool_ba, &rx_b, &tx_a)] {
            let counted = pool.available() + rx.held() + tx.held();
            if counted != pool.total() {
                return Err(DriverError::Invalid(format!(
                    "buffers not conserved: {counted} of {} found (a bug: please report it)",
                    pool.total()
                )));
            }
        }
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
    ab: &mut Direction<'_, '_>,
    ba: &mut Direction<'_, '_>,
    meter: &mut Meter,
) -> [u64; 2] {
    let mut counts = [0u64; 2];
    loop {
        for _ in 0..CHECK_EVERY {
            counts[0] += ab.burst::<REWRITE, LOSSLESS>();
            counts[1] += ba.burst::<REWRITE, LOSSLESS>();
        }
        let go_on = match meter.tick(counts) {
            Tick::Go => true,
            Tick::Check => meter.go_on_unless([ab.rx.desynchronised(), ba.rx.desynchronised()]),
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
            Tick::Check => meter.go_on_unless([ab.rx.desynchronised(), ba.rx.desynchronised()]),
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
            name_of(Agent::<ConstOutputs<1>, RING>::desynchronised),
            name_of(RxQueue::<RING>::desynchronised),
            name_of(crate::fwd_virtio::StopWhen::due),
            name_of(virtio::VirtioDevice::notify),
        ];
        assert_eq!(
            COLD_CALLS.iter().map(|c| c.0).collect::<Vec<_>>(),
            cold.map(|n| n.trim_end_matches("::").to_string())
        );
    }
}
