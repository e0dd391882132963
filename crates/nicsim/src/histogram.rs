//! A log-linear histogram of latencies, cheap enough to record every frame.
//!
//! Values below 256 have a bucket each; above, every power-of-two range is split into 128
//! buckets, so a bucket is at most 1/128 (0.8%) of its values wide. Recording is a
//! leading-zero count, a shift and an increment (the HDR histogram it replaces cost about 70
//! instructions per frame, the largest single item of the sink). Minimum, maximum and mean are
//! exact; percentiles are the upper bound of their bucket, as HDR histograms report them.

/// Bits of exact resolution below the first split.
const LINEAR_BITS: u32 = 8;
const LINEAR: u64 = 1 << LINEAR_BITS;
const HALF: u64 = LINEAR / 2;
/// Largest recordable value: 2^36 − 1 ns is 68 s; larger values are clamped.
pub const MAX_VALUE: u64 = (1 << 36) - 1;
const BUCKETS: usize = bucket_of(MAX_VALUE) + 1;

const fn bucket_of(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let shift = (63 - v.leading_zeros()) - (LINEAR_BITS - 1);
    (shift as u64 * HALF + (v >> shift)) as usize
}

/// The smallest and largest value that fall in bucket `i`.
fn bounds_of(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < LINEAR {
        return (i, i);
    }
    let shift = i / HALF - 1;
    let mantissa = i - shift * HALF;
    (mantissa << shift, ((mantissa + 1) << shift) - 1)
}

#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    /// Samples per bucket; their total is the number of samples, which `record` therefore
    /// need not count.
    counts: Vec<u64>,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> Self {
        LatencyHistogram { counts: vec![0; BUCKETS], sum: 0, min: u64::MAX, max: 0 }
    }

    /// Records `value`, clamped to [`MAX_VALUE`].
    #[inline]
    pub fn record(&mut self, value: u64) {
        let v = value.min(MAX_VALUE);
        match self.counts.get_mut(bucket_of(v)) {
            Some(c) => *c += 1,
            None => self.record_beyond(bucket_of(v)),
        }
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// A sample in a bucket past the end of a [`LatencyHistogram::snapshot`]'s.
    #[cold]
    fn record_beyond(&mut self, bucket: usize) {
        self.counts.resize(BUCKETS, 0);
        self.counts[bucket] += 1;
    }

    /// A copy of the buckets up to the maximum's only: a latency histogram of microseconds
    /// copies a few KiB instead of the 30 KiB of every bucket, which is what a statistics
    /// answer holds the engine for.
    pub fn snapshot(&self) -> LatencyHistogram {
        let used = if self.is_empty() { 0 } else { bucket_of(self.max) + 1 };
        LatencyHistogram { counts: self.counts[..used].to_vec(), ..*self }
    }

    pub fn len(&self) -> u64 {
        self.counts.iter().sum()
    }

    pub fn is_empty(&self) -> bool {
        // Samples are clamped to MAX_VALUE, so the first one takes the minimum below u64::MAX.
        self.min == u64::MAX
    }

    pub fn min(&self) -> u64 {
        if self.is_empty() {
            0
        } else {
            self.min
        }
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn mean(&self) -> f64 {
        if self.is_empty() {
            0.0
        } else {
            self.sum as f64 / self.len() as f64
        }
    }

    /// The value below or at which a fraction `q` (0–1) of the samples lie: the upper bound of
    /// the bucket holding the ⌈q·n⌉-th smallest sample, never more than the maximum.
    pub fn value_at_quantile(&self, q: f64) -> u64 {
        if self.is_empty() {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.len() as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bounds_of(i).1.min(self.max).max(self.min);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_summarizes_as_the_whole_and_takes_larger_samples() {
        let mut h = LatencyHistogram::new();
        for v in [3, 700, 9_000, 9_000, 120_000] {
            h.record(v);
        }
        let mut s = h.snapshot();
        assert!(s.counts.len() < BUCKETS / 2, "{} buckets copied", s.counts.len());
        for q in [0.0, 0.2, 0.5, 0.9, 1.0] {
            assert_eq!(s.value_at_quantile(q), h.value_at_quantile(q), "quantile {q}");
        }
        assert_eq!((s.len(), s.min(), s.max(), s.mean()), (h.len(), h.min(), h.max(), h.mean()));
        s.record(MAX_VALUE);
        h.record(MAX_VALUE);
        assert_eq!((s.len(), s.value_at_quantile(1.0)), (h.len(), h.value_at_quantile(1.0)));
        assert!(LatencyHistogram::new().snapshot().is_empty());
    }

    #[test]
    fn buckets_tile_the_range_without_gaps() {
        let mut expected_low = 0;
        for i in 0..BUCKETS {
            let (low, high) = bounds_of(i);
            assert_eq!(low, expected_low, "bucket {i}");
            assert!(high >= low);
            assert_eq!(bucket_of(low), i);
            assert_eq!(bucket_of(high), i);
            // At most 1/128 of the value wide.
            assert!((high - low) * 128 <= low.max(1), "bucket {i} is [{low}, {high}]");
            expected_low = high + 1;
        }
        assert_eq!(expected_low, MAX_VALUE + 1);
    }

    #[test]
    fn small_values_are_exact_and_large_ones_within_one_percent() {
        let mut h = LatencyHistogram::new();
        for v in 1..=200 {
            h.record(v);
        }
        assert_eq!(h.value_at_quantile(0.5), 100);
        assert_eq!(h.value_at_quantile(1.0), 200);
        assert_eq!(h.min(), 1);
        assert_eq!(h.mean(), 100.5);

        let mut h = LatencyHistogram::new();
        for v in 1..=1_000_000u64 {
            h.record(v * 7);
        }
        for (q, exact) in [(0.5, 3_500_000.0), (0.9, 6_300_000.0), (0.99, 6_930_000.0)] {
            let got = h.value_at_quantile(q) as f64;
            assert!((got - exact).abs() / exact < 0.01, "p{q}: {got} vs {exact}");
        }
        assert_eq!(h.max(), 7_000_000);
        assert_eq!(h.len(), 1_000_000);
    }

    #[test]
    fn huge_values_are_clamped_and_empty_is_zero() {
        let mut h = LatencyHistogram::new();
        assert_eq!((h.value_at_quantile(0.99), h.min(), h.max(), h.mean()), (0, 0, 0, 0.0));
        h.record(u64::MAX);
        assert_eq!(h.max(), MAX_VALUE);
        assert_eq!(h.value_at_quantile(0.5), MAX_VALUE);
    }
}
