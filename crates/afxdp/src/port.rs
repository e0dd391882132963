//! An AF_XDP port: `xdp:IFNAME[@QUEUE]`, a socket bound to that queue of the interface, and
//! the XDP program that sends the queue's frames to it (`platform::xdp::program`).

use crate::queues::{RxQueue, TxQueue};
use ixgbe::queues::BufferPool;
use platform::dma::DmaRegion;
use platform::xdp::program::{AttachError, Attached};
use platform::xdp::{BindMode, InterfaceState, Statistics, XdpSocket};

/// What `xdp:IFNAME[@QUEUE]` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    pub interface: String,
    /// The receive and transmit queue, 0 if not given.
    pub queue: u32,
}

impl PortSpec {
    /// What starts an AF_XDP port's name on a command line.
    pub const PREFIX: &'static str = "xdp:";

    /// Whether `arg` names an AF_XDP port.
    pub fn names_one(arg: &str) -> bool {
        arg.starts_with(Self::PREFIX)
    }

    /// `xdp:IFNAME` or `xdp:IFNAME@QUEUE`.
    pub fn parse(arg: &str) -> Result<PortSpec, String> {
        let rest = arg
            .strip_prefix(Self::PREFIX)
            .ok_or_else(|| format!("{arg} is not an AF_XDP port: write xdp:IFNAME or xdp:IFNAME@QUEUE"))?;
        let (interface, queue) = match rest.split_once('@') {
            Some((name, q)) => {
                let queue = q.parse::<u32>().map_err(|_| {
                    format!(
                        "{arg}: the queue after @ is a number (a receive queue of the interface), e.g. xdp:{name}@0"
                    )
                })?;
                (name, queue)
            }
            None => (rest, 0),
        };
        // IFNAMSIZ less the NUL; a name is one word without '/' (Linux's dev_valid_name).
        let valid = !interface.is_empty()
            && interface.len() < 16
            && interface != "."
            && interface != ".."
            && !interface.contains(['/', ':'])
            && !interface.contains(char::is_whitespace);
        if !valid {
            return Err(format!("{arg}: {interface:?} is no interface name: see `ip link` for this machine's"));
        }
        Ok(PortSpec { interface: interface.to_string(), queue })
    }
}

impl std::fmt::Display for PortSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}@{}", Self::PREFIX, self.interface, self.queue)
    }
}

/// An open AF_XDP port: its program stays attached, and its socket open through its queues,
/// until they are dropped.
pub struct Port {
    spec: PortSpec,
    ifindex: u32,
    socket: XdpSocket,
    program: Attached,
}

/// The queues of a port.
pub type Queues<'a, const N: usize> = (RxQueue<'a, N>, TxQueue<'a, N>);

impl Port {
    /// Opens `spec` with rings of `N` entries over `umem` (a region of frames that holds
    /// every buffer the queues will see), bound as `mode` asks; the receive queue's fill ring
    /// is filled from `pool`.
    pub fn open<'a, const N: usize>(
        spec: &PortSpec,
        umem: &'a DmaRegion,
        mode: BindMode,
        pool: &mut BufferPool<'a>,
    ) -> Result<(Port, Queues<'a, N>), String> {
        let name = &spec.interface;
        let ifindex = platform::xdp::interface_index(name)
            .ok_or_else(|| format!("no interface named {name} in this network namespace: see `ip link`"))?;
        if platform::xdp::interface_state(name, ifindex) == InterfaceState::Down {
            return Err(format!("{name} is down: bring it up with `ip link set {name} up`"));
        }
        // sysfs shows this namespace's interfaces where it is mounted for it (ip netns exec).
        let queues = std::path::Path::new("/sys/class/net").join(name).join("queues");
        if queues.is_dir() && !queues.join(format!("rx-{}", spec.queue)).exists() {
            let count = std::fs::read_dir(&queues)
                .map(|d| {
                    d.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().starts_with("rx-")).count()
                })
                .unwrap_or(0);
            return Err(format!(
                "{name} has {count} receive queue{}, no queue {}: give one below {count}, e.g. xdp:{name}@0",
                if count == 1 { "" } else { "s" },
                spec.queue
            ));
        }
        let bound = platform::xdp::bind::<N>(name, ifindex, spec.queue, umem, mode).map_err(|e| e.to_string())?;
        let base = bound.umem_base;
        let rx = RxQueue::new(bound.rx, bound.socket.clone(), base, bound.umem_len, pool)?;
        let tx = TxQueue::new(bound.tx, bound.socket.clone(), base);
        let program = Attached::attach(ifindex, spec.queue).map_err(|e| match e {
            AttachError::Busy => format!(
                "{name} has an XDP program already: remove it (`ip link set dev {name} xdp off`) or stop the program's owner"
            ),
            AttachError::Refused(e, _) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                format!("loading the XDP program for {name} needs root (CAP_BPF and CAP_NET_ADMIN): run as root")
            }
            AttachError::Refused(e, why) => format!("the kernel refused the XDP program for {name}: {e} {why}"),
        })?;
        program
            .redirect(spec.queue, &bound.socket)
            .map_err(|e| format!("sending queue {} of {name} to its socket: {e}", spec.queue))?;
        let port = Port { spec: spec.clone(), ifindex, socket: bound.socket, program };
        Ok((port, (rx, tx)))
    }

    pub fn spec(&self) -> &PortSpec {
        &self.spec
    }

    /// Whether the program runs in the interface's driver (native XDP) rather than on the
    /// kernel's generic path.
    pub fn native(&self) -> bool {
        self.program.native
    }

    /// Whether the driver moves frames into the UMEM itself (zero-copy) rather than copying.
    pub fn zero_copy(&self) -> bool {
        self.socket.zero_copy()
    }

    /// The socket's counters (`XDP_STATISTICS`).
    pub fn statistics(&self) -> Result<Statistics, String> {
        self.socket.statistics().map_err(|e| e.to_string())
    }

    /// Why the port can no longer forward, if it cannot: its interface went down or is gone.
    pub fn broken(&self) -> Option<String> {
        let name = &self.spec.interface;
        match platform::xdp::interface_state(name, self.ifindex) {
            InterfaceState::Up => None,
            InterfaceState::Down => {
                Some(format!("{name} went down: bring it up with `ip link set {name} up` and start again"))
            }
            InterfaceState::Gone => Some(format!("{name} was deleted (or left this network namespace)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_is_an_interface_and_a_queue() {
        assert_eq!(PortSpec::parse("xdp:eth0").unwrap(), PortSpec { interface: "eth0".into(), queue: 0 });
        assert_eq!(PortSpec::parse("xdp:veth-a@3").unwrap(), PortSpec { interface: "veth-a".into(), queue: 3 });
        assert_eq!(PortSpec::parse("xdp:veth-a@3").unwrap().to_string(), "xdp:veth-a@3");
        for bad in
            ["xdp:", "xdp:@1", "xdp:a/b", "xdp:abcdefghijklmnop", "xdp:eth0@", "xdp:eth0@x", "xdp:eth0@-1", "eth0"]
        {
            let e = PortSpec::parse(bad).expect_err(bad);
            assert!(!e.contains('\n') && e.contains("xdp:") || e.contains("interface"), "{bad}: {e}");
        }
        assert!(PortSpec::names_one("xdp:lo") && !PortSpec::names_one("0000:5e:00.0"));
    }
}
