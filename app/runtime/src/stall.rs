//! Stalls of the queue threads and CPU steal: why a healthy-looking run still lost packets.
//!
//! A `SCHED_FIFO` queue thread owns its core against ordinary work, but not against a
//! hypervisor that deschedules the whole vCPU (steal time), a higher-priority thread, an
//! interrupt storm or a page fault that waits for I/O. While it is off its core, nothing
//! drains its queue: a NIC ring of `n` descriptors at `r` packets per second overflows after
//! `n / r` seconds of stall. Two measurements make such a loss explainable:
//!
//! - [`StallWatch`]: per queue thread, the **longest turn** of its loop (the time between two
//!   successive clock reads of the loop, its own bounded waits included: a sleeping RX queue
//!   waits up to its `timeout_us` inside `poll` (a sleeping socket queue with nothing to
//!   hand over blocks in `recvmmsg` up to one jiffy, which on an idle queue, e.g. after the
//!   generator stopped, shows as turns of several ms), an idle thread 50 µs, a paced
//!   generator up to 1 ms) and when it ended, as seconds into the run. A turn far longer
//!   than those waits while traffic flows is a stall. The thread keeps its running maximum in a local [`StallClock`] and
//!   touches the shared atomics only when the maximum grows (rare): one clock read and one
//!   compare per turn, no allocation.
//! - The same turns as a **histogram** ([`StallWatch::turns`]: every turn, 1.6 %
//!   resolution), and for a thread that sleeps until a deadline (a paced generator or
//!   replay) its **wake-up latency** ([`StallWatch::wakes`]: how late it ran after the time
//!   it asked to wake at, what `cyclictest` measures). One counter store per turn.
//! - [`cpu_steal`]: the steal ticks of each CPU from `/proc/stat` (time the hypervisor ran
//!   something else while this vCPU had work), read before and after the run; the report
//!   prints the difference for the queue cores.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::latency::{LatencySummary, SharedHistogram};

/// The loop turns of one queue thread (single writer: that thread).
#[derive(Debug, Default)]
pub struct StallWatch {
    longest_ns: AtomicU64,
    /// Monotonic time ([`crate::pacer::now_ns`]) when the longest turn ended.
    longest_end_ns: AtomicU64,
    /// Monotonic time of a recent turn (stored at most every [`ALIVE_EVERY_NS`]): the
    /// systemd watchdog's sign of progress ([`crate::observe::notify`]).
    alive_ns: AtomicU64,
    /// Every loop turn, ns.
    pub turns: SharedHistogram,
    /// How late the thread woke after each sleep until a deadline, ns (empty for threads
    /// that never sleep until one).
    pub wakes: SharedHistogram,
}

/// How often a thread stores that it is alive (ns).
pub const ALIVE_EVERY_NS: u64 = 20_000_000;

pub use crate::thread_kind::ThreadKind;

impl StallWatch {
    /// No turn seen yet.
    pub const fn new() -> Self {
        StallWatch {
            longest_ns: AtomicU64::new(0),
            longest_end_ns: AtomicU64::new(0),
            alive_ns: AtomicU64::new(0),
            turns: SharedHistogram::new(),
            wakes: SharedHistogram::new(),
        }
    }

    /// The loop turns and the wake-up latencies so far (`None` for a histogram that holds
    /// nothing).
    pub fn jitter(&self) -> (Option<LatencySummary>, Option<LatencySummary>) {
        let sum = |h: &SharedHistogram| {
            let s = h.snapshot();
            (!s.is_empty()).then(|| s.summary())
        };
        (sum(&self.turns), sum(&self.wakes))
    }

    /// Monotonic time of a recent turn of the thread (0: it never turned).
    pub fn alive_ns(&self) -> u64 {
        self.alive_ns.load(Relaxed)
    }

    /// Stores that the watched work made progress at `now_ns`, at most every
    /// [`ALIVE_EVERY_NS`] (for work that is not one thread's loop, e.g. a GPU stage's
    /// completions). Single writer.
    #[inline]
    pub fn progressed(&self, now_ns: u64) {
        if now_ns.saturating_sub(self.alive_ns.load(Relaxed)) >= ALIVE_EVERY_NS {
            self.alive_ns.store(now_ns, Relaxed);
        }
    }

    /// `(longest turn ns, monotonic ns when it ended)`; `(0, 0)` when the thread never ran.
    pub fn longest(&self) -> (u64, u64) {
        (
            self.longest_ns.load(Relaxed),
            self.longest_end_ns.load(Relaxed),
        )
    }

    /// The longest turn as `(µs, seconds after start_ns when it ended)`, or `None` when the
    /// thread never ran a turn.
    pub fn summary(&self, start_ns: u64) -> Option<(f64, f64)> {
        let (ns, end) = self.longest();
        (ns > 0).then(|| (ns as f64 / 1e3, end.saturating_sub(start_ns) as f64 / 1e9))
    }
}

/// A queue thread's side of its [`StallWatch`]: the time of its previous turn and its
/// running maximum. Never allocates.
#[derive(Debug)]
pub struct StallClock<'a> {
    watch: &'a StallWatch,
    last_ns: u64,
    longest_ns: u64,
    alive_ns: u64,
    #[cfg(feature = "test-hooks")]
    kind: ThreadKind,
}

impl<'a> StallClock<'a> {
    /// Starts timing the turns of a thread of `kind` at `now_ns` (its first turn begins
    /// now).
    pub fn start(watch: &'a StallWatch, now_ns: u64, kind: ThreadKind) -> Self {
        watch.alive_ns.store(now_ns, Relaxed);
        #[cfg(not(feature = "test-hooks"))]
        let _ = kind;
        StallClock {
            watch,
            last_ns: now_ns,
            longest_ns: 0,
            alive_ns: now_ns,
            #[cfg(feature = "test-hooks")]
            kind,
        }
    }

    /// One turn ended at `now_ns` (monotonic, from [`crate::pacer::now_ns`]).
    #[inline]
    pub fn tick(&mut self, now_ns: u64) {
        let turn = now_ns.saturating_sub(self.last_ns);
        self.last_ns = now_ns;
        if now_ns.saturating_sub(self.alive_ns) >= ALIVE_EVERY_NS {
            self.alive_ns = now_ns;
            self.watch.alive_ns.store(now_ns, Relaxed);
            #[cfg(feature = "test-hooks")]
            crate::test_hooks::maybe_stall(self.kind, now_ns);
        }
        self.watch.turns.record(turn);
        if turn > self.longest_ns {
            self.longest_ns = turn;
            self.watch.longest_ns.store(turn, Relaxed);
            self.watch.longest_end_ns.store(now_ns, Relaxed);
        }
    }
}

impl StallClock<'_> {
    /// The thread slept until `deadline_ns` and runs again at `now_ns`: records how late
    /// (0 when early, which a monotonic sleep never is).
    #[inline]
    pub fn woke(&self, deadline_ns: u64, now_ns: u64) {
        self.watch.wakes.record(now_ns.saturating_sub(deadline_ns));
    }
}

/// Clock ticks per second of `/proc/stat` (`USER_HZ`: 100 on every Linux architecture).
const USER_HZ: f64 = 100.0;

/// Steal time per CPU so far, in ticks of `USER_HZ` (1/100 s; `/proc/stat`, the 8th value of each
/// `cpuN` line). Empty when `/proc/stat` cannot be read or has no steal column.
pub fn cpu_steal() -> BTreeMap<u32, u64> {
    std::fs::read_to_string("/proc/stat")
        .map(|s| parse_steal(&s))
        .unwrap_or_default()
}

/// The steal column of each `cpuN` line of a `/proc/stat` text.
pub fn parse_steal(text: &str) -> BTreeMap<u32, u64> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu: u32 = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            // user nice system idle iowait irq softirq steal
            let steal: u64 = f.nth(7)?.parse().ok()?;
            Some((cpu, steal))
        })
        .collect()
}

/// Seconds of steal on each of `cpus` between two [`cpu_steal`] readings (CPUs missing from
/// either reading are left out).
pub fn steal_between(
    before: &BTreeMap<u32, u64>,
    after: &BTreeMap<u32, u64>,
    cpus: impl IntoIterator<Item = u32>,
) -> BTreeMap<String, f64> {
    cpus.into_iter()
        .filter_map(|c| {
            let d = after.get(&c)?.saturating_sub(*before.get(&c)?);
            Some((c.to_string(), d as f64 / USER_HZ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_turn_and_its_end_are_kept() {
        let w = StallWatch::new();
        assert_eq!(w.summary(0), None);
        let mut c = StallClock::start(&w, 1_000, ThreadKind::Io);
        c.tick(2_000); // 1 µs
        c.tick(25_002_000); // 25 ms: the stall
        c.tick(25_003_000); // 1 µs
        assert_eq!(w.longest(), (25_000_000, 25_002_000));
        let (us, at) = w.summary(1_000).unwrap();
        assert_eq!(us, 25_000.0);
        assert!((at - 0.025_001).abs() < 1e-9, "{at}");
        // A clock read that went backwards (never, with a monotonic clock) is a 0 turn.
        c.tick(1);
        assert_eq!(w.longest().0, 25_000_000);
        // Every turn is in the histogram: 1 µs, 25 ms, 1 µs, 0.
        let (turns, wakes) = w.jitter();
        let turns = turns.unwrap();
        assert_eq!((turns.count, turns.min, turns.max), (4, 0, 25_000_000));
        assert_eq!(wakes, None, "never slept until a deadline");
        c.woke(5_000_000, 5_012_000);
        c.woke(6_000_000, 5_999_000);
        let wakes = w.jitter().1.unwrap();
        assert_eq!((wakes.count, wakes.min, wakes.max), (2, 0, 12_000));
    }

    #[test]
    fn steal_is_the_eighth_value_of_each_cpu_line() {
        let text = "cpu  3225247 5461 899969 2678553 44743 0 87445 55061 0 0\n\
                    cpu0 1542214 2857 423410 1430581 8912 0 78273 24341 0 0\n\
                    cpu1 1683033 2604 476558 1247972 35831 0 9172 30720 0 0\n\
                    intr 1 2 3\nctxt 99\n";
        let s = parse_steal(text);
        assert_eq!(s.into_iter().collect::<Vec<_>>(), [(0, 24341), (1, 30720)]);
        // An old kernel without the steal column: no entry, not a wrong number.
        assert!(parse_steal("cpu0 1 2 3 4 5 6 7\n").is_empty());
        let before = parse_steal(text);
        let after = parse_steal(
            "cpu0 0 0 0 0 0 0 0 24397 0 0\ncpu1 0 0 0 0 0 0 0 30755 0 0\ncpu2 0 0 0 0 0 0 0 9 0 0\n",
        );
        let d = steal_between(&before, &after, [1, 0, 2]);
        assert_eq!(
            d.into_iter().collect::<Vec<_>>(),
            [("0".to_string(), 0.56), ("1".to_string(), 0.35)]
        );
    }
}
