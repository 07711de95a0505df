//! `rtdaq run` (also what `rtdaq` with no arguments does).

use super::EXIT_CONFIG;
use crate::cli::RunArgs;
use crate::embedded;
use anyhow::Context as _;
use rtdaq_runtime::{outcome, Identity, RunOptions};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[cfg(rtdaq_engine = "socket")]
type ActiveEngine = rtdaq_engine_socket::SocketEngine<'static>;
#[cfg(rtdaq_engine = "afpacket")]
type ActiveEngine = rtdaq_engine_afpacket::AfpacketEngine<'static>;
#[cfg(rtdaq_engine = "afxdp")]
type ActiveEngine = rtdaq_engine_afxdp::AfxdpEngine<'static>;
#[cfg(rtdaq_engine = "dpdk")]
type ActiveEngine = rtdaq_engine_dpdk::DpdkEngine<'static>;
// ibverbs: two engine types, chosen by engine.ibverbs.mode (RoCE carries messages,
// raw carries frames: `Engine::FRAMES` differs), see `run_engine` below.
#[cfg(rtdaq_engine = "ibverbs")]
type ActiveEngine = rtdaq_engine_ibverbs::RawEngine;
#[cfg(not(any(
    rtdaq_engine = "socket",
    rtdaq_engine = "afpacket",
    rtdaq_engine = "afxdp",
    rtdaq_engine = "dpdk",
    rtdaq_engine = "ibverbs"
)))]
compile_error!("unknown engine");

// Port counters for the report: engines with ports of their own (DPDK ports, RoCE
// interfaces) hand out an `EngineStats` handle (rtdaq_core::traits); the others run without.
#[cfg(rtdaq_engine = "dpdk")]
fn run_engine(
    config: &'static rtdaq_config::Config,
    opts: &RunOptions,
) -> Result<rtdaq_runtime::RunResults, rtdaq_runtime::RuntimeError> {
    rtdaq_runtime::run_with_stats::<ActiveEngine>(config, opts, |e| Box::new(e.stats_handle()))
}
#[cfg(rtdaq_engine = "ibverbs")]
fn run_engine(
    config: &'static rtdaq_config::Config,
    opts: &RunOptions,
) -> Result<rtdaq_runtime::RunResults, rtdaq_runtime::RuntimeError> {
    if rtdaq_engine_ibverbs::is_roce(config) {
        // The connection counters (established, disconnects, replies, forced releases, ...)
        // go into the report's `ports` as one entry per interface (driver "rdma_cm").
        rtdaq_runtime::run_with_stats::<rtdaq_engine_ibverbs::RoceEngine>(config, opts, |e| {
            Box::new(e.stats_handle())
        })
    } else {
        rtdaq_runtime::run::<ActiveEngine>(config, opts)
    }
}
#[cfg(not(any(rtdaq_engine = "dpdk", rtdaq_engine = "ibverbs")))]
fn run_engine(
    config: &'static rtdaq_config::Config,
    opts: &RunOptions,
) -> Result<rtdaq_runtime::RunResults, rtdaq_runtime::RuntimeError> {
    rtdaq_runtime::run::<ActiveEngine>(config, opts)
}

/// Loads the config (embedded or `--config FILE`), runs it, prints and writes the report.
pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    if let Some(d) = args.duration {
        if let Err(why) = rtdaq_config::check_run_duration(d) {
            eprintln!("--duration {d}: {why} (the same range as run.duration_s)");
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    }
    let (text, label) = match &args.config {
        Some(f) => (
            std::fs::read_to_string(f)
                .with_context(|| format!("cannot read --config {}", f.display()))?,
            f.display().to_string(),
        ),
        None => (
            embedded::CONFIG_TOML.to_string(),
            format!("embedded config {}", embedded::CONFIG_NAME),
        ),
    };
    let mut config = match rtdaq_config::load_str(&text) {
        Ok(c) => c,
        Err(errors) => {
            eprintln!("{label}: invalid ({} errors):", errors.0.len());
            for e in &errors.0 {
                eprintln!("  {e}");
            }
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    let (kind, platform) = (config.engine_kind().as_str(), config.platform().as_str());
    if kind != embedded::ENGINE || platform != crate::board::NAME {
        eprintln!(
            "{label}: needs engine {kind} on platform {platform}, but this binary is built with \
             engine {} on platform {}; rebuild with `--no-default-features --features \
             engine-{kind},platform-{platform}`",
            embedded::ENGINE,
            crate::board::NAME
        );
        return Ok(ExitCode::from(EXIT_CONFIG));
    }
    let refusal = super::gpu::refusal(&config, &label)
        .or_else(|| super::gpu::ucx_refusal(&config, &label))
        .or_else(|| super::gpu::dada_refusal(&config, &label));
    if let Some(msg) = refusal {
        eprintln!("{msg}");
        return Ok(ExitCode::from(EXIT_CONFIG));
    }
    let sha = if args.config.is_some() {
        Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    } else {
        embedded::CONFIG_SHA256.to_string()
    };
    let identity = Identity {
        engine: embedded::ENGINE,
        platform: crate::board::NAME,
        version: env!("CARGO_PKG_VERSION"),
        config_sha256: sha,
    };
    // The report's file is opened before any packet moves: a path that cannot be written
    // (no such directory, no permission, a directory) stops the run now, not after it.
    let report_path = args
        .report_json
        .clone()
        .or_else(|| config.run.report_json.clone());
    let report_file = match report_path.as_deref().map(ReportFile::open).transpose() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{e:#}");
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    if let Err(msg) = apply_overrides(&mut config, args) {
        eprintln!("{msg}");
        return Ok(ExitCode::from(EXIT_CONFIG));
    }
    let metrics = match args
        .metrics
        .as_deref()
        .map(rtdaq_config::parse_metrics_addr)
    {
        None => None,
        Some(Ok(a)) => Some(a),
        Some(Err(why)) => {
            eprintln!("error: --metrics {why}");
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    // The status file's directory must take a file now, not after the run started.
    if let Some(f) = &args.status_file {
        let mut tmp = f.as_os_str().to_owned();
        tmp.push(".tmp");
        if let Err(e) = std::fs::write(&tmp, b"{}").and_then(|()| std::fs::remove_file(&tmp)) {
            eprintln!(
                "error: --status-file {}: cannot write beside it ({e}); give a path in a writable directory",
                f.display()
            );
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    }
    let opts = RunOptions {
        status_file: args.status_file.clone(),
        duration_s: args.duration,
        output_dir: args.output_dir.clone(),
        config_sha256: identity.config_sha256.clone(),
        metrics,
        build: rtdaq_runtime::metrics::BuildInfo {
            version: identity.version.to_string(),
            commit: embedded::GIT_COMMIT.to_string(),
            engine: identity.engine.to_string(),
            platform: identity.platform.to_string(),
            ..Default::default()
        },
    };
    let config: &'static rtdaq_config::Config = Box::leak(Box::new(config));
    log::info!(
        "{label}: engine {kind}, platform {platform}, {} s (Ctrl-C stops early)",
        opts.duration_s.unwrap_or(config.run.duration_s)
    );
    let results = match run_engine(config, &opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            if let Some(f) = report_file {
                f.abandon();
            }
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    if results.interrupted {
        log::info!(
            "stopped early by SIGINT/SIGTERM after {:.1} s",
            results.elapsed_s
        );
    }
    let report = outcome::build(config, &identity, &results);
    super::out(&report.to_string());
    if let Some(f) = report_file {
        report
            .write_json(&f.path)
            .with_context(|| format!("cannot write the JSON report to {}", f.path.display()))?;
        log::info!("report written to {}", f.path.display());
    }
    Ok(ExitCode::from(report.exit_code))
}

/// `--output-dir` and `--replay*`: checked against the config, applied to it.
fn apply_overrides(config: &mut rtdaq_config::Config, args: &RunArgs) -> Result<(), String> {
    if let Some(d) = &args.output_dir {
        if config.recorders.is_empty() {
            return Err(format!(
                "--output-dir {}: config \"{}\" records nothing (it has no [[recorders]]); use a config that records, e.g. configs/host-udp-record.toml",
                d.display(),
                config.name
            ));
        }
    }
    let Some(path) = &args.replay else {
        return Ok(());
    };
    let name = config.name.clone();
    let Some(g) = config.generator.as_mut() else {
        return Err(format!(
            "--replay {}: config \"{name}\" has no [generator] (the TX queue a replay sends on, and its destination); add one",
            path.display()
        ));
    };
    let old = g.replay.as_ref();
    let timing = match (&args.replay_timing, args.replay_speed) {
        (None, None) => old.map_or(
            rtdaq_config::model::ReplayTiming::Recorded { speed: 1.0 },
            |r| r.timing,
        ),
        (t, s) => rtdaq_config::model::Replay::timing_from(t.as_deref(), s)
            .map_err(|e| format!("--replay-timing/--replay-speed: {e}"))?,
    };
    let loops = args.replay_loops.or(old.map(|r| r.loops)).unwrap_or(1);
    if loops == 0 || loops > rtdaq_config::model::MAX_REPLAY_LOOPS {
        return Err(format!(
            "--replay-loops {loops}: out of range 1..={}",
            rtdaq_config::model::MAX_REPLAY_LOOPS
        ));
    }
    g.replay = Some(rtdaq_config::model::Replay {
        path: path.clone(),
        timing,
        loops,
    });
    Ok(())
}

/// The JSON report's file, checked writable before the run (opened for writing, created
/// when missing, not truncated: an earlier report stays until the new one replaces it).
struct ReportFile {
    path: PathBuf,
    /// Created by the check: removed again when the run ends without a report.
    created: bool,
}

impl ReportFile {
    fn open(path: &Path) -> anyhow::Result<Self> {
        let existed = path.exists();
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| {
                let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
                let hint = match dir {
                    Some(d) if !d.is_dir() => format!(
                        "the directory {} does not exist; create it or choose another path",
                        d.display()
                    ),
                    _ if path.is_dir() => "it is a directory; name a file in it".to_string(),
                    _ => "check the path and its permissions".to_string(),
                };
                format!(
                    "cannot write the JSON report to {} ({hint}); nothing was run",
                    path.display()
                )
            })?;
        Ok(ReportFile {
            path: path.to_path_buf(),
            created: !existed,
        })
    }

    /// The run ended without a report: remove the empty file the check created.
    fn abandon(self) {
        if self.created {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
