//! Mbuf pools over the runtime's memory regions (see the crate docs, "Memory").
//!
//! Per memory region a queue uses: the region's [`BufferPool`] (from
//! [`QueueResources::pools`]) is handed whole to DPDK ([`ExtMem::from_pool`]: every slot
//! taken, the memory registered with `rte_extmem_register` at the region's page size and
//! DMA-mapped for each port's device), and one mbuf pool is created whose data buffers are
//! that memory ([`Mempool::new_external`]): `buf_size` + DPDK's 128 B headroom per buffer,
//! rounded up to 64 B, back to back. Only the mbuf headers come from DPDK's own memory.

use std::collections::BTreeMap;
use std::sync::Arc;

use rtdaq_config::model::RegionKind;
use rtdaq_config::Config;
use rtdaq_core::traits::{EngineArgs, QueueResources};
use rtdaq_core::BufferPool;
use rtdaq_dpdk_sys::{raw, DmaMapping, Eal, ExtMem, Mempool, MempoolConfig};

use crate::error::{DpdkEngineError, Result};

/// The runtime's pool of every region some queue names, by region index.
pub(crate) fn region_pools(
    cfg: &Config,
    args: &EngineArgs<'static, Config>,
) -> Result<BTreeMap<usize, &'static BufferPool<'static>>> {
    let mut out: BTreeMap<usize, &'static BufferPool<'static>> = BTreeMap::new();
    let mut add = |res: &[QueueResources<'static>], dir: &str| -> Result<()> {
        for r in res {
            let iface = &cfg.interfaces[r.interface];
            let regions = if dir == "rx_queues" {
                &iface.rx_queues[r.queue].memory_regions
            } else {
                &iface.tx_queues[r.queue].memory_regions
            };
            for (k, reg) in regions.iter().enumerate() {
                let Some(&pool) = r.pools.get(k) else {
                    return Err(DpdkEngineError::config(
                        format!("interfaces[{}].{dir}[{}].memory_regions[{k}]", r.interface, r.queue),
                        "the runtime handed the engine no buffer pool for this region (QueueResources::pools must hold one pool per listed region: the DPDK engine keeps its mbuf data in the region's memory)",
                    ));
                };
                match out.get(&reg.0) {
                    Some(p) if !std::ptr::eq(*p, pool) => {
                        return Err(DpdkEngineError::config(
                            format!("memory_regions[{}]", reg.0),
                            "two queues naming this region were handed different buffer pools; the runtime must hand one pool per region",
                        ))
                    }
                    _ => {
                        out.insert(reg.0, pool);
                    }
                }
            }
        }
        Ok(())
    };
    add(args.rx, "rx_queues")?;
    add(args.tx, "tx_queues")?;
    Ok(out)
}

/// One mbuf pool over region `r`'s memory, DMA-mapped for the devices of `ports`.
pub(crate) fn region_mempool(
    eal: &Eal,
    cfg: &Config,
    r: usize,
    pool: &'static BufferPool<'static>,
    ports: &[(String, u16)],
    seq: u32,
) -> Result<Arc<Mempool>> {
    let reg = &cfg.memory_regions[r];
    let key = format!("memory_regions[{r}]");
    let mp_err = |source| DpdkEngineError::Mempool {
        key: key.clone(),
        source: Box::new(source),
    };
    let page = reg.granule() as usize;
    let ext = ExtMem::from_pool(eal, pool, page).map_err(mp_err)?;
    let mut dma = Vec::new();
    for (name, id) in ports {
        let m = ext.dma_map(*id).map_err(mp_err)?;
        dma.push(format!(
            "{name}: {}",
            match m {
                DmaMapping::Mapped => "mapped",
                DmaMapping::AlreadyMapped => "mapped (same device)",
                DmaMapping::NotNeeded => "no DMA mapping needed (ENOTSUP: virtual device)",
            }
        ));
    }
    let data_room = (reg.buf_size + raw::RTE_PKTMBUF_HEADROOM) as u16;
    let elt = usize::from(data_room).div_ceil(64) * 64;
    let fit = (ext.usable() / elt) as u32;
    let mc = MempoolConfig {
        n: 0,
        cache_size: (fit / 2).min(256),
        data_room,
        socket: None,
    };
    let mp = Mempool::new_external(eal, &format!("rtdaq{seq}_r{r}"), &mc, &ext).map_err(mp_err)?;
    log::info!(
        "{key} (\"{}\", {}): {} mbufs of {} B data room ({} B after the {} B headroom) in the region's own memory ({} KiB at {:#x}, {} B pages{}); {}",
        reg.name,
        reg.kind.as_str(),
        mp.size(),
        data_room,
        reg.buf_size,
        raw::RTE_PKTMBUF_HEADROOM,
        ext.len() / 1024,
        ext.addr(),
        ext.page_size(),
        if ext.iova_known() { "" } else { ", no IOVA: virtual devices only" },
        dma.join(", ")
    );
    Ok(mp)
}

/// One mbuf pool in DPDK's own memory sized like region `r` (`buf_count` mbufs of
/// `buf_size` + headroom), for a PMD that must own its pool's memory (`driver`: net_af_xdp
/// builds its UMEM over the pool's memory zone). The runtime's pool over the region stays
/// unused: that memory is allocated twice, and the log says so.
pub(crate) fn dpdk_owned_mempool(
    eal: &Eal,
    cfg: &Config,
    r: usize,
    driver: &str,
    seq: u32,
) -> Result<Arc<Mempool>> {
    let reg = &cfg.memory_regions[r];
    let key = format!("memory_regions[{r}]");
    let data_room = (reg.buf_size + raw::RTE_PKTMBUF_HEADROOM) as u16;
    let mc = MempoolConfig {
        n: reg.buf_count,
        cache_size: (reg.buf_count * 2 / 3).min(256),
        data_room,
        socket: None,
    };
    let mp = Mempool::new(eal, &format!("rtdaq{seq}_r{r}"), &mc).map_err(|source| {
        DpdkEngineError::Mempool {
            key: key.clone(),
            source: Box::new(source),
        }
    })?;
    log::info!(
        "{key} (\"{}\"): {driver} builds its AF_XDP UMEM over the mbuf pool's own memory, so this region's {} mbufs of {data_room} B data room live in DPDK memory, not in the region (which stays allocated, unused)",
        reg.name,
        mp.size(),
    );
    Ok(mp)
}

/// A region the engine can put mbuf data buffers in.
pub(crate) fn check_region(cfg: &Config, r: usize) -> Result<()> {
    let reg = &cfg.memory_regions[r];
    if reg.kind == RegionKind::Device {
        return Err(DpdkEngineError::config(
            format!("memory_regions[{r}].kind"),
            "kind \"device\": GPU memory is not CPU-addressable; DPDK reaches it through GPU-direct registration (rtdaq_dpdk_sys::ExtMem::register over the GPU mapping, issue #6), not done yet; use kind = \"host\", \"huge\" or \"host_pinned\"",
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
