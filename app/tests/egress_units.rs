//! Whole units (issue #31: `unit = "heap"`, `"time_slot"`) over UCX and over SPEAD, end to
//! end on loopback, against peers that share no code with rtdaq:
//!
//! - SPEAD: spead2 (PyPI) encodes 1000 heaps of 5000 bytes (4 packets each) and
//!   `scripts/peers/spead_peer.py send --drop-every 13` sends them, leaving out every 13th
//!   packet; rtdaq (`configs/host-spead2-ucx-heaps.toml` on free ports) forwards each whole
//!   heap as one UCX message to the C receiver `scripts/peers/ucx_recv.c`, which writes the
//!   messages' data to a file; spead2 reads that file (`spead_peer.py read-units`) and gets
//!   exactly the heaps that lost no packet, each whole and correct, in order; rtdaq counts
//!   the other heaps' packets as `egress_incomplete`, and its queue the left-out packets as
//!   lost;
//! - VDIF: baseband (PyPI) writes a 4-thread VDIF file, `vdif_peer.py send --skip-every 41`
//!   sends it leaving out every 41st frame; rtdaq forwards whole time slots (4 frames of
//!   one second and frame number); the file the receiver wrote is, byte for byte, the
//!   original's time slots that lost no frame, and baseband reads it as VDIF;
//! - a SPEAD relay (`configs/host-spead2-relay.toml`): the same spead2 heaps, every 13th
//!   packet left out, go out of rtdaq as SPEAD to a `spead2.recv` UDP stream, which gets
//!   exactly the heaps that lost no packet, each correct, in order, nothing incomplete, and
//!   the end of stream;
//! - VDIF time slots as SPEAD heaps: each whole slot one heap whose data item is its
//!   frames; spead2 assembles them (rtdaq's descriptors name the items) and the data items
//!   back to back are, byte for byte, the original's whole frame sets, read as VDIF by
//!   baseband.
//!
//! Needs `target/engines/rtdaq-socket` (SPEAD) and `target/engines/rtdaq-socket-ucx` (UCX)
//! (`scripts/test.sh` builds them), for UCX `cc` and `pkg-config ucx` (Debian
//! `libucx-dev`), and `target/pyenv` with spead2 and baseband
//! (`scripts/install-test-deps.sh`); without them each test fails in `scripts/test.sh`
//! (`RTDAQ_TEST_REQUIRE=1`) and skips, recorded, elsewhere.

mod e2e;

use e2e::ucx::{free_tcp_port, free_udp_port, receiver, summary, ucx_recv};
use e2e::{root, show, u};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One at a time: each pins rtdaq's threads to cores 0 and 1.
static SERIAL: Mutex<()> = Mutex::new(());

fn tmp(name: &str) -> PathBuf {
    rtdaq_testbed::test_path(name)
}

/// The UCX binary, or the default socket one for SPEAD sinks.
fn binary(ucx: bool) -> PathBuf {
    root().join(if ucx {
        "target/engines/rtdaq-socket-ucx"
    } else {
        "target/engines/rtdaq-socket"
    })
}

fn python() -> PathBuf {
    root().join("target/pyenv/bin/python")
}

/// True when the test cannot run here (`ucx`: it sends over UCX).
fn skipped(ucx: bool) -> bool {
    let ok = |p: &str, a: &[&str]| {
        Command::new(p)
            .args(a)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let why = if ucx && !binary(true).exists() {
        "no target/engines/rtdaq-socket-ucx (scripts/test.sh builds it with --features ucx)"
    } else if !binary(false).exists() {
        "no target/engines/rtdaq-socket (scripts/build-engines.sh)"
    } else if ucx && (!ok("pkg-config", &["--exists", "ucx"]) || !ok("cc", &["--version"])) {
        "no UCX development files or C compiler (Debian: apt-get install libucx-dev gcc)"
    } else if !ok(
        python().to_str().unwrap(),
        &["-c", "import spead2, baseband"],
    ) {
        "no target/pyenv with spead2 and baseband (scripts/install-test-deps.sh makes it)"
    } else {
        return false;
    };
    rtdaq_testbed::require::skip(why);
    true
}

/// The shipped whole-heap config receiving on `rx` and sending to `dest`, with more edits:
/// `configs/host-spead2-ucx-heaps.toml` (`ucx`) or `configs/host-spead2-relay.toml`.
fn config(ucx: bool, rx: u16, dest: u16, edits: &[(&str, String)], name: &str) -> PathBuf {
    let (file, shipped_dest) = if ucx {
        ("host-spead2-ucx-heaps.toml", "127.0.0.1:13338")
    } else {
        ("host-spead2-relay.toml", "127.0.0.1:7150")
    };
    let mut text = std::fs::read_to_string(root().join("configs").join(file)).unwrap();
    let mut all = vec![
        (
            "address = \"udp://127.0.0.1:7148\"".to_string(),
            format!("address = \"udp://127.0.0.1:{rx}\""),
        ),
        (
            format!("destinations = [\"{shipped_dest}\"]"),
            format!("destinations = [\"127.0.0.1:{dest}\"]"),
        ),
    ];
    all.extend(edits.iter().map(|(a, b)| (a.to_string(), b.clone())));
    for (from, to) in &all {
        assert!(text.contains(from), "the config has no {from:?}");
        text = text.replacen(from, to, 1);
    }
    let p = tmp(&format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// rtdaq (`ucx`: the UCX binary) on `cfg` for `secs`, returned once its queues run.
fn start(ucx: bool, cfg: &Path, secs: &str, name: &str) -> Child {
    let log = tmp(&format!("{name}.log"));
    let mut child = Command::new(binary(ucx))
        .args(["run", "--config"])
        .arg(cfg)
        .args(["--duration", secs, "--report-json"])
        .arg(tmp(&format!("{name}.json")))
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn rtdaq");
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("queues running") {
            return child;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("{name}: rtdaq exited ({st}) before its queues ran:\n{text}");
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{name}: {text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for rtdaq: its output (the log as stderr) and its report.
fn finish(child: Child, name: &str) -> (Output, Value) {
    let mut out = child.wait_with_output().unwrap();
    out.stderr = std::fs::read(tmp(&format!("{name}.log"))).unwrap_or_default();
    let text = std::fs::read_to_string(tmp(&format!("{name}.json")))
        .unwrap_or_else(|e| panic!("{name}: no report ({e}): {}", show(&out)));
    (out, serde_json::from_str(&text).unwrap())
}

/// A peer script's JSON line.
fn peer(script: &str, args: &[&str]) -> Value {
    let out = Command::new(python())
        .arg(root().join("scripts/peers").join(script))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{script} {args:?}: {}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{script} {args:?}: {e}: {}", show(&out)))
}

/// Every datagram the sink took was sent or counted with its reason.
fn assert_accounted(e: &Value) {
    let dropped: u64 = e["dropped"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(u(e, "/payloads"), u(e, "/payloads_sent") + dropped, "{e}");
}

/// spead2's 1000 heaps of 4 packets sent to `rx`, every 13th packet left out: the numbers
/// of the heaps that lost none, and how many packets were left out.
fn send_heaps_dropping(rx: u16) -> (Vec<u64>, u64) {
    let port = rx.to_string();
    let sent = peer(
        "spead_peer.py",
        &[
            "send",
            "127.0.0.1",
            &port,
            "--heaps",
            "1000",
            "--drop-every",
            "13",
            "--rate",
            "20e6",
        ],
    );
    let hit: Vec<u64> = sent["hit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let dropped = u(&sent, "/dropped");
    assert_eq!(u(&sent, "/packets_per_heap"), 4, "{sent}");
    assert_eq!(dropped, 4000 / 13, "{sent}");
    assert_eq!(hit.len() as u64, dropped, "1 in 13 never hits a heap twice");
    ((0..1000).filter(|n| !hit.contains(n)).collect(), dropped)
}

/// rtdaq's side of a whole-heap run: the queue lost what was left out; the sink sent the
/// whole heaps and counted the other heaps' packets; the run's loss is both (what reached
/// no receiver), and fails the run.
fn assert_whole_heaps_sent(out: &Output, r: &Value, whole: &[u64], dropped: u64) -> Value {
    assert_eq!(u(r, "/rx/totals/seq_gaps"), dropped, "{}", show(out));
    assert_eq!(u(r, "/lost"), dropped + 3 * dropped, "{}", show(out));
    assert_eq!(u(r, "/rx/totals/packets"), 4000 - dropped, "{}", show(out));
    assert_eq!(
        out.status.code(),
        Some(1),
        "the loss fails the run: {}",
        show(out)
    );
    let e = r["rx"]["queues"][0]["egress"][0].clone();
    assert_eq!(e["whole_units"], "heaps", "{e}");
    assert_eq!(u(&e, "/heaps"), whole.len() as u64, "{e}");
    assert_eq!(u(&e, "/payloads_sent"), 4 * whole.len() as u64, "{e}");
    assert_eq!(u(&e, "/dropped/egress_incomplete"), 3 * dropped, "{e}");
    for why in ["egress_full", "egress_error", "egress_foreign", "peer_gone"] {
        assert_eq!(u(&e, &format!("/dropped/{why}")), 0, "{why}: {e}");
    }
    assert_accounted(&e);
    e
}

/// The heap numbers a spead peer's JSON lists.
fn numbers(v: &Value) -> Vec<u64> {
    v["numbers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

#[test]
#[ignore = "needs target/engines/rtdaq-socket-ucx, libucx-dev, cc and spead2; scripts/test.sh runs it"]
fn spead2_reads_exactly_the_whole_heaps_and_the_others_are_counted() {
    if skipped(true) {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (rx, dest) = (free_udp_port(), free_tcp_port());
    let cfg = config(true, rx, dest, &[], "heaps");
    let bin = ucx_recv(&tmp("ucx_recv"));
    let (json, data) = (tmp("heaps-recv.json"), tmp("heaps-recv.bin"));
    let recv = receiver(&bin, dest, &json, Some(&data), &[]);
    let run = start(true, &cfg, "6", "heaps");
    let (whole, dropped) = send_heaps_dropping(rx);
    let (out, r) = finish(run, "heaps");
    let got = summary(recv, &json);
    assert_whole_heaps_sent(&out, &r, &whole, dropped);
    // The receiver: one message a heap, in sequence, and the end of stream.
    assert_eq!(u(&got, "/messages"), whole.len() as u64, "{got}");
    assert_eq!((u(&got, "/missing"), u(&got, "/bad")), (0, 0), "{got}");
    assert_eq!(u(&got, "/streams_ended"), 1, "{got}");
    // spead2 reads the data: the whole heaps, in order, each correct.
    let read = peer(
        "spead_peer.py",
        &["read-units", data.to_str().unwrap(), "--heap-bytes", "5000"],
    );
    assert_eq!(numbers(&read), whole, "{read}");
    assert_eq!(u(&read, "/good"), whole.len() as u64, "{read}");
    assert_eq!(
        (u(&read, "/bad"), u(&read, "/incomplete")),
        (0, 0),
        "{read}"
    );
    assert_eq!(u(&read, "/packets"), 4 * whole.len() as u64, "{read}");
}

/// A spead peer receiving on 127.0.0.1:`port` until the end of stream (`mode`: `recv` or
/// `egress-recv`, with `args`); returns once it listens.
fn spead_receiver(mode: &str, port: u16, args: &[&str]) -> Child {
    let child = Command::new(python())
        .arg(root().join("scripts/peers/spead_peer.py"))
        .args([mode, "127.0.0.1", &port.to_string(), "--timeout", "40"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn spead_peer.py");
    // spead2 binds within a fraction of a second.
    std::thread::sleep(Duration::from_millis(800));
    child
}

#[test]
#[ignore = "needs target/engines/rtdaq-socket and spead2; scripts/test.sh runs it"]
fn a_spead_relay_passes_exactly_the_whole_heaps_as_they_arrived() {
    if skipped(false) {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (rx, dest) = (free_udp_port(), free_udp_port());
    let cfg = config(false, rx, dest, &[], "relay");
    let recv = spead_receiver("recv", dest, &["--heap-bytes", "5000"]);
    let run = start(false, &cfg, "6", "relay");
    let (whole, dropped) = send_heaps_dropping(rx);
    let (out, r) = finish(run, "relay");
    let got = e2e::peer_json(recv, "spead_peer");
    let e = assert_whole_heaps_sent(&out, &r, &whole, dropped);
    // The instrument's packets as they were (4 a heap), no descriptors, the end of stream.
    assert_eq!(u(&e, "/descriptors"), 0, "{e}");
    assert_eq!(u(&e, "/datagrams"), 4 * whole.len() as u64 + 1, "{e}");
    // spead2: the whole heaps, in order, each correct, nothing incomplete, the end.
    assert_eq!(numbers(&got), whole, "{got}");
    assert_eq!(
        (u(&got, "/good"), u(&got, "/bad")),
        (whole.len() as u64, 0),
        "{got}"
    );
    // spead2 counts the end-of-stream packet too.
    assert_eq!(
        u(&got, "/stats/packets"),
        4 * whole.len() as u64 + 1,
        "{got}"
    );
    for why in ["incomplete_heaps_evicted", "incomplete_heaps_flushed"] {
        assert_eq!(u(&got["stats"], &format!("/{why}")), 0, "{why}: {got}");
    }
    assert_eq!(got["end"], true, "{got}");
}

/// The frames of a VDIF file, each whole, in file order.
fn vdif_frames(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while rest.len() >= 32 {
        let w2 = u32::from_le_bytes(rest[8..12].try_into().unwrap());
        let len = (w2 & 0x00ff_ffff) as usize * 8;
        let (f, r) = rest.split_at(len);
        out.push(f);
        rest = r;
    }
    out
}

/// The shipped config (`ucx` or the SPEAD relay) made a VDIF time-slot sink of 4 frames.
fn slot_config(ucx: bool, rx: u16, dest: u16, name: &str) -> PathBuf {
    config(
        ucx,
        rx,
        dest,
        &[
            (
                "kind = \"spead\" ",
                "kind = \"vdif\"\nframes_per_second = 1000 ".into(),
            ),
            ("heap_step = 1\n", "\n".into()),
            (
                "unit = \"heap\" ",
                "unit = \"time_slot\"\nunit_frames = 4 ".into(),
            ),
        ],
        name,
    )
}

/// baseband writes a 4-thread VDIF file of 500 time slots (1032-byte frames) for `name`.
fn vdif_file(name: &str) -> PathBuf {
    let file = tmp(&format!("{name}.vdif"));
    let wrote = peer(
        "vdif_peer.py",
        &[
            "write",
            file.to_str().unwrap(),
            "--threads",
            "4",
            "--frames",
            "500",
            "--frame-bytes",
            "1032",
            "--fps",
            "1000",
        ],
    );
    assert_eq!(u(&wrote, "/frames"), 2000, "{wrote}");
    file
}

/// `file` sent to `rx` with every 41st frame left out: the frames left out, and the bytes
/// that should arrive (the file's 4-frame sets with no frame left out).
fn send_vdif_skipping(file: &Path, rx: u16) -> (u64, Vec<u8>) {
    let port = rx.to_string();
    let f = file.to_str().unwrap();
    let sent = peer(
        "vdif_peer.py",
        &[
            "send",
            f,
            "127.0.0.1",
            &port,
            "--pps",
            "20000",
            "--skip-every",
            "41",
        ],
    );
    let original = std::fs::read(file).unwrap();
    let frames = vdif_frames(&original);
    assert_eq!(frames.len(), 2000);
    let sets: Vec<&[&[u8]]> = frames.chunks(4).collect();
    let whole: Vec<u8> = sets
        .iter()
        .enumerate()
        .filter(|(s, _)| (0..4).all(|t| (4 * s + t + 1) % 41 != 0))
        .flat_map(|(_, set)| set.concat())
        .collect();
    let skipped_n = u(&sent, "/skipped");
    assert_eq!(skipped_n, 2000 / 41, "{sent}");
    (skipped_n, whole)
}

/// rtdaq sent the whole slots and counted the rest; what arrived (`data`) is the whole
/// frame sets byte for byte, and baseband reads it as VDIF: 4 threads, one frame each per
/// whole slot.
fn assert_whole_slots(out: &Output, r: &Value, skipped_n: u64, whole: &[u8], data: &Path) {
    let e = &r["rx"]["queues"][0]["egress"][0];
    assert_eq!(e["whole_units"], "time_slots", "{e}");
    assert_eq!(u(e, "/heaps"), 500 - skipped_n, "{e}");
    assert_eq!(u(e, "/dropped/egress_incomplete"), 3 * skipped_n, "{e}");
    assert_accounted(e);
    assert_eq!(u(r, "/rx/totals/seq_gaps"), skipped_n, "{}", show(out));
    assert_eq!(u(r, "/lost"), skipped_n + 3 * skipped_n, "{}", show(out));
    let dumped = std::fs::read(data).unwrap();
    assert!(
        dumped == whole,
        "the received slots differ from the file's whole frame sets"
    );
    let check = peer(
        "vdif_peer.py",
        &[
            "check",
            data.to_str().unwrap(),
            "--threads",
            "4",
            "--fps",
            "1000",
        ],
    );
    for t in 0..4 {
        assert_eq!(
            u(&check["threads"], &format!("/{t}")),
            500 - skipped_n,
            "{check}"
        );
    }
}

#[test]
#[ignore = "needs target/engines/rtdaq-socket-ucx, libucx-dev, cc and baseband; scripts/test.sh runs it"]
fn whole_vdif_time_slots_are_the_original_frame_sets_byte_for_byte() {
    if skipped(true) {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (rx, dest) = (free_udp_port(), free_tcp_port());
    let cfg = slot_config(true, rx, dest, "slots");
    let file = vdif_file("slots");
    let bin = ucx_recv(&tmp("ucx_recv"));
    let (json, data) = (tmp("slots-recv.json"), tmp("slots-recv.bin"));
    let recv = receiver(&bin, dest, &json, Some(&data), &[]);
    let run = start(true, &cfg, "5", "slots");
    let (skipped_n, whole) = send_vdif_skipping(&file, rx);
    let (out, r) = finish(run, "slots");
    let got = summary(recv, &json);
    assert_eq!(u(&got, "/messages"), 500 - skipped_n, "{got}");
    assert_whole_slots(&out, &r, skipped_n, &whole, &data);
}

#[test]
#[ignore = "needs target/engines/rtdaq-socket, spead2 and baseband; scripts/test.sh runs it"]
fn whole_vdif_time_slots_as_spead_heaps_hold_the_original_frame_sets() {
    if skipped(false) {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (rx, dest) = (free_udp_port(), free_udp_port());
    let cfg = slot_config(false, rx, dest, "spead-slots");
    let file = vdif_file("spead-slots");
    let data = tmp("spead-slots-recv.bin");
    let recv = spead_receiver("egress-recv", dest, &["--data", data.to_str().unwrap()]);
    let run = start(false, &cfg, "5", "spead-slots");
    let (skipped_n, whole) = send_vdif_skipping(&file, rx);
    let (out, r) = finish(run, "spead-slots");
    let got = e2e::peer_json(recv, "spead_peer");
    // spead2: one heap a whole slot, every one whole, described, the end of stream.
    assert_eq!(u(&got, "/heaps"), 500 - skipped_n, "{got}");
    assert_eq!(u(&got, "/incomplete"), 0, "{got}");
    assert_eq!(got["names"]["0x1800"], "data", "{got}");
    assert_eq!(got["end"], true, "{got}");
    assert_eq!(u(&r, "/rx/queues/0/egress/0/descriptors"), 1, "{r}");
    assert_whole_slots(&out, &r, skipped_n, &whole, &data);
}
