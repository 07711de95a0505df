//! What `open` carries from queue to queue (cold path): the config, `[engine.afpacket]`, the
//! tuning options and the per-queue resources, checked for this engine.

use rtdaq_config::model::{AfpacketEngine as AfpacketConfig, Engine};
use rtdaq_config::Config;
use rtdaq_core::traits::{EngineArgs, QueueResources};
use rtdaq_core::{BufferPool, QueueCounters};
use rtdaq_netsys::KeyError;

use crate::error::{AfpacketError, Result};
use crate::options::AfpacketOptions;

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

/// The pools and counters of one queue, checked.
#[derive(Clone, Copy)]
pub(crate) struct QueueRes<'a> {
    /// RX with header-data split: (header pool, data pool). `None` otherwise (the ring holds
    /// the frames; the queue's pool is not used).
    pub(crate) split: Option<(&'a BufferPool<'a>, &'a BufferPool<'a>)>,
    /// The queue's counters.
    pub(crate) counters: &'a QueueCounters,
}

/// Open-time context.
pub(crate) struct OpenCtx<'c, 'a> {
    /// The deployment config.
    pub(crate) cfg: &'c Config,
    /// `[engine.afpacket]`.
    pub(crate) af: AfpacketConfig,
    /// Tuning.
    pub(crate) opts: &'c AfpacketOptions,
    args: EngineArgs<'a, Config>,
}

impl<'c, 'a> OpenCtx<'c, 'a> {
    /// Checks that the config is for this engine.
    pub(crate) fn new(
        args: EngineArgs<'a, Config>,
        cfg: &'c Config,
        opts: &'c AfpacketOptions,
    ) -> Result<Self> {
        let Engine::Afpacket(af) = &cfg.engine else {
            return Err(AfpacketError::Config(KeyError::new("engine.kind".to_owned(), format!(
                    "the config is for engine \"{}\" but this is the afpacket engine; set engine.kind = \"afpacket\" or build the binary with --features engine-{}",
                    cfg.engine.kind(),
                    cfg.engine.kind()
                ))));
        };
        Ok(OpenCtx {
            cfg,
            af: *af,
            opts,
            args,
        })
    }

    /// `interfaces[i].address`.
    pub(crate) fn addr_key(i: usize) -> String {
        format!("interfaces[{i}].address")
    }

    /// The resources of queue `j` of interface `i`, checked for this engine. `hds` is the
    /// queue's `hds_split` (RX).
    pub(crate) fn resources(
        &self,
        dir: Dir,
        i: usize,
        j: usize,
        hds: Option<u32>,
    ) -> Result<QueueRes<'a>> {
        let list: &'a [QueueResources<'a>] = match dir {
            Dir::Rx => self.args.rx,
            Dir::Tx => self.args.tx,
        };
        let key = format!("interfaces[{i}].{}[{j}]", dir.table());
        let r = list
            .iter()
            .find(|r| r.interface == i && r.queue == j)
            .ok_or_else(|| AfpacketError::Resources(KeyError::new(key.clone(), "the runtime passed no QueueResources for this queue (EngineArgs must list every queue of the config)".to_owned())))?;
        let split = match (dir, hds, r.pools) {
            (Dir::Tx, _, _) | (Dir::Rx, None, _) => None,
            (Dir::Rx, Some(_), [hdr, data]) => {
                for (n, p) in [(0, hdr), (1, data)] {
                    if !p.is_cpu_accessible() {
                        return Err(AfpacketError::Resources(KeyError::new(format!("{key}.memory_regions[{n}]"), "AF_PACKET header-data split copies each frame out of the kernel ring with the CPU, so both regions must be CPU-accessible (host, huge or host_pinned), not GPU device memory".to_owned())));
                    }
                }
                Some((*hdr, *data))
            }
            (Dir::Rx, Some(_), pools) => {
                return Err(AfpacketError::Resources(KeyError::new(format!("{key}.memory_regions"), format!(
                        "hds_split needs exactly two regions on the afpacket engine (header, data), got {}",
                        pools.len()
                    ))))
            }
        };
        Ok(QueueRes {
            split,
            counters: r.counters,
        })
    }
}
