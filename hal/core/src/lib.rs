//! # rtdaq-core: the `no_std` heart of rtdaq
//!
//! Everything the hot path of every engine shares, with no operating-system dependency:
//!
//! | module | what |
//! |---|---|
//! | [`meta`] | [`PacketMeta`] and the small id newtypes (queue, flow, connection) |
//! | [`ring`] | [`Ring`]: fixed-capacity lock-free SPSC ring, split into `Producer` / `Consumer` |
//! | [`pool`] | [`BufferPool`]: fixed-size slots over caller-provided memory, O(1) get/put |
//! | [`burst`] | [`Burst`]: up to `N` packets of up to 4 segments; returns its buffers on `Drop` |
//! | [`counters`] | [`QueueCounters`]: per-queue packets, bytes, drops by reason, sequence stats |
//! | [`wire`] | bounds-checked parse/emit of Ethernet II, 802.1Q/QinQ, IPv4, UDP, eCPRI and the rtdaq sequence header |
//! | [`format`](mod@format) | instrument stream formats (counter at an offset, VDIF): a payload's stream and linear sequence number |
//! | [`flow`] | flow rules, a first-match [`FlowTable`](flow::FlowTable), symmetric Toeplitz RSS |
//! | [`slot_ring`] | [`SlotRing`]: SPSC ring of reusable, always-initialised slots filled and consumed in place (bursts between an I/O and a consumer thread) |
//! | [`seq`] | [`SeqTracker`]: gaps, reordering and duplicates over a `u64` sequence |
//! | [`traits`] | the small engine-facing traits: `Engine`, `RxQueue`, `TxQueue`, `MemoryRegion`, `Platform` |
//! | [`error`] | small `Copy` error enums |
//!
//! ## What this crate must not do
//! It never allocates on any path (the optional `alloc` feature only adds conveniences for
//! tests and tools), never logs from the hot path, never blocks, and never panics on
//! input bytes. Failure on the hot path is counted, not built into error values.
//!
//! ## Cargo features
//! - `std` (default): implements `std` traits where useful; implies `alloc`.
//! - `alloc`: heap-backed conveniences outside the hot path.
//!
//! Build as `no_std` with `cargo build -p rtdaq-core --no-default-features`.
//!
//! ## Unsafe code
//! `unsafe` is denied crate-wide except in the ring and pool modules, where each block
//! carries a `// SAFETY:` comment.
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![deny(unsafe_code)]
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod burst;
pub mod counters;
pub mod error;
pub mod flow;
pub mod format;
pub mod meta;
pub mod pool;
pub mod ring;
mod ring_index;
pub mod seq;
pub mod slot_ring;
pub mod traits;
pub mod wire;

pub use burst::{Burst, Packet};
pub use counters::{CounterSnapshot, DropReason, QueueCounters};
pub use error::{ParseError, PoolError, RingError, TxError};
pub use meta::{ConnId, FlowId, PacketMeta, QueueId, TimestampSource};
pub use pool::{Buf, BufferPool, ReturnBatch};
pub use ring::{Consumer, Producer, Ring, RingStorage};
pub use seq::{SeqEvent, SeqStats, SeqTracker};
pub use slot_ring::{SlotConsumer, SlotProducer, SlotRing};

/// Largest number of segments one packet may have (header-data split: header, payload, ...).
pub const MAX_SEGMENTS: usize = 4;
