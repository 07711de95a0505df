//! # rtdaq-engine-ibverbs: the packet engine over RDMA verbs
//!
//! The engine of `engine.kind = "ibverbs"`, in two modes (`engine.ibverbs.mode`):
//!
//! | mode | type | what |
//! |---|---|---|
//! | `roce` | [`RoceEngine`] (`FRAMES = false`) | RoCE v2 reliable connections through RDMA CM (`rdma://a.b.c.d:port` interfaces, `role` server/client, `connections`): SEND/RECV into pre-posted receives, or RDMA WRITE with immediate into receiver slots granted by credit messages; credit flow control (no receiver-not-ready), selective signaling, completions polled in batches into bursts; a lost peer is detected (CM event or completion error), counted, its connection drained (the tail it sent is still delivered) and a client reconnects; optional replies to request/response peers (`engine.ibverbs.reply`) |
//! | `raw` | [`RawEngine`] (`FRAMES = true`) | raw Ethernet frames through one raw packet QP per RX queue, steered by `ibv_create_flow` rules built from `[[flows]]`: one frame per receive, or many per buffer through the mlx5 striding RQ; header-data split (`hds_split`, two regions) with a two-SGE receive (the first `hds_split` bytes into a header buffer, the rest into a data buffer, delivered as two segments; [`raw::hds`]); TX of generator-built frames (ConnectX hardware only) |
//!
//! Both register the runtime's pools once at open ([`QueueResources::pools`](rtdaq_core::traits::QueueResources)),
//! receive straight into pool buffers and send straight from them. A pool in GPU device
//! memory (not CPU-accessible, exported with
//! [`BufferPool::with_dmabuf`](rtdaq_core::BufferPool::with_dmabuf)) is registered through
//! its dma-buf (`ibv_reg_dmabuf_mr`, GPUDirect RDMA): a RoCE receive region, or the data
//! region of a raw queue's header-data split; its segments are `Segment::Device`. The FFI is
//! [`ffi`] (`rtdaq-ibverbs-sys`); this crate has no `unsafe` code. See
//! `docs/engines/ibverbs.md`.
//!
//! ## No RDMA device
//! Opening on a host without RDMA (kernel without it, no device, no Soft-RoCE link) fails
//! with [`IbvError::NoDevice`]: "no RDMA device: … see docs/engines/ibverbs.md"; never a
//! panic.
//!
//! ## What this crate must not do
//! `poll`, `reserve` and `send` never allocate, never log and never build errors: they
//! count (drops in the queue's counters, connection events and replies in the interface's
//! counters, logged when the queues are dropped). Every table a queue uses for a connection
//! is built by the connection manager thread before the hand-off, so adopting, draining and
//! releasing connections allocates nothing on the queue threads either.
#![deny(unsafe_code)]
#![deny(missing_docs)]

mod error;
pub mod proto;
pub mod raw;
mod register;
mod roce;

pub use error::{IbvError, Result, DOCS};
pub use raw::RawEngine;
pub use roce::{RoceEngine, RoceRx, RoceStats, RoceTx, RoceTxBurst, MAX_BATCH};

/// Whether a config runs the RoCE engine (`engine.ibverbs.mode = "roce"`).
pub fn is_roce(cfg: &rtdaq_config::Config) -> bool {
    matches!(&cfg.engine, rtdaq_config::model::Engine::Ibverbs(e) if e.mode == rtdaq_config::model::IbMode::Roce)
}
