//! systemd notifications (issue #18) read from a notify socket the test itself binds (as
//! systemd would, `NOTIFY_SOCKET`), with the watchdog armed (`WATCHDOG_USEC` = 1 s):
//!
//! - the default job sends `READY=1` (with a `STATUS=`), then `WATCHDOG=1` about every half
//!   second and the live line as `STATUS=` every second, and `STOPPING=1` after SIGTERM,
//!   in that order, and exits 0;
//! - with one queue thread made to stall (`RTDAQ_TEST_STALL_AFTER_MS`, a test hook) the
//!   pings stop while the process still runs, and the log names the thread.

use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One at a time: each runs the default job on 127.0.0.1:5000.
static SERIAL: Mutex<()> = Mutex::new(());

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
}

impl Drop for Socket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn spawn(sock: &Socket, secs: u32, stall_ms: Option<u64>, log: &std::path::Path) -> Child {
    // systemd names the process the watchdog is for (WATCHDOG_PID): the shell's own pid,
    // which `exec` hands to rtdaq.
    let mut c = Command::new("sh");
    c.args(["-c", "WATCHDOG_PID=$$ exec \"$0\" run --duration \"$1\""])
        .arg(env!("CARGO_BIN_EXE_rtdaq"))
        .arg(secs.to_string())
        .env("NOTIFY_SOCKET", &sock.path)
        .env("WATCHDOG_USEC", "1000000")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    if let Some(ms) = stall_ms {
        c.env("RTDAQ_TEST_STALL_AFTER_MS", ms.to_string());
    }
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
    assert!(pings >= 5, "{pings} pings in ~4 s at 0.5 s: {all:?}");
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
    // Pings arrive about every half second (the watchdog's 1 s / 2).
    let times: Vec<Instant> = sock
        .got
        .iter()
        .filter(|(_, m)| m.contains("WATCHDOG=1"))
        .map(|(t, _)| *t)
        .collect();
    let longest = times.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(
        longest < Duration::from_millis(900),
        "a gap of {longest:?} between pings"
    );
    let _ = std::fs::remove_file(&log);
}

#[test]
fn a_stalled_queue_thread_stops_the_pings() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut sock = Socket::new("stall");
    let log = sock.path.with_extension("log");
    let mut child = spawn(&sock, 30, Some(1500), &log);
    sock.read_for(Duration::from_secs(5));
    let still_running = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let all: Vec<&str> = sock.got.iter().map(|(_, m)| m.as_str()).collect();
    assert!(still_running, "the process still runs: {text}");
    let start = sock.got.first().map(|(t, _)| *t).unwrap();
    let pings: Vec<Duration> = sock
        .got
        .iter()
        .filter(|(_, m)| m.contains("WATCHDOG=1"))
        .map(|(t, _)| *t - start)
        .collect();
    assert!(pings.len() >= 2, "pings before the stall: {all:?}");
    let last = *pings.last().unwrap();
    // The stall starts 1.5 s in; the pings stop once the thread has not turned for 1 s.
    assert!(
        last < Duration::from_millis(3200),
        "last ping {last:?} after READY (the stall began at 1.5 s): {pings:?}"
    );
    assert!(
        text.contains("has not turned for") && text.contains("WATCHDOG=1 pings stop"),
        "{text}"
    );
    let _ = std::fs::remove_file(&log);
}
