//! UCX egress (issue #31) end to end over TCP on loopback, against receivers that share no
//! code with rtdaq:
//!
//! - `ucx_perftest` (Debian `ucx-utils`, the same UCX 1.13 rtdaq links) runs `tag_bw` over
//!   the same transport (`UCX_TLS=tcp`, 127.0.0.1): the transport set-up works here;
//! - `scripts/peers/ucx_recv.c`, a C receiver against the system's UCX (a UCP listener,
//!   tagged receives, the message header parsed from its documented layout), built by
//!   each test into its own directory.
//!
//! rtdaq runs `configs/host-udp-egress-ucx.toml` (its generator → one RX queue → the UCX
//! egress stage), edited for free ports:
//!
//! - every message arrives, in sequence, and the data the receiver got is byte for byte the
//!   raw recording rtdaq made of the same run;
//! - a destination with no listener stops the start with exit 2 naming its key, and with
//!   `connect_wait_ms` the start waits for a receiver that comes late;
//! - the receiver killed (SIGKILL) mid-run and a new one started on the same port: rtdaq
//!   keeps receiving (no gap on its queue), counts what it could not deliver as
//!   `peer_gone`, reconnects, and the new receiver gets every later message to the end of
//!   stream, the sequence jumping over the gap;
//! - a receiver that is too slow: the queue never stalls; what does not fit is counted as
//!   `egress_full` and every payload is accounted for.
//!
//! Needs `target/engines/rtdaq-socket-ucx` (`scripts/test.sh` builds it: `--features ucx`),
//! `cc`, `pkg-config ucx` (Debian `libucx-dev`) and `ucx_perftest` (`ucx-utils`); without
//! them each test fails in `scripts/test.sh` (`RTDAQ_TEST_REQUIRE=1`) and skips, recorded,
//! elsewhere.

mod e2e;

use e2e::ucx::{free_tcp_port, free_udp_port, receiver, summary, ucx_recv};
use e2e::{root, show, u};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One at a time: each pins rtdaq's threads to cores 0 and 1.
static SERIAL: Mutex<()> = Mutex::new(());

fn tmp(name: &str) -> PathBuf {
    rtdaq_testbed::test_path(name)
}

fn binary() -> PathBuf {
    root().join("target/engines/rtdaq-socket-ucx")
}

fn found(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Why the tests cannot run here, if they cannot.
fn skip_reason() -> Option<String> {
    if !binary().exists() {
        return Some(
            "no target/engines/rtdaq-socket-ucx (scripts/test.sh builds it with --features ucx)"
                .into(),
        );
    }
    if !found("pkg-config", &["--exists", "ucx"]) {
        return Some("no UCX development files (Debian: apt-get install libucx-dev)".into());
    }
    if !found("cc", &["--version"]) {
        return Some("no C compiler (Debian: apt-get install gcc)".into());
    }
    if !found("ucx_info", &["-v"]) {
        return Some("no ucx_info / ucx_perftest (Debian: apt-get install ucx-utils)".into());
    }
    None
}

fn skipped() -> bool {
    match skip_reason() {
        Some(why) => {
            rtdaq_testbed::require::skip(why);
            true
        }
        None => false,
    }
}

/// The shipped UCX egress config on free ports, with more edits.
fn config(dest_port: u16, edits: &[(&str, String)], name: &str) -> PathBuf {
    let rx = free_udp_port();
    let mut text =
        std::fs::read_to_string(root().join("configs/host-udp-egress-ucx.toml")).unwrap();
    let mut all = vec![
        (
            "destinations = [\"127.0.0.1:13337\"]",
            format!("destinations = [\"127.0.0.1:{dest_port}\"]"),
        ),
        (
            "udp://127.0.0.1:5000\"       # the RX",
            format!("udp://127.0.0.1:{rx}\"       # the RX"),
        ),
        (
            "destination = \"udp://127.0.0.1:5000\"",
            format!("destination = \"udp://127.0.0.1:{rx}\""),
        ),
    ];
    all.extend(edits.iter().map(|(a, b)| (*a, b.clone())));
    for (from, to) in &all {
        assert!(
            text.contains(from),
            "host-udp-egress-ucx.toml has no {from:?}"
        );
        text = text.replacen(from, to, 1);
    }
    let p = tmp(&format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// rtdaq on `cfg` for `secs`, with its report and an output directory.
fn rtdaq(cfg: &Path, secs: &str, name: &str) -> Command {
    let mut cmd = Command::new(binary());
    cmd.args(["run", "--config"])
        .arg(cfg)
        .args(["--duration", secs, "--report-json"])
        .arg(tmp(&format!("{name}.json")))
        .env("RUST_LOG", "info");
    cmd
}

fn report(name: &str, out: &Output) -> Value {
    let text = std::fs::read_to_string(tmp(&format!("{name}.json")))
        .unwrap_or_else(|e| panic!("{name}: no report ({e}): {}", show(out)));
    serde_json::from_str(&text).unwrap()
}

/// Every payload the sink took was sent or counted with its reason.
fn assert_accounted(e: &Value) {
    let dropped: u64 = ["egress_full", "egress_error", "peer_gone"]
        .iter()
        .map(|why| u(e, &format!("/dropped/{why}")))
        .sum();
    assert_eq!(u(e, "/payloads"), u(e, "/payloads_sent") + dropped, "{e}");
}

fn egress(r: &Value) -> &Value {
    &r["rx"]["queues"][0]["egress"][0]
}

#[test]
#[ignore = "needs ucx_perftest (ucx-utils); scripts/test.sh runs it"]
fn ucx_perftest_moves_tagged_messages_over_loopback_tcp() {
    if skipped() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let port = free_tcp_port().to_string();
    let server = Command::new("ucx_perftest")
        .env("UCX_TLS", "tcp")
        .args(["-p", &port])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ucx_perftest server");
    std::thread::sleep(Duration::from_millis(500));
    let client = Command::new("ucx_perftest")
        .env("UCX_TLS", "tcp")
        .args([
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "tag_bw",
            "-s",
            "1048576",
            "-n",
            "200",
        ])
        .output()
        .unwrap();
    let server = server.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&client.stdout);
    assert!(
        client.status.success(),
        "client: {}\nserver: {}",
        show(&client),
        show(&server)
    );
    // The last table row: iterations, latency, bandwidth (MB/s) overall.
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("Final:") || l.contains("200 ")),
        "no result row: {text}"
    );
}

#[test]
#[ignore = "needs target/engines/rtdaq-socket-ucx, libucx-dev and cc; scripts/test.sh runs it"]
fn every_message_arrives_and_its_data_is_the_raw_recording_of_the_run() {
    if skipped() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let port = free_tcp_port();
    let recorder = "\n[[recorders]]\nname = \"raw\"\nformat = \"raw\"\n\n[generator]";
    let cfg = config(
        port,
        &[
            ("rate_gbps = 1.0 ", "rate_gbps = 0.2 ".into()),
            ("\n[generator]", recorder.into()),
            (
                "egress = [\"ucx-out\"] ",
                "egress = [\"ucx-out\"]\nrecord = [\"raw\"] ".into(),
            ),
        ],
        "whole",
    );
    let bin = ucx_recv(&tmp("ucx_recv"));
    let (json, data) = (tmp("whole-recv.json"), tmp("whole-recv.bin"));
    let rx = receiver(&bin, port, &json, Some(&data), &[]);
    let out = rtdaq(&cfg, "3", "whole")
        .arg("--output-dir")
        .arg(tmp("whole-out"))
        .output()
        .unwrap();
    let r = report("whole", &out);
    let got = summary(rx, &json);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let received = u(&r, "/rx/totals/packets");
    assert!(received > 20_000, "{}", show(&out));
    assert_eq!(u(&r, "/lost"), 0, "{}", show(&out));
    assert_eq!(u(&r, "/io_thread_allocations"), 0, "{}", show(&out));
    let e = egress(&r);
    assert_eq!(e["protocol"], "ucx", "{e}");
    assert_eq!(u(e, "/payloads_sent"), received, "{e}");
    // The receiver: every message, in sequence, whole; the end of stream.
    assert_eq!(u(&got, "/payloads"), received, "{got}");
    assert_eq!(u(&got, "/messages"), u(e, "/heaps"), "{got} vs {e}");
    assert_eq!((u(&got, "/missing"), u(&got, "/bad")), (0, 0), "{got}");
    assert_eq!(u(&got, "/streams_ended"), 1, "{got}");
    assert_eq!(u(&got, "/bytes"), received * 1400, "{got}");
    // Its data is the run's raw recording, byte for byte.
    let raw: Vec<PathBuf> = std::fs::read_dir(tmp("whole-out"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "raw"))
        .collect();
    assert_eq!(raw.len(), 1, "{raw:?}");
    let (a, b) = (
        std::fs::read(&raw[0]).unwrap(),
        std::fs::read(&data).unwrap(),
    );
    assert_eq!(a.len(), b.len());
    assert!(a == b, "the receiver's data differs from the raw recording");
}

#[test]
#[ignore = "needs target/engines/rtdaq-socket-ucx, libucx-dev and cc; scripts/test.sh runs it"]
fn no_listener_stops_the_start_and_connect_wait_lets_a_late_one_in() {
    if skipped() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let port = free_tcp_port();
    let cfg = config(port, &[], "nolisten");
    let t = Instant::now();
    let out = rtdaq(&cfg, "2", "nolisten").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(err.contains("egress[0].destinations[0]"), "{}", show(&out));
    assert!(err.contains("no UCX listener answered"), "{}", show(&out));
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "took {:?}",
        t.elapsed()
    );

    // With connect_wait_ms the start waits: the receiver comes 1.5 s late.
    let cfg = config(
        port,
        &[
            ("connect_wait_ms = 0 ", "connect_wait_ms = 8000 ".into()),
            ("rate_gbps = 1.0 ", "rate_gbps = 0.2 ".into()),
        ],
        "late",
    );
    let run = rtdaq(&cfg, "2", "late")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let bin = ucx_recv(&tmp("ucx_recv"));
    let json = tmp("late-recv.json");
    let rx = receiver(&bin, port, &json, None, &[]);
    let out = run.wait_with_output().unwrap();
    let r = report("late", &out);
    let got = summary(rx, &json);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(u(&got, "/payloads"), u(&r, "/rx/totals/packets"), "{got}");
    assert_eq!(u(&got, "/streams_ended"), 1, "{got}");
}

#[test]
#[ignore = "needs target/engines/rtdaq-socket-ucx, libucx-dev and cc; scripts/test.sh runs it"]
fn a_receiver_killed_and_restarted_gets_a_reconnection_and_the_gap_is_counted() {
    if skipped() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let port = free_tcp_port();
    let cfg = config(
        port,
        &[
            ("rate_gbps = 1.0 ", "rate_gbps = 0.2 ".into()),
            ("reconnect_ms = 500 ", "reconnect_ms = 200 ".into()),
        ],
        "restart",
    );
    let bin = ucx_recv(&tmp("ucx_recv"));
    let (json_a, json_b) = (tmp("restart-a.json"), tmp("restart-b.json"));
    let mut a = receiver(&bin, port, &json_a, None, &["--snapshot-ms", "50"]);
    let run = rtdaq(&cfg, "6", "restart").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    a.kill().unwrap();
    let _ = a.wait();
    std::thread::sleep(Duration::from_millis(1500));
    let b = receiver(&bin, port, &json_b, None, &[]);
    let out = run.wait_with_output().unwrap();
    let r = report("restart", &out);
    let got_b = summary(b, &json_b);
    let got_a: Value = serde_json::from_str(&std::fs::read_to_string(&json_a).unwrap()).unwrap();
    let e = egress(&r);
    // The queue never stalled: nothing lost on the receive side.
    let rx_drops = u(&r, "/rx/totals/drops_total");
    assert_eq!(rx_drops, 0, "{}", show(&out));
    assert_eq!(u(&r, "/rx/totals/seq_gaps"), 0, "{}", show(&out));
    // What could not be delivered is counted, the run fails on it (exit 1), and every
    // payload is accounted for.
    let gone = u(e, "/dropped/peer_gone");
    assert!(gone > 0, "{e}");
    assert!(u(e, "/reconnects") >= 1, "{e}");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert_accounted(e);
    // Receiver A got the start, B everything from its first message to the end, in
    // sequence; B's first message comes after A's last: the gap between them is what the
    // restart cost.
    let (sa, sb) = (&got_a["streams"]["0"], &got_b["streams"]["0"]);
    assert_eq!(u(sa, "/first_seq"), 0, "{got_a}");
    assert!(
        u(sb, "/first_seq") > u(sa, "/last_seq") + 1,
        "{got_a} {got_b}"
    );
    assert_eq!(u(&got_b, "/missing"), 0, "{got_b}");
    assert_eq!(u(&got_b, "/streams_ended"), 1, "{got_b}");
    assert!(u(&got_a, "/payloads") + u(&got_b, "/payloads") <= u(e, "/payloads_sent"));
}

#[test]
#[ignore = "needs target/engines/rtdaq-socket-ucx, libucx-dev and cc; scripts/test.sh runs it"]
fn a_receiver_too_slow_never_stalls_the_queue_and_the_overflow_is_counted() {
    if skipped() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let port = free_tcp_port();
    // 1 Gb/s of 1400 B payloads, 64 a message: ~1 400 messages a second; the receiver takes
    // one every 5 ms (200 a second), and 16 message buffers are all rtdaq may hold.
    let cfg = config(
        port,
        &[("heap_buffers = 256 ", "heap_buffers = 16 ".into())],
        "slow",
    );
    let bin = ucx_recv(&tmp("ucx_recv"));
    let json = tmp("slow-recv.json");
    let rx = receiver(
        &bin,
        port,
        &json,
        None,
        &["--slow-us", "5000", "--buffers", "4"],
    );
    let out = rtdaq(&cfg, "3", "slow").output().unwrap();
    let r = report("slow", &out);
    let got = summary(rx, &json);
    let e = egress(&r);
    assert_eq!(u(&r, "/rx/totals/drops_total"), 0, "{}", show(&out));
    assert_eq!(u(&r, "/rx/totals/seq_gaps"), 0, "{}", show(&out));
    let full = u(e, "/dropped/egress_full");
    assert!(full > 0, "{e}");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert_accounted(e);
    // The receiver got what rtdaq says it sent, no message missing in between.
    assert_eq!(u(&got, "/payloads"), u(e, "/payloads_sent"), "{got} {e}");
    assert_eq!(u(&got, "/missing"), 0, "{got}");
}
