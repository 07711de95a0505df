//! RoCE streams over RDMA CM: [`RoceEngine`] (`FRAMES = false`: RX segments and TX
//! packets are whole messages), its queues [`RoceRx`] / [`RoceTx`], and the connection
//! manager thread of each interface (`cm.rs`).
//!
//! Connection `k` of an interface (`k = 0..connections`) carries `ConnId(k + 1)` and is
//! served by RX queue `k mod n_rx` (receiving interface) or TX queue `k mod n_tx`
//! (sending interface).
//!
//! Ops: SEND, WRITE with immediate (`rx.rs`, `tx.rs`) and READ, pull mode (the receiver's
//! side in `pull.rs`, the sender's in `tx.rs`; protocol in `proto.rs`).
//!
//! ## Ownership of a connection
//! The CM thread builds everything a connection needs (its RC QP on the queue's CQ, the
//! receives the protocol posts before the peer may send, and every table the queue will
//! use, so the queue thread never allocates) and **publishes** it in the connection's
//! [`Slot`] *before* `rdma_accept` / `rdma_connect`: a completion of the connection can
//! never reach the queue before the connection does. The queue adopts it (`PUBLISHED →
//! ACTIVE`); once the CM thread sees the connection established it sets the slot's
//! `ready` flag (the peer's hello is then known and the queue may send to it unasked).
//!
//! When the connection ends (peer disconnect, completion error), the CM thread moves its
//! QP to the error state (`rdma_disconnect`) and marks the slot `DEAD`. The queue keeps
//! the connection until every work request it posted on it has completed, successfully
//! (a message received then is still delivered) or flushed (`IBV_WC_WR_FLUSH_ERR`), and
//! only then hands it back (`RELEASED`, the connection in the slot's cell). The CM thread
//! destroys it (QP first, then its buffers go back to the pool) and, on a client,
//! reconnects.
//!
//! | state | set by | meaning |
//! |---|---|---|
//! | `IDLE` | CM | free |
//! | `PUBLISHED` | CM | a connection in the cell, not adopted yet |
//! | `ACTIVE` | queue | the queue owns it |
//! | `BROKEN` | queue | the queue saw an error; the CM thread disconnects it |
//! | `DEAD` | CM | QP in the error state; the queue drains and releases it (adopting it first if it never did) |
//! | `RELEASED` | queue | handed back in the cell; the CM thread destroys it, then `IDLE` |
mod cm;
mod rx;
mod tx;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use ffi::{CmId, Cq, Mr, RecvRequest};
use rtdaq_config::model::{Address, IbMode, IbverbsEngine, RoceOp, RoceReply, TcpRole, Transport};
use rtdaq_config::Config;
use rtdaq_core::traits::{Engine, EngineArgs, EngineStats, PortStats};
use rtdaq_core::{Buf, BufferPool};

use crate::error::{IbvError, Result};
use crate::proto::{Hello, Op};
pub use rx::RoceRx;
pub use tx::{RoceTx, RoceTxBurst};

/// Burst capacity of the RoCE queues (the largest `batch_size`).
pub const MAX_BATCH: usize = 1024;

/// Slot states (see the [module docs](self)).
pub(crate) mod state {
    pub const IDLE: u8 = 0;
    pub const PUBLISHED: u8 = 2;
    pub const ACTIVE: u8 = 3;
    pub const BROKEN: u8 = 4;
    pub const DEAD: u8 = 5;
    pub const RELEASED: u8 = 6;
}

/// Who is at the other end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peer {
    /// Not known yet (a client learns it from the accept's private data).
    Unknown,
    /// An rtdaq end: its hello.
    Rtdaq(Hello),
    /// A peer without the rtdaq hello (librdmacm examples, other stacks).
    Foreign,
}

impl Peer {
    /// From connect/accept private data.
    pub(crate) fn from_private(b: &[u8]) -> Peer {
        Hello::decode(b).map_or(Peer::Foreign, Peer::Rtdaq)
    }
}

/// What every connection carries, RX or TX.
pub(crate) struct Handoff {
    /// First field: dropped first, so the QP is destroyed before any buffer of the
    /// connection goes back to the pool (the CM thread drops its own reference before).
    pub(crate) id: Arc<CmId>,
    pub(crate) gen: u16,
    /// The peer as known when the connection was published.
    pub(crate) peer: Peer,
    /// Control messages (credits) and, on RX with a reply, the reply buffers.
    pub(crate) ctrl: Mr,
}

/// A connection as the CM thread builds it and a queue owns it.
pub(crate) enum Conn {
    Rx(Box<rx::RxConn>),
    Tx(Box<tx::TxConn>),
}

/// One connection's hand-off slot.
pub(crate) struct Slot {
    pub(crate) cell: Mutex<Option<Conn>>,
    pub(crate) state: AtomicU8,
    /// Set by the CM thread when the connection is established (cleared at publish).
    pub(crate) ready: AtomicBool,
    /// The peer, set by the CM thread before `ready`.
    pub(crate) peer: Mutex<Peer>,
}

impl Slot {
    fn new() -> Self {
        Slot {
            cell: Mutex::new(None),
            state: AtomicU8::new(state::IDLE),
            ready: AtomicBool::new(false),
            peer: Mutex::new(Peer::Unknown),
        }
    }

    fn put(&self, c: Option<Conn>) {
        if let Ok(mut cell) = self.cell.lock() {
            *cell = c;
        }
    }

    fn take(&self) -> Option<Conn> {
        self.cell.lock().ok().and_then(|mut c| c.take())
    }

    /// CM: hands `c` to the queue (state must be `IDLE`).
    pub(crate) fn publish(&self, c: Conn) {
        self.ready.store(false, Ordering::Release);
        if let Ok(mut p) = self.peer.lock() {
            *p = Peer::Unknown;
        }
        self.put(Some(c));
        self.state.store(state::PUBLISHED, Ordering::Release);
    }

    /// CM: the connection is established with `peer`.
    pub(crate) fn set_ready(&self, peer: Peer) {
        if let Ok(mut p) = self.peer.lock() {
            *p = peer;
        }
        self.ready.store(true, Ordering::Release);
    }

    /// The peer the CM thread recorded at establishment (`Unknown` before it).
    pub(crate) fn peer_now(&self) -> Peer {
        self.peer.lock().map_or(Peer::Unknown, |p| *p)
    }

    /// CM: takes back a connection the queue has not adopted (`PUBLISHED → IDLE`); `None`
    /// when the queue already owns it.
    pub(crate) fn retract(&self) -> Option<Conn> {
        self.state
            .compare_exchange(
                state::PUBLISHED,
                state::IDLE,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .ok()?;
        self.take()
    }

    /// CM: marks a live connection dead (its QP is already in the error state); true when
    /// this call did it.
    pub(crate) fn kill(&self) -> bool {
        loop {
            let st = self.state.load(Ordering::Acquire);
            if !matches!(st, state::PUBLISHED | state::ACTIVE | state::BROKEN) {
                return false;
            }
            if self
                .state
                .compare_exchange(st, state::DEAD, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return true;
            }
        }
    }

    /// CM: the connection a queue released (`RELEASED → IDLE`), to destroy.
    pub(crate) fn collect(&self) -> Option<Option<Conn>> {
        if self.state.load(Ordering::Acquire) != state::RELEASED {
            return None;
        }
        let c = self.take();
        self.state.store(state::IDLE, Ordering::Release);
        Some(c)
    }

    /// Queue: takes the published connection; `(conn, dead)`, where `dead` means the CM
    /// thread ended it before the queue adopted it (drain it, then release it).
    pub(crate) fn adopt(&self) -> Option<(Conn, bool)> {
        match self.state.compare_exchange(
            state::PUBLISHED,
            state::ACTIVE,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => self.take().map(|c| (c, false)),
            Err(state::DEAD) => self.take().map(|c| (c, true)),
            Err(_) => None,
        }
    }

    /// Queue: reports an error on an active connection (`ACTIVE → BROKEN`).
    pub(crate) fn broken(&self) {
        let _ = self.state.compare_exchange(
            state::ACTIVE,
            state::BROKEN,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }

    /// Queue: hands a drained connection back (`DEAD → RELEASED`).
    pub(crate) fn release(&self, c: Conn) {
        self.put(Some(c));
        self.state.store(state::RELEASED, Ordering::Release);
    }

    /// True in state `DEAD`.
    pub(crate) fn is_dead(&self) -> bool {
        self.state.load(Ordering::Acquire) == state::DEAD
    }
}

/// Counters of one interface (any thread adds with `Relaxed`; read for the log and the
/// report's `ports`).
#[derive(Default)]
pub(crate) struct Counters {
    /// Connections established (first and later ones).
    pub(crate) established: AtomicU64,
    /// Peers that disconnected or failed (CM event or completion error).
    pub(crate) disconnects: AtomicU64,
    /// Client reconnections after a loss.
    pub(crate) reconnects: AtomicU64,
    /// Connect requests refused (no free slot, wrong role or op).
    pub(crate) rejected: AtomicU64,
    /// Replies the peer received (their sends completed).
    pub(crate) replies: AtomicU64,
    /// Messages that got no reply: no free reply buffer, posting failed, the send failed or
    /// was flushed, or the connection was closing.
    pub(crate) reply_failures: AtomicU64,
    /// Ended connections released before all their work requests completed (the bound,
    /// `CLOSE_MAX`, passed).
    pub(crate) forced_releases: AtomicU64,
    /// Completions with an error status other than a flush.
    pub(crate) wc_errors: AtomicU64,
}

impl Counters {
    fn pairs(&self) -> [(&'static str, u64); 8] {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        [
            ("connections_established", g(&self.established)),
            ("peers_lost", g(&self.disconnects)),
            ("reconnects", g(&self.reconnects)),
            ("connect_requests_refused", g(&self.rejected)),
            ("replies_sent", g(&self.replies)),
            ("reply_failures", g(&self.reply_failures)),
            ("forced_releases", g(&self.forced_releases)),
            ("completion_errors", g(&self.wc_errors)),
        ]
    }
}

/// State shared by the CM thread and the queues of one interface.
pub(crate) struct Iface {
    pub(crate) slots: Box<[Slot]>,
    /// Bumped after every publish, establishment and death.
    pub(crate) epoch: AtomicU32,
    pub(crate) stop: AtomicBool,
    pub(crate) n: Arc<Counters>,
    pub(crate) key: String,
}

impl Iface {
    pub(crate) fn bump(&self) {
        self.epoch.fetch_add(1, Ordering::Release);
    }
}

/// Joins the CM thread when the last queue of the interface is dropped.
pub(crate) struct CmGuard {
    pub(crate) iface: Arc<Iface>,
    pub(crate) thread: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for CmGuard {
    fn drop(&mut self) {
        self.iface.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = t.join();
        }
        let f = &self.iface;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        log::info!(
            "{}: {} connection(s) established, {} peer(s) lost, {} reconnect(s), {} refused, {} repl(ies) sent, {} reply failure(s), {} forced release(s)",
            f.key,
            g(&f.n.established),
            g(&f.n.disconnects),
            g(&f.n.reconnects),
            g(&f.n.rejected),
            g(&f.n.replies),
            g(&f.n.reply_failures),
            g(&f.n.forced_releases)
        );
    }
}

/// What one queue owns on the verbs side.
#[derive(Clone)]
pub(crate) struct QueueVerbs {
    pub(crate) cq: Arc<Cq>,
    pub(crate) pool: &'static BufferPool<'static>,
    pub(crate) mr: Arc<Mr>,
}

/// The reply of a receiving interface (`engine.ibverbs.reply`, `reply_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reply {
    pub(crate) mode: RoceReply,
    pub(crate) bytes: u32,
}

impl Reply {
    /// Reply buffers (and sends in flight) per connection: 0 without a reply.
    pub(crate) fn depth(&self) -> u32 {
        if self.mode == RoceReply::None {
            0
        } else {
            rx::REPLY_DEPTH
        }
    }
}

/// Settings of a RoCE interface, from the config.
#[derive(Clone)]
pub(crate) struct Setup {
    pub(crate) i: usize,
    pub(crate) op: Op,
    pub(crate) credits: u32,
    pub(crate) signal_interval: u32,
    pub(crate) conns: u32,
    pub(crate) receiver: bool,
    pub(crate) server: bool,
    pub(crate) addr: std::net::SocketAddrV4,
    pub(crate) uri: String,
    pub(crate) sq_depth: u32,
    pub(crate) reply: Reply,
}

/// The counters of a RoCE engine's interfaces for the run report's `ports` section
/// ([`EngineStats`]): one entry per interface, `port` = its `rdma://` address, `driver` =
/// `"rdma_cm"`, the connection and reply counters as `xstats`. Take it with
/// [`RoceEngine::stats_handle`] before the engine is split into queues.
pub struct RoceStats {
    ifaces: Vec<(usize, String, Arc<Counters>)>,
}

impl EngineStats for RoceStats {
    fn port_stats(&self) -> Vec<PortStats> {
        self.ifaces
            .iter()
            .map(|(i, uri, n)| PortStats {
                interface: *i,
                port: uri.clone(),
                driver: "rdma_cm".into(),
                xstats: n
                    .pairs()
                    .into_iter()
                    .filter(|&(_, v)| v > 0)
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect(),
                ..PortStats::default()
            })
            .collect()
    }
}

/// The RoCE engine (`engine.ibverbs.mode = "roce"`).
pub struct RoceEngine {
    rx: Vec<RoceRx>,
    tx: Vec<RoceTx>,
    stats: Vec<(usize, String, Arc<Counters>)>,
}

impl RoceEngine {
    /// The queues, for callers outside the runtime (tests, tools).
    pub fn into_queues(self) -> (Vec<RoceRx>, Vec<RoceTx>) {
        (self.rx, self.tx)
    }

    /// A handle that reads every interface's connection and reply counters, also after the
    /// queues are gone (for `rtdaq_runtime::run_with_stats`). Cold path.
    pub fn stats_handle(&self) -> RoceStats {
        RoceStats {
            ifaces: self.stats.clone(),
        }
    }
}

pub(crate) fn settings(cfg: &Config) -> Result<IbverbsEngine> {
    match &cfg.engine {
        rtdaq_config::model::Engine::Ibverbs(e) => Ok(e.clone()),
        _ => Err(IbvError::config(
            "engine.kind",
            "the ibverbs engine needs engine.kind = \"ibverbs\"",
        )),
    }
}

impl Engine<'static> for RoceEngine {
    const NAME: &'static str = "ibverbs";
    const FRAMES: bool = false;
    type Config = EngineArgs<'static, Config>;
    type Rx = RoceRx;
    type Tx = RoceTx;
    type Error = IbvError;

    fn open(args: Self::Config) -> Result<Self> {
        let cfg = args.config;
        let ib = settings(cfg)?;
        if ib.mode != IbMode::Roce {
            return Err(IbvError::config(
                "engine.ibverbs.mode",
                "RoceEngine opens mode = \"roce\" configs",
            ));
        }
        let mut engine = RoceEngine {
            rx: Vec::new(),
            tx: Vec::new(),
            stats: Vec::new(),
        };
        for (i, iface) in cfg.interfaces.iter().enumerate() {
            let key = format!("interfaces[{i}].address");
            let Address::Socket(u) = &iface.address else {
                return Err(IbvError::config(
                    key,
                    "mode = \"roce\" needs an rdma://a.b.c.d:port address",
                ));
            };
            if u.transport != Transport::Rdma {
                return Err(IbvError::config(
                    key,
                    "mode = \"roce\" needs an rdma://a.b.c.d:port address",
                ));
            }
            let receiver = !iface.rx_queues.is_empty();
            let res: Vec<_> = if receiver {
                args.rx.iter().filter(|r| r.interface == i).collect()
            } else {
                args.tx.iter().filter(|r| r.interface == i).collect()
            };
            let sq_depth = if receiver {
                0
            } else {
                iface
                    .tx_queues
                    .iter()
                    .map(|q| q.ring_depth)
                    .max()
                    .unwrap_or(256)
                    .clamp(64, 16384)
            };
            let setup = Setup {
                i,
                op: match ib.op {
                    RoceOp::Send => Op::Send,
                    RoceOp::WriteImm => Op::WriteImm,
                    RoceOp::Read => Op::Read,
                },
                credits: ib.credits,
                signal_interval: ib.signal_interval,
                conns: iface.connections.clamp(1, crate::proto::MAX_CONNS),
                receiver,
                server: iface.role == Some(TcpRole::Server),
                addr: std::net::SocketAddrV4::new(u.ip, u.port),
                uri: u.to_string(),
                sq_depth,
                reply: Reply {
                    mode: if receiver { ib.reply } else { RoceReply::None },
                    bytes: ib.reply_bytes.max(1),
                },
            };
            let (rx, tx, counters) = cm::open_interface(cfg, &setup, &res)?;
            engine.stats.push((i, setup.uri.clone(), counters));
            engine.rx.extend(rx);
            engine.tx.extend(tx);
        }
        Ok(engine)
    }

    fn split(self, rx: &mut dyn FnMut(Self::Rx), tx: &mut dyn FnMut(Self::Tx)) {
        for q in self.rx {
            rx(q);
        }
        for q in self.tx {
            tx(q);
        }
    }
}

/// A receive request for a pool buffer.
#[inline]
pub(crate) fn recv_req(wr_id: u64, buf: &Buf<'_>, lkey: u32) -> RecvRequest {
    RecvRequest {
        wr_id,
        addr: buf.addr(),
        len: buf.capacity() as u32,
        lkey,
    }
}
