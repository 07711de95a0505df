//! The egress stage: a queue's egress sinks ([`EgressSink`]) copy each payload into the heap
//! being filled; their sender threads send the heaps downstream.

use super::{Notes, Packet, Stage};
use crate::egress::EgressSink;

impl Stage for EgressSink {
    /// A partly filled heap goes out on time (`flush_ms`).
    fn wants_clock(&self) -> bool {
        true
    }
    #[inline]
    fn on_packet(&mut self, p: &Packet<'_>, _notes: &mut Notes) {
        // A packet in GPU memory has no byte the CPU could send.
        if p.readable {
            EgressSink::on_packet(self, p);
        }
    }
    #[inline]
    fn end_burst(&mut self, now_ns: u64) {
        self.tick(now_ns);
    }
    #[inline]
    fn idle(&mut self, now_ns: u64) {
        self.tick(now_ns);
    }
    fn finish(&mut self) {
        EgressSink::finish(self);
    }
}
