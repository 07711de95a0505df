//! `[[memory_regions]]` and `[[interfaces]]` with their queues.

use super::IntOrStr;
use crate::model::{FlowControl, PageSize, RegionKind, TcpRole};
use serde::Deserialize;

/// `[[memory_regions]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRegion {
    pub name: String,
    pub kind: RegionKind,
    pub buf_size: i64,
    pub buf_count: i64,
    #[serde(default)]
    pub numa_node: Option<i64>,
    #[serde(default)]
    pub gpu: Option<i64>,
    #[serde(default)]
    pub page_size: Option<PageSize>,
}

/// Default `mtu`.
pub(crate) const DEFAULT_MTU: i64 = 1500;

/// `[[interfaces]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawInterface {
    pub name: String,
    pub address: String,
    #[serde(default = "default_mtu")]
    pub mtu: i64,
    #[serde(default)]
    pub role: Option<TcpRole>,
    #[serde(default)]
    pub connections: Option<i64>,
    #[serde(default)]
    pub max_message_size: Option<i64>,
    #[serde(default)]
    pub rx_queues: Vec<RawRxQueue>,
    #[serde(default)]
    pub tx_queues: Vec<RawTxQueue>,
    #[serde(default)]
    pub default_action: Option<IntOrStr>,
    #[serde(default)]
    pub format: Option<RawFormat>,
    #[serde(default)]
    pub multicast_interface: Option<String>,
    #[serde(default)]
    pub multicast_sources: Option<Vec<String>>,
    #[serde(default)]
    pub multicast_ttl: Option<i64>,
    #[serde(default)]
    pub multicast_loop: Option<bool>,
    #[serde(default)]
    pub multicast_groups: Option<Vec<String>>,
    #[serde(default)]
    pub flow_control: Option<FlowControl>,
    #[serde(default)]
    pub max_streams: Option<i64>,
}

/// `[interfaces.format]`: the stream format (validated in `validate/format.rs`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFormat {
    pub kind: String,
    // kind = "counter"
    #[serde(default)]
    pub offset: Option<i64>,
    #[serde(default)]
    pub bytes: Option<i64>,
    #[serde(default)]
    pub endian: Option<String>,
    #[serde(default)]
    pub shift: Option<i64>,
    #[serde(default)]
    pub bits: Option<i64>,
    #[serde(default)]
    pub step: Option<i64>,
    #[serde(default)]
    pub wrap: Option<i64>,
    #[serde(default)]
    pub stream: Option<RawField>,
    // kind = "vdif"
    #[serde(default)]
    pub frames_per_second: Option<i64>,
    #[serde(default)]
    pub station: Option<IntOrStr>,
    #[serde(default)]
    pub bits_per_sample: Option<i64>,
    #[serde(default)]
    pub log2_channels: Option<i64>,
    // kind = "spead"
    #[serde(default)]
    pub flavour: Option<String>,
    #[serde(default)]
    pub heap_step: Option<i64>,
    #[serde(default)]
    pub heap_bytes: Option<i64>,
    // kind = "codif" (and station, bits_per_sample)
    #[serde(default)]
    pub frames_per_period: Option<i64>,
    #[serde(default)]
    pub period: Option<i64>,
    #[serde(default)]
    pub channels: Option<i64>,
}

/// `[interfaces.format.stream]`: the stream id field of a counter format.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawField {
    pub offset: i64,
    pub bytes: i64,
    #[serde(default)]
    pub endian: Option<String>,
    #[serde(default)]
    pub shift: Option<i64>,
    #[serde(default)]
    pub bits: Option<i64>,
}

fn default_mtu() -> i64 {
    DEFAULT_MTU
}

/// Queue defaults shared by RX and TX.
pub(crate) mod queue_defaults {
    /// `rt_priority`.
    pub const RT_PRIORITY: i64 = 50;
    /// `batch_size`.
    pub const BATCH_SIZE: i64 = 64;
    /// `ring_depth`.
    pub const RING_DEPTH: i64 = 1024;
    /// `timeout_us` (RX).
    pub const TIMEOUT_US: i64 = 100;
}

/// RX delivery mode as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawRxMode {
    Indirect,
    Direct,
}

/// `[[interfaces.rx_queues]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRxQueue {
    pub id: i64,
    pub cpu_core: i64,
    #[serde(default = "default_prio")]
    pub rt_priority: i64,
    #[serde(default = "default_batch")]
    pub batch_size: i64,
    #[serde(default = "default_timeout")]
    pub timeout_us: i64,
    #[serde(default = "default_ring")]
    pub ring_depth: i64,
    pub memory_regions: Vec<String>,
    #[serde(default)]
    pub hds_split: Option<i64>,
    #[serde(default = "default_mode")]
    pub mode: RawRxMode,
    #[serde(default)]
    pub consumer_core: Option<i64>,
    #[serde(default)]
    pub busy_poll: bool,
    #[serde(default)]
    pub gpu_stage: Option<String>,
    #[serde(default)]
    pub record: Vec<String>,
    #[serde(default)]
    pub egress: Vec<String>,
    #[serde(default)]
    pub dada_ring: Option<String>,
    #[serde(default)]
    pub dump: Option<String>,
}

/// `[[interfaces.tx_queues]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTxQueue {
    pub id: i64,
    pub cpu_core: i64,
    #[serde(default = "default_prio")]
    pub rt_priority: i64,
    #[serde(default = "default_batch")]
    pub batch_size: i64,
    #[serde(default = "default_ring")]
    pub ring_depth: i64,
    pub memory_regions: Vec<String>,
    #[serde(default)]
    pub pacing_gbps: Option<f64>,
    #[serde(default)]
    pub busy_poll: bool,
}

fn default_prio() -> i64 {
    queue_defaults::RT_PRIORITY
}
fn default_batch() -> i64 {
    queue_defaults::BATCH_SIZE
}
fn default_timeout() -> i64 {
    queue_defaults::TIMEOUT_US
}
fn default_ring() -> i64 {
    queue_defaults::RING_DEPTH
}
fn default_mode() -> RawRxMode {
    RawRxMode::Indirect
}
