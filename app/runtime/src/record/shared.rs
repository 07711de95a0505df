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

use super::{RecBuf, RecordSink, SinkCounters};
use crate::pipeline::PacketView;
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
    pub fn on_packet(&mut self, p: &PacketView<'_>) {
        let (bytes, kind) = match (self.frames, p.frame) {
            (true, Some(f)) => (f, 1u8),
            _ => (p.payload, 0u8),
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
        // Where the payload lies in the frame (0 and its length for payload records).
        let off = match kind {
            1 => (p.payload.as_ptr() as usize).saturating_sub(bytes.as_ptr() as usize),
            _ => 0,
        };
        let mut h = [0u8; HDR];
        h[0..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
        h[4..8].copy_from_slice(&(off as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(p.payload.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&p.meta.src_ip);
        h[16..18].copy_from_slice(&p.meta.src_port.to_le_bytes());
        h[18] = kind;
        h[20..24].copy_from_slice(&p.meta.len.to_le_bytes());
        h[24..32].copy_from_slice(&take_ns.to_le_bytes());
        h[32..40].copy_from_slice(&p.rx_ns.to_le_bytes());
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

/// One record in a tap's buffer.
struct Rec {
    take_ns: u64,
    len: usize,
}

fn read_rec(b: &RecBuf, at: usize) -> Rec {
    let d = b.data();
    let u32_at = |i: usize| u32::from_le_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]);
    let mut t = [0u8; 8];
    t.copy_from_slice(&d[at + 24..at + 32]);
    Rec {
        take_ns: u64::from_le_bytes(t),
        len: u32_at(at) as usize,
    }
}

/// The packet view of the record at `at` of `b`.
fn view_of(b: &RecBuf, at: usize) -> PacketView<'_> {
    let d = b.data();
    let u32_at = |i: usize| u32::from_le_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]);
    let len = u32_at(at) as usize;
    let off = u32_at(at + 4) as usize;
    let plen = u32_at(at + 8) as usize;
    let bytes = &d[at + HDR..at + HDR + len];
    let frame = d[at + 18] == 1;
    let mut rx = [0u8; 8];
    rx.copy_from_slice(&d[at + 32..at + 40]);
    let meta = PacketMeta {
        len: u32_at(at + 20),
        src_ip: [d[at + 12], d[at + 13], d[at + 14], d[at + 15]],
        src_port: u16::from_le_bytes([d[at + 16], d[at + 17]]),
        ..PacketMeta::default()
    };
    PacketView {
        frame: frame.then_some(bytes),
        payload: if frame {
            bytes.get(off..off + plen).unwrap_or_default()
        } else {
            bytes
        },
        meta,
        rx_ns: u64::from_le_bytes(rx),
    }
}

struct TapEnd {
    cons: SlotConsumer<'static, RecBuf>,
    tap: &'static TapCounters,
    at: usize,
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
        let _done = Done(self.sink.counters());
        loop {
            match self.next() {
                Next::Record(i) => self.emit(i),
                Next::Wait => {
                    self.sink.tick(crate::pacer::now_ns());
                    std::thread::sleep(Duration::from_micros(100));
                }
                Next::Done => break,
            }
        }
        self.sink.finish();
    }

    /// Which tap's record goes next, if one may.
    fn next(&mut self) -> Next {
        let mut best: Option<(usize, u64)> = None;
        let mut limit = u64::MAX;
        let mut all_done = true;
        for (i, t) in self.taps.iter_mut().enumerate() {
            // Before the ring: a watermark (or done) seen here covers what the ring shows.
            let w = t.tap.watermark_ns.load(Acquire);
            let done = t.tap.done.load(Acquire);
            while t.cons.front().is_some_and(|b| t.at >= b.fill) {
                let released = t.cons.release();
                debug_assert!(released.is_ok());
                t.at = 0;
            }
            match t.cons.front() {
                Some(b) => {
                    all_done = false;
                    let r = read_rec(b, t.at);
                    if best.is_none_or(|(_, ns)| r.take_ns < ns) {
                        best = Some((i, r.take_ns));
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
            Some((i, ns)) if ns <= limit => Next::Record(i),
            _ if all_done => Next::Done,
            _ => Next::Wait,
        }
    }

    /// Writes tap `i`'s next record into the sink, waiting (this is the cold side) for the
    /// sink's writer to free a buffer when none is: only a tap may drop. A writer that frees
    /// nothing for [`STUCK_NS`] (it died) no longer holds the merger up: the record goes to
    /// the sink, which counts it as `record_full`.
    fn emit(&mut self, i: usize) {
        let t = &mut self.taps[i];
        let Some(b) = t.cons.front() else { return };
        let r = read_rec(b, t.at);
        let since = crate::pacer::now_ns();
        while !self.stuck && !self.sink.has_room(r.len + 64) {
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
        let v = view_of(b, t.at);
        self.sink.on_packet(&v);
        t.at += HDR + r.len;
    }
}

enum Next {
    Record(usize),
    Wait,
    Done,
}
