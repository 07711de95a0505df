//! Ethernet II header: destination MAC, source MAC, EtherType (14 bytes, no FCS).
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 6 | destination MAC |
//! | 6 | 6 | source MAC |
//! | 12 | 2 | EtherType (big-endian); a VLAN TPID when tagged, see [`super::vlan`] |
//!
//! The frame check sequence is never part of the buffers rtdaq sees (NICs strip it).

use super::{get_array, get_u16, put_bytes, put_u16};
use crate::error::ParseError;

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// EtherType of IPv6 (recognised, not parsed).
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
/// TPID of an IEEE 802.1Q customer VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// TPID of an IEEE 802.1ad service VLAN tag (outer tag of QinQ).
pub const ETHERTYPE_QINQ: u16 = 0x88A8;
/// EtherType of eCPRI over Ethernet.
pub const ETHERTYPE_ECPRI: u16 = 0xAEFE;

/// The Ethernet II header as plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EthernetHeader {
    /// Destination MAC address.
    pub dst: [u8; 6],
    /// Source MAC address.
    pub src: [u8; 6],
    /// EtherType (or the TPID of a first VLAN tag).
    pub ethertype: u16,
}

impl EthernetHeader {
    /// Header length in bytes.
    pub const LEN: usize = 14;

    /// Parses the first 14 bytes of `buf`. Fewer bytes: [`ParseError::Truncated`].
    #[inline]
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        Ok(Self {
            dst: get_array(buf, 0)?,
            src: get_array(buf, 6)?,
            ethertype: get_u16(buf, 12)?,
        })
    }

    /// Writes the header into the first 14 bytes of `buf`; returns 14.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, ParseError> {
        if buf.len() < Self::LEN {
            return Err(ParseError::Truncated);
        }
        put_bytes(buf, 0, &self.dst)?;
        put_bytes(buf, 6, &self.src)?;
        put_u16(buf, 12, self.ethertype)?;
        Ok(Self::LEN)
    }
}

/// True for the EtherTypes rtdaq treats as a VLAN tag protocol identifier.
#[inline]
pub const fn is_vlan_tpid(ethertype: u16) -> bool {
    ethertype == ETHERTYPE_VLAN || ethertype == ETHERTYPE_QINQ
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_emit() {
        let h = EthernetHeader {
            dst: [1, 2, 3, 4, 5, 6],
            src: [7, 8, 9, 10, 11, 12],
            ethertype: ETHERTYPE_IPV4,
        };
        let mut b = [0u8; 14];
        assert_eq!(h.emit(&mut b), Ok(14));
        assert_eq!(&b[12..], &[0x08, 0x00]);
        assert_eq!(EthernetHeader::parse(&b), Ok(h));
        assert_eq!(EthernetHeader::parse(&b[..13]), Err(ParseError::Truncated));
        assert_eq!(h.emit(&mut [0u8; 13]), Err(ParseError::Truncated));
    }
}
