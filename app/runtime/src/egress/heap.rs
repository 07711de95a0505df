//! The buffers of an egress sink's ring ([`HeapBuf`]), what the consumer half counts
//! between publishes, and what a buffer knows of the whole unit it assembles (a leaf of
//! `egress`).

use rtdaq_core::format::UnitKind;

/// One heap between a consumer and its sender: a preallocated buffer (locked with the rest
/// of the process) and what the sender puts into the heap's items. The payloads start
/// `head` bytes into the buffer: room for a UCX message's header (0 for SPEAD).
pub struct HeapBuf {
    mem: Box<[u8]>,
    head: usize,
    /// Which preallocated buffer `mem` is (a UCX sender swaps buffers in flight for spare
    /// ones and finds each one's memory registration by it).
    pub mem_id: u32,
    /// Bytes of payload data after the headroom.
    pub len: usize,
    /// Payloads in it.
    pub payloads: u32,
    /// Receive time of its first payload, ns since the Unix epoch.
    pub first_rx_ns: u64,
    /// The unit it assembles (a sink of whole units).
    pub(super) unit: UnitState,
}

impl HeapBuf {
    /// An empty heap buffer of `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self::with_headroom(cap, 0)
    }

    /// An empty buffer with `head` bytes before `cap` bytes of payload room.
    pub fn with_headroom(cap: usize, head: usize) -> Self {
        HeapBuf {
            mem: vec![0u8; head + cap].into_boxed_slice(),
            head,
            mem_id: 0,
            len: 0,
            payloads: 0,
            first_rx_ns: 0,
            unit: UnitState::default(),
        }
    }

    /// The heap's data: its payloads back to back.
    pub fn data(&self) -> &[u8] {
        &self.mem[self.head..self.head + self.len]
    }

    /// Bytes of the whole buffer, headroom included.
    pub fn capacity(&self) -> usize {
        self.mem.len()
    }

    /// Bytes of payload room.
    pub(super) fn room(&self) -> usize {
        self.mem.len() - self.head
    }

    /// Bytes of the message: the headroom (where a UCX header goes) and the data.
    pub fn message_len(&self) -> usize {
        self.head + self.len
    }

    /// The whole buffer, mutable (the headroom is `..head`).
    pub fn mem_mut(&mut self) -> &mut [u8] {
        &mut self.mem
    }

    /// Exchanges this buffer's memory (and its id) with `other`'s: no copy, no allocation.
    pub fn swap_mem(&mut self, other: &mut (Box<[u8]>, u32)) {
        std::mem::swap(&mut self.mem, &mut other.0);
        std::mem::swap(&mut self.mem_id, &mut other.1);
    }

    /// Empties it (its memory stays).
    pub(super) fn clear(&mut self) {
        self.len = 0;
        self.payloads = 0;
        self.first_rx_ns = 0;
    }

    /// Copies one item received at `rx_ns` to the end of its data; `false` (nothing
    /// copied) when it does not fit.
    #[inline]
    pub(super) fn push(&mut self, data: &[u8], rx_ns: u64) -> bool {
        let at = self.head + self.len;
        let Some(dst) = self.mem.get_mut(at..at + data.len()) else {
            return false;
        };
        dst.copy_from_slice(data);
        self.len += data.len();
        if self.payloads == 0 {
            self.first_rx_ns = rx_ns;
        }
        self.payloads += 1;
        true
    }
}

/// Counts since the last publish.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Pending {
    pub payloads: u64,
    pub full: u64,
    pub too_large: u64,
    /// Payloads of units given up before they were whole.
    pub incomplete: u64,
    /// Payloads not of the units' format.
    pub foreign: u64,
}

/// What a heap buffer knows of the unit it assembles.
#[derive(Debug, Default, Clone, Copy)]
pub struct UnitState {
    /// The unit's key.
    pub key: u64,
    /// What its datagrams add up to so far.
    pub has: u64,
    /// What a whole unit holds (0: not known yet).
    pub needs: u64,
    /// SPEAD: the sum of `(offset + length)² − offset²` of its packets (the size² when
    /// they tile the heap).
    pub moment: u128,
    /// When its first datagram arrived (monotonic ns).
    pub opened_ns: u64,
    /// A datagram of it was refused: it cannot be whole.
    pub broken: bool,
}

impl UnitState {
    pub fn whole(&self, kind: UnitKind) -> bool {
        let tiled = kind != UnitKind::SpeadHeap || self.moment == u128::from(self.needs).pow(2);
        !self.broken && self.needs > 0 && self.has >= self.needs && tiled
    }
}
