//! Preallocation of everything a run needs: memory regions, buffer pools, counters.
//!
//! Everything here is allocated once, before any queue thread starts, and lives for the rest
//! of the process (leaked on purpose: an appliance runs one deployment per process, and a
//! `'static` lifetime lets the queue threads own their queues without reference counting).
//! Nothing is allocated after this step on the data path.

use crate::error::RuntimeError;
pub use crate::gpu_region::{GpuMap, GpuRegionMem};
pub use crate::queue::stats::QueueStats;
use rtdaq_config::model::{Config, PageSize, Placement, RegionKind};
use rtdaq_core::traits::{MemKind, QueueResources, RxWants};
use rtdaq_core::BufferPool;
use rtdaq_platform::hugepages::HugePageSize;
use rtdaq_platform::memory::{Region, RegionSpec};
use std::sync::atomic::AtomicU32;

/// What [`allocate`] prepared, all `'static`.
#[derive(Debug)]
pub struct Resources {
    /// One pool per config memory region, in config order.
    pub pools: Vec<&'static BufferPool<'static>>,
    /// Per RX queue (config order): pools and I/O counters for the engine.
    pub rx: &'static [QueueResources<'static>],
    /// Per TX queue (config order).
    pub tx: &'static [QueueResources<'static>],
    /// Per RX queue stats (same order as `rx`).
    pub rx_stats: &'static [QueueStats],
    /// Per TX queue stats (same order as `tx`).
    pub tx_stats: &'static [QueueStats],
    /// Bytes of memory regions allocated.
    pub region_bytes: u64,
    /// Per config memory region: its GPU mapping (`host_pinned` and `device` regions), else
    /// `None`.
    pub gpu_maps: Vec<Option<GpuMap>>,
}

fn leak<T>(v: Vec<T>) -> &'static mut [T] {
    Box::leak(v.into_boxed_slice())
}

fn mem_kind(k: RegionKind) -> MemKind {
    match k {
        RegionKind::Host => MemKind::Host,
        RegionKind::Huge => MemKind::Huge,
        RegionKind::HostPinned => MemKind::HostPinned,
        RegionKind::Device => MemKind::Device,
    }
}

/// What RX queue `q`'s stages ask of the engine: source addresses for a recorder whose
/// records carry the real sender (pcap's IPv4/UDP headers).
fn rx_wants(config: &Config, q: &rtdaq_config::model::RxQueue) -> RxWants {
    RxWants {
        source_addresses: q
            .record
            .iter()
            .any(|r| config.recorders[r.0].format.needs_source_address()),
    }
}

/// Allocates (and locks / prefaults) every memory region of `config`, builds a buffer pool
/// over each and the counters of every queue. Cold path; errors name the region and the fix.
pub fn allocate(config: &Config, lock_required: bool) -> Result<Resources, RuntimeError> {
    let mut pools = Vec::with_capacity(config.memory_regions.len());
    let mut region_bytes = 0;
    let mut gpu_maps = Vec::with_capacity(config.memory_regions.len());
    // GPU regions and stages: driver, libraries and device memory checked before anything.
    crate::gpu_hook::check(config)?;
    for r in &config.memory_regions {
        let stride = r.stride() as usize;
        let size = r.footprint() as usize;
        if r.kind.is_gpu() {
            // ibverbs registers device memory as a dma-buf (ibv_reg_dmabuf_mr); DPDK's
            // rte_dev_dma_map takes the address (mlx5 pins it through nvidia-peermem).
            let dmabuf = config.engine_caps().dmabuf;
            let (mem, map) = crate::gpu_hook::alloc_region(r, size, dmabuf)?;
            region_bytes += map.len as u64;
            gpu_maps.push(Some(map));
            let links: &'static mut [AtomicU32] =
                leak((0..r.buf_count).map(|_| AtomicU32::new(0)).collect());
            let used = stride * r.buf_count as usize;
            let pool = match mem {
                GpuRegionMem::Pinned(mem) => BufferPool::new(&mut mem[..used], links, stride),
                GpuRegionMem::Device { dmabuf_fd } => {
                    BufferPool::over_device_memory(map.dev_base, used, links, stride).map(|p| {
                        match dmabuf_fd {
                            Some(fd) => p.with_dmabuf(fd, 0),
                            None => p,
                        }
                    })
                }
            }
            .map_err(|e| RuntimeError::Pool {
                region: r.name.clone(),
                reason: e,
            })?;
            pools.push(&*Box::leak(Box::new(pool)));
            continue;
        }
        gpu_maps.push(None);
        let spec = RegionSpec {
            name: &r.name,
            kind: mem_kind(r.kind),
            size,
            align: 4096,
            numa_node: match r.placement {
                Placement::Numa(n) => Some(n),
                _ => None,
            },
            huge_page: match r.page_size {
                Some(PageSize::Size1G) => HugePageSize::Size1G,
                _ => HugePageSize::Size2M,
            },
            lock_required,
        };
        let region: &'static mut Region = Box::leak(Box::new(Region::allocate(&spec)?));
        region_bytes += region.len() as u64;
        let links: &'static mut [AtomicU32] =
            leak((0..r.buf_count).map(|_| AtomicU32::new(0)).collect());
        let mem = &mut region.as_mut_slice()[..stride * r.buf_count as usize];
        let pool = BufferPool::new(mem, links, stride).map_err(|e| RuntimeError::Pool {
            region: r.name.clone(),
            reason: e,
        })?;
        pools.push(&*Box::leak(Box::new(pool)));
    }

    let mut rx = Vec::new();
    let mut tx = Vec::new();
    let mut rx_stats = Vec::new();
    let mut tx_stats = Vec::new();
    for (i, iface) in config.interfaces.iter().enumerate() {
        for (q, queue) in iface.rx_queues.iter().enumerate() {
            rx.push((
                i,
                q,
                queue
                    .memory_regions
                    .iter()
                    .map(|id| pools[id.0])
                    .collect::<Vec<_>>(),
            ));
            rx_stats.push(QueueStats::with_streams(iface.max_streams as usize));
        }
        for (q, queue) in iface.tx_queues.iter().enumerate() {
            tx.push((
                i,
                q,
                queue
                    .memory_regions
                    .iter()
                    .map(|id| pools[id.0])
                    .collect::<Vec<_>>(),
            ));
            tx_stats.push(QueueStats::new());
        }
    }
    let rx_stats: &'static [QueueStats] = leak(rx_stats);
    let tx_stats: &'static [QueueStats] = leak(tx_stats);
    let resources = |list: Vec<(usize, usize, Vec<&'static BufferPool<'static>>)>,
                     stats: &'static [QueueStats],
                     rx: bool| {
        leak(
            list.into_iter()
                .zip(stats)
                .map(|((interface, queue, p), s)| QueueResources {
                    interface,
                    queue,
                    pools: leak(p),
                    counters: &s.io,
                    wants: if rx {
                        rx_wants(config, &config.interfaces[interface].rx_queues[queue])
                    } else {
                        RxWants::default()
                    },
                })
                .collect(),
        )
    };
    Ok(Resources {
        pools,
        rx: resources(rx, rx_stats, true),
        tx: resources(tx, tx_stats, false),
        rx_stats,
        tx_stats,
        region_bytes,
        gpu_maps,
    })
}

#[cfg(test)]
mod tests {
    /// A queue's plan tells its engine what its stages need: the shipped recording config's
    /// RX queue records pcap, so it asks for source addresses; its TX queue and the default
    /// job's RX queue ask for nothing.
    #[test]
    fn a_pcap_recorder_asks_the_engine_for_source_addresses() {
        let wants = |name: &str| {
            let c = rtdaq_config::load_file(&crate::test_support::shipped_config(name)).unwrap();
            let res = super::allocate(&c, false).unwrap();
            (
                res.rx
                    .iter()
                    .map(|q| q.wants.source_addresses)
                    .collect::<Vec<_>>(),
                res.tx.iter().any(|q| q.wants.source_addresses),
            )
        };
        assert_eq!(wants("host-udp-record.toml"), (vec![true], false));
        assert_eq!(wants("host-loopback-udp.toml"), (vec![false], false));
    }
}
