//! [`IbvError`]: the cold-path errors of the engine, each naming the config key to change.

/// `Result` with [`IbvError`].
pub type Result<T, E = IbvError> = std::result::Result<T, E>;

/// Where the no-device message points.
pub const DOCS: &str = "docs/engines/ibverbs.md";

/// Every error of `rtdaq-engine-ibverbs`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IbvError {
    /// The host has no RDMA device (kernel without RDMA, no NIC, no Soft-RoCE link).
    #[error("no RDMA device: {detail}; see {DOCS} (a ConnectX NIC, or Soft-RoCE: `rdma link add rxe0 type rxe netdev <if>`)")]
    NoDevice {
        /// What was found.
        detail: String,
    },
    /// The config asks for something this engine cannot do.
    #[error("{key}: {detail}")]
    Config {
        /// Config key path.
        key: String,
        /// What is wrong and the fix.
        detail: String,
    },
    /// A verbs / RDMA CM call failed while opening.
    #[error("{key}: {what}: {source}")]
    Verbs {
        /// Config key path.
        key: String,
        /// What was being done.
        what: String,
        /// The call's error.
        #[source]
        source: ffi::IbError,
    },
    /// A client never connected.
    #[error("{key} = \"{uri}\": no connection after {attempts} attempts over {secs:.1} s ({last}); is the server running and listening on that address?")]
    Connect {
        /// Config key path.
        key: String,
        /// The address.
        uri: String,
        /// Attempts made.
        attempts: u32,
        /// Seconds spent.
        secs: f64,
        /// The last failure.
        last: String,
    },
}

impl IbvError {
    /// Maps a sys error: no device → [`IbvError::NoDevice`], else [`IbvError::Verbs`].
    pub(crate) fn verbs(key: impl Into<String>, what: impl Into<String>, e: ffi::IbError) -> Self {
        match e {
            ffi::IbError::NoDevice { detail } => IbvError::NoDevice { detail },
            source => IbvError::Verbs {
                key: key.into(),
                what: what.into(),
                source,
            },
        }
    }
    /// A config error.
    pub(crate) fn config(key: impl Into<String>, detail: impl Into<String>) -> Self {
        IbvError::Config {
            key: key.into(),
            detail: detail.into(),
        }
    }
}
