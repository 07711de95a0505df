//! `net_null` (as root): TX throughput sanity and mbuf pool balance. `net_null` accepts and
//! frees every TX mbuf and returns fresh 64-byte packets from the RX pool on every RX call.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rtdaq_core::traits::{RxBurst, RxQueue, TxBurst, TxQueue};

const EAL: &[&str] = &[
    "--no-huge",
    "-m",
    "512",
    "--no-shconf",
    "--no-pci",
    "--vdev",
    "net_null0",
    "--log-level=lib.eal:notice",
];

#[test]
fn null_port_sends_fast_and_every_mbuf_returns_to_its_pool() {
    require_root();
    let s = Setup::new(&config_toml(EAL, "net_null0", 1, 1, true, 0));
    let (mut rxq, mut txq) = s.open().unwrap_or_else(|e| panic!("{e}")).into_queues();
    let (rx, tx) = (&mut rxq[0], &mut txq[0]);

    // TX: 200k 64-byte frames in bursts of 64.
    let frame = seq_frame(&spec(5000, 32), 0);
    let total = 200_000u64;
    let mut burst = tx.new_burst();
    let t = Instant::now();
    let mut sent = 0u64;
    while sent < total {
        let n = tx.reserve(&mut burst, 64);
        for i in 0..n {
            burst.packet_mut(i).unwrap()[..frame.len()].copy_from_slice(&frame);
            burst.set_len(i, frame.len());
        }
        sent += tx.send(&mut burst) as u64;
    }
    let secs = t.elapsed().as_secs_f64();
    let mpps = total as f64 / secs / 1e6;
    eprintln!("net_null TX: {total} frames in {secs:.3} s = {mpps:.2} Mpps (debug build)");
    assert!(secs < 20.0, "TX of {total} frames took {secs:.1} s");
    let tc = s.tx[0].counters.snapshot();
    assert_eq!((tc.packets, tc.total_drops()), (total, 0));
    assert_eq!(tc.bytes, total * frame.len() as u64);
    assert_eq!(tx.mempool().in_use(), 0, "net_null freed every TX mbuf");

    // RX: whatever net_null hands out is either delivered or counted, and freed.
    let mut b = rx.new_burst();
    let end = Instant::now() + Duration::from_millis(200);
    let mut polls = 0u64;
    while Instant::now() < end {
        rx.poll(&mut b);
        polls += 1;
        b.clear();
    }
    let rc = s.rx[0].counters.snapshot();
    eprintln!("net_null RX: {polls} polls, {rc:?}");
    assert!(
        rc.packets + rc.total_drops() > 0,
        "net_null returns packets on every RX call"
    );
    drop(b);
    assert_eq!(rx.mempool().in_use(), 0, "every RX mbuf is back");
    assert_eq!(rx.stats().polls, polls);
}
