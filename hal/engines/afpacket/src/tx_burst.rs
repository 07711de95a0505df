//! [`AfpacketTxBurst`]: the transmit burst of the AF_PACKET engine, whose buffers are slots
//! of the queue's TX ring.

use std::sync::Arc;

use rtdaq_core::traits::TxBurst;
use rtdaq_core::QueueId;

use crate::ring::{TxRing, TxSlots};

/// Up to `N` frames to send, each written **directly into a slot of the kernel's TX ring**
/// (no copy on `send`). Built by [`TxQueue::reserve`](rtdaq_core::traits::TxQueue::reserve)
/// (which claims free slots in ring order), filled through [`TxBurst`] (`packet_mut` +
/// `set_len`, whole Ethernet frames), emptied by
/// [`TxQueue::send`](rtdaq_core::traits::TxQueue::send). Dropping or
/// [`clear`](Self::clear)ing it gives its slots back unsent. Never allocates after
/// construction.
///
/// Only one burst of a queue holds slots at a time (the kernel sends in ring order, so slots
/// are handed out as one contiguous run): `reserve` into a second burst while the first
/// still holds slots returns nothing.
pub struct AfpacketTxBurst<const N: usize> {
    slots: TxSlots,
    lens: heapless::Vec<u32, N>,
    queue: QueueId,
}

impl<const N: usize> AfpacketTxBurst<N> {
    /// An empty burst of `ring`. Cold path.
    pub(crate) fn new(ring: Arc<TxRing>, queue: QueueId) -> Self {
        AfpacketTxBurst {
            slots: TxSlots::new(ring),
            lens: heapless::Vec::new(),
            queue,
        }
    }

    /// True when the burst's slots are in `ring`.
    #[inline]
    pub(crate) fn is_of(&self, ring: &Arc<TxRing>) -> bool {
        Arc::ptr_eq(self.slots.ring(), ring)
    }

    /// Claims up to `n` more slots (bounded by the free capacity); returns the number of
    /// packets the burst now holds. Never blocks, never allocates.
    #[inline]
    pub(crate) fn reserve(&mut self, n: usize) -> usize {
        let want = n.min(N - self.lens.len());
        let now = self.slots.extend(want).min(N);
        while self.lens.len() < now {
            // Cannot fail: `now <= N`.
            let _ = self.lens.push(0);
        }
        self.lens.len()
    }

    /// The slots, and the frame lengths set so far (for `send`).
    #[inline]
    pub(crate) fn parts(&mut self) -> (&mut TxSlots, &mut heapless::Vec<u32, N>) {
        (&mut self.slots, &mut self.lens)
    }

    /// Packets in the burst.
    #[inline]
    pub fn len(&self) -> usize {
        self.lens.len()
    }

    /// True when the burst holds no packet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    /// Most packets a burst holds (`N`).
    #[inline]
    pub const fn capacity(&self) -> usize {
        N
    }

    /// Bytes each packet can hold (the ring's slot size less its header).
    #[inline]
    pub fn slot_capacity(&self) -> usize {
        self.slots.ring().slot_capacity()
    }

    /// The TX queue the burst belongs to.
    #[inline]
    pub fn queue(&self) -> QueueId {
        self.queue
    }

    /// The frame of packet `i` as set so far (`None` out of range).
    #[inline]
    pub fn packet(&self, i: usize) -> Option<&[u8]> {
        let len = *self.lens.get(i)? as usize;
        Some(self.slots.data(i, len))
    }

    /// Gives every slot back unsent and empties the burst.
    #[inline]
    pub fn clear(&mut self) {
        self.slots.abandon();
        self.lens.clear();
    }
}

impl<const N: usize> TxBurst for AfpacketTxBurst<N> {
    #[inline]
    fn len(&self) -> usize {
        self.lens.len()
    }

    /// The whole slot of packet `i` (its capacity), to write a frame into from its
    /// Ethernet header.
    ///
    /// # Panics
    /// When `i` is out of range (a caller bug).
    #[inline]
    fn packet_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        assert!(
            i < self.lens.len(),
            "AfpacketTxBurst::packet_mut({i}) of {}",
            self.lens.len()
        );
        Some(self.slots.data_mut(i))
    }

    /// # Panics
    /// When `i` is out of range or `len` exceeds the slot capacity (caller bugs).
    #[inline]
    fn set_len(&mut self, i: usize, len: usize) {
        let cap = self.slot_capacity();
        assert!(len <= cap, "frame of {len} B in a TX slot of {cap} B");
        self.lens[i] = len as u32;
    }
}

impl<const N: usize> std::fmt::Debug for AfpacketTxBurst<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfpacketTxBurst")
            .field("queue", &self.queue)
            .field("len", &self.lens.len())
            .finish()
    }
}
