//! # rtdaq-config: the deployment description of an rtdaq appliance
//!
//! One TOML file describes one deployment: the board (`platform`), the packet engine
//! (`[engine]`), memory regions, interfaces with their RX/TX queues (one pinned `SCHED_FIFO`
//! thread each), flow rules, an optional traffic generator, and run / real-time policy.
//! `app/build.rs` validates the file with this crate and embeds it, so a bad config fails the
//! build, not the boot; `rtdaq config check FILE` runs the same validation.
//!
//! Parsing is strict: every table denies unknown keys (with a "did you mean" suggestion), every
//! reference between items is resolved to an index, and validation collects **all** problems,
//! each as `key.path: what is wrong and how to fix it`. See `docs/configuration.md` for every
//! key and rule.
//!
//! ```
//! let text = r#"
//! name = "demo"
//! platform = "host"
//! [engine]
//! kind = "socket"
//! [[memory_regions]]
//! name = "rx"
//! kind = "host"
//! buf_size = 2048
//! buf_count = 1024
//! [[interfaces]]
//! name = "lo"
//! address = "udp://127.0.0.1:5000"
//! [[interfaces.rx_queues]]
//! id = 0
//! cpu_core = 1
//! memory_regions = ["rx"]
//! mode = "direct"
//! "#;
//! let config = rtdaq_config::load_str(text).expect("valid");
//! assert_eq!(config.engine_kind().as_str(), "socket");
//! assert_eq!(config.summary().total_bytes, 2048 * 1024);
//!
//! let err = rtdaq_config::load_str(&text.replace("cpu_core", "cpu_cor")).unwrap_err();
//! assert_eq!(err.0[0].path, "interfaces[0].rx_queues[0].cpu_cor");
//! assert!(err.0[0].message.contains("did you mean `cpu_core`?"));
//! ```
//!
//! ## Modules
//! | module | what |
//! |---|---|
//! | [`model`] | the validated, typed [`Config`] |
//! | `schema` | the serde schema (as written, `deny_unknown_fields`) |
//! | `engines` | each packet engine's `[engine.<name>]`, in one file per engine: raw table, typed settings, validation, capabilities |
//! | `de` | TOML → schema, with key paths, line/column and suggestions |
//! | `validate` | one function per rule, all errors collected |
//! | [`summary`] | threads, cores, memory footprint, hugepages |
//! | `board` | [`Config::warnings`]: valid but poor on the board (queue cores that are not isolated) |
//! | `parse` | ports and ranges, prefixes, URIs, PCI addresses, MACs |
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod board;
mod dada_ring;
mod de;
mod dump;
mod egress;
mod egress_unit;
mod engines;
mod error;
mod flows;
pub mod model;
mod parse;
mod schema;
mod suggest;
pub mod summary;
mod time;
mod validate;

pub use error::{ConfigError, ConfigErrors};
pub use model::{Config, EngineKind, Platform};
pub use summary::Summary;
pub use validate::{
    check_run_duration, parse_metrics_addr, DEFAULT_DIRECTORY, DEFAULT_FLUSH_MS, DEFAULT_SNAPLEN,
    MAX_FLOWS_PER_INTERFACE, MAX_RUN_DURATION_S,
};

use std::path::Path;

/// Pseudo-path of errors reading the file.
pub const FILE_PATH: &str = "<file>";

/// Parses and validates a deployment config.
///
/// # Errors
/// Every problem found: a TOML syntax error or a shape error (unknown key, wrong type, missing
/// key; serde stops at the first), or else every semantic error.
pub fn load_str(text: &str) -> Result<Config, ConfigErrors> {
    let raw = de::deserialize(text)?;
    validate::validate(&raw)
}

/// Reads, parses and validates a deployment config file.
///
/// # Errors
/// As [`load_str`]; a read failure is one error with path `<file>`.
pub fn load_file(path: &Path) -> Result<Config, ConfigErrors> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(FILE_PATH, format!("cannot read {}: {e}", path.display())))?;
    load_str(&text)
}
