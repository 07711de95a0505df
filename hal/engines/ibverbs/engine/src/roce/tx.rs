//! The sending end: packets go out on the interface's connections by the lane rule
//! (packet `j` of the queue on its connection `j mod n`), each within the credits its
//! receiver granted, as SEND or WRITE with immediate into a granted slot; one completion
//! is signaled per `signal_interval` sends and at the end of each burst, and a signaled
//! completion returns every buffer posted up to it.
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ffi::{RecvBatch, SendBatch, SendOp, SendRequest, WorkCompletion};
use rtdaq_config::model::TxQueue as TxQueueConfig;
use rtdaq_core::traits::{TxBurst, TxQueue};
use rtdaq_core::{Burst, DropReason, Packet, PacketMeta, QueueCounters, QueueId};

use super::{state, CmGuard, Handoff, QueueVerbs, Setup, MAX_BATCH};
use crate::proto::{self, Op, WrKind, CTRL_MAX_SLOTS};

const CTRL_BYTES: u64 = 4 * CTRL_MAX_SLOTS as u64;
/// Longest a send waits for a connection or credits before counting `ring_full`.
pub const TX_STALL: Duration = Duration::from_secs(2);

struct Conn {
    h: Handoff,
    credits: u32,
    /// WRITE_IMM: granted remote slots.
    slots: VecDeque<u32>,
    /// Posted, not yet completed: (sequence, buffer).
    inflight: VecDeque<(u32, Packet<'static>)>,
    seq: u32,
    unsignaled: u32,
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
    conns: Vec<Option<Conn>>,
    /// Connection indices this queue serves, in lane order.
    lanes: Box<[usize]>,
    lane: usize,
    seen: u32,
    op: Op,
    interval: u32,
    sq_depth: u32,
    wcs: Box<[WorkCompletion]>,
    sbatch: SendBatch,
    rbatch: RecvBatch,
    queue: QueueId,
    busy: bool,
    /// Completion errors seen.
    pub(crate) wc_errors: u64,
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
            wcs: vec![WorkCompletion::default(); 64].into_boxed_slice(),
            sbatch: SendBatch::with_capacity(1),
            rbatch: RecvBatch::with_capacity(1),
            queue: QueueId(q as u16),
            busy: qc.busy_poll,
            wc_errors: 0,
        }
    }

    fn housekeeping(&mut self) {
        let e = self.guard.iface.epoch.load(Ordering::Acquire);
        if e == self.seen {
            return;
        }
        self.seen = e;
        for i in 0..self.lanes.len() {
            self.adopt(self.lanes[i]);
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
                let credits = match (&h.peer, self.op) {
                    (Some(p), Op::Send) => p.credits,
                    (Some(_), Op::WriteImm) => 0,
                    // A foreign peer: one message at a time, each answer a new credit.
                    (None, _) => 1,
                };
                self.conns[k] = Some(Conn {
                    h,
                    credits,
                    slots: VecDeque::with_capacity(16384),
                    inflight: VecDeque::with_capacity(self.sq_depth as usize + 1),
                    seq: 0,
                    unsignaled: 0,
                });
            }
            state::DEAD => {
                if let Some(c) = self.conns[k].take() {
                    // Sent but never confirmed: the peer may not have them.
                    for _ in 0..c.inflight.len() {
                        self.counters.record_drop(DropReason::Kernel);
                    }
                }
                if let Ok(mut c) = slot.cell.lock() {
                    c.take();
                }
                slot.state.store(state::RELEASED, Ordering::Release);
            }
            _ => {}
        }
    }

    /// Reads completions: credits and slots from the receiver, finished sends.
    fn reap(&mut self) {
        let n = match self.v.cq.poll(&mut self.wcs) {
            Ok(n) => n,
            Err(_) => {
                self.wc_errors += 1;
                return;
            }
        };
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
                WrKind::Data => {
                    while let Some((s, _)) = c.inflight.front() {
                        let done = s.wrapping_sub(idx) as i32 <= 0;
                        if !done {
                            break;
                        }
                        c.inflight.pop_front();
                    }
                }
                WrKind::CtrlRecv => {
                    let n = if c.h.peer.is_none() {
                        1
                    } else {
                        wc.imm().unwrap_or(0)
                    };
                    if self.op == Op::WriteImm && c.h.peer.is_some() {
                        let base = idx as usize * CTRL_BYTES as usize;
                        if let Some(bytes) = c.h.ctrl.owned() {
                            for j in 0..(n.min(CTRL_MAX_SLOTS) as usize) {
                                let o = base + 4 * j;
                                c.slots.push_back(u32::from_le_bytes([
                                    bytes[o],
                                    bytes[o + 1],
                                    bytes[o + 2],
                                    bytes[o + 3],
                                ]));
                            }
                        }
                    } else {
                        c.credits += n;
                    }
                    // Repost the credit receive at once.
                    self.rbatch.clear();
                    self.rbatch.push(&ffi::RecvRequest {
                        wr_id: wc.wr_id(),
                        addr: c.h.ctrl.addr() + u64::from(idx) * CTRL_BYTES,
                        len: CTRL_BYTES as u32,
                        lkey: c.h.ctrl.lkey(),
                    });
                    if c.h.id.post_recv(&mut self.rbatch).is_err() {
                        self.guard.iface.slots[k]
                            .state
                            .store(state::BROKEN, Ordering::Release);
                    }
                }
                _ => {}
            }
        }
    }

    /// Posts one packet on connection `k`; gives the buffer back when it cannot.
    fn post(
        &mut self,
        k: usize,
        buf: Packet<'static>,
        last: bool,
    ) -> Result<(), (Packet<'static>, DropReason)> {
        let Some(c) = self.conns[k].as_mut() else {
            return Err((buf, DropReason::RingFull));
        };
        let Some((addr, len)) = buf.segments().first().map(|b| (b.addr(), b.len() as u32)) else {
            return Err((buf, DropReason::Malformed));
        };
        let (op, remote_addr, rkey, imm) = match (self.op, &c.h.peer) {
            (Op::WriteImm, Some(p)) => {
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
            self.guard.iface.slots[k]
                .state
                .compare_exchange(
                    state::ACTIVE,
                    state::BROKEN,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .ok();
            return Err((buf, DropReason::Kernel));
        }
        if op == SendOp::WriteImm {
            c.slots.pop_front();
        } else {
            c.credits -= 1;
        }
        c.seq = seq.wrapping_add(1);
        c.unsignaled = if signaled { 0 } else { c.unsignaled + 1 };
        c.inflight.push_back((seq, buf));
        Ok(())
    }
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
        self.reap();
        if sent > 0 {
            self.counters.record_rx_burst(sent as u64, bytes);
        }
        sent
    }
}

impl Drop for RoceTx {
    fn drop(&mut self) {
        if self.wc_errors > 0 {
            log::warn!(
                "{} TX queue {}: {} completion error(s)",
                self.guard.iface.key,
                self.q,
                self.wc_errors
            );
        }
        for c in self.conns.iter_mut() {
            if let Some(c) = c.take() {
                c.h.id.disconnect();
            }
        }
    }
}
