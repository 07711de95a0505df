//! The consumer half of an egress sink: copies each payload into the heap being filled and
//! hands full (or timed-out) heaps to the sender. Hot path: no allocation, no logging, no
//! blocking; a payload that finds no free heap buffer is counted.

use super::common::EgressCounters;
use super::heap::HeapBuf;
use super::heap::Pending;
use super::unit::Units;
use crate::stages::Packet;
use rtdaq_config::model::Egress;
use rtdaq_core::slot_ring::SlotProducer;
use std::sync::atomic::Ordering::Release;

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
    /// A sink of whole units: their assembly (instead of `per_heap` payloads a heap).
    units: Option<Units>,
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
            units: eg.units.as_ref().map(|u| Units::new(u, eg.flush_ns)),
        }
    }

    /// Puts one payload into the heap being filled (see the [module docs](super)).
    #[inline]
    pub fn on_packet(&mut self, p: &Packet<'_>) {
        if let Some(u) = &mut self.units {
            u.on_packet(&mut self.prod, &mut self.pending, p);
            return;
        }
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
        h.clear();
        self.open = true;
        true
    }

    /// Copies one item (received at `rx_ns`) to the end of the open heap; its item count.
    #[inline]
    fn append(&mut self, data: &[u8], rx_ns: u64) -> u32 {
        let Some(h) = self.prod.slot() else { return 0 };
        // `open_heap` and `on_packet` made sure it fits.
        let pushed = h.push(data, rx_ns);
        debug_assert!(pushed);
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
        if let Some(u) = &mut self.units {
            u.tick(&mut self.prod, &mut self.pending, now_ns);
        }
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
        if p.incomplete > 0 {
            EgressCounters::add(&c.dropped_incomplete, p.incomplete);
        }
        if p.foreign > 0 {
            EgressCounters::add(&c.dropped_foreign, p.foreign);
        }
    }

    /// End of the run: the heap being filled goes to the sender, which is told that nothing
    /// more comes.
    pub fn finish(&mut self) {
        if let Some(u) = &mut self.units {
            u.finish(&mut self.prod, &mut self.pending);
        }
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
