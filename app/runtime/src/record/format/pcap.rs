//! `pcap`: classic pcap with nanosecond timestamps, link type Ethernet. A raw engine's frames
//! are written as they came; the socket engine's datagrams behind IPv4/UDP headers rebuilt
//! from the real source (the engine's metadata) and the queue's address.

use super::api::{Format, Link, Out, Recorded};
use crate::stages::Packet;
use rtdaq_config::model::Recorder;
use rtdaq_core::wire::pcap::{
    emit_udp_headers, PcapFileHeader, PcapRecord, LINKTYPE_ETHERNET, UDP_HEADERS_LEN,
};

/// The `pcap` format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pcap {
    snaplen: usize,
    link: Link,
    /// IPv4 identification of the next rebuilt header.
    ident: u16,
}

impl Pcap {
    /// The format of `rec` for a queue at `link`.
    pub fn new(rec: &Recorder, link: Link) -> Self {
        Self::with(rec.snaplen as usize, link)
    }

    /// The format for packets of up to `snaplen` bytes kept, at `link` (a dump's history).
    pub fn with(snaplen: usize, link: Link) -> Self {
        Pcap {
            snaplen,
            link,
            ident: 0,
        }
    }
}

impl Format for Pcap {
    fn stream_header(&self) -> Vec<u8> {
        PcapFileHeader::new(self.snaplen as u32, LINKTYPE_ETHERNET)
            .to_bytes()
            .to_vec()
    }

    #[inline]
    fn record(&mut self, p: &Packet<'_>, out: &mut impl Out) -> Option<Recorded> {
        let (data, orig_len, synth) = match (self.link.frames, p.frame) {
            (true, Some(f)) => (f, f.len(), false),
            _ => (p.payload, p.payload.len() + UDP_HEADERS_LEN, true),
        };
        let incl = orig_len.min(self.snaplen);
        let total = PcapRecord::LEN + incl;
        if !out.admit(total, p.rx_ns) {
            return None;
        }
        let rec = PcapRecord {
            ts_ns: p.rx_ns,
            incl_len: incl as u32,
            orig_len: orig_len as u32,
        };
        out.put(&rec.to_bytes());
        if synth {
            let mut h = [0u8; UDP_HEADERS_LEN];
            let src = (p.meta.src_ip, p.meta.src_port);
            self.ident = self.ident.wrapping_add(1);
            // A datagram longer than 65507 bytes cannot arrive over UDP.
            let _ = emit_udp_headers(&mut h, src, self.link.dst, data.len(), self.ident);
            let n = incl.min(UDP_HEADERS_LEN);
            out.put(&h[..n]);
            out.put(&data[..incl - n]);
        } else {
            out.put(&data[..incl]);
        }
        Some(Recorded {
            total,
            data: data.len(),
        })
    }
}
