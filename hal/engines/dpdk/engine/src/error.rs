//! [`DpdkEngineError`]: every way [`DpdkEngine::open`](crate::DpdkEngine) can fail.
//!
//! Only the cold path builds these values. Each message names the config key to change and
//! the fix; DPDK failures keep the [`rtdaq_dpdk_sys::DpdkError`] as their source. The hot
//! path never builds an error: it counts drops in the queue's `QueueCounters`.

use rtdaq_dpdk_sys::DpdkError;

/// `Result` with [`DpdkEngineError`].
pub type Result<T, E = DpdkEngineError> = std::result::Result<T, E>;

/// Why the DPDK engine could not open. `Display` starts with the config key to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DpdkEngineError {
    /// The config cannot run on this engine (another engine kind, header-data split, GPU
    /// memory, a buffer size DPDK cannot hold, ...).
    #[error("{key}: {detail}")]
    Config {
        /// Config key to change.
        key: String,
        /// What is wrong and how to fix it.
        detail: String,
    },
    /// `rte_eal_init` failed (or the EAL of this process was initialised with other
    /// arguments).
    #[error("engine.dpdk.eal_args: DPDK EAL init with {args:?} failed: {source}")]
    Eal {
        /// The full argument list rtdaq derived from the config (without `argv[0]`).
        args: Vec<String>,
        /// The DPDK error.
        #[source]
        source: Box<DpdkError>,
    },
    /// The interface's address names no DPDK port.
    #[error("{key} = \"{name}\": no DPDK port of that name (ports present: {present:?}); {hint}")]
    NoSuchPort {
        /// `interfaces[i].address`.
        key: String,
        /// The address looked up.
        name: String,
        /// Names of the ports the EAL created.
        present: Vec<String>,
        /// How to fix it.
        hint: String,
    },
    /// Creating the mbuf pool of a memory region failed.
    #[error("{key}: creating its DPDK mbuf pool failed: {source}")]
    Mempool {
        /// `memory_regions[r]`.
        key: String,
        /// The DPDK error.
        #[source]
        source: Box<DpdkError>,
    },
    /// Configuring or starting a port failed.
    #[error("{key} (DPDK port \"{port}\"): {source}")]
    Port {
        /// `interfaces[i]`.
        key: String,
        /// The port name.
        port: String,
        /// The DPDK error.
        #[source]
        source: Box<DpdkError>,
    },
    /// A flow could not become an `rte_flow` rule with `engine.dpdk.flow_offload =
    /// "hardware"` (software-only match, or the PMD refused it).
    #[error("{key} ({rule}) on DPDK port {port}: {detail}")]
    FlowOffload {
        /// `flows[k]` or `interfaces[i].default_action`.
        key: String,
        /// The flow in config terms (`id 1: udp_dst=5000 -> rx_queues[1]`).
        rule: String,
        /// The port name and its PMD (`"net_tap0" (PMD net_tap)`).
        port: String,
        /// Why, and what to do.
        detail: String,
        /// The PMD's refusal, when it was one.
        #[source]
        source: Option<Box<DpdkError>>,
    },
}

impl DpdkEngineError {
    /// The config key to change (`interfaces[0].address`, `engine.dpdk.eal_args`,
    /// `memory_regions[1]`, ...).
    pub fn key(&self) -> &str {
        match self {
            DpdkEngineError::Config { key, .. }
            | DpdkEngineError::NoSuchPort { key, .. }
            | DpdkEngineError::Mempool { key, .. }
            | DpdkEngineError::Port { key, .. }
            | DpdkEngineError::FlowOffload { key, .. } => key,
            DpdkEngineError::Eal { .. } => "engine.dpdk.eal_args",
        }
    }

    pub(crate) fn config(key: impl Into<String>, detail: impl Into<String>) -> Self {
        DpdkEngineError::Config {
            key: key.into(),
            detail: detail.into(),
        }
    }
}
