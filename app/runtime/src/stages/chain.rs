//! The chain of stages of one RX queue, in order, as one statically composed type.
//!
//! A new stage is one more element of [`QueueStages`] (and of [`queue_stages`]), its type
//! implementing [`Stage`] in its own file under `stages/`; the consumer loop does not
//! change.

use super::validate::Validate;
#[cfg(not(feature = "gpu"))]
use super::Stage;
use crate::dada_ring::DadaSink;
use crate::dump::DumpStage;
use crate::egress::EgressSink;
use crate::record::{RecordSink, Tap};
use crate::validator::Validator;

#[cfg(feature = "gpu")]
pub(crate) use super::gpu::GpuStage;

/// Without the `gpu` feature no queue has a GPU stage: `Option<GpuStage>` is always `None`
/// and folds away.
#[cfg(not(feature = "gpu"))]
pub(crate) enum GpuStage {}

#[cfg(not(feature = "gpu"))]
impl Stage for GpuStage {
    fn on_packet(&mut self, _p: &super::Packet<'_>, _notes: &mut super::Notes) {
        match *self {}
    }
}

/// Every RX queue's stages: validate, record (its own sinks, then its taps of shared
/// sinks), PSRDADA ring (when it names a `dada_ring`), dump history (when it names a
/// `dump`), egress, GPU (when it names a `gpu_stage`).
pub(crate) type QueueStages = (
    Validate,
    (
        Vec<RecordSink>,
        (
            Vec<Tap>,
            (
                Option<DadaSink>,
                (Option<DumpStage>, (Vec<EgressSink>, Option<GpuStage>)),
            ),
        ),
    ),
);

/// The chain of one queue, in order.
pub(crate) fn queue_stages(
    validate: Validate,
    record: Vec<RecordSink>,
    taps: Vec<Tap>,
    (ring, dump, egress): (Option<DadaSink>, Option<DumpStage>, Vec<EgressSink>),
    gpu: Option<GpuStage>,
) -> QueueStages {
    (validate, (record, (taps, (ring, (dump, (egress, gpu))))))
}

/// The validator of a finished chain (its counts go to the report).
pub(crate) fn into_validator(s: QueueStages) -> Validator {
    s.0.validator
}
