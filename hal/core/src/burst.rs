//! Bursts of received (or to-be-sent) packets that own their buffers.
//!
//! A [`Packet`] is up to [`MAX_SEGMENTS`] [`Buf`] segments (header-data split: header, payload,
//! ...) plus its [`PacketMeta`]. A [`Burst`] is up to `N` packets from one queue. Both live
//! inline (`heapless::Vec`), never on the heap, and are `Send`, so a burst can travel through a
//! [`Ring`](crate::ring::Ring) from the I/O thread to a consumer thread.
//!
//! Dropping a packet or a burst returns every buffer to its pool (that falls out of
//! [`Buf`]'s `Drop`): there is no "free" call to forget.
//!
//! ```
//! use core::sync::atomic::AtomicU32;
//! use rtdaq_core::{pool::BufferPool, Burst, Packet, PacketMeta, QueueId};
//! use rtdaq_core::traits::{RxBurst, Segment};
//! let mut mem = [0u8; 4 * 256];
//! let mut links = [const { AtomicU32::new(0) }; 4];
//! let pool = BufferPool::new(&mut mem, &mut links, 256).unwrap();
//! let mut burst = Burst::<'_, 8>::new(QueueId(0));
//! let mut buf = pool.get().unwrap();
//! buf.slot_mut().unwrap()[..2].copy_from_slice(b"hi");
//! buf.set_len(2);
//! burst.push(Packet::single(buf, PacketMeta { len: 2, ..Default::default() })).ok().unwrap();
//! assert_eq!(burst.segment(0, 0), Segment::Host(b"hi"));
//! assert_eq!(pool.in_use(), 1);
//! drop(burst);
//! assert_eq!(pool.in_use(), 0);
//! ```
//!
//! Every method never blocks, never allocates and never logs.

use core::fmt;

use crate::meta::{PacketMeta, QueueId};
use crate::pool::{Buf, ReturnBatch};
use crate::traits::{RxBurst, Segment, TxBurst};
use crate::MAX_SEGMENTS;

/// One packet: up to [`MAX_SEGMENTS`] buffers and its metadata. Owns its buffers.
pub struct Packet<'p> {
    segs: heapless::Vec<Buf<'p>, MAX_SEGMENTS, u8>,
    meta: PacketMeta,
}

impl<'p> Packet<'p> {
    /// A packet with no segment yet.
    #[inline]
    pub const fn new(meta: PacketMeta) -> Self {
        Packet {
            segs: heapless::Vec::new(),
            meta,
        }
    }

    /// A single-segment packet (no header-data split).
    #[inline]
    pub fn single(buf: Buf<'p>, meta: PacketMeta) -> Self {
        let mut p = Packet::new(meta);
        // Cannot fail: MAX_SEGMENTS >= 1 and the packet is empty.
        let _ = p.segs.push(buf);
        p
    }

    /// Appends a segment; gives it back when the packet already has [`MAX_SEGMENTS`].
    #[inline]
    pub fn push_segment(&mut self, buf: Buf<'p>) -> Result<(), Buf<'p>> {
        self.segs.push(buf)
    }

    /// The segments, in order.
    #[inline]
    pub fn segments(&self) -> &[Buf<'p>] {
        &self.segs
    }

    /// The segments, mutably (to fill them or set their lengths).
    #[inline]
    pub fn segments_mut(&mut self) -> &mut [Buf<'p>] {
        &mut self.segs
    }

    /// Number of segments.
    #[inline]
    pub fn segment_count(&self) -> usize {
        self.segs.len()
    }

    /// Sum of the segments' used lengths.
    #[inline]
    pub fn bytes(&self) -> usize {
        self.segs.iter().map(Buf::len).sum()
    }

    /// The metadata.
    #[inline]
    pub fn meta(&self) -> &PacketMeta {
        &self.meta
    }

    /// The metadata, mutably.
    #[inline]
    pub fn meta_mut(&mut self) -> &mut PacketMeta {
        &mut self.meta
    }
}

impl fmt::Debug for Packet<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packet")
            .field("meta", &self.meta)
            .field("segments", &self.segments())
            .finish()
    }
}

/// Up to `N` packets received on one queue. Owns every buffer; dropping it returns them.
pub struct Burst<'p, const N: usize> {
    queue: QueueId,
    pkts: heapless::Vec<Packet<'p>, N>,
}

impl<'p, const N: usize> Burst<'p, N> {
    /// An empty burst for `queue`. `const`; never allocates.
    #[inline]
    pub const fn new(queue: QueueId) -> Self {
        Burst {
            queue,
            pkts: heapless::Vec::new(),
        }
    }

    /// The queue the packets came from.
    #[inline]
    pub fn queue(&self) -> QueueId {
        self.queue
    }

    /// Appends a packet; gives it back when the burst is full.
    #[inline]
    pub fn push(&mut self, packet: Packet<'p>) -> Result<(), Packet<'p>> {
        self.pkts.push(packet)
    }

    /// Appends a single-segment packet built in place (cheaper than [`push`](Self::push) of
    /// a [`Packet::single`] on the receive hot path); gives the buffer back when full.
    #[inline]
    pub fn push_single(&mut self, buf: Buf<'p>, meta: PacketMeta) -> Result<(), Buf<'p>> {
        if self.pkts.is_full() {
            return Err(buf);
        }
        // Cannot fail: checked above.
        let _ = self.pkts.push(Packet::single(buf, meta));
        Ok(())
    }

    /// Removes and returns the last packet.
    #[inline]
    pub fn pop(&mut self) -> Option<Packet<'p>> {
        self.pkts.pop()
    }

    /// Number of packets.
    #[inline]
    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    /// True when the burst holds no packet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// True when the burst holds `N` packets.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.pkts.is_full()
    }

    /// Most packets a burst holds (`N`).
    #[inline]
    pub const fn capacity(&self) -> usize {
        N
    }

    /// The packets, in receive order.
    #[inline]
    pub fn iter(&self) -> core::slice::Iter<'_, Packet<'p>> {
        self.pkts.iter()
    }

    /// The packets, mutably.
    #[inline]
    pub fn iter_mut(&mut self) -> core::slice::IterMut<'_, Packet<'p>> {
        self.pkts.iter_mut()
    }

    /// Packet `i`, `None` when out of range.
    #[inline]
    pub fn packet(&self, i: usize) -> Option<&Packet<'p>> {
        self.pkts.get(i)
    }

    /// Packet `i`, mutably.
    #[inline]
    pub fn packet_mut(&mut self, i: usize) -> Option<&mut Packet<'p>> {
        self.pkts.get_mut(i)
    }

    /// Sum of all packets' segment bytes.
    #[inline]
    pub fn total_bytes(&self) -> usize {
        self.pkts.iter().map(Packet::bytes).sum()
    }

    /// Drops every packet and keeps the burst for reuse. The buffers go back to their pools
    /// in bulk (one compare-exchange per run of same-pool buffers, see [`ReturnBatch`]).
    #[inline]
    pub fn clear(&mut self) {
        let mut ret = ReturnBatch::new();
        for p in self.pkts.iter_mut() {
            while let Some(b) = p.segs.pop() {
                ret.push(b);
            }
        }
        // The packets hold no buffer any more: this only resets the length.
        self.pkts.clear();
    }
}

impl<'b, 'p, const N: usize> IntoIterator for &'b Burst<'p, N> {
    type Item = &'b Packet<'p>;
    type IntoIter = core::slice::Iter<'b, Packet<'p>>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'p, const N: usize> IntoIterator for Burst<'p, N> {
    type Item = Packet<'p>;
    type IntoIter = heapless::vec::IntoIter<Packet<'p>, N, usize>;
    fn into_iter(self) -> Self::IntoIter {
        // `Burst` has a `Drop`: move the packets out and drop an empty shell.
        let mut this = core::mem::ManuallyDrop::new(self);
        core::mem::take(&mut this.pkts).into_iter()
    }
}

impl<const N: usize> Drop for Burst<'_, N> {
    /// Returns every buffer in bulk, as [`clear`](Burst::clear).
    #[inline]
    fn drop(&mut self) {
        self.clear();
    }
}

impl<const N: usize> RxBurst for Burst<'_, N> {
    #[inline]
    fn len(&self) -> usize {
        self.pkts.len()
    }

    /// # Panics
    /// When `pkt` is out of range.
    #[inline]
    fn segments(&self, pkt: usize) -> usize {
        self.pkts[pkt].segs.len()
    }

    /// `Segment::Host(used bytes)` for CPU-accessible pools, `Segment::Device { ptr, len }`
    /// otherwise.
    ///
    /// # Panics
    /// When `pkt` or `seg` is out of range.
    #[inline]
    fn segment(&self, pkt: usize, seg: usize) -> Segment<'_> {
        self.pkts[pkt].segs[seg].as_segment()
    }

    /// # Panics
    /// When `pkt` is out of range.
    #[inline]
    fn meta(&self, pkt: usize) -> PacketMeta {
        self.pkts[pkt].meta
    }

    #[inline]
    fn clear(&mut self) {
        Burst::clear(self);
    }
}

/// Transmit side: the packets' first segments are filled in place (e.g. after
/// [`TxQueue::reserve`](crate::traits::TxQueue::reserve) added empty buffers).
///
/// The inherent [`Burst::len`] / [`Burst::packet_mut`] shadow these methods in method-call
/// syntax; call them as `TxBurst::packet_mut(&mut burst, i)` (or through a `B: TxBurst` bound).
impl<const N: usize> TxBurst for Burst<'_, N> {
    #[inline]
    fn len(&self) -> usize {
        self.pkts.len()
    }

    /// The whole slot of packet `i`'s first segment ([`Buf::slot_mut`]); `None` when its pool
    /// is not CPU-accessible or the packet has no segment.
    ///
    /// # Panics
    /// When `i` is out of range.
    #[inline]
    fn packet_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        self.pkts[i].segs.first_mut()?.slot_mut()
    }

    /// Sets the length of packet `i`'s first segment to `len`, and the packet's
    /// [`PacketMeta::len`] to the sum of its segment lengths (`len` for a single segment).
    ///
    /// # Panics
    /// When `i` is out of range, or `len` exceeds the first segment's capacity (0 for a packet
    /// without segment).
    #[inline]
    fn set_len(&mut self, i: usize, len: usize) {
        let p = &mut self.pkts[i];
        match p.segs.first_mut() {
            Some(first) => first.set_len(len),
            None => assert!(len == 0, "TxBurst::set_len on a packet without segment"),
        }
        p.meta.len = u32::try_from(p.bytes()).unwrap_or(u32::MAX);
    }
}

impl<const N: usize> fmt::Debug for Burst<'_, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Burst")
            .field("queue", &self.queue)
            .field("packets", &self.pkts.as_slice())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::pool::BufferPool;
    use core::sync::atomic::AtomicU32;

    #[test]
    fn build_read_and_drop_returns_buffers() {
        let mut mem = [0u8; 10 * 32];
        let mut links = [const { AtomicU32::new(0) }; 10];
        let pool = BufferPool::new(&mut mem, &mut links, 32).unwrap();
        let mut burst = Burst::<'_, 2>::new(QueueId(3));
        for i in 0..2u8 {
            let mut hdr = pool.get().unwrap();
            hdr.slot_mut().unwrap()[0] = i;
            hdr.set_len(1);
            let mut pay = pool.get().unwrap();
            pay.set_len(10);
            let mut p = Packet::single(hdr, PacketMeta::default());
            p.push_segment(pay).unwrap();
            p.meta_mut().len = p.bytes() as u32;
            burst.push(p).unwrap();
        }
        assert!(burst.is_full());
        let extra = Packet::single(pool.get().unwrap(), PacketMeta::default());
        let extra = burst.push(extra).unwrap_err();
        drop(extra);
        assert_eq!(pool.in_use(), 4);
        assert_eq!(burst.total_bytes(), 22);
        assert_eq!(RxBurst::len(&burst), 2);
        assert_eq!(burst.segments(1), 2);
        assert_eq!(burst.segment(1, 0), Segment::Host(&[1]));
        assert_eq!(burst.meta(0).len, 11);
        assert_eq!(burst.queue(), QueueId(3));
        assert_eq!((&burst).into_iter().count(), 2);
        let mut p = Packet::new(PacketMeta::default());
        for _ in 0..MAX_SEGMENTS {
            p.push_segment(pool.get().unwrap()).unwrap();
        }
        assert!(p.push_segment(pool.get().unwrap()).is_err());
        drop(p);
        drop(burst);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn burst_is_send() {
        fn is_send<T: Send>() {}
        is_send::<Burst<'_, 32>>();
        is_send::<Packet<'_>>();
    }
}
