//! Lifetime-bound volatile references into memory shared with a device.
//!
//! # Soundness
//! Every reference made here is in bounds and aligned, checked once when it is made, and is
//! accessed only with volatile loads and stores of types valid for every bit pattern
//! ([`crate::DeviceValue`]); none hands out a Rust reference into the memory. A
//! [`DeviceMemory`] is made only over a mapping, outside any Rust allocation, by the one that
//! owns the mapping, through the `unsafe` [`DeviceMemory::from_raw_parts`], whose contract is
//! that. Volatile accesses there are I/O whose effect the device defines, also when two
//! threads make them at once: the references are `Send`, so that a queue can be handed to
//! the thread that serves it, and not `Sync` (a queue is held by one thread).

use crate::ring::{ConstIndex, RingIndex};
use crate::DeviceValue;
use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::ptr::NonNull;

/// A block of memory that a device may read and write at any time (DMA memory, a BAR), valid
/// for `'a`. It is only ever accessed with volatile operations through the references it makes.
#[derive(Clone, Copy)]
pub struct DeviceMemory<'a> {
    ptr: NonNull<u8>,
    len: usize,
    _memory: PhantomData<&'a UnsafeCell<[u8]>>,
}

// SAFETY: the memory is a mapping outside any Rust allocation (`from_raw_parts`' contract),
// reached only by volatile accesses, which are I/O the device orders: made from another
// thread, they race only as the device's own accesses do, which every reader already treats
// as untrusted input. Nothing here is tied to the thread that made it.
unsafe impl Send for DeviceMemory<'_> {}

impl<'a> DeviceMemory<'a> {
    /// Device memory over `len` bytes at `ptr`: a mapping of the platform layer (a BAR, a
    /// hugepage block), which makes these for what it maps (`platform::MappedRegion`).
    ///
    /// # Safety
    /// `[ptr, ptr + len)` must be a mapping outside any Rust allocation (`mmap`ed memory, not
    /// a Rust object), readable and writable for all of `'a`, and never be reached through a
    /// Rust reference (`&T`, `&mut T`) meanwhile: only volatile accesses, of this process's
    /// threads or of a device, may touch it.
    pub unsafe fn from_raw_parts(ptr: NonNull<u8>, len: usize) -> Self {
        // INVARIANT: the caller's contract is the type's.
        DeviceMemory { ptr, len, _memory: PhantomData }
    }

    /// Device memory over ordinary memory, for this crate's tests: a Rust allocation, which
    /// the `Send` references must never reach from outside them.
    #[cfg(test)]
    pub(crate) fn from_words(words: &'a mut [u64]) -> Self {
        let len = core::mem::size_of_val(words);
        // INVARIANT: the exclusive borrow keeps every other reference away for `'a`.
        DeviceMemory { ptr: NonNull::from(words).cast::<u8>(), len, _memory: PhantomData }
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the block is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn checked<T>(&self, offset: usize, count: usize) -> Option<NonNull<T>> {
        let bytes = core::mem::size_of::<T>().checked_mul(count)?;
        if offset > self.len || bytes > self.len - offset {
            return None;
        }
        // SAFETY: `offset <= len`, so the result stays inside (or one past) the block.
        let p = unsafe { self.ptr.add(offset) }.cast::<T>();
        p.is_aligned().then_some(p)
    }

    /// A reference to the `T` at `offset`; `None` if it is outside the block or misaligned.
    pub fn ptr<T: DeviceValue>(&self, offset: usize) -> Option<VolatilePtr<'a, T>> {
        // INVARIANT: in bounds and aligned (checked).
        self.checked::<T>(offset, 1).map(|ptr| VolatilePtr { ptr, _memory: PhantomData })
    }

    /// A reference to `N` consecutive `T`s at `offset`; `None` if outside or misaligned.
    pub fn array<T: DeviceValue, const N: usize>(&self, offset: usize) -> Option<VolatileArray<'a, T, N>> {
        // INVARIANT: all N elements in bounds and aligned (checked).
        self.checked::<T>(offset, N).map(|ptr| VolatileArray { ptr, _memory: PhantomData })
    }
}

/// A non-owning reference to one `T` in device memory, valid for `'a`; every access is
/// volatile. Copying it is free and accessing it needs no check.
pub struct VolatilePtr<'a, T> {
    // INVARIANT: points to a properly aligned `T` inside a `DeviceMemory<'a>`.
    ptr: NonNull<T>,
    _memory: PhantomData<&'a UnsafeCell<T>>,
}

// SAFETY: as for `DeviceMemory`, whose memory the pointer is in (type invariant).
unsafe impl<T: DeviceValue> Send for VolatilePtr<'_, T> {}

impl<T> Clone for VolatilePtr<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for VolatilePtr<'_, T> {}

impl<'a, T: DeviceValue> VolatilePtr<'a, T> {
    /// A volatile load.
    #[inline(always)]
    pub fn read(self) -> T {
        // SAFETY: the pointer is in bounds and aligned (type invariant) and every bit pattern is
        // a valid `T` (`FromBytes`), whatever the device wrote. The memory is device memory
        // (registers, where a read may have side effects, or DMA memory the device writes):
        // the one volatile access is the I/O the code asks for, and what the device does
        // concurrently is outside Rust's memory model, as for any MMIO.
        unsafe { self.ptr.read_volatile() }
    }

    /// The address, as a number (for an offset in a UMEM): no pointer can be made of it
    /// without `unsafe`.
    #[inline(always)]
    pub fn address(self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// A volatile store.
    #[inline(always)]
    pub fn write(self, value: T) {
        // SAFETY: in bounds and aligned (type invariant); the memory is writable for `'a` and
        // never referenced by a Rust `&`/`&mut` meanwhile. As for `read`, the store is one
        // volatile access to device memory, whose side effects (a doorbell) are the point.
        unsafe { self.ptr.write_volatile(value) }
    }
}

impl<'a, T: DeviceValue, const M: usize> VolatilePtr<'a, [T; M]> {
    /// Element `K` of the array, `K < M` checked at compile time.
    #[inline(always)]
    pub fn at<const K: usize>(self) -> VolatilePtr<'a, T> {
        const { assert!(K < M, "element index out of the array") };
        // SAFETY: K < M, so the element lies inside the array (type invariant) and is aligned.
        let ptr = unsafe { self.ptr.cast::<T>().add(K) };
        VolatilePtr { ptr, _memory: PhantomData }
    }
}

impl<'a, const M: usize> VolatilePtr<'a, [u8; M]> {
    /// Stores `bytes` at byte `OFFSET` (`OFFSET + K <= M` checked at compile time).
    #[inline(always)]
    pub fn write_bytes<const OFFSET: usize, const K: usize>(self, bytes: [u8; K]) {
        const { assert!(OFFSET + K <= M, "write past the end of the array") };
        // SAFETY: [OFFSET, OFFSET + K) is inside the array (checked at compile time); a byte
        // array has alignment 1.
        unsafe { self.ptr.cast::<u8>().add(OFFSET).cast::<[u8; K]>().write_volatile(bytes) }
    }

    /// Loads `K` bytes at byte `OFFSET` (`OFFSET + K <= M` checked at compile time).
    #[inline(always)]
    pub fn read_bytes<const OFFSET: usize, const K: usize>(self) -> [u8; K] {
        const { assert!(OFFSET + K <= M, "read past the end of the array") };
        // SAFETY: as in `write_bytes`; any bytes are valid.
        unsafe { self.ptr.cast::<u8>().add(OFFSET).cast::<[u8; K]>().read_volatile() }
    }

    /// Copies bytes `[offset, offset + dst.len())` into `dst`; false (nothing copied) if that
    /// range is outside the array. For control paths, not per-packet code.
    pub fn copy_to(self, offset: usize, dst: &mut [u8]) -> bool {
        copy_to_bytes(self.ptr.cast::<u8>(), M, offset, dst)
    }

    /// Copies `src` to bytes `[offset, offset + src.len())`; false (nothing written) if that
    /// range is outside the array.
    pub fn copy_from(self, offset: usize, src: &[u8]) -> bool {
        copy_from_bytes(self.ptr.cast::<u8>(), M, offset, src)
    }
}

/// Packet buffers: bytes in 8-byte words, so that stores of constant byte ranges can use the
/// widest aligned volatile store (the paper's MAC rewrite is one 8-byte and one 4-byte store,
/// as in C, instead of twelve byte stores).
impl<'a, const W: usize> VolatilePtr<'a, [u64; W]> {
    /// Stores `bytes` at byte `OFFSET`, a multiple of 8 (both checked at compile time, with
    /// `OFFSET + K <= 8 W`): `K / 8` word stores, then one 4-, 2- and 1-byte store as needed,
    /// all volatile. Every branch below depends only on constants, so this is straight-line
    /// code.
    #[inline(always)]
    pub fn write_bytes<const OFFSET: usize, const K: usize>(self, bytes: [u8; K]) {
        const {
            assert!(OFFSET + K <= W * 8, "write past the end of the array");
            assert!(OFFSET % 8 == 0, "word buffers are written from 8-byte aligned offsets");
        };
        let dst = self.ptr.cast::<u8>();
        let src = bytes.as_ptr();
        // SAFETY: for every store below, [OFFSET + i, OFFSET + i + width) lies inside the array,
        // since i + width <= K and OFFSET + K <= 8 W (checked at compile time); the array is
        // 8-byte aligned (type invariant of `VolatilePtr<[u64; W]>`) and OFFSET and i are
        // multiples of the width at each store, so every store is aligned; `src + i` has
        // `width` readable bytes of `bytes`, read unaligned; any bits are a valid integer.
        unsafe {
            for word in 0..K / 8 {
                let i = word * 8;
                dst.add(OFFSET + i).cast::<u64>().write_volatile(src.add(i).cast::<u64>().read_unaligned());
            }
            let mut i = K / 8 * 8;
            if K - i >= 4 {
                dst.add(OFFSET + i).cast::<u32>().write_volatile(src.add(i).cast::<u32>().read_unaligned());
                i += 4;
            }
            if K - i >= 2 {
                dst.add(OFFSET + i).cast::<u16>().write_volatile(src.add(i).cast::<u16>().read_unaligned());
                i += 2;
            }
            if K - i >= 1 {
                dst.add(OFFSET + i).write_volatile(src.add(i).read());
            }
        }
    }

    /// Loads `K` bytes at byte `OFFSET` (`OFFSET + K <= 8 W` checked at compile time).
    #[inline(always)]
    pub fn read_bytes<const OFFSET: usize, const K: usize>(self) -> [u8; K] {
        const { assert!(OFFSET + K <= W * 8, "read past the end of the array") };
        // SAFETY: [OFFSET, OFFSET + K) is inside the array (checked at compile time); a byte
        // array has alignment 1; any bytes are valid.
        unsafe { self.ptr.cast::<u8>().add(OFFSET).cast::<[u8; K]>().read_volatile() }
    }

    /// As [`VolatilePtr::<[u8; M]>::copy_to`], over the `8 W` bytes.
    pub fn copy_to(self, offset: usize, dst: &mut [u8]) -> bool {
        copy_to_bytes(self.ptr.cast::<u8>(), W * 8, offset, dst)
    }

    /// As [`VolatilePtr::<[u8; M]>::copy_from`], over the `8 W` bytes.
    pub fn copy_from(self, offset: usize, src: &[u8]) -> bool {
        copy_from_bytes(self.ptr.cast::<u8>(), W * 8, offset, src)
    }
}

/// Volatile byte copy out of `len` bytes at `base`, checked against the range.
fn copy_to_bytes(base: NonNull<u8>, len: usize, offset: usize, dst: &mut [u8]) -> bool {
    if offset > len || dst.len() > len - offset {
        return false;
    }
    for (i, d) in dst.iter_mut().enumerate() {
        // SAFETY: offset + i < len (checked above), and `base` has `len` bytes (callers pass
        // a `VolatilePtr`'s array and its size).
        *d = unsafe { base.add(offset + i).read_volatile() };
    }
    true
}

/// Volatile byte copy into `len` bytes at `base`, checked against the range.
fn copy_from_bytes(base: NonNull<u8>, len: usize, offset: usize, src: &[u8]) -> bool {
    if offset > len || src.len() > len - offset {
        return false;
    }
    for (i, s) in src.iter().enumerate() {
        // SAFETY: as in `copy_to_bytes`.
        unsafe { base.add(offset + i).write_volatile(*s) };
    }
    true
}

/// A non-owning reference to `N` consecutive `T`s in device memory (a descriptor ring, a
/// register file), valid for `'a`.
pub struct VolatileArray<'a, T, const N: usize> {
    // INVARIANT: points to N properly aligned `T`s inside a `DeviceMemory<'a>`.
    ptr: NonNull<T>,
    _memory: PhantomData<&'a UnsafeCell<[T; N]>>,
}

// SAFETY: as for `DeviceMemory`, whose memory the array is in (type invariant).
unsafe impl<T: DeviceValue, const N: usize> Send for VolatileArray<'_, T, N> {}

impl<T, const N: usize> Clone for VolatileArray<'_, T, N> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const N: usize> Copy for VolatileArray<'_, T, N> {}

impl<'a, T: DeviceValue, const N: usize> VolatileArray<'a, T, N> {
    /// The element at a ring index: no check, the index type proves `i < N`.
    #[inline(always)]
    pub fn ring(self, i: RingIndex<N>) -> VolatilePtr<'a, T> {
        // SAFETY: `RingIndex<N>` is always < N (its invariant), so the element is inside.
        let ptr = unsafe { self.ptr.add(i.get()) };
        VolatilePtr { ptr, _memory: PhantomData }
    }

    /// The element at an index proven in range when it was made (at compile time for
    /// constants).
    #[inline(always)]
    pub fn at(self, i: ConstIndex<N>) -> VolatilePtr<'a, T> {
        // SAFETY: `ConstIndex<N>` is always < N (its invariant).
        let ptr = unsafe { self.ptr.add(i.get()) };
        VolatilePtr { ptr, _memory: PhantomData }
    }

    /// The element at `i`, if `i < N` (control paths).
    pub fn get(self, i: usize) -> Option<VolatilePtr<'a, T>> {
        ConstIndex::new_checked(i).map(|i| self.at(i))
    }

    /// Physical-layout helper: the byte offset of element `i` from the array start.
    pub const fn byte_offset(i: usize) -> usize {
        i * core::mem::size_of::<T>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn pointers_are_checked_once_for_bounds_and_alignment() {
        let mut words = vec![0u64; 4];
        let mem = DeviceMemory::from_words(&mut words);
        assert_eq!(mem.len(), 32);
        assert!(mem.ptr::<u64>(24).is_some());
        assert!(mem.ptr::<u64>(25).is_none(), "misaligned");
        assert!(mem.ptr::<u64>(32).is_none(), "past the end");
        assert!(mem.ptr::<u32>(usize::MAX).is_none(), "overflow");
        assert!(mem.array::<u64, 4>(0).is_some());
        assert!(mem.array::<u64, 5>(0).is_none());
        assert!(mem.array::<u64, 2>(16).is_some());
        assert!(mem.array::<u64, 2>(24).is_none());
    }

    #[test]
    fn volatile_reads_see_writes_through_any_alias() {
        let mut words = vec![0u64; 8];
        let mem = DeviceMemory::from_words(&mut words);
        let ring = mem.array::<[u64; 2], 4>(0).unwrap();
        let i = RingIndex::<4>::new(3).unwrap();
        ring.ring(i).at::<1>().write(0xDEAD_BEEF);
        assert_eq!(mem.ptr::<u64>(56).unwrap().read(), 0xDEAD_BEEF);
        ring.ring(i.next()).at::<0>().write(7);
        assert_eq!(mem.ptr::<u64>(0).unwrap().read(), 7, "index 3 + 1 wraps to 0");
        let regs = mem.array::<u32, 16>(0).unwrap();
        assert_eq!(regs.at(ConstIndex::new(1)).read(), 0, "upper half of word 0");
        assert!(regs.get(16).is_none());
        assert_eq!(regs.get(0).unwrap().read(), 7);
    }

    #[test]
    fn byte_arrays_take_constant_ranges_and_checked_copies() {
        let mut words = vec![0u64; 4];
        let mem = DeviceMemory::from_words(&mut words);
        let buf = mem.ptr::<[u8; 32]>(0).unwrap();
        buf.write_bytes::<0, 6>([1, 2, 3, 4, 5, 6]);
        buf.write_bytes::<6, 6>([7; 6]);
        assert_eq!(buf.read_bytes::<4, 4>(), [5, 6, 7, 7]);
        let mut out = [0u8; 3];
        assert!(buf.copy_to(10, &mut out));
        assert_eq!(out, [7, 7, 0]);
        assert!(!buf.copy_to(30, &mut out), "range past the end is refused");
        assert!(buf.copy_from(29, &[9, 9, 9]));
        assert!(!buf.copy_from(30, &[9, 9, 9]));
        assert_eq!(buf.read_bytes::<28, 4>(), [0, 9, 9, 9]);
    }

    #[test]
    fn word_buffers_store_constant_ranges_at_any_offset() {
        let mut words = vec![0u64; 4];
        let mem = DeviceMemory::from_words(&mut words);
        let buf = mem.ptr::<[u64; 4]>(0).unwrap();
        // The MAC rewrite: one 8-byte and one 4-byte store.
        buf.write_bytes::<0, 12>([0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(buf.read_bytes::<0, 13>(), [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        // Lengths that are not a multiple of 8 end with narrower stores on the right bytes.
        buf.write_bytes::<16, 15>([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
        assert_eq!(buf.read_bytes::<15, 17>(), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0]);
        buf.write_bytes::<24, 1>([0xAB]);
        assert_eq!(buf.read_bytes::<23, 3>(), [8, 0xAB, 10]);
        let mut out = [0u8; 3];
        assert!(buf.copy_to(16, &mut out));
        assert_eq!(out, [1, 2, 3]);
        assert!(!buf.copy_from(31, &[1, 2]), "range past the end is refused");
    }
}
