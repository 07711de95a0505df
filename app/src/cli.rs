//! Command-line interface (clap).

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// rtdaq: real-time data-acquisition appliance (sealed engine + platform + config).
#[derive(Debug, Parser)]
#[command(name = "rtdaq", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print version, git commit, engine, platform, features and the embedded config's SHA-256.
    Version,
    /// Inspect or validate deployment configs.
    #[command(subcommand)]
    Config(ConfigCommand),
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
