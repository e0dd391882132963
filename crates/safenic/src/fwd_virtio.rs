//! `safenic fwd flexible` between two virtio-net ports (docs/virtio.md): the flexible model's
//! loop over `crates/virtio`'s queues, through the same `Receive`/`Transmit` API as the 82599's.
//! Lossless: what the transmit queue cannot take yet waits in the batch, and a virtio device
//! holds its link partner while it has no receive buffer, so nothing is dropped anywhere.

use crate::fwd::{Options, BATCH, POOL};
use crate::{MacRewrite, Mode};
use ixgbe::agent::rewrite_macs;
use ixgbe::queues::{Batch, BufferPool, Receive, Transmit};
use std::path::Path;
use std::time::Instant;
use virtio::queues::{RxQueue, TxQueue, VirtioMemory};
use virtio::VirtioDevice;

/// Entries per virtqueue: legacy queues have the device's size, 256 on nicsim and QEMU.
pub const QUEUE: usize = 256;
/// Loop iterations between looks at the clock and the signal flag.
const CHECK_EVERY: usize = 1024;

/// Whether `address` under `sysfs` is a virtio function (Red Hat's vendor ID).
pub fn is_virtio(sysfs: &Path, address: &str) -> bool {
    let Ok(address) = platform::pci::normalize_address(address) else { return false };
    std::fs::read_to_string(sysfs.join(address).join("vendor")).is_ok_and(|v| v.trim() == "0x1af4")
}

/// One direction: a receive queue, the transmit queue its packets go to, their pool.
pub struct VirtioDirection<'q, 'a> {
    rx: &'q mut RxQueue<'a, QUEUE>,
    tx: &'q mut TxQueue<'a, QUEUE>,
    pool: &'q mut BufferPool<'a>,
    batch: Batch<'a, BATCH>,
}

impl VirtioDirection<'_, '_> {
    /// Receives into the batch's free room, rewrites what arrived, transmits what the queue takes.
    #[inline(always)]
    fn burst<const REWRITE: bool>(&mut self) -> u64 {
        let waiting = self.batch.len();
        if self.rx.rx_batch(self.pool, &mut self.batch) == 0 && waiting == 0 {
            return 0;
        }
        if REWRITE {
            for b in self.batch.iter_mut().skip(waiting) {
                rewrite_macs(b.data());
            }
        }
        self.tx.tx_batch(self.pool, &mut self.batch) as u64
    }
}

/// When forwarding stops: a signal, or the time given with `--seconds`.
pub struct StopWhen {
    until: Option<Instant>,
}

impl StopWhen {
    /// Whether to stop now: the clock and the signal flag, once every [`CHECK_EVERY`] rounds.
    #[inline(never)]
    pub fn due(&self) -> bool {
        platform::signals::terminate_requested() || self.until.is_some_and(|u| Instant::now() >= u)
    }
}

/// The loop: both directions until `stop` is due, looked at every [`CHECK_EVERY`] rounds.
#[inline(never)]
pub fn forward_virtio<const REWRITE: bool>(
    ab: &mut VirtioDirection<'_, '_>,
    ba: &mut VirtioDirection<'_, '_>,
    stop: &StopWhen,
) -> [u64; 2] {
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

/// `safenic fwd` with virtio ports.
pub fn run(o: &Options) -> Result<(), String> {
    if o.mode != Mode::Flexible {
        return Err(format!(
            "the {} model is the 82599's (TinyNF's agents own their rings): use flexible on virtio ports",
            format!("{:?}", o.mode).to_lowercase()
        ));
    }
    if o.filter.is_some() {
        return Err("--filter is not available on virtio ports yet: forward without it".into());
    }
    let (input_virtio, output_virtio) = (is_virtio(&o.sysfs, &o.input), is_virtio(&o.sysfs, &o.output));
    if !(input_virtio && output_virtio) {
        return Err(
            "one port is an 82599 and the other a virtio-net function: safenic fwd forwards between two of a kind so far (the queue API mixes them: crates/virtio/tests/with_82599.rs)"
                .into(),
        );
    }
    platform::signals::install_termination_flag().map_err(|e| format!("installing signal handlers: {e}"))?;
    if let Some(cpu) = o.cpu {
        platform::sched::pin_current_thread(cpu).map_err(|e| format!("pinning to CPU {cpu}: {e}"))?;
    }
    let a = VirtioDevice::open(&o.sysfs, &o.input).map_err(|e| e.to_string())?;
    let b = VirtioDevice::open(&o.sysfs, &o.output).map_err(|e| e.to_string())?;
    if a.address() == b.address() {
        return Err(format!("{} is both input and output: give two different ports", o.input));
    }
    // One memory per direction: its receive queue's ring and pool, the other port's transmit
    // ring (pool inversion, as in the 82599's flexible model), and a control queue.
    let mut mem_ab = VirtioMemory::<QUEUE>::allocate(POOL).map_err(|e| e.to_string())?;
    let mut mem_ba = VirtioMemory::<QUEUE>::allocate(POOL).map_err(|e| e.to_string())?;
    let ab_parts = mem_ab.parts().map_err(|e| e.to_string())?;
    let ba_parts = mem_ba.parts().map_err(|e| e.to_string())?;
    let (mut pool_ab, mut pool_ba) = (ab_parts.pool, ba_parts.pool);
    let e = |e: virtio::DriverError| e.to_string();
    let mut rx_a = RxQueue::<QUEUE>::new(&a, ab_parts.rx, &mut pool_ab).map_err(e)?;
    let mut rx_b = RxQueue::<QUEUE>::new(&b, ba_parts.rx, &mut pool_ba).map_err(e)?;
    let mut tx_b = TxQueue::<QUEUE>::new(&b, ab_parts.tx).map_err(e)?;
    let mut tx_a = TxQueue::<QUEUE>::new(&a, ba_parts.tx).map_err(e)?;
    let _ctrl_a = a.start::<QUEUE>(ab_parts.ctrl).map_err(e)?;
    let _ctrl_b = b.start::<QUEUE>(ba_parts.ctrl).map_err(e)?;
    let mut ab = VirtioDirection { rx: &mut rx_a, tx: &mut tx_b, pool: &mut pool_ab, batch: Batch::default() };
    let mut ba = VirtioDirection { rx: &mut rx_b, tx: &mut tx_a, pool: &mut pool_ba, batch: Batch::default() };
    let start = Instant::now();
    let stop = StopWhen { until: o.seconds.map(|s| start + std::time::Duration::from_secs_f64(s)) };
    let counts = match o.mac_rewrite {
        MacRewrite::Paper => forward_virtio::<true>(&mut ab, &mut ba, &stop),
        MacRewrite::None => forward_virtio::<false>(&mut ab, &mut ba, &stop),
    };
    let waiting = (ab.batch.len() + ba.batch.len()) as u64;
    ab.batch.release(ab.pool);
    ba.batch.release(ba.pool);
    let secs = start.elapsed().as_secs_f64();
    let refused = rx_a.refused + rx_b.refused;
    cli::outln!(
        "safenic fwd flexible: {} -> {} {} packets, {} -> {} {} packets, {:.1} s, {:.3} Mpps, {} malformed, {} dropped (virtio)",
        o.input,
        o.output,
        counts[0],
        o.output,
        o.input,
        counts[1],
        secs,
        (counts[0] + counts[1]) as f64 / secs.max(1e-9) / 1e6,
        refused,
        waiting
    )?;
    Ok(())
}
