//! The queue threads: RX I/O, RX consumer (the [`Pipeline`] of stages), TX generator.
//!
//! Each runs on its own core at its own `SCHED_FIFO` priority (through
//! `rtdaq_platform::rt`), reports its set-up result once over a channel, arms the allocation
//! audit, and then loops without allocating until its stop flag is raised.

use crate::memory::QueueStats;
use crate::pacer::{now_ns, wall_clock_ns, Pacer};
use crate::pipeline::{PacketView, Pipeline};
use crate::stall::{StallClock, StallWatch, ThreadKind};
use crate::validator::PayloadGen;
use rtdaq_core::traits::{RxBurst, RxQueue, Segment, TxBurst, TxQueue};
use rtdaq_core::wire::{emit_udp_frame, UdpFrameSpec};
use rtdaq_core::{DropReason, SlotConsumer, SlotProducer};
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

/// Sleep of an idle, non-busy-polling thread.
const IDLE_SLEEP: Duration = Duration::from_micros(50);

/// Shortest sleep of a paced, non-busy generator: the pacer then allows the packets that came
/// due meanwhile in one burst (one `sendmmsg`), instead of one syscall pair per packet.
const MIN_PACE_SLEEP_NS: u64 = 50_000;
/// How long a stopping generator may take to finish its units in progress (SPEAD heaps).
const FINISH_NS: u64 = 200_000_000;

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

pub(crate) fn idle(busy: bool) {
    if busy {
        std::hint::spin_loop();
    } else {
        std::thread::sleep(IDLE_SLEEP);
    }
}

/// How the consumer finds the payload the validator checks in each packet.
pub(crate) struct Unwrap {
    /// The engine delivers whole Ethernet frames (`Engine::FRAMES`): the payload is the UDP
    /// payload inside.
    pub frames: bool,
    /// Where the segments of a multi-segment packet (header-data split) are gathered before
    /// the check: a copy, sized for the largest frame (64 KiB). Allocated before the hot path.
    pub gather: Box<[u8]>,
}

impl Unwrap {
    /// For an engine that delivers payloads (`frames = false`) or whole frames.
    pub(crate) fn new(frames: bool) -> Self {
        Unwrap {
            frames,
            gather: vec![0u8; if frames { 1 << 16 } else { 0 }].into_boxed_slice(),
        }
    }
}

/// What the validator reads of `frame`: the UDP payload of an IPv4/UDP frame, the eCPRI
/// message of an eCPRI-over-Ethernet frame (EtherType `0xAEFE`: the bytes after the
/// Ethernet/VLAN header, padding included), else an empty slice (which the validator counts
/// as malformed). Never allocates.
pub(crate) fn app_payload(frame: &[u8]) -> &[u8] {
    use rtdaq_core::wire::FrameInfo;
    match rtdaq_core::wire::parse_frame(frame) {
        Ok(FrameInfo { udp: Some(u), .. }) => {
            let off = usize::from(u.payload_offset);
            frame
                .get(off..off + usize::from(u.payload_len))
                .unwrap_or_default()
        }
        Ok(FrameInfo { ecpri: Some(e), .. }) if !e.over_udp => {
            frame.get(usize::from(e.offset)..).unwrap_or_default()
        }
        _ => &[],
    }
}

/// [`app_payload`] of the first bytes of a frame whose rest lies in GPU memory (header-data
/// split): the payload bytes inside `head` and the whole payload's length (from the UDP
/// header); `(&[], 0)` when `head` holds no IPv4/UDP headers.
pub(crate) fn app_payload_head(head: &[u8]) -> (&[u8], usize) {
    use rtdaq_core::wire::{parse_frame_head, FrameInfo, ParseOptions};
    match parse_frame_head(head, &ParseOptions::DEFAULT) {
        Ok(FrameInfo { udp: Some(u), .. }) => {
            let off = usize::from(u.payload_offset);
            (
                head.get(off..).unwrap_or_default(),
                usize::from(u.payload_len),
            )
        }
        _ => (&[], 0),
    }
}

/// Runs every packet of `burst` through the queue's pipeline (validate, record) and empties
/// it.
///
/// A packet without a receive timestamp (`engine.socket.rx_timestamps = "off"`) gets the
/// consumer's clock, read once per burst.
pub(crate) fn consume<B: RxBurst>(
    burst: &mut B,
    pipe: &mut Pipeline,
    stats: &QueueStats,
    u: &mut Unwrap,
) {
    if pipe.counts_only() {
        // Nothing reads the packets: count them from their descriptors, touch no data.
        for i in 0..burst.len() {
            let len = u64::from(burst.meta(i).len);
            if burst.head_in_device(i) {
                pipe.validate.count_in_gpu(len);
            } else {
                pipe.validate.count(len);
            }
        }
        pipe.end_burst(stats);
        burst.clear();
        return;
    }
    let mut now = 0;
    for i in 0..burst.len() {
        let meta = burst.meta(i);
        let rx_ns = if meta.rx_timestamp_ns != 0 {
            meta.rx_timestamp_ns
        } else {
            if now == 0 {
                now = wall_clock_ns();
            }
            now
        };
        let first = match burst.segment(i, 0) {
            Segment::Host(first) => first,
            // GPU memory (a NIC wrote it): counted, not read.
            Segment::Device { .. } => {
                pipe.validate.count_in_gpu(u64::from(meta.len));
                continue;
            }
        };
        if !u.frames {
            pipe.on_packet(&PacketView {
                frame: None,
                payload: first,
                meta,
                rx_ns,
                tail: 0,
            });
        } else if burst.segments(i) == 1 {
            pipe.on_packet(&PacketView {
                frame: Some(first),
                payload: app_payload(first),
                meta,
                rx_ns,
                tail: 0,
            });
        } else if matches!(burst.segment(i, 1), Segment::Device { .. }) {
            // Header-data split into GPU memory: the CPU reads the headers only.
            let (payload, len) = app_payload_head(first);
            let payload = &payload[..payload.len().min(len)];
            pipe.on_packet(&PacketView {
                frame: Some(first),
                payload,
                meta,
                rx_ns,
                tail: len - payload.len(),
            });
        } else {
            // Header-data split: gather the segments, then check the whole frame.
            let mut len = 0;
            for s in 0..burst.segments(i) {
                if let Segment::Host(b) = burst.segment(i, s) {
                    let n = b.len().min(u.gather.len() - len);
                    u.gather[len..len + n].copy_from_slice(&b[..n]);
                    len += n;
                }
            }
            let frame = &u.gather[..len];
            pipe.on_packet(&PacketView {
                frame: Some(frame),
                payload: app_payload(frame),
                meta,
                rx_ns,
                tail: 0,
            });
        }
    }
    pipe.end_burst(stats);
    burst.clear();
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

/// RX consumer thread (indirect mode): runs bursts from the ring through the pipeline and
/// releases them. Runs until `stop` is raised and the ring is empty.
pub(crate) fn rx_consumer<B: RxBurst>(
    mut ring: SlotConsumer<'static, B>,
    mut pipe: Pipeline,
    stats: &'static QueueStats,
    io_done: &AtomicBool,
    busy: bool,
    mut unwrap: Unwrap,
) -> Pipeline {
    let mut turns = StallClock::start(&stats.consumer_stall, now_ns(), ThreadKind::Consumer);
    alloc_audit::arm_current_thread();
    let turn = ring.capacity();
    loop {
        turns.tick(now_ns());
        // Read before looking at the ring: the I/O thread sets it after its last commit, so
        // an empty ring seen after `done` is really the end.
        let done = io_done.load(Acquire);
        // One turn drains up to a ring's worth of bursts before letting the threads of its
        // priority on this core run: however small the bursts the I/O thread hands over, the
        // consumer keeps up with a producer that runs between its turns (a yield per burst
        // lost packets as `ring_full` behind a generator on the same core).
        // Each burst is a turn of the stall clock (one clock read per burst): a consumer
        // working through a backlog makes progress, and the watchdog must see it.
        let mut taken = 0;
        while taken < turn {
            let Some(burst) = ring.front() else { break };
            consume(burst, &mut pipe, stats, &mut unwrap);
            #[cfg(feature = "test-hooks")]
            crate::test_hooks::slow_burst();
            // Cannot fail: `front()` just returned this full slot.
            let released = ring.release();
            debug_assert!(released.is_ok());
            taken += 1;
            turns.tick(now_ns());
        }
        if taken > 0 {
            cooperate(busy);
        } else if done {
            break;
        } else {
            pipe.idle(stats);
            idle(busy);
        }
    }
    pipe.finish();
    alloc_audit::disarm_current_thread();
    pipe
}

/// RX I/O thread in direct mode: the consumer runs here, no handoff.
pub(crate) fn rx_direct<Q: RxQueue>(
    queue: &mut Q,
    mut pipe: Pipeline,
    stats: &'static QueueStats,
    stop: &AtomicBool,
    busy: bool,
    mut unwrap: Unwrap,
) -> Pipeline {
    let mut burst = queue.new_burst();
    let mut turns = StallClock::start(&stats.stall, now_ns(), ThreadKind::Io);
    alloc_audit::arm_current_thread();
    while !stop.load(Acquire) {
        let got = queue.poll(&mut burst);
        turns.tick(now_ns());
        if got > 0 {
            consume(&mut burst, &mut pipe, stats, &mut unwrap);
        } else {
            pipe.idle(stats);
            if busy {
                std::hint::spin_loop();
            }
        }
    }
    pipe.finish();
    alloc_audit::disarm_current_thread();
    pipe
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
}

/// Packets a generator built (each used one sequence number).
#[derive(Debug, Clone, Copy, Default)]
pub struct GenTotals {
    /// Sequence numbers used: every one of them must arrive for a loss-free run (what the
    /// engine accepted is in the TX queue's counters; the rest are counted TX drops).
    pub generated: u64,
}

/// TX thread running the generator: paced bursts of sequence-numbered payloads.
pub(crate) fn tx_generator<Q: TxQueue>(
    mut queue: Q,
    mut plan: GenPlan,
    stop: &AtomicBool,
    busy: bool,
    stall: &StallWatch,
) -> GenTotals {
    if let Some(r) = plan.replay.take() {
        return crate::replay::tx_replay(queue, r, stop, busy, stall);
    }
    let mut burst = queue.new_burst();
    let size = plan.gens[0].payload_size();
    let lanes = plan.gens.len() as u64;
    let mut totals = GenTotals::default();
    let mut turns = StallClock::start(stall, now_ns(), ThreadKind::Generator);
    // A generator whose packets come in units (a SPEAD heap's packets) finishes the units in
    // progress when it stops, so the receiver sees no heap cut short: all lanes advance in
    // turn, so every lane is at a unit boundary when the count is a multiple of this. Packets
    // that are their own unit stop where they are (`count` exactly).
    let unit = match plan.gens[0].unit_packets() {
        1 => 1,
        per_lane => per_lane * lanes,
    };
    let mut finish_at: Option<(u64, u64)> = None;
    alloc_audit::arm_current_thread();
    loop {
        let now = now_ns();
        turns.tick(now);
        let ending = stop.load(Acquire)
            || plan.until_ns.is_some_and(|t| now >= t)
            || plan.count.is_some_and(|c| totals.generated >= c);
        let left = if ending {
            let (end, deadline) =
                *finish_at.get_or_insert((totals.generated.div_ceil(unit) * unit, now + FINISH_NS));
            if totals.generated >= end || now > deadline {
                break;
            }
            end - totals.generated
        } else {
            plan.count.map_or(u64::MAX, |c| c - totals.generated)
        };
        let mut want = plan
            .pacer
            .allowance(now, plan.batch.min(left as usize), size);
        if let Some(cap) = plan.cap.as_mut() {
            want = cap.allowance(now, want, size + plan.frame_overhead);
        }
        if want == 0 {
            if busy {
                std::hint::spin_loop();
            } else {
                // Never spin when not busy-polling: under SCHED_FIFO a spinning thread starves
                // every thread of equal or lower priority on its core (e.g. a consumer).
                let next = plan.cap.as_ref().map_or(0, Pacer::next_send_at);
                let wait = plan.pacer.next_send_at().max(next).saturating_sub(now);
                std::thread::sleep(Duration::from_nanos(
                    wait.clamp(MIN_PACE_SLEEP_NS, 1_000_000),
                ));
            }
            continue;
        }
        let n = queue.reserve(&mut burst, want);
        if n == 0 {
            idle(busy);
            continue;
        }
        let tx_ns = wall_clock_ns();
        for i in 0..n {
            let lane = ((totals.generated + i as u64) % lanes) as usize;
            if let Some(buf) = burst.packet_mut(i) {
                let len = match plan.frame.as_mut() {
                    None => plan.gens[lane].fill(buf, tx_ns),
                    Some(spec) => {
                        let off = spec.payload_offset();
                        let base = spec.src_port;
                        let payload = buf.get_mut(off..).unwrap_or_default();
                        spec.payload_len = plan.gens[lane].fill(payload, tx_ns);
                        spec.src_port = base.wrapping_add(lane as u16);
                        // The buffer holds the frame (the config sized it): cannot fail.
                        let len = emit_udp_frame(buf, spec).unwrap_or(0);
                        spec.src_port = base;
                        len
                    }
                };
                burst.set_len(i, len);
            }
        }
        totals.generated += n as u64;
        queue.send(&mut burst);
        cooperate(busy);
        plan.pacer.sent(n, n * size);
        if let Some(cap) = plan.cap.as_mut() {
            cap.sent(n, n * (size + plan.frame_overhead));
        }
    }
    alloc_audit::disarm_current_thread();
    totals
}

#[cfg(test)]
mod tests {
    use super::{burst_slots, consume, Unwrap};
    use crate::memory::QueueStats;
    use crate::pipeline::Pipeline;
    use crate::validator::Validator;
    use rtdaq_config::model::Validation;
    use rtdaq_core::traits::{RxBurst, Segment};
    use rtdaq_core::PacketMeta;

    /// Frames whose descriptors say 1000 B (GPU memory for every third) but whose host
    /// segments hold no byte: what the consumer counts shows whether it read the frames.
    struct Descriptors(usize);

    impl RxBurst for Descriptors {
        fn len(&self) -> usize {
            self.0
        }
        fn segments(&self, _pkt: usize) -> usize {
            1
        }
        fn segment(&self, pkt: usize, _seg: usize) -> Segment<'_> {
            if pkt % 3 == 2 {
                Segment::Device {
                    ptr: 0x1000,
                    len: 1000,
                }
            } else {
                Segment::Host(&[])
            }
        }
        fn meta(&self, _pkt: usize) -> PacketMeta {
            PacketMeta {
                len: 1000,
                ..PacketMeta::default()
            }
        }
        fn clear(&mut self) {
            self.0 = 0;
        }
    }

    fn consumed(mode: Validation) -> (bool, crate::validator::ValidatorStats) {
        let stats = QueueStats::new_for_tests();
        let mut pipe = Pipeline::new(Validator::with_mode(mode));
        let mut u = Unwrap::new(true);
        let mut burst = Descriptors(9);
        consume(&mut burst, &mut pipe, &stats, &mut u);
        assert_eq!(burst.len(), 0, "the burst was emptied");
        (pipe.counts_only(), pipe.validate.finish())
    }

    /// `validate = "count"` with no recorder counts every frame from its descriptor (its
    /// length, GPU memory apart) and parses none; any other mode reads each frame (here:
    /// finds no IPv4/UDP payload in it and calls it malformed).
    #[test]
    fn count_mode_counts_descriptors_and_reads_no_frame() {
        let (only, s) = consumed(Validation::Count);
        assert!(only);
        assert_eq!((s.received, s.bytes, s.in_gpu_memory), (9, 9000, 3));
        assert_eq!(s.malformed, 0);
        let (only, s) = consumed(Validation::Sequence);
        assert!(!only);
        assert_eq!((s.received, s.in_gpu_memory, s.malformed), (9, 3, 6));
        assert_eq!(
            s.bytes, 3000,
            "host frames: payload bytes (none found), GPU: length"
        );
    }

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
