//! What a dump wrote (a leaf of `dump`): the report's entry and the JSON index on disk.

use serde::{Deserialize, Serialize};

/// One dump written: its window and files (also its JSON index on disk).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DumpReport {
    /// The `[[dumps]]` entry.
    pub dump: String,
    /// Its number (1, 2, ...) in the run.
    pub number: u32,
    /// What triggered it: `http`, `udp`, `signal`.
    pub trigger: String,
    /// The window, ns since the Unix epoch: packets received at `start_ns ..= end_ns`.
    pub start_ns: u64,
    /// End of the window.
    pub end_ns: u64,
    /// The index file.
    pub index: String,
    /// Every queue's part.
    pub queues: Vec<DumpedQueue>,
    /// Every queue's part is complete.
    pub complete: bool,
}

/// One queue's part of a dump.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DumpedQueue {
    /// `lo_udp.rx0`.
    pub queue: String,
    /// The pcap file.
    pub file: String,
    /// Packets in it.
    pub packets: u64,
    /// Receive time of its first and last packet (0: none).
    pub first_ns: u64,
    /// Receive time of its last packet.
    pub last_ns: u64,
    /// Receive time of the oldest packet the history held (0: none).
    pub oldest_held_ns: u64,
    /// Packets the queue had kept in its history so far, and not kept (a dump held the
    /// history), as the queue last published them.
    pub kept: u64,
    /// Packets not kept so far.
    pub not_kept: u64,
    /// The file holds every packet the queue received in the window: the history reached
    /// back to its start, and no packet of it went unkept while a dump held the history.
    pub complete: bool,
    /// Why not, when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_incomplete: Option<String>,
}
