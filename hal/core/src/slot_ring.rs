//! In-place lock-free SPSC ring of always-initialised, reusable slots.
//!
//! A [`SlotRing`] runs over **caller-provided storage** `&mut [T]` (a non-zero power-of-two
//! number of already-built `T`s) and passes *ownership of slots* between one producer and one
//! consumer thread. Nothing is moved or copied: it is made for big reusable objects such as
//! [`Burst`](crate::burst::Burst)s of up to 1024 packets (~100 KB each) travelling from an I/O
//! thread to a consumer thread and back, empty, for reuse.
//!
//! ```
//! use rtdaq_core::slot_ring::SlotRing;
//! let mut storage = [[0u32; 16]; 4]; // 4 reusable "big" slots
//! let mut ring = SlotRing::new(&mut storage[..]).unwrap();
//! let (mut tx, mut rx) = ring.split();
//! std::thread::scope(|s| {
//!     s.spawn(move || {
//!         for seq in 1..=100u32 {
//!             let slot = loop {
//!                 match tx.slot() { Some(slot) => break slot, None => std::thread::yield_now() }
//!             };
//!             slot.fill(seq);       // fill in place
//!             tx.commit().unwrap(); // publish; the slot is the consumer's now
//!         }
//!     });
//!     let mut want = 1;
//!     while want <= 100 {
//!         let Some(slot) = rx.front() else { std::thread::yield_now(); continue };
//!         assert!(slot.iter().all(|&v| v == want));
//!         slot.fill(0);          // leave it the way the producer expects it
//!         rx.release().unwrap(); // hand it back
//!         want += 1;
//!     }
//! });
//! ```
//!
//! # Protocol
//! Every slot is always an initialised `T`, owned at any time by exactly one side; ownership
//! alternates strictly, in ring order:
//! 1. **Producer**: [`SlotProducer::slot`] borrows the next *free* slot in place (`None` when
//!    every slot is full). It fills it, then [`SlotProducer::commit`] publishes it (`Release`).
//!    After `commit` the producer must not touch the slot (the borrow checker enforces this: the
//!    `&mut T` borrows the producer, which `commit` needs mutably):
//!    ```compile_fail,E0499
//!    # use rtdaq_core::slot_ring::SlotRing;
//!    # let mut storage = [0u32; 2];
//!    # let mut ring = SlotRing::new(&mut storage[..]).unwrap();
//!    # let (mut tx, _rx) = ring.split();
//!    let slot = tx.slot().unwrap();
//!    tx.commit().unwrap();
//!    *slot = 1; // error[E0499]: `tx` is still borrowed by `slot`
//!    ```
//! 2. **Consumer**: [`SlotConsumer::front`] borrows the oldest *full* slot in place (`None` when
//!    the ring is empty), processes it, then [`SlotConsumer::release`] hands it back (`Release`).
//!    The consumer must leave the slot in the state the producer expects of a free slot (for a
//!    burst: cleared, so its buffers go back to their pool on the consumer's thread and the
//!    producer can refill it). The ring never checks or resets slot contents.
//!
//! Committing a slot without filling it publishes whatever it holds; releasing a slot without
//! clearing it hands its current contents back to the producer. Both are logic errors of the
//! caller, never memory-safety errors.
//!
//! Bulk variants: [`SlotProducer::free_slices`] + [`SlotProducer::commit_n`] and
//! [`SlotConsumer::full_slices`] + [`SlotConsumer::release_n`] publish `n` slots with one
//! index store; [`SlotProducer::fill_with`] / [`SlotConsumer::consume_with`] wrap one
//! borrow-and-publish step in a closure.
//!
//! # Design
//! As in [`ring`](crate::ring), whose index code this module shares (the crate-private
//! `ring_index` core): `head` (next slot to consume, written only by the consumer) and
//! `tail` (next slot to fill, written only by the producer) are free-running `usize` counters
//! on their own cache lines ([`CachePadded`](crossbeam_utils::CachePadded)); slot index =
//! `counter & mask`. Each half keeps a cached copy of the other side's counter and reloads it
//! (`Acquire`) only when the cache says "full" (producer) or "empty" (consumer). The
//! producer's writes into a slot happen-before its `Release` of `tail`, which the consumer
//! loads with `Acquire` before borrowing the slot; the consumer's writes (clearing)
//! happen-before its `Release` of `head`, which the producer loads with `Acquire` before
//! borrowing the slot again.
//!
//! The ring never drops a `T`: the caller owns the storage, and its `T`s are dropped with it.
//! Every method of the halves never blocks, never allocates, never logs and never panics
//! (closures passed to `fill_with` / `consume_with` excepted).
//!
//! Under `cfg(loom)` the atomics come from `loom` and every slot borrow and publish is reported
//! to a loom `UnsafeCell` shadow, so `tests/slot_ring_loom.rs` checks the real code.
#![allow(unsafe_code)]

use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::error::RingError;
use crate::ring_index::{half_queries, ring_queries, ConsumerIndex, ProducerIndex, RingIndex};

#[cfg(loom)]
extern crate std;

/// Loom-only record of slot accesses, so loom can see races on the slot memory.
///
/// A borrow is recorded when it starts (`slot`, `front`, the slices) and again just before the
/// slot changes hands (`commit*`, `release*`): every real access lies between the two records
/// in program order, so ordering both records orders the real accesses.
#[cfg(loom)]
struct Shadow(std::boxed::Box<[loom::cell::UnsafeCell<()>]>);

#[cfg(loom)]
impl Shadow {
    fn new(n: usize) -> Self {
        Shadow((0..n).map(|_| loom::cell::UnsafeCell::new(())).collect())
    }
    /// Records an exclusive access to the slots of counters `from..from + n`.
    fn access(&self, from: usize, n: usize, mask: usize) {
        for i in 0..n {
            self.0[from.wrapping_add(i) & mask].with_mut(|_| ());
        }
    }
}

/// A lock-free SPSC ring of always-initialised slots in caller storage, used in place.
///
/// Use [`split`](SlotRing::split) to get the [`SlotProducer`] and [`SlotConsumer`] halves; the
/// ring itself only offers cold-path queries. See the [module docs](self) for the protocol.
pub struct SlotRing<'s, T> {
    /// The `head`/`tail` counters and the mask.
    index: RingIndex,
    /// Start of the caller's storage (`capacity` initialised slots).
    buf: NonNull<T>,
    #[cfg(loom)]
    shadow: Shadow,
    /// The exclusive borrow of the storage (also makes the ring, and through `&SlotRing` its
    /// halves, invariant in `T`: a half must not be usable at a shorter-lived `T`).
    _storage: PhantomData<&'s mut [T]>,
}

// SAFETY: the ring is an exclusive borrow of `T`s plus atomics; moving it to another thread
// gives that thread access to the `T`s, which `T: Send` allows.
unsafe impl<T: Send> Send for SlotRing<'_, T> {}

impl<'s, T> SlotRing<'s, T> {
    /// Builds an empty ring (every slot free, i.e. the producer's) over `storage`.
    ///
    /// Returns [`RingError::BadCapacity`] unless `storage.len()` is a non-zero power of two.
    /// Cold path (under `cfg(loom)` only, it allocates a shadow for the model checker).
    pub fn new(storage: &'s mut [T]) -> Result<Self, RingError> {
        let index = RingIndex::new(storage.len())?;
        Ok(SlotRing {
            #[cfg(loom)]
            shadow: Shadow::new(index.capacity()),
            index,
            buf: NonNull::from(storage).cast(),
            _storage: PhantomData,
        })
    }

    /// Splits the ring into its producer and consumer halves.
    ///
    /// The `&mut` borrow guarantees one producer and one consumer. After both halves are
    /// dropped the ring may be split again; full slots stay full (the next consumer sees them).
    pub fn split(&mut self) -> (SlotProducer<'_, T>, SlotConsumer<'_, T>) {
        let (pidx, cidx) = self.index.split();
        (
            SlotProducer {
                idx: pidx,
                buf: self.buf,
                #[cfg(loom)]
                shadow: &self.shadow,
                _ring: PhantomData,
            },
            SlotConsumer {
                idx: cidx,
                buf: self.buf,
                #[cfg(loom)]
                shadow: &self.shadow,
                _ring: PhantomData,
            },
        )
    }
}

/// Borrows the slots of counters `pos..pos + n` as (up to) two slices, split at the wrap point.
///
/// # Safety
/// `n <= capacity`, and the caller's half owns those slots exclusively for the lifetime `'a`
/// (which must not outlive the storage borrow).
#[inline(always)]
unsafe fn slices_at<'a, T>(
    buf: NonNull<T>,
    mask: usize,
    pos: usize,
    n: usize,
) -> (&'a mut [T], &'a mut [T]) {
    let start = pos & mask;
    let first = n.min(mask + 1 - start);
    let base = buf.as_ptr();
    // SAFETY: `start + first <= capacity` and `n - first <= start` (the wrapped part ends before
    // the first part begins), so both ranges are in bounds, initialised and disjoint; by the
    // caller's contract they are owned exclusively by the caller's half for `'a`.
    unsafe {
        (
            core::slice::from_raw_parts_mut(base.add(start), first),
            core::slice::from_raw_parts_mut(base, n - first),
        )
    }
}

/// The producing half of a [`SlotRing`]: fills free slots in place and commits them.
/// `Send` when `T: Send`; not `Clone`.
pub struct SlotProducer<'r, T> {
    /// Our `tail` and cached copy of the consumer's `head`.
    idx: ProducerIndex<'r>,
    buf: NonNull<T>,
    #[cfg(loom)]
    shadow: &'r Shadow,
    /// Borrows the ring (and keeps the half invariant in `T`, see [`SlotRing`]).
    _ring: PhantomData<&'r SlotRing<'r, T>>,
}

// SAFETY: the producer only borrows slots it owns (free ones: `tail..head + capacity`) and
// hands them over with `Release` of `tail`; the shared state it touches through `&SlotRing` is
// atomics. The `T`s it fills are then accessed on the consumer's thread, hence `T: Send`.
unsafe impl<T: Send> Send for SlotProducer<'_, T> {}

impl<T> SlotProducer<'_, T> {
    /// Borrows the next free slot in place, to fill it before [`commit`](Self::commit); `None`
    /// when every slot is full. Calling it again before `commit` returns the same slot.
    /// Never blocks, never allocates.
    #[inline]
    pub fn slot(&mut self) -> Option<&mut T> {
        // Reloads the consumer's `head` (`Acquire`) only when the cache says full: its last
        // accesses to the released slots (clearing them) happen-before we borrow them again.
        if self.idx.claim(1) == 0 {
            return None;
        }
        let tail = self.idx.pos();
        #[cfg(loom)]
        self.shadow.access(tail, 1, self.idx.mask());
        // SAFETY: one slot is free, so the slot of `tail` is owned by the producer: the consumer
        // released it (our `Acquire` of `head` saw that) or never had it, and it cannot get it
        // before we move `tail`, which needs `&mut self`, which the returned borrow blocks. The
        // slot is an initialised `T` inside the storage borrowed for longer than `self`.
        Some(unsafe { &mut *self.buf.as_ptr().add(tail & self.idx.mask()) })
    }

    /// Borrows every free slot in place, in ring order, as two slices (the second one non-empty
    /// only across the wrap point); fill the first `n` and [`commit_n`](Self::commit_n)`(n)`.
    /// Reloads the consumer's index. Never blocks, never allocates.
    #[inline]
    pub fn free_slices(&mut self) -> (&mut [T], &mut [T]) {
        let n = self.idx.claim(usize::MAX);
        let (tail, mask) = (self.idx.pos(), self.idx.mask());
        #[cfg(loom)]
        self.shadow.access(tail, n, mask);
        // SAFETY: slots `tail..tail + n` are free, hence the producer's (see `slot`), and stay so
        // while the returned borrows (of `self`) live; `n <= capacity`.
        unsafe { slices_at(self.buf, mask, tail, n) }
    }

    /// Publishes the next free slot (the one [`slot`](Self::slot) returned) to the consumer
    /// with one `Release` store. After this the producer no longer owns the slot.
    ///
    /// Returns [`RingError::Full`] (and publishes nothing) when no slot is free.
    /// Never blocks, never allocates.
    #[inline]
    pub fn commit(&mut self) -> Result<(), RingError> {
        self.commit_n(1)
    }

    /// Publishes the next `n` free slots (in ring order) with one `Release` store.
    ///
    /// Returns [`RingError::Full`] (and publishes nothing) when fewer than `n` slots are free.
    /// `commit_n(0)` does nothing. Never blocks, never allocates.
    #[inline]
    pub fn commit_n(&mut self, n: usize) -> Result<(), RingError> {
        if self.idx.claim(n) < n {
            return Err(RingError::Full);
        }
        self.publish(n);
        Ok(())
    }

    /// Hands the next `n` slots (known to be free) to the consumer with one `Release` store.
    #[inline(always)]
    fn publish(&mut self, n: usize) {
        #[cfg(loom)]
        self.shadow.access(self.idx.pos(), n, self.idx.mask());
        // Release: every write into the committed slots happens-before the consumer's
        // `Acquire` load that makes them visible to it.
        self.idx.publish(n);
    }

    /// Borrows the next free slot, runs `fill` on it and commits it; `None` (and `fill` not
    /// called) when every slot is full. If `fill` panics, the slot is not committed.
    /// Never blocks; allocates only if `fill` does.
    #[inline]
    pub fn fill_with<R>(&mut self, fill: impl FnOnce(&mut T) -> R) -> Option<R> {
        let r = fill(self.slot()?);
        // The slot is known to be free: `slot` returned it.
        self.publish(1);
        Some(r)
    }
}

/// The consuming half of a [`SlotRing`]: processes full slots in place and releases them.
/// `Send` when `T: Send`; not `Clone`.
pub struct SlotConsumer<'r, T> {
    /// Our `head` and cached copy of the producer's `tail`.
    idx: ConsumerIndex<'r>,
    buf: NonNull<T>,
    #[cfg(loom)]
    shadow: &'r Shadow,
    /// Borrows the ring (and keeps the half invariant in `T`, see [`SlotRing`]).
    _ring: PhantomData<&'r SlotRing<'r, T>>,
}

// SAFETY: the consumer only borrows slots the producer published (`Acquire` of `tail`) and
// hands them back with `Release` of `head`; shared state is atomics. It accesses `T`s filled on
// the producer's thread, hence `T: Send`.
unsafe impl<T: Send> Send for SlotConsumer<'_, T> {}

impl<T> SlotConsumer<'_, T> {
    /// Borrows the oldest full slot in place, to process it before [`release`](Self::release);
    /// `None` when the ring is empty. Calling it again before `release` returns the same slot.
    /// Never blocks, never allocates.
    #[inline]
    pub fn front(&mut self) -> Option<&mut T> {
        // Reloads the producer's `tail` (`Acquire`) only when the cache says empty: its writes
        // into the committed slots are then visible.
        if self.idx.claim(1) == 0 {
            return None;
        }
        let head = self.idx.pos();
        #[cfg(loom)]
        self.shadow.access(head, 1, self.idx.mask());
        // SAFETY: `head < tail_cache <= tail`: the producer committed this slot (our `Acquire`
        // of `tail` saw it) and will not borrow it again before we move `head`, which needs
        // `&mut self`, which the returned borrow blocks. The slot is an initialised `T` inside
        // the storage borrowed for longer than `self`.
        Some(unsafe { &mut *self.buf.as_ptr().add(head & self.idx.mask()) })
    }

    /// Borrows the `k`-th oldest full slot in place (`get(0)` is [`front`](Self::front)),
    /// releasing none; `None` when fewer than `k + 1` slots are full. Lets a consumer keep
    /// the slots it still refers to (a device reading their buffers) while it processes
    /// newer ones, then [`release_n`](Self::release_n) them in order. Reloads the producer's
    /// index only when the cache holds fewer than `k + 1` full slots.
    /// Never blocks, never allocates.
    #[inline]
    pub fn get(&mut self, k: usize) -> Option<&mut T> {
        if self.idx.claim(k.saturating_add(1)) <= k {
            return None;
        }
        let at = self.idx.pos().wrapping_add(k);
        #[cfg(loom)]
        self.shadow.access(at, 1, self.idx.mask());
        // SAFETY: `head + k < tail_cache <= tail`: the producer committed this slot (our
        // `Acquire` of `tail` saw it) and will not borrow it again before we move `head`
        // past it, which needs `&mut self`, which the returned borrow blocks. `k < capacity`
        // (at most `capacity` slots are full), so the masked index is that slot's.
        Some(unsafe { &mut *self.buf.as_ptr().add(at & self.idx.mask()) })
    }

    /// Borrows every full slot in place, oldest first, as two slices (the second one non-empty
    /// only across the wrap point); process the first `n` and
    /// [`release_n`](Self::release_n)`(n)`. Reloads the producer's index.
    /// Never blocks, never allocates.
    #[inline]
    pub fn full_slices(&mut self) -> (&mut [T], &mut [T]) {
        let n = self.idx.claim(usize::MAX);
        let (head, mask) = (self.idx.pos(), self.idx.mask());
        #[cfg(loom)]
        self.shadow.access(head, n, mask);
        // SAFETY: slots `head..head + n` are committed, hence the consumer's (see `front`), and
        // stay so while the returned borrows (of `self`) live; `n <= capacity`.
        unsafe { slices_at(self.buf, mask, head, n) }
    }

    /// Hands the oldest full slot (the one [`front`](Self::front) returned) back to the
    /// producer with one `Release` store. Leave it the way the producer expects (cleared).
    ///
    /// Returns [`RingError::Empty`] (and releases nothing) when no slot is full.
    /// Never blocks, never allocates.
    #[inline]
    pub fn release(&mut self) -> Result<(), RingError> {
        self.release_n(1)
    }

    /// Hands the `n` oldest full slots back to the producer with one `Release` store.
    ///
    /// Returns [`RingError::Empty`] (and releases nothing) when fewer than `n` slots are full.
    /// `release_n(0)` does nothing. Never blocks, never allocates.
    #[inline]
    pub fn release_n(&mut self, n: usize) -> Result<(), RingError> {
        if self.idx.claim(n) < n {
            return Err(RingError::Empty);
        }
        self.hand_back(n);
        Ok(())
    }

    /// Hands the `n` oldest slots (known to be full) back to the producer with one `Release`
    /// store.
    #[inline(always)]
    fn hand_back(&mut self, n: usize) {
        #[cfg(loom)]
        self.shadow.access(self.idx.pos(), n, self.idx.mask());
        // Release: every access to the released slots happens-before the producer's `Acquire`
        // load that lets it borrow them again.
        self.idx.publish(n);
    }

    /// Borrows the oldest full slot, runs `consume` on it and releases it; `None` (and
    /// `consume` not called) when the ring is empty. If `consume` panics, the slot is not
    /// released. Never blocks; allocates only if `consume` does.
    #[inline]
    pub fn consume_with<R>(&mut self, consume: impl FnOnce(&mut T) -> R) -> Option<R> {
        let r = consume(self.front()?);
        // The slot is known to be full: `front` returned it.
        self.hand_back(1);
        Some(r)
    }
}

// The index-derived queries (`len`, `capacity`, ...) and `Debug`, shared with
// `ring` through the `ring_index` macros.
ring_queries!(
    SlotRing,
    len = "Number of full (committed, not yet released) slots.",
    is_empty = "True when no slot is full.",
    is_full = "True when every slot is full."
);

half_queries!(
    producer SlotProducer,
    len = "Full slots right now (exact for the producer's own commits; releases may be in flight).",
    is_empty = "True when no slot is full right now."
);

half_queries!(
    consumer SlotConsumer,
    len = "Full slots right now (reloads the producer's index).",
    is_empty = "True when no slot is full right now."
);

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn bad_capacity() {
        let mut s0: [u8; 0] = [];
        assert_eq!(
            SlotRing::new(&mut s0[..]).err(),
            Some(RingError::BadCapacity)
        );
        let mut s3 = [0u8; 3];
        assert_eq!(
            SlotRing::new(&mut s3[..]).err(),
            Some(RingError::BadCapacity)
        );
        let mut s1 = [0u8; 1];
        assert_eq!(SlotRing::new(&mut s1[..]).unwrap().capacity(), 1);
    }

    /// `get(k)` borrows the k-th full slot past the front without releasing any, across
    /// the wrap point, and sees nothing beyond the committed slots.
    #[test]
    fn get_peeks_past_held_slots() {
        let mut st = [0u32; 4];
        let mut ring = SlotRing::new(&mut st[..]).unwrap();
        let (mut p, mut c) = ring.split();
        let mut next = 0u32;
        let mut expect = 0u32;
        for _ in 0..6 {
            // Fill what is free, peek every full slot, keep the newest one held.
            while let Some(s) = p.slot() {
                *s = next;
                next += 1;
                p.commit().unwrap();
            }
            for k in 0..4 {
                assert_eq!(c.get(k).copied(), Some(expect + k as u32));
            }
            assert!(c.get(4).is_none());
            *c.get(1).unwrap() += 100;
            assert_eq!(*c.get(1).unwrap(), expect + 101);
            c.release_n(3).unwrap();
            expect += 3;
            assert!(c.get(1).is_none(), "one slot stays held");
            assert_eq!(c.get(0).copied(), Some(expect));
        }
        assert!(c.get(usize::MAX).is_none());
    }

    #[test]
    fn in_place_round_trip_and_full_empty() {
        let mut st = [0u32; 4];
        let mut ring = SlotRing::new(&mut st[..]).unwrap();
        {
            let (mut p, mut c) = ring.split();
            assert!(c.front().is_none());
            assert_eq!(c.release(), Err(RingError::Empty));
            for round in 0..10u32 {
                for i in 0..4 {
                    let s = p.slot().unwrap();
                    assert_eq!(*s, 0, "consumer cleared it");
                    *s = round * 10 + i + 1;
                    p.commit().unwrap();
                }
                assert!(p.slot().is_none() && p.is_full());
                assert_eq!(p.commit(), Err(RingError::Full));
                assert_eq!((p.len(), c.len()), (4, 4));
                for i in 0..4 {
                    let s = c.front().unwrap();
                    assert_eq!(*s, round * 10 + i + 1);
                    *s = 0;
                    c.release().unwrap();
                }
                assert!(c.is_empty() && p.is_empty());
            }
            // Leave two full slots across a re-split.
            p.fill_with(|s| *s = 7).unwrap();
            p.fill_with(|s| *s = 8).unwrap();
        }
        assert_eq!(ring.len(), 2);
        let (mut p, mut c) = ring.split();
        assert_eq!(p.free_slots(), 2);
        assert_eq!(c.consume_with(core::mem::take), Some(7));
        assert_eq!(c.consume_with(core::mem::take), Some(8));
        assert_eq!(c.consume_with(|s| *s), None);
    }

    #[test]
    fn bulk_slices_wrap() {
        let mut st = [0u32; 8];
        let mut ring = SlotRing::new(&mut st[..]).unwrap();
        let (mut p, mut c) = ring.split();
        for v in 1..=5 {
            p.fill_with(|s| *s = v).unwrap();
        }
        c.release_n(3).unwrap(); // slots 0..3 back (not cleared: values stay)
        let (a, b) = p.free_slices();
        assert_eq!((a.len(), b.len()), (3, 3)); // counters 5..8 and 8..11
        assert_eq!(b, &[1, 2, 3]);
        for (i, s) in a.iter_mut().chain(b.iter_mut()).enumerate() {
            *s = 10 + i as u32;
        }
        assert_eq!(p.commit_n(7), Err(RingError::Full));
        p.commit_n(6).unwrap();
        assert_eq!(p.commit_n(0), Ok(()));
        let (a, b) = c.full_slices();
        assert_eq!(a, &[4, 5, 10, 11, 12]);
        assert_eq!(b, &[13, 14, 15]);
        assert_eq!(c.release_n(9), Err(RingError::Empty));
        c.release_n(8).unwrap();
        assert!(c.is_empty());
        assert_eq!(p.free_slots(), 8);
    }

    #[test]
    fn zero_sized_slots() {
        let mut st = [(); 2];
        let mut ring = SlotRing::new(&mut st[..]).unwrap();
        let (mut p, mut c) = ring.split();
        assert!(p.fill_with(|_| ()).is_some() && p.fill_with(|_| ()).is_some());
        assert!(p.slot().is_none());
        assert!(c.consume_with(|_| ()).is_some());
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn halves_are_send() {
        fn is_send<X: Send>() {}
        is_send::<SlotProducer<'_, [u64; 8]>>();
        is_send::<SlotConsumer<'_, [u64; 8]>>();
        is_send::<SlotRing<'_, [u64; 8]>>();
        is_send::<SlotProducer<'_, crate::Burst<'_, 64>>>();
    }
}
