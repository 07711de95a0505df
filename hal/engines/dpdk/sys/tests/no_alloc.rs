//! Proves the burst paths allocate nothing (Rust heap): set-up first, then the measured
//! region runs under a counting global allocator.
//!
//! Run (as root): `cargo test -p rtdaq-dpdk-sys --test no_alloc`.
mod common;

#[path = "../../../../core/tests/support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::allocations_in;
use rtdaq_dpdk_sys::{Mbuf, MbufBurst, Mempool, MempoolConfig, Port, PortConfig};

#[global_allocator]
static A: counting_alloc::Counting = counting_alloc::Counting;

#[test]
fn rx_tx_alloc_free_allocate_nothing() {
    let eal = common::eal();
    let cfg = MempoolConfig {
        n: 4095,
        cache_size: 64,
        ..MempoolConfig::default()
    };
    let pool = Mempool::new(eal, "noalloc_pool", &cfg).unwrap();
    let (port, mut rx, mut tx) =
        Port::open(eal, "net_null0", &PortConfig::default(), &pool).unwrap();
    let (ring, mut rrx, mut rtx) =
        Port::open(eal, "net_ring0", &PortConfig::default(), &pool).unwrap();
    let mut burst = MbufBurst::with_capacity(64);
    let mut slots: Vec<Option<Mbuf>> = (0..32).map(|_| None).collect();
    let frame = [0x5Au8; 128];

    let (n, (rx_total, tx_total, looped)) = allocations_in(|| {
        let (mut rxn, mut txn, mut looped) = (0usize, 0usize, 0usize);
        for _ in 0..1000 {
            // net_null RX into the burst, then free in bulk.
            rxn += rx[0].rx_into(&mut burst);
            burst.clear();
            // Slice RX (frees what the slots held first).
            rxn += rx[0].rx_burst(&mut slots);
            // Bulk alloc, write, TX.
            assert!(pool.alloc_bulk(&mut burst, 32));
            for m in burst.iter_mut() {
                m.write(&frame).unwrap();
            }
            txn += tx[0].tx_from(&mut burst);
            // Single alloc + slice TX.
            for s in slots.iter_mut().take(8) {
                let mut m = pool.alloc().unwrap();
                m.set_len(64).unwrap();
                *s = Some(m);
            }
            for s in slots.iter_mut().skip(8) {
                *s = None;
            }
            txn += tx[0].tx_burst(&mut slots);
            // Ring loop.
            assert!(pool.alloc_bulk(&mut burst, 16));
            rtx[0].tx_from(&mut burst);
            looped += rrx[0].rx_into(&mut burst);
            burst.clear();
        }
        (rxn, txn, looped)
    });
    assert_eq!(n, 0, "the burst paths allocated {n} times");
    assert!(rx_total > 0);
    assert_eq!(tx_total, 1000 * 40);
    assert_eq!(looped, 1000 * 16);
    let st = port.stats().unwrap();
    assert_eq!(st.opackets, tx_total as u64);
    drop((slots, burst, rx, tx, rrx, rtx, port, ring));
    assert_eq!(pool.in_use(), 0);
}
