//! The runtime's error type (cold path only: start-up and teardown).

use rtdaq_core::PoolError;

/// Why a run could not start or finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A memory region, a real-time setting or another platform facility failed.
    #[error(transparent)]
    Platform(#[from] rtdaq_platform::PlatformError),
    /// A buffer pool could not be laid over its region.
    #[error("memory region `{region}`: cannot build its buffer pool: {reason} (check buf_size and buf_count in memory_regions)")]
    Pool {
        /// Region name.
        region: String,
        /// Why.
        reason: PoolError,
    },
    /// The engine failed to open.
    #[error("engine: {0}")]
    Engine(String),
    /// A queue thread could not be started or set up.
    #[error("{queue}: {message}")]
    Thread {
        /// Which queue (`interfaces[i].rx_queues[q]`).
        queue: String,
        /// What failed.
        message: String,
    },
    /// The generator's frame headers could not be built (raw engines).
    #[error("generator: {0}")]
    Generator(String),
    /// The GPU data path could not start: no CUDA driver, not enough GPU memory, a kernel
    /// that did not compile, a binary built without the `gpu` feature, ...
    #[error("{0}")]
    Gpu(String),
    /// A recorder's directory or file could not be set up (before any packet moved).
    #[error("{key}: {path}: {message}")]
    Record {
        /// Config key (`recorders[0].directory`, `--output-dir`).
        key: String,
        /// The path.
        path: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// An egress sink cannot start (its socket, its destination).
    #[error("{key}: {message}")]
    Egress {
        /// Config key (`egress[0].destinations[1]`).
        key: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// A triggered dump cannot start (its history, directory, trigger).
    #[error("{key}: {message}")]
    Dump {
        /// Config key (`dumps[0].udp_trigger`).
        key: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// The clock check (`[time]`) refuses the start: the clock is not synchronised, or
    /// `ptp4l` does not answer.
    #[error("{key}: {message}")]
    Time {
        /// Config key (`time.require_sync`, `time.ptp4l`).
        key: String,
        /// What `ptp4l` said and what to do.
        message: String,
    },
    /// The replay file cannot be replayed.
    #[error("replay: {0}")]
    Replay(String),
    /// The kernel refused a multicast membership of a raw-engine interface.
    #[error("{key}: {message}")]
    Multicast {
        /// Config key (`interfaces[i].multicast_groups[k]`).
        key: String,
        /// What failed and what to do.
        message: String,
    },
    /// The metrics endpoint could not start (`run.metrics`, `--metrics`).
    #[error("metrics endpoint {addr}: {message}")]
    Metrics {
        /// The address asked for.
        addr: String,
        /// What failed and what to do.
        message: String,
    },
    /// Signal handlers could not be installed.
    #[error("cannot install the SIGINT/SIGTERM handlers: {0}")]
    Signals(#[source] std::io::Error),
    /// The report could not be written.
    #[error("cannot write the report to {path}: {source}")]
    Report {
        /// Destination.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}
