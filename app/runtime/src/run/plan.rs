//! Step 1 of a run: what the config asks for, settled before anything is allocated.

use super::results::RunOptions;
use crate::error::RuntimeError;
use rtdaq_config::model::Config;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The run as planned: the config and command-line overrides, the signal flag, the bound
/// metrics address, the NIC counters' start values and the clock check.
pub(super) struct Plan<'o> {
    pub config: &'static Config,
    pub opts: &'o RunOptions,
    /// Raised by SIGINT/SIGTERM.
    pub signalled: Arc<AtomicBool>,
    /// `/metrics` and `/status`, bound (not yet served).
    pub endpoint: Option<crate::observe::metrics::Endpoint>,
    /// The interfaces' NIC counters, start values read before the engine opens its devices.
    pub nics: crate::observe::nic::NicWatch,
    /// Seconds to run (0: until a signal).
    pub duration_s: f64,
    /// The clock check (`[time]`), asked once already.
    pub time: Option<crate::observe::time::TimeWatch>,
}

impl<'o> Plan<'o> {
    /// Registers the signal handlers, binds the metrics address (one in use stops the run
    /// before anything else) and reads the NIC counters' start values.
    pub fn new(config: &'static Config, opts: &'o RunOptions) -> Result<Self, RuntimeError> {
        let signalled = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, Arc::clone(&signalled))
                .map_err(RuntimeError::Signals)?;
        }
        // The clock first: an unsynchronised clock with require_sync stops the run here.
        let time = crate::observe::time::TimeWatch::start(config)?;
        let endpoint = opts
            .metrics
            .or(config.run.metrics)
            .map(crate::observe::metrics::Endpoint::bind)
            .transpose()?;
        Ok(Plan {
            config,
            opts,
            signalled,
            endpoint,
            nics: crate::observe::nic::NicWatch::start(config),
            duration_s: opts.duration_s.unwrap_or(config.run.duration_s),
            time,
        })
    }
}
