//! Safe code reaches a port's registers only through the trusted base's `Function`, which
//! hands out neither its BAR0 mapping nor a second register file: a second `Function` on an
//! open port, which would let a second owner program it, is refused while the first lives, in
//! this process as in any other. (`PciFunction::map_bar0` is private to `platform`; its
//! compile-fail doctest shows it.)
//! Needs root and hugepages (`make test` provides them); against nicsim in this process.

mod common;

use ixgbe::device::Port;
use platform::i82599::Function;
use platform::PlatformError;

#[test]
fn a_second_register_file_of_an_open_port_is_refused() {
    let sim = common::nicsim("bar-access");
    let address = nicsim::sysfs::port_address(0);
    let port = common::port(&sim, 0);

    // Through the platform, as a driver would open it.
    match Function::open(&sim.devices(), &address) {
        Err(PlatformError::InUse { .. }) => {}
        other => panic!("a claimed function must not be opened again: {other:?}"),
    }
    // Through ixgbe: a second port on the same function.
    let e = Port::open(&sim.devices(), &address).err().expect("a second port on one function is refused");
    assert!(e.to_string().contains("in use"), "{e}");
    drop(port);
    // Once the port is gone, the function is free again.
    let again = Function::open(&sim.devices(), &address).expect("free once its port is dropped");
    drop(again);
    // On a real card resource0 is a sysfs file, which MappedRegion::map_file refuses outright
    // (platform's own test); nicsim's is a plain file, and mapping it gives no more than nicsim
    // allows: it resolves DMA only into memory the driver gave the device.
}
