//! The serde schema: the TOML document as written, before validation.
//!
//! Every table denies unknown keys. Values whose checking should not stop the parse
//! (addresses, prefixes, port ranges, names of other items) are kept as strings or wide
//! integers here and checked by [`validate`](crate::validate), which collects every problem.

mod flow;
mod gpu;
mod interface;
mod record;
mod value;

pub(crate) use flow::{RawFlow, RawMatch, RawWord, RawWordBase};
pub(crate) use gpu::{RawBatchMode, RawGpuStage, RawProduct, RawSlotMode, RawStaging, RawWorkload};
pub(crate) use interface::{
    RawField, RawFormat, RawInterface, RawRegion, RawRxMode, RawRxQueue, RawTxQueue,
};
pub(crate) use record::{RawDada, RawRecorder};
pub(crate) use value::IntOrStr;

use crate::engines::RawEngine;
use crate::model::Platform;
use serde::Deserialize;

/// The whole document.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    pub name: String,
    pub platform: Platform,
    #[serde(default)]
    pub description: Option<String>,
    pub engine: RawEngine,
    #[serde(default)]
    pub memory_regions: Vec<RawRegion>,
    #[serde(default)]
    pub interfaces: Vec<RawInterface>,
    #[serde(default)]
    pub flows: Vec<RawFlow>,
    #[serde(default)]
    pub gpu_stages: Vec<RawGpuStage>,
    #[serde(default)]
    pub recorders: Vec<RawRecorder>,
    #[serde(default)]
    pub egress: Vec<crate::egress::RawEgress>,
    #[serde(default)]
    pub dada_rings: Vec<crate::dada_ring::RawDadaRing>,
    #[serde(default)]
    pub dumps: Vec<crate::dump::RawDump>,
    #[serde(default)]
    pub time: Option<crate::time::RawTime>,
    #[serde(default)]
    pub generator: Option<RawGenerator>,
    #[serde(default)]
    pub run: RawRun,
    #[serde(default)]
    pub rt: RawRt,
}

/// `[generator]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGenerator {
    pub interface: String,
    pub tx_queue: i64,
    #[serde(default)]
    pub destination: Option<String>,
    #[serde(default)]
    pub dst_mac: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
    pub payload_size: i64,
    #[serde(default)]
    pub rate_gbps: Option<f64>,
    #[serde(default)]
    pub rate_pps: Option<i64>,
    #[serde(default)]
    pub unpaced: Option<bool>,
    #[serde(default)]
    pub duration_s: Option<f64>,
    #[serde(default)]
    pub count: Option<i64>,
    #[serde(default)]
    pub stream_id: i64,
    #[serde(default)]
    pub streams: Option<i64>,
    #[serde(default)]
    pub replay: Option<String>,
    #[serde(default)]
    pub replay_timing: Option<String>,
    #[serde(default)]
    pub replay_speed: Option<f64>,
    #[serde(default)]
    pub replay_loops: Option<i64>,
    #[serde(default)]
    pub replay_window_mib: Option<i64>,
    #[serde(default)]
    pub pacing: Option<String>,
    #[serde(default)]
    pub txtime_lead_us: Option<i64>,
}

/// Default `run.duration_s`.
pub(crate) const DEFAULT_RUN_DURATION_S: f64 = 10.0;
/// Default `run.drain_ms`.
pub(crate) const DEFAULT_DRAIN_MS: i64 = 100;
/// Default `rt.prefault_stack_kib`.
pub(crate) const DEFAULT_PREFAULT_STACK_KIB: i64 = 256;

/// `[run]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRun {
    #[serde(default = "default_run_duration")]
    pub duration_s: f64,
    #[serde(default)]
    pub report_json: Option<String>,
    #[serde(default)]
    pub loss_tolerance: i64,
    #[serde(default = "default_drain_ms")]
    pub drain_ms: i64,
    #[serde(default)]
    pub validate: crate::model::Validation,
    /// The metrics endpoint's address (`/metrics`, `/status`); absent: off.
    #[serde(default)]
    pub metrics: Option<String>,
}

impl Default for RawRun {
    fn default() -> Self {
        RawRun {
            duration_s: DEFAULT_RUN_DURATION_S,
            report_json: None,
            loss_tolerance: 0,
            drain_ms: DEFAULT_DRAIN_MS,
            validate: crate::model::Validation::Full,
            metrics: None,
        }
    }
}

fn default_run_duration() -> f64 {
    DEFAULT_RUN_DURATION_S
}
fn default_drain_ms() -> i64 {
    DEFAULT_DRAIN_MS
}

/// `[rt]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRt {
    #[serde(default)]
    pub required: bool,
    #[serde(default = "yes")]
    pub lock_memory: bool,
    #[serde(default = "default_prefault")]
    pub prefault_stack_kib: i64,
}

impl Default for RawRt {
    fn default() -> Self {
        RawRt {
            required: false,
            lock_memory: true,
            prefault_stack_kib: DEFAULT_PREFAULT_STACK_KIB,
        }
    }
}

pub(crate) fn yes() -> bool {
    true
}
fn default_prefault() -> i64 {
    DEFAULT_PREFAULT_STACK_KIB
}

/// Generator limits.
pub(crate) mod generator_defaults {
    /// Smallest payload: room for the rtdaq sequence header.
    pub const MIN_PAYLOAD: u32 = rtdaq_core::wire::SeqHeader::LEN as u32;
}
