//! Launch times for a TX thread that works ahead of its schedule (issue #33): the
//! generator's ([`crate::launch`]) and a replay's ([`crate::replay`]). A [`Launcher`] moves
//! each packet's due time ([`now_ns`], monotonic) onto the queue's launch clock (`CLOCK_TAI`
//! for `etf` as a rule, `CLOCK_MONOTONIC` for `fq`) and onto the wall clock (the sequence
//! header's tx time), both read against [`now_ns`] at the start and every second (their
//! offsets only change when a clock is stepped). A launch time is never earlier than the
//! one before (`etf` drops those) nor than a quarter of the lead (at least
//! [`MIN_AHEAD_NS`]) from now. At the end it waits until the last launch time has passed
//! (at most 1 s), then has the queue settle ([`TimedTx::settle`]): wait up to
//! [`SETTLE_NS`] for the kernel to let go of its packets, read the reports of packets the
//! qdisc dropped one last time, and count what the kernel still holds as lost.

use crate::pacer::{now_ns, wall_clock_ns};
use rtdaq_core::traits::{LaunchClock, TimedTx, TxBurst, TxQueue};
use std::time::Duration;

/// Least time between handing a packet over and its launch time, and at least a quarter of
/// the lead: a packet due sooner (the thread fell behind) gets this much, so that its time
/// has not passed when it reaches the qdisc (`etf` drops it then).
pub const MIN_AHEAD_NS: u64 = 20_000;
/// Longest wait at the end for the last launch time.
const DRAIN_MAX_NS: u64 = 1_000_000_000;
/// Longest wait after the last launch time for the kernel to let go of the queue's packets
/// (the qdisc's timer, the device): what it holds after this is counted as lost.
pub const SETTLE_NS: u64 = 200_000_000;

/// How often the clocks' offsets are read again (a stepped clock moves them; between
/// steps they are constant: the kernel slews all three clocks alike).
const REREAD_NS: u64 = 1_000_000_000;

/// The launch clock and the wall clock, each as an offset from [`now_ns`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Offsets {
    id: i32,
    pub launch: u64,
    wall: u64,
    /// When they were read ([`now_ns`]).
    at: u64,
}

impl Offsets {
    /// Reads `clock` (a `clockid`) and the wall clock against [`now_ns`]: of 4 tries the one
    /// whose two `now_ns` reads around it lie closest, the offset taken at their middle.
    pub(crate) fn read(id: i32) -> Self {
        let mut best = (u64::MAX, 0u64, 0u64);
        for _ in 0..4 {
            let a = now_ns();
            let l = rtdaq_netsys::clock::now_ns(id);
            let w = wall_clock_ns();
            let b = now_ns();
            if b - a < best.0 {
                let mid = a + (b - a) / 2;
                best = (b - a, l.wrapping_sub(mid), w.wrapping_sub(mid));
            }
        }
        Offsets {
            id,
            launch: best.1,
            wall: best.2,
            at: now_ns(),
        }
    }

    /// Reads them again when [`REREAD_NS`] has passed since the last time, at `now`.
    #[inline]
    fn refresh(&mut self, now: u64) {
        if now.saturating_sub(self.at) >= REREAD_NS {
            *self = Offsets::read(self.id);
        }
    }
}

/// How a TX queue's timed sends are reached: the engine's
/// [`Engine::timed_tx`](rtdaq_core::traits::Engine::timed_tx) for its queue type.
pub(crate) type TimedOf<Q> = fn(&mut Q) -> Option<&mut dyn TimedTx<Burst = <Q as TxQueue>::Burst>>;

/// Launch times for a TX thread that works `lead` ahead of its schedule (the generator's
/// pacer or a replay's recorded times): each packet's launch time is its due time
/// ([`now_ns`]) moved onto the queue's launch clock, never earlier than the one before nor
/// than [`min_ahead`](Self::min_ahead) from now; see the [module docs](self).
#[derive(Debug)]
pub(crate) struct Launcher {
    off: Offsets,
    /// How far ahead of its time a packet goes to the queue.
    pub lead_ns: u64,
    min_ahead: u64,
    /// The earliest launch time of this turn (launch clock).
    earliest: u64,
    /// The last launch time given (launch clock), and the clock's offset then.
    last: u64,
    last_off: u64,
}

impl Launcher {
    /// Reads `clock` against [`now_ns`]. Cold path.
    pub(crate) fn new(clock: LaunchClock, lead_ns: u64) -> Self {
        Launcher {
            off: Offsets::read(clock.linux_clockid()),
            lead_ns,
            min_ahead: (lead_ns / 4).max(MIN_AHEAD_NS),
            earliest: 0,
            last: 0,
            last_off: 0,
        }
    }

    /// Where a schedule that starts now begins ([`now_ns`]): half a lead from now, so that
    /// its first packets have their times too.
    pub(crate) fn origin(&self) -> u64 {
        now_ns() + (self.lead_ns / 2).max(self.min_ahead)
    }

    /// Starts a burst at `now`: reads the clocks again when due and fixes the earliest
    /// launch time of the burst's packets. Never allocates.
    #[inline]
    pub(crate) fn turn(&mut self, now: u64) {
        self.off.refresh(now);
        self.earliest = now_ns().wrapping_add(self.off.launch) + self.min_ahead;
    }

    /// The launch time (launch clock) of a packet due at `due` ([`now_ns`]), and the same
    /// instant on the wall clock (the sequence header's tx time). Never allocates.
    #[inline]
    pub(crate) fn at(&mut self, due: u64) -> (u64, u64) {
        let (launch_off, wall_off) = (self.off.launch, self.off.wall);
        let t = due
            .wrapping_add(launch_off)
            .max(self.earliest)
            .max(self.last);
        (self.last, self.last_off) = (t, launch_off);
        (t, t.wrapping_sub(launch_off).wrapping_add(wall_off))
    }

    /// At the end: waits until the last launch time has passed (at most [`DRAIN_MAX_NS`]),
    /// then has `q` settle (up to [`SETTLE_NS`]): it counts what the kernel still holds as
    /// lost.
    pub(crate) fn finish<B: TxBurst + Send>(&self, q: &mut dyn TimedTx<Burst = B>) {
        // The qdisc reports a drop when the packet's time comes: wait for the last one.
        if self.last != 0 {
            let end = self.last.wrapping_sub(self.last_off);
            let wait = end.saturating_sub(now_ns()).min(DRAIN_MAX_NS);
            if wait > 0 {
                std::thread::sleep(Duration::from_nanos(wait + MIN_AHEAD_NS));
            }
        }
        q.settle(SETTLE_NS);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A queue that keeps what it is given: each packet's launch time and bytes, and how
    /// often it was asked to settle (at the end).
    #[derive(Default)]
    pub(crate) struct Keep {
        pub kept: std::sync::Arc<std::sync::Mutex<Kept>>,
    }

    #[derive(Default)]
    pub(crate) struct Kept {
        pub sent: Vec<(u64, Vec<u8>)>,
        pub settles: usize,
    }

    pub(crate) struct Bufs {
        pkts: Vec<Vec<u8>>,
        lens: Vec<usize>,
    }

    impl TxBurst for Bufs {
        fn len(&self) -> usize {
            self.lens.len()
        }
        fn packet_mut(&mut self, i: usize) -> Option<&mut [u8]> {
            self.pkts.get_mut(i).map(Vec::as_mut_slice)
        }
        fn set_len(&mut self, i: usize, len: usize) {
            self.lens[i] = len;
        }
    }

    impl TxQueue for Keep {
        type Burst = Bufs;
        fn new_burst(&self) -> Bufs {
            Bufs {
                pkts: vec![vec![0; 256]; 64],
                lens: Vec::with_capacity(64),
            }
        }
        fn reserve(&mut self, b: &mut Bufs, n: usize) -> usize {
            b.lens.resize(n.min(64), 0);
            b.lens.len()
        }
        fn send(&mut self, b: &mut Bufs) -> usize {
            self.send_at(b, &[])
        }
    }

    impl TimedTx for Keep {
        fn launch_clock(&self) -> Option<LaunchClock> {
            Some(LaunchClock::Tai)
        }
        fn send_at(&mut self, b: &mut Bufs, at_ns: &[u64]) -> usize {
            let n = b.lens.len();
            let mut k = self.kept.lock().unwrap();
            for (i, &len) in b.lens.iter().enumerate() {
                k.sent.push((at_ns[i], b.pkts[i][..len].to_vec()));
            }
            b.lens.clear();
            n
        }
        fn settle(&mut self, wait_ns: u64) -> u64 {
            assert_eq!(wait_ns, SETTLE_NS);
            self.kept.lock().unwrap().settles += 1;
            0
        }
    }
}
