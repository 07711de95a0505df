//! The validate stage: the queue's [`Validator`] (sequence, pattern, format and latency
//! checks) publishing into the queue's live counters.

use super::{Notes, Packet, Stage};
use crate::queue::stats::QueueStats;
use crate::validator::Validator;
use rtdaq_config::model::Validation;

/// Stage 1 of every RX queue.
pub(crate) struct Validate {
    /// The checks and their counts (the report's, at the end).
    pub validator: Validator,
    /// Where it publishes: the consumer's counters, the live stream table, latency and
    /// check counters.
    stats: &'static QueueStats,
}

impl Validate {
    /// The stage of `validator`, publishing into `stats`.
    pub(crate) fn new(validator: Validator, stats: &'static QueueStats) -> Self {
        Validate { validator, stats }
    }
}

impl Stage for Validate {
    /// `validate = "count"` reads no byte: with no other reading stage the queue counts
    /// from descriptors.
    #[inline]
    fn reads_packets(&self) -> bool {
        self.validator.mode() != Validation::Count
    }
    #[inline]
    fn on_count(&mut self, len: u64, in_device: bool) {
        if in_device {
            self.validator.count_in_gpu(len);
        } else {
            self.validator.count(len);
        }
    }
    #[inline]
    fn on_packet(&mut self, p: &Packet<'_>, notes: &mut Notes) {
        if !p.readable {
            // GPU memory (a NIC wrote it): counted, not read.
            self.validator.count_in_gpu(u64::from(p.meta.len));
            return;
        }
        self.validator
            .check_len(p.payload, p.payload.len() + p.tail, p.rx_ns);
        notes.seq = self.validator.last_seq();
        notes.piece = self.validator.last_piece();
    }
    #[inline]
    fn end_burst(&mut self, _now_ns: u64) {
        let s = self.stats;
        self.validator.publish(&s.consumer);
        self.validator
            .publish_live(&s.streams, Some(&s.latency), Some(&s.checks), false);
    }
    #[inline]
    fn idle(&mut self, _now_ns: u64) {
        // What the live counters do not show yet (they settle on the final counts).
        let s = self.stats;
        self.validator.settle(&s.streams, &s.latency, &s.checks);
    }
}
