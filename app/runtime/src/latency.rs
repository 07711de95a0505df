//! A fixed-size log-linear latency histogram (HDR-style) for nanosecond values.
//!
//! [`Histogram`] covers the whole `u64` range (0 ns to ~584 years, so certainly 0 to
//! 100 s) in [`BUCKETS`] = 1920 counters that live inline in the struct (15 KiB, no
//! heap): [`record`](Histogram::record) is an index computation and an increment, it
//! never allocates, blocks or logs.
//!
//! ## Bucket layout
//! Values `0..64` have one bucket each (exact). Above that, every power of two
//! `[2^k, 2^(k+1))` (k ≥ 6) is split into 32 equal sub-buckets of width `2^(k-5)`, i.e.
//! each bucket is at most `1/32` of its lower bound wide.
//!
//! ## Error bound
//! [`percentile`](Histogram::percentile) uses the nearest-rank definition: the value of
//! rank `⌈p/100 · count⌉` (at least 1) in sorted order. It finds that rank's bucket exactly
//! and reports the bucket's midpoint, clamped to the exact `[min, max]`. So the reported
//! value `r` and the true value `v` satisfy `|r − v| ≤ v / 64`: **relative error ≤ 1.5625 %**
//! (and 0 for values below 64 ns, for `p = 0` → [`min`](Histogram::min), and
//! `p = 100` → [`max`](Histogram::max), which are tracked exactly).
//!
//! One histogram belongs to one thread (the RX consumer of a queue); totals over queues
//! come from [`merge`](Histogram::merge), which gives exactly the histogram of recording
//! every value into one.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::{Deserialize, Serialize};

/// log2 of the number of sub-buckets per power of two.
const SUB_BITS: u32 = 5;
/// Sub-buckets per power of two (32).
const SUB: usize = 1 << SUB_BITS;
/// Number of counters: the index of `u64::MAX` plus one (`58 · 32 + 63 + 1`).
pub const BUCKETS: usize = (64 - SUB_BITS as usize - 1) * SUB + 2 * SUB;
/// Largest relative error of [`Histogram::percentile`] (`1/64`).
pub const MAX_RELATIVE_ERROR: f64 = 1.0 / 64.0;

/// Bucket index of `v`: `shift · 32 + (v >> shift)` with `shift = max(msb(v) − 5, 0)`.
#[inline]
const fn index_of(v: u64) -> usize {
    let msb = 63u32.saturating_sub(v.leading_zeros());
    let shift = msb.saturating_sub(SUB_BITS);
    (shift as usize) * SUB + (v >> shift) as usize
}

/// Smallest value of bucket `i` and its width.
#[inline]
const fn bucket_bounds(i: usize) -> (u64, u64) {
    if i < 2 * SUB {
        (i as u64, 1)
    } else {
        let shift = (i / SUB - 1) as u32;
        let top = (i % SUB + SUB) as u64;
        (top << shift, 1u64 << shift)
    }
}

/// The summary of a [`Histogram`] that goes into reports (all values in nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Median (≤ 1.6 % relative error).
    pub p50: u64,
    /// 99th percentile (≤ 1.6 % relative error).
    pub p99: u64,
    /// 99.9th percentile (≤ 1.6 % relative error).
    pub p999: u64,
    /// Largest value recorded (exact).
    pub max: u64,
    /// Number of values recorded.
    pub count: u64,
    /// Smallest value recorded (exact).
    pub min: u64,
}

/// Log-linear histogram of `u64` nanosecond values; see the [module docs](self).
#[derive(Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: [u64; BUCKETS],
    count: u64,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count)
            .field("min", &self.min())
            .field("p50", &self.percentile(50.0))
            .field("max", &self.max)
            .finish()
    }
}

impl Histogram {
    /// An empty histogram (`const`: it can be a `static` or built before the hot path).
    pub const fn new() -> Self {
        Self {
            counts: [0; BUCKETS],
            count: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// Records one value. `O(1)`, no allocation.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.record_n(ns, 1);
    }

    /// Records `n` occurrences of `ns`. `O(1)`, no allocation.
    #[inline]
    pub fn record_n(&mut self, ns: u64, n: u64) {
        if n == 0 {
            return;
        }
        let c = &mut self.counts[index_of(ns)];
        *c = c.saturating_add(n);
        self.count = self.count.saturating_add(n);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    /// Adds every value of `other` (the result equals recording both sets into one).
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a = a.saturating_add(*b);
        }
        self.count = self.count.saturating_add(other.count);
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Forgets every value.
    pub fn reset(&mut self) {
        *self = Self::new();
    }

    /// Number of values recorded.
    pub const fn count(&self) -> u64 {
        self.count
    }

    /// True when nothing was recorded.
    pub const fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Smallest value recorded (exact); 0 when empty.
    pub const fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min
        }
    }

    /// Largest value recorded (exact); 0 when empty.
    pub const fn max(&self) -> u64 {
        self.max
    }

    /// The `p`-th percentile, `p` in percent (`0.0..=100.0`, clamped; NaN reads as 0).
    ///
    /// Nearest rank `⌈p/100 · count⌉` (at least 1); the result is within
    /// [`MAX_RELATIVE_ERROR`] (1/64) of the true value of that rank. `p = 0` gives
    /// [`min`](Self::min) and `p = 100` gives [`max`](Self::max) exactly. 0 when empty.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 100.0) };
        // Multiply first (exact for integral p·count); `as` saturates.
        let rank = (p * self.count as f64 / 100.0).ceil() as u64;
        let rank = rank.clamp(1, self.count);
        if rank == 1 {
            return self.min;
        }
        if rank == self.count {
            return self.max;
        }
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen = seen.saturating_add(c);
            if seen >= rank {
                let (lo, width) = bucket_bounds(i);
                let mid = lo + (width - 1) / 2;
                return mid.clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// p50, p99, p99.9, min, max and count.
    pub fn summary(&self) -> LatencySummary {
        LatencySummary {
            p50: self.percentile(50.0),
            p99: self.percentile(99.0),
            p999: self.percentile(99.9),
            max: self.max(),
            count: self.count,
            min: self.min(),
        }
    }
}

/// A [`Histogram`] that one thread records into while others read it: the same buckets as
/// relaxed atomics (15 KiB, no heap). **Single writer**: [`record`](Self::record) is a
/// plain load and store of one counter (no read-modify-write instruction), so two writers
/// would lose counts. Readers get a [`snapshot`](Self::snapshot) that may lag the writer by
/// the values in flight. The queue threads keep their loop turns and wake-up latencies in
/// these ([`crate::stall`]).
pub struct SharedHistogram {
    counts: [AtomicU64; BUCKETS],
    min: AtomicU64,
    max: AtomicU64,
    /// Sum of the values (wrapping), ns: a Prometheus histogram's `_sum`.
    sum: AtomicU64,
}

impl Default for SharedHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for SharedHistogram {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.snapshot().fmt(f)
    }
}

impl SharedHistogram {
    /// Empty.
    pub const fn new() -> Self {
        Self {
            counts: [const { AtomicU64::new(0) }; BUCKETS],
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }

    /// Records one value (the single writer only). No allocation, no atomic RMW.
    #[inline]
    pub fn record(&self, ns: u64) {
        let c = &self.counts[index_of(ns)];
        c.store(c.load(Relaxed).wrapping_add(1), Relaxed);
        self.sum
            .store(self.sum.load(Relaxed).wrapping_add(ns), Relaxed);
        if ns > self.max.load(Relaxed) {
            self.max.store(ns, Relaxed);
        }
        if ns < self.min.load(Relaxed) {
            self.min.store(ns, Relaxed);
        }
    }

    /// The values recorded so far as a [`Histogram`].
    pub fn snapshot(&self) -> Histogram {
        let mut h = Histogram::new();
        for (dst, src) in h.counts.iter_mut().zip(&self.counts) {
            *dst = src.load(Relaxed);
        }
        h.count = h.counts.iter().sum();
        if h.count > 0 {
            h.min = self.min.load(Relaxed);
            h.max = self.max.load(Relaxed);
        }
        h
    }

    /// Cumulative counts at each bound of [`OCTAVE_BOUNDS_NS`] (`le` of a Prometheus
    /// histogram: exact, those bounds are bucket edges), the total and the sum (ns).
    pub fn octaves(&self) -> ([u64; OCTAVE_BOUNDS_NS.len()], u64, u64) {
        let h = self.snapshot();
        let mut out = [0u64; OCTAVE_BOUNDS_NS.len()];
        for (o, &bound) in out.iter_mut().zip(OCTAVE_BOUNDS_NS.iter()) {
            // Buckets below index_of(bound + 1) hold exactly the values <= bound.
            *o = h.counts[..index_of(bound + 1)].iter().sum();
        }
        (out, h.count, self.sum.load(Relaxed))
    }
}

/// Bounds (ns, inclusive) at which `/metrics` exports a [`SharedHistogram`]: `2^k − 1` for
/// k = 10..=30, about 1 µs to 1.07 s by factors of two (bucket edges of [`Histogram`], so
/// the cumulative counts are exact).
pub const OCTAVE_BOUNDS_NS: [u64; 21] = {
    let mut b = [0u64; 21];
    let mut k = 0;
    while k < 21 {
        b[k] = (1u64 << (k + 10)) - 1;
        k += 1;
    }
    b
};

/// Upper bounds (ns, inclusive) of the live latency histogram that `/metrics` exports as
/// `rtdaq_rx_latency_seconds`: 1-2-5 steps from 1 µs to 1 s; one more bucket holds the rest.
pub const LIVE_BOUNDS_NS: [u64; 19] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
];

/// Buckets of the live histogram: one per bound and one above them.
pub const LIVE_BUCKETS: usize = LIVE_BOUNDS_NS.len() + 1;

/// The consumer thread's coarse latency counts (plain integers, its own), published now and
/// then into a [`LiveLatency`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coarse {
    /// Values per bucket (not cumulative): bucket `k` holds `LIVE_BOUNDS_NS[k-1] < v ≤
    /// LIVE_BOUNDS_NS[k]`.
    pub counts: [u64; LIVE_BUCKETS],
    /// Sum of the values, ns.
    pub sum_ns: u64,
}

impl Default for Coarse {
    fn default() -> Self {
        Self {
            counts: [0; LIVE_BUCKETS],
            sum_ns: 0,
        }
    }
}

impl Coarse {
    /// Counts `ns` (a binary search over 19 bounds: a few ns, see benches/latency.rs and
    /// docs/benchmarks/metrics.md). No allocation.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        let k = LIVE_BOUNDS_NS.partition_point(|&b| b < ns);
        self.counts[k] += 1;
        self.sum_ns = self.sum_ns.wrapping_add(ns);
    }
}

/// A queue's latency histogram as the metrics thread reads it: relaxed atomics with one
/// writer (the queue's consumer), stored every few bursts. A reader may see one bucket
/// newer than another; the count it exports is the sum of the buckets it read, so the
/// histogram it exports is always self-consistent.
#[derive(Debug, Default)]
pub struct LiveLatency {
    counts: [std::sync::atomic::AtomicU64; LIVE_BUCKETS],
    sum_ns: std::sync::atomic::AtomicU64,
}

impl LiveLatency {
    /// Stores `c` (the writer's totals so far).
    pub fn store(&self, c: &Coarse) {
        use std::sync::atomic::Ordering::Relaxed;
        for (a, v) in self.counts.iter().zip(c.counts) {
            a.store(v, Relaxed);
        }
        self.sum_ns.store(c.sum_ns, Relaxed);
    }

    /// The totals last stored.
    pub fn load(&self) -> Coarse {
        use std::sync::atomic::Ordering::Relaxed;
        let mut c = Coarse::default();
        for (v, a) in c.counts.iter_mut().zip(&self.counts) {
            *v = a.load(Relaxed);
        }
        c.sum_ns = self.sum_ns.load(Relaxed);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_histogram_equals_the_plain_one_and_its_octaves_are_exact() {
        let shared = SharedHistogram::new();
        let mut plain = Histogram::new();
        assert_eq!(shared.snapshot(), plain);
        for v in [
            0u64,
            1,
            1023,
            1024,
            1025,
            2047,
            2048,
            50_000,
            1 << 30,
            (1 << 30) + 1,
            u64::MAX,
        ] {
            shared.record(v);
            plain.record(v);
        }
        assert_eq!(shared.snapshot(), plain);
        assert_eq!(shared.snapshot().summary(), plain.summary());
        let (le, total, _) = shared.octaves();
        assert_eq!(total, 11);
        assert_eq!(OCTAVE_BOUNDS_NS[0], 1023);
        assert_eq!(le[0], 3, "0, 1, 1023 are <= 1023");
        assert_eq!(le[1], 6, "and 1024, 1025, 2047 <= 2047");
        assert_eq!(le[2], 7, "and 2048 <= 4095");
        assert_eq!(le[20], 8, "all below 2^30");
    }

    /// xorshift64*: a deterministic generator for tests (no dev-dependency needed).
    pub(crate) struct Rng(u64);
    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
    }

    fn nearest_rank(sorted: &[u64], p: f64) -> u64 {
        let n = sorted.len() as u64;
        let rank = (p * n as f64 / 100.0).ceil() as u64;
        sorted[(rank.clamp(1, n) - 1) as usize]
    }

    #[test]
    fn layout_is_continuous_and_bounded() {
        assert_eq!(BUCKETS, 1920);
        assert_eq!(index_of(0), 0);
        assert_eq!(index_of(63), 63);
        assert_eq!(index_of(64), 64);
        assert_eq!(index_of(u64::MAX), BUCKETS - 1);
        for i in 0..BUCKETS {
            let (lo, w) = bucket_bounds(i);
            assert_eq!(index_of(lo), i, "bucket {i}");
            assert_eq!(index_of(lo + (w - 1)), i, "bucket {i}");
            if i + 1 < BUCKETS {
                assert_eq!(bucket_bounds(i + 1).0, lo + w, "bucket {i} continuous");
            }
            if i >= 2 * SUB {
                assert!(w * 32 <= lo, "bucket {i} width ≤ lo/32");
            }
        }
    }

    #[test]
    fn empty_and_exact_small_sets() {
        let mut h = Histogram::new();
        assert_eq!(h.summary(), LatencySummary::default());
        assert_eq!((h.percentile(50.0), h.min(), h.max()), (0, 0, 0));
        for v in [5u64, 1, 3, 2, 4] {
            h.record(v);
        }
        assert_eq!(h.count(), 5);
        assert_eq!(h.percentile(0.0), 1);
        assert_eq!(h.percentile(20.0), 1);
        assert_eq!(h.percentile(21.0), 2);
        assert_eq!(h.percentile(50.0), 3);
        assert_eq!(h.percentile(80.0), 4);
        assert_eq!(h.percentile(100.0), 5);
        assert_eq!(h.percentile(f64::NAN), 1);
        assert_eq!(h.percentile(1e9), 5);
        // p99.9 of 1000 values is rank 999, not the max.
        let mut k = Histogram::new();
        (1..=1000u64).for_each(|v| k.record(v * 64));
        assert_eq!(
            (k.percentile(99.9), k.max()),
            (63_999, 64_000),
            "bucket [63488, 64512)"
        );
        // Large values: min and max exact, the middle within the bound.
        let mut h = Histogram::new();
        for v in [1_000u64, 123_456_789, 99_999_999_999] {
            h.record(v);
        }
        let s = h.summary();
        assert_eq!((s.min, s.max, s.count), (1_000, 99_999_999_999, 3));
        assert!(s.p50.abs_diff(123_456_789) as f64 <= 123_456_789.0 / 64.0);
        assert_eq!(s.p99, 99_999_999_999);
        h.record_n(7, 0);
        assert_eq!(h.count(), 3);
        h.reset();
        assert!(h.is_empty());
    }

    #[test]
    fn error_bound_against_sorted_reference() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for round in 0..40 {
            let n = 1 + (rng.next() % 5000) as usize;
            let mut h = Histogram::new();
            let mut v: Vec<u64> = (0..n)
                .map(|_| {
                    // Log-uniform over 0 ns .. ~100 s so every octave is exercised.
                    let bits = rng.next() % 37;
                    rng.next() & ((1u64 << bits) - 1)
                })
                .collect();
            v.iter().for_each(|&x| h.record(x));
            v.sort_unstable();
            for p in [
                0.0, 0.1, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0,
            ] {
                let want = nearest_rank(&v, p);
                let got = h.percentile(p);
                let err = got.abs_diff(want) as f64;
                assert!(
                    err <= want as f64 * MAX_RELATIVE_ERROR,
                    "round {round} n {n} p {p}: got {got} want {want}"
                );
            }
            assert_eq!((h.min(), h.max()), (v[0], v[n - 1]));
        }
    }

    #[test]
    fn merge_equals_record_all() {
        let mut rng = Rng(42);
        let (mut a, mut b, mut all) = (Histogram::new(), Histogram::new(), Histogram::new());
        for i in 0..10_000 {
            let x = rng.next() >> (rng.next() % 64);
            if i % 3 == 0 { &mut a } else { &mut b }.record(x);
            all.record(x);
        }
        let mut m = a.clone();
        m.merge(&b);
        assert_eq!(m, all);
        assert_eq!(m.summary(), all.summary());
        let mut e = Histogram::new();
        e.merge(&Histogram::new());
        assert_eq!(e.summary(), LatencySummary::default());
        e.merge(&all);
        assert_eq!(e, all);
    }

    #[test]
    fn coarse_buckets_are_inclusive_upper_bounds() {
        let mut c = Coarse::default();
        for ns in [
            0,
            1_000,
            1_001,
            2_000,
            999_999_999,
            1_000_000_000,
            1_000_000_001,
            u64::MAX / 2,
        ] {
            c.record(ns);
        }
        assert_eq!(c.counts[0], 2, "0 and 1000 are <= 1 µs");
        assert_eq!(c.counts[1], 2, "1001 and 2000 are <= 2 µs");
        assert_eq!(c.counts[LIVE_BUCKETS - 2], 2, "<= 1 s");
        assert_eq!(c.counts[LIVE_BUCKETS - 1], 2, "above 1 s");
        let live = LiveLatency::default();
        live.store(&c);
        assert_eq!(live.load(), c);
    }
}
