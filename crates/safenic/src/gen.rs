//! `safenic gen`: send generated UDP frames out of one port (flexible model's TX queue): an
//! 82599 function, or an AF_XDP port (`xdp:IFNAME[@QUEUE]`, the bench's source on veth).

use ixgbe::queues::{Batch, QueueMemory, Transmit, TxQueue};
use ixgbe::{DriverError, Port, PresenceCheck};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub struct Options {
    pub port: String,
    pub sysfs: PathBuf,
    pub rate: Option<f64>,
    pub size: usize,
    pub count: Option<u64>,
    pub seconds: Option<f64>,
}

const RING: usize = 256;
const BATCH: usize = 32;
/// How long `gen` waits at the end for the device to send what it queued.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// An Ethernet/IPv4/UDP frame of `size` bytes (without FCS) from 10.0.0.1:1024 to
/// 10.0.0.2:1024, IP checksum filled in, broadcast destination.
pub fn udp_frame(size: usize, src_mac: [u8; 6]) -> Vec<u8> {
    let mut f = vec![0u8; size];
    f[0..6].copy_from_slice(&[0xFF; 6]);
    f[6..12].copy_from_slice(&src_mac);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (size - 14) as u16;
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
    let sum: u32 = ip.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
    let folded = (sum & 0xFFFF) + (sum >> 16);
    let checksum = !((folded & 0xFFFF) + (folded >> 16)) as u16;
    ip[10..12].copy_from_slice(&checksum.to_be_bytes());
    f[34..36].copy_from_slice(&1024u16.to_be_bytes());
    f[36..38].copy_from_slice(&1024u16.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

pub fn run(o: &Options) -> Result<(), String> {
    if !(60..=1514).contains(&o.size) {
        return Err(format!("--size {}: frames are 60 to 1514 bytes (without FCS)", o.size));
    }
    if o.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        return Err("--rate must be a positive number of packets per second".into());
    }
    platform::signals::install_termination_flag().map_err(|e| format!("installing signal handlers: {e}"))?;
    if afxdp::PortSpec::names_one(&o.port) {
        return run_xdp(o);
    }
    let port = Port::open(&o.sysfs, &o.port).map_err(|e| e.to_string())?;
    let dev = port.device();
    dev.init().map_err(|e| e.to_string())?;
    dev.wait_for_link(Duration::from_secs(10)).map_err(|e| e.to_string())?;
    let run = || -> Result<(u64, u64, Duration), DriverError> {
        let mut mem = QueueMemory::<RING>::allocate(2 * RING)?;
        let parts = mem.parts()?;
        let mut pool = parts.pool;
        let mut tx = TxQueue::<RING>::new(&dev, parts.tx)?;
        load_frame(&mut pool, &udp_frame(o.size, dev.mac())).map_err(DriverError::Invalid)?;
        let mut batch = Batch::<BATCH>::default();
        let start = Instant::now();
        let until = o.seconds.map(|s| start + Duration::from_secs_f64(s));
        let mut queued = 0u64;
        let mut presence = PresenceCheck::new();
        while o.count.is_none_or(|c| queued < c) && !platform::signals::terminate_requested() {
            let now = Instant::now();
            presence.check(now, &[&dev])?;
            if until.is_some_and(|u| now >= u) {
                break;
            }
            for _ in 0..allowed(o, start, now, queued) {
                let Some(b) = pool.take() else { break };
                if let Err(b) = batch.push(b) {
                    pool.give(b);
                }
            }
            queued += tx.tx_batch(&mut pool, &mut batch) as u64;
            batch.release(&mut pool);
        }
        // Finish what was started: the device must send everything queued before the memory
        // it reads goes away with this process.
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        while tx.unsent() > 0 && Instant::now() < deadline {
            presence.check(Instant::now(), &[&dev])?;
            std::thread::sleep(Duration::from_micros(50));
        }
        let unsent = tx.unsent() as u64;
        Ok((queued - unsent, unsent, start.elapsed()))
    };
    let (sent, unsent, took) = run().map_err(|e| e.to_string())?;
    say_sent(o, sent, took.as_secs_f64())?;
    if unsent > 0 {
        return Err(format!(
            "{unsent} packets were still queued {} s after the last one: the link partner is pausing {} or its link is down",
            DRAIN_TIMEOUT.as_secs(),
            o.port
        ));
    }
    Ok(())
}

/// Writes `frame` into every buffer of `pool`, once: they all carry it, so nothing is written
/// per packet.
fn load_frame(pool: &mut ixgbe::queues::BufferPool<'_>, frame: &[u8]) -> Result<(), String> {
    let length = ixgbe::PacketLength::new(frame.len()).ok_or("a frame longer than a buffer")?;
    let mut all: Vec<_> = std::iter::from_fn(|| pool.take()).collect();
    for b in all.iter_mut() {
        b.data().copy_from(0, frame);
        b.length = length;
    }
    all.into_iter().for_each(|b| pool.give(b));
    Ok(())
}

/// The line `gen` ends with.
fn say_sent(o: &Options, sent: u64, secs: f64) -> Result<(), String> {
    cli::outln!(
        "safenic gen {}: {sent} packets of {} bytes sent in {secs:.1} s ({:.3} Mpps)",
        o.port,
        o.size,
        sent as f64 / secs.max(1e-9) / 1e6
    )
    .map_err(|e| e.to_string())
}

/// The source address of the frames an AF_XDP port sends (locally administered).
const XDP_SOURCE_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];

/// How many packets may go now: never ahead of `rate` × elapsed, never past `count`, at most a
/// batch.
fn allowed(o: &Options, start: Instant, now: Instant, queued: u64) -> u64 {
    let paced = o.rate.map_or(u64::MAX, |r| (now.duration_since(start).as_secs_f64() * r) as u64 + 1);
    paced.min(o.count.unwrap_or(u64::MAX)).saturating_sub(queued).min(BATCH as u64)
}

/// `safenic gen xdp:IFNAME[@QUEUE]`: the same frames through an AF_XDP socket's transmit ring.
fn run_xdp(o: &Options) -> Result<(), String> {
    use ixgbe::memory::FramePools;
    let spec = afxdp::PortSpec::parse(&o.port)?;
    let e = |e: DriverError| e.to_string();
    // A pool to send from, and a small one for the receive queue the socket comes with.
    let mut frames = FramePools::allocate(&[4 * RING, BATCH]).map_err(e)?;
    let (umem, pools) = frames.parts().map_err(e)?;
    let [mut pool, mut unused]: [_; 2] = pools.try_into().map_err(|_| "two pools".to_string())?;
    let (port, (_rx, mut tx)) = afxdp::Port::open::<RING>(&spec, umem, afxdp::BindMode::Auto, &mut unused)?;
    load_frame(&mut pool, &udp_frame(o.size, XDP_SOURCE_MAC))?;
    let mut batch = Batch::<BATCH>::default();
    let start = Instant::now();
    let until = o.seconds.map(|s| start + Duration::from_secs_f64(s));
    let mut queued = 0u64;
    for round in 0u64.. {
        if o.count.is_some_and(|c| queued >= c) || platform::signals::terminate_requested() {
            break;
        }
        let now = Instant::now();
        if until.is_some_and(|u| now >= u) {
            break;
        }
        if round % 4096 == 0 {
            if let Some(why) = port.broken() {
                return Err(why);
            }
        }
        for _ in 0..allowed(o, start, now, queued) {
            let Some(b) = pool.take() else { break };
            if let Err(b) = batch.push(b) {
                pool.give(b);
            }
        }
        queued += tx.tx_batch(&mut pool, &mut batch) as u64;
        batch.release(&mut pool);
    }
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    while tx.in_flight() > 0 && Instant::now() < deadline {
        tx.idle(&mut pool);
        std::thread::sleep(Duration::from_micros(50));
    }
    let unsent = tx.in_flight() as u64;
    say_sent(o, queued - unsent, start.elapsed().as_secs_f64())?;
    if unsent > 0 {
        return Err(format!(
            "{unsent} packets were still queued {} s after the last one: {} did not send them",
            DRAIN_TIMEOUT.as_secs(),
            o.port
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_have_valid_ip_checksums_and_lengths() {
        let f = udp_frame(60, [2, 0, 0, 0, 0, 1]);
        assert_eq!(f.len(), 60);
        let sum: u32 = f[14..34].chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        let folded = (sum & 0xFFFF) + (sum >> 16);
        assert_eq!(folded, 0xFFFF, "header sums to all ones with its checksum");
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 46);
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 26);
    }
}
