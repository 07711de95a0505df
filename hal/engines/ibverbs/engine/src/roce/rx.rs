//! The receiving end: completions polled in batches into bursts, receives reposted from
//! the pool, credits returned in batches (so the sender never meets an empty receive
//! queue: no receiver-not-ready).
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ffi::{RecvBatch, SendBatch, SendOp, SendRequest, WcKind, WorkCompletion};
use rtdaq_config::model::RxQueue as RxQueueConfig;
use rtdaq_core::traits::RxQueue;
use rtdaq_core::{Buf, Burst, ConnId, DropReason, FlowId, PacketMeta, QueueCounters, QueueId};

use super::{recv_req, state, CmGuard, Handoff, QueueVerbs, Setup, MAX_BATCH};
use crate::proto::{self, Op, WrKind, CTRL_MAX_SLOTS, CTRL_SENDS};

const CTRL_BYTES: u64 = 4 * CTRL_MAX_SLOTS as u64;

struct Conn {
    h: Handoff,
    /// SEND mode: receive index → its buffer (None: not posted).
    posted: Vec<Option<Buf<'static>>>,
    /// SEND mode: receive indices waiting for a buffer.
    empty: Vec<u32>,
    /// WRITE_IMM mode: pool slot → the granted buffer.
    granted: Vec<Option<Buf<'static>>>,
    /// Credits (SEND) or slots (WRITE_IMM) not yet announced.
    pending: Vec<u32>,
    pending_n: u32,
    /// Free credit-message buffers.
    ctrl_free: Vec<u32>,
}

/// How long a completion may wait for its connection to be published (see `RoceRx::early`).
const EARLY_MAX_NS: u64 = 2_000_000_000;

/// A RoCE receive queue.
pub struct RoceRx {
    v: QueueVerbs,
    counters: &'static QueueCounters,
    guard: Arc<CmGuard>,
    q: usize,
    nq: usize,
    conns: Vec<Option<Conn>>,
    seen: u32,
    op: Op,
    credits: u32,
    batch_credit: u32,
    wcs: Box<[WorkCompletion]>,
    /// Completions of a connection the CM thread has not published yet: a peer may send its
    /// first message as soon as *it* sees the connection established, before our CM thread
    /// handles our ESTABLISHED event. Kept (bounded) and replayed once the connection is
    /// adopted, instead of being lost.
    early: Vec<WorkCompletion>,
    /// When `early` became non-empty (ns); entries older than [`EARLY_MAX_NS`] are stale
    /// (a connection that never got published) and dropped as completion errors.
    early_since: u64,
    rbatch: RecvBatch,
    sbatch: SendBatch,
    queue: QueueId,
    batch: usize,
    busy: bool,
    timeout: Duration,
    /// Completion errors seen (a peer vanished mid-stream, or a protocol error).
    pub(crate) wc_errors: u64,
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
            nq,
            conns: (0..n).map(|_| None).collect(),
            seen: u32::MAX,
            op: s.op,
            credits: s.credits,
            batch_credit: proto::credit_batch(s.credits),
            wcs: vec![WorkCompletion::default(); 64].into_boxed_slice(),
            early: Vec::with_capacity(64),
            early_since: 0,
            rbatch: RecvBatch::with_capacity(s.credits as usize),
            sbatch: SendBatch::with_capacity(1),
            queue: QueueId(q as u16),
            batch: (qc.batch_size as usize).clamp(1, MAX_BATCH),
            busy: qc.busy_poll,
            timeout: Duration::from_micros(u64::from(qc.timeout_us)),
            wc_errors: 0,
        }
    }

    /// Takes published connections, returns dead ones. Never allocates after the first
    /// adoption of a slot (its tables are built then: cold, once per connection).
    fn housekeeping(&mut self) {
        let f = &self.guard.iface;
        let e = f.epoch.load(Ordering::Acquire);
        if e == self.seen {
            return;
        }
        self.seen = e;
        for k in (self.q..self.conns.len()).step_by(self.nq.max(1)) {
            self.adopt(k);
        }
    }

    fn adopt(&mut self, k: usize) {
        let slot = &self.guard.iface.slots[k];
        match slot.state.load(Ordering::Acquire) {
            state::PUBLISHED => {
                let Some(h) = slot.cell.lock().ok().and_then(|mut c| c.take()) else {
                    return;
                };
                slot.state.store(state::ACTIVE, Ordering::Release);
                let mut c = Conn {
                    posted: Vec::new(),
                    empty: Vec::with_capacity(self.credits as usize),
                    granted: Vec::new(),
                    pending: Vec::with_capacity(self.credits as usize),
                    pending_n: 0,
                    ctrl_free: (0..CTRL_SENDS).collect(),
                    h,
                };
                c.posted = std::mem::take(&mut c.h.recvs);
                if self.op == Op::WriteImm {
                    c.granted = (0..self.v.pool.slot_count()).map(|_| None).collect();
                    c.pending_n = self.credits;
                }
                self.conns[k] = Some(c);
                if self.op == Op::WriteImm {
                    self.grant(k);
                }
            }
            state::DEAD => {
                // Dropping the connection returns its buffers: the QP is in the error
                // state (disconnected), so the HCA no longer writes them.
                self.conns[k] = None;
                if let Ok(mut c) = slot.cell.lock() {
                    c.take();
                }
                slot.state.store(state::RELEASED, Ordering::Release);
            }
            _ => {}
        }
    }

    /// WRITE_IMM: grants up to `pending_n` slots (a zero-length receive posted for each,
    /// before the grant goes out). SEND: reposts empty receives. Then announces credits.
    fn grant(&mut self, k: usize) {
        let Some(c) = self.conns[k].as_mut() else {
            return;
        };
        let gen = c.h.gen;
        let lkey = self.v.mr.lkey();
        self.rbatch.clear();
        if self.op == Op::WriteImm {
            while c.pending_n > 0
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
        if !self.rbatch.is_empty() && c.h.id.post_recv(&mut self.rbatch).is_err() {
            self.guard.iface.slots[k]
                .state
                .store(state::BROKEN, Ordering::Release);
            return;
        }
        // Announce once a batch of credits is due (or everything, at the start).
        let due = c.pending.len() as u32 >= self.batch_credit.min(self.credits);
        if !due || c.h.peer.is_none() {
            if c.h.peer.is_none() {
                c.pending.clear();
            }
            return;
        }
        let Some(buf) = c.ctrl_free.pop() else { return };
        let n = (c.pending.len() as u32).min(CTRL_MAX_SLOTS);
        let (addr, len) = if self.op == Op::WriteImm {
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
        self.sbatch.push(&SendRequest {
            wr_id: proto::wr_id(WrKind::CtrlSend, k as u16, gen, buf),
            op: SendOp::SendImm,
            addr,
            len,
            lkey: c.h.ctrl.lkey(),
            imm: n,
            remote_addr: 0,
            rkey: 0,
            signaled: true,
            inline: false,
        });
        if c.h.id.post_send(&mut self.sbatch).is_err() {
            self.guard.iface.slots[k]
                .state
                .store(state::BROKEN, Ordering::Release);
        }
    }

    fn drain(&mut self, burst: &mut Burst<'static, MAX_BATCH>) -> usize {
        let room = (self.batch.min(MAX_BATCH))
            .saturating_sub(burst.len())
            .min(self.wcs.len());
        if room == 0 {
            return 0;
        }
        // Replay completions kept for connections that were not published yet.
        let m = self.early.len().min(room);
        if m > 0 && now_ns().saturating_sub(self.early_since) > EARLY_MAX_NS {
            self.wc_errors += self.early.len() as u64;
            self.early.clear();
        }
        let m = m.min(self.early.len());
        for (w, e) in self.wcs.iter_mut().zip(self.early.drain(..m)) {
            *w = e;
        }
        let n = m + match self.v.cq.poll(&mut self.wcs[m..room]) {
            Ok(n) => n,
            Err(_) => {
                self.wc_errors += 1;
                0
            }
        };
        let mut got = 0usize;
        let mut bytes = 0u64;
        let mut touched = 0u64;
        let ts = if n > 0 { now_ns() } else { 0 };
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
                self.adopt(k);
            }
            let Some(c) = self.conns[k].as_mut().filter(|c| c.h.gen == gen) else {
                if wc.ok() && self.early.len() < self.early.capacity() {
                    if self.early.is_empty() {
                        self.early_since = now_ns();
                    }
                    self.early.push(wc);
                }
                continue;
            };
            if !wc.ok() {
                if !wc.flushed() {
                    self.wc_errors += 1;
                }
                self.guard.iface.slots[k]
                    .state
                    .compare_exchange(
                        state::ACTIVE,
                        state::BROKEN,
                        Ordering::AcqRel,
                        Ordering::Relaxed,
                    )
                    .ok();
                continue;
            }
            match kind {
                WrKind::Recv => {
                    let buf = match (self.op, wc.kind()) {
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
                    let len = (wc.byte_len() as usize).min(b.capacity());
                    b.set_len(len);
                    let meta = PacketMeta {
                        len: len as u32,
                        flow: FlowId::NONE,
                        queue: self.queue,
                        rx_timestamp_ns: ts,
                        conn: ConnId(k as u32 + 1),
                    };
                    if burst.push_single(b, meta).is_err() {
                        self.counters.record_drop(DropReason::RingFull);
                        continue;
                    }
                    got += 1;
                    bytes += len as u64;
                    touched |= 1 << (k % 64);
                }
                WrKind::CtrlSend => c.ctrl_free.push(idx),
                _ => {}
            }
        }
        if got > 0 {
            self.counters.record_rx_burst(got as u64, bytes);
        }
        if touched != 0 || n > 0 {
            for k in (self.q..self.conns.len()).step_by(self.nq.max(1)) {
                if self.conns[k].is_some() {
                    self.grant(k);
                }
            }
        }
        got
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
        if self.wc_errors > 0 {
            log::warn!(
                "{} RX queue {}: {} completion error(s)",
                self.guard.iface.key,
                self.q,
                self.wc_errors
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
