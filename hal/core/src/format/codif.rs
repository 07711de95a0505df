//! CODIF (CSIRO Oversampled Data Interchange Format, version 3) frames, one per datagram.
//!
//! The header is 64 bytes: eight little-endian 64-bit words, as DiFX's `codifio.h` (CODIF
//! v3) lays them out (fields from the low bit up):
//!
//! | word | bits | field |
//! |---|---|---|
//! | 0 | 31..0 | data frame number within the period |
//! | 0 | 63..32 | seconds from the reference epoch (the start of the frame's period) |
//! | 1 | 7..0 | reference epoch (half years since 2000-01-01, as VDIF) |
//! | 1 | 15..8 | bits per sample |
//! | 1 | 17 | invalid |
//! | 1 | 18 | complex |
//! | 1 | 28..24 | version |
//! | 1 | 63..48 | period in seconds |
//! | 2 | 15..0 / 31..16 / 47..32 / 63..48 | thread id / group id / secondary id / station id |
//! | 3 | 15..0 | channels |
//! | 3 | 63..32 | data bytes / 8 (**header excluded**: the frame is 64 + 8 × this) |
//! | 4 | 63..0 | total samples per period |
//! | 5 | 31..0 | sync word `0xFEEDCAFE` |
//!
//! The stream is `group << 16 | thread`; the sequence is `(period index − first) × frames
//! per period + frame number`, where the period index is `(epoch start + seconds) / period`
//! (exact, since seconds move by whole periods). Frames per period come from the config or
//! are learned at the first period boundary, as [`super::vdif`] learns frames per second
//! ([`VdifSequencer`] does both).
//!
//! An older draft of CODIF (2017–2019) ordered the words differently and had another sync
//! word: its frames are `foreign` here.

use super::vdif::{epoch_unix_seconds, VdifSequencer};
use super::{Position, Reject};

/// Bytes of a CODIF header.
pub const HEADER_LEN: usize = 64;
/// The sync word (word 5, bits 31..0).
pub const SYNC: u32 = 0xFEED_CAFE;

/// A parsed CODIF header (the fields rtdaq reads or writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CodifHeader {
    /// Data frame number within the period.
    pub frame: u32,
    /// Seconds from the reference epoch.
    pub seconds: u32,
    /// Reference epoch (half years since 2000).
    pub ref_epoch: u8,
    /// Bits per sample.
    pub bits_per_sample: u8,
    /// Invalid data.
    pub invalid: bool,
    /// Complex samples.
    pub complex: bool,
    /// Version (5 bits).
    pub version: u8,
    /// Period in seconds.
    pub period: u16,
    /// Thread id.
    pub thread: u16,
    /// Group id.
    pub group: u16,
    /// Station id.
    pub station: u16,
    /// Channels.
    pub channels: u16,
    /// Data bytes after the header (a multiple of 8).
    pub data_bytes: u32,
    /// Total samples per period.
    pub total_samples: u64,
}

#[inline]
fn word(b: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[8 * i..8 * i + 8]);
    u64::from_le_bytes(w)
}

impl CodifHeader {
    /// Parses the header at the start of `frame` (the whole datagram): [`Reject::Short`]
    /// when shorter than 64 bytes, [`Reject::Foreign`] without the sync word,
    /// [`Reject::Length`] when `64 + data bytes` is not `frame.len()`. Never panics.
    pub fn parse(frame: &[u8]) -> Result<Self, Reject> {
        Self::parse_head(frame, frame.len())
    }

    /// [`parse`](Self::parse) of a frame of `frame_len` bytes of which only the first
    /// `head.len()` are readable (header-data split: the rest lies in GPU memory).
    pub fn parse_head(head: &[u8], frame_len: usize) -> Result<Self, Reject> {
        let frame = head;
        if frame.len() < HEADER_LEN {
            return Err(Reject::Short);
        }
        let w: [u64; 6] = core::array::from_fn(|i| word(frame, i));
        if w[5] as u32 != SYNC {
            return Err(Reject::Foreign);
        }
        let data_bytes = (w[3] >> 32).saturating_mul(8);
        if data_bytes.saturating_add(HEADER_LEN as u64) != frame_len as u64 {
            return Err(Reject::Length);
        }
        Ok(Self {
            frame: w[0] as u32,
            seconds: (w[0] >> 32) as u32,
            ref_epoch: w[1] as u8,
            bits_per_sample: (w[1] >> 8) as u8,
            invalid: w[1] >> 17 & 1 == 1,
            complex: w[1] >> 18 & 1 == 1,
            version: (w[1] >> 24) as u8 & 0x1f,
            period: (w[1] >> 48) as u16,
            thread: w[2] as u16,
            group: (w[2] >> 16) as u16,
            station: (w[2] >> 48) as u16,
            channels: w[3] as u16,
            data_bytes: data_bytes as u32,
            total_samples: w[4],
        })
    }

    /// Writes the header into `out[..64]` (words 6 and 7, the metadata, zero; the secondary
    /// id zero). [`Reject::Short`] when `out` is shorter.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, Reject> {
        let out = out.get_mut(..HEADER_LEN).ok_or(Reject::Short)?;
        let words = [
            u64::from(self.seconds) << 32 | u64::from(self.frame),
            u64::from(self.period) << 48
                | u64::from(self.version & 0x1f) << 24
                | u64::from(self.complex) << 18
                | u64::from(self.invalid) << 17
                | u64::from(self.bits_per_sample) << 8
                | u64::from(self.ref_epoch),
            u64::from(self.station) << 48 | u64::from(self.group) << 16 | u64::from(self.thread),
            u64::from(self.data_bytes / 8) << 32 | u64::from(self.channels),
            self.total_samples,
            u64::from(SYNC),
            0,
            0,
        ];
        for (i, w) in words.iter().enumerate() {
            out[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
        }
        Ok(HEADER_LEN)
    }

    /// The stream key: `group << 16 | thread`.
    pub const fn stream(&self) -> u32 {
        (self.group as u32) << 16 | self.thread as u32
    }

    /// The index of the frame's period since 1970: `(epoch start + seconds) / period`
    /// (a period of 0 counts as 1 s).
    pub const fn period_index(&self) -> u64 {
        let p = if self.period == 0 {
            1
        } else {
            self.period as u64
        };
        (epoch_unix_seconds(self.ref_epoch) + self.seconds as u64) / p
    }
}

/// Parses a CODIF frame and places it with `seq` (whose rate is frames per period).
/// [`Reject::FrameNumber`] for a frame number at or beyond the rate in use.
pub fn position(seq: &mut VdifSequencer, frame: &[u8]) -> Result<Position, Reject> {
    position_head(seq, frame, frame.len())
}

/// [`position`] of a frame of `frame_len` bytes whose first `head.len()` bytes are readable
/// ([`CodifHeader::parse_head`]).
pub fn position_head(
    seq: &mut VdifSequencer,
    head: &[u8],
    frame_len: usize,
) -> Result<Position, Reject> {
    let h = CodifHeader::parse_head(head, frame_len)?;
    let s = seq.place_frame(h.period_index(), h.frame)?;
    Ok(Position {
        stream: h.stream(),
        seq: s,
        invalid: h.invalid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(seconds: u32, nr: u32, thread: u16) -> [u8; 64 + 64] {
        let mut b = [0u8; 128];
        CodifHeader {
            frame: nr,
            seconds,
            ref_epoch: 52,
            bits_per_sample: 8,
            version: 3,
            period: 5,
            thread,
            group: 2,
            station: 0x4153,
            channels: 4,
            data_bytes: 64,
            total_samples: 1000,
            ..Default::default()
        }
        .emit(&mut b)
        .unwrap();
        b
    }

    #[test]
    fn header_round_trips_and_is_checked() {
        let b = frame(100, 7, 3);
        let h = CodifHeader::parse(&b).unwrap();
        assert_eq!((h.frame, h.seconds, h.thread, h.group), (7, 100, 3, 2));
        assert_eq!(
            (h.period, h.data_bytes, h.channels, h.version),
            (5, 64, 4, 3)
        );
        assert_eq!(h.stream(), 2 << 16 | 3);
        assert_eq!(CodifHeader::parse(&b[..127]), Err(Reject::Length));
        assert_eq!(CodifHeader::parse(&b[..63]), Err(Reject::Short));
        let mut bad = b;
        bad[40] ^= 1;
        assert_eq!(CodifHeader::parse(&bad), Err(Reject::Foreign));
        // The sync word sits where codifio.h puts it: word 5, low half.
        assert_eq!(&b[40..44], &SYNC.to_le_bytes());
    }

    #[test]
    fn a_split_frame_is_checked_against_its_whole_length() {
        let b = frame(100, 7, 3);
        let whole = CodifHeader::parse(&b).unwrap();
        assert_eq!(CodifHeader::parse_head(&b[..64], 128), Ok(whole));
        assert_eq!(CodifHeader::parse_head(&b[..64], 127), Err(Reject::Length));
        assert_eq!(CodifHeader::parse_head(&b[..63], 128), Err(Reject::Short));
    }

    #[test]
    fn periods_give_linear_numbers() {
        // 4 frames per period of 5 s: period starts at seconds 100, 105, 110.
        let mut s = VdifSequencer::new(Some(4));
        let at = |s: &mut VdifSequencer, sec, nr| position(s, &frame(sec, nr, 0)).unwrap().seq;
        assert_eq!(at(&mut s, 100, 0), 0);
        assert_eq!(at(&mut s, 100, 3), 3);
        assert_eq!(at(&mut s, 105, 0), 4);
        assert_eq!(at(&mut s, 115, 2), 14);
        assert_eq!(
            position(&mut s, &frame(115, 4, 0)),
            Err(Reject::FrameNumber)
        );
        // Learned at the first period boundary.
        let mut l = VdifSequencer::new(None);
        for nr in 0..3 {
            assert_eq!(at(&mut l, 200, nr), u64::from(nr));
        }
        assert_eq!(at(&mut l, 205, 1), 4);
        assert_eq!(l.frames_per_second(), Some(3));
    }
}
