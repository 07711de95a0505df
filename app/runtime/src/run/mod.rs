//! One run of the appliance, as five typed steps, each a type that owns what it made:
//!
//! | step | type | what it made | file |
//! |---|---|---|---|
//! | plan | `Plan` | signal handlers, the metrics address bound, the NIC counters' start values | `plan.rs` |
//! | prepared | `Prepared` | memory regions, pools and counters; GPU stages; record sinks and their writer threads; each RX queue's chain of stages; the replay's first window | `prepare.rs` |
//! | parked | `Parked` | one pinned `SCHED_FIFO` thread per queue (+ a consumer per indirect RX queue), parked until its queue arrives | `park.rs` |
//! | running | `Running`, `Ending` | multicast memberships, the open engine, each thread with its queue; live line, `/metrics`, systemd notifications | `start.rs` |
//! | stopped | [`RunResults`] | generators stopped, RX drained, every thread joined, files closed | `watch.rs` |
//!
//! An error at any step unwinds what the steps before it made (parked threads are woken
//! and joined, writers end and the files they opened are removed) and comes back as a
//! [`RuntimeError`] naming the key or thread (the binary exits 2).

mod park;
mod plan;
mod prepare;
mod results;
mod start;
mod threads;
mod watch;

pub use results::{Identity, RunOptions, RunResults, StatsHook, ThreadFailure};

use crate::error::RuntimeError;
use rtdaq_config::model::Config;
use rtdaq_core::traits::{Engine, EngineArgs, RxQueue};

// --- Port stats seam (optional engine ability, rtdaq_core::traits::EngineStats) ---

/// [`run`] for an engine with port counters of its own: `stats` takes its handle, whose
/// [`EngineStats::port_stats`](rtdaq_core::traits::EngineStats::port_stats) fills [`RunResults::ports`] (and the report's `ports`).
pub fn run_with_stats<E>(
    config: &'static Config,
    opts: &RunOptions,
    stats: StatsHook<E>,
) -> Result<RunResults, RuntimeError>
where
    E: Engine<'static, Config = EngineArgs<'static, Config>>,
    <E::Rx as RxQueue>::Burst: 'static,
{
    run_inner::<E>(config, opts, Some(stats))
}
// --- end of the port stats seam ---

/// Runs `config` with engine `E` until the duration passes or a signal arrives.
pub fn run<E>(config: &'static Config, opts: &RunOptions) -> Result<RunResults, RuntimeError>
where
    E: Engine<'static, Config = EngineArgs<'static, Config>>,
    <E::Rx as RxQueue>::Burst: 'static,
{
    run_inner::<E>(config, opts, None)
}

fn run_inner<E>(
    config: &'static Config,
    opts: &RunOptions,
    stats: Option<StatsHook<E>>,
) -> Result<RunResults, RuntimeError>
where
    E: Engine<'static, Config = EngineArgs<'static, Config>>,
    <E::Rx as RxQueue>::Burst: 'static,
{
    let plan = plan::Plan::new(config, opts)?;
    let prepared = plan.prepare::<E>()?;
    let parked = prepared.park::<E>()?;
    let running = parked.start(stats)?;
    Ok(running.watch().stop())
}
