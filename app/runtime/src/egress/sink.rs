//! The consumer half of an egress sink: copies each payload into the heap being filled and
//! hands full (or timed-out) heaps to the sender. Hot path: no allocation, no logging, no
//! blocking; a payload that finds no free heap buffer is counted.

use super::common::EgressCounters;
use crate::stages::Packet;
use rtdaq_config::model::Egress;
use rtdaq_core::slot_ring::SlotProducer;
use std::sync::atomic::Ordering::Release;

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
    fn room(&self) -> usize {
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

    fn reset(&mut self) {
        self.len = 0;
        self.payloads = 0;
        self.first_rx_ns = 0;
    }
}

/// Counts since the last publish.
#[derive(Debug, Default, Clone, Copy)]
struct Pending {
    payloads: u64,
    full: u64,
    too_large: u64,
}

/// The consumer half of one queue's egress sink (see the [module docs](super)).
pub struct EgressSink {
    prod: SlotProducer<'static, HeapBuf>,
    counters: &'static EgressCounters,
    per_heap: u32,
    strip: usize,
    flush_ns: u64,
    /// The slot at the producer's head is a heap being filled.
    open: bool,
    /// When that heap got its first payload (monotonic; only with `per_heap > 1`).
    opened_ns: u64,
    pending: Pending,
}

impl EgressSink {
    /// The consumer half of a sink of `eg` over `prod`.
    pub fn new(
        eg: &Egress,
        prod: SlotProducer<'static, HeapBuf>,
        counters: &'static EgressCounters,
    ) -> Self {
        EgressSink {
            prod,
            counters,
            per_heap: eg.packets_per_heap,
            strip: eg.strip_bytes as usize,
            flush_ns: eg.flush_ns,
            open: false,
            opened_ns: 0,
            pending: Pending::default(),
        }
    }

    /// Puts one payload into the heap being filled (see the [module docs](super)).
    #[inline]
    pub fn on_packet(&mut self, p: &Packet<'_>) {
        let data = p.payload.get(self.strip..).unwrap_or_default();
        if self.open {
            let fits = self
                .prod
                .slot()
                .is_some_and(|h| h.len + data.len() <= h.room());
            if !fits {
                self.commit();
            }
        }
        if !self.open {
            if !self.open_heap(data.len()) {
                return;
            }
            if self.per_heap > 1 {
                self.opened_ns = crate::pacer::now_ns();
            }
        }
        if self.append(data, p.rx_ns) >= self.per_heap {
            self.commit();
        }
    }

    /// Sends one block, a GPU stage's product, as a heap (message) of its own, stamped
    /// `ts_ns` (its batch's first receive time). Never waits: no free heap buffer counts it
    /// as `egress_full`, one larger than a heap buffer (`config check` sizes them for the
    /// stage's product) as `egress_error`.
    #[inline]
    pub fn on_block(&mut self, data: &[u8], ts_ns: u64) {
        self.commit();
        if self.open_heap(data.len()) {
            self.append(data, ts_ns);
            self.commit();
        }
    }

    /// Opens an empty heap in the free slot for a first item of `len` bytes; `false`, with
    /// the item counted, when no slot is free (`egress_full`) or it exceeds an empty heap
    /// (`egress_error`).
    #[inline]
    fn open_heap(&mut self, len: usize) -> bool {
        let Some(h) = self.prod.slot() else {
            self.pending.full += 1;
            return false;
        };
        if len > h.room() {
            self.pending.too_large += 1;
            return false;
        }
        h.reset();
        self.open = true;
        true
    }

    /// Copies one item (received at `rx_ns`) to the end of the open heap; its item count.
    #[inline]
    fn append(&mut self, data: &[u8], rx_ns: u64) -> u32 {
        let Some(h) = self.prod.slot() else { return 0 };
        let at = h.head + h.len;
        h.mem[at..at + data.len()].copy_from_slice(data);
        h.len += data.len();
        if h.payloads == 0 {
            h.first_rx_ns = rx_ns;
        }
        h.payloads += 1;
        self.pending.payloads += 1;
        h.payloads
    }

    /// Hands the heap being filled to the sender.
    #[inline]
    fn commit(&mut self) {
        if self.open {
            let committed = self.prod.commit();
            debug_assert!(committed.is_ok());
            self.open = false;
        }
    }

    /// After every burst and when the queue is idle: publishes the counts and hands a heap
    /// that waited `flush_ms` to the sender.
    #[inline]
    pub fn tick(&mut self, now_ns: u64) {
        self.publish();
        if self.open && now_ns.saturating_sub(self.opened_ns) >= self.flush_ns {
            self.commit();
        }
    }

    /// Adds the counts since the last call to the shared counters.
    #[inline]
    fn publish(&mut self) {
        let c = self.counters;
        let p = std::mem::take(&mut self.pending);
        if p.payloads > 0 {
            EgressCounters::add(&c.payloads_in, p.payloads);
        }
        if p.full > 0 {
            EgressCounters::add(&c.dropped_full, p.full);
        }
        if p.too_large > 0 {
            EgressCounters::add(&c.dropped_too_large, p.too_large);
        }
    }

    /// End of the run: the heap being filled goes to the sender, which is told that nothing
    /// more comes.
    pub fn finish(&mut self) {
        self.commit();
        self.publish();
        self.counters.producer_done.store(true, Release);
    }

    /// The shared counters.
    pub fn counters(&self) -> &'static EgressCounters {
        self.counters
    }
}

impl Drop for EgressSink {
    /// A sink dropped without [`finish`](EgressSink::finish) (a start that unwinds) still
    /// tells its sender that nothing more comes, so the sender ends and can be joined.
    fn drop(&mut self) {
        self.counters.producer_done.store(true, Release);
    }
}
