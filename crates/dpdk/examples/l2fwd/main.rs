//! DPDK's `examples/l2fwd` in safe Rust over `crates/dpdk`: forwards between pairs of ports,
//! rewriting the MAC addresses, with l2fwd's options and statistics screen (docs/dpdk.md).
//!
//! `l2fwd [EAL options] -- -p PORTMASK [-q NQ] [-T PERIOD] [--[no-]mac-updating]`

#![forbid(unsafe_code)]

mod args;
mod forward;
mod stats;

use dpdk::{cycles, cycles_per_second, Eal, Mempool, PortConfig};
use forward::{PortCounters, Route, BURST};
use std::process::ExitCode;

/// l2fwd's ring sizes and pool: 1024 descriptors each way, at least 8192 mbufs.
const DESCRIPTORS: u16 = 1024;
const MBUFS_MIN: u32 = 8192;
const MBUF_CACHE: u32 = 256;
/// How often a transmit buffer that is not full is sent anyway (l2fwd's BURST_TX_DRAIN_US).
const DRAIN_MICROSECONDS: u64 = 100;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("l2fwd: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let (eal, rest) = Eal::init(std::env::args()).map_err(|e| e.to_string())?;
    let options = args::parse(&rest)?;
    dpdk::stop_on_signals().map_err(|e| e.to_string())?;
    println!("MAC updating {}", if options.mac_updating { "enabled" } else { "disabled" });
    let probed = eal.ports();
    if let Some(p) = (0..32u16).find(|&p| options.portmask & (1 << p) != 0 && !probed.contains(&p)) {
        return Err(format!("portmask names port {p}, which DPDK did not probe: it has ports {probed:?}"));
    }
    let pairs = match &options.portmap {
        Some(map) => args::mapped(map, options.portmask, &probed)?,
        None => {
            let enabled: Vec<u16> = probed.iter().copied().filter(|&p| options.portmask & (1 << p) != 0).collect();
            if enabled.len() % 2 == 1 {
                println!("Notice: odd number of ports in portmask.");
            }
            args::pairs(&enabled)
        }
    };
    let enabled: Vec<u16> = pairs.iter().map(|&(src, _)| src).collect();
    // l2fwd's pool: for every port, both rings, a burst, and a cache per forwarding lcore.
    let lcores = enabled.len().div_ceil(options.queues_per_lcore) as u32;
    let per_port = 2 * DESCRIPTORS as u32 + BURST as u32 + lcores * MBUF_CACHE;
    let mbufs = MBUFS_MIN.max(probed.len() as u32 * per_port);
    let pool =
        Mempool::new(&eal, "mbuf_pool", mbufs, MBUF_CACHE, Mempool::DEFAULT_DATA_ROOM).map_err(|e| e.to_string())?;
    let mut ports = Vec::new();
    for &p in &enabled {
        let config = PortConfig::new(p)
            .descriptors(DESCRIPTORS, DESCRIPTORS)
            .promiscuous(options.promiscuous)
            .packet_types(false);
        ports.push(config.start(&pool).map_err(|e| format!("port {p}: {e}"))?);
    }
    check_links(&ports);
    for port in &ports {
        let m = port.mac();
        let mac: Vec<String> = m.iter().map(|b| format!("{b:02X}")).collect();
        println!("Port {}, MAC address: {}", port.id(), mac.join(":"));
    }
    let counters: Vec<PortCounters> = enabled.iter().map(|_| PortCounters::default()).collect();
    let forwarded = forward_until_stopped(&eal, &options, &ports, &pairs, &counters);
    let counted: Vec<(u16, &PortCounters)> = enabled.iter().copied().zip(&counters).collect();
    print!("{}", stats::screen(&counted, false));
    forwarded?;
    drop(ports);
    // Every mbuf is back once the ports are closed: the rings and buffers held none back.
    let in_use = pool.in_use();
    if in_use != 0 {
        return Err(format!("{in_use} mbufs did not come back to the pool"));
    }
    println!("Bye...");
    Ok(())
}

/// Runs the forwarding loops, the main lcore's with the statistics screen, until SIGINT or
/// SIGTERM.
fn forward_until_stopped(
    eal: &Eal,
    options: &args::Options,
    ports: &[dpdk::Port<'_>],
    pairs: &[(u16, u16)],
    counters: &[PortCounters],
) -> Result<(), String> {
    let index = |id: u16| ports.iter().position(|p| p.id() == id).expect("an enabled port");
    let mut rxs: Vec<_> =
        ports.iter().map(|p| p.queues()).map(|(rx, tx)| (rx.into_iter().next(), tx.into_iter().next())).collect();
    let mut tx_of: Vec<_> = rxs.iter_mut().map(|(_, tx)| tx.take()).collect();
    // Routes, grouped by lcore: `queues_per_lcore` receive ports each, in port order.
    let mut routes = Vec::new();
    for &(src, dst) in pairs {
        let (s, d) = (index(src), index(dst));
        let rx = rxs[s].0.take().expect("one receive queue per port");
        let tx = tx_of[d].take().expect("each port is the destination of one port");
        let macs = options.mac_updating.then(|| (destination_mac(dst), ports[d].mac()));
        routes.push(Route::new(rx, tx, macs, options.headers, (&counters[s], &counters[d])));
    }
    let mut lcores: Vec<Vec<Route<'_>>> = Vec::new();
    for route in routes {
        match lcores.last_mut() {
            Some(group) if group.len() < options.queues_per_lcore => group.push(route),
            _ => lcores.push(vec![route]),
        }
    }
    let lcore_ids: Vec<u32> = std::iter::once(eal.main_lcore()).chain(eal.workers().iter().map(|l| l.id())).collect();
    for (group, lcore) in lcores.iter().zip(&lcore_ids) {
        for route in group {
            println!("Lcore {lcore}: RX port {} TX port {}", route.rx.port(), route.tx.port());
        }
    }
    let workers = eal.workers();
    if lcores.len() > workers.len() + 1 {
        return Err(format!(
            "{} ports at -q {} need {} lcores, and EAL runs {}: give more lcores (-l) or a larger -q",
            pairs.len(),
            options.queues_per_lcore,
            lcores.len(),
            workers.len() + 1
        ));
    }
    let hz = cycles_per_second(eal);
    let drain = hz * DRAIN_MICROSECONDS / 1_000_000;
    let period = hz * options.stats_period;
    let counted: Vec<(u16, &PortCounters)> = ports.iter().map(|p| p.id()).zip(counters).collect();
    let mut groups = lcores.into_iter();
    let main_routes = groups.next().unwrap_or_default();
    eal.scope(|scope| {
        for (group, &lcore) in groups.zip(&workers) {
            let forward = move || {
                entering(lcore.id());
                forward_loop(group, drain, 0, &[]);
            };
            if let Err(e) = scope.launch(lcore, forward) {
                dpdk::request_stop(); // the lcores already launched end, and the scope with them
                return Err(format!("lcore {}: {e}", lcore.id()));
            }
        }
        entering(eal.main_lcore());
        forward_loop(main_routes, drain, period, &counted);
        Ok(())
    })
}

/// l2fwd's log line as an lcore starts forwarding (outside the loop the bench measures).
fn entering(lcore: u32) {
    eprintln!("L2FWD: entering main loop on lcore {lcore}");
}

/// One lcore's loop: l2fwd's `l2fwd_main_loop`.
fn forward_loop(mut routes: Vec<Route<'_>>, drain: u64, period: u64, screen: &[(u16, &PortCounters)]) {
    let (mut last_drain, mut last_screen) = (cycles(), cycles());
    while !dpdk::stop_requested() {
        let now = cycles();
        if now - last_drain > drain {
            routes.iter_mut().for_each(Route::flush);
            last_drain = now;
            if period > 0 && now - last_screen >= period {
                print!("{}", stats::screen(screen, true));
                last_screen = now;
            }
        }
        for route in routes.iter_mut() {
            route.poll();
        }
    }
    routes.iter_mut().for_each(Route::flush);
}

/// 02:00:00:00:00:xx, xx the destination port, as l2fwd writes it.
fn destination_mac(port: u16) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, port as u8]
}

/// Waits up to 9 s for every port's link, printing each one's state, as l2fwd does; a link
/// that stays down is reported, not an error.
fn check_links(ports: &[dpdk::Port<'_>]) {
    print!("\nChecking link status");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(9);
    while !ports.iter().all(|p| p.link_up()) && std::time::Instant::now() < deadline && !dpdk::stop_requested() {
        print!(".");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    println!("done");
    for p in ports {
        println!("Port {} Link {}", p.id(), if p.link_up() { "up" } else { "down" });
    }
}
