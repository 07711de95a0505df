//! The RX consumer's stages: every packet a queue's consumer takes passes through the same
//! ordered chain, built once before the threads start and dispatched statically.
//!
//! | order | stage | file | what it does | its counters |
//! |---|---|---|---|---|
//! | 1 | validate | `validate.rs` | sequence, pattern, format, latency checks | the queue's consumer counters, `ValidatorStats` |
//! | 2 | record | `record.rs` | appends the packet to a sink's (a shared sink's tap's) buffers | `SinkCounters`: `record_full`, `record_error` |
//! | 3 | dump | `record.rs` (the sink shape), `crate::dump::history` | keeps the packet in the queue's RAM history a trigger dumps | `History`: `kept`, `not_kept` |
//! | 4 | egress | `egress.rs` | copies the payload into a heap its sender thread sends downstream (SPEAD) | `EgressCounters`: `egress_full`, `egress_error`, `peer_gone` |
//! | 5 | gpu | `gpu.rs` (feature `gpu`) | batches the packet for the GPU; holds its ring slot until the batch is done | `GpuCounters` |
//!
//! Each implements the one [`Stage`] trait; `chain::QueueStages` composes them (tuples,
//! `Vec`, `Option`); the one consumer loop (`queue::consume`) drives any chain on
//! any queue, direct or indirect. A new capability is a new stage here (its file, one
//! element of the chain), not a special case in the runtime.

pub(crate) mod chain;
mod egress;
#[cfg(feature = "gpu")]
pub mod gpu;
mod record;
mod stage;
pub(crate) mod validate;

pub use stage::{Drain, HeapPiece, Notes, Packet, Stage};
