//! The record stage: a queue's own record sinks ([`RecordSink`]) and its taps of shared
//! sinks ([`Tap`]) append each packet to their buffers; their writer threads do the I/O.

use crate::record::{RecordSink, Tap};

/// The stage of a sink's consumer half (`RecordSink`, `Tap`, the egress stage's
/// `EgressSink`): it takes every packet the CPU can read, acts on its flush timer after each
/// burst and while idle, and hands its last buffer over at the end.
macro_rules! sink_stage {
    ($ty:ty) => {
        impl $crate::stages::Stage for $ty {
            /// A partly filled buffer goes on on time (`flush_ms`, `TAP_FLUSH_NS`).
            fn wants_clock(&self) -> bool {
                true
            }
            #[inline]
            fn on_packet(
                &mut self,
                p: &$crate::stages::Packet<'_>,
                _notes: &mut $crate::stages::Notes,
            ) {
                // A packet in GPU memory has no byte the CPU could write.
                if p.readable {
                    <$ty>::on_packet(self, p);
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
                <$ty>::finish(self);
            }
        }
    };
}

sink_stage!(RecordSink);
sink_stage!(Tap);
sink_stage!(crate::dada_ring::DadaSink);
sink_stage!(crate::dump::DumpStage);

pub(super) use sink_stage;
