//! The engine's burst types: [`XdpBurst`] (RX) and [`TxBatch`] (TX).
//!
//! AF_XDP writes a received frame `XDP_PACKET_HEADROOM` (256) bytes into its UMEM frame, so
//! an RX packet is a pool buffer **plus an offset**; [`rtdaq_core::Burst`] has no place for
//! the offset, hence [`XdpBurst`]. Both types own their buffers: clearing or dropping them
//! returns every buffer to its pool, from any thread. Nothing here allocates, blocks or logs.

use rtdaq_core::traits::{RxBurst, Segment, TxBurst};
use rtdaq_core::{Buf, BufferPool, PacketMeta, QueueId};

/// One received frame: its UMEM frame (a pool buffer whose used length runs to the frame's
/// end), where the frame starts in it, and its metadata.
#[derive(Debug)]
struct RxFrame<'a> {
    buf: Buf<'a>,
    off: u16,
    meta: PacketMeta,
}

/// Up to `N` received frames of one queue, each one segment starting at the Ethernet header
/// (no header-data split). Owns the buffers: [`clear`](RxBurst::clear) or drop returns them.
pub struct XdpBurst<'a, const N: usize> {
    queue: QueueId,
    frames: heapless::Vec<RxFrame<'a>, N>,
}

impl<'a, const N: usize> XdpBurst<'a, N> {
    /// An empty burst for RX queue `queue`. `const`; never allocates.
    pub const fn new(queue: QueueId) -> Self {
        XdpBurst {
            queue,
            frames: heapless::Vec::new(),
        }
    }

    /// The queue the frames came from.
    #[inline]
    pub fn queue(&self) -> QueueId {
        self.queue
    }

    /// Frames in the burst.
    #[inline]
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// True when the burst holds no frame.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Most frames a burst holds (`N`).
    #[inline]
    pub const fn capacity(&self) -> usize {
        N
    }

    /// Returns every buffer to its pool and empties the burst (same as
    /// [`RxBurst::clear`]). Never allocates.
    #[inline]
    pub fn clear(&mut self) {
        self.frames.clear();
    }

    /// Room left.
    #[inline]
    pub(crate) fn room(&self) -> usize {
        N - self.frames.len()
    }

    /// The bytes of frame `i` (from the Ethernet header), `None` out of range.
    #[inline]
    pub fn frame(&self, i: usize) -> Option<&[u8]> {
        let f = self.frames.get(i)?;
        Some(
            f.buf
                .as_slice()
                .and_then(|s| s.get(usize::from(f.off)..))
                .unwrap_or_default(),
        )
    }

    /// Appends a frame whose bytes are `buf[off..]` (the buffer's used length ends where the
    /// frame ends); gives the buffer back when the burst is full.
    #[inline]
    pub(crate) fn push(&mut self, buf: Buf<'a>, off: u16, meta: PacketMeta) -> Result<(), Buf<'a>> {
        self.frames
            .push(RxFrame { buf, off, meta })
            .map_err(|f| f.buf)
    }
}

impl<const N: usize> RxBurst for XdpBurst<'_, N> {
    #[inline]
    fn len(&self) -> usize {
        self.frames.len()
    }

    /// Always 1: a frame is one UMEM frame.
    ///
    /// # Panics
    /// When `pkt` is out of range.
    #[inline]
    fn segments(&self, pkt: usize) -> usize {
        assert!(
            pkt < self.frames.len(),
            "XdpBurst: packet index out of range"
        );
        1
    }

    /// `Segment::Host(frame bytes)`, starting at the Ethernet header.
    ///
    /// # Panics
    /// When `pkt` is out of range or `seg != 0`.
    #[inline]
    fn segment(&self, pkt: usize, seg: usize) -> Segment<'_> {
        assert!(seg == 0, "XdpBurst: frames have one segment");
        let f = &self.frames[pkt];
        Segment::Host(
            f.buf
                .as_slice()
                .and_then(|s| s.get(usize::from(f.off)..))
                .unwrap_or_default(),
        )
    }

    /// # Panics
    /// When `pkt` is out of range.
    #[inline]
    fn meta(&self, pkt: usize) -> PacketMeta {
        self.frames[pkt].meta
    }

    #[inline]
    fn clear(&mut self) {
        self.frames.clear();
    }
}

impl<const N: usize> core::fmt::Debug for XdpBurst<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("XdpBurst")
            .field("queue", &self.queue)
            .field("len", &self.frames.len())
            .finish()
    }
}

/// Up to `N` whole frames to send, one pool buffer each, built in place from offset 0.
/// Filled through [`TxQueue::reserve`](rtdaq_core::traits::TxQueue::reserve) and
/// [`TxBurst`] (`packet_mut` + `set_len`), emptied by
/// [`TxQueue::send`](rtdaq_core::traits::TxQueue::send). Dropping it returns its buffers.
pub struct TxBatch<'a, const N: usize> {
    queue: QueueId,
    bufs: heapless::Vec<Buf<'a>, N>,
}

impl<'a, const N: usize> TxBatch<'a, N> {
    /// An empty batch for TX queue `queue`.
    pub const fn new(queue: QueueId) -> Self {
        TxBatch {
            queue,
            bufs: heapless::Vec::new(),
        }
    }

    /// Frames in the batch.
    #[inline]
    pub fn len(&self) -> usize {
        self.bufs.len()
    }

    /// True when the batch holds no frame.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.bufs.is_empty()
    }

    /// Most frames a batch holds (`N`).
    #[inline]
    pub const fn capacity(&self) -> usize {
        N
    }

    /// The used bytes of frame `i` (`None` out of range).
    #[inline]
    pub fn packet(&self, i: usize) -> Option<&[u8]> {
        Some(self.bufs.get(i)?.as_slice().unwrap_or_default())
    }

    /// Drops every frame (returning its buffer) and keeps the batch.
    #[inline]
    pub fn clear(&mut self) {
        self.bufs.clear();
    }

    /// Adds up to `n` empty buffers from `pool` (bounded by the free room); returns the
    /// number of frames the batch now holds. Never blocks, never allocates.
    #[inline]
    pub(crate) fn reserve(&mut self, pool: &'a BufferPool<'a>, n: usize) -> usize {
        let want = n.min(N - self.bufs.len());
        for _ in 0..want {
            let Some(buf) = pool.get() else { break };
            if self.bufs.push(buf).is_err() {
                break;
            }
        }
        self.bufs.len()
    }

    /// Takes the frames out in order, leaving the batch empty.
    #[inline]
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = Buf<'a>> + '_ {
        self.bufs.drain(..)
    }

    /// The queue.
    #[inline]
    pub fn queue(&self) -> QueueId {
        self.queue
    }
}

impl<const N: usize> TxBurst for TxBatch<'_, N> {
    #[inline]
    fn len(&self) -> usize {
        self.bufs.len()
    }

    /// The whole buffer of frame `i` (its capacity), to fill before `set_len`.
    ///
    /// # Panics
    /// When `i` is out of range (a caller bug).
    #[inline]
    fn packet_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        self.bufs[i].slot_mut()
    }

    /// # Panics
    /// When `i` is out of range or `len` exceeds the buffer capacity (caller bugs).
    #[inline]
    fn set_len(&mut self, i: usize, len: usize) {
        self.bufs[i].set_len(len);
    }
}

impl<const N: usize> core::fmt::Debug for TxBatch<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TxBatch")
            .field("queue", &self.queue)
            .field("len", &self.bufs.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn rx_burst_exposes_the_frame_after_the_offset_and_returns_buffers() {
        let mem: &'static mut [u8] = Box::leak(vec![0u8; 4 * 512].into_boxed_slice());
        let links: &'static mut [AtomicU32] =
            Box::leak((0..4).map(|_| AtomicU32::new(0)).collect());
        let pool: &'static BufferPool<'static> =
            Box::leak(Box::new(BufferPool::new(mem, links, 512).unwrap()));
        let mut b = XdpBurst::<'_, 2>::new(QueueId(1));
        let mut buf = pool.get().unwrap();
        buf.slot_mut().unwrap()[256..260].copy_from_slice(b"abcd");
        buf.set_len(260);
        b.push(
            buf,
            256,
            PacketMeta {
                len: 4,
                ..PacketMeta::default()
            },
        )
        .unwrap();
        assert_eq!(b.segment(0, 0), Segment::Host(b"abcd"));
        assert_eq!(b.frame(0), Some(&b"abcd"[..]));
        assert_eq!((RxBurst::len(&b), b.segments(0), b.meta(0).len), (1, 1, 4));
        b.push(pool.get().unwrap(), 0, PacketMeta::default())
            .unwrap();
        assert!(b
            .push(pool.get().unwrap(), 0, PacketMeta::default())
            .is_err());
        assert_eq!(pool.in_use(), 2);
        RxBurst::clear(&mut b);
        assert_eq!(pool.in_use(), 0);

        let mut t = TxBatch::<'_, 4>::new(QueueId(0));
        assert_eq!(t.reserve(pool, 3), 3);
        t.packet_mut(0).unwrap()[..2].copy_from_slice(b"hi");
        t.set_len(0, 2);
        assert_eq!(t.packet(0), Some(&b"hi"[..]));
        assert_eq!(t.drain().count(), 3);
        assert_eq!(pool.in_use(), 0);
    }
}
