//! RoCE streams over RDMA CM: [`RoceEngine`] (`FRAMES = false`: RX segments and TX
//! packets are whole messages), its queues [`RoceRx`] / [`RoceTx`], and the connection
//! manager thread of each interface (`cm.rs`).
//!
//! Connection `k` of an interface (`k = 0..connections`) carries `ConnId(k + 1)` and is
//! served by RX queue `k mod n_rx` (receiving interface) or TX queue `k mod n_tx`
//! (sending interface). The CM thread creates each connection's RC QP on its queue's CQ,
//! posts the receives the protocol needs *before* accepting/connecting, and hands the
//! connection to its queue through a slot ([`Slot`]); the queue returns it (state
//! `RELEASED`) when the peer is gone, and the CM thread then destroys it and, on a
//! client, reconnects.
mod cm;
mod rx;
mod tx;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use ffi::{CmId, Cq, Mr, RecvRequest};
use rtdaq_config::model::{Address, IbMode, IbverbsEngine, RoceOp, TcpRole, Transport};
use rtdaq_config::Config;
use rtdaq_core::traits::{Engine, EngineArgs};
use rtdaq_core::{Buf, BufferPool};

use crate::error::{IbvError, Result};
use crate::proto::{Hello, Op};
pub use rx::RoceRx;
pub use tx::{RoceTx, RoceTxBurst};

/// Burst capacity of the RoCE queues (the largest `batch_size`).
pub const MAX_BATCH: usize = 1024;

/// Slot states.
pub(crate) mod state {
    pub const IDLE: u8 = 0;
    pub const PUBLISHED: u8 = 2;
    pub const ACTIVE: u8 = 3;
    pub const BROKEN: u8 = 4;
    pub const DEAD: u8 = 5;
    pub const RELEASED: u8 = 6;
}

/// What the CM thread hands a queue for one connection.
pub(crate) struct Handoff {
    pub(crate) id: Arc<CmId>,
    pub(crate) gen: u16,
    /// The peer's hello; `None` for a foreign peer.
    pub(crate) peer: Option<Hello>,
    /// RX, SEND mode: the buffers of the receives posted before accepting, by index.
    pub(crate) recvs: Vec<Option<Buf<'static>>>,
    /// Credit messages: RX sends from it, TX receives into it.
    pub(crate) ctrl: Mr,
}

/// One connection's hand-off slot.
pub(crate) struct Slot {
    pub(crate) cell: Mutex<Option<Handoff>>,
    pub(crate) state: AtomicU8,
}

/// State shared by the CM thread and the queues of one interface.
pub(crate) struct Iface {
    pub(crate) slots: Box<[Slot]>,
    /// Bumped after every publish / death.
    pub(crate) epoch: AtomicU32,
    pub(crate) stop: AtomicBool,
    /// Connections established (first and later ones).
    pub(crate) established: AtomicU64,
    /// Peers that disconnected or failed (CM event or completion error).
    pub(crate) disconnects: AtomicU64,
    /// Client reconnections after a loss.
    pub(crate) reconnects: AtomicU64,
    /// Connect requests refused (no free slot, wrong role or op).
    pub(crate) rejected: AtomicU64,
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
        log::info!(
            "{}: {} connection(s) established, {} peer(s) lost, {} reconnect(s), {} refused",
            f.key,
            f.established.load(Ordering::Relaxed),
            f.disconnects.load(Ordering::Relaxed),
            f.reconnects.load(Ordering::Relaxed),
            f.rejected.load(Ordering::Relaxed)
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
}

/// The RoCE engine (`engine.ibverbs.mode = "roce"`).
pub struct RoceEngine {
    rx: Vec<RoceRx>,
    tx: Vec<RoceTx>,
}

impl RoceEngine {
    /// The queues, for callers outside the runtime (tests, tools).
    pub fn into_queues(self) -> (Vec<RoceRx>, Vec<RoceTx>) {
        (self.rx, self.tx)
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
                },
                credits: ib.credits,
                signal_interval: ib.signal_interval,
                conns: iface.connections.clamp(1, crate::proto::MAX_CONNS),
                receiver,
                server: iface.role == Some(TcpRole::Server),
                addr: std::net::SocketAddrV4::new(u.ip, u.port),
                uri: u.to_string(),
                sq_depth,
            };
            let (rx, tx) = cm::open_interface(cfg, &setup, &res)?;
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
