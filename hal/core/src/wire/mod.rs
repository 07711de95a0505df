//! Bounds-checked parse/emit of the headers rtdaq sees, in the style of smoltcp's `wire`.
//!
//! Every header is a small `Copy` struct with `parse(&[u8]) -> Result<Self, ParseError>`
//! and `emit(&self, &mut [u8]) -> Result<usize, ParseError>` (bytes written). Multi-byte
//! fields are big-endian (network order). Nothing here allocates, uses `unsafe`, or
//! panics on any input: every access goes through checked slicing.
//!
//! | module | header |
//! |---|---|
//! | [`ethernet`] | Ethernet II, EtherType constants |
//! | [`vlan`] | 802.1Q tag, QinQ, [`L2Header`] (Ethernet + up to 2 tags) |
//! | [`ipv4`] | IPv4 with options skipped, header checksum |
//! | [`udp`] | UDP, checksum over the IPv4 pseudo-header |
//! | [`ecpri`] | eCPRI common header |
//! | [`seqhdr`] | the rtdaq sequence header and payload pattern |
//! | [`checksum`] | the Internet checksum |
//! | [`pcap`] | pcap file and record headers, synthesised UDP headers |
//! | [`frame`] | [`parse_frame`] (one pass, [`FrameInfo`]) and [`emit_udp_frame`] |
//!
//! Layouts and the list of malformed cases are in `docs/wire-format.md`.

pub mod checksum;
pub mod ecpri;
pub mod ethernet;
pub mod frame;
pub mod ipv4;
pub mod pcap;
pub mod seqhdr;
pub mod udp;
pub mod vlan;

pub use ecpri::EcpriHeader;
pub use ethernet::{
    EthernetHeader, ETHERTYPE_ARP, ETHERTYPE_ECPRI, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_QINQ,
    ETHERTYPE_VLAN,
};
pub use frame::{
    emit_udp_frame, parse_frame, parse_frame_head, parse_frame_with, plain_udp_payload, EcpriInfo,
    FrameInfo, Ipv4Info, ParseOptions, UdpChecksumMode, UdpFrameSpec, UdpInfo,
};
pub use ipv4::{Ipv4Header, PROTO_UDP};
pub use seqhdr::{check_pattern, fill_pattern, SeqHeader};
pub use udp::UdpHeader;
pub use vlan::{L2Header, VlanTag};

use crate::error::ParseError;

/// `N` bytes at `off`, or `Truncated`.
#[inline]
pub(crate) fn get_array<const N: usize>(buf: &[u8], off: usize) -> Result<[u8; N], ParseError> {
    let end = off.checked_add(N).ok_or(ParseError::Truncated)?;
    let s = buf.get(off..end).ok_or(ParseError::Truncated)?;
    let mut a = [0u8; N];
    a.copy_from_slice(s);
    Ok(a)
}

#[inline]
pub(crate) fn get_u8(buf: &[u8], off: usize) -> Result<u8, ParseError> {
    buf.get(off).copied().ok_or(ParseError::Truncated)
}

#[inline]
pub(crate) fn get_u16(buf: &[u8], off: usize) -> Result<u16, ParseError> {
    get_array(buf, off).map(u16::from_be_bytes)
}

#[inline]
pub(crate) fn get_u32(buf: &[u8], off: usize) -> Result<u32, ParseError> {
    get_array(buf, off).map(u32::from_be_bytes)
}

#[inline]
pub(crate) fn get_u64(buf: &[u8], off: usize) -> Result<u64, ParseError> {
    get_array(buf, off).map(u64::from_be_bytes)
}

/// Copies `src` to `buf[off..]`, or `Truncated`.
#[inline]
pub(crate) fn put_bytes(buf: &mut [u8], off: usize, src: &[u8]) -> Result<(), ParseError> {
    let end = off.checked_add(src.len()).ok_or(ParseError::Truncated)?;
    buf.get_mut(off..end)
        .ok_or(ParseError::Truncated)?
        .copy_from_slice(src);
    Ok(())
}

#[inline]
pub(crate) fn put_u16(buf: &mut [u8], off: usize, v: u16) -> Result<(), ParseError> {
    put_bytes(buf, off, &v.to_be_bytes())
}

#[inline]
pub(crate) fn put_u32(buf: &mut [u8], off: usize, v: u32) -> Result<(), ParseError> {
    put_bytes(buf, off, &v.to_be_bytes())
}

#[inline]
pub(crate) fn put_u64(buf: &mut [u8], off: usize, v: u64) -> Result<(), ParseError> {
    put_bytes(buf, off, &v.to_be_bytes())
}
