//! pcap record scanning: where each record's frame and UDP payload lie in the file.
//!
//! Python memory-maps the file; this walks the record headers once (in Rust, since a
//! Python loop over millions of 16-byte headers is slow) and returns a table numpy reads
//! as a structured array (`rtdaq.PCAP_ROW`), one 32-byte little-endian row per record:
//!
//! | bytes | field | what |
//! |---|---|---|
//! | 0..8 | `offset` | file offset of the frame (after the record header) |
//! | 8..16 | `time_ns` | the record's time in ns since the epoch |
//! | 16..20 | `caplen` | captured bytes |
//! | 20..24 | `wirelen` | bytes on the wire |
//! | 24..28 | `payload` | offset of the UDP payload in the frame; [`NO_PAYLOAD`] for a frame that is not a whole, unfragmented UDP datagram |
//! | 28..32 | `payload_len` | bytes of that payload present in the capture |

use crate::error::Error;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::io::{BufReader, Read, Seek, SeekFrom};

/// Bytes of one row of the table.
pub const ROW_BYTES: usize = 32;
/// `payload` of a frame without a UDP payload.
pub const NO_PAYLOAD: u32 = u32::MAX;
/// Bytes of the pcap file header.
const FILE_HEADER: u64 = 24;
/// Bytes of a frame read to find its UDP payload: the longest link header (Ethernet with
/// two VLAN tags), the longest IP header (IPv4 with 40 bytes of options), UDP.
const PEEK: usize = 14 + 8 + 60 + 8;

/// The pcap file header's facts.
#[derive(Debug, Clone, Copy)]
struct FileHeader {
    big_endian: bool,
    nanosecond: bool,
    snaplen: u32,
    linktype: u32,
}

impl FileHeader {
    fn parse(b: &[u8; 24], path: &str) -> Result<FileHeader, Error> {
        let (big_endian, nanosecond) = match b[..4] {
            [0xd4, 0xc3, 0xb2, 0xa1] => (false, false),
            [0x4d, 0x3c, 0xb2, 0xa1] => (false, true),
            [0xa1, 0xb2, 0xc3, 0xd4] => (true, false),
            [0xa1, 0xb2, 0x3c, 0x4d] => (true, true),
            [0x0a, 0x0d, 0x0d, 0x0a] => {
                return Err(Error::Format {
                    path: path.into(),
                    why: "a pcapng file: convert it with `editcap -F pcap IN OUT`".into(),
                })
            }
            _ => {
                return Err(Error::Format {
                    path: path.into(),
                    why: format!("not a pcap file (magic {:02x?})", &b[..4]),
                })
            }
        };
        let h = FileHeader {
            big_endian,
            nanosecond,
            snaplen: 0,
            linktype: 0,
        };
        Ok(FileHeader {
            snaplen: h.u32(&b[16..20]),
            linktype: h.u32(&b[20..24]) & 0x0fff_ffff,
            ..h
        })
    }

    fn u32(&self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        if self.big_endian {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    }
}

/// Where the UDP payload of `frame` (link type `linktype`) starts, and its bytes in the
/// capture; `None` for anything but a whole, unfragmented UDP datagram over IPv4 or IPv6.
pub fn udp_payload(linktype: u32, frame: &[u8], caplen: usize) -> Option<(u32, u32)> {
    let be16 = |o: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*frame.get(o)?, *frame.get(o + 1)?]))
    };
    let (mut ethertype, mut ip) = match linktype {
        1 => (be16(12)?, 14),   // Ethernet
        113 => (be16(14)?, 16), // Linux cooked capture (tcpdump -i any)
        276 => (be16(0)?, 20),  // Linux cooked capture v2
        101 | 12 | 14 => match frame.first()? >> 4 {
            4 => (0x0800, 0), // raw IP
            6 => (0x86dd, 0),
            _ => return None,
        },
        228 => (0x0800, 0), // raw IPv4
        229 => (0x86dd, 0), // raw IPv6
        _ => return None,
    };
    for _ in 0..2 {
        if linktype == 1 && matches!(ethertype, 0x8100 | 0x88a8) {
            ethertype = be16(ip + 2)?;
            ip += 4;
        }
    }
    let udp = match ethertype {
        0x0800 => {
            let vihl = *frame.get(ip)?;
            let frag = be16(ip + 6)?;
            if vihl >> 4 != 4 || *frame.get(ip + 9)? != 17 || frag & 0x3fff != 0 {
                return None;
            }
            ip + usize::from(vihl & 0x0f) * 4
        }
        0x86dd if *frame.get(ip + 6)? == 17 => ip + 40,
        _ => return None,
    };
    let udp_len = usize::from(be16(udp + 4)?);
    let start = udp + 8;
    if udp_len < 8 || start > caplen {
        return None;
    }
    let len = (udp_len - 8).min(caplen - start);
    Some((start as u32, len as u32))
}

/// The table of a pcap file's complete records from byte `start`.
struct Scan {
    header: FileHeader,
    rows: Vec<u8>,
    records: u64,
    end: u64,
}

fn scan(path: &str, start: u64, max_records: u64) -> Result<Scan, Error> {
    let io = |source| Error::Io {
        path: path.into(),
        source,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    let mut r = BufReader::with_capacity(1 << 20, f);
    let mut fh = [0u8; 24];
    r.read_exact(&mut fh).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => Error::Format {
            path: path.into(),
            why: "shorter than a pcap file header (24 bytes): is it still being created?".into(),
        },
        _ => io(e),
    })?;
    let header = FileHeader::parse(&fh, path)?;
    let mut off = start.max(FILE_HEADER);
    r.seek(SeekFrom::Start(off)).map_err(io)?;
    let (mut rows, mut records) = (Vec::new(), 0u64);
    let mut peek = [0u8; PEEK];
    while records < max_records && off + 16 <= len {
        let mut rh = [0u8; 16];
        r.read_exact(&mut rh).map_err(io)?;
        let caplen = header.u32(&rh[8..12]);
        if off + 16 + u64::from(caplen) > len {
            break; // the writer has not written this record whole yet
        }
        let (secs, frac) = (header.u32(&rh[0..4]), header.u32(&rh[4..8]));
        let ns = u64::from(secs) * 1_000_000_000
            + u64::from(frac) * if header.nanosecond { 1 } else { 1000 };
        let n = (caplen as usize).min(PEEK);
        r.read_exact(&mut peek[..n]).map_err(io)?;
        r.seek_relative(i64::from(caplen) - n as i64).map_err(io)?;
        let (payload, payload_len) =
            udp_payload(header.linktype, &peek[..n], caplen as usize).unwrap_or((NO_PAYLOAD, 0));
        for v in [off + 16, ns] {
            rows.extend_from_slice(&v.to_le_bytes());
        }
        for v in [caplen, header.u32(&rh[12..16]), payload, payload_len] {
            rows.extend_from_slice(&v.to_le_bytes());
        }
        off += 16 + u64::from(caplen);
        records += 1;
    }
    Ok(Scan {
        header,
        rows,
        records,
        end: off,
    })
}

/// scan_pcap(path: str, start: int = 0, max_records: int | None = None) -> dict
///
/// Walks the complete records of the pcap file `path` from byte `start` (0: the first
/// record; else the `end` of an earlier scan) and returns `rows` (bytes: 32 per record,
/// see `rtdaq.PCAP_ROW`), `records`, `end` (the byte after the last complete record: where
/// to resume when the file grows) and the file header's `linktype`, `snaplen`,
/// `nanosecond`, `big_endian`. A record not yet written whole ends the scan.
#[pyfunction]
#[pyo3(signature = (path, start = 0, max_records = None))]
pub fn scan_pcap<'py>(
    py: Python<'py>,
    path: &str,
    start: u64,
    max_records: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let s = py.detach(|| scan(path, start, max_records.unwrap_or(u64::MAX)))?;
    let d = PyDict::new(py);
    d.set_item("rows", PyBytes::new(py, &s.rows))?;
    d.set_item("records", s.records)?;
    d.set_item("end", s.end)?;
    d.set_item("linktype", s.header.linktype)?;
    d.set_item("snaplen", s.header.snaplen)?;
    d.set_item("nanosecond", s.header.nanosecond)?;
    d.set_item("big_endian", s.header.big_endian)?;
    Ok(d)
}
