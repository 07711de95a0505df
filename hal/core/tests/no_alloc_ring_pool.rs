//! Proves the hot paths of the ring, the pool, bursts and counters allocate nothing: storage is
//! set up first, then the measured region runs under a counting global allocator.
//!
//! Run: `cargo test -p rtdaq-core --test no_alloc_ring_pool`.
#![cfg(not(loom))]

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use std::mem::MaybeUninit;
use std::sync::atomic::AtomicU32;

use counting_alloc::allocations_in;
use rtdaq_core::counters::{DropReason, QueueCounters};
use rtdaq_core::pool::BufferPool;
use rtdaq_core::ring::{Ring, RingStorage};
use rtdaq_core::traits::RxBurst;
use rtdaq_core::{Burst, Packet, PacketMeta, QueueId};

#[global_allocator]
static A: counting_alloc::Counting = counting_alloc::Counting;

#[test]
fn ring_push_pop_bulk_allocate_nothing() {
    let mut storage: Vec<MaybeUninit<u64>> = (0..64).map(|_| MaybeUninit::uninit()).collect();
    let mut ring = Ring::new(&mut storage[..]).unwrap();
    let src: Vec<u64> = (0..48).collect();
    let mut dst = vec![0u64; 48];
    let (n, sum) = allocations_in(|| {
        let (mut tx, mut rx) = ring.split();
        let mut sum = 0u64;
        for round in 0..100u64 {
            tx.push(round).unwrap();
            sum += rx.pop().unwrap();
            assert_eq!(tx.push_slice(&src), 48);
            assert_eq!(rx.pop_slice(&mut dst), 48);
            assert_eq!(tx.push_bulk(0..10u64), 10);
            tx.push_slice_exact(&src[..5]).unwrap();
            assert!(tx.push_bulk_exact((0..100u32).map(u64::from)).is_err());
            let mut v: heapless::Vec<u64, 16> = heapless::Vec::new();
            assert_eq!(rx.pop_bulk(&mut v), 15);
            sum += v.iter().sum::<u64>();
            assert!(rx.peek().is_none() && rx.is_empty() && tx.free_slots() == 64);
        }
        sum
    });
    assert_eq!(n, 0, "ring hot path allocated");
    assert!(sum > 0);

    // Const storage and a ring of a non-Copy type.
    let mut st = RingStorage::<String, 4>::new();
    let s = String::from("x");
    let (n, ()) = allocations_in(|| {
        let mut ring = Ring::new(st.as_uninit_mut()).unwrap();
        let (mut tx, mut rx) = ring.split();
        let mut s = s;
        for _ in 0..100 {
            tx.push(s).unwrap();
            s = rx.pop().unwrap();
        }
        drop(s); // dealloc is fine, only allocations are counted
    });
    assert_eq!(n, 0, "ring of String allocated");
}

#[test]
fn pool_burst_and_counters_allocate_nothing() {
    let mut mem = vec![0u8; 64 * 256];
    let mut links: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(0)).collect();
    let pool = BufferPool::new(&mut mem, &mut links, 256).unwrap();
    let counters = QueueCounters::new();
    let mut ring_storage = RingStorage::<Burst<'_, 8>, 4>::new();
    let mut ring = Ring::new(ring_storage.as_uninit_mut()).unwrap();
    let (n, bytes) = allocations_in(|| {
        let (mut tx, mut rx) = ring.split();
        let mut bytes = 0usize;
        for round in 0..200u32 {
            // Pool get/put, raw round trip.
            let b = pool.get().unwrap();
            let idx = b.into_raw();
            // SAFETY: `idx` came from `into_raw` on this pool, rebuilt once.
            drop(unsafe { pool.buf_from_raw(idx, 0) });

            // Build a burst (header + payload segments), move it through a ring, drop it.
            let mut burst = Burst::<'_, 8>::new(QueueId(1));
            while !burst.is_full() {
                let mut hdr = pool.get().unwrap();
                hdr.slot_mut().unwrap()[..4].copy_from_slice(&round.to_be_bytes());
                hdr.set_len(42);
                let mut pay = pool.get().unwrap();
                pay.set_len(200);
                let meta = PacketMeta {
                    len: 242,
                    queue: QueueId(1),
                    ..PacketMeta::default()
                };
                let mut p = Packet::single(hdr, meta);
                p.push_segment(pay).unwrap();
                burst.push(p).unwrap();
            }
            counters.record_rx_burst(burst.len() as u64, burst.total_bytes() as u64);
            if tx.push(burst).is_err() {
                counters.record_drop(DropReason::RingFull);
            }
            let got = rx.pop().unwrap();
            assert_eq!(got.segment(0, 0).len(), 42);
            bytes += got.total_bytes();
            drop(got);
            assert_eq!(pool.in_use(), 0);

            counters.record_drop(DropReason::PoolEmpty);
            counters.add_seq_gaps(1);
            counters.add_reordered(1);
            counters.add_duplicates(1);
            counters.add_corrupt(1);
            let s = counters.snapshot();
            assert_eq!(s.delta(&s).total_drops(), 0);
            assert_eq!(DropReason::ALL[0].as_str(), "ring_full");
        }
        bytes
    });
    assert_eq!(n, 0, "pool/burst/counters hot path allocated");
    assert_eq!(bytes, 200 * 8 * 242);
    assert_eq!(counters.snapshot().packets, 200 * 8);
}
