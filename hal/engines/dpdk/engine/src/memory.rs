//! Mbuf pools over the runtime's memory regions (see the crate docs, "Memory").
//!
//! Per memory region a queue uses: the region's [`BufferPool`] (from
//! [`QueueResources::pools`]) is handed whole to DPDK ([`ExtMem::from_pool`]: every slot
//! taken, the memory registered with `rte_extmem_register` at the region's page size and
//! DMA-mapped for each port's device), and one mbuf pool is created whose data buffers are
//! that memory ([`Mempool::new_external`]): `buf_size` + DPDK's 128 B headroom per buffer,
//! rounded up to 64 B, back to back. Only the mbuf headers come from DPDK's own memory.
//!
//! A `device` region (GPU memory, RX only) goes the same way: its pool is registered at the
//! GPU page ([`GPU_PAGE`]) without IOVA and mapped for each port's device, where the NIC's
//! driver resolves the GPU pages (mlx5 through `nvidia-peermem`); the CPU never touches the
//! buffers, and the RX burst hands their segments up as `Segment::Device`.

use std::collections::BTreeMap;
use std::sync::Arc;

use rtdaq_config::model::RegionKind;
use rtdaq_config::Config;
use rtdaq_core::traits::{EngineArgs, QueueResources};
use rtdaq_core::BufferPool;
use rtdaq_dpdk_sys::{
    page_size, raw, DmaMapping, Eal, ExtMem, Mempool, MempoolConfig, MempoolFlags, GPU_PAGE,
};

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
    let page = if reg.kind == RegionKind::Device {
        GPU_PAGE
    } else {
        reg.granule() as usize
    };
    let ext = ExtMem::from_pool(eal, pool, page).map_err(mp_err)?;
    let mut dma = Vec::new();
    for (name, id) in ports {
        let m = ext.dma_map(*id).map_err(mp_err)?;
        dma.push(format!(
            "{name}: {}",
            match m {
                DmaMapping::Mapped => "mapped",
                DmaMapping::AlreadyMapped => "mapped (same device)",
                DmaMapping::NotNeeded if ext.is_device() => "no DMA mapping (ENOTSUP: a virtual device, which never DMAs; a NIC reaching GPU memory maps it here)",
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
        if ext.is_device() {
            ", GPU memory: no IOVA, the NIC's driver resolves it"
        } else if ext.iova_known() {
            ""
        } else {
            ", no IOVA: virtual devices only"
        },
        dma.join(", ")
    );
    Ok(mp)
}

/// `XDP_PACKET_HEADROOM`: what the kernel keeps in front of a frame in an AF_XDP chunk.
const XDP_PACKET_HEADROOM: u32 = 256;
/// The smallest AF_XDP chunk the kernel takes (`XDP_UMEM_MIN_CHUNK_SIZE`).
const XDP_MIN_CHUNK: u32 = 2048;

/// The mbuf layout of a `net_af_xdp` pool for `buf_size` bytes of frame: `(chunk, data_room)`,
/// the chunk (= mempool object = UMEM frame) a power of two in 2048..=`page`, so objects
/// tile every page (4 KiB, or a hugepage) with no gap and none crosses a page, and the data
/// room = chunk − object header − `struct rte_mbuf` (with `RTE_MEMPOOL_F_NO_SPREAD`). The PMD
/// puts a frame at 128 B mbuf headroom + 256 B XDP headroom into the data room, so `chunk`
/// holds header + mbuf + 384 B + `buf_size`. `Err(largest buf_size)` when no chunk up to a
/// page holds that.
pub(crate) fn af_xdp_layout(buf_size: u32, overhead: u32, page: u32) -> Result<(u32, u16), u32> {
    let need = overhead + raw::RTE_PKTMBUF_HEADROOM + XDP_PACKET_HEADROOM + buf_size;
    let chunk = need.next_power_of_two().max(XDP_MIN_CHUNK);
    let max = page.min(u32::from(u16::MAX) + 1);
    if chunk > max {
        return Err(max - overhead - raw::RTE_PKTMBUF_HEADROOM - XDP_PACKET_HEADROOM);
    }
    Ok((chunk, (chunk - overhead) as u16))
}

/// One mbuf pool in DPDK's own memory for region `r` (`buf_count` mbufs), for a PMD that must
/// own its pool's memory (`driver`: net_af_xdp builds its AF_XDP UMEM over the pool's
/// memory). The runtime's pool over the region stays unused: that memory is allocated twice,
/// and the log says so.
///
/// DPDK 22.11's net_af_xdp registers the UMEM as `populated_size × object size` bytes from
/// the page of the pool's first object, i.e. it assumes objects back to back; DPDK's default
/// pool layout keeps every object inside one page (a 4 KiB page each for the default 2368 B
/// mbuf under `--no-huge`), so ~42% of such a pool lay beyond the UMEM, the kernel dropped
/// their fill-ring entries as invalid, and the port stopped receiving for good after ~58% of
/// `buf_count` frames (imissed counting the rest). So the pool is laid out to match
/// ([`af_xdp_layout`]: power-of-two objects that tile the pages) and checked
/// ([`Mempool::umem_fit`]): a pool whose mbufs do not all lie inside the UMEM is refused.
pub(crate) fn dpdk_owned_mempool(
    eal: &Eal,
    cfg: &Config,
    r: usize,
    driver: &str,
    seq: u32,
) -> Result<Arc<Mempool>> {
    let reg = &cfg.memory_regions[r];
    let key = format!("memory_regions[{r}]");
    let flags = MempoolFlags::NO_SPREAD;
    let overhead = Mempool::object_size(0, flags);
    let page = page_size() as u32;
    let (chunk, data_room) = af_xdp_layout(reg.buf_size, overhead, page).map_err(|max| {
        DpdkEngineError::config(
            format!("{key}.buf_size"),
            format!(
                "{} B: {driver} receives into AF_XDP frames of at most one {page} B page, which hold {max} B of frame after DPDK's mbuf header ({overhead} B), the 128 B mbuf headroom and the kernel's 256 B XDP headroom; lower buf_size to {max} or less (and the MTU with it)",
                reg.buf_size
            ),
        )
    })?;
    let mc = MempoolConfig {
        n: reg.buf_count,
        cache_size: (reg.buf_count * 2 / 3).min(256),
        data_room,
        socket: None,
    };
    let mp = Mempool::with_flags(eal, &format!("rtdaq{seq}_r{r}"), &mc, flags, true).map_err(
        |source| DpdkEngineError::Mempool {
            key: key.clone(),
            source: Box::new(source),
        },
    )?;
    let fit = mp.umem_fit();
    if !fit.fits() {
        return Err(DpdkEngineError::config(
            key,
            format!(
                "{driver} lays its AF_XDP UMEM over {} B from the page of the pool's first mbuf ({} objects × {} B), but {} of the {} mbufs lie beyond it (the pool's {} memory chunk(s) span {} B; the first outside is object {}): the kernel would drop those buffers from the fill ring and the port would stop receiving after about {} frames; give the EAL more contiguous memory (-m with --no-huge, or more hugepages) or lower buf_count",
                fit.umem_len,
                fit.objects,
                fit.obj_size,
                fit.outside,
                fit.objects,
                fit.chunks,
                fit.span,
                fit.first_outside,
                fit.first_outside,
            ),
        ));
    }
    log::info!(
        "{key} (\"{}\"): {driver} builds its AF_XDP UMEM over the mbuf pool's own memory, so this region's {} mbufs live in DPDK memory, not in the region (which stays allocated, unused); each mbuf is one {chunk} B UMEM frame ({data_room} B data room, frames up to {} B), and all {} lie inside the {} B UMEM",
        reg.name,
        mp.size(),
        chunk - overhead - raw::RTE_PKTMBUF_HEADROOM - XDP_PACKET_HEADROOM,
        fit.objects,
        fit.umem_len,
    );
    Ok(mp)
}

/// A region the engine can put mbuf data buffers in; `tx`: some TX queue sends from it.
/// GPU memory (`device`) only receives: the engine builds TX frames with the CPU.
pub(crate) fn check_region(cfg: &Config, r: usize, tx: bool) -> Result<()> {
    let reg = &cfg.memory_regions[r];
    if reg.kind == RegionKind::Device && tx {
        return Err(DpdkEngineError::config(
            format!("memory_regions[{r}].kind"),
            "kind \"device\" on a TX queue: the DPDK engine writes every frame it sends with the CPU, which cannot reach GPU memory; give the TX queue a \"host\", \"huge\" or \"host_pinned\" region",
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

#[cfg(test)]
mod tests {
    use super::af_xdp_layout;

    #[test]
    fn af_xdp_chunks_are_powers_of_two_that_tile_a_page() {
        // object header 64 B + struct rte_mbuf 128 B (DPDK 22.11, NO_SPREAD)
        assert_eq!(af_xdp_layout(2048, 192, 4096), Ok((4096, 3904)));
        assert_eq!(af_xdp_layout(1472, 192, 4096), Ok((2048, 1856)));
        assert_eq!(af_xdp_layout(1473, 192, 4096), Ok((4096, 3904)));
        assert_eq!(af_xdp_layout(64, 192, 4096), Ok((2048, 1856)));
        assert_eq!(af_xdp_layout(3520, 192, 4096), Ok((4096, 3904)));
        // more than a 4 KiB page holds: the largest buf_size that fits
        assert_eq!(af_xdp_layout(3521, 192, 4096), Err(3520));
        assert_eq!(af_xdp_layout(9000, 192, 4096), Err(3520));
        // 64 KiB pages (aarch64): up to the u16 data room limit
        assert_eq!(af_xdp_layout(9000, 192, 65536), Ok((16384, 16192)));
        for b in [64, 1500, 2048, 3000] {
            let (chunk, room) = af_xdp_layout(b, 192, 4096).unwrap();
            assert!(chunk.is_power_of_two() && 4096 % chunk == 0);
            assert!(u32::from(room) >= 128 + 256 + b);
        }
    }
}
