//! The RX-side checker: sequence, payload-pattern and latency checks on received payloads.
//!
//! One [`Validator`] per RX queue, owned by that queue's consumer thread (or its I/O thread
//! in direct mode). [`check`](Validator::check) takes one UDP payload (the bytes the
//! generator's [`PayloadGen`] wrote) and its receive time, and:
//!
//! 1. counts it in `received` / `bytes` (application payload bytes, i.e. the UDP payload);
//! 2. parses the [`SeqHeader`]: shorter than 32 bytes, wrong magic or version, or shorter
//!    than `32 + payload_len` → `malformed`, nothing else is done (trailing bytes beyond
//!    `payload_len`, e.g. Ethernet padding, are ignored);
//! 3. with [`FLAG_PATTERN`] set, checks the payload pattern; a mismatch → `corrupt`, and the
//!    packet is **not** sequence-tracked (its header cannot be trusted), so its number
//!    stays a gap: a corrupt packet also counts as lost;
//! 4. tracks the sequence number in the stream's [`SeqTracker`] (window
//!    [`SEQ_WINDOW`] = 1024): `seq_gaps`, `reordered`, `duplicates`, `too_old` as defined in
//!    [`rtdaq_core::seq`] (the first packet seen of a stream is its base: a lower number
//!    arriving after it is `too_old`, not reordered). Streams live in a table preallocated
//!    for the interface's `max_streams` (default [`DEFAULT_MAX_STREAMS`] = 64, at most
//!    [`MAX_STREAMS_LIMIT`]), found through an open-addressing index of twice that size (no
//!    `HashMap`, a short probe even when the table is full); a packet of one stream more
//!    is counted in `streams_overflow` and not sequence-tracked. The run counts those
//!    packets as lost ([`ValidatorStats::lost_against`]): nothing says whether their
//!    streams are complete, so a deployment with more streams raises `max_streams`;
//! 5. records one-way latency `rx_ns − tx_timestamp_ns` into a [`Histogram`] when both
//!    are non-zero (0 = unknown). A negative difference (clock skew) is recorded as 0 and
//!    counted in `negative_latency`. Both times are `CLOCK_REALTIME` ns (see
//!    [`crate::pacer`]).
//!
//! ## End of run: `lost`
//! `seq_gaps` is net: numbers skipped minus late arrivals that filled a hole. After TX has
//! stopped and RX has drained, the holes still open are lost: [`lost`](Validator::lost) ==
//! [`finish`](Validator::finish)`().seq_gaps`. Loss after the last received packet of a
//! stream (tail loss) is invisible to sequence numbers; when the sender's count is known,
//! [`ValidatorStats::lost_against`] also counts it.
//!
//! ## Live counters
//! [`publish`](Validator::publish) adds what changed since the previous call to a
//! consumer-side [`QueueCounters`]: `packets`/`bytes` (validated payloads),
//! `seq_gaps` (**gross**: numbers skipped when the skip was seen — live counters only grow),
//! `reordered`, `duplicates`, `corrupt`. The final report uses the net [`ValidatorStats`].
//!
//! [`check`] and [`publish`] never allocate, block or log; the `Validator` is built (and
//! its ~100 KiB of tables zeroed, on the heap) before the hot path starts.
//!
//! The generator side ([`PayloadGen`], [`SendLimit`]) is in [`crate::generator`] and
//! re-exported here.
//!
//! [`check`]: Validator::check
//! [`publish`]: Validator::publish

pub use crate::generator::{GeneratorError, PayloadGen, SendLimit};

use crate::latency::{Histogram, LatencySummary};
use rtdaq_config::model::{StreamFormat, Validation};
use rtdaq_core::counters::QueueCounters;
use rtdaq_core::format::codif;
use rtdaq_core::format::ecpri::{self, Piece};
use rtdaq_core::format::spead::HeapEvent;
use rtdaq_core::format::{
    Flavour, HeapStats, HeapTracker, Reject, SpeadPacket, Unwrap, VdifSequencer,
};
use rtdaq_core::seq::{SeqEvent, SeqTracker};
use rtdaq_core::wire::seqhdr::{check_pattern, SeqHeader, FLAG_PATTERN};
use serde::{Deserialize, Serialize};

/// Streams one validator tracks (one sequence space each) unless the interface's
/// `max_streams` says otherwise.
pub const DEFAULT_MAX_STREAMS: usize = rtdaq_config::model::DEFAULT_MAX_STREAMS as usize;
/// The most an interface's `max_streams` may ask for.
pub const MAX_STREAMS_LIMIT: usize = rtdaq_config::model::MAX_STREAMS_LIMIT as usize;
/// Empty entry of the stream index.
const NO_SLOT: u32 = u32::MAX;
/// `SeqTracker` bitmap words per stream (window = 64 × this).
const SEQ_WORDS: usize = 16;
/// Sequence numbers remembered behind the highest one, per stream.
pub const SEQ_WINDOW: u64 = SeqTracker::<SEQ_WORDS>::WINDOW;

/// What [`Validator::check`] found for one payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Intact and sequence-tracked; what the sequence number was.
    Ok(SeqEvent),
    /// Intact, but the stream table was full: not sequence-tracked.
    StreamOverflow,
    /// The payload pattern did not match (not sequence-tracked).
    Corrupt,
    /// No valid sequence header (short, bad magic/version, truncated payload).
    Malformed,
    /// Counted only: `Validation::Count` (nothing was checked), or a piece of a split eCPRI
    /// message before its last (its sequence id is tracked with the last piece).
    Counted,
}

pub use crate::stages::HeapPiece;

/// The validator's counters; see the [module docs](self) for each definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ValidatorStats {
    /// Payloads checked (every call to `check`, malformed ones included).
    pub received: u64,
    /// Application payload (UDP payload) bytes checked. With `validate = "count"` on a frame
    /// engine and no stage that reads payloads
    /// ([`Stage::reads_packets`](crate::stages::Stage::reads_packets)), the frames' bytes: nothing
    /// parsed them.
    pub bytes: u64,
    /// Sequence numbers missing now (net of late arrivals); at the end of a run, lost.
    pub seq_gaps: u64,
    /// Late arrivals that filled a hole.
    pub reordered: u64,
    /// Sequence numbers seen again within the window.
    pub duplicates: u64,
    /// Payload pattern mismatches.
    pub corrupt: u64,
    /// Payloads without a valid sequence header.
    pub malformed: u64,
    /// Sequence numbers too far behind to judge (outside the window or before the start).
    pub too_old: u64,
    /// Distinct sequence numbers delivered intact (in order, after a gap, or late).
    pub unique: u64,
    /// Streams tracked.
    pub streams: u64,
    /// Intact payloads of streams beyond the table (the interface's `max_streams`): not
    /// sequence-tracked, so counted as lost.
    pub streams_overflow: u64,
    /// Packets whose rx time was before their tx time (recorded as 0 ns).
    pub negative_latency: u64,
    /// One-way latency in ns of intact packets with both timestamps.
    pub latency: LatencySummary,
    /// Packets received into GPU memory, counted but not read (no sequence or content
    /// check): a `device` region written by the NIC.
    #[serde(default)]
    pub in_gpu_memory: u64,
    /// Payloads the sender flagged invalid (VDIF's invalid bit): arrived and tracked.
    #[serde(default)]
    pub invalid: u64,
    /// Payloads of an instrument format without a position, by reason (also counted in
    /// `malformed`).
    #[serde(default)]
    pub rejects: Rejects,
    /// SPEAD heaps (all streams), when the format is `spead`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heaps: Option<HeapCounts>,
}

/// SPEAD heap counters (see [`rtdaq_core::format::spead`]), at the end of a run: every heap
/// still open counted as it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HeapCounts {
    /// Heaps whose bytes all arrived.
    pub complete: u64,
    /// Heaps with bytes missing.
    pub incomplete: u64,
    /// Heap numbers of which nothing arrived.
    pub missing: u64,
    /// Heaps without a heap-size item (completeness unknown).
    pub unsized_heaps: u64,
    /// Heap payload bytes missing (in incomplete and missing heaps).
    pub missing_bytes: u64,
    /// End-of-stream packets (stream control 2).
    pub ends: u64,
}

impl From<&HeapStats> for HeapCounts {
    fn from(h: &HeapStats) -> Self {
        HeapCounts {
            complete: h.complete,
            incomplete: h.incomplete,
            missing: h.missing,
            unsized_heaps: h.unsized_heaps,
            missing_bytes: h.missing_bytes,
            ends: h.ends,
        }
    }
}

impl HeapCounts {
    /// Adds `o` to `self`.
    pub fn merge(&mut self, o: &HeapCounts) {
        self.complete += o.complete;
        self.incomplete += o.incomplete;
        self.missing += o.missing;
        self.unsized_heaps += o.unsized_heaps;
        self.missing_bytes = self.missing_bytes.saturating_add(o.missing_bytes);
        self.ends += o.ends;
    }
}

/// Payloads an instrument format could not place, by [`Reject`] reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Rejects {
    /// Shorter than the format's header or field.
    pub short: u64,
    /// Header length differs from the payload length (VDIF).
    pub length: u64,
    /// Not this format.
    pub foreign: u64,
    /// A counter that moved by a non-multiple of its step, or is beyond its wrap.
    pub step: u64,
    /// A VDIF frame number at or beyond the frames per second.
    pub frame_number: u64,
    /// A SPEAD packet without a heap counter, heap offset or payload length item.
    #[serde(default)]
    pub items: u64,
}

impl Rejects {
    fn add(&mut self, r: Reject) {
        let c = match r {
            Reject::Short => &mut self.short,
            Reject::Length => &mut self.length,
            Reject::Foreign => &mut self.foreign,
            Reject::Step => &mut self.step,
            Reject::Items => &mut self.items,
            _ => &mut self.frame_number,
        };
        *c += 1;
    }

    /// Adds `o` to `self`.
    pub fn merge(&mut self, o: &Rejects) {
        self.short += o.short;
        self.length += o.length;
        self.foreign += o.foreign;
        self.step += o.step;
        self.frame_number += o.frame_number;
        self.items += o.items;
    }

    /// Each reason with its report key, in report order.
    pub const fn by_reason(&self) -> [(&'static str, u64); 6] {
        [
            ("short", self.short),
            ("length", self.length),
            ("foreign", self.foreign),
            ("step", self.step),
            ("frame_number", self.frame_number),
            ("items", self.items),
        ]
    }

    /// Sum over reasons.
    pub const fn total(&self) -> u64 {
        self.short + self.length + self.foreign + self.step + self.frame_number + self.items
    }
}

/// One stream's counters at the end of a run (the report's `streams`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamStats {
    /// Stream key (rtdaq: the header's stream id; counter: the stream field; VDIF:
    /// `station << 10 | thread`).
    pub id: u32,
    /// Payloads of the stream that were sequence-tracked.
    pub packets: u64,
    /// Sequence numbers missing (lost at the end of a run).
    pub missing: u64,
    /// Late arrivals that filled a hole.
    pub reordered: u64,
    /// Sequence numbers seen again.
    pub duplicates: u64,
    /// Too far behind to judge.
    pub too_old: u64,
    /// Flagged invalid by the sender (VDIF).
    pub invalid: u64,
    /// The stream's SPEAD heaps (`spead` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heaps: Option<HeapCounts>,
}

pub use crate::live_streams::NAMED_COUNTERS;

impl ValidatorStats {
    /// Every counter the validator keeps, with its name
    /// ([`CHECK_NAMES`](crate::live_streams::CHECK_NAMES), the latency histogram apart).
    /// No allocation.
    pub fn named(&self) -> [(&'static str, u64); NAMED_COUNTERS] {
        let r = &self.rejects;
        let h = self.heaps.unwrap_or_default();
        let values = [
            self.received,
            self.bytes,
            self.seq_gaps,
            self.reordered,
            self.duplicates,
            self.corrupt,
            self.malformed,
            self.too_old,
            self.unique,
            self.streams,
            self.streams_overflow,
            self.negative_latency,
            self.in_gpu_memory,
            self.invalid,
            r.short,
            r.length,
            r.foreign,
            r.step,
            r.frame_number,
            r.items,
            h.complete,
            h.incomplete,
            h.missing,
            h.unsized_heaps,
            h.missing_bytes,
            h.ends,
        ];
        core::array::from_fn(|i| (crate::live_streams::CHECK_NAMES[i], values[i]))
    }

    /// Lost packets: [`seq_gaps`](Self::seq_gaps) plus the packets of streams beyond the
    /// table ([`streams_overflow`](Self::streams_overflow): nothing says whether their
    /// streams are complete), or more when fewer than `generated` distinct packets arrived
    /// (tail loss; the overflow's packets are not among them either). `generated` =
    /// sequence numbers the sender used, 0 when unknown (an external sender). Packets
    /// [`in_gpu_memory`](Self::in_gpu_memory) count as arrived (their sequence numbers
    /// cannot be read, so a duplicate among them would hide a loss).
    pub fn lost_against(&self, generated: u64) -> u64 {
        self.seq_gaps
            .saturating_add(self.streams_overflow)
            .max(generated.saturating_sub(self.unique.saturating_add(self.in_gpu_memory)))
    }
}

#[derive(Debug, Clone)]
struct Slot {
    id: u32,
    tracker: SeqTracker<SEQ_WORDS>,
    /// Counter format: the stream's raw counter → linear count.
    unwrap: Unwrap,
    invalid: u64,
    /// SPEAD format: the stream's heap window.
    heaps: HeapTracker,
}

impl Slot {
    const EMPTY: Slot = Slot {
        id: 0,
        tracker: SeqTracker::new(),
        unwrap: Unwrap::new(),
        invalid: 0,
        heaps: HeapTracker::new(),
    };
}

/// What was last published to live counters.
#[derive(Debug, Clone, Copy, Default)]
struct Published {
    packets: u64,
    bytes: u64,
    gaps_gross: u64,
    reordered: u64,
    duplicates: u64,
    corrupt: u64,
}

/// The RX-side checker of one queue; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct Validator {
    mode: Validation,
    format: StreamFormat,
    vdif: VdifSequencer,
    /// One slot per stream the table holds, in the order the streams were first seen (the
    /// first `stats.streams` are in use), on the heap (1152 bytes each with the SPEAD heap
    /// window: too much for a thread's stack when the validator moves).
    slots: Box<[Slot]>,
    /// Open-addressing index of `slots` by stream id: a power of two at least twice the
    /// slots (so a probe always ends at an empty entry soon), [`NO_SLOT`] when empty.
    index: Box<[u32]>,
    stats: ValidatorStats,
    gaps_gross: u64,
    latency: Histogram,
    /// The same latencies in the coarse buckets `/metrics` exports.
    live_latency: crate::latency::Coarse,
    published: Published,
    /// The sequence number the last `check` tracked (`None`: it tracked none).
    last_seq: Option<u64>,
    /// Where the last `check`'s SPEAD packet goes in its heap.
    last_piece: HeapPiece,
    /// Bursts since the stream table was last published.
    bursts: u32,
    /// The last stream looked up and its slot (`slot`: [`NO_SLOT`] before the first): a
    /// stream's payloads come in runs, so most lookups end here without the hash.
    last_stream: (u32, u32),
}

impl Default for Validator {
    fn default() -> Self {
        Self::new()
    }
}

impl Validator {
    /// An empty validator doing every check (`Validation::Full`).
    pub fn new() -> Self {
        Self::with_mode(Validation::Full)
    }

    /// An empty validator doing the checks of `mode` (all tables preallocated inline).
    pub fn with_mode(mode: Validation) -> Self {
        Self::with_format(mode, StreamFormat::Rtdaq)
    }

    /// An empty validator for payloads of `format` (`[interfaces.format]`). With an
    /// instrument format, `full` and `sequence` both track the format's sequence (there is
    /// no rtdaq pattern to check) and `count` counts only.
    pub fn with_format(mode: Validation, format: StreamFormat) -> Self {
        Self::with_streams(mode, format, DEFAULT_MAX_STREAMS)
    }

    /// [`with_format`](Self::with_format) with a table of `max_streams` streams (the
    /// interface's `max_streams`; clamped to `1..=`[`MAX_STREAMS_LIMIT`]), allocated here.
    pub fn with_streams(mode: Validation, format: StreamFormat, max_streams: usize) -> Self {
        let max_streams = max_streams.clamp(1, MAX_STREAMS_LIMIT);
        let fps = match format {
            StreamFormat::Vdif(v) => v.frames_per_second,
            StreamFormat::Codif(c) => c.frames_per_period,
            _ => None,
        };
        Self {
            mode,
            format,
            vdif: VdifSequencer::new(fps),
            slots: vec![Slot::EMPTY; max_streams].into_boxed_slice(),
            index: vec![NO_SLOT; (2 * max_streams).next_power_of_two()].into_boxed_slice(),
            stats: ValidatorStats::default(),
            gaps_gross: 0,
            latency: Histogram::new(),
            live_latency: crate::latency::Coarse::default(),
            published: Published::default(),
            last_seq: None,
            last_piece: HeapPiece::None,
            bursts: 0,
            last_stream: (0, NO_SLOT),
        }
    }

    /// Streams in the table (slots `0..n` are in use).
    #[inline]
    fn used(&self) -> usize {
        self.stats.streams as usize
    }

    /// The slot index of `id`, taking the next free slot the first time; `None` when the
    /// table is full. The index is at least twice the slots, so the probe always ends.
    #[inline]
    fn slot(&mut self, id: u32) -> Option<usize> {
        if self.last_stream.0 == id && self.last_stream.1 != NO_SLOT {
            return Some(self.last_stream.1 as usize);
        }
        let i = self.lookup(id)?;
        self.last_stream = (id, i as u32);
        Some(i)
    }

    /// [`slot`](Self::slot) through the index.
    #[inline]
    fn lookup(&mut self, id: u32) -> Option<usize> {
        let mask = self.index.len() - 1;
        // Fold and mix the key so VDIF's `station << 10 | thread` spreads over the index.
        let mut h = ((id ^ (id >> 10)).wrapping_mul(0x9E37_79B9) as usize) & mask;
        loop {
            match self.index[h] {
                NO_SLOT => {
                    let n = self.used();
                    let s = self.slots.get_mut(n)?;
                    s.id = id;
                    self.index[h] = n as u32;
                    self.stats.streams += 1;
                    return Some(n);
                }
                i if self.slots[i as usize].id == id => return Some(i as usize),
                _ => h = (h + 1) & mask,
            }
        }
    }

    /// The number of streams the table holds (`max_streams`).
    pub fn max_streams(&self) -> usize {
        self.slots.len()
    }

    /// Counts a payload the format could not place (`malformed`, by reason).
    #[inline]
    fn reject(&mut self, r: Reject) -> Verdict {
        self.stats.malformed += 1;
        self.stats.rejects.add(r);
        Verdict::Malformed
    }

    /// Tracks `seq` in slot `i`.
    #[inline]
    fn track(&mut self, i: usize, seq: u64) -> Verdict {
        self.last_seq = Some(seq);
        let ev = self.slots[i].tracker.observe(seq);
        let st = &mut self.stats;
        match ev {
            SeqEvent::InOrder => st.unique += 1,
            SeqEvent::Gap { missing } => {
                st.unique += 1;
                st.seq_gaps = st.seq_gaps.saturating_add(missing);
                self.gaps_gross = self.gaps_gross.saturating_add(missing);
            }
            SeqEvent::Reordered => {
                st.unique += 1;
                st.reordered += 1;
                st.seq_gaps = st.seq_gaps.saturating_sub(1);
            }
            SeqEvent::Duplicate => st.duplicates += 1,
            SeqEvent::TooOld => st.too_old += 1,
        }
        Verdict::Ok(ev)
    }

    /// A SPEAD packet: placed in its stream's heap window.
    #[inline]
    fn check_spead(&mut self, payload: &[u8], flavour: Option<Flavour>, step: u64) -> Verdict {
        let p = match SpeadPacket::parse(payload, flavour) {
            Ok(p) => p,
            Err(r) => return self.reject(r),
        };
        let Some(i) = self.slot((p.heap_cnt % step) as u32) else {
            self.stats.streams_overflow += 1;
            return Verdict::StreamOverflow;
        };
        let heaps = &mut self.slots[i].heaps;
        let before = heaps.closed().missing_packets;
        let ev = heaps.observe(p.heap_cnt / step, &p);
        let missing = heaps.closed().missing_packets - before;
        self.last_piece = match ev {
            HeapEvent::Duplicate => HeapPiece::Duplicate,
            HeapEvent::TooOld => HeapPiece::TooOld,
            _ if p.stop || p.length == 0 => HeapPiece::Control,
            _ => HeapPiece::Data {
                heap_cnt: p.heap_cnt,
                offset: p.offset,
                // `parse` checked that the payload length item equals the bytes that follow.
                start: payload.len() - p.length as usize,
                len: p.length as usize,
            },
        };
        let st = &mut self.stats;
        st.seq_gaps = st.seq_gaps.saturating_add(missing);
        self.gaps_gross = self.gaps_gross.saturating_add(missing);
        Verdict::Ok(match ev {
            HeapEvent::Placed => {
                st.unique += 1;
                if missing > 0 {
                    SeqEvent::Gap { missing }
                } else {
                    SeqEvent::InOrder
                }
            }
            HeapEvent::Late => {
                st.unique += 1;
                st.reordered += 1;
                SeqEvent::Reordered
            }
            HeapEvent::Duplicate => {
                st.duplicates += 1;
                SeqEvent::Duplicate
            }
            HeapEvent::TooOld => {
                st.too_old += 1;
                SeqEvent::TooOld
            }
        })
    }

    /// A payload of an instrument format (counter, VDIF, CODIF, SPEAD, eCPRI).
    #[inline]
    fn check_format(&mut self, payload: &[u8], len: usize) -> Verdict {
        if let StreamFormat::Spead(s) = self.format {
            return self.check_spead(payload, s.flavour, u64::from(s.heap_step));
        }
        let (stream, raw, counter, invalid) = match self.format {
            StreamFormat::Counter(f) => match f.read(payload) {
                Ok((stream, raw)) => (stream, raw, Some(f), false),
                Err(r) => return self.reject(r),
            },
            StreamFormat::Ecpri => match ecpri::read(payload) {
                Ok(Piece::Message {
                    stream,
                    raw,
                    format,
                }) => (stream, raw, Some(*format), false),
                // Not the last piece of a split message: counted, not tracked.
                Ok(Piece::Fragment) => return Verdict::Counted,
                Err(r) => return self.reject(r),
            },
            StreamFormat::Codif(_) => match codif::position_head(&mut self.vdif, payload, len) {
                Ok(p) => (p.stream, p.seq, None, p.invalid),
                Err(r) => return self.reject(r),
            },
            _ => match self.vdif.position_head(payload, len) {
                Ok(p) => (p.stream, p.seq, None, p.invalid),
                Err(r) => return self.reject(r),
            },
        };
        let Some(i) = self.slot(stream) else {
            self.stats.streams_overflow += 1;
            return Verdict::StreamOverflow;
        };
        let seq = match counter {
            Some(f) => match self.slots[i].unwrap.position(&f, stream, raw) {
                Ok(p) => p.seq,
                Err(r) => return self.reject(r),
            },
            None => raw,
        };
        if invalid {
            self.stats.invalid += 1;
            self.slots[i].invalid += 1;
        }
        self.track(i, seq)
    }

    /// Each stream's counters (off the hot path: allocates).
    pub fn streams(&self) -> Vec<StreamStats> {
        let mut v: Vec<StreamStats> = self.slots[..self.used()]
            .iter()
            .map(|s| {
                if self.is_spead() {
                    let h = s.heaps.flushed();
                    return StreamStats {
                        id: s.id,
                        packets: h.packets,
                        missing: h.missing_packets,
                        reordered: h.reordered,
                        duplicates: h.duplicates,
                        too_old: h.too_old,
                        invalid: 0,
                        heaps: Some(HeapCounts::from(&h)),
                    };
                }
                let t = s.tracker.snapshot();
                StreamStats {
                    id: s.id,
                    packets: t.received,
                    missing: t.gaps,
                    reordered: t.reordered,
                    duplicates: t.duplicates,
                    too_old: t.too_old,
                    invalid: s.invalid,
                    heaps: None,
                }
            })
            .collect();
        v.sort_by_key(|s| s.id);
        v
    }

    /// The stream format, and the VDIF frame rate in use (configured or learned, `None`
    /// while learning or for other formats) with whether it was learned.
    pub fn format(&self) -> (StreamFormat, Option<u32>, bool) {
        (
            self.format,
            self.vdif.frames_per_second(),
            self.vdif.learned(),
        )
    }

    /// Checks one payload received at `rx_ns` (`CLOCK_REALTIME` ns; 0 = unknown, no
    /// latency). `O(payload)` for the pattern check, no allocation.
    pub fn check(&mut self, payload: &[u8], rx_ns: u64) -> Verdict {
        self.check_len(payload, payload.len(), rx_ns)
    }

    /// [`check`](Self::check) of a payload of `len` bytes of which only the first
    /// `head.len()` are readable (header-data split into GPU memory): the format's header
    /// is read from `head` and its lengths checked against `len`; no pattern check (config
    /// check refuses `validate = "full"` there). No allocation.
    pub fn check_len(&mut self, head: &[u8], len: usize, rx_ns: u64) -> Verdict {
        let payload = head;
        let split = head.len() < len;
        self.last_seq = None;
        self.last_piece = HeapPiece::None;
        let st = &mut self.stats;
        st.received += 1;
        st.bytes = st.bytes.wrapping_add(len as u64);
        if self.mode == Validation::Count {
            return Verdict::Counted;
        }
        if !matches!(self.format, StreamFormat::Rtdaq) {
            return self.check_format(payload, len);
        }
        let parsed = if split {
            SeqHeader::parse(head)
                .ok()
                .filter(|h| (h.payload_len as usize).saturating_add(SeqHeader::LEN) <= len)
                .map(|h| (h, &[][..]))
        } else {
            SeqHeader::parse_with_payload(payload).ok()
        };
        let Some((h, body)) = parsed else {
            st.malformed += 1;
            return Verdict::Malformed;
        };
        if self.mode == Validation::Full
            && !split
            && h.has(FLAG_PATTERN)
            && !check_pattern(h.stream_id, h.seq, body)
        {
            st.corrupt += 1;
            return Verdict::Corrupt;
        }
        if h.tx_timestamp_ns != 0 && rx_ns != 0 {
            let d = rx_ns.checked_sub(h.tx_timestamp_ns).unwrap_or_else(|| {
                st.negative_latency += 1;
                0
            });
            self.latency.record(d);
            self.live_latency.record(d);
        }
        let Some(i) = self.slot(u32::from(h.stream_id)) else {
            self.stats.streams_overflow += 1;
            return Verdict::StreamOverflow;
        };
        self.track(i, h.seq)
    }

    /// The linear sequence number of the payload the last [`check`](Self::check) tracked
    /// (rtdaq's header, a counter, VDIF, CODIF, eCPRI; `None` for SPEAD, which places
    /// packets in heaps, for a payload it could not place, and with `validate = "count"`).
    /// The GPU stage's `reorder` mode places payloads by it.
    pub const fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

    /// Where the SPEAD packet the last [`check`](Self::check) saw goes in its heap
    /// ([`HeapPiece::None`] for the other formats). The GPU stage assembles heaps by it.
    pub const fn last_piece(&self) -> HeapPiece {
        self.last_piece
    }

    /// The validation mode.
    pub const fn mode(&self) -> Validation {
        self.mode
    }

    /// Counts a packet of `len` bytes without reading it (`validate = "count"`, nothing
    /// else reads payloads): what [`check_len`](Self::check_len) does in that mode, minus
    /// finding the payload. Never allocates.
    #[inline]
    pub fn count(&mut self, len: u64) {
        let st = &mut self.stats;
        st.received += 1;
        st.bytes = st.bytes.wrapping_add(len);
    }

    /// Counts a packet of `len` bytes that lies in GPU memory: received, but its payload
    /// cannot be read by the CPU (no sequence or content check). Never allocates.
    #[inline]
    pub fn count_in_gpu(&mut self, len: u64) {
        let st = &mut self.stats;
        st.received += 1;
        st.bytes = st.bytes.wrapping_add(len);
        st.in_gpu_memory += 1;
    }

    /// Adds the changes since the previous call to the live counters `c` (this thread must
    /// be `c`'s only writer); see the [module docs](self). No allocation.
    pub fn publish(&mut self, c: &QueueCounters) {
        let now = Published {
            packets: self.stats.received,
            bytes: self.stats.bytes,
            gaps_gross: self.gaps_gross,
            reordered: self.stats.reordered,
            duplicates: self.stats.duplicates,
            corrupt: self.stats.corrupt,
        };
        let p = self.published;
        if now.packets != p.packets {
            c.record_rx_burst(now.packets - p.packets, now.bytes.wrapping_sub(p.bytes));
        }
        if now.gaps_gross != p.gaps_gross {
            c.add_seq_gaps(now.gaps_gross - p.gaps_gross);
        }
        if now.reordered != p.reordered {
            c.add_reordered(now.reordered - p.reordered);
        }
        if now.duplicates != p.duplicates {
            c.add_duplicates(now.duplicates - p.duplicates);
        }
        if now.corrupt != p.corrupt {
            c.add_corrupt(now.corrupt - p.corrupt);
        }
        self.published = now;
    }

    /// Every [`PUBLISH_EVERY`](crate::live_streams::PUBLISH_EVERY)th call (and with
    /// `force`): stores each tracked stream's id, packets and missing count (now) in `t`,
    /// for the live line. Never allocates.
    pub fn publish_streams(&mut self, t: &crate::live_streams::LiveStreams, force: bool) {
        self.publish_live(t, None, None, force);
    }

    /// [`publish_streams`](Self::publish_streams), and the latency histogram into `l` and
    /// every counter into `c` (for `/metrics`) at the same pace. Never allocates.
    pub fn publish_live(
        &mut self,
        t: &crate::live_streams::LiveStreams,
        l: Option<&crate::latency::LiveLatency>,
        c: Option<&crate::live_streams::LiveChecks>,
        force: bool,
    ) {
        self.bursts += 1;
        if !force && self.bursts < crate::live_streams::PUBLISH_EVERY {
            return;
        }
        self.bursts = 0;
        if let Some(l) = l {
            l.store(&self.live_latency);
        }
        if let Some(c) = c {
            c.store(&self.stats.named());
        }
        let spead = self.is_spead();
        for (k, s) in self.slots[..self.used()].iter().enumerate() {
            let (packets, missing) = if spead {
                let h = s.heaps.closed();
                (h.packets, h.missing_packets)
            } else {
                (s.tracker.received(), s.tracker.gaps())
            };
            t.store(k, s.id, packets, missing);
        }
    }

    /// While the queue is idle: publishes the live tables now when bursts since the last
    /// publication are not in them yet (a no-op otherwise). Never allocates.
    #[inline]
    pub fn settle(
        &mut self,
        t: &crate::live_streams::LiveStreams,
        l: &crate::latency::LiveLatency,
        c: &crate::live_streams::LiveChecks,
    ) {
        if self.bursts > 0 {
            self.publish_live(t, Some(l), Some(c), true);
        }
    }

    const fn is_spead(&self) -> bool {
        matches!(self.format, StreamFormat::Spead(_))
    }

    /// SPEAD: the heap counters of every stream with the open heaps counted as they stand,
    /// and the packets those open heaps miss (not yet in `seq_gaps`). `O(streams × window)`.
    fn pending_heaps(&self) -> (HeapCounts, u64) {
        let mut c = self.stats.heaps.unwrap_or_default();
        let mut pending = 0;
        for s in &self.slots[..self.used()] {
            let h = s.heaps.flushed();
            c.merge(&HeapCounts::from(&h));
            pending += h.missing_packets - s.heaps.closed().missing_packets;
        }
        (c, pending)
    }

    /// Current counters and latency summary. SPEAD: heaps still open count as they stand
    /// now (in `heaps` and `seq_gaps`), as at the end of a run.
    pub fn stats(&self) -> ValidatorStats {
        let mut s = ValidatorStats {
            latency: self.latency.summary(),
            ..self.stats
        };
        if self.is_spead() {
            let (heaps, pending) = self.pending_heaps();
            s.heaps = Some(heaps);
            s.seq_gaps = s.seq_gaps.saturating_add(pending);
        }
        s
    }

    /// Final counters, to call once RX has drained: `seq_gaps` is then the number lost.
    pub fn finish(&self) -> ValidatorStats {
        self.stats()
    }

    /// Sequence numbers (SPEAD: packets) still missing (net). After the drain: lost
    /// packets.
    pub fn lost(&self) -> u64 {
        self.stats().seq_gaps
    }

    /// The latency histogram.
    pub const fn latency(&self) -> &Histogram {
        &self.latency
    }

    /// Adds `other`'s counters and latency histogram to `self` (for totals over queues;
    /// streams on different queues are counted as distinct). Per-stream sequence state
    /// is not merged: keep the merged validator for reporting, not for `check`.
    pub fn merge(&mut self, other: &Validator) {
        let b = &other.stats();
        let a = &mut self.stats;
        a.received += b.received;
        a.bytes = a.bytes.wrapping_add(b.bytes);
        a.seq_gaps = a.seq_gaps.saturating_add(b.seq_gaps);
        a.reordered += b.reordered;
        a.duplicates += b.duplicates;
        a.corrupt += b.corrupt;
        a.malformed += b.malformed;
        a.too_old += b.too_old;
        a.unique += b.unique;
        a.streams += b.streams;
        a.streams_overflow += b.streams_overflow;
        a.negative_latency += b.negative_latency;
        a.in_gpu_memory += b.in_gpu_memory;
        a.invalid += b.invalid;
        a.rejects.merge(&b.rejects);
        if let Some(h) = &b.heaps {
            a.heaps.get_or_insert_default().merge(h);
        }
        self.gaps_gross = self.gaps_gross.saturating_add(other.gaps_gross);
        self.latency.merge(&other.latency);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtdaq_core::wire::seqhdr::FLAG_END;

    const SIZE: usize = 200;

    fn pkt(g: &mut PayloadGen, tx: u64) -> [u8; SIZE] {
        let mut b = [0u8; SIZE];
        assert_eq!(g.fill(&mut b, tx), SIZE);
        b
    }

    #[test]
    fn a_split_payload_is_tracked_from_its_header_alone() {
        // Header-data split into GPU memory: 32 B of rtdaq header on the CPU, the rest not.
        let mut v = Validator::with_mode(Validation::Sequence);
        let mut g = PayloadGen::new(3, SIZE).with_start_seq(7);
        for i in 0..10u64 {
            let p = pkt(&mut g, 1_000 + i);
            assert_eq!(
                v.check_len(&p[..32], SIZE, 2_000 + i),
                Verdict::Ok(SeqEvent::InOrder)
            );
            assert_eq!(v.last_seq(), Some(7 + i));
        }
        // Skip seq 17: a gap, found from the headers.
        let _ = pkt(&mut g, 0);
        let p = pkt(&mut g, 1_100);
        assert_eq!(
            v.check_len(&p[..32], SIZE, 2_100),
            Verdict::Ok(SeqEvent::Gap { missing: 1 })
        );
        // A header whose payload length exceeds the packet, or a cut header: malformed.
        assert_eq!(v.check_len(&p[..32], SIZE - 1, 0), Verdict::Malformed);
        assert_eq!(v.check_len(&p[..20], SIZE, 0), Verdict::Malformed);
        let s = v.finish();
        assert_eq!((s.received, s.bytes), (13, 13 * SIZE as u64 - 1));
        assert_eq!((s.unique, s.seq_gaps, s.malformed), (11, 1, 2));
    }

    #[test]
    fn in_order_stream_and_latency() {
        let mut v = Validator::new();
        let mut g = PayloadGen::new(3, SIZE).with_start_seq(100);
        for i in 0..1000u64 {
            let p = pkt(&mut g, 1_000_000 + i);
            assert_eq!(
                v.check(&p, 1_000_000 + i + 5_000),
                Verdict::Ok(SeqEvent::InOrder)
            );
        }
        let s = v.finish();
        assert_eq!(
            (s.received, s.bytes, s.unique, s.streams),
            (1000, 200_000, 1000, 1)
        );
        assert_eq!(
            (s.seq_gaps, s.corrupt, s.malformed, s.duplicates),
            (0, 0, 0, 0)
        );
        assert_eq!(
            (s.latency.count, s.latency.min, s.latency.max),
            (1000, 5000, 5000)
        );
        assert_eq!(
            (s.latency.p50, s.latency.p999),
            (5000, 5000),
            "clamped to [min, max]"
        );
        assert_eq!(
            (v.lost(), s.lost_against(1000), s.lost_against(1003)),
            (0, 0, 3)
        );
    }

    #[test]
    fn gap_reorder_duplicate() {
        let mut v = Validator::new();
        let mut g = PayloadGen::new(0, SIZE);
        let p: Vec<_> = (0..6).map(|_| pkt(&mut g, 0)).collect();
        assert_eq!(v.check(&p[0], 0), Verdict::Ok(SeqEvent::InOrder));
        assert_eq!(v.check(&p[3], 0), Verdict::Ok(SeqEvent::Gap { missing: 2 }));
        assert_eq!(v.lost(), 2);
        assert_eq!(v.check(&p[1], 0), Verdict::Ok(SeqEvent::Reordered));
        assert_eq!(v.check(&p[1], 0), Verdict::Ok(SeqEvent::Duplicate));
        assert_eq!(v.check(&p[5], 0), Verdict::Ok(SeqEvent::Gap { missing: 1 }));
        let s = v.finish();
        assert_eq!(
            (s.seq_gaps, s.reordered, s.duplicates, s.unique),
            (2, 1, 1, 4)
        );
        assert_eq!(s.latency.count, 0, "no timestamps, no latency");
        let c = QueueCounters::new();
        v.publish(&c);
        v.publish(&c);
        let snap = c.snapshot();
        assert_eq!((snap.packets, snap.bytes), (5, 1000));
        assert_eq!(
            (snap.seq_gaps, snap.reordered, snap.duplicates),
            (3, 1, 1),
            "gross gaps"
        );
        let mut far = PayloadGen::new(0, SIZE).with_start_seq(5 + SEQ_WINDOW + 10);
        v.check(&pkt(&mut far, 0), 0);
        assert_eq!(v.check(&p[2], 0), Verdict::Ok(SeqEvent::TooOld));
        assert_eq!(v.stats().too_old, 1);
    }

    #[test]
    fn corrupt_and_malformed() {
        let mut v = Validator::new();
        let mut g = PayloadGen::new(1, SIZE);
        let good = pkt(&mut g, 0);
        let mut bad = pkt(&mut g, 0);
        bad[SIZE - 1] ^= 1;
        assert_eq!(v.check(&good, 0), Verdict::Ok(SeqEvent::InOrder));
        assert_eq!(v.check(&bad, 0), Verdict::Corrupt);
        assert_eq!(
            v.check(&pkt(&mut g, 0), 0),
            Verdict::Ok(SeqEvent::Gap { missing: 1 })
        );
        let mut magic = good;
        magic[0] = b'X';
        assert_eq!(v.check(&magic, 0), Verdict::Malformed);
        assert_eq!(v.check(&good[..31], 0), Verdict::Malformed);
        assert_eq!(
            v.check(&good[..SIZE - 1], 0),
            Verdict::Malformed,
            "truncated payload"
        );
        let mut padded = [0u8; SIZE + 20];
        g.fill_flags(&mut padded, 0, FLAG_END);
        assert_eq!(
            v.check(&padded, 0),
            Verdict::Ok(SeqEvent::InOrder),
            "padding ignored"
        );
        // Without FLAG_PATTERN the payload is opaque.
        let mut plain = pkt(&mut g, 0);
        plain[5] = 0;
        plain[SIZE - 1] ^= 0xFF;
        assert_eq!(v.check(&plain, 0), Verdict::Ok(SeqEvent::InOrder));
        let s = v.finish();
        assert_eq!(
            (s.received, s.corrupt, s.malformed, s.seq_gaps),
            (8, 1, 3, 1)
        );
        assert_eq!(
            s.bytes,
            5 * SIZE as u64 + 31 + (SIZE as u64 - 1) + SIZE as u64 + 20
        );
    }

    /// The table holds exactly `max_streams` streams whatever their ids, finds each again
    /// (also when full: the index always has empty entries), and counts the rest.
    #[test]
    fn the_stream_table_is_sized_by_max_streams() {
        for (max, streams) in [(1, 3u16), (200, 300), (4096, 5000)] {
            let mut v = Validator::with_streams(Validation::Full, StreamFormat::Rtdaq, max);
            assert_eq!(v.max_streams(), max);
            let mut gens: Vec<PayloadGen> = (0..streams)
                .map(|i| PayloadGen::new(i.wrapping_mul(977), 64))
                .collect();
            for _ in 0..2 {
                for g in gens.iter_mut() {
                    let mut b = [0u8; 64];
                    g.fill(&mut b, 10);
                    v.check(&b, 25);
                }
            }
            let s = v.finish();
            let over = u64::from(streams) - max as u64;
            assert_eq!((s.streams, s.streams_overflow), (max as u64, 2 * over));
            assert_eq!((s.unique, s.seq_gaps), (2 * max as u64, 0));
            // Overflow counts as lost, with or without a generator count.
            assert_eq!(s.lost_against(0), 2 * over);
            assert_eq!(s.lost_against(2 * u64::from(streams)), 2 * over);
            assert_eq!(v.streams().len(), max);
        }
    }

    #[test]
    fn streams_table_and_merge() {
        let mut v = Validator::new();
        let mut gens: Vec<PayloadGen> = (0..=DEFAULT_MAX_STREAMS as u16)
            .map(|i| PayloadGen::new(i * 64, 64))
            .collect();
        for _ in 0..3 {
            for g in gens.iter_mut() {
                let mut b = [0u8; 64];
                g.fill(&mut b, 10);
                v.check(&b, 25);
            }
        }
        let s = v.finish();
        assert_eq!(
            (s.streams, s.streams_overflow),
            (DEFAULT_MAX_STREAMS as u64, 3)
        );
        assert_eq!(
            (s.unique, s.seq_gaps, s.latency.count),
            (3 * DEFAULT_MAX_STREAMS as u64, 0, 195)
        );
        let mut w = Validator::new();
        let mut b = [0u8; 64];
        PayloadGen::new(0, 64).fill(&mut b, 100);
        w.check(&b, 40);
        let mut t = Validator::new();
        t.merge(&v);
        t.merge(&w);
        let ts = t.finish();
        assert_eq!((ts.received, ts.streams, ts.negative_latency), (196, 65, 1));
        assert_eq!(
            (ts.latency.count, ts.latency.min, ts.latency.max),
            (196, 0, 15)
        );
    }

    #[test]
    fn spead_generator_to_validator_loss_is_exact() {
        use rtdaq_config::model::SpeadParams;
        let f = StreamFormat::Spead(SpeadParams {
            flavour: None,
            heap_step: 2,
            heap_bytes: 5000,
        });
        // Two interleaved senders (stream ids 0 and 1, heap_step 2), 1472-byte packets:
        // 4 packets a heap (1416 + 1432 + 1432 + 720 bytes).
        let mut gens = [
            PayloadGen::for_format(0, 1472, f, 0),
            PayloadGen::for_format(1, 1472, f, 0),
        ];
        let mut v = Validator::with_format(Validation::Full, f);
        let mut b = [0u8; 1472];
        let (mut sent, mut dropped) = (0u64, 0u64);
        for k in 0..400 {
            for g in gens.iter_mut() {
                let n = g.fill(&mut b, 0);
                assert_eq!(n, if k % 4 == 3 { 720 + 40 } else { 1472 });
                sent += 1;
                if sent % 9 == 0 && k < 396 {
                    dropped += 1;
                    continue;
                }
                assert!(matches!(v.check(&b[..n], 0), Verdict::Ok(_)));
            }
        }
        let s = v.finish();
        assert_eq!((s.seq_gaps, v.lost()), (dropped, dropped));
        assert_eq!(s.lost_against(sent), dropped);
        let h = s.heaps.unwrap();
        assert_eq!(h.complete + h.incomplete, 200);
        assert_eq!((s.streams, s.malformed, s.duplicates), (2, 0, 0));
        let streams = v.streams();
        assert_eq!(streams.len(), 2);
        assert_eq!(streams.iter().map(|s| s.missing).sum::<u64>(), dropped);
        // Totals over queues keep the open heaps' loss.
        let mut t = Validator::new();
        t.merge(&v);
        assert_eq!(t.finish().seq_gaps, dropped);
        assert_eq!(t.finish().heaps, Some(h));
        // A packet that is not SPEAD is counted by reason.
        assert_eq!(v.check(&[0x53, 4, 2, 6, 0, 0, 0, 1], 0), Verdict::Malformed);
        assert_eq!(v.stats().rejects.short, 1);
    }

    #[test]
    fn ecpri_generator_to_validator_tracks_seq_ids_per_pc_id() {
        let f = StreamFormat::Ecpri;
        let mut gens = [
            PayloadGen::for_format(0x100, 64, f, 0),
            PayloadGen::for_format(0x101, 64, f, 0),
        ];
        let mut v = Validator::with_format(Validation::Sequence, f);
        let mut b = [0u8; 64];
        // 1000 messages per PC_ID (SEQ_ID wraps 3 times); PC_ID 0x101 loses 5 in a row.
        for k in 0..1000 {
            for g in gens.iter_mut() {
                g.fill(&mut b, 0);
                if g.stream_id() == 0x101 && (500..505).contains(&k) {
                    continue;
                }
                assert!(matches!(v.check(&b, 0), Verdict::Ok(_)));
            }
        }
        let s = v.finish();
        assert_eq!((s.seq_gaps, s.unique, s.malformed), (5, 1995, 0));
        let st = v.streams();
        assert_eq!(
            st.iter().map(|s| (s.id, s.missing)).collect::<Vec<_>>(),
            [(0x100, 0), (0x101, 5)]
        );
        // The GPU stage's reorder reads the linear sequence of the last message (1000th of
        // PC_ID 0x101: 999, its SEQ_ID 231 unwrapped).
        assert_eq!(v.last_seq(), Some(999));
        // A split message's first piece is counted, not tracked.
        b[7] = 0x00;
        assert_eq!(v.check(&b, 0), Verdict::Counted);
        assert_eq!(v.last_seq(), None);
    }

    #[test]
    fn packets_in_gpu_memory_are_counted_not_checked() {
        let mut v = Validator::new();
        v.count_in_gpu(8000);
        v.count_in_gpu(100);
        let s = v.stats();
        assert_eq!((s.received, s.bytes, s.in_gpu_memory), (2, 8100, 2));
        assert_eq!((s.unique, s.seq_gaps, s.malformed), (0, 0, 0));
        // Two of three sent arrived (in GPU memory): one lost, not three.
        assert_eq!(s.lost_against(3), 1);
        assert_eq!(s.lost_against(2), 0);
        // Totals over queues keep them.
        let mut total = Validator::new();
        total.merge(&v);
        total.merge(&v);
        assert_eq!(total.stats().in_gpu_memory, 4);
    }
}
