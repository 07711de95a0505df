//! [`SocketError`]: every way [`SocketEngine::open`](crate::SocketEngine) can fail.
//!
//! Only the cold path builds these values. Each message names the config key to change, in
//! the form `interfaces[0].address = "udp://127.0.0.1:5000": address in use — ...; pick another
//! port in interfaces[0].address`. The hot path never builds an error: it counts drops in the
//! queue's `QueueCounters` and events in its [`RxStats`](crate::RxStats) /
//! [`TxStats`](crate::TxStats).

use std::io;

use rtdaq_netsys::{KeyError, OsError};
use std::time::Duration;

use rtdaq_config::model::{SocketUri, Transport};

use crate::sys::consts::{
    EACCES, EADDRINUSE, EADDRNOTAVAIL, ECONNREFUSED, ECONNRESET, EHOSTUNREACH, ENETUNREACH, EPERM,
    ETIMEDOUT,
};

/// `Result` with [`SocketError`].
pub type Result<T, E = SocketError> = std::result::Result<T, E>;

/// Why the socket engine could not open. `Display` names the config key to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SocketError {
    /// The config cannot run on this engine (another engine kind, a non-socket address).
    #[error(transparent)]
    Config(KeyError),
    /// The runtime handed over no (or unusable) buffers or counters for a queue.
    #[error(transparent)]
    Resources(KeyError),
    /// `socket()` failed (e.g. the file-descriptor limit).
    #[error("{key} = \"{uri}\": cannot create a socket ({source}); raise the file-descriptor limit (`ulimit -n`) or use fewer queues/connections")]
    Create {
        /// Config key of the interface address.
        key: String,
        /// The address.
        uri: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A `setsockopt` failed.
    #[error(transparent)]
    SetOption(OsError),
    /// `bind()` failed: address in use, permission denied, no such local address, ...
    #[error("{key} = \"{uri}\": {detail}")]
    Bind {
        /// Config key of the interface address.
        key: String,
        /// The address.
        uri: String,
        /// Why, and what to change.
        detail: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// `listen()` failed.
    #[error("{key} = \"{uri}\": {detail}")]
    Listen {
        /// Config key of the interface address.
        key: String,
        /// The address.
        uri: String,
        /// Why, and what to change.
        detail: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A TCP client could not connect, after bounded retries.
    #[error("{key} = \"{uri}\": {detail}")]
    Connect {
        /// Config key of the interface address.
        key: String,
        /// The address.
        uri: String,
        /// Attempts made.
        attempts: u32,
        /// Why, and what to change.
        detail: String,
        /// The last OS error.
        #[source]
        source: io::Error,
    },
    /// Reading socket state back (`getsockname`, `getsockopt`) failed.
    #[error(transparent)]
    Query(OsError),
}

impl SocketError {
    /// The config key the message names (`interfaces[0].address`, `engine.socket.rcvbuf`, ...).
    pub fn key(&self) -> &str {
        match self {
            SocketError::Config(KeyError { key, .. })
            | SocketError::Resources(KeyError { key, .. })
            | SocketError::Create { key, .. }
            | SocketError::SetOption(OsError { key, .. })
            | SocketError::Bind { key, .. }
            | SocketError::Listen { key, .. }
            | SocketError::Connect { key, .. }
            | SocketError::Query(OsError { key, .. }) => key,
        }
    }

    /// The underlying OS error, if any.
    pub fn os_error(&self) -> Option<&io::Error> {
        match self {
            SocketError::Create { source, .. }
            | SocketError::SetOption(OsError { source, .. })
            | SocketError::Bind { source, .. }
            | SocketError::Listen { source, .. }
            | SocketError::Connect { source, .. }
            | SocketError::Query(OsError { source, .. }) => Some(source),
            SocketError::Config(..) | SocketError::Resources(..) => None,
        }
    }
}

/// `ss` flag for a transport's listening sockets.
fn ss_flag(t: Transport) -> &'static str {
    match t {
        Transport::Udp => "-ulpn",
        Transport::Tcp | Transport::Rdma => "-tlpn",
    }
}

/// Why `bind`/`listen` on `uri` failed and what to change (cold path).
pub(crate) fn explain_bind(e: &io::Error, key: &str, uri: &SocketUri, multi_queue: bool) -> String {
    match e.raw_os_error() {
        Some(EADDRINUSE) => {
            let also = if multi_queue {
                "; the RX queues of one interface share the port only with engine.socket.reuseport = true"
            } else {
                ""
            };
            format!(
                "address in use ({e}) — another process holds the port (`ss {} 'sport = :{}'`); pick another port in {key}{also}",
                ss_flag(uri.transport),
                uri.port
            )
        }
        Some(EACCES) | Some(EPERM) if uri.port < 1024 => format!(
            "permission denied ({e}) — port {} is below 1024 and needs root or CAP_NET_BIND_SERVICE (or a lower sysctl net.ipv4.ip_unprivileged_port_start); pick a port ≥ 1024 in {key}",
            uri.port
        ),
        Some(EACCES) | Some(EPERM) => format!(
            "permission denied ({e}) — a security policy (SELinux, AppArmor, seccomp) forbids this socket; allow it or change {key}"
        ),
        Some(EADDRNOTAVAIL) => format!(
            "no such interface/address ({e}) — {} is not assigned to any local interface (`ip -4 addr`); use a local address, or 0.0.0.0 for all, in {key}",
            uri.ip
        ),
        _ => format!("cannot bind ({e}); check {key}"),
    }
}

/// Why a TCP client could not reach `uri` after `attempts` over `elapsed` (cold path).
pub(crate) fn explain_connect(
    e: &io::Error,
    key: &str,
    uri: &SocketUri,
    attempts: u32,
    elapsed: Duration,
) -> String {
    let tried = format!(
        "after {attempts} attempts over {:.1} s",
        elapsed.as_secs_f64()
    );
    match e.raw_os_error() {
        Some(ECONNREFUSED) | Some(ECONNRESET) => format!(
            "connection refused {tried} ({e}) — nothing listens at {}:{} (the peer never listened); start the server first, or fix the address in {key}",
            uri.ip, uri.port
        ),
        Some(ETIMEDOUT) | Some(EHOSTUNREACH) | Some(ENETUNREACH) => format!(
            "peer unreachable {tried} ({e}) — no route to {} or it does not answer; check the cabling/route (`ip route get {}`) or fix {key}",
            uri.ip, uri.ip
        ),
        Some(EADDRNOTAVAIL) => format!(
            "cannot connect ({e}) — {} is not a usable destination or local ports ran out; fix {key}",
            uri.ip
        ),
        Some(EACCES) | Some(EPERM) => format!(
            "permission denied ({e}) — a firewall or security policy blocks the connection; allow it or change {key}"
        ),
        _ => format!("cannot connect {tried} ({e}); check {key}"),
    }
}

/// Whether a connect error may go away by itself (the peer is still starting).
pub(crate) fn connect_is_retryable(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(ECONNREFUSED)
            | Some(ECONNRESET)
            | Some(ETIMEDOUT)
            | Some(EHOSTUNREACH)
            | Some(ENETUNREACH)
    )
}
