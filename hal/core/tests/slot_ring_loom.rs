//! Loom models of the real in-place [`SlotRing`] code (under `cfg(loom)` its atomics are
//! loom's and every slot borrow/hand-over is reported to a loom `UnsafeCell` shadow). The slot
//! type itself also keeps its data in loom cells, so loom independently checks that every
//! producer write happens-before the consumer's read of the same generation, and every consumer
//! clear happens-before the producer's refill, in every interleaving.
//!
//! Run (release, it explores many executions):
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p rtdaq-core --test slot_ring_loom --release --target-dir target/loom
//! ```
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::thread;
use rtdaq_core::slot_ring::SlotRing;

/// "Cleared" marker the consumer leaves in a slot.
const CLEARED: u64 = 0;

/// A slot: a generation number and a payload word, both in loom cells.
struct Slot {
    gen: UnsafeCell<u64>,
    payload: UnsafeCell<u64>,
}

impl Slot {
    fn new() -> Self {
        Slot {
            gen: UnsafeCell::new(CLEARED),
            payload: UnsafeCell::new(CLEARED),
        }
    }

    /// Producer side: the slot must be cleared, then gets generation `g`.
    fn fill(&mut self, g: u64) {
        // SAFETY (all cell accesses): loom checks they are exclusive and ordered.
        self.gen.with_mut(|p| unsafe {
            assert_eq!(
                *p, CLEARED,
                "producer got a slot the consumer had not cleared"
            );
            *p = g;
        });
        self.payload.with_mut(|p| unsafe { *p = g * 100 });
    }

    /// Consumer side: the slot must hold generation `g` completely, then is cleared.
    fn check_and_clear(&mut self, g: u64) {
        self.gen.with_mut(|p| unsafe {
            assert_eq!(*p, g, "consumer saw a wrong generation");
            *p = CLEARED;
        });
        self.payload.with_mut(|p| unsafe {
            assert_eq!(*p, g * 100, "consumer saw a torn slot");
            *p = CLEARED;
        });
    }
}

/// The storage and the ring on the heap, handed out as `&'static mut` (loom threads need it)
/// and freed once every thread is joined, so a model with many executions does not leak.
struct Fixture {
    storage: *mut [Slot],
    ring: *mut SlotRing<'static, Slot>,
}

impl Fixture {
    fn new(cap: usize) -> Self {
        let storage = Box::into_raw((0..cap).map(|_| Slot::new()).collect::<Box<[_]>>());
        // SAFETY: `storage` is a fresh, uniquely owned box that lives until `free`, which runs
        // after the ring (its only user) is gone.
        let ring = SlotRing::new(unsafe { &mut *storage }).unwrap();
        Fixture {
            storage,
            ring: Box::into_raw(Box::new(ring)),
        }
    }

    fn ring(&self) -> &'static mut SlotRing<'static, Slot> {
        // SAFETY: valid until `free`; each model calls this once and joins every thread
        // before `free`.
        unsafe { &mut *self.ring }
    }

    /// # Safety
    /// Nothing from `ring()` may be used afterwards.
    unsafe fn free(self) {
        // SAFETY: both came from `Box::into_raw` and are freed once, the ring first (it borrows
        // the storage).
        unsafe {
            drop(Box::from_raw(self.ring));
            drop(Box::from_raw(self.storage));
        }
    }
}

/// Capacity 2, three generations, one slot at a time: the producer must wait for a release
/// once (wrap + full), and reuses a slot the consumer cleared.
#[test]
fn slot_single() {
    loom::model(|| {
        let fx = Fixture::new(2);
        let (mut tx, mut rx) = fx.ring().split();
        let h = thread::spawn(move || {
            for g in 1..=3 {
                loop {
                    if let Some(s) = tx.slot() {
                        s.fill(g);
                        break;
                    }
                    thread::yield_now();
                }
                tx.commit().unwrap();
            }
        });
        for g in 1..=3 {
            loop {
                if let Some(s) = rx.front() {
                    s.check_and_clear(g);
                    break;
                }
                thread::yield_now();
            }
            rx.release().unwrap();
        }
        h.join().unwrap();
        assert!(rx.front().is_none());
        // SAFETY: the producer thread is joined and the consumer is not used again.
        unsafe { fx.free() };
    });
}

/// Capacity 2, four generations through the bulk calls (`free_slices` + `commit_n`,
/// `full_slices` + `release_n`: one index store per batch), against the closure helpers on
/// the other side.
#[test]
fn slot_bulk() {
    loom::model(|| {
        let fx = Fixture::new(2);
        let (mut tx, mut rx) = fx.ring().split();
        let h = thread::spawn(move || {
            let mut g = 1;
            while g <= 4 {
                let (a, b) = tx.free_slices();
                let n = (a.len() + b.len()).min(5 - g as usize);
                for (i, s) in a.iter_mut().chain(b.iter_mut()).take(n).enumerate() {
                    s.fill(g + i as u64);
                }
                if n == 0 {
                    thread::yield_now();
                    continue;
                }
                tx.commit_n(n).unwrap();
                g += n as u64;
            }
        });
        let mut g = 1;
        while g <= 4 {
            if rx.consume_with(|s| s.check_and_clear(g)).is_some() {
                g += 1;
            } else {
                thread::yield_now();
            }
        }
        h.join().unwrap();
        // SAFETY: the producer thread is joined and the consumer is not used again.
        unsafe { fx.free() };
    });
}

/// The mirror image: `fill_with` on the producer, `full_slices` + `release_n` on the consumer.
#[test]
fn slot_fill_with_and_drain() {
    loom::model(|| {
        let fx = Fixture::new(2);
        let (mut tx, mut rx) = fx.ring().split();
        let h = thread::spawn(move || {
            let mut g = 1;
            while g <= 3 {
                if tx.fill_with(|s| s.fill(g)).is_some() {
                    g += 1;
                } else {
                    thread::yield_now();
                }
            }
        });
        let mut g = 1;
        while g <= 3 {
            let (a, b) = rx.full_slices();
            let n = a.len() + b.len();
            for s in a.iter_mut().chain(b.iter_mut()) {
                s.check_and_clear(g);
                g += 1;
            }
            if n == 0 {
                thread::yield_now();
                continue;
            }
            rx.release_n(n).unwrap();
        }
        h.join().unwrap();
        // SAFETY: the producer thread is joined and the consumer is not used again.
        unsafe { fx.free() };
    });
}
