//! AF_XDP sockets: the kernel's own driver of any NIC hands frames to this process and takes
//! frames from it through four rings over a UMEM, memory of this process that the kernel
//! writes received frames into and reads sent ones from.
//!
//! The UMEM is a [`DmaRegion`] of frame areas only ([`crate::dma::DmaLayout::frames`]): each
//! chunk of [`FRAME_SIZE`] bytes is one buffer in its second half, and the kernel is told a
//! headroom that puts a received frame at that buffer's first byte, so buffers move between an
//! AF_XDP socket and the other devices unchanged. The rings ([`Producer`], [`Consumer`]) carry
//! UMEM offsets, and the program that sends a queue's frames to the socket is this crate's own
//! ([`program`]).
//!
//! # Soundness
//! The kernel writes only into the UMEM, at offsets it checks, and the UMEM is a region that
//! holds no ring and no other memory, reached by this process only through volatile accesses:
//! whatever offset safe code puts in the fill ring, the kernel's write is a packet in a
//! buffer. It reads the UMEM at offsets it checks too (transmit descriptors). Its pages stay
//! pinned while the socket lives, so a region dropped first leaves the kernel writing to pages
//! no longer mapped here. The rings are [`ring`]'s.

pub mod program;
mod ring;

pub use ring::{Consumer, Producer, XdpDesc};

use crate::dma::{DmaRegion, FRAME_HEADROOM, FRAME_SIZE};
use crate::error::PlatformError;
use rustix::net::xdp::{SocketAddrXdp, SocketAddrXdpFlags, XdpOptionsFlags, XdpUmemReg, XdpUmemRegFlags};
use rustix::net::{sockopt, AddressFamily, SocketType};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// The kernel's headroom before every received frame (`XDP_PACKET_HEADROOM`).
const XDP_PACKET_HEADROOM: usize = 256;

/// How the socket is bound to its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindMode {
    /// Zero-copy where the driver supports it, else copy (the kernel's choice).
    Auto,
    /// The kernel copies every frame between the driver's buffers and the UMEM.
    Copy,
    /// The driver receives into and sends from the UMEM itself; refused where unsupported.
    ZeroCopy,
}

/// An AF_XDP socket: its descriptor, shared by the halves that wake the kernel.
#[derive(Clone)]
pub struct XdpSocket {
    fd: Arc<OwnedFd>,
    zero_copy: bool,
}

/// Frames received: offsets to receive into go in `fill`, frames come out of `rx`.
pub struct RxRings<const N: usize> {
    pub fill: Producer<u64, N>,
    pub rx: Consumer<XdpDesc, N>,
}

/// Frames sent: descriptors go in `tx`, the offsets of frames sent come out of `completion`.
pub struct TxRings<const N: usize> {
    pub tx: Producer<XdpDesc, N>,
    pub completion: Consumer<u64, N>,
}

/// A socket bound to one queue of an interface, with its rings and the UMEM's place.
pub struct Bound<const N: usize> {
    pub socket: XdpSocket,
    pub rx: RxRings<N>,
    pub tx: TxRings<N>,
    /// The address of the UMEM's first byte: a buffer's UMEM offset is its address less this.
    pub umem_base: usize,
    /// The UMEM's size in bytes.
    pub umem_len: usize,
}

fn refused(what: String) -> PlatformError {
    PlatformError::Xdp(what)
}

/// Why `socket(AF_XDP)` failed, in one line that names the fix.
fn socket_error(e: rustix::io::Errno) -> PlatformError {
    match e {
        rustix::io::Errno::AFNOSUPPORT => refused(
            "this kernel has no AF_XDP sockets: use one built with CONFIG_XDP_SOCKETS=y (Linux 5.4 or later)".into(),
        ),
        rustix::io::Errno::PERM | rustix::io::Errno::ACCESS => {
            PlatformError::NotRoot { what: "opening an AF_XDP socket" }
        }
        e => PlatformError::io("opening an AF_XDP socket", e.into()),
    }
}

/// The index of interface `name`, if this network namespace has one.
pub fn interface_index(name: &str) -> Option<u32> {
    let name = std::ffi::CString::new(name).ok()?;
    // SAFETY: `name` is a NUL-terminated string alive across the call, which only reads it.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (index != 0).then_some(index)
}

/// What an interface is now, as this network namespace sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterfaceState {
    Up,
    /// Administratively down (`ip link set NAME down`).
    Down,
    /// No interface of that name and index any more (deleted, or moved to another namespace).
    Gone,
}

/// The state of interface `name`, which had index `ifindex`.
pub fn interface_state(name: &str, ifindex: u32) -> InterfaceState {
    if interface_index(name) != Some(ifindex) {
        return InterfaceState::Gone;
    }
    let Ok(sock) = rustix::net::socket(AddressFamily::INET, SocketType::DGRAM, None) else {
        return InterfaceState::Up;
    };
    // SAFETY: `ifreq` is plain data, valid zeroed.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(name.as_bytes().iter().take(libc::IFNAMSIZ - 1)) {
        *dst = src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the NUL-terminated name and writes the flags into `req`,
    // which lives across the call.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } != 0 {
        return InterfaceState::Gone;
    }
    // SAFETY: SIOCGIFFLAGS filled the union's flags member.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    if flags as i32 & libc::IFF_UP != 0 {
        InterfaceState::Up
    } else {
        InterfaceState::Down
    }
}

/// Opens an AF_XDP socket on queue `queue` of interface `ifindex` (named `name` in errors),
/// with `umem` as its UMEM and rings of `N` entries, bound as `mode` asks.
pub fn bind<const N: usize>(
    name: &str,
    ifindex: u32,
    queue: u32,
    umem: &DmaRegion,
    mode: BindMode,
) -> Result<Bound<N>, PlatformError> {
    if !umem.only_frames() {
        return Err(refused(
            "an AF_XDP UMEM holds frame areas only (DmaLayout::frames): the kernel may write anywhere in it".into(),
        ));
    }
    let fd = rustix::net::socket(AddressFamily::XDP, SocketType::RAW, None).map_err(socket_error)?;
    let region = umem.whole();
    let reg = XdpUmemReg {
        addr: region.virt_addr() as u64,
        len: region.len() as u64,
        chunk_size: FRAME_SIZE as u32,
        headroom: (FRAME_HEADROOM - XDP_PACKET_HEADROOM) as u32,
        flags: XdpUmemRegFlags::empty(),
        tx_metadata_len: 0,
    };
    let io = |what: &str| {
        let what = what.to_string();
        move |e: rustix::io::Errno| PlatformError::io(format!("{what} of the AF_XDP socket on {name}"), e.into())
    };
    sockopt::set_xdp_umem_reg(&fd, reg).map_err(io("registering the UMEM"))?;
    let size = N as u32;
    sockopt::set_xdp_umem_fill_ring_size(&fd, size).map_err(io("sizing the fill ring"))?;
    sockopt::set_xdp_umem_completion_ring_size(&fd, size).map_err(io("sizing the completion ring"))?;
    sockopt::set_xdp_rx_ring_size(&fd, size).map_err(io("sizing the receive ring"))?;
    sockopt::set_xdp_tx_ring_size(&fd, size).map_err(io("sizing the transmit ring"))?;
    let off = sockopt::xdp_mmap_offsets(&fd).map_err(io("reading the ring offsets"))?;
    let o = |r: &rustix::net::xdp::XdpRingOffset| ring::Offsets {
        producer: r.producer,
        consumer: r.consumer,
        flags: r.flags.unwrap_or(r.consumer + 4),
        desc: r.desc,
    };
    let map = |e: std::io::Error| PlatformError::io(format!("mapping a ring of the AF_XDP socket on {name}"), e);
    use rustix::net::xdp::{
        XDP_PGOFF_RX_RING, XDP_PGOFF_TX_RING, XDP_UMEM_PGOFF_COMPLETION_RING, XDP_UMEM_PGOFF_FILL_RING,
    };
    let rx = RxRings {
        fill: Producer::map(fd.as_fd(), XDP_UMEM_PGOFF_FILL_RING, &o(&off.fr)).map_err(map)?,
        rx: Consumer::map(fd.as_fd(), XDP_PGOFF_RX_RING, &o(&off.rx)).map_err(map)?,
    };
    let tx = TxRings {
        tx: Producer::map(fd.as_fd(), XDP_PGOFF_TX_RING, &o(&off.tx)).map_err(map)?,
        completion: Consumer::map(fd.as_fd(), XDP_UMEM_PGOFF_COMPLETION_RING, &o(&off.cr)).map_err(map)?,
    };
    let mut flags = SocketAddrXdpFlags::XDP_USE_NEED_WAKEUP;
    match mode {
        BindMode::Auto => {}
        BindMode::Copy => flags |= SocketAddrXdpFlags::XDP_COPY,
        BindMode::ZeroCopy => flags |= SocketAddrXdpFlags::XDP_ZEROCOPY,
    }
    rustix::net::bind(&fd, &SocketAddrXdp::new(flags, ifindex, queue)).map_err(|e| match e {
        rustix::io::Errno::INVAL => refused(format!(
            "{name} has no receive and transmit queue {queue}: give one below its count (ethtool -l {name}), e.g. xdp:{name}@0"
        )),
        rustix::io::Errno::OPNOTSUPP if mode == BindMode::ZeroCopy => {
            refused(format!("{name}'s driver has no zero-copy AF_XDP: bind in copy mode (--xdp-bind copy)"))
        }
        rustix::io::Errno::BUSY => refused(format!("queue {queue} of {name} has an AF_XDP socket already: stop its owner or use another queue")),
        rustix::io::Errno::NETDOWN | rustix::io::Errno::NXIO => refused(format!("{name} is down: ip link set {name} up")),
        e => PlatformError::io(format!("binding an AF_XDP socket to queue {queue} of {name}"), e.into()),
    })?;
    let options = sockopt::xdp_options(&fd).map_err(io("reading the bind mode"))?;
    let socket = XdpSocket { fd: Arc::new(fd), zero_copy: options.contains(XdpOptionsFlags::XDP_OPTIONS_ZEROCOPY) };
    Ok(Bound { socket, rx, tx, umem_base: region.virt_addr(), umem_len: region.len() })
}

/// The socket's counters (`XDP_STATISTICS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Statistics {
    /// Frames the kernel dropped for this socket (no room, no fill buffer, …).
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    pub rx_ring_full: u64,
    pub rx_fill_ring_empty_descs: u64,
    pub tx_ring_empty_descs: u64,
}

impl XdpSocket {
    /// Whether the driver receives into the UMEM itself (zero-copy) rather than copying.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Asks the kernel to look at the fill ring (it set need-wakeup there).
    #[inline(never)]
    pub fn wake_rx(&self) {
        // Nothing to do if it fails: the kernel only had no reason to run.
        let _ = rustix::net::recv(&*self.fd, &mut [0u8; 0][..], rustix::net::RecvFlags::DONTWAIT);
    }

    /// Asks the kernel to send what the transmit ring holds. Nothing to do if it fails: a busy
    /// device is asked again next burst, and an interface down or gone is what the port's
    /// watcher reports (`afxdp::Port::broken`).
    #[inline(never)]
    pub fn wake_tx(&self) {
        let _ = rustix::net::send(&*self.fd, &[], rustix::net::SendFlags::DONTWAIT);
    }

    /// The socket's counters.
    pub fn statistics(&self) -> Result<Statistics, PlatformError> {
        let s =
            sockopt::xdp_statistics(&*self.fd).map_err(|e| PlatformError::io("reading XDP_STATISTICS", e.into()))?;
        Ok(Statistics {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            tx_invalid_descs: s.tx_invalid_descs,
            rx_ring_full: s.rx_ring_full.unwrap_or(0),
            rx_fill_ring_empty_descs: s.rx_fill_ring_empty_descs.unwrap_or(0),
            tx_ring_empty_descs: s.tx_ring_empty_descs.unwrap_or(0),
        })
    }
}

impl AsRawFd for XdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_without_af_xdp_or_a_user_without_the_right_is_told_the_fix() {
        // The running kernel has AF_XDP: what its absence and a refusal return is checked here.
        let none = socket_error(rustix::io::Errno::AFNOSUPPORT).to_string();
        assert!(none.contains("no AF_XDP") && none.contains("CONFIG_XDP_SOCKETS") && !none.contains('\n'), "{none}");
        let denied = socket_error(rustix::io::Errno::PERM).to_string();
        assert!(denied.contains("needs root") && !denied.contains('\n'), "{denied}");
    }

    #[test]
    fn a_region_with_anything_but_frames_is_no_umem() {
        // Needs root and hugepages (make test provides them).
        let mut layout = crate::dma::DmaLayout::new();
        layout.frames(4).unwrap();
        layout.descriptor_ring(8).unwrap();
        let region = DmaRegion::allocate(&layout).unwrap();
        let e =
            bind::<8>("lo", 1, 0, &region, BindMode::Copy).err().expect("a ring in the UMEM is refused").to_string();
        assert!(e.contains("frame areas only"), "{e}");
    }

    #[test]
    fn an_interface_that_is_not_there_has_no_index_and_is_gone() {
        assert_eq!(interface_index("safenic-none0"), None);
        assert_eq!(interface_state("safenic-none0", 1), InterfaceState::Gone);
        let lo = interface_index("lo").expect("every namespace has lo");
        assert_eq!(interface_state("lo", lo + 1000), InterfaceState::Gone, "a name now at another index is gone");
    }
}
