//! # rtdaq-ibverbs-sys: libibverbs and librdmacm for rtdaq
//!
//! The FFI foundation of the ibverbs engine (issue #8), over Debian's rdma-core 44
//! (`libibverbs-dev`, `librdmacm-dev`). Three layers (style guide §3.5):
//!
//! | layer | where | what |
//! |---|---|---|
//! | raw | [`raw`] | bindgen bindings + the C shim re-exporting the `static inline` verbs (`ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq`, `ibv_req_notify_cq`, `ibv_create_flow`, `ibv_destroy_flow`, `ibv_query_port`) |
//! | result | `sys::result` (private) | return codes / `errno` → [`Result`]`<_, `[`IbError`]`>` naming the call |
//! | safe | crate root | [`DeviceList`], [`Context`], [`Pd`] ([`Mr`] over a runtime pool, an owned buffer or a dma-buf fd), [`Cq`] + [`WorkCompletion`], raw packet [`Qp`] (with its flow rules, [`Qp::attach_flow`]), [`Flow`] from [`FlowAttr`], RDMA CM [`EventChannel`] + [`CmId`] (RC QP, listen/accept/connect/disconnect) + [`CmEvent`], the mlx5 striding receive queue [`StridingRq`] ([`Context::striding_rq_caps`], [`StrideCursor`]) |
//!
//! ## mlx5 direct verbs
//! The striding (multi-packet) receive queue needs libmlx5 (`mlx5dv_query_device`,
//! `mlx5dv_create_wq`, `mlx5dv_init_obj`). `csrc/mlx5dv_shim.c` loads it with `dlopen` at
//! first use instead of linking it, so the binary starts (and reports "no RDMA device")
//! on hosts without `ibverbs-providers`, and a host without libmlx5 gets
//! [`IbError::Unsupported`] from [`Context::striding_rq_caps`].
//!
//! Work requests are described in plain Rust ([`SendRequest`], [`RecvRequest`], and
//! [`ScatterRecvRequest`]: a receive scattering into up to [`MAX_RECV_SGE`] buffers, the
//! header and data buffers of header-data split) and turned into linked `ibv_*_wr` lists by
//! preallocated [`SendBatch`] / [`RecvBatch`] ([`RecvBatch::with_sges`] reserves two entries
//! per receive; `fill_send_wr` / `fill_recv_wr` / `fill_scatter_recv_wr` are pure and
//! unit-tested). Posting never allocates.
//!
//! ## No RDMA on the host
//! [`DeviceList::get`] and [`EventChannel::new`] return [`IbError::NoDevice`] when the
//! kernel has no RDMA (`ENOSYS`), no device exists, or `/dev/infiniband/rdma_cm` is
//! missing; nothing here panics for a missing device.
//!
//! ## Buffer contract of posting
//! Posting is safe to call: the SGEs must name registered memory (the HCA checks keys and
//! bounds and fails the request otherwise). What the type system cannot see is that a
//! buffer handed to the HCA must not be handed to anyone else until its completion; the
//! engine keeps the pool buffer (`rtdaq_core::Buf`) of every posted request for that time.
//!
//! ## Thread safety
//! Contexts, PDs, MRs, CQs, QPs and CM ids are `Send + Sync` (the verbs used are
//! thread-safe); batches are `Send`.
//!
//! ## Resource cleanup
//! Every type releases its handle on drop, children before parents through `Arc`s
//! (MR/QP → PD → context). A CQ must outlive the QPs using it (owners drop QPs first).
#![deny(missing_docs)]
#![deny(unsafe_code)]

mod error;
mod sys;

pub use error::{errno_name, IbError, Result};
pub use sys::cm::{
    CmEvent, CmEventKind, CmId, ConnParams, EventChannel, MAX_CONNECT_PRIVATE_DATA,
    MAX_PRIVATE_DATA,
};
pub use sys::flow::{Flow, FlowAttr, FlowMatch};
pub use sys::mlx5::{
    StrideCompletion, StrideCursor, StrideGeometry, StrideKind, StridingCaps, StridingRq,
    STRIDING_POLL_MAX,
};
pub use sys::qp::{
    fill_recv_wr, fill_scatter_recv_wr, fill_send_wr, PostError, Qp, QpCaps, RecvBatch,
    RecvRequest, ScatterRecvRequest, SendBatch, SendOp, SendRequest, Sge, WorkRequest, WrBatch,
    MAX_RECV_SGE,
};
pub use sys::raw;
pub use sys::verbs::{
    wc_status_str, Access, Context, Cq, DeviceList, Mr, Pd, WcKind, WorkCompletion,
};

/// The rdma-core (libibverbs) version built against (`pkg-config --modversion`).
pub const RDMA_CORE_VERSION: &str = env!("RTDAQ_RDMA_CORE_VERSION");
