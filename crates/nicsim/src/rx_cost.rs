//! `nicsim bench-rx`: what nicsim's receive path costs per frame with RSS spreading flows over
//! 1 to 16 queues, in one process and without a driver, so that callgrind can count it
//! (`safenic bench-queues` does: `deliver` is what it counts). One port, its generator at line
//! rate with 1024 flows, every queue's ring given back after each engine iteration, as a
//! driver that keeps up would. Each iteration takes what the engine's would when it is behind
//! line rate: one [`crate::port::QUEUE_BURST`] per queue.

use crate::dma::FlatDmaSpace;
use crate::pciconfig::{PciConfig, CONFIG_LEN};
use crate::port::{Port, RxRuns, VERIFICATION_KEY};
use crate::regs::*;
use crate::wire::{Generator, TrafficSpec, WireClock};
use platform::MappedRegion;

/// Descriptors per ring, and where the flat DMA memory starts.
const RING: u32 = 512;
const DMA_BASE: u64 = 0x4000_0000;
/// Engine time per iteration and queue: about 30 minimum-size frames at 10 Gb/s, as for an
/// engine behind line rate, whose iteration lasts about as long as its frames take.
const STEP_PS: u64 = 2_000_000;
/// The generator's flows: 2^10, which the hash spreads exactly evenly over 2^k queues.
pub const FLOWS: u32 = 1024;

/// A port with `queues` RX queues on legacy rings in flat memory; with `rss` (and always when
/// `queues` > 1) RSS spreads frames over them as `Device::enable_rss` programs it.
fn port_with_queues(queues: u32, rss: bool) -> Result<(Port, FlatDmaSpace), String> {
    let map = |len| MappedRegion::anonymous(len).map_err(|e| format!("mapping {len} bytes: {e}"));
    let config = PciConfig::new(map(CONFIG_LEN)?, 0xF800_0000);
    config.region().write_u16(4, config.region().read_u16(4) | 0b110); // memory space, bus master
    let mut port = Port::new(0, map(BAR0_LEN)?, config, 0, 10.0);
    port.set_link_setup(std::time::Duration::ZERO);
    port.scan_all();
    let per_queue = RING as usize * (16 + 2048);
    let dma = FlatDmaSpace { region: map(per_queue * queues as usize)?, base: DMA_BASE };
    let w = |port: &mut Port, offset: u32, value: u32| port.write_register_now(offset, value);
    if rss || queues > 1 {
        for n in 0..10 {
            let k = &VERIFICATION_KEY[4 * n as usize..4 * n as usize + 4];
            w(&mut port, rssrk(n), u32::from_le_bytes([k[0], k[1], k[2], k[3]]))?;
        }
        for n in 0..32 {
            let e = |k: u32| ((4 * n + k) % queues) as u8;
            w(&mut port, reta(n), u32::from_le_bytes([e(0), e(1), e(2), e(3)]))?;
        }
        for n in 0..4 {
            // Queue q counts in QPRC(q) [DS 8.2.3.8.9].
            w(
                &mut port,
                rqsmr(n),
                u32::from_le_bytes([4 * n as u8, 4 * n as u8 + 1, 4 * n as u8 + 2, 4 * n as u8 + 3]),
            )?;
        }
        w(&mut port, RXCSUM, 1 << 13)?;
        w(&mut port, MRQC, 1 | 0x00F3_0000)?;
    }
    for q in 0..queues {
        let ring = DMA_BASE + (q as usize * per_queue) as u64;
        let buffers = ring + u64::from(RING) * 16;
        for i in 0..RING as usize {
            dma.region.write_u64(q as usize * per_queue + i * 16, buffers + i as u64 * 2048);
        }
        w(&mut port, rdbal(q), ring as u32)?;
        w(&mut port, rdbah(q), (ring >> 32) as u32)?;
        w(&mut port, rdlen(q), RING * 16)?;
        w(&mut port, srrctl(q), 2)?; // 2 KiB buffers, legacy descriptors
        w(&mut port, rxdctl(q), RXDCTL_ENABLE)?;
        w(&mut port, rdt(q), RING - 1)?;
    }
    w(&mut port, FCTRL, FCTRL_UPE | FCTRL_MPE | FCTRL_BAM)?;
    w(&mut port, RXCTRL, RXCTRL_RXEN)?;
    port.scan_all();
    Ok((port, dma))
}

/// One engine iteration's receive work: what callgrind counts.
#[inline(never)]
pub fn deliver(port: &mut Port, dma: &mut FlatDmaSpace, g: &mut Generator, wire: &mut WireClock, now_ps: u64) {
    let allowed = g.allowance(now_ps, port.rx_iteration_cap(g));
    let mut runs: RxRuns = port.rx_run_begin(dma);
    for _ in 0..allowed {
        let Some(mut due) = g.next_due(now_ps, wire) else { break };
        if port.rx_run_generated(dma, &mut runs, &mut due) {
            break;
        }
    }
    port.rx_run_end(dma, &mut runs);
}

/// A driver that keeps up: every descriptor written back goes back to the device.
#[inline(never)]
fn give_back(port: &mut Port, queues: u32) {
    port.publish_rx_head();
    for q in 0..queues {
        let head = port.rx_queue_state(q as usize).head;
        port.bar().write_u32(rdt(q) as usize, (head + RING - 1) % RING);
    }
    port.poll_doorbells();
}

/// Delivers `frames` generated frames to a port with `queues` queues (RSS on if `rss`);
/// returns how many reached a ring, and each queue's count.
pub fn run(queues: u32, rss: bool, frames: u64) -> Result<(u64, Vec<u64>), String> {
    if !(1..=16).contains(&queues) {
        return Err(format!("--queues {queues}: give 1 to 16"));
    }
    let (mut port, mut dma) = port_with_queues(queues, rss)?;
    let mut g = Generator::new(0);
    let spec = TrafficSpec { flows: FLOWS, count: Some(frames), ..TrafficSpec::default() };
    g.start(spec, port.mac(), 10.0, 0);
    let mut wire = WireClock::new(10.0);
    let mut now = 0;
    while g.active() {
        now += STEP_PS * u64::from(queues);
        deliver(&mut port, &mut dma, &mut g, &mut wire, now);
        give_back(&mut port, queues);
    }
    let per_queue: Vec<u64> = (0..queues as usize).map(|q| port.counters.qprc[q]).collect();
    Ok((port.counters.gprc, per_queue))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::QUEUE_BURST;

    #[test]
    fn every_frame_reaches_a_ring_and_rss_spreads_them() {
        let (got, per) = run(1, false, 5000).unwrap();
        assert_eq!((got, per), (5000, vec![5000]));
        let (got, per) = run(4, true, 4096).unwrap();
        assert_eq!(got, 4096);
        // 2^10 flows spread exactly evenly over 2^k queues (the hash is linear).
        assert_eq!(per, vec![1024; 4]);
    }

    /// A port with two queues whose RETA sends one hash in 128 to queue 1, a generator of
    /// 1024 flows, and one iteration with far more frames due than it may take.
    fn skewed() -> (Port, FlatDmaSpace, Generator, WireClock) {
        let (mut port, dma) = port_with_queues(2, true).unwrap();
        for n in 0..32 {
            port.write_register_now(reta(n), u32::from(n == 0)).unwrap();
        }
        let mut g = Generator::new(0);
        g.start(TrafficSpec { flows: FLOWS, count: Some(10_000), ..TrafficSpec::default() }, port.mac(), 10.0, 0);
        (port, dma, g, WireClock::new(10.0))
    }

    #[test]
    fn an_iteration_takes_one_share_per_queue_and_no_more_into_any_queue() {
        let (mut port, mut dma, mut g, mut wire) = skewed();
        assert_eq!(port.rx_iteration_cap(&g), 2 * QUEUE_BURST);
        // 20 µs of line rate are due: about 300 frames.
        deliver(&mut port, &mut dma, &mut g, &mut wire, 20_000_000);
        let per = [port.counters.qprc[0], port.counters.qprc[1]];
        // Queue 0 gets nearly every frame: the iteration ends at its share.
        assert_eq!(per[0], QUEUE_BURST as u64, "{per:?}");
        assert!(per[1] < QUEUE_BURST as u64, "{per:?}");
        // One flow keeps to one queue: one share.
        g.start(TrafficSpec { flows: 1, count: Some(10_000), ..TrafficSpec::default() }, port.mac(), 10.0, 0);
        assert_eq!(port.rx_iteration_cap(&g), QUEUE_BURST);
    }
}
