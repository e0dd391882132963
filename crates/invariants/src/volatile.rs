//! Lifetime-bound volatile references into memory shared with a device.

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

impl<'a> DeviceMemory<'a> {
    /// Device memory over a mapping of the platform layer (a BAR, a hugepage block).
    pub fn from_region(region: &'a platform::MappedRegion) -> Self {
        // INVARIANT: a `MappedRegion` maps `len()` bytes at `as_ptr()` readable and writable
        // until it is dropped, and `'a` borrows it.
        DeviceMemory { ptr: region.as_ptr(), len: region.len(), _memory: PhantomData }
    }

    /// Device memory over ordinary memory (tests, and a device model in the same process).
    pub fn from_words(words: &'a mut [u64]) -> Self {
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
        // a valid `T` (`FromBytes`), whatever the device wrote.
        unsafe { self.ptr.read_volatile() }
    }

    /// A volatile store.
    #[inline(always)]
    pub fn write(self, value: T) {
        // SAFETY: in bounds and aligned (type invariant); the memory is writable for `'a` and
        // never referenced by a Rust `&`/`&mut` meanwhile.
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
        if offset > M || dst.len() > M - offset {
            return false;
        }
        for (i, d) in dst.iter_mut().enumerate() {
            // SAFETY: offset + i < M (checked above).
            *d = unsafe { self.ptr.cast::<u8>().add(offset + i).read_volatile() };
        }
        true
    }

    /// Copies `src` to bytes `[offset, offset + src.len())`; false (nothing written) if that
    /// range is outside the array.
    pub fn copy_from(self, offset: usize, src: &[u8]) -> bool {
        if offset > M || src.len() > M - offset {
            return false;
        }
        for (i, s) in src.iter().enumerate() {
            // SAFETY: offset + i < M (checked above).
            unsafe { self.ptr.cast::<u8>().add(offset + i).write_volatile(*s) };
        }
        true
    }
}

/// A non-owning reference to `N` consecutive `T`s in device memory (a descriptor ring, a
/// register file), valid for `'a`.
pub struct VolatileArray<'a, T, const N: usize> {
    // INVARIANT: points to N properly aligned `T`s inside a `DeviceMemory<'a>`.
    ptr: NonNull<T>,
    _memory: PhantomData<&'a UnsafeCell<[T; N]>>,
}

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
}
