//! The XDP program that hands one receive queue's frames to an AF_XDP socket, loaded and
//! attached with the `bpf` system call directly: six instructions, an XSKMAP and a BPF link,
//! with no C library and no compiler of BPF behind them. libxdp would do the same with a
//! dispatcher program, pinned maps under bpffs and a C dependency for the Rust driver; a link
//! also detaches the program when its descriptor closes, so a driver that dies leaves the
//! interface as it was.
//!
//! # Soundness
//! The kernel copies every argument; the program is fixed and passes its verifier; nothing
//! here reaches this process's memory.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// `bpf_redirect_map`'s helper number.
const REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;

/// One BPF instruction: opcode, destination and source registers, offset, immediate.
const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    code as u64 | ((dst | (src << 4)) as u64) << 8 | (off as u16 as u64) << 16 | (imm as u32 as u64) << 32
}

/// `bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)`: a frame of a queue with a socket
/// in the map goes to it, any other to the kernel's stack.
fn program(map_fd: i32) -> [u64; 6] {
    [
        insn(0x61, 2, 1, 16, 0),           // r2 = *(u32 *)(r1 + 16): xdp_md.rx_queue_index
        insn(0x18, 1, 1, 0, map_fd),       // r1 = the map (BPF_PSEUDO_MAP_FD), 64-bit load
        0,                                 //      its upper half
        insn(0xb7, 3, 0, 0, XDP_PASS),     // r3 = XDP_PASS: what a missing entry does
        insn(0x85, 0, 0, 0, REDIRECT_MAP), // call bpf_redirect_map
        insn(0x95, 0, 0, 0, 0),            // exit
    ]
}

/// `bpf(cmd, attr)`: what it returns.
fn bpf(cmd: libc::c_long, attr: &mut [u64; 16]) -> std::io::Result<libc::c_long> {
    // SAFETY: `attr` is a zero-filled `union bpf_attr` of 128 bytes that lives across the
    // call; the kernel reads at most the size given and follows only the pointers it holds,
    // which point at live buffers of the caller.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), size_of_val(attr)) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(r)
}

/// `bpf(cmd, attr)` for a command that makes an object: its new descriptor.
fn bpf_fd(cmd: libc::c_long, attr: &mut [u64; 16]) -> std::io::Result<OwnedFd> {
    let fd = i32::try_from(bpf(cmd, attr)?).map_err(|_| std::io::Error::other("bpf: not a descriptor"))?;
    // SAFETY: a descriptor the kernel just returned for this command, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A word of `attr` from two 32-bit fields.
fn pair(low: u32, high: u32) -> u64 {
    low as u64 | (high as u64) << 32
}

/// The program on an interface: detached when dropped (the link's descriptor closes).
pub struct Attached {
    _link: OwnedFd,
    _program: OwnedFd,
    map: OwnedFd,
    /// Whether it runs in the driver (native XDP) rather than on the generic path.
    pub native: bool,
}

/// Why the program could not be attached, for the caller's one line.
#[derive(Debug)]
pub enum AttachError {
    /// The interface has a program already (another driver, `ip link set xdp`).
    Busy,
    /// The kernel refused: no BPF, no permission, or the verifier (its log).
    Refused(std::io::Error, String),
}

impl Attached {
    /// Loads the program with an XSKMAP of `queue + 1` entries and attaches it to interface
    /// `ifindex`, in the driver if it can run there, else on the generic path.
    pub fn attach(ifindex: u32, queue: u32) -> Result<Attached, AttachError> {
        let refused = |e, what: &str| AttachError::Refused(e, what.to_string());
        let mut attr = [0u64; 16];
        attr[0] = pair(BPF_MAP_TYPE_XSKMAP, 4);
        attr[1] = pair(4, queue.saturating_add(1));
        let map = bpf_fd(BPF_MAP_CREATE, &mut attr).map_err(|e| refused(e, "creating an XSKMAP"))?;
        let insns = program(map.as_raw_fd());
        let license = c"Dual MIT/GPL";
        let mut log = vec![0u8; 4096];
        let mut attr = [0u64; 16];
        attr[0] = pair(BPF_PROG_TYPE_XDP, insns.len() as u32);
        attr[1] = insns.as_ptr() as u64;
        attr[2] = license.as_ptr() as u64;
        attr[3] = pair(1, log.len() as u32);
        attr[4] = log.as_mut_ptr() as u64;
        attr[8] = pair(0, BPF_XDP); // prog_ifindex, expected_attach_type
        let program = bpf_fd(BPF_PROG_LOAD, &mut attr).map_err(|e| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            refused(e, &String::from_utf8_lossy(&log[..end]).replace('\n', " "))
        })?;
        let mut last = None;
        for (flags, native) in [(XDP_FLAGS_DRV_MODE, true), (XDP_FLAGS_SKB_MODE, false)] {
            let mut attr = [0u64; 16];
            attr[0] = pair(program.as_raw_fd() as u32, ifindex);
            attr[1] = pair(BPF_XDP, flags);
            match bpf_fd(BPF_LINK_CREATE, &mut attr) {
                Ok(link) => return Ok(Attached { _link: link, _program: program, map, native }),
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) || e.raw_os_error() == Some(libc::EEXIST) => {
                    return Err(AttachError::Busy)
                }
                Err(e) => last = Some(e),
            }
        }
        Err(refused(last.unwrap_or_else(|| std::io::Error::other("no mode")), "attaching the program"))
    }

    /// Sends queue `queue`'s frames to `socket` (bound to that queue of the interface).
    pub fn redirect(&self, queue: u32, socket: &impl AsRawFd) -> std::io::Result<()> {
        let (key, value) = (queue, socket.as_raw_fd() as u32);
        let mut attr = [0u64; 16];
        attr[0] = self.map.as_raw_fd() as u64;
        attr[1] = &key as *const u32 as u64;
        attr[2] = &value as *const u32 as u64;
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
    }
}
