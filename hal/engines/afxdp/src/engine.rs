//! [`AfxdpEngine`]: `open` turns the config into UMEMs, AF_XDP sockets and one XDP program
//! per interface; `split` hands the queues out.
//!
//! Config → queue mapping, per interface (see `docs/engines/afxdp.md`):
//!
//! - **RX**, [`Steering::NicQueue`] (no flow rules, a default queue): RX queue `j` binds NIC
//!   queue `j` with its own UMEM over its pool; the XDP program redirects by NIC queue.
//! - **RX**, [`Steering::Xdp`] (flow rules, or default drop): every RX queue binds NIC
//!   queue 0 and they share one UMEM (so they must share one pool); the XDP program picks
//!   the queue by the rules. The kernel only lets an XDP program redirect a frame to a
//!   socket bound to the queue the frame arrived on, so this is the only way to steer by
//!   rules where the NIC cannot (veth, or a NIC without ntuple rules).
//! - **TX** queue `j` binds NIC queue `j`. Sockets on one NIC queue share one UMEM: a TX
//!   queue on a NIC queue that also has RX sockets must use the same pool.

use rtdaq_netsys::KeyError;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rtdaq_config::model::{Address, AfxdpEngine as AfxdpConfig, Engine as EngineConfig, ZeroCopy};
use rtdaq_config::Config;
use rtdaq_core::flow::DefaultAction;
use rtdaq_core::traits::{Engine, EngineArgs, QueueResources, RxQueue, TxQueue};
use rtdaq_core::{BufferPool, QueueCounters, QueueId};

use crate::burst::{TxBatch, XdpBurst};
use crate::caps;
use crate::error::{AfxdpError, Result};
use crate::rx::{AfxdpRx, Flows, RxSetup};
use crate::steer::{StatsReader, SteerSetup, Steering, XdpMode, XdpProgram, MAX_QUEUES};
use crate::sys::consts::{
    EACCES, EAFNOSUPPORT, EBUSY, EEXIST, EINVAL, ENOBUFS, ENOMEM, ENOTSUPP, EOPNOTSUPP, EPERM,
    SOL_SOCKET, SO_BUSY_POLL, SO_BUSY_POLL_BUDGET, SO_PREFER_BUSY_POLL, XDP_COPY, XDP_RX_RING,
    XDP_SHARED_UMEM, XDP_TX_RING, XDP_UMEM_COMPLETION_RING, XDP_UMEM_FILL_RING,
    XDP_USE_NEED_WAKEUP, XDP_USE_SG, XDP_ZEROCOPY,
};
use crate::sys::{page_size, ConsRing, Lent, NetDev, ProdRing, XdpDesc, XskSocket};
use crate::tx::{AfxdpTx, TxSetup};
use crate::umem::{Fill, Umem};
use crate::{AfxdpOptions, MAX_BATCH};

/// `XDP_PACKET_HEADROOM`: where the kernel writes a received frame in its UMEM frame.
pub const XDP_HEADROOM: u32 = 256;
/// Most descriptors (UMEM frames) of one multi-buffer frame: the kernel's `MAX_SKB_FRAGS`
/// (17) + 1. A received frame is at most this many segments.
pub const XDP_MAX_FRAGS: u32 = 18;
/// Ethernet header plus two VLAN tags: the largest frame is the MTU plus this.
const L2_OVERHEAD: u32 = 14 + 8;
/// Smallest ring the engine creates.
const MIN_RING: u32 = 64;
/// Largest fill / RX / TX ring the engine creates.
const MAX_RING: u32 = 4096;
/// How long a bind keeps retrying `EBUSY` (the kernel releases a closed socket's NIC queue
/// asynchronously).
const BIND_RETRY: Duration = Duration::from_millis(500);
/// `SO_BUSY_POLL` for busy-polling queues (µs).
const BUSY_POLL_US: i32 = 20;

/// The AF_XDP engine: AF_XDP sockets over UMEMs made of the runtime's pools, one XDP
/// steering program per interface with RX queues.
///
/// `N` is the burst capacity (frames per [`XdpBurst`] / [`TxBatch`]), [`MAX_BATCH`] by
/// default.
pub struct AfxdpEngine<'a, const N: usize = MAX_BATCH> {
    rx: Vec<AfxdpRx<'a, N>>,
    tx: Vec<AfxdpTx<'a, N>>,
    interfaces: Vec<InterfaceInfo>,
}

/// What `open` found and chose for one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InterfaceInfo {
    /// Index in the config's `interfaces`.
    pub index: usize,
    /// The netdev name.
    pub ifname: String,
    /// The interface index.
    pub ifindex: u32,
    /// The device MTU.
    pub mtu: u32,
    /// (RX, TX) channels, when the driver reports them (`ETHTOOL_GCHANNELS`).
    pub channels: Option<(u32, u32)>,
    /// How RX frames reach the queues.
    pub steering: Steering,
    /// Where the XDP program runs (`None` without RX queues).
    pub xdp_mode: Option<XdpMode>,
    /// Whether the sockets run zero-copy (false: copy mode).
    pub zero_copy: bool,
    /// Whether frames larger than one UMEM frame arrive in several (AF_XDP multi-buffer,
    /// `XDP_USE_SG`): the device MTU does not fit one frame after the XDP headroom.
    pub multi_buffer: bool,
}

/// Direction of a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Rx,
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

/// The checked pool and counters of one queue.
#[derive(Clone, Copy)]
struct QueueRes<'a> {
    pool: &'a BufferPool<'a>,
    counters: &'a QueueCounters,
    region: usize,
}

/// Sockets of one NIC queue (one UMEM).
#[derive(Default)]
struct Group {
    rx: Vec<usize>,
    tx: Option<usize>,
}

/// Everything open needs about one interface.
struct Iface<'c, 'a> {
    i: usize,
    cfg: &'c Config,
    x: &'c AfxdpConfig,
    ifname: String,
    ifindex: u32,
    rx: Vec<QueueRes<'a>>,
    tx: Vec<QueueRes<'a>>,
    users: &'c HashMap<usize, usize>,
    /// Bind with `XDP_USE_SG` (frames in several UMEM frames).
    multi_buffer: bool,
}

fn pow2_clamped(n: usize, lo: u32, hi: u32) -> u32 {
    (n.min(hi as usize) as u32)
        .max(lo)
        .next_power_of_two()
        .min(hi)
}

impl<'a, const N: usize> AfxdpEngine<'a, N> {
    /// Opens every interface of the config with explicit tuning (see [`AfxdpOptions`]);
    /// [`Engine::open`] is `open_with(args, &AfxdpOptions::default())`. Cold path.
    ///
    /// # Errors
    /// [`AfxdpError`], naming the config key (or privilege, limit) to change.
    pub fn open_with(args: EngineArgs<'a, Config>, opts: &AfxdpOptions) -> Result<Self> {
        let cfg: &'a Config = args.config;
        let EngineConfig::Afxdp(x) = &cfg.engine else {
            return Err(AfxdpError::Config(KeyError::new("engine.kind".to_owned(), format!(
                    "the config is for engine \"{}\" but this is the AF_XDP engine; set engine.kind = \"afxdp\" or build the binary with --features engine-{}",
                    cfg.engine.kind(),
                    cfg.engine.kind()
                ))));
        };
        let missing = caps::missing();
        if !missing.is_empty() {
            return Err(AfxdpError::Privileges {
                missing: missing.join(", "),
            });
        }
        if N == 0 {
            return Err(AfxdpError::Config(KeyError::new(
                "interfaces[].rx_queues[].batch_size".to_owned(),
                "the engine was built with a burst capacity of 0".to_owned(),
            )));
        }
        let netdev = NetDev::new().map_err(|source| AfxdpError::Socket {
            key: "interfaces".to_owned(),
            detail: format!("cannot create a socket for interface queries ({source})"),
            source,
        })?;
        // How many queues use each pool: each gets an equal share of its frames in rings.
        let mut users: HashMap<usize, usize> = HashMap::new();
        for r in args.rx.iter().chain(args.tx) {
            for p in r.pools {
                *users
                    .entry(*p as *const BufferPool<'_> as usize)
                    .or_default() += 1;
            }
        }
        let mut engine = AfxdpEngine {
            rx: Vec::new(),
            tx: Vec::new(),
            interfaces: Vec::new(),
        };
        for (i, iface) in cfg.interfaces.iter().enumerate() {
            if iface.rx_queues.is_empty() && iface.tx_queues.is_empty() {
                continue;
            }
            let key = format!("interfaces[{i}].address");
            let ifname = resolve_netdev(&iface.address, &key)?;
            let ifindex = netdev
                .ifindex(&ifname)
                .ok_or_else(|| AfxdpError::NoSuchInterface {
                    key: key.clone(),
                    name: ifname.clone(),
                })?;
            let mtu = netdev.mtu(&ifname).map_err(|source| AfxdpError::Socket {
                key: key.clone(),
                detail: format!("cannot read the MTU of {ifname} ({source})"),
                source,
            })?;
            let multi_buffer = check_mtu(
                i,
                &ifname,
                mtu,
                iface.mtu,
                x.frame_size,
                !iface.tx_queues.is_empty(),
            )?;
            let channels = netdev.channels(&ifname).ok();
            let rules = cfg.flow_rules(i);
            let default = cfg.default_action(i);
            let steering = if rules.is_empty() && matches!(default, DefaultAction::Queue(_)) {
                Steering::NicQueue
            } else {
                Steering::Xdp
            };
            if iface.rx_queues.len() > MAX_QUEUES {
                return Err(AfxdpError::Config(KeyError::new(
                    format!("interfaces[{i}].rx_queues"),
                    format!(
                        "{} RX queues; the AF_XDP engine serves at most {MAX_QUEUES} per interface",
                        iface.rx_queues.len()
                    ),
                )));
            }
            let mut rx_res = Vec::new();
            for j in 0..iface.rx_queues.len() {
                rx_res.push(resources(args.rx, cfg, x, Dir::Rx, i, j)?);
            }
            let mut tx_res = Vec::new();
            for j in 0..iface.tx_queues.len() {
                tx_res.push(resources(args.tx, cfg, x, Dir::Tx, i, j)?);
            }
            // NIC queue of each socket, checked against the channel count.
            let mut groups: BTreeMap<u32, Group> = BTreeMap::new();
            for j in 0..rx_res.len() {
                let nic = match steering {
                    Steering::NicQueue => j as u32,
                    Steering::Xdp => 0,
                };
                check_channel(i, Dir::Rx, j, nic, &ifname, channels.map(|c| c.0), steering)?;
                groups.entry(nic).or_default().rx.push(j);
            }
            for j in 0..tx_res.len() {
                check_channel(
                    i,
                    Dir::Tx,
                    j,
                    j as u32,
                    &ifname,
                    channels.map(|c| c.1),
                    steering,
                )?;
                groups.entry(j as u32).or_default().tx = Some(j);
            }
            let f = Iface {
                i,
                cfg,
                x,
                ifname: ifname.clone(),
                ifindex,
                rx: rx_res,
                tx: tx_res,
                users: &users,
                multi_buffer,
            };
            let mut rxq: Vec<(usize, AfxdpRx<'a, N>)> = Vec::new();
            let mut txq: Vec<(usize, AfxdpTx<'a, N>)> = Vec::new();
            let mut zero_copy = false;
            for (nic, g) in &groups {
                let (r, t, zc) = open_group::<N>(&f, *nic, g, steering, &rules, mtu, opts)?;
                zero_copy |= zc;
                rxq.extend(r);
                txq.extend(t);
            }
            rxq.sort_by_key(|(j, _)| *j);
            txq.sort_by_key(|(j, _)| *j);
            let mut xdp_mode = None;
            if !rxq.is_empty() {
                let fallback = match default {
                    DefaultAction::Queue(q) => q.0,
                    DefaultAction::Drop => 0,
                };
                let setup = SteerSetup {
                    ifindex,
                    steering,
                    rules: &rules,
                    default,
                    fallback,
                    xsks: rxq
                        .iter()
                        .map(|(j, q)| (*j as u32, q.socket().as_fd()))
                        .collect(),
                    mode: opts.xdp_mode,
                    frags: multi_buffer,
                };
                let prog = XdpProgram::attach(&setup).map_err(|e| {
                    let detail = match e.source.raw_os_error() {
                        Some(EBUSY) | Some(EEXIST) => format!(
                            "{ifname} already has an XDP program attached (another AF_XDP user, or `ip link set dev {ifname} xdp ...`); detach it (`ip link set dev {ifname} xdp off`) or stop its owner: {} failed ({})",
                            e.what, e.source
                        ),
                        Some(EPERM) | Some(EACCES) => format!(
                            "permission denied: {} failed ({}); the engine needs CAP_BPF, CAP_PERFMON (its verifier checks) and CAP_NET_ADMIN: run as root, or under the unit with rt-tuning/systemd/rtdaq.service.d-examples/afxdp.conf",
                            e.what, e.source
                        ),
                        _ => format!("cannot {} on {ifname} ({})", e.what, e.source),
                    };
                    AfxdpError::Xdp {
                        key: key.clone(),
                        detail,
                        source: e.source,
                    }
                })?;
                xdp_mode = Some(prog.mode());
                for (j, q) in &mut rxq {
                    let reader = if *j == usize::from(fallback) {
                        Some(StatsReader::new(Arc::clone(&prog)).map_err(|source| {
                            AfxdpError::Xdp {
                                key: key.clone(),
                                detail: format!(
                                    "cannot size the XDP program's per-CPU counters ({source})"
                                ),
                                source,
                            }
                        })?)
                    } else {
                        None
                    };
                    q.attach_program(Arc::clone(&prog), reader);
                }
            }
            log::info!(
                "interfaces[{i}] {ifname} (ifindex {ifindex}, mtu {mtu}): {} RX / {} TX queue(s), {}, XDP program {}, AF_XDP {} mode{}, frames of {} B{}, need_wakeup {}",
                rxq.len(),
                txq.len(),
                match steering {
                    Steering::NicQueue => "RX queue j on NIC queue j".to_owned(),
                    Steering::Xdp => format!(
                        "all RX queues on NIC queue 0, steered by the XDP program ({} flow rule(s))",
                        rules.len()
                    ),
                },
                xdp_mode.map_or("not attached (no RX queue)", XdpMode::as_str),
                if zero_copy { "zero-copy" } else { "copy" },
                if zero_copy || matches!(x.zero_copy, ZeroCopy::Off) {
                    ""
                } else {
                    " (the driver has no AF_XDP zero-copy support)"
                },
                x.frame_size,
                if multi_buffer {
                    " (multi-buffer: a larger frame arrives in several, XDP_USE_SG)"
                } else {
                    ""
                },
                if x.need_wakeup { "on" } else { "off" },
            );
            engine.interfaces.push(InterfaceInfo {
                index: i,
                ifname,
                ifindex,
                mtu,
                channels,
                steering,
                xdp_mode,
                zero_copy,
                multi_buffer,
            });
            engine.rx.extend(rxq.into_iter().map(|(_, q)| q));
            engine.tx.extend(txq.into_iter().map(|(_, q)| q));
        }
        Ok(engine)
    }

    /// The RX queues, in config order.
    pub fn rx(&self) -> &[AfxdpRx<'a, N>] {
        &self.rx
    }

    /// The RX queues, mutably (e.g. to [`sync_drops`](AfxdpRx::sync_drops)).
    pub fn rx_mut(&mut self) -> &mut [AfxdpRx<'a, N>] {
        &mut self.rx
    }

    /// The TX queues, in config order.
    pub fn tx(&self) -> &[AfxdpTx<'a, N>] {
        &self.tx
    }

    /// What `open` found and chose for each interface with queues, in config order.
    pub fn interfaces(&self) -> &[InterfaceInfo] {
        &self.interfaces
    }

    /// The queues, in config order (what [`Engine::split`] hands out).
    pub fn into_queues(self) -> (Vec<AfxdpRx<'a, N>>, Vec<AfxdpTx<'a, N>>) {
        (self.rx, self.tx)
    }
}

/// The netdev name of interface `i`'s address.
fn resolve_netdev(addr: &Address, key: &str) -> Result<String> {
    match addr {
        Address::Netdev(n) => Ok(n.clone()),
        Address::Pci(p) => {
            let dir = format!("/sys/bus/pci/devices/{p}/net");
            std::fs::read_dir(&dir)
                .ok()
                .and_then(|mut d| d.next())
                .and_then(|e| e.ok())
                .and_then(|e| e.file_name().into_string().ok())
                .ok_or_else(|| AfxdpError::Config(KeyError::new(key.to_owned(), format!(
                        "PCI device {p} has no network interface ({dir} is empty or missing: the device is absent, or bound to vfio-pci/DPDK); bind it to its kernel driver or name the netdev in {key}"
                    ))))
        }
        Address::Socket(u) => Err(AfxdpError::Config(KeyError::new(key.to_owned(), format!(
                "\"{u}\" is a socket address; the AF_XDP engine needs a network interface name such as \"eth0\" (or a PCI address)"
            )))),
    }
}

/// Whether the device MTU needs AF_XDP multi-buffer: `Ok(false)` when every frame fits one
/// UMEM frame after the XDP headroom, `Ok(true)` when RX frames take several (`XDP_USE_SG`,
/// at most [`XDP_MAX_FRAGS`]). An interface with TX queues needs every frame in one (no
/// multi-buffer TX here).
fn check_mtu(
    i: usize,
    ifname: &str,
    mtu: u32,
    config_mtu: u32,
    frame_size: u32,
    tx: bool,
) -> Result<bool> {
    let room = frame_size.saturating_sub(XDP_HEADROOM);
    let frame = mtu + L2_OVERHEAD;
    if frame <= room {
        return Ok(false);
    }
    if !tx && frame <= XDP_MAX_FRAGS * room {
        return Ok(true);
    }
    Err(AfxdpError::Mtu {
        key: format!("interfaces[{i}].mtu"),
        detail: if tx {
            format!(
                "{ifname} has MTU {mtu} (the config says {config_mtu}), so frames reach {frame} B (+ {L2_OVERHEAD} Ethernet and VLAN), but an AF_XDP frame of engine.afxdp.frame_size = {frame_size} holds {room} B after the {XDP_HEADROOM} B XDP headroom and this engine sends each frame from one (no multi-buffer TX, XDP_USE_SG, for sending): lower the device MTU to at most {} (`ip link set dev {ifname} mtu {}`) and set interfaces[{i}].mtu to match{}, or send from another engine (RX alone takes jumbo frames in several AF_XDP frames)",
                room.saturating_sub(L2_OVERHEAD),
                room.saturating_sub(L2_OVERHEAD),
                if frame_size < 4096 { ", or use engine.afxdp.frame_size = 4096" } else { "" }
            )
        } else {
            format!(
                "{ifname} has MTU {mtu} (the config says {config_mtu}), so frames reach {frame} B, more than the kernel's {XDP_MAX_FRAGS} AF_XDP frames of {room} B (engine.afxdp.frame_size = {frame_size} − {XDP_HEADROOM} B headroom) hold: lower the device MTU (`ip link set dev {ifname} mtu ...`) or raise frame_size"
            )
        },
    })
}

/// A queue's NIC queue must exist.
fn check_channel(
    i: usize,
    dir: Dir,
    j: usize,
    nic: u32,
    ifname: &str,
    channels: Option<u32>,
    steering: Steering,
) -> Result<()> {
    let Some(n) = channels else { return Ok(()) };
    if nic < n.max(1) {
        return Ok(());
    }
    let why = match (dir, steering) {
        (Dir::Rx, _) => "RX queue j binds NIC queue j when the interface has no flow rules",
        (Dir::Tx, _) => "TX queue j sends on NIC queue j",
    };
    Err(AfxdpError::QueueRange {
        key: format!("interfaces[{i}].{}[{j}]", dir.table()),
        detail: format!(
            "needs NIC queue {nic} ({why}), but {ifname} has {n} {} channel(s) (`ethtool -l {ifname}`); use fewer {} or raise the channel count (`ethtool -L {ifname} combined {}`; a veth needs numrxqueues/numtxqueues at creation)",
            match dir {
                Dir::Rx => "RX",
                Dir::Tx => "TX",
            },
            dir.table(),
            nic + 1
        ),
    })
}

/// The pool and counters of queue `j` of interface `i`, checked for this engine.
fn resources<'a>(
    list: &'a [QueueResources<'a>],
    cfg: &Config,
    x: &AfxdpConfig,
    dir: Dir,
    i: usize,
    j: usize,
) -> Result<QueueRes<'a>> {
    let key = format!("interfaces[{i}].{}[{j}]", dir.table());
    let iface = &cfg.interfaces[i];
    let regions = match dir {
        Dir::Rx => {
            if iface.rx_queues[j].hds_split.is_some() {
                return Err(AfxdpError::Config(KeyError::new(format!("{key}.hds_split"), "AF_XDP receives each frame whole into one UMEM frame; header-data split is not supported by engine afxdp: remove hds_split and list one region".to_owned())));
            }
            &iface.rx_queues[j].memory_regions
        }
        Dir::Tx => &iface.tx_queues[j].memory_regions,
    };
    let r = list
        .iter()
        .find(|r| r.interface == i && r.queue == j)
        .ok_or_else(|| AfxdpError::Resources(KeyError::new(key.clone(), "the runtime passed no QueueResources for this queue (EngineArgs must list every queue of the config)".to_owned())))?;
    let pool = match r.pools {
        [one] => *one,
        [] => {
            return Err(AfxdpError::Resources(KeyError::new(format!("{key}.memory_regions"), "no buffer pool for this queue".to_owned())))
        }
        _ => {
            return Err(AfxdpError::Resources(KeyError::new(format!("{key}.memory_regions"), "the AF_XDP engine takes exactly one region per queue (a UMEM is one pool); list one region".to_owned())))
        }
    };
    let region = regions.first().map_or(0, |r| r.0);
    let rkey = format!("memory_regions[{region}]");
    if !pool.is_cpu_accessible() {
        return Err(AfxdpError::Resources(KeyError::new(
            format!("{key}.memory_regions[0]"),
            "AF_XDP needs CPU memory (host or huge) for its UMEM, not GPU device memory".to_owned(),
        )));
    }
    if pool.slot_size() != x.frame_size as usize {
        return Err(AfxdpError::Resources(KeyError::new(format!("{rkey}.buf_size"), format!(
                "region \"{}\" has buffers of {} B but engine.afxdp.frame_size = {}: the pool's buffers are the UMEM frames, so they must be exactly one frame; set {rkey}.buf_size = {} (or engine.afxdp.frame_size to the buffer size, 2048 or 4096)",
                cfg.memory_regions.get(region).map_or("?", |r| r.name.as_str()),
                pool.slot_size(),
                x.frame_size,
                x.frame_size
            ))));
    }
    if pool.base_addr() % page_size() != 0 {
        return Err(AfxdpError::Resources(KeyError::new(rkey, format!(
                "the region's memory starts at {:#x}, not on a page boundary (pages of {} B); AF_XDP registers whole pages (the runtime allocates regions page aligned)",
                pool.base_addr(),
                page_size()
            ))));
    }
    Ok(QueueRes {
        pool,
        counters: r.counters,
        region,
    })
}

/// One socket of a NIC queue being set up: direction, queue index, socket, its ring.
type Opened<'a> = (
    Dir,
    usize,
    XskSocket<'a>,
    Option<ConsRing<XdpDesc>>,
    Option<ProdRing<XdpDesc>>,
);

/// The RX and TX queues of one NIC queue and whether the kernel runs them zero-copy.
type GroupQueues<'a, const N: usize> = (
    Vec<(usize, AfxdpRx<'a, N>)>,
    Vec<(usize, AfxdpTx<'a, N>)>,
    bool,
);

/// Creates the UMEM of NIC queue `nic` and its sockets: the first socket registers the UMEM
/// and owns the fill and completion rings, the others share it (`XDP_SHARED_UMEM`).
fn open_group<'a, const N: usize>(
    f: &Iface<'_, 'a>,
    nic: u32,
    g: &Group,
    steering: Steering,
    rules: &[rtdaq_core::flow::FlowRule],
    mtu: u32,
    opts: &AfxdpOptions,
) -> Result<GroupQueues<'a, N>> {
    let i = f.i;
    let iface = &f.cfg.interfaces[i];
    let rxkey = |j: usize| format!("interfaces[{i}].rx_queues[{j}]");
    let txkey = |j: usize| format!("interfaces[{i}].tx_queues[{j}]");
    // Members in order: RX queues, then the TX queue. All must share one pool.
    let members: Vec<(Dir, usize, QueueRes<'a>, String)> =
        g.rx.iter()
            .map(|&j| (Dir::Rx, j, f.rx[j], rxkey(j)))
            .chain(g.tx.map(|j| (Dir::Tx, j, f.tx[j], txkey(j))))
            .collect();
    let (_, _, first, first_key) = &members[0];
    let pool = first.pool;
    for (dir, _, r, k) in &members[1..] {
        if !std::ptr::eq(r.pool, pool) {
            let why = match dir {
                Dir::Rx => "with flow rules every RX queue of the interface binds NIC queue 0 and they share one UMEM (an XDP program can only redirect a frame to sockets bound to the NIC queue it arrived on)",
                Dir::Tx => "TX queue j binds NIC queue j, and every socket of one NIC queue shares its UMEM",
            };
            return Err(AfxdpError::Resources(KeyError::new(format!("{k}.memory_regions"), format!(
                    "uses memory_regions[{}] but {first_key}, on the same NIC queue {nic} of {}, uses memory_regions[{}]; {why}: list the same region for both",
                    r.region, f.ifname, first.region
                ))));
        }
    }
    let share = (pool.slot_count()
        / f.users
            .get(&(pool as *const _ as usize))
            .copied()
            .unwrap_or(1)
            .max(1))
    .max(1);
    let rx_share = share * g.rx.len();
    let fill_size = if g.rx.is_empty() {
        MIN_RING
    } else {
        pow2_clamped(rx_share, MIN_RING, MAX_RING * 2)
    };
    let ring_size = pow2_clamped(share, MIN_RING, MAX_RING);
    let comp_size = if g.tx.is_some() { ring_size } else { MIN_RING };

    let sock_err = |key: &str, what: &str, source: std::io::Error| -> AfxdpError {
        let hint = match source.raw_os_error() {
            Some(EAFNOSUPPORT) => " — the kernel has no AF_XDP support (CONFIG_XDP_SOCKETS); use engine.kind = \"socket\" or \"afpacket\"",
            Some(EPERM) | Some(EACCES) => " — permission denied: run as root (CAP_NET_RAW, CAP_NET_ADMIN)",
            Some(EBUSY) => " — another AF_XDP socket (another process?) is already bound to this NIC queue with its own UMEM",
            Some(EINVAL) => " — the kernel refused the settings (NIC queue beyond the channel count, or an unsupported ring/frame size)",
            _ => "",
        };
        AfxdpError::Socket {
            key: key.to_owned(),
            detail: format!(
                "{what} on {} NIC queue {nic} failed ({source}){hint}",
                f.ifname
            ),
            source,
        }
    };

    // The owner: registers the UMEM, owns the fill and completion rings.
    let owner_key = first_key.clone();
    let owner =
        XskSocket::new().map_err(|e| sock_err(&owner_key, "creating an AF_XDP socket", e))?;
    if let Err(source) = owner.register_umem(pool) {
        let bytes = pool.slot_count() as u64 * pool.slot_size() as u64;
        return Err(match source.raw_os_error() {
            Some(ENOBUFS) | Some(ENOMEM) | Some(EPERM) if !caps::has_ipc_lock() => {
                AfxdpError::MemLock {
                    key: format!("memory_regions[{}]", first.region),
                    bytes,
                    limit: caps::memlock_limit(),
                    source,
                }
            }
            _ => sock_err(
                &owner_key,
                "registering the pool as UMEM (XDP_UMEM_REG)",
                source,
            ),
        });
    }
    owner
        .set_ring_size(XDP_UMEM_FILL_RING, fill_size)
        .and_then(|()| owner.set_ring_size(XDP_UMEM_COMPLETION_RING, comp_size))
        .map_err(|e| sock_err(&owner_key, "sizing the fill/completion rings", e))?;

    let x = f.x;
    let bind_flags: u16 = match x.zero_copy {
        ZeroCopy::On => XDP_ZEROCOPY,
        ZeroCopy::Off => XDP_COPY,
        ZeroCopy::Auto => 0,
    } | if x.need_wakeup {
        XDP_USE_NEED_WAKEUP
    } else {
        0
    } | if f.multi_buffer { XDP_USE_SG } else { 0 };

    let mut socks: Vec<Opened<'a>> = Vec::new();
    let mut fill_comp: Option<(ProdRing<u64>, ConsRing<u64>)> = None;
    let mut owner = Some(owner);
    for (dir, j, _, key) in &members {
        let is_owner = owner.is_some();
        let s = match owner.take() {
            Some(o) => o,
            None => XskSocket::new().map_err(|e| sock_err(key, "creating an AF_XDP socket", e))?,
        };
        let opt = match dir {
            Dir::Rx => XDP_RX_RING,
            Dir::Tx => XDP_TX_RING,
        };
        s.set_ring_size(opt, ring_size)
            .map_err(|e| sock_err(key, "sizing the RX/TX ring", e))?;
        let off = s
            .offsets()
            .map_err(|e| sock_err(key, "reading the ring offsets (XDP_MMAP_OFFSETS)", e))?;
        if is_owner {
            let fill = s
                .map_fill(&off, fill_size)
                .map_err(|e| sock_err(key, "mapping the fill ring", e))?;
            let comp = s
                .map_completion(&off, comp_size)
                .map_err(|e| sock_err(key, "mapping the completion ring", e))?;
            fill_comp = Some((fill, comp));
        }
        let (rx, tx) = match dir {
            Dir::Rx => (
                Some(
                    s.map_rx(&off, ring_size)
                        .map_err(|e| sock_err(key, "mapping the RX ring", e))?,
                ),
                None,
            ),
            Dir::Tx => (
                None,
                Some(
                    s.map_tx(&off, ring_size)
                        .map_err(|e| sock_err(key, "mapping the TX ring", e))?,
                ),
            ),
        };
        if q_busy(iface, *dir, *j) {
            // Best effort: preferred busy polling only matters for zero-copy drivers.
            let ok = s.set_int(SOL_SOCKET, SO_PREFER_BUSY_POLL, 1).is_ok()
                && s.set_int(SOL_SOCKET, SO_BUSY_POLL, BUSY_POLL_US).is_ok()
                && s.set_int(
                    SOL_SOCKET,
                    SO_BUSY_POLL_BUDGET,
                    q_batch(iface, *dir, *j) as i32,
                )
                .is_ok();
            if !ok {
                log::warn!("{key}: busy_poll = true: the kernel refused SO_PREFER_BUSY_POLL/SO_BUSY_POLL on the AF_XDP socket; the queue still spins in user space");
            }
        }
        if is_owner {
            if let Err(e) = bind_retrying(&s, f.ifindex, nic, bind_flags) {
                if f.multi_buffer
                    && matches!(
                        e.raw_os_error(),
                        Some(EOPNOTSUPP) | Some(EINVAL) | Some(ENOTSUPP)
                    )
                {
                    return Err(AfxdpError::Socket {
                        key: key.clone(),
                        detail: format!(
                            "binding the AF_XDP socket with XDP_USE_SG (multi-buffer: the MTU of {} does not fit one frame of engine.afxdp.frame_size = {}) failed ({e}): multi-buffer needs Linux >= 6.6 and, in zero-copy mode, a driver with multi-buffer zero-copy (one with zero-copy alone refuses it); set zero_copy = \"off\" (or \"auto\"), or lower the device MTU to {} or less",
                            f.ifname,
                            f.x.frame_size,
                            f.x.frame_size.saturating_sub(XDP_HEADROOM + L2_OVERHEAD)
                        ),
                        source: e,
                    });
                }
                if matches!(x.zero_copy, ZeroCopy::On)
                    && matches!(
                        e.raw_os_error(),
                        Some(EOPNOTSUPP) | Some(EINVAL) | Some(ENOTSUPP)
                    )
                {
                    return Err(AfxdpError::ZeroCopy {
                        ifname: f.ifname.clone(),
                        source: e,
                    });
                }
                return Err(sock_err(key, "binding the AF_XDP socket", e));
            }
        } else {
            let first_sock = &socks[0].2;
            // A socket sharing a UMEM names no other flag: the kernel refuses XDP_USE_SG
            // (and copy/zero-copy/need-wakeup) with XDP_SHARED_UMEM (EINVAL, xsk_bind); it
            // takes multi-buffer from the UMEM the first socket bound with XDP_USE_SG.
            s.bind(f.ifindex, nic, XDP_SHARED_UMEM, Some(first_sock))
                .map_err(|e| sock_err(key, "binding the AF_XDP socket to the shared UMEM", e))?;
        }
        socks.push((*dir, *j, s, rx, tx));
    }
    let zero_copy = socks[0].2.zero_copy().unwrap_or(false);
    if matches!(x.zero_copy, ZeroCopy::On) && !zero_copy {
        return Err(AfxdpError::ZeroCopy {
            ifname: f.ifname.clone(),
            source: std::io::Error::from_raw_os_error(EOPNOTSUPP),
        });
    }
    let (fill, comp) = fill_comp.expect("the first member is the owner");
    let umem = Arc::new(Umem {
        lent: Lent::new(pool),
        fill: Mutex::new(Fill {
            ring: fill,
            target: (rx_share as u32).min(fill_size),
        }),
        comp: Mutex::new(comp),
        zero_copy,
        need_wakeup: x.need_wakeup,
        nic_queue: nic,
    });
    let mut rxq = Vec::new();
    let mut txq = Vec::new();
    for (dir, j, sock, rx, tx) in socks {
        let res = match dir {
            Dir::Rx => f.rx[j],
            Dir::Tx => f.tx[j],
        };
        match (dir, rx, tx) {
            (Dir::Rx, Some(ring), _) => {
                let q = &iface.rx_queues[j];
                let flows: Box<Flows> = Box::new(f.cfg.flow_table(i));
                debug_assert_eq!(flows.len(), rules.len());
                let mut r = AfxdpRx::new(RxSetup {
                    sock,
                    ring,
                    umem: Arc::clone(&umem),
                    counters: res.counters,
                    flows,
                    steering,
                    interface: i,
                    queue: j,
                    batch: q.batch_size as usize,
                    busy: q.busy_poll,
                    timeout: Duration::from_micros(u64::from(q.timeout_us)),
                    key: rxkey(j),
                    ifname: f.ifname.clone(),
                    max_extra: if f.multi_buffer {
                        ((mtu + L2_OVERHEAD).div_ceil(x.frame_size - XDP_HEADROOM) - 1) as usize
                    } else {
                        0
                    },
                });
                // The first poll finds the fill ring full.
                r.prime();
                if q.batch_size as usize > N {
                    log::warn!(
                        "interfaces[{i}].rx_queues[{j}].batch_size = {} exceeds the burst capacity {N} of this build; polls return at most {N}",
                        q.batch_size
                    );
                }
                rxq.push((j, r));
            }
            (Dir::Tx, _, Some(ring)) => {
                let q = &iface.tx_queues[j];
                txq.push((
                    j,
                    AfxdpTx::new(TxSetup {
                        sock,
                        ring,
                        umem: Arc::clone(&umem),
                        counters: res.counters,
                        interface: i,
                        queue: j,
                        busy: q.busy_poll,
                        stall: opts.tx_stall,
                        max_frame: ((mtu + L2_OVERHEAD) as usize).min(pool.slot_size()),
                        key: txkey(j),
                        ifname: f.ifname.clone(),
                    }),
                ));
            }
            _ => unreachable!("every member got its ring"),
        }
    }
    Ok((rxq, txq, zero_copy))
}

/// Binds the UMEM owner. A socket closed just before (a previous run, a failed open) leaves
/// its NIC queue registered until the kernel's deferred release runs, so `EBUSY` is retried
/// for up to [`BIND_RETRY`]. Cold path.
fn bind_retrying(s: &XskSocket<'_>, ifindex: u32, nic: u32, flags: u16) -> std::io::Result<()> {
    let end = std::time::Instant::now() + BIND_RETRY;
    loop {
        match s.bind(ifindex, nic, flags, None) {
            Err(e) if e.raw_os_error() == Some(EBUSY) && std::time::Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(5));
            }
            r => return r,
        }
    }
}

fn q_busy(iface: &rtdaq_config::model::Interface, dir: Dir, j: usize) -> bool {
    match dir {
        Dir::Rx => iface.rx_queues[j].busy_poll,
        Dir::Tx => iface.tx_queues[j].busy_poll,
    }
}

fn q_batch(iface: &rtdaq_config::model::Interface, dir: Dir, j: usize) -> u32 {
    match dir {
        Dir::Rx => iface.rx_queues[j].batch_size,
        Dir::Tx => iface.tx_queues[j].batch_size,
    }
}

impl<'a, const N: usize> Engine<'a> for AfxdpEngine<'a, N> {
    const NAME: &'static str = "afxdp";
    const FRAMES: bool = true;
    type Config = EngineArgs<'a, Config>;
    type Rx = AfxdpRx<'a, N>;
    type Tx = AfxdpTx<'a, N>;
    type Error = AfxdpError;

    fn open(cfg: Self::Config) -> Result<Self> {
        Self::open_with(cfg, &AfxdpOptions::default())
    }

    fn split(self, rx: &mut dyn FnMut(Self::Rx), tx: &mut dyn FnMut(Self::Tx)) {
        self.rx.into_iter().for_each(&mut *rx);
        self.tx.into_iter().for_each(&mut *tx);
    }
}

impl<'a, const N: usize> RxQueue for AfxdpRx<'a, N> {
    type Burst = XdpBurst<'a, N>;

    fn new_burst(&self) -> XdpBurst<'a, N> {
        XdpBurst::with_rest(QueueId(self.queue() as u16), self.rest_per_burst())
    }

    #[inline]
    fn poll(&mut self, burst: &mut XdpBurst<'a, N>) -> usize {
        self.poll_burst(burst)
    }
}

impl<'a, const N: usize> TxQueue for AfxdpTx<'a, N> {
    type Burst = TxBatch<'a, N>;

    fn new_burst(&self) -> TxBatch<'a, N> {
        TxBatch::new(QueueId(self.queue() as u16))
    }

    /// Returns completed frames to the pool, then adds up to `n` empty buffers (bounded by
    /// the burst's free room); returns how many frames the burst now holds. Never blocks,
    /// never allocates.
    #[inline]
    fn reserve(&mut self, burst: &mut TxBatch<'a, N>, n: usize) -> usize {
        self.reserve_burst(burst, n)
    }

    #[inline]
    fn send(&mut self, burst: &mut TxBatch<'a, N>) -> usize {
        self.send_burst(burst)
    }
}

impl<const N: usize> std::fmt::Debug for AfxdpEngine<'_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfxdpEngine")
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
        send::<AfxdpRx<'static, 64>>();
        send::<AfxdpTx<'static, 64>>();
        send::<XdpBurst<'static, 64>>();
        send::<TxBatch<'static, 64>>();
        send::<AfxdpEngine<'static, 64>>();
    }

    #[test]
    fn ring_sizes_are_clamped_powers_of_two() {
        assert_eq!(pow2_clamped(1, MIN_RING, MAX_RING), 64);
        assert_eq!(pow2_clamped(100, MIN_RING, MAX_RING), 128);
        assert_eq!(pow2_clamped(1 << 20, MIN_RING, MAX_RING), 4096);
    }

    #[test]
    fn mtu_check_chooses_multi_buffer_for_rx_and_names_the_key_for_tx() {
        assert!(!check_mtu(0, "v", 1500, 1500, 2048, true).unwrap());
        assert!(!check_mtu(0, "v", 3818, 3818, 4096, true).unwrap());
        // RX only: 9022 B frames in 3 frames of 3840 B (multi-buffer).
        assert!(check_mtu(0, "v", 9000, 9000, 4096, false).unwrap());
        assert!(check_mtu(0, "v", 9000, 9000, 2048, false).unwrap());
        // More than the kernel's 18 descriptors per frame.
        let e = check_mtu(0, "v", 65000, 65000, 2048, false).unwrap_err();
        assert!(e.to_string().contains("18 AF_XDP frames"), "{e}");
        // A TX queue sends each frame from one UMEM frame.
        let e = check_mtu(1, "v", 9000, 1500, 4096, true).unwrap_err();
        assert_eq!(e.key(), "interfaces[1].mtu");
        let m = e.to_string();
        assert!(
            m.contains("MTU 9000") && m.contains("3818") && m.contains("no multi-buffer TX"),
            "{m}"
        );
    }
}
