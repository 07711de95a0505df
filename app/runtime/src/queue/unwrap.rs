//! What the consumer loop does with each burst before any stage sees it: finds each
//! packet's application payload (the UDP payload or eCPRI message of a frame, the headers
//! of a header-data split, the gathered segments of a split into host memory), its receive
//! time and where its bytes lie, builds one [`Packet`] and hands it down the chain.

use crate::pacer::wall_clock_ns;
use crate::stages::{Notes, Packet, Stage};
use rtdaq_core::traits::{RxBurst, Segment};
use rtdaq_core::TimestampSource;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// The receive-time sources a queue's packets had, one bit each: bit `n` for
/// [`TimestampSource`] number `n` (hardware, kernel, poll), bit [`TsSeen::CONSUMER`] for a
/// packet without one, stamped by the consumer when it took the burst.
pub struct TsSeen;

impl TsSeen {
    /// The bit of packets the consumer stamped.
    pub const CONSUMER: u8 = 1 << 7;

    /// The sources in `bits`, by name (`hardware`, `kernel`, `poll`, `consumer`).
    pub fn names(bits: u8) -> Vec<String> {
        let mut v: Vec<String> = TimestampSource::ALL
            .iter()
            .filter(|s| **s != TimestampSource::None && bits & (1 << (**s as u8)) != 0)
            .map(|s| s.as_str().to_string())
            .collect();
        if bits & Self::CONSUMER != 0 {
            v.push("consumer".into());
        }
        v
    }
}

/// How the consumer finds the payload in each packet.
pub(crate) struct Unwrap {
    /// The engine delivers whole Ethernet frames (`Engine::FRAMES`): the payload is the UDP
    /// payload inside.
    pub frames: bool,
    /// Where the segments of a multi-segment packet (header-data split into host memory)
    /// are gathered before the stages see it: a copy, sized for the largest frame (64 KiB).
    /// Allocated before the hot path.
    pub gather: Box<[u8]>,
    /// Where the receive times came from so far ([`TsSeen`]), and the queue's shared copy.
    ts_seen: u8,
    ts_out: Option<&'static AtomicU8>,
}

impl Unwrap {
    /// For an engine that delivers payloads (`frames = false`) or whole frames.
    pub(crate) fn new(frames: bool) -> Self {
        Unwrap {
            frames,
            gather: vec![0u8; if frames { 1 << 16 } else { 0 }].into_boxed_slice(),
            ts_seen: 0,
            ts_out: None,
        }
    }

    /// Publishes the receive-time sources it sees into `out` (the queue's stats).
    pub(crate) fn with_ts_out(mut self, out: &'static AtomicU8) -> Self {
        self.ts_out = Some(out);
        self
    }
}

/// The application payload of `frame`: the UDP payload of an IPv4/UDP frame, the eCPRI
/// message of an eCPRI-over-Ethernet frame (EtherType `0xAEFE`: the bytes after the
/// Ethernet/VLAN header, padding included), else an empty slice (which the validator counts
/// as malformed). Never allocates.
pub(crate) fn app_payload(frame: &[u8]) -> &[u8] {
    use rtdaq_core::wire::FrameInfo;
    // Untagged IPv4/UDP without options, the commonest frame: no full parse.
    if let Some(p) = rtdaq_core::wire::plain_udp_payload(frame) {
        return p;
    }
    match rtdaq_core::wire::parse_frame(frame) {
        Ok(FrameInfo { udp: Some(u), .. }) => {
            let off = usize::from(u.payload_offset);
            frame
                .get(off..off + usize::from(u.payload_len))
                .unwrap_or_default()
        }
        Ok(FrameInfo { ecpri: Some(e), .. }) if !e.over_udp => {
            frame.get(usize::from(e.offset)..).unwrap_or_default()
        }
        _ => &[],
    }
}

/// [`app_payload`] of the first bytes of a frame whose rest lies in GPU memory (header-data
/// split): the payload bytes inside `head` and the whole payload's length (from the UDP
/// header); `(&[], 0)` when `head` holds no IPv4/UDP headers.
pub(crate) fn app_payload_head(head: &[u8]) -> (&[u8], usize) {
    use rtdaq_core::wire::{parse_frame_head, FrameInfo, ParseOptions};
    match parse_frame_head(head, &ParseOptions::DEFAULT) {
        Ok(FrameInfo { udp: Some(u), .. }) => {
            let off = usize::from(u.payload_offset);
            (
                head.get(off..).unwrap_or_default(),
                usize::from(u.payload_len),
            )
        }
        _ => (&[], 0),
    }
}

/// Hands every packet of `burst` (in ring slot `slot`) to the chain `s`, then ends the
/// burst. `reads`: the chain reads packets ([`Stage::reads_packets`]); when it does not,
/// each packet is counted from its descriptor and its data is never touched (a raw engine's
/// frame is not even parsed). `now_ns`: the monotonic time for [`Stage::end_burst`]
/// (0 when the chain does not want it).
///
/// A packet without a receive timestamp (`engine.socket.rx_timestamps = "off"`) gets the
/// consumer's clock, read once per burst. Never allocates; the burst keeps its buffers
/// (the loop clears it when it releases the slot).
#[inline]
pub(crate) fn feed_burst<B: RxBurst, S: Stage>(
    burst: &B,
    s: &mut S,
    u: &mut Unwrap,
    slot: u64,
    reads: bool,
    now_ns: impl Fn() -> u64,
) {
    if !reads {
        for i in 0..burst.len() {
            s.on_count(u64::from(burst.meta(i).len), burst.head_in_device(i));
        }
        s.end_burst(now_ns());
        return;
    }
    let mut wall = 0;
    let mut seen = u.ts_seen;
    for i in 0..burst.len() {
        let meta = burst.meta(i);
        let rx_ns = if meta.rx_timestamp_ns != 0 {
            seen |= 1 << meta.ts_source as u8;
            meta.rx_timestamp_ns
        } else {
            seen |= TsSeen::CONSUMER;
            if wall == 0 {
                wall = wall_clock_ns();
            }
            wall
        };
        let mut notes = Notes::default();
        let p = packet(burst, i, u, slot, rx_ns);
        s.on_packet(&p, &mut notes);
    }
    if seen != u.ts_seen {
        u.ts_seen = seen;
        if let Some(out) = u.ts_out {
            out.store(seen, Relaxed);
        }
    }
    s.end_burst(now_ns());
}

/// Packet `i` of `burst` as the stages see it.
#[inline]
fn packet<'a, B: RxBurst>(
    burst: &'a B,
    i: usize,
    u: &'a mut Unwrap,
    slot: u64,
    rx_ns: u64,
) -> Packet<'a> {
    let meta = burst.meta(i);
    let p = |frame, payload, tail, data| Packet {
        frame,
        payload,
        meta,
        rx_ns,
        tail,
        readable: true,
        data,
        slot,
    };
    let first = match burst.segment(i, 0) {
        Segment::Host(first) => first,
        // GPU memory (a NIC wrote it): the CPU reads none of it.
        data @ Segment::Device { .. } => {
            return Packet {
                readable: false,
                ..p(None, &[], 0, data)
            }
        }
    };
    if !u.frames {
        return p(None, first, 0, Segment::Host(first));
    }
    if burst.segments(i) == 1 {
        return p(Some(first), app_payload(first), 0, Segment::Host(first));
    }
    if let data @ Segment::Device { .. } = burst.segment(i, 1) {
        // Header-data split into GPU memory: the CPU reads the headers only; a device stage
        // batches the data segment.
        let (payload, len) = app_payload_head(first);
        let payload = &payload[..payload.len().min(len)];
        return p(Some(first), payload, len - payload.len(), data);
    }
    // Header-data split into host memory: gather the segments, then the whole frame.
    let mut len = 0;
    for s in 0..burst.segments(i) {
        if let Segment::Host(b) = burst.segment(i, s) {
            let n = b.len().min(u.gather.len() - len);
            u.gather[len..len + n].copy_from_slice(&b[..n]);
            len += n;
        }
    }
    let frame = &u.gather[..len];
    p(Some(frame), app_payload(frame), 0, Segment::Host(frame))
}

#[cfg(test)]
mod tests {
    use super::{feed_burst, Unwrap};
    use crate::queue::stats::QueueStats;
    use crate::stages::validate::Validate;
    use crate::stages::Stage;
    use crate::validator::{Validator, ValidatorStats};
    use rtdaq_config::model::Validation;
    use rtdaq_core::traits::{RxBurst, Segment};
    use rtdaq_core::PacketMeta;

    /// Frames whose descriptors say 1000 B (GPU memory for every third) but whose host
    /// segments hold no byte: what the consumer counts shows whether it read the frames.
    struct Descriptors(usize);

    impl RxBurst for Descriptors {
        fn len(&self) -> usize {
            self.0
        }
        fn segments(&self, _pkt: usize) -> usize {
            1
        }
        fn segment(&self, pkt: usize, _seg: usize) -> Segment<'_> {
            if pkt % 3 == 2 {
                Segment::Device {
                    ptr: 0x1000,
                    len: 1000,
                }
            } else {
                Segment::Host(&[])
            }
        }
        fn meta(&self, _pkt: usize) -> PacketMeta {
            PacketMeta {
                len: 1000,
                ..PacketMeta::default()
            }
        }
        fn clear(&mut self) {
            self.0 = 0;
        }
    }

    fn consumed(mode: Validation) -> (bool, ValidatorStats) {
        let stats: &'static QueueStats = Box::leak(Box::new(QueueStats::new_for_tests()));
        let mut v = Validate::new(Validator::with_mode(mode), stats);
        let reads = v.reads_packets();
        let mut u = Unwrap::new(true);
        feed_burst(&Descriptors(9), &mut v, &mut u, 0, reads, || 0);
        (reads, v.validator.finish())
    }

    /// `validate = "count"` with no recorder counts every frame from its descriptor (its
    /// length, GPU memory apart) and parses none; any other mode reads each frame (here:
    /// finds no IPv4/UDP payload in it and calls it malformed).
    #[test]
    fn count_mode_counts_descriptors_and_reads_no_frame() {
        let (reads, s) = consumed(Validation::Count);
        assert!(!reads);
        assert_eq!((s.received, s.bytes, s.in_gpu_memory), (9, 9000, 3));
        assert_eq!(s.malformed, 0);
        let (reads, s) = consumed(Validation::Sequence);
        assert!(reads);
        assert_eq!((s.received, s.in_gpu_memory, s.malformed), (9, 3, 6));
        assert_eq!(
            s.bytes, 3000,
            "host frames: payload bytes (none found), GPU: length"
        );
    }
}
