//! Per-queue counters: packets, bytes, drops by [`DropReason`], sequence statistics.
//!
//! A [`QueueCounters`] is written by **one thread** (the queue's I/O thread) and read by any
//! other thread through [`snapshot`](QueueCounters::snapshot). Because there is a single
//! writer, an update is a `Relaxed` load plus a `Relaxed` store of an `AtomicU64`, not a locked
//! read-modify-write: no `lock` prefix on x86_64, no LL/SC loop on aarch64. Readers never see a
//! torn value (each field is one 64-bit atomic) but a snapshot is not one consistent instant
//! across fields (each field is read separately); rates computed from
//! [`CounterSnapshot::delta`] are exact over time anyway.
//!
//! **Single-writer contract**: two threads updating the same `QueueCounters` concurrently is
//! memory-safe but may lose updates. Give each writer its own `QueueCounters`.
//!
//! `QueueCounters::new` is `const` (counters can be `static`); the struct is 64-byte aligned
//! so two queues' counters never share a cache line. Nothing here allocates, blocks or logs.
//!
//! ```
//! use rtdaq_core::counters::{DropReason, QueueCounters};
//! static Q0: QueueCounters = QueueCounters::new();
//! let before = Q0.snapshot();
//! Q0.record_rx(1500);
//! Q0.record_drop(DropReason::RingFull);
//! let d = Q0.snapshot().delta(&before);
//! assert_eq!((d.packets, d.bytes, d.total_drops()), (1, 1500, 1));
//! assert_eq!(DropReason::RingFull.as_str(), "ring_full");
//! ```

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Why a packet was dropped. Stable `snake_case` names via [`as_str`](Self::as_str) for JSON
/// reports; the discriminant indexes [`CounterSnapshot::drops`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum DropReason {
    /// The ring to the consumer was full (`ring_full`).
    RingFull = 0,
    /// No free buffer in the pool (`pool_empty`).
    PoolEmpty = 1,
    /// Larger than the buffer or the configured maximum (`too_large`).
    TooLarge = 2,
    /// Headers did not parse (`malformed`).
    Malformed = 3,
    /// No flow rule matched and there is no default queue (`no_flow`).
    NoFlow = 4,
    /// A flow rule's action was "drop" (`flow_drop`).
    FlowDrop = 5,
    /// Dropped by the kernel or NIC and reported to us, e.g. `SO_RXQ_OVFL` (`kernel`).
    Kernel = 6,
    /// The packet was truncated (buffer shorter than the frame) (`truncated`).
    Truncated = 7,
    /// Received and validated, but its GPU batch was refused because the GPU stage already
    /// had `depth` batches in flight (`gpu_busy`): the GPU fell behind, RX did not wait.
    GpuBusy = 8,
}

impl DropReason {
    /// Number of reasons.
    pub const COUNT: usize = 9;

    /// Every reason, in discriminant order.
    pub const ALL: [DropReason; DropReason::COUNT] = [
        DropReason::RingFull,
        DropReason::PoolEmpty,
        DropReason::TooLarge,
        DropReason::Malformed,
        DropReason::NoFlow,
        DropReason::FlowDrop,
        DropReason::Kernel,
        DropReason::Truncated,
        DropReason::GpuBusy,
    ];

    /// Stable `snake_case` name (`"ring_full"`, `"pool_empty"`, ...), for JSON keys.
    pub const fn as_str(self) -> &'static str {
        match self {
            DropReason::RingFull => "ring_full",
            DropReason::PoolEmpty => "pool_empty",
            DropReason::TooLarge => "too_large",
            DropReason::Malformed => "malformed",
            DropReason::NoFlow => "no_flow",
            DropReason::FlowDrop => "flow_drop",
            DropReason::Kernel => "kernel",
            DropReason::Truncated => "truncated",
            DropReason::GpuBusy => "gpu_busy",
        }
    }

    /// Index in `0..COUNT` (the discriminant).
    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The reason named `name` (inverse of [`as_str`](Self::as_str)).
    pub fn from_name(name: &str) -> Option<DropReason> {
        DropReason::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Counters of one queue. See the [module docs](self) for the single-writer contract.
#[repr(align(64))]
pub struct QueueCounters {
    packets: AtomicU64,
    bytes: AtomicU64,
    drops: [AtomicU64; DropReason::COUNT],
    seq_gaps: AtomicU64,
    reordered: AtomicU64,
    duplicates: AtomicU64,
    corrupt: AtomicU64,
}

/// Adds `n` to a single-writer counter: `Relaxed` load + store, no read-modify-write.
#[inline(always)]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

impl QueueCounters {
    /// All zero. `const`, so counters can be `static`.
    pub const fn new() -> Self {
        QueueCounters {
            packets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            drops: [const { AtomicU64::new(0) }; DropReason::COUNT],
            seq_gaps: AtomicU64::new(0),
            reordered: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            corrupt: AtomicU64::new(0),
        }
    }

    /// One packet of `bytes` bytes delivered. Writer thread only; never blocks.
    #[inline]
    pub fn record_rx(&self, bytes: u64) {
        self.record_rx_burst(1, bytes);
    }

    /// `packets` packets totalling `bytes` bytes delivered (one update per burst).
    /// Writer thread only; never blocks.
    #[inline]
    pub fn record_rx_burst(&self, packets: u64, bytes: u64) {
        bump(&self.packets, packets);
        bump(&self.bytes, bytes);
    }

    /// One packet dropped for `reason`. Writer thread only; never blocks.
    #[inline]
    pub fn record_drop(&self, reason: DropReason) {
        self.record_drops(reason, 1);
    }

    /// `n` packets dropped for `reason` (e.g. a kernel-reported overflow delta).
    /// Writer thread only; never blocks.
    #[inline]
    pub fn record_drops(&self, reason: DropReason, n: u64) {
        bump(&self.drops[reason.index()], n);
    }

    /// `packets` packets totalling `bytes` that were already recorded as delivered (by the
    /// engine) but could not be handed on (e.g. the hand-over ring was full): moves them from
    /// delivered to dropped for `reason`, so every packet stays counted exactly once.
    /// Writer thread only; never blocks.
    #[inline]
    pub fn reclassify_as_drop(&self, reason: DropReason, packets: u64, bytes: u64) {
        self.packets
            .store(self.packets.load(Relaxed).wrapping_sub(packets), Relaxed);
        self.bytes
            .store(self.bytes.load(Relaxed).wrapping_sub(bytes), Relaxed);
        bump(&self.drops[reason.index()], packets);
    }

    /// `n` packets lost according to sequence numbers. Writer thread only.
    #[inline]
    pub fn add_seq_gaps(&self, n: u64) {
        bump(&self.seq_gaps, n);
    }

    /// `n` packets arrived out of order. Writer thread only.
    #[inline]
    pub fn add_reordered(&self, n: u64) {
        bump(&self.reordered, n);
    }

    /// `n` duplicate packets. Writer thread only.
    #[inline]
    pub fn add_duplicates(&self, n: u64) {
        bump(&self.duplicates, n);
    }

    /// `n` corrupt packets (payload check failed). Writer thread only.
    #[inline]
    pub fn add_corrupt(&self, n: u64) {
        bump(&self.corrupt, n);
    }

    /// Drops for `reason` so far. Any thread.
    #[inline]
    pub fn drops(&self, reason: DropReason) -> u64 {
        self.drops[reason.index()].load(Relaxed)
    }

    /// Current values (each field read atomically, `Relaxed`). Any thread; never blocks.
    pub fn snapshot(&self) -> CounterSnapshot {
        CounterSnapshot {
            packets: self.packets.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            drops: core::array::from_fn(|i| self.drops[i].load(Relaxed)),
            seq_gaps: self.seq_gaps.load(Relaxed),
            reordered: self.reordered.load(Relaxed),
            duplicates: self.duplicates.load(Relaxed),
            corrupt: self.corrupt.load(Relaxed),
        }
    }
}

impl Default for QueueCounters {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for QueueCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.snapshot().fmt(f)
    }
}

/// A copy of a [`QueueCounters`] at one time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CounterSnapshot {
    /// Packets delivered.
    pub packets: u64,
    /// Bytes delivered.
    pub bytes: u64,
    /// Drops, indexed by [`DropReason::index`].
    pub drops: [u64; DropReason::COUNT],
    /// Packets lost according to sequence numbers.
    pub seq_gaps: u64,
    /// Packets received out of order.
    pub reordered: u64,
    /// Duplicate packets.
    pub duplicates: u64,
    /// Corrupt packets.
    pub corrupt: u64,
}

impl CounterSnapshot {
    /// `self - earlier`, field by field (for per-interval rates). Saturating: a counter that
    /// went backwards (a reset) yields 0, not a huge number.
    pub fn delta(&self, earlier: &CounterSnapshot) -> CounterSnapshot {
        CounterSnapshot {
            packets: self.packets.saturating_sub(earlier.packets),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            drops: core::array::from_fn(|i| self.drops[i].saturating_sub(earlier.drops[i])),
            seq_gaps: self.seq_gaps.saturating_sub(earlier.seq_gaps),
            reordered: self.reordered.saturating_sub(earlier.reordered),
            duplicates: self.duplicates.saturating_sub(earlier.duplicates),
            corrupt: self.corrupt.saturating_sub(earlier.corrupt),
        }
    }

    /// Drops for `reason`.
    #[inline]
    pub fn drop_count(&self, reason: DropReason) -> u64 {
        self.drops[reason.index()]
    }

    /// Sum of drops over every reason.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().fold(0u64, |a, &d| a.wrapping_add(d))
    }

    /// `(reason, count)` for every reason, in [`DropReason::ALL`] order.
    pub fn drops_by_reason(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL
            .into_iter()
            .map(|r| (r, self.drops[r.index()]))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn names_are_stable_and_unique() {
        let want = [
            "ring_full",
            "pool_empty",
            "too_large",
            "malformed",
            "no_flow",
            "flow_drop",
            "kernel",
            "truncated",
            "gpu_busy",
        ];
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
            assert_eq!(r.as_str(), want[i]);
            assert_eq!(DropReason::from_name(want[i]), Some(*r));
        }
        assert_eq!(DropReason::from_name("nope"), None);
    }

    #[test]
    fn counts_and_delta() {
        let c = QueueCounters::new();
        c.record_rx(100);
        c.record_rx_burst(3, 300);
        let a = c.snapshot();
        c.record_drop(DropReason::PoolEmpty);
        c.record_drops(DropReason::Kernel, 5);
        c.add_seq_gaps(2);
        c.add_reordered(1);
        c.add_duplicates(1);
        c.add_corrupt(1);
        let b = c.snapshot();
        assert_eq!((a.packets, a.bytes), (4, 400));
        let d = b.delta(&a);
        assert_eq!(d.packets, 0);
        assert_eq!(d.total_drops(), 6);
        assert_eq!(d.drop_count(DropReason::Kernel), 5);
        assert_eq!(c.drops(DropReason::PoolEmpty), 1);
        assert_eq!(
            (d.seq_gaps, d.reordered, d.duplicates, d.corrupt),
            (2, 1, 1, 1)
        );
        assert_eq!(a.delta(&b).total_drops(), 0);
        assert_eq!(b.drops_by_reason().filter(|&(_, n)| n > 0).count(), 2);
        assert_eq!(core::mem::align_of::<QueueCounters>(), 64);
    }

    #[test]
    fn reader_on_another_thread_sees_monotonic_values() {
        let c = QueueCounters::new();
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..10_000 {
                    c.record_rx(1);
                }
            });
            let mut last = 0;
            while last < 10_000 {
                let now = c.snapshot().packets;
                assert!(now >= last);
                last = now;
                std::thread::yield_now();
            }
        });
        assert_eq!(c.snapshot().bytes, 10_000);
    }
}
