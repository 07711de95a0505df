//! A queue thread that panics fails the run: the run stops, the results name the thread and
//! its panic, the report says so (`failed_threads`, a `FAILED:` line) and its exit code is 1,
//! whatever the counts. Each test runs the default loopback deployment over the real socket
//! engine, wrapped (`common`) so that one chosen thread panics after a number of packets: the
//! RX I/O thread (in `poll`), the consumer (reading a packet of a burst) or the generator (in
//! `send`).

mod common;

use common::*;
use rtdaq_runtime::{outcome, run, RunOptions};
use std::sync::atomic::Ordering::Relaxed;

/// Runs the deployment with a panic injected at `site`; returns the results' failures, the
/// report's exit code and its text.
fn run_with_panic_in(site: u8) -> (Vec<(String, String)>, u8, String, f64) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    SEEN.store(0, Relaxed);
    PANIC_IN.store(site, Relaxed);
    let config = config(20);
    let results = run::<Faulty>(config, &RunOptions::default()).expect("the run starts");
    PANIC_IN.store(0, Relaxed);
    let report = outcome::build(config, &identity(), &results);
    let failed = results
        .failed_threads
        .iter()
        .map(|f| (f.thread.clone(), f.panic.clone()))
        .collect();
    (
        failed,
        report.exit_code,
        report.to_string(),
        results.elapsed_s,
    )
}

#[test]
fn a_panicking_rx_io_thread_fails_and_stops_the_run() {
    let (failed, code, text, elapsed) = run_with_panic_in(IO);
    assert_eq!(
        failed,
        vec![(
            "lo_udp.rx0 I/O thread".to_string(),
            "injected fault in the test's RX poll".to_string()
        )],
        "{text}"
    );
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("FAILED: queue thread lo_udp.rx0 I/O thread panicked: injected fault"),
        "{text}"
    );
    assert!(text.contains(": FAIL · exit code 1"), "{text}");
    // The run stopped at the crash, not at its 20 s duration.
    assert!(elapsed < 10.0, "ran {elapsed} s after the crash");
}

#[test]
fn a_panicking_consumer_fails_and_stops_the_run() {
    let (failed, code, text, elapsed) = run_with_panic_in(CONSUMER);
    assert_eq!(failed.len(), 1, "{text}");
    assert_eq!(failed[0].0, "lo_udp.rx0 consumer", "{text}");
    assert_eq!(failed[0].1, "injected fault in the test's burst read");
    assert_eq!(code, 1, "{text}");
    assert!(elapsed < 10.0, "ran {elapsed} s after the crash");
}

#[test]
fn a_panicking_generator_fails_the_run() {
    let (failed, code, text, elapsed) = run_with_panic_in(GENERATOR);
    assert_eq!(
        failed,
        vec![(
            "lo_udp.tx0 generator".to_string(),
            "injected fault in the test's TX send".to_string()
        )],
        "{text}"
    );
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("FAILED: queue thread lo_udp.tx0 generator panicked"),
        "{text}"
    );
    assert!(elapsed < 10.0, "ran {elapsed} s after the crash");
}

#[test]
fn without_a_panic_the_run_passes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    PANIC_IN.store(0, Relaxed);
    let config = config(1);
    let results = run::<Faulty>(config, &RunOptions::default()).expect("the run starts");
    let report = outcome::build(config, &identity(), &results);
    assert!(results.failed_threads.is_empty());
    assert_eq!(report.exit_code, 0, "{report}");
}
