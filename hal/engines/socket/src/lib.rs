//! # rtdaq-engine-socket: the packet engine over Linux UDP/TCP sockets
//!
//! The engine of `engine.kind = "socket"`: no special hardware or privileges, any Linux host.
//! It implements [`rtdaq_core::traits::Engine`] with [`SocketEngine`], whose queues are
//! [`SocketRx`] (fills [`rtdaq_core::Burst`]s) and [`SocketTx`] (sends [`TxBatch`]es).
//!
//! | transport | RX | TX |
//! |---|---|---|
//! | UDP | `recvmmsg` straight into pool slots; `SO_REUSEPORT` across RX queues; `UDP_GRO` split back into datagrams; `SO_TIMESTAMPNS`; `SO_RXQ_OVFL` | `sendmmsg` straight from pool slots, one socket (source port) per lane; `UDP_SEGMENT` GSO with fallback |
//! | TCP | fixed-size records, each in one pool slot, reassembled in place across reads; connection ids 1.. | one lane per connection, vectored writes |
//!
//! Every drop is counted in the queue's [`QueueCounters`](rtdaq_core::QueueCounters) with its
//! [`DropReason`](rtdaq_core::DropReason): `kernel` (socket overflow reported by the kernel,
//! failed connection), `too_large` (datagram larger than the buffer), `pool_empty` (no
//! buffer: the datagram was drained into a scratch buffer so the socket keeps flowing),
//! `malformed` / `no_flow` / `flow_drop` (flow rules), `truncated` (a TCP record cut by the
//! peer closing), `ring_full` (TX: the kernel's transmit queue stayed full for
//! [`SocketOptions::tx_stall`]). The queues also count delivered (RX) or accepted (TX)
//! packets and bytes (`record_rx_burst`); the runtime must not count them again.
//! See `docs/engines/socket.md` for the full story.
//!
//! ## TX lanes
//! A TX queue sends on [`SocketTx::lanes`] ≥ 1 lanes: on UDP one socket per lane, each with
//! its own ephemeral source port (`generator.streams` lanes on the generator's queue, else 1),
//! so `SO_REUSEPORT` receivers hash each lane whole onto one RX queue; on TCP one connection
//! per lane (connection `k` is lane `k` with one TX queue). The **lane rule**:
//!
//! > The j-th packet handed to `send` on this queue (j counts every packet of every burst
//! > passed to `send` since open, accepted or not, starting at 0) goes out on lane
//! > `j % lanes`.
//!
//! Within a lane packets leave in the order they were handed over. The rule holds across
//! bursts of any size and when a send is partly refused, so a runtime can stamp one sequence
//! stream per lane (packet `j` carries stream `j % lanes`) and each receiving queue sees
//! whole streams.
//!
//! ## What this crate must not do
//! `poll`, `reserve` and `send` never allocate, never log and never block longer than the
//! queue's `timeout_us` (RX) or [`SocketOptions::tx_stall`] (TX). Everything is sized at
//! [`open`](rtdaq_core::traits::Engine::open) (a test with a counting allocator checks it).
//! Errors exist only on the cold path, as [`SocketError`], and name the config key to change.
//!
//! ## Quick start
//! ```no_run
//! use core::sync::atomic::AtomicU32;
//! use rtdaq_core::traits::{Engine, EngineArgs, QueueResources, RxQueue};
//! use rtdaq_core::{BufferPool, QueueCounters};
//! use rtdaq_engine_socket::SocketEngine;
//!
//! let config = rtdaq_config::load_file("configs/host-udp-rx-only.toml".as_ref()).unwrap();
//! let (mut mem, mut links) = (vec![0u8; 1024 * 65536], (0..1024).map(|_| AtomicU32::new(0)).collect::<Vec<_>>());
//! let pool = BufferPool::new(&mut mem, &mut links, 65536).unwrap();
//! let pools = [&pool];
//! let counters = QueueCounters::new();
//! let rx = [QueueResources { interface: 0, queue: 0, pools: &pools, counters: &counters, wants: Default::default() }];
//! let engine = SocketEngine::<64>::open(EngineArgs { config: &config, rx: &rx, tx: &[] }).unwrap();
//! let (mut queues, _) = engine.into_queues();
//! let mut burst = queues[0].new_burst();
//! loop {
//!     let n = queues[0].poll(&mut burst); // waits up to timeout_us for the first datagram
//!     // ... consume burst, then:
//!     burst.clear();
//!     # if n == 0 { break }
//! }
//! ```
//!
//! ## Burst capacity
//! [`SocketEngine<'a, N>`](SocketEngine) is generic over the burst capacity `N` (packets per
//! [`Burst`](rtdaq_core::Burst) / [`TxBatch`]); the default is [`MAX_BATCH`] = 1024, the
//! largest `batch_size` the config accepts (one `recvmmsg` takes at most 1024 messages).
//! A `Burst<'a, 1024>` is about 100 KiB inline, so a runtime that keeps many bursts may build
//! the engine with `N` = the largest `batch_size` of its config instead; a poll returns at
//! most `min(batch_size, N)` packets (GRO reads may add up to 64 datagrams each).
//!
//! ## Thread safety
//! [`SocketRx`] and [`SocketTx`] are `Send`: move each to its pinned I/O thread. They are not
//! `Sync`; each is used by one thread. TCP queues of one interface share a small table of
//! atomic descriptor slots (how accepted connections reach their queue); nothing else is
//! shared.
//!
//! ## Resource cleanup
//! Dropping a queue closes its sockets and returns the buffers it holds; a queue that saw
//! errors, GSO fallback or TCP connections logs a one-line summary when dropped (cold path).
//!
//! ## Unsafe code
//! Denied crate-wide except in `sys/` (raw calls → `io::Result` → safe RAII types), where
//! every block has a `// SAFETY:` comment.
#![deny(unsafe_code)]
#![deny(missing_docs)]

mod ctx;
mod engine;
mod error;
mod hwstamp;
mod options;
mod sockopt;
mod stats;
mod sys;
mod tcp_conn;
mod tcp_rx;
mod tcp_tx;
mod tx_burst;
mod txtime;
mod udp_rx;
mod udp_tx;

pub use engine::{SocketEngine, SocketRx, SocketTx};
pub use error::{Result, SocketError};
pub use options::SocketOptions;
pub use stats::{RxStats, TxStats};
pub use tx_burst::TxBatch;
pub use udp_rx::{GRO_MAX_SEGMENTS, GRO_MIN_BUFFER};
pub use udp_tx::GSO_MAX_SEGMENTS;

/// Default burst capacity `N` of [`SocketEngine`]: the largest `batch_size` the config
/// accepts (1024, also the most messages one `recvmmsg`/`sendmmsg` call takes).
pub const MAX_BATCH: usize = 1024;
