//! End-to-end checks of the pure-logic modules (generator → validator → report, pacer) and
//! the proof that their hot paths never allocate, using the appliance's counting global
//! allocator (`rtdaq_platform::alloc_audit::AuditAlloc`).

use rtdaq_core::counters::{CounterSnapshot, QueueCounters};
use rtdaq_core::seq::SeqEvent;
use rtdaq_platform::alloc_audit::{self, AuditAlloc};
use rtdaq_runtime::latency::Histogram;
use rtdaq_runtime::pacer::{now_ns, wall_clock_ns, PaceRate, Pacer};
use rtdaq_runtime::report::{loss_exit_code, DirectionReport, QueueReport};
use rtdaq_runtime::validator::{PayloadGen, SendLimit, Validator, Verdict};

#[global_allocator]
static ALLOC: AuditAlloc = AuditAlloc;

/// Only this test arms its thread, so `armed_allocations` counts exactly its allocations.
#[test]
fn hot_paths_do_not_allocate() {
    // Set-up (allowed to allocate): tables, buffers, the clock epoch.
    let mut v = Validator::new();
    let mut h = Histogram::new();
    let mut gen = PayloadGen::new(7, 1400);
    let mut pacer = Pacer::new(PaceRate::from_gbps(10.0), now_ns());
    let limit = SendLimit::Count(10_000);
    let live = QueueCounters::new();
    let mut buf = vec![0u8; 2048];
    let before = alloc_audit::armed_allocations();

    alloc_audit::arm_current_thread();
    let mut sent = 0u64;
    let mut verdicts_ok = 0u64;
    while !limit.is_done(sent, 0) {
        let now = now_ns();
        let n = limit.clamp(pacer.allowance(now, 64, 1400), sent, now);
        if n == 0 {
            std::hint::spin_loop();
            continue;
        }
        for _ in 0..n {
            let len = gen.fill(&mut buf, wall_clock_ns());
            // Lose every 1000th packet, corrupt none.
            if gen.next_seq() % 1000 != 0
                && matches!(v.check(&buf[..len], wall_clock_ns()), Verdict::Ok(_))
            {
                verdicts_ok += 1;
            }
            h.record(now & 0xFFFF);
        }
        pacer.sent(n, n * 1400);
        sent += n as u64;
        v.publish(&live);
    }
    let _ = pacer.next_send_at();
    let stats = v.stats();
    let _ = (h.percentile(99.9), h.summary(), v.lost());
    alloc_audit::disarm_current_thread();
    // (Set-up, not the hot path: its stream table is allocated.)
    let mut other = Validator::new();
    other.merge(&v);
    let after = alloc_audit::armed_allocations();
    assert_eq!(after - before, 0, "allocations on the hot path");

    assert_eq!(stats.received, 9_990);
    assert_eq!(verdicts_ok, 9_990);
    assert_eq!(
        stats.seq_gaps, 9,
        "the last loss is tail loss, invisible to seq numbers"
    );
    assert_eq!(stats.lost_against(sent), 10);
    assert_eq!(live.snapshot().packets, 9_990);
    assert_eq!(other.stats(), v.stats());

    // The audit does count: an allocation while armed shows up.
    alloc_audit::arm_current_thread();
    let b = std::hint::black_box(Box::new(5u64));
    alloc_audit::disarm_current_thread();
    drop(b);
    assert!(alloc_audit::armed_allocations() > after);
}

/// A lossy, reordering "network" between generator and validator, then the report.
#[test]
fn generator_network_validator_report() {
    let mut gen = PayloadGen::new(1, 256).with_start_seq(u64::MAX - 50);
    let mut v = Validator::new();
    let mut pkts: Vec<Vec<u8>> = (0..2000)
        .map(|i| {
            let mut b = vec![0u8; 256];
            gen.fill(&mut b, 1_000_000 + i * 1000);
            b
        })
        .collect();
    // Swap neighbours every 10th packet (not the first: the first arrival is the stream's
    // base, an earlier number after it is `too_old`), drop 1 in 97, duplicate 1 in 211,
    // corrupt #500.
    for i in (10..2000).step_by(10) {
        pkts.swap(i, i + 1);
    }
    pkts[500][100] ^= 0x40;
    let mut expect_lost = 1; // the corrupt one
    let mut events = [0u64; 5];
    for (i, p) in pkts.iter().enumerate() {
        if i % 97 == 50 {
            expect_lost += 1;
            continue;
        }
        let rx = 1_000_000 + i as u64 * 1000 + 20_000;
        for _ in 0..(1 + usize::from(i % 211 == 3)) {
            match v.check(p, rx) {
                Verdict::Ok(SeqEvent::InOrder) => events[0] += 1,
                Verdict::Ok(SeqEvent::Gap { .. }) => events[1] += 1,
                Verdict::Ok(SeqEvent::Reordered) => events[2] += 1,
                Verdict::Ok(SeqEvent::Duplicate) => events[3] += 1,
                _ => events[4] += 1,
            }
        }
    }
    let s = v.finish();
    assert_eq!(s.seq_gaps, expect_lost);
    assert_eq!(v.lost(), expect_lost);
    assert_eq!(s.corrupt, 1);
    assert_eq!(s.duplicates, 10);
    assert_eq!(s.reordered, events[2]);
    assert!(s.reordered >= 190);
    assert_eq!(s.unique + expect_lost, 2000);
    assert_eq!(s.lost_against(2000), expect_lost);
    assert!(s.latency.min >= 20_000 - 9_000 && s.latency.max <= 20_000 + 9_000);
    assert!(s.latency.p50.abs_diff(20_000) <= 20_000 / 64 + 1_000);

    let mut io = CounterSnapshot {
        packets: s.received,
        bytes: s.bytes,
        ..Default::default()
    };
    io.drops[0] = 0;
    let elapsed = 2.0;
    let rx = DirectionReport::rx(
        vec![QueueReport::rx("lo", 0, Some(1), &io, elapsed, Some(&s))],
        elapsed,
        Some(v.latency().summary()),
    );
    let t = rx.totals.rx.expect("rx checks");
    assert_eq!((t.seq_gaps, t.corrupt, t.duplicates), (expect_lost, 1, 10));
    assert_eq!(t.latency_ns, s.latency);
    assert_eq!(rx.totals.bytes, s.bytes);
    assert_eq!(loss_exit_code(s.seq_gaps, 0), 1);
}
