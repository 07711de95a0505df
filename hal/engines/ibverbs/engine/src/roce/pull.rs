//! READ (pull mode, `engine.ibverbs.op = "read"`), the receiving end (a child module of
//! `rx.rs`). Protocol in `proto.rs`.
//!
//! The sender announces each message in a descriptor message (its pool slot and length);
//! a descriptor's entries join the connection's to-do list (`on_desc`) and its receive
//! is posted again at once. `RoceRx::pull` posts an RDMA READ for each entry, from
//! `base + slot × slot_size` of the sender's pool (its hello) into one of our pool buffers
//! (zero copy on this side), at most [`READ_DEPTH`] per connection, every READ signaled:
//! the send queue completes in order, so messages are delivered in order (`take_read`).
//! Each slot pulled is returned to the sender in a credit message (the WRITE_IMM grant
//! format), in batches of `ceil(credits / 32)` and at once when nothing else is in flight
//! ([`proto::return_due`]), so a sender at the end of its run never waits for a batch.
//!
//! Ended connection: READs in flight complete (delivered) or flush (buffer back to the
//! pool); announced but unread messages are not returned, and the sender counts them as
//! dropped. Nothing here allocates: the to-do list, the READ queue and the returns are
//! sized by the CM thread (`credits`, [`READ_DEPTH`], `max(credits, CTRL_MAX_SLOTS)`).
use ffi::{RecvBatch, SendOp, SendRequest, WorkCompletion};
use rtdaq_core::{Buf, DropReason, QueueCounters};

use super::{RoceRx, RxConn, CTRL_BYTES};
use crate::proto::{self, WrKind, CTRL_MAX_SLOTS, DESC_BYTES, DESC_MAX, READ_DEPTH};
use crate::roce::Peer;

/// A descriptor message arrived (`wc`, a receive of connection `c`): its entries join the
/// to-do list and the receive is posted again. False when the repost failed (the
/// connection is broken). On an ended connection the entries are ignored (its QP can no
/// longer read; the sender counts those messages as dropped).
pub(super) fn on_desc(
    c: &mut RxConn,
    rbatch: &mut RecvBatch,
    wc: &WorkCompletion,
    counters: &QueueCounters,
) -> bool {
    if c.ledger.closing() {
        return true;
    }
    let Some((_, _, _, idx)) = proto::split_wr_id(wc.wr_id()) else {
        return true;
    };
    let off = c.desc_base + u64::from(idx) * DESC_BYTES;
    let n = wc.imm().unwrap_or(0).min(DESC_MAX) as usize;
    if let Some(bytes) = c.h.ctrl.owned() {
        let o = off as usize;
        if let Some(b) = bytes.get(o..o + DESC_BYTES as usize) {
            for i in 0..n {
                match proto::get_desc(b, i) {
                    // The sender never has more than `credits` messages announced.
                    Some(e) if c.todo.len() < c.todo.capacity() => c.todo.push_back(e),
                    _ => counters.record_drop(DropReason::Malformed),
                }
            }
        }
    }
    rbatch.clear();
    rbatch.push(&ffi::RecvRequest {
        wr_id: wc.wr_id(),
        addr: c.h.ctrl.addr() + off,
        len: DESC_BYTES as u32,
        lkey: c.h.ctrl.lkey(),
    });
    if c.h.id.post_recv(rbatch).is_ok() {
        c.ledger.posted_recvs(1);
        true
    } else {
        false
    }
}

/// The oldest READ completed: its buffer and length; its slot is due back to the sender.
pub(super) fn take_read(c: &mut RxConn) -> Option<(Buf<'static>, u32)> {
    let (slot, len, b) = c.reading.pop_front()?;
    push_return(c, slot);
    Some((b, len))
}

fn push_return(c: &mut RxConn, slot: u32) {
    if c.pending.len() < c.pending.capacity() {
        c.pending.push(slot);
    }
}

impl RoceRx {
    /// Posts READs for announced messages (while pool buffers and [`READ_DEPTH`] allow)
    /// and returns pulled slots when due. Never allocates, never logs.
    pub(super) fn pull(&mut self, k: usize) {
        let lkey = self.v.mr.lkey();
        let batch = self.batch_credit.min(self.credits);
        let pool = self.v.pool;
        let counters = self.counters;
        let Some(c) = self.conns[k].as_mut() else {
            return;
        };
        if c.ledger.closing() {
            return;
        }
        // The sender's pool is in its hello.
        let Peer::Rtdaq(p) = c.h.peer else {
            return;
        };
        let gen = c.h.gen;
        while (c.reading.len() as u32) < READ_DEPTH {
            let Some(&(slot, len)) = c.todo.front() else {
                break;
            };
            if slot >= p.slot_count || len > p.slot_size {
                // Not in the sender's pool: dropped, and the slot handed back.
                c.todo.pop_front();
                counters.record_drop(DropReason::Malformed);
                push_return(c, slot);
                continue;
            }
            let Some(b) = pool.get() else {
                break;
            };
            if len as usize > b.capacity() {
                c.todo.pop_front();
                counters.record_drop(DropReason::TooLarge);
                push_return(c, slot);
                continue;
            }
            self.sbatch.clear();
            self.sbatch.push(&SendRequest {
                wr_id: proto::wr_id(WrKind::Read, k as u16, gen, slot),
                op: SendOp::Read,
                addr: b.addr(),
                len,
                lkey,
                imm: 0,
                remote_addr: p.base + u64::from(slot) * u64::from(p.slot_size),
                rkey: p.rkey,
                signaled: true,
                inline: false,
            });
            if c.h.id.post_send(&mut self.sbatch).is_err() {
                self.guard.iface.slots[k].broken();
                return;
            }
            c.ledger.posted_send();
            c.todo.pop_front();
            c.reading.push_back((slot, len, b));
        }
        while proto::return_due(c.pending.len(), batch, c.reading.len(), c.todo.len()) {
            let Some(buf) = c.ctrl_free.pop() else {
                break;
            };
            let n = (c.pending.len() as u32).min(CTRL_MAX_SLOTS);
            let base = buf as usize * CTRL_BYTES as usize;
            if let Some(bytes) = c.h.ctrl.owned_mut() {
                for (i, s) in c.pending.iter().take(n as usize).enumerate() {
                    bytes[base + 4 * i..base + 4 * i + 4].copy_from_slice(&s.to_le_bytes());
                }
            }
            self.sbatch.clear();
            self.sbatch.push(&SendRequest::signaled_send_imm(
                proto::wr_id(WrKind::CtrlSend, k as u16, gen, buf),
                c.h.ctrl.addr() + base as u64,
                4 * n,
                c.h.ctrl.lkey(),
                n,
            ));
            if c.h.id.post_send(&mut self.sbatch).is_err() {
                c.ctrl_free.push(buf);
                self.guard.iface.slots[k].broken();
                return;
            }
            c.ledger.posted_send();
            c.pending.drain(..n as usize);
        }
    }
}
