//! [`RawBurst`]: the receive burst of the raw path. A packet is a whole pool buffer (one
//! frame per receive), two pool buffers (one frame per receive with header-data split: the
//! header buffer, then the data buffer, which may be GPU memory) or a frame inside a
//! striding RQ buffer shared with other frames (a stride offset into a pool slot the queue
//! lent to the NIC), zero copy in every case.

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
    /// One frame per receive with header-data split: segment 0 the header buffer (header
    /// pool), segment 1 the data buffer (data pool).
    Split {
        /// The first `hds_split` bytes (fewer for a shorter frame).
        header: Buf<'static>,
        /// The rest of the frame (possibly empty).
        data: Buf<'static>,
    },
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
/// Each packet is one segment, the whole frame from its Ethernet header, or two with
/// header-data split (the header buffer, then the data buffer). With the striding
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
                Body::Split { .. } | Body::Stride { .. } => unreachable!("pushed a buffer"),
            })
    }

    /// Appends a split frame (header buffer, data buffer; `meta.len` their sum); gives both
    /// buffers back when the burst is full.
    #[inline]
    pub(crate) fn push_split(
        &mut self,
        header: Buf<'static>,
        data: Buf<'static>,
        meta: PacketMeta,
    ) -> Result<(), (Buf<'static>, Buf<'static>)> {
        self.pkts
            .push(RawPacket {
                body: Body::Split { header, data },
                meta,
            })
            .map_err(|p| match p.body {
                Body::Split { header, data } => (header, data),
                Body::Buf(_) | Body::Stride { .. } => unreachable!("pushed a split frame"),
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

    /// 1 (the whole frame), or 2 with header-data split (header, data).
    ///
    /// # Panics
    /// When `pkt` is out of range.
    #[inline]
    fn segments(&self, pkt: usize) -> usize {
        match &self.pkts[pkt].body {
            Body::Split { .. } => 2,
            Body::Buf(_) | Body::Stride { .. } => 1,
        }
    }

    /// `Segment::Host(bytes)` for CPU memory, `Segment::Device` otherwise (the data segment
    /// of a split into GPU memory).
    ///
    /// # Panics
    /// When `pkt` or `seg` is out of range.
    #[inline]
    fn segment(&self, pkt: usize, seg: usize) -> Segment<'_> {
        let p = &self.pkts[pkt];
        match (&p.body, seg) {
            (Body::Buf(b), 0) => b.as_segment(),
            (Body::Split { header, .. }, 0) => header.as_segment(),
            (Body::Split { data, .. }, 1) => data.as_segment(),
            (Body::Stride { entry, off }, 0) => {
                let shared = self
                    .strides
                    .as_ref()
                    .expect("a stride frame in a burst bound to striding buffers");
                shared.frame(*entry, *off, p.meta.len)
            }
            _ => panic!("segment {seg} of packet {pkt} out of range"),
        }
    }

    /// # Panics
    /// When `pkt` is out of range.
    #[inline]
    fn meta(&self, pkt: usize) -> PacketMeta {
        self.pkts[pkt].meta
    }

    /// Releases every frame (a striding buffer goes back to its queue when no burst holds
    /// a frame of it any more) and returns the whole buffers to their pools in bulk (split
    /// frames: headers and data in one batch per pool). Keeps the burst. Never blocks,
    /// never allocates.
    #[inline]
    fn clear(&mut self) {
        let mut ret = ReturnBatch::new();
        let mut data_ret = ReturnBatch::new();
        while let Some(p) = self.pkts.pop() {
            match p.body {
                Body::Buf(b) => ret.push(b),
                Body::Split { header, data } => {
                    ret.push(header);
                    data_ret.push(data);
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use rtdaq_core::BufferPool;
    use std::sync::atomic::AtomicU32;

    fn links(n: usize) -> &'static mut [AtomicU32] {
        Box::leak((0..n).map(|_| AtomicU32::new(0)).collect::<Box<[_]>>())
    }

    fn host_pool(size: usize, count: usize) -> &'static BufferPool<'static> {
        let mem: &'static mut [u8] = Box::leak(vec![0u8; size * count].into_boxed_slice());
        Box::leak(Box::new(BufferPool::new(mem, links(count), size).unwrap()))
    }

    fn device_pool(base: u64, size: usize, count: usize) -> &'static BufferPool<'static> {
        Box::leak(Box::new(
            BufferPool::over_device_memory(base, size * count, links(count), size).unwrap(),
        ))
    }

    fn meta(len: u32) -> PacketMeta {
        PacketMeta {
            len,
            ..PacketMeta::default()
        }
    }

    #[test]
    fn split_frame_has_header_then_device_data_segment() {
        let hp = host_pool(128, 4);
        let dp = device_pool(0x7f00_0000_0000, 4096, 4);
        let mut h = hp.get().unwrap();
        h.slot_mut().unwrap()[..4].copy_from_slice(&[1, 2, 3, 4]);
        h.set_len(74);
        let mut d = dp.get().unwrap();
        d.set_len(1440);
        let daddr = d.addr();
        let mut b = RawBurst::new(QueueId(2), None);
        // One whole-buffer frame, then one split frame.
        let mut w = hp.get().unwrap();
        w.set_len(60);
        b.push_buf(w, meta(60)).unwrap();
        b.push_split(h, d, meta(74 + 1440)).unwrap();
        assert_eq!(RxBurst::len(&b), 2);
        assert_eq!(b.segments(0), 1);
        assert_eq!(b.segments(1), 2);
        match b.segment(1, 0) {
            Segment::Host(bytes) => {
                assert_eq!(bytes.len(), 74);
                assert_eq!(&bytes[..4], &[1, 2, 3, 4]);
            }
            other => panic!("header segment in host memory, got {other:?}"),
        }
        assert_eq!(
            b.segment(1, 1),
            Segment::Device {
                ptr: daddr,
                len: 1440
            }
        );
        assert_eq!(b.meta(1).len, 1514);
        assert_eq!(b.total_bytes(), 60 + 1514);
        assert!(!b.is_stride_frame(1));
        assert_eq!((hp.available(), dp.available()), (2, 3));
        RxBurst::clear(&mut b);
        assert_eq!(RxBurst::len(&b), 0);
        assert_eq!((hp.available(), dp.available()), (4, 4));
    }

    #[test]
    #[should_panic(expected = "segment 2 of packet 0 out of range")]
    fn split_frame_has_no_third_segment() {
        let hp = host_pool(128, 1);
        let dp = host_pool(2048, 1);
        let mut b = RawBurst::new(QueueId(0), None);
        b.push_split(hp.get().unwrap(), dp.get().unwrap(), meta(0))
            .unwrap();
        let _ = b.segment(0, 2);
    }

    #[test]
    fn split_frames_go_back_on_drop_and_when_the_burst_is_full() {
        let hp = host_pool(64, MAX_BATCH + 1);
        let dp = device_pool(0x1_0000_0000, 1024, MAX_BATCH + 1);
        {
            let mut b = RawBurst::new(QueueId(0), None);
            for _ in 0..MAX_BATCH {
                b.push_split(hp.get().unwrap(), dp.get().unwrap(), meta(64))
                    .unwrap();
            }
            assert_eq!(b.room(), 0);
            let (h, d) = b
                .push_split(hp.get().unwrap(), dp.get().unwrap(), meta(64))
                .unwrap_err();
            assert_eq!((h.pool().slot_size(), d.pool().slot_size()), (64, 1024));
            drop((h, d));
            assert_eq!((hp.available(), dp.available()), (1, 1));
        }
        // Dropping the burst returned every header and data buffer.
        assert_eq!(
            (hp.available(), dp.available()),
            (MAX_BATCH + 1, MAX_BATCH + 1)
        );
    }
}
