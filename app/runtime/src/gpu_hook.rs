//! The seam between the generic runtime and the GPU stage: compiled with and without the
//! `gpu` feature, so `run.rs` and `memory.rs` call the same functions either way. Without
//! the feature a config that needs a GPU is refused with a clear error, and a queue never
//! has a stage (`Stage` is then an empty enum).

use crate::error::RuntimeError;
use crate::memory::{GpuMap, GpuRegionMem, QueueStats, Resources};
use crate::pipeline::Pipeline;
use crate::record::RecordSink;
use crate::threads::{self, Unwrap};
use rtdaq_config::model::{Config, MemoryRegion};
use rtdaq_core::slot_ring::SlotConsumer;
use rtdaq_core::traits::{RxBurst, RxQueue};
use std::sync::atomic::AtomicBool;

#[cfg(feature = "gpu")]
pub(crate) use crate::gpu_stage::Stage;

/// Without the `gpu` feature no queue has a GPU stage.
#[cfg(not(feature = "gpu"))]
pub(crate) enum Stage {}

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
    return crate::gpu_stage::check(config);
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
    return crate::gpu_stage::alloc_region(r, size, dmabuf);
    #[cfg(not(feature = "gpu"))]
    Err(RuntimeError::Gpu(format!(
        "memory region `{}` is kind \"{}\", but {NOT_BUILT_WITH_GPU}",
        r.name,
        r.kind.as_str()
    )))
}

/// One stage per RX queue (in `res.rx` order), `Some` for queues with `gpu_stage`: the
/// pipelines are built here (NVRTC compile, device buffers), before any thread starts.
pub(crate) fn prepare(
    config: &Config,
    res: &Resources,
) -> Result<Vec<Option<Stage>>, RuntimeError> {
    #[cfg(feature = "gpu")]
    return crate::gpu_stage::prepare(config, res);
    #[cfg(not(feature = "gpu"))]
    {
        if !config.gpu_stages.is_empty() {
            return Err(no_gpu(config));
        }
        Ok(res.rx.iter().map(|_| None).collect())
    }
}

/// Hands a queue's GPU stage the record sinks of its products (empty without a stage:
/// `config check` allows product recorders on GPU stages only).
pub(crate) fn attach_products(stage: &mut Option<Stage>, sinks: Vec<RecordSink>) {
    match stage {
        None => debug_assert!(sinks.is_empty(), "product sinks without a GPU stage"),
        #[cfg(feature = "gpu")]
        Some(s) => s.attach_products(sinks),
        #[cfg(not(feature = "gpu"))]
        Some(s) => match *s {},
    }
}

/// RX I/O thread in direct mode, through the queue's GPU stage when it has one.
pub(crate) fn rx_direct<Q: RxQueue>(
    queue: &mut Q,
    stage: Option<Stage>,
    pipe: Pipeline,
    stats: &'static QueueStats,
    stop: &AtomicBool,
    busy: bool,
    unwrap: Unwrap,
) -> Pipeline
where
    Q::Burst: 'static,
{
    match stage {
        None => threads::rx_direct(queue, pipe, stats, stop, busy, unwrap),
        #[cfg(feature = "gpu")]
        Some(s) => crate::gpu_stage::rx_direct(queue, s, pipe, stats, stop, busy, unwrap),
        #[cfg(not(feature = "gpu"))]
        Some(s) => match s {},
    }
}

/// RX consumer thread (indirect mode), through the queue's GPU stage when it has one.
pub(crate) fn rx_consumer<B: RxBurst>(
    ring: SlotConsumer<'static, B>,
    stage: Option<Stage>,
    pipe: Pipeline,
    stats: &'static QueueStats,
    io_done: &AtomicBool,
    busy: bool,
    unwrap: Unwrap,
) -> Pipeline {
    match stage {
        None => threads::rx_consumer(ring, pipe, stats, io_done, busy, unwrap),
        #[cfg(feature = "gpu")]
        Some(s) => crate::gpu_stage::rx_consumer(ring, s, pipe, stats, io_done, busy, unwrap),
        #[cfg(not(feature = "gpu"))]
        Some(s) => match s {},
    }
}
