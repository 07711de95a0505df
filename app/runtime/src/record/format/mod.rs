//! Record formats: how a packet becomes a record in a sink's byte stream, and what heads each
//! file. One small type per format ([`pcap`], [`raw`], [`dada`]) behind one trait,
//! [`Format`]; [`AnyFormat`] holds the one a recorder names (static dispatch: a `match` per
//! packet, no `dyn`).
//!
//! A new format is a new file here with its type and its `impl Format`, one variant of
//! [`AnyFormat`] (below), and in the config crate its `RecordFormat` variant
//! (`model/record.rs`) and rules (`validate/record.rs`).

mod api;
pub mod dada;
pub mod pcap;
pub mod raw;

pub use api::{FileFacts, Format, Link, Out, Recorded};

use crate::stages::Packet;
use rtdaq_config::model::{RecordFormat, Recorder};

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
