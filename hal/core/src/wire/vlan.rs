//! IEEE 802.1Q VLAN tags, 802.1ad QinQ, and the whole L2 header ([`L2Header`]).
//!
//! A tag is 4 bytes inserted between the source MAC and the EtherType:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 2 | TPID: `0x8100` (802.1Q) or `0x88A8` (802.1ad S-tag) |
//! | 2 | 2 | TCI: PCP (bits 15..13), DEI (bit 12), VID (bits 11..0) |
//!
//! rtdaq parses at most two tags: an outer tag with TPID `0x88A8` or `0x8100`, then an
//! inner tag with TPID `0x8100`. Whatever follows the last parsed tag is the frame's
//! EtherType; in particular a third tag (or an inner `0x88A8`) is not parsed and the
//! frame's EtherType is reported as that TPID, so no L3 header is looked at.

use super::ethernet::{EthernetHeader, ETHERTYPE_QINQ, ETHERTYPE_VLAN};
use super::{get_u16, put_bytes, put_u16};
use crate::error::ParseError;

/// One VLAN tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanTag {
    /// Tag protocol identifier: `0x8100` or `0x88A8`.
    pub tpid: u16,
    /// Priority code point, 0..=7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 0..=4095.
    pub vid: u16,
}

impl VlanTag {
    /// Tag length in bytes (TPID + TCI).
    pub const LEN: usize = 4;

    /// An 802.1Q (`0x8100`) tag with the given VID and priority 0.
    pub const fn dot1q(vid: u16) -> Self {
        Self {
            tpid: ETHERTYPE_VLAN,
            pcp: 0,
            dei: false,
            vid,
        }
    }

    /// An 802.1ad S-tag (`0x88A8`) with the given VID and priority 0.
    pub const fn dot1ad(vid: u16) -> Self {
        Self {
            tpid: ETHERTYPE_QINQ,
            pcp: 0,
            dei: false,
            vid,
        }
    }

    /// The tag control information word.
    pub const fn tci(&self) -> u16 {
        ((self.pcp as u16 & 0x7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0FFF)
    }

    /// Splits a TCI word.
    pub const fn from_tci(tpid: u16, tci: u16) -> Self {
        Self {
            tpid,
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0FFF,
        }
    }

    /// Parses a tag from the first 4 bytes of `buf` (TPID then TCI).
    ///
    /// Fewer bytes: [`ParseError::Truncated`]; a TPID other than `0x8100`/`0x88A8`:
    /// [`ParseError::Unsupported`].
    #[inline]
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        let tpid = get_u16(buf, 0)?;
        let tci = get_u16(buf, 2)?;
        if !super::ethernet::is_vlan_tpid(tpid) {
            return Err(ParseError::Unsupported);
        }
        Ok(Self::from_tci(tpid, tci))
    }

    /// Writes the tag (TPID, TCI) into the first 4 bytes of `buf`; returns 4.
    ///
    /// A PCP above 7, a VID above 4095 or a TPID that is not a VLAN TPID:
    /// [`ParseError::Malformed`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, ParseError> {
        if self.pcp > 7 || self.vid > 0x0FFF || !super::ethernet::is_vlan_tpid(self.tpid) {
            return Err(ParseError::Malformed);
        }
        if buf.len() < Self::LEN {
            return Err(ParseError::Truncated);
        }
        put_u16(buf, 0, self.tpid)?;
        put_u16(buf, 2, self.tci())?;
        Ok(Self::LEN)
    }
}

/// The whole L2 header: Ethernet II plus up to two VLAN tags.
///
/// Invariant: `inner` is only `Some` when `outer` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct L2Header {
    /// Destination MAC address.
    pub dst: [u8; 6],
    /// Source MAC address.
    pub src: [u8; 6],
    /// Outermost VLAN tag, if any.
    pub outer: Option<VlanTag>,
    /// Inner VLAN tag of a QinQ frame, if any.
    pub inner: Option<VlanTag>,
    /// EtherType after the tags.
    pub ethertype: u16,
}

impl L2Header {
    /// Parses Ethernet II and up to two VLAN tags from the start of `buf`.
    ///
    /// A frame shorter than 14 bytes, or one that ends inside a tag:
    /// [`ParseError::Truncated`].
    #[inline]
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        let eth = EthernetHeader::parse(buf)?;
        let mut h = Self {
            dst: eth.dst,
            src: eth.src,
            outer: None,
            inner: None,
            ethertype: eth.ethertype,
        };
        if super::ethernet::is_vlan_tpid(h.ethertype) {
            let tci = get_u16(buf, 14)?;
            h.outer = Some(VlanTag::from_tci(h.ethertype, tci));
            h.ethertype = get_u16(buf, 16)?;
            if h.ethertype == ETHERTYPE_VLAN {
                let tci = get_u16(buf, 18)?;
                h.inner = Some(VlanTag::from_tci(h.ethertype, tci));
                h.ethertype = get_u16(buf, 20)?;
            }
        }
        Ok(h)
    }

    /// Length of this header on the wire: 14, 18 or 22 bytes.
    pub const fn len(&self) -> usize {
        EthernetHeader::LEN
            + if self.outer.is_some() {
                VlanTag::LEN
            } else {
                0
            }
            + if self.inner.is_some() {
                VlanTag::LEN
            } else {
                0
            }
    }

    /// Always false: an L2 header is at least 14 bytes (for clippy's `len` convention).
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// VID of the outermost tag.
    pub fn outer_vid(&self) -> Option<u16> {
        self.outer.map(|t| t.vid)
    }

    /// Writes the header into the start of `buf`; returns its length.
    ///
    /// `inner` without `outer`, or a bad tag: [`ParseError::Malformed`]; `buf` too short:
    /// [`ParseError::Truncated`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, ParseError> {
        if self.inner.is_some() && self.outer.is_none() {
            return Err(ParseError::Malformed);
        }
        let len = self.len();
        if buf.len() < len {
            return Err(ParseError::Truncated);
        }
        put_bytes(buf, 0, &self.dst)?;
        put_bytes(buf, 6, &self.src)?;
        let mut off = 12;
        for tag in [self.outer, self.inner].into_iter().flatten() {
            tag.emit(buf.get_mut(off..).ok_or(ParseError::Truncated)?)?;
            off += VlanTag::LEN;
        }
        put_u16(buf, off, self.ethertype)?;
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tci_roundtrip() {
        let t = VlanTag {
            tpid: ETHERTYPE_VLAN,
            pcp: 5,
            dei: true,
            vid: 0xABC,
        };
        assert_eq!(t.tci(), 0xBABC);
        assert_eq!(VlanTag::from_tci(ETHERTYPE_VLAN, 0xBABC), t);
    }

    #[test]
    fn qinq_parse_emit() {
        let h = L2Header {
            dst: [0xff; 6],
            src: [2, 0, 0, 0, 0, 1],
            outer: Some(VlanTag::dot1ad(100)),
            inner: Some(VlanTag::dot1q(200)),
            ethertype: 0x0800,
        };
        let mut b = [0u8; 22];
        assert_eq!(h.emit(&mut b), Ok(22));
        assert_eq!(&b[12..22], &[0x88, 0xa8, 0, 100, 0x81, 0, 0, 200, 8, 0]);
        assert_eq!(L2Header::parse(&b), Ok(h));
        assert_eq!(L2Header::parse(&b[..21]), Err(ParseError::Truncated));
        assert_eq!(L2Header::parse(&b[..15]), Err(ParseError::Truncated));
    }

    #[test]
    fn third_tag_not_parsed() {
        let mut b = [0u8; 26];
        b[12..26].copy_from_slice(&[0x81, 0, 0, 1, 0x81, 0, 0, 2, 0x81, 0, 0, 3, 0x08, 0x00]);
        let h = L2Header::parse(&b).unwrap();
        assert_eq!(h.outer_vid(), Some(1));
        assert_eq!(h.inner.map(|t| t.vid), Some(2));
        assert_eq!(h.ethertype, ETHERTYPE_VLAN);
    }

    #[test]
    fn inner_without_outer_rejected() {
        let h = L2Header {
            inner: Some(VlanTag::dot1q(1)),
            ..L2Header::default()
        };
        assert_eq!(h.emit(&mut [0u8; 64]), Err(ParseError::Malformed));
        let bad = L2Header {
            outer: Some(VlanTag::dot1q(4096)),
            ..L2Header::default()
        };
        assert_eq!(bad.emit(&mut [0u8; 64]), Err(ParseError::Malformed));
    }
}
