//! Test hooks (feature `test-hooks`): faults the tests inject into a running appliance.
//! Never part of a deployment: `app/build.rs` refuses the feature in a release build, so a
//! sealed binary has no code that reads these variables (`app/tests/hygiene.rs` checks that
//! no other source file names them, `app/tests/cli.rs` that a default build's binary does
//! not contain them).
//!
//! `RTDAQ_TEST_STALL=KIND@MS`, read when the run starts: `MS` milliseconds into the run,
//! the first thread of `KIND` to turn stops making progress, as a thread stuck in the
//! kernel, a driver, a full disk or a GPU that never completes would:
//!
//! | `KIND` | what stops |
//! |---|---|
//! | `io` | an RX I/O thread (direct mode: the thread that also consumes) sleeps an hour |
//! | `consumer` | an indirect RX queue's consumer thread (with or without a GPU stage) sleeps |
//! | `generator` | a TX generator (or replay) thread sleeps |
//! | `writer` | a record sink's writer thread sleeps |
//! | `gpu` | a GPU stage stops taking its completions: its batches stay in flight while its thread still turns |
//!
//! The watchdog ([`crate::observe::notify`]) must then stop `WATCHDOG=1` naming that thread.
//!
//! `RTDAQ_TEST_SLOW_BURST_US=N`: every indirect RX consumer (with or without a GPU stage)
//! waits `N` µs more after each burst, as a stage waiting on a slow device would. Such a
//! consumer falls behind and works through a backlog, but it makes progress: the watchdog
//! must keep pinging.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};

pub use crate::thread_kind::ThreadKind as Kind;

fn parse(s: &str) -> Option<Kind> {
    Some(match s {
        "io" => Kind::Io,
        "consumer" => Kind::Consumer,
        "generator" => Kind::Generator,
        "writer" => Kind::Writer,
        "gpu" => Kind::Gpu,
        _ => return None,
    })
}

/// Monotonic ns from which the stall applies (0: off).
static STALL_AT_NS: AtomicU64 = AtomicU64::new(0);
/// The [`Kind`] it applies to.
static STALL_KIND: AtomicU8 = AtomicU8::new(0);
/// The GPU kind, once taken: the stage that took it stays frozen.
static GPU_FROZEN: AtomicU8 = AtomicU8::new(0);
/// Extra wait after each consumed burst (ns; 0: off).
static SLOW_BURST_NS: AtomicU64 = AtomicU64::new(0);

/// Reads `RTDAQ_TEST_STALL` for a run that started at `start_ns` (monotonic). A value that
/// does not parse is logged and ignored.
pub fn arm(start_ns: u64) {
    if let Ok(v) = std::env::var("RTDAQ_TEST_SLOW_BURST_US") {
        match v.parse::<u64>() {
            Ok(us) => {
                log::warn!("test hook RTDAQ_TEST_SLOW_BURST_US={us}: every RX consumer waits {us} us more per burst");
                SLOW_BURST_NS.store(us * 1000, Relaxed);
            }
            Err(_) => log::error!(
                "test hook RTDAQ_TEST_SLOW_BURST_US={v}: not a number of microseconds; ignored"
            ),
        }
    }
    let Ok(v) = std::env::var("RTDAQ_TEST_STALL") else {
        return;
    };
    let parsed = v
        .split_once('@')
        .and_then(|(k, ms)| Some((parse(k)?, ms.parse::<u64>().ok()?)));
    let Some((kind, ms)) = parsed else {
        log::error!("test hook RTDAQ_TEST_STALL={v}: not KIND@MS (io, consumer, generator, writer, gpu); ignored");
        return;
    };
    log::warn!("test hook RTDAQ_TEST_STALL={v}: a {kind:?} thread stops {ms} ms into the run");
    STALL_KIND.store(kind as u8, Relaxed);
    STALL_AT_NS.store(start_ns + ms * 1_000_000, Relaxed);
}

/// Takes the armed stall when it is for `kind` and due at `now_ns` (the first caller only).
fn take(kind: Kind, now_ns: u64) -> bool {
    let at = STALL_AT_NS.load(Relaxed);
    at != 0
        && now_ns >= at
        && STALL_KIND.load(Relaxed) == kind as u8
        && STALL_AT_NS
            .compare_exchange(at, 0, Relaxed, Relaxed)
            .is_ok()
}

/// Called by a thread of `kind` as it stores that it is alive: sleeps an hour when the
/// stall is armed for it and due.
pub fn maybe_stall(kind: Kind, now_ns: u64) {
    if kind != Kind::Gpu && take(kind, now_ns) {
        log::warn!("test hook: this {kind:?} thread stalls now");
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

/// True once the GPU stall was taken: the stage takes no more completions.
pub fn gpu_frozen(now_ns: u64) -> bool {
    if GPU_FROZEN.load(Relaxed) != 0 {
        return true;
    }
    if take(Kind::Gpu, now_ns) {
        log::warn!("test hook: a GPU stage takes no more completions");
        GPU_FROZEN.store(1, Relaxed);
        return true;
    }
    false
}

/// Called by an RX consumer after each burst: waits `RTDAQ_TEST_SLOW_BURST_US` when set
/// (sleeping, so that the threads it shares a core with, e.g. the generator, still run).
#[inline]
pub fn slow_burst() {
    let ns = SLOW_BURST_NS.load(Relaxed);
    if ns > 0 {
        std::thread::sleep(std::time::Duration::from_nanos(ns));
    }
}
