//! The cold-path error values every engine builds the same way: they name the config key to
//! change and what to do. Each engine's `thiserror` enum wraps them in its own variants
//! (`Config`, `Resources`, `SetOption`, `Query`, ...), so the engines share the shape and the
//! `key()` / `os_error()` accessors instead of repeating them.

use std::io;

/// Something in the config or the handed-over resources is wrong; no OS call failed.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {detail}")]
pub struct KeyError {
    /// Config key to change (`interfaces[0].address`, `engine.afpacket.block_size`, ...).
    pub key: String,
    /// What is wrong and how to fix it.
    pub detail: String,
}

/// An OS call failed for the setting at a config key.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {detail}")]
pub struct OsError {
    /// Config key that asked for the call.
    pub key: String,
    /// What was asked, what went wrong, what to change.
    pub detail: String,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

impl KeyError {
    /// `key: detail`.
    pub fn new(key: impl Into<String>, detail: impl Into<String>) -> Self {
        KeyError {
            key: key.into(),
            detail: detail.into(),
        }
    }
}

impl OsError {
    /// `key: detail`, caused by `source`.
    pub fn new(key: impl Into<String>, detail: impl Into<String>, source: io::Error) -> Self {
        OsError {
            key: key.into(),
            detail: detail.into(),
            source,
        }
    }
}
