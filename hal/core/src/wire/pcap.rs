//! The classic pcap file format (nanosecond variant), written by the `record` stage and read
//! back by replay and the tests.
//!
//! A file is one 24-byte [`PcapFileHeader`] followed by records, each a 16-byte
//! [`PcapRecord`] header and `incl_len` bytes of the packet. rtdaq writes little-endian
//! files with the nanosecond magic `0xa1b23c4d` (tcpdump `--nano`, Wireshark and `capinfos`
//! read them) and link type Ethernet ([`LINKTYPE_ETHERNET`]).
//!
//! Hand-written rather than taken from a crate: the recorder writes these headers on the hot
//! path into preallocated buffers, split across buffer boundaries, in `no_std`. Replay (cold
//! path) reads files with the same code, and the tests cross-check both against tcpdump,
//! tshark and capinfos.
//!
//! [`emit_udp_headers`] builds the Ethernet/IPv4/UDP headers the socket engine's datagrams
//! are recorded behind (the kernel removed the real ones).

use super::{get_array, Ipv4Header, L2Header, UdpHeader, ETHERTYPE_IPV4, PROTO_UDP};
use crate::error::ParseError;

/// Magic number of a nanosecond-resolution pcap file (as a native `u32`).
pub const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
/// Magic number of a microsecond-resolution pcap file.
pub const PCAP_MAGIC_US: u32 = 0xa1b2_c3d4;
/// Link type: Ethernet II frames.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Link type: raw IPv4/IPv6 packets, no link header.
pub const LINKTYPE_RAW: u32 = 101;
/// Link type: Linux "cooked" capture v1 (`tcpdump -i any`).
pub const LINKTYPE_LINUX_SLL: u32 = 113;
/// Bytes of the headers [`emit_udp_headers`] writes (Ethernet 14 + IPv4 20 + UDP 8).
pub const UDP_HEADERS_LEN: usize = 42;
/// Source MAC of synthesised headers (locally administered): the socket engine never sees
/// the sender's.
pub const SYNTH_SRC_MAC: [u8; 6] = [0x02, 0x72, 0x74, 0x64, 0x00, 0x01];
/// Destination MAC of synthesised headers.
pub const SYNTH_DST_MAC: [u8; 6] = [0x02, 0x72, 0x74, 0x64, 0x00, 0x02];

/// The 24-byte file header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcapFileHeader {
    /// Timestamps are nanoseconds (else microseconds).
    pub nanos: bool,
    /// The file is big-endian (as read; rtdaq writes little-endian).
    pub big_endian: bool,
    /// Largest `incl_len` of a record.
    pub snaplen: u32,
    /// Link type of every record ([`LINKTYPE_ETHERNET`], ...).
    pub linktype: u32,
}

impl PcapFileHeader {
    /// Header length in bytes.
    pub const LEN: usize = 24;

    /// A little-endian nanosecond header.
    pub const fn new(snaplen: u32, linktype: u32) -> Self {
        PcapFileHeader {
            nanos: true,
            big_endian: false,
            snaplen,
            linktype,
        }
    }

    /// The header bytes (little-endian, version 2.4).
    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        let magic = if self.nanos {
            PCAP_MAGIC_NS
        } else {
            PCAP_MAGIC_US
        };
        b[0..4].copy_from_slice(&magic.to_le_bytes());
        b[4..6].copy_from_slice(&2u16.to_le_bytes());
        b[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone, sigfigs: 0
        b[16..20].copy_from_slice(&self.snaplen.to_le_bytes());
        b[20..24].copy_from_slice(&self.linktype.to_le_bytes());
        b
    }

    /// Parses a file header of either byte order and resolution.
    ///
    /// Errors: fewer than 24 bytes: `Truncated`; not a pcap magic: `Unsupported` (a pcapng
    /// file, for instance); a version other than 2.x: `Malformed`.
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        let b: [u8; Self::LEN] = get_array(buf, 0)?;
        let le = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let (nanos, big_endian) = match le {
            PCAP_MAGIC_NS => (true, false),
            PCAP_MAGIC_US => (false, false),
            m if m.swap_bytes() == PCAP_MAGIC_NS => (true, true),
            m if m.swap_bytes() == PCAP_MAGIC_US => (false, true),
            _ => return Err(ParseError::Unsupported),
        };
        let u16_at = |o: usize| {
            let v = [b[o], b[o + 1]];
            if big_endian {
                u16::from_be_bytes(v)
            } else {
                u16::from_le_bytes(v)
            }
        };
        let u32_at = |o: usize| {
            let v = [b[o], b[o + 1], b[o + 2], b[o + 3]];
            if big_endian {
                u32::from_be_bytes(v)
            } else {
                u32::from_le_bytes(v)
            }
        };
        if u16_at(4) != 2 {
            return Err(ParseError::Malformed);
        }
        Ok(PcapFileHeader {
            nanos,
            big_endian,
            snaplen: u32_at(16),
            linktype: u32_at(20) & 0x0fff_ffff,
        })
    }
}

/// The 16-byte header of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PcapRecord {
    /// Capture time, ns since the Unix epoch.
    pub ts_ns: u64,
    /// Bytes of the packet in the file (at most the snap length).
    pub incl_len: u32,
    /// Length of the packet on the wire.
    pub orig_len: u32,
}

impl PcapRecord {
    /// Header length in bytes.
    pub const LEN: usize = 16;

    /// The header bytes of a little-endian nanosecond file.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        let secs = (self.ts_ns / 1_000_000_000) as u32;
        let frac = (self.ts_ns % 1_000_000_000) as u32;
        b[0..4].copy_from_slice(&secs.to_le_bytes());
        b[4..8].copy_from_slice(&frac.to_le_bytes());
        b[8..12].copy_from_slice(&self.incl_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.orig_len.to_le_bytes());
        b
    }

    /// Parses a record header of a file with header `file`.
    ///
    /// Errors: fewer than 16 bytes: `Truncated`; `incl_len` above the larger of the snap
    /// length and 256 KiB: `Malformed` (a corrupt file).
    pub fn parse(buf: &[u8], file: &PcapFileHeader) -> Result<Self, ParseError> {
        let b: [u8; Self::LEN] = get_array(buf, 0)?;
        let at = |o: usize| {
            let v = [b[o], b[o + 1], b[o + 2], b[o + 3]];
            if file.big_endian {
                u32::from_be_bytes(v)
            } else {
                u32::from_le_bytes(v)
            }
        };
        let frac = u64::from(at(4));
        let frac_ns = if file.nanos { frac } else { frac * 1000 };
        let incl_len = at(8);
        if incl_len > file.snaplen.max(262_144) {
            return Err(ParseError::Malformed);
        }
        Ok(PcapRecord {
            ts_ns: u64::from(at(0)) * 1_000_000_000 + frac_ns,
            incl_len,
            orig_len: at(12),
        })
    }
}

/// Writes Ethernet ([`SYNTH_SRC_MAC`] → [`SYNTH_DST_MAC`]), IPv4 (checksum computed, don't
/// fragment, TTL 64) and UDP (checksum 0: none, allowed on IPv4) headers for a datagram of
/// `payload_len` bytes from `src` to `dst` into `out`. Returns the payload length the
/// headers claim (`payload_len`, or `Malformed` above 65507).
pub fn emit_udp_headers(
    out: &mut [u8; UDP_HEADERS_LEN],
    src: ([u8; 4], u16),
    dst: ([u8; 4], u16),
    payload_len: usize,
    ident: u16,
) -> Result<usize, ParseError> {
    if payload_len > 65_507 {
        return Err(ParseError::Malformed);
    }
    let udp_len = (UdpHeader::LEN + payload_len) as u16;
    L2Header {
        dst: SYNTH_DST_MAC,
        src: SYNTH_SRC_MAC,
        outer: None,
        inner: None,
        ethertype: ETHERTYPE_IPV4,
    }
    .emit(&mut out[..])?;
    Ipv4Header {
        header_len: Ipv4Header::MIN_LEN as u8,
        dscp: 0,
        ecn: 0,
        total_len: udp_len + Ipv4Header::MIN_LEN as u16,
        ident,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
        ttl: 64,
        protocol: PROTO_UDP,
        src: src.0,
        dst: dst.0,
    }
    .emit(&mut out[14..])?;
    UdpHeader {
        src_port: src.1,
        dst_port: dst.1,
        length: udp_len,
        checksum: 0,
    }
    .emit(&mut out[34..])?;
    Ok(payload_len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::parse_frame;

    #[test]
    fn file_header_round_trips_and_reads_other_variants() {
        let h = PcapFileHeader::new(65535, LINKTYPE_ETHERNET);
        let b = h.to_bytes();
        assert_eq!(&b[..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(PcapFileHeader::parse(&b), Ok(h));
        let mut be = [0u8; 24];
        be[..4].copy_from_slice(&PCAP_MAGIC_US.to_be_bytes());
        be[4..6].copy_from_slice(&2u16.to_be_bytes());
        be[16..20].copy_from_slice(&1500u32.to_be_bytes());
        be[20..24].copy_from_slice(&LINKTYPE_RAW.to_be_bytes());
        let p = PcapFileHeader::parse(&be).unwrap();
        assert_eq!(
            (p.nanos, p.big_endian, p.snaplen, p.linktype),
            (false, true, 1500, 101)
        );
        // pcapng's section header block magic
        assert_eq!(
            PcapFileHeader::parse(&[
                0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
            ]),
            Err(ParseError::Unsupported)
        );
        assert_eq!(PcapFileHeader::parse(&b[..23]), Err(ParseError::Truncated));
    }

    #[test]
    fn record_header_round_trips() {
        let file = PcapFileHeader::new(262_144, LINKTYPE_ETHERNET);
        let r = PcapRecord {
            ts_ns: 1_764_590_000_123_456_789,
            incl_len: 1442,
            orig_len: 1442,
        };
        assert_eq!(PcapRecord::parse(&r.to_bytes(), &file), Ok(r));
        let us = PcapFileHeader {
            nanos: false,
            ..file
        };
        let mut b = r.to_bytes();
        b[4..8].copy_from_slice(&123_456u32.to_le_bytes());
        assert_eq!(
            PcapRecord::parse(&b, &us).unwrap().ts_ns % 1_000_000_000,
            123_456_000
        );
        let huge = PcapRecord {
            incl_len: 1 << 20,
            ..r
        };
        assert_eq!(
            PcapRecord::parse(&huge.to_bytes(), &file),
            Err(ParseError::Malformed)
        );
    }

    #[test]
    fn synthesised_headers_parse_as_the_datagram() {
        let mut frame = [0u8; UDP_HEADERS_LEN + 5];
        let mut h = [0u8; UDP_HEADERS_LEN];
        emit_udp_headers(&mut h, ([127, 0, 0, 1], 4000), ([127, 0, 0, 2], 5000), 5, 7).unwrap();
        frame[..UDP_HEADERS_LEN].copy_from_slice(&h);
        frame[UDP_HEADERS_LEN..].copy_from_slice(b"hello");
        let info = parse_frame(&frame).unwrap();
        let ip = info.ipv4.unwrap();
        let udp = info.udp.unwrap();
        assert_eq!((ip.src, ip.dst), ([127, 0, 0, 1], [127, 0, 0, 2]));
        assert_eq!(
            (udp.src_port, udp.dst_port, udp.payload_len),
            (4000, 5000, 5)
        );
        assert!(info.verify_checksums(&frame).is_ok());
        assert_eq!(
            emit_udp_headers(&mut h, ([0; 4], 0), ([0; 4], 0), 65_508, 0),
            Err(ParseError::Malformed)
        );
    }
}
