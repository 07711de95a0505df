//! Registering a runtime pool with the NIC, shared by the RoCE and raw paths: CPU memory
//! through `ibv_reg_mr`, GPU memory (a pool the CPU cannot reach, exported as a dma-buf:
//! [`BufferPool::with_dmabuf`](rtdaq_core::BufferPool::with_dmabuf)) through its dma-buf
//! (`ibv_reg_dmabuf_mr`), both by [`Pd::register_pool`], at the pool's own slot addresses.
//! Cold path.
use ffi::{Access, Context, Mr, Pd};
use rtdaq_core::traits::DmaTarget;
use rtdaq_core::BufferPool;

use crate::error::{IbvError, Result};

/// True when `pool` is registered through its dma-buf (GPU memory).
pub(crate) fn through_dmabuf(pool: &BufferPool<'_>) -> bool {
    matches!(pool.dma_target(), DmaTarget::DmaBuf { .. })
}

/// Registers the whole of `pool` on `pd` (device `ctx`) for `access`. `key` is the config
/// key of the region (`interfaces[i].rx_queues[j].memory_regions[k]`).
///
/// # Errors
/// [`IbvError::Verbs`] naming `key`, the verb and the fix: for a dma-buf pool, that the
/// device must import dma-bufs (GPUDirect RDMA: an mlx5 NIC, Linux ≥ 5.12; not Soft-RoCE);
/// for CPU memory, the locked-memory limit.
pub(crate) fn register_pool(
    ctx: &Context,
    pd: &Pd,
    pool: &'static BufferPool<'static>,
    access: Access,
    key: impl Into<String>,
) -> Result<Mr> {
    let gpu = through_dmabuf(pool);
    pd.register_pool(pool, access).map_err(|e| {
        IbvError::verbs(
            key,
            if gpu {
                format!("registering the GPU region through its dma-buf (ibv_reg_dmabuf_mr; EOPNOTSUPP/EPROTONOSUPPORT: RDMA device {} cannot import dma-bufs: GPUDirect RDMA needs a NIC driver that does, e.g. mlx5, and Linux >= 5.12; Soft-RoCE cannot; see {})", ctx.device_name(), crate::error::DOCS)
            } else {
                "registering the region (ibv_reg_mr; ENOMEM: raise the locked-memory limit)"
                    .to_string()
            },
            e,
        )
    })
}
