//! What an egress sink's consumer half and sender share: the heap's item ids, the counters,
//! the sink-wide state of its senders (a leaf of `egress`).

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;

/// Item id of a heap's timestamp: the receive time of its first payload, ns since the Unix
/// epoch, an 8-byte big-endian unsigned integer.
pub const ITEM_TIMESTAMP: u32 = 0x1600;
/// Item id of a heap's payload count (immediate).
pub const ITEM_PACKETS: u32 = 0x1601;
/// Item id of a heap's data: its payloads back to back.
pub const ITEM_DATA: u32 = 0x1800;

/// Counters of one queue's egress sink (one writer per field: the consumer or the sender).
#[derive(Debug, Default)]
pub struct EgressCounters {
    /// Payloads put into heaps (consumer).
    pub payloads_in: AtomicU64,
    /// Payloads not sent: no free heap buffer (consumer).
    pub dropped_full: AtomicU64,
    /// Payloads not sent: larger than a heap buffer (consumer).
    pub dropped_too_large: AtomicU64,
    /// Payloads of units given up before they were whole (consumer; a sink of whole units).
    pub dropped_incomplete: AtomicU64,
    /// Payloads that are not of the units' format (consumer; a sink of whole units).
    pub dropped_foreign: AtomicU64,
    /// Payloads sent, in heaps that went out whole (sender).
    pub payloads_sent: AtomicU64,
    /// Data heaps sent (sender).
    pub heaps: AtomicU64,
    /// SPEAD packets sent, descriptors and the end-of-stream heap included (sender).
    pub datagrams: AtomicU64,
    /// Bytes of those packets (UDP payload bytes; sender).
    pub bytes: AtomicU64,
    /// Descriptor heaps sent (sender).
    pub descriptors: AtomicU64,
    /// Payloads of heaps a send error dropped (sender).
    pub dropped_error: AtomicU64,
    /// Payloads of heaps a destination refused: no receiver there (sender).
    pub dropped_peer_gone: AtomicU64,
    /// Packets (SPEAD datagrams) the qdisc dropped because their launch time had passed
    /// when they reached it, or was earlier than one it had already sent (sender, launch
    /// times).
    pub txtime_invalid: AtomicU64,
    /// Packets the qdisc could not hand to the device in time (sender, launch times).
    pub txtime_missed: AtomicU64,
    /// Packets the kernel still held at the end, after their launch times had passed and
    /// the wait for them (sender, launch times): they left late or never.
    pub txtime_held: AtomicU64,
    /// The qdiscs that keep the launch times, in words (set once when the sender starts).
    pub launch_times: OnceLock<String>,
    /// `errno` of the sender's first failed send (0: none).
    pub first_errno: AtomicI32,
    /// UCX status of the first failed send or endpoint (0: none).
    pub first_ucx_status: AtomicI32,
    /// Connections made again to a destination that went away (UCX).
    pub reconnects: AtomicU64,
    /// Raised by the consumer after its last heap went to the sender.
    pub producer_done: AtomicBool,
    /// The sender thread's turns (the systemd watchdog watches them).
    pub stall: crate::stall::StallWatch,
}

impl EgressCounters {
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.store(c.load(Relaxed) + n, Relaxed);
    }

    /// Payloads taken from the queue: put into heaps or dropped by the consumer.
    pub fn taken(&self) -> u64 {
        self.payloads_in.load(Relaxed)
            + self.dropped_full.load(Relaxed)
            + self.dropped_too_large.load(Relaxed)
            + self.dropped_foreign.load(Relaxed)
    }

    /// Payloads not sent.
    pub fn dropped(&self) -> u64 {
        self.dropped_full.load(Relaxed)
            + self.dropped_too_large.load(Relaxed)
            + self.dropped_incomplete.load(Relaxed)
            + self.dropped_foreign.load(Relaxed)
            + self.dropped_error.load(Relaxed)
            + self.dropped_peer_gone.load(Relaxed)
    }
}

/// What the senders of one egress sink share: how many have not finished (the last one
/// sends the end-of-stream heap).
#[derive(Debug)]
pub struct SinkShared {
    /// Senders still running.
    pub running: AtomicUsize,
}
