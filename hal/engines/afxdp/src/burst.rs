//! The engine's burst types: [`XdpBurst`] (RX) and [`TxBatch`] (TX).
//!
//! AF_XDP writes a received frame `XDP_PACKET_HEADROOM` (256) bytes into its UMEM frame, so
//! an RX packet is a pool buffer **plus an offset**; [`rtdaq_core::Burst`] has no place for
//! the offset, hence [`XdpBurst`]. Both types own their buffers: clearing or dropping them
//! returns every buffer to its pool, from any thread. Nothing here allocates, blocks or logs.

use rtdaq_core::traits::{RxBurst, Segment, TxBurst};
use rtdaq_core::{Buf, BufferPool, PacketMeta, QueueId};

/// One received frame: its first UMEM frame (a pool buffer whose used length runs to the
/// end of the frame's bytes in it), where the frame starts in it, its metadata, and where
/// its further UMEM frames (multi-buffer) are in the burst's `rest`.
#[derive(Debug)]
struct RxFrame<'a> {
    buf: Buf<'a>,
    off: u16,
    meta: PacketMeta,
    /// First index into `rest` and how many follow (0: a one-buffer frame).
    rest_at: u16,
    rest_len: u16,
}

/// A further UMEM frame of a multi-buffer frame: the buffer and where its bytes start.
#[derive(Debug)]
struct RxFrag<'a> {
    buf: Buf<'a>,
    off: u16,
}

/// Up to `N` received frames of one queue, starting at the Ethernet header. A frame larger
/// than one UMEM frame (AF_XDP multi-buffer, `XDP_USE_SG`) has several segments, one per
/// UMEM frame; the burst holds as many further segments as it was made for
/// ([`with_rest`](Self::with_rest): the queue's batch × the further frames a frame of its
/// MTU takes), never more (its list is allocated once, never grown). Owns the buffers:
/// [`clear`](RxBurst::clear) or drop returns them.
pub struct XdpBurst<'a, const N: usize> {
    queue: QueueId,
    frames: heapless::Vec<RxFrame<'a>, N>,
    rest: Vec<RxFrag<'a>>,
}

impl<'a, const N: usize> XdpBurst<'a, N> {
    /// An empty burst for RX queue `queue`, of one-buffer frames only. `const`; never
    /// allocates.
    pub const fn new(queue: QueueId) -> Self {
        XdpBurst {
            queue,
            frames: heapless::Vec::new(),
            rest: Vec::new(),
        }
    }

    /// An empty burst for RX queue `queue` with room for `rest` further segments of
    /// multi-buffer frames in all. Cold path (allocates the list once).
    pub fn with_rest(queue: QueueId, rest: usize) -> Self {
        XdpBurst {
            queue,
            frames: heapless::Vec::new(),
            rest: Vec::with_capacity(rest),
        }
    }

    /// Most further segments the burst holds.
    #[inline]
    pub fn rest_capacity(&self) -> usize {
        self.rest.capacity()
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
        self.rest.clear();
    }

    /// Room left (frames).
    #[inline]
    pub(crate) fn room(&self) -> usize {
        N - self.frames.len()
    }

    /// Room left for the further segments of multi-buffer frames.
    #[inline]
    pub(crate) fn rest_room(&self) -> usize {
        self.rest.capacity() - self.rest.len()
    }

    /// The bytes of frame `i`'s first segment (from the Ethernet header; the whole frame
    /// unless it is a multi-buffer frame), `None` out of range.
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
        let rest_at = self.rest.len() as u16;
        self.frames
            .push(RxFrame {
                buf,
                off,
                meta,
                rest_at,
                rest_len: 0,
            })
            .map_err(|f| f.buf)
    }

    /// Appends a further segment (`buf[off..]`) to the last frame pushed (multi-buffer);
    /// gives the buffer back when there is no frame or no room (the caller checked
    /// [`rest_room`](Self::rest_room) first).
    #[inline]
    pub(crate) fn push_frag(&mut self, buf: Buf<'a>, off: u16) -> Result<(), Buf<'a>> {
        let Some(last) = self.frames.last_mut() else {
            return Err(buf);
        };
        // Never past the capacity: the hot path does not allocate.
        if self.rest.len() == self.rest.capacity() {
            return Err(buf);
        }
        self.rest.push(RxFrag { buf, off });
        last.rest_len += 1;
        Ok(())
    }
}

/// `buf[off..]` as bytes (a CPU pool; empty otherwise).
#[inline]
fn bytes_from<'b>(buf: &'b Buf<'_>, off: u16) -> &'b [u8] {
    buf.as_slice()
        .and_then(|s| s.get(usize::from(off)..))
        .unwrap_or_default()
}

impl<const N: usize> RxBurst for XdpBurst<'_, N> {
    #[inline]
    fn len(&self) -> usize {
        self.frames.len()
    }

    /// 1, or the number of UMEM frames of a multi-buffer frame.
    ///
    /// # Panics
    /// When `pkt` is out of range.
    #[inline]
    fn segments(&self, pkt: usize) -> usize {
        let f = self
            .frames
            .get(pkt)
            .expect("XdpBurst: packet index out of range");
        1 + usize::from(f.rest_len)
    }

    /// `Segment::Host(bytes)`: segment 0 from the Ethernet header, then the further UMEM
    /// frames of a multi-buffer frame in order.
    ///
    /// # Panics
    /// When `pkt` or `seg` is out of range.
    #[inline]
    fn segment(&self, pkt: usize, seg: usize) -> Segment<'_> {
        let f = &self.frames[pkt];
        if seg == 0 {
            return Segment::Host(bytes_from(&f.buf, f.off));
        }
        assert!(
            seg <= usize::from(f.rest_len),
            "XdpBurst: segment index out of range"
        );
        let r = &self.rest[usize::from(f.rest_at) + seg - 1];
        Segment::Host(bytes_from(&r.buf, r.off))
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
        self.rest.clear();
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

    /// A multi-buffer frame: its UMEM frames are its segments, in order; the frames before
    /// and after it keep theirs; every buffer returns on clear.
    #[test]
    fn multi_buffer_frames_are_segments_in_order() {
        let mem: &'static mut [u8] = Box::leak(vec![0u8; 8 * 512].into_boxed_slice());
        let links: &'static mut [AtomicU32] =
            Box::leak((0..8).map(|_| AtomicU32::new(0)).collect());
        let pool: &'static BufferPool<'static> =
            Box::leak(Box::new(BufferPool::new(mem, links, 512).unwrap()));
        let filled = |bytes: &[u8], off: usize| {
            let mut b = pool.get().unwrap();
            b.slot_mut().unwrap()[off..off + bytes.len()].copy_from_slice(bytes);
            b.set_len(off + bytes.len());
            b
        };
        let mut b = XdpBurst::<'_, 3>::with_rest(QueueId(0), 3);
        b.push(filled(b"one", 256), 256, PacketMeta::default())
            .unwrap();
        b.push(filled(b"head", 256), 256, PacketMeta::default())
            .unwrap();
        b.push_frag(filled(b"mid", 0), 0).unwrap();
        b.push_frag(filled(b"tail", 0), 0).unwrap();
        b.push(filled(b"three", 256), 256, PacketMeta::default())
            .unwrap();
        assert_eq!((b.segments(0), b.segments(1), b.segments(2)), (1, 3, 1));
        assert_eq!(b.segment(1, 0), Segment::Host(b"head"));
        assert_eq!(b.segment(1, 1), Segment::Host(b"mid"));
        assert_eq!(b.segment(1, 2), Segment::Host(b"tail"));
        assert_eq!(b.segment(2, 0), Segment::Host(b"three"));
        assert_eq!(b.rest_room(), 1);
        assert_eq!(pool.in_use(), 5);
        RxBurst::clear(&mut b);
        assert_eq!((pool.in_use(), b.rest_room()), (0, 3));
        // No frame to extend: the buffer comes back.
        assert!(b.push_frag(pool.get().unwrap(), 0).is_err());
        assert_eq!(pool.in_use(), 0);
    }
}
