//! `rtdaq doctor`: read-only checks of this host (or a tree below `--root`) against the
//! deployment config; the checks live in `rtdaq-doctor`.

use super::{out, EXIT_CONFIG};
use crate::cli::DoctorArgs;
use crate::embedded;
use std::process::ExitCode;

/// Runs every check and prints the findings (text or `--json`).
pub fn run(args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    if !args.root.is_dir() {
        eprintln!(
            "rtdaq doctor: --root {}: not a directory",
            args.root.display()
        );
        return Ok(ExitCode::from(EXIT_CONFIG));
    }
    let (label, loaded) = match &args.config {
        Some(f) => (f.display().to_string(), rtdaq_config::load_file(f)),
        None => (
            format!("embedded config {}", embedded::CONFIG_FILE),
            rtdaq_config::load_str(embedded::CONFIG_TOML),
        ),
    };
    let config = match loaded {
        Ok(c) => c,
        Err(errors) => {
            eprintln!("{label}: invalid:");
            for e in &errors.0 {
                eprintln!("  {e}");
            }
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    let findings = rtdaq_doctor::run(&config, &rtdaq_doctor::Options::new(&args.root));
    if args.json {
        out(&rtdaq_doctor::to_json(&findings));
    } else {
        let mut text = format!(
            "rtdaq doctor: {} below {} against {label} (platform {}, engine {})\n",
            if args.root == std::path::Path::new("/") {
                "this host"
            } else {
                "the tree"
            },
            args.root.display(),
            config.platform(),
            config.engine_kind().as_str(),
        );
        text.push_str(&rtdaq_doctor::to_text(&findings));
        out(&text);
    }
    Ok(ExitCode::from(rtdaq_doctor::exit_code(&findings)))
}
