//! Shared memory mappings with bounds-checked volatile access.
//!
//! A [`MappedRegion`] is memory that another party may read or write at any time: a device's
//! BAR (the driver writes registers, nicsim writes status), DMA memory (the device writes
//! packets and descriptors). Every access is volatile (or a raw copy for byte ranges), so the
//! compiler neither caches nor elides it, and every access is bounds-checked, so no caller can
//! reach outside the mapping. Values are plain integers and bytes, which have no invalid bit
//! patterns: whatever the other side writes, reading it is sound.
//!
//! # Soundness
//! A [`MappedRegion`] owns its mapping until it is dropped and hands out no Rust reference into
//! it: every access checks its range and is a volatile access or a raw copy, so what another
//! party writes meanwhile is only bytes read. It maps only regular files outside sysfs (no
//! device's registers, `crate::i82599` maps those) and anonymous memory, and in a process with a
//! real device never a page a live mapping covers (`crate::mapped_once`). A file shrunk under its
//! mapping makes an access raise SIGBUS, which ends the process, never reads or writes past the
//! mapping. [`Span`] is a range proved inside a borrowed region; [`MappedRegion::as_ptr`] is a
//! pointer, which only `unsafe` code can use.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

/// An `mmap`ed region shared with another process or a device.
///
/// Its accesses are volatile (for aligned integers) or plain copies: the compiler neither drops
/// nor merges them, but they are not atomic. The other party (a device, another process, or
/// nicsim's engine through its own mapping of the same file) is outside this program's memory
/// model, as memory-mapped I/O is; what orders the two sides are explicit fences and the
/// protocol (descriptors before tails, data before DD). Within this program a region is used
/// from one thread at a time: it is `Send` but not `Sync`, so sharing one between threads does
/// not compile, and a process that drives a real device refuses a second region over the same
/// pages (`mapped_once`):
///
/// ```compile_fail,E0277
/// let r = platform::MappedRegion::anonymous(4096).unwrap();
/// std::thread::scope(|s| {
///     s.spawn(|| r.write_u32(0, 1));
///     r.write_u32(0, 2);
/// });
/// ```
#[derive(Debug)]
pub struct MappedRegion {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the region is memory owned by this value until `Drop` (a pointer and a length, no
// thread-local state); moving the owner to another thread moves all access with it.
unsafe impl Send for MappedRegion {}

/// `MAP_HUGE_2MB`: log2(2 MiB) in the mmap flag bits reserved for the huge page size.
const MAP_HUGE_2MB: libc::c_int = 21 << libc::MAP_HUGE_SHIFT;

impl MappedRegion {
    fn mmap(len: usize, flags: libc::c_int, fd: libc::c_int, offset: u64) -> io::Result<Self> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "cannot map 0 bytes"));
        }
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "mapping offset too large"))?;
        // SAFETY: a fresh mapping at an address the kernel chooses (NULL hint) cannot overlap
        // any existing Rust object; the result is checked for MAP_FAILED before use.
        let addr =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, offset) };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(addr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        Ok(MappedRegion { ptr, len })
    }

    /// Maps `len` bytes of `file` from `offset`, shared and writable. With `populate`, the
    /// kernel faults every page in at once (for hugetlbfs this also reserves the pages).
    ///
    /// A file shorter than `offset + len` is refused: a load or store past its end would raise
    /// SIGBUS, which the accessors' "never traps" precondition excludes. A file that shrinks
    /// *after* it is mapped makes such accesses trap all the same; the files mapped through
    /// here are assumed never to shrink while mapped: the hugetlbfs files of `DmaMemory` (created
    /// by this process and unlinked at once, so no one else can reach them), a PCI function's
    /// sysfs `resource0` (its size is the BAR's) and nicsim's BAR and configuration files (which
    /// only nicsim creates and sizes; truncating them under a running driver is outside what
    /// the types can prevent, as is unplugging a real card).
    ///
    /// Only regular files outside sysfs are mapped here: a PCI function's registers (sysfs
    /// `resource<N>`, `/dev/mem`, a UIO device) are mapped only by `PciFunction::map_bar0`
    /// (private to this crate), which claims the function first, so that no second mapping can
    /// program a device that a driver owns.
    pub fn map_file(file: &File, offset: u64, len: usize, populate: bool) -> io::Result<Self> {
        let meta = file.metadata()?;
        if !meta.file_type().is_file() || crate::fs::is_sysfs(file)? {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "not a regular file outside sysfs: device registers are mapped only through PciFunction::map_bar0, \
                 which claims the function",
            ));
        }
        Self::map_file_unchecked(file, offset, len, populate)
    }

    /// [`Self::map_file`] for any file, device registers included: for `map_bar0`.
    pub(crate) fn map_file_unchecked(file: &File, offset: u64, len: usize, populate: bool) -> io::Result<Self> {
        let size = file.metadata()?.len();
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|end| end > size) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the file has {size} bytes, fewer than the {len} bytes to map at offset {offset}"),
            ));
        }
        let mut flags = libc::MAP_SHARED;
        if populate {
            flags |= libc::MAP_POPULATE;
        }
        let range = crate::mapped_once::FileRange::of_file(file, offset, len)?;
        crate::mapped_once::map(range, || Self::mmap(len, flags, file.as_raw_fd(), offset))
    }

    /// Anonymous shared memory backed by 2 MiB hugepages, populated at once.
    pub fn anonymous_hugetlb(len: usize) -> io::Result<Self> {
        let flags = libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB | MAP_HUGE_2MB | libc::MAP_POPULATE;
        let region = Self::mmap(len, flags, -1, 0)?;
        crate::mapped_once::register_anonymous(&region);
        Ok(region)
    }

    /// Anonymous shared memory in ordinary pages (for tests that need no physical addresses).
    pub fn anonymous(len: usize) -> io::Result<Self> {
        let region = Self::mmap(len, libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_POPULATE, -1, 0)?;
        crate::mapped_once::register_anonymous(&region);
        Ok(region)
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never: mappings have at least one page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first byte of the mapping, valid for reads and writes of `len()` bytes until this
    /// region is dropped. For the `invariants` kernel, which builds typed volatile references.
    pub fn as_ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Volatile typed access to the whole mapping ([`invariants::DeviceMemory`]), for as long
    /// as the region is borrowed.
    pub fn device_memory(&self) -> invariants::DeviceMemory<'_> {
        // SAFETY: the mapping is `len` readable and writable bytes at `ptr` until `self` is
        // dropped, which the borrow prevents meanwhile; no Rust reference into it is ever made
        // (every access through this type and through `DeviceMemory` is volatile or a raw copy).
        unsafe { invariants::DeviceMemory::from_raw_parts(self.ptr, self.len) }
    }

    /// The virtual address of the first byte, for `/proc/self/pagemap` look-ups.
    pub fn virt_addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    #[inline(always)]
    fn check(&self, offset: usize, size: usize) {
        assert!(
            offset <= self.len && size <= self.len - offset,
            "access of {size} bytes at offset {offset:#x} is outside a mapping of {:#x} bytes",
            self.len
        );
    }

    /// Whether `[offset, offset + size)` lies inside the region.
    #[inline(always)]
    pub fn contains(&self, offset: usize, size: usize) -> bool {
        offset <= self.len && size <= self.len - offset
    }

    #[inline(always)]
    fn at<T>(&self, offset: usize) -> *mut T {
        self.check(offset, std::mem::size_of::<T>());
        // SAFETY: `check` proved `offset + size_of::<T>() <= len`, so the pointer stays inside
        // the mapping (or one past its end for size 0).
        unsafe { self.ptr.as_ptr().add(offset) }.cast::<T>()
    }

    /// Reads a little-endian `u32` at `offset` (volatile when aligned).
    #[inline(always)]
    pub fn read_u32(&self, offset: usize) -> u32 {
        let p = self.at::<u32>(offset);
        let v = if p.is_aligned() {
            // SAFETY: `p` is in bounds (see `at`), aligned, and any bit pattern is a valid u32.
            unsafe { p.read_volatile() }
        } else {
            // SAFETY: in bounds; `read_unaligned` has no alignment requirement.
            unsafe { p.read_unaligned() }
        };
        u32::from_le(v)
    }

    /// Writes a little-endian `u32` at `offset` (volatile when aligned).
    #[inline(always)]
    pub fn write_u32(&self, offset: usize, value: u32) {
        let p = self.at::<u32>(offset);
        if p.is_aligned() {
            // SAFETY: in bounds, aligned, writable shared mapping of plain bytes.
            unsafe { p.write_volatile(value.to_le()) }
        } else {
            // SAFETY: in bounds; `write_unaligned` has no alignment requirement.
            unsafe { p.write_unaligned(value.to_le()) }
        }
    }

    /// Replaces the aligned `u32` at `offset` by `new` if it holds `current`, atomically against
    /// other processes' stores to the same shared mapping; returns the value found.
    #[inline(always)]
    pub fn compare_exchange_u32(&self, offset: usize, current: u32, new: u32) -> Result<u32, u32> {
        let p = self.at::<u32>(offset);
        assert!(p.is_aligned(), "compare-exchange at unaligned offset {offset:#x}");
        // SAFETY: `p` is in bounds (see `at`) and aligned for u32, which is AtomicU32's
        // alignment; the mapping lives as long as `self`, and every other access to these
        // bytes is a volatile or atomic access of the same size, never a plain reference.
        let atomic = unsafe { std::sync::atomic::AtomicU32::from_ptr(p) };
        atomic
            .compare_exchange(
                current.to_le(),
                new.to_le(),
                std::sync::atomic::Ordering::SeqCst,
                std::sync::atomic::Ordering::SeqCst,
            )
            .map(u32::from_le)
            .map_err(u32::from_le)
    }

    /// Reads a little-endian `u64` at `offset` (volatile when aligned).
    #[inline(always)]
    pub fn read_u64(&self, offset: usize) -> u64 {
        let p = self.at::<u64>(offset);
        let v = if p.is_aligned() {
            // SAFETY: `p` is in bounds, aligned, and any bit pattern is a valid u64.
            unsafe { p.read_volatile() }
        } else {
            // SAFETY: in bounds; `read_unaligned` has no alignment requirement.
            unsafe { p.read_unaligned() }
        };
        u64::from_le(v)
    }

    /// Writes a little-endian `u64` at `offset` as one store when aligned.
    #[inline(always)]
    pub fn write_u64(&self, offset: usize, value: u64) {
        let p = self.at::<u64>(offset);
        if p.is_aligned() {
            // SAFETY: in bounds, aligned, writable shared mapping of plain bytes.
            unsafe { p.write_volatile(value.to_le()) }
        } else {
            // SAFETY: in bounds; `write_unaligned` has no alignment requirement.
            unsafe { p.write_unaligned(value.to_le()) }
        }
    }

    /// Reads a `u16` at `offset`.
    #[inline(always)]
    pub fn read_u16(&self, offset: usize) -> u16 {
        let p = self.at::<u16>(offset);
        // SAFETY: in bounds; `read_unaligned` has no alignment requirement; any bits are a u16.
        u16::from_le(unsafe { p.read_unaligned() })
    }

    /// Writes a `u16` at `offset`.
    #[inline(always)]
    pub fn write_u16(&self, offset: usize, value: u16) {
        let p = self.at::<u16>(offset);
        // SAFETY: in bounds; `write_unaligned` has no alignment requirement.
        unsafe { p.write_unaligned(value.to_le()) }
    }

    /// Copies `dst.len()` bytes starting at `offset` into `dst`.
    #[inline(always)]
    pub fn read_bytes(&self, offset: usize, dst: &mut [u8]) {
        let src = self.at_range(offset, dst.len());
        // SAFETY: `src..src+len` is inside the mapping (checked); `dst` is a distinct Rust
        // buffer, so the ranges cannot overlap; bytes have no invalid values.
        unsafe { copy_bytes(src, dst.as_mut_ptr(), dst.len()) }
    }

    /// Appends `len` bytes from `offset` to `dst`, without first zero-filling them.
    #[inline(always)]
    pub fn read_append(&self, offset: usize, len: usize, dst: &mut Vec<u8>) {
        let src = self.at_range(offset, len);
        dst.reserve(len);
        let spare = dst.spare_capacity_mut();
        // SAFETY: `src..src+len` is inside the mapping (checked); `spare` has room for `len`
        // bytes (reserved) and is a distinct Rust allocation, so the ranges cannot overlap.
        unsafe { copy_bytes(src, spare.as_mut_ptr().cast::<u8>(), len) }
        let filled = dst.len() + len;
        // SAFETY: the `len` bytes after the old length were initialised by the copy above.
        unsafe { dst.set_len(filled) }
    }

    /// Copies `src` into the region starting at `offset`.
    #[inline(always)]
    pub fn write_bytes(&self, offset: usize, src: &[u8]) {
        let dst = self.at_range(offset, src.len());
        // SAFETY: the destination range is inside the writable mapping (checked) and cannot
        // overlap `src`, a Rust slice that is not part of any `MappedRegion` we hand out.
        unsafe { copy_bytes(src.as_ptr(), dst, src.len()) }
    }

    /// Sets `len` bytes from `offset` to `byte`.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) {
        let dst = self.at_range(offset, len);
        // SAFETY: the range is inside the writable mapping (checked).
        unsafe { std::ptr::write_bytes(dst, byte, len) }
    }

    /// The index of the first little-endian `u32` at `offset + 4 * i` that differs from
    /// `known[i]`, or `None` if none does: one pass that reads the region and `known`
    /// together, for finding what a process sharing the mapping has changed.
    ///
    /// # Panics
    /// If the range is outside the region.
    pub fn first_difference(&self, offset: usize, known: &[u32]) -> Option<usize> {
        let base = self.at_range(offset, known.len() * 4);
        let differs = |i: usize| {
            // SAFETY: callers pass `i < known.len()`, so the 4 bytes at `4 * i` are inside the
            // checked range; `read_unaligned` has no alignment requirement.
            let v = u32::from_le(unsafe { base.add(i * 4).cast::<u32>().read_unaligned() });
            v != known[i]
        };
        // Eight bytes at a time from the first 8-aligned dword on; one dword before it if needed.
        let mut i = 0;
        if !base.cast::<u64>().is_aligned() && !known.is_empty() {
            if differs(0) {
                return Some(0);
            }
            i = 1;
        }
        if base.wrapping_add(i * 4).cast::<u64>().is_aligned() {
            for pair in known[i..].chunks_exact(2) {
                // SAFETY: the pair's 8 bytes at `4 * i` lie inside the checked range, and are
                // 8-aligned (checked above; `i` advances by 2).
                let v = u64::from_le(unsafe { base.add(i * 4).cast::<u64>().read_volatile() });
                if v != u64::from(pair[0]) | u64::from(pair[1]) << 32 {
                    break;
                }
                i += 2;
            }
        }
        (i..known.len()).find(|&i| differs(i))
    }

    /// The `len` bytes at `offset`, checked once to lie inside the region and to be at least
    /// `MIN` long: the [`Span`]'s accesses at offsets fixed at compile time below `MIN` need no
    /// further check. `None` if the range is outside the region or shorter than `MIN`.
    #[inline(always)]
    pub fn span<const MIN: usize>(&self, offset: usize, len: usize) -> Option<Span<'_, MIN>> {
        if len < MIN || !self.contains(offset, len) {
            return None;
        }
        // SAFETY: `contains` proved `offset + len <= self.len`, so the pointer stays inside
        // the mapping.
        let ptr = unsafe { self.ptr.as_ptr().add(offset) };
        Some(Span { ptr, len, region: std::marker::PhantomData })
    }

    /// Hints that the cache line at `offset` will be read soon, so that its transfer from
    /// another core overlaps other work. Only a hint: nothing happens outside the region, and
    /// a prefetch never faults or changes memory.
    #[inline(always)]
    pub fn prefetch_read(&self, offset: usize) {
        #[cfg(target_arch = "x86_64")]
        if offset < self.len {
            // SAFETY: `offset < len`, so the address is inside the mapping; PREFETCHT0 only
            // moves a line into the cache and cannot fault or write.
            unsafe {
                std::arch::asm!("prefetcht0 [{}]", in(reg) self.ptr.as_ptr().add(offset), options(nostack, preserves_flags, readonly))
            };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = offset;
    }

    #[inline(always)]
    fn at_range(&self, offset: usize, len: usize) -> *mut u8 {
        self.check(offset, len);
        // SAFETY: `check` proved `offset + len <= self.len`.
        unsafe { self.ptr.as_ptr().add(offset) }
    }
}

/// `len()` bytes of a [`MappedRegion`], at least `MIN`, proved inside it when the span was
/// made ([`MappedRegion::span`]). Accesses at compile-time offsets are checked against `MIN`
/// by the compiler, so a per-frame path that writes a few fields of a packet buffer pays one
/// run-time check for all of them. Like the region, it hands out no Rust reference.
#[derive(Debug, Clone, Copy)]
pub struct Span<'a, const MIN: usize> {
    ptr: *mut u8,
    len: usize,
    region: std::marker::PhantomData<&'a MappedRegion>,
}

impl<const MIN: usize> Span<'_, MIN> {
    /// Length in bytes (at least `MIN`).
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never: a span has at least `MIN` bytes, and spans of 0 bytes hold nothing to access.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes a little-endian `u64` at byte `AT` (unaligned allowed).
    #[inline(always)]
    pub fn write_u64<const AT: usize>(&self, value: u64) {
        const { assert!(AT + 8 <= MIN, "a span field must lie inside its guaranteed length") };
        // SAFETY: `AT + 8 <= MIN <= len` (checked at compile time and when the span was made),
        // so the store stays inside the mapping; unaligned stores have no alignment rule.
        unsafe { self.ptr.add(AT).cast::<u64>().write_unaligned(value.to_le()) }
    }

    /// Writes a little-endian `u32` at byte `AT` (unaligned allowed).
    #[inline(always)]
    pub fn write_u32<const AT: usize>(&self, value: u32) {
        const { assert!(AT + 4 <= MIN, "a span field must lie inside its guaranteed length") };
        // SAFETY: as `write_u64`, for 4 bytes.
        unsafe { self.ptr.add(AT).cast::<u32>().write_unaligned(value.to_le()) }
    }

    /// Writes a little-endian `u16` at byte `AT` (unaligned allowed).
    #[inline(always)]
    pub fn write_u16<const AT: usize>(&self, value: u16) {
        const { assert!(AT + 2 <= MIN, "a span field must lie inside its guaranteed length") };
        // SAFETY: as `write_u64`, for 2 bytes.
        unsafe { self.ptr.add(AT).cast::<u16>().write_unaligned(value.to_le()) }
    }

    /// The first `N` bytes.
    #[inline(always)]
    pub fn read_head<const N: usize>(&self) -> [u8; N] {
        const { assert!(N <= MIN, "a span read must lie inside its guaranteed length") };
        // SAFETY: `N <= MIN <= len`, so the read stays inside the mapping; any bytes are a
        // valid `[u8; N]`, and `read_unaligned` has no alignment rule.
        unsafe { self.ptr.cast::<[u8; N]>().read_unaligned() }
    }

    /// Copies `src` into the span's first bytes, or its first `len()` bytes if `src` is longer.
    #[inline(always)]
    pub fn write_from(&self, src: &[u8]) {
        let n = src.len().min(self.len);
        // SAFETY: `n <= len`, so the destination is inside the mapping; `src` is a Rust slice,
        // never part of a mapping we hand out, so the ranges cannot overlap.
        unsafe { copy_bytes(src.as_ptr(), self.ptr, n) }
    }
}

/// Copies `len` bytes between two ranges that do not overlap. Lengths of 32 to 64 bytes (a
/// minimum-size frame) are two overlapping 32-byte moves inline, a few instructions instead of
/// a call into `memcpy` and its size dispatch; a packet simulator copies such frames tens of
/// millions of times a second. Bytes where the two moves overlap are stored twice, so this
/// is for data no other agent may write meanwhile (packet buffers), not for words another
/// process polls and rewrites (descriptors): its write could land between the two stores.
///
/// # Safety
/// `src..src + len` must be readable, `dst..dst + len` writable, and the two must not overlap.
#[inline(always)]
unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    if (32..=64).contains(&len) {
        // SAFETY: both moves stay inside `[0, len)` of their range (32 <= len), which the
        // caller guarantees valid; unaligned moves have no alignment requirement.
        unsafe {
            let head = src.cast::<[u8; 32]>().read_unaligned();
            let tail = src.add(len - 32).cast::<[u8; 32]>().read_unaligned();
            dst.cast::<[u8; 32]>().write_unaligned(head);
            dst.add(len - 32).cast::<[u8; 32]>().write_unaligned(tail);
        }
    } else {
        // SAFETY: the caller's guarantees are exactly `copy_nonoverlapping`'s.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
    }
}

impl Drop for MappedRegion {
    fn drop(&mut self) {
        crate::mapped_once::unmap(self.virt_addr(), || {
            // SAFETY: `ptr`/`len` describe exactly the mapping created in `mmap`, and no
            // reference into it outlives `self` (none is ever handed out).
            unsafe {
                libc::munmap(self.ptr.as_ptr().cast(), self.len);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_shorter_than_the_mapping_is_refused() {
        // Mapping 8 KiB over a 4 KiB file used to succeed, and reading its second page died of
        // SIGBUS.
        let path = std::env::temp_dir().join(format!("platform-short-{}", std::process::id()));
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        file.set_len(4096).unwrap();
        let e = MappedRegion::map_file(&file, 0, 8192, false).unwrap_err();
        assert!(e.to_string().contains("4096 bytes"), "{e}");
        assert!(MappedRegion::map_file(&file, 4096, 4096, false).is_err(), "offset + length past the end");
        assert!(MappedRegion::map_file(&file, u64::MAX - 1, 4096, false).is_err(), "overflowing end");
        let whole = MappedRegion::map_file(&file, 0, 4096, false).unwrap();
        assert_eq!(whole.read_u32(4092), 0);
    }

    #[test]
    fn device_registers_are_not_mapped_as_files() {
        // A sysfs file (a PCI function's resource0 is one) and a character device (/dev/mem,
        // /dev/uioN) used to be mapped by this safe call, past the function's claim.
        for path in ["/sys/devices/system/cpu/online", "/dev/zero"] {
            let f = File::open(path).unwrap();
            let e = MappedRegion::map_file(&f, 0, 4096, false).expect_err(path);
            assert!(e.to_string().contains("map_bar0"), "{path}: {e}");
        }
    }

    #[test]
    fn integers_round_trip_little_endian() {
        let r = MappedRegion::anonymous(4096).unwrap();
        r.write_u32(8, 0x1234_5678);
        assert_eq!(r.read_u32(8), 0x1234_5678);
        let mut b = [0u8; 4];
        r.read_bytes(8, &mut b);
        assert_eq!(b, [0x78, 0x56, 0x34, 0x12]);
        r.write_u64(16, 0x0102_0304_0506_0708);
        assert_eq!(r.read_u64(16), 0x0102_0304_0506_0708);
        r.write_u64(3, u64::MAX); // unaligned
        assert_eq!(r.read_u64(3), u64::MAX);
        assert_eq!(r.read_u16(3), 0xFFFF);
    }

    #[test]
    fn bulk_and_fill() {
        let r = MappedRegion::anonymous(4096).unwrap();
        r.fill(0, 4096, 0xFF);
        assert_eq!(r.read_u32(100), u32::MAX);
        r.write_bytes(4090, &[1, 2, 3, 4, 5, 6]);
        let mut tail = [0u8; 6];
        r.read_bytes(4090, &mut tail);
        assert_eq!(tail, [1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn copies_of_every_small_length_are_exact() {
        let r = MappedRegion::anonymous(4096).unwrap();
        for len in 0..=80usize {
            let data: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(7).wrapping_add(1)).collect();
            r.fill(0, 256, 0xEE);
            r.write_bytes(100, &data);
            let mut back = vec![0u8; len + 2];
            r.read_bytes(99, &mut back);
            assert_eq!(back[0], 0xEE, "nothing written before, length {len}");
            assert_eq!(&back[1..=len], &data[..], "length {len}");
            assert_eq!(back[len + 1], 0xEE, "nothing written after, length {len}");
            let mut appended = vec![9u8];
            r.read_append(100, len, &mut appended);
            assert_eq!(&appended[1..], &data[..]);
        }
    }

    #[test]
    fn read_append_extends_without_touching_what_was_there() {
        let r = MappedRegion::anonymous(4096).unwrap();
        r.write_bytes(4093, &[7, 8, 9]);
        let mut v = vec![1, 2];
        r.read_append(4093, 3, &mut v);
        assert_eq!(v, [1, 2, 7, 8, 9]);
        r.read_append(0, 0, &mut v);
        assert_eq!(v.len(), 5);
    }

    #[test]
    #[should_panic(expected = "outside a mapping")]
    fn read_append_past_the_end_panics() {
        let r = MappedRegion::anonymous(4096).unwrap();
        r.read_append(4094, 3, &mut Vec::new());
    }

    #[test]
    #[should_panic(expected = "outside a mapping")]
    fn out_of_bounds_panics_instead_of_touching_memory() {
        let r = MappedRegion::anonymous(4096).unwrap();
        r.read_u32(4094);
    }

    #[test]
    fn spans_check_once_and_reach_only_their_bytes() {
        let r = MappedRegion::anonymous(4096).unwrap();
        r.fill(0, 4096, 0xEE);
        assert!(r.span::<16>(4090, 6).is_none(), "shorter than MIN");
        assert!(r.span::<4>(4094, 4).is_none(), "past the end");
        assert!(r.span::<0>(usize::MAX, 2).is_none(), "offset overflow");
        let s = r.span::<16>(100, 20).unwrap();
        assert_eq!(s.len(), 20);
        s.write_from(&[1u8; 30]); // longer than the span: only its 20 bytes
        assert_eq!(r.read_u32(120), 0xEEEE_EEEE);
        assert_eq!(r.read_u32(116), 0x0101_0101);
        s.write_u64::<3>(0x0807_0605_0403_0201);
        s.write_u32::<11>(0xAABB_CCDD);
        s.write_u16::<14>(0x1234);
        let head: [u8; 16] = s.read_head();
        assert_eq!(head, [1, 1, 1, 1, 2, 3, 4, 5, 6, 7, 8, 0xDD, 0xCC, 0xBB, 0x34, 0x12]);
        let mut before = [0u8];
        r.read_bytes(99, &mut before);
        assert_eq!(before, [0xEE]);
    }

    #[test]
    fn first_difference_finds_every_position_at_every_alignment() {
        let r = MappedRegion::anonymous(4096).unwrap();
        for offset in [0usize, 2, 4, 8, 12, 1024] {
            for len in [0usize, 1, 2, 3, 7, 64] {
                let known: Vec<u32> = (0..len as u32).map(|i| i.wrapping_mul(0x9E37_79B9)).collect();
                for (i, v) in known.iter().enumerate() {
                    r.write_u32(offset + 4 * i, *v);
                }
                assert_eq!(r.first_difference(offset, &known), None, "offset {offset} len {len}");
                for changed in 0..len {
                    // A change in any one byte of any dword, also behind an earlier equal pair.
                    for byte in 0..4 {
                        let at = offset + 4 * changed + byte;
                        let mut old = [0u8];
                        r.read_bytes(at, &mut old);
                        r.write_bytes(at, &[old[0] ^ 0x80]);
                        assert_eq!(r.first_difference(offset, &known), Some(changed), "offset {offset} len {len}");
                        r.write_bytes(at, &old);
                    }
                }
                // The first of two differences is reported.
                if len >= 3 {
                    r.write_u32(offset + 4, !known[1]);
                    r.write_u32(offset + 8, !known[2]);
                    assert_eq!(r.first_difference(offset, &known), Some(1));
                    r.write_u32(offset + 4, known[1]);
                    r.write_u32(offset + 8, known[2]);
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "outside a mapping")]
    fn first_difference_past_the_end_panics() {
        let r = MappedRegion::anonymous(4096).unwrap();
        r.first_difference(4088, &[0, 0, 0]);
    }

    #[test]
    fn contains_is_overflow_safe() {
        let r = MappedRegion::anonymous(4096).unwrap();
        assert!(r.contains(0, 4096));
        assert!(!r.contains(1, 4096));
        assert!(!r.contains(usize::MAX, 2));
        assert!(!r.contains(4000, usize::MAX));
    }
}
