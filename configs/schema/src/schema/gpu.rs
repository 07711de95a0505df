//! `[[gpu_stages]]` as written.

use serde::Deserialize;

/// `[[gpu_stages]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGpuStage {
    pub name: String,
    #[serde(default)]
    pub gpu: i64,
    pub packets_per_batch: i64,
    #[serde(default)]
    pub payload_offset: Option<i64>,
    #[serde(default)]
    pub max_payload: Option<i64>,
    /// SPEAD heap assembly (reorder on a SPEAD stream): slots (heaps) per batch.
    #[serde(default)]
    pub heaps_per_batch: Option<i64>,
    /// SPEAD heap assembly: payload bytes of one heap's slot.
    #[serde(default)]
    pub heap_bytes: Option<i64>,
    #[serde(default = "default_mode")]
    pub mode: RawBatchMode,
    #[serde(default)]
    pub slot_mode: Option<RawSlotMode>,
    #[serde(default)]
    pub slot_bits: Option<i64>,
    #[serde(default)]
    pub slot_shift: Option<i64>,
    #[serde(default)]
    pub batch_bits: Option<i64>,
    #[serde(default)]
    pub batch_shift: Option<i64>,
    #[serde(default = "default_conversion")]
    pub conversion: String,
    #[serde(default = "default_depth")]
    pub depth: i64,
    #[serde(default)]
    pub workload: RawWorkload,
    #[serde(default)]
    pub checksum: bool,
    #[serde(default)]
    pub staging: RawStaging,
    /// Recorders (raw/dada) that write each batch's product.
    #[serde(default)]
    pub record: Vec<String>,
    /// Egress sinks that send each batch's product downstream.
    #[serde(default)]
    pub egress: Vec<String>,
    #[serde(default)]
    pub product: Option<RawProduct>,
}

/// `product`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawProduct {
    Batch,
    Workload,
}

/// `mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawBatchMode {
    Reorder,
    Gather,
}

/// `slot_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RawSlotMode {
    Modulo,
    BitFields,
}

/// `workload`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawWorkload {
    #[default]
    None,
    Fft,
    Gemm,
}

/// `staging`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RawStaging {
    #[default]
    Mapped,
    CopyPerPacket,
    CopyBatched,
}

/// Default `depth` (batches in flight).
pub(crate) const DEFAULT_DEPTH: i64 = 4;

fn default_depth() -> i64 {
    DEFAULT_DEPTH
}
fn default_mode() -> RawBatchMode {
    RawBatchMode::Reorder
}
fn default_conversion() -> String {
    "none".into()
}
