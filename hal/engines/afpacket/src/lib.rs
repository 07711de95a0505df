//! # rtdaq-engine-afpacket: raw Ethernet over Linux `AF_PACKET` rings
//!
//! The engine of `engine.kind = "afpacket"`: any Linux network device, no special driver,
//! `CAP_NET_RAW`. It implements [`rtdaq_core::traits::Engine`] with [`AfpacketEngine`]
//! (`FRAMES = true`: RX segments start at the Ethernet header, TX packets are whole frames),
//! whose queues are [`AfpacketRx`] (fills [`AfpacketBurst`]s) and [`AfpacketTx`] (sends
//! [`AfpacketTxBurst`]s).
//!
//! | | RX | TX |
//! |---|---|---|
//! | ring | `TPACKET_V3` per queue (`engine.afpacket.block_size` × `block_count`, `block_timeout_ms`) | `TPACKET_V2` per queue, `ring_depth` slots of `engine.afpacket.frame_size` |
//! | buffers | frames stay **in the ring** (zero copy); a block goes back to the kernel when every burst holding one of its frames is cleared (per-block atomic reference count). With `hds_split`: copied into the header / data pools | the ring slots **are** the burst buffers; `send` marks them and kicks the kernel |
//! | several queues | no flow rules: a `PACKET_FANOUT` group (`engine.afpacket.fanout`); flow rules: a cBPF filter per queue ([`bpf`]) | one ring per queue |
//!
//! Every drop is counted in the queue's [`QueueCounters`](rtdaq_core::QueueCounters) with
//! its [`DropReason`](rtdaq_core::DropReason): `kernel` (`PACKET_STATISTICS`: the ring was
//! full), `truncated` (a frame larger than a block), `malformed` (headers do not parse, never
//! delivered; TX: a frame shorter than an Ethernet header), `no_flow` / `flow_drop` (the core
//! flow table on the catch-all queue), `pool_empty` / `too_large` (header-data split copies;
//! TX: a frame above the device MTU). The queues also count delivered (RX) and accepted (TX)
//! packets and bytes (`record_rx_burst`); the runtime must not count them again. See
//! `docs/engines/afpacket.md` for the full story.
//!
//! ## Flow steering
//! With flow rules and several RX queues, each queue's socket gets a classic BPF filter
//! ([`bpf::compile_rx_filter`]) accepting exactly the frames whose **first** matching rule
//! sends them to that queue (RSS sets are resolved inside the filter with the same symmetric
//! Toeplitz hash as the core table). Frames no rule claims, or that a drop rule matches,
//! go to the catch-all queue (the default queue, else queue 0), whose `FlowTable` counts
//! them: the kernel's own stack still sees every frame, so ARP and the rest keep working.
//! Each frame reaches exactly one queue.
//!
//! ## What this crate must not do
//! `poll`, `reserve` and `send` never allocate, never log, never build errors, and never
//! block longer than the queue's `timeout_us` (RX; TX never waits). Everything is sized at
//! [`open`](rtdaq_core::traits::Engine::open) (a test with a counting allocator checks it).
//! Errors exist only on the cold path, as [`AfpacketError`], and name the config key to
//! change.
//!
//! ## Quick start
//! ```no_run
//! use core::sync::atomic::AtomicU32;
//! use rtdaq_core::traits::{Engine, EngineArgs, QueueResources, RxBurst, RxQueue};
//! use rtdaq_core::{BufferPool, QueueCounters};
//! use rtdaq_engine_afpacket::AfpacketEngine;
//!
//! let config = rtdaq_config::load_file("rx-on-eth0.toml".as_ref()).unwrap();
//! let (mut mem, mut links) = (vec![0u8; 64 * 2048], (0..64).map(|_| AtomicU32::new(0)).collect::<Vec<_>>());
//! let pool = BufferPool::new(&mut mem, &mut links, 2048).unwrap(); // unused without hds_split
//! let pools = [&pool];
//! let counters = QueueCounters::new();
//! let rx = [QueueResources { interface: 0, queue: 0, pools: &pools, counters: &counters, wants: Default::default() }];
//! let engine = AfpacketEngine::<64>::open(EngineArgs { config: &config, rx: &rx, tx: &[] }).unwrap();
//! let (mut queues, _) = engine.into_queues();
//! let mut burst = queues[0].new_burst();
//! loop {
//!     let n = queues[0].poll(&mut burst); // waits up to timeout_us for a ring block
//!     for i in 0..burst.len() {
//!         let _frame = burst.frame(i); // the Ethernet frame, in the kernel ring
//!     }
//!     burst.clear(); // hands the ring blocks back
//!     # if n == 0 { break }
//! }
//! ```
//!
//! ## Privileges
//! `socket(AF_PACKET)` needs `CAP_NET_RAW` ([`AfpacketError::Privilege`] says so). Hardware
//! timestamps may switch the device's RX timestamp filter on (`SIOCSHWTSTAMP`, needs
//! `CAP_NET_ADMIN`); without it the queue uses software timestamps.
//!
//! ## Thread safety
//! [`AfpacketRx`] and [`AfpacketTx`] are `Send`: move each to its pinned I/O thread. Bursts
//! are `Send` and may be cleared or dropped on another thread (the consumer): the ring block
//! reference counts are atomic.
//!
//! ## Resource cleanup
//! Each ring (mapping and socket) lives as long as its queue **and** every burst of it, so a
//! burst outliving its queue is safe. A dropped TX queue waits up to
//! [`AfpacketOptions::tx_drain`] for the frames still queued in its ring. Queues that saw
//! errors log a one-line summary when dropped.
//!
//! ## Unsafe code
//! Denied crate-wide except in `sys/` (raw calls → `io::Result` → RAII `PacketSocket`,
//! `MmapRing`) and `ring/` (the ownership protocol over the shared ring memory: block
//! reference counts, TX slot claims), where every block has a `// SAFETY:` comment.
#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod bpf;
mod ctx;
mod engine;
mod error;
mod iface;
mod options;
mod ring;
mod rx;
mod rx_burst;
mod stats;
mod sys;
mod tx;
mod tx_burst;
mod txtime;

pub use engine::AfpacketEngine;
pub use error::{AfpacketError, Result, CAP_NET_RAW_FIX};
pub use options::AfpacketOptions;
pub use rx::AfpacketRx;
pub use rx_burst::AfpacketBurst;
pub use stats::{RxStats, TxStats};
pub use tx::AfpacketTx;
pub use tx_burst::AfpacketTxBurst;

/// Default burst capacity `N` of [`AfpacketEngine`]: the largest `batch_size` the config
/// accepts (1024).
pub const MAX_BATCH: usize = 1024;
