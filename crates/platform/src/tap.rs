//! TAP interfaces: an Ethernet link whose other end is the Linux network stack. nicsim attaches
//! a port's wire to one (`nicsim serve --tap`), so real network stacks are the peers of the
//! drivers it serves (docs/virtio.md, "Linux peers").
//!
//! # Soundness
//! A TAP device's descriptor, read and written through slices the caller lends: no other
//! memory is reached.

use crate::error::PlatformError;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// `struct ifreq` as TUNSETIFF reads it: the name, then the flags (the union's first member),
/// padded to the structure's 40 bytes (`include/uapi/linux/if.h`).
#[repr(C)]
struct IfReq {
    name: [u8; 16],
    flags: i16,
    _pad: [u8; 22],
}

/// A TAP interface, which lives while this is open; frames go both ways without blocking.
pub struct Tap {
    file: File,
    name: String,
}

impl Tap {
    /// Creates TAP interface `name` (at most 15 bytes) in this network namespace. Needs root.
    pub fn create(name: &str) -> Result<Tap, PlatformError> {
        if name.is_empty() || name.len() > 15 || name.contains(['/', ' ', '\0']) {
            return Err(PlatformError::io(
                format!("TAP interface name `{name}`"),
                std::io::Error::other("give a name of 1 to 15 characters without '/' or spaces"),
            ));
        }
        let file =
            OpenOptions::new().read(true).write(true).custom_flags(libc::O_NONBLOCK).open("/dev/net/tun").map_err(
                |e| match e.kind() {
                    ErrorKind::PermissionDenied => PlatformError::NotRoot { what: "creating a TAP interface" },
                    _ => PlatformError::io("opening /dev/net/tun (load the tun module: modprobe tun)", e),
                },
            )?;
        let mut req = IfReq { name: [0; 16], flags: (libc::IFF_TAP | libc::IFF_NO_PI) as i16, _pad: [0; 22] };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: TUNSETIFF reads and writes one `struct ifreq` at the pointer: `req` is a live,
        // exclusively borrowed 40-byte value with that layout (name, then the flags), and the
        // descriptor is the tun device just opened.
        let r = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF as _, &mut req as *mut IfReq) };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EPERM) => PlatformError::NotRoot { what: "creating a TAP interface" },
                _ => PlatformError::io(format!("creating TAP interface {name} (is the name in use?)"), e),
            });
        }
        Ok(Tap { file, name: name.to_string() })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The next frame the kernel sends, into `buf`: its length, or `None` if there is none now.
    pub fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        match self.file.read(buf) {
            Ok(n) if n > 0 => Some(n),
            _ => None,
        }
    }

    /// Hands `frame` to the kernel; false if it did not take it (its queue is full).
    pub fn send(&mut self, frame: &[u8]) -> bool {
        self.file.write(frame).is_ok_and(|n| n == frame.len())
    }
}
