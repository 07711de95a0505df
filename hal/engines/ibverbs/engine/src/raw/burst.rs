//! [`RawBurst`]: the receive burst of the raw path. A packet is either a whole pool buffer
//! (one frame per receive) or a frame inside a striding RQ buffer shared with other frames
//! (a stride offset into a pool slot the queue lent to the NIC), zero copy both ways.

use std::sync::Arc;

use rtdaq_core::pool::ReturnBatch;
use rtdaq_core::traits::{RxBurst, Segment};
use rtdaq_core::{Buf, PacketMeta, QueueId};

use super::striding::StrideShared;
use crate::roce::MAX_BATCH;

/// Where a received frame's bytes are.
enum Body {
    /// One frame per receive: the pool buffer itself.
    Buf(Buf<'static>),
    /// A frame in striding RQ buffer `entry` at byte `off`; holds one reference on the
    /// buffer (released when the packet leaves the burst).
    Stride {
        /// Buffer (entry) index in the queue's [`StrideShared`].
        entry: u32,
        /// Byte offset of the frame in the buffer (stride index × stride size).
        off: u32,
    },
}

struct RawPacket {
    body: Body,
    meta: PacketMeta,
}

/// Up to [`MAX_BATCH`] frames received on one raw RX queue.
///
/// Each packet is one segment, the whole frame from its Ethernet header. With the striding
/// RQ several frames share one pool slot: each holds a reference on it, and the slot goes
/// back to the NIC only when every burst holding one of its frames has been cleared or
/// dropped, on whatever thread (the I/O thread reposts it; see
/// [`StrideShared`]). Built by `RxQueue::new_burst`, filled by `RxQueue::poll`, emptied by
/// [`RxBurst::clear`] or `Drop`. `Send`. Never allocates after construction.
pub struct RawBurst {
    queue: QueueId,
    strides: Option<Arc<StrideShared>>,
    pkts: heapless::Vec<RawPacket, MAX_BATCH>,
}

impl RawBurst {
    /// An empty burst; `strides` is the queue's striding RQ buffers when it has them. Cold
    /// path.
    pub(crate) fn new(queue: QueueId, strides: Option<Arc<StrideShared>>) -> Self {
        RawBurst {
            queue,
            strides,
            pkts: heapless::Vec::new(),
        }
    }

    /// Makes the burst one of `shared`'s: an empty burst of another queue is rebound (an
    /// `Arc` clone, no allocation); a non-empty one is refused (false).
    #[inline]
    pub(crate) fn bind(&mut self, shared: &Arc<StrideShared>) -> bool {
        if self
            .strides
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, shared))
        {
            return true;
        }
        if !self.pkts.is_empty() {
            return false;
        }
        self.strides = Some(Arc::clone(shared));
        true
    }

    /// Free packet slots.
    #[inline]
    pub(crate) fn room(&self) -> usize {
        MAX_BATCH - self.pkts.len()
    }

    /// Appends a whole-buffer frame; gives the buffer back when the burst is full.
    #[inline]
    pub(crate) fn push_buf(
        &mut self,
        buf: Buf<'static>,
        meta: PacketMeta,
    ) -> Result<(), Buf<'static>> {
        self.pkts
            .push(RawPacket {
                body: Body::Buf(buf),
                meta,
            })
            .map_err(|p| match p.body {
                Body::Buf(b) => b,
                Body::Stride { .. } => unreachable!("pushed a buffer"),
            })
    }

    /// Appends a frame of striding buffer `entry` at `off` whose reference the caller took
    /// ([`StrideShared::acquire`]) and that belongs to the bound buffers; `false` when the
    /// burst is full (the caller releases the reference).
    #[inline]
    pub(crate) fn push_stride(&mut self, entry: u32, off: u32, meta: PacketMeta) -> bool {
        self.pkts
            .push(RawPacket {
                body: Body::Stride { entry, off },
                meta,
            })
            .is_ok()
    }

    /// The queue the frames came from.
    #[inline]
    pub fn queue(&self) -> QueueId {
        self.queue
    }

    /// True when packet `i` is a frame inside a striding RQ buffer (for tests and tools).
    pub fn is_stride_frame(&self, i: usize) -> bool {
        matches!(self.pkts.get(i).map(|p| &p.body), Some(Body::Stride { .. }))
    }

    /// Sum of the frames' lengths.
    #[inline]
    pub fn total_bytes(&self) -> u64 {
        self.pkts.iter().map(|p| u64::from(p.meta.len)).sum()
    }
}

impl RxBurst for RawBurst {
    #[inline]
    fn len(&self) -> usize {
        self.pkts.len()
    }

    /// Always 1: the whole frame.
    ///
    /// # Panics
    /// When `pkt` is out of range.
    #[inline]
    fn segments(&self, pkt: usize) -> usize {
        let _ = &self.pkts[pkt];
        1
    }

    /// `Segment::Host(frame)` for CPU memory, `Segment::Device` otherwise.
    ///
    /// # Panics
    /// When `pkt` or `seg` is out of range.
    #[inline]
    fn segment(&self, pkt: usize, seg: usize) -> Segment<'_> {
        assert_eq!(seg, 0, "segment {seg} of packet {pkt} out of range");
        let p = &self.pkts[pkt];
        match &p.body {
            Body::Buf(b) => b.as_segment(),
            Body::Stride { entry, off } => {
                let shared = self
                    .strides
                    .as_ref()
                    .expect("a stride frame in a burst bound to striding buffers");
                shared.frame(*entry, *off, p.meta.len)
            }
        }
    }

    /// # Panics
    /// When `pkt` is out of range.
    #[inline]
    fn meta(&self, pkt: usize) -> PacketMeta {
        self.pkts[pkt].meta
    }

    /// Releases every frame (a striding buffer goes back to its queue when no burst holds
    /// a frame of it any more) and returns the whole buffers to their pools in bulk. Keeps
    /// the burst. Never blocks, never allocates.
    #[inline]
    fn clear(&mut self) {
        let mut ret = ReturnBatch::new();
        while let Some(p) = self.pkts.pop() {
            match p.body {
                Body::Buf(b) => ret.push(b),
                Body::Stride { entry, .. } => {
                    if let Some(s) = &self.strides {
                        s.release(entry);
                    }
                }
            }
        }
    }
}

impl Drop for RawBurst {
    fn drop(&mut self) {
        RxBurst::clear(self);
    }
}

impl std::fmt::Debug for RawBurst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawBurst")
            .field("queue", &self.queue)
            .field("len", &self.pkts.len())
            .field("bytes", &self.total_bytes())
            .field("striding", &self.strides.is_some())
            .finish()
    }
}
