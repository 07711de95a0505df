//! Sequence tracking: loss (gaps), reordering and duplicates over a `u64` sequence.
//!
//! [`SeqTracker`] is fed the sequence numbers of one stream (the `sequence` field of the
//! rtdaq sequence header) in arrival order. It remembers which of the last
//! [`WINDOW`](SeqTracker::WINDOW) sequence numbers below the highest one seen have
//! arrived (a bitmap of `WORDS` `u64`s, `WINDOW = 64 × WORDS`, default 1024), and counts:
//!
//! - `received`: every call to [`observe`](SeqTracker::observe);
//! - `gaps`: packets currently missing. A jump ahead by `d` adds `d − 1`; a late arrival
//!   that fills a hole subtracts 1. A hole that falls out of the window stays counted:
//!   `gaps` is "lost so far";
//! - `reordered`: late arrivals that filled a hole inside the window;
//! - `duplicates`: a sequence number seen again while still inside the window;
//! - `too_old`: a sequence number more than `WINDOW − 1` behind the highest, or before
//!   the first one (the base). The bitmap has forgotten whether it arrived, so it is
//!   counted **only** as `too_old` — neither as reordered nor as duplicate — and does not
//!   decrease `gaps`.
//!
//! Sequence numbers wrap: "ahead" and "behind" are the signed distance
//! `seq.wrapping_sub(highest) as i64`, so `0` after `u64::MAX` is in order.
//!
//! The base is the first sequence number observed, or the one given to
//! [`SeqTracker::with_start`] (then a first packet after it counts as a gap).
//!
//! No allocation, `O(1)` per packet in order; a jump ahead costs `O(min(jump, WINDOW))`
//! bit clears.

/// What one observed sequence number was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SeqEvent {
    /// The next expected number (or the very first one).
    InOrder,
    /// Ahead of the next expected number; `missing` numbers were skipped.
    Gap {
        /// How many numbers were skipped (now counted in `gaps`).
        missing: u64,
    },
    /// A late arrival that filled a hole inside the window.
    Reordered,
    /// Already seen (inside the window).
    Duplicate,
    /// Too far behind to know (outside the window, or before the base).
    TooOld,
}

/// A snapshot of the counters of a [`SeqTracker`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqStats {
    /// Sequence numbers observed (every kind).
    pub received: u64,
    /// Numbers currently missing (lost so far).
    pub gaps: u64,
    /// Late arrivals that filled a hole.
    pub reordered: u64,
    /// Numbers seen again within the window.
    pub duplicates: u64,
    /// Numbers outside the window or before the base.
    pub too_old: u64,
}

/// Tracks one sequence space; see the module docs. `WORDS` must be a power of two.
#[derive(Debug, Clone)]
pub struct SeqTracker<const WORDS: usize = 16> {
    bits: [u64; WORDS],
    /// Highest number seen (or `start − 1` before the first packet after `with_start`).
    head: u64,
    /// First expected number; numbers before it are `TooOld` while it is in the window.
    floor: u64,
    floor_active: bool,
    started: bool,
    stats: SeqStats,
}

impl<const WORDS: usize> Default for SeqTracker<WORDS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const WORDS: usize> SeqTracker<WORDS> {
    /// Numbers remembered below the highest one (`64 × WORDS`).
    pub const WINDOW: u64 = 64 * WORDS as u64;

    /// A tracker whose base is the first number observed.
    pub const fn new() -> Self {
        const {
            assert!(
                WORDS > 0 && WORDS.is_power_of_two(),
                "WORDS must be a power of two"
            )
        };
        Self {
            bits: [0; WORDS],
            head: 0,
            floor: 0,
            floor_active: false,
            started: false,
            stats: SeqStats {
                received: 0,
                gaps: 0,
                reordered: 0,
                duplicates: 0,
                too_old: 0,
            },
        }
    }

    /// A tracker that expects `start` first (numbers before it are `TooOld`).
    pub const fn with_start(start: u64) -> Self {
        let mut t = Self::new();
        t.started = true;
        t.head = start.wrapping_sub(1);
        t.floor = start;
        t.floor_active = true;
        t
    }

    /// Forgets everything (counters included); the next number observed is the base.
    pub fn reset(&mut self) {
        *self = Self::new();
    }

    #[inline]
    fn slot(seq: u64) -> (usize, u64) {
        let idx = (seq & (Self::WINDOW - 1)) as usize;
        (idx >> 6, 1u64 << (idx & 63))
    }

    #[inline]
    fn test_and_set(&mut self, seq: u64) -> bool {
        let (w, m) = Self::slot(seq);
        let word = &mut self.bits[w];
        let was = *word & m != 0;
        *word |= m;
        was
    }

    /// Marks `head+1 ..= seq` unseen, then `seq` seen, and makes `seq` the head.
    fn advance(&mut self, seq: u64, d: u64) {
        if d >= Self::WINDOW {
            self.bits = [0; WORDS];
        } else {
            let mut s = self.head;
            for _ in 0..d {
                s = s.wrapping_add(1);
                let (w, m) = Self::slot(s);
                self.bits[w] &= !m;
            }
        }
        self.test_and_set(seq);
        self.head = seq;
        if self.floor_active && self.head.wrapping_sub(self.floor) >= Self::WINDOW {
            self.floor_active = false;
        }
    }

    /// Records the arrival of `seq` and says what it was.
    pub fn observe(&mut self, seq: u64) -> SeqEvent {
        self.stats.received += 1;
        if !self.started {
            self.started = true;
            self.floor = seq;
            self.floor_active = true;
            self.advance(seq, Self::WINDOW);
            return SeqEvent::InOrder;
        }
        if self.floor_active && (seq.wrapping_sub(self.floor) as i64) < 0 {
            self.stats.too_old += 1;
            return SeqEvent::TooOld;
        }
        let d = seq.wrapping_sub(self.head) as i64;
        if d > 0 {
            let d = d as u64;
            self.advance(seq, d);
            let missing = d - 1;
            self.stats.gaps = self.stats.gaps.saturating_add(missing);
            if missing == 0 {
                SeqEvent::InOrder
            } else {
                SeqEvent::Gap { missing }
            }
        } else if d.unsigned_abs() >= Self::WINDOW {
            self.stats.too_old += 1;
            SeqEvent::TooOld
        } else if self.test_and_set(seq) {
            self.stats.duplicates += 1;
            SeqEvent::Duplicate
        } else {
            self.stats.gaps = self.stats.gaps.saturating_sub(1);
            self.stats.reordered += 1;
            SeqEvent::Reordered
        }
    }

    /// Highest number seen, `None` before the first.
    pub fn highest(&self) -> Option<u64> {
        (self.started && !(self.floor_active && self.head == self.floor.wrapping_sub(1)))
            .then_some(self.head)
    }

    /// All counters at once.
    pub const fn snapshot(&self) -> SeqStats {
        self.stats
    }

    /// Numbers observed.
    pub const fn received(&self) -> u64 {
        self.stats.received
    }

    /// Numbers currently missing (lost so far).
    pub const fn gaps(&self) -> u64 {
        self.stats.gaps
    }

    /// Late arrivals that filled a hole.
    pub const fn reordered(&self) -> u64 {
        self.stats.reordered
    }

    /// Numbers seen again within the window.
    pub const fn duplicates(&self) -> u64 {
        self.stats.duplicates
    }

    /// Numbers outside the window or before the base.
    pub const fn too_old(&self) -> u64 {
        self.stats.too_old
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_gap_fill_duplicate() {
        let mut t: SeqTracker = SeqTracker::new();
        assert_eq!(t.highest(), None);
        assert_eq!(t.observe(10), SeqEvent::InOrder);
        assert_eq!(t.observe(11), SeqEvent::InOrder);
        assert_eq!(t.observe(14), SeqEvent::Gap { missing: 2 });
        assert_eq!(t.gaps(), 2);
        assert_eq!(t.observe(12), SeqEvent::Reordered);
        assert_eq!(t.observe(12), SeqEvent::Duplicate);
        assert_eq!(t.observe(14), SeqEvent::Duplicate);
        assert_eq!(t.observe(13), SeqEvent::Reordered);
        assert_eq!(t.observe(9), SeqEvent::TooOld, "before the base");
        assert_eq!(t.highest(), Some(14));
        assert_eq!(
            t.snapshot(),
            SeqStats {
                received: 8,
                gaps: 0,
                reordered: 2,
                duplicates: 2,
                too_old: 1
            }
        );
    }

    #[test]
    fn with_start() {
        let mut t: SeqTracker<1> = SeqTracker::with_start(u64::MAX - 1);
        assert_eq!(t.highest(), None);
        assert_eq!(t.observe(0), SeqEvent::Gap { missing: 2 });
        assert_eq!(t.observe(u64::MAX - 2), SeqEvent::TooOld);
        assert_eq!(t.observe(u64::MAX), SeqEvent::Reordered);
        assert_eq!(t.observe(u64::MAX - 1), SeqEvent::Reordered);
        assert_eq!(t.gaps(), 0);
        assert_eq!(t.observe(200), SeqEvent::Gap { missing: 199 });
        // Window of 64: 137 (= 200 - 63) is the oldest remembered number.
        assert_eq!(t.observe(137), SeqEvent::Reordered);
        assert_eq!(t.observe(136), SeqEvent::TooOld);
        assert_eq!(t.gaps(), 198, "holes that left the window stay lost");
        t.reset();
        assert_eq!(t.snapshot(), SeqStats::default());
    }

    #[test]
    fn wraps_across_u64_max() {
        let mut t: SeqTracker = SeqTracker::new();
        let start = u64::MAX - 2;
        for i in 0..6u64 {
            assert_eq!(t.observe(start.wrapping_add(i)), SeqEvent::InOrder);
        }
        assert_eq!(t.highest(), Some(2));
        assert_eq!(t.observe(u64::MAX), SeqEvent::Duplicate);
        assert_eq!(t.observe(5), SeqEvent::Gap { missing: 2 });
        assert_eq!(t.observe(4), SeqEvent::Reordered);
        assert_eq!(t.snapshot().gaps, 1);
    }

    #[test]
    fn too_old_beyond_window() {
        let mut t: SeqTracker<2> = SeqTracker::new();
        assert_eq!(SeqTracker::<2>::WINDOW, 128);
        t.observe(1000);
        assert_eq!(t.observe(1000 + 500), SeqEvent::Gap { missing: 499 });
        assert_eq!(t.observe(1500 - 127), SeqEvent::Reordered);
        assert_eq!(t.observe(1500 - 128), SeqEvent::TooOld);
        assert_eq!(t.observe(1000), SeqEvent::TooOld, "seen, but forgotten");
        assert_eq!(
            (t.gaps(), t.reordered(), t.duplicates(), t.too_old()),
            (498, 1, 0, 2)
        );
        // A huge jump clears the whole window.
        assert_eq!(
            t.observe(1 << 40),
            SeqEvent::Gap {
                missing: (1 << 40) - 1501
            }
        );
        assert_eq!(t.observe((1 << 40) - 1), SeqEvent::Reordered);
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        /// A permutation of `0..n` where every number lands fewer than `d` places from
        /// home, with `k` duplicates inserted somewhere after their original.
        fn arrivals(n: u64, d: u64) -> impl Strategy<Value = (Vec<u64>, usize)> {
            (
                proptest::collection::vec(0..d, n as usize),
                proptest::collection::vec(
                    (any::<prop::sample::Index>(), any::<prop::sample::Index>()),
                    0..20,
                ),
            )
                .prop_map(move |(jitter, dups)| {
                    let mut keyed: Vec<(u64, u64)> =
                        (0..n).map(|i| (i + jitter[i as usize], i)).collect();
                    keyed.sort_unstable();
                    let mut v: Vec<u64> = keyed.into_iter().map(|(_, i)| i).collect();
                    for (a, b) in &dups {
                        let src = a.index(v.len());
                        let dst = src + 1 + b.index(v.len() - src);
                        v.insert(dst, v[src]);
                    }
                    (v, dups.len())
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn full_permutation_within_window((v, dups) in (1u64..1000).prop_flat_map(|n| arrivals(n, n))) {
                let n = v.len() - dups;
                let mut t: SeqTracker = SeqTracker::with_start(0);
                let mut ordered = 0;
                for &s in &v {
                    if matches!(t.observe(s), SeqEvent::InOrder | SeqEvent::Gap { .. }) {
                        ordered += 1;
                    }
                }
                let st = t.snapshot();
                prop_assert_eq!(st.received, (n + dups) as u64);
                prop_assert_eq!(st.duplicates, dups as u64);
                prop_assert_eq!(st.gaps, 0);
                prop_assert_eq!(st.too_old, 0);
                prop_assert_eq!(st.reordered + ordered, n as u64);
                prop_assert_eq!(t.highest(), Some(n as u64 - 1));
            }

            #[test]
            fn long_stream_small_window(
                (v, dups) in arrivals(3000, 60),
                base in any::<u64>(),
            ) {
                // Small window (64), bounded displacement, arbitrary base (wraps often).
                let mut t: SeqTracker<1> = SeqTracker::with_start(base);
                for &s in &v {
                    t.observe(base.wrapping_add(s));
                }
                let st = t.snapshot();
                prop_assert_eq!(st.received, (3000 + dups) as u64);
                prop_assert_eq!(st.gaps, 0);
                // A duplicate inserted far after its original may have left the window:
                // then it is counted as too old, never as reordered.
                prop_assert_eq!(st.duplicates + st.too_old, dups as u64);
            }

            #[test]
            fn losses_are_counted(n in 1u64..2000, lost in proptest::collection::btree_set(0u64..2000, 0..50)) {
                let mut t: SeqTracker = SeqTracker::new();
                t.observe(0);
                let mut expect = 0;
                for s in 1..n {
                    if lost.contains(&s) { expect += 1 } else { t.observe(s); }
                }
                t.observe(n);
                prop_assert_eq!(t.gaps(), expect);
            }
        }
    }
}
