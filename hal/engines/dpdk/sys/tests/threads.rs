//! `Eal::register_thread`: a queue thread that DPDK did not start gets an lcore id of its
//! own, and with it each mempool's per-lcore cache (the mbuf it just freed comes back
//! first); the id is released when the thread exits. Its own test binary: it changes the
//! process's lcore count, which another binary's test checks.
//!
//! Run (as root): `cargo test -p rtdaq-dpdk-sys --test threads`.
mod common;

use rtdaq_dpdk_sys::{Mempool, MempoolConfig};

/// Allocates an mbuf, frees it, allocates again: whether the second is the first.
fn freed_mbuf_comes_back(pool: &Mempool) -> bool {
    let a = pool.alloc().expect("an mbuf");
    let pa = a.as_ptr();
    drop(a);
    let b = pool.alloc().expect("an mbuf");
    std::ptr::eq(pa, b.as_ptr())
}

#[test]
fn a_registered_thread_gets_an_lcore_and_a_mempool_cache_until_it_exits() {
    let eal = common::eal();
    let cfg = MempoolConfig {
        n: 1023,
        cache_size: 32,
        ..MempoolConfig::default()
    };
    let pool = Mempool::new(eal, "threads_pool", &cfg).unwrap_or_else(|e| panic!("{e}"));
    let main = eal.main_lcore();
    assert_eq!(eal.lcore_count(), 1);

    // A thread DPDK did not start: no lcore id, every free goes to the shared ring (first in,
    // first out), so the next alloc hands out another mbuf.
    let p = pool.clone();
    let (id, back) = std::thread::spawn(move || (eal.current_lcore(), freed_mbuf_comes_back(&p)))
        .join()
        .unwrap();
    assert_eq!(id, None);
    assert!(
        !back,
        "without an lcore id the freed mbuf goes to the back of the ring"
    );

    // Registered: its own lcore id, and the per-lcore cache gives the freed mbuf back.
    let p = pool.clone();
    let (first, again, back, count) = std::thread::spawn(move || {
        let id = eal.register_thread().unwrap_or_else(|e| panic!("{e}"));
        let again = eal.register_thread().unwrap();
        (id, again, freed_mbuf_comes_back(&p), eal.lcore_count())
    })
    .join()
    .unwrap();
    assert_ne!(first, main);
    assert_eq!(again, first, "a second call keeps the id");
    assert!(
        back,
        "the lcore's mempool cache returns the mbuf just freed"
    );
    assert_eq!(count, 2, "main + the registered thread");

    // Its exit released the id: the process is back to one lcore, and the next thread to
    // register gets the same (lowest free) id.
    assert_eq!(eal.lcore_count(), 1);
    let next = std::thread::spawn(move || eal.register_thread().unwrap())
        .join()
        .unwrap();
    assert_eq!(next, first);
    // The EAL main lcore is registered already: its own id.
    assert_eq!(eal.register_thread().ok(), eal.current_lcore());
}
