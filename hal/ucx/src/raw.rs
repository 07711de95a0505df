//! Raw bindings, generated at build time by bindgen from Debian's UCX 1.13 headers
//! (`<ucp/api/ucp.h>`, `<ucs/type/status.h>`); no hand edits.
//!
//! UCX's `static inline` `ucp_init` is `ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, ..)`
//! here, and its pointer macros (`UCS_PTR_IS_ERR`, `UCS_PTR_IS_PTR`, `ucp_dt_make_contig`)
//! are Rust functions of the crate's result layer.
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
