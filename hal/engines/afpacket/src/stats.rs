//! Engine-level events of one queue that are not packet drops (those go to the queue's
//! `QueueCounters`): blocks, kernel ring pressure, system-call errors. Plain fields written by
//! the queue's own thread; read them through [`AfpacketRx::stats`](crate::AfpacketRx::stats) /
//! [`AfpacketTx::stats`](crate::AfpacketTx::stats). A queue logs a summary when dropped.

/// Events of one RX queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RxStats {
    /// Ring blocks taken from the kernel.
    pub blocks: u64,
    /// Blocks flagged `TP_STATUS_LOSING` (the kernel had dropped frames since the last
    /// `PACKET_STATISTICS` read; the drops themselves are counted as `kernel`).
    pub losing: u64,
    /// Times the kernel found the next block still in user hands and froze the ring
    /// (`tp_freeze_q_cnt`): bursts held too long, or too few blocks.
    pub freezes: u64,
    /// Frames the core flow table assigned to another queue than the one whose filter took
    /// them (a disagreement between the cBPF filter and the table; should stay 0). They are
    /// delivered here, with their flow id, rather than lost.
    pub misrouted: u64,
    /// VLAN tags put back into frames (the kernel strips the outer tag on receive).
    pub vlan_restored: u64,
    /// Frames with a hardware receive timestamp.
    pub hw_timestamps: u64,
    /// Frames whose ring header was inconsistent (outside its block); counted `malformed`.
    pub bad_headers: u64,
    /// `PACKET_STATISTICS` reads or waits that failed with something other than `EINTR`.
    pub errors: u64,
    /// `errno` of the last such failure (0 = none).
    pub last_errno: i32,
}

/// Events of one TX queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TxStats {
    /// `sendto` kicks.
    pub kicks: u64,
    /// `reserve` calls that got fewer slots than asked because the kernel still held the
    /// next slot (back-pressure).
    pub backpressure: u64,
    /// Kicks that left frames queued (socket buffer full): retried on the next call.
    pub partial_kicks: u64,
    /// Frames moved down in their burst to close the gap left by a refused frame.
    pub compactions: u64,
    /// Kicks that failed with something other than "try again".
    pub errors: u64,
    /// `errno` of the last such failure (0 = none).
    pub last_errno: i32,
    /// With launch times: frames the `etf` qdisc dropped because their time had passed (or
    /// was earlier than one queued before) when they reached it.
    pub txtime_invalid: u64,
    /// With launch times: frames the qdisc could not hand to the device in time.
    pub txtime_missed: u64,
    /// With launch times: frames the kernel still held when the sender ended, after the
    /// last launch time had passed and the wait for them (counted as `kernel` drops: they
    /// left late or never).
    pub txtime_held: u64,
}
