//! Instrument stream formats: where a received payload sits in its stream.
//!
//! The validator of every RX queue tracks loss, reordering and duplicates per stream over a
//! linear `u64` sequence ([`crate::seq::SeqTracker`]). rtdaq's own generator writes that
//! sequence into its 32-byte header ([`crate::wire::SeqHeader`]); real instruments carry it
//! elsewhere. A format turns one payload (the UDP payload, or the TCP record) into a
//! [`Position`] — the stream it belongs to and its linear sequence number — or a
//! [`Reject`] reason that the validator counts:
//!
//! | format | stream | sequence | module |
//! |---|---|---|---|
//! | `counter` | an optional field (beam, channel block, ...) | a counter anywhere in the payload: offset, width, endianness, bit field, step, wrap; unwrapped per stream | [`counter`] |
//! | `codif` | `group << 16 \| thread` | `(period index − first) × frames per period + frame number`; frames per period configured or learned at the first period boundary | [`codif`] |
//! | `ecpri` | `message type << 16 \| PC_ID` (types 0–2), PC_ID (type 3) | the sequence id, unwrapped per stream (8 or 32 bits) | [`ecpri`] |
//! | `spead` | `heap counter % heap_step` | heaps assembled in a window: complete, incomplete and missing heaps, missing bytes and packets (not a `SeqTracker` sequence) | [`spead`] |
//! | `spead` (sending) | — | — (heaps split into packets, item descriptors and the end-of-stream heap as spead2 sends them, for the egress stage) | [`spead_tx`] |
//! | `vdif` | station id and thread id | `(seconds from the reference epoch − first) × frames per second + data frame number`; frames per second configured or learned at the first second boundary | [`vdif`] |
//!
//! [`spead_tx`] is the other direction: it encodes SPEAD for rtdaq's egress stage, and
//! [`egress_msg`] is the header of the messages a `ucx` egress sink sends; [`mod@unit`] says
//! which whole unit (a SPEAD heap, a VDIF/CODIF time slot) a datagram belongs to, for a
//! sink that forwards units whole.
//!
//! Everything here is `no_std`, allocation-free and `O(1)` per packet (the SPEAD
//! packetizer: `O(items)`); no input panics (the parsers are fuzzed in
//! `tests/format_props.rs`).

pub mod codif;
pub mod counter;
pub mod ecpri;
pub mod egress_msg;
pub mod spead;
pub mod spead_tx;
pub mod unit;
pub mod vdif;

pub use codif::CodifHeader;
pub use counter::{CounterField, CounterFormat, Unwrap};
pub use spead::{Flavour, HeapStats, HeapTracker, SpeadPacket};
pub use spead_tx::{Descriptor, ItemType, Packetizer};
pub use unit::{UnitKind, UnitOf};
pub use vdif::{VdifHeader, VdifSequencer};

/// Where one payload sits: its stream and its linear sequence number in that stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Position {
    /// Stream key (format-specific; see each format).
    pub stream: u32,
    /// Linear sequence number within the stream (wrapping `u64`, as `SeqTracker` takes it).
    pub seq: u64,
    /// The sender flagged the data invalid (VDIF's invalid bit): it arrived and is
    /// sequence-tracked, and counted `invalid`.
    pub invalid: bool,
}

/// Why a payload has no [`Position`]; each is counted by the validator under
/// [`as_str`](Reject::as_str).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reject {
    /// Shorter than the format's header (or than the counter field's end).
    Short,
    /// The header's own length disagrees with the payload's (VDIF frame length).
    Length,
    /// Not this format (a version or magic the format does not know).
    Foreign,
    /// A counter that moved by something other than a multiple of its step.
    Step,
    /// A VDIF data frame number at or beyond the frames per second.
    FrameNumber,
    /// A SPEAD packet without a heap counter, heap offset or payload length item.
    Items,
}

impl Reject {
    /// Every reason, in report order.
    pub const ALL: [Reject; 6] = [
        Reject::Short,
        Reject::Length,
        Reject::Foreign,
        Reject::Step,
        Reject::FrameNumber,
        Reject::Items,
    ];
    /// Number of reasons.
    pub const COUNT: usize = Self::ALL.len();

    /// Index in [`ALL`](Self::ALL).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Report key: `short`, `length`, `foreign`, `step`, `frame_number`, `items`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reject::Short => "short",
            Reject::Length => "length",
            Reject::Foreign => "foreign",
            Reject::Step => "step",
            Reject::FrameNumber => "frame_number",
            Reject::Items => "items",
        }
    }
}

impl core::fmt::Display for Reject {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Reject::Short => "shorter than the format's header",
            Reject::Length => "header length differs from the payload length",
            Reject::Foreign => "not this format",
            Reject::Step => "counter moved by a non-multiple of its step",
            Reject::FrameNumber => "VDIF/CODIF frame number at or beyond the frame rate",
            Reject::Items => "SPEAD packet without heap counter, offset or length item",
        })
    }
}
