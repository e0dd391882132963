//! Containers of a fixed capacity whose free slots are left uninitialised, so that moving a
//! value in or out is one copy and one count update: no growth path, no `Option` tag to test
//! per slot, no length kept in memory through every move.
//!
//! # Soundness
//! Each container's invariant is one line (`len <= CAP`, slots `[..len]` initialised; slots
//! `[front, back)` initialised), every public method keeps it, reads only slots it says are
//! initialised, each exactly once, and a panic in a caller's closure leaks the values not yet
//! handed over instead of dropping any twice. Miri runs their tests of every edge.

use crate::ring::RingIndex;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::mem::MaybeUninit;
use core::ptr;

/// A stack of at most `CAP` values, stored inline.
pub struct ArrayStack<T, const CAP: usize> {
    len: usize, // INVARIANT: len <= CAP and items[..len] are initialised
    items: [MaybeUninit<T>; CAP],
}

impl<T, const CAP: usize> Default for ArrayStack<T, CAP> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, const CAP: usize> ArrayStack<T, CAP> {
    /// An empty stack.
    pub const fn new() -> Self {
        ArrayStack { len: 0, items: [const { MaybeUninit::uninit() }; CAP] }
    }

    /// Values held, with their range known to the optimiser.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        // SAFETY: type invariant: len <= CAP.
        unsafe { core::hint::assert_unchecked(self.len <= CAP) };
        self.len
    }

    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline(always)]
    pub const fn is_full(&self) -> bool {
        self.len() == CAP
    }

    /// Adds `value` on top; gives it back if the stack is full.
    #[inline(always)]
    pub fn push(&mut self, value: T) -> Result<(), T> {
        let len = self.len();
        let Some(slot) = self.items.get_mut(len) else { return Err(value) };
        slot.write(value);
        self.len = len + 1;
        Ok(())
    }

    /// Calls `f` with 0, 1, … for `n` values (no more than there is room for), pushing each
    /// it returns; returns how many were pushed. One length update for all, and no room
    /// check per value.
    #[inline(always)]
    pub fn push_each(&mut self, n: usize, mut f: impl FnMut(usize) -> Option<T>) -> usize {
        let start = self.len();
        let mut len = start;
        // A panic in `f` leaves the length at `start`: what was pushed meanwhile leaks.
        for k in 0..n.min(CAP - start) {
            if let Some(value) = f(k) {
                // SAFETY: len <= start + k < CAP, so the slot is in bounds; it is at or above
                // the counted length, so nothing initialised is overwritten.
                unsafe { self.items.get_unchecked_mut(len).write(value) };
                len += 1;
            }
        }
        self.len = len;
        len - start
    }

    /// The value on top, removed.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<T> {
        let len = self.len().checked_sub(1)?;
        self.len = len;
        // SAFETY: items[len] was initialised (below the old length) and is no longer counted,
        // so it is read out exactly once.
        Some(unsafe { self.items.get_unchecked(len).assume_init_read() })
    }

    /// The values, bottom first.
    #[inline(always)]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        let len = self.len();
        let init = &mut self.items[..len];
        // SAFETY: items[..len] are initialised, MaybeUninit<T> has T's layout, and the borrow
        // of `self` keeps the length fixed meanwhile.
        unsafe { &mut *(init as *mut [MaybeUninit<T>] as *mut [T]) }
    }

    /// Removes the bottom `n` values (all, if there are fewer), bottom first, handing each to
    /// `f`; the values above them move down. Returns how many were removed.
    #[inline(always)]
    pub fn take_front(&mut self, n: usize, mut f: impl FnMut(T)) -> usize {
        let len = self.len();
        let n = n.min(len);
        // If `f` panics, the values not yet handed over are leaked: never dropped twice.
        self.len = 0;
        for slot in &self.items[..n] {
            // SAFETY: slot is below the old length, so initialised; it is read once, as the
            // length no longer counts it.
            f(unsafe { slot.assume_init_read() });
        }
        if n < len {
            // Not a call to memmove for nothing, as after a whole batch was taken.
            let base = self.items.as_mut_ptr();
            // SAFETY: items[n..len] are initialised and inside the array; they move to
            // items[..len - n] (ptr::copy allows the overlap), whose values were read out above.
            unsafe { ptr::copy(base.add(n), base, len - n) };
        }
        self.len = len - n;
        n
    }

    /// Removes the values from `keep` up (none, if `keep >= len`), bottom first, handing each
    /// to `f`.
    #[inline(always)]
    pub fn truncate_into(&mut self, keep: usize, mut f: impl FnMut(T)) {
        let len = self.len();
        if keep >= len {
            return;
        }
        // As in `take_front`: a panic in `f` leaks the rest.
        self.len = keep;
        for slot in &self.items[keep..len] {
            // SAFETY: slot is in [keep, len): initialised, and no longer counted.
            f(unsafe { slot.assume_init_read() });
        }
    }
}

impl<T, const CAP: usize> Drop for ArrayStack<T, CAP> {
    fn drop(&mut self) {
        self.truncate_into(0, drop);
    }
}

/// Removes the top `n` values of `v` (all, if there are fewer), bottom first, handing each to
/// `f`; returns how many. What `v.drain(len - n..).for_each(f)` does, without an `Option` per
/// value: each is read straight out of the vector into `f`.
#[inline(always)]
pub fn take_top<T>(v: &mut Vec<T>, n: usize, mut f: impl FnMut(T)) -> usize {
    let len = v.len();
    let keep = len - n.min(len);
    // As in `ArrayStack::take_front`: a panic in `f` leaks the rest.
    // SAFETY: keep <= len, and the values below keep stay initialised.
    unsafe { v.set_len(keep) };
    let base = v.as_ptr();
    for i in keep..len {
        // SAFETY: i is in [keep, len): inside the allocation, initialised, and no longer
        // counted by the vector (which `f` cannot reach: it is borrowed here), so read once.
        f(unsafe { base.add(i).read() });
    }
    len - keep
}

/// A FIFO queue in a ring of `N` slots (a power of two), holding at most `N - 1` values, from
/// [`RingQueue::front`] up to (not including) [`RingQueue::back`]: the shape of a TX ring,
/// where values enter at the tail and leave once the device's head has passed them.
pub struct RingQueue<T, const N: usize> {
    slots: Box<[MaybeUninit<T>; N]>,
    // INVARIANT: the slots from front up to back (wrapping) are initialised, the others not.
    front: RingIndex<N>,
    back: RingIndex<N>,
}

impl<T, const N: usize> Default for RingQueue<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, const N: usize> RingQueue<T, N> {
    /// An empty queue.
    pub fn new() -> Self {
        let slots: Vec<MaybeUninit<T>> = (0..N).map(|_| MaybeUninit::uninit()).collect();
        match slots.into_boxed_slice().try_into() {
            Ok(slots) => RingQueue { slots, front: RingIndex::ZERO, back: RingIndex::ZERO },
            Err(_) => unreachable!("exactly N slots were made"),
        }
    }

    /// The slot of the oldest value (equal to `back` when empty).
    #[inline(always)]
    pub fn front(&self) -> RingIndex<N> {
        self.front
    }

    /// The slot the next value goes to.
    #[inline(always)]
    pub fn back(&self) -> RingIndex<N> {
        self.back
    }

    /// Values held (0..N).
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.front.distance_to(self.back)
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.front == self.back
    }

    /// Adds `value` at the back; gives it back if `N - 1` values are held.
    #[inline(always)]
    pub fn push_back(&mut self, value: T) -> Result<(), T> {
        if self.len() == N - 1 {
            return Err(value);
        }
        self.slots[self.back.get()].write(value);
        self.back = self.back.next();
        Ok(())
    }

    /// Moves up to `n` values from the bottom of `from` to the back, as many as fit, in
    /// order, first showing each to `f` with the slot it will take. Returns how many moved.
    #[inline(always)]
    pub fn push_back_from<const CAP: usize>(
        &mut self,
        from: &mut ArrayStack<T, CAP>,
        n: usize,
        mut f: impl FnMut(RingIndex<N>, &T),
    ) -> usize {
        let n = n.min(N - 1 - self.len());
        let mut back = self.back;
        let slots = &mut self.slots;
        let moved = from.take_front(n, |value| {
            f(back, &value);
            slots[back.get()].write(value);
            back = back.next();
        });
        self.back = back;
        moved
    }

    /// Removes the values from the front up to (not including) slot `end`, handing each to
    /// `f`; none if `end` is not between front and back (a device's head that went past what
    /// was queued). Returns whether `end` was between them.
    #[inline(always)]
    pub fn pop_front_to(&mut self, end: RingIndex<N>, mut f: impl FnMut(T)) -> bool {
        if self.front.distance_to(end) > self.len() {
            return false;
        }
        while self.front != end {
            let i = self.front;
            self.front = i.next();
            // SAFETY: i is in [front, end), within [front, back): initialised, and read once,
            // as front has moved past it.
            f(unsafe { self.slots[i.get()].assume_init_read() });
        }
        true
    }

    /// [`Self::pop_front_to`] into the spare capacity of `to`, in order, as at most two block
    /// copies rather than a value at a time; values beyond that capacity are dropped, so `to`
    /// never allocates. Returns whether `end` was between front and back (nothing moves if not).
    #[inline(always)]
    pub fn pop_front_into(&mut self, end: RingIndex<N>, to: &mut Vec<T>) -> bool {
        let n = self.front.distance_to(end);
        if n > self.len() {
            return false;
        }
        let (front, len) = (self.front.get(), to.len());
        let k = n.min(to.capacity() - len);
        // The slots [front, front + k) wrapping: up to the ring's end, then from its start.
        let first = k.min(N - front);
        let src = self.slots.as_ptr().cast::<T>();
        let dst = to.spare_capacity_mut().as_mut_ptr().cast::<T>();
        // SAFETY: the k slots from front are within [front, back), so initialised; `to` has
        // room for k more (k <= its spare capacity); the two allocations are distinct. Each
        // value is read once: front moves past them below before anything can see them twice,
        // and nothing in between can panic.
        unsafe {
            ptr::copy_nonoverlapping(src.add(front), dst, first);
            // Not a call to memcpy for nothing, as when the values did not wrap.
            if k > first {
                ptr::copy_nonoverlapping(src, dst.add(first), k - first);
            }
            to.set_len(len + k);
        }
        self.front = RingIndex::wrapping(front + k);
        // What `to` had no room for.
        self.pop_front_to(end, drop)
    }

    /// The oldest value, removed.
    #[inline(always)]
    pub fn pop_front(&mut self) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        let i = self.front;
        self.front = i.next();
        // SAFETY: the queue is not empty, so slot `front` is initialised; front has moved
        // past it, so it is read once.
        Some(unsafe { self.slots[i.get()].assume_init_read() })
    }
}

impl<T, const N: usize> Drop for RingQueue<T, N> {
    fn drop(&mut self) {
        let back = self.back;
        self.pop_front_to(back, drop);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::rc::Rc;
    use alloc::vec;
    use core::cell::Cell;

    /// A value that counts its drops, so that a test sees any value dropped twice or leaked.
    struct Counted<'c>(u32, &'c Cell<u32>);
    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.1.set(self.1.get() + 1);
        }
    }

    #[test]
    fn a_stack_holds_up_to_its_capacity_last_in_first_out() {
        let mut s = ArrayStack::<Rc<u32>, 3>::new();
        assert!(s.is_empty() && s.pop().is_none());
        for v in 1..=3 {
            assert!(s.push(Rc::new(v)).is_ok());
        }
        assert!(s.is_full());
        assert_eq!(s.push(Rc::new(4)).map_err(|v| *v), Err(4), "the fourth comes back");
        assert_eq!(s.as_mut_slice().iter().map(|v| **v).collect::<Vec<_>>(), vec![1, 2, 3]);
        *Rc::get_mut(&mut s.as_mut_slice()[0]).unwrap() = 10;
        assert_eq!(s.pop().map(|v| *v), Some(3));
        assert_eq!(s.pop().map(|v| *v), Some(2));
        assert_eq!(s.pop().map(|v| *v), Some(10));
        assert!(s.pop().is_none());
        let mut empty = ArrayStack::<u8, 0>::new();
        assert_eq!(empty.push(1), Err(1));
        assert!(empty.is_full() && empty.pop().is_none());
    }

    #[test]
    fn push_each_pushes_what_f_returns_up_to_the_room_left() {
        let mut s = ArrayStack::<Rc<u32>, 5>::new();
        s.push(Rc::new(100)).unwrap();
        let mut asked = vec![];
        let pushed = s.push_each(3, |k| {
            asked.push(k);
            (k != 1).then(|| Rc::new(k as u32))
        });
        assert_eq!((pushed, asked), (2, vec![0, 1, 2]), "None pushes nothing");
        assert_eq!(s.as_mut_slice().iter().map(|v| **v).collect::<Vec<_>>(), vec![100, 0, 2]);
        let mut calls = 0;
        assert_eq!(
            s.push_each(9, |k| {
                calls += 1;
                Some(Rc::new(10 + k as u32))
            }),
            2,
            "only the room left"
        );
        assert_eq!(calls, 2, "f is not called past the room left");
        assert!(s.is_full());
        assert_eq!(s.push_each(1, |_| panic!("no room")), 0);
    }

    #[test]
    fn take_front_hands_over_the_bottom_and_moves_the_rest_down() {
        let mut s = ArrayStack::<Rc<u32>, 5>::new();
        (1..=5).for_each(|v| s.push(Rc::new(v)).unwrap());
        let mut got = vec![];
        assert_eq!(s.take_front(2, |v| got.push(*v)), 2);
        assert_eq!(got, vec![1, 2]);
        assert_eq!(s.as_mut_slice().iter().map(|v| **v).collect::<Vec<_>>(), vec![3, 4, 5]);
        assert_eq!(s.take_front(0, |_| panic!("nothing to take")), 0);
        assert_eq!(s.take_front(9, |v| got.push(*v)), 3, "all, when fewer than asked");
        assert!(s.is_empty());
        assert_eq!(got, vec![1, 2, 3, 4, 5]);
        s.push(Rc::new(6)).unwrap();
        assert_eq!(s.pop().map(|v| *v), Some(6), "the emptied stack is usable");
    }

    #[test]
    fn truncate_into_hands_over_the_top_and_drop_drops_each_value_once() {
        let drops = Cell::new(0);
        {
            let mut s = ArrayStack::<Counted, 4>::new();
            (0..4).for_each(|v| assert!(s.push(Counted(v, &drops)).is_ok()));
            let mut got = vec![];
            s.truncate_into(1, |v| got.push(v.0));
            assert_eq!(got, vec![1, 2, 3]);
            assert_eq!(drops.get(), 3);
            s.truncate_into(1, |_| panic!("nothing above 1"));
            s.truncate_into(7, |_| panic!("nothing above 7"));
            assert_eq!(s.len(), 1);
        }
        assert_eq!(drops.get(), 4, "the one left is dropped with the stack");
    }

    #[test]
    fn a_panic_while_taking_leaks_the_rest_and_drops_nothing_twice() {
        extern crate std;
        let drops = Cell::new(0);
        let mut s = ArrayStack::<Counted, 4>::new();
        (0..4).for_each(|v| assert!(s.push(Counted(v, &drops)).is_ok()));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            s.take_front(3, |v| {
                if v.0 == 1 {
                    panic!("in the middle");
                }
            })
        }));
        assert!(r.is_err());
        assert!(s.is_empty(), "what was not handed over is forgotten");
        drop(s);
        assert_eq!(drops.get(), 2, "0 was dropped by the closure, 1 while unwinding; 2 and 3 leak");
    }

    #[test]
    fn take_top_hands_over_the_top_bottom_first_and_each_value_once() {
        extern crate std;
        let drops = Cell::new(0);
        let mut v: Vec<Counted> = (0..5).map(|i| Counted(i, &drops)).collect();
        let mut got = vec![];
        assert_eq!(take_top(&mut v, 2, |c| got.push(c.0)), 2);
        assert_eq!(got, vec![3, 4]);
        assert_eq!(v.iter().map(|c| c.0).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(take_top(&mut v, 0, |_| panic!("nothing to take")), 0);
        assert_eq!(take_top(&mut v, 9, |c| got.push(c.0)), 3, "all, when fewer than asked");
        assert!(v.is_empty());
        assert_eq!(got, vec![3, 4, 0, 1, 2]);
        assert_eq!(drops.get(), 5, "each handed over and dropped once");
        let mut w: Vec<Counted> = (0..4).map(|i| Counted(i, &drops)).collect();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            take_top(&mut w, 3, |c| {
                if c.0 == 2 {
                    panic!("in the middle");
                }
            })
        }));
        assert!(r.is_err());
        assert_eq!(w.len(), 1, "the values taken and the rest are no longer counted");
        drop(w);
        assert_eq!(drops.get(), 5 + 3, "1 and 2 dropped as handed over, 0 with the vector; 3 leaks");
    }

    #[test]
    fn a_ring_queue_is_first_in_first_out_and_holds_n_minus_one() {
        let mut q = RingQueue::<Rc<u32>, 4>::new();
        assert!(q.is_empty() && q.pop_front().is_none());
        for v in 0..3 {
            assert!(q.push_back(Rc::new(v)).is_ok());
        }
        assert_eq!(q.len(), 3);
        assert_eq!(q.push_back(Rc::new(9)).map_err(|v| *v), Err(9), "N - 1 values at most");
        assert_eq!(q.pop_front().map(|v| *v), Some(0));
        assert!(q.push_back(Rc::new(3)).is_ok(), "wraps around the ring");
        assert_eq!(q.back(), RingIndex::ZERO);
        let mut got = vec![];
        while let Some(v) = q.pop_front() {
            got.push(*v);
        }
        assert_eq!(got, vec![1, 2, 3]);
        assert_eq!(q.front(), q.back());
    }

    #[test]
    fn push_back_from_moves_what_fits_and_shows_each_slot() {
        let mut q = RingQueue::<Rc<u32>, 4>::new();
        q.push_back(Rc::new(0)).unwrap();
        let mut s = ArrayStack::<Rc<u32>, 8>::new();
        (1..=5).for_each(|v| s.push(Rc::new(v)).unwrap());
        let mut seen = vec![];
        assert_eq!(q.push_back_from(&mut s, 8, |i, v| seen.push((i.get(), **v))), 2, "room for two");
        assert_eq!(seen, vec![(1, 1), (2, 2)]);
        assert_eq!(s.as_mut_slice().iter().map(|v| **v).collect::<Vec<_>>(), vec![3, 4, 5], "the rest stay");
        assert_eq!(q.push_back_from(&mut s, 8, |_, _| panic!("full")), 0);
        q.pop_front_to(RingIndex::new(2).unwrap(), drop);
        assert_eq!(q.push_back_from(&mut s, 1, |i, _| seen.push((i.get(), 0))), 1, "at most n");
        assert_eq!(seen.last(), Some(&(3, 0)));
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn pop_front_into_moves_in_order_across_the_wrap_and_drops_what_does_not_fit() {
        let drops = Cell::new(0);
        let mut q = RingQueue::<Counted, 8>::new();
        (0..6).for_each(|v| assert!(q.push_back(Counted(v, &drops)).is_ok()));
        q.pop_front_to(RingIndex::new(5).unwrap(), drop);
        (6..11).for_each(|v| assert!(q.push_back(Counted(v, &drops)).is_ok()));
        assert_eq!((q.front().get(), q.back().get(), drops.get()), (5, 3, 5), "5..=10 held, wrapped");
        let mut to = Vec::with_capacity(5);
        to.push(Counted(99, &drops));
        assert!(!q.pop_front_into(RingIndex::new(4).unwrap(), &mut to), "past the back");
        assert_eq!(to.len(), 1);
        // Six values up to slot 3, room for four: 5..=8 move (across the wrap), 9 and 10 are dropped.
        assert!(q.pop_front_into(RingIndex::new(3).unwrap(), &mut to));
        assert_eq!(to.iter().map(|v| v.0).collect::<Vec<_>>(), vec![99, 5, 6, 7, 8]);
        assert_eq!((to.capacity(), drops.get(), q.len()), (5, 7, 0));
        (11..14).for_each(|v| assert!(q.push_back(Counted(v, &drops)).is_ok()));
        let mut more = Vec::with_capacity(8);
        assert!(q.pop_front_into(RingIndex::new(4).unwrap(), &mut more), "one of three, no wrap");
        assert_eq!((more.len(), more[0].0, q.len()), (1, 11, 2));
        drop((q, to, more));
        assert_eq!(drops.get(), 15, "every value (0..14 and 99) dropped exactly once");
    }

    #[test]
    fn pop_front_to_refuses_an_end_past_the_back() {
        let drops = Cell::new(0);
        let mut q = RingQueue::<Counted, 8>::new();
        (0..5).for_each(|v| assert!(q.push_back(Counted(v, &drops)).is_ok()));
        assert!(!q.pop_front_to(RingIndex::new(6).unwrap(), |_| panic!("past the back")));
        assert_eq!(q.len(), 5);
        let mut got = vec![];
        assert!(q.pop_front_to(RingIndex::new(2).unwrap(), |v| got.push(v.0)));
        assert_eq!(got, vec![0, 1]);
        assert!(q.pop_front_to(RingIndex::new(2).unwrap(), |_| panic!("already there")));
        assert!(q.pop_front_to(RingIndex::new(5).unwrap(), |v| got.push(v.0)), "up to the back");
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        (5..12).for_each(|v| assert!(q.push_back(Counted(v, &drops)).is_ok()));
        drop(q);
        assert_eq!(drops.get(), 12, "each value dropped once, those left with the queue");
    }
}
