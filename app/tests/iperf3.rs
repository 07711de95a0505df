//! Interop with a real peer: an iperf3 UDP client (`-l 1400 -b 200M -t 2 -J`) sends into the
//! receive-only config (`configs/host-udp-rx-only.toml`, address and port replaced), and the
//! datagrams rtdaq received must equal iperf3's sent datagrams minus the drops rtdaq counted.
//!
//! `scripts/iperf3-interop.sh` does the work: two network namespaces joined by a veth pair
//! (169.254.77.1/30, 169.254.77.2/30), `iperf3 -s` and rtdaq in the server namespace, and an
//! nftables rule there that rewrites the destination port of iperf3's 1400-byte data datagrams
//! to rtdaq's port (the TCP control connection and the 4-byte UDP handshake still reach the
//! iperf3 server). The script checks the numbers itself and exits non-zero on a mismatch; this
//! test runs it, then checks the two JSON documents it leaves behind on its own.
//!
//! Needs root, `iperf3`, `nft` and `jq` (Debian: `iperf3 nftables jq`). Without root, iperf3 or
//! nft each test fails in `scripts/test.sh` (`RTDAQ_TEST_REQUIRE=1`) and skips, recorded, elsewhere
//! (`rtdaq_testbed::require`); a missing `jq` is always a failure.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One run at a time: each one pins rtdaq's threads and sends 200 Mb/s.
static SERIAL: Mutex<()> = Mutex::new(());

/// The whole script run (set-up, 2 s of iperf3, rtdaq's 4 s run, tear-down) takes about 5 s.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn script() -> PathBuf {
    root().join("scripts").join("iperf3-interop.sh")
}

/// `PATH` plus the sbin directories (`nft` lives in /usr/sbin, often missing from a user PATH).
fn search_path() -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    format!("{path}:/usr/local/sbin:/usr/sbin:/sbin")
}

fn have_tool(name: &str) -> bool {
    search_path()
        .split(':')
        .filter(|d| !d.is_empty())
        .any(|d| Path::new(d).join(name).is_file())
}

/// Why this host cannot run the interop test, if it cannot.
fn skip_reason() -> Option<String> {
    if !rtdaq_testbed::is_root() {
        return Some("not running as root (network namespaces and nftables need it)".into());
    }
    let missing: Vec<&str> = ["iperf3", "nft"]
        .into_iter()
        .filter(|t| !have_tool(t))
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "missing {} (Debian: apt-get install iperf3 nftables jq)",
            missing.join(", ")
        )
    })
}

/// The test cannot run here: a failure in `scripts/test.sh` (`rtdaq_testbed::require`), a
/// recorded skip elsewhere.
fn skipped(_test: &str, reason: &str) {
    rtdaq_testbed::require::skip(reason);
}

/// Tears the run's namespaces down even when the script was killed or the test panicked
/// (the script's own trap does it on every normal or signalled exit; this is idempotent).
struct Teardown {
    suffix: String,
}

impl Drop for Teardown {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .args(["teardown", "--suffix", &self.suffix])
            .env("PATH", search_path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// What one run left behind.
struct Interop {
    /// iperf3's client JSON.
    iperf3: Value,
    /// rtdaq's JSON report.
    rtdaq: Value,
    /// The script's stdout and stderr (the numbers), for messages.
    log: String,
}

fn send_signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

/// Runs the script with `args`; panics with its output unless it exits 0.
fn run_interop(name: &str, args: &[&str]) -> Interop {
    let suffix = format!("{}-{name}", std::process::id());
    let _teardown = Teardown {
        suffix: suffix.clone(),
    };
    let out = rtdaq_testbed::test_path(format!("rtdaq-iperf3-{suffix}"));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let log_path = out.join("script.log");
    let log_file = std::fs::File::create(&log_path).unwrap();
    let mut child = Command::new("bash")
        .arg(script())
        .arg("run")
        .args(["--rtdaq", env!("CARGO_BIN_EXE_rtdaq")])
        .args(["--out", out.to_str().unwrap()])
        .args(["--suffix", &suffix])
        .args(args)
        .env("PATH", search_path())
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file)
        .spawn()
        .expect("run scripts/iperf3-interop.sh");
    let t0 = Instant::now();
    let status: ExitStatus = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > SCRIPT_TIMEOUT {
            // TERM lets the script's trap stop what it started and remove the namespaces.
            send_signal(child.id(), "-TERM");
            std::thread::sleep(Duration::from_secs(5));
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            panic!("iperf3-interop.sh did not finish within {SCRIPT_TIMEOUT:?}:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    eprintln!("{log}");
    assert!(
        status.success(),
        "iperf3-interop.sh {args:?} failed ({status}); exit 2 = missing tool or usage:\n{log}"
    );
    let json = |f: &str| -> Value {
        let text = std::fs::read_to_string(out.join(f))
            .unwrap_or_else(|e| panic!("{f} not written ({e}):\n{log}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{f}: {e}"))
    };
    let (iperf3, rtdaq) = (json("iperf3.json"), json("rtdaq.json"));
    let _ = std::fs::remove_dir_all(&out);
    Interop { iperf3, rtdaq, log }
}

fn u(v: &Value, ptr: &str) -> u64 {
    v.pointer(ptr)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{ptr} missing"))
}

/// The datagrams iperf3 reports as sent: `end.sum_sent.packets` (iperf3 ≥ 3.10, Debian 12
/// ships 3.12), else `end.sum.packets`, which is the sender's count on the client.
fn sent(iperf3: &Value) -> u64 {
    iperf3
        .pointer("/end/sum_sent/packets")
        .or_else(|| iperf3.pointer("/end/sum/packets"))
        .and_then(Value::as_u64)
        .expect("iperf3 JSON has no end.sum_sent.packets / end.sum.packets")
}

/// (received, drops summed over every reason, kernel drops) from rtdaq's report.
fn received_and_drops(rtdaq: &Value) -> (u64, u64, u64) {
    let t = &rtdaq["rx"]["totals"];
    let drops: u64 = t["drops"]
        .as_object()
        .expect("rx.totals.drops is an object by reason")
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    (u(t, "/packets"), drops, u(t, "/drops/kernel"))
}

/// The checks the acceptance item asks for, independent of the script's own.
fn assert_accounted(r: &Interop) -> (u64, u64, u64, u64) {
    let sent = sent(&r.iperf3);
    let (received, drops, kernel) = received_and_drops(&r.rtdaq);
    let log = &r.log;
    assert!(sent > 0, "iperf3 sent nothing:\n{log}");
    assert_eq!(
        received + drops,
        sent,
        "rtdaq received {received} + counted {drops} drops != iperf3 sent {sent}:\n{log}"
    );
    assert_eq!(u(&r.rtdaq, "/rx/totals/drops_total"), drops, "{log}");
    // iperf3 payloads carry no rtdaq sequence header: every one is counted malformed (not
    // lost), and nothing else reached the socket.
    assert_eq!(u(&r.rtdaq, "/rx/totals/malformed"), received, "{log}");
    assert_eq!(u(&r.rtdaq, "/rx/totals/bytes"), received * 1400, "{log}");
    (sent, received, drops, kernel)
}

#[test]
fn iperf3_udp_client_every_datagram_received_or_counted_dropped() {
    let test = "iperf3_udp_client_every_datagram_received_or_counted_dropped";
    if let Some(why) = skip_reason() {
        return skipped(test, &why);
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The shipped 16 MiB socket buffer: normally no drop at all.
    let r = run_interop("deep", &[]);
    let (sent, received, drops, _) = assert_accounted(&r);
    eprintln!("iperf3 sent {sent}, rtdaq received {received}, drops {drops}");
}

#[test]
fn iperf3_udp_client_kernel_drops_are_counted_exactly() {
    let test = "iperf3_udp_client_kernel_drops_are_counted_exactly";
    if let Some(why) = skip_reason() {
        return skipped(test, &why);
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A socket buffer of about one datagram and rtdaq stopped (SIGSTOP) for 0.3 s while
    // iperf3 sends: thousands of datagrams overflow the socket, and every one the kernel drops
    // must come back as rtdaq's `drops.kernel` (SO_RXQ_OVFL / SO_MEMINFO).
    let r = run_interop(
        "shallow",
        &["--rcvbuf", "1024", "--pause-rtdaq", "0.3", "--expect-drops"],
    );
    let (sent, received, drops, kernel) = assert_accounted(&r);
    assert!(
        kernel > 0,
        "a ~1-datagram socket buffer dropped nothing:\n{}",
        r.log
    );
    assert_eq!(drops, kernel, "only the kernel drops here:\n{}", r.log);
    eprintln!("iperf3 sent {sent}, rtdaq received {received}, drops {drops} (kernel {kernel})");
}
