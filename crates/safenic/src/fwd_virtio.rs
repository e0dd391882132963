//! `safenic fwd flexible` when a port is a virtio-net function (docs/virtio.md): the flexible
//! model's loop over `crates/virtio`'s queues and, for an 82599 port, ixgbe's, through the one
//! `Receive`/`Transmit` API.
//! Lossless: what the transmit queue cannot take yet waits in the batch, and a virtio device
//! holds its link partner while it has no receive buffer, so nothing is dropped anywhere.

use crate::filter::Filter;
use crate::fwd_options::{stop_on_signals_and_pin, Options, BATCH, POOL, RING};
use crate::{MacRewrite, Mode};
use ixgbe::agent::rewrite_macs;
use ixgbe::queues::{Batch, Buffer, BufferPool, QueueMemory, QueueParts, Receive, Transmit};
use ixgbe::DriverError;
use std::cell::Cell;
use std::time::Instant;
use virtio::queues::{RxQueue, TxQueue, VirtioMemory};
use virtio::VirtioDevice;

/// Entries per virtqueue: legacy queues have the device's size, 256 on nicsim and QEMU.
pub const QUEUE: usize = 256;
/// Loop iterations between looks at the clock and the signal flag.
const CHECK_EVERY: usize = 1024;

/// One direction: a receive queue, the transmit queue its packets go to (of either kind of
/// device), their pool.
pub struct AnyDirection<'q, 'a, R, T> {
    rx: &'q mut R,
    tx: &'q mut T,
    pool: &'q mut BufferPool<'a>,
    batch: Batch<'a, BATCH>,
}

impl<'q, 'a, R: Receive<'a>, T: Transmit<'a>> AnyDirection<'q, 'a, R, T> {
    pub fn new(rx: &'q mut R, tx: &'q mut T, pool: &'q mut BufferPool<'a>) -> Self {
        AnyDirection { rx, tx, pool, batch: Batch::default() }
    }

    /// Receives into the batch's free room, rewrites what arrived, transmits what the queue takes.
    #[inline(always)]
    fn burst<const REWRITE: bool>(&mut self) -> u64 {
        let waiting = self.batch.len();
        if self.rx.rx_batch(self.pool, &mut self.batch) == 0 && waiting == 0 {
            self.tx.idle(self.pool);
            return 0;
        }
        if REWRITE {
            rewrite_all(self.batch.since(waiting));
        }
        self.tx.tx_batch(self.pool, &mut self.batch) as u64
    }

    /// As `burst`, with `filter` deciding which of the frames that arrived go on (those
    /// already waiting passed it before).
    fn burst_filtered(&mut self, filter: &mut Filter, rewrite: bool) -> u64 {
        let waiting = self.batch.len();
        if self.rx.rx_batch(self.pool, &mut self.batch) == 0 && waiting == 0 {
            self.tx.idle(self.pool);
            return 0;
        }
        filter.apply(&mut self.batch, self.pool, waiting);
        if rewrite {
            rewrite_all(self.batch.since(waiting));
        }
        self.tx.tx_batch(self.pool, &mut self.batch) as u64
    }

    /// Frames still waiting in the batch, which go back to the pool now that forwarding stopped.
    pub fn stop(&mut self) -> u64 {
        let waiting = self.batch.len() as u64;
        self.batch.release(self.pool);
        waiting
    }
}

/// The paper's MAC rewrite of each frame, in fours: a loop the compiler unrolls, one test per
/// four frames rather than per frame.
#[inline(always)]
fn rewrite_all(frames: &[Buffer<'_>]) {
    let mut fours = frames.chunks_exact(4);
    for four in &mut fours {
        four.iter().for_each(|b| rewrite_macs(b.data()));
    }
    fours.remainder().iter().for_each(|b| rewrite_macs(b.data()));
}

/// When forwarding stops: a signal, the time given with `--seconds`, or a watched port that
/// says it can no longer be used ([`VirtioDevice::broken`], `afxdp::Port::broken`): `watched`
/// says why, if one cannot.
pub struct StopWhen<'d> {
    until: Option<Instant>,
    watched: &'d dyn Fn() -> Option<String>,
    /// Looks at the clock and the signal flag so far; the devices are read every
    /// [`STATUS_EVERY`]th.
    looks: Cell<u32>,
    /// Why a watched device stopped forwarding.
    broken: Cell<Option<String>>,
}

/// Looks at the clock between two reads of the watched devices' status (a system call each):
/// about every 16 000 rounds of the loop.
const STATUS_EVERY: u32 = 16;

impl StopWhen<'_> {
    /// Whether to stop now: the clock and the signal flag, once every [`CHECK_EVERY`] rounds,
    /// and the watched devices' status every [`STATUS_EVERY`]th time.
    #[inline(never)]
    pub fn due(&self) -> bool {
        if platform::signals::terminate_requested() || self.until.is_some_and(|u| Instant::now() >= u) {
            return true;
        }
        let looks = self.looks.get().wrapping_add(1);
        self.looks.set(looks);
        if looks % STATUS_EVERY != 0 {
            return false;
        }
        let broken = (self.watched)();
        let stop = broken.is_some();
        self.broken.set(broken);
        stop
    }
}

/// The loop: both directions until `stop` is due, looked at every [`CHECK_EVERY`] rounds.
#[inline(never)]
pub fn forward_virtio<'a, const REWRITE: bool, RA, TB, RB, TA>(
    ab: &mut AnyDirection<'_, 'a, RA, TB>,
    ba: &mut AnyDirection<'_, 'a, RB, TA>,
    stop: &StopWhen,
) -> [u64; 2]
where
    RA: Receive<'a>,
    TB: Transmit<'a>,
    RB: Receive<'a>,
    TA: Transmit<'a>,
{
    let mut counts = [0u64; 2];
    loop {
        for _ in 0..CHECK_EVERY {
            counts[0] += ab.burst::<REWRITE>();
            counts[1] += ba.burst::<REWRITE>();
        }
        if stop.due() {
            return counts;
        }
    }
}

/// [`forward_virtio`] with a filter in an isolation domain, called once per burst of each
/// direction (`ab`, `ba`: a burst, returning what it forwarded): not one of the audited hot
/// paths (it crosses into C by design).
#[inline(never)]
fn forward_virtio_filtered(
    mut ab: impl FnMut(&mut Filter) -> u64,
    mut ba: impl FnMut(&mut Filter) -> u64,
    filter: &mut Filter,
    stop: &StopWhen,
) -> [u64; 2] {
    let mut counts = [0u64; 2];
    for round in 1usize.. {
        counts[0] += ab(filter);
        counts[1] += ba(filter);
        if round % CHECK_EVERY == 0 && stop.due() {
            break;
        }
    }
    counts
}

/// What a forwarding run did, for the summary line.
pub struct Outcome {
    pub counts: [u64; 2],
    /// Why a device stopped forwarding, if one did.
    pub broken: Option<String>,
    pub malformed: u64,
    pub dropped: u64,
}

impl Outcome {
    /// Prints the filter's line, if there is a filter, and the summary line (`kind`: the ports'
    /// kind, at its end), then ends with why a device stopped forwarding, if one did: after the
    /// summary, so that what was forwarded is not lost with the error.
    pub fn report(self, o: &Options, filter: Option<&Filter>, secs: f64, kind: &str) -> Result<(), String> {
        if let Some(f) = filter {
            cli::outln!("{}", f.summary())?;
        }
        let c = self.counts;
        cli::outln!(
            "safenic fwd flexible: {} -> {} {} packets, {} -> {} {} packets, {:.1} s, {:.3} Mpps, {} malformed, {} dropped ({kind})",
            o.input,
            o.output,
            c[0],
            o.output,
            o.input,
            c[1],
            secs,
            (c[0] + c[1]) as f64 / secs.max(1e-9) / 1e6,
            self.malformed,
            self.dropped
        )?;
        match self.broken {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }
}

/// Runs the loop over `ab` and `ba` with the rewrite `o` asks for, through `filter` if given,
/// until a signal, `--seconds`, or one of the `watched` devices says it can no longer be used
/// (then also why).
pub fn forward_both<'a, RA, TB, RB, TA>(
    o: &Options,
    filter: Option<&mut Filter>,
    watched: &dyn Fn() -> Option<String>,
    ab: &mut AnyDirection<'_, 'a, RA, TB>,
    ba: &mut AnyDirection<'_, 'a, RB, TA>,
) -> ([u64; 2], Option<String>)
where
    RA: Receive<'a>,
    TB: Transmit<'a>,
    RB: Receive<'a>,
    TA: Transmit<'a>,
{
    let until = o.seconds.map(|s| Instant::now() + std::time::Duration::from_secs_f64(s));
    let stop = StopWhen { until, watched, looks: Cell::new(0), broken: Cell::new(None) };
    let counts = match (o.mac_rewrite, filter) {
        (rewrite, Some(f)) => {
            let rewrite = rewrite == MacRewrite::Paper;
            forward_virtio_filtered(|f| ab.burst_filtered(f, rewrite), |f| ba.burst_filtered(f, rewrite), f, &stop)
        }
        (MacRewrite::Paper, None) => forward_virtio::<true, _, _, _, _>(ab, ba, &stop),
        (MacRewrite::None, None) => forward_virtio::<false, _, _, _, _>(ab, ba, &stop),
    };
    (counts, stop.broken.take())
}

/// Both ports virtio: one memory per direction holds its receive queue's ring and pool, the
/// other port's transmit ring (pool inversion, as in the 82599's flexible model) and a
/// control queue.
fn virtio_both(
    o: &Options,
    filter: Option<&mut Filter>,
    a: &VirtioDevice,
    b: &VirtioDevice,
) -> Result<Outcome, DriverError> {
    let mut mem_ab = VirtioMemory::<QUEUE>::allocate(POOL)?;
    let mut mem_ba = VirtioMemory::<QUEUE>::allocate(POOL)?;
    let (ab_parts, ba_parts) = (mem_ab.parts()?, mem_ba.parts()?);
    let (mut pool_ab, mut pool_ba) = (ab_parts.pool, ba_parts.pool);
    let mut rx_a = RxQueue::<QUEUE>::new(a, ab_parts.rx, &mut pool_ab)?;
    let mut rx_b = RxQueue::<QUEUE>::new(b, ba_parts.rx, &mut pool_ba)?;
    let mut tx_b = TxQueue::<QUEUE>::new(b, ab_parts.tx)?;
    let mut tx_a = TxQueue::<QUEUE>::new(a, ba_parts.tx)?;
    let _ctrl_a = a.start::<QUEUE>(ab_parts.ctrl)?;
    let _ctrl_b = b.start::<QUEUE>(ba_parts.ctrl)?;
    let mut ab = AnyDirection::new(&mut rx_a, &mut tx_b, &mut pool_ab);
    let mut ba = AnyDirection::new(&mut rx_b, &mut tx_a, &mut pool_ba);
    let (counts, broken) = forward_both(o, filter, &|| a.broken().or_else(|| b.broken()), &mut ab, &mut ba);
    let dropped = ab.stop() + ba.stop();
    Ok(Outcome { counts, broken, malformed: rx_a.refused + rx_b.refused, dropped })
}

/// An 82599 port and a virtio port, in either order: the 82599's memory holds its rings and
/// pool, the virtio port's its own; each receive queue's pool feeds the other port's transmit
/// queue. `virtio_is_input` says which port is `a` of the command line.
fn mixed(
    o: &Options,
    filter: Option<&mut Filter>,
    x: &ixgbe::Device<'_>,
    v: &VirtioDevice,
    virtio_is_input: bool,
) -> Result<Outcome, DriverError> {
    let mut mem_x = QueueMemory::<RING>::allocate(POOL)?;
    let mut mem_v = VirtioMemory::<QUEUE>::allocate(POOL)?;
    let QueueParts { rx: rx_ring_x, tx: tx_ring_x, pool: mut pool_x } = mem_x.parts()?;
    let v_parts = mem_v.parts()?;
    let mut pool_v = v_parts.pool;
    let mut rx_x = ixgbe::queues::RxQueue::<RING>::new(x, rx_ring_x, &mut pool_x)?;
    let mut tx_x = ixgbe::queues::TxQueue::<RING>::new(x, tx_ring_x)?;
    let mut rx_v = RxQueue::<QUEUE>::new(v, v_parts.rx, &mut pool_v)?;
    let mut tx_v = TxQueue::<QUEUE>::new(v, v_parts.tx)?;
    let _ctrl = v.start::<QUEUE>(v_parts.ctrl)?;
    let mut xv = AnyDirection::new(&mut rx_x, &mut tx_v, &mut pool_x);
    let mut vx = AnyDirection::new(&mut rx_v, &mut tx_x, &mut pool_v);
    let (counts, broken) = if virtio_is_input {
        forward_both(o, filter, &|| v.broken(), &mut vx, &mut xv)
    } else {
        forward_both(o, filter, &|| v.broken(), &mut xv, &mut vx)
    };
    let dropped = xv.stop() + vx.stop();
    Ok(Outcome { counts, broken, malformed: rx_x.refused.total() + rx_v.refused, dropped })
}

/// `safenic fwd` when a port is a virtio-net function: `virtio` says which of input and output
/// are (crate::ports tells the kinds apart).
pub fn run(o: &Options, virtio: [bool; 2]) -> Result<(), String> {
    if o.queues != 1 || o.cores.is_some() {
        return Err(
            "--queues and --cores are for 82599 ports (RSS): a virtio-net port has one queue pair here (no VIRTIO_NET_F_MQ)"
                .into(),
        );
    }
    if o.mode != Mode::Flexible {
        return Err(format!(
            "the {} model is the 82599's (TinyNF's agents own their rings): use flexible on virtio ports",
            format!("{:?}", o.mode).to_lowercase()
        ));
    }
    // Before the devices: the process backend starts its helper now.
    let mut filter = o.filter.map(|port| Filter::new(port, BATCH)).transpose()?;
    stop_on_signals_and_pin(o)?;
    let start = Instant::now();
    let [input_virtio, output_virtio] = virtio;
    let e = |e: DriverError| e.to_string();
    // Every function is opened before the first queue starts: an 82599 queue confines the process.
    let outcome = match (input_virtio, output_virtio) {
        (true, true) => {
            let a = VirtioDevice::open_with(&o.sysfs, &o.input, o.virtio_interface).map_err(e)?;
            let b = VirtioDevice::open_with(&o.sysfs, &o.output, o.virtio_interface).map_err(e)?;
            if a.address() == b.address() {
                return Err(format!("{} is both input and output: give two different ports", o.input));
            }
            virtio_both(o, filter.as_mut(), &a, &b).map_err(e)?
        }
        (virtio_is_input, _) => {
            let (x_address, v_address) = if virtio_is_input { (&o.output, &o.input) } else { (&o.input, &o.output) };
            let port = ixgbe::Port::open(&o.sysfs, x_address).map_err(e)?;
            let v = VirtioDevice::open_with(&o.sysfs, v_address, o.virtio_interface).map_err(e)?;
            let x = port.device();
            x.init().map_err(e)?;
            // Lossless on the 82599 side too: it holds its link partner while its ring is full.
            x.enable_flow_control().map_err(e)?;
            x.wait_for_link(o.link_timeout).map_err(e)?;
            mixed(o, filter.as_mut(), &x, &v, virtio_is_input).map_err(e)?
        }
    };
    outcome.report(o, filter.as_ref(), start.elapsed().as_secs_f64(), "virtio")
}
