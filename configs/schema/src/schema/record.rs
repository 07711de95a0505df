//! `[[recorders]]` as written.

use serde::Deserialize;

/// `[[recorders]]`: one kind of file sink; each RX queue that names it (`record = [...]`)
/// gets its own files and writer thread.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRecorder {
    pub name: String,
    pub format: String,
    #[serde(default)]
    pub directory: Option<String>,
    #[serde(default)]
    pub file_name: Option<String>,
    #[serde(default)]
    pub rotate_mib: i64,
    #[serde(default)]
    pub rotate_s: f64,
    #[serde(default)]
    pub snaplen: Option<i64>,
    #[serde(default)]
    pub strip_bytes: Option<i64>,
    #[serde(default = "default_buffer_mib")]
    pub buffer_mib: i64,
    #[serde(default = "default_buffers")]
    pub buffers: i64,
    #[serde(default)]
    pub flush_ms: Option<i64>,
    #[serde(default)]
    pub writer_core: Option<i64>,
    #[serde(default)]
    pub writer_priority: Option<i64>,
    #[serde(default = "crate::schema::yes")]
    pub direct_io: bool,
    #[serde(default)]
    pub shared: bool,
    #[serde(default)]
    pub dada: Option<RawDada>,
}

/// `[recorders.dada]`: what the DADA header says about the samples.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDada {
    #[serde(default)]
    pub nbit: Option<i64>,
    #[serde(default)]
    pub ndim: Option<i64>,
    #[serde(default)]
    pub npol: Option<i64>,
    #[serde(default)]
    pub nchan: Option<i64>,
    #[serde(default)]
    pub tsamp_us: Option<f64>,
    #[serde(default)]
    pub freq_mhz: Option<f64>,
    #[serde(default)]
    pub bw_mhz: Option<f64>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub telescope: Option<String>,
    #[serde(default)]
    pub instrument: Option<String>,
}

/// Default `buffer_mib`.
pub(crate) const DEFAULT_BUFFER_MIB: i64 = 4;
/// Default `buffers`.
pub(crate) const DEFAULT_BUFFERS: i64 = 8;

fn default_buffer_mib() -> i64 {
    DEFAULT_BUFFER_MIB
}
fn default_buffers() -> i64 {
    DEFAULT_BUFFERS
}
