//! Sinks shared by the RX queues of one interface (`shared = true`): one file stream holding
//! every queue's packets in the order their consumers took them.
//!
//! Several consumer threads cannot append to one buffer ring without waiting for each other,
//! so each queue gets a **tap** instead ([`Tap`], hot path): a ring of buffers of its own
//! (single producer, single consumer, like a sink's) into which the consumer copies each
//! packet behind a small frame header ([`HDR`] bytes: the take time, the receive time, the
//! source address, where the payload lies). The tap never waits: a packet that finds no free
//! buffer is counted (`record_full`, lost). A **merger** thread ([`Merger`], cold side) takes
//! the taps' records in take-time order and feeds them, as packets, to one ordinary
//! [`RecordSink`], whose writer thread writes the files: pcap, raw or DADA, rotation and
//! index as for a queue's own sink.
//!
//! The order is exact, not a guess: a tap's records are in take order, and each tap
//! publishes a **watermark** (a monotonic time before which it has handed every record to
//! the merger: set when its buffer is empty, at the end of each burst and while idle; a
//! partly filled buffer goes to the merger after [`TAP_FLUSH_NS`]). The merger writes the
//! oldest record of all taps only when no tap without pending records has a watermark below
//! it. The take time is the consumer's monotonic clock (`pacer::now_ns`); the pcap
//! timestamps stay each packet's receive time.

use super::common::SinkCounters;
use super::sink::{RecBuf, RecordSink};
use crate::stages::Packet;
use rtdaq_core::slot_ring::{SlotConsumer, SlotProducer};
use rtdaq_core::PacketMeta;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

/// Bytes of a tap record's frame header.
pub const HDR: usize = 40;

/// A tap hands a partly filled buffer to the merger after this long (2 ms): the merger
/// waits at most this long for a queue that has records but no full buffer.
pub const TAP_FLUSH_NS: u64 = 2_000_000;

/// How long the merger waits for the sink's writer to free a buffer before it stops waiting
/// (5 s: far beyond any write of a healthy disk; a writer that died frees none).
pub const STUCK_NS: u64 = 5_000_000_000;

/// Bytes of a tap's buffer (slot): 256 KiB, or the next power of two holding the queue's
/// largest packet (`largest`, the sum of its regions' `buf_size`) behind its header, at
/// most the recorder's `buffer_mib` (a record larger than a slot is counted `record_full`).
pub fn slot_bytes(largest: usize, buffer_bytes: usize) -> usize {
    (largest + HDR)
        .next_power_of_two()
        .max(256 << 10)
        .min(buffer_bytes)
}

/// Slots of a tap holding `total` bytes (`buffers` x `buffer_mib`): a power of two, at
/// least 2. A tap hands a partly filled slot to the merger every [`TAP_FLUSH_NS`], so at a
/// low rate the number of slots, not the bytes, bounds how long the merger may lag: 128
/// slots (the default 32 MiB) are 256 ms of hand-overs.
pub fn slot_count(total: usize, slot: usize) -> usize {
    let n = (total / slot.max(1)).max(2);
    if n.is_power_of_two() {
        n
    } else {
        n.next_power_of_two() / 2
    }
}

/// What a tap shares with the merger.
#[derive(Debug, Default)]
pub struct TapCounters {
    /// Every record taken before this monotonic time (ns) is in a committed buffer.
    pub watermark_ns: AtomicU64,
    /// The tap's consumer has committed its last buffer.
    pub done: AtomicBool,
}

/// One queue's half of a shared sink (see the [module docs](self)).
pub struct Tap {
    prod: SlotProducer<'static, RecBuf>,
    tap: &'static TapCounters,
    /// The shared sink's counters (`dropped_tap`).
    counters: &'static SinkCounters,
    cap: usize,
    frames: bool,
    stale: bool,
    buf_first_ns: u64,
    pending_full: u64,
}

impl Tap {
    /// The tap of one queue over `prod`.
    pub fn new(
        prod: SlotProducer<'static, RecBuf>,
        tap: &'static TapCounters,
        counters: &'static SinkCounters,
        cap: usize,
        frames: bool,
    ) -> Self {
        Tap {
            prod,
            tap,
            counters,
            cap,
            frames,
            stale: true,
            buf_first_ns: 0,
            pending_full: 0,
        }
    }

    /// Hands the buffer being filled to the merger (when it holds anything).
    #[inline]
    fn commit(&mut self) {
        if self.stale {
            return;
        }
        if let Some(b) = self.prod.slot() {
            if b.fill > 0 {
                let committed = self.prod.commit();
                debug_assert!(committed.is_ok());
                self.stale = true;
                self.buf_first_ns = 0;
            }
        }
    }

    /// Copies one packet into the tap. Never allocates, logs or blocks.
    #[inline]
    pub fn on_packet(&mut self, p: &Packet<'_>) {
        let (bytes, frame) = match (self.frames, p.frame) {
            (true, Some(f)) => (f, true),
            _ => (p.payload, false),
        };
        let total = HDR + bytes.len();
        if total > self.cap {
            self.pending_full += 1;
            return;
        }
        let take_ns = crate::pacer::now_ns();
        let (stale, cap) = (self.stale, self.cap);
        let fill = match self.prod.slot() {
            Some(b) if stale => {
                b.reset(0);
                0
            }
            Some(b) => b.fill,
            None => {
                self.pending_full += 1;
                return;
            }
        };
        self.stale = false;
        if cap - fill < total {
            self.commit();
            match self.prod.slot() {
                Some(b) => b.reset(0),
                None => {
                    self.pending_full += 1;
                    return;
                }
            }
            self.stale = false;
        }
        let h = TapHeader {
            len: bytes.len() as u32,
            // Where the payload lies in the frame (0 for payload records).
            payload_off: if frame {
                (p.payload.as_ptr() as usize).saturating_sub(bytes.as_ptr() as usize) as u32
            } else {
                0
            },
            payload_len: p.payload.len() as u32,
            src_ip: p.meta.src_ip,
            src_port: p.meta.src_port,
            frame,
            meta_len: p.meta.len,
            take_ns,
            rx_ns: p.rx_ns,
        }
        .emit();
        let Some(b) = self.prod.slot() else { return };
        let at = b.fill;
        let space = b.space();
        space[at..at + HDR].copy_from_slice(&h);
        space[at + HDR..at + total].copy_from_slice(bytes);
        b.fill += total;
        b.packets += 1;
        if self.buf_first_ns == 0 {
            self.buf_first_ns = take_ns;
        }
    }

    /// After each burst and while idle (`now_ns`: monotonic, later than every packet taken
    /// so far): publishes the drops, hands over a buffer older than [`TAP_FLUSH_NS`], and
    /// when nothing is left uncommitted raises the watermark to `now_ns`.
    #[inline]
    pub fn tick(&mut self, now_ns: u64) {
        if self.pending_full > 0 {
            self.counters
                .dropped_tap
                .fetch_add(std::mem::take(&mut self.pending_full), Relaxed);
        }
        if self.buf_first_ns != 0 && now_ns.saturating_sub(self.buf_first_ns) >= TAP_FLUSH_NS {
            self.commit();
        }
        let empty = self.stale || self.prod.slot().is_none_or(|b| b.fill == 0);
        if empty {
            self.tap.watermark_ns.store(now_ns, Release);
        }
    }

    /// End of the run: the last buffer goes to the merger, which is told that nothing more
    /// comes from this tap.
    pub fn finish(&mut self) {
        self.tick(crate::pacer::now_ns());
        self.commit();
        self.tap.done.store(true, Release);
    }

    /// What the tap shares with the merger.
    pub fn tap_counters(&self) -> &'static TapCounters {
        self.tap
    }
}

/// The frame header of one tap record (little-endian, [`HDR`] bytes): the one place its
/// layout is written down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TapHeader {
    /// Bytes after the header: the frame (raw engines) or the payload.
    len: u32,
    /// Offset and length of the UDP payload inside those bytes.
    payload_off: u32,
    payload_len: u32,
    src_ip: [u8; 4],
    src_port: u16,
    /// The bytes are a whole frame.
    frame: bool,
    /// `PacketMeta::len`.
    meta_len: u32,
    /// When the consumer took the packet (monotonic ns): the merge order.
    take_ns: u64,
    /// Receive time (ns since the epoch): the record's timestamp.
    rx_ns: u64,
}

impl TapHeader {
    fn emit(&self) -> [u8; HDR] {
        let mut h = [0u8; HDR];
        h[0..4].copy_from_slice(&self.len.to_le_bytes());
        h[4..8].copy_from_slice(&self.payload_off.to_le_bytes());
        h[8..12].copy_from_slice(&self.payload_len.to_le_bytes());
        h[12..16].copy_from_slice(&self.src_ip);
        h[16..18].copy_from_slice(&self.src_port.to_le_bytes());
        h[18] = u8::from(self.frame);
        h[20..24].copy_from_slice(&self.meta_len.to_le_bytes());
        h[24..32].copy_from_slice(&self.take_ns.to_le_bytes());
        h[32..40].copy_from_slice(&self.rx_ns.to_le_bytes());
        h
    }

    /// The take time of the header at the start of `h` (what the merge compares).
    fn take_ns_of(h: &[u8]) -> u64 {
        let mut t = [0u8; 8];
        t.copy_from_slice(&h[24..32]);
        u64::from_le_bytes(t)
    }

    /// The header at the start of `h` (at least [`HDR`] bytes: the merger reads only
    /// records a tap wrote whole).
    fn parse(h: &[u8]) -> Self {
        let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let u64_at = |i: usize| u64::from(u32_at(i)) | u64::from(u32_at(i + 4)) << 32;
        TapHeader {
            len: u32_at(0),
            payload_off: u32_at(4),
            payload_len: u32_at(8),
            src_ip: [h[12], h[13], h[14], h[15]],
            src_port: u16::from_le_bytes([h[16], h[17]]),
            frame: h[18] == 1,
            meta_len: u32_at(20),
            take_ns: Self::take_ns_of(h),
            rx_ns: u64_at(32),
        }
    }

    /// The packet view of the record whose header this is; `bytes` follow the header.
    fn view<'a>(&self, bytes: &'a [u8]) -> Packet<'a> {
        let (off, plen) = (self.payload_off as usize, self.payload_len as usize);
        Packet::host(
            self.frame.then_some(bytes),
            if self.frame {
                bytes.get(off..off + plen).unwrap_or_default()
            } else {
                bytes
            },
            PacketMeta {
                len: self.meta_len,
                src_ip: self.src_ip,
                src_port: self.src_port,
                ..PacketMeta::default()
            },
            self.rx_ns,
        )
    }
}

/// The header of the record at `at` of `b`.
fn header_at(b: &RecBuf, at: usize) -> TapHeader {
    TapHeader::parse(&b.data()[at..at + HDR])
}

struct TapEnd {
    cons: SlotConsumer<'static, RecBuf>,
    tap: &'static TapCounters,
    at: usize,
}

impl TapEnd {
    /// The take time of the tap's next record, releasing the buffers read to their end.
    fn front_take_ns(&mut self) -> Option<u64> {
        while self.cons.front().is_some_and(|b| self.at >= b.fill) {
            let released = self.cons.release();
            debug_assert!(released.is_ok());
            self.at = 0;
        }
        self.cons
            .front()
            .map(|b| TapHeader::take_ns_of(&b.data()[self.at..self.at + HDR]))
    }
}

/// The merger of one shared sink (see the [module docs](self)): runs on its own thread.
pub struct Merger {
    taps: Vec<TapEnd>,
    sink: RecordSink,
    /// The writer freed nothing for [`STUCK_NS`]: the merger waits no more.
    stuck: bool,
}

/// Raises the shared sink's `producer_done` however the merger ends (a panic included), so
/// its writer closes the files and ends.
struct Done(&'static SinkCounters);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.producer_done.store(true, Release);
    }
}

impl Merger {
    /// A merger of `taps` (each tap's consumer end and shared counters) into `sink`.
    pub fn new(
        taps: Vec<(SlotConsumer<'static, RecBuf>, &'static TapCounters)>,
        sink: RecordSink,
    ) -> Self {
        Merger {
            taps: taps
                .into_iter()
                .map(|(cons, tap)| TapEnd { cons, tap, at: 0 })
                .collect(),
            sink,
            stuck: false,
        }
    }

    /// Merges until every tap is done and drained, then finishes the sink.
    pub fn run(mut self) {
        let counters = self.sink.counters();
        let _done = Done(counters);
        let mut turns = crate::stall::StallClock::start(
            &counters.merger_stall,
            crate::pacer::now_ns(),
            crate::stall::ThreadKind::Writer,
        );
        loop {
            turns.tick(crate::pacer::now_ns());
            match self.next() {
                Next::Run(i, bound) => {
                    self.emit_run(i, bound);
                    // Counters and the sink's flush timer, once per run.
                    self.sink.tick(crate::pacer::now_ns());
                }
                Next::Wait => {
                    self.sink.tick(crate::pacer::now_ns());
                    std::thread::sleep(Duration::from_micros(100));
                }
                Next::Done => break,
            }
        }
        self.sink.finish();
    }

    /// Which tap's records go next, if one may, and up to which take time: the oldest
    /// front record's tap, up to the next-oldest front record of another tap or the lowest
    /// watermark of the taps without records, whichever is lower (a k-way merge by runs:
    /// the taps are scanned once per run, not once per record).
    fn next(&mut self) -> Next {
        let mut best: Option<(usize, u64)> = None;
        let mut second = u64::MAX;
        let mut limit = u64::MAX;
        let mut all_done = true;
        for (i, t) in self.taps.iter_mut().enumerate() {
            // Before the ring: a watermark (or done) seen here covers what the ring shows.
            let w = t.tap.watermark_ns.load(Acquire);
            let done = t.tap.done.load(Acquire);
            match t.front_take_ns() {
                Some(take_ns) => {
                    all_done = false;
                    match best {
                        Some((_, ns)) if take_ns >= ns => second = second.min(take_ns),
                        Some((_, ns)) => {
                            second = second.min(ns);
                            best = Some((i, take_ns));
                        }
                        None => best = Some((i, take_ns)),
                    }
                }
                None if done => {}
                None => {
                    all_done = false;
                    limit = limit.min(w);
                }
            }
        }
        match best {
            Some((i, ns)) if ns <= limit => Next::Run(i, limit.min(second)),
            _ if all_done => Next::Done,
            _ => Next::Wait,
        }
    }

    /// Writes tap `i`'s records into the sink while their take time is at most `bound` (the
    /// first one always: `next` chose it).
    fn emit_run(&mut self, i: usize, bound: u64) {
        self.emit(i);
        while self.taps[i].front_take_ns().is_some_and(|ns| ns <= bound) {
            self.emit(i);
        }
    }

    /// Writes tap `i`'s next record into the sink, waiting (this is the cold side) for the
    /// sink's writer to free a buffer when none is: only a tap may drop. A writer that frees
    /// nothing for [`STUCK_NS`] (it died) no longer holds the merger up: the record goes to
    /// the sink, which counts it as `record_full`.
    fn emit(&mut self, i: usize) {
        let t = &mut self.taps[i];
        let Some(b) = t.cons.front() else { return };
        let h = header_at(b, t.at);
        let len = h.len as usize;
        let since = crate::pacer::now_ns();
        while !self.stuck && !self.sink.has_room(len + 64) {
            let now = crate::pacer::now_ns();
            if now.saturating_sub(since) > STUCK_NS {
                log::error!(
                    "shared sink: its writer freed no buffer for {} s; the merger stops waiting and counts what does not fit as record_full",
                    STUCK_NS / 1_000_000_000
                );
                self.stuck = true;
                break;
            }
            self.sink.tick(now);
            std::thread::sleep(Duration::from_micros(100));
        }
        let v = h.view(&b.data()[t.at + HDR..t.at + HDR + len]);
        self.sink.on_packet(&v);
        t.at += HDR + len;
    }
}

enum Next {
    /// Tap `.0`'s records up to take time `.1`.
    Run(usize, u64),
    Wait,
    Done,
}

#[cfg(test)]
mod tests {
    use super::TapHeader;

    #[test]
    fn tap_header_round_trips() {
        let h = TapHeader {
            len: 1442,
            payload_off: 42,
            payload_len: 1400,
            src_ip: [169, 254, 1, 2],
            src_port: 4000,
            frame: true,
            meta_len: 1442,
            take_ns: 0x0102_0304_0506_0708,
            rx_ns: u64::MAX - 1,
        };
        assert_eq!(TapHeader::parse(&h.emit()), h);
        let frame: Vec<u8> = (0..1442u32).map(|i| i as u8).collect();
        let v = h.view(&frame);
        assert_eq!(v.frame.map(<[u8]>::len), Some(1442));
        assert_eq!(v.payload, &frame[42..]);
        assert_eq!(
            (v.meta.src_ip, v.meta.src_port, v.rx_ns),
            (h.src_ip, 4000, h.rx_ns)
        );
    }
}
