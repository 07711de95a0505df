//! The generator's payload builder and stop conditions (pure logic, no I/O).
//!
//! [`PayloadGen`] writes one UDP payload per call: a 32-byte
//! [`SeqHeader`] (stream id, sequence number, tx timestamp, payload length,
//! [`FLAG_PATTERN`]) followed by [`fill_pattern`] over the rest, and advances the
//! sequence number. The validator on the RX side checks exactly this
//! (see [`crate::validator`]). `payload_size` is the whole UDP payload, header included,
//! as in the `[generator] payload_size` config key.
//!
//! [`SendLimit`] turns `[generator] count` / `duration_s` into "how many more packets may
//! go", to clamp a burst together with the [`Pacer`](crate::pacer::Pacer) allowance.
//!
//! Nothing here allocates after construction, blocks or logs.

use rtdaq_config::model::{Generator, GeneratorLimit, StreamFormat};
use rtdaq_core::format::codif::{CodifHeader, HEADER_LEN as CODIF_HEADER_LEN};
use rtdaq_core::format::ecpri;
use rtdaq_core::format::spead::Flavour;
use rtdaq_core::format::spead_tx::{Packetizer, MIN_PACKET};
use rtdaq_core::format::vdif::{epoch_unix_seconds, VdifHeader};
use rtdaq_core::format::CounterFormat;
use rtdaq_core::wire::seqhdr::{fill_pattern, SeqHeader, FLAG_PATTERN};

/// Why a [`PayloadGen`] cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GeneratorError {
    /// `payload_size` is below the 32-byte sequence header.
    #[error("payload_size {0} is below the {len}-byte rtdaq sequence header", len = SeqHeader::LEN)]
    PayloadTooSmall(usize),
    /// `payload_size` does not fit the header's 32-bit length field.
    #[error("payload_size {0} is too large for the rtdaq sequence header")]
    PayloadTooLarge(usize),
}

/// Builds the payloads of one generator stream; see the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadGen {
    stream_id: u16,
    seq: u64,
    payload_size: usize,
    shape: Shape,
}

/// What the payloads look like besides their pattern (`[interfaces.format]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// rtdaq's sequence header, then the pattern.
    Rtdaq,
    /// The pattern, with the counter (`seq × step` modulo the wrap) and the stream field
    /// (the stream id) written over it.
    Counter(CounterFormat),
    /// A VDIF header (thread = stream id; second and frame number from the sequence
    /// number and the rate, counted from `start`), then the pattern.
    Vdif {
        /// The header of sequence number 0 (seconds, epoch, station, rate fields).
        start: VdifHeader,
        /// Frames per second per thread.
        fps: u32,
    },
    /// SPEAD heaps split into packets as spead2 splits them; see [`SpeadShape`].
    Spead(SpeadShape),
    /// eCPRI IQ data messages: PC_ID = the stream id, SEQ_ID = the sequence number mod 256,
    /// then the pattern.
    Ecpri,
    /// A CODIF header (thread = stream id; period and frame number from the sequence
    /// number and the rate, counted from `start`), then the pattern.
    Codif {
        /// The header of sequence number 0.
        start: CodifHeader,
        /// Frames per period per thread.
        fpp: u32,
    },
}

/// Item id of the immediate timestamp item of the generator's SPEAD heaps (the heap number,
/// from 0).
pub const SPEAD_ITEM_TIMESTAMP: u32 = 0x1600;
/// Item id of the data item of the generator's SPEAD heaps: `heap_bytes` bytes, byte `j`
/// of heap `n` = `(j + n) mod 256`.
pub const SPEAD_ITEM_DATA: u32 = 0x1800;

/// The generator's SPEAD heaps. Sequence number `s` is packet `s % per_heap` of heap
/// number `n = s / per_heap`, heap counter `(n + 1) × heap_step + stream_id % heap_step`.
/// The packets are [`Packetizer`]'s of `payload_size`-byte packets: every packet carries
/// the heap counter, heap size, heap offset and payload length; the first also the
/// timestamp (`n`) and the data item's pointer, as spead2 sends a heap without
/// descriptors. Packets are `payload_size` bytes but a heap's last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SpeadShape {
    packetizer: Packetizer,
    step: u64,
    residue: u64,
    heap_bytes: u64,
    per_heap: u64,
}

impl SpeadShape {
    fn fill(&self, seq: u64, out: &mut [u8]) -> usize {
        let (n, k) = (seq / self.per_heap, seq % self.per_heap);
        let cnt = (n + 1) * self.step + self.residue;
        let Some(s) = self.packetizer.emit_head(
            cnt,
            &[(SPEAD_ITEM_TIMESTAMP, n)],
            &[(SPEAD_ITEM_DATA, self.heap_bytes)],
            k as usize,
            out,
        ) else {
            return 0;
        };
        let mut b = (s.offset.wrapping_add(n)) as u8;
        for x in &mut out[s.head..s.total()] {
            *x = b;
            b = b.wrapping_add(1);
        }
        s.total()
    }
}

/// The latest reference epoch (half years since 2000, VDIF and CODIF) up to `last` that
/// began at or before `unix_s`; 0 before 2000.
fn latest_epoch(unix_s: u64, last: u8) -> u8 {
    (0..=last)
        .rev()
        .find(|&e| epoch_unix_seconds(e) <= unix_s)
        .unwrap_or(0)
}

impl PayloadGen {
    /// A stream `stream_id` of `payload_size`-byte UDP payloads (header included),
    /// first sequence number 0. `payload_size` must be ≥ 32 and ≤ `32 + u32::MAX`
    /// (the config validator guarantees it); an out-of-range size is clamped into that
    /// range. [`try_new`](Self::try_new) refuses it instead.
    pub fn new(stream_id: u16, payload_size: usize) -> Self {
        let max = SeqHeader::LEN.saturating_add(u32::MAX as usize);
        Self {
            stream_id,
            seq: 0,
            payload_size: payload_size.clamp(SeqHeader::LEN, max),
            shape: Shape::Rtdaq,
        }
    }

    /// A generator of `format`'s payloads (the config validated `payload_size` against
    /// it). VDIF frames are stamped from `unix_s` (the start, seconds since 1970) on: the
    /// latest reference epoch that began before it, frame 0 of that second.
    pub fn for_format(
        stream_id: u16,
        payload_size: usize,
        format: StreamFormat,
        unix_s: u64,
    ) -> Self {
        let mut g = Self::new(stream_id, payload_size);
        match format {
            StreamFormat::Rtdaq => {}
            StreamFormat::Counter(c) => {
                g.payload_size = payload_size;
                g.shape = Shape::Counter(c);
            }
            StreamFormat::Vdif(v) => {
                let epoch = latest_epoch(unix_s, 63);
                g.payload_size = payload_size;
                g.shape = Shape::Vdif {
                    start: VdifHeader {
                        seconds: unix_s.saturating_sub(epoch_unix_seconds(epoch)) as u32,
                        ref_epoch: epoch,
                        version: 1,
                        log2_nchan: v.log2_channels,
                        frame_bytes: payload_size as u32,
                        bits_per_sample: v.bits_per_sample,
                        thread: stream_id & 0x3ff,
                        station: v.station,
                        ..VdifHeader::default()
                    },
                    fps: v.frames_per_second.unwrap_or(1).max(1),
                };
            }
            StreamFormat::Ecpri => {
                g.payload_size = payload_size;
                g.shape = Shape::Ecpri;
            }
            StreamFormat::Codif(c) => {
                let epoch = latest_epoch(unix_s, u8::MAX);
                let fpp = c.frames_per_period.unwrap_or(1).max(1);
                let spf = |bytes: u64| {
                    bytes * 8 / u64::from(c.bits_per_sample.max(1)) / u64::from(c.channels.max(1))
                };
                let data = payload_size.saturating_sub(CODIF_HEADER_LEN) as u32;
                // Seconds: the start, down to a whole period since the epoch.
                let since = unix_s.saturating_sub(epoch_unix_seconds(epoch));
                let since = since - since % u64::from(c.period.max(1));
                g.payload_size = payload_size;
                g.shape = Shape::Codif {
                    start: CodifHeader {
                        seconds: since as u32,
                        ref_epoch: epoch,
                        bits_per_sample: c.bits_per_sample,
                        version: 3,
                        period: c.period.max(1),
                        thread: stream_id,
                        station: c.station,
                        channels: c.channels.max(1),
                        data_bytes: data,
                        total_samples: spf(u64::from(data)) * u64::from(fpp),
                        ..CodifHeader::default()
                    },
                    fpp,
                };
            }
            StreamFormat::Spead(sp) => {
                // The config guarantees payload_size > SPEAD_FIRST_OVERHEAD (≥ MIN_PACKET),
                // and its flavours are 64-48 and 64-40: the packetizer exists.
                let flavour = sp.flavour.unwrap_or(Flavour::F64_48);
                let Some(packetizer) = Packetizer::new(flavour, payload_size.max(MIN_PACKET))
                else {
                    return g;
                };
                let heap_bytes = u64::from(sp.heap_bytes).max(1);
                let step = u64::from(sp.heap_step.max(1));
                let per_heap = packetizer.count_sized(
                    0,
                    &[(SPEAD_ITEM_TIMESTAMP, 0)],
                    &[(SPEAD_ITEM_DATA, heap_bytes)],
                );
                g.payload_size = payload_size;
                g.shape = Shape::Spead(SpeadShape {
                    packetizer,
                    step,
                    residue: u64::from(stream_id) % step,
                    heap_bytes,
                    per_heap: (per_heap as u64).max(1),
                });
            }
        }
        g
    }

    /// [`new`](Self::new), but an out-of-range `payload_size` is an error.
    pub fn try_new(stream_id: u16, payload_size: usize) -> Result<Self, GeneratorError> {
        if payload_size < SeqHeader::LEN {
            return Err(GeneratorError::PayloadTooSmall(payload_size));
        }
        if u32::try_from(payload_size - SeqHeader::LEN).is_err() {
            return Err(GeneratorError::PayloadTooLarge(payload_size));
        }
        Ok(Self::new(stream_id, payload_size))
    }

    /// From the `[generator]` section (`stream_id`, `payload_size`).
    pub fn from_config(g: &Generator) -> Result<Self, GeneratorError> {
        Self::try_new(g.stream_id, g.payload_size as usize)
    }

    /// Starts the sequence at `seq` instead of 0.
    pub fn with_start_seq(mut self, seq: u64) -> Self {
        self.seq = seq;
        self
    }

    /// Packets of one unit the generator should not stop inside: a SPEAD heap's packets,
    /// else 1.
    pub const fn unit_packets(&self) -> u64 {
        match self.shape {
            Shape::Spead(sp) => sp.per_heap,
            _ => 1,
        }
    }

    /// The stream id written into every header.
    pub const fn stream_id(&self) -> u16 {
        self.stream_id
    }

    /// The sequence number the next [`fill`](Self::fill) writes.
    pub const fn next_seq(&self) -> u64 {
        self.seq
    }

    /// UDP payload bytes per packet, header included (SPEAD: the largest; a heap's last
    /// packet may be shorter).
    pub const fn payload_size(&self) -> usize {
        self.payload_size
    }

    /// Writes the next payload into `buf[..payload_size]` with tx timestamp `tx_ns`
    /// ([`wall_clock_ns`](crate::pacer::wall_clock_ns); 0 = unknown), advances the
    /// sequence (wrapping) and returns `payload_size`. If `buf` is shorter, writes
    /// nothing, keeps the sequence and returns 0.
    #[inline]
    pub fn fill(&mut self, buf: &mut [u8], tx_ns: u64) -> usize {
        self.fill_flags(buf, tx_ns, 0)
    }

    /// [`fill`](Self::fill) with extra header flags (e.g. `FLAG_END` on the last packet);
    /// [`FLAG_PATTERN`] is always set.
    pub fn fill_flags(&mut self, buf: &mut [u8], tx_ns: u64, flags: u8) -> usize {
        let Some(out) = buf.get_mut(..self.payload_size) else {
            return 0;
        };
        match self.shape {
            Shape::Rtdaq => {}
            Shape::Counter(c) => {
                fill_pattern(self.stream_id, self.seq, out);
                let count = self.seq.wrapping_mul(c.step);
                let value = match c.modulus_u64() {
                    None => count,
                    Some(m) if m.is_power_of_two() => count & (m - 1),
                    Some(m) => (u128::from(self.seq) * u128::from(c.step) % u128::from(m)) as u64,
                };
                // The config checked that the fields fit `payload_size`.
                let _ = c.counter.write(out, value);
                if let Some(sf) = c.stream {
                    let _ = sf.write(out, u64::from(self.stream_id));
                }
                self.seq = self.seq.wrapping_add(1);
                return self.payload_size;
            }
            Shape::Ecpri => {
                // The config guarantees 8 ≤ payload_size ≤ 65539.
                ecpri::emit_iq(out, self.payload_size, self.stream_id, self.seq as u8);
                fill_pattern(self.stream_id, self.seq, &mut out[8..]);
                self.seq = self.seq.wrapping_add(1);
                return self.payload_size;
            }
            Shape::Codif { start, fpp } => {
                let f = u64::from(fpp);
                let mut h = start;
                let k = self.seq / f;
                h.seconds = start
                    .seconds
                    .wrapping_add((k * u64::from(start.period)) as u32);
                h.frame = (self.seq % f) as u32;
                let _ = h.emit(out);
                fill_pattern(self.stream_id, self.seq, &mut out[CODIF_HEADER_LEN..]);
                self.seq = self.seq.wrapping_add(1);
                return self.payload_size;
            }
            Shape::Spead(sp) => {
                let n = sp.fill(self.seq, buf);
                if n > 0 {
                    self.seq = self.seq.wrapping_add(1);
                }
                return n;
            }
            Shape::Vdif { start, fps } => {
                let f = u64::from(fps);
                let mut h = start;
                h.seconds = start.seconds.wrapping_add((self.seq / f) as u32) & 0x3fff_ffff;
                h.frame = (self.seq % f) as u32;
                let n = h.header_len();
                let _ = h.emit(out);
                fill_pattern(self.stream_id, self.seq, &mut out[n..]);
                self.seq = self.seq.wrapping_add(1);
                return self.payload_size;
            }
        }
        let (hdr, body) = out.split_at_mut(SeqHeader::LEN);
        let h = SeqHeader {
            flags: flags | FLAG_PATTERN,
            stream_id: self.stream_id,
            seq: self.seq,
            tx_timestamp_ns: tx_ns,
            // Clamped in `new`.
            payload_len: body.len() as u32,
        };
        // `hdr` is exactly `SeqHeader::LEN` bytes: `emit` cannot fail.
        let _ = h.emit(hdr);
        fill_pattern(self.stream_id, self.seq, body);
        self.seq = self.seq.wrapping_add(1);
        self.payload_size
    }
}

/// When a generator stops: `[generator] count` / `duration_s`, or never (the run ends it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendLimit {
    /// No limit of its own.
    Unlimited,
    /// At most this many packets.
    Count(u64),
    /// No packet at or after this time (ns, the clock of [`now_ns`](crate::pacer::now_ns)).
    Until(u64),
}

impl SendLimit {
    /// From the config, with the generator starting at `start_ns`. A duration is rounded
    /// to whole ns (non-finite or negative durations mean "stop now").
    pub fn from_config(limit: GeneratorLimit, start_ns: u64) -> Self {
        match limit {
            GeneratorLimit::Run => SendLimit::Unlimited,
            GeneratorLimit::Count(n) => SendLimit::Count(n),
            GeneratorLimit::Duration(s) => {
                // `as` saturates (NaN → 0).
                let ns = (s * 1e9).round() as u64;
                SendLimit::Until(start_ns.saturating_add(ns))
            }
        }
    }

    /// Packets that may still go after `sent` were sent, at `now_ns` (`u64::MAX` =
    /// unlimited).
    #[inline]
    pub fn remaining(&self, sent: u64, now_ns: u64) -> u64 {
        match *self {
            SendLimit::Unlimited => u64::MAX,
            SendLimit::Count(n) => n.saturating_sub(sent),
            SendLimit::Until(t) if now_ns < t => u64::MAX,
            SendLimit::Until(_) => 0,
        }
    }

    /// True when nothing more may be sent.
    #[inline]
    pub fn is_done(&self, sent: u64, now_ns: u64) -> bool {
        self.remaining(sent, now_ns) == 0
    }

    /// `max` clamped to [`remaining`](Self::remaining) (for a burst size).
    #[inline]
    pub fn clamp(&self, max: usize, sent: u64, now_ns: u64) -> usize {
        usize::try_from(self.remaining(sent, now_ns)).map_or(max, |r| r.min(max))
    }
}

/// Packets a generator built (each used one sequence number).
#[derive(Debug, Clone, Copy, Default)]
pub struct GenTotals {
    /// Sequence numbers used: every one of them must arrive for a loss-free run (what the
    /// engine accepted is in the TX queue's counters; the rest are counted TX drops).
    pub generated: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtdaq_core::wire::seqhdr::{check_pattern, FLAG_END};

    #[test]
    fn fills_header_and_pattern() {
        assert_eq!(
            PayloadGen::try_new(1, 31),
            Err(GeneratorError::PayloadTooSmall(31))
        );
        assert_eq!(
            PayloadGen::try_new(1, 33 + u32::MAX as usize),
            Err(GeneratorError::PayloadTooLarge(33 + u32::MAX as usize))
        );
        assert!(PayloadGen::try_new(1, 32 + u32::MAX as usize).is_ok());
        assert_eq!(PayloadGen::new(1, 3).payload_size(), 32, "clamped");
        assert_eq!(
            PayloadGen::new(1, usize::MAX).payload_size(),
            32 + u32::MAX as usize
        );
        let mut g = PayloadGen::new(9, 100).with_start_seq(u64::MAX);
        assert_eq!((g.stream_id(), g.payload_size()), (9, 100));
        let mut buf = [0xAAu8; 128];
        assert_eq!(g.fill(&mut buf, 1234), 100);
        assert_eq!(buf[100], 0xAA, "nothing written past payload_size");
        let (h, body) = SeqHeader::parse_with_payload(&buf).unwrap();
        assert_eq!((h.stream_id, h.seq, h.tx_timestamp_ns), (9, u64::MAX, 1234));
        assert_eq!((h.payload_len, h.flags), (68, FLAG_PATTERN));
        assert!(check_pattern(9, u64::MAX, body));
        assert_eq!(g.next_seq(), 0, "wraps");
        assert_eq!(g.fill_flags(&mut buf, 0, FLAG_END), 100);
        let h = SeqHeader::parse(&buf).unwrap();
        assert_eq!((h.seq, h.flags), (0, FLAG_PATTERN | FLAG_END));
        assert_eq!(g.fill(&mut buf[..99], 0), 0, "short buffer");
        assert_eq!(g.next_seq(), 1);
        let mut g = PayloadGen::new(0, 32);
        assert_eq!(g.fill(&mut buf[..32], 5), 32);
        assert_eq!(SeqHeader::parse(&buf).unwrap().payload_len, 0);
    }

    #[test]
    fn limits() {
        let c = SendLimit::from_config(GeneratorLimit::Count(10), 0);
        assert_eq!(c.remaining(3, u64::MAX), 7);
        assert_eq!(c.clamp(64, 3, 0), 7);
        assert!(c.is_done(10, 0) && c.is_done(11, 0));
        let d = SendLimit::from_config(GeneratorLimit::Duration(1.5), 1_000);
        assert_eq!(d, SendLimit::Until(1_500_001_000));
        assert_eq!(d.clamp(64, 1 << 40, 1_500_000_999), 64);
        assert!(d.is_done(0, 1_500_001_000));
        assert_eq!(
            SendLimit::from_config(GeneratorLimit::Duration(f64::NAN), 7),
            SendLimit::Until(7)
        );
        let u = SendLimit::from_config(GeneratorLimit::Run, 0);
        assert_eq!(u.remaining(u64::MAX, u64::MAX), u64::MAX);
        assert_eq!(u.clamp(8, 0, 0), 8);
    }

    #[test]
    fn spead_packets_are_the_packetizers() {
        use rtdaq_config::model::SpeadParams;
        use rtdaq_core::format::spead_tx::Heap;
        for (flavour, ps, hb, step) in [
            (None, 1472usize, 5000u32, 1u32),
            (Some(Flavour::F64_40), 57, 100, 3),
            (None, 9000, 1, 2),
        ] {
            let f = StreamFormat::Spead(SpeadParams {
                flavour,
                heap_step: step,
                heap_bytes: hb,
            });
            let mut g = PayloadGen::for_format(5, ps, f, 0);
            let p = Packetizer::new(flavour.unwrap_or(Flavour::F64_48), ps).unwrap();
            let (mut a, mut b) = (vec![0u8; ps], vec![0u8; ps]);
            for n in 0..3u64 {
                let data: Vec<u8> = (0..u64::from(hb)).map(|j| (j + n) as u8).collect();
                let heap = Heap {
                    cnt: (n + 1) * u64::from(step) + 5 % u64::from(step),
                    immediates: &[(SPEAD_ITEM_TIMESTAMP, n)],
                    items: &[(SPEAD_ITEM_DATA, &data)],
                };
                assert_eq!(g.unit_packets(), p.count(&heap) as u64);
                for k in 0..p.count(&heap) {
                    let len = g.fill(&mut a, 0);
                    assert_eq!(len, p.emit(&heap, k, &mut b));
                    assert_eq!(a[..len], b[..len], "heap {n} packet {k}");
                }
            }
        }
    }
}
