//! # rtdaq-runtime (being written)
#![forbid(unsafe_code)]

pub mod latency;
pub mod pacer;
pub mod report;
pub mod validator;
