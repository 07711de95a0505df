//! # rtdaq: the appliance binary
//!
//! One sealed binary = one packet engine + one board platform (cargo features, checked by
//! `build.rs`) + one deployment config (validated and embedded at build time, identified by its
//! SHA-256). This crate is wiring only: the command line, the embedded config, and the calls
//! into the library crates.
//!
//! Exit codes: 0 ok, 2 configuration or environment error (1 is reserved for "the run saw
//! loss or errors beyond tolerance").
#![forbid(unsafe_code)]

mod board;
mod cli;
mod commands;
mod embedded;

use clap::Parser;
use std::process::ExitCode;

/// Counts allocations of the queue threads after their set-up (reported as
/// `io_thread_allocations`; must stay 0).
#[global_allocator]
static ALLOC: rtdaq_platform::alloc_audit::AuditAlloc = rtdaq_platform::alloc_audit::AuditAlloc;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .format_timestamp_millis()
        .init();
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(commands::EXIT_CONFIG)
        }
    }
}
