//! `rtdaq version`.

use super::out;
use crate::{board, embedded};
use std::process::ExitCode;

pub fn run() -> anyhow::Result<ExitCode> {
    out(&format!(
        "rtdaq {version}\n\
         commit:   {commit}\n\
         engine:   {engine}\n\
         platform: {platform}\n\
         features: {features}\n\
         config:   {name} ({file})\n\
         config sha256: {sha}\n\
         target:   {arch}-{os}\n",
        version = env!("CARGO_PKG_VERSION"),
        commit = embedded::GIT_COMMIT,
        engine = embedded::ENGINE,
        platform = board::summary(),
        features = embedded::FEATURES.join(", "),
        name = embedded::CONFIG_NAME,
        file = embedded::CONFIG_FILE,
        sha = embedded::CONFIG_SHA256,
        arch = std::env::consts::ARCH,
        os = std::env::consts::OS,
    ));
    Ok(ExitCode::SUCCESS)
}
