//! Properties of the in-place [`SlotRing`]: random single-threaded operation sequences against a
//! model of the slot storage, and two-thread stress tests (torn/early reads, bursts of pool
//! buffers filled by the producer and cleared by the consumer).
//!
//! Run: `cargo test -p rtdaq-core --test slot_ring_props` (a few seconds in debug).
#![cfg(not(loom))]

use std::sync::atomic::AtomicU32;
use std::thread;

use proptest::prelude::*;
use rtdaq_core::error::RingError;
use rtdaq_core::pool::BufferPool;
use rtdaq_core::slot_ring::{SlotConsumer, SlotProducer, SlotRing};
use rtdaq_core::traits::{RxBurst, Segment, TxBurst};
use rtdaq_core::{Burst, Packet, PacketMeta, QueueId};

// ---------------------------------------------------------------------------------------------
// Single-threaded model
// ---------------------------------------------------------------------------------------------

/// One step on either half.
#[derive(Debug, Clone)]
enum Op {
    /// Producer: borrow `slot()` and write a value (no commit).
    Write(u64),
    /// Producer: `commit()`.
    Commit,
    /// Producer: `commit_n(n)`.
    CommitN(usize),
    /// Producer: `fill_with` writing a value.
    FillWith(u64),
    /// Producer: write `base + i` into the first `n` free slots, then `commit_n(n)`.
    FillSlices(u64, usize),
    /// Consumer: `front()`, compare, optionally overwrite (clear).
    Front(Option<u64>),
    /// Consumer: `release()`.
    Release,
    /// Consumer: `release_n(n)`.
    ReleaseN(usize),
    /// Consumer: `consume_with`, compare, clear to the value.
    ConsumeWith(u64),
    /// Consumer: compare `full_slices()`, then release the first `n`.
    DrainSlices(usize),
    /// Drop both halves and split again.
    Resplit,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<u64>().prop_map(Op::Write),
        4 => Just(Op::Commit),
        1 => (0usize..20).prop_map(Op::CommitN),
        3 => any::<u64>().prop_map(Op::FillWith),
        2 => (any::<u64>(), 0usize..20).prop_map(|(b, n)| Op::FillSlices(b, n)),
        3 => proptest::option::of(any::<u64>()).prop_map(Op::Front),
        4 => Just(Op::Release),
        1 => (0usize..20).prop_map(Op::ReleaseN),
        3 => any::<u64>().prop_map(Op::ConsumeWith),
        2 => (0usize..20).prop_map(Op::DrainSlices),
        1 => Just(Op::Resplit),
    ]
}

/// The model: the slot contents and the two counters.
struct Model {
    slots: Vec<u64>,
    head: usize,
    tail: usize,
}

impl Model {
    fn cap(&self) -> usize {
        self.slots.len()
    }
    fn len(&self) -> usize {
        self.tail - self.head
    }
    fn free(&self) -> usize {
        self.cap() - self.len()
    }
    fn at(&mut self, counter: usize) -> &mut u64 {
        let cap = self.cap();
        &mut self.slots[counter % cap]
    }
}

fn step(op: &Op, m: &mut Model, p: &mut SlotProducer<'_, u64>, c: &mut SlotConsumer<'_, u64>) {
    match *op {
        Op::Write(v) => match p.slot() {
            Some(s) => {
                assert!(m.free() > 0);
                assert_eq!(*s, *m.at(m.tail), "free slot holds what was left in it");
                *s = v;
                *m.at(m.tail) = v;
            }
            None => assert_eq!(m.free(), 0),
        },
        Op::Commit => {
            let r = p.commit();
            if m.free() > 0 {
                assert_eq!(r, Ok(()));
                m.tail += 1;
            } else {
                assert_eq!(r, Err(RingError::Full));
            }
        }
        Op::CommitN(n) => {
            let r = p.commit_n(n);
            if n <= m.free() {
                assert_eq!(r, Ok(()));
                m.tail += n;
            } else {
                assert_eq!(r, Err(RingError::Full));
            }
        }
        Op::FillWith(v) => {
            let r = p.fill_with(|s| core::mem::replace(s, v));
            if m.free() > 0 {
                assert_eq!(r, Some(*m.at(m.tail)));
                *m.at(m.tail) = v;
                m.tail += 1;
            } else {
                assert_eq!(r, None);
            }
        }
        Op::FillSlices(base, n) => {
            let (a, b) = p.free_slices();
            assert_eq!(a.len() + b.len(), m.free());
            assert!(b.is_empty() || a.len() + (m.tail % m.cap()) == m.cap());
            let n = n.min(m.free());
            for (i, s) in a.iter_mut().chain(b.iter_mut()).enumerate() {
                assert_eq!(*s, *m.at(m.tail + i));
                if i < n {
                    *s = base.wrapping_add(i as u64);
                }
            }
            p.commit_n(n).unwrap();
            for i in 0..n {
                *m.at(m.tail + i) = base.wrapping_add(i as u64);
            }
            m.tail += n;
        }
        Op::Front(clear) => match c.front() {
            Some(s) => {
                assert!(m.len() > 0);
                assert_eq!(*s, *m.at(m.head), "consumer sees what the producer wrote");
                if let Some(v) = clear {
                    *s = v;
                    *m.at(m.head) = v;
                }
            }
            None => assert_eq!(m.len(), 0),
        },
        Op::Release => {
            let r = c.release();
            if m.len() > 0 {
                assert_eq!(r, Ok(()));
                m.head += 1;
            } else {
                assert_eq!(r, Err(RingError::Empty));
            }
        }
        Op::ReleaseN(n) => {
            let r = c.release_n(n);
            if n <= m.len() {
                assert_eq!(r, Ok(()));
                m.head += n;
            } else {
                assert_eq!(r, Err(RingError::Empty));
            }
        }
        Op::ConsumeWith(v) => {
            let r = c.consume_with(|s| core::mem::replace(s, v));
            if m.len() > 0 {
                assert_eq!(r, Some(*m.at(m.head)));
                *m.at(m.head) = v;
                m.head += 1;
            } else {
                assert_eq!(r, None);
            }
        }
        Op::DrainSlices(n) => {
            let (a, b) = c.full_slices();
            assert_eq!(a.len() + b.len(), m.len());
            for (i, s) in a.iter().chain(b.iter()).enumerate() {
                assert_eq!(*s, *m.at(m.head + i));
            }
            let n = n.min(m.len());
            c.release_n(n).unwrap();
            m.head += n;
        }
        Op::Resplit => unreachable!("handled by the caller"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Every operation matches the model: slot contents (what the producer wrote is exactly
    /// what the consumer sees, in order, and what the consumer left is what the producer gets
    /// back), return values, lengths.
    #[test]
    fn matches_model(cap_log2 in 0u32..5, ops in proptest::collection::vec(op(), 0..300)) {
        let cap = 1usize << cap_log2;
        let init: Vec<u64> = (0..cap as u64).map(|i| 1000 + i).collect();
        let mut storage = init.clone();
        let mut m = Model { slots: init, head: 0, tail: 0 };
        {
            let mut ring = SlotRing::new(&mut storage[..]).unwrap();
            for chunk in ops.split(|o| matches!(o, Op::Resplit)) {
                let (mut p, mut c) = ring.split();
                for o in chunk {
                    step(o, &mut m, &mut p, &mut c);
                    prop_assert_eq!(p.len(), m.len());
                    prop_assert_eq!(c.len(), m.len());
                    prop_assert_eq!(p.free_slots(), m.free());
                    prop_assert_eq!(p.is_full(), m.free() == 0);
                    prop_assert_eq!(c.is_empty(), m.len() == 0);
                    prop_assert_eq!(p.capacity(), cap);
                }
                prop_assert_eq!(ring.len(), m.len());
            }
            prop_assert_eq!(ring.is_full(), m.free() == 0);
        }
        // The ring never touched a slot by itself: storage equals the model.
        prop_assert_eq!(storage, m.slots);
    }
}

// ---------------------------------------------------------------------------------------------
// Two threads
// ---------------------------------------------------------------------------------------------

/// Spins a little, then yields (the host may have fewer cores than spinning threads).
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        thread::yield_now();
    }
}

const WORDS: usize = 32;
const CLEARED: u64 = u64::MAX;

/// A big-ish, `Vec`-free slot.
struct Gen {
    words: [u64; WORDS],
}

/// 1e6 slot generations through 8 slots: the producer checks each slot it gets is fully
/// cleared (the consumer's writes are visible) and writes `seq` into every word; the consumer
/// checks every word equals the next `seq` (no torn or early read), then clears the slot.
#[test]
fn two_threads_one_million_generations() {
    const GENS: u64 = 1_000_000;
    let mut storage: Vec<Gen> = (0..8)
        .map(|_| Gen {
            words: [CLEARED; WORDS],
        })
        .collect();
    let mut ring = SlotRing::new(&mut storage[..]).unwrap();
    let (mut tx, mut rx) = ring.split();
    thread::scope(|s| {
        s.spawn(move || {
            let mut spins = 0;
            let mut seq = 0;
            while seq < GENS {
                // Alternate single and bulk commits.
                if seq % 3 == 0 {
                    let (a, b) = tx.free_slices();
                    let n = (a.len() + b.len()).min((GENS - seq) as usize);
                    if n == 0 {
                        backoff(&mut spins);
                        continue;
                    }
                    for (i, g) in a.iter_mut().chain(b.iter_mut()).take(n).enumerate() {
                        assert!(g.words.iter().all(|&w| w == CLEARED), "not cleared");
                        g.words = [seq + i as u64; WORDS];
                    }
                    tx.commit_n(n).unwrap();
                    seq += n as u64;
                } else {
                    let Some(g) = tx.slot() else {
                        backoff(&mut spins);
                        continue;
                    };
                    assert!(g.words.iter().all(|&w| w == CLEARED), "not cleared");
                    for w in g.words.iter_mut() {
                        *w = seq;
                    }
                    tx.commit().unwrap();
                    seq += 1;
                }
                spins = 0;
            }
        });
        let mut spins = 0;
        let mut want = 0u64;
        while want < GENS {
            if want % 5 == 0 {
                let (a, b) = rx.full_slices();
                let n = a.len() + b.len();
                if n == 0 {
                    backoff(&mut spins);
                    continue;
                }
                for g in a.iter_mut().chain(b.iter_mut()) {
                    assert!(g.words.iter().all(|&w| w == want), "torn or early read");
                    g.words = [CLEARED; WORDS];
                    want += 1;
                }
                rx.release_n(n).unwrap();
            } else {
                let Some(g) = rx.front() else {
                    backoff(&mut spins);
                    continue;
                };
                for w in g.words.iter_mut() {
                    assert_eq!(*w, want, "torn or early read");
                    *w = CLEARED;
                }
                rx.release().unwrap();
                want += 1;
            }
            spins = 0;
        }
        assert!(rx.front().is_none());
    });
    assert!(ring.is_empty());
    assert!(storage
        .iter()
        .all(|g| g.words.iter().all(|&w| w == CLEARED)));
}

/// `Burst<'_, 64>` slots: the producer fills each free burst in place with buffers from a
/// shared pool (through the `TxBurst` interface), the consumer verifies and clears it (buffers
/// go back to the pool on the consumer's thread). At the end the pool is fully available.
#[test]
fn two_threads_bursts_from_a_pool() {
    const BURSTS: u32 = 3_000;
    const SLOT: usize = 64;
    let mut mem = vec![0u8; 320 * SLOT];
    let mut links: Vec<AtomicU32> = (0..320).map(|_| AtomicU32::new(0)).collect();
    let pool = BufferPool::new(&mut mem, &mut links, SLOT).unwrap();
    let pool = &pool;
    let mut storage: Vec<Burst<'_, 64>> = (0..4).map(|_| Burst::new(QueueId(2))).collect();
    let mut ring = SlotRing::new(&mut storage[..]).unwrap();
    let (mut tx, mut rx) = ring.split();
    let (sent, got) = thread::scope(|s| {
        let producer = s.spawn(move || {
            let mut sent = 0u64;
            let mut spins = 0;
            let mut gen = 0u32;
            while gen < BURSTS {
                let Some(burst) = tx.slot() else {
                    backoff(&mut spins);
                    continue;
                };
                spins = 0;
                assert!(burst.is_empty(), "consumer left a full burst");
                // 1..=64 packets; fewer when the pool is short (4 bursts x 64 > 320 buffers).
                let want = 1 + (gen as usize * 7) % 64;
                while burst.len() < want {
                    let Some(buf) = pool.get() else { break };
                    let meta = PacketMeta {
                        queue: QueueId(2),
                        ..PacketMeta::default()
                    };
                    burst.push(Packet::single(buf, meta)).unwrap();
                }
                if burst.is_empty() {
                    // Pool empty: the consumer is about to give buffers back.
                    backoff(&mut spins);
                    continue;
                }
                for i in 0..TxBurst::len(burst) {
                    let bytes = TxBurst::packet_mut(burst, i).unwrap();
                    assert_eq!(bytes.len(), SLOT);
                    let n = 4 + i % 32;
                    bytes[..4].copy_from_slice(&gen.to_le_bytes());
                    bytes[4..n].fill(i as u8);
                    TxBurst::set_len(burst, i, n);
                    sent += n as u64;
                }
                tx.commit().unwrap();
                gen += 1;
            }
            sent
        });
        let mut got = 0u64;
        let mut spins = 0;
        let mut want = 0u32;
        while want < BURSTS {
            let Some(burst) = rx.front() else {
                backoff(&mut spins);
                continue;
            };
            spins = 0;
            assert!(!burst.is_empty() && burst.queue() == QueueId(2));
            for i in 0..RxBurst::len(burst) {
                let Segment::Host(bytes) = burst.segment(i, 0) else {
                    panic!("host pool")
                };
                assert_eq!(bytes.len(), 4 + i % 32);
                assert_eq!(burst.meta(i).len as usize, bytes.len());
                assert_eq!(&bytes[..4], &want.to_le_bytes());
                assert!(bytes[4..].iter().all(|&b| b == i as u8));
                got += bytes.len() as u64;
            }
            burst.clear();
            rx.release().unwrap();
            want += 1;
        }
        assert!(rx.front().is_none());
        (producer.join().unwrap(), got)
    });
    assert_eq!(sent, got);
    assert!(ring.is_empty());
    assert!(storage.iter().all(Burst::is_empty));
    assert_eq!(pool.available(), pool.slot_count());
}
