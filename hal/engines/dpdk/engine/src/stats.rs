//! [`DpdkPortStats`]: the engine's [`EngineStats`] handle — port counters, non-zero xstats,
//! link state and MAC of every port, read after the run for the report.

use rtdaq_core::traits::{EngineStats, LinkInfo, PortStats};
use rtdaq_dpdk_sys::Port;

use crate::engine::InterfaceInfo;

/// Reads every port's `rte_eth_stats`, non-zero xstats, link and MAC. Taken from
/// [`DpdkEngine::stats_handle`](crate::DpdkEngine::stats_handle) before the queues are
/// handed out; it holds a [`Port`] handle per interface, so the ports stay open (and their
/// counters readable) until it is dropped, after the queues. Cold path.
#[derive(Debug, Clone)]
pub struct DpdkPortStats {
    ports: Vec<(InterfaceInfo, Port)>,
}

impl DpdkPortStats {
    pub(crate) fn new(ports: Vec<(InterfaceInfo, Port)>) -> Self {
        DpdkPortStats { ports }
    }
}

/// The stats of one port (errors of single queries leave their part empty).
pub(crate) fn read(info: &InterfaceInfo, port: &Port) -> PortStats {
    let s = port.stats().unwrap_or_default();
    PortStats {
        interface: info.index,
        port: info.port.clone(),
        driver: info.driver.clone(),
        mac: port.mac().ok(),
        link: port.link().ok().map(|l| LinkInfo {
            up: l.up,
            speed_mbps: l.speed_mbps,
            full_duplex: l.full_duplex,
        }),
        ipackets: s.ipackets,
        opackets: s.opackets,
        ibytes: s.ibytes,
        obytes: s.obytes,
        imissed: s.imissed,
        ierrors: s.ierrors,
        oerrors: s.oerrors,
        rx_nombuf: s.rx_nombuf,
        xstats: port
            .xstats()
            .unwrap_or_default()
            .into_iter()
            .filter(|(_, v)| *v != 0)
            .collect(),
    }
}

impl EngineStats for DpdkPortStats {
    fn port_stats(&self) -> Vec<PortStats> {
        self.ports.iter().map(|(i, p)| read(i, p)).collect()
    }
}
