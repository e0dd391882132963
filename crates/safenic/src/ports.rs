//! The one place where `safenic fwd` tells the kinds of port apart: each address's PCI
//! function is recognised here, and the forwarding code for that pair of kinds runs. A new
//! kind of port is one more variant and one more arm.

use crate::fwd_options::Options;
use std::path::Path;

/// What a port of `safenic fwd` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortKind {
    /// An Intel 82599 function (crates/ixgbe): every model, RSS over several queues.
    I82599,
    /// A virtio-net function (crates/virtio): the flexible model, one queue pair.
    Virtio,
    /// `xdp:IFNAME[@QUEUE]`: one queue of any interface Linux drives, through an AF_XDP
    /// socket (crates/afxdp): the flexible model.
    Xdp,
}

impl PortKind {
    /// The kind of port `address` names: AF_XDP by its prefix (`xdp:`), else the PCI function
    /// at `address` under `sysfs`: virtio-net by its vendor ID (Red Hat's, 0x1af4), otherwise
    /// an 82599, whose opening says what is wrong if it is not one.
    pub fn of(sysfs: &Path, address: &str) -> PortKind {
        if afxdp::PortSpec::names_one(address) {
            return PortKind::Xdp;
        }
        let vendor = platform::pci::normalize_address(address)
            .ok()
            .and_then(|a| std::fs::read_to_string(sysfs.join(a).join("vendor")).ok());
        match vendor.as_deref().map(str::trim) {
            Some("0x1af4") => PortKind::Virtio,
            _ => PortKind::I82599,
        }
    }
}

/// `safenic fwd`: the forwarding code for the kinds of the two ports.
pub fn forward(o: &Options) -> Result<(), String> {
    let kinds = [PortKind::of(&o.sysfs, &o.input), PortKind::of(&o.sysfs, &o.output)];
    match kinds {
        [PortKind::I82599, PortKind::I82599] => crate::fwd::run(o),
        // Either port AF_XDP: the flexible loop over its queues and the other port's.
        [PortKind::Xdp, other] | [other, PortKind::Xdp] => crate::fwd_xdp::run(o, kinds, other),
        // Either port virtio: its flexible loop serves both kinds through one queue API.
        _ => crate::fwd_virtio::run(o, kinds.map(|k| k == PortKind::Virtio)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_is_virtio_by_its_vendor_and_an_82599_otherwise() {
        let dir = std::env::temp_dir().join(format!("safenic-ports-{}", std::process::id()));
        for (address, vendor) in [("0000:00:04.0", "0x1af4\n"), ("0000:5e:00.0", "0x8086\n")] {
            std::fs::create_dir_all(dir.join(address)).unwrap();
            std::fs::write(dir.join(address).join("vendor"), vendor).unwrap();
        }
        assert_eq!(PortKind::of(&dir, "0000:00:04.0"), PortKind::Virtio);
        assert_eq!(PortKind::of(&dir, "00:04.0"), PortKind::Virtio, "the short form names the same function");
        assert_eq!(PortKind::of(&dir, "0000:5e:00.0"), PortKind::I82599);
        // Not there: the 82599 driver's open names what is missing.
        assert_eq!(PortKind::of(&dir, "0000:99:00.0"), PortKind::I82599);
        assert_eq!(PortKind::of(&dir, "xdp:eth0@1"), PortKind::Xdp, "by its prefix, whatever sysfs holds");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
