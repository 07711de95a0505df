//! The deployment config and build identity embedded by `build.rs`.
include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
