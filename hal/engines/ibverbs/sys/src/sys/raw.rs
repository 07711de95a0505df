//! Raw bindings, generated at build time by bindgen from Debian's rdma-core 44 headers
//! (`<infiniband/verbs.h>`, `<rdma/rdma_cma.h>`) and `csrc/shim.h`; no hand edits.
//!
//! The control path is libibverbs' and librdmacm's own functions; the per-packet fast
//! path, `static inline` in C, is the shim's `rtdaq_ibv_*` functions
//! (`rtdaq_ibv_post_send`, `rtdaq_ibv_post_recv`, `rtdaq_ibv_poll_cq`, ...).
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
