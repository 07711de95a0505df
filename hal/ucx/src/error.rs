//! [`Status`] (a UCX `ucs_status_t`) and [`UcxError`]: every failure of this crate, each
//! naming the call.
use std::ffi::CStr;
use std::fmt;
use std::time::Duration;

use crate::raw;

/// `Result` with [`UcxError`].
pub type Result<T, E = UcxError> = std::result::Result<T, E>;

/// A UCX status code (`ucs_status_t`): `0` is `UCS_OK`, `1` `UCS_INPROGRESS`, negative
/// values are errors. `Display` is UCX's own text (`ucs_status_string`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status(pub raw::ucs_status_t);

impl Status {
    /// `UCS_OK`.
    pub const OK: Status = Status(raw::UCS_OK);
    /// `UCS_INPROGRESS`.
    pub const IN_PROGRESS: Status = Status(raw::UCS_INPROGRESS);
    /// `UCS_ERR_NO_MESSAGE`.
    pub const NO_MESSAGE: Status = Status(raw::UCS_ERR_NO_MESSAGE);
    /// `UCS_ERR_IO_ERROR`.
    pub const IO_ERROR: Status = Status(raw::UCS_ERR_IO_ERROR);
    /// `UCS_ERR_INVALID_PARAM`.
    pub const INVALID_PARAM: Status = Status(raw::UCS_ERR_INVALID_PARAM);
    /// `UCS_ERR_UNREACHABLE`: no route to the peer.
    pub const UNREACHABLE: Status = Status(raw::UCS_ERR_UNREACHABLE);
    /// `UCS_ERR_MESSAGE_TRUNCATED`: a receive buffer shorter than the message.
    pub const MESSAGE_TRUNCATED: Status = Status(raw::UCS_ERR_MESSAGE_TRUNCATED);
    /// `UCS_ERR_CANCELED`: a request cancelled (receives) or flushed away by a forced close.
    pub const CANCELED: Status = Status(raw::UCS_ERR_CANCELED);
    /// `UCS_ERR_TIMED_OUT`.
    pub const TIMED_OUT: Status = Status(raw::UCS_ERR_TIMED_OUT);
    /// `UCS_ERR_UNSUPPORTED`.
    pub const UNSUPPORTED: Status = Status(raw::UCS_ERR_UNSUPPORTED);
    /// `UCS_ERR_REJECTED`: the server rejected the connection request.
    pub const REJECTED: Status = Status(raw::UCS_ERR_REJECTED);
    /// `UCS_ERR_NOT_CONNECTED`: what a refused connection (nobody listening) reports.
    pub const NOT_CONNECTED: Status = Status(raw::UCS_ERR_NOT_CONNECTED);
    /// `UCS_ERR_CONNECTION_RESET`: the peer went away.
    pub const CONNECTION_RESET: Status = Status(raw::UCS_ERR_CONNECTION_RESET);
    /// `UCS_ERR_ENDPOINT_TIMEOUT`: the peer stopped answering (keepalive).
    pub const ENDPOINT_TIMEOUT: Status = Status(raw::UCS_ERR_ENDPOINT_TIMEOUT);

    /// The raw code.
    pub fn raw(self) -> raw::ucs_status_t {
        self.0
    }

    /// True for `UCS_OK`.
    pub fn is_ok(self) -> bool {
        self.0 == raw::UCS_OK
    }

    /// True for an error (a negative code).
    pub fn is_err(self) -> bool {
        self.0 < 0
    }

    /// UCX's text for the code (`ucs_status_string`).
    pub fn text(self) -> &'static str {
        // SAFETY: ucs_status_string takes any code and returns a pointer to a static
        // NUL-terminated string ("Unknown error" for codes it does not know), never null.
        let p = unsafe { raw::ucs_status_string(self.0) };
        if p.is_null() {
            return "unknown status";
        }
        // SAFETY: non-null, NUL-terminated, static storage (see above).
        unsafe { CStr::from_ptr(p) }
            .to_str()
            .unwrap_or("unknown status")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.text(), self.0)
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Status({}: {})", self.0, self.text())
    }
}

/// Every error of `rtdaq-ucx-sys`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UcxError {
    /// A UCX call returned an error status.
    #[error("{call} failed: {status}")]
    Call {
        /// The C function.
        call: &'static str,
        /// What it returned.
        status: Status,
    },
    /// UCX refused a configuration option (`ucp_config_modify`): an unknown name or a value
    /// it cannot parse.
    #[error("UCX option {name}={value:?} refused: {status}")]
    Option {
        /// The option, without the `UCX_` prefix (`TLS`, `NET_DEVICES`, ...).
        name: String,
        /// Its value.
        value: String,
        /// What `ucp_config_modify` returned.
        status: Status,
    },
    /// An argument the crate refuses before calling UCX (a NUL in an option, an empty
    /// buffer to map, data outside the memory handle passed with it, ...).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// A bounded wait ran out ([`Endpoint::flush_blocking`](crate::Endpoint::flush_blocking)).
    #[error("{what} did not complete within {after:?}")]
    Timeout {
        /// What was waited for.
        what: &'static str,
        /// The bound.
        after: Duration,
    },
}

impl UcxError {
    /// A failed call.
    pub fn call(call: &'static str, status: Status) -> Self {
        UcxError::Call { call, status }
    }

    /// The UCX status, when the error came from UCX.
    pub fn status(&self) -> Option<Status> {
        match self {
            UcxError::Call { status, .. } | UcxError::Option { status, .. } => Some(*status),
            _ => None,
        }
    }
}
