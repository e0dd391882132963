//! Safe code reaches a port's registers only through the `Device` of the `Port` that owns it:
//! a second mapping of BAR0, which would let any register be written (a ring base pointed at
//! the heap), is refused while the port lives, in this process as in any other.
//! Needs root and hugepages (`make test` provides them); against nicsim in this process.

mod common;

use ixgbe::device::Port;
use platform::{PciFunction, PlatformError};

#[test]
fn a_second_mapping_of_an_open_port_s_bar_is_refused() {
    let sim = common::nicsim("bar-access");
    let address = nicsim::sysfs::port_address(0);
    let port = common::port(&sim, 0);

    // Through the platform, as a driver would map it.
    let function = PciFunction::open(&sim.devices(), &address).unwrap();
    match function.map_bar0(ixgbe::regs::BAR0_LEN) {
        Err(PlatformError::InUse { .. }) => {}
        other => panic!("a claimed function's BAR0 must not be mapped again: {other:?}"),
    }
    // Through ixgbe: a second port on the same function.
    let e = Port::open(&sim.devices(), &address).err().expect("a second port on one function is refused");
    assert!(e.to_string().contains("in use"), "{e}");
    drop(port);
    // Once the port is gone, the function is free again.
    let again = function.map_bar0(ixgbe::regs::BAR0_LEN).expect("free once its port is dropped");
    drop(again);
    // On a real card resource0 is a sysfs file, which MappedRegion::map_file refuses outright
    // (platform's own test); nicsim's is a plain file, and mapping it gives no more than nicsim
    // allows: it resolves DMA only into memory the driver gave the device.
}
