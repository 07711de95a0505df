//! Proves the hot paths of the in-place [`SlotRing`] (and a burst's fill → commit → front →
//! clear → release cycle through it) allocate nothing: storage is set up first, then the
//! measured region runs under a counting global allocator.
//!
//! Run: `cargo test -p rtdaq-core --test no_alloc_slot_ring`.
#![cfg(not(loom))]

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use std::sync::atomic::AtomicU32;

use counting_alloc::allocations_in;
use rtdaq_core::pool::BufferPool;
use rtdaq_core::slot_ring::SlotRing;
use rtdaq_core::traits::{RxBurst, TxBurst};
use rtdaq_core::{Burst, Packet, PacketMeta, QueueId};

#[global_allocator]
static A: counting_alloc::Counting = counting_alloc::Counting;

#[test]
fn slot_commit_front_release_allocate_nothing() {
    let mut storage: Vec<[u64; 16]> = vec![[0; 16]; 8];
    let mut ring = SlotRing::new(&mut storage[..]).unwrap();
    let (n, sum) = allocations_in(|| {
        let (mut tx, mut rx) = ring.split();
        let mut sum = 0u64;
        for round in 0..200u64 {
            // One at a time.
            let s = tx.slot().unwrap();
            s.fill(round);
            tx.commit().unwrap();
            let s = rx.front().unwrap();
            sum += s[15];
            s.fill(0);
            rx.release().unwrap();
            // Closure helpers.
            tx.fill_with(|s| s[0] = round).unwrap();
            sum += rx.consume_with(|s| core::mem::take(&mut s[0])).unwrap();
            // Bulk, across the wrap point.
            let (a, b) = tx.free_slices();
            for s in a.iter_mut().chain(b.iter_mut()) {
                s[1] = round;
            }
            tx.commit_n(8).unwrap();
            assert!(tx.slot().is_none() && tx.commit().is_err() && tx.is_full());
            let (a, b) = rx.full_slices();
            sum += a.iter().chain(b.iter()).map(|s| s[1]).sum::<u64>();
            rx.release_n(8).unwrap();
            assert!(rx.front().is_none() && rx.release().is_err() && rx.is_empty());
            assert_eq!(tx.free_slots(), 8);
        }
        sum
    });
    assert_eq!(n, 0, "slot ring hot path allocated");
    assert_eq!(sum, (0..200u64).map(|r| 10 * r).sum::<u64>());
}

#[test]
fn burst_fill_commit_front_clear_release_allocates_nothing() {
    let mut mem = vec![0u8; 64 * 256];
    let mut links: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(0)).collect();
    let pool = BufferPool::new(&mut mem, &mut links, 256).unwrap();
    let mut storage: Vec<Burst<'_, 16>> = (0..4).map(|_| Burst::new(QueueId(1))).collect();
    let mut ring = SlotRing::new(&mut storage[..]).unwrap();
    let (n, bytes) = allocations_in(|| {
        let (mut tx, mut rx) = ring.split();
        let mut bytes = 0usize;
        for round in 0..200u32 {
            // Fill in place (the `TxBurst` way), commit.
            let burst = tx.slot().unwrap();
            while !burst.is_full() {
                let meta = PacketMeta {
                    queue: QueueId(1),
                    ..PacketMeta::default()
                };
                burst
                    .push(Packet::single(pool.get().unwrap(), meta))
                    .unwrap();
            }
            for i in 0..TxBurst::len(burst) {
                let b = TxBurst::packet_mut(burst, i).unwrap();
                b[..4].copy_from_slice(&round.to_be_bytes());
                TxBurst::set_len(burst, i, 60 + i);
            }
            tx.commit().unwrap();
            assert_eq!(pool.in_use(), 16);

            // Process in place, clear (buffers back to the pool), release.
            let burst = rx.front().unwrap();
            assert_eq!(RxBurst::len(burst), 16);
            assert_eq!(burst.meta(3).len, 63);
            bytes += burst.total_bytes();
            burst.clear();
            rx.release().unwrap();
            assert_eq!(pool.in_use(), 0);
        }
        bytes
    });
    assert_eq!(n, 0, "burst through slot ring allocated");
    assert_eq!(bytes, 200 * (16 * 60 + (0..16).sum::<usize>()));
}
