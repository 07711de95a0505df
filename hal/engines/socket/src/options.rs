//! [`SocketOptions`]: engine tuning that the deployment config has no key for.

use std::time::Duration;

/// Tuning of the socket engine beyond the deployment config. [`Default`] is what
/// [`Engine::open`](rtdaq_core::traits::Engine::open) uses; tests and tools pass their own to
/// [`SocketEngine::open_with`](crate::SocketEngine::open_with).
///
/// `#[non_exhaustive]`: build it with `SocketOptions::default()` and set fields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SocketOptions {
    /// TCP client: connection attempts per connection before `open` fails (default 50).
    pub connect_attempts: u32,
    /// TCP client: pause between attempts (default 100 ms, so about 5 s in all).
    pub connect_backoff: Duration,
    /// TCP client: longest wait for one handshake (default 1 s).
    pub connect_timeout: Duration,
    /// TX: longest a `send` waits in all for the kernel to take more data (socket buffer or
    /// qdisc full) before counting the rest of the burst as dropped (default 1 ms).
    pub tx_stall: Duration,
    /// Try `SO_RCVBUFFORCE` / `SO_SNDBUFFORCE` first, which pass `net.core.rmem_max` /
    /// `wmem_max` with `CAP_NET_ADMIN` (default true). False uses the plain options only.
    pub force_buffers: bool,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions {
            connect_attempts: 50,
            connect_backoff: Duration::from_millis(100),
            connect_timeout: Duration::from_secs(1),
            tx_stall: Duration::from_millis(1),
            force_buffers: true,
        }
    }
}
