//! Which pool frames are lent to the kernel through one UMEM.
//!
//! A frame handed to the kernel (fill ring, TX ring) leaves its [`Buf`] behind
//! ([`Buf::into_raw`]) and comes back as a UMEM address (RX ring, completion ring). Turning
//! an address back into a `Buf` ([`BufferPool::buf_from_raw`]) is only sound for an index
//! that was given away and not yet taken back; this ledger keeps one bit per slot so that
//! rule is **checked**, not assumed: an address the kernel returns twice, or never got, is
//! refused instead of creating two owners of one slot.

use std::sync::atomic::{AtomicU64, Ordering};

use rtdaq_core::{Buf, BufferPool};

/// Lent-frame bitmap of one UMEM over one pool.
#[derive(Debug)]
pub(crate) struct Lent<'a> {
    pool: &'a BufferPool<'a>,
    bits: Box<[AtomicU64]>,
    slot: u64,
    base: u64,
}

impl<'a> Lent<'a> {
    /// An empty ledger for `pool`, whose slots are the UMEM's frames (frame `i` at UMEM
    /// offset `i × slot_size`). Cold path.
    pub(crate) fn new(pool: &'a BufferPool<'a>) -> Self {
        let words = pool.slot_count().div_ceil(64);
        Lent {
            pool,
            bits: (0..words).map(|_| AtomicU64::new(0)).collect(),
            slot: pool.slot_size() as u64,
            base: pool.base_addr(),
        }
    }

    /// The pool.
    #[inline]
    pub(crate) fn pool(&self) -> &'a BufferPool<'a> {
        self.pool
    }

    /// Gives `buf` (a buffer of this pool) to the kernel: records it and returns its UMEM
    /// offset. Never allocates.
    ///
    /// # Panics
    /// When `buf` belongs to another pool (an engine bug).
    #[inline]
    pub(crate) fn lend(&self, buf: Buf<'a>) -> u64 {
        assert!(
            std::ptr::eq(buf.pool(), self.pool),
            "AF_XDP: a buffer of another pool was lent to this UMEM"
        );
        let addr = buf.addr() - self.base;
        let idx = buf.into_raw();
        let (w, m) = (idx as usize / 64, 1u64 << (idx % 64));
        // AcqRel: pairs with `reclaim` on whichever thread takes the frame back.
        let prev = self.bits[w].fetch_or(m, Ordering::AcqRel);
        debug_assert!(prev & m == 0, "frame lent twice");
        addr
    }

    /// Takes back the frame containing UMEM offset `addr` with `used` bytes in use (counted
    /// from the frame start), or `None` when the address is outside the UMEM, `used` exceeds
    /// the frame, or the frame is not lent (each lent frame comes back once). Never
    /// allocates.
    #[inline]
    pub(crate) fn reclaim(&self, addr: u64, used: usize) -> Option<Buf<'a>> {
        let idx = addr / self.slot;
        if idx >= self.pool.slot_count() as u64 || used > self.pool.slot_size() {
            return None;
        }
        let idx = idx as u32;
        let (w, m) = (idx as usize / 64, 1u64 << (idx % 64));
        if self.bits[w].fetch_and(!m, Ordering::AcqRel) & m == 0 {
            return None;
        }
        // SAFETY: the bit was set, so `idx` came from `Buf::into_raw` on this pool (only
        // `lend` sets bits, and it asserts the pool) and has not been rebuilt since; this
        // atomic clear makes us its only rebuilder. `idx < slot_count`, `used <= slot_size`.
        Some(unsafe { self.pool.buf_from_raw(idx, used) })
    }

    /// Returns every frame still lent to the pool (teardown, after every socket of the
    /// UMEM is closed and the kernel can no longer touch the frames).
    pub(crate) fn reclaim_all(&self) {
        for (w, word) in self.bits.iter().enumerate() {
            let mut bits = word.swap(0, Ordering::AcqRel);
            while bits != 0 {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                let idx = (w * 64) as u32 + b;
                // SAFETY: as in `reclaim`: the bit was set and we cleared it atomically.
                drop(unsafe { self.pool.buf_from_raw(idx, 0) });
            }
        }
    }
}
