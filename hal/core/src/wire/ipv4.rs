//! IPv4 header (RFC 791): parse, emit, header checksum.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | version (high nibble, must be 4), IHL in 32-bit words (low nibble, ≥ 5) |
//! | 1 | 1 | DSCP (high 6 bits), ECN (low 2 bits) |
//! | 2 | 2 | total length (header + payload) |
//! | 4 | 2 | identification |
//! | 6 | 2 | flags (reserved, DF, MF) and fragment offset in 8-byte units (13 bits) |
//! | 8 | 1 | TTL |
//! | 9 | 1 | protocol |
//! | 10 | 2 | header checksum |
//! | 12 | 4 | source address |
//! | 16 | 4 | destination address |
//! | 20 | IHL·4 − 20 | options (skipped on parse, zero-filled on emit) |
//!
//! [`Ipv4Header::parse`] does **not** verify the header checksum (NICs do, and the hot
//! path should not pay twice); use [`Ipv4Header::parse_checked`] or [`verify_checksum`].
//! [`Ipv4Header::emit`] always computes and writes the checksum.

use super::checksum;
use super::{get_array, get_u16, get_u8, put_bytes, put_u16};
use crate::error::ParseError;

/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;
/// IP protocol number of TCP (recognised, not parsed).
pub const PROTO_TCP: u8 = 6;
/// IP protocol number of ICMP (recognised, not parsed).
pub const PROTO_ICMP: u8 = 1;

/// The IPv4 header as plain data (checksum excluded: it is computed on emit and checked
/// by [`verify_checksum`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Header {
    /// Header length in bytes (IHL × 4): 20..=60, a multiple of 4.
    pub header_len: u8,
    /// Differentiated services code point, 0..=63.
    pub dscp: u8,
    /// Explicit congestion notification, 0..=3.
    pub ecn: u8,
    /// Total length of the datagram (header + payload) in bytes.
    pub total_len: u16,
    /// Identification.
    pub ident: u16,
    /// Don't-fragment flag.
    pub dont_frag: bool,
    /// More-fragments flag.
    pub more_frags: bool,
    /// Fragment offset in 8-byte units, 0..=8191.
    pub frag_offset: u16,
    /// Time to live.
    pub ttl: u8,
    /// Protocol of the payload ([`PROTO_UDP`], ...).
    pub protocol: u8,
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
}

impl Default for Ipv4Header {
    fn default() -> Self {
        Self {
            header_len: Self::MIN_LEN as u8,
            dscp: 0,
            ecn: 0,
            total_len: Self::MIN_LEN as u16,
            ident: 0,
            dont_frag: false,
            more_frags: false,
            frag_offset: 0,
            ttl: 64,
            protocol: PROTO_UDP,
            src: [0; 4],
            dst: [0; 4],
        }
    }
}

impl Ipv4Header {
    /// Length of a header without options.
    pub const MIN_LEN: usize = 20;
    /// Length of a header with the most options (IHL 15).
    pub const MAX_LEN: usize = 60;

    /// Parses the IPv4 header at the start of `buf` (which holds the datagram and maybe
    /// link-layer padding after it).
    ///
    /// - fewer than 20 bytes, fewer than IHL·4 bytes, or fewer than `total_len` bytes:
    ///   [`ParseError::Truncated`];
    /// - version ≠ 4, IHL < 5, or `total_len` < IHL·4: [`ParseError::Malformed`].
    ///
    /// The checksum is not verified.
    #[inline]
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        Self::parse_in(buf, buf.len())
    }

    /// [`parse`](Self::parse) of the first bytes of a packet whose rest is not readable
    /// (header-data split): `total_len` is not checked against `buf`.
    #[inline]
    pub fn parse_head(buf: &[u8]) -> Result<Self, ParseError> {
        Self::parse_in(buf, usize::MAX)
    }

    /// `avail`: the bytes the packet has (for the `total_len` check).
    #[inline]
    fn parse_in(buf: &[u8], avail: usize) -> Result<Self, ParseError> {
        if buf.len() < Self::MIN_LEN {
            return Err(ParseError::Truncated);
        }
        let vihl = get_u8(buf, 0)?;
        if vihl >> 4 != 4 {
            return Err(ParseError::Malformed);
        }
        let header_len = (vihl & 0x0F) * 4;
        if usize::from(header_len) < Self::MIN_LEN {
            return Err(ParseError::Malformed);
        }
        if buf.len() < usize::from(header_len) {
            return Err(ParseError::Truncated);
        }
        let total_len = get_u16(buf, 2)?;
        if total_len < u16::from(header_len) {
            return Err(ParseError::Malformed);
        }
        if avail < usize::from(total_len) {
            return Err(ParseError::Truncated);
        }
        let tos = get_u8(buf, 1)?;
        let frag = get_u16(buf, 6)?;
        Ok(Self {
            header_len,
            dscp: tos >> 2,
            ecn: tos & 0x3,
            total_len,
            ident: get_u16(buf, 4)?,
            dont_frag: frag & 0x4000 != 0,
            more_frags: frag & 0x2000 != 0,
            frag_offset: frag & 0x1FFF,
            ttl: get_u8(buf, 8)?,
            protocol: get_u8(buf, 9)?,
            src: get_array(buf, 12)?,
            dst: get_array(buf, 16)?,
        })
    }

    /// [`parse`](Self::parse), then verifies the header checksum
    /// ([`ParseError::Checksum`] when it does not).
    pub fn parse_checked(buf: &[u8]) -> Result<Self, ParseError> {
        let h = Self::parse(buf)?;
        if !verify_checksum(buf) {
            return Err(ParseError::Checksum);
        }
        Ok(h)
    }

    /// True when this datagram is a fragment (MF set or a non-zero offset): only the
    /// first fragment carries the L4 header, so rtdaq does not parse L4 of any fragment.
    pub const fn is_fragment(&self) -> bool {
        self.more_frags || self.frag_offset != 0
    }

    /// Payload length (`total_len − header_len`), 0 if inconsistent.
    pub const fn payload_len(&self) -> usize {
        (self.total_len as usize).saturating_sub(self.header_len as usize)
    }

    /// The payload of the datagram in `buf` (from the header's end to `total_len`), or
    /// `None` when `buf` is too short.
    pub fn payload<'a>(&self, buf: &'a [u8]) -> Option<&'a [u8]> {
        buf.get(usize::from(self.header_len)..usize::from(self.total_len))
    }

    /// Writes the header (with zeroed options if `header_len` > 20) and its checksum into
    /// the start of `buf`; returns `header_len`.
    ///
    /// Field out of range (`header_len` not a multiple of 4 in 20..=60, `total_len` <
    /// `header_len`, DSCP > 63, ECN > 3, fragment offset > 8191):
    /// [`ParseError::Malformed`]; `buf` shorter than `header_len`:
    /// [`ParseError::Truncated`]. The payload is not touched.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, ParseError> {
        let hl = usize::from(self.header_len);
        if !(Self::MIN_LEN..=Self::MAX_LEN).contains(&hl)
            || hl % 4 != 0
            || usize::from(self.total_len) < hl
            || self.dscp > 63
            || self.ecn > 3
            || self.frag_offset > 0x1FFF
        {
            return Err(ParseError::Malformed);
        }
        let hdr = buf.get_mut(..hl).ok_or(ParseError::Truncated)?;
        hdr.fill(0);
        let frag = (u16::from(self.dont_frag) << 14)
            | (u16::from(self.more_frags) << 13)
            | self.frag_offset;
        put_bytes(
            hdr,
            0,
            &[0x40 | (self.header_len / 4), (self.dscp << 2) | self.ecn],
        )?;
        put_u16(hdr, 2, self.total_len)?;
        put_u16(hdr, 4, self.ident)?;
        put_u16(hdr, 6, frag)?;
        put_bytes(hdr, 8, &[self.ttl, self.protocol])?;
        put_bytes(hdr, 12, &self.src)?;
        put_bytes(hdr, 16, &self.dst)?;
        let c = checksum::checksum(hdr);
        put_u16(hdr, 10, c)?;
        Ok(hl)
    }
}

/// True when the IPv4 header at the start of `buf` has a valid header checksum. False
/// when `buf` does not hold a whole header (its IHL says how long it is).
pub fn verify_checksum(buf: &[u8]) -> bool {
    let Some(&vihl) = buf.first() else {
        return false;
    };
    let hl = usize::from(vihl & 0x0F) * 4;
    if hl < Ipv4Header::MIN_LEN {
        return false;
    }
    buf.get(..hl).is_some_and(checksum::verify)
}

/// Recomputes and writes the header checksum of the IPv4 header at the start of `buf`
/// (after fields were edited in place, e.g. a TTL rewrite).
pub fn fill_checksum(buf: &mut [u8]) -> Result<u16, ParseError> {
    let vihl = *buf.first().ok_or(ParseError::Truncated)?;
    let hl = usize::from(vihl & 0x0F) * 4;
    if hl < Ipv4Header::MIN_LEN {
        return Err(ParseError::Malformed);
    }
    let hdr = buf.get_mut(..hl).ok_or(ParseError::Truncated)?;
    put_u16(hdr, 10, 0)?;
    let c = checksum::checksum(hdr);
    put_u16(hdr, 10, c)?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A well-known header (Wikipedia "IPv4 header checksum" example), checksum 0xb861.
    const EXAMPLE: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn known_checksum() {
        let mut buf = [0u8; 0x73];
        buf[..20].copy_from_slice(&EXAMPLE);
        assert!(verify_checksum(&buf));
        let h = Ipv4Header::parse_checked(&buf).unwrap();
        assert_eq!(h.total_len, 0x73);
        assert!(h.dont_frag && !h.more_frags && !h.is_fragment());
        assert_eq!((h.ttl, h.protocol), (64, PROTO_UDP));
        assert_eq!(h.src, [192, 168, 0, 1]);
        let mut out = [0u8; 20];
        h.emit(&mut out).unwrap();
        assert_eq!(out, EXAMPLE);
        buf[10] ^= 1;
        assert_eq!(Ipv4Header::parse_checked(&buf), Err(ParseError::Checksum));
        assert_eq!(fill_checksum(&mut buf), Ok(0xb861));
    }

    #[test]
    fn options_are_skipped() {
        let h = Ipv4Header {
            header_len: 24,
            total_len: 30,
            ..Ipv4Header::default()
        };
        let mut b = [0xAAu8; 30];
        assert_eq!(h.emit(&mut b), Ok(24));
        assert_eq!(&b[20..24], &[0, 0, 0, 0]);
        assert_eq!(Ipv4Header::parse(&b), Ok(h));
        assert_eq!(h.payload(&b), Some(&[0xAA; 6][..]));
        assert!(verify_checksum(&b));
    }

    #[test]
    fn emit_rejects_bad_fields() {
        let mut b = [0u8; 64];
        for h in [
            Ipv4Header {
                header_len: 22,
                ..Default::default()
            },
            Ipv4Header {
                header_len: 64,
                total_len: 64,
                ..Default::default()
            },
            Ipv4Header {
                total_len: 19,
                ..Default::default()
            },
            Ipv4Header {
                dscp: 64,
                ..Default::default()
            },
            Ipv4Header {
                ecn: 4,
                ..Default::default()
            },
            Ipv4Header {
                frag_offset: 0x2000,
                ..Default::default()
            },
        ] {
            assert_eq!(h.emit(&mut b), Err(ParseError::Malformed), "{h:?}");
        }
        assert_eq!(
            Ipv4Header::default().emit(&mut b[..19]),
            Err(ParseError::Truncated)
        );
    }
}
