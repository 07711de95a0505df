//! # rtdaq-runtime: the appliance runtime
//!
//! Turns a validated deployment config and one packet engine into a running appliance:
//!
//! | module | what |
//! |---|---|
//! | [`memory`] | preallocates regions, buffer pools and counters (once, before any thread starts) |
//! | [`run`](mod@run) | starts one pinned `SCHED_FIFO` thread per queue (+ a consumer per indirect RX queue), stops on duration or SIGINT/SIGTERM, drains |
//! | `threads` | queue thread placement and rest; the RX I/O thread of an indirect queue; the TX generator |
//! | `queue` | the one RX consumer loop of every queue (direct or indirect, any chain of stages) and the unwrap of each packet |
//! | [`stats`] | live counters once a second |
//! | [`stall`] | the longest loop turn of each queue thread, CPU steal during the run |
//! | [`stages`] | the one `Stage` trait and the RX consumer's ordered stages (validate, record, GPU), composed statically |
//! | [`record`] | the `record` stage: pcap / raw / DADA files, writer threads, indexes |
//! | [`replay`] | the generator's packets from a pcap file (`--replay`) |
//! | [`validator`] | sequence, payload and latency checks on received packets; the generator's payloads |
//! | [`pacer`] | send-rate pacing and clocks |
//! | [`latency`] | fixed-size latency histogram |
//! | [`nic`] | NIC counters of the interfaces' devices (ethtool and kernel statistics): start/end deltas, pause-frame and drop warnings, for the report and `/metrics` |
//! | [`http`] | the metrics endpoint's HTTP server: one acceptor and two workers, started off the queue cores, requests parsed by `httparse` |
//! | [`procfs`] | process facts for `/metrics`: each thread's policy, priority and CPUs, memory locked |
//! | [`report`] | the final report (human and JSON) |
//! | [`outcome`] | builds the report and the exit code from a finished run |
//! | [`generator`] | sequence-numbered, pattern-filled payloads |
//! | [`gpu_report`] | GPU stage counters and the report's `gpu` section |
//! | `test_hooks` | (feature `test-hooks`, never in a release build) faults the tests inject: a stalled thread of each kind |
//!
//! Data path rules: after set-up the queue threads never allocate (proved by
//! `rtdaq_platform::alloc_audit` and reported as `io_thread_allocations`), never log, never
//! block on each other: a full ring or an empty pool is a counted drop.
#![forbid(unsafe_code)]

pub mod error;
pub mod generator;
pub mod gpu_hook;
pub mod gpu_region;
pub mod gpu_report;
pub mod http;
pub mod latency;
pub mod live_streams;
pub mod membership;
pub mod memory;
pub mod metrics;
pub mod nic;
pub mod notify;
pub mod outcome;
pub mod pacer;
pub mod procfs;
pub mod queue;
pub mod record;
pub mod replay;
pub mod report;
pub mod run;
pub mod stages;
pub mod stall;
pub mod stats;
#[cfg(feature = "test-hooks")]
pub mod test_hooks;
mod thread_kind;
mod threads;
pub mod validator;

pub use error::RuntimeError;
pub use generator::GenTotals;
pub use run::{run, run_with_stats, Identity, RunOptions, RunResults, StatsHook};
