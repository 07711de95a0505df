//! [`Port`] (an ethdev port: configured, started, stopped and closed on drop) and its
//! [`RxQueue`] / [`TxQueue`] handles.
use std::ffi::{c_char, CStr, CString};
use std::sync::Arc;

use super::mbuf::{Mbuf, MbufBurst};
use super::mempool::Mempool;
use super::{raw, result};
use crate::error::{errno_name, DpdkError, Result};
use crate::Eal;

/// How to set up a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConfig {
    /// RX queues (each filled from the pool given to [`Port::open`]).
    pub rx_queues: u16,
    /// TX queues.
    pub tx_queues: u16,
    /// RX descriptors per queue (the PMD may round it: `rte_eth_dev_adjust_nb_rx_tx_desc`).
    pub rx_desc: u16,
    /// TX descriptors per queue.
    pub tx_desc: u16,
    /// Enable promiscuous mode (failures are ignored: many vdevs lack it).
    pub promiscuous: bool,
    /// Receive-side scaling over the RX queues (used when `rx_queues > 1`; `None` keeps
    /// the PMD's default, no RSS).
    pub rss: Option<RssConfig>,
    /// Ask for hardware receive stamps (`RTE_ETH_RX_OFFLOAD_TIMESTAMP`) when the PMD offers
    /// them ([`PortInfo::rx_timestamp`]); ignored where it does not.
    pub rx_timestamps: bool,
    /// Ask for launch times on the TX queues (`RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP`) when
    /// the PMD offers them ([`PortInfo::send_on_timestamp`]); ignored where it does not
    /// (the caller checks first and says so).
    pub tx_timestamps: bool,
}

/// Receive-side scaling of a port: `RTE_ETH_MQ_RX_RSS` with these hash fields (restricted
/// to what the PMD offers, `rte_eth_dev_info.flow_type_rss_offloads`) and key, and a
/// redirection table (RETA) cycling over `queues`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RssConfig {
    /// `RTE_ETH_RSS_*` bits ([`RssConfig::IPV4`], [`RssConfig::NONFRAG_IPV4_UDP`], ...).
    pub hash_fields: u64,
    /// The Toeplitz key; repeated or cut to the PMD's key size. Empty: the PMD's key.
    pub key: Vec<u8>,
    /// RX queues the RETA spreads over, in order (entry `i` = `queues[i % len]`).
    pub queues: Vec<u16>,
}

impl RssConfig {
    /// `RTE_ETH_RSS_IPV4`: hash IPv4 addresses.
    pub const IPV4: u64 = raw::RTDAQ_RSS_IPV4 as u64;
    /// `RTE_ETH_RSS_NONFRAG_IPV4_UDP`: hash IPv4 addresses and UDP ports.
    pub const NONFRAG_IPV4_UDP: u64 = raw::RTDAQ_RSS_NONFRAG_IPV4_UDP as u64;
}

/// Where one RX queue's mbufs come from: one pool, or two with buffer split
/// (`RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT`: the first `split.header_len` bytes of each frame in
/// an mbuf of `pool`, the rest in a chained mbuf of `split.data`).
#[derive(Debug, Clone)]
pub struct RxQueueConfig {
    /// The queue's pool (the header pool with a split).
    pub pool: Arc<Mempool>,
    /// Header-data split.
    pub split: Option<BufferSplit>,
}

impl RxQueueConfig {
    /// A queue filling whole frames from `pool`.
    pub fn new(pool: &Arc<Mempool>) -> Self {
        RxQueueConfig {
            pool: Arc::clone(pool),
            split: None,
        }
    }
}

/// Buffer split of an RX queue.
#[derive(Debug, Clone)]
pub struct BufferSplit {
    /// Bytes of each frame placed in the header mbuf.
    pub header_len: u16,
    /// The pool of the data mbufs (the rest of the frame).
    pub data: Arc<Mempool>,
}

/// What [`Port::open`] configured for RSS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RssState {
    /// The hash fields in effect (asked ∩ offered).
    pub hash_fields: u64,
    /// RETA entries programmed.
    pub reta_size: u16,
}

impl Default for PortConfig {
    fn default() -> Self {
        Self {
            rx_queues: 1,
            tx_queues: 1,
            rx_desc: 1024,
            tx_desc: 1024,
            promiscuous: true,
            rss: None,
            rx_timestamps: false,
            tx_timestamps: false,
        }
    }
}

/// Basic port counters (`rte_eth_stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Packets received.
    pub ipackets: u64,
    /// Packets sent.
    pub opackets: u64,
    /// Bytes received.
    pub ibytes: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// RX packets dropped by the hardware (queue full).
    pub imissed: u64,
    /// RX errors.
    pub ierrors: u64,
    /// TX errors.
    pub oerrors: u64,
    /// RX mbuf allocation failures.
    pub rx_nombuf: u64,
}

/// What the PMD reports about a port (`rte_eth_dev_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// The PMD's driver name (`net_null`, `net_ring`, ...).
    pub driver: String,
    /// Maximum RX queues.
    pub max_rx_queues: u16,
    /// Maximum TX queues.
    pub max_tx_queues: u16,
    /// RSS hash fields the PMD can hash (`flow_type_rss_offloads`; 0: no RSS).
    pub rss_offloads: u64,
    /// RETA entries (`reta_size`; 0: no redirection table).
    pub reta_size: u16,
    /// RSS key bytes (`hash_key_size`; 0: the PMD does not say).
    pub hash_key_size: u8,
    /// Port-level RX offloads (`rx_offload_capa`).
    pub rx_offload_capa: u64,
    /// Per-queue RX offloads (`rx_queue_offload_capa`).
    pub rx_queue_offload_capa: u64,
    /// Most segments of a buffer split (`rx_seg_capa.max_nseg`).
    pub max_rx_segments: u16,
    /// Port-level TX offloads (`tx_offload_capa`).
    pub tx_offload_capa: u64,
}

impl PortInfo {
    /// `RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP`: the NIC sends each mbuf at the time in its
    /// tx-timestamp dynamic field.
    pub const TX_OFFLOAD_SEND_ON_TIMESTAMP: u64 = raw::RTDAQ_TX_OFFLOAD_SEND_ON_TIMESTAMP as u64;

    /// `RTE_ETH_RX_OFFLOAD_TIMESTAMP`: the NIC stamps each received frame (its clock, in
    /// the mbuf's rx-timestamp dynamic field).
    pub const RX_OFFLOAD_TIMESTAMP: u64 = raw::RTDAQ_RX_OFFLOAD_TIMESTAMP as u64;

    /// Whether the PMD stamps received frames (`RTE_ETH_RX_OFFLOAD_TIMESTAMP`: mlx5, ice,
    /// i40e and others; no virtual PMD here).
    pub fn rx_timestamp(&self) -> bool {
        self.rx_offload_capa & Self::RX_OFFLOAD_TIMESTAMP != 0
    }

    /// Whether the PMD can send at a time (`RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP`: mlx5 on
    /// ConnectX-6 Dx and later, among others; no virtual PMD).
    pub fn send_on_timestamp(&self) -> bool {
        self.tx_offload_capa & Self::TX_OFFLOAD_SEND_ON_TIMESTAMP != 0
    }

    /// `RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT`.
    pub const RX_OFFLOAD_BUFFER_SPLIT: u64 = raw::RTDAQ_RX_OFFLOAD_BUFFER_SPLIT as u64;
    /// `RTE_ETH_RX_OFFLOAD_SCATTER`.
    pub const RX_OFFLOAD_SCATTER: u64 = raw::RTDAQ_RX_OFFLOAD_SCATTER as u64;

    /// True when the PMD offers buffer split into two pools.
    pub fn buffer_split(&self) -> bool {
        (self.rx_offload_capa | self.rx_queue_offload_capa) & Self::RX_OFFLOAD_BUFFER_SPLIT != 0
            && self.max_rx_segments >= 2
    }

    /// Where buffer split goes when `splitting` of the port's `rx_queues` RX queues split
    /// (header-data split), from what the PMD reports: `None` when none splits; the port's
    /// RX mode when every queue splits; the queues' own RX confs when only some do, which
    /// needs the per-queue offload. `Err((what, fix))` when the PMD cannot. Pure.
    ///
    /// # Errors
    /// No buffer split (the offload absent, or fewer than 2 RX segments), or a port-wide
    /// offload with only some queues splitting.
    pub fn split_plan(
        &self,
        splitting: usize,
        rx_queues: usize,
    ) -> std::result::Result<Option<SplitAt>, (String, &'static str)> {
        if splitting == 0 {
            return Ok(None);
        }
        if !self.buffer_split() {
            return Err((
                format!(
                    "buffer split (header-data split) is not offered (RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT {}, {} RX segments at most)",
                    if (self.rx_offload_capa | self.rx_queue_offload_capa) & Self::RX_OFFLOAD_BUFFER_SPLIT != 0 { "offered" } else { "absent" },
                    self.max_rx_segments
                ),
                "receive whole frames into one pool, or use a NIC whose PMD offers buffer split",
            ));
        }
        if splitting == rx_queues {
            return Ok(Some(SplitAt::Port));
        }
        if self.rx_queue_offload_capa & Self::RX_OFFLOAD_BUFFER_SPLIT == 0 {
            return Err((
                "buffer split is a port-wide offload here, but only some RX queues split"
                    .to_owned(),
                "split every RX queue of the port, or none",
            ));
        }
        Ok(Some(SplitAt::Queues))
    }
}

/// Where [`PortInfo::split_plan`] enables buffer split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitAt {
    /// In the port's RX mode (every RX queue splits), with `SCATTER` when offered.
    Port,
    /// In the RX conf of each splitting queue (the PMD has the per-queue offload).
    Queues,
}

/// Name of port `p`, `None` if it is not a valid port.
pub(crate) fn port_name(p: u16) -> Option<String> {
    // SAFETY: plain validity check; any port id may be asked.
    if unsafe { raw::rte_eth_dev_is_valid_port(p) } == 0 {
        return None;
    }
    let mut buf = [0 as c_char; raw::RTE_ETH_NAME_MAX_LEN as usize];
    // SAFETY: buf has RTE_ETH_NAME_MAX_LEN bytes, the size DPDK writes at most (with NUL).
    let rc = unsafe { raw::rte_eth_dev_get_name_by_port(p, buf.as_mut_ptr()) };
    result::neg_errno(rc).ok()?;
    // SAFETY: on success buf holds a NUL-terminated name.
    Some(
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned(),
    )
}

pub(crate) fn port_err(op: &'static str, port: u16, errno: i32, fix: &'static str) -> DpdkError {
    DpdkError::Port {
        op,
        port,
        errno,
        errno_name: errno_name(errno),
        msg: result::strerror(errno),
        fix,
    }
}

/// `rte_eth_read_clock` of `port`.
fn device_clock(port: &PortInner) -> Result<u64> {
    let mut t = 0u64;
    // SAFETY: a valid port kept alive by the caller's handle; t is a valid out pointer.
    let rc = unsafe { raw::rte_eth_read_clock(port.id, &mut t) };
    result::neg_errno(rc).map_err(|e| {
        port_err(
            "rte_eth_read_clock",
            port.id,
            e,
            "the PMD cannot read its clock; launch times and hardware stamps need one",
        )
    })?;
    Ok(t)
}

#[derive(Debug)]
struct PortInner {
    id: u16,
    name: String,
    rx_queues: u16,
    tx_queues: u16,
    rss: Option<RssState>,
    /// Kept alive while the port (and its RX rings full of their mbufs) exists.
    _pools: Vec<Arc<Mempool>>,
}

impl Drop for PortInner {
    fn drop(&mut self) {
        // SAFETY: the last handle (Port, RxQueue or TxQueue) is gone, so no thread uses the
        // port's queues any more; stop then close is the documented teardown.
        unsafe {
            raw::rte_eth_dev_stop(self.id);
            raw::rte_eth_dev_close(self.id);
        }
    }
}

/// A started ethdev port. The port, and every [`RxQueue`] / [`TxQueue`] it handed out,
/// share it: it is stopped and closed (`rte_eth_dev_stop` + `rte_eth_dev_close`) when the
/// last of them is dropped. A closed vdev port is released by DPDK and cannot be reopened
/// in the same process.
#[derive(Debug, Clone)]
pub struct Port {
    inner: Arc<PortInner>,
}

/// Port open result: the port and its queues, by queue index.
pub type OpenPort = (Port, Vec<RxQueue>, Vec<TxQueue>);

impl Port {
    /// The id of the port named `name` (a `--vdev` name such as `net_null0`, or a PCI BDF).
    ///
    /// # Errors
    /// [`DpdkError::PortNotFound`], listing the ports that exist and how to add one.
    pub fn id_by_name(eal: &Eal, name: &str) -> Result<u16> {
        let not_found = || DpdkError::PortNotFound {
            name: name.to_owned(),
            present: eal.port_names().into_iter().map(|(_, n)| n).collect(),
            pmd_dir: env!("RTDAQ_DPDK_PMD_DIR"),
        };
        let c = CString::new(name).map_err(|_| not_found())?;
        let mut id = 0u16;
        // SAFETY: c is a valid C string and id a valid out pointer for the call.
        let rc = unsafe { raw::rte_eth_dev_get_port_by_name(c.as_ptr(), &mut id) };
        result::neg_errno(rc).map_err(|_| not_found())?;
        Ok(id)
    }

    /// What the PMD of port `name` offers (queues, RSS, buffer split), before opening it.
    ///
    /// # Errors
    /// [`DpdkError::PortNotFound`], or [`DpdkError::Port`] if the PMD refuses.
    pub fn query_info(eal: &Eal, name: &str) -> Result<PortInfo> {
        Self::info_of(Self::id_by_name(eal, name)?)
    }

    /// Opens port `name` with every RX queue filling from `pool`: [`Port::open_with`] with
    /// `cfg.rx_queues` × [`RxQueueConfig::new`]`(pool)`.
    ///
    /// # Errors
    /// As [`Port::open_with`].
    pub fn open(eal: &Eal, name: &str, cfg: &PortConfig, pool: &Arc<Mempool>) -> Result<OpenPort> {
        let rx = vec![RxQueueConfig::new(pool); usize::from(cfg.rx_queues)];
        Self::open_with(eal, name, cfg, &rx)
    }

    /// Opens port `name`: checks the queue counts against the PMD, configures it (RSS when
    /// `cfg.rss` is set and there are several RX queues; buffer split on the queues that ask
    /// for it), sets up RX queue `q` from `rx[q]` and every TX queue, starts it, programs
    /// the RETA, and enables promiscuous mode if asked.
    ///
    /// # Errors
    /// [`DpdkError::PortNotFound`], [`DpdkError::PortInUse`] (already open in this process),
    /// [`DpdkError::PortLimit`], [`DpdkError::Unsupported`] (RSS or buffer split asked of a
    /// PMD without it), [`DpdkError::InvalidArgument`] (`rx.len() != cfg.rx_queues`), or
    /// [`DpdkError::Port`] naming the failing ethdev call.
    pub fn open_with(
        eal: &Eal,
        name: &str,
        cfg: &PortConfig,
        rx: &[RxQueueConfig],
    ) -> Result<OpenPort> {
        if rx.len() != usize::from(cfg.rx_queues) {
            return Err(DpdkError::InvalidArgument {
                what: "RX queue pools",
                value: format!("{} pools for {} RX queues", rx.len(), cfg.rx_queues),
                why: "give one RxQueueConfig per RX queue",
            });
        }
        let id = Self::id_by_name(eal, name)?;
        {
            let mut claimed = eal.claimed.lock().unwrap_or_else(|p| p.into_inner());
            if claimed.contains(&id) {
                return Err(DpdkError::PortInUse {
                    port: id,
                    name: name.to_owned(),
                });
            }
            claimed.push(id);
        }
        let (info, info_raw) = Self::info_raw(id)?;
        for (what, asked, max) in [
            ("rx_queues", cfg.rx_queues, info.max_rx_queues),
            ("tx_queues", cfg.tx_queues, info.max_tx_queues),
        ] {
            if asked > max {
                return Err(DpdkError::PortLimit {
                    port: id,
                    name: name.to_owned(),
                    what,
                    asked: asked.into(),
                    max: max.into(),
                });
            }
        }
        let unsupported = |what: String, fix: &'static str| DpdkError::Unsupported {
            port: id,
            driver: info.driver.clone(),
            what,
            fix,
        };
        let mut conf = raw::rte_eth_conf::default();
        let rss = match &cfg.rss {
            Some(r) if cfg.rx_queues > 1 => {
                Some(rss_plan(r, &info, cfg.rx_queues).map_err(|(w, f)| unsupported(w, f))?)
            }
            _ => None,
        };
        // The key must live until rte_eth_dev_configure returns (DPDK copies it).
        let mut key: Vec<u8> = Vec::new();
        if let (Some(r), Some((hf, _))) = (&cfg.rss, &rss) {
            conf.rxmode.mq_mode = raw::rte_eth_rx_mq_mode_RTE_ETH_MQ_RX_RSS;
            conf.rx_adv_conf.rss_conf.rss_hf = *hf;
            if !r.key.is_empty() {
                let n = if info.hash_key_size > 0 {
                    usize::from(info.hash_key_size)
                } else {
                    r.key.len()
                };
                key = r.key.iter().copied().cycle().take(n).collect();
                conf.rx_adv_conf.rss_conf.rss_key = key.as_mut_ptr();
                conf.rx_adv_conf.rss_conf.rss_key_len = key.len() as u8;
            }
        }
        let splits = rx.iter().filter(|q| q.split.is_some()).count();
        let plan = info
            .split_plan(splits, rx.len())
            .map_err(|(w, f)| unsupported(w, f))?;
        let split_at_port = plan == Some(SplitAt::Port);
        if split_at_port {
            conf.rxmode.offloads |= PortInfo::RX_OFFLOAD_BUFFER_SPLIT
                | (info.rx_offload_capa & PortInfo::RX_OFFLOAD_SCATTER);
        }
        if cfg.rx_timestamps && info.rx_timestamp() {
            conf.rxmode.offloads |= PortInfo::RX_OFFLOAD_TIMESTAMP;
        }
        if cfg.tx_timestamps && info.send_on_timestamp() {
            conf.txmode.offloads |= PortInfo::TX_OFFLOAD_SEND_ON_TIMESTAMP;
        }
        // SAFETY: id is a valid port not opened elsewhere in the process (claimed above);
        // conf is an rte_eth_conf that DPDK only reads; its key pointer (if any) points
        // into `key`, alive for the call.
        let rc = unsafe { raw::rte_eth_dev_configure(id, cfg.rx_queues, cfg.tx_queues, &conf) };
        drop(key);
        result::neg_errno(rc).map_err(|e| {
            port_err(
                "rte_eth_dev_configure",
                id,
                e,
                "check the queue counts and offloads against the PMD",
            )
        })?;
        // From here on the PortInner drop stops and closes the port on any error.
        let inner = Arc::new(PortInner {
            id,
            name: name.to_owned(),
            rx_queues: cfg.rx_queues,
            tx_queues: cfg.tx_queues,
            rss: rss.map(|(hash_fields, _)| RssState {
                hash_fields,
                reta_size: info.reta_size,
            }),
            _pools: rx
                .iter()
                .flat_map(|q| {
                    std::iter::once(Arc::clone(&q.pool))
                        .chain(q.split.as_ref().map(|s| Arc::clone(&s.data)))
                })
                .collect(),
        });
        let (mut nb_rx, mut nb_tx) = (cfg.rx_desc, cfg.tx_desc);
        // SAFETY: valid configured port; both pointers are valid in/out u16s.
        let rc = unsafe { raw::rte_eth_dev_adjust_nb_rx_tx_desc(id, &mut nb_rx, &mut nb_tx) };
        result::neg_errno(rc).map_err(|e| {
            port_err(
                "rte_eth_dev_adjust_nb_rx_tx_desc",
                id,
                e,
                "check rx_desc/tx_desc",
            )
        })?;
        // SAFETY: plain getter on a valid port.
        let socket = unsafe { raw::rte_eth_dev_socket_id(id) } as u32; // -1 = SOCKET_ID_ANY
        for (q, rq) in (0..cfg.rx_queues).zip(rx) {
            let rc = match &rq.split {
                None => {
                    // SAFETY: configured port, q < rx_queues; NULL rxconf = PMD defaults;
                    // the pool outlives the port (PortInner holds an Arc of it).
                    unsafe {
                        raw::rte_eth_rx_queue_setup(
                            id,
                            q,
                            nb_rx,
                            socket,
                            std::ptr::null(),
                            rq.pool.as_ptr(),
                        )
                    }
                }
                Some(split) => {
                    let mut segs = [raw::rte_eth_rxseg::default(); 2];
                    segs[0].split = raw::rte_eth_rxseg_split {
                        mp: rq.pool.as_ptr(),
                        length: split.header_len,
                        ..Default::default()
                    };
                    segs[1].split = raw::rte_eth_rxseg_split {
                        mp: split.data.as_ptr(),
                        length: 0,
                        ..Default::default()
                    };
                    let mut rxconf = info_raw.default_rxconf;
                    if !split_at_port {
                        rxconf.offloads |= PortInfo::RX_OFFLOAD_BUFFER_SPLIT;
                    }
                    rxconf.rx_seg = segs.as_mut_ptr();
                    rxconf.rx_nseg = 2;
                    // SAFETY: configured port with buffer split offered (checked above);
                    // rxconf and segs live for the call (DPDK copies them); the pool
                    // argument is NULL as buffer split requires; both pools outlive the
                    // port (PortInner holds them).
                    unsafe {
                        raw::rte_eth_rx_queue_setup(
                            id,
                            q,
                            nb_rx,
                            socket,
                            &rxconf,
                            std::ptr::null_mut(),
                        )
                    }
                }
            };
            result::neg_errno(rc).map_err(|e| {
                port_err(
                    "rte_eth_rx_queue_setup",
                    id,
                    e,
                    "check rx_desc and that the pool's mbufs are large enough (data_room)",
                )
            })?;
        }
        for q in 0..cfg.tx_queues {
            // SAFETY: configured port, q < tx_queues; NULL txconf = PMD defaults.
            let rc = unsafe { raw::rte_eth_tx_queue_setup(id, q, nb_tx, socket, std::ptr::null()) };
            result::neg_errno(rc)
                .map_err(|e| port_err("rte_eth_tx_queue_setup", id, e, "check tx_desc"))?;
        }
        // SAFETY: every queue is set up.
        let rc = unsafe { raw::rte_eth_dev_start(id) };
        result::neg_errno(rc).map_err(|e| {
            port_err(
                "rte_eth_dev_start",
                id,
                e,
                "see the PMD log above (link, mbuf size, queue setup)",
            )
        })?;
        if let (Some(r), Some((_, entries))) = (&cfg.rss, &rss) {
            program_reta(id, &r.queues, *entries)?;
        }
        if cfg.promiscuous {
            // SAFETY: started valid port; failure (ENOTSUP on some vdevs) is harmless.
            let _ = unsafe { raw::rte_eth_promiscuous_enable(id) };
        }
        let rx = (0..cfg.rx_queues)
            .map(|q| RxQueue {
                port: Arc::clone(&inner),
                queue: q,
            })
            .collect();
        let tx = (0..cfg.tx_queues)
            .map(|q| TxQueue {
                port: Arc::clone(&inner),
                queue: q,
            })
            .collect();
        Ok((Port { inner }, rx, tx))
    }

    fn info_of(id: u16) -> Result<PortInfo> {
        Self::info_raw(id).map(|i| i.0)
    }

    fn info_raw(id: u16) -> Result<(PortInfo, raw::rte_eth_dev_info)> {
        let mut info = raw::rte_eth_dev_info::default();
        // SAFETY: valid port id; info is a valid out struct.
        let rc = unsafe { raw::rte_eth_dev_info_get(id, &mut info) };
        result::neg_errno(rc)
            .map_err(|e| port_err("rte_eth_dev_info_get", id, e, "is the port valid?"))?;
        let driver = if info.driver_name.is_null() {
            String::new()
        } else {
            // SAFETY: driver_name points to the PMD's static NUL-terminated name.
            unsafe { CStr::from_ptr(info.driver_name) }
                .to_string_lossy()
                .into_owned()
        };
        Ok((
            PortInfo {
                driver,
                max_rx_queues: info.max_rx_queues,
                max_tx_queues: info.max_tx_queues,
                rss_offloads: info.flow_type_rss_offloads,
                reta_size: info.reta_size,
                hash_key_size: info.hash_key_size,
                rx_offload_capa: info.rx_offload_capa,
                rx_queue_offload_capa: info.rx_queue_offload_capa,
                max_rx_segments: info.rx_seg_capa.max_nseg,
                tx_offload_capa: info.tx_offload_capa,
            },
            info,
        ))
    }

    /// Port id.
    pub fn id(&self) -> u16 {
        self.inner.id
    }

    /// Port name (as passed to [`Port::open`]).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Number of RX and TX queues.
    pub fn queues(&self) -> (u16, u16) {
        (self.inner.rx_queues, self.inner.tx_queues)
    }

    /// The RSS configured by [`Port::open_with`] (`None`: one RX queue or no `rss`).
    pub fn rss(&self) -> Option<RssState> {
        self.inner.rss
    }

    /// Driver name and queue limits.
    ///
    /// # Errors
    /// [`DpdkError::Port`] if the PMD refuses.
    pub fn info(&self) -> Result<PortInfo> {
        Self::info_of(self.inner.id)
    }

    /// The port's MAC address (`rte_eth_macaddr_get`).
    ///
    /// # Errors
    /// [`DpdkError::Port`] if the PMD refuses.
    pub fn mac(&self) -> Result<[u8; 6]> {
        let mut a = raw::rte_ether_addr::default();
        // SAFETY: valid port; a is a valid out struct.
        let rc = unsafe { raw::rte_eth_macaddr_get(self.inner.id, &mut a) };
        result::neg_errno(rc).map_err(|e| {
            port_err(
                "rte_eth_macaddr_get",
                self.inner.id,
                e,
                "is the port valid?",
            )
        })?;
        Ok(a.addr_bytes)
    }

    /// Basic counters (`rte_eth_stats_get`).
    ///
    /// # Errors
    /// [`DpdkError::Port`] if the PMD refuses.
    pub fn stats(&self) -> Result<PortStats> {
        let mut s = raw::rte_eth_stats::default();
        // SAFETY: valid port; s is a valid out struct.
        let rc = unsafe { raw::rte_eth_stats_get(self.inner.id, &mut s) };
        result::neg_errno(rc).map_err(|e| {
            port_err(
                "rte_eth_stats_get",
                self.inner.id,
                e,
                "the PMD has no stats",
            )
        })?;
        Ok(PortStats {
            ipackets: s.ipackets,
            opackets: s.opackets,
            ibytes: s.ibytes,
            obytes: s.obytes,
            imissed: s.imissed,
            ierrors: s.ierrors,
            oerrors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
        })
    }

    /// Resets the counters (`rte_eth_stats_reset`).
    ///
    /// # Errors
    /// [`DpdkError::Port`] if the PMD refuses.
    pub fn reset_stats(&self) -> Result<()> {
        // SAFETY: valid port.
        let rc = unsafe { raw::rte_eth_stats_reset(self.inner.id) };
        result::neg_errno(rc).map_err(|e| {
            port_err(
                "rte_eth_stats_reset",
                self.inner.id,
                e,
                "the PMD has no stats",
            )
        })?;
        Ok(())
    }
}

/// One RX queue of a [`Port`]: `Send`, used by one owner thread (`&mut self` methods).
/// Keeps the port open while it lives.
#[derive(Debug)]
pub struct RxQueue {
    port: Arc<PortInner>,
    queue: u16,
}

impl RxQueue {
    /// The device's clock now (`rte_eth_read_clock`), the clock of its hardware receive
    /// stamps. Cold path.
    ///
    /// # Errors
    /// [`DpdkError::Port`] with the PMD's errno (`ENOTSUP` where it has no clock to read).
    pub fn read_clock(&self) -> Result<u64> {
        device_clock(&self.port)
    }

    /// Port id.
    pub fn port_id(&self) -> u16 {
        self.port.id
    }

    /// Queue index.
    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// Receives up to `slots.len()` (at most 65535) mbufs into `slots[..n]` and returns `n`
    /// (`rte_eth_rx_burst`). Mbufs already in `slots` are freed first. Never allocates,
    /// never blocks.
    pub fn rx_burst(&mut self, slots: &mut [Option<Mbuf>]) -> usize {
        for s in slots.iter_mut() {
            drop(s.take());
        }
        let n = slots.len().min(usize::from(u16::MAX)) as u16;
        // SAFETY: this queue was set up on a started port (kept alive by self.port) and
        // only this handle (&mut self) polls it; slots holds n empty slots laid out as
        // `struct rte_mbuf *`; DPDK writes owned mbufs into the first returned count.
        let got =
            unsafe { raw::rtdaq_rx_burst(self.port.id, self.queue, slots.as_mut_ptr().cast(), n) };
        usize::from(got)
    }

    /// [`rx_burst`](Self::rx_burst) that also reads each received mbuf's `pkt_len` into
    /// `lens[k]` and `nb_segs` into `segs[k]`, in the same C call (the per-mbuf accessors
    /// are a call each). Receives at most `min(slots, lens, segs)` mbufs.
    pub fn rx_burst_lens(
        &mut self,
        slots: &mut [Option<Mbuf>],
        lens: &mut [u32],
        segs: &mut [u16],
    ) -> usize {
        for s in slots.iter_mut() {
            drop(s.take());
        }
        let n = slots
            .len()
            .min(lens.len())
            .min(segs.len())
            .min(usize::from(u16::MAX)) as u16;
        // SAFETY: as in rx_burst; lens and segs hold at least n elements, and the shim
        // writes one of each for every mbuf it returns (at most n).
        let got = unsafe {
            raw::rtdaq_rx_burst_lens(
                self.port.id,
                self.queue,
                slots.as_mut_ptr().cast(),
                n,
                lens.as_mut_ptr(),
                segs.as_mut_ptr(),
            )
        };
        usize::from(got)
    }

    /// Receives into the free tail of `burst` (as many as fit) and returns how many came.
    /// Never allocates, never blocks.
    pub fn rx_into(&mut self, burst: &mut MbufBurst) -> usize {
        let n = burst.spare_len();
        let Some(tail) = burst.spare_tail(n) else {
            return 0;
        };
        if n == 0 {
            return 0;
        }
        // SAFETY: as in rx_burst; tail points to n empty slots of the burst.
        let got = unsafe { raw::rtdaq_rx_burst(self.port.id, self.queue, tail, n as u16) };
        let got = usize::from(got);
        // SAFETY: DPDK wrote `got` owned mbufs into the first slots of the tail.
        unsafe { burst.commit_tail(got) };
        got
    }
}

/// One TX queue of a [`Port`]: `Send`, used by one owner thread. Keeps the port open.
#[derive(Debug)]
pub struct TxQueue {
    port: Arc<PortInner>,
    queue: u16,
}

impl TxQueue {
    /// Port id.
    pub fn port_id(&self) -> u16 {
        self.port.id
    }

    /// Queue index.
    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// The device's clock now (`rte_eth_read_clock`: in the PMD's own unit, ns on mlx5 in
    /// real-time mode, else ticks of its free-running counter); launch times are on it.
    /// Cold path.
    ///
    /// # Errors
    /// [`DpdkError::Port`] with the PMD's errno (`ENOTSUP` where it has no clock to read).
    pub fn read_clock(&self) -> Result<u64> {
        device_clock(&self.port)
    }

    /// Has the NIC pace this queue at `mbps` megabits per second
    /// (`rte_eth_set_queue_rate_limit`; the PMD decides what it counts of a frame). Cold
    /// path.
    ///
    /// # Errors
    /// [`DpdkError::Port`] with the PMD's errno: `ENOTSUP` where it has no per-queue rate
    /// limit (most virtual PMDs; among NICs e.g. ixgbe and i40e have one), `EINVAL` for a
    /// rate it cannot take.
    pub fn set_rate_limit(&mut self, mbps: u32) -> Result<()> {
        // SAFETY: a valid port and queue, kept alive by self.port; the PMD only reads the
        // arguments.
        let rc = unsafe { raw::rte_eth_set_queue_rate_limit(self.port.id, self.queue, mbps) };
        result::neg_errno(rc).map_err(|e| {
            port_err(
                "rte_eth_set_queue_rate_limit",
                self.port.id,
                e,
                "the PMD has no per-queue rate limit; the generator paces in software",
            )
        })?;
        Ok(())
    }

    /// Sends the leading `Some` mbufs of `slots` (up to the first `None`) and returns how
    /// many the PMD accepted (`rte_eth_tx_burst`); their slots become `None` (the PMD frees
    /// them once sent), the rest stay for a retry. Never allocates, never blocks.
    pub fn tx_burst(&mut self, slots: &mut [Option<Mbuf>]) -> usize {
        let k = slots
            .iter()
            .take(usize::from(u16::MAX))
            .take_while(|s| s.is_some())
            .count();
        // SAFETY: slots[..k] are valid owned mbufs laid out as `struct rte_mbuf *`; the
        // queue belongs to a started port kept alive by self.port, used only through &mut
        // self.
        let sent = unsafe {
            raw::rtdaq_tx_burst(
                self.port.id,
                self.queue,
                slots.as_mut_ptr().cast(),
                k as u16,
            )
        };
        let sent = usize::from(sent);
        for s in &mut slots[..sent] {
            // SAFETY: DPDK took ownership of these mbufs; forget them without freeing.
            unsafe { std::ptr::write(s, None) };
        }
        sent
    }

    /// Sends the mbufs held by `burst` (from its front) and returns how many the PMD
    /// accepted; those leave the burst, the rest stay. Never allocates, never blocks.
    pub fn tx_from(&mut self, burst: &mut MbufBurst) -> usize {
        let (p, n) = burst.held_raw();
        if n == 0 {
            return 0;
        }
        // SAFETY: p points to n owned mbufs of the burst; the queue is live (self.port).
        let sent = unsafe { raw::rtdaq_tx_burst(self.port.id, self.queue, p, n as u16) };
        let sent = usize::from(sent);
        // SAFETY: DPDK took exactly the first `sent` mbufs.
        unsafe { burst.consume_head(sent) };
        sent
    }
}

/// The RSS hash fields in effect and the RETA size for `r` on a PMD described by `info`, or
/// why it cannot be done (what, fix).
fn rss_plan(
    r: &RssConfig,
    info: &PortInfo,
    rx_queues: u16,
) -> std::result::Result<(u64, u16), (String, &'static str)> {
    if info.rss_offloads == 0 {
        return Err((
            format!("{rx_queues} RX queues need RSS to spread traffic, but the PMD offers no RSS hash (flow_type_rss_offloads = 0)"),
            "list one RX queue for this port, or use a PMD/NIC with RSS",
        ));
    }
    let hf = r.hash_fields & info.rss_offloads;
    if hf == 0 {
        return Err((
            format!(
                "none of the RSS hash fields {:#x} is offered (the PMD hashes {:#x})",
                r.hash_fields, info.rss_offloads
            ),
            "use a NIC that hashes IPv4/UDP, or list one RX queue",
        ));
    }
    if r.queues.is_empty() || r.queues.iter().any(|&q| q >= rx_queues) {
        return Err((
            format!(
                "RETA queues {:?} are not among the {rx_queues} RX queues",
                r.queues
            ),
            "name RX queues of this port in the RSS queue list",
        ));
    }
    if info.reta_size == 0 {
        return Err((
            "the PMD has RSS but no redirection table (reta_size = 0)".to_owned(),
            "list one RX queue for this port, or use a NIC with an RSS RETA",
        ));
    }
    Ok((hf, info.reta_size))
}

/// Programs `entries` RETA entries cycling over `queues` (`rte_eth_dev_rss_reta_update`).
fn program_reta(id: u16, queues: &[u16], entries: u16) -> Result<()> {
    const GROUP: usize = raw::RTDAQ_RETA_GROUP_SIZE as usize;
    let n = usize::from(entries);
    let mut conf: Vec<raw::rte_eth_rss_reta_entry64> = (0..n.div_ceil(GROUP))
        .map(|_| raw::rte_eth_rss_reta_entry64::default())
        .collect();
    for i in 0..n {
        let g = &mut conf[i / GROUP];
        g.mask |= 1u64 << (i % GROUP);
        g.reta[i % GROUP] = queues[i % queues.len()];
    }
    // SAFETY: started valid port; conf holds entries.div_ceil(64) groups, as reta_size
    // requires; DPDK only reads it.
    let rc = unsafe { raw::rte_eth_dev_rss_reta_update(id, conf.as_mut_ptr(), entries) };
    result::neg_errno(rc).map_err(|e| {
        port_err(
            "rte_eth_dev_rss_reta_update",
            id,
            e,
            "the PMD refused the RSS redirection table: list one RX queue for this port",
        )
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{PortInfo, SplitAt};

    fn info(port: bool, queue: bool, nseg: u16) -> PortInfo {
        let b = PortInfo::RX_OFFLOAD_BUFFER_SPLIT;
        PortInfo {
            driver: "net_test".into(),
            max_rx_queues: 4,
            max_tx_queues: 4,
            rss_offloads: 0,
            reta_size: 0,
            hash_key_size: 0,
            rx_offload_capa: if port || queue { b } else { 0 },
            rx_queue_offload_capa: if queue { b } else { 0 },
            max_rx_segments: nseg,
            tx_offload_capa: 0,
        }
    }

    /// Buffer split is accepted or refused exactly as the PMD reports it (no vdev offers it,
    /// so this is where the accepting side is tested).
    #[test]
    fn buffer_split_follows_the_pmd_capabilities() {
        // No queue splits: nothing asked of the PMD, whatever it offers.
        assert_eq!(info(false, false, 0).split_plan(0, 2), Ok(None));
        // mlx5-like: per-queue offload, 2+ segments.
        let mlx5 = info(true, true, 4);
        assert_eq!(mlx5.split_plan(2, 2), Ok(Some(SplitAt::Port)));
        assert_eq!(mlx5.split_plan(1, 2), Ok(Some(SplitAt::Queues)));
        // Port-wide only: every queue or none.
        let port_only = info(true, false, 2);
        assert_eq!(port_only.split_plan(3, 3), Ok(Some(SplitAt::Port)));
        let (what, fix) = port_only.split_plan(1, 3).unwrap_err();
        assert!(
            what.contains("port-wide") && fix.contains("every RX queue"),
            "{what}"
        );
        // The offload without two segments, or not at all (every vdev here).
        let (what, _) = info(true, true, 1).split_plan(1, 1).unwrap_err();
        assert!(what.contains("offered, 1 RX segments"), "{what}");
        let (what, fix) = info(false, false, 0).split_plan(1, 1).unwrap_err();
        assert!(
            what.contains("absent") && fix.contains("one pool"),
            "{what}"
        );
    }
}
