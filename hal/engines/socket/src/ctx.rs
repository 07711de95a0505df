//! What `open` carries from queue to queue (cold path): the config, the tuning options, the
//! per-queue resources, and the "already warned" flags so a clamp is logged once.

use rtdaq_config::model::{Address, Engine, SocketEngine as SocketConfig, SocketUri};
use rtdaq_config::Config;
use rtdaq_core::traits::{EngineArgs, QueueResources};
use rtdaq_core::{BufferPool, QueueCounters};
use rtdaq_netsys::KeyError;

use crate::error::{Result, SocketError};
use crate::options::SocketOptions;

/// Direction of a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    /// `rx_queues`.
    Rx,
    /// `tx_queues`.
    Tx,
}

impl Dir {
    fn table(self) -> &'static str {
        match self {
            Dir::Rx => "rx_queues",
            Dir::Tx => "tx_queues",
        }
    }
}

/// The pool and counters of one queue, checked.
#[derive(Clone, Copy)]
pub(crate) struct QueueRes<'a> {
    /// The queue's buffer pool (CPU-accessible, one per queue on this engine).
    pub(crate) pool: &'a BufferPool<'a>,
    /// The queue's counters.
    pub(crate) counters: &'a QueueCounters,
    /// What the queue's stages ask for besides the datagrams (RX).
    pub(crate) wants: rtdaq_core::traits::RxWants,
}

/// Open-time context.
pub(crate) struct OpenCtx<'c, 'a> {
    /// The deployment config.
    pub(crate) cfg: &'c Config,
    /// `[engine.socket]`.
    pub(crate) sock: &'c SocketConfig,
    /// Tuning.
    pub(crate) opts: &'c SocketOptions,
    args: EngineArgs<'a, Config>,
    /// `rcvbuf` clamp already logged.
    pub(crate) warned_rcv: bool,
    /// `sndbuf` clamp already logged.
    pub(crate) warned_snd: bool,
}

impl<'c, 'a> OpenCtx<'c, 'a> {
    /// Checks that the config is for this engine.
    pub(crate) fn new(
        args: EngineArgs<'a, Config>,
        cfg: &'c Config,
        opts: &'c SocketOptions,
    ) -> Result<Self> {
        let Engine::Socket(sock) = &cfg.engine else {
            return Err(SocketError::Config(KeyError::new("engine.kind".to_owned(), format!(
                    "the config is for engine \"{}\" but this is the socket engine; set engine.kind = \"socket\" or build the binary with --features engine-{}",
                    cfg.engine.kind(),
                    cfg.engine.kind()
                ))));
        };
        Ok(OpenCtx {
            cfg,
            sock,
            opts,
            args,
            warned_rcv: false,
            warned_snd: false,
        })
    }

    /// `interfaces[i].address`.
    pub(crate) fn addr_key(i: usize) -> String {
        format!("interfaces[{i}].address")
    }

    /// The socket URI of interface `i`.
    pub(crate) fn uri(&self, i: usize) -> Result<SocketUri> {
        match &self.cfg.interfaces[i].address {
            Address::Socket(u) => Ok(*u),
            other => Err(SocketError::Config(KeyError::new(Self::addr_key(i), format!(
                    "\"{other}\" is not a socket address; the socket engine needs udp://a.b.c.d:port or tcp://a.b.c.d:port"
                )))),
        }
    }

    /// The resources of queue `j` of interface `i`, checked for this engine.
    pub(crate) fn resources(&self, dir: Dir, i: usize, j: usize) -> Result<QueueRes<'a>> {
        let list: &'a [QueueResources<'a>] = match dir {
            Dir::Rx => self.args.rx,
            Dir::Tx => self.args.tx,
        };
        let key = format!("interfaces[{i}].{}[{j}]", dir.table());
        let r = list
            .iter()
            .find(|r| r.interface == i && r.queue == j)
            .ok_or_else(|| SocketError::Resources(KeyError::new(key.clone(), "the runtime passed no QueueResources for this queue (EngineArgs must list every queue of the config)".to_owned())))?;
        let pool = match r.pools {
            [one] => *one,
            [] => {
                return Err(SocketError::Resources(KeyError::new(format!("{key}.memory_regions"), "no buffer pool for this queue".to_owned())))
            }
            _ => {
                return Err(SocketError::Resources(KeyError::new(format!("{key}.memory_regions"), "the socket engine takes exactly one region per queue (no header-data split); list one region".to_owned())))
            }
        };
        if !pool.is_cpu_accessible() {
            return Err(SocketError::Resources(KeyError::new(format!("{key}.memory_regions[0]"), "the socket engine needs CPU-accessible memory (host, huge or host_pinned), not GPU device memory".to_owned())));
        }
        Ok(QueueRes {
            pool,
            counters: r.counters,
            wants: r.wants,
        })
    }
}
