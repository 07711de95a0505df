//! # rtdaq-runtime: the appliance runtime
//!
//! Turns a validated deployment config and one packet engine into a running appliance:
//!
//! | where | what |
//! |---|---|
//! | [`run`](mod@run) (`run/`) | one run as typed steps: plan → prepared (memory, GPU stages, sinks, chains) → parked (one pinned `SCHED_FIFO` thread per queue) → running (engine open, queues fed, watchers) → stopped (drain, join, results) |
//! | [`queue`] (`queue/`) | the one RX consumer loop of every queue (direct or indirect, any chain of stages), the unwrap of each packet, how threads rest, each queue's counters ([`queue::stats`]) |
//! | [`stages`] (`stages/`) | the one `Stage` trait and the consumer's stages: validate, record, GPU; `chain.rs`, where the next stage goes |
//! | [`record`] (`record/`) | the record stage's sinks, writer threads, shared-sink mergers, indexes (pcap / raw / DADA) |
//! | [`observe`] (`observe/`) | the live line, `/metrics` and its HTTP server, systemd notifications, NIC counters, process facts, the report and the exit code |
//! | [`memory`], [`gpu_region`], [`gpu_hook`], [`membership`] | set-up: regions, pools and counters; GPU regions and stages (compiled with and without `gpu`); multicast memberships of raw interfaces |
//! | `threads`, `launch`, `launcher`, [`replay`], [`generator`], [`pacer`] | the RX I/O thread of an indirect queue, the TX generator (software pacer or launch times) and replay, payloads, pacing and clocks |
//! | [`validator`], [`live_streams`], [`latency`] | the validate stage's checks and the live tables it publishes |
//! | [`stall`], `thread_kind`, `test_hooks` | each thread's turns for the watchdog; the faults tests inject (feature `test-hooks`, never in a release build) |
//!
//! Data path rules: after set-up the queue threads never allocate (proved by
//! `rtdaq_platform::alloc_audit` and reported as `io_thread_allocations`), never log, never
//! block on each other: a full ring or an empty pool is a counted drop.
#![forbid(unsafe_code)]

pub mod dada_ring;
pub mod dump;
pub mod egress;
pub mod error;
pub mod generator;
pub mod gpu_hook;
pub mod gpu_region;
pub mod latency;
mod launch;
mod launcher;
pub mod live_streams;
pub mod membership;
pub mod memory;
pub mod observe;
pub mod pacer;
pub mod product_sinks;
pub mod queue;
pub mod record;
pub mod replay;
pub mod run;
pub mod stages;
pub mod stall;
#[cfg(feature = "test-hooks")]
pub mod test_hooks;
#[cfg(test)]
mod test_support;
mod thread_kind;
mod threads;
pub mod validator;

pub use error::RuntimeError;
pub use generator::GenTotals;
/// The observing side at the crate root, where the app and the tests name it.
pub use observe::{gpu_report, http, metrics, nic, notify, outcome, procfs, report, stats};
pub use run::{run, run_with_stats, Identity, RunOptions, RunResults, StatsHook};
