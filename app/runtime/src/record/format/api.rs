//! What a record format is ([`Format`]) and what it writes into ([`Out`]): the leaf that
//! every format's file and [`AnyFormat`](super::AnyFormat) import.

use crate::record::common::SinkInfo;
use crate::stages::Packet;
use std::path::Path;

/// Where a sink's records go: the consumer half's byte stream across its buffers.
pub trait Out {
    /// Whether a record of `total` bytes received at `ts_ns` goes into the buffers (else it
    /// was counted as not recorded). Called once per record, before its bytes.
    fn admit(&mut self, total: usize, ts_ns: u64) -> bool;
    /// Appends bytes of the admitted record.
    fn put(&mut self, bytes: &[u8]);
}

/// What a sink's records are made of besides the queue's packets: where the queue is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Link {
    /// The engine delivers Ethernet frames (else payloads: pcap rebuilds the headers).
    pub frames: bool,
    /// Socket engine: the queue's IPv4 address and port (destination of rebuilt headers).
    pub dst: ([u8; 4], u16),
}

/// A record that went into the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    /// Bytes of the record (its header included).
    pub total: usize,
    /// Bytes of the packet's data in it (DADA `PKT_SIZE`).
    pub data: usize,
}

/// What the writer knows of a file when it writes the file's header.
pub struct FileFacts<'a> {
    /// The sink (recorder, queue, config, start of the run).
    pub info: &'a SinkInfo,
    /// Path of the file.
    pub path: &'a Path,
    /// File number.
    pub number: u32,
    /// First packet of the recording (else the run's start), ns since the epoch.
    pub obs_start_ns: u64,
    /// Stream bytes before this file.
    pub obs_offset: u64,
    /// Bytes of the file so far, its header included.
    pub bytes: u64,
    /// Packets whose records the file holds so far.
    pub packets: u64,
    /// The file's first rtdaq sequence number and its stream id, if any.
    pub first_seq: Option<(u16, u64)>,
    /// Bytes of the first packet's data.
    pub first_len: u32,
    /// The file is complete: its sizes are final.
    pub last: bool,
}

/// One record format.
pub trait Format {
    /// Bytes the writer puts at the head of each file, before the stream (a DADA header).
    fn file_header_len(&self) -> u64 {
        0
    }
    /// That header (exactly [`file_header_len`](Self::file_header_len) bytes), written when
    /// the file opens and again, with `facts.last`, when it closes; `None`: no header.
    fn file_header(&self, _facts: &FileFacts<'_>) -> Option<Vec<u8>> {
        None
    }
    /// Bytes each file's stream starts with (pcap's file header), put by the consumer half
    /// before the file's first record; asked once, before the run.
    fn stream_header(&self) -> Vec<u8> {
        Vec::new()
    }
    /// Puts one packet's record (hot path: no allocation). `None` when `out` did not admit
    /// it.
    fn record(&mut self, p: &Packet<'_>, out: &mut impl Out) -> Option<Recorded>;
}
