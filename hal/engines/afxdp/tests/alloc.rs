//! The hot path allocates nothing: a counting global allocator (per thread) around every
//! `poll`, `reserve` and `send` after `open`, from the very first call: RX steered by the
//! XDP program (fill-ring refills, flow-table classification, kernel and XDP counter syncs,
//! idle timeouts, the pool running empty), TX (completions, kicks, a full TX ring).

mod common;

use rtdaq_testbed::alloc::{allocations, CountingAlloc};

use std::time::Duration;

use common::*;
use rtdaq_core::traits::{RxQueue, TxBurst, TxQueue};
use rtdaq_core::DropReason;
use rtdaq_testbed::{Side, VethPair};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Allocations `f` made on this thread.
fn allocs<R>(f: impl FnOnce() -> R) -> (R, u64) {
    allocations(f)
}

#[test]
fn the_counter_sees_allocations() {
    let (b, a) = allocs(|| Box::new([0u8; 64]));
    drop(b);
    assert_eq!(a, 1);
}

#[test]
fn poll_reserve_send_allocate_nothing() {
    require_root();
    let pair = VethPair::new("xalloc").unwrap();
    pair.add_static_neighbors().unwrap();
    // B: two RX queues steered by rules, default drop (queue 0 reads the XDP counters).
    let mut s = header("frame_size = 2048");
    s += &region("rx", 2048, 256);
    s += &interface("b", pair.ifname(Side::B), "default_action = \"drop\"");
    s += &rxq(0, "rx", 32, 300);
    s += &rxq(1, "rx", 32, 0);
    s += &flow("b", 1, "queue = 0", "udp_dst = 5001");
    s += &flow("b", 2, "queue = 1", "udp_dst = 5002");
    let rx_setup = Setup::new(&s);
    let (mut rx, _) = rx_setup
        .open_in::<32>(&pair, Side::B)
        .unwrap()
        .into_queues();
    // A: one TX queue with a small TX ring (the pool's share: 64 frames).
    let mut s = header("frame_size = 2048");
    s += &region("tx", 2048, 64);
    s += &interface("a", pair.ifname(Side::A), "");
    s += &txq(0, "tx", 32);
    let tx_setup = Setup::new(&s);
    let (_, mut tx) = tx_setup
        .open_in::<32>(&pair, Side::A)
        .unwrap()
        .into_queues();

    let frames: Vec<Vec<u8>> = [5001u16, 5002, 5003]
        .iter()
        .map(|&p| seq_frame(&spec(&pair, p, 200, None), 0))
        .collect();
    let mut rb: Vec<_> = rx.iter().map(|q| q.new_burst()).collect();
    let mut tb = tx[0].new_burst();
    let mut total = 0u64;
    let mut received = 0usize;
    for round in 0..40 {
        let (n, a) = allocs(|| tx[0].reserve(&mut tb, 32));
        total += a;
        for i in 0..n {
            let f = &frames[(round + i) % 3];
            tb.packet_mut(i).unwrap()[..f.len()].copy_from_slice(f);
            tb.set_len(i, f.len());
        }
        let (_, a) = allocs(|| tx[0].send(&mut tb));
        total += a;
        for (q, b) in rx.iter_mut().zip(rb.iter_mut()) {
            let (n, a) = allocs(|| q.poll(b));
            total += a;
            received += n;
            b.clear();
        }
    }
    // Idle polls: timeouts (queue 0), empty spins (queue 1), counter syncs.
    for _ in 0..3 {
        for (q, b) in rx.iter_mut().zip(rb.iter_mut()) {
            let (n, a) = allocs(|| q.poll(b));
            total += a;
            received += n;
            b.clear();
        }
    }
    for _ in 0..2000 {
        let (_, a) = allocs(|| rx[1].poll(&mut rb[1]));
        total += a;
    }
    // The RX pool runs empty: bursts are held, the kernel finds no fill frame.
    let mut held = Vec::new();
    for _ in 0..30 {
        let (_, a) = allocs(|| tx[0].reserve(&mut tb, 32));
        total += a;
        for i in 0..tb.len() {
            tb.packet_mut(i).unwrap()[..frames[0].len()].copy_from_slice(&frames[0]);
            tb.set_len(i, frames[0].len());
        }
        let (_, a) = allocs(|| tx[0].send(&mut tb));
        total += a;
        let mut b = rx[0].new_burst();
        let (_, a) = allocs(|| rx[0].poll(&mut b));
        total += a;
        held.push(b);
    }
    std::thread::sleep(Duration::from_millis(20));
    let (_, a) = allocs(|| rx[0].poll(&mut rb[0]));
    total += a;
    drop(held);
    assert!(received > 0);
    let c = rx_setup.rx_counters(0).snapshot();
    assert!(c.drop_count(DropReason::NoFlow) > 0, "{c:?}");
    assert!(c.drop_count(DropReason::PoolEmpty) > 0, "{c:?}");
    assert_eq!(total, 0, "the hot path allocated");
}
