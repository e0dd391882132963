//! What the device tests share: nicsim in this process, and the driver's ports on it.
#![allow(dead_code)] // each test binary uses a different part

use ixgbe::device::Port;
use nicsim::session::{Session, SessionOptions};
use std::time::Duration;

/// An in-process nicsim with two ports, in a scratch directory named after `test`.
pub fn nicsim(test: &str) -> Session {
    Session::start("ixgbe-test", test, &SessionOptions::default()).expect("starting nicsim")
}

/// Port `n` of `sim`, opened, initialised and with its link up.
pub fn port(sim: &Session, n: usize) -> Port {
    let port = Port::open(&sim.devices(), &nicsim::sysfs::port_address(n)).unwrap();
    let d = port.device();
    d.init().unwrap();
    d.wait_for_link(Duration::from_secs(10)).unwrap();
    port
}

/// How many RX and TX queues of each port nicsim sees enabled.
pub fn enabled_queues(sim: &Session) -> Vec<(usize, usize)> {
    sim.stats().unwrap().ports.iter().map(|p| (p.rx_queues_enabled, p.tx_queues_enabled)).collect()
}

/// Whether `done` holds within a minute, asked every 5 ms. nicsim applies register writes and
/// lets memory go on its own looks, which a busy host can delay; a minute is far beyond any
/// look, so only a wrong state fails, never a slow one.
pub fn within_a_minute(mut done: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while !done() {
        if start.elapsed() > Duration::from_secs(60) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}
