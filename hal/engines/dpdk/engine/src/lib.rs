//! # rtdaq-engine-dpdk: the packet engine over DPDK poll-mode drivers
//!
//! The engine of `engine.kind = "dpdk"`: raw Ethernet frames through DPDK ports (NICs by
//! PCI address, or virtual devices such as `net_ring0`, `net_null0`,
//! `net_af_packet0,iface=X`). It implements [`rtdaq_core::traits::Engine`] with
//! [`DpdkEngine`] (`NAME = "dpdk"`, `FRAMES = true`), whose queues are [`DpdkRx`] (fills
//! [`DpdkRxBurst`]s: one mbuf per frame, segment 0 from the Ethernet header, a second one
//! with header-data split) and
//! [`DpdkTx`] (sends [`DpdkTxBurst`]s of whole frames built in mbufs). It is built on the
//! RAII layer of [`rtdaq_dpdk_sys`]; this crate has no `unsafe` code.
//!
//! ## Opening
//! [`Engine::open`](rtdaq_core::traits::Engine::open) checks the config (engine kind,
//! regions, queues) before touching DPDK, then initialises the EAL once per process with
//! `engine.dpdk.eal_args` + `-l <queue cores and main core>` + `--main-lcore` + `-a <BDF>`
//! per PCI interface + `--file-prefix rtdaq-<pid>` (unless `eal_args` name a prefix or
//! `--in-memory`: two rtdaq processes never collide), resolves every `interfaces[i].address`
//! to a port, checks RSS and buffer split against each PMD, creates one mbuf pool per memory
//! region the queues use (over the region's memory, below), and configures and starts each
//! port: one pool per RX queue, RSS over several RX queues (`port_setup.rs`: hash IPv4/UDP
//! with the classifier's symmetric key, RETA over the `rss` flows' queues or all of them; a
//! PMD without RSS is refused naming `interfaces[i].rx_queues`, except `net_af_packet` /
//! `net_af_xdp`, which spread by themselves, and `net_tap`, which spreads by `rte_flow`),
//! header-data split as DPDK buffer split (`hds_split`; refused naming the key when the PMD
//! lacks it). The MAC, link and RSS of each port are logged.
//!
//! ## Memory: the runtime's regions, handed whole to DPDK
//! The mbuf **data buffers live in the runtime's preallocated memory regions**: for every
//! region a queue names, the engine takes the region's [`BufferPool`](rtdaq_core::BufferPool)
//! from [`QueueResources::pools`](rtdaq_core::traits::QueueResources) *whole*
//! ([`rtdaq_dpdk_sys::ExtMem::from_pool`]: every slot taken, so neither the runtime nor
//! anyone else can hand out the same bytes while DPDK owns them), registers its memory with
//! `rte_extmem_register` at the region's page size (IOVA = VA in IOVA-as-VA mode),
//! DMA-maps it for every port's device (`rte_dev_dma_map`; a virtual device answering
//! `ENOTSUP` needs none, logged once per region) and creates a pinned-external-buffer mbuf
//! pool over it (`rte_pktmbuf_pool_create_extbuf`: `buf_size` + 128 B headroom per buffer,
//! rounded up to 64 B, as many as the region holds). Only the mbuf headers are DPDK memory.
//! **Exception:** a `net_af_xdp` port builds its AF_XDP UMEM over its pool's own memory, so
//! its regions get a DPDK-owned pool whose power-of-two mbufs tile the pages exactly (DPDK
//! 22.11's PMD sizes the UMEM as if the mbufs lay back to back; with DPDK's default layout
//! the mbufs beyond it were lost from the fill ring and the port stopped receiving), checked
//! at open.
//! **Design decision:** a region named by a DPDK queue belongs to DPDK for the run; the
//! runtime does not use those pools itself (it only hands pools to engines), so a region
//! cannot be shared between DPDK and anything else. The slots go back to the pool once the
//! ports are closed, the mbuf pools freed and the memory unregistered. The pools must be
//! `'static` (the runtime's are), hence `DpdkEngine<'static>`. `device` (GPU) regions are
//! refused until the GPU issue registers them through the same
//! [`ExtMem`](rtdaq_dpdk_sys::ExtMem) API (`register(addr, len, page_size)` + `dma_map`).
//!
//! ## Port stats
//! [`DpdkEngine::stats_handle`] is the engine's
//! [`EngineStats`](rtdaq_core::traits::EngineStats): per-port `rte_eth_stats`, non-zero
//! xstats, link and MAC, read by the runtime after the run for the report.
//!
//! ## Counting
//! Every frame not delivered is counted once in the queue's
//! [`QueueCounters`](rtdaq_core::QueueCounters): RX `malformed`, `no_flow`, `flow_drop`,
//! `truncated` (more mbuf segments than configured); TX `malformed`, `too_large`, `ring_full`. RX queues count
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
//! use std::sync::atomic::AtomicU32;
//! use rtdaq_core::traits::{Engine, EngineArgs, QueueResources, RxBurst, RxQueue};
//! use rtdaq_core::{BufferPool, QueueCounters};
//! use rtdaq_engine_dpdk::DpdkEngine;
//! use rtdaq_platform::memory::{Region, RegionSpec};
//!
//! // One RX queue on region 0 (the runtime does this for every region and queue).
//! let config = Box::leak(Box::new(rtdaq_config::load_file("dpdk.toml".as_ref()).unwrap()));
//! let r = &config.memory_regions[0];
//! let region = Box::leak(Box::new(
//!     Region::allocate(&RegionSpec::host(&r.name, r.footprint() as usize)).unwrap(),
//! ));
//! let links: &'static mut [AtomicU32] =
//!     Box::leak((0..r.buf_count).map(|_| AtomicU32::new(0)).collect());
//! let stride = r.stride() as usize;
//! let mem = &mut region.as_mut_slice()[..stride * r.buf_count as usize];
//! let pool: &'static BufferPool<'static> =
//!     Box::leak(Box::new(BufferPool::new(mem, links, stride).unwrap()));
//! let counters = Box::leak(Box::new(QueueCounters::new()));
//! let pools: &'static [&'static BufferPool<'static>] = Box::leak(Box::new([pool]));
//! let rx = Box::leak(Box::new([QueueResources { interface: 0, queue: 0, pools, counters, wants: Default::default() }]));
//! let engine = DpdkEngine::open(EngineArgs { config, rx, tx: &[] }).unwrap();
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
//! queue (or the [`rtdaq_dpdk_sys::Port`] handle, or the [`DpdkPortStats`] handle) is
//! dropped; then its mbuf pools are freed, their memory DMA-unmapped and unregistered, and
//! the region's slots given back; a closed vdev port cannot be
//! reopened in the same process, and the EAL is never torn down.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod burst;
mod eal;
mod engine;
mod error;
mod flow;
mod launch;
mod memory;
mod port_setup;
mod rx;
mod stats;
mod tx;

use std::time::Duration;

pub use burst::{DpdkRxBurst, DpdkTxBurst, InGpu};
pub use eal::{eal_args, file_prefix, vdev_for_netdev};
pub use engine::{DpdkEngine, InterfaceInfo};
pub use error::{DpdkEngineError, Result};
pub use flow::{describe, plan_interface, port_blocks, translate, PlannedFlow, MAX_EXPANSION};
pub use port_setup::SELF_SPREADING;
pub use rx::{DpdkRx, RxStats, MODERATION, SLEEP_STEP};
pub use stats::DpdkPortStats;
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
