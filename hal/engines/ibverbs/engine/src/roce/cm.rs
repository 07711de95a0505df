//! The connection manager of one RoCE interface: opening (listen, or connect every
//! connection with bounded retry), then a thread that accepts peers, notices peers that
//! leave, destroys their connections once their queue released them, and reconnects
//! (client). Cold path: allocates and logs freely; everything a queue needs for a
//! connection is allocated here, before the hand-off.
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ffi::{Access, CmEventKind, CmId, ConnParams, EventChannel, Pd, QpCaps, RecvBatch};
use rtdaq_config::Config;
use rtdaq_core::traits::QueueResources;

use super::rx::{desc_offset, RxConn, CTRL_BYTES};
use super::tx::TxConn;
use super::{
    recv_req, state, CmGuard, Conn, Counters, Handoff, Iface, Peer, QueueVerbs, RoceRx, RoceTx,
    Setup, Slot,
};
use crate::error::{IbvError, Result};
use crate::proto::{
    self, Hello, Op, Role, WrKind, CTRL_RECVS, CTRL_SENDS, DESC_BYTES, DESC_SENDS, READ_DEPTH,
};
use crate::register::register_pool;

/// Client connect attempts at open, and the pause between them (about 5 s in all); also
/// the pause between reconnect attempts.
const CONNECT_ATTEMPTS: u32 = 25;
const CONNECT_BACKOFF: Duration = Duration::from_millis(200);
const RESOLVE_TIMEOUT: Duration = Duration::from_millis(2000);

// Field order is drop order: connections (their QPs) before the CQs in `queues`, the
// listener before its channel, everything before the PD.
struct Cm {
    ids: Vec<Option<Arc<CmId>>>,
    /// Server: accepted, waiting for ESTABLISHED.
    awaiting: Vec<bool>,
    /// Established and not yet counted as lost.
    up: Vec<bool>,
    /// Server: the peer of each connection (from its connect request).
    peers: Vec<Peer>,
    /// Client: connections to reconnect, and not before when.
    retry: Vec<Option<Instant>>,
    listener: Option<CmId>,
    /// Server: the listener's channel (connections report there too).
    listen_ch: Option<EventChannel>,
    /// Client: one channel per connection.
    chans: Vec<Option<EventChannel>>,
    gens: Vec<u16>,
    queues: Vec<QueueVerbs>,
    pd: Pd,
    iface: Arc<Iface>,
    setup: Setup,
}

fn tag(k: usize, gen: u16) -> u64 {
    (u64::from(gen) << 32) | (k as u64 + 1)
}
fn untag(t: u64) -> Option<(usize, u16)> {
    let k = (t & 0xffff_ffff) as usize;
    (k > 0).then(|| (k - 1, (t >> 32) as u16))
}

/// Opens interface `s.i`: device, PD, CQs, memory registration, listener or connections;
/// starts its CM thread; returns its queues.
pub(crate) fn open_interface(
    cfg: &Config,
    s: &Setup,
    res: &[&QueueResources<'static>],
) -> Result<(Vec<RoceRx>, Vec<RoceTx>, Arc<Counters>)> {
    let key = format!("interfaces[{}].address", s.i);
    let ch = EventChannel::new().map_err(|e| IbvError::verbs(&key, "RDMA CM event channel", e))?;
    // The device: the listener's bound address, or the resolved route of a probe id.
    let probe = ch
        .create_id(0)
        .map_err(|e| IbvError::verbs(&key, "rdma_create_id", e))?;
    if s.server {
        probe.bind(s.addr).map_err(|e| match e.errno() {
            Some(libc::EADDRNOTAVAIL) | Some(libc::ENODEV) | Some(libc::EINVAL) => {
                IbvError::NoDevice {
                    detail: format!(
                        "{key} = \"{}\": no RDMA device has {} ({e})",
                        s.uri,
                        s.addr.ip()
                    ),
                }
            }
            _ => IbvError::verbs(&key, format!("binding {}", s.uri), e),
        })?;
    } else {
        resolve(&ch, &probe, s, &key)?;
    }
    let ctx = probe.context().ok_or_else(|| IbvError::NoDevice {
        detail: format!("{key} = \"{}\" is on no RDMA device", s.uri),
    })?;
    let pd = ctx
        .alloc_pd()
        .map_err(|e| IbvError::verbs(&key, "ibv_alloc_pd", e))?;
    let per_queue = (s.conns as usize).div_ceil(res.len().max(1)) as u32;
    let mut queues = Vec::with_capacity(res.len());
    for (j, r) in res.iter().enumerate() {
        let qkey = format!(
            "interfaces[{}].{}_queues[{j}]",
            s.i,
            if s.receiver { "rx" } else { "tx" }
        );
        let pool = *r
            .pools
            .first()
            .ok_or_else(|| IbvError::config(&qkey, "no memory region"))?;
        if r.pools.len() > 1 {
            return Err(IbvError::config(
                format!("{qkey}.memory_regions"),
                "RoCE delivers whole messages: list one region (no header-data split)",
            ));
        }
        // Posted receives hold pool buffers (SEND, WRITE_IMM); READ holds one per READ in
        // flight.
        let need = if s.receiver {
            per_queue as usize
                * if s.op == Op::Read {
                    READ_DEPTH as usize
                } else {
                    s.credits as usize
                }
        } else {
            0
        };
        if s.receiver && pool.slot_count() < need + 2 {
            return Err(IbvError::config(
                format!("{qkey}.memory_regions[0]"),
                format!("{} buffers but {per_queue} connection(s) × engine.ibverbs.credits {} = {need} stay posted; raise buf_count (≥ {need} + 2 × batch_size) or lower credits", pool.slot_count(), s.credits),
            ));
        }
        let access = Access {
            local_write: true,
            remote_write: s.receiver && s.op == Op::WriteImm,
            // READ: the receiver pulls the messages out of the sender's pool.
            remote_read: !s.receiver && s.op == Op::Read,
        };
        let mr = register_pool(&ctx, &pd, pool, access, format!("{qkey}.memory_regions[0]"))?;
        let depth = per_queue
            * if s.receiver {
                s.credits + CTRL_SENDS + s.reply.depth() + read_depth(s)
            } else {
                s.sq_depth + CTRL_RECVS
            }
            + 64;
        let cq = ctx
            .create_cq(depth)
            .map_err(|e| IbvError::verbs(&qkey, format!("ibv_create_cq({depth})"), e))?;
        queues.push(QueueVerbs {
            cq: Arc::new(cq),
            pool,
            mr: Arc::new(mr),
        });
    }
    let counters = Arc::new(Counters::default());
    let iface = Arc::new(Iface {
        slots: (0..s.conns).map(|_| Slot::new()).collect(),
        epoch: std::sync::atomic::AtomicU32::new(0),
        stop: std::sync::atomic::AtomicBool::new(false),
        n: Arc::clone(&counters),
        key: format!("interfaces[{}] ({})", s.i, s.uri),
    });
    let n = s.conns as usize;
    let mut cm = Cm {
        iface: Arc::clone(&iface),
        setup: s.clone(),
        pd,
        queues: queues.clone(),
        listen_ch: None,
        listener: None,
        chans: (0..n).map(|_| None).collect(),
        ids: (0..n).map(|_| None).collect(),
        gens: vec![0; n],
        awaiting: vec![false; n],
        up: vec![false; n],
        peers: vec![Peer::Unknown; n],
        retry: vec![None; n],
    };
    if s.server {
        probe
            .listen(n.clamp(1, 1024) as i32)
            .map_err(|e| IbvError::verbs(&key, format!("rdma_listen on {}", s.uri), e))?;
        log::info!("{key}: listening on {} for {n} connection(s)", s.uri);
        cm.listener = Some(probe);
        cm.listen_ch = Some(ch);
    } else {
        drop(probe);
        drop(ch);
        for k in 0..n {
            cm.connect(k, CONNECT_ATTEMPTS)?;
        }
        log::info!("{key}: {n} connection(s) to {}", s.uri);
    }
    let t = std::thread::Builder::new()
        .name(format!("rtdaq-cm-{}", s.i))
        .spawn(move || cm.run())
        .map_err(|e| IbvError::config(&key, format!("cannot start the RDMA CM thread: {e}")))?;
    let guard = Arc::new(CmGuard {
        iface: Arc::clone(&iface),
        thread: Mutex::new(Some(t)),
    });
    let nq = queues.len();
    let mut rxs = Vec::new();
    let mut txs = Vec::new();
    for (j, (q, r)) in queues.into_iter().zip(res).enumerate() {
        if s.receiver {
            let qc = &cfg.interfaces[s.i].rx_queues[j];
            rxs.push(RoceRx::new(s, j, nq, q, r.counters, Arc::clone(&guard), qc));
        } else {
            let qc = &cfg.interfaces[s.i].tx_queues[j];
            txs.push(RoceTx::new(s, j, nq, q, r.counters, Arc::clone(&guard), qc));
        }
    }
    Ok((rxs, txs, counters))
}

/// READs a receiving connection keeps in flight (0 unless `op = "read"`).
fn read_depth(s: &Setup) -> u32 {
    if s.op == Op::Read {
        READ_DEPTH
    } else {
        0
    }
}

/// Resolves the address and route of `id` towards `s.addr`, waiting on `ch`.
fn resolve(ch: &EventChannel, id: &CmId, s: &Setup, key: &str) -> Result<()> {
    id.resolve_addr(None, s.addr, RESOLVE_TIMEOUT)
        .map_err(|e| match e.errno() {
            Some(libc::ENODEV) | Some(libc::EADDRNOTAVAIL) | Some(libc::ENETUNREACH) => {
                IbvError::NoDevice {
                    detail: format!(
                        "{key} = \"{}\": no RDMA device reaches {} ({e})",
                        s.uri,
                        s.addr.ip()
                    ),
                }
            }
            _ => IbvError::verbs(key, format!("resolving {}", s.uri), e),
        })?;
    let ev = wait_event(ch, RESOLVE_TIMEOUT + Duration::from_secs(1), key)?;
    if ev != CmEventKind::AddrResolved {
        return Err(IbvError::NoDevice {
            detail: format!(
                "{key} = \"{}\": address resolution failed ({ev:?}): no RDMA device reaches {}",
                s.uri,
                s.addr.ip()
            ),
        });
    }
    id.resolve_route(RESOLVE_TIMEOUT)
        .map_err(|e| IbvError::verbs(key, "rdma_resolve_route", e))?;
    let ev = wait_event(ch, RESOLVE_TIMEOUT + Duration::from_secs(1), key)?;
    if ev != CmEventKind::RouteResolved {
        return Err(IbvError::config(
            key,
            format!("route resolution to {} failed ({ev:?})", s.uri),
        ));
    }
    Ok(())
}

fn wait_event(ch: &EventChannel, timeout: Duration, key: &str) -> Result<CmEventKind> {
    Ok(wait_full(ch, timeout, key)?.map_or(CmEventKind::Other(u32::MAX), |e| e.0))
}

fn wait_full(
    ch: &EventChannel,
    timeout: Duration,
    key: &str,
) -> Result<Option<(CmEventKind, Vec<u8>, i32)>> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(ev) = ch
            .next()
            .map_err(|e| IbvError::verbs(key, "rdma_get_cm_event", e))?
        {
            return Ok(Some((ev.kind, ev.private_data().to_vec(), ev.status)));
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        ch.wait(left.min(Duration::from_millis(50)));
    }
}

impl Cm {
    fn hello(&self, q: usize) -> Hello {
        let v = &self.queues[q];
        let s = &self.setup;
        Hello {
            role: if s.receiver {
                Role::Receiver
            } else {
                Role::Sender
            },
            op: s.op,
            credits: if s.receiver && s.op != Op::WriteImm {
                s.credits
            } else {
                0
            },
            // The pool the peer accesses: the receiver's (WRITE_IMM), the sender's (READ).
            rkey: if s.receiver || s.op == Op::Read {
                v.mr.rkey()
            } else {
                0
            },
            base: v.pool.base_addr(),
            slot_size: v.pool.slot_size() as u32,
            slot_count: v.pool.slot_count() as u32,
        }
    }

    /// Builds connection `k` on `id` (its QP, control region, the receives that must be
    /// posted before the peer may send, and every table its queue will use), ready to be
    /// published. Returns it and its id; on failure the error and the id.
    #[allow(clippy::type_complexity)]
    fn build(
        &mut self,
        k: usize,
        mut id: CmId,
        peer: Peer,
    ) -> std::result::Result<(Conn, Arc<CmId>), (String, CmId)> {
        let s = self.setup.clone();
        let v = self.queues[k % self.queues.len()].clone();
        let caps = if s.receiver {
            QpCaps {
                max_send_wr: CTRL_SENDS + s.reply.depth() + read_depth(&s),
                max_recv_wr: s.credits,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline: 0,
            }
        } else {
            QpCaps {
                max_send_wr: s.sq_depth,
                max_recv_wr: CTRL_RECVS,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline: 0,
            }
        };
        if let Err(e) = id.create_qp(&self.pd, &v.cq, &v.cq, caps) {
            return Err((e.to_string(), id));
        }
        // READ adds the descriptor buffers: `credits` receives (RX), DESC_SENDS sends (TX).
        let ctrl_len = if s.receiver {
            desc_offset(if s.op == Op::Read { s.credits } else { 0 }, s.reply) as usize
        } else {
            CTRL_RECVS as usize * CTRL_BYTES as usize
                + if s.op == Op::Read {
                    (DESC_SENDS as u64 * DESC_BYTES) as usize
                } else {
                    0
                }
        };
        let ctrl = match self
            .pd
            .register_owned(vec![0u8; ctrl_len].into_boxed_slice(), Access::LOCAL_WRITE)
        {
            Ok(m) => m,
            Err(e) => return Err((e.to_string(), id)),
        };
        let gen = self.gens[k];
        let mut posted = Vec::new();
        if s.receiver && s.op == Op::Send {
            let mut batch = RecvBatch::with_capacity(s.credits as usize);
            for r in 0..s.credits {
                let Some(b) = v.pool.get() else {
                    return Err((
                        format!(
                            "the RX pool ran out of buffers posting {} receives",
                            s.credits
                        ),
                        id,
                    ));
                };
                batch.push(&recv_req(
                    proto::wr_id(WrKind::Recv, k as u16, gen, r),
                    &b,
                    v.mr.lkey(),
                ));
                posted.push(Some(b));
            }
            if let Err(e) = id.post_recv(&mut batch) {
                return Err((format!("ibv_post_recv: errno {}", e.errno), id));
            }
        } else if s.receiver && s.op == Op::Read {
            // Descriptor receives: a sender never has more than `credits` outstanding.
            let mut batch = RecvBatch::with_capacity(s.credits as usize);
            for r in 0..s.credits {
                batch.push(&ffi::RecvRequest {
                    wr_id: proto::wr_id(WrKind::Desc, k as u16, gen, r),
                    addr: ctrl.addr() + desc_offset(r, s.reply),
                    len: DESC_BYTES as u32,
                    lkey: ctrl.lkey(),
                });
            }
            if let Err(e) = id.post_recv(&mut batch) {
                return Err((format!("ibv_post_recv: errno {}", e.errno), id));
            }
        } else if !s.receiver {
            let mut batch = RecvBatch::with_capacity(CTRL_RECVS as usize);
            for r in 0..CTRL_RECVS {
                batch.push(&ffi::RecvRequest {
                    wr_id: proto::wr_id(WrKind::CtrlRecv, k as u16, gen, r),
                    addr: ctrl.addr() + u64::from(r) * CTRL_BYTES,
                    len: CTRL_BYTES as u32,
                    lkey: ctrl.lkey(),
                });
            }
            if let Err(e) = id.post_recv(&mut batch) {
                return Err((format!("ibv_post_recv: errno {}", e.errno), id));
            }
        }
        let id = Arc::new(id);
        let h = Handoff {
            id: Arc::clone(&id),
            gen,
            peer,
            ctrl,
        };
        let conn = if s.receiver {
            Conn::Rx(RxConn::new(h, &s, v.pool.slot_count(), posted))
        } else {
            Conn::Tx(TxConn::new(h, &s, v.pool.slot_count(), CTRL_RECVS))
        };
        Ok((conn, id))
    }

    /// Hands connection `k` to its queue (before `rdma_accept` / `rdma_connect`).
    fn publish(&self, k: usize, c: Conn) {
        self.iface.slots[k].publish(c);
        self.iface.bump();
    }

    /// Gives up connection `k` after a failed accept or connect: takes it back when the
    /// queue has not adopted it (destroyed here, QP first), else ends it (the queue
    /// drains and releases it).
    fn abandon(&mut self, k: usize, id: Arc<CmId>) {
        id.disconnect();
        drop(id);
        let slot = &self.iface.slots[k];
        if let Some(c) = slot.retract() {
            drop(c);
        } else if slot.kill() {
            self.iface.bump();
        }
    }

    /// Client: connects connection `k` (new id on its own channel), up to `attempts`
    /// tries.
    fn connect(&mut self, k: usize, attempts: u32) -> Result<()> {
        let s = self.setup.clone();
        let key = format!("interfaces[{}].address", s.i);
        let start = Instant::now();
        let mut last = String::new();
        for attempt in 1..=attempts {
            if attempt > 1 {
                if self.iface.stop.load(Ordering::Acquire) {
                    break;
                }
                std::thread::sleep(CONNECT_BACKOFF);
            }
            if self.iface.slots[k].state.load(Ordering::Acquire) != state::IDLE {
                // The last attempt's connection is still draining in its queue.
                last = "the previous attempt is still being released".into();
                continue;
            }
            self.gens[k] = self.gens[k].wrapping_add(1);
            match self.try_connect(k, &s, &key) {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
        }
        Err(IbvError::Connect {
            key,
            uri: s.uri.clone(),
            attempts,
            secs: start.elapsed().as_secs_f64(),
            last,
        })
    }

    /// One connect of connection `k`: published before `rdma_connect`, ready once
    /// established.
    fn try_connect(&mut self, k: usize, s: &Setup, key: &str) -> std::result::Result<(), String> {
        let ch = EventChannel::new().map_err(|e| e.to_string())?;
        let id = ch
            .create_id(tag(k, self.gens[k]))
            .map_err(|e| e.to_string())?;
        resolve(&ch, &id, s, key).map_err(|e| e.to_string())?;
        let q = k % self.queues.len();
        let hello = self.hello(q).encode();
        let (conn, id) = self.build(k, id, Peer::Unknown).map_err(|(e, _)| e)?;
        self.publish(k, conn);
        if let Err(e) = id.connect(&hello, ConnParams::default()) {
            self.abandon(k, id);
            return Err(e.to_string());
        }
        let ev = match wait_full(&ch, Duration::from_secs(5), key) {
            Ok(ev) => ev,
            Err(e) => {
                self.abandon(k, id);
                return Err(e.to_string());
            }
        };
        match ev {
            Some((CmEventKind::Established, private, _)) => {
                let peer = Peer::from_private(&private);
                if let Peer::Rtdaq(p) = &peer {
                    let me = if s.receiver {
                        Role::Receiver
                    } else {
                        Role::Sender
                    };
                    if p.role == me || p.op != s.op {
                        let msg = format!(
                            "the peer is a {:?} with {:?}, this end a {} with {:?}",
                            p.role,
                            p.op,
                            if s.receiver { "receiver" } else { "sender" },
                            s.op
                        );
                        self.abandon(k, id);
                        return Err(msg);
                    }
                }
                self.ids[k] = Some(id);
                self.chans[k] = Some(ch);
                self.up[k] = true;
                self.iface.n.established.fetch_add(1, Ordering::Relaxed);
                self.iface.slots[k].set_ready(peer);
                self.iface.bump();
                Ok(())
            }
            Some((kind, _, status)) => {
                self.abandon(k, id);
                Err(format!(
                    "{kind:?} (status {status}){}",
                    if kind == CmEventKind::Rejected {
                        ": nobody listening, or the server refused"
                    } else {
                        ""
                    }
                ))
            }
            None => {
                self.abandon(k, id);
                Err("no answer within 5 s".into())
            }
        }
    }

    fn run(mut self) {
        while !self.iface.stop.load(Ordering::Acquire) {
            if let Some(ch) = self.listen_ch.clone() {
                ch.wait(Duration::from_millis(20));
                while let Ok(Some(ev)) = ch.next() {
                    self.on_event(ev);
                }
            } else {
                let mut any = false;
                for k in 0..self.chans.len() {
                    let Some(ch) = self.chans[k].clone() else {
                        continue;
                    };
                    any = true;
                    while let Ok(Some(ev)) = ch.next() {
                        self.on_event(ev);
                    }
                }
                if !any {
                    std::thread::sleep(Duration::from_millis(20));
                } else {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            self.housekeeping();
        }
        for id in self.ids.iter().flatten() {
            id.disconnect();
        }
        // Every queue is gone: destroy what is left in the slots (published and never
        // adopted, or released and not collected yet), QPs before the CQs.
        for id in self.ids.iter_mut() {
            *id = None;
        }
        for slot in self.iface.slots.iter() {
            drop(slot.take());
        }
    }

    /// Connection `k` ended: count it once if it was established.
    fn lost(&mut self, k: usize, why: &str) {
        if std::mem::take(&mut self.up[k]) {
            self.iface.n.disconnects.fetch_add(1, Ordering::Relaxed);
            log::warn!("{}: connection {} lost ({why})", self.iface.key, k + 1);
        }
    }

    /// Broken connections are disconnected and ended; released ones destroyed (and
    /// reconnected, on a client).
    fn housekeeping(&mut self) {
        for k in 0..self.ids.len() {
            let st = self.iface.slots[k].state.load(Ordering::Acquire);
            if st == state::BROKEN {
                if let Some(id) = &self.ids[k] {
                    id.disconnect();
                }
                if self.iface.slots[k].kill() {
                    self.iface.bump();
                }
                self.awaiting[k] = false;
                self.lost(k, "completion error");
            } else if st == state::RELEASED {
                // Our reference first: the connection's own is then the last (QP
                // destroyed before its buffers return to the pool).
                self.ids[k] = None;
                if let Some(Some(Conn::Rx(c))) = self.iface.slots[k].collect() {
                    if c.late() > 0 {
                        log::info!(
                            "{}: connection {} closed; {} message(s) that completed after the peer left were delivered",
                            self.iface.key,
                            k + 1,
                            c.late()
                        );
                    }
                }
                self.chans[k] = None;
                self.awaiting[k] = false;
                self.up[k] = false;
                if !self.setup.server && !self.iface.stop.load(Ordering::Acquire) {
                    self.retry[k] = Some(Instant::now());
                }
            } else if st == state::IDLE && !self.setup.server {
                let Some(t) = self.retry[k] else { continue };
                if Instant::now() < t || self.iface.stop.load(Ordering::Acquire) {
                    continue;
                }
                log::warn!(
                    "{}: connection {} lost; reconnecting",
                    self.iface.key,
                    k + 1
                );
                if self.connect(k, 1).is_ok() {
                    self.retry[k] = None;
                    self.iface.n.reconnects.fetch_add(1, Ordering::Relaxed);
                } else {
                    self.retry[k] = Some(Instant::now() + CONNECT_BACKOFF);
                }
            }
        }
    }

    fn on_event(&mut self, mut ev: ffi::CmEvent) {
        match ev.kind {
            CmEventKind::ConnectRequest => {
                let peer = Peer::from_private(ev.private_data());
                let Some(id) = ev.new_id.take() else { return };
                let want = if self.setup.receiver {
                    Role::Sender
                } else {
                    Role::Receiver
                };
                let refuse = match &peer {
                    Peer::Rtdaq(p) => p.role != want || p.op != self.setup.op,
                    // A foreign peer can only SEND into pre-posted receives.
                    _ => !(self.setup.receiver && self.setup.op == Op::Send),
                };
                let free = (0..self.ids.len()).find(|&k| {
                    self.ids[k].is_none()
                        && self.iface.slots[k].state.load(Ordering::Acquire) == state::IDLE
                });
                let (Some(k), false) = (free, refuse) else {
                    self.iface.n.rejected.fetch_add(1, Ordering::Relaxed);
                    log::warn!(
                        "{}: connect request refused ({})",
                        self.iface.key,
                        if refuse {
                            "peer role or op does not match"
                        } else {
                            "every connection slot is busy"
                        }
                    );
                    id.reject(&[]);
                    return;
                };
                self.gens[k] = self.gens[k].wrapping_add(1);
                id.set_tag(tag(k, self.gens[k]));
                let hello = self.hello(k % self.queues.len()).encode();
                match self.build(k, id, peer) {
                    Ok((conn, id)) => {
                        // Published before the accept: the peer's first message cannot
                        // reach the queue before its connection does.
                        self.publish(k, conn);
                        if let Err(e) = id.accept(&hello, ConnParams::default()) {
                            log::warn!("{}: rdma_accept failed: {e}", self.iface.key);
                            self.abandon(k, id);
                            return;
                        }
                        self.ids[k] = Some(id);
                        self.awaiting[k] = true;
                        self.peers[k] = peer;
                    }
                    Err((e, id)) => {
                        log::warn!(
                            "{}: cannot set up connection {}: {e}",
                            self.iface.key,
                            k + 1
                        );
                        id.reject(&[]);
                        self.iface.n.rejected.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            CmEventKind::Established => {
                let Some((k, gen)) = untag(ev.tag) else {
                    return;
                };
                if k < self.awaiting.len() && self.gens[k] == gen && self.awaiting[k] {
                    self.awaiting[k] = false;
                    self.up[k] = true;
                    self.iface.n.established.fetch_add(1, Ordering::Relaxed);
                    log::info!(
                        "{}: connection {} established ({})",
                        self.iface.key,
                        k + 1,
                        if matches!(self.peers[k], Peer::Rtdaq(_)) {
                            "rtdaq peer"
                        } else {
                            "foreign peer"
                        }
                    );
                    self.iface.slots[k].set_ready(self.peers[k]);
                    self.iface.bump();
                }
            }
            CmEventKind::Disconnected
            | CmEventKind::DeviceRemoval
            | CmEventKind::ConnectError
            | CmEventKind::Unreachable
            | CmEventKind::Rejected => {
                let Some((k, gen)) = untag(ev.tag) else {
                    return;
                };
                if k >= self.ids.len() || self.gens[k] != gen {
                    return;
                }
                // Error state first: outstanding receives come back flushed.
                if let Some(id) = &self.ids[k] {
                    id.disconnect();
                }
                self.awaiting[k] = false;
                if self.iface.slots[k].kill() {
                    self.iface.bump();
                }
                self.lost(k, &format!("{:?}", ev.kind));
            }
            _ => {}
        }
    }
}
