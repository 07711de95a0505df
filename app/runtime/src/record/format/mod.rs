//! Record formats: how a packet becomes a record in a sink's byte stream, and what heads each
//! file. One small type per format ([`pcap`], [`raw`], [`dada`]) behind one trait,
//! [`Format`]; [`AnyFormat`] holds the one a recorder names (static dispatch: a `match` per
//! packet, no `dyn`).
//!
//! A new format is a new file here with its type and its `impl Format`, one variant of
//! [`AnyFormat`] (below), and in the config crate its `RecordFormat` variant
//! (`model/record.rs`) and rules (`validate/record.rs`).

pub mod dada;
pub mod pcap;
pub mod raw;

use super::common::SinkInfo;
use crate::stages::Packet;
use rtdaq_config::model::{RecordFormat, Recorder};
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

/// The format a recorder names.
#[derive(Debug, Clone)]
pub enum AnyFormat {
    /// `pcap`.
    Pcap(pcap::Pcap),
    /// `raw`.
    Raw(raw::Raw),
    /// `dada`.
    Dada(dada::Dada),
}

impl AnyFormat {
    /// The format of `rec` for a queue at `link`.
    pub fn new(rec: &Recorder, link: Link) -> Self {
        match rec.format {
            RecordFormat::Pcap => AnyFormat::Pcap(pcap::Pcap::new(rec, link)),
            RecordFormat::Raw => AnyFormat::Raw(raw::Raw::new(rec)),
            RecordFormat::Dada => AnyFormat::Dada(dada::Dada::new(rec)),
        }
    }
}

/// Calls `$call` on the format inside.
macro_rules! each {
    ($self:expr, $f:ident => $call:expr) => {
        match $self {
            AnyFormat::Pcap($f) => $call,
            AnyFormat::Raw($f) => $call,
            AnyFormat::Dada($f) => $call,
        }
    };
}

impl Format for AnyFormat {
    fn file_header_len(&self) -> u64 {
        each!(self, f => f.file_header_len())
    }
    fn file_header(&self, facts: &FileFacts<'_>) -> Option<Vec<u8>> {
        each!(self, f => f.file_header(facts))
    }
    fn stream_header(&self) -> Vec<u8> {
        each!(self, f => f.stream_header())
    }
    #[inline]
    fn record(&mut self, p: &Packet<'_>, out: &mut impl Out) -> Option<Recorded> {
        each!(self, f => f.record(p, out))
    }
}
