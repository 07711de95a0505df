//! [`AfpacketEngine`]: opens every interface of the config and hands out its queues.

use rtdaq_config::model::FanoutMode;
use rtdaq_config::Config;
use rtdaq_core::flow::DefaultAction;
use rtdaq_core::traits::{Engine, EngineArgs, TimedTx, TxQueue};
use rtdaq_core::QueueId;
use rtdaq_netsys::KeyError;

use crate::bpf::{compile_rx_filter, AsmError};
use crate::ctx::{Dir, OpenCtx};
use crate::error::{socket_error, AfpacketError, Result};
use crate::iface::{self, NetDev};
use crate::options::AfpacketOptions;
use crate::rx::{AfpacketRx, FanoutGroup, Flows, RxPlan};
use crate::sys::PacketSocket;
use crate::tx::{AfpacketTx, TX_SLOT_OVERHEAD};
use crate::MAX_BATCH;

/// Ethernet header plus two VLAN tags: what a frame adds to the MTU at most.
const L2_MAX: u32 = 14 + 8;

/// The AF_PACKET engine: one packet socket with a `TPACKET_V3` ring per RX queue and one with
/// a `TPACKET_V2` TX ring per TX queue, on the network devices of the config.
///
/// `N` is the burst capacity (packets per [`AfpacketBurst`](crate::AfpacketBurst) /
/// [`AfpacketTxBurst`](crate::AfpacketTxBurst)), [`MAX_BATCH`] by default.
pub struct AfpacketEngine<'a, const N: usize = MAX_BATCH> {
    rx: Vec<AfpacketRx<'a, N>>,
    tx: Vec<AfpacketTx<'a, N>>,
}

/// How an interface's RX traffic reaches its queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Steering {
    /// One RX queue (or none): every frame goes to it.
    Single,
    /// Several RX queues and no flow rules: a `PACKET_FANOUT` group spreads the frames.
    Fanout(FanoutMode),
    /// Several RX queues and flow rules: a cBPF filter per queue; frames no rule claims go to
    /// the catch-all queue (the default queue, or queue 0 when the default is "drop").
    Filters {
        /// The catch-all queue.
        catch_all: QueueId,
    },
}

/// How an interface's frames are steered, from its RX queue count and flow table.
pub(crate) fn steering(n_rx: usize, table: &Flows, fanout: FanoutMode) -> Steering {
    if n_rx < 2 {
        Steering::Single
    } else if table.is_empty() {
        Steering::Fanout(fanout)
    } else {
        Steering::Filters {
            catch_all: match table.default_action() {
                DefaultAction::Queue(q) => q,
                DefaultAction::Drop => QueueId(0),
            },
        }
    }
}

impl<'a, const N: usize> AfpacketEngine<'a, N> {
    /// Opens every interface of the config with explicit tuning (see [`AfpacketOptions`]);
    /// [`Engine::open`] is `open_with(args, &AfpacketOptions::default())`. Cold path.
    ///
    /// Sockets are created in the calling thread's network namespace: open the engine on a
    /// thread inside the namespace of the devices.
    ///
    /// # Errors
    /// [`AfpacketError`], naming the config key (or privilege) to change.
    pub fn open_with(args: EngineArgs<'a, Config>, opts: &AfpacketOptions) -> Result<Self> {
        let cfg: &'a Config = args.config;
        let ctx = OpenCtx::new(args, cfg, opts)?;
        if N == 0 {
            return Err(AfpacketError::Config(KeyError::new(
                "interfaces[].rx_queues[].batch_size".to_owned(),
                "the engine was built with a burst capacity of 0".to_owned(),
            )));
        }
        let mut engine = AfpacketEngine {
            rx: Vec::new(),
            tx: Vec::new(),
        };
        for (i, iface) in cfg.interfaces.iter().enumerate() {
            let key = OpenCtx::addr_key(i);
            check_frame_size(&ctx, i)?;
            let name = iface::netdev_name(&iface.address, &key, &opts.sysfs_root)?;
            let probe = PacketSocket::new().map_err(|e| socket_error(&key, e))?;
            let dev = iface::probe(&probe, &key, &name, opts)?;
            drop(probe);
            warn_device(&ctx, i, &dev);
            let table: Flows = cfg.flow_table(i);
            let n_rx = iface.rx_queues.len();
            let steer = steering(n_rx, &table, ctx.af.fanout);
            let mut group = match steer {
                Steering::Fanout(FanoutMode::None) => {
                    return Err(AfpacketError::Config(KeyError::new("engine.afpacket.fanout".to_owned(), format!(
                            "fanout = \"none\" but interfaces[{i}] has {n_rx} RX queues and no flow rules; use \"hash\""
                        ))))
                }
                Steering::Fanout(mode) => Some(FanoutGroup { mode, id: None }),
                _ => None,
            };
            let classify =
                !table.is_empty() || matches!(table.default_action(), DefaultAction::Drop);
            let mut filter_lens = Vec::new();
            for (j, q) in iface.rx_queues.iter().enumerate() {
                let res = ctx.resources(Dir::Rx, i, j, q.hds_split)?;
                let prog = match steer {
                    Steering::Filters { catch_all } => Some(
                        compile_rx_filter(&table, QueueId(j as u16), catch_all)
                            .map_err(|e| filter_error(i, j, e))?,
                    ),
                    _ => None,
                };
                filter_lens.extend(prog.as_ref().map(|p| p.len()));
                let plan = RxPlan {
                    filter: prog.as_ref(),
                    fanout: group.as_mut(),
                    flows: classify.then(|| Box::new(table.clone())),
                    check_queue: matches!(steer, Steering::Filters { .. }),
                };
                engine
                    .rx
                    .push(AfpacketRx::open(&ctx, i, j, &dev, q, res, plan)?);
            }
            for (j, q) in iface.tx_queues.iter().enumerate() {
                let res = ctx.resources(Dir::Tx, i, j, None)?;
                engine.tx.push(AfpacketTx::open(&ctx, i, j, &dev, q, res)?);
            }
            log_interface(&ctx, i, &dev, steer, &group, &filter_lens);
        }
        Ok(engine)
    }

    /// The RX queues, in config order.
    pub fn rx(&self) -> &[AfpacketRx<'a, N>] {
        &self.rx
    }

    /// The RX queues, mutably.
    pub fn rx_mut(&mut self) -> &mut [AfpacketRx<'a, N>] {
        &mut self.rx
    }

    /// The TX queues, in config order.
    pub fn tx(&self) -> &[AfpacketTx<'a, N>] {
        &self.tx
    }

    /// The TX queues, mutably.
    pub fn tx_mut(&mut self) -> &mut [AfpacketTx<'a, N>] {
        &mut self.tx
    }

    /// The queues, in config order (what [`Engine::split`] hands out).
    pub fn into_queues(self) -> (Vec<AfpacketRx<'a, N>>, Vec<AfpacketTx<'a, N>>) {
        (self.rx, self.tx)
    }
}

/// `frame_size` holds the largest frame of interface `i` (TX slot, RX nominal frame).
fn check_frame_size(ctx: &OpenCtx<'_, '_>, i: usize) -> Result<()> {
    let mtu = ctx.cfg.interfaces[i].mtu;
    let largest = mtu + L2_MAX;
    let fs = ctx.af.frame_size;
    let need = largest + TX_SLOT_OVERHEAD as u32;
    if fs < need {
        return Err(AfpacketError::Config(KeyError::new("engine.afpacket.frame_size".to_owned(), format!(
                "frame_size {fs} cannot hold the largest frame of interfaces[{i}] (mtu {mtu} + {L2_MAX} B of Ethernet and VLAN headers = {largest} B) plus the {TX_SLOT_OVERHEAD} B tpacket header; set engine.afpacket.frame_size ≥ {} or lower interfaces[{i}].mtu",
                need.div_ceil(16) * 16
            ))));
    }
    Ok(())
}

/// Warns when the device's MTU differs from the config's, or the device is down.
fn warn_device(ctx: &OpenCtx<'_, '_>, i: usize, dev: &NetDev) {
    let mtu = ctx.cfg.interfaces[i].mtu;
    if dev.mtu != mtu {
        log::warn!(
            "interfaces[{i}].mtu = {mtu} but \"{}\" has MTU {}: frames above {} B are {} (set interfaces[{i}].mtu = {} or `ip link set {} mtu {mtu}`)",
            dev.name,
            dev.mtu,
            dev.mtu.min(mtu) + 14,
            if dev.mtu > mtu {
                "received only as far as the ring and buffers (sized for the config) hold them: counted truncated / too_large"
            } else {
                "neither sent (counted too_large) nor received"
            },
            dev.mtu,
            dev.name
        );
    }
    if !dev.up {
        log::warn!(
            "interfaces[{i}] \"{}\" is down: nothing is received or sent until `ip link set {} up`",
            dev.name,
            dev.name
        );
    }
}

fn filter_error(i: usize, j: usize, e: AsmError) -> AfpacketError {
    let detail = match e {
        AsmError::TooLong { len } => format!(
            "the flow rules of interfaces[{i}] compile to a {len}-instruction cBPF filter for rx_queues[{j}], more than the kernel's 4096; use fewer rules, fewer RSS rules spanning this queue, or simpler matches"
        ),
        other => format!("cannot compile the flow rules of interfaces[{i}] for rx_queues[{j}]: {other} (a bug in the afpacket engine)"),
    };
    AfpacketError::Filter {
        key: "flows".to_owned(),
        detail,
    }
}

fn log_interface(
    ctx: &OpenCtx<'_, '_>,
    i: usize,
    dev: &NetDev,
    steer: Steering,
    group: &Option<FanoutGroup>,
    filter_lens: &[usize],
) {
    let iface = &ctx.cfg.interfaces[i];
    let af = &ctx.af;
    let how = match steer {
        Steering::Single => "one RX socket".to_owned(),
        Steering::Fanout(m) => format!(
            "fanout \"{}\" group {}",
            m.as_str(),
            group
                .and_then(|g| g.id)
                .map_or("-".to_owned(), |id| id.to_string())
        ),
        Steering::Filters { catch_all } => format!(
            "cBPF flow filters ({} instructions per queue), catch-all rx_queues[{}]",
            filter_lens
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join("/"),
            catch_all.0
        ),
    };
    let m = dev.mac;
    log::info!(
        "interfaces[{i}] \"{}\" = {} (ifindex {}, MTU {}, {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}): {} RX queue(s), {}; {} TX queue(s); RX ring {} × {} KiB blocks; RX timestamps: {}",
        iface.name,
        dev.name,
        dev.ifindex,
        dev.mtu,
        m[0],
        m[1],
        m[2],
        m[3],
        m[4],
        m[5],
        iface.rx_queues.len(),
        how,
        iface.tx_queues.len(),
        af.block_count,
        af.block_size / 1024,
        dev.timestamps
    );
}

impl<'a, const N: usize> Engine<'a> for AfpacketEngine<'a, N> {
    const NAME: &'static str = "afpacket";
    const FRAMES: bool = true;
    type Config = EngineArgs<'a, Config>;
    type Rx = AfpacketRx<'a, N>;
    type Tx = AfpacketTx<'a, N>;
    type Error = AfpacketError;

    fn open(cfg: Self::Config) -> Result<Self> {
        Self::open_with(cfg, &AfpacketOptions::default())
    }

    fn timed_tx(
        tx: &mut Self::Tx,
    ) -> Option<&mut dyn TimedTx<Burst = <Self::Tx as TxQueue>::Burst>> {
        Some(tx)
    }

    fn split(self, rx: &mut dyn FnMut(Self::Rx), tx: &mut dyn FnMut(Self::Tx)) {
        self.rx.into_iter().for_each(&mut *rx);
        self.tx.into_iter().for_each(&mut *tx);
    }
}

impl<const N: usize> std::fmt::Debug for AfpacketEngine<'_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfpacketEngine")
            .field("rx", &self.rx)
            .field("tx", &self.tx)
            .finish()
    }
}
