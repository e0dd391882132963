//! Indices whose range is part of their type.
//!
//! # Soundness
//! A [`RingIndex<N>`](RingIndex) is below `N` (a power of two, checked at compile time): every
//! constructor masks or compares. A [`ConstIndex<N>`](ConstIndex) is below `N`: `new` panics (at
//! compile time in a constant) and `new_checked` returns `None` otherwise. The arrays they index
//! hold exactly `N` values.

use core::ops::{Index, IndexMut};

/// An index into a ring of `N` entries, `N` a power of two (checked at compile time). It is
/// always `< N`, increments wrap, and indexing with it needs no bounds check.
///
/// ```compile_fail
/// let _ = invariants::RingIndex::<300>::ZERO; // 300 is not a power of two
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RingIndex<const N: usize>(usize); // INVARIANT: .0 < N

impl<const N: usize> RingIndex<N> {
    const POWER_OF_TWO: () = assert!(N.is_power_of_two(), "ring sizes must be powers of two");

    /// Index 0.
    pub const ZERO: Self = {
        #[allow(clippy::let_unit_value)]
        let () = Self::POWER_OF_TWO;
        RingIndex(0)
    };

    /// `i` if `i < N`.
    pub const fn new(i: usize) -> Option<Self> {
        #[allow(clippy::let_unit_value)]
        let () = Self::POWER_OF_TWO;
        if i < N {
            Some(RingIndex(i))
        } else {
            None
        }
    }

    /// `i mod N`: converts any value (e.g. a head the device wrote back) without a branch.
    #[inline(always)]
    pub const fn wrapping(i: usize) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::POWER_OF_TWO;
        RingIndex(i & (N - 1))
    }

    /// The value, with its range known to the optimiser.
    #[inline(always)]
    pub const fn get(self) -> usize {
        // SAFETY: type invariant: every constructor keeps the value below N.
        unsafe { core::hint::assert_unchecked(self.0 < N) };
        self.0
    }

    /// The next index, wrapping to 0 after `N - 1`.
    #[inline(always)]
    #[must_use]
    pub const fn next(self) -> Self {
        Self::wrapping(self.0 + 1)
    }

    /// The previous index, wrapping to `N - 1` before 0.
    #[inline(always)]
    #[must_use]
    pub const fn prev(self) -> Self {
        Self::wrapping(self.0.wrapping_add(N - 1))
    }

    /// How many steps forward `to` is from `self` (0..N).
    #[inline(always)]
    pub const fn distance_to(self, to: Self) -> usize {
        to.0.wrapping_sub(self.0) & (N - 1)
    }
}

/// An index into a fixed-size array of `N` entries (any `N`), always `< N`. Made at compile
/// time for constants (`ConstIndex::new` in a `const` item fails to compile when out of range),
/// or checked once at run time.
///
/// ```compile_fail
/// const BAD: invariants::ConstIndex<4> = invariants::ConstIndex::new(4);
/// let _ = BAD;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConstIndex<const N: usize>(usize); // INVARIANT: .0 < N

impl<const N: usize> ConstIndex<N> {
    /// `i`, which must be `< N`: use in `const` items, where a violation is a compile error.
    pub const fn new(i: usize) -> Self {
        assert!(i < N, "index out of range");
        ConstIndex(i)
    }

    /// `i` if `i < N`.
    pub const fn new_checked(i: usize) -> Option<Self> {
        if i < N {
            Some(ConstIndex(i))
        } else {
            None
        }
    }

    /// The value, with its range known to the optimiser.
    #[inline(always)]
    pub const fn get(self) -> usize {
        // SAFETY: type invariant.
        unsafe { core::hint::assert_unchecked(self.0 < N) };
        self.0
    }

    /// All indices `0..N` in order.
    pub fn all() -> impl Iterator<Item = Self> {
        (0..N).map(ConstIndex)
    }
}

/// An array of `N` entries (any `N`) indexed by [`ConstIndex<N>`] without checks.
#[derive(Clone, Debug)]
pub struct ConstArray<T, const N: usize>([T; N]);

impl<T, const N: usize> ConstArray<T, N> {
    /// Entry `i` is `f(i)`.
    pub fn from_fn(mut f: impl FnMut(ConstIndex<N>) -> T) -> Self {
        ConstArray(core::array::from_fn(|i| f(ConstIndex(i))))
    }
}

impl<T, const N: usize> Index<ConstIndex<N>> for ConstArray<T, N> {
    type Output = T;
    #[inline(always)]
    fn index(&self, i: ConstIndex<N>) -> &T {
        // SAFETY: ConstIndex<N> < N.
        unsafe { self.0.get_unchecked(i.get()) }
    }
}

impl<T, const N: usize> IndexMut<ConstIndex<N>> for ConstArray<T, N> {
    #[inline(always)]
    fn index_mut(&mut self, i: ConstIndex<N>) -> &mut T {
        // SAFETY: ConstIndex<N> < N.
        unsafe { self.0.get_unchecked_mut(i.get()) }
    }
}

/// An array of `N` entries (a power of two) indexed by [`RingIndex<N>`] without checks.
#[derive(Clone, Debug)]
pub struct RingArray<T, const N: usize>(alloc::boxed::Box<[T; N]>);

impl<T, const N: usize> RingArray<T, N> {
    /// Entry `i` is `f(i)`.
    pub fn from_fn(mut f: impl FnMut(RingIndex<N>) -> T) -> Self {
        let v: alloc::vec::Vec<T> = (0..N).map(|i| f(RingIndex::wrapping(i))).collect();
        match v.into_boxed_slice().try_into() {
            Ok(b) => RingArray(b),
            Err(_) => unreachable!("exactly N entries were collected"),
        }
    }
}

impl<T, const N: usize> Index<RingIndex<N>> for RingArray<T, N> {
    type Output = T;
    #[inline(always)]
    fn index(&self, i: RingIndex<N>) -> &T {
        // SAFETY: RingIndex<N> < N.
        unsafe { self.0.get_unchecked(i.get()) }
    }
}

impl<T, const N: usize> IndexMut<RingIndex<N>> for RingArray<T, N> {
    #[inline(always)]
    fn index_mut(&mut self, i: RingIndex<N>) -> &mut T {
        // SAFETY: RingIndex<N> < N.
        unsafe { self.0.get_unchecked_mut(i.get()) }
    }
}

impl<T, const N: usize> Index<ConstIndex<N>> for RingArray<T, N> {
    type Output = T;
    #[inline(always)]
    fn index(&self, i: ConstIndex<N>) -> &T {
        // SAFETY: ConstIndex<N> < N.
        unsafe { self.0.get_unchecked(i.get()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_indices_wrap_at_any_power_of_two() {
        let last = RingIndex::<512>::new(511).unwrap();
        assert_eq!(last.next(), RingIndex::ZERO);
        assert_eq!(RingIndex::<512>::ZERO.prev(), last);
        assert!(RingIndex::<512>::new(512).is_none());
        assert_eq!(RingIndex::<256>::wrapping(0x1_0005).get(), 5);
        assert_eq!(RingIndex::<8>::new(6).unwrap().distance_to(RingIndex::new(1).unwrap()), 3);
        assert_eq!(RingIndex::<8>::new(1).unwrap().distance_to(RingIndex::new(1).unwrap()), 0);
    }

    #[test]
    fn ring_arrays_index_by_ring_index() {
        let mut a = RingArray::<u32, 4>::from_fn(|i| i.get() as u32 * 10);
        let i = RingIndex::<4>::new(3).unwrap();
        a[i] += 1;
        assert_eq!(a[i], 31);
        assert_eq!(a[i.next()], 0);
        assert_eq!(a[ConstIndex::new(2)], 20);
        let mut c = ConstArray::<u8, 3>::from_fn(|i| i.get() as u8);
        c[ConstIndex::new(2)] += 5;
        assert_eq!(c[ConstIndex::new(2)], 7);
    }

    #[test]
    fn const_indices_are_checked_once() {
        assert!(ConstIndex::<3>::new_checked(3).is_none());
        assert_eq!(ConstIndex::<3>::all().map(|i| i.get()).sum::<usize>(), 3);
        const TWO: ConstIndex<3> = ConstIndex::new(2);
        assert_eq!(TWO.get(), 2);
    }
}
