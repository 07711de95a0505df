//! Raw bindings, generated at build time by bindgen from Debian's DPDK headers
//! (`pkg-config --cflags libdpdk`) and `csrc/shim.h`; no hand edits.
//!
//! The control path is DPDK's own functions (`rte_eal_init`, `rte_eth_dev_configure`, ...,
//! linked from `librte_*.so`); the per-packet fast path, `static inline` in C, is the
//! shim's `rtdaq_*` functions (`rtdaq_rx_burst`, `rtdaq_tx_burst`,
//! `rtdaq_pktmbuf_free_bulk`, `rtdaq_pktmbuf_alloc_bulk`, `rtdaq_mbuf_data`, ...).
//! `rte_mbuf` and `rte_mempool` are opaque: only the shim touches their fields.
//!
//! Everything here is `unsafe` to call; the safe wrappers of the crate are the supported
//! API, this module is the escape hatch for what they do not cover yet.
#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    missing_docs,
    unnecessary_transmutes,
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks
)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
