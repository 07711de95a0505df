//! Per-port RX set-up from the config: RSS over the RX queues and the mbuf pool(s) of each
//! RX queue (header-data split through DPDK buffer split). Checked against what the PMD
//! offers before the port is configured, so every refusal names its config key.
//!
//! - **RSS** (`interfaces[i]` with more than one RX queue): `RTE_ETH_MQ_RX_RSS` hashing the
//!   fields the config's RSS model uses — the IPv4/UDP 4-tuple (`RTE_ETH_RSS_IPV4 |
//!   RTE_ETH_RSS_NONFRAG_IPV4_UDP`), restricted to the PMD's `flow_type_rss_offloads` — with
//!   the symmetric Toeplitz key of the software classifier ([`RSS_KEY_SYMMETRIC`], repeated
//!   to the PMD's key size), and a RETA cycling over the RX queues the interface's `rss`
//!   flows list (in first-seen order), or over all its RX queues when no flow has an `rss`
//!   action. A PMD that hashes but has no RETA (`net_tap`: RSS only as `rte_flow` actions)
//!   gets no port RSS (its queues are reached through `rte_flow` rules). A PMD with no RSS
//!   is refused (`interfaces[i].rx_queues`), except the PMDs that spread frames over their
//!   queues themselves ([`SELF_SPREADING`]).
//! - **Pools**: RX queue `j` fills from the mbuf pool of its `memory_regions[0]`; with
//!   `hds_split = h` (two regions), from buffer split: the first `h` bytes in an mbuf of
//!   region 0, the rest in a chained mbuf of region 1 — refused
//!   (`interfaces[i].rx_queues[j].hds_split`) unless the PMD offers
//!   `RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT` with two segments.

use std::collections::BTreeMap;
use std::sync::Arc;

use rtdaq_config::Config;
use rtdaq_core::flow::{FlowAction, RSS_KEY_SYMMETRIC};
use rtdaq_dpdk_sys::{BufferSplit, Mempool, PortInfo, RssConfig, RxQueueConfig};

use crate::error::{DpdkEngineError, Result};

/// PMDs that spread received frames over their RX queues without DPDK RSS, and how.
pub const SELF_SPREADING: &[(&str, &str)] = &[
    (
        "net_af_packet",
        "the kernel spreads frames over its qpairs (PACKET_FANOUT_HASH)",
    ),
    (
        "net_af_xdp",
        "the NIC's own RSS spreads frames over the netdev queues it binds (start_queue, queue_count)",
    ),
];

/// RX queues (indices) the RETA of interface `i` spreads over.
pub(crate) fn reta_queues(cfg: &Config, i: usize) -> Vec<u16> {
    let mut out: Vec<u16> = Vec::new();
    for f in cfg.flows.iter().filter(|f| f.interface.0 == i) {
        if let FlowAction::Rss(qs) = &f.rule.action {
            for q in qs {
                if !out.contains(&q.0) {
                    out.push(q.0);
                }
            }
        }
    }
    if out.is_empty() {
        out = (0..cfg.interfaces[i].rx_queues.len() as u16).collect();
    }
    out
}

/// The RSS of interface `i` on a PMD described by `info`: `None` with one RX queue or on a
/// self-spreading PMD.
pub(crate) fn rss_for(
    cfg: &Config,
    i: usize,
    port: &str,
    info: &PortInfo,
) -> Result<Option<RssConfig>> {
    let n = cfg.interfaces[i].rx_queues.len();
    if n <= 1 {
        return Ok(None);
    }
    let want = RssConfig::IPV4 | RssConfig::NONFRAG_IPV4_UDP;
    if info.rss_offloads & want != 0 && info.reta_size == 0 {
        log::info!(
            "interfaces[{i}] (DPDK port \"{port}\", PMD {}): {n} RX queues; the PMD hashes but has no RSS redirection table: traffic reaches queues other than 0 only through rte_flow rules (queue / rss actions)",
            info.driver
        );
        return Ok(None);
    }
    if info.rss_offloads & want == 0 {
        if let Some((_, how)) = SELF_SPREADING.iter().find(|(d, _)| *d == info.driver) {
            log::info!(
                "interfaces[{i}] (DPDK port \"{port}\", PMD {}): {n} RX queues without DPDK RSS: {how}",
                info.driver
            );
            return Ok(None);
        }
        let why = if info.rss_offloads == 0 {
            "offers no RSS (flow_type_rss_offloads = 0)".to_owned()
        } else {
            format!(
                "cannot hash IPv4/UDP (flow_type_rss_offloads {:#x}, rtdaq's RSS hashes the IPv4/UDP 4-tuple)",
                info.rss_offloads
            )
        };
        return Err(DpdkEngineError::config(
            format!("interfaces[{i}].rx_queues"),
            format!(
                "{n} RX queues need RSS to spread received frames over them, but DPDK port \"{port}\" (PMD {}) {why}; list one RX queue for this interface, or use a NIC (or net_af_packet with qpairs = {n}) that spreads traffic",
                info.driver
            ),
        ));
    }
    Ok(Some(RssConfig {
        hash_fields: want,
        key: RSS_KEY_SYMMETRIC.to_vec(),
        queues: reta_queues(cfg, i),
    }))
}

/// The pools of every RX queue of interface `i` (`regions[j]`: the queue's region indices).
pub(crate) fn rx_queue_configs(
    cfg: &Config,
    i: usize,
    port: &str,
    info: &PortInfo,
    regions: &[Vec<usize>],
    pools: &BTreeMap<usize, Arc<Mempool>>,
) -> Result<Vec<RxQueueConfig>> {
    let mut out = Vec::with_capacity(regions.len());
    for (j, regs) in regions.iter().enumerate() {
        let q = &cfg.interfaces[i].rx_queues[j];
        let pool = &pools[&regs[0]];
        let split = match (q.hds_split, regs.get(1)) {
            (Some(h), Some(data)) => {
                if !info.buffer_split() {
                    return Err(DpdkEngineError::config(
                        format!("interfaces[{i}].rx_queues[{j}].hds_split"),
                        format!(
                            "header-data split ({h} B headers into memory_regions[{}], the rest into memory_regions[{data}]) needs DPDK buffer split (RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT into 2 segments), which DPDK port \"{port}\" (PMD {}) does not offer (buffer split {}, at most {} RX segments); remove hds_split and list one region, or use a NIC whose PMD offers buffer split (e.g. mlx5)",
                            regs[0],
                            info.driver,
                            if (info.rx_offload_capa | info.rx_queue_offload_capa) & PortInfo::RX_OFFLOAD_BUFFER_SPLIT != 0 { "offered" } else { "absent" },
                            info.max_rx_segments
                        ),
                    ));
                }
                let header_len = u16::try_from(h).map_err(|_| {
                    DpdkEngineError::config(
                        format!("interfaces[{i}].rx_queues[{j}].hds_split"),
                        "larger than an mbuf segment (65535 B)",
                    )
                })?;
                Some(BufferSplit {
                    header_len,
                    data: Arc::clone(&pools[data]),
                })
            }
            _ => None,
        };
        out.push(RxQueueConfig {
            pool: Arc::clone(pool),
            split,
        });
    }
    Ok(out)
}
