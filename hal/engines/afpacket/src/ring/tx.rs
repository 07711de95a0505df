//! [`TxRing`]: a `TPACKET_V2` TX ring whose slots are the transmit buffers, and
//! [`TxSlots`], the claim a TX burst holds on a run of them.
//!
//! ## Protocol
//! - A slot is **free** while its `tp_status` is `TP_STATUS_AVAILABLE` (or
//!   `TP_STATUS_WRONG_FORMAT`, a frame the kernel refused). The kernel sets
//!   `TP_STATUS_AVAILABLE` when it is done with a frame (the skb destructor), after its last
//!   access, so an `Acquire` load that sees it makes the slot ours.
//! - At most **one** [`TxSlots`] owns slots at a time (an atomic owner word holding its
//!   unique id). It claims free slots in ring order from the ring's `head` (the next slot to
//!   hand to the kernel) and only a contiguous run: the kernel sends in ring order and stops
//!   at the first slot not marked for sending, so there must never be a hole.
//! - [`TxSlots::submit`] writes each frame's length and `TP_STATUS_SEND_REQUEST` (`Release`)
//!   for the first `count` slots, advances `head` past them and gives up the claim; slots
//!   after `count` stay free for the next claim. Dropping a [`TxSlots`] gives its slots
//!   back untouched.
//!
//! While a [`TxSlots`] owns a slot, nobody else (kernel included) reads or writes it, which
//! is what makes [`TxSlots::data_mut`] sound.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use std::sync::Arc;

use crate::sys::consts::{
    TP_STATUS_AVAILABLE, TP_STATUS_SEND_REQUEST, TP_STATUS_WRONG_FORMAT, TX_DATA_OFFSET,
};
use crate::sys::{MmapRing, PacketSocket};

/// Offset of `tp_len` in a `tpacket2_hdr`.
const TP_LEN: usize = 4;

/// Source of claim ids (0 = unclaimed).
static NEXT_CLAIM_ID: AtomicU64 = AtomicU64::new(1);

/// A `TPACKET_V2` TX ring: the socket, its mapping and the claim state. Shared (`Arc`) by
/// the TX queue and its bursts.
pub(crate) struct TxRing {
    // Field order = drop order: unmap before the socket closes.
    map: MmapRing,
    sock: PacketSocket,
    frame_size: usize,
    frames_per_block: usize,
    block_size: usize,
    frames: usize,
    /// Id of the [`TxSlots`] owning slots, 0 = none.
    owner: AtomicU64,
    /// Next slot to hand to the kernel (written by the owner, read when claiming).
    head: AtomicU32,
}

impl std::fmt::Debug for TxRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxRing")
            .field("frames", &self.frames)
            .field("frame_size", &self.frame_size)
            .finish()
    }
}

impl TxRing {
    /// Wraps the mapped TX ring of `sock`: `frames` slots of `frame_size` bytes,
    /// `block_size / frame_size` per block. Cold path.
    ///
    /// # Panics
    /// When the geometry does not fit the mapping or a slot cannot hold its header.
    pub(crate) fn new(
        sock: PacketSocket,
        map: MmapRing,
        block_size: usize,
        frame_size: usize,
        frames: usize,
    ) -> TxRing {
        let frames_per_block = block_size / frame_size.max(1);
        assert!(frame_size > TX_DATA_OFFSET && frame_size % 16 == 0 && frames_per_block > 0);
        assert!(frames > 0 && frames.div_ceil(frames_per_block) * block_size <= map.len());
        TxRing {
            map,
            sock,
            frame_size,
            frames_per_block,
            block_size,
            frames,
            owner: AtomicU64::new(0),
            head: AtomicU32::new(0),
        }
    }

    /// The socket.
    #[inline]
    pub(crate) fn sock(&self) -> &PacketSocket {
        &self.sock
    }

    /// Slots in the ring.
    #[inline]
    pub(crate) fn frames(&self) -> usize {
        self.frames
    }

    /// Bytes a slot holds for frame data.
    #[inline]
    pub(crate) fn slot_capacity(&self) -> usize {
        self.frame_size - TX_DATA_OFFSET
    }

    #[inline]
    fn slot_offset(&self, slot: usize) -> usize {
        (slot / self.frames_per_block) * self.block_size
            + (slot % self.frames_per_block) * self.frame_size
    }

    #[inline]
    fn status(&self, slot: usize) -> &AtomicU32 {
        self.map.u32_at(self.slot_offset(slot))
    }

    /// True when the kernel is done with `slot` (its status is available or "wrong format").
    #[inline]
    fn is_free(&self, slot: usize) -> bool {
        let s = self.status(slot).load(Acquire);
        s == TP_STATUS_AVAILABLE || s & TP_STATUS_WRONG_FORMAT != 0
    }

    /// Slots the kernel still holds (queued for sending or being sent). Scans the ring: use
    /// it on cold paths only.
    pub(crate) fn in_flight(&self) -> usize {
        (0..self.frames).filter(|&s| !self.is_free(s)).count()
    }
}

/// A claim on a contiguous run of free TX slots, in ring order (see the module docs).
/// Owned by a TX burst; gives its slots back when dropped.
pub(crate) struct TxSlots {
    ring: Arc<TxRing>,
    id: u64,
    start: u32,
    len: u32,
}

impl std::fmt::Debug for TxSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxSlots")
            .field("start", &self.start)
            .field("len", &self.len)
            .finish()
    }
}

impl TxSlots {
    /// An empty claim on `ring`. Cold path.
    pub(crate) fn new(ring: Arc<TxRing>) -> TxSlots {
        TxSlots {
            ring,
            id: NEXT_CLAIM_ID.fetch_add(1, Relaxed),
            start: 0,
            len: 0,
        }
    }

    /// The ring.
    #[inline]
    pub(crate) fn ring(&self) -> &Arc<TxRing> {
        &self.ring
    }

    /// Adds up to `n` more free slots (the next ones in ring order); returns how many are
    /// held now. Fewer than asked: the kernel still holds the next slot (back-pressure), the
    /// ring is exhausted, or another claim owns the ring. Never blocks, never allocates.
    #[inline]
    pub(crate) fn extend(&mut self, n: usize) -> usize {
        let ring = &*self.ring;
        if self.len == 0 {
            match ring.owner.compare_exchange(0, self.id, Acquire, Relaxed) {
                Ok(_) => {}
                Err(o) if o == self.id => {}
                Err(_) => return 0,
            }
            self.start = ring.head.load(Relaxed);
        }
        let mut added = 0;
        while added < n && (self.len as usize) < ring.frames {
            let slot = (self.start as usize + self.len as usize) % ring.frames;
            if !ring.is_free(slot) {
                break;
            }
            self.len += 1;
            added += 1;
        }
        if self.len == 0 {
            // Nothing claimed: do not keep the ring.
            let _ = ring.owner.compare_exchange(self.id, 0, Release, Relaxed);
        }
        self.len as usize
    }

    #[inline]
    fn slot(&self, i: usize) -> usize {
        assert!(i < self.len as usize, "TX slot {i} of {}", self.len);
        (self.start as usize + i) % self.ring.frames
    }

    #[inline]
    fn data_offset(&self, i: usize) -> usize {
        self.ring.slot_offset(self.slot(i)) + TX_DATA_OFFSET
    }

    /// The data area of held slot `i` (its whole capacity), to write a frame into.
    ///
    /// # Panics
    /// When `i` is not a held slot.
    #[inline]
    pub(crate) fn data_mut(&mut self, i: usize) -> &mut [u8] {
        let off = self.data_offset(i);
        // SAFETY: slot `i` is owned by this claim (owner word = our id, status was free), so
        // neither the kernel nor another claim touches it; the slice borrows `self` mutably,
        // so it is the only reference until it ends.
        unsafe { self.ring.map.bytes_mut(off, self.ring.slot_capacity()) }
    }

    /// The first `len` bytes of held slot `i`.
    ///
    /// # Panics
    /// When `i` is not a held slot or `len` exceeds the capacity.
    #[inline]
    pub(crate) fn data(&self, i: usize, len: usize) -> &[u8] {
        assert!(len <= self.ring.slot_capacity());
        let off = self.data_offset(i);
        // SAFETY: as in `data_mut`; the shared borrow of `self` excludes `data_mut`.
        unsafe { self.ring.map.bytes(off, len) }
    }

    /// Copies the first `len` bytes of held slot `from` into held slot `to` (closing a gap
    /// left by a refused frame). Never allocates.
    ///
    /// # Panics
    /// When a slot is not held, `from == to`, or `len` exceeds the capacity.
    #[inline]
    pub(crate) fn move_frame(&mut self, from: usize, to: usize, len: usize) {
        assert!(from != to && len <= self.ring.slot_capacity());
        let (src, dst) = (self.data_offset(from), self.data_offset(to));
        // SAFETY: both slots are owned by this claim (see `data_mut`) and distinct, so the
        // ranges do not overlap and nobody else accesses them; `&mut self` excludes live
        // slices into them.
        unsafe { self.ring.map.copy_within(src, dst, len) }
    }

    /// Hands the first `lens.len()` held slots to the kernel, with these frame lengths, in
    /// ring order; gives the other held slots back and ends the claim. Returns the number
    /// submitted. Never allocates.
    ///
    /// # Panics
    /// When `lens` is longer than the held slots or a length exceeds the slot capacity.
    #[inline]
    pub(crate) fn submit(&mut self, lens: &[u32]) -> usize {
        self.submit_each(lens, |_| {})
    }

    /// [`submit`](Self::submit) one frame at a time: after each slot `i` is handed to the
    /// kernel, `each(i)` runs (a kick with that frame's own launch time), so every kick finds
    /// one new frame marked. Never allocates.
    ///
    /// # Panics
    /// As [`submit`](Self::submit).
    #[inline]
    pub(crate) fn submit_each(&mut self, lens: &[u32], mut each: impl FnMut(usize)) -> usize {
        assert!(lens.len() <= self.len as usize);
        let cap = self.ring.slot_capacity();
        for (i, &len) in lens.iter().enumerate() {
            assert!(len as usize <= cap);
            let off = self.ring.slot_offset(self.slot(i));
            // SAFETY: the slot header is owned by this claim until the status store below
            // hands the slot to the kernel.
            unsafe { self.ring.map.write_u32(off + TP_LEN, len) };
            self.ring
                .status(self.slot(i))
                .store(TP_STATUS_SEND_REQUEST, Release);
            each(i);
        }
        let n = lens.len();
        let head = (self.start as usize + n) % self.ring.frames;
        self.ring.head.store(head as u32, Relaxed);
        self.abandon();
        n
    }

    /// Gives every held slot back untouched and ends the claim. Never allocates.
    #[inline]
    pub(crate) fn abandon(&mut self) {
        self.len = 0;
        let _ = self
            .ring
            .owner
            .compare_exchange(self.id, 0, Release, Relaxed);
    }
}

impl Drop for TxSlots {
    fn drop(&mut self) {
        self.abandon();
    }
}
