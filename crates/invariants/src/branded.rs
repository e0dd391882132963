//! Arrays whose length is known only at run time, with indices that need no check.
//!
//! Rust's arrays with run-time lengths are slices, and indexing a slice is checked. Here a
//! length is given a *brand*: a lifetime `'id` that is unique to one call of [`with_len`] (it is
//! invariant and chosen by the callee, so no two calls can share it). Indices and vectors carry
//! the brand, and an index can only be made by that length (by iterating it or by one check),
//! so any `BrandedIndex<'id>` is below the length of any `BrandedVec<'id, T>`: indexing needs
//! no check and no padding of arrays to 256 entries. This is the technique of the `indexing`
//! and `generativity` crates, written out here so the proof stays in this kernel.
//!
//! An index of one length cannot index a vector of another:
//! ```compile_fail
//! invariants::with_len(2, |a| {
//!     invariants::with_len(5, |b| {
//!         let v = b.vec(|i| i.get());
//!         v[a.first()] // error: the brands differ
//!     })
//! });
//! ```
//! and an index cannot leave the call that branded its length:
//! ```compile_fail
//! let escaped = invariants::with_len(2, |a| a.first());
//! ```
//!
//! # Soundness
//! A brand is made only by [`with_len`], whose closure must accept every lifetime, so two calls
//! never share one; indices are made only from their length (iterated, or one comparison) and
//! vectors only with that many entries, so every `BrandedIndex<'id>` is below the length of every
//! `BrandedVec<'id, T>`, and no item gives a way to make either otherwise.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::marker::PhantomData;
use core::ops::{Index, IndexMut};

/// The brand: invariant in `'id`, so the compiler never unifies two brands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Brand<'id>(PhantomData<fn(&'id ()) -> &'id ()>);

/// A length `len >= 1`, branded with `'id`.
#[derive(Clone, Copy, Debug)]
pub struct BrandedLen<'id> {
    len: usize, // INVARIANT: >= 1, and the only length ever associated with 'id
    _brand: Brand<'id>,
}

/// An index below the length branded `'id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BrandedIndex<'id> {
    i: usize, // INVARIANT: < the length branded 'id
    _brand: Brand<'id>,
}

/// A vector of exactly the length branded `'id`.
#[derive(Debug)]
pub struct BrandedVec<'id, T> {
    items: Box<[T]>, // INVARIANT: items.len() == the length branded 'id
    _brand: Brand<'id>,
}

/// Calls `f` with `len` branded by a fresh lifetime; `None` if `len` is 0.
pub fn with_len<R>(len: usize, f: impl for<'id> FnOnce(BrandedLen<'id>) -> R) -> Option<R> {
    // INVARIANT: the higher-ranked closure receives a lifetime that no other value has.
    (len >= 1).then(|| f(BrandedLen { len, _brand: Brand(PhantomData) }))
}

impl<'id> BrandedLen<'id> {
    /// The length.
    pub fn get(self) -> usize {
        self.len
    }

    /// Index 0 (the length is at least 1).
    pub fn first(self) -> BrandedIndex<'id> {
        BrandedIndex { i: 0, _brand: self._brand }
    }

    /// `i` if it is below the length: the one check.
    pub fn check(self, i: usize) -> Option<BrandedIndex<'id>> {
        (i < self.len).then_some(BrandedIndex { i, _brand: self._brand })
    }

    /// Every index, in order.
    #[inline(always)]
    pub fn indices(self) -> impl Iterator<Item = BrandedIndex<'id>> {
        let brand = self._brand;
        (0..self.len).map(move |i| BrandedIndex { i, _brand: brand })
    }

    /// The index after `i`, wrapping to 0 after the last (round-robin without a check).
    #[inline(always)]
    pub fn next_wrapping(self, i: BrandedIndex<'id>) -> BrandedIndex<'id> {
        let n = i.i + 1;
        BrandedIndex { i: if n == self.len { 0 } else { n }, _brand: self._brand }
    }

    /// A vector whose entry `i` is `f(i)`.
    pub fn vec<T>(self, f: impl FnMut(BrandedIndex<'id>) -> T) -> BrandedVec<'id, T> {
        let items: Vec<T> = self.indices().map(f).collect();
        BrandedVec { items: items.into_boxed_slice(), _brand: self._brand }
    }

    /// A vector from `items`, if it has exactly this length.
    pub fn adopt<T>(self, items: Vec<T>) -> Option<BrandedVec<'id, T>> {
        (items.len() == self.len).then(|| BrandedVec { items: items.into_boxed_slice(), _brand: self._brand })
    }
}

impl BrandedIndex<'_> {
    /// The value.
    pub fn get(self) -> usize {
        self.i
    }
}

impl<'id, T> BrandedVec<'id, T> {
    /// Entries in order.
    pub fn iter(&self) -> core::slice::Iter<'_, T> {
        self.items.iter()
    }

    /// Entries in order, mutably.
    pub fn iter_mut(&mut self) -> core::slice::IterMut<'_, T> {
        self.items.iter_mut()
    }

    /// The length.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Never true (branded lengths are at least 1); present for API symmetry.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl<'id, T> Index<BrandedIndex<'id>> for BrandedVec<'id, T> {
    type Output = T;
    #[inline(always)]
    fn index(&self, i: BrandedIndex<'id>) -> &T {
        // SAFETY: i < the length branded 'id == items.len() (both invariants).
        unsafe { self.items.get_unchecked(i.i) }
    }
}

impl<'id, T> IndexMut<BrandedIndex<'id>> for BrandedVec<'id, T> {
    #[inline(always)]
    fn index_mut(&mut self, i: BrandedIndex<'id>) -> &mut T {
        // SAFETY: as in `index`.
        unsafe { self.items.get_unchecked_mut(i.i) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_made_by_a_length_index_its_vectors() {
        let total = with_len(3, |n| {
            let mut a = n.vec(|i| i.get() * 10);
            let b = n.adopt(alloc::vec![1, 2, 3]).unwrap();
            assert!(n.adopt(alloc::vec![1, 2]).is_none());
            for i in n.indices() {
                a[i] += b[i];
            }
            assert!(n.check(3).is_none());
            assert_eq!(a[n.check(2).unwrap()], 23);
            assert_eq!(a[n.first()], 1);
            assert_eq!(n.next_wrapping(n.check(2).unwrap()), n.first());
            assert_eq!(n.next_wrapping(n.first()).get(), 1);
            a.iter().sum::<usize>()
        });
        assert_eq!(total, Some(36));
    }

    #[test]
    fn zero_lengths_are_refused() {
        assert!(with_len(0, |n| n.get()).is_none());
        assert_eq!(with_len(64, |n| n.indices().count()), Some(64));
    }
}
