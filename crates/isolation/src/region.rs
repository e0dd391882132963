//! A domain's I/O area: the frame, then the input, then the output, in one mapping. The MPK and
//! unisolated backends map it privately; the process backend shares it with its helper.

use crate::frame::{Frame, FRAME_BYTES};
use crate::SetupError;

/// Page-aligned size of an I/O area.
pub(crate) fn io_bytes(input: usize, output: usize) -> usize {
    page_up(FRAME_BYTES + page_up(input) + page_up(output))
}

pub(crate) fn page_up(n: usize) -> usize {
    (n + 4095) & !4095
}

/// The layout of an I/O area that starts at `base`.
#[derive(Clone, Copy)]
pub(crate) struct IoArea {
    pub base: *mut u8,
    pub input_cap: usize,
    pub output_cap: usize,
}

// SAFETY: an IoArea is the address of a domain's memory, used only by the domain that owns it
// (behind &mut).
unsafe impl Send for IoArea {}

impl IoArea {
    pub fn frame(&self) -> *mut Frame {
        self.base as *mut Frame
    }

    pub fn input(&self) -> *mut u8 {
        self.base.wrapping_add(FRAME_BYTES)
    }

    pub fn output(&self) -> *mut u8 {
        self.base.wrapping_add(FRAME_BYTES + page_up(self.input_cap))
    }
}

/// An anonymous or file-backed mapping, unmapped on drop.
pub(crate) struct Mapping {
    pub base: *mut u8,
    pub len: usize,
}

// SAFETY: a Mapping is only an owned address range; who reads or writes it is decided by the
// domain that owns it (behind &mut).
unsafe impl Send for Mapping {}

impl Mapping {
    /// `len` bytes with `prot`, private and anonymous, or shared from `fd`.
    pub fn new(len: usize, prot: i32, fd: Option<i32>) -> Result<Mapping, SetupError> {
        let (flags, fd) = match fd {
            Some(fd) => (libc::MAP_SHARED, fd),
            None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1),
        };
        // SAFETY: a new mapping at an address the kernel picks; nothing else refers to it.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) };
        if base == libc::MAP_FAILED {
            return Err(SetupError::os(&format!("mapping {len} bytes for a domain")));
        }
        Ok(Mapping { base: base as *mut u8, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the range was mapped by Mapping::new and is not used after the domain that
        // owns it is gone.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}
