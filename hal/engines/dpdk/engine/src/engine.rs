//! [`DpdkEngine`]: `open` turns the config into an EAL, one mbuf pool per memory region and
//! one started port per interface; `split` hands the queues out.
//!
//! Config → DPDK mapping, per interface `i` (see `docs/engines/dpdk.md`):
//!
//! - `interfaces[i].address`: a PCI address becomes `-a <BDF>` and names the port; a
//!   netdev-like name must name a port the EAL arguments create (`net_ring0`, or a
//!   `--vdev NAME,iface=<address>` whose vdev is then used), else [`DpdkEngineError::NoSuchPort`].
//! - RX queue `j` / TX queue `j` = DPDK queue `j` of the port; descriptors per queue =
//!   the largest `max(ring_depth, batch_size)` of the direction, clamped to 64..=4096.
//! - Every memory region a queue names becomes one mbuf pool whose data buffers are the
//!   region's own memory (`memory.rs`); RX queue `j` fills from the pool of its region (two
//!   pools with `hds_split`: buffer split), TX queue `j` allocates from its region's pool.
//! - Several RX queues: RSS over them (`port_setup.rs`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rtdaq_config::model::{Address, Engine as EngineConfig, GenPacing, RegionId, RegionKind};
use rtdaq_config::Config;
use rtdaq_core::flow::DefaultAction;
use rtdaq_core::traits::{
    Engine, EngineArgs, QueueResources, RateLimitTx, RxQueue, TimedTx, TxQueue,
};
use rtdaq_core::{QueueCounters, QueueId};
use rtdaq_dpdk_sys::{Eal, Mempool, Port, PortConfig};

use crate::burst::{DpdkRxBurst, DpdkTxBurst, InGpu};
use crate::eal::{eal_args, vdev_for_netdev};
use crate::error::{DpdkEngineError, Result};
use crate::memory::{check_region, dpdk_owned_mempool, region_mempool, region_pools};
use crate::port_setup::{rss_for, rx_queue_configs};
use crate::rx::{DpdkRx, RxSetup};
use crate::stats::DpdkPortStats;
use crate::tx::{DpdkTx, TxSetup};
use crate::DpdkOptions;

/// Ethernet header plus two VLAN tags: the largest frame is the MTU plus this.
const L2_OVERHEAD: u32 = 14 + 8;
/// Fewest / most descriptors per queue.
const MIN_DESC: u32 = 64;
const MAX_DESC: u32 = 4096;
/// Makes mempool names unique within the process (DPDK names are global).
static POOL_SEQ: AtomicU32 = AtomicU32::new(0);

/// The DPDK engine: one EAL per process, one port per interface, one mbuf pool per memory
/// region over that region's memory.
pub struct DpdkEngine<'a> {
    rx: Vec<DpdkRx<'a>>,
    tx: Vec<DpdkTx<'a>>,
    ports: Vec<Port>,
    interfaces: Vec<InterfaceInfo>,
    eal: &'static Eal,
}

/// What `open` found for one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InterfaceInfo {
    /// Index in the config's `interfaces`.
    pub index: usize,
    /// The DPDK port name (`net_ring0`, `0000:17:00.0`, or the vdev over a netdev).
    pub port: String,
    /// The DPDK port id.
    pub port_id: u16,
    /// The PMD (`net_ring`, `net_null`, `mlx5_pci`, ...).
    pub driver: String,
    /// (RX, TX) queues configured.
    pub queues: (u16, u16),
    /// How many of the interface's flows steer in the NIC as `rte_flow` rules (the first
    /// ones; see `engine.dpdk.flow_offload`).
    pub flows_offloaded: usize,
    /// Whether `default_action` is an `rte_flow` rule too.
    pub default_offloaded: bool,
    /// `rte_flow` rules created on the port (port ranges may expand a flow to several).
    pub flow_rules: usize,
}

/// The validated plan of one interface, made before the EAL starts.
struct Plan<'a> {
    rx: Vec<(usize, &'a QueueCounters)>,
    tx: Vec<(usize, &'a QueueCounters)>,
    /// Regions of each RX queue (two with header-data split: header, data).
    rx_regions: Vec<Vec<usize>>,
    tx_regions: Vec<usize>,
    rx_desc: u16,
    tx_desc: u16,
}

fn counters_for<'a>(
    res: &'a [QueueResources<'a>],
    i: usize,
    j: usize,
    key: &str,
) -> Result<&'a QueueCounters> {
    res.iter()
        .find(|r| r.interface == i && r.queue == j)
        .map(|r| r.counters)
        .ok_or_else(|| {
            DpdkEngineError::config(
                key,
                "the runtime handed the engine no counters for this queue (EngineArgs must list every queue of the config)",
            )
        })
}

/// The TX queue of interface `i` the generator sends on with launch times
/// (`generator.pacing = "txtime"`), if any.
fn timed_queue(cfg: &Config, i: usize) -> Option<usize> {
    cfg.generator
        .as_ref()
        .filter(|g| g.interface.0 == i && matches!(g.pacing, GenPacing::Txtime { .. }))
        .map(|g| usize::from(g.tx_queue.0))
}

/// Arms TX queue `j` of interface `i` for launch times (the `launch` module), or logs why
/// it cannot be: the runtime then paces in software and the report says so. Cold path.
fn arm_launch(
    i: usize,
    j: usize,
    q: &rtdaq_dpdk_sys::TxQueue,
    info: &rtdaq_dpdk_sys::PortInfo,
) -> Option<crate::launch::TxLaunch> {
    match crate::launch::arm(q, info) {
        Ok(l) => {
            log::info!(
                "interfaces[{i}].tx_queues[{j}]: launch times kept by the NIC (RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP), CLOCK_TAI moved onto the device's clock at {:.6} units per ns",
                l.clock.rate()
            );
            Some(l)
        }
        Err(why) => {
            log::warn!(
                "interfaces[{i}].tx_queues[{j}]: generator.pacing = \"txtime\", but {why}; the software pacer keeps the times"
            );
            None
        }
    }
}

/// Hardware receive stamps for RX queue `j` of interface `i` where the PMD gives them
/// (logged); `None` elsewhere (stamps taken at the poll). Cold path.
fn rx_stamps(
    i: usize,
    j: usize,
    q: &rtdaq_dpdk_sys::RxQueue,
    info: &rtdaq_dpdk_sys::PortInfo,
) -> Option<crate::launch::RxStamps> {
    if !info.rx_timestamp() {
        return None;
    }
    match crate::launch::RxStamps::arm(q, info) {
        Ok(s) => {
            log::info!("interfaces[{i}].rx_queues[{j}]: receive times from the NIC (RTE_ETH_RX_OFFLOAD_TIMESTAMP), moved onto CLOCK_REALTIME");
            Some(s)
        }
        Err(why) => {
            log::warn!(
                "interfaces[{i}].rx_queues[{j}]: {why}; receive times are taken at the poll"
            );
            None
        }
    }
}

fn first_region(regions: &[RegionId], key: &str) -> Result<usize> {
    regions.first().map(|r| r.0).ok_or_else(|| {
        DpdkEngineError::config(
            format!("{key}.memory_regions"),
            "the queue names no memory region; list one",
        )
    })
}

fn descs<I: Iterator<Item = u32>>(it: I) -> u16 {
    it.max()
        .unwrap_or(MIN_DESC)
        .clamp(MIN_DESC, MAX_DESC)
        .next_power_of_two()
        .min(MAX_DESC) as u16
}

impl DpdkEngine<'static> {
    /// Opens the engine with explicit tuning; [`Engine::open`] is
    /// `open_with(args, &DpdkOptions::default())`. Cold path.
    ///
    /// The buffer pools of `args` must be `'static` (the runtime's are, leaked for the
    /// process): DPDK keeps their memory as mbuf data buffers for as long as mbufs exist.
    ///
    /// # Errors
    /// [`DpdkEngineError`], naming the config key to change.
    pub fn open_with(args: EngineArgs<'static, Config>, opts: &DpdkOptions) -> Result<Self> {
        let cfg: &'static Config = args.config;
        let EngineConfig::Dpdk(d) = &cfg.engine else {
            return Err(DpdkEngineError::config(
                "engine.kind",
                format!(
                    "the config is for engine \"{k}\" but this is the DPDK engine; set engine.kind = \"dpdk\" or build the binary with --features engine-{k}",
                    k = cfg.engine.kind()
                ),
            ));
        };
        let plans = plan(cfg, &args)?;
        let flow_plans = crate::flow::plan_all(cfg, d.flow_offload)?;
        let used: BTreeMap<usize, ()> = plans
            .iter()
            .flat_map(|p| p.rx_regions.iter().flatten().chain(&p.tx_regions).copied())
            .map(|r| (r, ()))
            .collect();
        for &r in used.keys() {
            check_region(cfg, r, plans.iter().any(|p| p.tx_regions.contains(&r)))?;
        }
        let region_bufs = region_pools(cfg, &args)?;

        let eal_args = eal_args(cfg, d);
        let eal = Eal::init(&eal_args).map_err(|source| DpdkEngineError::Eal {
            args: eal_args.clone(),
            source: Box::new(source),
        })?;
        let names = cfg
            .interfaces
            .iter()
            .enumerate()
            .map(|(i, iface)| port_name(eal, &d.eal_args, i, &iface.address))
            .collect::<Result<Vec<_>>>()?;

        let port_ids = names
            .iter()
            .map(|n| Port::id_by_name(eal, n).map(|id| (n.clone(), id)))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|source| DpdkEngineError::Port {
                key: "interfaces".into(),
                port: String::new(),
                source: Box::new(source),
            })?;
        // What each PMD offers, and the RSS it gets: checked before any memory is handed over.
        let mut port_infos = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let info = Port::query_info(eal, name).map_err(|source| DpdkEngineError::Port {
                key: format!("interfaces[{i}]"),
                port: name.clone(),
                source: Box::new(source),
            })?;
            let rss = rss_for(cfg, i, name, &info)?;
            port_infos.push((info, rss));
        }
        let seq = POOL_SEQ.fetch_add(1, Ordering::Relaxed);
        // net_af_xdp builds its AF_XDP UMEM over the mbuf pool's own memory zone, which an
        // external-buffer pool does not have (rx queue setup fails with EINVAL): regions its
        // queues use get a DPDK-owned pool instead.
        let own_memory: BTreeMap<usize, String> = plans
            .iter()
            .zip(&port_infos)
            .filter(|(_, (info, _))| info.driver == "net_af_xdp")
            .flat_map(|(p, (info, _))| {
                p.rx_regions
                    .iter()
                    .flatten()
                    .chain(&p.tx_regions)
                    .map(|&r| (r, info.driver.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut pools: BTreeMap<usize, Arc<Mempool>> = BTreeMap::new();
        for &r in used.keys() {
            if let Some(driver) = own_memory.get(&r) {
                if cfg.memory_regions[r].kind == RegionKind::Device {
                    return Err(DpdkEngineError::config(
                        format!("memory_regions[{r}].kind"),
                        format!("kind \"device\" on a {driver} port: that PMD receives into an AF_XDP UMEM in DPDK's own CPU memory, never into GPU memory; use a \"host_pinned\" region with a gpu_stage, or a NIC whose PMD takes external buffers (mlx5)"),
                    ));
                }
                pools.insert(r, dpdk_owned_mempool(eal, cfg, r, driver, seq)?);
                continue;
            }
            let bufs = region_bufs.get(&r).copied().ok_or_else(|| {
                DpdkEngineError::config(
                    format!("memory_regions[{r}]"),
                    "the runtime handed the engine no buffer pool for this region",
                )
            })?;
            pools.insert(r, region_mempool(eal, cfg, r, bufs, &port_ids, seq)?);
        }
        check_pool_sizes(cfg, &plans, &pools)?;

        let mut rx = Vec::new();
        let mut tx = Vec::new();
        let mut ports = Vec::new();
        let mut interfaces = Vec::new();
        for (i, ((p, name), (pinfo, rss))) in
            plans.into_iter().zip(names).zip(port_infos).enumerate()
        {
            let iface = &cfg.interfaces[i];
            let port_err = |source| DpdkEngineError::Port {
                key: format!("interfaces[{i}]"),
                port: name.clone(),
                source: Box::new(source),
            };
            let rxc = rx_queue_configs(cfg, i, &name, &pinfo, &p.rx_regions, &pools)?;
            let pc = PortConfig {
                rx_queues: p.rx.len() as u16,
                tx_queues: p.tx.len() as u16,
                rx_desc: p.rx_desc,
                tx_desc: p.tx_desc,
                promiscuous: true,
                rss,
                // The NIC's receive stamps wherever the PMD gives them.
                rx_timestamps: true,
                tx_timestamps: timed_queue(cfg, i).is_some(),
            };
            let (port, rxq, txq) = Port::open_with(eal, &name, &pc, &rxc).map_err(port_err)?;
            log_port(i, &name, &port);
            let driver = port.info().map(|x| x.driver).unwrap_or_default();
            let offloaded = crate::flow::offload(cfg, i, &port, d.flow_offload, &flow_plans[i])?;
            let flow_rules: Arc<[rtdaq_dpdk_sys::FlowRule]> = offloaded.rules.into();
            interfaces.push(InterfaceInfo {
                index: i,
                port: name.clone(),
                port_id: port.id(),
                driver,
                queues: port.queues(),
                flows_offloaded: offloaded.flows,
                default_offloaded: offloaded.default_action,
                flow_rules: flow_rules.len(),
            });
            for ((((j, counters), q), qc), regs) in
                p.rx.into_iter().zip(rxq).zip(rxc).zip(&p.rx_regions)
            {
                let c = &iface.rx_queues[j];
                let gpu = |k: usize| {
                    regs.get(k)
                        .is_some_and(|&r| cfg.memory_regions[r].kind == RegionKind::Device)
                };
                rx.push(DpdkRx::new(RxSetup {
                    segments: if qc.split.is_some() { 2 } else { 1 },
                    pool: qc.pool,
                    counters,
                    flows: {
                        // Without rules and with a queue as default action there is nothing
                        // to classify (as in the AF_PACKET engine): frames go up untouched.
                        let t = cfg.flow_table(i);
                        (!t.is_empty() || matches!(t.default_action(), DefaultAction::Drop))
                            .then(|| Box::new(t))
                    },
                    interface: i,
                    queue: j,
                    batch: c.batch_size as usize,
                    busy: c.busy_poll,
                    timeout: Duration::from_micros(u64::from(c.timeout_us)),
                    port: name.clone(),
                    flow_rules: Arc::clone(&flow_rules),
                    device: InGpu {
                        head: gpu(0),
                        data: gpu(1),
                    },
                    stamps: rx_stamps(i, j, &q, &pinfo),
                    q,
                }));
            }
            for (((j, counters), q), r) in p.tx.into_iter().zip(txq).zip(p.tx_regions) {
                let c = &iface.tx_queues[j];
                let room = cfg.memory_regions[r].buf_size;
                tx.push(DpdkTx::new(TxSetup {
                    pool: Arc::clone(&pools[&r]),
                    counters,
                    interface: i,
                    queue: j,
                    batch: c.batch_size as usize,
                    stall: opts.tx_stall,
                    max_frame: (iface.mtu + L2_OVERHEAD).min(room) as usize,
                    port: name.clone(),
                    launch: (timed_queue(cfg, i) == Some(j))
                        .then(|| arm_launch(i, j, &q, &pinfo))
                        .flatten(),
                    q,
                }));
            }
            ports.push(port);
        }
        Ok(DpdkEngine {
            rx,
            tx,
            ports,
            interfaces,
            eal,
        })
    }
}

impl<'a> DpdkEngine<'a> {
    /// A handle reading every port's counters, xstats, link and MAC (the runtime's
    /// [`EngineStats`](rtdaq_core::traits::EngineStats) seam, for the report). It keeps the
    /// ports open until dropped: take it before [`split`](Engine::split) and drop it after
    /// the queues.
    pub fn stats_handle(&self) -> DpdkPortStats {
        DpdkPortStats::new(
            self.interfaces
                .iter()
                .cloned()
                .zip(self.ports.iter().cloned())
                .collect(),
        )
    }

    /// What `open` found for each interface, in config order.
    pub fn interfaces(&self) -> &[InterfaceInfo] {
        &self.interfaces
    }

    /// The started port of interface `i` (stats, MAC); it stays open as long as any of
    /// its queues lives.
    pub fn port(&self, i: usize) -> Option<&Port> {
        self.ports.get(i)
    }

    /// The process's EAL.
    pub fn eal(&self) -> &'static Eal {
        self.eal
    }

    /// The queues, without consuming the engine's port handles (tests, tools).
    pub fn into_queues(self) -> (Vec<DpdkRx<'a>>, Vec<DpdkTx<'a>>) {
        (self.rx, self.tx)
    }
}

/// Checks every interface against what this engine supports and collects its queues'
/// counters and regions. Runs before the EAL starts.
fn plan<'a>(cfg: &'a Config, args: &EngineArgs<'a, Config>) -> Result<Vec<Plan<'a>>> {
    let mut plans = Vec::new();
    for (i, iface) in cfg.interfaces.iter().enumerate() {
        if let Address::Socket(u) = &iface.address {
            return Err(DpdkEngineError::config(
                format!("interfaces[{i}].address"),
                format!("\"{u}\" is a socket URI; the DPDK engine needs a DPDK port name (a --vdev of engine.dpdk.eal_args) or a PCI address"),
            ));
        }
        let mut rx = Vec::new();
        let mut rx_regions = Vec::new();
        for (j, q) in iface.rx_queues.iter().enumerate() {
            let key = format!("interfaces[{i}].rx_queues[{j}]");
            first_region(&q.memory_regions, &key)?;
            let n = if q.hds_split.is_some() { 2 } else { 1 };
            rx_regions.push(q.memory_regions.iter().take(n).map(|r| r.0).collect());
            rx.push((j, counters_for(args.rx, i, j, &key)?));
        }
        let mut tx = Vec::new();
        let mut tx_regions = Vec::new();
        for (j, q) in iface.tx_queues.iter().enumerate() {
            let key = format!("interfaces[{i}].tx_queues[{j}]");
            tx_regions.push(first_region(&q.memory_regions, &key)?);
            tx.push((j, counters_for(args.tx, i, j, &key)?));
        }
        if rx.is_empty() && tx.is_empty() {
            return Err(DpdkEngineError::config(
                format!("interfaces[{i}]"),
                "the interface has no queue; add an rx_queues or tx_queues entry",
            ));
        };
        plans.push(Plan {
            rx_desc: descs(
                iface
                    .rx_queues
                    .iter()
                    .map(|q| q.ring_depth.max(q.batch_size)),
            ),
            tx_desc: descs(
                iface
                    .tx_queues
                    .iter()
                    .map(|q| q.ring_depth.max(q.batch_size)),
            ),
            rx,
            tx,
            rx_regions,
            tx_regions,
        });
    }
    Ok(plans)
}

/// Every mbuf pool holds at least the RX descriptors of the queues filling from it plus
/// one burst per queue (otherwise the port cannot start, or RX starves at once).
fn check_pool_sizes(
    cfg: &Config,
    plans: &[Plan<'_>],
    pools: &BTreeMap<usize, Arc<Mempool>>,
) -> Result<()> {
    let mut need: BTreeMap<usize, u64> = BTreeMap::new();
    for (i, p) in plans.iter().enumerate() {
        for (j, regs) in p.rx_regions.iter().enumerate() {
            let batch = u64::from(cfg.interfaces[i].rx_queues[j].batch_size);
            for r in regs {
                *need.entry(*r).or_default() += u64::from(p.rx_desc) + batch;
            }
        }
    }
    for (r, n) in need {
        let have = pools[&r].size();
        if u64::from(have) < n {
            let reg = &cfg.memory_regions[r];
            return Err(DpdkEngineError::config(
                format!("memory_regions[{r}].buf_count"),
                format!(
                    "region \"{}\" holds {have} mbufs of {} B + {} B headroom, but its RX queues need {n} (descriptors + one burst each); raise buf_count or lower ring_depth",
                    reg.name,
                    reg.buf_size,
                    rtdaq_dpdk_sys::raw::RTE_PKTMBUF_HEADROOM
                ),
            ));
        }
    }
    Ok(())
}

/// Logs the port's MAC, link and RSS once at open.
fn log_port(i: usize, name: &str, port: &Port) {
    let mac = port
        .mac()
        .map(|m| {
            m.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":")
        })
        .unwrap_or_else(|e| format!("unknown ({e})"));
    let link = match port.link() {
        Ok(l) => format!(
            "link {} {} Mb/s {}",
            if l.up { "up" } else { "down" },
            l.speed_mbps,
            if l.full_duplex {
                "full duplex"
            } else {
                "half duplex"
            }
        ),
        Err(e) => format!("link unknown ({e})"),
    };
    let rss = match port.rss() {
        Some(r) => format!(
            ", RSS hash {:#x} over a {}-entry RETA",
            r.hash_fields, r.reta_size
        ),
        None => String::new(),
    };
    log::info!(
        "interfaces[{i}]: DPDK port \"{name}\" (id {}) MAC {mac}, {link}, {} RX / {} TX queues{rss}",
        port.id(),
        port.queues().0,
        port.queues().1
    );
}

/// The DPDK port name of interface `i`.
fn port_name(eal: &Eal, eal_args: &[String], i: usize, a: &Address) -> Result<String> {
    let key = format!("interfaces[{i}].address");
    let present = || eal.port_names().into_iter().map(|(_, n)| n).collect();
    match a {
        Address::Netdev(n) => {
            if Port::id_by_name(eal, n).is_ok() {
                return Ok(n.clone());
            }
            if let Some(v) = vdev_for_netdev(eal_args, n) {
                if Port::id_by_name(eal, &v).is_ok() {
                    return Ok(v);
                }
            }
            Err(DpdkEngineError::NoSuchPort {
                key,
                name: n.clone(),
                present: present(),
                hint: format!("a netdev is not a DPDK port by itself: create a port over it in engine.dpdk.eal_args, e.g. \"--vdev\", \"net_af_packet0,iface={n}\" (or net_af_xdp0 / net_tap0), or use the NIC's PCI address (\"0000:17:00.0\") bound to vfio-pci; a DPDK port name such as \"net_ring0\" works when eal_args create it"),
            })
        }
        Address::Pci(p) => {
            let name = p.to_string();
            if Port::id_by_name(eal, &name).is_ok() {
                return Ok(name);
            }
            Err(DpdkEngineError::NoSuchPort {
                key,
                name,
                present: present(),
                hint: format!(
                    "the EAL probed no port at this PCI address: check that the NIC is there (`lspci -D`, `dpdk-devbind.py --status`); a ConnectX (mlx5) stays on its kernel driver and needs DPDK's mlx5 PMD (librte_net_mlx5) with rdma-core, most other NICs must be bound to vfio-pci{}",
                    if eal_args.iter().any(|a| a == "--no-pci") {
                        "; and remove \"--no-pci\" from engine.dpdk.eal_args (it disables the PCI bus)"
                    } else {
                        ""
                    }
                ),
            })
        }
        Address::Socket(u) => Err(DpdkEngineError::config(
            key,
            format!("\"{u}\" is a socket URI"),
        )),
    }
}

impl Engine<'static> for DpdkEngine<'static> {
    const NAME: &'static str = "dpdk";
    const FRAMES: bool = true;
    type Config = EngineArgs<'static, Config>;
    type Rx = DpdkRx<'static>;
    type Tx = DpdkTx<'static>;
    type Error = DpdkEngineError;

    fn open(cfg: Self::Config) -> Result<Self> {
        Self::open_with(cfg, &DpdkOptions::default())
    }

    fn interface_mac(&self, interface: usize) -> Option<[u8; 6]> {
        self.port(interface).and_then(|p| p.mac().ok())
    }

    fn rate_limit_tx(tx: &mut Self::Tx) -> Option<&mut dyn RateLimitTx<Burst = DpdkTxBurst>> {
        Some(tx)
    }

    fn timed_tx(tx: &mut Self::Tx) -> Option<&mut dyn TimedTx<Burst = DpdkTxBurst>> {
        Some(tx)
    }

    fn split(self, rx: &mut dyn FnMut(Self::Rx), tx: &mut dyn FnMut(Self::Tx)) {
        self.rx.into_iter().for_each(&mut *rx);
        self.tx.into_iter().for_each(&mut *tx);
    }
}

/// Gives the calling thread, a queue's thread that DPDK did not start, an lcore id
/// ([`Eal::register_thread`]), so its mbuf allocations and frees go through each mempool's
/// per-lcore cache instead of the shared ring (which cycles through every mbuf of the pool).
/// The runtime makes a queue's bursts on the queue's own thread, after pinning it and before
/// its loop; the registration ends with the thread. Failing, the queue works uncached (said
/// once per thread). Cold path.
fn enter_eal(port: &str) {
    std::thread_local! {
        static TRIED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    let Some(eal) = Eal::get() else { return };
    if TRIED.with(|t| t.replace(true)) {
        return;
    }
    match eal.register_thread() {
        Ok(id) => log::debug!("DPDK port {port}: queue thread is lcore {id}"),
        Err(e) => log::warn!("DPDK port {port}: {e}"),
    }
}

impl RxQueue for DpdkRx<'_> {
    type Burst = DpdkRxBurst;

    /// Also registers the calling thread (the queue's) with the EAL
    /// ([`Eal::register_thread`](rtdaq_dpdk_sys::Eal::register_thread)), once per thread.
    fn new_burst(&self) -> DpdkRxBurst {
        enter_eal(self.port_name());
        DpdkRxBurst::with_capacity(QueueId(self.queue() as u16), self.batch()).in_gpu(self.in_gpu())
    }

    #[inline]
    fn poll(&mut self, burst: &mut DpdkRxBurst) -> usize {
        self.poll_burst(burst)
    }
}

impl TxQueue for DpdkTx<'_> {
    type Burst = DpdkTxBurst;

    /// Also registers the calling thread (the queue's) with the EAL
    /// ([`Eal::register_thread`](rtdaq_dpdk_sys::Eal::register_thread)), once per thread.
    fn new_burst(&self) -> DpdkTxBurst {
        enter_eal(self.port_name());
        DpdkTxBurst::with_capacity(QueueId(self.queue() as u16), self.batch())
    }

    /// Allocates up to `n` mbufs (bounded by the burst's free room) from the queue's
    /// mempool; returns how many frames the burst now holds. Never blocks, never allocates
    /// heap memory.
    #[inline]
    fn reserve(&mut self, burst: &mut DpdkTxBurst, n: usize) -> usize {
        self.reserve_burst(burst, n)
    }

    #[inline]
    fn send(&mut self, burst: &mut DpdkTxBurst) -> usize {
        self.send_burst(burst)
    }
}

impl std::fmt::Debug for DpdkEngine<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpdkEngine")
            .field("interfaces", &self.interfaces)
            .field("rx", &self.rx)
            .field("tx", &self.tx)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_and_bursts_move_between_threads() {
        fn send<T: Send>() {}
        send::<DpdkRx<'static>>();
        send::<DpdkTx<'static>>();
        send::<DpdkRxBurst>();
        send::<DpdkTxBurst>();
    }

    #[test]
    fn descriptor_counts_are_clamped_powers_of_two() {
        assert_eq!(descs([].into_iter()), 64);
        assert_eq!(descs([100, 32].into_iter()), 128);
        assert_eq!(descs([1 << 20].into_iter()), 4096);
    }
}
