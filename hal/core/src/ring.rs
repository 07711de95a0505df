//! Fixed-capacity lock-free single-producer single-consumer (SPSC) ring.
//!
//! A [`Ring`] runs over **caller-provided storage** (`&mut [MaybeUninit<T>]` whose length is a
//! non-zero power of two), so its depth is a runtime value (from the deployment config) and it
//! never touches the heap. [`RingStorage`] is a const-constructible owned storage for a ring
//! that lives in a `static` or on the stack.
//!
//! [`Ring::split`] hands out one [`Producer`] and one [`Consumer`]; both are `Send` (when
//! `T: Send`) and move to two threads (scoped threads, or a `'static` ring).
//!
//! ```
//! use rtdaq_core::ring::{Ring, RingStorage};
//! let mut storage = RingStorage::<u64, 8>::new();
//! let mut ring = Ring::new(storage.as_uninit_mut()).unwrap();
//! let (mut tx, mut rx) = ring.split();
//! std::thread::scope(|s| {
//!     s.spawn(move || for i in 0..100u64 { while tx.push(i).is_err() { std::hint::spin_loop() } });
//!     let mut next = 0;
//!     while next < 100 { if let Some(v) = rx.pop() { assert_eq!(v, next); next += 1 } }
//! });
//! ```
//!
//! # Design
//! - `head` (next slot to read, written only by the consumer) and `tail` (next slot to write,
//!   written only by the producer) are free-running `usize` counters, each on its own cache line
//!   ([`CachePadded`](crossbeam_utils::CachePadded)); a slot index is `counter & mask`;
//!   `len = tail - head` (wrapping). This index bookkeeping (counters, cached copies, their
//!   `Acquire`/`Release`) is the crate-private `ring_index` core, shared with
//!   [`SlotRing`](crate::slot_ring::SlotRing); this module only moves items in and out of slots.
//! - Each half keeps its own index locally and a *cached* copy of the other side's index; it
//!   reloads the shared atomic only when the cached value says "full" (producer) or "empty"
//!   (consumer). In steady state each side touches the other's cache line once per lap, not per
//!   item.
//! - Ordering: the producer writes slot data, then publishes `tail` with `Release`; the consumer
//!   loads `tail` with `Acquire` before reading the slots. Symmetrically the consumer moves items
//!   out, then publishes `head` with `Release`; the producer loads `head` with `Acquire` before it
//!   overwrites those slots. This is what aarch64 needs; x86_64 gets plain moves.
//! - Bulk operations move up to `n` items and publish the index **once**.
//! - Items still in the ring when it is dropped are dropped exactly once.
//!
//! Every hot-path method (`push*`, `pop*`, `peek`, `len`) never blocks, never allocates, never
//! logs and never panics.
//!
//! Under `cfg(loom)` the atomics come from `loom` and every slot access is reported to a loom
//! `UnsafeCell` shadow, so `tests/ring_loom.rs` checks the real code for data races.
#![allow(unsafe_code)]

use core::cell::UnsafeCell;
use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::{self, NonNull};

use crate::error::RingError;
use crate::ring_index::{half_queries, ring_queries, ConsumerIndex, ProducerIndex, RingIndex};

/// Atomics shim: `core` atomics normally, `loom` atomics under `cfg(loom)` (ring and pool).
pub(crate) mod sync {
    #[cfg(loom)]
    pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

    #[cfg(not(loom))]
    pub(crate) use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
}

/// Loom-only record of slot accesses, so loom can see races on the (raw) slot memory.
#[cfg(loom)]
struct Shadow(std::boxed::Box<[loom::cell::UnsafeCell<()>]>);

#[cfg(loom)]
extern crate std;

#[cfg(loom)]
impl Shadow {
    fn new(n: usize) -> Self {
        Shadow((0..n).map(|_| loom::cell::UnsafeCell::new(())).collect())
    }
    fn write(&self, i: usize) {
        self.0[i].with_mut(|_| ());
    }
    fn read(&self, i: usize) {
        self.0[i].with(|_| ());
    }
}

/// A fixed-capacity lock-free SPSC ring over caller-provided storage.
///
/// Use [`split`](Ring::split) to get the [`Producer`] and [`Consumer`] halves. The ring itself
/// only offers cold-path queries and [`clear`](Ring::clear).
pub struct Ring<'s, T> {
    /// The `head`/`tail` counters and the mask.
    index: RingIndex,
    /// Start of the caller's storage (`capacity` slots).
    buf: NonNull<MaybeUninit<T>>,
    #[cfg(loom)]
    shadow: Shadow,
    _storage: PhantomData<&'s mut [MaybeUninit<T>]>,
    _owns: PhantomData<T>,
}

// SAFETY: the ring owns the `T`s it holds and the exclusive borrow of its storage; moving it to
// another thread moves those `T`s, which `T: Send` allows.
unsafe impl<T: Send> Send for Ring<'_, T> {}

impl<'s, T> Ring<'s, T> {
    /// Builds an empty ring over `storage`.
    ///
    /// Returns [`RingError::BadCapacity`] unless `storage.len()` is a non-zero power of two.
    /// Cold path (under `cfg(loom)` only, it allocates a shadow for the model checker).
    pub fn new(storage: &'s mut [MaybeUninit<T>]) -> Result<Self, RingError> {
        let index = RingIndex::new(storage.len())?;
        Ok(Ring {
            #[cfg(loom)]
            shadow: Shadow::new(index.capacity()),
            index,
            buf: NonNull::from(storage).cast(),
            _storage: PhantomData,
            _owns: PhantomData,
        })
    }

    /// Splits the ring into its producer and consumer halves.
    ///
    /// The `&mut` borrow guarantees there is only ever one producer and one consumer. After both
    /// halves are dropped the ring may be split again; items in flight stay in the ring.
    pub fn split(&mut self) -> (Producer<'_, T>, Consumer<'_, T>) {
        let (pidx, cidx) = self.index.split();
        (
            Producer {
                idx: pidx,
                buf: self.buf,
                #[cfg(loom)]
                shadow: &self.shadow,
                _ring: PhantomData,
            },
            Consumer {
                idx: cidx,
                buf: self.buf,
                #[cfg(loom)]
                shadow: &self.shadow,
                _ring: PhantomData,
            },
        )
    }

    /// Drops every item in the ring and leaves it empty. Cold path.
    pub fn clear(&mut self) {
        // Mark empty first: if a `T::drop` panics the rest leak instead of dropping twice.
        let (head, tail) = self.index.empty_out();
        self.drop_range(head, tail);
    }

    /// Drops the items between counters `head` and `tail`; needs exclusive access.
    fn drop_range(&mut self, head: usize, tail: usize) {
        if !core::mem::needs_drop::<T>() {
            return;
        }
        let mask = self.index.mask();
        let n = tail.wrapping_sub(head);
        let start = head & mask;
        let first = n.min(self.capacity() - start);
        #[cfg(loom)]
        for i in 0..n {
            self.shadow.write((start + i) & mask);
        }
        // SAFETY: `&mut self` means no half is alive; slots `head..tail` (mod capacity) hold
        // initialised items that nobody else owns (the producer wrote them and published `tail`,
        // the consumer never moved them out). The two ranges are in bounds and disjoint. They
        // are never dropped again: `clear` moved `head` past them first, and after `Drop` the
        // ring is gone.
        unsafe {
            let base = self.buf.as_ptr().cast::<T>();
            ptr::drop_in_place(ptr::slice_from_raw_parts_mut(base.add(start), first));
            ptr::drop_in_place(ptr::slice_from_raw_parts_mut(base, n - first));
        }
    }
}

impl<T> Drop for Ring<'_, T> {
    fn drop(&mut self) {
        let (head, tail) = self.index.bounds();
        self.drop_range(head, tail);
    }
}

/// Copies `n` items between `ring` slots starting at counter `pos` and a linear buffer,
/// splitting at the wrap point. `to_ring` selects the direction.
///
/// # Safety
/// `n <= capacity`; `lin` is valid for `n` items in the needed direction; the ring slots are
/// owned by the caller's half (free for the producer, filled for the consumer).
#[inline(always)]
unsafe fn copy_wrapping<T>(
    buf: NonNull<MaybeUninit<T>>,
    mask: usize,
    pos: usize,
    lin: *mut T,
    n: usize,
    to_ring: bool,
) {
    let start = pos & mask;
    let first = n.min(mask + 1 - start);
    let base = buf.as_ptr().cast::<T>();
    // SAFETY: forwarded from the caller: both ranges are in bounds, and ring slots never overlap
    // the caller's linear buffer (which is not part of the ring storage we exclusively borrow).
    unsafe {
        if to_ring {
            ptr::copy_nonoverlapping(lin, base.add(start), first);
            ptr::copy_nonoverlapping(lin.add(first), base, n - first);
        } else {
            ptr::copy_nonoverlapping(base.add(start), lin, first);
            ptr::copy_nonoverlapping(base, lin.add(first), n - first);
        }
    }
}

/// The producing half of a [`Ring`]. `Send` when `T: Send`; not `Clone`.
pub struct Producer<'r, T> {
    /// Our `tail` and cached copy of the consumer's `head`.
    idx: ProducerIndex<'r>,
    buf: NonNull<MaybeUninit<T>>,
    #[cfg(loom)]
    shadow: &'r Shadow,
    /// Borrows the ring (its `T`s and storage).
    _ring: PhantomData<&'r Ring<'r, T>>,
}

// SAFETY: the producer only writes slots it owns (free ones) and publishes them with `Release`;
// the shared state it touches through `&Ring` is atomics. Items it pushes are received on the
// consumer's thread, hence `T: Send`.
unsafe impl<T: Send> Send for Producer<'_, T> {}

impl<T> Producer<'_, T> {
    /// Moves `item` into the slot of counter `pos`.
    ///
    /// # Safety
    /// `pos` must be in `tail..tail + free` (a free slot, not yet published).
    #[inline(always)]
    unsafe fn write_at(&self, pos: usize, item: T) {
        let i = pos & self.idx.mask();
        #[cfg(loom)]
        self.shadow.write(i);
        // SAFETY: by the contract `pos` is a free slot only the producer touches; it holds no
        // initialised item (moved out or never written), so nothing is overwritten or leaked.
        unsafe { self.buf.as_ptr().add(i).write(MaybeUninit::new(item)) }
    }

    /// Appends one item; gives it back when the ring is full.
    /// Never blocks, never allocates.
    #[inline]
    pub fn push(&mut self, item: T) -> Result<(), T> {
        if self.idx.claim(1) == 0 {
            return Err(item);
        }
        // SAFETY: one slot is free, `tail` is the first free one.
        unsafe { self.write_at(self.idx.pos(), item) };
        self.idx.publish(1);
        Ok(())
    }

    /// Best-effort bulk push: moves `min(free slots, items)` items and publishes them **once**.
    /// Returns how many were pushed.
    ///
    /// At most as many items as there are free slots are pulled from the iterator, so passing
    /// `&mut iter` leaves the rest in `iter`. If the iterator panics, the items it already
    /// yielded are leaked (never published, never dropped twice).
    /// Never blocks, never allocates (unless the iterator does).
    #[inline]
    pub fn push_bulk<I: IntoIterator<Item = T>>(&mut self, items: I) -> usize {
        let iter = items.into_iter();
        // Reload the consumer's index only when the cached one may not cover every item.
        let want = iter.size_hint().1.unwrap_or(usize::MAX).max(1);
        let free = self.idx.claim(want);
        let mut n = 0;
        for item in iter.take(free) {
            // SAFETY: `n < free`, so `tail + n` is a free, unpublished slot.
            unsafe { self.write_at(self.idx.pos().wrapping_add(n), item) };
            n += 1;
        }
        if n > 0 {
            self.idx.publish(n);
        }
        n
    }

    /// All-or-nothing bulk push: pushes every item of `items` (one publish) or, when fewer than
    /// `items.len()` slots are free, pushes nothing and gives the iterator back untouched.
    ///
    /// An `ExactSizeIterator` that reports the wrong length is not trusted: at most `len()`
    /// items are taken and only the ones actually yielded are published.
    /// Never blocks, never allocates (unless the iterator does).
    #[inline]
    pub fn push_bulk_exact<I>(&mut self, items: I) -> Result<(), I::IntoIter>
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: ExactSizeIterator,
    {
        let iter = items.into_iter();
        let want = iter.len();
        if self.idx.claim(want) < want {
            return Err(iter);
        }
        let mut n = 0;
        for item in iter.take(want) {
            // SAFETY: `n < want <= free`, so `tail + n` is a free, unpublished slot.
            unsafe { self.write_at(self.idx.pos().wrapping_add(n), item) };
            n += 1;
        }
        if n > 0 {
            self.idx.publish(n);
        }
        Ok(())
    }

    /// Best-effort bulk copy of `Copy` items (at most two `memcpy`s, one publish).
    /// Returns how many were pushed. Never blocks, never allocates.
    #[inline]
    pub fn push_slice(&mut self, items: &[T]) -> usize
    where
        T: Copy,
    {
        let n = items.len().min(self.idx.claim(items.len()));
        self.copy_in(items, n);
        n
    }

    /// All-or-nothing bulk copy of `Copy` items: [`RingError::Full`] (and nothing pushed) when
    /// fewer than `items.len()` slots are free. Never blocks, never allocates.
    #[inline]
    pub fn push_slice_exact(&mut self, items: &[T]) -> Result<(), RingError>
    where
        T: Copy,
    {
        if self.idx.claim(items.len()) < items.len() {
            return Err(RingError::Full);
        }
        self.copy_in(items, items.len());
        Ok(())
    }

    #[inline(always)]
    fn copy_in(&mut self, items: &[T], n: usize)
    where
        T: Copy,
    {
        if n == 0 {
            return;
        }
        let (tail, mask) = (self.idx.pos(), self.idx.mask());
        #[cfg(loom)]
        for i in 0..n {
            self.shadow.write(tail.wrapping_add(i) & mask);
        }
        // SAFETY: `n <= free`, so slots `tail..tail + n` are free and owned by the producer;
        // `items` is valid for reading `n <= items.len()` items and lies outside the ring storage
        // (which we borrow exclusively). `T: Copy`, so a bitwise copy is a valid copy.
        unsafe { copy_wrapping(self.buf, mask, tail, items.as_ptr().cast_mut(), n, true) };
        self.idx.publish(n);
    }
}

/// The consuming half of a [`Ring`]. `Send` when `T: Send`; not `Clone`.
pub struct Consumer<'r, T> {
    /// Our `head` and cached copy of the producer's `tail`.
    idx: ConsumerIndex<'r>,
    buf: NonNull<MaybeUninit<T>>,
    #[cfg(loom)]
    shadow: &'r Shadow,
    /// Borrows the ring (its `T`s and storage).
    _ring: PhantomData<&'r Ring<'r, T>>,
}

// SAFETY: the consumer only reads slots the producer published (`Acquire` of `tail`) and frees
// them with `Release` of `head`; shared state is atomics. It receives `T`s sent from the
// producer's thread, hence `T: Send`.
unsafe impl<T: Send> Send for Consumer<'_, T> {}

impl<T> Consumer<'_, T> {
    /// Slot index of the oldest item, if any (reloads the producer's `tail` when the cached
    /// copy says empty; `Acquire`, so the producer's slot writes are visible).
    #[inline(always)]
    fn front_index(&mut self) -> Option<usize> {
        if self.idx.claim(1) == 0 {
            return None;
        }
        let i = self.idx.pos() & self.idx.mask();
        #[cfg(loom)]
        self.shadow.read(i);
        Some(i)
    }

    /// Removes the oldest item. Never blocks, never allocates.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        let i = self.front_index()?;
        // SAFETY: `head < tail_cache <= tail`: the producer initialised this slot and published
        // it (our `Acquire` saw it); we move the item out and then release the slot, so it is
        // read exactly once and never dropped by the ring.
        let item = unsafe { self.buf.as_ptr().add(i).read().assume_init() };
        self.idx.publish(1);
        Some(item)
    }

    /// The oldest item, without removing it. Never blocks, never allocates.
    #[inline]
    pub fn peek(&mut self) -> Option<&T> {
        let i = self.front_index()?;
        // SAFETY: as in `pop`, the slot is initialised and published; the producer cannot reuse
        // it until we move `head`, which needs `&mut self`, which the returned borrow blocks.
        Some(unsafe { (*self.buf.as_ptr().add(i)).assume_init_ref() })
    }

    /// Best-effort bulk pop into uninitialised memory: moves up to `out.len()` items (at most two
    /// `memcpy`s, one publish) and returns how many; `out[..n]` is then initialised and owned by
    /// the caller (who must drop or `assume_init` them, or they leak).
    /// Never blocks, never allocates.
    #[inline]
    pub fn pop_into(&mut self, out: &mut [MaybeUninit<T>]) -> usize {
        let n = out.len().min(self.idx.claim(out.len()));
        if n == 0 {
            return 0;
        }
        let (head, mask) = (self.idx.pos(), self.idx.mask());
        #[cfg(loom)]
        for i in 0..n {
            self.shadow.read(head.wrapping_add(i) & mask);
        }
        // SAFETY: `n <= available`, so slots `head..head + n` are initialised and published; we
        // move them (bitwise) into `out`, which is valid for `n` writes and outside the ring
        // storage, then release the slots so they are never read or dropped again by the ring.
        unsafe { copy_wrapping(self.buf, mask, head, out.as_mut_ptr().cast::<T>(), n, false) };
        self.idx.publish(n);
        n
    }

    /// Best-effort bulk pop appending to `out`: moves up to `out`'s spare capacity (one
    /// publish) and returns how many. Never blocks, never allocates.
    #[inline]
    pub fn pop_bulk<const N: usize>(&mut self, out: &mut heapless::Vec<T, N>) -> usize {
        let len = out.len();
        let n = self.pop_into(out.spare_capacity_mut());
        // SAFETY: `pop_into` initialised exactly `out[len..len + n]`, within capacity.
        unsafe { out.set_len(len + n) };
        n
    }

    /// Best-effort bulk pop of `Copy` items into `out`; returns how many were written.
    /// Never blocks, never allocates.
    #[inline]
    pub fn pop_slice(&mut self, out: &mut [T]) -> usize
    where
        T: Copy,
    {
        // SAFETY: `T: Copy` has no drop glue and `MaybeUninit<T>` has the layout of `T`;
        // `pop_into` only writes fully initialised `T`s, so `out` stays initialised.
        let out = unsafe { &mut *(out as *mut [T] as *mut [MaybeUninit<T>]) };
        self.pop_into(out)
    }

    /// All-or-nothing bulk pop of `Copy` items: fills all of `out`, or returns
    /// [`RingError::Empty`] and pops nothing when fewer items are in the ring.
    /// Never blocks, never allocates.
    #[inline]
    pub fn pop_slice_exact(&mut self, out: &mut [T]) -> Result<(), RingError>
    where
        T: Copy,
    {
        if self.idx.claim(out.len()) < out.len() {
            return Err(RingError::Empty);
        }
        self.pop_slice(out);
        Ok(())
    }
}

// The index-derived queries (`len`, `capacity`, ...) and `Debug`, shared with
// `slot_ring` through the `ring_index` macros.
ring_queries!(
    Ring,
    len = "Number of items in the ring.",
    is_empty = "True when the ring holds no item.",
    is_full = "True when every slot is used."
);

half_queries!(
    producer Producer,
    len = "Items in the ring (exact for the producer's own pushes; pops may be in flight).",
    is_empty = "True when the ring holds nothing right now."
);

half_queries!(
    consumer Consumer,
    len = "Items in the ring right now (reloads the producer's index).",
    is_empty = "True when the ring holds nothing right now."
);

/// Owned, const-constructible storage of `N` slots for a [`Ring`] (`N` must be a non-zero power
/// of two; checked at compile time).
///
/// On the stack: `Ring::new(storage.as_uninit_mut())`. In a `static`:
/// ```
/// use rtdaq_core::ring::{Ring, RingStorage};
/// static STORAGE: RingStorage<u64, 1024> = RingStorage::new();
/// let mut ring: Ring<'static, u64> = Ring::new(STORAGE.take().unwrap()).unwrap();
/// assert!(STORAGE.take().is_none()); // handed out once only
/// # let (mut tx, mut rx) = ring.split();
/// # tx.push(7).unwrap();
/// # assert_eq!(rx.pop(), Some(7));
/// ```
pub struct RingStorage<T, const N: usize> {
    slots: UnsafeCell<[MaybeUninit<T>; N]>,
    /// Set once [`take`](Self::take) has handed out the slots (core atomic even under loom:
    /// it must be const-constructible).
    taken: core::sync::atomic::AtomicBool,
}

// SAFETY: the only access through `&RingStorage` is `take`, which hands out the `&mut` slots at
// most once (atomic swap); the ring built on them may move `T`s across threads, hence `T: Send`.
unsafe impl<T: Send, const N: usize> Sync for RingStorage<T, N> {}

impl<T, const N: usize> RingStorage<T, N> {
    /// Empty storage. `const`, so it can initialise a `static`.
    pub const fn new() -> Self {
        const {
            assert!(
                N.is_power_of_two(),
                "RingStorage: N must be a non-zero power of two"
            )
        };
        RingStorage {
            slots: UnsafeCell::new([const { MaybeUninit::uninit() }; N]),
            taken: core::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The slots, for [`Ring::new`] (exclusive borrow: stack or owned use).
    pub fn as_uninit_mut(&mut self) -> &mut [MaybeUninit<T>] {
        self.slots.get_mut()
    }

    /// Hands out the slots once through a shared reference (for a `static`); `None` afterwards.
    #[allow(clippy::mut_from_ref)] // sound: the `taken` flag makes this `&mut` unique
    pub fn take(&self) -> Option<&mut [MaybeUninit<T>]> {
        if self.taken.swap(true, core::sync::atomic::Ordering::AcqRel) {
            return None;
        }
        // SAFETY: the swap above returns `false` exactly once for this storage, so this is the
        // only reference ever derived from the cell through `&self`; `as_uninit_mut` needs
        // `&mut self`, which cannot coexist with the returned borrow.
        Some(unsafe { &mut *self.slots.get() })
    }
}

impl<T, const N: usize> Default for RingStorage<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, const N: usize> fmt::Debug for RingStorage<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RingStorage").field("slots", &N).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn bad_capacity() {
        let mut s0: [MaybeUninit<u8>; 0] = [];
        assert_eq!(Ring::new(&mut s0[..]).err(), Some(RingError::BadCapacity));
        let mut s3 = [MaybeUninit::<u8>::uninit(); 3];
        assert_eq!(Ring::new(&mut s3[..]).err(), Some(RingError::BadCapacity));
        let mut s1 = [MaybeUninit::<u8>::uninit(); 1];
        assert_eq!(Ring::new(&mut s1[..]).unwrap().capacity(), 1);
    }

    #[test]
    fn push_pop_wrap_and_full() {
        let mut st = RingStorage::<u32, 4>::new();
        let mut ring = Ring::new(st.as_uninit_mut()).unwrap();
        let (mut p, mut c) = ring.split();
        for round in 0..10u32 {
            for i in 0..4 {
                assert_eq!(p.push(round * 10 + i), Ok(()));
            }
            assert_eq!(p.push(99), Err(99));
            assert!(p.is_full());
            assert_eq!(c.peek(), Some(&(round * 10)));
            for i in 0..4 {
                assert_eq!(c.pop(), Some(round * 10 + i));
            }
            assert_eq!(c.pop(), None);
        }
    }

    #[test]
    fn bulk_ops() {
        let mut st = RingStorage::<u32, 8>::new();
        let mut ring = Ring::new(st.as_uninit_mut()).unwrap();
        {
            let (mut p, mut c) = ring.split();
            assert_eq!(p.push_slice(&[1, 2, 3, 4, 5]), 5);
            let mut out = [0u32; 3];
            assert_eq!(c.pop_slice(&mut out), 3);
            assert_eq!(out, [1, 2, 3]);
            // wraps: 2 left + 6 = 8
            assert_eq!(p.push_slice(&[6, 7, 8, 9, 10, 11, 12]), 6);
            assert_eq!(p.push_slice_exact(&[1]), Err(RingError::Full));
            assert!(p.push_bulk_exact([1u32]).is_err());
            let mut v: heapless::Vec<u32, 16> = heapless::Vec::new();
            assert_eq!(c.pop_bulk(&mut v), 8);
            assert_eq!(&v[..], &[4, 5, 6, 7, 8, 9, 10, 11]);
            let mut it = 100..120u32;
            assert_eq!(p.push_bulk(&mut it), 8);
            assert_eq!(it.next(), Some(108));
            let mut out = [0u32; 9];
            assert_eq!(c.pop_slice_exact(&mut out), Err(RingError::Empty));
            assert_eq!(c.pop_slice_exact(&mut out[..8]), Ok(()));
            assert_eq!(out[7], 107);
        }
        assert!(ring.is_empty());
    }

    #[test]
    fn clear_and_drop_drop_items() {
        use std::rc::Rc;
        let tracker = Rc::new(());
        let mut st = RingStorage::<Rc<()>, 4>::new();
        {
            let mut ring = Ring::new(st.as_uninit_mut()).unwrap();
            {
                let (mut p, mut c) = ring.split();
                for _ in 0..3 {
                    p.push(tracker.clone()).unwrap();
                }
                drop(c.pop());
            }
            assert_eq!(Rc::strong_count(&tracker), 3);
            ring.clear();
            assert_eq!(Rc::strong_count(&tracker), 1);
            let (mut p, _c) = ring.split();
            assert_eq!(p.push_bulk(core::iter::repeat_n(tracker.clone(), 4)), 4);
            assert_eq!(Rc::strong_count(&tracker), 5);
        }
        assert_eq!(Rc::strong_count(&tracker), 1);
    }

    #[test]
    fn zero_sized_items() {
        let mut st = [MaybeUninit::<()>::uninit(); 4];
        let mut ring = Ring::new(&mut st[..]).unwrap();
        let (mut p, mut c) = ring.split();
        assert_eq!(p.push_bulk(core::iter::repeat_n((), 9)), 4);
        assert_eq!(c.pop(), Some(()));
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn halves_are_send() {
        fn is_send<X: Send>() {}
        is_send::<Producer<'_, u64>>();
        is_send::<Consumer<'_, u64>>();
        is_send::<Ring<'_, u64>>();
        fn is_sync<X: Sync>() {}
        is_sync::<RingStorage<u64, 2>>();
    }
}
