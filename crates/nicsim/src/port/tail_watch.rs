//! Tail stalls: intervals in which a driver did not move a receive queue's tail (RDT) while
//! frames for it were being dropped, from the first drop after a tail write to the next tail
//! write. The device sees every tail write [DS 7.1.9], so it knows when the driver stopped
//! giving descriptors back; a benchmark compares these intervals with the times the host took
//! a core away, to tell a host stall from a slow driver.

use super::Port;
use crate::shared_log::SharedLog;
use serde::{Deserialize, Serialize};

/// Drops for this long without a tail write are a stall: a driver that keeps up but is too
/// slow for the rate moves its tail every batch, microseconds apart, and the drops between
/// two of its writes are its own (drops outside stalls).
pub const TAIL_STALL_NS: u64 = 20_000;
/// Stalls kept per queue for the statistics (the latest; counts cover all).
const STALLS_KEPT: usize = 1024;

/// One stall: from its first drop to the next tail write, in engine ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TailStall {
    pub start_ns: u64,
    /// The next tail write; for a stall still going on, the snapshot's time.
    pub end_ns: u64,
    /// Frames dropped in it (no descriptor, or the full packet buffer).
    pub drops: u64,
    pub open: bool,
}

/// What one receive queue's tail watch saw since the counters were last reset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TailStalls {
    pub queue: u32,
    /// Stalls, and the frames dropped inside and outside them.
    pub count: u64,
    pub drops_inside: u64,
    pub drops_outside: u64,
    /// The latest stalls, oldest first.
    pub recent: Vec<TailStall>,
}

/// The watch on one receive queue, updated once per engine iteration.
#[derive(Debug, Clone)]
pub(super) struct TailWatch {
    tail: u32,
    /// Whether the watch has looked once (and knows the tail and the drops).
    started: bool,
    /// The queue's drop count at the last look.
    drops_seen: u64,
    /// Since the last tail write: when the first drop came (engine ps), and how many.
    first_drop_ps: Option<u64>,
    drops_since_write: u64,
    count: u64,
    drops_inside: u64,
    drops_outside: u64,
    recent: SharedLog<TailStall>,
}

impl Default for TailWatch {
    fn default() -> Self {
        TailWatch {
            tail: 0,
            started: false,
            drops_seen: 0,
            first_drop_ps: None,
            drops_since_write: 0,
            count: 0,
            drops_inside: 0,
            drops_outside: 0,
            recent: SharedLog::new(STALLS_KEPT),
        }
    }
}

/// A queue's [`TailStalls`] as the engine hands them over: its kept stalls are laid out in one
/// list by [`TailStallsDraft::finish`], off the engine's thread.
#[derive(Debug, Clone)]
pub struct TailStallsDraft {
    stalls: TailStalls,
    recent: SharedLog<TailStall>,
    under_way: Option<TailStall>,
}

impl TailStallsDraft {
    pub fn finish(self) -> TailStalls {
        let mut stalls = self.stalls;
        stalls.recent = self.recent.to_vec();
        stalls.recent.extend(self.under_way);
        stalls
    }
}

impl TailWatch {
    /// One look at `now_ps`: the queue's tail as the device knows it, and its drops so far.
    #[inline]
    pub(super) fn look(&mut self, tail: u32, drops: u64, now_ps: u64) {
        if !self.started {
            (self.started, self.tail, self.drops_seen) = (true, tail, drops);
            return;
        }
        if drops != self.drops_seen {
            self.first_drop_ps.get_or_insert(now_ps);
            self.drops_since_write += drops.saturating_sub(self.drops_seen);
            self.drops_seen = drops;
        }
        if tail != self.tail {
            self.tail = tail;
            if self.first_drop_ps.is_some() {
                self.written(now_ps);
            }
        }
    }

    /// The tail moved at `now_ps` after drops: they were in a stall or they were not.
    #[cold]
    fn written(&mut self, now_ps: u64) {
        let Some(first) = self.first_drop_ps.take() else { return };
        let drops = std::mem::take(&mut self.drops_since_write);
        if now_ps - first < TAIL_STALL_NS * 1000 {
            self.drops_outside += drops;
            return;
        }
        self.count += 1;
        self.drops_inside += drops;
        self.recent.push(TailStall { start_ns: first / 1000, end_ns: now_ps / 1000, drops, open: false });
    }

    /// Forgets what was counted; the next drops are counted from `drops`.
    pub(super) fn reset(&mut self, drops: u64) {
        *self = TailWatch { tail: self.tail, started: self.started, drops_seen: drops, ..TailWatch::default() };
    }

    /// The record of `queue` at engine time `now_ps`, the drops since the last tail write
    /// included: a stall under way if they began a stall's length ago.
    #[cfg(test)]
    fn record(&self, queue: u32, now_ps: u64) -> TailStalls {
        self.draft(queue, now_ps).finish()
    }

    /// Whether any drop was seen since the watch started or was reset.
    fn dropped(&self) -> bool {
        self.count > 0 || self.drops_outside > 0 || self.first_drop_ps.is_some()
    }

    /// The record of `queue` at engine time `now_ps` but for laying out its kept stalls.
    fn draft(&self, queue: u32, now_ps: u64) -> TailStallsDraft {
        let mut r = TailStallsDraft {
            stalls: TailStalls {
                queue,
                count: self.count,
                drops_inside: self.drops_inside,
                drops_outside: self.drops_outside,
                recent: Vec::new(),
            },
            recent: self.recent.clone(),
            under_way: None,
        };
        if let Some(first) = self.first_drop_ps {
            let drops = self.drops_since_write;
            if now_ps.saturating_sub(first) >= TAIL_STALL_NS * 1000 {
                r.stalls.count += 1;
                r.stalls.drops_inside += drops;
                r.under_way = Some(TailStall { start_ns: first / 1000, end_ns: now_ps / 1000, drops, open: true });
            } else {
                r.stalls.drops_outside += drops;
            }
        }
        r
    }
}

impl Port {
    /// Frames dropped for receive queue `q` so far: no descriptor, and for the queue frames go
    /// to, those the full packet buffer missed.
    fn rx_drops(&self, q: u32) -> u64 {
        let missed = if q == super::DEFAULT_RX_QUEUE { self.counters.mpc } else { 0 };
        self.rx[q as usize].dropped + missed
    }

    /// Looks at every enabled receive queue's tail and drops (once per engine iteration).
    #[inline]
    pub fn watch_rx_tails(&mut self, now_ps: u64) {
        for k in 0..self.active_rx.len() {
            let q = self.active_rx[k];
            let (tail, drops) = (self.rx[q as usize].tail, self.rx_drops(q));
            self.tail_watch[q as usize].look(tail, drops, now_ps);
        }
    }

    /// Starts every queue's watch afresh (with the counters).
    pub(super) fn reset_tail_watch(&mut self) {
        for q in 0..self.tail_watch.len() as u32 {
            let drops = self.rx_drops(q);
            self.tail_watch[q as usize].reset(drops);
        }
    }

    /// The tail stalls of every queue that had any, or dropped frames, at engine time `now_ps`.
    pub fn tail_stalls(&self, now_ps: u64) -> Vec<TailStalls> {
        self.tail_stall_drafts(now_ps).into_iter().map(TailStallsDraft::finish).collect()
    }

    /// [`Port::tail_stalls`] for a statistics answer, to be finished off the engine's thread.
    pub fn tail_stall_drafts(&self, now_ps: u64) -> Vec<TailStallsDraft> {
        // Most of the 128 queues never dropped a frame: those are passed over without a copy.
        (0..self.tail_watch.len() as u32)
            .filter(|&q| self.tail_watch[q as usize].dropped())
            .map(|q| self.tail_watch[q as usize].draft(q, now_ps))
            .filter(|r| r.stalls.count > 0 || r.stalls.drops_outside > 0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000_000; // ps

    #[test]
    fn drops_without_a_tail_write_for_a_stalls_length_are_a_stall_that_the_next_write_ends() {
        let mut w = TailWatch::default();
        w.look(10, 0, 1000 * US);
        // An idle millisecond, then drops between two writes 5 µs apart: a slow driver.
        w.look(10, 3, 2000 * US);
        w.look(11, 3, 2005 * US);
        // Drops from 2 010 µs, no write until 2 500: a stall of 490 µs.
        w.look(11, 10, 2010 * US);
        w.look(11, 50, 2400 * US);
        let open = w.record(0, 2450 * US);
        assert_eq!(open.recent, [TailStall { start_ns: 2_010_000, end_ns: 2_450_000, drops: 47, open: true }]);
        assert_eq!((open.count, open.drops_inside, open.drops_outside), (1, 47, 3));
        w.look(12, 50, 2500 * US);
        let r = w.record(0, 2600 * US);
        assert_eq!((r.count, r.drops_inside, r.drops_outside), (1, 47, 3));
        assert_eq!(r.recent, [TailStall { start_ns: 2_010_000, end_ns: 2_500_000, drops: 47, open: false }]);
        // Drops a moment ago are not (yet) a stall.
        w.look(12, 51, 2590 * US);
        assert_eq!(w.record(0, 2600 * US).drops_outside, 4);
        w.reset(51);
        w.look(13, 52, 2601 * US);
        let r = w.record(0, 2700 * US);
        assert_eq!((r.count, r.drops_inside, r.drops_outside, r.recent.len()), (0, 0, 1, 0));
    }

    #[test]
    fn a_tail_that_moves_without_drops_records_nothing_and_the_record_is_bounded() {
        let mut w = TailWatch::default();
        for i in 0..100 {
            w.look(i, 0, (i as u64 + 1) * 100 * US);
        }
        assert_eq!(w.record(0, 0), TailStalls::default());
        let mut drops = 0;
        for i in 0..(STALLS_KEPT as u64 + 5) {
            let t = 20_000 * US + i * 100 * US;
            drops += 1;
            // A drop 10 µs in, the next tail write 50 µs after it.
            w.look(99 + i as u32, drops, t + 10 * US);
            w.look(100 + i as u32, drops, t + 60 * US);
        }
        let r = w.record(0, 0);
        assert_eq!((r.count, r.recent.len(), r.drops_inside), (STALLS_KEPT as u64 + 5, STALLS_KEPT, drops));
    }
}
