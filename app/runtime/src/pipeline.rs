//! The RX consumer as a pipeline of stages.
//!
//! Every packet a queue's consumer takes (the indirect queue's consumer thread, the direct
//! queue's I/O thread, or the GPU stage driving either) passes through the same ordered
//! stages, built once before the threads start and dispatched statically:
//!
//! | order | stage | what it does | its counters |
//! |---|---|---|---|
//! | 1 | `validate` ([`Validator`]) | sequence, pattern, latency checks | the queue's consumer counters, `ValidatorStats` |
//! | 2 | `record` ([`RecordSink`], one per recorder the queue names; a [`Tap`] for a shared one) | appends the packet to the sink's (tap's) buffers | [`SinkCounters`](crate::record::SinkCounters): `record_full`, `record_error` |
//! | 3 | `gpu` (`gpu_stage`, feature `gpu`) | batches the packet for the GPU; holds its buffer until the batch is done | `GpuCounters` |
//!
//! The GPU stage is the pipeline's last stage: it keeps the packet's buffer (its ring slot)
//! until the GPU has read it, so it drives the pipeline (`gpu_stage::rx_consumer` /
//! `rx_direct` call [`Pipeline::on_packet`] for each packet before batching it) instead of
//! being called by it. A new capability is a new stage here, not a special case in the
//! runtime. Every stage keeps the hot-path rules: no allocation, no logging, no blocking; a
//! stage that cannot keep up counts its drops.

use crate::memory::QueueStats;
use crate::record::{RecordSink, Tap};
use crate::validator::Validator;
use rtdaq_core::PacketMeta;

/// One packet as the stages see it.
#[derive(Debug, Clone, Copy)]
pub struct PacketView<'a> {
    /// The whole Ethernet frame (raw engines), else `None`.
    pub frame: Option<&'a [u8]>,
    /// The UDP payload (raw engines: inside `frame`; the socket engine: the datagram or TCP
    /// record); empty when a frame is not IPv4/UDP.
    pub payload: &'a [u8],
    /// The engine's metadata.
    pub meta: PacketMeta,
    /// Receive time, ns since the Unix epoch (the engine's, else the consumer's clock).
    pub rx_ns: u64,
    /// Payload bytes after `payload` that the CPU cannot read (header-data split into GPU
    /// memory: the NIC put them there); 0 otherwise.
    pub tail: usize,
}

/// One stage of the pipeline.
pub trait Stage {
    /// Takes one packet. Never allocates, logs or blocks.
    fn on_packet(&mut self, p: &PacketView<'_>);
    /// After each burst, and now and then while the queue is idle (`now_ns`: monotonic):
    /// publish counters, hand over timed-out work.
    fn end_burst(&mut self, stats: &QueueStats, now_ns: u64);
    /// End of the run: hand over what is left.
    fn finish(&mut self) {}
}

impl Stage for Validator {
    #[inline]
    fn on_packet(&mut self, p: &PacketView<'_>) {
        self.check_len(p.payload, p.payload.len() + p.tail, p.rx_ns);
    }
    #[inline]
    fn end_burst(&mut self, stats: &QueueStats, _now_ns: u64) {
        self.publish(&stats.consumer);
        self.publish_live(
            &stats.streams,
            Some(&stats.latency),
            Some(&stats.checks),
            false,
        );
    }
}

impl Stage for Tap {
    #[inline]
    fn on_packet(&mut self, p: &PacketView<'_>) {
        Tap::on_packet(self, p);
    }
    #[inline]
    fn end_burst(&mut self, _stats: &QueueStats, now_ns: u64) {
        self.tick(now_ns);
    }
    fn finish(&mut self) {
        Tap::finish(self);
    }
}

impl Stage for RecordSink {
    #[inline]
    fn on_packet(&mut self, p: &PacketView<'_>) {
        RecordSink::on_packet(self, p);
    }
    #[inline]
    fn end_burst(&mut self, _stats: &QueueStats, now_ns: u64) {
        self.tick(now_ns);
    }
    fn finish(&mut self) {
        RecordSink::finish(self);
    }
}

/// The CPU stages of one RX queue, in order: validate, then record.
pub struct Pipeline {
    /// Stage 1.
    pub validate: Validator,
    /// Stage 2: one sink per recorder the queue names (config order)...
    pub record: Vec<RecordSink>,
    /// ...and one tap per shared recorder it names.
    pub taps: Vec<Tap>,
}

impl Pipeline {
    /// A pipeline of the validator alone.
    pub fn new(validate: Validator) -> Self {
        Pipeline {
            validate,
            record: Vec::new(),
            taps: Vec::new(),
        }
    }

    /// A pipeline with record sinks and taps of shared sinks.
    pub fn with_record(validate: Validator, record: Vec<RecordSink>, taps: Vec<Tap>) -> Self {
        Pipeline {
            validate,
            record,
            taps,
        }
    }

    /// True when no stage reads a packet's bytes: `validate = "count"` and no recorder.
    /// The consumer then counts each packet from its descriptor and never touches its data
    /// (a raw engine's frame is not even parsed for its UDP payload).
    pub fn counts_only(&self) -> bool {
        self.validate.mode() == rtdaq_config::model::Validation::Count
            && self.record.is_empty()
            && self.taps.is_empty()
    }

    /// Every stage takes the packet, in order.
    #[inline]
    pub fn on_packet(&mut self, p: &PacketView<'_>) {
        self.validate.on_packet(p);
        for s in &mut self.record {
            s.on_packet(p);
        }
        for t in &mut self.taps {
            t.on_packet(p);
        }
    }

    /// After a burst.
    #[inline]
    pub fn end_burst(&mut self, stats: &QueueStats) {
        let now = if self.record.is_empty() && self.taps.is_empty() {
            0
        } else {
            crate::pacer::now_ns()
        };
        self.validate.end_burst(stats, now);
        for s in &mut self.record {
            s.end_burst(stats, now);
        }
        for t in &mut self.taps {
            t.end_burst(stats, now);
        }
    }

    /// While the queue is idle: the validator publishes what its live counters do not show
    /// yet (they settle on the final counts), stages with timers (a recorder's `flush_ms`)
    /// act on them.
    #[inline]
    pub fn idle(&mut self, stats: &QueueStats) {
        self.validate.settle(stats);
        if !self.record.is_empty() || !self.taps.is_empty() {
            self.end_burst(stats);
        }
    }

    /// End of the run (after the last packet).
    pub fn finish(&mut self) {
        Stage::finish(&mut self.validate);
        for s in &mut self.record {
            Stage::finish(s);
        }
        for t in &mut self.taps {
            Stage::finish(t);
        }
    }
}
