//! The record stage: a queue's own record sinks ([`RecordSink`]) and its taps of shared
//! sinks ([`Tap`]) append each packet to their buffers; their writer threads do the I/O.

use super::{Notes, Packet, Stage};
use crate::record::{RecordSink, Tap};

impl Stage for RecordSink {
    /// `flush_ms`: a partly filled buffer goes to the writer on time.
    fn wants_clock(&self) -> bool {
        true
    }
    #[inline]
    fn on_packet(&mut self, p: &Packet<'_>, _notes: &mut Notes) {
        // A packet in GPU memory has no byte the CPU could write.
        if p.readable {
            RecordSink::on_packet(self, p);
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
        RecordSink::finish(self);
    }
}

impl Stage for Tap {
    /// A partly filled buffer goes to the merger after `TAP_FLUSH_NS`.
    fn wants_clock(&self) -> bool {
        true
    }
    #[inline]
    fn on_packet(&mut self, p: &Packet<'_>, _notes: &mut Notes) {
        if p.readable {
            Tap::on_packet(self, p);
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
        Tap::finish(self);
    }
}
