//! AF_PACKET engine (work in progress).
#![deny(unsafe_code)]
#![deny(missing_docs)]
pub mod bpf;
