//! How a queue thread rests between turns (a leaf: the consumer loop, the RX I/O thread, the
//! generator and replay all use it).

use std::time::Duration;

use crate::stall::StallClock;

/// Sleep of an idle, non-busy-polling thread.
const IDLE_SLEEP: Duration = Duration::from_micros(50);

/// After each burst, a thread that does not busy-poll lets the other threads of its priority
/// on its core run (`sched_yield`): under `SCHED_FIFO` a thread that always has work (an
/// unpaced generator, a consumer behind a fast queue) would otherwise starve them. A
/// busy-polling thread owns its core (the config forbids sharing it), so it never yields.
#[inline]
pub(crate) fn cooperate(busy: bool) {
    if !busy {
        std::thread::yield_now();
    }
}

/// A turn without work: spin (busy-polling) or sleep [`IDLE_SLEEP`].
pub(crate) fn idle(busy: bool) {
    if busy {
        std::hint::spin_loop();
    } else {
        std::thread::sleep(IDLE_SLEEP);
    }
}

/// Sleeps `ns` from `now` (monotonic, [`crate::pacer::now_ns`], read just before), then
/// records in `turns` how late the thread woke after `now + ns`: its wake-up latency, as
/// `cyclictest` measures it (which sleeps to an absolute time; this relative sleep also
/// counts the few ns between the clock read and the system call).
#[inline]
pub(crate) fn sleep_timed(turns: &StallClock<'_>, now: u64, ns: u64) {
    std::thread::sleep(Duration::from_nanos(ns));
    turns.woke(now + ns, crate::pacer::now_ns());
}
