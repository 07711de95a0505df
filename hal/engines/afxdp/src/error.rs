//! [`AfxdpError`]: every way [`AfxdpEngine::open`](crate::AfxdpEngine) can fail.
//!
//! Only the cold path builds these values. Each message names its cause, the config key to
//! change (or the privilege / limit / package) and the fix, e.g.
//! `interfaces[0].address = "veth9": no such interface in this network namespace (...)`.
//! The hot path never builds an error: it counts drops in the queue's `QueueCounters` and
//! events in its [`RxStats`](crate::RxStats) / [`TxStats`](crate::TxStats).

use std::io;

use rtdaq_netsys::KeyError;

/// `Result` with [`AfxdpError`].
pub type Result<T, E = AfxdpError> = std::result::Result<T, E>;

/// Why the AF_XDP engine could not open. `Display` names the config key to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AfxdpError {
    /// The config cannot run on this engine (another engine kind, a socket address, header
    /// data split, too many queues, ...).
    #[error(transparent)]
    Config(KeyError),
    /// The runtime handed over no or unusable buffers for a queue (wrong slot size, GPU
    /// memory, memory not page aligned, two pools where one UMEM needs one).
    #[error(transparent)]
    Resources(KeyError),
    /// The process lacks a capability AF_XDP and XDP need.
    #[error("engine.kind = \"afxdp\": the AF_XDP engine needs CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF (or CAP_SYS_ADMIN), but the process lacks {missing}; run as root, or grant them: `setcap cap_net_admin,cap_net_raw,cap_bpf,cap_ipc_lock+ep <binary>` (or use engine.kind = \"socket\", which needs no privilege)")]
    Privileges {
        /// The missing capabilities, comma-separated (`CAP_BPF, CAP_NET_RAW`).
        missing: String,
    },
    /// The interface does not exist (in this network namespace).
    #[error("{key} = \"{name}\": no such interface in this network namespace (`ip link show`); fix the name in {key}")]
    NoSuchInterface {
        /// `interfaces[i].address`.
        key: String,
        /// The name looked up.
        name: String,
    },
    /// A queue would bind to a NIC queue the interface does not have.
    #[error("{key}: {detail}")]
    QueueRange {
        /// `interfaces[i].rx_queues[j]` or `...tx_queues[j]`.
        key: String,
        /// The NIC queue and the channel count, and what to change.
        detail: String,
    },
    /// The interface's MTU makes frames larger than an AF_XDP frame holds.
    #[error("{key}: {detail}")]
    Mtu {
        /// `interfaces[i].mtu` (or `engine.afxdp.frame_size`).
        key: String,
        /// The sizes and the fix.
        detail: String,
    },
    /// `engine.afxdp.zero_copy = "on"` but the driver refused zero-copy.
    #[error("engine.afxdp.zero_copy = \"on\": interface {ifname} refused zero-copy AF_XDP ({source}); its driver has no XSK zero-copy support (veth and most virtual devices never have it): set engine.afxdp.zero_copy = \"auto\" (copy mode fallback) or \"off\"")]
    ZeroCopy {
        /// The interface.
        ifname: String,
        /// The bind error.
        #[source]
        source: io::Error,
    },
    /// Registering the UMEM hit the locked-memory limit.
    #[error("{key}: registering {bytes} B of buffers as AF_XDP UMEM failed ({source}): the locked-memory limit RLIMIT_MEMLOCK ({limit}) is too low for a process without CAP_IPC_LOCK; raise it (`ulimit -l unlimited`, systemd `LimitMEMLOCK=infinity`) or grant CAP_IPC_LOCK")]
    MemLock {
        /// The region key (`memory_regions[r]`).
        key: String,
        /// Bytes registered.
        bytes: u64,
        /// The current limit, in words.
        limit: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Creating, setting up or binding an AF_XDP socket failed.
    #[error("{key}: {detail}")]
    Socket {
        /// Config key of the queue.
        key: String,
        /// What failed, why, and what to change.
        detail: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Loading the XDP program, filling its maps or attaching it failed.
    #[error("{key}: {detail}")]
    Xdp {
        /// Config key of the interface (`interfaces[i].address`).
        key: String,
        /// What failed, why, and what to change.
        detail: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl AfxdpError {
    /// The config key the message names (`interfaces[0].address`, `engine.afxdp.zero_copy`,
    /// `engine.kind` for privileges, ...).
    pub fn key(&self) -> &str {
        match self {
            AfxdpError::Config(KeyError { key, .. })
            | AfxdpError::Resources(KeyError { key, .. })
            | AfxdpError::NoSuchInterface { key, .. }
            | AfxdpError::QueueRange { key, .. }
            | AfxdpError::Mtu { key, .. }
            | AfxdpError::MemLock { key, .. }
            | AfxdpError::Socket { key, .. }
            | AfxdpError::Xdp { key, .. } => key,
            AfxdpError::Privileges { .. } => "engine.kind",
            AfxdpError::ZeroCopy { .. } => "engine.afxdp.zero_copy",
        }
    }

    /// The underlying OS error, if any.
    pub fn os_error(&self) -> Option<&io::Error> {
        match self {
            AfxdpError::ZeroCopy { source, .. }
            | AfxdpError::MemLock { source, .. }
            | AfxdpError::Socket { source, .. }
            | AfxdpError::Xdp { source, .. } => Some(source),
            _ => None,
        }
    }
}
