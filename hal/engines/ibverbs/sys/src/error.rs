//! [`IbError`]: every failure of this crate, each naming the call and the errno.

/// `Result` with [`IbError`].
pub type Result<T, E = IbError> = std::result::Result<T, E>;

/// Every error of `rtdaq-ibverbs-sys`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IbError {
    /// No RDMA device: `ibv_get_device_list` failed (`ENOSYS`: the kernel has no RDMA
    /// support) or returned an empty list, or the named device does not exist.
    #[error("no RDMA device: {detail}")]
    NoDevice {
        /// What was found (the errno of `ibv_get_device_list`, or the devices present).
        detail: String,
    },
    /// A verbs or RDMA CM call failed.
    #[error("{call} failed: {msg} ({name}, errno {errno})")]
    Call {
        /// The C function.
        call: &'static str,
        /// Positive errno.
        errno: i32,
        /// Its symbolic name.
        name: &'static str,
        /// `strerror` text.
        msg: String,
    },
    /// An argument the crate refuses before calling C (a NUL in a name, a range outside
    /// its memory region, ...).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// The device or host lacks an optional feature (the mlx5 striding receive queue:
    /// libmlx5 missing, not an mlx5 device, no striding RQ caps); says which.
    #[error("not supported: {0}")]
    Unsupported(String),
}

impl IbError {
    /// A failed call with its errno.
    pub fn call(call: &'static str, errno: i32) -> Self {
        IbError::Call {
            call,
            errno,
            name: errno_name(errno),
            msg: std::io::Error::from_raw_os_error(errno).to_string(),
        }
    }

    /// The errno, when the error came from a call.
    pub fn errno(&self) -> Option<i32> {
        match self {
            IbError::Call { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

/// Symbolic name of the errno values verbs and RDMA CM return.
pub fn errno_name(e: i32) -> &'static str {
    match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ECONNRESET => "ECONNRESET",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        _ => "E?",
    }
}
