//! One-pass frame parser ([`parse_frame`]) and the UDP frame builder of the generator
//! ([`emit_udp_frame`]).
//!
//! [`parse_frame`] walks Ethernet II → up to two VLAN tags → IPv4 → UDP (or eCPRI over
//! Ethernet, or over UDP on a configured port) and returns a small `Copy`
//! [`FrameInfo`] with offsets, so later stages (flow matching, validators) never parse
//! again. Checksums are not verified (see [`FrameInfo::verify_checksums`]).
//!
//! What is an error (engines count every `Err` as a malformed packet):
//!
//! | case | error |
//! |---|---|
//! | frame < 14 bytes (runt), or ends inside a VLAN tag | `Truncated` |
//! | IPv4: < 20 bytes, < IHL·4 bytes, or < total length | `Truncated` |
//! | IPv4: version ≠ 4, IHL < 5, total length < IHL·4 | `Malformed` |
//! | UDP: IPv4 payload < 8 bytes | `Truncated` |
//! | UDP: length < 8 or > IPv4 payload | `Malformed` |
//! | eCPRI: < 4 bytes or payload size beyond the frame / UDP payload | `Truncated` |
//! | eCPRI: revision ≠ 1 | `Malformed` |
//!
//! Not errors: unknown EtherTypes (ARP, IPv6, LLC lengths < 0x600, a third VLAN tag), IP
//! protocols other than UDP, IPv4 fragments (L4 is not parsed for any fragment, so all
//! fragments of one datagram classify alike), link-layer padding after the IPv4 total
//! length, and bytes after the UDP length.

use super::ecpri::EcpriHeader;
use super::ethernet::{ETHERTYPE_ECPRI, ETHERTYPE_IPV4};
use super::ipv4::{Ipv4Header, PROTO_UDP};
use super::udp::{self, UdpHeader};
use super::vlan::{L2Header, VlanTag};
use crate::error::ParseError;

/// Parser settings that are not on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ParseOptions {
    /// UDP destination port that carries eCPRI (there is no IANA port); `None` = eCPRI
    /// is only recognised over Ethernet (EtherType `0xAEFE`).
    pub ecpri_udp_port: Option<u16>,
}

impl ParseOptions {
    /// eCPRI over Ethernet only.
    pub const DEFAULT: Self = Self {
        ecpri_udp_port: None,
    };
}

/// IPv4 fields of a parsed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Info {
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// Total length field.
    pub total_len: u16,
    /// Protocol.
    pub protocol: u8,
    /// Time to live.
    pub ttl: u8,
    /// DSCP (0..=63).
    pub dscp: u8,
    /// Header length in bytes (IHL × 4).
    pub header_len: u8,
    /// Don't-fragment flag.
    pub dont_frag: bool,
    /// More-fragments flag.
    pub more_frags: bool,
    /// Fragment offset in 8-byte units.
    pub frag_offset: u16,
    /// Offset of the L4 header (IPv4 payload) in the frame.
    pub l4_offset: u16,
}

impl Ipv4Info {
    /// True for any fragment (L4 was not parsed).
    pub const fn is_fragment(&self) -> bool {
        self.more_frags || self.frag_offset != 0
    }
}

/// UDP fields of a parsed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpInfo {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Checksum field (0 = none).
    pub checksum: u16,
    /// Offset of the UDP payload in the frame.
    pub payload_offset: u16,
    /// UDP payload length (length field − 8).
    pub payload_len: u16,
}

/// eCPRI common header of a parsed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EcpriInfo {
    /// Message type.
    pub msg_type: u8,
    /// C bit.
    pub concatenated: bool,
    /// Payload size of the first message.
    pub payload_size: u16,
    /// Offset of the eCPRI common header in the frame.
    pub offset: u16,
    /// True when carried over UDP, false over Ethernet.
    pub over_udp: bool,
}

/// What [`parse_frame`] found, with offsets into the frame. `Copy`, no references.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FrameInfo {
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Outermost VLAN tag.
    pub vlan_outer: Option<VlanTag>,
    /// Inner VLAN tag (QinQ).
    pub vlan_inner: Option<VlanTag>,
    /// EtherType after the VLAN tags.
    pub ethertype: u16,
    /// Offset of the L3 header (14, 18 or 22).
    pub l3_offset: u16,
    /// IPv4 header fields when `ethertype` is IPv4.
    pub ipv4: Option<Ipv4Info>,
    /// UDP fields when IPv4 carries an unfragmented UDP datagram.
    pub udp: Option<UdpInfo>,
    /// eCPRI common header when present.
    pub ecpri: Option<EcpriInfo>,
}

impl FrameInfo {
    /// VID of the outermost VLAN tag.
    pub fn outer_vlan_id(&self) -> Option<u16> {
        self.vlan_outer.map(|t| t.vid)
    }

    /// VID of the inner VLAN tag.
    pub fn inner_vlan_id(&self) -> Option<u16> {
        self.vlan_inner.map(|t| t.vid)
    }

    /// The UDP payload within `frame` (the frame this info was parsed from).
    pub fn udp_payload<'a>(&self, frame: &'a [u8]) -> Option<&'a [u8]> {
        let u = self.udp?;
        let start = usize::from(u.payload_offset);
        frame.get(start..start + usize::from(u.payload_len))
    }

    /// Verifies the IPv4 header checksum and, when present and non-zero, the UDP
    /// checksum of `frame` ([`ParseError::Checksum`] when one fails; `Ok` for non-IPv4).
    pub fn verify_checksums(&self, frame: &[u8]) -> Result<(), ParseError> {
        let Some(ip) = self.ipv4 else {
            return Ok(());
        };
        let l3 = frame
            .get(usize::from(self.l3_offset)..)
            .ok_or(ParseError::Truncated)?;
        if !super::ipv4::verify_checksum(l3) {
            return Err(ParseError::Checksum);
        }
        if self.udp.is_some() {
            let l4_end = usize::from(self.l3_offset) + usize::from(ip.total_len);
            let dgram = frame
                .get(usize::from(ip.l4_offset)..l4_end)
                .ok_or(ParseError::Truncated)?;
            if !udp::verify_checksum(dgram, ip.src, ip.dst) {
                return Err(ParseError::Checksum);
            }
        }
        Ok(())
    }
}

#[inline]
fn off16(v: usize) -> Result<u16, ParseError> {
    u16::try_from(v).map_err(|_| ParseError::Malformed)
}

/// `total`: the message's length in the whole frame when known (its UDP payload), else
/// `None`: the bytes of `buf` (a whole frame), or unchecked for a frame's head alone (the
/// caller checks the payload size against the whole frame's length).
fn ecpri_info(
    buf: &[u8],
    offset: usize,
    over_udp: bool,
    total: Option<usize>,
) -> Result<EcpriInfo, ParseError> {
    let h = match total {
        Some(t) => EcpriHeader::parse_within(buf, t)?,
        None => EcpriHeader::parse(buf)?,
    };
    Ok(EcpriInfo {
        msg_type: h.msg_type,
        concatenated: h.concatenated,
        payload_size: h.payload_size,
        offset: off16(offset)?,
        over_udp,
    })
}

/// Parses `frame` once with [`ParseOptions::DEFAULT`]; see the module docs for errors.
#[inline]
pub fn parse_frame(frame: &[u8]) -> Result<FrameInfo, ParseError> {
    parse_frame_with(frame, &ParseOptions::DEFAULT)
}

/// Parses `frame` once; see the module docs for what is an error.
#[inline]
pub fn parse_frame_with(frame: &[u8], opts: &ParseOptions) -> Result<FrameInfo, ParseError> {
    parse(frame, opts, false)
}

/// Parses the first bytes of a frame whose rest is not readable (header-data split: the
/// NIC put the first `hds_split` bytes in CPU memory, the rest elsewhere, e.g. GPU memory):
/// as [`parse_frame_with`], but an IPv4 or UDP length beyond `head` is not
/// [`ParseError::Truncated`] (the lengths are still those of the headers). The headers
/// themselves must lie inside `head`.
#[inline]
pub fn parse_frame_head(head: &[u8], opts: &ParseOptions) -> Result<FrameInfo, ParseError> {
    parse(head, opts, true)
}

/// The UDP payload of the commonest frame, found without a full parse: untagged IPv4 with
/// a 20-byte header (`0x45`), UDP, not a fragment, lengths that fit the frame (IPv4 total
/// length within it and at least 28, UDP length 8..=the IPv4 payload). `None` for any other
/// frame, which [`parse_frame`] then decides; where this gives `Some` it is exactly the
/// payload [`parse_frame`]'s [`UdpInfo`] points to (`payload_offset` 42, `payload_len`
/// UDP length − 8). Per-frame cost: a handful of byte compares, no [`FrameInfo`] built.
/// Never allocates.
#[inline]
pub fn plain_udp_payload(frame: &[u8]) -> Option<&[u8]> {
    let h = frame.get(..42)?;
    if h[12] != 0x08 || h[13] != 0x00 || h[14] != 0x45 || h[23] != PROTO_UDP {
        return None;
    }
    // More-fragments flag or a fragment offset: a fragment.
    if u16::from_be_bytes([h[20], h[21]]) & 0x3FFF != 0 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([h[16], h[17]]));
    let udp_len = usize::from(u16::from_be_bytes([h[38], h[39]]));
    if total < 28 || 14 + total > frame.len() || udp_len < 8 || udp_len > total - 20 {
        return None;
    }
    frame.get(42..34 + udp_len)
}

/// `buf[from..to]`, or with `head` `buf[from..min(to, len)]`.
#[inline]
fn within(buf: &[u8], from: usize, to: usize, head: bool) -> Option<&[u8]> {
    let to = if head { to.min(buf.len()) } else { to };
    buf.get(from..to)
}

#[inline]
fn parse(frame: &[u8], opts: &ParseOptions, head: bool) -> Result<FrameInfo, ParseError> {
    let l2 = L2Header::parse(frame)?;
    let l3_offset = l2.len();
    let mut info = FrameInfo {
        dst_mac: l2.dst,
        src_mac: l2.src,
        vlan_outer: l2.outer,
        vlan_inner: l2.inner,
        ethertype: l2.ethertype,
        l3_offset: off16(l3_offset)?,
        ipv4: None,
        udp: None,
        ecpri: None,
    };
    let l3 = frame.get(l3_offset..).ok_or(ParseError::Truncated)?;
    match l2.ethertype {
        ETHERTYPE_IPV4 => {
            let ip = if head {
                Ipv4Header::parse_head(l3)?
            } else {
                Ipv4Header::parse(l3)?
            };
            let l4_offset = l3_offset + usize::from(ip.header_len);
            info.ipv4 = Some(Ipv4Info {
                src: ip.src,
                dst: ip.dst,
                total_len: ip.total_len,
                protocol: ip.protocol,
                ttl: ip.ttl,
                dscp: ip.dscp,
                header_len: ip.header_len,
                dont_frag: ip.dont_frag,
                more_frags: ip.more_frags,
                frag_offset: ip.frag_offset,
                l4_offset: off16(l4_offset)?,
            });
            if ip.protocol == PROTO_UDP && !ip.is_fragment() {
                let l4 = within(
                    l3,
                    usize::from(ip.header_len),
                    usize::from(ip.total_len),
                    head,
                )
                .ok_or(ParseError::Truncated)?;
                let u = UdpHeader::parse_in(l4, ip.payload_len())?;
                let payload_offset = l4_offset + UdpHeader::LEN;
                info.udp = Some(UdpInfo {
                    src_port: u.src_port,
                    dst_port: u.dst_port,
                    checksum: u.checksum,
                    payload_offset: off16(payload_offset)?,
                    payload_len: off16(u.payload_len())?,
                });
                if opts.ecpri_udp_port == Some(u.dst_port) {
                    let p = within(l4, UdpHeader::LEN, usize::from(u.length), head)
                        .ok_or(ParseError::Truncated)?;
                    let total = head.then(|| u.payload_len());
                    info.ecpri = Some(ecpri_info(p, payload_offset, true, total)?);
                }
            }
        }
        ETHERTYPE_ECPRI => {
            // A head alone: its payload size is checked against the whole frame by the caller.
            let total = head.then_some(usize::from(u16::MAX));
            info.ecpri = Some(ecpri_info(l3, l3_offset, false, total)?);
        }
        _ => {}
    }
    Ok(info)
}

/// How [`emit_udp_frame`] fills the UDP checksum field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum UdpChecksumMode {
    /// Compute it over the pseudo-header, header and the payload already in the buffer.
    #[default]
    Compute,
    /// Write 0 ("no checksum").
    None,
    /// Write the folded pseudo-header sum for NIC checksum offload to complete.
    Offload,
}

/// Everything [`emit_udp_frame`] needs to write Ethernet/(VLAN)/IPv4/UDP headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpFrameSpec {
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Outer VLAN tag (`None` = untagged).
    pub vlan: Option<VlanTag>,
    /// Inner VLAN tag for QinQ (needs `vlan`).
    pub vlan_inner: Option<VlanTag>,
    /// IPv4 source.
    pub src_ip: [u8; 4],
    /// IPv4 destination.
    pub dst_ip: [u8; 4],
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// IPv4 TTL.
    pub ttl: u8,
    /// IPv4 DSCP (0..=63).
    pub dscp: u8,
    /// IPv4 identification.
    pub ident: u16,
    /// IPv4 don't-fragment flag.
    pub dont_frag: bool,
    /// UDP payload length in bytes (at most 65507).
    pub payload_len: usize,
    /// UDP checksum handling.
    pub checksum: UdpChecksumMode,
}

impl Default for UdpFrameSpec {
    fn default() -> Self {
        Self {
            dst_mac: [0xFF; 6],
            src_mac: [0x02, 0, 0, 0, 0, 1],
            vlan: None,
            vlan_inner: None,
            src_ip: [0; 4],
            dst_ip: [0; 4],
            src_port: 0,
            dst_port: 0,
            ttl: 64,
            dscp: 0,
            ident: 0,
            dont_frag: true,
            payload_len: 0,
            checksum: UdpChecksumMode::Compute,
        }
    }
}

impl UdpFrameSpec {
    /// Largest UDP payload of one IPv4 datagram (65535 − 20 − 8).
    pub const MAX_PAYLOAD: usize = 65_507;

    /// Offset where the UDP payload starts (write the payload there before
    /// [`emit_udp_frame`] when the checksum is computed).
    pub const fn payload_offset(&self) -> usize {
        14 + if self.vlan.is_some() { 4 } else { 0 }
            + if self.vlan_inner.is_some() { 4 } else { 0 }
            + Ipv4Header::MIN_LEN
            + UdpHeader::LEN
    }

    /// Length of the whole frame (headers + payload, no padding, no FCS).
    pub const fn frame_len(&self) -> usize {
        self.payload_offset() + self.payload_len
    }
}

/// Writes Ethernet, optional VLAN tag(s), IPv4 (no options, checksum computed) and UDP
/// headers for `spec` into the start of `buf`, around a payload that is already at
/// [`UdpFrameSpec::payload_offset`] (it is read for the checksum, never written).
/// Returns the frame length; frames shorter than 60 bytes are not padded.
///
/// Errors: payload > 65507 bytes, DSCP > 63, or a bad VLAN tag: [`ParseError::Malformed`];
/// `buf` shorter than the frame: [`ParseError::Truncated`].
pub fn emit_udp_frame(buf: &mut [u8], spec: &UdpFrameSpec) -> Result<usize, ParseError> {
    if spec.payload_len > UdpFrameSpec::MAX_PAYLOAD {
        return Err(ParseError::Malformed);
    }
    let frame_len = spec.frame_len();
    let frame = buf.get_mut(..frame_len).ok_or(ParseError::Truncated)?;
    let l2 = L2Header {
        dst: spec.dst_mac,
        src: spec.src_mac,
        outer: spec.vlan,
        inner: spec.vlan_inner,
        ethertype: ETHERTYPE_IPV4,
    };
    let l3_offset = l2.len();
    let udp_len = (UdpHeader::LEN + spec.payload_len) as u16;
    let ip = Ipv4Header {
        header_len: Ipv4Header::MIN_LEN as u8,
        dscp: spec.dscp,
        ecn: 0,
        total_len: udp_len + Ipv4Header::MIN_LEN as u16,
        ident: spec.ident,
        dont_frag: spec.dont_frag,
        more_frags: false,
        frag_offset: 0,
        ttl: spec.ttl,
        protocol: PROTO_UDP,
        src: spec.src_ip,
        dst: spec.dst_ip,
    };
    // Validate everything before writing anything.
    if ip.dscp > 63
        || (l2.inner.is_some() && l2.outer.is_none())
        || [l2.outer, l2.inner]
            .into_iter()
            .flatten()
            .any(|t| t.pcp > 7 || t.vid > 0xFFF || !super::ethernet::is_vlan_tpid(t.tpid))
    {
        return Err(ParseError::Malformed);
    }
    l2.emit(frame)?;
    let l3 = frame.get_mut(l3_offset..).ok_or(ParseError::Truncated)?;
    let l4_rel = ip.emit(l3)?;
    let dgram = l3.get_mut(l4_rel..).ok_or(ParseError::Truncated)?;
    let csum = match spec.checksum {
        UdpChecksumMode::Compute | UdpChecksumMode::None => 0,
        UdpChecksumMode::Offload => udp::pseudo_header_checksum(ip.src, ip.dst, udp_len),
    };
    UdpHeader {
        src_port: spec.src_port,
        dst_port: spec.dst_port,
        length: udp_len,
        checksum: csum,
    }
    .emit(dgram)?;
    if spec.checksum == UdpChecksumMode::Compute {
        udp::fill_checksum(dgram, ip.src, ip.dst)?;
    }
    Ok(frame_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the shortcut answers, it answers what the full parse does; everything else it
    /// leaves to the full parse.
    #[test]
    fn the_plain_udp_shortcut_agrees_with_the_parse() {
        fn full(f: &[u8]) -> Option<&[u8]> {
            match parse_frame(f) {
                Ok(FrameInfo { udp: Some(u), .. }) => {
                    let o = usize::from(u.payload_offset);
                    f.get(o..o + usize::from(u.payload_len))
                }
                _ => None,
            }
        }
        let spec = UdpFrameSpec {
            src_ip: [169, 254, 0, 1],
            dst_ip: [169, 254, 0, 2],
            src_port: 5000,
            dst_port: 6000,
            payload_len: 100,
            ..UdpFrameSpec::default()
        };
        let mut buf = [0u8; 200];
        let n = emit_udp_frame(&mut buf, &spec).unwrap();
        let good = buf[..n].to_vec();
        assert_eq!(plain_udp_payload(&good).map(<[u8]>::len), Some(100));
        assert_eq!(plain_udp_payload(&good), full(&good));
        // Ethernet padding after the datagram: same payload.
        let mut padded = good.clone();
        padded.extend_from_slice(&[0; 20]);
        assert_eq!(plain_udp_payload(&padded), full(&padded));
        // Every one-byte change of the headers, and every cut: where the shortcut answers,
        // the parse agrees; it never answers where the parse finds no UDP payload.
        for at in 0..42 {
            for v in [0u8, 1, 0x08, 0x11, 0x20, 0x45, 0x46, 0x81, 0xff] {
                let mut f = good.clone();
                f[at] = v;
                if let Some(p) = plain_udp_payload(&f) {
                    assert_eq!(Some(p), full(&f), "byte {at} = {v:#x}");
                }
            }
        }
        for cut in 0..good.len() {
            let f = &good[..cut];
            if let Some(p) = plain_udp_payload(f) {
                assert_eq!(Some(p), full(f), "cut at {cut}");
            }
        }
        // Left to the parse: VLAN, IPv4 options, fragments.
        let vlan = UdpFrameSpec {
            vlan: Some(VlanTag {
                tpid: 0x8100,
                pcp: 0,
                dei: false,
                vid: 7,
            }),
            ..spec
        };
        let n = emit_udp_frame(&mut buf, &vlan).unwrap();
        assert_eq!(plain_udp_payload(&buf[..n]), None);
        assert!(full(&buf[..n]).is_some());
        let mut frag = good.clone();
        frag[20] |= 0x20;
        assert_eq!(plain_udp_payload(&frag), None);
    }

    #[test]
    fn a_split_frame_head_parses_with_the_header_lengths() {
        let spec = UdpFrameSpec {
            src_ip: [169, 254, 0, 1],
            dst_ip: [169, 254, 0, 2],
            src_port: 5000,
            dst_port: 6000,
            payload_len: 1000,
            ..UdpFrameSpec::default()
        };
        let mut buf = [0u8; 1100];
        let n = emit_udp_frame(&mut buf, &spec).unwrap();
        let whole = parse_frame(&buf[..n]).unwrap();
        // 74 B in CPU memory, the rest elsewhere.
        let head = &buf[..74];
        assert_eq!(parse_frame(head), Err(ParseError::Truncated));
        let h = parse_frame_head(head, &ParseOptions::DEFAULT).unwrap();
        assert_eq!(h, whole);
        assert_eq!(h.udp.unwrap().payload_len, 1000);
        // The headers themselves must be there.
        assert_eq!(
            parse_frame_head(&buf[..40], &ParseOptions::DEFAULT),
            Err(ParseError::Truncated)
        );
    }

    /// eCPRI in a frame's head (the first segment of a multi-buffer frame): over UDP its
    /// payload size is checked against the UDP length, over Ethernet left to the caller.
    #[test]
    fn an_ecpri_head_parses_with_the_message_length() {
        let opts = ParseOptions {
            ecpri_udp_port: Some(6000),
        };
        let spec = UdpFrameSpec {
            src_ip: [169, 254, 0, 1],
            dst_ip: [169, 254, 0, 2],
            src_port: 5000,
            dst_port: 6000,
            payload_len: 8004,
            ..UdpFrameSpec::default()
        };
        let mut buf = vec![0u8; 8100];
        let off = spec.payload_offset();
        let ec = EcpriHeader {
            concatenated: false,
            msg_type: 0,
            payload_size: 8000,
        };
        ec.emit(&mut buf[off..]).unwrap();
        let n = emit_udp_frame(&mut buf, &spec).unwrap();
        let whole = parse_frame_with(&buf[..n], &opts).unwrap();
        let head = parse_frame_head(&buf[..128], &opts).unwrap();
        assert_eq!(head, whole);
        assert_eq!(head.ecpri.unwrap().payload_size, 8000);
        // A payload size beyond the UDP length is wrong whatever the head holds.
        EcpriHeader {
            payload_size: 8001,
            ..ec
        }
        .emit(&mut buf[off..])
        .unwrap();
        assert_eq!(
            parse_frame_head(&buf[..128], &opts),
            Err(ParseError::Truncated)
        );
        // Over Ethernet (0xAEFE): the head of a 9000 B frame parses.
        let mut eth = vec![0u8; 128];
        eth[12..14].copy_from_slice(&0xAEFEu16.to_be_bytes());
        EcpriHeader {
            payload_size: 8900,
            ..ec
        }
        .emit(&mut eth[14..])
        .unwrap();
        assert_eq!(parse_frame(&eth), Err(ParseError::Truncated));
        let e = parse_frame_head(&eth, &opts).unwrap().ecpri.unwrap();
        assert_eq!((e.payload_size, e.offset, e.over_udp), (8900, 14, false));
    }

    #[test]
    fn build_and_parse() {
        let spec = UdpFrameSpec {
            vlan: Some(VlanTag::dot1q(42)),
            src_ip: [10, 0, 0, 1],
            dst_ip: [10, 0, 0, 2],
            src_port: 5000,
            dst_port: 6000,
            payload_len: 5,
            ..UdpFrameSpec::default()
        };
        let mut buf = [0u8; 128];
        let off = spec.payload_offset();
        buf[off..off + 5].copy_from_slice(b"abcde");
        let n = emit_udp_frame(&mut buf, &spec).unwrap();
        assert_eq!(n, 18 + 20 + 8 + 5);
        let info = parse_frame(&buf[..n]).unwrap();
        assert_eq!(info.outer_vlan_id(), Some(42));
        assert_eq!(info.l3_offset, 18);
        let u = info.udp.unwrap();
        assert_eq!((u.src_port, u.dst_port, u.payload_len), (5000, 6000, 5));
        assert_eq!(info.udp_payload(&buf[..n]), Some(&b"abcde"[..]));
        assert_eq!(info.verify_checksums(&buf[..n]), Ok(()));
        buf[n - 1] ^= 1;
        assert_eq!(info.verify_checksums(&buf[..n]), Err(ParseError::Checksum));
        assert_eq!(
            emit_udp_frame(&mut buf[..n - 1], &spec),
            Err(ParseError::Truncated)
        );
    }

    #[test]
    fn ecpri_over_udp_only_when_configured() {
        let spec = UdpFrameSpec {
            dst_port: 4991,
            payload_len: 8,
            ..UdpFrameSpec::default()
        };
        let mut buf = [0u8; 64];
        let off = spec.payload_offset();
        buf[off..off + 4].copy_from_slice(&[0x10, 2, 0, 4]);
        let n = emit_udp_frame(&mut buf, &spec).unwrap();
        assert_eq!(parse_frame(&buf[..n]).unwrap().ecpri, None);
        let opts = ParseOptions {
            ecpri_udp_port: Some(4991),
        };
        let e = parse_frame_with(&buf[..n], &opts).unwrap().ecpri.unwrap();
        assert_eq!(
            (e.msg_type, e.over_udp, usize::from(e.offset)),
            (2, true, off)
        );
        buf[off] = 0x20;
        assert_eq!(
            parse_frame_with(&buf[..n], &opts),
            Err(ParseError::Malformed)
        );
    }
}
