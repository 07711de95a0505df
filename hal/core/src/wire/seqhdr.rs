//! The rtdaq sequence header and the verifiable payload pattern.
//!
//! The generator puts a 32-byte [`SeqHeader`] at the start of every UDP payload (or
//! right after the L2 header for raw Ethernet streams); the validator reads it back to
//! track loss, reordering and latency. All fields are big-endian:
//!
//! | offset | size | field | meaning |
//! |---|---|---|---|
//! | 0 | 4 | magic | `0x52544451` (ASCII `"RTDQ"`) |
//! | 4 | 1 | version | `1` |
//! | 5 | 1 | flags | [`FLAG_PATTERN`], [`FLAG_END`], [`FLAG_HW_TIMESTAMP`]; other bits 0 |
//! | 6 | 2 | stream id | generator stream (one sequence space per stream) |
//! | 8 | 8 | sequence | per-stream packet number, starts anywhere, wraps at `u64::MAX` |
//! | 16 | 8 | tx timestamp | nanoseconds (TAI/realtime of the sender), 0 = unknown |
//! | 24 | 4 | payload length | bytes following this header |
//! | 28 | 4 | reserved | 0 on emit, ignored on parse |
//!
//! ## Payload pattern
//! With [`FLAG_PATTERN`] set, the payload after the header is [`fill_pattern`]`(stream,
//! seq, payload)`: a SplitMix64 stream seeded from the stream id and sequence number,
//! written as big-endian `u64` words; a final partial word takes the leading bytes of the
//! next output. [`check_pattern`] regenerates and compares it. The seed is
//! `seq.rotate_left(16) ^ stream_id ^ 0x5254_4451_5041_5454` (`"RTDQPATT"`); each output
//! is `x += 0x9E3779B97F4A7C15; z = x; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
//! z = (z ^ (z >> 27)) * 0x94D049BB133111EB; z ^ (z >> 31)` (wrapping arithmetic).
//! A wrong sequence, stream, offset or any flipped bit makes the check fail.

use super::{get_u16, get_u32, get_u64, get_u8, put_bytes, put_u16, put_u32, put_u64};
use crate::error::ParseError;

/// Magic number, ASCII `"RTDQ"`.
pub const SEQ_MAGIC: u32 = 0x5254_4451;
/// Header version this code writes and accepts.
pub const SEQ_VERSION: u8 = 1;
/// Flag: the payload carries [`fill_pattern`].
pub const FLAG_PATTERN: u8 = 0x01;
/// Flag: last packet of the stream.
pub const FLAG_END: u8 = 0x02;
/// Flag: the tx timestamp comes from a hardware (NIC/PTP) clock.
pub const FLAG_HW_TIMESTAMP: u8 = 0x04;

/// The rtdaq sequence header as plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqHeader {
    /// Flag bits (`FLAG_*`).
    pub flags: u8,
    /// Stream id.
    pub stream_id: u16,
    /// Sequence number.
    pub seq: u64,
    /// Transmit timestamp in nanoseconds (0 = unknown).
    pub tx_timestamp_ns: u64,
    /// Number of payload bytes after the header.
    pub payload_len: u32,
}

impl SeqHeader {
    /// Header length in bytes.
    pub const LEN: usize = 32;

    /// Parses the header at the start of `buf`.
    ///
    /// Fewer than 32 bytes: [`ParseError::Truncated`]; wrong magic or version:
    /// [`ParseError::Malformed`]. The payload is not required to be present (see
    /// [`parse_with_payload`](Self::parse_with_payload)).
    #[inline]
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        if buf.len() < Self::LEN {
            return Err(ParseError::Truncated);
        }
        if get_u32(buf, 0)? != SEQ_MAGIC || get_u8(buf, 4)? != SEQ_VERSION {
            return Err(ParseError::Malformed);
        }
        Ok(Self {
            flags: get_u8(buf, 5)?,
            stream_id: get_u16(buf, 6)?,
            seq: get_u64(buf, 8)?,
            tx_timestamp_ns: get_u64(buf, 16)?,
            payload_len: get_u32(buf, 24)?,
        })
    }

    /// [`parse`](Self::parse) and return the `payload_len` bytes after the header
    /// ([`ParseError::Truncated`] when `buf` ends before them).
    #[inline]
    pub fn parse_with_payload(buf: &[u8]) -> Result<(Self, &[u8]), ParseError> {
        let h = Self::parse(buf)?;
        let end = usize::try_from(h.payload_len)
            .ok()
            .and_then(|n| n.checked_add(Self::LEN))
            .ok_or(ParseError::Truncated)?;
        let payload = buf.get(Self::LEN..end).ok_or(ParseError::Truncated)?;
        Ok((h, payload))
    }

    /// True when `flag` (a `FLAG_*` bit) is set.
    pub const fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// Writes the 32 header bytes into the start of `buf`; returns 32.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, ParseError> {
        let hdr = buf.get_mut(..Self::LEN).ok_or(ParseError::Truncated)?;
        put_u32(hdr, 0, SEQ_MAGIC)?;
        put_bytes(hdr, 4, &[SEQ_VERSION, self.flags])?;
        put_u16(hdr, 6, self.stream_id)?;
        put_u64(hdr, 8, self.seq)?;
        put_u64(hdr, 16, self.tx_timestamp_ns)?;
        put_u32(hdr, 24, self.payload_len)?;
        put_u32(hdr, 28, 0)?;
        Ok(Self::LEN)
    }
}

const PATTERN_SALT: u64 = 0x5254_4451_5041_5454;
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

#[inline]
fn pattern_seed(stream_id: u16, seq: u64) -> u64 {
    seq.rotate_left(16) ^ u64::from(stream_id) ^ PATTERN_SALT
}

#[inline]
fn splitmix_next(x: &mut u64) -> u64 {
    *x = x.wrapping_add(GOLDEN);
    splitmix_mix(*x)
}

/// SplitMix64's output function of state `z`.
#[inline(always)]
fn splitmix_mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The big-endian word in the first 8 bytes of `c` (callers pass exactly 8).
#[inline(always)]
fn be_word(c: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&c[..8]);
    u64::from_be_bytes(w)
}

/// Fills `buf` with the deterministic pattern of packet (`stream_id`, `seq`).
pub fn fill_pattern(stream_id: u16, seq: u64, buf: &mut [u8]) {
    let mut x = pattern_seed(stream_id, seq);
    let mut chunks = buf.chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&splitmix_next(&mut x).to_be_bytes());
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let w = splitmix_next(&mut x).to_be_bytes();
        for (d, s) in rest.iter_mut().zip(w) {
            *d = s;
        }
    }
}

/// True when `buf` holds exactly the pattern [`fill_pattern`] writes for
/// (`stream_id`, `seq`) and `buf.len()`.
pub fn check_pattern(stream_id: u16, seq: u64, buf: &[u8]) -> bool {
    let mut x = pattern_seed(stream_id, seq);
    // Four words per turn, each from its own state (x + k·GOLDEN) into its own accumulator:
    // no dependency between them, so the multiplies of neighbouring words overlap (the check
    // is most of full validation's cost on large payloads: docs/benchmarks/dpdk.md run 8).
    let mut quads = buf.chunks_exact(32);
    let mut d = [0u64; 4];
    for q in &mut quads {
        for (k, acc) in d.iter_mut().enumerate() {
            let step = GOLDEN.wrapping_mul(k as u64 + 1);
            *acc |= be_word(&q[k * 8..k * 8 + 8]) ^ splitmix_mix(x.wrapping_add(step));
        }
        x = x.wrapping_add(GOLDEN.wrapping_mul(4));
    }
    let mut diff = d[0] | d[1] | d[2] | d[3];
    let mut chunks = quads.remainder().chunks_exact(8);
    for c in &mut chunks {
        diff |= be_word(c) ^ splitmix_next(&mut x);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let w = splitmix_next(&mut x).to_be_bytes();
        for (d, s) in rest.iter().zip(w) {
            diff |= u64::from(d ^ s);
        }
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let h = SeqHeader {
            flags: FLAG_PATTERN | FLAG_END,
            stream_id: 0x0102,
            seq: 0x0304_0506_0708_090A,
            tx_timestamp_ns: 0x1112_1314_1516_1718,
            payload_len: 0x2122_2324,
        };
        let mut b = [0xFFu8; 32];
        assert_eq!(h.emit(&mut b), Ok(32));
        assert_eq!(
            b,
            [
                0x52, 0x54, 0x44, 0x51, 1, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0x11, 0x12, 0x13,
                0x14, 0x15, 0x16, 0x17, 0x18, 0x21, 0x22, 0x23, 0x24, 0, 0, 0, 0
            ]
        );
        assert_eq!(SeqHeader::parse(&b), Ok(h));
        assert!(h.has(FLAG_END) && !h.has(FLAG_HW_TIMESTAMP));
        assert_eq!(SeqHeader::parse(&b[..31]), Err(ParseError::Truncated));
        assert_eq!(
            SeqHeader::parse_with_payload(&b).map(|_| ()),
            Err(ParseError::Truncated)
        );
        b[4] = 2;
        assert_eq!(SeqHeader::parse(&b), Err(ParseError::Malformed));
        b[4] = 1;
        b[0] = 0;
        assert_eq!(SeqHeader::parse(&b), Err(ParseError::Malformed));
    }

    #[test]
    fn pattern() {
        let mut b = [0u8; 77];
        fill_pattern(7, 1234, &mut b);
        assert!(check_pattern(7, 1234, &b));
        assert!(!check_pattern(7, 1235, &b));
        assert!(!check_pattern(8, 1234, &b));
        assert!(
            check_pattern(7, 1234, &b[..13]),
            "prefix of a pattern is the pattern"
        );
        b[76] ^= 0x80;
        assert!(!check_pattern(7, 1234, &b));
        assert!(check_pattern(0, 0, &[]));
        // Stable across releases: the first word for (1, 0).
        let mut w = [0u8; 8];
        fill_pattern(1, 0, &mut w);
        let mut x = PATTERN_SALT ^ 1;
        assert_eq!(u64::from_be_bytes(w), splitmix_next(&mut x));
    }

    /// The four-lane check agrees with the one-word fill at every length (whole quads,
    /// words, a partial word) and finds a flipped bit at any byte.
    #[test]
    fn pattern_check_at_every_length_and_byte() {
        let mut b = [0u8; 200];
        for n in 0..b.len() {
            fill_pattern(3, 99, &mut b[..n]);
            assert!(check_pattern(3, 99, &b[..n]), "length {n}");
            for i in 0..n {
                b[i] ^= 0x01;
                assert!(!check_pattern(3, 99, &b[..n]), "length {n}, byte {i}");
                b[i] ^= 0x01;
            }
        }
    }
}
