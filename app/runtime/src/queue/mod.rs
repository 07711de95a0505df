//! What runs on a queue's consumer thread: the one consumer loop (`consume`) and the
//! unwrap that turns each burst's packets into what the stages see (`unwrap`), and each
//! queue's counters ([`stats`]).

pub(crate) mod consume;
pub(crate) mod rest;
pub mod stats;
pub(crate) mod unwrap;
