//! # rtdaq-engine-dpdk: the packet engine over DPDK poll-mode drivers
//!
//! The engine of `engine.kind = "dpdk"`: raw Ethernet frames through DPDK ports (NICs by
//! PCI address, or virtual devices such as `net_ring0`, `net_null0`,
//! `net_af_packet0,iface=X`). It implements [`rtdaq_core::traits::Engine`] with
//! [`DpdkEngine`] (`NAME = "dpdk"`, `FRAMES = true`), whose queues are [`DpdkRx`] (fills
//! [`DpdkRxBurst`]s: one mbuf per frame, one segment from the Ethernet header) and
//! [`DpdkTx`] (sends [`DpdkTxBurst`]s of whole frames built in mbufs). It is built on the
//! RAII layer of [`rtdaq_dpdk_sys`]; this crate has no `unsafe` code.
//!
//! ## Opening
//! [`Engine::open`](rtdaq_core::traits::Engine::open) checks the config (engine kind,
//! regions, queues) before touching DPDK, then initialises the EAL once per process with
//! `engine.dpdk.eal_args` + `-l <queue cores and main core>` + `--main-lcore` + `-a <BDF>`
//! per PCI interface, resolves every `interfaces[i].address` to a port, creates one mbuf
//! pool per memory region the queues use, and configures and starts each port with its
//! RX/TX queue counts.
//!
//! ## Memory: DPDK's own, not the runtime's regions
//! The mempools live in DPDK memory (hugepages, or anonymous memory with `--no-huge`),
//! sized from the region (`buf_count` mbufs with `buf_size` bytes of data room after DPDK's
//! headroom). The runtime's preallocated [`BufferPool`](rtdaq_core::BufferPool)s in
//! [`QueueResources`](rtdaq_core::traits::QueueResources) are **not used**: the memory is
//! allocated twice, and pinned / GPU regions are refused (external memory registration,
//! `rte_extmem_register`, is not done).
//!
//! ## Counting
//! Every frame not delivered is counted once in the queue's
//! [`QueueCounters`](rtdaq_core::QueueCounters): RX `malformed`, `no_flow`, `flow_drop`,
//! `truncated` (chained mbufs); TX `malformed`, `too_large`, `ring_full`. RX queues count
//! delivered frames and TX queues accepted frames (`record_rx_burst`): the runtime must not
//! count them again.
//!
//! ## What this crate must not do
//! `poll`, `reserve` and `send` never allocate heap memory, never log and never block
//! longer than the queue's `timeout_us` (RX) or [`DpdkOptions::tx_stall`] (TX); a test with
//! a counting allocator checks it.
//!
//! ## Quick start
//! ```no_run
//! use rtdaq_core::traits::{Engine, EngineArgs, QueueResources, RxBurst, RxQueue};
//! use rtdaq_core::{BufferPool, QueueCounters};
//! use rtdaq_engine_dpdk::DpdkEngine;
//!
//! let config = rtdaq_config::load_file("dpdk.toml".as_ref()).unwrap();
//! let counters = QueueCounters::new();
//! let rx = [QueueResources { interface: 0, queue: 0, pools: &[], counters: &counters }];
//! let engine = DpdkEngine::open(EngineArgs { config: &config, rx: &rx, tx: &[] }).unwrap();
//! let (mut queues, _) = engine.into_queues();
//! let mut burst = queues[0].new_burst();
//! let n = queues[0].poll(&mut burst);
//! // ... burst.segment(i, 0) is frame i from its Ethernet header; then:
//! burst.clear();
//! ```
//!
//! ## Thread safety
//! [`DpdkRx`], [`DpdkTx`] and the bursts are `Send`: move each queue to its pinned I/O
//! thread. Those threads need not be EAL lcores (DPDK's burst and mempool calls work from
//! any thread; non-EAL threads simply use no mempool cache).
//!
//! ## Resource cleanup
//! Bursts free their mbufs on `clear` and drop. A port is stopped and closed when its last
//! queue (or the [`rtdaq_dpdk_sys::Port`] handle) is dropped; a closed vdev port cannot be
//! reopened in the same process, and the EAL is never torn down.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod burst;
mod eal;
mod engine;
mod error;
mod rx;
mod tx;

use std::time::Duration;

pub use burst::{DpdkRxBurst, DpdkTxBurst};
pub use eal::{eal_args, vdev_for_netdev};
pub use engine::{DpdkEngine, InterfaceInfo};
pub use error::{DpdkEngineError, Result};
pub use rx::{DpdkRx, RxStats, SLEEP_STEP};
pub use tx::{DpdkTx, TxStats};

/// Tuning of the DPDK engine beyond the deployment config. [`Default`] is what
/// [`Engine::open`](rtdaq_core::traits::Engine::open) uses.
///
/// `#[non_exhaustive]`: build it with `DpdkOptions::default()` and set fields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DpdkOptions {
    /// TX: longest a `send` retries frames the PMD did not take before freeing them and
    /// counting them `ring_full` (default 1 ms).
    pub tx_stall: Duration,
}

impl Default for DpdkOptions {
    fn default() -> Self {
        DpdkOptions {
            tx_stall: Duration::from_millis(1),
        }
    }
}
