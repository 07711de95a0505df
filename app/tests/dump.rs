//! Triggered dumps (issue #32) end to end: `configs/host-udp-dump.toml` (its generator at
//! 0.2 Gb/s into one RX queue that keeps a RAM history) with a pcap recorder added to the
//! same queue, so that every dump can be checked against a continuous recording of the same
//! run:
//!
//! - `POST /trigger?last_ms=400` on the metrics endpoint while receiving: the answer is the
//!   dump's index; the dump's pcap holds exactly the recording's packets whose receive time
//!   lies in the window it names (same times, same payloads, same order), and the window is
//!   400 ms long;
//! - `POST /trigger?start_ns=A&end_ns=B` for a window that ends 300 ms later: answered once
//!   it has passed, exactly the recording's packets of `A..=B`;
//! - a datagram `start_ns=A&end_ns=B` to the dump's `udp_trigger` for a window in the past:
//!   exactly the recording's packets of `A..=B`;
//! - SIGUSR1: the last `signal_window_ms` (300 ms), exactly the recording's packets of it;
//! - a bad query is `400`, an unknown dump `404`, a GET `405`; `/metrics` counts the
//!   packets the history kept; the run's report lists the four dumps, each one's index on
//!   disk is what the report says, and tshark reads a dump file as pcap.
//!
//! Needs `target/engines/rtdaq-socket` and tshark; without them the test fails in
//! `scripts/test.sh` (`RTDAQ_TEST_REQUIRE=1`) and skips, recorded, elsewhere.

mod e2e;

use e2e::{bin, root, show, u};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn free_port(udp: bool) -> u16 {
    if udp {
        UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    } else {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }
}

fn skipped() -> bool {
    let why = if !root().join("target/engines/rtdaq-socket").exists() {
        "no target/engines/rtdaq-socket (scripts/build-engines.sh)"
    } else if Command::new("tshark").arg("-v").output().is_err() {
        "no tshark (Debian: apt-get install tshark)"
    } else {
        return false;
    };
    rtdaq_testbed::require::skip(why);
    true
}

/// The shipped dump config on free ports, 0.2 Gb/s, a pcap recorder on the same queue,
/// its files under `dir`.
fn config(dir: &Path, (rx, metrics, trigger): (u16, u16, u16)) -> PathBuf {
    let mut text = std::fs::read_to_string(root().join("configs/host-udp-dump.toml")).unwrap();
    let edits = [
        (
            "address = \"udp://127.0.0.1:5000\"",
            format!("address = \"udp://127.0.0.1:{rx}\""),
        ),
        (
            "destination = \"udp://127.0.0.1:5000\"",
            format!("destination = \"udp://127.0.0.1:{rx}\""),
        ),
        (
            "metrics = \"127.0.0.1:9464\"",
            format!("metrics = \"127.0.0.1:{metrics}\""),
        ),
        (
            "udp_trigger = \"127.0.0.1:7300\"",
            format!("udp_trigger = \"127.0.0.1:{trigger}\""),
        ),
        ("signal_window_ms = 1000", "signal_window_ms = 300".into()),
        ("rate_gbps = 1.0 ", "rate_gbps = 0.2 ".into()),
        (
            "dump = \"candidates\" ",
            "dump = \"candidates\"\nrecord = [\"all\"] ".into(),
        ),
        (
            "\n[[dumps]]\n",
            format!(
                "\n[[recorders]]\nname = \"all\"\nformat = \"pcap\"\ndirectory = \"{}\"\n\n[[dumps]]\n",
                dir.join("rec").display()
            ),
        ),
        (
            "directory = \"dumps\"",
            format!("directory = \"{}\"", dir.join("dumps").display()),
        ),
    ];
    for (from, to) in &edits {
        assert!(text.contains(from), "the config has no {from:?}");
        text = text.replacen(from, to, 1);
    }
    let p = dir.join("dump.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// `METHOD path` to 127.0.0.1:`port`: status and body.
fn http(port: u16, method: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// `(receive time ns, UDP payload)` of every record of a nanosecond pcap of Ethernet/IPv4/
/// UDP frames rtdaq wrote.
fn records(file: &Path) -> Vec<(u64, Vec<u8>)> {
    let b = std::fs::read(file).unwrap();
    assert_eq!(
        &b[..4],
        &0xa1b2_3c4du32.to_le_bytes(),
        "{}: a ns pcap",
        file.display()
    );
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let w = |o: usize| u64::from(u32::from_le_bytes(b[o..o + 4].try_into().unwrap()));
        let (ts, len) = (w(at) * 1_000_000_000 + w(at + 4), w(at + 8) as usize);
        out.push((ts, b[at + 16 + 42..at + 16 + len].to_vec()));
        at += 16 + len;
    }
    assert_eq!(at, b.len(), "{}: cut short", file.display());
    out
}

/// A dump's one file holds exactly the recording's packets of its window.
fn assert_window(dump: &Value, recording: &[(u64, Vec<u8>)]) {
    let (s, e) = (u(dump, "/start_ns"), u(dump, "/end_ns"));
    let q = &dump["queues"][0];
    let got = records(Path::new(q["file"].as_str().unwrap()));
    let want: Vec<&(u64, Vec<u8>)> = recording
        .iter()
        .filter(|(t, _)| *t >= s && *t <= e)
        .collect();
    assert!(
        want.len() > 1000,
        "{} packets in the window: {dump}",
        want.len()
    );
    assert_eq!(got.len(), want.len(), "{dump}");
    assert!(
        got.iter().zip(&want).all(|(a, b)| a == *b),
        "the dump differs from the recording: {dump}"
    );
    assert_eq!(u(q, "/packets"), want.len() as u64, "{dump}");
    assert_eq!(dump["complete"], true, "{dump}");
}

#[test]
#[ignore = "needs target/engines/rtdaq-socket and tshark; scripts/test.sh runs it"]
fn triggered_dumps_hold_exactly_the_packets_of_their_windows() {
    if skipped() {
        return;
    }
    let dir = rtdaq_testbed::test_dir();
    let (rx, metrics, trigger) = (free_port(true), free_port(false), free_port(true));
    let cfg = config(&dir, (rx, metrics, trigger));
    let err = std::fs::File::create(dir.join("rtdaq.err")).unwrap();
    let child = Command::new(bin("socket"))
        .args([
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--duration",
            "9",
            "--report-json",
        ])
        .arg(dir.join("report.json"))
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(err)
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !std::fs::read_to_string(dir.join("rtdaq.err"))
        .unwrap_or_default()
        .contains("queues running")
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "rtdaq did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
    // HTTP: the last 400 ms, answered with the index; bad requests refused.
    let (status, body) = http(metrics, "POST", "/trigger?last_ms=400");
    assert_eq!(status, 200, "{body}");
    let by_http: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        u(&by_http, "/end_ns") - u(&by_http, "/start_ns"),
        400_000_000
    );
    assert_eq!(http(metrics, "POST", "/trigger?last_ms=x").0, 400);
    assert_eq!(http(metrics, "POST", "/trigger?dump=nope&last_ms=5").0, 404);
    assert_eq!(http(metrics, "GET", "/trigger?last_ms=5").0, 405);
    // /metrics counts what the history kept.
    let (status, m) = http(metrics, "GET", "/metrics");
    assert_eq!(status, 200);
    let kept =
        "rtdaq_dump_history_packets_total{history=\"lo_udp.rx0 dump candidates\",state=\"kept\"}";
    let line = m
        .lines()
        .find(|l| l.starts_with(kept))
        .unwrap_or_else(|| panic!("no {kept}: {m}"));
    assert!(
        line.rsplit(' ').next().unwrap().parse::<u64>().unwrap() > 10_000,
        "{line}"
    );
    // HTTP: a window that ends 300 ms from now, answered once it has passed.
    std::thread::sleep(Duration::from_millis(500));
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    let (fa, fb) = (now() - 100_000_000, now() + 300_000_000);
    let (status, body) = http(
        metrics,
        "POST",
        &format!("/trigger?start_ns={fa}&end_ns={fb}"),
    );
    assert_eq!(status, 200, "{body}");
    assert!(now() > fb, "answered before its window ended");
    // UDP: a window in the past (well after the HTTP dumps held the history).
    std::thread::sleep(Duration::from_millis(1500));
    let (a, b) = (now() - 700_000_000, now() - 200_000_000);
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .send_to(
            format!("start_ns={a}&end_ns={b}").as_bytes(),
            ("127.0.0.1", trigger),
        )
        .unwrap();
    // SIGUSR1: the last 300 ms.
    std::thread::sleep(Duration::from_millis(1500));
    let kill = Command::new("kill")
        .args(["-USR1", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {}", show(&out)));
    assert_eq!(u(&r, "/lost"), 0, "{}", show(&out));
    let dumps = r["dumps"]
        .as_array()
        .unwrap_or_else(|| panic!("no dumps: {r}"));
    let triggers: Vec<&str> = dumps
        .iter()
        .map(|d| d["trigger"].as_str().unwrap())
        .collect();
    assert_eq!(triggers, ["http", "http", "udp", "signal"], "{r}");
    assert_eq!(
        (u(&dumps[1], "/start_ns"), u(&dumps[1], "/end_ns")),
        (fa, fb)
    );
    assert_eq!((u(&dumps[2], "/start_ns"), u(&dumps[2], "/end_ns")), (a, b));
    assert_eq!(
        u(&dumps[3], "/end_ns") - u(&dumps[3], "/start_ns"),
        300_000_000
    );
    assert_eq!(
        dumps[0], by_http,
        "the report's dump is the one HTTP answered"
    );
    let rec_file = std::fs::read_dir(dir.join("rec"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "pcap"))
        .expect("the recording");
    let recording = records(&rec_file);
    for d in dumps {
        assert_window(d, &recording);
        // The index on disk is what the report says.
        let index: Value =
            serde_json::from_str(&std::fs::read_to_string(d["index"].as_str().unwrap()).unwrap())
                .unwrap();
        assert_eq!(&index, d);
    }
    // tshark reads a dump as the pcap it is.
    let f = dumps[0]["queues"][0]["file"].as_str().unwrap();
    let ts = Command::new("tshark")
        .args(["-r", f, "-T", "fields", "-e", "udp.dstport"])
        .output()
        .unwrap();
    assert!(ts.status.success(), "{}", show(&ts));
    let ports = String::from_utf8_lossy(&ts.stdout);
    assert_eq!(
        ports.lines().count() as u64,
        u(&dumps[0], "/queues/0/packets")
    );
    assert!(
        ports.lines().all(|l| l.trim() == rx.to_string()),
        "{}",
        &ports[..200.min(ports.len())]
    );
}
