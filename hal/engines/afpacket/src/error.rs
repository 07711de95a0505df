//! [`AfpacketError`]: every way [`AfpacketEngine::open`](crate::AfpacketEngine) can fail.
//!
//! Only the cold path builds these values. Each message names the cause and the config key
//! (or the privilege) to change, e.g.
//! `interfaces[0].address = "eth9": no such network device (ENODEV) in this network
//! namespace; ...`. The hot path never builds an error: it counts drops in the queue's
//! `QueueCounters` and events in its [`RxStats`](crate::RxStats) /
//! [`TxStats`](crate::TxStats).

use std::io;

use rtdaq_netsys::{KeyError, OsError};

use crate::sys::consts::{EACCES, EINVAL, ENOBUFS, ENODEV, ENOMEM, ENXIO, EPERM};

/// `Result` with [`AfpacketError`].
pub type Result<T, E = AfpacketError> = std::result::Result<T, E>;

/// What to do without `CAP_NET_RAW`.
pub const CAP_NET_RAW_FIX: &str =
    "needs CAP_NET_RAW (run as root or grant the capability: `setcap cap_net_raw,cap_ipc_lock+ep <binary>`)";

/// Why the AF_PACKET engine could not open. `Display` names the config key to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AfpacketError {
    /// The config cannot run on this engine (another engine kind, a socket address, a frame
    /// size too small for the MTU, ...).
    #[error(transparent)]
    Config(KeyError),
    /// The runtime handed over no (or unusable) buffers or counters for a queue.
    #[error(transparent)]
    Resources(KeyError),
    /// `socket(AF_PACKET)` was refused: the process lacks `CAP_NET_RAW`.
    #[error("{key}: AF_PACKET socket refused ({source}): the afpacket engine {CAP_NET_RAW_FIX}")]
    Privilege {
        /// Config key of the interface being opened.
        key: String,
        /// The OS error (`EPERM`/`EACCES`).
        #[source]
        source: io::Error,
    },
    /// `socket(AF_PACKET)` failed for another reason (descriptor limit, no `AF_PACKET`).
    #[error("{key}: cannot create an AF_PACKET socket ({source}); {detail}")]
    Socket {
        /// Config key of the interface being opened.
        key: String,
        /// What to change.
        detail: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The network device does not exist (in this network namespace).
    #[error("{key} = \"{netdev}\": no such network device ({source}) in this network namespace; check `ip link` and fix {key}")]
    NoSuchInterface {
        /// `interfaces[i].address`.
        key: String,
        /// The device name.
        netdev: String,
        /// The OS error (`ENODEV`).
        #[source]
        source: io::Error,
    },
    /// A PCI address has no kernel network device.
    #[error("{key} = \"{pci}\": {detail}")]
    NoNetdevForPci {
        /// `interfaces[i].address`.
        key: String,
        /// The PCI address.
        pci: String,
        /// What was found and what to do.
        detail: String,
    },
    /// The kernel refused the ring geometry (`PACKET_RX_RING` / `PACKET_TX_RING`) or could not
    /// map it.
    #[error("{key}: {detail}")]
    Ring {
        /// The `engine.afpacket.*` key to change.
        key: String,
        /// The geometry and what to change.
        detail: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A socket option was refused.
    #[error(transparent)]
    SetOption(OsError),
    /// The flow rules could not become a socket filter (too many instructions), or the
    /// kernel refused the filter.
    #[error("{key}: {detail}")]
    Filter {
        /// `flows` (and the interface).
        key: String,
        /// Why, and what to change.
        detail: String,
    },
    /// `bind()` to the device failed.
    #[error("{key} = \"{netdev}\": cannot bind an AF_PACKET socket ({source}); {detail}")]
    Bind {
        /// `interfaces[i].address`.
        key: String,
        /// The device.
        netdev: String,
        /// Why, and what to change.
        detail: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Joining the fanout group failed.
    #[error("engine.afpacket.fanout: {detail}")]
    Fanout {
        /// Why, and what to change.
        detail: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Reading device state (MTU, flags) failed.
    #[error(transparent)]
    Query(OsError),
}

impl AfpacketError {
    /// The config key the message names (`interfaces[0].address`,
    /// `engine.afpacket.block_size`, ...).
    pub fn key(&self) -> &str {
        match self {
            AfpacketError::Config(KeyError { key, .. })
            | AfpacketError::Resources(KeyError { key, .. })
            | AfpacketError::Privilege { key, .. }
            | AfpacketError::Socket { key, .. }
            | AfpacketError::NoSuchInterface { key, .. }
            | AfpacketError::NoNetdevForPci { key, .. }
            | AfpacketError::Ring { key, .. }
            | AfpacketError::SetOption(OsError { key, .. })
            | AfpacketError::Filter { key, .. }
            | AfpacketError::Bind { key, .. }
            | AfpacketError::Query(OsError { key, .. }) => key,
            AfpacketError::Fanout { .. } => "engine.afpacket.fanout",
        }
    }

    /// The underlying OS error, if any.
    pub fn os_error(&self) -> Option<&io::Error> {
        match self {
            AfpacketError::Privilege { source, .. }
            | AfpacketError::Socket { source, .. }
            | AfpacketError::NoSuchInterface { source, .. }
            | AfpacketError::Ring { source, .. }
            | AfpacketError::SetOption(OsError { source, .. })
            | AfpacketError::Bind { source, .. }
            | AfpacketError::Fanout { source, .. }
            | AfpacketError::Query(OsError { source, .. }) => Some(source),
            AfpacketError::Config(..)
            | AfpacketError::Resources(..)
            | AfpacketError::NoNetdevForPci { .. }
            | AfpacketError::Filter { .. } => None,
        }
    }
}

/// Maps a failed `socket(AF_PACKET)` to its error: `EPERM`/`EACCES` mean the capability is
/// missing. Cold path.
pub(crate) fn socket_error(key: &str, e: io::Error) -> AfpacketError {
    match e.raw_os_error() {
        Some(EPERM) | Some(EACCES) => AfpacketError::Privilege {
            key: key.to_owned(),
            source: e,
        },
        _ => AfpacketError::Socket {
            key: key.to_owned(),
            detail: "raise the file-descriptor limit (`ulimit -n`), or use a kernel with AF_PACKET (CONFIG_PACKET)".to_owned(),
            source: e,
        },
    }
}

/// Maps a failed device lookup (`SIOCGIFINDEX`) to its error. Cold path.
pub(crate) fn lookup_error(key: &str, netdev: &str, e: io::Error) -> AfpacketError {
    match e.raw_os_error() {
        Some(ENODEV) | Some(ENXIO) => AfpacketError::NoSuchInterface {
            key: key.to_owned(),
            netdev: netdev.to_owned(),
            source: e,
        },
        _ => AfpacketError::Query(OsError::new(
            key.to_owned(),
            format!("cannot look up network device \"{netdev}\" ({e})"),
            e,
        )),
    }
}

/// Why the kernel refused a ring, and the key to change. Cold path.
pub(crate) fn ring_error(what: &str, geometry: &str, e: io::Error) -> AfpacketError {
    let (key, fix) = match e.raw_os_error() {
        Some(ENOMEM) | Some(ENOBUFS) => (
            "engine.afpacket.block_count",
            "the kernel could not allocate the ring: lower engine.afpacket.block_count or engine.afpacket.block_size (or free memory)",
        ),
        Some(EINVAL) => (
            "engine.afpacket.block_size",
            "the kernel refused this geometry: block_size must be a power-of-two multiple of the page size, frame_size a multiple of 16 that holds the tpacket header, and block_size a multiple of frame_size's slot; check engine.afpacket.block_size / frame_size / block_count",
        ),
        Some(EPERM) | Some(EACCES) => ("engine.afpacket", CAP_NET_RAW_FIX),
        _ => (
            "engine.afpacket.block_size",
            "check engine.afpacket.block_size / frame_size / block_count",
        ),
    };
    AfpacketError::Ring {
        key: key.to_owned(),
        detail: format!("{what} {geometry} refused ({e}): {fix}"),
        source: e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eperm_names_the_capability_and_the_key() {
        let e = socket_error("interfaces[1].address", io::Error::from_raw_os_error(EPERM));
        let msg = e.to_string();
        assert!(matches!(e, AfpacketError::Privilege { .. }));
        assert!(msg.starts_with("interfaces[1].address: "), "{msg}");
        assert!(
            msg.contains("needs CAP_NET_RAW (run as root or grant the capability"),
            "{msg}"
        );
        assert_eq!(e.key(), "interfaces[1].address");
        assert_eq!(e.os_error().and_then(io::Error::raw_os_error), Some(EPERM));
        let e = socket_error("k", io::Error::from_raw_os_error(libc::EMFILE));
        assert!(e.to_string().contains("ulimit -n"), "{e}");
    }

    #[test]
    fn enodev_names_the_device_and_the_key() {
        let e = lookup_error(
            "interfaces[0].address",
            "nope0",
            io::Error::from_raw_os_error(ENODEV),
        );
        let msg = e.to_string();
        assert!(
            msg.starts_with("interfaces[0].address = \"nope0\": no such network device"),
            "{msg}"
        );
        assert!(msg.contains("fix interfaces[0].address"), "{msg}");
    }

    #[test]
    fn ring_refusals_name_the_geometry_key() {
        let e = ring_error(
            "RX ring",
            "64 × 1 MiB",
            io::Error::from_raw_os_error(ENOMEM),
        );
        assert_eq!(e.key(), "engine.afpacket.block_count");
        assert!(e.to_string().contains("RX ring 64 × 1 MiB refused"), "{e}");
        let e = ring_error("TX ring", "x", io::Error::from_raw_os_error(EINVAL));
        assert_eq!(e.key(), "engine.afpacket.block_size");
    }
}
