//! What a run gives back ([`RunResults`]), what it is told ([`RunOptions`]), what identifies
//! the binary ([`Identity`]) and the engines' optional port-counter seam ([`StatsHook`]).

use crate::generator::GenTotals;
use crate::memory::Resources;
use crate::validator::Validator;
use rtdaq_core::traits::EngineStats;

pub use crate::observe::report::ThreadFailure;

/// What identifies the binary in the report.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Engine compiled in.
    pub engine: &'static str,
    /// Platform compiled in.
    pub platform: &'static str,
    /// rtdaq version.
    pub version: &'static str,
    /// SHA-256 of the config text.
    pub config_sha256: String,
}

/// Command-line overrides of `[run]`, and what the run needs from the binary.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Overrides `run.duration_s` (0 = until SIGINT/SIGTERM).
    pub duration_s: Option<f64>,
    /// Overrides every recorder's `directory` (`rtdaq run --output-dir DIR`).
    pub output_dir: Option<std::path::PathBuf>,
    /// SHA-256 of the config text (written into DADA headers and indexes).
    pub config_sha256: String,
    /// Serve `/metrics` and `/status` there (`run.metrics`, `rtdaq run --metrics`).
    pub metrics: Option<std::net::SocketAddr>,
    /// The binary's version, commit, engine and platform (`rtdaq_build_info`; the config's
    /// name and SHA-256 are filled in by the run).
    pub build: crate::observe::metrics::BuildInfo,
    /// Write the JSON status there every second, atomically (`rtdaq run --status-file`).
    pub status_file: Option<std::path::PathBuf>,
}

/// Raw results of the run, before the report is built.
#[derive(Debug)]
pub struct RunResults {
    /// Wall time from the start of the queue threads to their stop, seconds.
    pub elapsed_s: f64,
    /// Monotonic start of the run ([`crate::pacer::now_ns`]): stall times are given from it.
    pub start_ns: u64,
    /// CPU steal during the run on each queue core, seconds by core number
    /// ([`crate::stall::cpu_steal`]; empty when `/proc/stat` has none).
    pub cpu_steal_s: std::collections::BTreeMap<String, f64>,
    /// Validators of the RX queues (config order).
    pub validators: Vec<Validator>,
    /// The record sinks of each RX queue (config order; empty for queues that record
    /// nothing).
    pub record: Vec<Vec<crate::record::SinkReport>>,
    /// The egress sinks of each RX queue (config order; empty for queues that forward
    /// nothing).
    pub egress: Vec<Vec<crate::egress::EgressReport>>,
    /// The PSRDADA ring of each RX queue (config order; `None` for queues that write none).
    pub dada: Vec<Option<crate::dada_ring::DadaReport>>,
    /// The triggered dumps written, in order.
    pub dumps: Vec<crate::dump::DumpReport>,
    /// Generator totals per TX queue (config order; zero for queues without a generator).
    pub generated: Vec<GenTotals>,
    /// Allocations made by I/O and consumer threads after their set-up.
    pub io_thread_allocations: u64,
    /// True when SIGINT/SIGTERM ended the run early.
    pub interrupted: bool,
    /// Wall-clock start of the run, ns since the Unix epoch.
    pub started_at_unix_ns: u64,
    /// Resources (counters) of the run.
    pub resources: Resources,
    /// The engine moves whole Ethernet frames (`Engine::FRAMES`): byte counts are frame bytes.
    pub frames: bool,
    /// Per-port driver counters read after the queues stopped (engines with an
    /// [`EngineStats`] handle, see [`run_with_stats`](super::run_with_stats); empty otherwise).
    pub ports: Vec<rtdaq_core::traits::PortStats>,
    /// NIC counters of the interfaces' kernel network devices over the run ([`crate::observe::nic`]).
    pub nics: Vec<crate::observe::nic::NicReport>,
    /// The clock check over the run (`[time]`), if the config has one.
    pub time: Option<crate::observe::time::TimeReport>,
    /// Queue threads that panicked (each fails the run: its counts are incomplete).
    pub failed_threads: Vec<ThreadFailure>,
}

/// How the app takes an engine's [`EngineStats`] handle: called once on the opened engine,
/// before its queues are handed out; the handle is read after every queue thread ended.
pub type StatsHook<E> = fn(&E) -> Box<dyn EngineStats>;
