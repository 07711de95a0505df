//! Wire parse/emit: no panics on arbitrary bytes, emit→parse round trips, checksums, and
//! hand-made (hex) frames for every malformed case.

use proptest::prelude::*;
use rtdaq_core::wire::ecpri::EcpriHeader;
use rtdaq_core::wire::seqhdr::{self, SeqHeader};
use rtdaq_core::wire::{
    emit_udp_frame, ipv4, parse_frame, parse_frame_with, udp, EthernetHeader, Ipv4Header, L2Header,
    ParseOptions, UdpChecksumMode, UdpFrameSpec, UdpHeader, VlanTag,
};
use rtdaq_core::ParseError;

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

// ---------------------------------------------------------------- hand-made frames

/// Ethernet + IPv4 (total 32) + UDP (length 12) + 4 payload bytes, checksums correct.
const GOOD: &str = "ffffffffffff 020000000001 0800
                    4500 0020 0000 4000 4011 b979 c0a80001 c0a80002
                    1388 1770 000c 0000
                    deadbeef";

fn good() -> Vec<u8> {
    hex(GOOD)
}

#[test]
fn hex_good_frame_parses() {
    let f = good();
    let info = parse_frame(&f).unwrap();
    assert_eq!(info.ethertype, 0x0800);
    assert_eq!(info.l3_offset, 14);
    let ip = info.ipv4.unwrap();
    assert_eq!(
        (ip.src, ip.dst, ip.total_len, ip.protocol),
        ([192, 168, 0, 1], [192, 168, 0, 2], 32, 17)
    );
    assert_eq!(ip.l4_offset, 34);
    let u = info.udp.unwrap();
    assert_eq!(
        (u.src_port, u.dst_port, u.payload_offset, u.payload_len),
        (5000, 6000, 42, 4)
    );
    assert_eq!(info.udp_payload(&f), Some(&[0xde, 0xad, 0xbe, 0xef][..]));
    assert_eq!(info.verify_checksums(&f), Ok(()));
}

#[test]
fn hex_runt_frames() {
    assert_eq!(parse_frame(&[]), Err(ParseError::Truncated));
    assert_eq!(
        parse_frame(&hex("ffffffffffff 020000000001 08")),
        Err(ParseError::Truncated)
    );
    // Exactly 14 bytes with an IPv4 EtherType: the IPv4 header is missing.
    assert_eq!(
        parse_frame(&hex("ffffffffffff 020000000001 0800")),
        Err(ParseError::Truncated)
    );
    // Exactly 14 bytes of an unknown EtherType is fine.
    assert!(parse_frame(&hex("ffffffffffff 020000000001 88b5")).is_ok());
}

#[test]
fn hex_truncated_vlan_tag() {
    assert_eq!(
        parse_frame(&hex("ffffffffffff 020000000001 8100 00")),
        Err(ParseError::Truncated)
    );
    assert_eq!(
        parse_frame(&hex("ffffffffffff 020000000001 88a8 0064 8100 00c8 08")),
        Err(ParseError::Truncated)
    );
}

#[test]
fn hex_truncated_ipv4() {
    let f = good();
    // Cut inside the fixed 20-byte header.
    assert_eq!(parse_frame(&f[..14 + 10]), Err(ParseError::Truncated));
    // Whole header present but the frame ends before total length.
    assert_eq!(parse_frame(&f[..f.len() - 1]), Err(ParseError::Truncated));
}

#[test]
fn hex_ihl_below_5() {
    let f = hex("ffffffffffff 020000000001 0800
         4400 0020 0000 4000 4011 0000 c0a80001 c0a80002
         1388 1770 000c 0000 deadbeef");
    assert_eq!(parse_frame(&f), Err(ParseError::Malformed));
}

#[test]
fn hex_ihl_beyond_buffer() {
    // IHL 15 (60 bytes) but only 32 bytes of IPv4 in the frame.
    let f = hex("ffffffffffff 020000000001 0800
         4f00 0020 0000 4000 4011 0000 c0a80001 c0a80002
         1388 1770 000c 0000 deadbeef");
    assert_eq!(parse_frame(&f), Err(ParseError::Truncated));
}

#[test]
fn hex_bad_version_and_total_len() {
    let mut f = good();
    f[14] = 0x65;
    assert_eq!(
        parse_frame(&f),
        Err(ParseError::Malformed),
        "version 6 under 0x0800"
    );
    let mut f = good();
    f[16..18].copy_from_slice(&[0x00, 0x10]);
    assert_eq!(
        parse_frame(&f),
        Err(ParseError::Malformed),
        "total length 16 < IHL*4"
    );
}

#[test]
fn hex_udp_length_beyond_ip_payload() {
    let f = hex("ffffffffffff 020000000001 0800
         4500 0020 0000 4000 4011 0000 c0a80001 c0a80002
         1388 1770 000d 0000 deadbeef 00");
    assert_eq!(parse_frame(&f), Err(ParseError::Malformed));
}

#[test]
fn hex_udp_length_below_8() {
    let f = hex("ffffffffffff 020000000001 0800
         4500 0020 0000 4000 4011 0000 c0a80001 c0a80002
         1388 1770 0007 0000 deadbeef");
    assert_eq!(parse_frame(&f), Err(ParseError::Malformed));
}

#[test]
fn hex_udp_header_truncated() {
    // IPv4 total length 24: only 4 bytes of UDP header.
    let f = hex("ffffffffffff 020000000001 0800
         4500 0018 0000 4000 4011 0000 c0a80001 c0a80002
         1388 1770");
    assert_eq!(parse_frame(&f), Err(ParseError::Truncated));
}

#[test]
fn hex_padding_and_fragments_are_fine() {
    let mut f = good();
    f.extend_from_slice(&[0; 20]); // Ethernet padding after total length
    assert_eq!(parse_frame(&f).unwrap().udp.unwrap().payload_len, 4);
    // Non-first fragment carrying garbage where a UDP header would be: L4 not parsed.
    let f = hex("ffffffffffff 020000000001 0800
         4500 0020 0000 0001 4011 0000 c0a80001 c0a80002
         ffff ffff ffff ffff deadbeef");
    let info = parse_frame(&f).unwrap();
    assert!(info.ipv4.unwrap().is_fragment());
    assert_eq!(info.udp, None);
}

#[test]
fn hex_ecpri_l2() {
    let f = hex("ffffffffffff 020000000001 aefe 1002 0004 01020304");
    let e = parse_frame(&f).unwrap().ecpri.unwrap();
    assert_eq!(
        (e.msg_type, e.payload_size, e.offset, e.over_udp),
        (2, 4, 14, false)
    );
    // Payload size beyond the frame.
    let f = hex("ffffffffffff 020000000001 aefe 1002 0005 01020304");
    assert_eq!(parse_frame(&f), Err(ParseError::Truncated));
    // Revision 2.
    let f = hex("ffffffffffff 020000000001 aefe 2002 0004 01020304");
    assert_eq!(parse_frame(&f), Err(ParseError::Malformed));
    // VLAN-tagged eCPRI.
    let f = hex("ffffffffffff 020000000001 8100 a00a aefe 1000 0000");
    let info = parse_frame(&f).unwrap();
    assert_eq!(info.outer_vlan_id(), Some(10));
    assert_eq!(info.vlan_outer.unwrap().pcp, 5);
    assert_eq!(info.ecpri.unwrap().msg_type, 0);
}

// ---------------------------------------------------------------- strategies

fn vlan_tag(tpids: &'static [u16]) -> impl Strategy<Value = VlanTag> {
    (
        proptest::sample::select(tpids),
        0u8..8,
        any::<bool>(),
        0u16..4096,
    )
        .prop_map(|(tpid, pcp, dei, vid)| VlanTag {
            tpid,
            pcp,
            dei,
            vid,
        })
}

fn non_tpid() -> impl Strategy<Value = u16> {
    any::<u16>().prop_filter("not a VLAN TPID", |e| *e != 0x8100 && *e != 0x88a8)
}

fn l2_header() -> impl Strategy<Value = L2Header> {
    (
        any::<[u8; 6]>(),
        any::<[u8; 6]>(),
        0usize..3,
        vlan_tag(&[0x8100, 0x88a8]),
        vlan_tag(&[0x8100]),
        non_tpid(),
    )
        .prop_map(|(dst, src, ntags, outer, inner, ethertype)| L2Header {
            dst,
            src,
            outer: (ntags >= 1).then_some(outer),
            inner: (ntags >= 2).then_some(inner),
            ethertype,
        })
}

fn ipv4_header() -> impl Strategy<Value = Ipv4Header> {
    (
        (
            5u8..=15,
            0u8..64,
            0u8..4,
            0u16..200,
            any::<u16>(),
            any::<bool>(),
        ),
        (
            any::<bool>(),
            0u16..0x2000,
            any::<u8>(),
            any::<u8>(),
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
        ),
    )
        .prop_map(
            |((ihl, dscp, ecn, extra, ident, df), (mf, fo, ttl, protocol, src, dst))| Ipv4Header {
                header_len: ihl * 4,
                dscp,
                ecn,
                total_len: u16::from(ihl) * 4 + extra,
                ident,
                dont_frag: df,
                more_frags: mf,
                frag_offset: fo,
                ttl,
                protocol,
                src,
                dst,
            },
        )
}

fn udp_spec() -> impl Strategy<Value = (UdpFrameSpec, Vec<u8>)> {
    (
        (
            any::<[u8; 6]>(),
            any::<[u8; 6]>(),
            0usize..3,
            vlan_tag(&[0x8100, 0x88a8]),
            vlan_tag(&[0x8100]),
        ),
        (
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
            any::<u16>(),
            any::<u16>(),
            any::<u8>(),
            0u8..64,
        ),
        (
            any::<u16>(),
            any::<bool>(),
            0u8..3,
            proptest::collection::vec(any::<u8>(), 0..1500),
        ),
    )
        .prop_map(
            |(
                (dm, sm, ntags, outer, inner),
                (si, di, sp, dp, ttl, dscp),
                (ident, df, mode, payload),
            )| {
                let spec = UdpFrameSpec {
                    dst_mac: dm,
                    src_mac: sm,
                    vlan: (ntags >= 1).then_some(outer),
                    vlan_inner: (ntags >= 2).then_some(inner),
                    src_ip: si,
                    dst_ip: di,
                    src_port: sp,
                    dst_port: dp,
                    ttl,
                    dscp,
                    ident,
                    dont_frag: df,
                    payload_len: payload.len(),
                    checksum: [
                        UdpChecksumMode::Compute,
                        UdpChecksumMode::None,
                        UdpChecksumMode::Offload,
                    ][usize::from(mode)],
                };
                (spec, payload)
            },
        )
}

fn seq_header() -> impl Strategy<Value = SeqHeader> {
    (
        any::<u8>(),
        any::<u16>(),
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
    )
        .prop_map(
            |(flags, stream_id, seq, tx_timestamp_ns, payload_len)| SeqHeader {
                flags,
                stream_id,
                seq,
                tx_timestamp_ns,
                payload_len,
            },
        )
}

fn build(spec: &UdpFrameSpec, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; spec.frame_len()];
    let off = spec.payload_offset();
    buf[off..off + payload.len()].copy_from_slice(payload);
    assert_eq!(emit_udp_frame(&mut buf, spec), Ok(spec.frame_len()));
    buf
}

// ---------------------------------------------------------------- properties

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000), port in any::<u16>()) {
        let b = &bytes[..];
        if let Ok(info) = parse_frame(b) {
            let _ = info.verify_checksums(b);
            let _ = info.udp_payload(b);
        }
        let _ = parse_frame_with(b, &ParseOptions { ecpri_udp_port: Some(port) });
        let _ = EthernetHeader::parse(b);
        let _ = VlanTag::parse(b);
        let _ = L2Header::parse(b);
        let _ = Ipv4Header::parse(b);
        let _ = Ipv4Header::parse_checked(b);
        let _ = ipv4::verify_checksum(b);
        let _ = UdpHeader::parse(b);
        let _ = udp::verify_checksum(b, [1, 2, 3, 4], [5, 6, 7, 8]);
        let _ = udp::compute_checksum(b, [1, 2, 3, 4], [5, 6, 7, 8]);
        let _ = EcpriHeader::parse(b);
        let _ = SeqHeader::parse(b);
        let _ = SeqHeader::parse_with_payload(b);
        let _ = seqhdr::check_pattern(port, 7, b);
        let mut m = bytes.clone();
        let _ = ipv4::fill_checksum(&mut m);
        let _ = udp::fill_checksum(&mut m, [0; 4], [0; 4]);
    }

    /// Valid frames with random bytes overwritten and a random cut: reaches deep paths.
    #[test]
    fn mutated_frames_never_panic(
        (spec, payload) in udp_spec(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
        port in any::<u16>(),
    ) {
        let mut f = build(&spec, &payload);
        for (i, v) in edits {
            let i = i.index(f.len());
            f[i] = v;
        }
        let f = &f[..cut.index(f.len() + 1)];
        for opts in [ParseOptions::DEFAULT, ParseOptions { ecpri_udp_port: Some(port) }] {
            if let Ok(info) = parse_frame_with(f, &opts) {
                let _ = info.verify_checksums(f);
                if let Some(u) = info.udp {
                    prop_assert!(usize::from(u.payload_offset) + usize::from(u.payload_len) <= f.len());
                    prop_assert!(info.udp_payload(f).is_some());
                }
                if let Some(ip) = info.ipv4 {
                    prop_assert!(usize::from(info.l3_offset) + usize::from(ip.total_len) <= f.len());
                }
            }
        }
    }

    #[test]
    fn ethernet_roundtrip(dst in any::<[u8; 6]>(), src in any::<[u8; 6]>(), ethertype in any::<u16>()) {
        let h = EthernetHeader { dst, src, ethertype };
        let mut b = [0u8; 14];
        prop_assert_eq!(h.emit(&mut b), Ok(14));
        prop_assert_eq!(EthernetHeader::parse(&b), Ok(h));
    }

    #[test]
    fn vlan_and_qinq_roundtrip(h in l2_header(), tag in vlan_tag(&[0x8100, 0x88a8])) {
        let mut b = [0u8; 22];
        let n = h.emit(&mut b).unwrap();
        prop_assert_eq!(n, h.len());
        prop_assert_eq!(L2Header::parse(&b[..n]), Ok(h));
        let mut t = [0u8; 4];
        prop_assert_eq!(tag.emit(&mut t), Ok(4));
        prop_assert_eq!(VlanTag::parse(&t), Ok(tag));
    }

    #[test]
    fn ipv4_roundtrip_and_checksum(h in ipv4_header(), bit in any::<prop::sample::Index>()) {
        let mut b = vec![0u8; usize::from(h.total_len)];
        prop_assert_eq!(h.emit(&mut b), Ok(usize::from(h.header_len)));
        prop_assert_eq!(Ipv4Header::parse(&b), Ok(h));
        prop_assert_eq!(Ipv4Header::parse_checked(&b), Ok(h));
        prop_assert!(ipv4::verify_checksum(&b));
        // Flip one header bit. IHL bits are skipped: they change the checksummed range
        // (the parser rejects most such values anyway).
        let bit = bit.index(usize::from(h.header_len) * 8);
        prop_assume!(!(4..8).contains(&bit));
        b[bit / 8] ^= 0x80 >> (bit % 8);
        prop_assert!(!ipv4::verify_checksum(&b));
    }

    #[test]
    fn udp_roundtrip_and_checksum(
        sport in any::<u16>(), dport in any::<u16>(),
        payload in proptest::collection::vec(any::<u8>(), 0..600),
        src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(),
        bit in any::<prop::sample::Index>(),
    ) {
        let len = 8 + payload.len();
        let mut d = vec![0u8; len];
        d[8..].copy_from_slice(&payload);
        let h = UdpHeader { src_port: sport, dst_port: dport, length: len as u16, checksum: 0 };
        prop_assert_eq!(h.emit(&mut d), Ok(8));
        prop_assert_eq!(UdpHeader::parse(&d), Ok(h));
        let c = udp::fill_checksum(&mut d, src, dst).unwrap();
        prop_assert_ne!(c, 0);
        prop_assert_eq!(UdpHeader::parse(&d).map(|h| h.checksum), Ok(c));
        prop_assert!(udp::verify_checksum(&d, src, dst));
        prop_assert_eq!(udp::compute_checksum(&d, src, dst), Some(c));
        // Flip one bit of ports, checksum or payload (not the length field, which changes
        // the checksummed range; a checksum flipped to 0 means "none").
        let bit = bit.index(len * 8);
        prop_assume!(!(32..48).contains(&bit));
        d[bit / 8] ^= 0x80 >> (bit % 8);
        prop_assume!(d[6..8] != [0, 0]);
        prop_assert!(!udp::verify_checksum(&d, src, dst));
    }

    #[test]
    fn ecpri_roundtrip(c in any::<bool>(), t in any::<u8>(), size in 0u16..300) {
        let h = EcpriHeader { concatenated: c, msg_type: t, payload_size: size };
        let mut b = vec![0u8; 4 + usize::from(size)];
        prop_assert_eq!(h.emit(&mut b), Ok(4));
        prop_assert_eq!(EcpriHeader::parse(&b), Ok(h));
        prop_assert_eq!(h.payload(&b).map(<[u8]>::len), Some(usize::from(size)));
    }

    #[test]
    fn seq_header_roundtrip(h in seq_header(), cut in 0usize..32) {
        let mut b = [0u8; 40];
        prop_assert_eq!(h.emit(&mut b), Ok(32));
        prop_assert_eq!(SeqHeader::parse(&b), Ok(h));
        prop_assert_eq!(SeqHeader::parse(&b[..cut]), Err(ParseError::Truncated));
        let mut bad = b;
        bad[cut % 5] ^= 0x40; // magic or version byte
        prop_assert_eq!(SeqHeader::parse(&bad), Err(ParseError::Malformed));
    }

    #[test]
    fn pattern_roundtrip(stream in any::<u16>(), seq in any::<u64>(), len in 0usize..300, flip in any::<prop::sample::Index>()) {
        let mut b = vec![0u8; len];
        seqhdr::fill_pattern(stream, seq, &mut b);
        prop_assert!(seqhdr::check_pattern(stream, seq, &b));
        prop_assert!(len < 8 || !seqhdr::check_pattern(stream, seq.wrapping_add(1), &b));
        prop_assert!(len < 8 || !seqhdr::check_pattern(stream ^ 1, seq, &b));
        if len > 0 {
            let bit = flip.index(len * 8);
            b[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(!seqhdr::check_pattern(stream, seq, &b));
        }
    }

    #[test]
    fn udp_frame_roundtrip((spec, payload) in udp_spec()) {
        let f = build(&spec, &payload);
        let info = parse_frame(&f).unwrap();
        prop_assert_eq!(info.dst_mac, spec.dst_mac);
        prop_assert_eq!(info.src_mac, spec.src_mac);
        prop_assert_eq!(info.vlan_outer, spec.vlan);
        prop_assert_eq!(info.vlan_inner, spec.vlan_inner);
        prop_assert_eq!(info.ethertype, 0x0800);
        prop_assert_eq!(usize::from(info.l3_offset), spec.payload_offset() - 28);
        let ip = info.ipv4.unwrap();
        prop_assert_eq!((ip.src, ip.dst, ip.ttl, ip.dscp, ip.protocol), (spec.src_ip, spec.dst_ip, spec.ttl, spec.dscp, 17));
        prop_assert_eq!((ip.dont_frag, ip.more_frags, ip.frag_offset, ip.header_len), (spec.dont_frag, false, 0, 20));
        prop_assert_eq!(usize::from(ip.total_len), 28 + payload.len());
        let u = info.udp.unwrap();
        prop_assert_eq!((u.src_port, u.dst_port), (spec.src_port, spec.dst_port));
        prop_assert_eq!(usize::from(u.payload_offset), spec.payload_offset());
        prop_assert_eq!(usize::from(u.payload_len), payload.len());
        prop_assert_eq!(info.udp_payload(&f), Some(&payload[..]));
        let l3 = &f[usize::from(info.l3_offset)..];
        prop_assert!(ipv4::verify_checksum(l3));
        match spec.checksum {
            UdpChecksumMode::Compute => {
                prop_assert_ne!(u.checksum, 0);
                prop_assert_eq!(info.verify_checksums(&f), Ok(()));
            }
            UdpChecksumMode::None => {
                prop_assert_eq!(u.checksum, 0);
                prop_assert_eq!(info.verify_checksums(&f), Ok(()));
            }
            UdpChecksumMode::Offload => {
                let len = (8 + payload.len()) as u16;
                prop_assert_eq!(u.checksum, udp::pseudo_header_checksum(spec.src_ip, spec.dst_ip, len));
            }
        }
    }
}

#[test]
fn emit_udp_frame_rejects_bad_specs() {
    let mut buf = vec![0u8; 70_000];
    let too_big = UdpFrameSpec {
        payload_len: UdpFrameSpec::MAX_PAYLOAD + 1,
        ..UdpFrameSpec::default()
    };
    assert_eq!(
        emit_udp_frame(&mut buf, &too_big),
        Err(ParseError::Malformed)
    );
    let max = UdpFrameSpec {
        payload_len: UdpFrameSpec::MAX_PAYLOAD,
        ..UdpFrameSpec::default()
    };
    assert_eq!(emit_udp_frame(&mut buf, &max), Ok(14 + 65_535));
    let inner_only = UdpFrameSpec {
        vlan_inner: Some(VlanTag::dot1q(1)),
        ..UdpFrameSpec::default()
    };
    assert_eq!(
        emit_udp_frame(&mut buf, &inner_only),
        Err(ParseError::Malformed)
    );
    let dscp = UdpFrameSpec {
        dscp: 64,
        ..UdpFrameSpec::default()
    };
    assert_eq!(emit_udp_frame(&mut buf, &dscp), Err(ParseError::Malformed));
    assert_eq!(
        emit_udp_frame(&mut buf[..41], &UdpFrameSpec::default()),
        Err(ParseError::Truncated)
    );
}
