//! The four AF_XDP rings (fill, completion, RX, TX) as safe single-owner types over the
//! socket's shared mappings, mirroring `xsk.h`'s inline functions.
//!
//! Each ring is a power-of-two array of entries plus a producer and a consumer index (free
//! running `u32`s) and a flags word, all in memory shared with the kernel. The side we own
//! keeps cached copies; the other side's index is read with `Acquire` and ours published
//! with `Release`, the same pairing the kernel uses (`smp_load_acquire` /
//! `smp_store_release`), so entry contents written before a publish are visible after the
//! matching acquire.
//!
//! Every method here is O(1) or O(n) in the entries touched, never blocks, never allocates
//! and never logs.

use std::io;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use rtdaq_netsys::map::SharedMap;

/// An entry type of a ring: `u64` frame addresses (fill, completion) or descriptors (RX, TX).
pub(crate) trait Entry: Copy {}
impl Entry for u64 {}
impl Entry for libc::xdp_desc {}

/// The parts of a ring both directions share.
#[derive(Debug)]
struct Raw<T: Entry> {
    /// Kept for its `Drop` (unmaps the ring).
    _map: SharedMap,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    entries: NonNull<T>,
    mask: u32,
    size: u32,
}

// SAFETY: the mapping is plain shared memory (`SharedMap` is `Send`); the pointers all
// point into it, the ring owns it, and who may touch which part is decided by the ring
// protocol (one owner per ring).
unsafe impl<T: Entry> Send for Raw<T> {}

impl<T: Entry> Raw<T> {
    /// Maps the ring of `size` entries whose offsets are `off`, at page offset `pgoff` of
    /// `fd`. Cold path.
    fn map(
        fd: BorrowedFd<'_>,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: i64,
    ) -> io::Result<Self> {
        if !size.is_power_of_two() {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        let map = SharedMap::new(fd, len, pgoff, true)?;
        let base = map.ptr();
        let at = |o: u64| -> io::Result<NonNull<u8>> {
            if o as usize + 4 > len {
                return Err(io::Error::from(io::ErrorKind::InvalidData));
            }
            // SAFETY: `o < len`, inside the mapping.
            Ok(unsafe { base.add(o as usize) })
        };
        Ok(Raw {
            producer: at(off.producer)?.cast(),
            consumer: at(off.consumer)?.cast(),
            flags: at(off.flags)?.cast(),
            entries: at(off.desc)?.cast(),
            _map: map,
            mask: size - 1,
            size,
        })
    }

    #[inline(always)]
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: a 4-aligned `u32` inside the live mapping (kernel ABI), only ever accessed
        // atomically.
        unsafe { self.producer.as_ref() }
    }

    #[inline(always)]
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as `producer`.
        unsafe { self.consumer.as_ref() }
    }

    #[inline(always)]
    fn flags(&self) -> &AtomicU32 {
        // SAFETY: as `producer`.
        unsafe { self.flags.as_ref() }
    }

    #[inline(always)]
    fn slot(&self, idx: u32) -> *mut T {
        // SAFETY: `idx & mask < size`, so the offset stays inside the mapped entry array.
        unsafe { self.entries.as_ptr().add((idx & self.mask) as usize) }
    }
}

/// The side of a ring we produce into (fill, TX). Owned by one thread at a time.
#[derive(Debug)]
pub(crate) struct ProdRing<T: Entry> {
    raw: Raw<T>,
    /// Our producer index (published up to here).
    prod: u32,
    /// Cached consumer index + size (so `cons - prod` is the free room).
    cons_plus_size: u32,
}

impl<T: Entry> ProdRing<T> {
    /// Maps a producer ring. Cold path.
    pub(crate) fn map(
        fd: BorrowedFd<'_>,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: i64,
    ) -> io::Result<Self> {
        let raw = Raw::map(fd, off, size, pgoff)?;
        let prod = raw.producer().load(Ordering::Relaxed);
        let cons = raw.consumer().load(Ordering::Acquire);
        Ok(ProdRing {
            cons_plus_size: cons.wrapping_add(raw.size),
            prod,
            raw,
        })
    }

    /// Free entries (refreshing the consumer index when fewer than `want` are known).
    #[inline]
    pub(crate) fn free(&mut self, want: u32) -> u32 {
        let free = self.cons_plus_size.wrapping_sub(self.prod);
        if free >= want {
            return free;
        }
        self.cons_plus_size = self
            .raw
            .consumer()
            .load(Ordering::Acquire)
            .wrapping_add(self.raw.size);
        self.cons_plus_size.wrapping_sub(self.prod)
    }

    /// Entries published but not yet consumed by the kernel (fresh read).
    #[inline]
    pub(crate) fn outstanding(&self) -> u32 {
        self.prod
            .wrapping_sub(self.raw.consumer().load(Ordering::Acquire))
    }

    /// Writes `v` at `n` entries past the producer index (not yet published); false (and
    /// nothing written) when that entry is not known to be free (see [`free`](Self::free)).
    #[inline]
    pub(crate) fn write(&mut self, n: u32, v: T) -> bool {
        if n >= self.cons_plus_size.wrapping_sub(self.prod) {
            return false;
        }
        // SAFETY: the slot is inside the mapping and free (between our producer index and
        // the kernel's consumer index + size, checked above), so the kernel does not read it
        // until we publish it.
        unsafe { self.raw.slot(self.prod.wrapping_add(n)).write(v) };
        true
    }

    /// Publishes `n` written entries (`Release`).
    #[inline]
    pub(crate) fn submit(&mut self, n: u32) {
        self.prod = self.prod.wrapping_add(n);
        self.raw.producer().store(self.prod, Ordering::Release);
    }

    /// True when the kernel asks to be woken (`XDP_RING_NEED_WAKEUP`).
    #[inline]
    pub(crate) fn needs_wakeup(&self) -> bool {
        self.raw.flags().load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

/// The side of a ring we consume from (completion, RX). Owned by one thread at a time.
#[derive(Debug)]
pub(crate) struct ConsRing<T: Entry> {
    raw: Raw<T>,
    /// Our consumer index (released up to here).
    cons: u32,
    /// Cached producer index.
    prod: u32,
}

impl<T: Entry> ConsRing<T> {
    /// Maps a consumer ring. Cold path.
    pub(crate) fn map(
        fd: BorrowedFd<'_>,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: i64,
    ) -> io::Result<Self> {
        let raw = Raw::map(fd, off, size, pgoff)?;
        let cons = raw.consumer().load(Ordering::Relaxed);
        let prod = raw.producer().load(Ordering::Acquire);
        Ok(ConsRing { cons, prod, raw })
    }

    /// Ring capacity.
    #[inline]
    pub(crate) fn size(&self) -> u32 {
        self.raw.size
    }

    /// Entries ready to read, at most `max` (refreshing the producer index when none is
    /// known).
    #[inline]
    pub(crate) fn available(&mut self, max: u32) -> u32 {
        let mut n = self.prod.wrapping_sub(self.cons);
        if n == 0 {
            self.prod = self.raw.producer().load(Ordering::Acquire);
            n = self.prod.wrapping_sub(self.cons);
        }
        n.min(max)
    }

    /// Reloads the producer index (`Acquire`) even when entries are known to be published,
    /// and returns how many are: for a reader that found the last known entry to be part of
    /// an unfinished frame.
    #[inline]
    pub(crate) fn refresh(&mut self) -> u32 {
        self.prod = self.raw.producer().load(Ordering::Acquire);
        self.prod.wrapping_sub(self.cons)
    }

    /// Entry `n` past the consumer index, `None` when it is not known to be published
    /// (see [`available`](Self::available)).
    #[inline]
    pub(crate) fn read(&self, n: u32) -> Option<T> {
        if n >= self.prod.wrapping_sub(self.cons) {
            return None;
        }
        // SAFETY: a slot the kernel published (between our consumer index and its producer
        // index, checked above and made visible by the `Acquire` load in `available`),
        // inside the mapping; the kernel does not write it until we release it.
        Some(unsafe { self.raw.slot(self.cons.wrapping_add(n)).read() })
    }

    /// Gives `n` read entries back to the kernel (`Release`).
    #[inline]
    pub(crate) fn release(&mut self, n: u32) {
        self.cons = self.cons.wrapping_add(n);
        self.raw.consumer().store(self.cons, Ordering::Release);
    }
}
