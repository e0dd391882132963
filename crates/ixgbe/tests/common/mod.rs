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
