//! The crate's one error type.

/// What went wrong in a psrdada call, with the call and the ring's key.
#[derive(Debug, thiserror::Error)]
pub enum DadaError {
    /// A key that is no hexadecimal `key_t` (as `dada_db -k` takes it).
    #[error("{0:?} is not a PSRDADA key: give it in hexadecimal as dada_db -k takes it, e.g. \"dada\" (the header block takes the key + 1)")]
    BadKey(String),
    /// A call of the library failed (it prints its own reason on stderr).
    #[error("psrdada {call} on key {key:x} failed: {why}")]
    Call {
        /// The library function.
        call: &'static str,
        /// The ring's (data block's) key.
        key: i32,
        /// What that means here.
        why: &'static str,
    },
    /// The data block's pages could not be bound to a NUMA node (`mbind`).
    #[error("binding the data block of key {key:x} to NUMA node {node} failed ({source}): is node {node} on this host? (ls /sys/devices/system/node) Choose one of its nodes, or leave numa_node out")]
    Numa {
        /// The ring's key.
        key: i32,
        /// The node asked for.
        node: u32,
        /// What `mbind` said.
        source: std::io::Error,
    },
    /// A header longer than the header block's buffer.
    #[error("a DADA header of {len} bytes does not fit the header block's {cap}-byte buffer (key {key:x}); make the ring's header buffers larger")]
    HeaderTooLong {
        /// The ring's key.
        key: i32,
        /// Bytes of the header.
        len: usize,
        /// Bytes of a header buffer.
        cap: u64,
    },
}

/// This crate's results.
pub type Result<T> = std::result::Result<T, DadaError>;
