//! Everything `unsafe` in the crate, in three layers (style guide §3.5):
//!
//! | layer | module | what |
//! |---|---|---|
//! | raw | [`raw`] | bindgen output over the rdma-core headers plus the C shim's `rtdaq_ibv_*` functions |
//! | result | `result` | thin functions returning [`Result`](crate::Result); the **only** place that reads `errno` |
//! | safe | `verbs`, `qp`, `flow`, `cm`, `mlx5` | RAII types: devices, contexts, PDs, MRs, CQs, QPs, flows, RDMA CM ids, the mlx5 striding receive queue |
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

pub(crate) mod cm;
pub(crate) mod flow;
pub(crate) mod mlx5;
pub(crate) mod qp;
pub mod raw;
pub(crate) mod result;
pub(crate) mod verbs;
