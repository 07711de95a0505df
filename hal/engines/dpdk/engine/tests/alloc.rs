//! `poll`, `reserve`, `packet_mut`/`set_len` and `send` never allocate heap memory
//! (counting global allocator), on a `net_ring0` loopback (as root).

mod common;

use common::*;
use rtdaq_core::traits::{RxBurst, RxQueue, TxBurst, TxQueue};
use rtdaq_testbed::alloc::{allocations, CountingAlloc};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

const EAL: &[&str] = &[
    "--no-huge",
    "-m",
    "512",
    "--no-shconf",
    "--no-pci",
    "--vdev",
    "net_ring0",
    "--log-level=lib.eal:notice",
];

#[test]
fn hot_path_does_not_allocate() {
    require_root();
    let s = Setup::new(&config_toml(EAL, "net_ring0", 1, 1, true, 0));
    let (mut rxq, mut txq) = s.open().unwrap_or_else(|e| panic!("{e}")).into_queues();
    let (rx, tx) = (&mut rxq[0], &mut txq[0]);
    let frame = seq_frame(&spec(5000, 100), 3);
    let mut other = seq_frame(&spec(6000, 100), 4); // counted no_flow
    other.truncate(frame.len());
    let mut tb = tx.new_burst();
    let mut rb = rx.new_burst();
    let round = |tx: &mut rtdaq_engine_dpdk::DpdkTx<'_>,
                 rx: &mut rtdaq_engine_dpdk::DpdkRx<'_>,
                 tb: &mut rtdaq_engine_dpdk::DpdkTxBurst,
                 rb: &mut rtdaq_engine_dpdk::DpdkRxBurst| {
        let n = tx.reserve(tb, 32);
        for i in 0..n {
            let f = if i % 8 == 0 { &other } else { &frame };
            tb.packet_mut(i).unwrap()[..f.len()].copy_from_slice(f);
            tb.set_len(i, f.len());
        }
        tx.send(tb);
        let got = rx.poll(rb);
        rb.clear();
        got
    };
    round(tx, rx, &mut tb, &mut rb); // warm-up
    let (got, allocs) = allocations(|| {
        let mut got = 0;
        for _ in 0..1000 {
            got += round(tx, rx, &mut tb, &mut rb);
        }
        got
    });
    assert_eq!(allocs, 0, "the hot path allocated {allocs} times");
    assert_eq!(got, 1000 * 28);
    let rc = s.rx[0].counters.snapshot();
    assert_eq!(rc.drop_count(rtdaq_core::DropReason::NoFlow), 1001 * 4);
    assert_eq!(rx.mempool().in_use(), 0);
}
