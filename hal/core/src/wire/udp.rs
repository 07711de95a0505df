//! UDP header (RFC 768): parse, emit, checksum over the IPv4 pseudo-header.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 2 | source port |
//! | 2 | 2 | destination port |
//! | 4 | 2 | length (header + payload, ≥ 8) |
//! | 6 | 2 | checksum (0 = none; a computed 0 is sent as `0xFFFF`) |
//!
//! [`UdpHeader::parse`] takes the IPv4 payload (not more): a length field larger than
//! that is malformed, a smaller one is accepted and bytes after it are ignored.
//! [`UdpHeader::emit`] writes the `checksum` field as given; [`fill_checksum`] computes it
//! over the pseudo-header, header and payload once the payload is in place.

use super::checksum;
use super::ipv4::PROTO_UDP;
use super::{get_u16, put_u16};
use crate::error::ParseError;

/// The UDP header as plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UdpHeader {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Length of header plus payload in bytes.
    pub length: u16,
    /// Checksum as on the wire (0 = not computed).
    pub checksum: u16,
}

impl UdpHeader {
    /// Header length in bytes.
    pub const LEN: usize = 8;

    /// Parses the UDP header at the start of `ip_payload`, the whole IPv4 payload.
    ///
    /// - fewer than 8 bytes: [`ParseError::Truncated`];
    /// - length field < 8, or larger than `ip_payload`: [`ParseError::Malformed`].
    ///
    /// The checksum is not verified (see [`verify_checksum`]).
    #[inline]
    pub fn parse(ip_payload: &[u8]) -> Result<Self, ParseError> {
        Self::parse_in(ip_payload, ip_payload.len())
    }

    /// [`parse`](Self::parse) of the first bytes of an IPv4 payload of `ip_payload_len`
    /// bytes whose rest is not readable (header-data split): the length field is checked
    /// against `ip_payload_len`.
    #[inline]
    pub fn parse_in(ip_payload: &[u8], ip_payload_len: usize) -> Result<Self, ParseError> {
        if ip_payload.len() < Self::LEN {
            return Err(ParseError::Truncated);
        }
        let h = Self {
            src_port: get_u16(ip_payload, 0)?,
            dst_port: get_u16(ip_payload, 2)?,
            length: get_u16(ip_payload, 4)?,
            checksum: get_u16(ip_payload, 6)?,
        };
        if usize::from(h.length) < Self::LEN || usize::from(h.length) > ip_payload_len {
            return Err(ParseError::Malformed);
        }
        Ok(h)
    }

    /// Payload length (`length − 8`), 0 if inconsistent.
    pub const fn payload_len(&self) -> usize {
        (self.length as usize).saturating_sub(Self::LEN)
    }

    /// The payload in `datagram` (bytes 8..length), `None` when `datagram` is too short.
    pub fn payload<'a>(&self, datagram: &'a [u8]) -> Option<&'a [u8]> {
        datagram.get(Self::LEN..usize::from(self.length))
    }

    /// Writes the 8 header bytes (checksum field as given) into the start of `buf`;
    /// returns 8. Length < 8: [`ParseError::Malformed`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, ParseError> {
        if usize::from(self.length) < Self::LEN {
            return Err(ParseError::Malformed);
        }
        if buf.len() < Self::LEN {
            return Err(ParseError::Truncated);
        }
        put_u16(buf, 0, self.src_port)?;
        put_u16(buf, 2, self.dst_port)?;
        put_u16(buf, 4, self.length)?;
        put_u16(buf, 6, self.checksum)?;
        Ok(Self::LEN)
    }
}

/// Length field of the datagram at the start of `datagram`, bounds-checked against it.
fn datagram_len(datagram: &[u8]) -> Option<usize> {
    let len = usize::from(get_u16(datagram, 4).ok()?);
    (UdpHeader::LEN..=datagram.len())
        .contains(&len)
        .then_some(len)
}

/// The UDP checksum the datagram at the start of `datagram` should carry (its length
/// field says how long it is; the checksum field itself is skipped). A computed 0 is
/// returned as `0xFFFF`. `None` when the length field is < 8 or beyond `datagram`.
pub fn compute_checksum(datagram: &[u8], src: [u8; 4], dst: [u8; 4]) -> Option<u16> {
    let len = datagram_len(datagram)?;
    let pseudo = checksum::pseudo_header_sum(src, dst, PROTO_UDP, len as u16);
    let head = datagram.get(..6)?;
    let rest = datagram.get(UdpHeader::LEN..len)?;
    let sum = checksum::sum_words(rest, checksum::sum_words(head, pseudo));
    let c = !checksum::fold(sum);
    Some(if c == 0 { 0xFFFF } else { c })
}

/// The folded (not complemented) pseudo-header sum, which NICs with UDP checksum offload
/// expect in the checksum field (DPDK, Linux `CHECKSUM_PARTIAL`).
pub fn pseudo_header_checksum(src: [u8; 4], dst: [u8; 4], udp_len: u16) -> u16 {
    checksum::fold(checksum::pseudo_header_sum(src, dst, PROTO_UDP, udp_len))
}

/// Computes the checksum of the datagram at the start of `datagram` and writes it into
/// its checksum field; returns it. Bad length field: [`ParseError::Malformed`]
/// (< 8 or beyond `datagram`).
pub fn fill_checksum(datagram: &mut [u8], src: [u8; 4], dst: [u8; 4]) -> Result<u16, ParseError> {
    let c = compute_checksum(datagram, src, dst).ok_or(ParseError::Malformed)?;
    put_u16(datagram, 6, c)?;
    Ok(c)
}

/// True when the datagram at the start of `datagram` has no checksum (field 0) or a
/// checksum that verifies; false when it does not verify or the length field is bad.
pub fn verify_checksum(datagram: &[u8], src: [u8; 4], dst: [u8; 4]) -> bool {
    let Some(len) = datagram_len(datagram) else {
        return false;
    };
    let Ok(stored) = get_u16(datagram, 6) else {
        return false;
    };
    if stored == 0 {
        return true;
    }
    let pseudo = checksum::pseudo_header_sum(src, dst, PROTO_UDP, len as u16);
    datagram
        .get(..len)
        .is_some_and(|d| checksum::fold(checksum::sum_words(d, pseudo)) == 0xFFFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_rules() {
        let d = [
            0x12, 0x34, 0x56, 0x78, 0x00, 0x0a, 0x00, 0x00, 0xAB, 0xCD, 0xEF,
        ];
        let h = UdpHeader::parse(&d).unwrap();
        assert_eq!((h.src_port, h.dst_port, h.length), (0x1234, 0x5678, 10));
        assert_eq!(h.payload(&d), Some(&[0xAB, 0xCD][..]));
        assert_eq!(UdpHeader::parse(&d[..7]), Err(ParseError::Truncated));
        assert_eq!(UdpHeader::parse(&d[..9]), Err(ParseError::Malformed));
        let mut short = d;
        short[5] = 7;
        assert_eq!(UdpHeader::parse(&short), Err(ParseError::Malformed));
    }

    #[test]
    fn checksum_roundtrip() {
        let mut d = [0u8; 13];
        let h = UdpHeader {
            src_port: 1000,
            dst_port: 2000,
            length: 13,
            checksum: 0,
        };
        h.emit(&mut d).unwrap();
        d[8..].copy_from_slice(b"hello");
        let (s, t) = ([10, 0, 0, 1], [10, 0, 0, 2]);
        assert!(verify_checksum(&d, s, t), "zero = none");
        let c = fill_checksum(&mut d, s, t).unwrap();
        assert_ne!(c, 0);
        assert!(verify_checksum(&d, s, t));
        assert!(!verify_checksum(&d, s, [10, 0, 0, 3]));
        d[9] ^= 0x10;
        assert!(!verify_checksum(&d, s, t));
    }
}
