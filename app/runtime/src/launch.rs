//! The generator with launch times (`[generator] pacing = "txtime"`, issue #33).
//!
//! The software pacer ([`threads::tx_generator`](crate::threads)) sleeps until packets are
//! due and hands them over then: each packet leaves when the thread woke, so its wake-up
//! latency, and the burst it sends after a sleep of at least 50 µs, move every packet off
//! its time. Here the thread works `txtime_lead_us` ahead instead: every packet whose time
//! falls within the lead goes to the queue now, with its own launch time
//! ([`TimedTx::send_at`]), and the kernel's `etf` or `fq` qdisc (or the NIC) holds it until
//! then. The schedule is the same pacer's (`rate_gbps`/`rate_pps` and the queue's
//! `pacing_gbps`), each packet's time the pacer's next departure; the thread's lateness only
//! matters when it exceeds the lead.
//!
//! Clocks: the pacer runs on [`now_ns`] (monotonic); the launch clock (`CLOCK_TAI` for
//! `etf` as a rule, `CLOCK_MONOTONIC` for `fq`) and the wall clock are read against it at
//! the start and every second ([`Launcher`]), so a launch time is the pacer's time moved
//! onto the qdisc's clock, and the sequence header's tx time is the same instant on the
//! wall clock (the receiver's latency is then from the launch, not from the hand-over a
//! lead earlier). A launch time is never earlier than the one before (`etf` drops those)
//! nor than a quarter of the lead (at least 20 µs) from now. The schedule
//! starts half a lead after the thread does and keeps every packet whose time is still
//! ahead; a thread that fell behind by more than its lead forgets the schedule beyond it, as
//! the software pacer forgets more than 1 ms.
//!
//! When it stops it waits until the last launch time has passed (at most 1 s), then has
//! the queue read the kernel's reports of packets the qdisc dropped one last time.

use crate::generator::GenTotals;
use crate::launcher::{Launcher, TimedOf};
use crate::pacer::{now_ns, Pacer};
use crate::queue::rest::{cooperate, idle};
use crate::stall::{StallClock, StallWatch, ThreadKind};
use crate::threads::{pace_rest, Ending, GenPlan};
use rtdaq_core::traits::{TimedTx, TxBurst, TxQueue};
use rtdaq_platform::alloc_audit;
use std::sync::atomic::AtomicBool;

/// A TX queue's generator thread: with launch times (`generator.pacing = "txtime"`, the
/// queue armed for them) [`tx_launch`] or, for a replay, the replay with a [`Launcher`];
/// else the software pacer or the replay ([`threads::tx_generator`](crate::threads)).
pub(crate) fn tx_thread<Q: TxQueue>(
    mut queue: Q,
    mut plan: GenPlan,
    timed: TimedOf<Q>,
    stop: &AtomicBool,
    busy: bool,
    stall: &StallWatch,
) -> GenTotals {
    if let Some(lead_ns) = plan.launch_lead_ns {
        if let Some(clock) = timed(&mut queue).and_then(|q| q.launch_clock()) {
            let launcher = Launcher::new(clock, lead_ns);
            if let Some(r) = plan.replay.take() {
                let launch = Some((launcher, timed));
                return crate::replay::tx_replay(queue, r, launch, stop, busy, stall);
            }
            if let Some(q) = timed(&mut queue) {
                return tx_launch(q, plan, launcher, stop, busy, stall);
            }
        }
    }
    crate::threads::tx_generator(queue, plan, stop, busy, stall)
}

/// The generator's TX thread with launch times; see the [module docs](self). `q` was armed
/// for them ([`TimedTx::launch_clock`] is `Some`).
fn tx_launch<B: TxBurst + Send>(
    q: &mut dyn TimedTx<Burst = B>,
    mut plan: GenPlan,
    mut launcher: Launcher,
    stop: &AtomicBool,
    busy: bool,
    stall: &StallWatch,
) -> GenTotals {
    let lead_ns = launcher.lead_ns;
    let mut burst = q.new_burst();
    let mut at = vec![0u64; plan.batch.max(1)];
    let size = plan.gens[0].payload_size();
    let mut totals = GenTotals::default();
    let mut turns = StallClock::start(stall, now_ns(), ThreadKind::Generator);
    let mut ending = Ending::new(&plan);
    // The schedule keeps every packet whose time is still ahead: credit up to the lead.
    let origin = launcher.origin();
    plan.pacer = Pacer::new(plan.pacer.rate(), origin).with_max_credit_ns(lead_ns);
    if let Some(cap) = plan.cap.as_mut() {
        *cap = Pacer::new(cap.rate(), origin).with_max_credit_ns(lead_ns);
    }
    alloc_audit::arm_current_thread();
    loop {
        let now = now_ns();
        turns.tick(now);
        let Some(left) = ending.left(&plan, stop, totals.generated, now) else {
            break;
        };
        let horizon = now + lead_ns;
        let most = plan.batch.min(at.len()).min(left as usize);
        let want = plan.allowance(horizon, most, size);
        if want == 0 {
            pace_rest(&turns, now, plan.next_due().saturating_sub(horizon), busy);
            continue;
        }
        let n = q.reserve(&mut burst, want);
        if n == 0 {
            idle(busy);
            continue;
        }
        launcher.turn(now);
        for (i, slot) in at.iter_mut().enumerate().take(n) {
            let due = plan.next_due();
            plan.sent(1, size);
            let (t, tx_ns) = launcher.at(due);
            *slot = t;
            if let Some(buf) = burst.packet_mut(i) {
                // The header's tx time: the launch, on the wall clock.
                let len = plan.fill(buf, totals.generated + i as u64, tx_ns);
                burst.set_len(i, len);
            }
        }
        totals.generated += n as u64;
        q.send_at(&mut burst, &at[..n]);
        cooperate(busy);
    }
    // The end may read the qdiscs (netlink, allocating): after the hot loop.
    alloc_audit::disarm_current_thread();
    launcher.finish(q);
    totals
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::launcher::tests::Keep;
    use crate::launcher::Offsets;
    use crate::pacer::PaceRate;
    use crate::validator::PayloadGen;
    use rtdaq_core::traits::LaunchClock;
    use rtdaq_core::wire::seqhdr::SeqHeader;

    /// 2000 packets at 100 000/s, 50 ms ahead (a loaded test host may stall the thread for
    /// tens of ms): each goes with its own launch time on the
    /// queue's clock, one period after the one before; its header's tx time is that
    /// launch on the wall clock; at the end the queue is asked once more for the kernel's
    /// reports.
    #[test]
    fn each_packet_goes_with_its_time_one_period_apart() {
        let start = now_ns();
        let plan = GenPlan {
            gens: vec![PayloadGen::new(3, 64)],
            cap: None,
            frame_overhead: 0,
            pacer: Pacer::new(PaceRate::PacketsPerSec(100_000), start),
            batch: 16,
            count: Some(2000),
            until_ns: None,
            frame: None,
            replay: None,
            launch_lead_ns: Some(50_000_000),
        };
        let mut q = Keep::default();
        let stall = StallWatch::new();
        let t = tx_launch(
            &mut q,
            plan,
            Launcher::new(LaunchClock::Tai, 50_000_000),
            &AtomicBool::new(false),
            false,
            &stall,
        );
        assert_eq!(t.generated, 2000);
        let q = q.kept.lock().unwrap();
        assert_eq!((q.sent.len(), q.settles), (2000, 1));
        let launch0 = Offsets::read(LaunchClock::Tai.linux_clockid()).launch;
        let first = q.sent[0].0;
        assert!(
            first >= start.wrapping_add(launch0),
            "the first launch is not before the start"
        );
        let mut exact = 0;
        let mut skew = (i128::MAX, i128::MIN);
        for (k, w) in q.sent.windows(2).enumerate() {
            // Never earlier than the one before (etf would drop it).
            let gap = w[1].0.checked_sub(w[0].0);
            assert!(
                gap.is_some(),
                "packet {}: launch before the one before",
                k + 1
            );
            exact += usize::from(gap == Some(10_000));
        }
        for (k, (at, bytes)) in q.sent.iter().enumerate() {
            let h = SeqHeader::parse(bytes).unwrap();
            assert_eq!(h.seq, k as u64);
            // TAI − UTC is constant over the test: the same for every packet.
            let d = i128::from(*at) - i128::from(h.tx_timestamp_ns);
            skew = (skew.0.min(d), skew.1.max(d));
        }
        // A test thread preempted beyond its lead forgets the schedule beyond it: rare.
        assert!(exact >= 1990, "{exact} of 1999 gaps exactly one period");
        assert!(
            skew.1 - skew.0 < 1_000_000,
            "launch vs header time varies by {skew:?}"
        );
    }
}
