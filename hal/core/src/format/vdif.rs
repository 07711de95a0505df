//! VDIF (VLBI Data Interchange Format, v1.1.1) frames, one per datagram.
//!
//! The header is 32 bytes (16 with the legacy bit set) of little-endian 32-bit words:
//!
//! | word | bits | field |
//! |---|---|---|
//! | 0 | 31 | invalid data |
//! | 0 | 30 | legacy mode (16-byte header) |
//! | 0 | 29..0 | seconds from the reference epoch |
//! | 1 | 29..24 | reference epoch (half years since 2000-01-01) |
//! | 1 | 23..0 | data frame number within the second |
//! | 2 | 31..29 | VDIF version |
//! | 2 | 28..24 | log2 of the number of channels |
//! | 2 | 23..0 | frame length in units of 8 bytes, header included |
//! | 3 | 31 | complex data |
//! | 3 | 30..26 | bits per sample − 1 |
//! | 3 | 25..16 | thread id |
//! | 3 | 15..0 | station id |
//!
//! [`VdifSequencer`] turns headers into [`Position`]s: the stream is `station << 10 |
//! thread`, the sequence `(second − first second) × frames per second + frame number`,
//! where "second" is the absolute second (epoch start + seconds), so a stream may cross a
//! reference-epoch change. Frames per second come from the config or, when it gives none,
//! are **learned** at the first second boundary as the highest frame number seen in the
//! first second + 1: frames lost at the very end of that first second then go unseen (and
//! a learned rate too low shows as `frame_number` rejects), so a deployment that knows
//! its rate should say it.

use super::{Position, Reject};

/// Bytes of a standard VDIF header.
pub const HEADER_LEN: usize = 32;
/// Bytes of a legacy VDIF header.
pub const LEGACY_HEADER_LEN: usize = 16;
/// Largest data frame number + 1 (24 bits).
pub const MAX_FRAMES_PER_SECOND: u32 = 1 << 24;

/// A parsed VDIF header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VdifHeader {
    /// Invalid data bit.
    pub invalid: bool,
    /// Legacy (16-byte) header.
    pub legacy: bool,
    /// Seconds from the reference epoch (30 bits).
    pub seconds: u32,
    /// Reference epoch: half years since 2000-01-01 (6 bits).
    pub ref_epoch: u8,
    /// Data frame number within the second (24 bits).
    pub frame: u32,
    /// VDIF version (3 bits).
    pub version: u8,
    /// log2 of the number of channels (5 bits).
    pub log2_nchan: u8,
    /// Frame length in bytes, header included (a multiple of 8).
    pub frame_bytes: u32,
    /// Complex samples.
    pub complex: bool,
    /// Bits per sample (1..=32).
    pub bits_per_sample: u8,
    /// Thread id (10 bits).
    pub thread: u16,
    /// Station id (16 bits).
    pub station: u16,
}

#[inline]
fn word(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
}

impl VdifHeader {
    /// Parses the header at the start of `frame` (the whole datagram): [`Reject::Short`]
    /// when shorter than the header, [`Reject::Length`] when the header's frame length is
    /// not `frame.len()`. Never panics.
    pub fn parse(frame: &[u8]) -> Result<Self, Reject> {
        Self::parse_head(frame, frame.len())
    }

    /// [`parse`](Self::parse) of a frame of `frame_len` bytes of which only the first
    /// `head.len()` are readable (header-data split: the rest lies in GPU memory).
    pub fn parse_head(head: &[u8], frame_len: usize) -> Result<Self, Reject> {
        let frame = head;
        if frame.len() < LEGACY_HEADER_LEN {
            return Err(Reject::Short);
        }
        let (w0, w1, w2, w3) = (
            word(frame, 0),
            word(frame, 1),
            word(frame, 2),
            word(frame, 3),
        );
        let h = VdifHeader {
            invalid: w0 >> 31 != 0,
            legacy: (w0 >> 30) & 1 != 0,
            seconds: w0 & 0x3fff_ffff,
            ref_epoch: ((w1 >> 24) & 0x3f) as u8,
            frame: w1 & 0x00ff_ffff,
            version: (w2 >> 29) as u8,
            log2_nchan: ((w2 >> 24) & 0x1f) as u8,
            frame_bytes: (w2 & 0x00ff_ffff) * 8,
            complex: w3 >> 31 != 0,
            bits_per_sample: ((w3 >> 26) & 0x1f) as u8 + 1,
            thread: ((w3 >> 16) & 0x3ff) as u16,
            station: (w3 & 0xffff) as u16,
        };
        if !h.legacy && frame.len() < HEADER_LEN {
            return Err(Reject::Short);
        }
        if h.frame_bytes as usize != frame_len {
            return Err(Reject::Length);
        }
        Ok(h)
    }

    /// Header bytes (16 legacy, else 32).
    pub const fn header_len(&self) -> usize {
        if self.legacy {
            LEGACY_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Writes the header into the first [`header_len`](Self::header_len) bytes of `out`
    /// (`frame_bytes` is written as given; words 4..7 of a standard header are zero: no
    /// extended data). [`Reject::Short`] when `out` is too small.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, Reject> {
        let n = self.header_len();
        let out = out.get_mut(..n).ok_or(Reject::Short)?;
        let words = [
            (u32::from(self.invalid) << 31)
                | (u32::from(self.legacy) << 30)
                | (self.seconds & 0x3fff_ffff),
            (u32::from(self.ref_epoch & 0x3f) << 24) | (self.frame & 0x00ff_ffff),
            (u32::from(self.version & 7) << 29)
                | (u32::from(self.log2_nchan & 0x1f) << 24)
                | ((self.frame_bytes / 8) & 0x00ff_ffff),
            (u32::from(self.complex) << 31)
                | (u32::from(self.bits_per_sample.saturating_sub(1) & 0x1f) << 26)
                | (u32::from(self.thread & 0x3ff) << 16)
                | u32::from(self.station),
        ];
        out.fill(0);
        for (i, w) in words.iter().enumerate() {
            out[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
        Ok(n)
    }

    /// The stream key: `station << 10 | thread`.
    pub const fn stream(&self) -> u32 {
        ((self.station as u32) << 10) | self.thread as u32
    }

    /// Absolute seconds: Unix time of the reference epoch's start + `seconds`.
    pub const fn unix_seconds(&self) -> u64 {
        epoch_unix_seconds(self.ref_epoch) + self.seconds as u64
    }
}

/// Unix time of the start of VDIF reference epoch `e` (half years since 2000: 1 January
/// for even `e`, 1 July for odd).
pub const fn epoch_unix_seconds(e: u8) -> u64 {
    let year = 2000 + (e as u64) / 2;
    let month = if e % 2 == 0 { 1 } else { 7 };
    days_from_civil(year, month, 1) * 86_400
}

/// Days since 1970-01-01 of a date on or after it (proleptic Gregorian calendar).
const fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Frame numbers → linear sequence numbers for one VDIF receiver (all its threads share
/// the frame rate); see the [module docs](self).
#[derive(Debug, Clone, Copy, Default)]
pub struct VdifSequencer {
    fps: u32,
    learned: bool,
    /// First absolute second seen (the base); `None` before the first frame.
    base: Option<u64>,
    /// Highest frame number seen in the base second (learning).
    max_frame: u32,
}

impl VdifSequencer {
    /// A sequencer with a known rate (`frames_per_second` ≥ 1), or `None`: learn it.
    pub const fn new(frames_per_second: Option<u32>) -> Self {
        VdifSequencer {
            fps: match frames_per_second {
                Some(f) => f,
                None => 0,
            },
            learned: false,
            base: None,
            max_frame: 0,
        }
    }

    /// Frames per second in use (configured or learned), `None` while still learning.
    pub const fn frames_per_second(&self) -> Option<u32> {
        if self.fps > 0 {
            Some(self.fps)
        } else {
            None
        }
    }

    /// The rate was learned from the stream (not configured).
    pub const fn learned(&self) -> bool {
        self.learned
    }

    /// Parses `frame` and places it. [`Reject::FrameNumber`] for a frame number at or
    /// beyond the rate in use. `O(1)`, no allocation.
    pub fn position(&mut self, frame: &[u8]) -> Result<Position, Reject> {
        let h = VdifHeader::parse(frame)?;
        self.place(&h)
    }

    /// [`position`](Self::position) of a frame of `frame_len` bytes whose first
    /// `head.len()` bytes are readable ([`VdifHeader::parse_head`]).
    pub fn position_head(&mut self, head: &[u8], frame_len: usize) -> Result<Position, Reject> {
        let h = VdifHeader::parse_head(head, frame_len)?;
        self.place(&h)
    }

    /// Places a parsed header.
    pub fn place(&mut self, h: &VdifHeader) -> Result<Position, Reject> {
        Ok(Position {
            stream: h.stream(),
            seq: self.place_frame(h.unix_seconds(), h.frame)?,
            invalid: h.invalid,
        })
    }

    /// The sequence number of frame `frame` of time unit `unit` (VDIF: the absolute second;
    /// CODIF: the period index), the rate being frames per unit. [`Reject::FrameNumber`] for
    /// a frame number at or beyond the rate in use.
    pub fn place_frame(&mut self, unit: u64, frame: u32) -> Result<u64, Reject> {
        let sec = unit;
        let base = *self.base.get_or_insert(sec);
        if self.fps == 0 {
            if sec == base {
                self.max_frame = self.max_frame.max(frame);
            } else if sec > base {
                // The first second boundary: the first second's highest frame + 1.
                self.fps = self.max_frame + 1;
                self.learned = true;
            }
        }
        if self.fps > 0 && frame >= self.fps {
            return Err(Reject::FrameNumber);
        }
        // Before the rate is known only the base unit has arrived: its frame number is its
        // sequence number, as it will be once the rate is known.
        Ok(sec
            .wrapping_sub(base)
            .wrapping_mul(u64::from(self.fps))
            .wrapping_add(u64::from(frame)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(sec: u32, nr: u32, thread: u16, len: usize) -> [u8; 64] {
        let mut b = [0u8; 64];
        VdifHeader {
            seconds: sec,
            ref_epoch: 50,
            frame: nr,
            version: 1,
            frame_bytes: len as u32,
            bits_per_sample: 2,
            thread,
            station: 0x4142,
            ..Default::default()
        }
        .emit(&mut b)
        .unwrap();
        b
    }

    #[test]
    fn header_round_trips_every_field() {
        let h = VdifHeader {
            invalid: true,
            legacy: false,
            seconds: 0x3fff_fffe,
            ref_epoch: 63,
            frame: 0x00ff_fffe,
            version: 7,
            log2_nchan: 31,
            frame_bytes: 64,
            complex: true,
            bits_per_sample: 32,
            thread: 1023,
            station: 0xffff,
        };
        let mut b = [0u8; 64];
        assert_eq!(h.emit(&mut b), Ok(32));
        assert_eq!(VdifHeader::parse(&b), Ok(h));
        // The first word as baseband writes it: invalid bit 31, seconds in bits 29..0.
        assert_eq!(
            u32::from_le_bytes(b[..4].try_into().unwrap()),
            0x8000_0000 | 0x3fff_fffe
        );
    }

    #[test]
    fn length_and_shortness_are_checked() {
        let b = frame(10, 0, 0, 64);
        assert_eq!(VdifHeader::parse(&b[..63]), Err(Reject::Length));
        assert_eq!(VdifHeader::parse(&b[..20]), Err(Reject::Short));
        assert_eq!(VdifHeader::parse(&b[..3]), Err(Reject::Short));
        let mut legacy = [0u8; 24];
        VdifHeader {
            legacy: true,
            frame_bytes: 24,
            ..Default::default()
        }
        .emit(&mut legacy)
        .unwrap();
        let h = VdifHeader::parse(&legacy).unwrap();
        assert!(h.legacy);
        assert_eq!(h.header_len(), 16);
    }

    #[test]
    fn a_split_frame_is_checked_against_its_whole_length() {
        let b = frame(10, 3, 2, 64);
        let whole = VdifHeader::parse(&b).unwrap();
        assert_eq!(VdifHeader::parse_head(&b[..32], 64), Ok(whole));
        assert_eq!(VdifHeader::parse_head(&b[..32], 63), Err(Reject::Length));
        assert_eq!(VdifHeader::parse_head(&b[..20], 64), Err(Reject::Short));
        let mut s = VdifSequencer::new(Some(100));
        let p = s.position_head(&b[..32], 64).unwrap();
        assert_eq!((p.stream, p.invalid), (whole.stream(), false));
    }

    #[test]
    fn epochs_are_the_calendar_dates() {
        assert_eq!(epoch_unix_seconds(0), 946_684_800); // 2000-01-01
        assert_eq!(epoch_unix_seconds(1), 962_409_600); // 2000-07-01
        assert_eq!(epoch_unix_seconds(50), 1_735_689_600); // 2025-01-01
        assert_eq!(epoch_unix_seconds(51), 1_751_328_000); // 2025-07-01
    }

    #[test]
    fn configured_rate_gives_linear_numbers_across_seconds_and_epochs() {
        let mut s = VdifSequencer::new(Some(4));
        let seq = |s: &mut VdifSequencer, sec, nr| s.position(&frame(sec, nr, 3, 64)).unwrap().seq;
        assert_eq!(seq(&mut s, 100, 2), 2);
        assert_eq!(seq(&mut s, 100, 3), 3);
        assert_eq!(seq(&mut s, 101, 0), 4);
        assert_eq!(seq(&mut s, 102, 1), 9);
        assert_eq!(s.position(&frame(102, 4, 3, 64)), Err(Reject::FrameNumber));
        // An earlier second wraps below the base: SeqTracker sees it as far behind.
        assert_eq!(seq(&mut s, 99, 3), 3u64.wrapping_sub(4).wrapping_add(0));
        // A frame stamped in the next reference epoch continues the same count.
        let shift = (epoch_unix_seconds(51) - epoch_unix_seconds(50)) as u32;
        let mut h = VdifHeader::parse(&frame(0, 0, 3, 64)).unwrap();
        h.ref_epoch = 51;
        h.seconds = 0;
        h.frame = 1;
        assert_eq!(s.place(&h).unwrap().seq, u64::from(shift - 100) * 4 + 1);
        assert_eq!(s.frames_per_second(), Some(4));
        assert!(!s.learned());
    }

    #[test]
    fn rate_is_learned_at_the_first_second_boundary() {
        let mut s = VdifSequencer::new(None);
        for nr in 0..5 {
            assert_eq!(s.position(&frame(7, nr, 0, 64)).unwrap().seq, u64::from(nr));
            assert_eq!(s.frames_per_second(), None);
        }
        assert_eq!(s.position(&frame(8, 0, 0, 64)).unwrap().seq, 5);
        assert_eq!(s.frames_per_second(), Some(5));
        assert!(s.learned());
        assert_eq!(s.position(&frame(9, 4, 0, 64)).unwrap().seq, 14);
        let p = s.position(&frame(9, 4, 7, 64)).unwrap();
        assert_eq!(p.stream, (0x4142 << 10) | 7);
    }
}
