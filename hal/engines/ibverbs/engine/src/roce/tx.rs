//! The sending end: packets go out on the interface's connections by the lane rule
//! (packet `j` of the queue on its connection `j mod n`), each within the credits its
//! receiver granted, as SEND or WRITE with immediate into a granted slot; one completion
//! is signaled per `signal_interval` sends and at the end of each burst, and a signaled
//! completion returns every buffer posted up to it.
//!
//! **What "sent" means.** A message counts as sent when it is posted; a posted message
//! that comes back with an error or flushed (the connection ended) is moved from sent to
//! the `kernel` drops. At the end of a run the queue first waits (up to
//! `TX_CLOSE_WAIT`) until every signaled send has completed, so the receiver holds every
//! message sent, and only then disconnects: a client that stops right after its last send
//! loses nothing and counts nothing it did not deliver.
//!
//! An ended connection (`DEAD`) stays with the queue until its outstanding work requests
//! have completed or flushed (bounded, `TX_SETTLE` / `TX_CLOSE_MAX`) and is then handed
//! back to the CM thread. Its tables are built by the CM thread ([`TxConn::new`]): the
//! queue never allocates.
//!
//! **READ (pull mode).** A message is announced in a descriptor message (its pool slot and
//! length, batched: up to [`DESC_MAX`] per message, sent at the end of each burst) within
//! the receiver's credits, and its buffer is *held* until the receiver returns the slot
//! after its RDMA READ completed; only then does it go back to the pool. At the end of a
//! run the queue waits (up to [`TX_CLOSE_WAIT`]) until every held message was pulled. On a
//! connection that ends, the held messages the receiver did not confirm are moved from
//! sent to the `kernel` drops: they were not pulled, or were pulled but their return was
//! lost with the connection (then the receiver has them and the drop is an over-count —
//! the conservative side: nothing is lost uncounted).
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ffi::{RecvBatch, SendBatch, SendOp, SendRequest, WorkCompletion};
use rtdaq_config::model::TxQueue as TxQueueConfig;
use rtdaq_core::traits::{TxBurst, TxQueue};
use rtdaq_core::{Burst, DropReason, Packet, PacketMeta, QueueCounters, QueueId};

use super::rx::CTRL_BYTES;
use super::{CmGuard, Conn, Handoff, Peer, QueueVerbs, Setup, Slot, MAX_BATCH};
use crate::proto::{
    self, Op, WrKind, CTRL_MAX_SLOTS, CTRL_RECVS, DESC_BYTES, DESC_MAX, DESC_SENDS,
};
/// Longest a send waits for a connection or credits before counting `ring_full`.
pub const TX_STALL: Duration = Duration::from_secs(2);
/// At the end of a run: longest the queue waits for its signaled sends to complete before
/// it disconnects.
pub const TX_CLOSE_WAIT: Duration = Duration::from_secs(5);
/// After an ended connection's receives are all flushed: how long its unconfirmed sends
/// may still come back flushed; the rest completed unsignaled (the peer has them).
pub const TX_SETTLE: Duration = Duration::from_millis(300);
/// Longest an ended connection waits for its flushes; what is unconfirmed then is counted
/// as dropped.
pub const TX_CLOSE_MAX: Duration = Duration::from_secs(3);
/// Most slots a receiver can have granted (its `credits`, at most 16384).
const MAX_SLOTS: usize = 16384;

/// One connection of a sending queue: built by the CM thread, owned by the queue from
/// adoption to release.
pub(crate) struct TxConn {
    /// First: dropped first (QP destroyed before the buffers below return to the pool).
    h: Handoff,
    credits: u32,
    /// WRITE_IMM: granted remote slots.
    slots: VecDeque<u32>,
    /// Posted, not yet completed: (sequence, buffer).
    inflight: VecDeque<(u32, Packet<'static>)>,
    seq: u32,
    unsignaled: u32,
    /// Sequence of the last signaled send.
    last_signaled: Option<u32>,
    /// Credit receives posted, not completed.
    recvs: u32,
    /// The CM thread saw the connection established: the peer is known.
    ready: bool,
    /// When the connection ended (ns), and when its receives were all flushed.
    closing_since: Option<u64>,
    flushed_at: Option<u64>,
    /// READ: local pool slot → the message held until the receiver returns the slot.
    held: Vec<Option<Packet<'static>>>,
    held_n: u32,
    /// READ: free descriptor buffers, the one being filled and its entries, and
    /// descriptor sends posted, not completed.
    desc_free: Vec<u32>,
    desc_cur: Option<u32>,
    desc_n: u32,
    desc_inflight: u32,
}

impl TxConn {
    /// Builds a connection's tables (CM thread; cold). `recvs`: credit receives posted;
    /// `slot_count`: buffers in the queue's pool.
    pub(crate) fn new(h: Handoff, s: &Setup, slot_count: usize, recvs: u32) -> Box<Self> {
        let read = s.op == Op::Read;
        Box::new(TxConn {
            h,
            credits: 0,
            slots: VecDeque::with_capacity(if read { 0 } else { MAX_SLOTS }),
            inflight: VecDeque::with_capacity(s.sq_depth as usize + 1),
            seq: 0,
            unsignaled: 0,
            last_signaled: None,
            recvs,
            ready: false,
            closing_since: None,
            flushed_at: None,
            held: if read {
                (0..slot_count).map(|_| None).collect()
            } else {
                Vec::new()
            },
            held_n: 0,
            desc_free: if read {
                (0..DESC_SENDS).collect()
            } else {
                Vec::new()
            },
            desc_cur: None,
            desc_n: 0,
            desc_inflight: 0,
        })
    }

    /// A signaled send is still outstanding (its completion will come); READ: a message
    /// is not pulled yet.
    fn awaits_signal(&self) -> bool {
        if self.held_n > 0 || self.desc_inflight > 0 {
            return true;
        }
        match (self.last_signaled, self.inflight.front()) {
            (Some(l), Some(&(front, _))) => (l.wrapping_sub(front) as i32) >= 0,
            _ => false,
        }
    }
}

/// What to do with an ended connection now (pure; unit-tested).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settle {
    /// Flushes may still come.
    Wait,
    /// Release; the sends still unconfirmed completed unsignaled (delivered).
    Delivered,
    /// Release; the sends still unconfirmed are counted as dropped.
    Dropped,
}

fn settle_rule(
    inflight: usize,
    recvs: u32,
    since_ns: u64,
    flushed_ns: Option<u64>,
    now_ns: u64,
) -> Settle {
    if recvs == 0 && inflight == 0 {
        return Settle::Delivered;
    }
    if let Some(f) = flushed_ns {
        if recvs == 0 && now_ns.saturating_sub(f) >= TX_SETTLE.as_nanos() as u64 {
            return Settle::Delivered;
        }
    }
    if now_ns.saturating_sub(since_ns) >= TX_CLOSE_MAX.as_nanos() as u64 {
        return Settle::Dropped;
    }
    Settle::Wait
}

/// Packets to send: pool buffers filled through [`TxBurst`].
pub struct RoceTxBurst {
    pkts: Burst<'static, MAX_BATCH>,
}

impl TxBurst for RoceTxBurst {
    fn len(&self) -> usize {
        self.pkts.len()
    }
    fn packet_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        self.pkts
            .packet_mut(i)
            .expect("RoceTxBurst: index out of range")
            .segments_mut()
            .first_mut()?
            .slot_mut()
    }
    fn set_len(&mut self, i: usize, len: usize) {
        let p = self
            .pkts
            .packet_mut(i)
            .expect("RoceTxBurst: index out of range");
        if let Some(b) = p.segments_mut().first_mut() {
            b.set_len(len);
        }
        p.meta_mut().len = len as u32;
    }
}

/// A RoCE transmit queue.
pub struct RoceTx {
    v: QueueVerbs,
    counters: &'static QueueCounters,
    guard: Arc<CmGuard>,
    q: usize,
    conns: Vec<Option<Box<TxConn>>>,
    /// Connection indices this queue serves, in lane order.
    lanes: Box<[usize]>,
    lane: usize,
    seen: u32,
    op: Op,
    interval: u32,
    sq_depth: u32,
    /// Connections ended and draining.
    closing: u32,
    /// The queue is being dropped: it adopts nothing new and hands nothing back (the CM
    /// thread must not reconnect).
    ending: bool,
    wcs: Box<[WorkCompletion]>,
    sbatch: SendBatch,
    rbatch: RecvBatch,
    queue: QueueId,
    busy: bool,
    /// Completion errors (not flushes) not yet added to the interface's counters.
    wc_errors: u64,
    errors_total: u64,
    forced: u64,
}

impl RoceTx {
    pub(crate) fn new(
        s: &Setup,
        q: usize,
        nq: usize,
        v: QueueVerbs,
        counters: &'static QueueCounters,
        guard: Arc<CmGuard>,
        qc: &TxQueueConfig,
    ) -> Self {
        let n = s.conns as usize;
        RoceTx {
            v,
            counters,
            guard,
            q,
            conns: (0..n).map(|_| None).collect(),
            lanes: (q..n).step_by(nq.max(1)).collect(),
            lane: 0,
            seen: u32::MAX,
            op: s.op,
            interval: s.signal_interval.max(1),
            sq_depth: s.sq_depth,
            closing: 0,
            ending: false,
            wcs: vec![WorkCompletion::default(); 64].into_boxed_slice(),
            sbatch: SendBatch::with_capacity(1),
            rbatch: RecvBatch::with_capacity(1),
            queue: QueueId(q as u16),
            busy: qc.busy_poll,
            wc_errors: 0,
            errors_total: 0,
            forced: 0,
        }
    }

    fn slot(&self, k: usize) -> &Slot {
        &self.guard.iface.slots[k]
    }

    fn housekeeping(&mut self) {
        let e = self.guard.iface.epoch.load(Ordering::Acquire);
        if e != self.seen {
            self.seen = e;
            for i in 0..self.lanes.len() {
                self.sync(self.lanes[i]);
            }
        }
        if self.closing > 0 {
            let now = now_ns();
            for i in 0..self.lanes.len() {
                self.settle(self.lanes[i], now);
            }
        }
    }

    /// Adopts a published connection, notices establishment and death.
    fn sync(&mut self, k: usize) {
        if self.conns[k].is_none() {
            if self.ending {
                return;
            }
            match self.slot(k).adopt() {
                Some((Conn::Tx(c), dead)) => {
                    self.conns[k] = Some(c);
                    if dead {
                        self.close(k);
                    }
                }
                Some((other, _)) => self.slot(k).release(other),
                None => return,
            }
        }
        let ready = self.slot(k).ready.load(Ordering::Acquire);
        let op = self.op;
        if let Some(c) = self.conns[k].as_mut() {
            if !c.ready && ready && c.closing_since.is_none() {
                c.ready = true;
                if c.h.peer == Peer::Unknown {
                    c.h.peer = self.guard.iface.slots[k].peer_now();
                }
                c.credits += match (c.h.peer, op) {
                    (Peer::Rtdaq(p), Op::Send | Op::Read) => p.credits,
                    (Peer::Rtdaq(_), Op::WriteImm) | (Peer::Unknown, _) => 0,
                    // A foreign peer: one message at a time, each answer a new credit.
                    (Peer::Foreign, _) => 1,
                };
            }
        }
        if self.slot(k).is_dead() {
            self.close(k);
        }
        self.settle(k, now_ns());
    }

    fn close(&mut self, k: usize) {
        let Some(c) = self.conns[k].as_mut() else {
            return;
        };
        if c.closing_since.is_none() {
            c.closing_since = Some(now_ns());
            self.closing += 1;
        }
    }

    /// Releases an ended connection once [`settle_rule`] says so, counting its sends that
    /// were never confirmed as dropped: hands it back to the CM thread (dropped here at
    /// the end of the run). True when connection `k` is gone.
    fn settle(&mut self, k: usize, now: u64) -> bool {
        let Some(c) = self.conns[k].as_mut() else {
            return true;
        };
        let Some(since) = c.closing_since else {
            return false;
        };
        if c.recvs == 0 && c.flushed_at.is_none() {
            c.flushed_at = Some(now);
        }
        if self.op == Op::Read {
            // Every descriptor send is signaled: wait until they and the credit receives
            // have all completed or flushed (a slot return that arrived is then read).
            let rule = read_settle_rule(c.desc_inflight, c.recvs, since, now);
            if rule == Settle::Wait {
                return false;
            }
            if rule == Settle::Dropped {
                self.forced += 1;
            }
            // Not confirmed as pulled: moved from sent to the drops.
            let (mut n, mut bytes) = (0u64, 0u64);
            for h in c.held.iter_mut() {
                if let Some(p) = h.take() {
                    n += 1;
                    bytes += p.bytes() as u64;
                }
            }
            c.held_n = 0;
            if n > 0 {
                self.counters
                    .reclassify_as_drop(DropReason::Kernel, n, bytes);
            }
            if let Some(c) = self.conns[k].take() {
                self.closing = self.closing.saturating_sub(1);
                if !self.ending {
                    self.guard.iface.slots[k].release(Conn::Tx(c));
                }
            }
            return true;
        }
        let rule = settle_rule(c.inflight.len(), c.recvs, since, c.flushed_at, now);
        if rule == Settle::Wait {
            return false;
        }
        if rule == Settle::Dropped {
            self.forced += 1;
            let (mut n, mut bytes) = (0u64, 0u64);
            for (_, p) in c.inflight.iter() {
                n += 1;
                bytes += p.bytes() as u64;
            }
            if n > 0 {
                self.counters
                    .reclassify_as_drop(DropReason::Kernel, n, bytes);
            }
        }
        // Delivered or counted: the buffers go back to the pool.
        c.inflight.clear();
        if let Some(c) = self.conns[k].take() {
            self.closing = self.closing.saturating_sub(1);
            if !self.ending {
                self.guard.iface.slots[k].release(Conn::Tx(c));
            }
        }
        true
    }

    /// Reads completions: credits and slots from the receiver, finished sends. A send that
    /// completes in error or flushed is moved from sent to the `kernel` drops.
    fn reap(&mut self) {
        let n = match self.v.cq.poll(&mut self.wcs) {
            Ok(n) => n,
            Err(_) => {
                self.wc_errors += 1;
                return;
            }
        };
        let (mut dropped, mut dropped_bytes) = (0u64, 0u64);
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
                self.sync(k);
            }
            let Some(c) = self.conns[k].as_mut().filter(|c| c.h.gen == gen) else {
                continue;
            };
            if !wc.ok() {
                if !wc.flushed() {
                    self.wc_errors += 1;
                }
                if c.closing_since.is_none() {
                    self.guard.iface.slots[k].broken();
                }
            }
            match kind {
                WrKind::Data => {
                    // In order: the sends before `idx` completed (unsignaled ones without
                    // a completion of their own); `idx` itself as its status says.
                    while let Some(&(s, _)) = c.inflight.front() {
                        if (s.wrapping_sub(idx) as i32) > 0 {
                            break;
                        }
                        if let Some((s, p)) = c.inflight.pop_front() {
                            if s == idx && !wc.ok() {
                                dropped += 1;
                                dropped_bytes += p.bytes() as u64;
                            }
                        }
                    }
                }
                WrKind::Desc => {
                    c.desc_inflight = c.desc_inflight.saturating_sub(1);
                    if c.desc_free.len() < c.desc_free.capacity() {
                        c.desc_free.push(idx);
                    }
                }
                WrKind::CtrlRecv => {
                    c.recvs = c.recvs.saturating_sub(1);
                    if !wc.ok() {
                        continue;
                    }
                    if self.op == Op::Read {
                        // Slots the receiver pulled: their messages are delivered (also on
                        // a closing connection: returns that arrived before the flush).
                        let n = wc.imm().unwrap_or(0).min(CTRL_MAX_SLOTS) as usize;
                        let base = idx as usize * CTRL_BYTES as usize;
                        if let Some(bytes) = c.h.ctrl.owned() {
                            let b = &bytes[base..base + CTRL_BYTES as usize];
                            for j in 0..n {
                                let held = proto::get_slot(b, j)
                                    .and_then(|s| c.held.get_mut(s as usize))
                                    .and_then(Option::take);
                                if held.is_some() {
                                    c.held_n -= 1;
                                    c.credits += 1;
                                }
                            }
                        }
                    }
                    if c.closing_since.is_some() {
                        continue;
                    }
                    // An rtdaq credit message carries its count as immediate; a foreign
                    // peer's answer (no immediate) is one credit.
                    let n = wc.imm();
                    if self.op == Op::WriteImm {
                        let n = n.unwrap_or(0);
                        let base = idx as usize * CTRL_BYTES as usize;
                        if let Some(bytes) = c.h.ctrl.owned() {
                            for j in 0..(n.min(CTRL_MAX_SLOTS) as usize) {
                                let o = base + 4 * j;
                                if c.slots.len() < MAX_SLOTS {
                                    c.slots.push_back(u32::from_le_bytes([
                                        bytes[o],
                                        bytes[o + 1],
                                        bytes[o + 2],
                                        bytes[o + 3],
                                    ]));
                                }
                            }
                        }
                    } else if self.op == Op::Send {
                        c.credits += n.unwrap_or(1);
                    }
                    // Repost the credit receive at once.
                    self.rbatch.clear();
                    self.rbatch.push(&ffi::RecvRequest {
                        wr_id: wc.wr_id(),
                        addr: c.h.ctrl.addr() + u64::from(idx) * CTRL_BYTES,
                        len: CTRL_BYTES as u32,
                        lkey: c.h.ctrl.lkey(),
                    });
                    if c.h.id.post_recv(&mut self.rbatch).is_ok() {
                        c.recvs += 1;
                    } else {
                        self.guard.iface.slots[k].broken();
                    }
                }
                _ => {}
            }
        }
        if dropped > 0 {
            self.counters
                .reclassify_as_drop(DropReason::Kernel, dropped, dropped_bytes);
        }
        if n > 0 && self.closing > 0 {
            let now = now_ns();
            for i in 0..self.lanes.len() {
                self.settle(self.lanes[i], now);
            }
        }
        if self.wc_errors > 0 {
            self.errors_total += self.wc_errors;
            self.guard
                .iface
                .n
                .wc_errors
                .fetch_add(self.wc_errors, Ordering::Relaxed);
            self.wc_errors = 0;
        }
    }

    /// Posts one packet on connection `k`; gives the buffer back when it cannot.
    fn post(
        &mut self,
        k: usize,
        buf: Packet<'static>,
        last: bool,
    ) -> Result<(), (Packet<'static>, DropReason)> {
        if self.op == Op::Read {
            return self.post_read(k, buf, last);
        }
        let Some(c) = self.conns[k]
            .as_mut()
            .filter(|c| c.ready && c.closing_since.is_none())
        else {
            return Err((buf, DropReason::RingFull));
        };
        let Some((addr, len)) = buf.segments().first().map(|b| (b.addr(), b.len() as u32)) else {
            return Err((buf, DropReason::Malformed));
        };
        let (op, remote_addr, rkey, imm) = match (self.op, &c.h.peer) {
            (Op::WriteImm, Peer::Rtdaq(p)) => {
                if len > p.slot_size {
                    return Err((buf, DropReason::TooLarge));
                }
                let Some(&slot) = c.slots.front() else {
                    return Err((buf, DropReason::RingFull));
                };
                (
                    SendOp::WriteImm,
                    p.base + u64::from(slot) * u64::from(p.slot_size),
                    p.rkey,
                    slot,
                )
            }
            _ => {
                if c.credits == 0 {
                    return Err((buf, DropReason::RingFull));
                }
                (SendOp::Send, 0, 0, 0)
            }
        };
        if c.inflight.len() as u32 + 1 >= self.sq_depth {
            return Err((buf, DropReason::RingFull));
        }
        let signaled = c.unsignaled + 1 >= self.interval
            || last
            || c.inflight.len() as u32 + 2 >= self.sq_depth;
        let seq = c.seq;
        self.sbatch.clear();
        self.sbatch.push(&SendRequest {
            wr_id: proto::wr_id(WrKind::Data, k as u16, c.h.gen, seq),
            op,
            addr,
            len,
            lkey: self.v.mr.lkey(),
            imm,
            remote_addr,
            rkey,
            signaled,
            inline: false,
        });
        if c.h.id.post_send(&mut self.sbatch).is_err() {
            self.guard.iface.slots[k].broken();
            return Err((buf, DropReason::Kernel));
        }
        if op == SendOp::WriteImm {
            c.slots.pop_front();
        } else {
            c.credits -= 1;
        }
        c.seq = seq.wrapping_add(1);
        c.unsignaled = if signaled { 0 } else { c.unsignaled + 1 };
        if signaled {
            c.last_signaled = Some(seq);
        }
        c.inflight.push_back((seq, buf));
        Ok(())
    }

    /// READ: announces one packet on connection `k` (an entry in the descriptor being
    /// filled, sent when full or at `last`) and holds its buffer until the receiver
    /// returns the slot. Gives the buffer back when it cannot.
    fn post_read(
        &mut self,
        k: usize,
        buf: Packet<'static>,
        last: bool,
    ) -> Result<(), (Packet<'static>, DropReason)> {
        let Some(c) = self.conns[k]
            .as_mut()
            .filter(|c| c.ready && c.closing_since.is_none())
        else {
            return Err((buf, DropReason::RingFull));
        };
        if !matches!(c.h.peer, Peer::Rtdaq(_)) {
            // Pull mode needs an rtdaq receiver (the CM refuses other peers).
            return Err((buf, DropReason::Malformed));
        }
        let Some((slot, len)) = buf
            .segments()
            .first()
            .map(|b| (b.index() as usize, b.len() as u32))
        else {
            return Err((buf, DropReason::Malformed));
        };
        if slot >= c.held.len() || c.held[slot].is_some() {
            return Err((buf, DropReason::Malformed));
        }
        if c.credits == 0 {
            // Announce what is waiting, or the receiver never returns credits.
            if !flush_desc(&mut self.sbatch, c, k) {
                self.guard.iface.slots[k].broken();
            }
            return Err((buf, DropReason::RingFull));
        }
        let d = match c.desc_cur {
            Some(d) => d,
            None => {
                let Some(d) = c.desc_free.pop() else {
                    return Err((buf, DropReason::RingFull));
                };
                c.desc_cur = Some(d);
                c.desc_n = 0;
                d
            }
        };
        let off = desc_offset(d) as usize;
        let written = c.h.ctrl.owned_mut().is_some_and(|b| {
            proto::put_desc(
                &mut b[off..off + DESC_BYTES as usize],
                c.desc_n as usize,
                slot as u32,
                len,
            )
        });
        if !written {
            return Err((buf, DropReason::Malformed));
        }
        c.desc_n += 1;
        c.credits -= 1;
        c.held[slot] = Some(buf);
        c.held_n += 1;
        if (last || c.desc_n >= DESC_MAX) && !flush_desc(&mut self.sbatch, c, k) {
            // Counted as sent; the connection ends and its held messages become drops.
            self.guard.iface.slots[k].broken();
        }
        Ok(())
    }

    /// READ: sends every descriptor being filled (end of a burst, end of the run).
    fn flush_all(&mut self) {
        if self.op != Op::Read {
            return;
        }
        for i in 0..self.lanes.len() {
            let k = self.lanes[i];
            let Some(c) = self.conns[k].as_mut().filter(|c| c.closing_since.is_none()) else {
                continue;
            };
            if !flush_desc(&mut self.sbatch, c, k) {
                self.guard.iface.slots[k].broken();
            }
        }
    }
}

/// Offset of descriptor buffer `d` in a READ sender's control region (after the credit
/// receives).
fn desc_offset(d: u32) -> u64 {
    u64::from(CTRL_RECVS) * CTRL_BYTES + u64::from(d) * DESC_BYTES
}

/// READ: posts the descriptor being filled on `c` (a signaled SEND with immediate = its
/// entries). False when posting failed.
fn flush_desc(sbatch: &mut SendBatch, c: &mut TxConn, k: usize) -> bool {
    let Some(d) = c.desc_cur.take() else {
        return true;
    };
    let n = std::mem::take(&mut c.desc_n);
    if n == 0 {
        c.desc_free.push(d);
        return true;
    }
    sbatch.clear();
    sbatch.push(&SendRequest::signaled_send_imm(
        proto::wr_id(WrKind::Desc, k as u16, c.h.gen, d),
        c.h.ctrl.addr() + desc_offset(d),
        8 * n,
        c.h.ctrl.lkey(),
        n,
    ));
    if c.h.id.post_send(sbatch).is_ok() {
        c.desc_inflight += 1;
        true
    } else {
        c.desc_free.push(d);
        false
    }
}

/// READ: what to do with an ended connection now. Every descriptor send is signaled, so
/// waiting for them and the credit receives is exact; the bound only guards against a
/// device that never flushes.
fn read_settle_rule(desc_inflight: u32, recvs: u32, since_ns: u64, now_ns: u64) -> Settle {
    if desc_inflight == 0 && recvs == 0 {
        return Settle::Delivered;
    }
    if now_ns.saturating_sub(since_ns) >= TX_CLOSE_MAX.as_nanos() as u64 {
        return Settle::Dropped;
    }
    Settle::Wait
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl TxQueue for RoceTx {
    type Burst = RoceTxBurst;

    fn new_burst(&self) -> Self::Burst {
        RoceTxBurst {
            pkts: Burst::new(self.queue),
        }
    }

    fn reserve(&mut self, burst: &mut Self::Burst, n: usize) -> usize {
        let want = n.min(MAX_BATCH - burst.pkts.len());
        for _ in 0..want {
            let Some(b) = self.v.pool.get() else { break };
            let meta = PacketMeta {
                queue: self.queue,
                ..PacketMeta::default()
            };
            if burst.pkts.push(Packet::single(b, meta)).is_err() {
                break;
            }
        }
        burst.pkts.len()
    }

    fn send(&mut self, burst: &mut Self::Burst) -> usize {
        self.housekeeping();
        self.reap();
        let total = burst.pkts.len();
        let mut sent = 0usize;
        let mut bytes = 0u64;
        let nl = self.lanes.len().max(1);
        let mut i = 0usize;
        // Packets leave in order; each is tried until TX_STALL passes.
        let pkts = core::mem::replace(&mut burst.pkts, Burst::new(self.queue));
        for p in pkts {
            let k = self.lanes[self.lane % nl];
            self.lane = self.lane.wrapping_add(1);
            i += 1;
            let last = i == total || (total - i) < nl;
            let mut buf = p;
            let mut start: Option<Instant> = None;
            loop {
                let len = buf.bytes() as u64;
                match self.post(k, buf, last) {
                    Ok(()) => {
                        sent += 1;
                        bytes += len;
                        break;
                    }
                    Err((b, DropReason::RingFull)) => {
                        let t0 = *start.get_or_insert_with(Instant::now);
                        if t0.elapsed() >= TX_STALL {
                            self.counters.record_drop(DropReason::RingFull);
                            drop(b);
                            break;
                        }
                        buf = b;
                        self.housekeeping();
                        self.reap();
                        if self.busy {
                            core::hint::spin_loop();
                        } else {
                            // Never spin without busy_poll: under SCHED_FIFO a spinning
                            // thread starves its core (the receiver may be there).
                            std::thread::sleep(Duration::from_micros(50));
                        }
                    }
                    Err((b, why)) => {
                        self.counters.record_drop(why);
                        drop(b);
                        break;
                    }
                }
            }
        }
        self.flush_all();
        self.reap();
        if sent > 0 {
            self.counters.record_rx_burst(sent as u64, bytes);
        }
        sent
    }
}

impl Drop for RoceTx {
    /// The end of the run: waits (up to `TX_CLOSE_WAIT`) until every signaled send has
    /// completed, so the receiver holds every message sent before the disconnect; then
    /// disconnects and accounts for what was never confirmed (flushed: dropped; completed
    /// unsignaled: delivered), up to `TX_CLOSE_MAX`.
    fn drop(&mut self) {
        self.ending = true;
        self.flush_all();
        let start = Instant::now();
        while start.elapsed() < TX_CLOSE_WAIT {
            self.housekeeping();
            self.reap();
            let waiting = self
                .conns
                .iter()
                .flatten()
                .any(|c| c.closing_since.is_none() && c.awaits_signal());
            if !waiting {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let now = now_ns();
        for c in self.conns.iter_mut().flatten() {
            c.h.id.disconnect();
            if c.closing_since.is_none() {
                c.closing_since = Some(now);
                self.closing += 1;
            }
        }
        // Released here (`ending`), not handed back: the CM thread must not reconnect.
        loop {
            self.reap();
            let now = now_ns();
            let mut open = 0;
            for i in 0..self.lanes.len() {
                if !self.settle(self.lanes[i], now) {
                    open += 1;
                }
            }
            if open == 0 {
                break;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        let n = &self.guard.iface.n;
        n.forced_releases.fetch_add(self.forced, Ordering::Relaxed);
        if self.errors_total > 0 {
            log::warn!(
                "{} TX queue {}: {} completion error(s)",
                self.guard.iface.key,
                self.q,
                self.errors_total
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn an_ended_connection_waits_for_its_flushes() {
        // Nothing outstanding: release at once.
        assert_eq!(settle_rule(0, 0, 0, Some(0), 0), Settle::Delivered);
        // Credit receives not flushed yet: wait, however long ago the sends were.
        assert_eq!(settle_rule(3, 5, 0, None, 100 * MS), Settle::Wait);
        // Receives flushed; sends unconfirmed for TX_SETTLE after that: they completed
        // unsignaled (a flush always completes, signaled or not).
        assert_eq!(settle_rule(3, 0, 0, Some(10 * MS), 200 * MS), Settle::Wait);
        assert_eq!(
            settle_rule(3, 0, 0, Some(10 * MS), 310 * MS),
            Settle::Delivered
        );
        // No flush within TX_CLOSE_MAX: whatever is unconfirmed is counted as dropped.
        assert_eq!(settle_rule(3, 2, 0, None, 3_000 * MS), Settle::Dropped);
    }

    #[test]
    fn an_ended_read_connection_waits_for_its_descriptors_and_returns() {
        assert_eq!(read_settle_rule(0, 0, 0, 0), Settle::Delivered);
        assert_eq!(read_settle_rule(1, 0, 0, 100 * MS), Settle::Wait);
        assert_eq!(read_settle_rule(0, 3, 0, 2_999 * MS), Settle::Wait);
        assert_eq!(read_settle_rule(0, 3, 0, 3_000 * MS), Settle::Dropped);
    }

    #[test]
    fn descriptor_buffers_follow_the_credit_receives() {
        assert_eq!(desc_offset(0), u64::from(CTRL_RECVS) * CTRL_BYTES);
        assert_eq!(
            desc_offset(DESC_SENDS) - desc_offset(0),
            u64::from(DESC_SENDS) * DESC_BYTES
        );
    }
}
