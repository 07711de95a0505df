//! Subcommand implementations.

mod config;
mod doctor;
mod gpu;
mod run;
mod version;

use crate::cli::{Cli, Command, ConfigCommand};
use std::io::Write;
use std::process::ExitCode;

/// Exit code for configuration or environment errors.
pub const EXIT_CONFIG: u8 = 2;

/// Runs the chosen subcommand.
pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        None => run::run(&cli.run),
        Some(Command::Run(args)) => run::run(&args),
        Some(Command::Version) => version::run(),
        Some(Command::Config(ConfigCommand::Check { file })) => config::check(file.as_deref()),
        Some(Command::Config(ConfigCommand::Show)) => config::show(),
        Some(Command::Doctor(args)) => doctor::run(&args),
    }
}

/// Writes to stdout; a closed pipe (`rtdaq config show | head`) is not an error.
pub fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}
