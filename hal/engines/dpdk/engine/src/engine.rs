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
//! - Every RX queue of a port fills from one mempool (DPDK sets the pool per RX queue, the
//!   sys crate per port): the RX queues of one interface must name the same region.
//! - TX queue `j` allocates from the mempool of its own region.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rtdaq_config::model::{Address, Engine as EngineConfig, RegionId, RegionKind};
use rtdaq_config::Config;
use rtdaq_core::traits::{Engine, EngineArgs, QueueResources, RxQueue, TxQueue};
use rtdaq_core::{QueueCounters, QueueId};
use rtdaq_dpdk_sys::{raw, Eal, Mempool, MempoolConfig, Port, PortConfig};

use crate::burst::{DpdkRxBurst, DpdkTxBurst};
use crate::eal::{eal_args, vdev_for_netdev};
use crate::error::{DpdkEngineError, Result};
use crate::rx::{DpdkRx, RxSetup};
use crate::tx::{DpdkTx, TxSetup};
use crate::DpdkOptions;

/// Ethernet header plus two VLAN tags: the largest frame is the MTU plus this.
const L2_OVERHEAD: u32 = 14 + 8;
/// Fewest / most descriptors per queue.
const MIN_DESC: u32 = 64;
const MAX_DESC: u32 = 4096;
/// Makes mempool names unique within the process (DPDK names are global).
static POOL_SEQ: AtomicU32 = AtomicU32::new(0);

/// The DPDK engine: one EAL per process, one port per interface, DPDK mempools per
/// memory region.
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
}

/// The validated plan of one interface, made before the EAL starts.
struct Plan<'a> {
    rx: Vec<(usize, &'a QueueCounters)>,
    tx: Vec<(usize, &'a QueueCounters)>,
    /// Region of the port's RX pool (or of TX queue 0 without RX queues).
    port_region: usize,
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

impl<'a> DpdkEngine<'a> {
    /// Opens the engine with explicit tuning; [`Engine::open`] is
    /// `open_with(args, &DpdkOptions::default())`. Cold path.
    ///
    /// # Errors
    /// [`DpdkEngineError`], naming the config key to change.
    pub fn open_with(args: EngineArgs<'a, Config>, opts: &DpdkOptions) -> Result<Self> {
        let cfg: &'a Config = args.config;
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
        let used: BTreeMap<usize, ()> = plans
            .iter()
            .flat_map(|p| std::iter::once(p.port_region).chain(p.tx_regions.iter().copied()))
            .map(|r| (r, ()))
            .collect();
        for &r in used.keys() {
            check_region(cfg, r)?;
        }

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

        let seq = POOL_SEQ.fetch_add(1, Ordering::Relaxed);
        let mut pools: BTreeMap<usize, Arc<Mempool>> = BTreeMap::new();
        for &r in used.keys() {
            let reg = &cfg.memory_regions[r];
            let n = reg.buf_count;
            let mc = MempoolConfig {
                n,
                cache_size: (n / 2).min(256),
                data_room: (reg.buf_size + raw::RTE_PKTMBUF_HEADROOM) as u16,
                socket: None,
            };
            let pool = Mempool::new(eal, &format!("rtdaq{seq}_r{r}"), &mc).map_err(|source| {
                DpdkEngineError::Mempool {
                    key: format!("memory_regions[{r}]"),
                    source: Box::new(source),
                }
            })?;
            pools.insert(r, pool);
        }

        let mut rx = Vec::new();
        let mut tx = Vec::new();
        let mut ports = Vec::new();
        let mut interfaces = Vec::new();
        for (i, (p, name)) in plans.into_iter().zip(names).enumerate() {
            let iface = &cfg.interfaces[i];
            let pc = PortConfig {
                rx_queues: p.rx.len() as u16,
                tx_queues: p.tx.len() as u16,
                rx_desc: p.rx_desc,
                tx_desc: p.tx_desc,
                promiscuous: true,
            };
            let port_pool = &pools[&p.port_region];
            let (port, rxq, txq) =
                Port::open(eal, &name, &pc, port_pool).map_err(|source| DpdkEngineError::Port {
                    key: format!("interfaces[{i}]"),
                    port: name.clone(),
                    source: Box::new(source),
                })?;
            let driver = port.info().map(|x| x.driver).unwrap_or_default();
            interfaces.push(InterfaceInfo {
                index: i,
                port: name.clone(),
                port_id: port.id(),
                driver,
                queues: port.queues(),
            });
            for ((j, counters), q) in p.rx.into_iter().zip(rxq) {
                let c = &iface.rx_queues[j];
                rx.push(DpdkRx::new(RxSetup {
                    q,
                    pool: Arc::clone(port_pool),
                    counters,
                    flows: Box::new(cfg.flow_table(i)),
                    interface: i,
                    queue: j,
                    batch: c.batch_size as usize,
                    busy: c.busy_poll,
                    timeout: Duration::from_micros(u64::from(c.timeout_us)),
                    port: name.clone(),
                }));
            }
            for (((j, counters), q), r) in p.tx.into_iter().zip(txq).zip(p.tx_regions) {
                let c = &iface.tx_queues[j];
                let room = cfg.memory_regions[r].buf_size;
                tx.push(DpdkTx::new(TxSetup {
                    q,
                    pool: Arc::clone(&pools[&r]),
                    counters,
                    interface: i,
                    queue: j,
                    batch: c.batch_size as usize,
                    stall: opts.tx_stall,
                    max_frame: (iface.mtu + L2_OVERHEAD).min(room) as usize,
                    port: name.clone(),
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
        let mut rx_region: Option<(usize, usize)> = None;
        for (j, q) in iface.rx_queues.iter().enumerate() {
            let key = format!("interfaces[{i}].rx_queues[{j}]");
            if let Some(h) = q.hds_split {
                return Err(DpdkEngineError::config(
                    format!("{key}.hds_split"),
                    format!("header-data split ({h} B headers) needs DPDK buffer split, which this engine does not set up yet; remove hds_split or use engine.kind = \"afpacket\""),
                ));
            }
            let r = first_region(&q.memory_regions, &key)?;
            match rx_region {
                None => rx_region = Some((j, r)),
                Some((j0, r0)) if r0 != r => {
                    return Err(DpdkEngineError::config(
                        format!("{key}.memory_regions"),
                        format!(
                            "names memory_regions[{r}] but interfaces[{i}].rx_queues[{j0}] names memory_regions[{r0}]; every RX queue of a DPDK port fills from one mbuf pool here: list the same region for all RX queues of the interface"
                        ),
                    ));
                }
                Some(_) => {}
            }
            rx.push((j, counters_for(args.rx, i, j, &key)?));
        }
        let mut tx = Vec::new();
        let mut tx_regions = Vec::new();
        for (j, q) in iface.tx_queues.iter().enumerate() {
            let key = format!("interfaces[{i}].tx_queues[{j}]");
            tx_regions.push(first_region(&q.memory_regions, &key)?);
            tx.push((j, counters_for(args.tx, i, j, &key)?));
        }
        let Some(port_region) = rx_region.map(|(_, r)| r).or(tx_regions.first().copied()) else {
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
            port_region,
            tx_regions,
        });
    }
    Ok(plans)
}

/// A region the engine can make a mempool for.
fn check_region(cfg: &Config, r: usize) -> Result<()> {
    let reg = &cfg.memory_regions[r];
    if matches!(reg.kind, RegionKind::HostPinned | RegionKind::Device) {
        return Err(DpdkEngineError::config(
            format!("memory_regions[{r}].kind"),
            format!("kind \"{}\": the DPDK engine allocates its mbufs from DPDK's own memory and does not register pinned or GPU memory yet (rte_extmem_register, issue #6); use kind = \"host\" or \"huge\"", reg.kind.as_str()),
        ));
    }
    let max = u32::from(u16::MAX) - raw::RTE_PKTMBUF_HEADROOM;
    if reg.buf_size > max {
        return Err(DpdkEngineError::config(
            format!("memory_regions[{r}].buf_size"),
            format!("{} B does not fit a DPDK mbuf (at most {max} B of data after the {} B headroom); lower buf_size", reg.buf_size, raw::RTE_PKTMBUF_HEADROOM),
        ));
    }
    Ok(())
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
                hint: "the EAL probed no port at this PCI address: check it (`dpdk-devbind.py --status`), bind the NIC to vfio-pci, and remove \"--no-pci\" from engine.dpdk.eal_args".to_owned(),
            })
        }
        Address::Socket(u) => Err(DpdkEngineError::config(
            key,
            format!("\"{u}\" is a socket URI"),
        )),
    }
}

impl<'a> Engine<'a> for DpdkEngine<'a> {
    const NAME: &'static str = "dpdk";
    const FRAMES: bool = true;
    type Config = EngineArgs<'a, Config>;
    type Rx = DpdkRx<'a>;
    type Tx = DpdkTx<'a>;
    type Error = DpdkEngineError;

    fn open(cfg: Self::Config) -> Result<Self> {
        Self::open_with(cfg, &DpdkOptions::default())
    }

    fn interface_mac(&self, interface: usize) -> Option<[u8; 6]> {
        self.port(interface).and_then(|p| p.mac().ok())
    }

    fn split(self, rx: &mut dyn FnMut(Self::Rx), tx: &mut dyn FnMut(Self::Tx)) {
        self.rx.into_iter().for_each(&mut *rx);
        self.tx.into_iter().for_each(&mut *tx);
    }
}

impl RxQueue for DpdkRx<'_> {
    type Burst = DpdkRxBurst;

    fn new_burst(&self) -> DpdkRxBurst {
        DpdkRxBurst::with_capacity(QueueId(self.queue() as u16), self.batch())
    }

    #[inline]
    fn poll(&mut self, burst: &mut DpdkRxBurst) -> usize {
        self.poll_burst(burst)
    }
}

impl TxQueue for DpdkTx<'_> {
    type Burst = DpdkTxBurst;

    fn new_burst(&self) -> DpdkTxBurst {
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
