//! [`TxBatch`]: the transmit burst of the socket engine's TX queues.

use rtdaq_core::traits::TxBurst;
use rtdaq_core::{BufferPool, Burst, Packet, PacketMeta, QueueId};

/// Up to `N` packets to send, one pool buffer each. Built by
/// [`TxQueue::reserve`](rtdaq_core::traits::TxQueue::reserve), filled through [`TxBurst`]
/// (`packet_mut` + `set_len`), emptied by [`TxQueue::send`](rtdaq_core::traits::TxQueue::send).
/// Dropping it returns its buffers. Never allocates.
pub struct TxBatch<'a, const N: usize> {
    pkts: Burst<'a, N>,
}

impl<'a, const N: usize> TxBatch<'a, N> {
    /// An empty batch for TX queue `queue`.
    pub const fn new(queue: QueueId) -> Self {
        TxBatch {
            pkts: Burst::new(queue),
        }
    }

    /// Packets in the batch.
    #[inline]
    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    /// True when the batch holds no packet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Most packets a batch holds (`N`).
    #[inline]
    pub const fn capacity(&self) -> usize {
        N
    }

    /// The used bytes of packet `i` (`None` out of range).
    #[inline]
    pub fn packet(&self, i: usize) -> Option<&[u8]> {
        Some(
            self.pkts
                .packet(i)?
                .segments()
                .first()?
                .as_slice()
                .unwrap_or_default(),
        )
    }

    /// Drops every packet (returning its buffer) and keeps the batch.
    #[inline]
    pub fn clear(&mut self) {
        self.pkts.clear();
    }

    /// Used bytes of packet `i`, empty when out of range (internal: the queues index in range).
    #[inline]
    pub(crate) fn data(&self, i: usize) -> &[u8] {
        self.packet(i).unwrap_or_default()
    }

    /// Adds up to `n` empty buffers from `pool` (bounded by the free capacity); returns the
    /// number of packets the batch now holds. Never blocks, never allocates.
    #[inline]
    pub(crate) fn reserve(&mut self, pool: &'a BufferPool<'a>, n: usize) -> usize {
        let queue = self.pkts.queue();
        let want = n.min(N - self.pkts.len());
        for _ in 0..want {
            let Some(buf) = pool.get() else { break };
            let meta = PacketMeta {
                queue,
                ..PacketMeta::default()
            };
            if self.pkts.push(Packet::single(buf, meta)).is_err() {
                break;
            }
        }
        self.pkts.len()
    }
}

impl<const N: usize> TxBurst for TxBatch<'_, N> {
    #[inline]
    fn len(&self) -> usize {
        self.pkts.len()
    }

    /// The whole buffer of packet `i` (its capacity), to fill before `set_len`.
    ///
    /// # Panics
    /// When `i` is out of range (a caller bug).
    #[inline]
    fn packet_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        let p = self
            .pkts
            .packet_mut(i)
            .expect("TxBatch::packet_mut: index out of range");
        p.segments_mut().first_mut()?.slot_mut()
    }

    /// # Panics
    /// When `i` is out of range or `len` exceeds the buffer capacity (caller bugs).
    #[inline]
    fn set_len(&mut self, i: usize, len: usize) {
        let p = self
            .pkts
            .packet_mut(i)
            .expect("TxBatch::set_len: index out of range");
        if let Some(b) = p.segments_mut().first_mut() {
            b.set_len(len);
        }
        p.meta_mut().len = len as u32;
    }
}

impl<const N: usize> core::fmt::Debug for TxBatch<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TxBatch")
            .field("queue", &self.pkts.queue())
            .field("len", &self.pkts.len())
            .finish()
    }
}
