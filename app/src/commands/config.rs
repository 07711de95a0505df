//! `rtdaq config check` and `rtdaq config show`.

use super::EXIT_CONFIG;
use crate::embedded;
use std::path::Path;
use std::process::ExitCode;

/// Validates `file` (or the embedded config) and prints its summary.
pub fn check(file: Option<&Path>) -> anyhow::Result<ExitCode> {
    let (label, loaded) = match file {
        Some(f) => (f.display().to_string(), rtdaq_config::load_file(f)),
        None => (
            format!("embedded config {} ({})", embedded::CONFIG_NAME, embedded::CONFIG_FILE),
            rtdaq_config::load_str(embedded::CONFIG_TOML),
        ),
    };
    let config = match loaded {
        Ok(c) => c,
        Err(errors) => {
            eprintln!("{label}: invalid ({} error{}):", errors.0.len(), plural(errors.0.len()));
            for e in &errors.0 {
                eprintln!("  {e}");
            }
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    println!("{label}: valid");
    if config.engine_kind().as_str() != embedded::ENGINE || config.platform().as_str() != embedded::PLATFORM {
        println!(
            "note: this binary runs engine {} on platform {}; this config needs a binary built with \
             `--no-default-features --features engine-{},platform-{}` (RTDAQ_CONFIG={})",
            embedded::ENGINE,
            embedded::PLATFORM,
            config.engine_kind().as_str(),
            config.platform().as_str(),
            file.map(|f| f.display().to_string()).unwrap_or_default(),
        );
    }
    print!("{}", config.summary());
    Ok(ExitCode::SUCCESS)
}

/// Prints the embedded config verbatim.
pub fn show() -> anyhow::Result<ExitCode> {
    print!("{}", embedded::CONFIG_TOML);
    Ok(ExitCode::SUCCESS)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
