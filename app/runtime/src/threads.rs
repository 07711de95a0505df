//! The queue threads' placement and rest, the RX I/O thread of an indirect queue, and the TX
//! generator. The RX consumer (direct or indirect) is `queue::consume`.
//!
//! Each runs on its own core at its own `SCHED_FIFO` priority (through
//! `rtdaq_platform::rt`), reports its set-up result once over a channel, arms the allocation
//! audit, and then loops without allocating until its stop flag is raised.

use crate::generator::GenTotals;
use crate::pacer::{now_ns, wall_clock_ns, Pacer};
use crate::queue::rest::{cooperate, idle, sleep_timed};
use crate::queue::stats::QueueStats;
use crate::stall::{StallClock, StallWatch, ThreadKind};
use crate::validator::PayloadGen;
use rtdaq_core::traits::{RxBurst, RxQueue, TxBurst, TxQueue};
use rtdaq_core::wire::{emit_udp_frame, UdpFrameSpec};
use rtdaq_core::{DropReason, SlotProducer};
use rtdaq_platform::alloc_audit;
use rtdaq_platform::rt::{self, RtRequest};
use std::sync::atomic::{AtomicBool, Ordering::Acquire, Ordering::Relaxed};
use std::sync::mpsc::Sender;
use std::time::Duration;

/// Real-time placement of one thread.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    /// Core to pin to.
    pub core: u32,
    /// `SCHED_FIFO` priority.
    pub priority: u8,
    /// Stack KiB to prefault.
    pub prefault_stack_kib: u32,
    /// Refuse to run without real-time privileges.
    pub required: bool,
}

/// Shortest sleep of a paced, non-busy generator: the pacer then allows the packets that came
/// due meanwhile in one burst (one `sendmmsg`), instead of one syscall pair per packet.
const MIN_PACE_SLEEP_NS: u64 = 50_000;
/// How long a stopping generator may take to finish its units in progress (SPEAD heaps).
const FINISH_NS: u64 = 200_000_000;

/// Enters real-time mode and reports the outcome (`Ok` also when degraded with a warning).
pub(crate) fn enter(name: &str, p: Placement, ready: &Sender<Result<(), String>>) -> bool {
    let req = RtRequest {
        core: Some(p.core as usize),
        priority: Some(p.priority),
        prefault_stack_kib: p.prefault_stack_kib as usize,
        required: p.required,
    };
    match rt::enter_thread(&req) {
        Ok(_) => {
            let _ = ready.send(Ok(()));
            true
        }
        Err(e) => {
            let _ = ready.send(Err(format!("{name}: {e}")));
            false
        }
    }
}

/// Burst slots of the ring between an RX I/O thread and its consumer (`ring_depth` counts
/// packets): twice `ring_depth / batch_size`, a power of two, at least 2. The I/O thread hands
/// a partial burst over on its timeout only while fewer than half the slots are full, so the
/// ring holds at least `ring_depth` packets (half the slots full bursts) even when the
/// traffic is sparse enough that every timed-out burst carries a single packet.
pub(crate) fn burst_slots(ring_depth: u32, batch: u32) -> usize {
    ((2 * u64::from(ring_depth) / u64::from(batch.max(1))) as usize)
        .next_power_of_two()
        .max(2)
}

/// Hand-over policy of an RX I/O thread: a burst goes to the consumer when it holds
/// `batch` packets, or when `timeout_ns` passed since its first packet arrived (a partial
/// burst). With a sleeping queue the engine's own wait adds up to one more `timeout_us`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batching {
    /// Packets per full burst (the queue's `batch_size`).
    pub batch: usize,
    /// Longest time a partial burst waits for more packets (the queue's `timeout_us`).
    pub timeout_ns: u64,
}

/// How long a sleeping RX I/O thread waits before it looks at a full ring again (a few
/// packets' time at 10 Gb/s; what arrives meanwhile waits in the queue's own buffer).
const RING_FULL_WAIT: Duration = Duration::from_micros(20);

/// RX I/O thread in indirect mode: fills the free ring slot in place until the burst is full
/// or its timeout passed, then commits it. When the ring is full, a queue that
/// [holds a backlog](RxQueue::holds_backlog) (a socket) is not polled until a slot frees:
/// its own buffer keeps what arrives meanwhile and counts what overflows it (the time waited
/// goes to `ring_wait_ns`). Any other queue is still drained (into `spare`) and those packets
/// are counted as `ring_full` drops, so the NIC queue never overflows silently.
pub(crate) fn rx_indirect<Q: RxQueue>(
    queue: &mut Q,
    mut ring: SlotProducer<'static, Q::Burst>,
    stats: &'static QueueStats,
    stop: &AtomicBool,
    busy: bool,
    batching: Batching,
) {
    let mut spare = queue.new_burst();
    let mut first_ns = 0u64;
    let hold = queue.holds_backlog();
    let mut waited_ns = 0u64;
    let mut turns = StallClock::start(&stats.stall, now_ns(), ThreadKind::Io);
    alloc_audit::arm_current_thread();
    while !stop.load(Acquire) {
        match ring.slot() {
            Some(burst) => {
                let before = burst.len();
                let got = queue.poll(burst);
                let now = now_ns();
                turns.tick(now);
                if before == 0 && got > 0 {
                    first_ns = now;
                }
                let len = burst.len();
                // A partial burst goes on its timeout only while the ring is less than half
                // full: past that the consumer is behind anyway, and filling the slot keeps
                // the ring's capacity at `ring_depth` packets however sparse the traffic
                // (see `burst_slots`).
                if len >= batching.batch
                    || (len > 0
                        && now.saturating_sub(first_ns) >= batching.timeout_ns
                        && ring.len() < ring.capacity() / 2)
                {
                    // Cannot fail: `slot()` just returned this free slot.
                    let committed = ring.commit();
                    debug_assert!(committed.is_ok());
                    cooperate(busy);
                } else if got == 0 && busy {
                    // A sleeping queue already waited up to its timeout inside `poll`.
                    std::hint::spin_loop();
                }
            }
            None if hold => {
                // The consumer is behind: leave the packets in the queue's own buffer.
                let t0 = now_ns();
                if busy {
                    std::hint::spin_loop();
                } else {
                    std::thread::sleep(RING_FULL_WAIT);
                }
                let t1 = now_ns();
                turns.tick(t1);
                waited_ns += t1 - t0;
                stats.ring_wait_ns.store(waited_ns, Relaxed);
            }
            None => {
                let n = queue.poll(&mut spare);
                turns.tick(now_ns());
                if n > 0 {
                    // The engine counted them as delivered; they go nowhere: move them to
                    // `ring_full` so each packet is counted exactly once.
                    let bytes = (0..spare.len()).map(|i| u64::from(spare.meta(i).len)).sum();
                    stats
                        .io
                        .reclassify_as_drop(DropReason::RingFull, n as u64, bytes);
                    spare.clear();
                } else {
                    idle(busy);
                }
            }
        }
    }
    // A partial burst still in the slot is handed over so nothing received is lost.
    if ring.slot().is_some_and(|b| !b.is_empty()) {
        let _ = ring.commit();
    }
    alloc_audit::disarm_current_thread();
}

/// What the generator on a TX queue sends.
#[derive(Debug)]
pub(crate) struct GenPlan {
    /// One payload generator (sequence stream) per TX lane: packet j of the run goes to lane
    /// `j % lanes`, the engine's lane rule (UDP: one source port per lane, TCP: one
    /// connection per lane), so each receiving queue sees whole streams.
    pub gens: Vec<PayloadGen>,
    /// The TX queue's own `pacing_gbps` cap (counted on frame bytes: payload +
    /// `frame_overhead`), applied on top of the generator's rate.
    pub cap: Option<Pacer>,
    /// Header bytes per packet that the queue's `pacing_gbps` counts besides the payload.
    pub frame_overhead: usize,
    pub pacer: Pacer,
    pub batch: usize,
    /// Stop after this many packets (`None`: until stopped).
    pub count: Option<u64>,
    /// Stop at this monotonic time (`None`: until stopped).
    pub until_ns: Option<u64>,
    /// Raw engines (`Engine::FRAMES`): the Ethernet/IPv4/UDP headers each packet is wrapped
    /// in; lane `l` sends from UDP source port `src_port + l`. `None`: packets are payloads.
    pub frame: Option<UdpFrameSpec>,
    /// Send the packets of a pcap file instead (`generator.replay`).
    pub replay: Option<crate::replay::ReplayPlan>,
    /// `generator.pacing = "txtime"`: each packet goes to the queue this many ns ahead of
    /// its time, with its launch time ([`crate::launch`]); `None`: the software pacer.
    pub launch_lead_ns: Option<u64>,
}

impl GenPlan {
    /// Packets of `size` payload bytes that the generator's rate and the queue's
    /// `pacing_gbps` cap both allow by time `t`, at most `most`.
    #[inline]
    pub(crate) fn allowance(&mut self, t: u64, most: usize, size: usize) -> usize {
        let want = self.pacer.allowance(t, most, size);
        match self.cap.as_mut() {
            Some(cap) => cap.allowance(t, want, size + self.frame_overhead),
            None => want,
        }
    }

    /// When the next packet is due under both.
    #[inline]
    pub(crate) fn next_due(&self) -> u64 {
        let cap = self.cap.as_ref().map_or(0, Pacer::next_send_at);
        self.pacer.next_send_at().max(cap)
    }

    /// Moves both schedules on by `n` packets of `size` payload bytes.
    #[inline]
    pub(crate) fn sent(&mut self, n: usize, size: usize) {
        self.pacer.sent(n, n * size);
        if let Some(cap) = self.cap.as_mut() {
            cap.sent(n, n * (size + self.frame_overhead));
        }
    }

    /// Writes packet `j` of the run (lane `j % lanes`) into `buf` with tx timestamp `tx_ns`
    /// (raw engines: the whole frame); returns its length. Never allocates.
    #[inline]
    pub(crate) fn fill(&mut self, buf: &mut [u8], j: u64, tx_ns: u64) -> usize {
        let lane = (j % self.gens.len() as u64) as usize;
        match self.frame.as_mut() {
            None => self.gens[lane].fill(buf, tx_ns),
            Some(spec) => {
                let off = spec.payload_offset();
                let base = spec.src_port;
                let payload = buf.get_mut(off..).unwrap_or_default();
                spec.payload_len = self.gens[lane].fill(payload, tx_ns);
                spec.src_port = base.wrapping_add(lane as u16);
                // The buffer holds the frame (the config sized it): cannot fail.
                let len = emit_udp_frame(buf, spec).unwrap_or(0);
                spec.src_port = base;
                len
            }
        }
    }
}

/// A generator's stop conditions: its count, its duration, the run's stop flag, and the
/// units in progress it finishes when stopping.
pub(crate) struct Ending {
    /// Packets of one unit over all lanes (a SPEAD heap's packets × lanes), else 1.
    unit: u64,
    /// Once stopping: the packet count to reach, and the time after which it gives up.
    finish_at: Option<(u64, u64)>,
}

impl Ending {
    /// A generator whose packets come in units (a SPEAD heap's packets) finishes the units in
    /// progress when it stops, so the receiver sees no heap cut short: all lanes advance in
    /// turn, so every lane is at a unit boundary when the count is a multiple of this.
    /// Packets that are their own unit stop where they are (`count` exactly).
    pub(crate) fn new(plan: &GenPlan) -> Self {
        let unit = match plan.gens[0].unit_packets() {
            1 => 1,
            per_lane => per_lane * plan.gens.len() as u64,
        };
        Ending {
            unit,
            finish_at: None,
        }
    }

    /// Packets that may still go after `generated` at `now`; `None` when the generator is
    /// done.
    #[inline]
    pub(crate) fn left(
        &mut self,
        plan: &GenPlan,
        stop: &AtomicBool,
        generated: u64,
        now: u64,
    ) -> Option<u64> {
        let ending = stop.load(Acquire)
            || plan.until_ns.is_some_and(|t| now >= t)
            || plan.count.is_some_and(|c| generated >= c);
        if !ending {
            return Some(plan.count.map_or(u64::MAX, |c| c - generated));
        }
        let unit = self.unit;
        let (end, deadline) = *self
            .finish_at
            .get_or_insert((generated.div_ceil(unit) * unit, now + FINISH_NS));
        (generated < end && now <= deadline).then(|| end - generated)
    }
}

/// A paced generator's turn with nothing due yet: spin when busy-polling, else sleep `wait`
/// (between 50 µs and 1 ms) and record the wake-up latency. Never spin when not
/// busy-polling: under SCHED_FIFO a spinning thread starves every thread of equal or lower
/// priority on its core (e.g. a consumer).
#[inline]
pub(crate) fn pace_rest(turns: &StallClock<'_>, now: u64, wait: u64, busy: bool) {
    if busy {
        std::hint::spin_loop();
    } else {
        sleep_timed(turns, now, wait.clamp(MIN_PACE_SLEEP_NS, 1_000_000));
    }
}

/// TX thread running the generator: paced bursts of sequence-numbered payloads (the
/// software pacer; launch times: `launch`).
pub(crate) fn tx_generator<Q: TxQueue>(
    mut queue: Q,
    mut plan: GenPlan,
    stop: &AtomicBool,
    busy: bool,
    stall: &StallWatch,
) -> GenTotals {
    if let Some(r) = plan.replay.take() {
        return crate::replay::tx_replay(queue, r, None, stop, busy, stall);
    }
    let mut burst = queue.new_burst();
    let size = plan.gens[0].payload_size();
    let mut totals = GenTotals::default();
    let mut turns = StallClock::start(stall, now_ns(), ThreadKind::Generator);
    let mut ending = Ending::new(&plan);
    alloc_audit::arm_current_thread();
    loop {
        let now = now_ns();
        turns.tick(now);
        let Some(left) = ending.left(&plan, stop, totals.generated, now) else {
            break;
        };
        let want = plan.allowance(now, plan.batch.min(left as usize), size);
        if want == 0 {
            pace_rest(&turns, now, plan.next_due().saturating_sub(now), busy);
            continue;
        }
        let n = queue.reserve(&mut burst, want);
        if n == 0 {
            idle(busy);
            continue;
        }
        let tx_ns = wall_clock_ns();
        for i in 0..n {
            if let Some(buf) = burst.packet_mut(i) {
                let len = plan.fill(buf, totals.generated + i as u64, tx_ns);
                burst.set_len(i, len);
            }
        }
        totals.generated += n as u64;
        queue.send(&mut burst);
        cooperate(busy);
        plan.sent(n, size);
    }
    alloc_audit::disarm_current_thread();
    totals
}

#[cfg(test)]
mod tests {
    use super::burst_slots;

    /// Half the slots full of `batch_size` bursts hold `ring_depth` packets.
    #[test]
    fn ring_slots_hold_ring_depth_packets_at_half_full() {
        for (depth, batch) in [
            (1024u32, 64u32),
            (1024, 32),
            (4096, 64),
            (2, 2),
            (1 << 20, 1024),
        ] {
            let slots = burst_slots(depth, batch);
            assert!(slots.is_power_of_two());
            assert!(
                slots / 2 * batch as usize >= depth as usize,
                "{depth}/{batch}: {slots}"
            );
        }
        // The default deployment: 32 slots (was 16: ~144 packets, 1.6 ms of its ~9-packet bursts).
        assert_eq!(burst_slots(1024, 64), 32);
        assert_eq!(burst_slots(64, 64), 2);
        assert_eq!(burst_slots(2, 0), 4);
    }
}
