//! Watching a run and reporting it: what reads the counters the queue threads publish,
//! never writing to the data path.
//!
//! | module | what |
//! |---|---|
//! | [`stats`] | the live line once a second |
//! | [`metrics`] | `/metrics` and `/status` (Prometheus text, JSON), `--status-file` |
//! | [`http`] | the metrics endpoint's HTTP server (one acceptor, two workers, off the queue cores) |
//! | [`notify`] | systemd `READY=1`, `STATUS=`, `WATCHDOG=1` (only while every queue thread turns) |
//! | [`nic`] | NIC and port counters over the run: start/end deltas, pause-frame and drop warnings |
//! | [`procfs`] | process facts for `/metrics`: each thread's policy, priority and CPUs, memory locked |
//! | [`report`] | the final report (human and JSON); each section is the type of the part it describes |
//! | [`gpu_report`] | the GPU stage's counters and its report section |
//! | [`outcome`] | builds the report and the exit code from a finished run |

pub mod gpu_report;
pub mod http;
pub mod metrics;
pub mod nic;
pub mod notify;
pub mod outcome;
pub mod procfs;
pub mod report;
pub mod stats;
pub mod time;
