//! # rtdaq-dpdk-sys: DPDK for rtdaq, from raw bindings to safe RAII types
//!
//! The FFI foundation of the DPDK engine (issue #5). It links Debian's (or any
//! pkg-config-visible) DPDK >= 22.11 and offers three layers (style guide §3.5):
//!
//! | layer | where | what |
//! |---|---|---|
//! | raw | [`raw`] | bindgen bindings (allowlisted control path) + the C shim `rtdaq_*` re-exporting DPDK's `static inline` fast path (`rte_eth_rx_burst`, `rte_eth_tx_burst`, mbuf alloc/free/data access, `rte_errno`) |
//! | result | `sys::result` (private) | status codes / `rte_errno` → [`Result`]`<_, `[`DpdkError`]`>`; the only place reading `rte_errno` |
//! | safe | crate root | [`Eal`] (once per process), [`Mempool`] (DPDK memory, or data buffers in [`ExtMem`]: external memory registered with `rte_extmem_register` + `rte_dev_dma_map`), [`Port`] (per-queue pools [`RxQueueConfig`], RSS [`RssConfig`], buffer split [`BufferSplit`], stats / xstats / [`LinkState`]) + [`RxQueue`] / [`TxQueue`], [`Mbuf`], [`MbufBurst`] |
//!
//! All `unsafe` code lives in the `sys` module; the crate root denies it.
//!
//! ## Quick start (no hugepages, no NIC: the `net_null` virtual device)
//! ```no_run
//! use rtdaq_dpdk_sys::{Eal, Mempool, MempoolConfig, MbufBurst, Port, PortConfig};
//!
//! # fn main() -> Result<(), rtdaq_dpdk_sys::DpdkError> {
//! let eal = Eal::init([
//!     "-l", "0", "--no-huge", "-m", "512", "--no-shconf", "--no-pci",
//!     "--vdev", "net_null0", "--log-level=lib.eal:notice",
//! ])?;
//! let pool = Mempool::new(eal, "rx_pool", &MempoolConfig::default())?;
//! let (port, mut rx, mut tx) = Port::open(eal, "net_null0", &PortConfig::default(), &pool)?;
//!
//! let mut burst = MbufBurst::with_capacity(32);     // the only allocation
//! let n = rx[0].rx_into(&mut burst);                // zero-copy: mbufs from the pool
//! for m in burst.iter() {
//!     let _frame: &[u8] = m.data();
//! }
//! burst.clear();                                    // one rte_pktmbuf_free_bulk
//!
//! assert!(pool.alloc_bulk(&mut burst, 8));
//! for m in burst.iter_mut() {
//!     m.write(&[0u8; 60])?;
//! }
//! let sent = tx[0].tx_from(&mut burst);             // the PMD owns what it accepted
//! println!("rx {n}, tx {sent}, {:?}", port.stats()?);
//! # Ok(()) }
//! ```
//!
//! ## Linking and PMDs
//! `build.rs` links what `pkg-config --libs libdpdk` lists (Debian: the `librte_*.so`
//! libraries; `--as-needed` keeps only those referenced). Poll-mode drivers (`net_null`,
//! `net_ring`, `net_tap`, ...) and the mempool driver are **not** linked: because
//! `librte_eal` is a shared library, `rte_eal_init` loads every `.so` of its compiled-in
//! plugin directory (Debian: `/usr/lib/<triplet>/dpdk/pmds-23.0`, exposed as
//! [`PMD_DIR`]). `-d <dir or .so>` adds more.
//!
//! ## Thread safety
//! [`Eal`] is `&'static` and `Sync`. [`Mempool`] is `Send + Sync` (shared by `Arc`).
//! [`RxQueue`] / [`TxQueue`] are `Send`: move each to its one owner thread; the burst
//! methods take `&mut self`. [`Mbuf`] and [`MbufBurst`] are `Send`.
//!
//! ## Resource cleanup
//! - [`Mbuf`]: `rte_pktmbuf_free` on drop; [`MbufBurst`]: `rte_pktmbuf_free_bulk` of what it
//!   still holds on drop/clear. Mbufs handed to `tx_*` belong to the PMD.
//! - [`Port`]: stopped and closed when the `Port` *and* all its queues are dropped.
//! - [`Mempool`]: freed when the last `Arc` goes (ports hold one), unless mbufs of it are
//!   still alive (then leaked, never freed under them, with its [`ExtMem`]).
//! - [`ExtMem`]: DMA-unmapped and unregistered when the last `Arc` goes (its pools hold one);
//!   [`ExtMem::from_pool`] gives the `BufferPool`'s slots back then.
//! - [`Eal`]: never torn down (`rte_eal_cleanup` is not called; the process exit frees it).
//!
//! ## Hot path
//! `rx_burst`, `rx_into`, `tx_burst`, `tx_from`, [`Mempool::alloc`],
//! [`Mempool::alloc_bulk`], [`MbufBurst::clear`] and the [`Mbuf`] accessors never allocate
//! (`tests/no_alloc.rs` proves it with a counting allocator), never block, never log.
#![deny(missing_docs)]
#![deny(unsafe_code)]

mod error;
mod flow;
mod sys;

pub use error::{DpdkError, Result};
pub use flow::{FlowAction, FlowItem, FlowSpec};
pub use sys::eal::Eal;
pub use sys::extmem::{DmaMapping, ExtMem, GPU_PAGE};
pub use sys::flow::FlowRule;
pub use sys::mbuf::{Mbuf, MbufBurst};
pub use sys::mempool::{page_size, Mempool, MempoolConfig, MempoolFlags, UmemFit};
pub use sys::port::{
    BufferSplit, OpenPort, Port, PortConfig, PortInfo, PortStats, RssConfig, RssState, RxQueue,
    RxQueueConfig, SplitAt, TxQueue,
};
pub use sys::port_info::LinkState;
pub use sys::raw;
pub use sys::txtime::TimestampField;

/// The PMD plugin directory found at build time (`<libdir>/dpdk/pmds-<ABI>`; empty if none).
pub const PMD_DIR: &str = env!("RTDAQ_DPDK_PMD_DIR");

/// The DPDK version built against (`pkg-config --modversion libdpdk`).
pub const DPDK_VERSION: &str = env!("RTDAQ_DPDK_VERSION");
