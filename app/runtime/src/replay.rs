//! Replay: the generator sends the packets of a pcap file (`[generator] replay`, or
//! `rtdaq run --replay FILE`) instead of generated ones.
//!
//! The file is read into memory before the run starts ([`load`]; link types Ethernet, raw
//! IPv4 and Linux cooked capture; pcap with micro- or nanosecond timestamps, either byte
//! order). The socket engine sends each packet's UDP payload to `generator.destination`;
//! raw engines send the Ethernet frames as recorded. A packet the engine cannot send is
//! refused at load time with its number (a frame for the socket engine that is not
//! IPv4/UDP is skipped and counted; a packet larger than the TX buffers is an error).
//!
//! Timing ([`ReplayTiming`]): as recorded (the gaps between the file's timestamps divided by
//! `replay_speed`), or at the generator's rate. Packets that carry an rtdaq sequence header
//! get the send time as their tx timestamp (raw frames only when their UDP checksum is 0,
//! which the timestamp would otherwise break), so latency stays meaningful; sequence
//! numbers and payloads are sent as recorded, and a replayed rtdaq recording validates at
//! the receiver like the original stream. Each loop (`replay_loops`) sends the same sequence
//! numbers again: the receiver counts the repeats as duplicates, and only the first loop's
//! packets count as generated.
//!
//! Reading the file on the cold path with the same `rtdaq_core::wire::pcap` code the
//! recorder writes with keeps one implementation of the format, cross-checked against
//! tcpdump, tshark and capinfos by the tests.

use crate::error::RuntimeError;
use crate::pacer::{now_ns, wall_clock_ns, Pacer};
use crate::threads::{cooperate, idle, GenTotals};
use rtdaq_config::model::ReplayTiming;
use rtdaq_core::traits::{TxBurst, TxQueue};
use rtdaq_core::wire::pcap::{
    PcapFileHeader, PcapRecord, LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_RAW,
};
use rtdaq_core::wire::{parse_frame, Ipv4Header, SeqHeader, UdpHeader, PROTO_UDP};
use rtdaq_platform::alloc_audit;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Acquire};
use std::time::Duration;

/// Largest file replay reads into memory.
pub const MAX_FILE_BYTES: u64 = 16 << 30;

/// One packet to send: where its bytes are, when it was recorded.
#[derive(Debug, Clone, Copy)]
struct Pkt {
    off: usize,
    len: u32,
    ts_ns: u64,
    /// Offset of the rtdaq tx timestamp inside the packet's bytes, when it may be rewritten.
    stamp_at: Option<u32>,
}

/// The packets of a pcap file, in memory.
#[derive(Debug)]
pub struct ReplayPackets {
    data: Vec<u8>,
    pkts: Vec<Pkt>,
    /// Packets of the file skipped: not IPv4/UDP (the socket engine sends UDP payloads).
    pub skipped_not_udp: u64,
    /// The file.
    pub path: String,
}

impl ReplayPackets {
    /// Packets to send per loop.
    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    /// True when the file has nothing to send.
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Bytes of packet `i`.
    fn bytes(&self, i: usize) -> &[u8] {
        let p = self.pkts[i];
        &self.data[p.off..p.off + p.len as usize]
    }
}

fn bad(path: &Path, why: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Replay(format!("{}: {why}", path.display()))
}

/// Where the IPv4 header starts in a packet of link type `linktype`.
fn l3_offset(linktype: u32, pkt: &[u8]) -> Option<usize> {
    match linktype {
        LINKTYPE_RAW => Some(0),
        LINKTYPE_LINUX_SLL => (pkt.get(14..16)? == [0x08, 0x00]).then_some(16),
        _ => None,
    }
}

/// The UDP payload range of an IPv4 packet starting at `l3` (no fragments).
fn udp_payload_at(pkt: &[u8], l3: usize) -> Option<(usize, usize)> {
    let ip = Ipv4Header::parse(pkt.get(l3..)?).ok()?;
    if ip.protocol != PROTO_UDP || ip.more_frags || ip.frag_offset != 0 {
        return None;
    }
    let l4 = l3 + usize::from(ip.header_len);
    let udp = UdpHeader::parse(pkt.get(l4..)?).ok()?;
    let start = l4 + UdpHeader::LEN;
    let len = usize::from(udp.length).checked_sub(UdpHeader::LEN)?;
    (start + len <= pkt.len()).then_some((start, len))
}

/// Reads `path`: every record becomes a packet to send. `frames`: the engine sends Ethernet
/// frames (else UDP payloads). `max_len`: the TX buffers' size.
pub fn load(path: &Path, frames: bool, max_len: usize) -> Result<ReplayPackets, RuntimeError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| bad(path, format!("cannot read the replay file: {e}")))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(bad(path, format!("{} bytes: replay reads the file into (locked) memory, at most {MAX_FILE_BYTES} bytes; cut it (editcap -c) and replay the parts", meta.len())));
    }
    let file =
        std::fs::read(path).map_err(|e| bad(path, format!("cannot read the replay file: {e}")))?;
    let hdr = PcapFileHeader::parse(&file).map_err(|e| {
        bad(
            path,
            format!("not a pcap file ({e}); pcapng files convert with `editcap -F pcap IN OUT`"),
        )
    })?;
    if frames && hdr.linktype != LINKTYPE_ETHERNET {
        return Err(bad(path, format!("link type {}: a raw engine sends Ethernet frames (link type 1); record the stream on an Ethernet interface", hdr.linktype)));
    }
    if !matches!(
        hdr.linktype,
        LINKTYPE_ETHERNET | LINKTYPE_RAW | LINKTYPE_LINUX_SLL
    ) {
        return Err(bad(
            path,
            format!(
                "link type {} is not Ethernet (1), raw IPv4 (101) or Linux cooked (113)",
                hdr.linktype
            ),
        ));
    }
    let mut pkts = Vec::new();
    let mut skipped = 0u64;
    let mut at = PcapFileHeader::LEN;
    let mut n = 0u64;
    while at < file.len() {
        n += 1;
        let rec = PcapRecord::parse(&file[at..], &hdr)
            .map_err(|e| bad(path, format!("record {n} at byte {at}: {e} header")))?;
        let start = at + PcapRecord::LEN;
        let end = start + rec.incl_len as usize;
        if end > file.len() {
            // A recording cut by a crash: its last record is incomplete.
            log::warn!(
                "{}: record {n} is truncated (the file ends inside it): replaying the {} complete records",
                path.display(),
                pkts.len()
            );
            break;
        }
        at = end;
        let pkt = &file[start..end];
        if rec.incl_len < rec.orig_len {
            return Err(bad(path, format!("record {n} was captured with a snap length ({} of {} bytes): replay needs whole packets (capture with -s 0)", rec.incl_len, rec.orig_len)));
        }
        let (off, len, stamp_at) = if frames {
            let stamp = parse_frame(pkt).ok().and_then(|f| f.udp).and_then(|u| {
                let po = usize::from(u.payload_offset);
                let zero_csum = pkt.get(po - 2..po) == Some(&[0, 0]);
                let payload = pkt.get(po..po + usize::from(u.payload_len))?;
                (zero_csum && SeqHeader::parse(payload).is_ok()).then_some((po + 16) as u32)
            });
            (start, pkt.len(), stamp)
        } else {
            let l3 = match hdr.linktype {
                LINKTYPE_ETHERNET => parse_frame(pkt)
                    .ok()
                    .and_then(|f| f.udp)
                    .map(|u| (usize::from(u.payload_offset), usize::from(u.payload_len))),
                lt => l3_offset(lt, pkt).and_then(|l3| udp_payload_at(pkt, l3)),
            };
            let Some((po, plen)) = l3 else {
                skipped += 1;
                continue;
            };
            let payload = &pkt[po..po + plen];
            let stamp = SeqHeader::parse(payload).is_ok().then_some(16);
            (start + po, plen, stamp)
        };
        if len > max_len {
            return Err(bad(path, format!("record {n} is {len} bytes, larger than the TX queue's buffers ({max_len} bytes: buf_size of its memory region); raise buf_size")));
        }
        pkts.push(Pkt {
            off,
            len: len as u32,
            ts_ns: rec.ts_ns,
            stamp_at,
        });
    }
    if pkts.is_empty() {
        return Err(bad(
            path,
            format!(
                "nothing to send: {n} records{}",
                if skipped > 0 {
                    format!(", {skipped} not IPv4/UDP")
                } else {
                    String::new()
                }
            ),
        ));
    }
    if skipped > 0 {
        log::warn!(
            "{}: {skipped} of {n} records are not IPv4/UDP and are not sent (the socket engine sends UDP payloads)",
            path.display()
        );
    }
    Ok(ReplayPackets {
        data: file,
        pkts,
        skipped_not_udp: skipped,
        path: path.display().to_string(),
    })
}

/// What a replaying generator does.
#[derive(Debug)]
pub(crate) struct ReplayPlan {
    pub packets: &'static ReplayPackets,
    pub timing: ReplayTiming,
    pub loops: u32,
    /// `Rate` timing: the generator's pacer.
    pub pacer: Pacer,
    pub batch: usize,
    pub until_ns: Option<u64>,
    pub start_ns: u64,
}

/// The TX thread of a replaying generator.
pub(crate) fn tx_replay<Q: TxQueue>(
    mut queue: Q,
    mut plan: ReplayPlan,
    stop: &AtomicBool,
    busy: bool,
    stall: &crate::stall::StallWatch,
) -> GenTotals {
    let r = plan.packets;
    let n = r.len();
    let mut burst = queue.new_burst();
    let mut totals = GenTotals::default();
    let mut sent_total = 0u64;
    let t0 = r.pkts[0].ts_ns;
    let speed = match plan.timing {
        ReplayTiming::Recorded { speed } => speed,
        ReplayTiming::Rate => 1.0,
    };
    let mut loop_start = plan.start_ns;
    let mut turns =
        crate::stall::StallClock::start(stall, now_ns(), crate::stall::ThreadKind::Generator);
    alloc_audit::arm_current_thread();
    'outer: for _ in 0..plan.loops {
        let mut i = 0;
        while i < n {
            if stop.load(Acquire) {
                break 'outer;
            }
            let now = now_ns();
            turns.tick(now);
            if plan.until_ns.is_some_and(|t| now >= t) {
                break 'outer;
            }
            let want = match plan.timing {
                ReplayTiming::Recorded { .. } => {
                    let due = |k: usize| {
                        loop_start + (r.pkts[k].ts_ns.saturating_sub(t0) as f64 / speed) as u64
                    };
                    let mut k = 0;
                    while k < plan.batch && i + k < n && due(i + k) <= now {
                        k += 1;
                    }
                    if k == 0 {
                        if busy {
                            std::hint::spin_loop();
                        } else {
                            let wait = due(i).saturating_sub(now);
                            std::thread::sleep(Duration::from_nanos(wait.clamp(50_000, 1_000_000)));
                        }
                        continue;
                    }
                    k
                }
                ReplayTiming::Rate => {
                    let k =
                        plan.pacer
                            .allowance(now, plan.batch.min(n - i), r.pkts[i].len as usize);
                    if k == 0 {
                        if busy {
                            std::hint::spin_loop();
                        } else {
                            let wait = plan.pacer.next_send_at().saturating_sub(now);
                            std::thread::sleep(Duration::from_nanos(wait.clamp(50_000, 1_000_000)));
                        }
                        continue;
                    }
                    k
                }
            };
            let got = queue.reserve(&mut burst, want);
            if got == 0 {
                idle(busy);
                continue;
            }
            let tx_ns = wall_clock_ns();
            let mut bytes = 0;
            for k in 0..got {
                let src = r.bytes(i + k);
                if let Some(buf) = burst.packet_mut(k) {
                    // Checked at load: every packet fits the TX buffers.
                    let len = src.len().min(buf.len());
                    buf[..len].copy_from_slice(&src[..len]);
                    if let Some(at) = r.pkts[i + k].stamp_at {
                        let at = at as usize;
                        if let Some(t) = buf.get_mut(at..at + 8) {
                            t.copy_from_slice(&tx_ns.to_be_bytes());
                        }
                    }
                    burst.set_len(k, len);
                    bytes += len;
                }
            }
            queue.send(&mut burst);
            cooperate(busy);
            if plan.timing == ReplayTiming::Rate {
                plan.pacer.sent(got, bytes);
            }
            i += got;
            sent_total += got as u64;
            totals.generated = sent_total.min(n as u64);
        }
        loop_start = now_ns();
    }
    alloc_audit::disarm_current_thread();
    totals
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtdaq_core::wire::pcap::{emit_udp_headers, UDP_HEADERS_LEN};

    fn pcap(linktype: u32, recs: &[(u64, Vec<u8>)]) -> Vec<u8> {
        let mut f = PcapFileHeader::new(262_144, linktype).to_bytes().to_vec();
        for (ts, b) in recs {
            let r = PcapRecord {
                ts_ns: *ts,
                incl_len: b.len() as u32,
                orig_len: b.len() as u32,
            };
            f.extend_from_slice(&r.to_bytes());
            f.extend_from_slice(b);
        }
        f
    }

    fn udp_frame(payload: &[u8]) -> Vec<u8> {
        let mut h = [0u8; UDP_HEADERS_LEN];
        emit_udp_headers(
            &mut h,
            ([127, 0, 0, 1], 1),
            ([127, 0, 0, 1], 2),
            payload.len(),
            0,
        )
        .unwrap();
        let mut v = h.to_vec();
        v.extend_from_slice(payload);
        v
    }

    /// A pcap file of the test's own (removed on drop).
    fn write(name: &str, bytes: &[u8]) -> tempfile::TempPath {
        let p = tempfile::Builder::new()
            .prefix(&format!("rtdaq-replay-{name}-"))
            .suffix(".pcap")
            .tempfile()
            .unwrap()
            .into_temp_path();
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn loads_payloads_or_frames_and_skips_what_the_socket_engine_cannot_send() {
        let mut gen = crate::validator::PayloadGen::new(3, 100);
        let mut p = vec![0u8; 100];
        gen.fill(&mut p, 5);
        let mut arp = udp_frame(b"x");
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let f = write(
            "mixed",
            &pcap(
                LINKTYPE_ETHERNET,
                &[(10, udp_frame(&p)), (20, arp), (30, udp_frame(b"plain"))],
            ),
        );
        let r = load(&f, false, 2048).unwrap();
        assert_eq!((r.len(), r.skipped_not_udp), (2, 1));
        assert_eq!(r.bytes(0), &p[..]);
        assert_eq!(r.pkts[0].stamp_at, Some(16));
        assert_eq!((r.bytes(1), r.pkts[1].stamp_at), (&b"plain"[..], None));
        let fr = load(&f, true, 2048).unwrap();
        assert_eq!(fr.len(), 3);
        assert_eq!(fr.pkts[0].stamp_at, Some(42 + 16));
        assert_eq!(fr.bytes(0).len(), 142);
        // too large for the TX buffers
        let e = load(&f, true, 100).unwrap_err().to_string();
        assert!(
            e.contains("record 1 is 142 bytes") && e.contains("buf_size"),
            "{e}"
        );
    }

    #[test]
    fn refuses_what_it_cannot_replay_with_the_reason() {
        let f = write(
            "ng",
            &[
                0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                0,
            ],
        );
        assert!(load(&f, false, 2048)
            .unwrap_err()
            .to_string()
            .contains("editcap -F pcap"));
        let raw = write(
            "raw",
            &pcap(LINKTYPE_RAW, &[(1, udp_frame(b"abc")[14..].to_vec())]),
        );
        assert!(load(&raw, true, 2048)
            .unwrap_err()
            .to_string()
            .contains("link type 101"));
        let r = load(&raw, false, 2048).unwrap();
        assert_eq!(r.bytes(0), b"abc");
        let empty = write("empty", &pcap(LINKTYPE_ETHERNET, &[]));
        assert!(load(&empty, false, 2048)
            .unwrap_err()
            .to_string()
            .contains("nothing to send"));
        // A file cut inside its last record replays the complete ones.
        let mut cut = pcap(
            LINKTYPE_ETHERNET,
            &[(1, udp_frame(b"one")), (2, udp_frame(b"two"))],
        );
        cut.truncate(cut.len() - 3);
        let c = write("cut", &cut);
        assert_eq!(load(&c, false, 2048).unwrap().len(), 1);
        assert!(load(Path::new("/nonexistent/x.pcap"), false, 2048)
            .unwrap_err()
            .to_string()
            .contains("cannot read"));
    }
}
