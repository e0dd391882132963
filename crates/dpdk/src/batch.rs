//! A fixed-capacity batch of owned mbufs: what a receive burst fills and a transmit burst
//! empties, with no allocation and no per-packet bookkeeping.

use crate::mbuf::Mbuf;
use crate::sys;
use std::mem::MaybeUninit;

/// Up to `N` (at most 65535) mbufs, the first `len` of them owned. Dropping the batch, or
/// [`Batch::clear`], frees them.
pub struct Batch<'p, const N: usize> {
    len: usize,
    slots: [MaybeUninit<Mbuf<'p>>; N],
}

impl<'p, const N: usize> Batch<'p, N> {
    const FITS_A_BURST: () = assert!(N <= u16::MAX as usize, "a burst counts mbufs in a u16");

    pub fn new() -> Self {
        let () = Self::FITS_A_BURST;
        Batch { len: 0, slots: [const { MaybeUninit::uninit() }; N] }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_full(&self) -> bool {
        self.len == N
    }

    pub fn as_slice(&self) -> &[Mbuf<'p>] {
        // SAFETY: the first `len` slots are initialised (every method keeps that true).
        unsafe { std::slice::from_raw_parts(self.slots.as_ptr().cast::<Mbuf<'p>>(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [Mbuf<'p>] {
        // SAFETY: as in `as_slice`; `&mut self` makes the slice the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.slots.as_mut_ptr().cast::<Mbuf<'p>>(), self.len) }
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Mbuf<'p>> {
        self.as_slice().iter()
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Mbuf<'p>> {
        self.as_mut_slice().iter_mut()
    }

    /// Adds `m` at the end, or gives it back if the batch is full.
    pub fn push(&mut self, m: Mbuf<'p>) -> Result<(), Mbuf<'p>> {
        match self.slots.get_mut(self.len) {
            Some(slot) => {
                slot.write(m);
                self.len += 1;
                Ok(())
            }
            None => Err(m),
        }
    }

    /// Takes the last mbuf out.
    pub fn pop(&mut self) -> Option<Mbuf<'p>> {
        self.len = self.len.checked_sub(1)?;
        // SAFETY: slot `len` (the old last) was initialised and is now outside the owned part.
        Some(unsafe { self.slots[self.len].assume_init_read() })
    }

    /// Keeps the mbufs for which `keep` returns true, in order, and frees the others.
    pub fn retain(&mut self, mut keep: impl FnMut(&mut Mbuf<'p>) -> bool) {
        let len = std::mem::take(&mut self.len);
        for i in 0..len {
            // SAFETY: slot i is initialised and owned (i < the old len); it is read once, and
            // either written back at `self.len` (≤ i, already read) or dropped, which frees it.
            let mut m = unsafe { self.slots[i].assume_init_read() };
            if keep(&mut m) {
                self.slots[self.len].write(m);
                self.len += 1;
            }
        }
    }

    /// Takes every mbuf out, first to last; those the iterator has not yielded when it is
    /// dropped are freed.
    pub fn drain(&mut self) -> Drain<'_, 'p, N> {
        let end = std::mem::take(&mut self.len);
        Drain { batch: self, next: 0, end }
    }

    /// Frees every mbuf (`rte_pktmbuf_free_bulk`, one call).
    pub fn clear(&mut self) {
        let n = std::mem::take(&mut self.len);
        if n > 0 {
            // SAFETY: the first n slots held owned mbufs (layout: one `struct rte_mbuf *` each);
            // `len` is already 0, so none is used or freed again.
            unsafe { sys::rte_pktmbuf_free_bulk(self.slots.as_mut_ptr().cast(), n as u32) }
        }
    }

    /// The free slots, as the `struct rte_mbuf *` array a receive burst fills, and how many.
    pub(crate) fn spare(&mut self) -> (*mut *mut sys::rte_mbuf, u16) {
        (self.slots[self.len..].as_mut_ptr().cast(), (N - self.len) as u16)
    }

    /// The first `n` spare slots were filled with owned mbufs.
    ///
    /// # Safety
    /// Slots `len..len + n` hold pointers to live mbufs that nothing else owns.
    pub(crate) unsafe fn filled(&mut self, n: u16) {
        self.len += (n as usize).min(N - self.len);
    }

    /// The owned mbufs, as the array a transmit burst takes, and how many.
    pub(crate) fn owned(&mut self) -> (*mut *mut sys::rte_mbuf, u16) {
        (self.slots.as_mut_ptr().cast(), self.len as u16)
    }

    /// The first `n` owned mbufs are someone else's now: the rest move to the front.
    ///
    /// # Safety
    /// Ownership of the first `n` (≤ len) mbufs has passed elsewhere.
    pub(crate) unsafe fn gave_away(&mut self, n: u16) {
        let n = (n as usize).min(self.len);
        let rest = self.len - n;
        if rest > 0 {
            // SAFETY: slots n..len are initialised; copying them to 0.. moves their ownership,
            // and the caller's promise covers the slots overwritten.
            unsafe { std::ptr::copy(self.slots.as_ptr().add(n), self.slots.as_mut_ptr(), rest) };
        }
        self.len = rest;
    }
}

impl<const N: usize> std::fmt::Debug for Batch<'_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<const N: usize> Default for Batch<'_, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Drop for Batch<'_, N> {
    fn drop(&mut self) {
        self.clear();
    }
}

/// The mbufs of a batch, moved out in order ([`Batch::drain`]). The batch already counts none,
/// so a leaked `Drain` leaks the rest instead of freeing them twice.
pub struct Drain<'b, 'p, const N: usize> {
    batch: &'b mut Batch<'p, N>,
    next: usize,
    end: usize,
}

impl<'p, const N: usize> Iterator for Drain<'_, 'p, N> {
    type Item = Mbuf<'p>;

    #[inline(always)]
    fn next(&mut self) -> Option<Mbuf<'p>> {
        if self.next >= self.end {
            return None;
        }
        // SAFETY: slots next..end hold owned mbufs that nothing else reads (the batch's len is
        // 0); each is read once, as `next` moves past it.
        let m = unsafe { self.batch.slots.get_unchecked(self.next).assume_init_read() };
        self.next += 1;
        Some(m)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.end - self.next;
        (left, Some(left))
    }
}

impl<const N: usize> Drop for Drain<'_, '_, N> {
    fn drop(&mut self) {
        let left = self.end - self.next;
        if left > 0 {
            // SAFETY: slots next..end still hold owned mbufs, not yielded and not counted by the
            // batch; freed once here.
            unsafe { sys::rte_pktmbuf_free_bulk(self.batch.slots.as_mut_ptr().add(self.next).cast(), left as u32) }
        }
    }
}
