//! Engine-level events of one queue that are not packet drops (those go to the queue's
//! `QueueCounters`): kernel ring statistics, wake-ups, errors. Plain fields written by the
//! queue's own thread; read them through [`AfxdpRx::stats`](crate::AfxdpRx::stats) /
//! [`AfxdpTx::stats`](crate::AfxdpTx::stats); a queue logs a summary when dropped if
//! something went wrong.

/// Events of one RX queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RxStats {
    /// Kernel: frames dropped because no fill frame was available or the frame was larger
    /// than a UMEM frame (`XDP_STATISTICS.rx_dropped`; counted as `pool_empty`).
    pub rx_dropped: u64,
    /// Kernel: frames dropped because this socket's RX ring was full (counted as `kernel`).
    pub rx_ring_full: u64,
    /// Kernel: invalid fill-ring descriptors (an engine bug if ever non-zero).
    pub rx_invalid_descs: u64,
    /// RX descriptors whose address was not a frame this UMEM lent (an engine or kernel
    /// bug if ever non-zero; the frame is lost to the pool).
    pub bad_descs: u64,
    /// Frames the userspace flow table assigned to another queue than the XDP program did
    /// (delivered here anyway with the table's flow id; 0 unless the two disagree).
    pub misrouted: u64,
    /// XDP program (fallback queue only): frames that arrived on a NIC queue without an
    /// XSK of ours and went to the kernel (counted as `no_flow`).
    pub other_nic_queue: u64,
    /// XDP program (fallback queue only): frames whose target queue had no XSK (counted as
    /// `kernel`).
    pub no_xsk: u64,
    /// XDP program (fallback queue only): frames it found malformed and sent to this queue,
    /// whose flow table counts them as `malformed`.
    pub xdp_malformed: u64,
    /// XDP program (fallback queue only): frames redirected to any XSK of the interface.
    pub xdp_redirected: u64,
    /// Wake-ups of the kernel (`recvfrom`) because the fill ring asked for one.
    pub wakeups: u64,
    /// Frames delivered in several UMEM frames (multi-buffer, `XDP_USE_SG`).
    pub multi_buffer: u64,
    /// Syscalls that failed with something other than "try again" (stat reads, waits).
    pub errors: u64,
    /// `errno` of the last such failure (0 = none).
    pub last_errno: i32,
}

/// Events of one TX queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TxStats {
    /// `sendto` kicks issued.
    pub kicks: u64,
    /// Sends that waited for room in the TX ring or for the kernel to drain it.
    pub stalls: u64,
    /// Kernel: invalid TX descriptors (`XDP_STATISTICS.tx_invalid_descs`; an engine bug if
    /// ever non-zero).
    pub tx_invalid_descs: u64,
    /// Completion-ring addresses that were not frames this UMEM lent (a bug if non-zero).
    pub bad_completions: u64,
    /// Kicks that failed with something other than "try again" (`EAGAIN`, `EBUSY`,
    /// `ENOBUFS`).
    pub errors: u64,
    /// `errno` of the last such failure (0 = none).
    pub last_errno: i32,
}
