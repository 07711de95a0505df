//! Everything `unsafe` in the crate, in three layers (style guide §3.5):
//!
//! | layer | module | what |
//! |---|---|---|
//! | raw | [`raw`] | bindgen output over the DPDK headers plus the C shim's `rtdaq_*` functions |
//! | result | `result` | thin functions returning [`Result`](crate::Result); the **only** place that reads `rte_errno` |
//! | safe | `eal`, `mempool`, `port`, `mbuf` | RAII types: [`Eal`](crate::Eal), [`Mempool`](crate::Mempool), [`Port`](crate::Port), [`RxQueue`](crate::RxQueue)/[`TxQueue`](crate::TxQueue), [`Mbuf`](crate::Mbuf), [`MbufBurst`](crate::MbufBurst), [`TimestampField`](crate::TimestampField) |
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

pub(crate) mod eal;
pub(crate) mod extmem;
pub(crate) mod flow;
pub(crate) mod mbuf;
pub(crate) mod mempool;
pub(crate) mod port;
pub(crate) mod port_info;
pub mod raw;
pub(crate) mod result;
pub(crate) mod txtime;
