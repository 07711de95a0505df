//! # rtdaq-engine-afxdp: the packet engine over Linux AF_XDP sockets
//!
//! The engine of `engine.kind = "afxdp"`: raw Ethernet frames through AF_XDP sockets, on
//! any Linux netdev (zero-copy where the driver supports it, copy mode elsewhere). It
//! implements [`rtdaq_core::traits::Engine`] with [`AfxdpEngine`] (`NAME = "afxdp"`,
//! `FRAMES = true`), whose queues are [`AfxdpRx`] (fills [`XdpBurst`]s: one segment per
//! frame, starting at the Ethernet header) and [`AfxdpTx`] (sends [`TxBatch`]es of whole
//! frames the runtime built).
//!
//! ## Memory: the UMEM is the runtime's pool
//! Each queue's [`BufferPool`](rtdaq_core::BufferPool) (preallocated, locked, page-aligned
//! region memory, slot size = `engine.afxdp.frame_size`) is registered **as the UMEM
//! itself** (`XDP_UMEM_REG` over `base_addr`, one UMEM frame per pool slot). Frames are
//! lent to the kernel through the fill and TX rings ([`Buf::into_raw`](rtdaq_core::Buf)),
//! and come back through the RX and completion rings as `Buf`s again — checked against a
//! lent-frame ledger, never assumed. An RX burst references the UMEM frames (no copy in
//! user space); clearing or dropping it, on any thread, returns them to the pool, and the
//! I/O thread lends them to the fill ring again. xsk-rs 0.11 cannot register caller memory
//! (its `Umem::new` maps its own), so the engine makes the AF_XDP calls itself (`sys/`)
//! and uses libbpf from `libxdp-sys` (the bindings xsk-rs builds on) for the XDP program.
//!
//! ## Steering
//! One XSK per RX queue. Without flow rules RX queue `j` binds NIC queue `j` (the NIC's
//! RSS / ntuple rules spread traffic). With flow rules every RX queue of the interface binds
//! NIC queue 0 with one shared UMEM, and a small XDP program (`bpf/steer.c`, built by
//! `build.rs` with clang) classifies each frame by the rules and redirects it to the target
//! queue's socket — the kernel only delivers to sockets bound to the queue a frame arrived
//! on, so this is how rules work on veth and NICs without ntuple steering. In user space
//! every frame is parsed again ([`rtdaq_core::wire::parse_frame`] through the interface's
//! [`FlowTable`](rtdaq_core::flow::FlowTable)) for its flow id and the `malformed` check.
//!
//! ## Counting
//! Every frame not delivered is counted once in the queue's
//! [`QueueCounters`](rtdaq_core::QueueCounters): `malformed`, `no_flow`, `flow_drop` (user
//! space, or the XDP program's per-CPU counters added to the interface's fallback queue
//! with a delay of at most about 10 ms), `pool_empty` (the kernel found no fill frame),
//! `kernel` (the RX ring was full), and on TX `ring_full`, `too_large`, `malformed`. RX
//! queues count delivered frames and TX queues accepted frames (`record_rx_burst`): the
//! runtime must not count them again.
//!
//! ## What this crate must not do
//! `poll`, `reserve` and `send` never allocate, never log and never block longer than the
//! queue's `timeout_us` (RX) or [`AfxdpOptions::tx_stall`] (TX); a test with a counting
//! allocator checks it. Errors exist only on the cold path, as [`AfxdpError`], and name the
//! config key (or privilege, limit) to change.
//!
//! ## Quick start
//! ```no_run
//! use core::sync::atomic::AtomicU32;
//! use rtdaq_core::traits::{Engine, EngineArgs, QueueResources, RxBurst, RxQueue};
//! use rtdaq_core::{BufferPool, QueueCounters};
//! use rtdaq_engine_afxdp::AfxdpEngine;
//! use rtdaq_platform::memory::{Region, RegionSpec};
//!
//! let config = rtdaq_config::load_file("afxdp.toml".as_ref()).unwrap();
//! // Pools are page aligned with 4096-byte slots (= engine.afxdp.frame_size); the runtime
//! // allocates them from the config's regions the same way.
//! let mut region = Region::allocate(&RegionSpec::host("umem", 1024 * 4096)).unwrap();
//! let mut links: Vec<AtomicU32> = (0..1024).map(|_| AtomicU32::new(0)).collect();
//! let pool = BufferPool::new(region.as_mut_slice(), &mut links, 4096).unwrap();
//! let pools = [&pool];
//! let counters = QueueCounters::new();
//! let rx = [QueueResources { interface: 0, queue: 0, pools: &pools, counters: &counters, wants: Default::default() }];
//! let engine = AfxdpEngine::<64>::open(EngineArgs { config: &config, rx: &rx, tx: &[] }).unwrap();
//! let (mut queues, _) = engine.into_queues();
//! let mut burst = queues[0].new_burst();
//! loop {
//!     let n = queues[0].poll(&mut burst); // waits up to timeout_us for the first frame
//!     // ... burst.segment(i, 0) is frame i from its Ethernet header; then:
//!     burst.clear();
//!     # if n == 0 { break }
//! }
//! ```
//!
//! ## Privileges and build
//! Run as root, or with `CAP_NET_ADMIN`, `CAP_NET_RAW`, `CAP_BPF` (and `CAP_IPC_LOCK` or a
//! large `RLIMIT_MEMLOCK`). Building needs clang (BPF target), and for libxdp-sys
//! `m4 libelf-dev zlib1g-dev`. See `docs/engines/afxdp.md`.
//!
//! ## Thread safety
//! [`AfxdpRx`] and [`AfxdpTx`] are `Send`: move each to its pinned I/O thread. Queues on
//! one NIC queue share a UMEM: its fill ring is taken with `try_lock` (a queue never waits
//! for another) and its completion ring belongs to the one TX queue there.
//!
//! ## Resource cleanup
//! Dropping a queue closes its socket; a TX queue first sends what is left and waits (at
//! most 200 ms) for completions. When the last queue of a UMEM is gone every frame still
//! lent returns to its pool; when the last RX queue of an interface is gone the XDP
//! program is detached (it is attached through a BPF link, so it is also detached if the
//! process dies).
//!
//! ## Unsafe code
//! Denied crate-wide except in `sys/` (raw calls → `io::Result` → safe RAII types), where
//! every block has a `// SAFETY:` comment.
#![deny(unsafe_code)]
#![deny(missing_docs)]

mod burst;
mod caps;
mod engine;
mod error;
mod rx;
mod stats;
mod steer;
mod sys;
mod tx;
mod umem;

use std::time::Duration;

pub use burst::{TxBatch, XdpBurst};
pub use engine::{AfxdpEngine, InterfaceInfo, XDP_HEADROOM};
pub use error::{AfxdpError, Result};
pub use rx::{AfxdpRx, SYNC_EMPTY_POLLS, SYNC_INTERVAL_NS};
pub use stats::{RxStats, TxStats};
pub use steer::{Steering, XdpMode, MAX_QUEUES};
pub use tx::AfxdpTx;

/// Default burst capacity `N` of [`AfxdpEngine`]: the largest `batch_size` the config
/// accepts.
pub const MAX_BATCH: usize = 1024;

/// Tuning of the AF_XDP engine beyond the deployment config. [`Default`] is what
/// [`Engine::open`](rtdaq_core::traits::Engine::open) uses; tests and tools pass their own
/// to [`AfxdpEngine::open_with`].
///
/// `#[non_exhaustive]`: build it with `AfxdpOptions::default()` and set fields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AfxdpOptions {
    /// TX: longest a `send` waits in all for room in the TX ring or for the kernel to take
    /// the frames before counting the rest as `ring_full` (default 1 ms).
    pub tx_stall: Duration,
    /// Where to attach the XDP program: `None` (default) tries native mode, then generic;
    /// `Some` insists on one.
    pub xdp_mode: Option<XdpMode>,
}

impl Default for AfxdpOptions {
    fn default() -> Self {
        AfxdpOptions {
            tx_stall: Duration::from_millis(1),
            xdp_mode: None,
        }
    }
}
