//! Subcommand implementations.

mod config;
mod version;

use crate::cli::{Cli, Command, ConfigCommand};
use std::process::ExitCode;

/// Exit code for configuration or environment errors.
pub const EXIT_CONFIG: u8 = 2;

/// Runs the chosen subcommand.
pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Version => version::run(),
        Command::Config(ConfigCommand::Check { file }) => config::check(file.as_deref()),
        Command::Config(ConfigCommand::Show) => config::show(),
    }
}
