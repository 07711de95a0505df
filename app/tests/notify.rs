//! systemd notifications (issues #18, #29) read from a notify socket the test itself binds
//! (as systemd would, `NOTIFY_SOCKET`), with the watchdog armed (`WATCHDOG_USEC` = 1 s):
//!
//! - the default job sends `READY=1` (with a `STATUS=`), then `WATCHDOG=1` about every quarter
//!   second and the live line as `STATUS=` every second, and `STOPPING=1` after SIGTERM,
//!   in that order, and exits 0;
//! - with the `test-hooks` feature (`cargo test -p rtdaq --features test-hooks --test
//!   notify`, which `scripts/test.sh` runs), each kind of thread that moves the data is made
//!   to stall in turn (`RTDAQ_TEST_STALL=KIND@1500`: an RX I/O thread, an RX consumer, a
//!   generator, a record writer; a GPU stage's completions on the GPU host): the pings stop
//!   while the process still runs, and the log names that thread; a consumer that only
//!   falls behind (`RTDAQ_TEST_SLOW_BURST_US`) keeps them going;
//! - a default build has no test hook: its binary does not contain the variable's name, and
//!   with `RTDAQ_TEST_STALL` set the pings go on.
//!
//! systemd itself restarting the unit when the pings stop is tested under a real systemd in
//! the QEMU guest (`scripts/vm/systemd-unit.sh`).
//!
//! Carried to the GPU host as a binary (`scripts/gpu-host.sh`): `RTDAQ_BIN` names the rtdaq
//! binary to run and `RTDAQ_ROOT` the repository root (for `configs/`), as in `gpu.rs`.

use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One at a time: each runs the default job on 127.0.0.1:5000.
static SERIAL: Mutex<()> = Mutex::new(());

/// The rtdaq binary under test: `RTDAQ_BIN`, else the one cargo built with this test.
fn bin() -> std::path::PathBuf {
    std::env::var_os("RTDAQ_BIN").map_or_else(
        || std::path::PathBuf::from(env!("CARGO_BIN_EXE_rtdaq")),
        std::path::PathBuf::from,
    )
}

/// The repository root: `RTDAQ_ROOT`, else the one this test was built in.
#[cfg(feature = "test-hooks")]
fn root() -> std::path::PathBuf {
    std::env::var_os("RTDAQ_ROOT").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
        std::path::PathBuf::from,
    )
}

/// A bound notify socket and the messages it got, each with its arrival time.
struct Socket {
    sock: UnixDatagram,
    path: std::path::PathBuf,
    got: Vec<(Instant, String)>,
}

impl Socket {
    fn new(tag: &str) -> Self {
        let path = rtdaq_testbed::test_path(format!("rtdaq-notify-{tag}"));
        let _ = std::fs::remove_file(&path);
        let sock = UnixDatagram::bind(&path).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        Self {
            sock,
            path,
            got: Vec::new(),
        }
    }

    /// Reads messages for `d`.
    fn read_for(&mut self, d: Duration) {
        let end = Instant::now() + d;
        let mut buf = [0u8; 4096];
        while Instant::now() < end {
            if let Ok(n) = self.sock.recv(&mut buf) {
                let m = String::from_utf8_lossy(&buf[..n]).into_owned();
                self.got.push((Instant::now(), m));
            }
        }
    }

    fn count(&self, what: &str) -> usize {
        self.got.iter().filter(|(_, m)| m.contains(what)).count()
    }

    fn first(&self, what: &str) -> Option<usize> {
        self.got.iter().position(|(_, m)| m.contains(what))
    }

    /// When each `WATCHDOG=1` came.
    fn pings(&self) -> Vec<Instant> {
        self.got
            .iter()
            .filter(|(_, m)| m.contains("WATCHDOG=1"))
            .map(|(t, _)| *t)
            .collect()
    }

    /// When each `WATCHDOG=1` came, after the first message.
    fn pings_since_start(&self) -> Vec<Duration> {
        let start = self.got.first().map(|(t, _)| *t).unwrap();
        self.pings().into_iter().map(|t| t - start).collect()
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `rtdaq run` (the default job, or `args` before the duration) under the notify socket
/// with a 1 s watchdog; `stall`: `RTDAQ_TEST_STALL`'s value.
fn spawn(sock: &Socket, secs: u32, stall: Option<&str>, log: &std::path::Path) -> Child {
    let env: Vec<(&str, &str)> = stall.map(|v| ("RTDAQ_TEST_STALL", v)).into_iter().collect();
    spawn_with(sock, &[], secs, &env, log)
}

fn spawn_with(
    sock: &Socket,
    args: &[&str],
    secs: u32,
    env: &[(&str, &str)],
    log: &std::path::Path,
) -> Child {
    // systemd names the process the watchdog is for (WATCHDOG_PID): the shell's own pid,
    // which `exec` hands to rtdaq.
    let mut c = Command::new("sh");
    c.args([
        "-c",
        "d=$1; shift; WATCHDOG_PID=$$ exec \"$0\" run --duration \"$d\" \"$@\"",
    ])
    .arg(bin())
    .arg(secs.to_string())
    .args(args)
    .env("NOTIFY_SOCKET", &sock.path)
    .env("WATCHDOG_USEC", "1000000")
    .env("RUST_LOG", "info")
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(log).unwrap());
    c.envs(env.iter().copied());
    c.spawn().unwrap()
}

#[test]
fn ready_watchdog_status_then_stopping_on_sigterm() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut sock = Socket::new("ok");
    let log = sock.path.with_extension("log");
    let mut child = spawn(&sock, 30, None, &log);
    sock.read_for(Duration::from_secs(4));
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    sock.read_for(Duration::from_millis(1500));
    let status = child.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let all: Vec<&str> = sock.got.iter().map(|(_, m)| m.as_str()).collect();
    assert_eq!(status.code(), Some(0), "{text}");
    let ready = sock
        .first("READY=1")
        .unwrap_or_else(|| panic!("no READY=1: {all:?}"));
    assert!(
        all[ready].contains("STATUS=1 RX, 1 TX queues running"),
        "{all:?}"
    );
    let pings = sock.count("WATCHDOG=1");
    assert!(pings >= 10, "{pings} pings in ~4 s at 0.25 s: {all:?}");
    let first_ping = sock.first("WATCHDOG=1").unwrap();
    assert!(ready < first_ping, "READY before the pings: {all:?}");
    assert!(
        sock.got
            .iter()
            .any(|(_, m)| m.contains("STATUS=[") && m.contains("rx ")),
        "the live line as STATUS=: {all:?}"
    );
    let stopping = sock
        .first("STOPPING=1")
        .unwrap_or_else(|| panic!("no STOPPING=1: {all:?}"));
    assert!(stopping > first_ping, "{all:?}");
    // Pings arrive about every quarter second (the watchdog's 1 s / 4); systemd restarts
    // the service only when a gap reaches the whole second.
    let times = sock.pings();
    let longest = times.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(
        longest < Duration::from_millis(1000),
        "a gap of {longest:?} between pings"
    );
    let _ = std::fs::remove_file(&log);
}

/// Runs `args` with `RTDAQ_TEST_STALL=KIND@1500` and checks that the pings stop about a
/// second after the stall while the process runs, and that the log names `who`.
#[cfg(feature = "test-hooks")]
fn a_stall_stops_the_pings(kind: &str, args: &[&str], who: &str) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut sock = Socket::new(kind);
    let log = sock.path.with_extension("log");
    let stall = format!("{kind}@1500");
    let mut child = spawn_with(&sock, args, 30, &[("RTDAQ_TEST_STALL", &stall)], &log);
    sock.read_for(Duration::from_secs(5));
    let still_running = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let all: Vec<&str> = sock.got.iter().map(|(_, m)| m.as_str()).collect();
    assert!(still_running, "the process still runs: {text}");
    assert!(
        text.contains(&format!("a {} thread stops 1500 ms", kind_name(kind))),
        "the hook armed: {text}"
    );
    let pings = sock.pings_since_start();
    assert!(pings.len() >= 2, "pings before the stall: {all:?}");
    let last = *pings.last().unwrap();
    // The stall starts 1.5 s in; the pings stop once the thread made no progress for 1 s.
    assert!(
        last < Duration::from_millis(3200),
        "last ping {last:?} after READY (the stall began at 1.5 s): {pings:?}\n{text}"
    );
    let line = text
        .lines()
        .find(|l| l.contains("has made no progress for") && l.contains("WATCHDOG=1 pings stop"))
        .unwrap_or_else(|| panic!("no watchdog line: {text}"));
    assert!(line.contains(who), "the line names {who:?}: {line}");
}

#[cfg(feature = "test-hooks")]
fn kind_name(kind: &str) -> &'static str {
    match kind {
        "io" => "Io",
        "consumer" => "Consumer",
        "generator" => "Generator",
        "writer" => "Writer",
        _ => "Gpu",
    }
}

/// A consumer that falls behind (100 ms more per burst: at most 640 packets/s against the
/// job's 89 000; the socket engine leaves the rest in the socket, counted as `kernel` drops)
/// works through its backlog and makes progress: the pings go on. Each burst is a turn of its
/// stall clock; a turn that drained the whole ring (16 bursts of 64 packets, 1.6 s) looked
/// like a stall.
#[test]
#[cfg(feature = "test-hooks")]
fn a_slow_consumer_keeps_the_pings() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut sock = Socket::new("slow");
    let log = sock.path.with_extension("log");
    let env = [("RTDAQ_TEST_SLOW_BURST_US", "100000")];
    let mut child = spawn_with(&sock, &[], 30, &env, &log);
    sock.read_for(Duration::from_secs(6));
    let still_running = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(still_running, "the process still runs: {text}");
    assert!(
        text.contains("RTDAQ_TEST_SLOW_BURST_US=100000"),
        "the hook armed: {text}"
    );
    assert!(
        !text.contains("has made no progress"),
        "a working consumer is not stalled: {text}"
    );
    let pings = sock.pings();
    assert!(pings.len() >= 8, "pings for 6 s: {}", pings.len());
    let gap = pings.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(
        gap < Duration::from_millis(1000),
        "longest gap between pings {gap:?} (every 0.25 s, WatchdogSec 1 s)"
    );
    let last = *pings.last().unwrap();
    assert!(
        sock.got.last().unwrap().0 - last < Duration::from_millis(900),
        "the pings went on to the end"
    );
}

#[test]
#[cfg(feature = "test-hooks")]
fn a_stalled_rx_io_thread_stops_the_pings() {
    a_stall_stops_the_pings("io", &[], "lo_udp.rx0 has made");
}

#[test]
#[cfg(feature = "test-hooks")]
fn a_stalled_consumer_stops_the_pings() {
    a_stall_stops_the_pings("consumer", &[], "lo_udp.rx0 consumer has made");
}

#[test]
#[cfg(feature = "test-hooks")]
fn a_stalled_generator_stops_the_pings() {
    a_stall_stops_the_pings("generator", &[], "lo_udp.tx0 has made");
}

#[test]
#[cfg(feature = "test-hooks")]
fn a_stalled_record_writer_stops_the_pings() {
    let dir = rtdaq_testbed::test_path("rec");
    let cfg = root().join("configs/host-udp-record.toml");
    let cfg = cfg.to_str().unwrap();
    a_stall_stops_the_pings(
        "writer",
        &["--config", cfg, "--output-dir", dir.to_str().unwrap()],
        " writer has made",
    );
}

/// A GPU that holds its batches and completes none stops the pings, while the stage's
/// thread still turns (GPU host only).
#[test]
#[cfg(feature = "test-hooks")]
fn a_gpu_stage_without_completions_stops_the_pings() {
    if !cfg!(feature = "gpu") {
        rtdaq_testbed::require::skip_gpu("a binary without --features gpu");
        return;
    }
    if std::process::Command::new("nvidia-smi").output().is_err() {
        rtdaq_testbed::require::skip_gpu("no CUDA driver (nvidia-smi)");
        return;
    }
    let cfg = root().join("configs/host-loopback-udp-gpu.toml");
    let cfg = cfg.to_str().unwrap();
    a_stall_stops_the_pings(
        "gpu",
        &["--config", cfg],
        "lo_udp.rx0 GPU stage (completions) has made",
    );
}

/// A default build carries no test hook: no hook variable's name is in the binary, and with
/// it set nothing stalls (the pings go on for the whole run).
#[test]
#[cfg(not(feature = "test-hooks"))]
fn a_default_build_has_no_test_hook() {
    let bin = std::fs::read(bin()).unwrap();
    // Every hook's variable (RTDAQ_TEST_STALL, RTDAQ_TEST_SLOW_BURST_US) starts so.
    let name = b"RTDAQ_TEST_";
    assert!(
        !bin.windows(name.len()).any(|w| w == name),
        "the default binary contains a test hook's variable (RTDAQ_TEST_...)"
    );
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut sock = Socket::new("nohook");
    let log = sock.path.with_extension("log");
    let mut child = spawn(&sock, 4, Some("io@500"), &log);
    sock.read_for(Duration::from_secs(3));
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let pings = sock.pings_since_start();
    assert!(
        pings
            .last()
            .is_some_and(|l| *l > Duration::from_millis(2000)),
        "pings go on past 2 s: {pings:?}\n{text}"
    );
    assert!(!text.contains("test hook"), "{text}");
}
