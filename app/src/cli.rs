//! Command-line interface (clap).

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// rtdaq: real-time data-acquisition appliance (sealed engine + platform + config).
#[derive(Debug, Parser)]
#[command(
    name = "rtdaq",
    version,
    about,
    long_about = None,
    propagate_version = true,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// What to do (default: `run` with the embedded config).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Without a subcommand: `rtdaq [--duration S] [--report-json F] [--config F]` is
    /// `rtdaq run ...` (so `cargo run --release -- --duration 2` works).
    #[command(flatten)]
    pub run: RunArgs,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the appliance: the embedded config (or FILE), live counters once a second, a final
    /// report. Exit 0 ok, 1 loss or errors beyond `run.loss_tolerance`, 2 config/environment.
    Run(RunArgs),
    /// Print version, git commit, engine, platform, features and the embedded config's SHA-256.
    Version,
    /// Inspect or validate deployment configs.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Check this host (read-only) against the deployment config: PREEMPT_RT, kernel command
    /// line, governor, C-states, RT throttling, hugepages, MTU, NIC IRQs, PCIe MRRS/MPS, GPU.
    /// One line per check with pass/warn/fail and a fix. Exit 0 no failure, 1 a check failed,
    /// 2 usage or config error.
    Doctor(DoctorArgs),
}

/// `rtdaq doctor ...`
#[derive(Debug, Default, clap::Args)]
pub struct DoctorArgs {
    /// Read /proc and /sys below DIR instead of / (a fixture tree or a fake root); GPU facts
    /// then come from DIR/nvidia-smi-q.txt instead of running nvidia-smi.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
    /// Print the findings as a JSON array of {check, status, detail, fix}.
    #[arg(long)]
    pub json: bool,
    /// Check against this TOML deployment instead of the embedded config.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// `rtdaq run ...`
#[derive(Debug, Default, clap::Args)]
pub struct RunArgs {
    /// Development override: run this TOML deployment instead of the embedded one (it goes
    /// through the same validator; the binary's engine and platform must match it).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Run for SECS seconds instead of `run.duration_s` (0 = until SIGINT/SIGTERM).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Write the JSON report to FILE (overrides `run.report_json`).
    #[arg(long, value_name = "FILE")]
    pub report_json: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics and a JSON status at /status during
    /// the run (overrides `run.metrics`), e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Write the JSON status (the counters so far, as `/status` serves them) to FILE every
    /// second, atomically (a temporary file beside it, then a rename).
    #[arg(long, value_name = "FILE")]
    pub status_file: Option<PathBuf>,
    /// Write every recorder's files into DIR (overrides `recorders[].directory`; created
    /// when missing).
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// The generator sends the packets of FILE (a pcap) instead of generated ones
    /// (overrides `generator.replay`).
    #[arg(long, value_name = "FILE.pcap")]
    pub replay: Option<PathBuf>,
    /// With --replay: `recorded` (the file's timing, scaled by --replay-speed; default) or
    /// `rate` (the generator's rate_gbps / rate_pps / unpaced).
    #[arg(long, value_name = "TIMING", requires = "replay")]
    pub replay_timing: Option<String>,
    /// With --replay and recorded timing: 2.0 sends twice as fast as recorded.
    #[arg(long, value_name = "FACTOR", requires = "replay")]
    pub replay_speed: Option<f64>,
    /// With --replay: send the file N times.
    #[arg(long, value_name = "N", requires = "replay")]
    pub replay_loops: Option<u32>,
}

/// `rtdaq config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a config (the embedded one without FILE) and print a summary: queues, cores,
    /// memory per region and in total, hugepages needed. Exit 0 valid, 2 invalid.
    Check {
        /// A TOML deployment file to check instead of the embedded config.
        file: Option<PathBuf>,
    },
    /// Print the embedded config exactly as it was embedded.
    Show,
}
