//! The one consumer loop of every RX queue: direct or indirect, with or without a GPU
//! stage, over any chain of [stages](crate::stages).
//!
//! The loop owns the ring of bursts and the stages are state machines it tells about
//! packets, bursts, turns and the end of the run (the sans-IO idiom). Two feeds fill the
//! ring: the indirect queue's I/O thread on another core ([`rx_consumer`]), or the queue
//! itself polled on this thread ([`rx_direct`], into a private ring). Each turn the loop
//! polls the stages (completions, timeouts), releases every slot below the oldest one a
//! stage still holds ([`Stage::holds_from`]), and takes the bursts that came, up to a
//! ring's worth. Monomorphised per feed and chain: no `dyn`, no allocation after set-up.

use crate::pacer::now_ns;
use crate::queue::rest::{cooperate, idle};
use crate::queue::stats::QueueStats;
use crate::queue::unwrap::{feed_burst, Unwrap};
use crate::stages::{Drain, Stage};
use crate::stall::{StallClock, ThreadKind};
use rtdaq_core::traits::{RxBurst, RxQueue};
use rtdaq_core::{DropReason, SlotConsumer, SlotProducer, SlotRing};
use rtdaq_platform::alloc_audit;
use std::sync::atomic::{AtomicBool, Ordering::Acquire};
use std::time::Duration;

/// How long a stage's work in flight is waited for between polls at the end of the run.
const END_POLL: Duration = Duration::from_micros(50);

/// Where the loop's bursts come from.
trait Feed {
    type Burst: RxBurst + 'static;
    /// The test hook that slows each burst (`RTDAQ_TEST_SLOW_BURST_US`) applies.
    #[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
    const SLOW_HOOK: bool;
    /// True once no new burst will come (read before the ring is looked at, so an empty
    /// ring seen after it is the end).
    fn ended(&self) -> bool;
    /// Receives into the ring (direct); the packets it got. Indirect: 0 (another thread
    /// fills the ring).
    fn pump(&mut self) -> usize;
    /// The consuming half of the ring.
    fn ring(&mut self) -> &mut SlotConsumer<'static, Self::Burst>;
    /// After a turn: `worked` when it took or received packets.
    fn rest(&self, worked: bool, busy: bool);
}

/// The indirect queue's ring, filled by its I/O thread.
struct RingFeed<'a, B: 'static> {
    ring: SlotConsumer<'static, B>,
    io_done: &'a AtomicBool,
}

impl<B: RxBurst + 'static> Feed for RingFeed<'_, B> {
    type Burst = B;
    const SLOW_HOOK: bool = true;
    #[inline]
    fn ended(&self) -> bool {
        // The I/O thread sets it after its last commit.
        self.io_done.load(Acquire)
    }
    #[inline]
    fn pump(&mut self) -> usize {
        0
    }
    #[inline]
    fn ring(&mut self) -> &mut SlotConsumer<'static, B> {
        &mut self.ring
    }
    #[inline]
    fn rest(&self, worked: bool, busy: bool) {
        // One turn drains up to a ring's worth of bursts before letting the threads of its
        // priority on this core run: however small the bursts the I/O thread hands over,
        // the consumer keeps up with a producer that runs between its turns (a yield per
        // burst lost packets as `ring_full` behind a generator on the same core).
        if worked {
            cooperate(busy);
        } else {
            idle(busy);
        }
    }
}

/// A direct queue polled on the consumer's own thread into a private ring: one slot when
/// no stage holds slots, else a queue ring's worth, so bursts can wait for a device.
struct DirectFeed<'a, Q: RxQueue>
where
    Q::Burst: 'static,
{
    queue: &'a mut Q,
    prod: SlotProducer<'static, Q::Burst>,
    cons: SlotConsumer<'static, Q::Burst>,
    /// Drained into when a stage holds every slot; its packets are counted as `held` drops.
    spare: Q::Burst,
    held: DropReason,
    stats: &'static QueueStats,
    stop: &'a AtomicBool,
}

impl<Q: RxQueue> Feed for DirectFeed<'_, Q>
where
    Q::Burst: 'static,
{
    type Burst = Q::Burst;
    const SLOW_HOOK: bool = false;
    #[inline]
    fn ended(&self) -> bool {
        self.stop.load(Acquire)
    }
    #[inline]
    fn pump(&mut self) -> usize {
        match self.prod.slot() {
            Some(burst) => {
                let n = self.queue.poll(burst);
                if n > 0 {
                    // Cannot fail: `slot()` just returned this free slot.
                    let committed = self.prod.commit();
                    debug_assert!(committed.is_ok());
                }
                n
            }
            None => {
                // The stages hold every slot: the NIC queue must not overflow silently;
                // the engine counted these as delivered, they go nowhere.
                let n = self.queue.poll(&mut self.spare);
                if n > 0 {
                    let s = &self.spare;
                    let bytes = (0..s.len()).map(|i| u64::from(s.meta(i).len)).sum();
                    self.stats.io.reclassify_as_drop(self.held, n as u64, bytes);
                    self.spare.clear();
                }
                n
            }
        }
    }
    #[inline]
    fn ring(&mut self) -> &mut SlotConsumer<'static, Q::Burst> {
        &mut self.cons
    }
    #[inline]
    fn rest(&self, worked: bool, busy: bool) {
        // A sleeping queue already waited up to its timeout inside `poll`; a direct thread
        // never yields (its queue is its own, the config gives it its core).
        if !worked && busy {
            std::hint::spin_loop();
        }
    }
}

/// Clears (buffers back to the pool) and releases the slots `released..below`.
#[inline]
fn release<B: RxBurst + 'static>(
    ring: &mut SlotConsumer<'static, B>,
    released: &mut u64,
    below: u64,
) {
    while *released < below {
        if let Some(b) = ring.front() {
            b.clear();
        }
        let ok = ring.release();
        debug_assert!(ok.is_ok());
        *released += 1;
    }
}

/// The loop: until the feed ended and the ring is empty, then the stages' end.
fn consume<F: Feed, S: Stage>(
    feed: &mut F,
    s: &mut S,
    u: &mut Unwrap,
    turns: &mut StallClock<'_>,
    busy: bool,
) {
    let reads = s.reads_packets();
    let clock = s.wants_clock();
    let now = || if clock { now_ns() } else { 0 };
    let cap = feed.ring().capacity();
    let (mut taken, mut released) = (0u64, 0u64);
    let mut ticked = false;
    loop {
        // Each burst is a turn of the stall clock (one clock read per burst): a consumer
        // working through a backlog makes progress, and the watchdog must see it; a turn
        // without a burst is one too.
        if !ticked {
            turns.tick(now_ns());
        }
        let done = feed.ended();
        let got = if done { 0 } else { feed.pump() };
        let mut n = 0;
        loop {
            s.poll();
            release(feed.ring(), &mut released, s.holds_from().min(taken));
            if n == cap {
                break;
            }
            let Some(burst) = feed.ring().get((taken - released) as usize) else {
                break;
            };
            feed_burst(burst, s, u, taken, reads, now);
            taken += 1;
            n += 1;
            turns.tick(now_ns());
            #[cfg(feature = "test-hooks")]
            if F::SLOW_HOOK {
                crate::test_hooks::slow_burst();
            }
        }
        ticked = n > 0;
        if n == 0 && done {
            break;
        }
        if n == 0 && got == 0 {
            s.idle(now());
        }
        feed.rest(n > 0 || got > 0, busy);
    }
    loop {
        s.poll();
        release(feed.ring(), &mut released, s.holds_from().min(taken));
        match s.ending() {
            Drain::Done => break,
            Drain::Pending => std::thread::sleep(END_POLL),
            // A device may still read the held buffers: they are never reused.
            Drain::Abandoned => {
                s.finish();
                return;
            }
        }
    }
    release(feed.ring(), &mut released, taken);
    s.finish();
}

/// RX consumer thread (indirect mode): runs the bursts of the ring through the stages and
/// releases them. Runs until the I/O thread ended (`io_done`) and the ring is empty.
pub(crate) fn rx_consumer<B: RxBurst + 'static, S: Stage>(
    ring: SlotConsumer<'static, B>,
    mut stages: S,
    stats: &'static QueueStats,
    io_done: &AtomicBool,
    busy: bool,
    mut unwrap: Unwrap,
) -> S {
    let mut turns = StallClock::start(&stats.consumer_stall, now_ns(), ThreadKind::Consumer);
    let mut feed = RingFeed { ring, io_done };
    alloc_audit::arm_current_thread();
    consume(&mut feed, &mut stages, &mut unwrap, &mut turns, busy);
    alloc_audit::disarm_current_thread();
    stages
}

/// RX I/O thread in direct mode: the consumer runs here, no handoff. `slots`: the private
/// ring's bursts when a stage holds slots (else one).
pub(crate) fn rx_direct<Q: RxQueue, S: Stage>(
    queue: &mut Q,
    mut stages: S,
    slots: usize,
    stats: &'static QueueStats,
    stop: &AtomicBool,
    busy: bool,
    mut unwrap: Unwrap,
) -> S
where
    Q::Burst: 'static,
{
    // Cold path, before the audit is armed. The ring lives for the process, like the queue.
    let held = stages.holds();
    let n = if held.is_some() { slots } else { 1 };
    let bursts: Vec<Q::Burst> = (0..n).map(|_| queue.new_burst()).collect();
    let ring = SlotRing::new(Box::leak(bursts.into_boxed_slice()))
        .expect("burst_slots() is a power of two");
    let (prod, cons) = Box::leak(Box::new(ring)).split();
    let spare = queue.new_burst();
    let mut turns = StallClock::start(&stats.stall, now_ns(), ThreadKind::Io);
    let mut feed = DirectFeed {
        queue,
        prod,
        cons,
        spare,
        held: held.unwrap_or(DropReason::RingFull),
        stats,
        stop,
    };
    alloc_audit::arm_current_thread();
    consume(&mut feed, &mut stages, &mut unwrap, &mut turns, busy);
    alloc_audit::disarm_current_thread();
    stages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::{Notes, Packet};
    use rtdaq_core::traits::Segment;
    use rtdaq_core::{PacketMeta, SlotRing};
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed, Ordering::Release};

    fn leak<T>(v: T) -> &'static T {
        Box::leak(Box::new(v))
    }

    /// A burst of `n` 100-byte descriptors (no bytes); counts its clears (buffers back to
    /// the pool).
    struct Desc {
        n: usize,
        clears: &'static AtomicUsize,
    }

    impl RxBurst for Desc {
        fn len(&self) -> usize {
            self.n
        }
        fn segments(&self, _pkt: usize) -> usize {
            1
        }
        fn segment(&self, _pkt: usize, _seg: usize) -> Segment<'_> {
            Segment::Host(&[])
        }
        fn meta(&self, _pkt: usize) -> PacketMeta {
            PacketMeta {
                len: 100,
                ..PacketMeta::default()
            }
        }
        fn clear(&mut self) {
            if self.n > 0 {
                self.clears.fetch_add(1, Relaxed);
            }
            self.n = 0;
        }
    }

    /// A queue that delivers `bursts` bursts of `per` packets, then raises `stop`.
    struct Script {
        bursts: usize,
        per: usize,
        stop: &'static AtomicBool,
        clears: &'static AtomicUsize,
    }

    impl RxQueue for Script {
        type Burst = Desc;
        fn new_burst(&self) -> Desc {
            Desc {
                n: 0,
                clears: self.clears,
            }
        }
        fn poll(&mut self, burst: &mut Desc) -> usize {
            if self.bursts == 0 {
                self.stop.store(true, Release);
                return 0;
            }
            self.bursts -= 1;
            burst.n = self.per;
            self.per
        }
    }

    /// A stage that counts packets and, with `hold`, keeps every slot from its first
    /// packet on until the end, where it answers `end`.
    struct Holder {
        hold: bool,
        end: Drain,
        packets: u64,
        slots: Vec<u64>,
        held_from: u64,
        finished: bool,
    }

    impl Holder {
        fn new(hold: bool, end: Drain) -> Self {
            Holder {
                hold,
                end,
                packets: 0,
                slots: Vec::new(),
                held_from: u64::MAX,
                finished: false,
            }
        }
    }

    impl Stage for Holder {
        fn holds(&self) -> Option<DropReason> {
            self.hold.then_some(DropReason::GpuBusy)
        }
        fn on_packet(&mut self, p: &Packet<'_>, _notes: &mut Notes) {
            self.packets += 1;
            if self.slots.last() != Some(&p.slot) {
                self.slots.push(p.slot);
            }
            if self.hold {
                self.held_from = self.held_from.min(p.slot);
            }
        }
        fn holds_from(&self) -> u64 {
            self.held_from
        }
        fn ending(&mut self) -> Drain {
            if self.end == Drain::Done {
                self.held_from = u64::MAX;
            }
            self.end
        }
        fn finish(&mut self) {
            self.finished = true;
        }
    }

    fn direct(bursts: usize, stage: Holder) -> (Holder, usize, &'static QueueStats) {
        let stats = leak(QueueStats::new_for_tests());
        let clears = leak(AtomicUsize::new(0));
        let stop = leak(AtomicBool::new(false));
        let mut q = Script {
            bursts,
            per: 5,
            stop,
            clears,
        };
        let s = rx_direct(&mut q, stage, 4, stats, stop, false, Unwrap::new(false));
        (s, clears.load(Relaxed), stats)
    }

    /// A stage that holds no slot: every burst is taken once, in slot order, and cleared
    /// (a one-slot private ring, never full).
    #[test]
    fn direct_queue_takes_and_clears_every_burst() {
        let (s, clears, stats) = direct(10, Holder::new(false, Drain::Done));
        assert_eq!(s.packets, 50);
        assert_eq!(s.slots, (0..10).collect::<Vec<_>>());
        assert_eq!(clears, 10);
        assert_eq!(stats.io.drops(DropReason::GpuBusy), 0);
        assert!(s.finished);
    }

    /// A stage that holds every slot it saw: the 4-slot private ring fills, the queue is
    /// still drained (into the spare burst) and those packets count as the stage's drop
    /// reason; at the end the held slots are released once the stage is done.
    #[test]
    fn held_slots_fill_the_ring_and_the_rest_is_counted() {
        let (s, clears, stats) = direct(10, Holder::new(true, Drain::Done));
        assert_eq!(s.packets, 20, "4 slots of 5 packets");
        assert_eq!(stats.io.drops(DropReason::GpuBusy), 30);
        assert_eq!(clears, 10, "4 released at the end, 6 spare drains");
        assert!(s.finished);
    }

    /// Work that never finished: the held slots are never cleared or released (a device
    /// may still read their buffers), and the stages still finish.
    #[test]
    fn abandoned_slots_stay_held() {
        let (s, clears, stats) = direct(10, Holder::new(true, Drain::Abandoned));
        assert_eq!(stats.io.drops(DropReason::GpuBusy), 30);
        assert_eq!(clears, 6, "only the spare drains");
        assert!(s.finished);
    }

    /// Indirect: the consumer takes every burst its I/O side committed before `io_done`,
    /// whatever the stage holds, then ends.
    #[test]
    fn consumer_takes_everything_committed_before_the_end() {
        let stats = leak(QueueStats::new_for_tests());
        let clears = leak(AtomicUsize::new(0));
        let bursts: Vec<Desc> = (0..8).map(|_| Desc { n: 0, clears }).collect();
        let ring = Box::leak(Box::new(
            SlotRing::new(Box::leak(bursts.into_boxed_slice())).unwrap(),
        ));
        let (mut prod, cons) = ring.split();
        for _ in 0..8 {
            prod.slot().unwrap().n = 3;
            prod.commit().unwrap();
        }
        let io_done = leak(AtomicBool::new(true));
        let s = rx_consumer(
            cons,
            Holder::new(true, Drain::Done),
            stats,
            io_done,
            false,
            Unwrap::new(false),
        );
        assert_eq!((s.packets, s.slots.len()), (24, 8));
        assert_eq!(clears.load(Relaxed), 8);
        assert!(prod.slot().is_some(), "every slot is free again");
    }
}
