//! Engine-level events of one queue that are not packet drops (those go to the queue's
//! `QueueCounters`): socket errors, connections, fallbacks. Plain fields written by the
//! queue's own thread; read them through [`SocketRx::stats`](crate::SocketRx::stats) /
//! [`SocketTx::stats`](crate::SocketTx::stats), and the queue logs a summary when dropped.

/// Events of one RX queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RxStats {
    /// Receive calls that failed with something other than "no data" (`EAGAIN`/`EINTR`).
    pub errors: u64,
    /// `errno` of the last such failure (0 = none).
    pub last_errno: i32,
    /// UDP: `recvmmsg` calls that returned datagrams (datagrams / reads = the average
    /// batch the kernel handed over).
    pub reads: u64,
    /// UDP: sleeps of `engine.socket.rx_coalesce_us` before a read.
    pub coalesce_waits: u64,
    /// UDP: times coalescing stopped for a while because its waits gathered too few
    /// datagrams (adaptive moderation, see the `udp_rx` module docs).
    pub coalesce_backoffs: u64,
    /// UDP, adaptive moderation: measured periods after which the queue kept waiting
    /// `rx_coalesce_us` (it cost less CPU per datagram than plain reads)...
    pub moderation_chose_waits: u64,
    /// ...and after which it read without waiting.
    pub moderation_chose_reads: u64,
    /// UDP: the last comparison's thread CPU per datagram with waits and without, in
    /// picoseconds (ns × 1000; 0 before the first).
    pub moderation_on_ppd: u64,
    /// See [`moderation_on_ppd`](Self::moderation_on_ppd).
    pub moderation_off_ppd: u64,
    /// UDP: coalesced GRO reads split back into datagrams.
    pub gro_reads: u64,
    /// UDP: datagrams copied out of a GRO read into further pool buffers.
    pub gro_copies: u64,
    /// TCP: connections this queue took over (accepted or connected).
    pub connections: u32,
    /// TCP: connections closed by the peer (or reset).
    pub closed: u32,
    /// TCP (accepting queue): connections accepted for the interface (replacements of
    /// peers that left included).
    pub accepted: u32,
    /// TCP (accepting queue): peers accepted into a slot an earlier peer had left.
    pub reaccepted: u32,
    /// TCP (accepting queue): peers beyond `connections`, accepted and closed at once.
    pub rejected: u32,
    /// TCP (accepting queue): `accept` failures.
    pub accept_errors: u32,
    /// TCP: `engine.socket.sockopts` entries that failed on accepted sockets.
    pub sockopt_errors: u32,
}

/// Events of one TX queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TxStats {
    /// Send calls that failed with something other than "try again".
    pub errors: u64,
    /// `errno` of the last such failure (0 = none).
    pub last_errno: i32,
    /// Sends that waited for the kernel to take more (socket buffer or qdisc full).
    pub stalls: u64,
    /// UDP: the kernel refused GSO (`EIO`/`EINVAL`) and the queue fell back to plain
    /// `sendmmsg` for good.
    pub gso_fallback: bool,
    /// UDP: GSO messages sent (each carrying several datagrams).
    pub gso_messages: u64,
    /// UDP with launch times: datagrams the `etf` qdisc dropped because their time was
    /// already past (or before one it had sent) when they reached it.
    pub txtime_invalid: u64,
    /// UDP with launch times: datagrams the `etf` qdisc could not hand over in time.
    pub txtime_missed: u64,
    /// With launch times: datagrams the kernel still held when the sender ended, after the
    /// last launch time had passed and the wait for them (counted as `kernel` drops: they
    /// left late or never).
    pub txtime_held: u64,
    /// TCP: records the kernel took only partly; the rest was copied aside and finished later.
    pub partial_copies: u64,
    /// TCP: connections this queue took over.
    pub connections: u32,
    /// TCP: connections that failed (peer closed or reset).
    pub closed: u32,
    /// TCP (accepting queue): connections accepted for the interface.
    pub accepted: u32,
}
