//! [`AfpacketBurst`]: the receive burst of the AF_PACKET engine. Its packets are frames in
//! the queue's mapped ring (zero copy), or, with header-data split, two pool buffers.

use std::sync::Arc;

use rtdaq_core::traits::{RxBurst, Segment};
use rtdaq_core::{Buf, PacketMeta, QueueId};

use crate::ring::{FrameRef, RxRing};

/// Where a received packet's bytes are.
enum Body<'a> {
    /// A frame in the ring, referenced (its block stays out of the kernel's hands).
    Ring(FrameRef),
    /// Header-data split: copies in a header and a data buffer.
    Split(Buf<'a>, Buf<'a>),
}

struct RxPacket<'a> {
    body: Body<'a>,
    meta: PacketMeta,
}

/// Up to `N` frames received on one AF_PACKET RX queue.
///
/// Without header-data split each packet is one segment: the whole frame, from its Ethernet
/// header, **in the kernel ring** (no copy). Each frame holds a reference on its ring block;
/// the block goes back to the kernel when every burst holding frames of it has been cleared
/// or dropped, on whatever thread. With header-data split each packet is two segments in the
/// queue's header and data pools.
///
/// Built by [`RxQueue::new_burst`](rtdaq_core::traits::RxQueue::new_burst), filled by
/// [`RxQueue::poll`](rtdaq_core::traits::RxQueue::poll), emptied by
/// [`RxBurst::clear`] or `Drop`. `Send`: it may be cleared on a consumer thread. Never
/// allocates after construction.
pub struct AfpacketBurst<'a, const N: usize> {
    ring: Arc<RxRing>,
    queue: QueueId,
    pkts: heapless::Vec<RxPacket<'a>, N>,
}

impl<'a, const N: usize> AfpacketBurst<'a, N> {
    /// An empty burst bound to `ring`. Cold path.
    pub(crate) fn new(ring: Arc<RxRing>, queue: QueueId) -> Self {
        AfpacketBurst {
            ring,
            queue,
            pkts: heapless::Vec::new(),
        }
    }

    /// Makes the burst one of `ring`'s: an empty burst of another queue is rebound (no
    /// allocation: an `Arc` clone); a non-empty one is refused (false).
    #[inline]
    pub(crate) fn bind(&mut self, ring: &Arc<RxRing>, queue: QueueId) -> bool {
        if Arc::ptr_eq(&self.ring, ring) {
            return true;
        }
        if !self.pkts.is_empty() {
            return false;
        }
        self.ring = Arc::clone(ring);
        self.queue = queue;
        true
    }

    /// Appends a ring frame; gives the reference back when the burst is full.
    #[inline]
    pub(crate) fn push_ring(&mut self, frame: FrameRef, meta: PacketMeta) -> Result<(), FrameRef> {
        self.pkts
            .push(RxPacket {
                body: Body::Ring(frame),
                meta,
            })
            .map_err(|p| match p.body {
                Body::Ring(f) => f,
                Body::Split(..) => unreachable!("pushed a ring frame"),
            })
    }

    /// Appends a split packet; `false` (buffers returned) when the burst is full.
    #[inline]
    pub(crate) fn push_split(&mut self, hdr: Buf<'a>, data: Buf<'a>, meta: PacketMeta) -> bool {
        self.pkts
            .push(RxPacket {
                body: Body::Split(hdr, data),
                meta,
            })
            .is_ok()
    }

    /// The queue the packets came from.
    #[inline]
    pub fn queue(&self) -> QueueId {
        self.queue
    }

    /// Most packets a burst holds (`N`).
    #[inline]
    pub const fn capacity(&self) -> usize {
        N
    }

    /// True when the burst holds `N` packets.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.pkts.is_full()
    }

    /// The whole frame of packet `i` when it is one segment in the ring (no header-data
    /// split); `None` out of range or for a split packet.
    #[inline]
    pub fn frame(&self, i: usize) -> Option<&[u8]> {
        match &self.pkts.get(i)?.body {
            Body::Ring(f) => Some(self.ring.frame(f)),
            Body::Split(..) => None,
        }
    }

    /// Sum of the packets' lengths.
    #[inline]
    pub fn total_bytes(&self) -> u64 {
        self.pkts.iter().map(|p| u64::from(p.meta.len)).sum()
    }
}

impl<const N: usize> RxBurst for AfpacketBurst<'_, N> {
    #[inline]
    fn len(&self) -> usize {
        self.pkts.len()
    }

    /// 1 (a ring frame) or 2 (header-data split).
    ///
    /// # Panics
    /// When `pkt` is out of range.
    #[inline]
    fn segments(&self, pkt: usize) -> usize {
        match self.pkts[pkt].body {
            Body::Ring(_) => 1,
            Body::Split(..) => 2,
        }
    }

    /// # Panics
    /// When `pkt` or `seg` is out of range.
    #[inline]
    fn segment(&self, pkt: usize, seg: usize) -> Segment<'_> {
        match (&self.pkts[pkt].body, seg) {
            (Body::Ring(f), 0) => Segment::Host(self.ring.frame(f)),
            (Body::Split(h, _), 0) => h.as_segment(),
            (Body::Split(_, d), 1) => d.as_segment(),
            _ => panic!("segment {seg} of packet {pkt} out of range"),
        }
    }

    /// # Panics
    /// When `pkt` is out of range.
    #[inline]
    fn meta(&self, pkt: usize) -> PacketMeta {
        self.pkts[pkt].meta
    }

    /// Releases every frame (blocks go back to the kernel when no burst references them any
    /// more) and buffer, and keeps the burst. Never blocks, never allocates.
    #[inline]
    fn clear(&mut self) {
        while let Some(p) = self.pkts.pop() {
            if let Body::Ring(f) = p.body {
                self.ring.release(f);
            }
        }
    }
}

impl<const N: usize> Drop for AfpacketBurst<'_, N> {
    fn drop(&mut self) {
        RxBurst::clear(self);
    }
}

impl<const N: usize> std::fmt::Debug for AfpacketBurst<'_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfpacketBurst")
            .field("queue", &self.queue)
            .field("len", &self.pkts.len())
            .field("bytes", &self.total_bytes())
            .finish()
    }
}
