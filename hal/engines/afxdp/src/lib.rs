//! AF_XDP engine (work in progress).
#![deny(unsafe_code)]
#![allow(dead_code, missing_docs)]
mod sys;
