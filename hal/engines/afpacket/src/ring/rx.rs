//! [`RxRing`]: a `TPACKET_V3` RX ring with per-block reference counts.
//!
//! ## Block life cycle
//! Each block has one `AtomicU32` in user memory next to the kernel's `block_status`:
//!
//! ```text
//!        kernel fills, sets TP_STATUS_USER
//! IDLE ───────────────────────────────────▶ (ready)
//!  ▲        try_take (I/O thread): refs = 1 (its BlockHold)
//!  │                    │
//!  │                    ▼
//!  │       held: refs = 1 + frames published into bursts
//!  │          publish: +1 (I/O thread, while it holds the block)
//!  │          release of a FrameRef / the BlockHold: −1 (any thread)
//!  │                    │ last release (1 → 0)
//!  │                    ▼
//!  └── refs = IDLE ◀── block_status = TP_STATUS_KERNEL (Release)
//! ```
//!
//! The last releaser writes `TP_STATUS_KERNEL` first and only then marks the block `IDLE`,
//! so the I/O thread, which takes a block only when it is `IDLE` **and** the kernel marked it
//! `TP_STATUS_USER`, can never mistake a block still being returned (or still referenced from
//! the previous lap of the ring) for a fresh one. Increments happen only while the I/O thread
//! holds its own reference, so the count cannot reach 0 early.
//!
//! ## Mutation
//! The only write user space makes into a block is re-inserting the VLAN tag the kernel
//! stripped (12 bytes moved 4 bytes down, 4 written), and only ahead of the hold's *cursor*:
//! every published frame lies below the cursor, so no slice handed out can see a write.

use std::sync::atomic::{fence, AtomicU32, Ordering::*};

use crate::sys::consts::{
    tpacket3_hdr, BLOCK_DESC_LEN, TPACKET3_HDR_LEN, TP_STATUS_KERNEL, TP_STATUS_USER,
};
use crate::sys::{MmapRing, PacketSocket};

/// Reference count of a block not held by user space.
const IDLE: u32 = u32::MAX;

/// Offsets in `struct tpacket_block_desc` (`version`, `offset_to_priv`, then `tpacket_hdr_v1`).
const BLOCK_STATUS: usize = 8;
const BLOCK_NUM_PKTS: usize = 12;
const BLOCK_FIRST_PKT: usize = 16;

/// One block's reference count, alone on its cache line (the I/O thread increments, consumer
/// threads decrement).
#[repr(align(64))]
struct BlockRefs(AtomicU32);

/// A `TPACKET_V3` RX ring: the socket, its mapping, and a reference count per block.
/// Shared (`Arc`) by the RX queue and its bursts.
pub(crate) struct RxRing {
    // Field order = drop order: unmap before the socket closes.
    map: MmapRing,
    sock: PacketSocket,
    block_size: usize,
    refs: Box<[BlockRefs]>,
    id: u32,
}

impl std::fmt::Debug for RxRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RxRing")
            .field("blocks", &self.refs.len())
            .field("block_size", &self.block_size)
            .finish()
    }
}

/// The I/O thread's hold on a block it is reading. Unique per [`RxRing::try_take`]; not
/// `Clone`; returned with [`RxRing::release_block`].
#[derive(Debug)]
pub(crate) struct BlockHold {
    block: u32,
    ring: u32,
    /// Lowest block offset not yet published (writes happen only at or above it).
    cursor: u32,
    /// Frames the kernel put in the block.
    pub(crate) num_pkts: u32,
    /// Offset of the first frame header.
    pub(crate) first: u32,
    /// `block_status` when taken (`TP_STATUS_USER`, plus `TP_STATUS_LOSING` when the kernel
    /// had dropped frames since the last `PACKET_STATISTICS` read, `TP_STATUS_BLK_TMO` when
    /// the block was retired by its timeout).
    pub(crate) status: u32,
}

impl BlockHold {
    /// Index of the block in the ring.
    #[inline]
    pub(crate) fn block(&self) -> usize {
        self.block as usize
    }
}

/// A reference to one frame's bytes in a held block: keeps the block from going back to the
/// kernel. Not `Clone`; give it back with [`RxRing::release`] (dropping it instead leaks the
/// block, which stalls the ring but is memory-safe).
#[derive(Debug)]
pub(crate) struct FrameRef {
    ring: u32,
    block: u32,
    start: u32,
    len: u32,
}

/// The fields of one `tpacket3_hdr` the engine uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameHdr {
    /// Offset of this header in the block.
    pub(crate) off: u32,
    /// Offset from this header to the next one (0 for the last frame).
    pub(crate) next: u32,
    /// Timestamp, seconds.
    pub(crate) sec: u32,
    /// Timestamp, nanoseconds.
    pub(crate) nsec: u32,
    /// Bytes captured.
    pub(crate) snaplen: u32,
    /// Bytes on the wire.
    pub(crate) len: u32,
    /// `TP_STATUS_*` bits of the frame.
    pub(crate) status: u32,
    /// Offset of the Ethernet header from this header.
    pub(crate) mac: u16,
    /// Stripped VLAN TCI (valid with `TP_STATUS_VLAN_VALID`).
    pub(crate) vlan_tci: u16,
    /// Stripped VLAN TPID (valid with `TP_STATUS_VLAN_TPID_VALID`).
    pub(crate) vlan_tpid: u16,
}

impl RxRing {
    /// Wraps the mapped ring of `sock` (`block_count` blocks of `block_size` bytes). Cold path.
    ///
    /// # Panics
    /// When the mapping is smaller than the geometry.
    pub(crate) fn new(
        sock: PacketSocket,
        map: MmapRing,
        block_size: usize,
        block_count: usize,
    ) -> RxRing {
        assert!(block_size
            .checked_mul(block_count)
            .is_some_and(|n| n <= map.len()));
        RxRing {
            map,
            sock,
            block_size,
            refs: (0..block_count)
                .map(|_| BlockRefs(AtomicU32::new(IDLE)))
                .collect(),
            id: super::next_ring_id(),
        }
    }

    /// The socket.
    #[inline]
    pub(crate) fn sock(&self) -> &PacketSocket {
        &self.sock
    }

    /// Blocks in the ring.
    #[inline]
    pub(crate) fn block_count(&self) -> usize {
        self.refs.len()
    }

    /// Bytes per block.
    #[inline]
    pub(crate) fn block_size(&self) -> usize {
        self.block_size
    }

    #[inline]
    fn status(&self, block: usize) -> &AtomicU32 {
        self.map.u32_at(block * self.block_size + BLOCK_STATUS)
    }

    /// Blocks user space holds right now (handed over by the kernel, not yet returned).
    /// A statistic: other threads may release meanwhile.
    pub(crate) fn held_blocks(&self) -> usize {
        self.refs
            .iter()
            .filter(|r| r.0.load(Relaxed) != IDLE)
            .count()
    }

    /// True when [`try_take`](Self::try_take) would take `block` now. Never allocates.
    #[inline]
    pub(crate) fn ready(&self, block: usize) -> bool {
        self.refs[block].0.load(Acquire) == IDLE
            && self.status(block).load(Acquire) & TP_STATUS_USER != 0
    }

    /// Takes block `block` when the kernel has handed it over and nothing from its previous
    /// lap is still referenced. Never blocks, never allocates.
    #[inline]
    pub(crate) fn try_take(&self, block: usize) -> Option<BlockHold> {
        let refs = &self.refs[block].0;
        if refs.load(Acquire) != IDLE {
            return None;
        }
        let status = self.status(block).load(Acquire);
        if status & TP_STATUS_USER == 0 {
            return None;
        }
        refs.store(1, Relaxed);
        let base = block * self.block_size;
        // SAFETY: the block is user-owned (TP_STATUS_USER, read with Acquire after the
        // kernel's write barrier) and the kernel does not touch it until we write
        // TP_STATUS_KERNEL; reading plain integers is valid for any bit pattern.
        let (num_pkts, first) = unsafe {
            (
                self.map.read::<u32>(base + BLOCK_NUM_PKTS),
                self.map.read::<u32>(base + BLOCK_FIRST_PKT),
            )
        };
        Some(BlockHold {
            block: block as u32,
            ring: self.id,
            cursor: BLOCK_DESC_LEN as u32,
            num_pkts,
            first,
            status,
        })
    }

    /// The header of the frame at block offset `off`, `None` when it does not lie inside the
    /// block (a corrupt offset). Never allocates.
    #[inline]
    pub(crate) fn frame_hdr(&self, hold: &BlockHold, off: u32) -> Option<FrameHdr> {
        self.check_hold(hold);
        let o = off as usize;
        if o < BLOCK_DESC_LEN || o.checked_add(TPACKET3_HDR_LEN)? > self.block_size {
            return None;
        }
        // SAFETY: inside a user-owned block (`hold`); user space never writes frame headers
        // (the VLAN move writes only between a header's end and its frame data), and any bit
        // pattern is a valid `tpacket3_hdr`.
        let h: tpacket3_hdr = unsafe { self.map.read(hold.block() * self.block_size + o) };
        Some(FrameHdr {
            off,
            next: h.tp_next_offset,
            sec: h.tp_sec,
            nsec: h.tp_nsec,
            snaplen: h.tp_snaplen,
            len: h.tp_len,
            status: h.tp_status,
            mac: h.tp_mac,
            vlan_tci: h.hv1.tp_vlan_tci as u16,
            vlan_tpid: h.hv1.tp_vlan_tpid,
        })
    }

    /// True when `start..start + len` lies inside a block.
    #[inline]
    fn in_block(&self, start: u32, len: u32) -> bool {
        (start as usize) >= BLOCK_DESC_LEN
            && (start as usize)
                .checked_add(len as usize)
                .is_some_and(|e| e <= self.block_size)
    }

    /// The bytes `start..start + len` of the held block, `None` when outside it. Borrowed
    /// from the hold, so they cannot outlive it or a later write through it.
    #[inline]
    pub(crate) fn bytes<'h>(
        &'h self,
        hold: &'h BlockHold,
        start: u32,
        len: u32,
    ) -> Option<&'h [u8]> {
        self.check_hold(hold);
        if !self.in_block(start, len) {
            return None;
        }
        // SAFETY: inside a block user space holds (`hold` keeps it from the kernel for the
        // borrow); user writes need `&mut BlockHold`, impossible while this borrow lives.
        Some(unsafe {
            self.map.bytes(
                hold.block() * self.block_size + start as usize,
                len as usize,
            )
        })
    }

    /// Re-inserts a VLAN tag the kernel stripped in front of the frame whose Ethernet header
    /// is at block offset `mac`: moves the two MAC addresses 4 bytes down and writes
    /// `tpid`/`tci` after them, so the frame starts at `mac - 4`. False (nothing written) when
    /// there is no room above the cursor or the header is outside the block. Never allocates.
    #[inline]
    pub(crate) fn insert_vlan(&self, hold: &mut BlockHold, mac: u32, tpid: u16, tci: u16) -> bool {
        self.check_hold(hold);
        let Some(start) = mac.checked_sub(4) else {
            return false;
        };
        if start < hold.cursor || !self.in_block(start, 16) {
            return false;
        }
        let base = hold.block() * self.block_size;
        // SAFETY: `start..start + 16` is inside the held block and at or above the cursor,
        // so no published frame (all below the cursor) and no live slice (they borrow the
        // hold, which is `&mut` here) covers it; the kernel does not touch a user block.
        unsafe {
            self.map
                .copy_within(base + mac as usize, base + start as usize, 12);
            let tag = self.map.bytes_mut(base + start as usize + 12, 4);
            tag[..2].copy_from_slice(&tpid.to_be_bytes());
            tag[2..].copy_from_slice(&tci.to_be_bytes());
        }
        true
    }

    /// Publishes the frame `start..start + len` of the held block: takes a reference for it
    /// and moves the cursor past it. `None` when the range is outside the block or below the
    /// cursor (already published). Never allocates.
    #[inline]
    pub(crate) fn publish(&self, hold: &mut BlockHold, start: u32, len: u32) -> Option<FrameRef> {
        self.check_hold(hold);
        if start < hold.cursor || !self.in_block(start, len) {
            return None;
        }
        // The hold's own reference keeps the count ≥ 1 here: a plain increment suffices.
        self.refs[hold.block()].0.fetch_add(1, Relaxed);
        hold.cursor = start + len;
        Some(FrameRef {
            ring: self.id,
            block: hold.block,
            start,
            len,
        })
    }

    /// The bytes of a published frame. Never allocates.
    ///
    /// # Panics
    /// When `frame` belongs to another ring (a caller bug).
    #[inline]
    pub(crate) fn frame(&self, frame: &FrameRef) -> &[u8] {
        assert_eq!(frame.ring, self.id, "FrameRef used with another ring");
        // SAFETY: `frame` holds a reference on its block, so the block stays user-owned while
        // `frame` (borrowed here) lives; its range was checked at publish and lies below the
        // cursor, where user space never writes.
        unsafe {
            self.map.bytes(
                frame.block as usize * self.block_size + frame.start as usize,
                frame.len as usize,
            )
        }
    }

    /// Gives a frame reference back (any thread). Never blocks, never allocates.
    ///
    /// # Panics
    /// When `frame` belongs to another ring (a caller bug).
    #[inline]
    pub(crate) fn release(&self, frame: FrameRef) {
        assert_eq!(frame.ring, self.id, "FrameRef released to another ring");
        self.unref(frame.block as usize);
    }

    /// Gives the I/O thread's hold back (the block returns to the kernel once no frame of it
    /// is referenced any more). Never blocks, never allocates.
    #[inline]
    pub(crate) fn release_block(&self, hold: BlockHold) {
        self.check_hold(&hold);
        self.unref(hold.block());
    }

    #[inline]
    fn check_hold(&self, hold: &BlockHold) {
        assert_eq!(hold.ring, self.id, "BlockHold used with another ring");
    }

    /// Drops one reference; the last one returns the block to the kernel, then marks it
    /// `IDLE` (in that order, see the module docs).
    #[inline]
    fn unref(&self, block: usize) {
        let refs = &self.refs[block].0;
        if refs.fetch_sub(1, Release) == 1 {
            // Every access made under the other references happens-before this point.
            fence(Acquire);
            self.status(block).store(TP_STATUS_KERNEL, Release);
            refs.store(IDLE, Release);
        }
    }
}
