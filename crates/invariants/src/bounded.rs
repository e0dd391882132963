//! Integers with a maximum that is part of their type.
//!
//! # Soundness
//! A [`Bounded<MAX>`](Bounded) is at most `MAX`: its field is private, and each constructor
//! compares or saturates, so the range `get` tells the optimiser always holds.

/// An integer in `0..=MAX`. Converted once from an untrusted value (a length the device wrote
/// back); afterwards the optimiser knows the range, so slicing a `MAX`-byte buffer with it is
/// not checked again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bounded<const MAX: usize>(usize); // INVARIANT: .0 <= MAX

impl<const MAX: usize> Bounded<MAX> {
    /// Zero.
    pub const ZERO: Self = Bounded(0);
    /// The maximum.
    pub const MAX: Self = Bounded(MAX);

    /// `v` if `v <= MAX`.
    #[inline(always)]
    pub const fn new(v: usize) -> Option<Self> {
        if v <= MAX {
            Some(Bounded(v))
        } else {
            None
        }
    }

    /// `v`, or `MAX` if `v` is larger.
    #[inline(always)]
    pub const fn saturating(v: usize) -> Self {
        if v <= MAX {
            Bounded(v)
        } else {
            Bounded(MAX)
        }
    }

    /// The value, with its range known to the optimiser.
    #[inline(always)]
    pub const fn get(self) -> usize {
        // SAFETY: type invariant: every constructor keeps the value at most MAX.
        unsafe { core::hint::assert_unchecked(self.0 <= MAX) };
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_above_the_maximum_are_refused_or_saturated() {
        assert_eq!(Bounded::<2048>::new(2048).map(Bounded::get), Some(2048));
        assert!(Bounded::<2048>::new(2049).is_none());
        assert_eq!(Bounded::<2048>::saturating(65535).get(), 2048);
        assert_eq!(Bounded::<10>::ZERO.get(), 0);
        let buf = [1u8; 16];
        let n = Bounded::<16>::new(5).unwrap();
        assert_eq!(buf[..n.get()].len(), 5);
    }
}
