//! The consumer half of a sink: appends each packet's record to the buffer being filled
//! and hands full (or timed-out) buffers to the writer. Hot path: no allocation, no
//! logging, no blocking; what does not fit is counted.

use super::common::{SinkCounters, ALIGN};
use super::format::{AnyFormat, Format, Out};
use crate::stages::Packet;
use rtdaq_config::model::Recorder;
use rtdaq_core::slot_ring::SlotProducer;
use rtdaq_core::wire::SeqHeader;
use std::sync::atomic::Ordering::Relaxed;

/// What the packets of one buffer add to its file's index.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexDelta {
    /// Stream id and sequence number of the first packet with an rtdaq sequence header.
    pub first_seq: Option<(u16, u64)>,
    /// Sequence number of the last such packet (of the file's first stream).
    pub last_seq: Option<u64>,
    /// Sequence numbers skipped (of the file's first stream).
    pub gaps: u64,
    /// Receive time of the first and last packet, ns since the epoch.
    pub first_ts: u64,
    /// See `first_ts`.
    pub last_ts: u64,
    /// Bytes of the first packet's record payload (DADA `PKT_SIZE`).
    pub first_len: u32,
}

/// One buffer between a consumer and its writer: preallocated, page-aligned, locked with the
/// rest of the process (`mlockall`).
pub struct RecBuf {
    mem: Box<[u8]>,
    off: usize,
    cap: usize,
    /// Bytes of the stream in this buffer.
    pub fill: usize,
    /// File number these bytes belong to.
    pub file: u32,
    /// The file ends with this buffer.
    pub ends_file: bool,
    /// Records that end in this buffer.
    pub packets: u64,
    /// Offset just past the last record that ends in this buffer (`None`: none ends here).
    pub boundary: Option<usize>,
    /// Index figures of those packets.
    pub idx: IndexDelta,
}

impl RecBuf {
    /// A zeroed buffer of `cap` bytes (a multiple of [`ALIGN`]) at an aligned address.
    pub fn new(cap: usize) -> Self {
        let mem = vec![0u8; cap + ALIGN].into_boxed_slice();
        let off = (ALIGN - mem.as_ptr() as usize % ALIGN) % ALIGN;
        RecBuf {
            mem,
            off,
            cap,
            fill: 0,
            file: 0,
            ends_file: false,
            packets: 0,
            boundary: None,
            idx: IndexDelta::default(),
        }
    }

    /// The stream bytes in the buffer (aligned start).
    pub fn data(&self) -> &[u8] {
        &self.mem[self.off..self.off + self.fill]
    }

    pub(super) fn space(&mut self) -> &mut [u8] {
        &mut self.mem[self.off..self.off + self.cap]
    }

    pub(super) fn reset(&mut self, file: u32) {
        self.fill = 0;
        self.file = file;
        self.ends_file = false;
        self.packets = 0;
        self.boundary = None;
        self.idx = IndexDelta::default();
    }
}

/// Ends of the most recent records, for moving an unaligned tail into the next buffer.
const ENDS: usize = ALIGN;

/// Counts since the last [`RecordSink::publish`].
#[derive(Debug, Default, Clone, Copy)]
struct Pending {
    full: u64,
    error: u64,
}

/// The consumer half of one sink (see the [module docs](super)): the recorder's format
/// turns each packet into a record of the byte stream.
pub struct RecordSink {
    format: AnyFormat,
    out: Stream,
}

/// The byte stream of a sink across its buffers: admission, rotation, flushing, the index.
struct Stream {
    prod: SlotProducer<'static, RecBuf>,
    counters: &'static SinkCounters,
    cap: usize,
    /// The slot at the producer's head has not been reset for the current file yet.
    stale: bool,
    /// Bytes of a file before its first record (the writer's file header, the stream's).
    header_len: u64,
    /// What each file's stream starts with (the format's stream header).
    stream_header: Box<[u8]>,
    rotate_bytes: Option<u64>,
    rotate_ns: Option<u64>,
    flush_ns: u64,
    file: u32,
    file_bytes: u64,
    file_start_ns: u64,
    buf_first_ns: u64,
    ends: Box<[u32]>,
    ends_head: usize,
    ends_in_buf: usize,
    last_seq: Option<(u16, u64)>,
    carry: Box<[u8]>,
    pending: Pending,
}

impl RecordSink {
    /// The consumer half of a sink of `rec` in `format` over `prod`; puts the first file's
    /// stream header.
    pub fn new(
        rec: &Recorder,
        format: AnyFormat,
        prod: SlotProducer<'static, RecBuf>,
        counters: &'static SinkCounters,
    ) -> Self {
        let stream_header = format.stream_header().into_boxed_slice();
        let mut out = Stream {
            prod,
            counters,
            cap: rec.buffer_bytes,
            stale: true,
            header_len: format.file_header_len() + stream_header.len() as u64,
            stream_header,
            rotate_bytes: rec.rotate_bytes,
            rotate_ns: rec.rotate_ns,
            flush_ns: rec.flush_ns,
            file: 0,
            file_bytes: 0,
            file_start_ns: 0,
            buf_first_ns: 0,
            ends: vec![0u32; ENDS].into_boxed_slice(),
            ends_head: 0,
            ends_in_buf: 0,
            last_seq: None,
            carry: vec![0u8; ALIGN].into_boxed_slice(),
            pending: Pending::default(),
        };
        out.start_file();
        RecordSink { format, out }
    }

    /// Records one packet (see the [module docs](super)).
    #[inline]
    pub fn on_packet(&mut self, p: &Packet<'_>) {
        let Some(r) = self.format.record(p, &mut self.out) else {
            return;
        };
        let seq = SeqHeader::parse(p.payload)
            .ok()
            .map(|h| (h.stream_id, h.seq));
        self.out.end_record(r.total, r.data, seq, p.rx_ns);
    }

    /// Whether a record of up to `bytes` bytes would be taken now (room in the free
    /// buffers, a rotation included), or would be counted as a write error anyway. The
    /// merger of a shared sink waits for this instead of dropping.
    pub fn has_room(&mut self, bytes: usize) -> bool {
        let o = &mut self.out;
        o.counters.failed.load(Relaxed) || (o.free() >= 2 && o.fits(bytes))
    }

    /// Records one block that is not a packet: a GPU stage's product of one batch (raw/dada
    /// sinks only; `batch` numbers the stage's batches from 0, dropped ones included, so the
    /// index counts the batches not recorded as gaps). False when it was not recorded
    /// (counted as `record_full` / `record_error`).
    #[inline]
    pub fn on_block(&mut self, data: &[u8], batch: u64, ts_ns: u64) -> bool {
        if !self.out.admit(data.len(), ts_ns) {
            return false;
        }
        self.out.put(data);
        self.out
            .end_record(data.len(), data.len(), Some((0, batch)), ts_ns);
        true
    }

    /// Called after every burst and when the queue is idle: publishes the counters and hands
    /// a partly filled buffer to the writer once it waited `flush_ms` (its 4 KiB-aligned
    /// part; the rest moves to the next buffer, so every write but a file's last stays
    /// aligned).
    #[inline]
    pub fn tick(&mut self, now_ns: u64) {
        self.out.tick(now_ns);
    }

    /// Adds the counts since the last call to the shared counters.
    #[inline]
    pub fn publish(&mut self) {
        self.out.publish();
    }

    /// End of the run: the buffer being filled goes to the writer as the end of its file
    /// (when a slot is free; else the writer closes the file after the last full buffer),
    /// and the writer is told that nothing more comes.
    pub fn finish(&mut self) {
        self.out.finish();
    }

    /// The shared counters.
    pub fn counters(&self) -> &'static SinkCounters {
        self.out.counters
    }
}

impl Out for Stream {
    /// Whether a record of `total` bytes received at `ts_ns` goes into the buffers:
    /// not after a write error (`record_error`), rotating first when the file is due, and
    /// only when the free buffers hold it (else `record_full`). Starts the flush timer of
    /// the buffer it goes into.
    #[inline]
    fn admit(&mut self, total: usize, ts_ns: u64) -> bool {
        if self.counters.failed.load(Relaxed) {
            self.pending.error += 1;
            return false;
        }
        let rotate_bytes = self
            .rotate_bytes
            .is_some_and(|b| self.file_bytes + total as u64 > b);
        let rotate_time = self.rotate_ns.is_some_and(|t| {
            self.file_start_ns != 0 && ts_ns.saturating_sub(self.file_start_ns) >= t
        });
        if (rotate_bytes || rotate_time) && self.file_bytes > self.header_len && !self.rotate() {
            self.pending.full += 1;
            return false;
        }
        if !self.fits(total) {
            self.pending.full += 1;
            return false;
        }
        if self.buf_first_ns == 0 {
            self.buf_first_ns = crate::pacer::now_ns();
        }
        true
    }

    /// Appends bytes to the stream, moving on to the next buffer when one is full. The
    /// caller made sure the free buffers hold them.
    #[inline]
    fn put(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let cap = self.cap;
            let Some(b) = self.cur() else { return };
            if b.fill == cap {
                self.commit();
                continue;
            }
            let n = bytes.len().min(cap - b.fill);
            let at = b.fill;
            b.space()[at..at + n].copy_from_slice(&bytes[..n]);
            b.fill += n;
            bytes = &bytes[n..];
        }
    }
}

impl Stream {
    /// Free slots (the one being filled included).
    #[inline]
    fn free(&self) -> usize {
        self.prod.capacity() - self.prod.len()
    }

    /// The buffer being filled, reset for the current file the first time it is seen.
    #[inline]
    fn cur(&mut self) -> Option<&mut RecBuf> {
        let (stale, file) = (self.stale, self.file);
        let b = self.prod.slot()?;
        if stale {
            b.reset(file);
            self.stale = false;
            self.ends_in_buf = 0;
            self.buf_first_ns = 0;
        }
        Some(b)
    }

    /// Hands the buffer being filled to the writer.
    #[inline]
    fn commit(&mut self) {
        if self.prod.slot().is_some() && !self.stale {
            let committed = self.prod.commit();
            debug_assert!(committed.is_ok());
            self.stale = true;
        }
    }

    /// Starts the stream of the current file with the format's stream header.
    fn start_file(&mut self) {
        self.file_bytes = self.header_len;
        self.file_start_ns = 0;
        self.last_seq = None;
        if !self.stream_header.is_empty() {
            let h = std::mem::take(&mut self.stream_header);
            self.put(&h);
            self.stream_header = h;
        }
    }

    /// Ends the current file with the buffer being filled and starts the next one. False
    /// when the free buffers cannot take that (the packet is then not recorded).
    fn rotate(&mut self) -> bool {
        if self.free() < 2 {
            return false;
        }
        if let Some(b) = self.cur() {
            b.ends_file = true;
        }
        // Commit even an empty buffer: it carries the end-of-file mark.
        if self.prod.slot().is_some() {
            let committed = self.prod.commit();
            debug_assert!(committed.is_ok());
            self.stale = true;
        }
        self.file += 1;
        self.start_file();
        true
    }

    /// Whether a record of `total` bytes fits into the buffer being filled and the free
    /// ones after it.
    #[inline]
    fn fits(&mut self, total: usize) -> bool {
        let cap = self.cap;
        let room = match self.cur() {
            Some(b) => cap - b.fill,
            None => return false,
        };
        let needed = 1 + total.saturating_sub(room).div_ceil(cap);
        self.free() >= needed
    }

    /// Book-keeping after a record of `total` bytes (`len` of them data) went into the
    /// buffers: file size, index figures, the record's end.
    #[inline]
    fn end_record(&mut self, total: usize, len: usize, seq: Option<(u16, u64)>, ts_ns: u64) {
        self.file_bytes += total as u64;
        if self.file_start_ns == 0 {
            self.file_start_ns = ts_ns.max(1);
        }
        let (ends_head, last) = (self.ends_head, self.last_seq);
        let mut gap = 0;
        let mut next_last = last;
        if let Some((sid, s)) = seq {
            match last {
                None => next_last = Some((sid, s)),
                Some((lsid, ls)) if lsid == sid => {
                    if s > ls {
                        gap = s - ls - 1;
                        next_last = Some((sid, s));
                    }
                }
                Some(_) => {}
            }
        }
        self.last_seq = next_last;
        let Some(b) = self.cur() else { return };
        b.packets += 1;
        b.boundary = Some(b.fill);
        let idx = &mut b.idx;
        if idx.first_ts == 0 {
            idx.first_ts = ts_ns;
            idx.first_len = len as u32;
        }
        idx.last_ts = ts_ns;
        if let Some((sid, s)) = seq {
            if idx.first_seq.is_none() && last.is_none() {
                idx.first_seq = Some((sid, s));
            }
            if next_last == Some((sid, s)) {
                idx.last_seq = Some(s);
            }
        }
        idx.gaps += gap;
        let fill = b.fill as u32;
        let full = b.fill == b.cap;
        self.ends[ends_head] = fill;
        self.ends_head = (ends_head + 1) % ENDS;
        self.ends_in_buf += 1;
        if full {
            self.commit();
        }
    }

    /// Called after every burst and when the queue is idle: publishes the counters and hands
    /// a partly filled buffer to the writer once it waited `flush_ms` (its 4 KiB-aligned
    /// part; the rest moves to the next buffer, so every write but a file's last stays
    /// aligned).
    #[inline]
    fn tick(&mut self, now_ns: u64) {
        self.publish();
        if self.buf_first_ns == 0 || now_ns.saturating_sub(self.buf_first_ns) < self.flush_ns {
            return;
        }
        if self.free() < 2 || self.stale {
            return;
        }
        let Some(b) = self.prod.slot() else { return };
        if b.fill < ALIGN {
            return;
        }
        let cut = b.fill / ALIGN * ALIGN;
        let tail = b.fill - cut;
        // Records that end after the cut move with the tail.
        let mut moved = 0usize;
        let mut last_before = None;
        for k in 0..self.ends_in_buf.min(ENDS) {
            let e = self.ends[(self.ends_head + ENDS - 1 - k) % ENDS] as usize;
            if e > cut {
                moved += 1;
            } else {
                last_before = Some(e);
                break;
            }
        }
        self.carry[..tail].copy_from_slice(&b.data()[cut..]);
        b.fill = cut;
        b.packets -= moved as u64;
        b.boundary = last_before;
        let file = b.file;
        let committed = self.prod.commit();
        debug_assert!(committed.is_ok());
        self.stale = true;
        // Rebase the moved records' ends onto the next buffer.
        for k in 0..moved.min(ENDS) {
            let i = (self.ends_head + ENDS - 1 - k) % ENDS;
            self.ends[i] -= cut as u32;
        }
        let Some(nb) = self.prod.slot() else { return };
        nb.reset(file);
        self.stale = false;
        nb.space()[..tail].copy_from_slice(&self.carry[..tail]);
        nb.fill = tail;
        nb.packets = moved as u64;
        nb.boundary = (moved > 0).then(|| self.ends[(self.ends_head + ENDS - 1) % ENDS] as usize);
        self.ends_in_buf = moved;
        self.buf_first_ns = if tail > 0 { now_ns } else { 0 };
    }

    /// Adds the counts since the last call to the shared counters.
    #[inline]
    fn publish(&mut self) {
        let c = self.counters;
        let p = std::mem::take(&mut self.pending);
        if p.full > 0 {
            SinkCounters::add(&c.dropped_full, p.full);
        }
        if p.error > 0 {
            SinkCounters::add(&c.dropped_error, p.error);
        }
    }

    /// End of the run: the buffer being filled goes to the writer as the end of its file
    /// (when a slot is free; else the writer closes the file after the last full buffer),
    /// and the writer is told that nothing more comes.
    fn finish(&mut self) {
        self.publish();
        if !self.stale {
            if let Some(b) = self.prod.slot() {
                b.ends_file = true;
                let committed = self.prod.commit();
                debug_assert!(committed.is_ok());
                self.stale = true;
            }
        }
        self.counters
            .producer_done
            .store(true, std::sync::atomic::Ordering::Release);
    }
}
