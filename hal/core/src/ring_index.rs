//! The index bookkeeping shared by the SPSC rings `Ring` (moved values) and `SlotRing`
//! (in-place slots): the two free-running counters, the power-of-two mask, and each half's own
//! counter plus its cached copy of the other half's. It handles indices only, never slot
//! memory, so it has no `unsafe`; the rings own the slots and order their slot accesses
//! around [`HalfIndex::claim`] and [`HalfIndex::publish`].
//!
//! - `head` (next counter to read, written only by the consumer) and `tail` (next counter to
//!   write, written only by the producer) sit on their own cache lines ([`CachePadded`]); a
//!   slot index is `counter & mask`; `len = tail - head` (wrapping).
//! - A half owns the slots `pos..pos + claim(_)`: free ones for the producer, full ones for the
//!   consumer. `claim` reloads the other half's counter (`Acquire`) only when the cached copy
//!   shows fewer than wanted; `publish` hands slots over with one `Release` store. So every
//!   slot access of one half happens-before the other half takes the slot.
//!
//! The atomics come from the crate's shim (`loom`'s under `cfg(loom)`), so the loom models run
//! this code.

use crossbeam_utils::CachePadded;

use crate::error::RingError;
use crate::ring::sync::AtomicUsize;
use crate::ring::sync::Ordering::{Acquire, Release};

/// The shared counters of one SPSC ring.
pub(crate) struct RingIndex {
    /// Next counter to read. Written only by the consumer (`Release`), read by the producer.
    head: CachePadded<AtomicUsize>,
    /// Next counter to write. Written only by the producer (`Release`), read by the consumer.
    tail: CachePadded<AtomicUsize>,
    /// `capacity - 1`.
    mask: usize,
}

impl RingIndex {
    /// Empty counters for `cap` slots; [`RingError::BadCapacity`] unless `cap` is a non-zero
    /// power of two.
    pub(crate) fn new(cap: usize) -> Result<Self, RingError> {
        if !cap.is_power_of_two() {
            return Err(RingError::BadCapacity);
        }
        Ok(RingIndex {
            head: CachePadded::new(AtomicUsize::new(0)),
            tail: CachePadded::new(AtomicUsize::new(0)),
            mask: cap - 1,
        })
    }

    /// `capacity - 1`.
    #[inline]
    pub(crate) fn mask(&self) -> usize {
        self.mask
    }

    /// Number of slots (a power of two).
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Number of full slots (`tail - head`, both loaded with `Acquire`).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.tail
            .load(Acquire)
            .wrapping_sub(self.head.load(Acquire))
    }

    /// The counters `(head, tail)`: the full slots are `head..tail`.
    pub(crate) fn bounds(&self) -> (usize, usize) {
        (self.head.load(Acquire), self.tail.load(Acquire))
    }

    /// Marks every slot free and returns the counters `(head, tail)` of the slots that were
    /// full. The `&mut` borrow means no half is alive.
    pub(crate) fn empty_out(&mut self) -> (usize, usize) {
        let (head, tail) = self.bounds();
        self.head.store(tail, Release);
        (head, tail)
    }

    /// The producer's and the consumer's index halves, starting from the current counters.
    /// Callers take `&mut` of their ring first, so there is one half of each kind.
    pub(crate) fn split(&self) -> (ProducerIndex<'_>, ConsumerIndex<'_>) {
        let (head, tail) = self.bounds();
        (
            HalfIndex {
                index: self,
                mask: self.mask,
                pos: tail,
                other: head,
            },
            HalfIndex {
                index: self,
                mask: self.mask,
                pos: head,
                other: tail,
            },
        )
    }
}

/// The producer's half: it owns the free slots and advances `tail`.
pub(crate) type ProducerIndex<'r> = HalfIndex<'r, true>;
/// The consumer's half: it owns the full slots and advances `head`.
pub(crate) type ConsumerIndex<'r> = HalfIndex<'r, false>;

/// One half's view of a [`RingIndex`]: its own counter (the shared one always equals it
/// between calls) and the last value of the other half's counter it loaded. `PRODUCER`
/// selects the side at compile time, so each method compiles to that side's code only.
pub(crate) struct HalfIndex<'r, const PRODUCER: bool> {
    index: &'r RingIndex,
    /// `capacity - 1` (a copy, so the hot path does not reload it through `index`).
    mask: usize,
    /// Our own counter: `tail` for the producer, `head` for the consumer.
    pos: usize,
    /// Cached copy of the other half's counter.
    other: usize,
}

impl<const PRODUCER: bool> HalfIndex<'_, PRODUCER> {
    /// The shared counter this half writes.
    #[inline(always)]
    fn own_counter(&self) -> &AtomicUsize {
        if PRODUCER {
            &self.index.tail
        } else {
            &self.index.head
        }
    }

    /// The shared counter the other half writes.
    #[inline(always)]
    fn other_counter(&self) -> &AtomicUsize {
        if PRODUCER {
            &self.index.head
        } else {
            &self.index.tail
        }
    }

    /// Slots this half owns, given the other half's counter `other`.
    #[inline(always)]
    fn owned(&self, other: usize) -> usize {
        if PRODUCER {
            self.mask + 1 - self.pos.wrapping_sub(other)
        } else {
            other.wrapping_sub(self.pos)
        }
    }

    /// The counter of the first slot this half owns (the next to fill or to take).
    #[inline(always)]
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// `capacity - 1`.
    #[inline(always)]
    pub(crate) fn mask(&self) -> usize {
        self.mask
    }

    /// Number of slots.
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Slots this half owns (producer: free, consumer: full), `pos..pos + n`, reloading the
    /// other half's counter only when the cached copy shows fewer than `want`.
    #[inline(always)]
    pub(crate) fn claim(&mut self, want: usize) -> usize {
        let n = self.owned(self.other);
        if n >= want {
            return n;
        }
        // Acquire: pairs with the other half's `Release` of its counter, so its accesses to
        // the slots it handed over happen-before ours (the producer's writes are visible to
        // the consumer; the consumer is done with a slot before the producer reuses it).
        self.other = self.other_counter().load(Acquire);
        self.owned(self.other)
    }

    /// Hands the `n` slots `pos..pos + n` (owned, as `claim` said) to the other half with
    /// one `Release` store.
    #[inline(always)]
    pub(crate) fn publish(&mut self, n: usize) {
        self.pos = self.pos.wrapping_add(n);
        // Release: every access to those slots happens-before the other half's `Acquire`
        // load that lets it take them.
        self.own_counter().store(self.pos, Release);
    }

    /// Full slots right now: exact for this half's own publishes, the other half's may be in
    /// flight (reloads the other half's counter, without updating the cache).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        let other = self.other_counter().load(Acquire);
        if PRODUCER {
            self.pos.wrapping_sub(other)
        } else {
            other.wrapping_sub(self.pos)
        }
    }
}

/// `Debug` for a ring or half type `$ty<'_, T>`: its capacity and current length.
macro_rules! debug_len {
    ($ty:ident) => {
        impl<T> core::fmt::Debug for $ty<'_, T> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("capacity", &self.capacity())
                    .field("len", &self.len())
                    .finish()
            }
        }
    };
}

/// The cold-path queries of a ring type `$ty<'_, T>` with a field `index: RingIndex`
/// (`capacity`, `len`, `is_empty`, `is_full`, with the given docs) and its `Debug`.
macro_rules! ring_queries {
    ($ty:ident, len = $len:literal, is_empty = $empty:literal, is_full = $full:literal) => {
        impl<T> $ty<'_, T> {
            /// Number of slots (a power of two).
            #[inline]
            pub fn capacity(&self) -> usize {
                self.index.capacity()
            }

            #[doc = $len]
            #[inline]
            pub fn len(&self) -> usize {
                self.index.len()
            }

            #[doc = $empty]
            #[inline]
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            #[doc = $full]
            #[inline]
            pub fn is_full(&self) -> bool {
                self.len() == self.capacity()
            }
        }
        $crate::ring_index::debug_len!($ty);
    };
}

/// The queries of a half type `$ty<'_, T>` with a field `idx: HalfIndex` (`len` and
/// `is_empty` with the given docs, `capacity`; a producer also gets `free_slots` and
/// `is_full`) and its `Debug`.
macro_rules! half_queries {
    (producer $ty:ident, len = $len:literal, is_empty = $empty:literal) => {
        $crate::ring_index::half_queries!(@common $ty, $len, $empty);
        impl<T> $ty<'_, T> {
            /// Free slots right now (reloads the consumer's index).
            #[inline]
            pub fn free_slots(&mut self) -> usize {
                self.idx.claim(usize::MAX)
            }

            /// True when no slot is free (reloads the consumer's index).
            #[inline]
            pub fn is_full(&mut self) -> bool {
                self.idx.claim(1) == 0
            }
        }
    };
    (consumer $ty:ident, len = $len:literal, is_empty = $empty:literal) => {
        $crate::ring_index::half_queries!(@common $ty, $len, $empty);
    };
    (@common $ty:ident, $len:literal, $empty:literal) => {
        impl<T> $ty<'_, T> {
            #[doc = $len]
            #[inline]
            pub fn len(&self) -> usize {
                self.idx.len()
            }

            #[doc = $empty]
            #[inline]
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// Number of slots.
            #[inline]
            pub fn capacity(&self) -> usize {
                self.idx.capacity()
            }
        }
        $crate::ring_index::debug_len!($ty);
    };
}

pub(crate) use {debug_len, half_queries, ring_queries};

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn capacity_checked() {
        assert!(RingIndex::new(0).is_err() && RingIndex::new(6).is_err());
        assert_eq!(RingIndex::new(1).unwrap().capacity(), 1);
        assert_eq!(RingIndex::new(8).unwrap().mask(), 7);
    }

    #[test]
    fn halves_reload_only_when_the_cache_is_short() {
        let mut index = RingIndex::new(4).unwrap();
        {
            let (mut p, mut c) = index.split();
            assert_eq!((p.claim(1), c.claim(1)), (4, 0));
            p.publish(3);
            assert_eq!((p.pos(), p.len(), c.len()), (3, 3, 3));
            // The consumer's cache still says empty: it reloads for one.
            assert_eq!(c.claim(1), 3);
            c.publish(2);
            // The producer's cache (head = 0) shows one free slot: enough for one, no reload.
            assert_eq!(p.claim(1), 1);
            // Wanting more reloads and sees the two released slots.
            assert_eq!(p.claim(2), 3);
            p.publish(3);
            assert_eq!((p.claim(usize::MAX), c.claim(usize::MAX)), (0, 4));
            assert_eq!(c.pos() & c.mask(), 2);
        }
        assert_eq!(index.len(), 4);
        assert_eq!(index.bounds(), (2, 6));
        assert_eq!(index.empty_out(), (2, 6));
        assert_eq!((index.len(), index.bounds()), (0, (6, 6)));
        let (mut p, c) = index.split();
        assert_eq!((p.pos(), c.pos(), p.claim(4), c.len()), (6, 6, 4, 0));
    }
}
