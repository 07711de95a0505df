//! Property and multi-thread tests of the SPSC [`Ring`] and the [`BufferPool`].
//!
//! - the ring against a `VecDeque` model (random capacities, single/bulk/exact operations,
//!   re-splitting), and exactly-once drops of every item;
//! - the pool against a model (random get/drop/into_raw/from_raw), with byte stamps that would
//!   reveal two owners of one slot;
//! - threads: 1..=N in order through the ring, 4 threads hammering the pool with per-slot owner
//!   flags, and buffers handed from a getter thread to a dropper thread through a ring.
//!
//! Run: `cargo test -p rtdaq-core --test ring_pool_props`.
#![cfg(not(loom))]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use proptest::prelude::*;
use rtdaq_core::pool::{Buf, BufferPool};
use rtdaq_core::ring::{Ring, RingStorage};
use rtdaq_core::RingError;

#[derive(Debug, Clone)]
enum Op {
    Push(u32),
    PushBulk(Vec<u32>),
    PushBulkExact(Vec<u32>),
    PushSlice(Vec<u32>),
    PushSliceExact(Vec<u32>),
    Pop,
    Peek,
    /// Pop into a `heapless::Vec<_, 16>` pre-filled with this many items.
    PopBulk(usize),
    PopInto(usize),
    PopSlice(usize),
    PopSliceExact(usize),
    Resplit,
}

fn op() -> impl Strategy<Value = Op> {
    let items = || prop::collection::vec(any::<u32>(), 0..20);
    prop_oneof![
        4 => any::<u32>().prop_map(Op::Push),
        2 => items().prop_map(Op::PushBulk),
        1 => items().prop_map(Op::PushBulkExact),
        2 => items().prop_map(Op::PushSlice),
        1 => items().prop_map(Op::PushSliceExact),
        4 => Just(Op::Pop),
        1 => Just(Op::Peek),
        2 => (0usize..=16).prop_map(Op::PopBulk),
        1 => (0usize..20).prop_map(Op::PopInto),
        1 => (0usize..20).prop_map(Op::PopSlice),
        1 => (0usize..20).prop_map(Op::PopSliceExact),
        1 => Just(Op::Resplit),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn ring_matches_vecdeque(cap_log in 0u32..7, ops in prop::collection::vec(op(), 1..120)) {
        let cap = 1usize << cap_log;
        let mut storage: Vec<MaybeUninit<u32>> = (0..cap).map(|_| MaybeUninit::uninit()).collect();
        let mut ring = Ring::new(&mut storage[..]).unwrap();
        prop_assert_eq!(ring.capacity(), cap);
        let mut model: VecDeque<u32> = VecDeque::new();
        let mut halves = ring.split();
        for op in ops {
            let (p, c) = &mut halves;
            let free = cap - model.len();
            match op {
                Op::Push(v) => {
                    let r = p.push(v);
                    if free > 0 { prop_assert_eq!(r, Ok(())); model.push_back(v); }
                    else { prop_assert_eq!(r, Err(v)); }
                }
                Op::PushBulk(v) => {
                    let mut it = v.iter().copied();
                    let n = p.push_bulk(&mut it);
                    prop_assert_eq!(n, v.len().min(free));
                    prop_assert_eq!(it.len(), v.len() - n);
                    model.extend(&v[..n]);
                }
                Op::PushBulkExact(v) => {
                    let r = p.push_bulk_exact(v.iter().copied());
                    if v.len() <= free { prop_assert!(r.is_ok()); model.extend(&v); }
                    else { prop_assert_eq!(r.err().map(|it| it.len()), Some(v.len())); }
                }
                Op::PushSlice(v) => {
                    let n = p.push_slice(&v);
                    prop_assert_eq!(n, v.len().min(free));
                    model.extend(&v[..n]);
                }
                Op::PushSliceExact(v) => {
                    let r = p.push_slice_exact(&v);
                    if v.len() <= free { prop_assert_eq!(r, Ok(())); model.extend(&v); }
                    else { prop_assert_eq!(r, Err(RingError::Full)); }
                }
                Op::Pop => prop_assert_eq!(c.pop(), model.pop_front()),
                Op::Peek => prop_assert_eq!(c.peek().copied(), model.front().copied()),
                Op::PopBulk(pre) => {
                    let mut out: heapless::Vec<u32, 16> = heapless::Vec::new();
                    for i in 0..pre { out.push(u32::MAX - i as u32).unwrap(); }
                    let n = c.pop_bulk(&mut out);
                    prop_assert_eq!(n, (16 - pre).min(model.len()));
                    let want: Vec<u32> = model.drain(..n).collect();
                    prop_assert_eq!(&out[pre..], &want[..]);
                }
                Op::PopInto(k) => {
                    let mut out = vec![MaybeUninit::<u32>::uninit(); k];
                    let n = c.pop_into(&mut out);
                    prop_assert_eq!(n, k.min(model.len()));
                    for slot in &out[..n] {
                        // SAFETY: `pop_into` initialised the first `n` entries.
                        prop_assert_eq!(Some(unsafe { slot.assume_init() }), model.pop_front());
                    }
                }
                Op::PopSlice(k) => {
                    let mut out = vec![0u32; k];
                    let n = c.pop_slice(&mut out);
                    prop_assert_eq!(n, k.min(model.len()));
                    let want: Vec<u32> = model.drain(..n).collect();
                    prop_assert_eq!(&out[..n], &want[..]);
                }
                Op::PopSliceExact(k) => {
                    let mut out = vec![0u32; k];
                    if k <= model.len() {
                        prop_assert_eq!(c.pop_slice_exact(&mut out), Ok(()));
                        let want: Vec<u32> = model.drain(..k).collect();
                        prop_assert_eq!(out, want);
                    } else {
                        prop_assert_eq!(c.pop_slice_exact(&mut out), Err(RingError::Empty));
                    }
                }
                Op::Resplit => {
                    // The halves are dead here (NLL), so the ring can be queried and re-split.
                    prop_assert_eq!(ring.len(), model.len());
                    halves = ring.split();
                }
            }
            let (p, c) = &mut halves;
            prop_assert_eq!(p.len(), model.len());
            prop_assert_eq!(c.len(), model.len());
            prop_assert_eq!(p.free_slots(), cap - model.len());
            prop_assert_eq!(c.is_empty(), model.is_empty());
        }
        prop_assert_eq!(ring.len(), model.len());
    }
}

/// An item that records its id when dropped.
struct Tracked {
    id: u32,
    log: Rc<RefCell<Vec<u32>>>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.log.borrow_mut().push(self.id);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Every item created is dropped exactly once: popped ones by the test, rejected ones by
    /// the test, leftover ones by the ring (on `clear` or `Drop`).
    #[test]
    fn ring_drops_every_item_exactly_once(
        cap_log in 0u32..5,
        ops in prop::collection::vec((0u8..6, 0usize..8), 0..60),
    ) {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut next = 0u32;
        let mut mk = || { next += 1; Tracked { id: next - 1, log: log.clone() } };
        let cap = 1usize << cap_log;
        let mut storage: Vec<MaybeUninit<Tracked>> = (0..cap).map(|_| MaybeUninit::uninit()).collect();
        {
            let mut ring = Ring::new(&mut storage[..]).unwrap();
            let (mut p, mut c) = ring.split();
            for (kind, n) in ops {
                match kind {
                    0 => drop(p.push(mk())),
                    1 => { let items: Vec<Tracked> = (0..n).map(|_| mk()).collect(); p.push_bulk(items); }
                    2 => drop(c.pop()),
                    3 => { let mut v: heapless::Vec<Tracked, 4> = heapless::Vec::new(); c.pop_bulk(&mut v); }
                    4 => {
                        let mut out: Vec<MaybeUninit<Tracked>> = (0..n).map(|_| MaybeUninit::uninit()).collect();
                        let k = c.pop_into(&mut out);
                        // SAFETY: the first `k` entries were initialised by `pop_into`.
                        for slot in &mut out[..k] { unsafe { slot.assume_init_drop() } }
                    }
                    _ => { if let Err(it) = p.push_bulk_exact((0..n).map(|_| mk()).collect::<Vec<_>>()) { drop(it) } }
                }
            }
            if next % 2 == 0 {
                ring.clear();
                prop_assert!(ring.is_empty());
            }
        }
        let mut seen = log.borrow().clone();
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..next).collect::<Vec<_>>());
    }
}

#[derive(Debug, Clone)]
enum PoolOp {
    Get,
    Drop(usize),
    IntoRaw(usize),
    FromRaw(usize),
    SetLen(usize, usize),
}

fn stamp(buf: &mut Buf<'_>, v: u8) {
    buf.slot_mut().unwrap().fill(v);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn pool_never_hands_one_slot_to_two_owners(
        slots in 1usize..12,
        slot_size in 1usize..40,
        ops in prop::collection::vec(prop_oneof![
            4 => Just(PoolOp::Get),
            3 => any::<usize>().prop_map(PoolOp::Drop),
            1 => any::<usize>().prop_map(PoolOp::IntoRaw),
            1 => any::<usize>().prop_map(PoolOp::FromRaw),
            1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| PoolOp::SetLen(a, b)),
        ], 0..100),
    ) {
        let mut mem = vec![0u8; slots * slot_size + slot_size / 2];
        let mut links: Vec<AtomicU32> = (0..slots + 1).map(|_| AtomicU32::new(0)).collect();
        let pool = BufferPool::new(&mut mem, &mut links, slot_size).unwrap();
        prop_assert_eq!(pool.slot_count(), slots);
        let mut live: Vec<(Buf<'_>, u8)> = Vec::new();
        let mut raw: Vec<(u32, usize, u8)> = Vec::new();
        let mut next_stamp = 0u8;
        for op in ops {
            match op {
                PoolOp::Get => match pool.get() {
                    Some(mut b) => {
                        prop_assert!(live.len() + raw.len() < slots);
                        prop_assert_eq!(b.len(), 0);
                        next_stamp = next_stamp.wrapping_add(1);
                        stamp(&mut b, next_stamp);
                        live.push((b, next_stamp));
                    }
                    None => prop_assert_eq!(live.len() + raw.len(), slots),
                },
                PoolOp::Drop(k) if !live.is_empty() => { live.swap_remove(k % live.len()); }
                PoolOp::IntoRaw(k) if !live.is_empty() => {
                    let (b, s) = live.swap_remove(k % live.len());
                    let len = b.len();
                    raw.push((b.into_raw(), len, s));
                }
                PoolOp::FromRaw(k) if !raw.is_empty() => {
                    let (idx, len, s) = raw.swap_remove(k % raw.len());
                    // SAFETY: `idx` came from `into_raw` on this pool and is rebuilt once.
                    let b = unsafe { pool.buf_from_raw(idx, len) };
                    prop_assert_eq!(b.len(), len);
                    live.push((b, s));
                }
                PoolOp::SetLen(k, len) if !live.is_empty() => {
                    let i = k % live.len();
                    live[i].0.set_len(len % (slot_size + 1));
                }
                _ => {}
            }
            // No index is held twice; every owner's bytes are still its own stamp.
            let mut held = vec![false; slots];
            for (b, s) in &mut live {
                prop_assert!(!std::mem::replace(&mut held[b.index() as usize], true));
                prop_assert!(b.slot_mut().unwrap().iter().all(|x| x == s));
                prop_assert_eq!(b.addr(), pool.base_addr() + (b.index() as usize * slot_size) as u64);
            }
            for &(idx, _, _) in &raw {
                prop_assert!(!std::mem::replace(&mut held[idx as usize], true));
            }
            prop_assert_eq!(pool.in_use(), live.len() + raw.len());
            prop_assert_eq!(pool.available() + pool.in_use(), pool.slot_count());
        }
        live.clear();
        for (idx, len, _) in raw.drain(..) {
            // SAFETY: as above.
            drop(unsafe { pool.buf_from_raw(idx, len) });
        }
        prop_assert_eq!(pool.available(), slots);
    }
}

/// Spins politely: the host may have fewer cores than busy threads.
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins % 64 == 0 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

#[test]
fn two_threads_see_one_to_n_in_order() {
    const N: u64 = 1_000_000;
    let mut storage = RingStorage::<u64, 256>::new();
    let mut ring = Ring::new(storage.as_uninit_mut()).unwrap();
    let (mut tx, mut rx) = ring.split();
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut spins = 0;
            let mut v = 1u64;
            while v <= N {
                // Alternate single pushes and bulk pushes.
                if v % 1000 < 500 {
                    if tx.push(v).is_ok() {
                        v += 1;
                    } else {
                        backoff(&mut spins);
                    }
                } else {
                    let end = (v + 16).min(N + 1);
                    let mut it = v..end;
                    let n = tx.push_bulk(&mut it) as u64;
                    if n == 0 {
                        backoff(&mut spins);
                    }
                    v += n;
                }
            }
        });
        let mut expect = 1u64;
        let mut spins = 0;
        let mut buf = [0u64; 32];
        while expect <= N {
            let n = if expect % 2 == 0 {
                rx.pop_slice(&mut buf)
            } else {
                match rx.pop() {
                    Some(v) => {
                        buf[0] = v;
                        1
                    }
                    None => 0,
                }
            };
            if n == 0 {
                backoff(&mut spins);
            }
            for &v in &buf[..n] {
                assert_eq!(v, expect);
                expect += 1;
            }
        }
        assert_eq!(rx.pop(), None);
    });
    assert!(ring.is_empty());
}

#[test]
fn pool_threads_never_share_a_slot() {
    const SLOTS: usize = 8;
    const THREADS: u8 = 4;
    const ITERS: u32 = 20_000;
    let mut mem = vec![0u8; SLOTS * 16];
    let mut links: Vec<AtomicU32> = (0..SLOTS).map(|_| AtomicU32::new(0)).collect();
    let pool = BufferPool::new(&mut mem, &mut links, 16).unwrap();
    let owner: Vec<AtomicU8> = (0..SLOTS).map(|_| AtomicU8::new(0)).collect();
    std::thread::scope(|s| {
        for t in 1..=THREADS {
            let (pool, owner) = (&pool, &owner);
            s.spawn(move || {
                let mut held: Vec<Buf<'_>> = Vec::with_capacity(3);
                let mut got = 0u32;
                let mut spins = 0;
                let mut i = 0u32;
                while got < ITERS {
                    i = i.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    if held.len() < 3 && (held.is_empty() || i & 0x100 != 0) {
                        match pool.get() {
                            Some(mut b) => {
                                let o = &owner[b.index() as usize];
                                assert_eq!(
                                    o.compare_exchange(0, t, Ordering::AcqRel, Ordering::Acquire),
                                    Ok(0),
                                    "slot {} handed to two owners",
                                    b.index()
                                );
                                b.slot_mut().unwrap().fill(t);
                                held.push(b);
                                got += 1;
                            }
                            None => backoff(&mut spins),
                        }
                    } else if let Some(mut b) = held.pop() {
                        assert!(b.slot_mut().unwrap().iter().all(|&x| x == t));
                        let o = &owner[b.index() as usize];
                        assert_eq!(
                            o.compare_exchange(t, 0, Ordering::AcqRel, Ordering::Acquire),
                            Ok(t)
                        );
                        drop(b);
                    }
                }
                for b in held.drain(..) {
                    owner[b.index() as usize].store(0, Ordering::Release);
                }
            });
        }
    });
    assert_eq!(pool.available(), SLOTS);
    assert_eq!(pool.in_use(), 0);
}

/// The appliance's pattern: the I/O thread gets buffers, the consumer thread drops them.
#[test]
fn buffers_got_on_one_thread_are_dropped_on_another() {
    const N: u32 = 100_000;
    let mut mem = vec![0u8; 32 * 64];
    let mut links: Vec<AtomicU32> = (0..32).map(|_| AtomicU32::new(0)).collect();
    let pool = BufferPool::new(&mut mem, &mut links, 64).unwrap();
    let mut storage = RingStorage::<Buf<'_>, 16>::new();
    let mut ring = Ring::new(storage.as_uninit_mut()).unwrap();
    let (mut tx, mut rx) = ring.split();
    std::thread::scope(|s| {
        let pool = &pool;
        s.spawn(move || {
            let mut spins = 0;
            let mut sent = 0u32;
            while sent < N {
                let Some(mut b) = pool.get() else {
                    backoff(&mut spins);
                    continue;
                };
                b.slot_mut().unwrap()[..4].copy_from_slice(&sent.to_le_bytes());
                b.set_len(4);
                let mut item = b;
                loop {
                    match tx.push(item) {
                        Ok(()) => break,
                        Err(back) => {
                            item = back;
                            backoff(&mut spins);
                        }
                    }
                }
                sent += 1;
            }
        });
        let mut want = 0u32;
        let mut spins = 0;
        while want < N {
            match rx.pop() {
                Some(b) => {
                    assert_eq!(b.as_slice().unwrap(), &want.to_le_bytes());
                    want += 1;
                }
                None => backoff(&mut spins),
            }
        }
    });
    assert_eq!(pool.available(), 32);
}
