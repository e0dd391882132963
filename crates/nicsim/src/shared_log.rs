//! Records the engine keeps for its statistics (slow frames, tail stalls, late doorbell
//! intervals), in shared chunks: a copy for a statistics answer clones a handful of pointers
//! and at most one chunk, instead of every record. Copying thousands of records out of a cold
//! cache held the device for tens of microseconds per answer (docs/nicsim.md, "TinyNF's
//! agent").

use std::collections::VecDeque;
use std::sync::Arc;

/// Records per chunk.
const CHUNK: usize = 256;

/// The latest `keep` records pushed (all of them if `keep` is `usize::MAX`), oldest first.
#[derive(Debug, Clone)]
pub struct SharedLog<T> {
    full: VecDeque<Arc<[T]>>,
    open: Vec<T>,
    keep: usize,
}

impl<T: Copy> SharedLog<T> {
    /// A log that keeps the latest `keep` records.
    pub fn new(keep: usize) -> Self {
        SharedLog { full: VecDeque::new(), open: Vec::new(), keep }
    }

    /// Records kept.
    pub fn len(&self) -> usize {
        self.stored().min(self.keep)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn stored(&self) -> usize {
        self.full.len() * CHUNK + self.open.len()
    }

    pub fn push(&mut self, record: T) {
        self.open.push(record);
        if self.open.len() == CHUNK {
            self.full.push_back(Arc::from(std::mem::take(&mut self.open)));
            // The oldest chunk goes once the others hold `keep` without it.
            while self.stored() - CHUNK >= self.keep {
                self.full.pop_front();
            }
        }
    }

    pub fn clear(&mut self) {
        self.full.clear();
        self.open.clear();
    }

    /// The records kept, oldest first.
    pub fn to_vec(&self) -> Vec<T> {
        let skip = self.stored() - self.len();
        let mut all = Vec::with_capacity(self.len());
        for chunk in &self.full {
            all.extend_from_slice(chunk);
        }
        all.extend_from_slice(&self.open);
        all.drain(..skip);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_every_record_in_order_across_chunks_and_copies() {
        let n = CHUNK * 2 + 7;
        let mut log = SharedLog::new(usize::MAX);
        assert!(log.is_empty());
        let mut copy = None;
        for i in 0..n as u64 {
            log.push(i);
            if i == CHUNK as u64 {
                copy = Some(log.clone());
            }
        }
        // A copy taken midway is not changed by later records.
        let copy = copy.unwrap().to_vec();
        assert_eq!((copy.len(), copy.last()), (CHUNK + 1, Some(&(CHUNK as u64))));
        let all = log.to_vec();
        assert_eq!((log.len(), all.len()), (n, n));
        assert!(all.iter().enumerate().all(|(i, &r)| r == i as u64));
    }

    #[test]
    fn keeps_exactly_the_latest_records_it_is_asked_to() {
        for keep in [1, 5, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK] {
            let mut log = SharedLog::new(keep);
            for n in 1..=(4 * CHUNK + 3) as u64 {
                log.push(n);
                let kept = log.to_vec();
                let expected: Vec<u64> = (n.saturating_sub(keep as u64) + 1..=n).collect();
                assert_eq!(kept, expected, "keep {keep}, after {n}");
                assert_eq!(log.len(), expected.len());
                // Never more than a chunk beyond what is kept.
                assert!(log.stored() < keep + 2 * CHUNK);
            }
            log.clear();
            assert!(log.is_empty() && log.to_vec().is_empty());
        }
    }
}
