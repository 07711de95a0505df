//! `[engine]` and its per-engine sub-tables.

use super::yes;
use crate::model::{
    EngineKind, FanoutMode, FlowOffload, IbMode, RoceOp, RoceReply, RxTimestamps, StridingRq,
    ZeroCopy,
};
use serde::Deserialize;

/// `[engine]`: the kind plus at most the one sub-table matching it (checked in validation).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEngine {
    pub kind: EngineKind,
    #[serde(default)]
    pub socket: Option<RawSocket>,
    #[serde(default)]
    pub afpacket: Option<RawAfpacket>,
    #[serde(default)]
    pub afxdp: Option<RawAfxdp>,
    #[serde(default)]
    pub dpdk: Option<RawDpdk>,
    #[serde(default)]
    pub ibverbs: Option<RawIbverbs>,
}

/// `[engine.socket]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSocket {
    #[serde(default)]
    pub rcvbuf: Option<i64>,
    #[serde(default)]
    pub sndbuf: Option<i64>,
    #[serde(default)]
    pub gro: bool,
    #[serde(default)]
    pub gso: bool,
    #[serde(default = "yes")]
    pub reuseport: bool,
    #[serde(default)]
    pub rx_timestamps: RxTimestamps,
    #[serde(default)]
    pub rx_coalesce_us: i64,
    #[serde(default)]
    pub sockopts: Vec<RawSockopt>,
}

impl Default for RawSocket {
    fn default() -> Self {
        RawSocket {
            rcvbuf: None,
            sndbuf: None,
            gro: false,
            gso: false,
            reuseport: true,
            rx_timestamps: RxTimestamps::Kernel,
            rx_coalesce_us: 0,
            sockopts: Vec::new(),
        }
    }
}

/// One `engine.socket.sockopts` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSockopt {
    pub level: i64,
    pub option: i64,
    pub value: i64,
}

/// Defaults of `[engine.afpacket]`.
pub(crate) mod afpacket_defaults {
    /// 1 MiB blocks.
    pub const BLOCK_SIZE: i64 = 1 << 20;
    /// 2 KiB nominal frames.
    pub const FRAME_SIZE: i64 = 2048;
    /// 64 blocks (64 MiB per RX queue).
    pub const BLOCK_COUNT: i64 = 64;
    /// Retire a partly filled block after 1 ms.
    pub const BLOCK_TIMEOUT_MS: i64 = 1;
}

/// `[engine.afpacket]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAfpacket {
    #[serde(default = "af_block_size")]
    pub block_size: i64,
    #[serde(default = "af_frame_size")]
    pub frame_size: i64,
    #[serde(default = "af_block_count")]
    pub block_count: i64,
    #[serde(default = "af_block_timeout")]
    pub block_timeout_ms: i64,
    #[serde(default = "af_fanout")]
    pub fanout: FanoutMode,
}

impl Default for RawAfpacket {
    fn default() -> Self {
        RawAfpacket {
            block_size: af_block_size(),
            frame_size: af_frame_size(),
            block_count: af_block_count(),
            block_timeout_ms: af_block_timeout(),
            fanout: af_fanout(),
        }
    }
}

fn af_block_size() -> i64 {
    afpacket_defaults::BLOCK_SIZE
}
fn af_frame_size() -> i64 {
    afpacket_defaults::FRAME_SIZE
}
fn af_block_count() -> i64 {
    afpacket_defaults::BLOCK_COUNT
}
fn af_block_timeout() -> i64 {
    afpacket_defaults::BLOCK_TIMEOUT_MS
}
fn af_fanout() -> FanoutMode {
    FanoutMode::Hash
}

/// `[engine.afxdp]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAfxdp {
    #[serde(default = "xdp_frame_size")]
    pub frame_size: i64,
    #[serde(default = "xdp_zero_copy")]
    pub zero_copy: ZeroCopy,
    #[serde(default = "yes")]
    pub need_wakeup: bool,
}

impl Default for RawAfxdp {
    fn default() -> Self {
        RawAfxdp {
            frame_size: xdp_frame_size(),
            zero_copy: xdp_zero_copy(),
            need_wakeup: true,
        }
    }
}

fn xdp_frame_size() -> i64 {
    4096
}
fn xdp_zero_copy() -> ZeroCopy {
    ZeroCopy::Auto
}

/// `[engine.dpdk]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDpdk {
    #[serde(default)]
    pub eal_args: Vec<String>,
    #[serde(default)]
    pub main_core: Option<i64>,
    #[serde(default)]
    pub flow_offload: FlowOffload,
}

/// `[engine.ibverbs]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawIbverbs {
    #[serde(default = "ib_mode")]
    pub mode: IbMode,
    #[serde(default = "ib_port")]
    pub port: i64,
    /// Parsed only to refuse it with a reason (the engine has no use for it).
    #[serde(default)]
    pub gid_index: Option<i64>,
    #[serde(default)]
    pub device: Option<String>,
    #[serde(default)]
    pub op: Option<RoceOp>,
    #[serde(default)]
    pub credits: Option<i64>,
    #[serde(default)]
    pub signal_interval: Option<i64>,
    #[serde(default)]
    pub reply: Option<RoceReply>,
    #[serde(default)]
    pub reply_bytes: Option<i64>,
    #[serde(default)]
    pub striding_rq: Option<StridingRq>,
    #[serde(default)]
    pub stride_size: Option<i64>,
}

impl Default for RawIbverbs {
    fn default() -> Self {
        RawIbverbs {
            mode: ib_mode(),
            port: ib_port(),
            gid_index: None,
            device: None,
            op: None,
            credits: None,
            signal_interval: None,
            reply: None,
            reply_bytes: None,
            striding_rq: None,
            stride_size: None,
        }
    }
}

fn ib_mode() -> IbMode {
    IbMode::Raw
}
fn ib_port() -> i64 {
    1
}
