//! Counters: every packet counted exactly once, snapshots and deltas.

use rtdaq_core::{DropReason, QueueCounters};

#[test]
fn reclassify_moves_delivered_packets_to_a_drop_reason() {
    let c = QueueCounters::new();
    c.record_rx_burst(10, 14_000);
    c.reclassify_as_drop(DropReason::RingFull, 3, 4_200);
    let s = c.snapshot();
    assert_eq!((s.packets, s.bytes), (7, 9_800));
    assert_eq!(s.drop_count(DropReason::RingFull), 3);
    assert_eq!(s.packets + s.total_drops(), 10, "each packet counted once");
}

#[test]
fn delta_gives_per_interval_figures() {
    let c = QueueCounters::new();
    c.record_rx_burst(5, 500);
    let a = c.snapshot();
    c.record_rx_burst(2, 200);
    c.record_drops(DropReason::Kernel, 4);
    let d = c.snapshot().delta(&a);
    assert_eq!(
        (d.packets, d.bytes, d.drop_count(DropReason::Kernel)),
        (2, 200, 4)
    );
}
