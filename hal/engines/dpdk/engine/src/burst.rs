//! The engine's burst types: [`DpdkRxBurst`] (RX) and [`DpdkTxBurst`] (TX), both over an
//! [`MbufBurst`] of owned mbufs (zero copy: a segment is the mbuf's data).
//!
//! Clearing or dropping a burst frees its mbufs in bulk (`rte_pktmbuf_free_bulk`), from
//! any thread. Nothing here allocates, blocks or logs after construction.

use rtdaq_core::traits::{RxBurst, Segment, TxBurst};
use rtdaq_core::{PacketMeta, QueueId};
use rtdaq_dpdk_sys::{Mbuf, MbufBurst};

/// Received frames of one queue: one mbuf (chain) each, with its [`PacketMeta`]. Segment 0
/// starts at the Ethernet header; with header-data split (buffer split) a frame has two
/// segments: the first `hds_split` bytes, then the rest (a chained mbuf of the data
/// region). Longer chains are dropped as `truncated` by the queue.
///
/// Segments in GPU memory (a `device` region: the whole frame, or the data segment of a
/// split) are handed up as [`Segment::Device`] (address and length; the CPU never reads
/// them), the others as [`Segment::Host`].
pub struct DpdkRxBurst {
    queue: QueueId,
    mbufs: MbufBurst,
    metas: Box<[PacketMeta]>,
    device: InGpu,
}

/// Which segments of a queue's frames lie in GPU memory: segment 0 (`head`: its first
/// region) and segments 1.. (`data`: its second region, with header-data split).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InGpu {
    /// Segment 0 is GPU memory (the queue's first region is `device`).
    pub head: bool,
    /// Segments after the first are GPU memory (the split's data region is `device`).
    pub data: bool,
}

impl DpdkRxBurst {
    /// An empty burst of at most `capacity` frames (1..=65535) for RX queue `queue`. Cold
    /// path (allocates its slots once).
    ///
    /// # Panics
    /// When `capacity` is 0 or above 65535.
    pub fn with_capacity(queue: QueueId, capacity: usize) -> Self {
        DpdkRxBurst {
            queue,
            mbufs: MbufBurst::with_capacity(capacity),
            metas: vec![PacketMeta::default(); capacity].into_boxed_slice(),
            device: InGpu::default(),
        }
    }

    /// The same burst for a queue whose segments lie in GPU memory as `device` says (the
    /// queue sets it again on every poll, so a burst made elsewhere is right too).
    pub fn in_gpu(mut self, device: InGpu) -> Self {
        self.device = device;
        self
    }

    /// Sets which segments lie in GPU memory (the polling queue's).
    #[inline]
    pub(crate) fn set_in_gpu(&mut self, device: InGpu) {
        self.device = device;
    }

    /// The queue the frames came from.
    pub fn queue(&self) -> QueueId {
        self.queue
    }

    /// Most frames the burst holds.
    pub fn capacity(&self) -> usize {
        self.mbufs.capacity()
    }

    /// Frame `i`'s mbuf (`None` out of range).
    pub fn mbuf(&self, i: usize) -> Option<&Mbuf> {
        self.mbufs.get(i)
    }

    /// Free room.
    #[inline]
    pub(crate) fn room(&self) -> usize {
        self.mbufs.capacity() - self.mbufs.len()
    }

    /// Appends every mbuf of `src` (all `Some`), frame `k` with `meta` of length `lens[k]`;
    /// false (nothing moved) when one is `None`, `lens` is shorter or the room is short.
    #[inline]
    pub(crate) fn append(
        &mut self,
        src: &mut [Option<Mbuf>],
        lens: &[u32],
        meta: PacketMeta,
    ) -> bool {
        let (i, n) = (self.mbufs.len(), src.len());
        if lens.len() < n || !self.mbufs.append(src) {
            return false;
        }
        for (m, &len) in self.metas[i..i + n].iter_mut().zip(lens) {
            *m = PacketMeta { len, ..meta };
        }
        true
    }

    /// Appends a frame; gives the mbuf back when full.
    #[inline]
    pub(crate) fn push(&mut self, m: Mbuf, meta: PacketMeta) -> Result<(), Mbuf> {
        let i = self.mbufs.len();
        self.mbufs.push(m)?;
        self.metas[i] = meta;
        Ok(())
    }
}

impl RxBurst for DpdkRxBurst {
    #[inline]
    fn len(&self) -> usize {
        self.mbufs.len()
    }

    /// 1, or 2 with header-data split.
    ///
    /// # Panics
    /// When `pkt` is out of range.
    #[inline]
    fn segments(&self, pkt: usize) -> usize {
        let m = self
            .mbufs
            .get(pkt)
            .expect("DpdkRxBurst: packet index out of range");
        usize::from(m.segments())
    }

    /// `Segment::Host(data of mbuf segment seg)`, or `Segment::Device` for a segment in GPU
    /// memory; segment 0 from the Ethernet header.
    ///
    /// # Panics
    /// When `pkt` or `seg` is out of range.
    #[inline]
    fn segment(&self, pkt: usize, seg: usize) -> Segment<'_> {
        let m = self
            .mbufs
            .get(pkt)
            .expect("DpdkRxBurst: packet index out of range");
        let in_gpu = if seg == 0 {
            self.device.head
        } else {
            self.device.data
        };
        if in_gpu {
            let (ptr, len) = m
                .segment_addr(seg)
                .expect("DpdkRxBurst: segment index out of range");
            return Segment::Device {
                ptr,
                len: u32::from(len),
            };
        }
        Segment::Host(
            m.segment_data(seg)
                .expect("DpdkRxBurst: segment index out of range"),
        )
    }

    /// The queue's memory kind (set on every poll): no mbuf is read.
    ///
    /// # Panics
    /// When `pkt` is out of range.
    #[inline]
    fn head_in_device(&self, pkt: usize) -> bool {
        assert!(
            pkt < self.mbufs.len(),
            "DpdkRxBurst: packet index out of range"
        );
        self.device.head
    }

    /// # Panics
    /// When `pkt` is out of range.
    #[inline]
    fn meta(&self, pkt: usize) -> PacketMeta {
        assert!(
            pkt < self.mbufs.len(),
            "DpdkRxBurst: packet index out of range"
        );
        self.metas[pkt]
    }

    /// Frees every mbuf in one `rte_pktmbuf_free_bulk`.
    #[inline]
    fn clear(&mut self) {
        self.mbufs.clear();
    }
}

impl core::fmt::Debug for DpdkRxBurst {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DpdkRxBurst")
            .field("queue", &self.queue)
            .field("len", &self.mbufs.len())
            .finish()
    }
}

/// Frames to send, one mbuf each, built in place from the mbuf's data start. Filled through
/// [`TxQueue::reserve`](rtdaq_core::traits::TxQueue::reserve) and [`TxBurst`]
/// (`packet_mut` = the whole data room, then `set_len`), emptied by
/// [`TxQueue::send`](rtdaq_core::traits::TxQueue::send). Dropping it frees its mbufs.
pub struct DpdkTxBurst {
    queue: QueueId,
    /// While in the burst every mbuf's length is its full room (so `packet_mut` can hand it
    /// out); the frame length is kept in `lens` and applied by `send`.
    mbufs: MbufBurst,
    lens: Box<[u16]>,
}

impl DpdkTxBurst {
    /// An empty burst of at most `capacity` frames (1..=65535) for TX queue `queue`. Cold
    /// path.
    ///
    /// # Panics
    /// When `capacity` is 0 or above 65535.
    pub fn with_capacity(queue: QueueId, capacity: usize) -> Self {
        DpdkTxBurst {
            queue,
            mbufs: MbufBurst::with_capacity(capacity),
            lens: vec![0; capacity].into_boxed_slice(),
        }
    }

    /// The queue.
    pub fn queue(&self) -> QueueId {
        self.queue
    }

    /// Most frames the burst holds.
    pub fn capacity(&self) -> usize {
        self.mbufs.capacity()
    }

    /// The bytes of frame `i` up to its set length (`None` out of range).
    pub fn packet(&self, i: usize) -> Option<&[u8]> {
        let m = self.mbufs.get(i)?;
        m.data().get(..usize::from(self.lens[i]))
    }

    /// Frees every frame and keeps the burst.
    pub fn clear(&mut self) {
        self.mbufs.clear();
    }

    #[inline]
    pub(crate) fn room(&self) -> usize {
        self.mbufs.capacity() - self.mbufs.len()
    }

    #[inline]
    pub(crate) fn mbufs_mut(&mut self) -> &mut MbufBurst {
        &mut self.mbufs
    }

    /// Prepares the frames from index `from` on (freshly allocated): length = full room,
    /// frame length 0.
    #[inline]
    pub(crate) fn init_from(&mut self, from: usize) {
        for i in from..self.mbufs.len() {
            if let Some(m) = self.mbufs.get_mut(i) {
                let room = m.room();
                let _ = m.set_len(room);
            }
            self.lens[i] = 0;
        }
    }

    /// Takes the first frame with its length, in order.
    #[inline]
    pub(crate) fn pop_front(&mut self, k: usize) -> Option<(Mbuf, usize)> {
        let len = usize::from(self.lens.get(k).copied().unwrap_or(0));
        self.mbufs.pop_front().map(|m| (m, len))
    }
}

impl TxBurst for DpdkTxBurst {
    #[inline]
    fn len(&self) -> usize {
        self.mbufs.len()
    }

    /// The whole data room of frame `i` (mbuf data start to its end).
    ///
    /// # Panics
    /// When `i` is out of range.
    #[inline]
    fn packet_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        Some(
            self.mbufs
                .get_mut(i)
                .expect("DpdkTxBurst: packet index out of range")
                .data_mut(),
        )
    }

    /// # Panics
    /// When `i` is out of range or `len` exceeds the mbuf's room (caller bugs).
    #[inline]
    fn set_len(&mut self, i: usize, len: usize) {
        let m = self
            .mbufs
            .get(i)
            .expect("DpdkTxBurst: packet index out of range");
        assert!(
            len <= m.room(),
            "DpdkTxBurst: length {len} exceeds the mbuf room {}",
            m.room()
        );
        self.lens[i] = len as u16;
    }
}

impl core::fmt::Debug for DpdkTxBurst {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DpdkTxBurst")
            .field("queue", &self.queue)
            .field("len", &self.mbufs.len())
            .finish()
    }
}
