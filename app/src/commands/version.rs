//! `rtdaq version`.

use crate::embedded;
use std::process::ExitCode;

pub fn run() -> anyhow::Result<ExitCode> {
    println!("rtdaq {}", env!("CARGO_PKG_VERSION"));
    println!("commit:   {}", embedded::GIT_COMMIT);
    println!("engine:   {}", embedded::ENGINE);
    println!("platform: {}", embedded::PLATFORM);
    println!("features: {}", embedded::FEATURES.join(", "));
    println!("config:   {} ({})", embedded::CONFIG_NAME, embedded::CONFIG_FILE);
    println!("config sha256: {}", embedded::CONFIG_SHA256);
    println!(
        "target:   {}-{}",
        std::env::consts::ARCH,
        std::env::consts::OS
    );
    Ok(ExitCode::SUCCESS)
}
