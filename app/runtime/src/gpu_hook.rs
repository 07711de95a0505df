//! The seam between the generic runtime and the GPU stage: compiled with and without the
//! `gpu` feature, so `run.rs` and `memory.rs` call the same functions either way. Without
//! the feature a config that needs a GPU is refused with a clear error, and a queue never
//! has a stage (`GpuStage` is then an empty enum).

use crate::error::RuntimeError;
use crate::gpu_region::{GpuMap, GpuRegionMem};
use crate::product_sinks::ProductSinks;
use crate::queue::stats::QueueStats;
use crate::stages::chain::GpuStage;
use rtdaq_config::model::{Config, MemoryRegion};
use rtdaq_core::traits::QueueResources;

/// What a binary without the `gpu` feature says about a config that needs one.
pub const NOT_BUILT_WITH_GPU: &str = "this binary was built without `--features gpu`";

#[cfg(not(feature = "gpu"))]
fn no_gpu(config: &Config) -> RuntimeError {
    RuntimeError::Gpu(format!(
        "config \"{}\" uses GPU memory or a GPU stage, but {NOT_BUILT_WITH_GPU}; rebuild with `cargo build --release --features gpu`",
        config.name
    ))
}

/// Checks, before anything is allocated, that the GPUs, libraries and device memory the
/// config needs are there.
pub(crate) fn check(config: &Config) -> Result<(), RuntimeError> {
    if !config.uses_gpu() {
        return Ok(());
    }
    #[cfg(feature = "gpu")]
    return crate::stages::gpu::check(config);
    #[cfg(not(feature = "gpu"))]
    Err(no_gpu(config))
}

/// Allocates a GPU memory region: its memory (`host_pinned`: CPU bytes for the buffer pool;
/// `device`: GPU memory, exported as a dma-buf when `dmabuf`) and its GPU mapping.
#[cfg_attr(not(feature = "gpu"), allow(unused_variables))]
pub(crate) fn alloc_region(
    r: &MemoryRegion,
    size: usize,
    dmabuf: bool,
) -> Result<(GpuRegionMem, GpuMap), RuntimeError> {
    #[cfg(feature = "gpu")]
    return crate::stages::gpu::alloc_region(r, size, dmabuf);
    #[cfg(not(feature = "gpu"))]
    Err(RuntimeError::Gpu(format!(
        "memory region `{}` is kind \"{}\", but {NOT_BUILT_WITH_GPU}",
        r.name,
        r.kind.as_str()
    )))
}

/// One stage per RX queue (in `rx` order), `Some` for queues with `gpu_stage`: the
/// pipelines are built here (NVRTC compile, device buffers), before any thread starts.
/// `gpu_maps`: per memory region, its GPU mapping; `rx_stats`: the queues' counters.
#[cfg_attr(not(feature = "gpu"), allow(unused_variables))]
pub(crate) fn prepare(
    config: &Config,
    gpu_maps: &[Option<GpuMap>],
    rx: &[QueueResources<'static>],
    rx_stats: &'static [QueueStats],
) -> Result<Vec<Option<GpuStage>>, RuntimeError> {
    #[cfg(feature = "gpu")]
    return crate::stages::gpu::prepare(config, gpu_maps, rx, rx_stats);
    #[cfg(not(feature = "gpu"))]
    {
        if !config.gpu_stages.is_empty() {
            return Err(no_gpu(config));
        }
        Ok(rx.iter().map(|_| None).collect())
    }
}

/// Hands a queue's GPU stage the sinks of its products (none without a stage: `config
/// check` allows product recorders and egress sinks on GPU stages only).
pub(crate) fn attach_products(stage: &mut Option<GpuStage>, sinks: ProductSinks) {
    match stage {
        None => debug_assert!(sinks.is_empty(), "product sinks without a GPU stage"),
        #[cfg(feature = "gpu")]
        Some(s) => s.attach_products(sinks),
        #[cfg(not(feature = "gpu"))]
        Some(s) => match *s {},
    }
}
