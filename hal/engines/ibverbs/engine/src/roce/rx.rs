//! The receiving end: completions polled in batches into bursts, receives reposted from
//! the pool, credits returned in batches (so the sender never meets an empty receive
//! queue: no receiver-not-ready), replies to request/response peers
//! (`engine.ibverbs.reply`), and the drain of an ended connection.
//!
//! **Ended connections lose nothing uncounted.** A connection the CM thread marked `DEAD`
//! (its QP is in the error state) stays with the queue until every receive and every send
//! it posted has completed: a receive that completed successfully is still delivered, the
//! others come back flushed and their buffers return to the pool. Only then is the
//! connection handed back to the CM thread (bounded by [`CLOSE_MAX_NS`]; a release forced
//! by that bound is counted, and a message completing after it is counted as a `kernel`
//! drop).
//!
//! **No allocation.** Every table of a connection is built by the CM thread before the
//! hand-off ([`RxConn::new`]) and handed back with it; the queue only moves it.
//!
//! READ (pull mode) is in `pull.rs` (a child module: it shares these private types).
#[path = "pull.rs"]
mod pull;

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ffi::{RecvBatch, SendBatch, SendOp, SendRequest, WcKind, WorkCompletion};
use rtdaq_config::model::{RoceReply, RxQueue as RxQueueConfig};
use rtdaq_core::traits::RxQueue;
use rtdaq_core::{Buf, Burst, ConnId, DropReason, FlowId, PacketMeta, QueueCounters, QueueId};

use super::{recv_req, CmGuard, Conn, Handoff, Peer, QueueVerbs, Reply, Setup, Slot, MAX_BATCH};
use crate::proto::{self, Op, WrKind, CTRL_MAX_SLOTS, CTRL_SENDS, DESC_BYTES, READ_DEPTH};

/// Bytes of one credit message buffer.
pub(crate) const CTRL_BYTES: u64 = 4 * CTRL_MAX_SLOTS as u64;
/// Replies in flight per connection (`engine.ibverbs.reply`): a message that finds none of
/// its connection's reply buffers free gets no reply and is counted (`reply_failures`), so
/// a peer that stops taking replies never stalls reception.
pub(crate) const REPLY_DEPTH: u32 = 32;
/// Longest an ended connection waits for its outstanding work requests (flushes come at
/// once on a working device; the bound only guards against a device that never flushes).
pub(crate) const CLOSE_MAX_NS: u64 = 5_000_000_000;

/// Work requests of one connection the HCA still owns, and since when the connection is
/// closing. Pure bookkeeping, unit-tested.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Ledger {
    recvs: u32,
    sends: u32,
    closing_since: Option<u64>,
}

impl Ledger {
    /// `n` receives were posted.
    pub(crate) fn posted_recvs(&mut self, n: usize) {
        self.recvs += n as u32;
    }
    /// One (signaled) send was posted.
    pub(crate) fn posted_send(&mut self) {
        self.sends += 1;
    }
    /// A receive completed (any status).
    pub(crate) fn recv_done(&mut self) {
        self.recvs = self.recvs.saturating_sub(1);
    }
    /// A send completed (any status).
    pub(crate) fn send_done(&mut self) {
        self.sends = self.sends.saturating_sub(1);
    }
    /// The connection ended at `now_ns` (the first call counts).
    pub(crate) fn close(&mut self, now_ns: u64) {
        self.closing_since.get_or_insert(now_ns);
    }
    /// Ended, draining.
    pub(crate) fn closing(&self) -> bool {
        self.closing_since.is_some()
    }
    /// Ended and nothing outstanding: it may be released.
    pub(crate) fn drained(&self) -> bool {
        self.closing() && self.recvs == 0 && self.sends == 0
    }
    /// Ended longer than [`CLOSE_MAX_NS`] ago.
    pub(crate) fn overdue(&self, now_ns: u64) -> bool {
        self.closing_since
            .is_some_and(|t| now_ns.saturating_sub(t) > CLOSE_MAX_NS)
    }
}

/// One connection of a receiving queue: built by the CM thread, owned by the queue from
/// adoption to release.
pub(crate) struct RxConn {
    /// First: dropped first (QP destroyed before the buffers below return to the pool).
    h: Handoff,
    /// SEND mode: receive index → its buffer (None: not posted).
    posted: Vec<Option<Buf<'static>>>,
    /// SEND mode: receive indices waiting for a buffer.
    empty: Vec<u32>,
    /// WRITE_IMM mode: pool slot → the granted buffer.
    granted: Vec<Option<Buf<'static>>>,
    /// Credits (SEND) or slots (WRITE_IMM) not yet announced.
    pending: Vec<u32>,
    /// WRITE_IMM: slots that may be granted.
    pending_n: u32,
    /// Free credit-message buffers.
    ctrl_free: Vec<u32>,
    /// Free reply buffers.
    reply_free: Vec<u32>,
    /// Replies written but not posted: the peer is not known yet (`reply buffer`, length).
    reply_wait: Vec<(u32, u32)>,
    ledger: Ledger,
    /// The CM thread saw the connection established: the peer is known.
    ready: bool,
    /// Messages delivered after the connection ended (its tail, drained).
    late: u64,
    /// READ: announced messages not pulled yet (sender slot, length).
    todo: VecDeque<(u32, u32)>,
    /// READ: READs posted, in order (sender slot, length, our buffer).
    reading: VecDeque<(u32, u32, Buf<'static>)>,
    /// READ: offset of the descriptor receive buffers in the control region.
    desc_base: u64,
}

impl RxConn {
    /// Builds a connection's tables (CM thread; cold: this is where a connection's memory
    /// is allocated). `posted`: SEND mode, the buffers of the receives already posted, by
    /// receive index.
    pub(crate) fn new(
        h: Handoff,
        s: &Setup,
        slot_count: usize,
        posted: Vec<Option<Buf<'static>>>,
    ) -> Box<Self> {
        let depth = s.reply.depth();
        let n_posted = posted.iter().filter(|b| b.is_some()).count();
        let read = s.op == Op::Read;
        let mut ledger = Ledger::default();
        ledger.posted_recvs(n_posted);
        if read {
            // The descriptor receives the CM thread posted.
            ledger.posted_recvs(s.credits as usize);
        }
        Box::new(RxConn {
            h,
            posted,
            empty: Vec::with_capacity(s.credits as usize),
            granted: if s.op == Op::WriteImm {
                (0..slot_count).map(|_| None).collect()
            } else {
                Vec::new()
            },
            pending: Vec::with_capacity(s.credits.max(CTRL_MAX_SLOTS) as usize),
            pending_n: if s.op == Op::WriteImm { s.credits } else { 0 },
            ctrl_free: (0..CTRL_SENDS).collect(),
            reply_free: (0..depth).rev().collect(),
            reply_wait: Vec::with_capacity(depth as usize),
            ledger,
            ready: false,
            late: 0,
            todo: VecDeque::with_capacity(if read { s.credits as usize } else { 0 }),
            reading: VecDeque::with_capacity(if read { READ_DEPTH as usize } else { 0 }),
            desc_base: desc_offset(0, s.reply),
        })
    }

    /// Messages delivered after the connection ended (the CM thread logs it).
    pub(crate) fn late(&self) -> u64 {
        self.late
    }
}

/// A RoCE receive queue.
pub struct RoceRx {
    v: QueueVerbs,
    counters: &'static QueueCounters,
    guard: Arc<CmGuard>,
    q: usize,
    /// The connections this queue serves (`k ≡ q mod n_rx`).
    mine: Box<[usize]>,
    conns: Vec<Option<Box<RxConn>>>,
    /// Connections ended and draining.
    closing: u32,
    seen: u32,
    op: Op,
    credits: u32,
    batch_credit: u32,
    reply: Reply,
    wcs: Box<[WorkCompletion]>,
    rbatch: RecvBatch,
    sbatch: SendBatch,
    queue: QueueId,
    batch: usize,
    busy: bool,
    timeout: Duration,
    /// Counts not yet added to the interface's counters.
    replies: u64,
    reply_failures: u64,
    wc_errors: u64,
    forced: u64,
}

impl RoceRx {
    pub(crate) fn new(
        s: &Setup,
        q: usize,
        nq: usize,
        v: QueueVerbs,
        counters: &'static QueueCounters,
        guard: Arc<CmGuard>,
        qc: &RxQueueConfig,
    ) -> Self {
        let n = s.conns as usize;
        RoceRx {
            v,
            counters,
            guard,
            q,
            mine: (q..n).step_by(nq.max(1)).collect(),
            conns: (0..n).map(|_| None).collect(),
            closing: 0,
            seen: u32::MAX,
            op: s.op,
            credits: s.credits,
            batch_credit: proto::credit_batch(s.credits),
            reply: s.reply,
            wcs: vec![WorkCompletion::default(); 64].into_boxed_slice(),
            rbatch: RecvBatch::with_capacity(s.credits as usize),
            sbatch: SendBatch::with_capacity(1),
            queue: QueueId(q as u16),
            batch: (qc.batch_size as usize).clamp(1, MAX_BATCH),
            busy: qc.busy_poll,
            timeout: Duration::from_micros(u64::from(qc.timeout_us)),
            replies: 0,
            reply_failures: 0,
            wc_errors: 0,
            forced: 0,
        }
    }

    fn slot(&self, k: usize) -> &Slot {
        &self.guard.iface.slots[k]
    }

    /// Follows the CM thread's changes (only when its epoch moved), and releases ended
    /// connections past [`CLOSE_MAX_NS`].
    fn housekeeping(&mut self) {
        let e = self.guard.iface.epoch.load(Ordering::Acquire);
        if e != self.seen {
            self.seen = e;
            for i in 0..self.mine.len() {
                self.sync(self.mine[i]);
            }
        }
        if self.closing > 0 {
            let now = now_ns();
            for i in 0..self.mine.len() {
                self.settle(self.mine[i], now);
            }
        }
    }

    /// Adopts a published connection, notices establishment and death.
    fn sync(&mut self, k: usize) {
        if self.conns[k].is_none() {
            match self.slot(k).adopt() {
                Some((Conn::Rx(c), dead)) => {
                    self.conns[k] = Some(c);
                    if dead {
                        self.close(k);
                    }
                }
                // Not ours (cannot happen: an RX interface's CM builds RX connections).
                Some((other, _)) => self.slot(k).release(other),
                None => return,
            }
        }
        let ready = self.slot(k).ready.load(Ordering::Acquire);
        if let Some(c) = self.conns[k].as_mut() {
            if !c.ready && ready && !c.ledger.closing() {
                c.ready = true;
                if c.h.peer == Peer::Unknown {
                    c.h.peer = self.guard.iface.slots[k].peer_now();
                }
                self.on_ready(k);
            }
        }
        if self.slot(k).is_dead() {
            self.close(k);
        }
        self.settle(k, 0);
    }

    /// The peer is known: post the replies that waited for it, grant (WRITE_IMM) or
    /// announce credits (SEND).
    fn on_ready(&mut self, k: usize) {
        let rb = self.reply.bytes;
        let Some(c) = self.conns[k].as_mut() else {
            return;
        };
        let waiting = c.reply_wait.len();
        for j in 0..waiting {
            let (i, len) = c.reply_wait[j];
            if c.h.peer == Peer::Foreign {
                if !post_reply(&mut self.sbatch, c, k, i, len, rb) {
                    self.reply_failures += 1;
                    self.guard.iface.slots[k].broken();
                }
            } else {
                // An rtdaq peer gets no replies (its acknowledgement is the credits).
                c.reply_free.push(i);
            }
        }
        c.reply_wait.clear();
        self.grant(k);
    }

    /// The CM thread ended connection `k`: no more posts; it is released once drained.
    fn close(&mut self, k: usize) {
        let Some(c) = self.conns[k].as_mut() else {
            return;
        };
        if c.ledger.closing() {
            return;
        }
        c.ledger.close(now_ns());
        self.closing += 1;
        // Messages whose reply waited for the peer get none.
        self.reply_failures += c.reply_wait.len() as u64;
        for j in 0..c.reply_wait.len() {
            let i = c.reply_wait[j].0;
            c.reply_free.push(i);
        }
        c.reply_wait.clear();
    }

    /// Hands an ended connection back once nothing is outstanding (or, with `now` > 0,
    /// once it is overdue).
    fn settle(&mut self, k: usize, now: u64) {
        let Some(c) = self.conns[k].as_ref() else {
            return;
        };
        let drained = c.ledger.drained();
        let overdue = now > 0 && c.ledger.overdue(now);
        if !drained && !overdue {
            return;
        }
        if !drained {
            self.forced += 1;
        }
        if let Some(c) = self.conns[k].take() {
            self.closing = self.closing.saturating_sub(1);
            self.guard.iface.slots[k].release(Conn::Rx(c));
        }
    }

    /// WRITE_IMM: grants up to `pending_n` slots (a zero-length receive posted for each,
    /// before the grant goes out). SEND: reposts empty receives. Then announces credits.
    fn grant(&mut self, k: usize) {
        if self.op == Op::Read {
            self.pull(k);
            return;
        }
        let op = self.op;
        let lkey = self.v.mr.lkey();
        let due_at = self.batch_credit.min(self.credits);
        let Some(c) = self.conns[k].as_mut() else {
            return;
        };
        if c.ledger.closing() {
            return;
        }
        let rtdaq = matches!(c.h.peer, Peer::Rtdaq(_));
        let gen = c.h.gen;
        let start = c.pending.len();
        self.rbatch.clear();
        if op == Op::WriteImm {
            // Slots are only worth granting to a known rtdaq sender.
            while c.ready
                && rtdaq
                && c.pending_n > 0
                && self.rbatch.room() > 0
                && (c.pending.len() as u32) < CTRL_MAX_SLOTS
            {
                let Some(b) = self.v.pool.get() else { break };
                let slot = b.index();
                self.rbatch.push(&ffi::RecvRequest {
                    wr_id: proto::wr_id(WrKind::Recv, k as u16, gen, slot),
                    addr: 0,
                    len: 0,
                    lkey: 0,
                });
                c.granted[slot as usize] = Some(b);
                c.pending.push(slot);
                c.pending_n -= 1;
            }
        } else {
            while let Some(&r) = c.empty.last() {
                if self.rbatch.room() == 0 {
                    break;
                }
                let Some(b) = self.v.pool.get() else { break };
                c.empty.pop();
                self.rbatch.push(&recv_req(
                    proto::wr_id(WrKind::Recv, k as u16, gen, r),
                    &b,
                    lkey,
                ));
                c.posted[r as usize] = Some(b);
                c.pending.push(r);
            }
        }
        if !self.rbatch.is_empty() {
            let n = self.rbatch.len();
            match c.h.id.post_recv(&mut self.rbatch) {
                Ok(()) => c.ledger.posted_recvs(n),
                Err(e) => {
                    // Take back what was not posted; the connection is broken.
                    let posted = e.posted.min(n);
                    c.ledger.posted_recvs(posted);
                    for j in start + posted..c.pending.len() {
                        let x = c.pending[j] as usize;
                        if op == Op::WriteImm {
                            c.granted[x] = None;
                            c.pending_n += 1;
                        } else {
                            c.posted[x] = None;
                            c.empty.push(x as u32);
                        }
                    }
                    c.pending.truncate(start + posted);
                    self.guard.iface.slots[k].broken();
                    return;
                }
            }
        }
        // Credits go to a known rtdaq peer, once a batch is due.
        if !c.ready {
            return;
        }
        if !rtdaq {
            c.pending.clear();
            return;
        }
        if (c.pending.len() as u32) < due_at {
            return;
        }
        let Some(buf) = c.ctrl_free.pop() else { return };
        let n = (c.pending.len() as u32).min(CTRL_MAX_SLOTS);
        let (addr, len) = if op == Op::WriteImm {
            let base = buf as usize * CTRL_BYTES as usize;
            if let Some(bytes) = c.h.ctrl.owned_mut() {
                for (i, s) in c.pending.iter().take(n as usize).enumerate() {
                    bytes[base + 4 * i..base + 4 * i + 4].copy_from_slice(&s.to_le_bytes());
                }
            }
            (c.h.ctrl.addr() + base as u64, 4 * n)
        } else {
            (0, 0)
        };
        c.pending.drain(..n as usize);
        self.sbatch.clear();
        self.sbatch.push(&SendRequest::signaled_send_imm(
            proto::wr_id(WrKind::CtrlSend, k as u16, gen, buf),
            addr,
            len,
            c.h.ctrl.lkey(),
            n,
        ));
        if c.h.id.post_send(&mut self.sbatch).is_ok() {
            c.ledger.posted_send();
        } else {
            c.ctrl_free.push(buf);
            self.guard.iface.slots[k].broken();
        }
    }

    /// Writes the reply to a message of `len` bytes (`data`) of connection `k` and posts
    /// it (or keeps it until the peer is known). False: no reply (counted by the caller).
    fn reply_to(&mut self, k: usize, data: Option<&[u8]>, len: usize) -> bool {
        let mode = self.reply.mode;
        let rb = self.reply.bytes as usize;
        let Some(c) = self.conns[k].as_mut() else {
            return false;
        };
        if c.ledger.closing() {
            return false;
        }
        let Some(i) = c.reply_free.pop() else {
            return false;
        };
        let n = if mode == RoceReply::Echo {
            len.min(rb)
        } else {
            rb
        };
        let off = reply_offset(i, self.reply.bytes);
        if let Some(dst) = c.h.ctrl.owned_mut() {
            let src = data.unwrap_or_default();
            let m = n.min(src.len());
            dst[off..off + m].copy_from_slice(&src[..m]);
            dst[off + m..off + n].fill(0);
        }
        if c.h.peer == Peer::Unknown {
            c.reply_wait.push((i, n as u32));
            return true;
        }
        if post_reply(&mut self.sbatch, c, k, i, n as u32, self.reply.bytes) {
            true
        } else {
            self.guard.iface.slots[k].broken();
            false
        }
    }

    fn drain(&mut self, burst: &mut Burst<'static, MAX_BATCH>) -> usize {
        let room = (self.batch.min(MAX_BATCH))
            .saturating_sub(burst.len())
            .min(self.wcs.len());
        if room == 0 {
            return 0;
        }
        let n = match self.v.cq.poll(&mut self.wcs[..room]) {
            Ok(n) => n,
            Err(_) => {
                self.wc_errors += 1;
                0
            }
        };
        let mut got = 0usize;
        let mut bytes = 0u64;
        let ts = if n > 0 { now_ns() } else { 0 };
        let replying = self.reply.mode != RoceReply::None;
        for i in 0..n {
            let wc = self.wcs[i];
            let Some((kind, k, gen, idx)) = proto::split_wr_id(wc.wr_id()) else {
                continue;
            };
            let k = usize::from(k);
            if k >= self.conns.len() {
                continue;
            }
            if self.conns[k].as_ref().is_none_or(|c| c.h.gen != gen) {
                // Published before accept/connect: adoption finds it.
                self.sync(k);
            }
            let Some(c) = self.conns[k].as_mut().filter(|c| c.h.gen == gen) else {
                // A connection already released (only after CLOSE_MAX_NS): a message
                // completing now cannot be delivered.
                if wc.ok() && kind == WrKind::Recv {
                    self.counters.record_drop(DropReason::Kernel);
                }
                continue;
            };
            match kind {
                WrKind::Recv | WrKind::Desc => c.ledger.recv_done(),
                WrKind::CtrlSend | WrKind::Reply | WrKind::Read => c.ledger.send_done(),
                _ => {}
            }
            if !wc.ok() {
                if !wc.flushed() {
                    self.wc_errors += 1;
                }
                match kind {
                    // A flushed receive: its buffer goes back to the pool (WRITE_IMM
                    // granted buffers go back with the connection).
                    WrKind::Recv if self.op == Op::Send => {
                        c.posted.get_mut(idx as usize).and_then(Option::take);
                    }
                    WrKind::CtrlSend => c.ctrl_free.push(idx),
                    WrKind::Reply => {
                        c.reply_free.push(idx);
                        self.reply_failures += 1;
                    }
                    // A READ that failed or was flushed: its buffer goes back to the pool;
                    // the sender, never told, counts the message as dropped.
                    WrKind::Read => drop(c.reading.pop_front()),
                    _ => {}
                }
                if !c.ledger.closing() {
                    self.guard.iface.slots[k].broken();
                }
                continue;
            }
            match kind {
                WrKind::Desc if !pull::on_desc(c, &mut self.rbatch, &wc, self.counters) => {
                    self.guard.iface.slots[k].broken();
                }
                WrKind::Recv | WrKind::Read => {
                    let mut read_len = None;
                    let buf = match (self.op, wc.kind()) {
                        (Op::Read, _) if kind == WrKind::Read => {
                            pull::take_read(c).map(|(b, len)| {
                                read_len = Some(len);
                                b
                            })
                        }
                        (Op::Send, WcKind::Recv) => {
                            let b = c.posted.get_mut(idx as usize).and_then(Option::take);
                            c.empty.push(idx);
                            b
                        }
                        (Op::WriteImm, WcKind::RecvWriteImm) => {
                            let slot = wc.imm().unwrap_or(u32::MAX) as usize;
                            c.pending_n += 1;
                            c.granted.get_mut(slot).and_then(Option::take)
                        }
                        _ => None,
                    };
                    let Some(mut b) = buf else {
                        self.counters.record_drop(DropReason::Malformed);
                        continue;
                    };
                    // A READ's completion carries no length: the descriptor's.
                    let len = (read_len.unwrap_or(wc.byte_len()) as usize).min(b.capacity());
                    b.set_len(len);
                    if c.ledger.closing() {
                        c.late += 1;
                    }
                    if replying
                        && !matches!(c.h.peer, Peer::Rtdaq(_))
                        && !self.reply_to(k, b.as_slice(), len)
                    {
                        self.reply_failures += 1;
                    }
                    let meta = PacketMeta {
                        len: len as u32,
                        flow: FlowId::NONE,
                        queue: self.queue,
                        rx_timestamp_ns: ts,
                        ts_source: rtdaq_core::TimestampSource::Poll,
                        conn: ConnId(k as u32 + 1),
                        ..PacketMeta::default()
                    };
                    if burst.push_single(b, meta).is_err() {
                        self.counters.record_drop(DropReason::RingFull);
                        continue;
                    }
                    got += 1;
                    bytes += len as u64;
                }
                WrKind::CtrlSend => c.ctrl_free.push(idx),
                WrKind::Reply => {
                    c.reply_free.push(idx);
                    self.replies += 1;
                }
                _ => {}
            }
        }
        if got > 0 {
            self.counters.record_rx_burst(got as u64, bytes);
        }
        // READ: also without completions (READs wait for pool buffers).
        if n > 0 || self.op == Op::Read {
            for j in 0..self.mine.len() {
                let k = self.mine[j];
                match self.conns[k].as_ref().map(|c| c.ledger.closing()) {
                    Some(false) => self.grant(k),
                    Some(true) => self.settle(k, 0),
                    None => {}
                }
            }
            self.publish_counts();
        }
        got
    }

    /// Adds the queue's reply and error counts to the interface's (cold: only when they
    /// changed, one atomic add each).
    fn publish_counts(&mut self) {
        let n = &self.guard.iface.n;
        for (local, shared) in [
            (&mut self.replies, &n.replies),
            (&mut self.reply_failures, &n.reply_failures),
            (&mut self.wc_errors, &n.wc_errors),
            (&mut self.forced, &n.forced_releases),
        ] {
            if *local > 0 {
                shared.fetch_add(*local, Ordering::Relaxed);
                *local = 0;
            }
        }
    }
}

/// Offset of descriptor receive buffer `r` (READ) in a connection's control region (after
/// the reply buffers).
pub(crate) fn desc_offset(r: u32, reply: Reply) -> u64 {
    reply_offset(reply.depth(), reply.bytes) as u64 + u64::from(r) * DESC_BYTES
}

/// Offset of reply buffer `i` in a connection's control region (after the credit
/// message buffers).
pub(crate) fn reply_offset(i: u32, reply_bytes: u32) -> usize {
    CTRL_SENDS as usize * CTRL_BYTES as usize + i as usize * reply_bytes as usize
}

/// Posts reply buffer `i` (`len` bytes; buffers of `rb` bytes) of connection `k` as a
/// signaled SEND. False (the buffer freed again) when posting failed.
fn post_reply(sbatch: &mut SendBatch, c: &mut RxConn, k: usize, i: u32, len: u32, rb: u32) -> bool {
    sbatch.clear();
    sbatch.push(&SendRequest {
        wr_id: proto::wr_id(WrKind::Reply, k as u16, c.h.gen, i),
        op: SendOp::Send,
        addr: c.h.ctrl.addr() + reply_offset(i, rb) as u64,
        len,
        lkey: c.h.ctrl.lkey(),
        imm: 0,
        remote_addr: 0,
        rkey: 0,
        signaled: true,
        inline: false,
    });
    if c.h.id.post_send(sbatch).is_ok() {
        c.ledger.posted_send();
        true
    } else {
        c.reply_free.push(i);
        false
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl RxQueue for RoceRx {
    type Burst = Burst<'static, MAX_BATCH>;

    fn new_burst(&self) -> Self::Burst {
        Burst::new(self.queue)
    }

    fn poll(&mut self, burst: &mut Self::Burst) -> usize {
        self.housekeeping();
        let mut got = self.drain(burst);
        if got > 0 || self.busy || self.timeout.is_zero() {
            return got;
        }
        let end = Instant::now() + self.timeout;
        while got == 0 && Instant::now() < end {
            std::thread::sleep(Duration::from_micros(20));
            self.housekeeping();
            got = self.drain(burst);
        }
        got
    }
}

impl Drop for RoceRx {
    fn drop(&mut self) {
        let errors = self.wc_errors;
        self.publish_counts();
        if errors > 0 {
            log::warn!(
                "{} RX queue {}: {} completion error(s)",
                self.guard.iface.key,
                self.q,
                errors
            );
        }
        for c in self.conns.iter_mut() {
            if let Some(c) = c.take() {
                // Error state first: the HCA stops writing the buffers returned below.
                c.h.id.disconnect();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_released_only_when_everything_it_posted_completed() {
        let mut l = Ledger::default();
        l.posted_recvs(128);
        l.posted_send();
        assert!(!l.closing() && !l.drained());
        // Ends with 3 messages still queued, 124 receives to flush, 1 credit in flight.
        l.close(1_000);
        l.close(9_000); // a second notice does not move the start
        for _ in 0..127 {
            l.recv_done();
            assert!(!l.drained());
        }
        l.send_done();
        assert!(!l.drained(), "one receive left");
        l.recv_done();
        assert!(l.drained());
        assert!(!l.overdue(1_000 + CLOSE_MAX_NS));
        assert!(l.overdue(1_001 + CLOSE_MAX_NS));
        // More completions than posts never underflow.
        l.recv_done();
        l.send_done();
        assert!(l.drained());
    }

    #[test]
    fn reply_buffers_follow_the_credit_buffers() {
        assert_eq!(
            reply_offset(0, 16),
            CTRL_SENDS as usize * CTRL_BYTES as usize
        );
        assert_eq!(reply_offset(3, 16) - reply_offset(2, 16), 16);
        // The control region of a connection holds exactly REPLY_DEPTH replies.
        assert_eq!(reply_offset(REPLY_DEPTH, 64) - reply_offset(0, 64), 64 * 32);
    }
}
