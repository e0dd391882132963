//! The four rings of an AF_XDP socket, mapped from the kernel: single-producer,
//! single-consumer rings whose producer and consumer words the two sides update with
//! acquire/release ordering, as the kernel's `xsk_queue.h` does.
//!
//! # Soundness
//! A ring owns its mapping until it is dropped. Its words and entries are reached only by
//! atomic and volatile accesses of plain integers, so what the kernel writes meanwhile is only
//! a value read, and every entry is addressed modulo `N`, the size the kernel was told. What the
//! kernel writes (its producer or consumer word, a received entry) is untrusted: counts are
//! clamped to `N` here, and entries are numbers for the caller to check. What the caller writes
//! (a fill address, a transmit descriptor) the kernel checks against the UMEM before it uses
//! it, so no value written here makes the kernel touch memory outside the UMEM.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// `XDP_RING_NEED_WAKEUP` in a ring's flags word: the kernel waits for a system call.
const NEED_WAKEUP: u32 = 1;

/// A transmit or receive descriptor (`struct xdp_desc`): a UMEM offset and a length.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpDesc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

/// Where the parts of one ring lie in its mapping (`struct xdp_ring_offset`).
pub(super) struct Offsets {
    pub producer: u64,
    pub consumer: u64,
    pub flags: u64,
    pub desc: u64,
}

/// A ring's mapping: unmapped when dropped.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `Ring::map` with this length and is reached only
        // through the ring that owns it, which is being dropped.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// One ring of `N` entries of `T`, with the local copy of the index this side moves.
struct Ring<T, const N: usize> {
    _mapping: Mapping,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    entries: NonNull<T>,
    /// The index this side owns (producer or consumer), as last published.
    own: u32,
}

// SAFETY: the ring owns its mapping (a pointer and a length, no thread-local state) and is
// reached through `&mut self` or `&self` of its owner only: moving the owner moves all access.
unsafe impl<T: Copy, const N: usize> Send for Ring<T, N> {}

impl<T: Copy, const N: usize> Ring<T, N> {
    /// Maps the ring at page offset `pgoff` of socket `fd`, laid out as `off` says.
    fn map(fd: BorrowedFd<'_>, pgoff: u64, off: &Offsets, producing: bool) -> std::io::Result<Self> {
        assert!(N.is_power_of_two() && N <= 1 << 16, "ring sizes are powers of two up to 65536");
        let words = [off.producer, off.consumer, off.flags];
        let fits = |at: u64, size: u64, align: u64| at % align == 0 && at.checked_add(size).is_some();
        if !words.iter().all(|&w| fits(w, 4, 4)) || !fits(off.desc, (N * size_of::<T>()) as u64, align_of::<T>() as u64)
        {
            return Err(std::io::Error::other("the kernel's ring offsets are misaligned"));
        }
        let len =
            words.iter().map(|w| w + 4).chain([off.desc + (N * size_of::<T>()) as u64]).max().unwrap_or(0) as usize;
        let offset = libc::off_t::try_from(pgoff).map_err(|_| std::io::Error::other("ring offset too large"))?;
        // SAFETY: a fresh shared mapping at an address the kernel chooses, overlapping no Rust
        // object; checked for MAP_FAILED before use.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                offset,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let base = NonNull::new(addr.cast::<u8>()).ok_or_else(|| std::io::Error::other("mmap returned NULL"))?;
        let at = |o: u64| {
            // SAFETY: each of the four offsets plus its size is at most `len` (computed above
            // as the largest end), so the pointer is inside the mapping, and aligned (checked
            // above; the mapping is page-aligned).
            unsafe { base.add(o as usize) }
        };
        let mut ring = Ring {
            _mapping: Mapping { ptr: base, len },
            producer: at(off.producer).cast(),
            consumer: at(off.consumer).cast(),
            flags: at(off.flags).cast(),
            entries: at(off.desc).cast(),
            own: 0,
        };
        let own = if producing { ring.producer } else { ring.consumer };
        ring.own = ring.word(own).load(Ordering::Relaxed);
        Ok(ring)
    }

    fn word(&self, w: NonNull<AtomicU32>) -> &AtomicU32 {
        // SAFETY: `w` is one of the ring's three words: in the mapping, aligned, alive while
        // `self` is; the kernel updates it atomically, and this side only atomically.
        unsafe { w.as_ref() }
    }

    /// The entry `k` places after this side's index.
    #[inline(always)]
    fn slot(&self, k: usize) -> *mut T {
        // SAFETY: the index is reduced modulo `N` (a power of two) and the mapping holds `N`
        // entries from `entries`.
        unsafe { self.entries.as_ptr().add((self.own as usize).wrapping_add(k) & (N - 1)) }
    }
}

/// A ring this process fills and the kernel empties: the fill ring (UMEM offsets to receive
/// into) or the transmit ring ([`XdpDesc`]s).
pub struct Producer<T, const N: usize> {
    ring: Ring<T, N>,
}

impl<T: Copy, const N: usize> Producer<T, N> {
    pub(super) fn map(fd: BorrowedFd<'_>, pgoff: u64, off: &Offsets) -> std::io::Result<Self> {
        Ok(Producer { ring: Ring::map(fd, pgoff, off, true)? })
    }

    /// Entries free to be written: `N` less those the kernel has not consumed yet (its
    /// consumer word is untrusted, so the count is never above `N`).
    #[inline(always)]
    pub fn free(&self) -> usize {
        let consumer = self.ring.word(self.ring.consumer).load(Ordering::Acquire);
        N.saturating_sub(self.ring.own.wrapping_sub(consumer) as usize)
    }

    /// Writes `value` `k` places past the last published entry; [`Producer::submit`] hands it
    /// to the kernel. Any value is sound: the kernel checks what it takes.
    #[inline(always)]
    pub fn write(&mut self, k: usize, value: T) {
        // SAFETY: `slot` is inside the mapping and aligned; the entry is plain integers, and
        // the kernel reads it only after the release store of `submit`.
        unsafe { self.ring.slot(k).write_volatile(value) }
    }

    /// Publishes the next `n` entries.
    #[inline(always)]
    pub fn submit(&mut self, n: usize) {
        self.ring.own = self.ring.own.wrapping_add(n as u32);
        self.ring.word(self.ring.producer).store(self.ring.own, Ordering::Release);
    }

    /// Whether the kernel has not consumed every entry published yet.
    #[inline(always)]
    pub fn unconsumed(&self) -> bool {
        self.ring.word(self.ring.consumer).load(Ordering::Acquire) != self.ring.own
    }

    /// Whether the kernel asks for a system call before it looks at the ring again.
    #[inline(always)]
    pub fn needs_wakeup(&self) -> bool {
        self.ring.word(self.ring.flags).load(Ordering::Relaxed) & NEED_WAKEUP != 0
    }
}

impl<const N: usize> Producer<XdpDesc, N> {
    /// [`Producer::write`] of a descriptor of `len` bytes at `addr` with no options, as two
    /// 8-byte stores (a 16-byte value would go through the stack).
    #[inline(always)]
    pub fn write_desc(&mut self, k: usize, addr: u64, len: u32) {
        let slot = self.ring.slot(k).cast::<u64>();
        // SAFETY: `slot` is an `XdpDesc` inside the mapping, 8-byte aligned (`Ring::map`
        // checked the descriptors' alignment), whose first word is `addr` and whose second
        // is `len` then `options` (little-endian x86-64); plain integers, as `write`.
        unsafe {
            slot.write_volatile(addr);
            slot.add(1).write_volatile(u64::from(len));
        }
    }
}

impl<const N: usize> Consumer<XdpDesc, N> {
    /// The UMEM offset and length of the descriptor `k` places past the last released one
    /// (untrusted), without its options.
    #[inline(always)]
    pub fn read_desc(&self, k: usize) -> (u64, u32) {
        let slot = self.ring.slot(k);
        // SAFETY: as `read`, of two of the descriptor's fields, each in bounds and aligned.
        unsafe { ((&raw const (*slot).addr).read_volatile(), (&raw const (*slot).len).read_volatile()) }
    }
}

/// A ring the kernel fills and this process empties: the receive ring ([`XdpDesc`]s) or the
/// completion ring (UMEM offsets of sent frames).
pub struct Consumer<T, const N: usize> {
    ring: Ring<T, N>,
}

impl<T: Copy, const N: usize> Consumer<T, N> {
    pub(super) fn map(fd: BorrowedFd<'_>, pgoff: u64, off: &Offsets) -> std::io::Result<Self> {
        Ok(Consumer { ring: Ring::map(fd, pgoff, off, false)? })
    }

    /// Entries the kernel has published and this side not yet released, at most `N` whatever
    /// the kernel's producer word says.
    #[inline(always)]
    pub fn available(&self) -> usize {
        let producer = self.ring.word(self.ring.producer).load(Ordering::Acquire);
        (producer.wrapping_sub(self.ring.own) as usize).min(N)
    }

    /// The entry `k` places past the last released one: untrusted, as the kernel wrote it.
    #[inline(always)]
    pub fn read(&self, k: usize) -> T {
        // SAFETY: inside the mapping and aligned (`slot`); plain integers, valid whatever the
        // kernel wrote, read after the acquire load of `available`.
        unsafe { self.ring.slot(k).read_volatile() }
    }

    /// Gives the next `n` entries back to the kernel.
    #[inline(always)]
    pub fn release(&mut self, n: usize) {
        self.ring.own = self.ring.own.wrapping_add(n as u32);
        self.ring.word(self.ring.consumer).store(self.ring.own, Ordering::Release);
    }
}
