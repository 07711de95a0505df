//! Instrument stream formats (`[interfaces.format]`, issue #17) end to end, with real peers:
//!
//! - `baseband` (PyPI, the VLBI file library) writes a 4-thread VDIF file; its frames go one
//!   per datagram (`scripts/peers/vdif_peer.py send`) into `rtdaq-socket` on
//!   `configs/host-vdif-rx.toml` in a namespace whose nftables drop every 7th datagram:
//!   rtdaq's `lost` equals nft's counter exactly, frames per thread add up, and the frame
//!   rate was learned;
//! - rtdaq's VDIF generator (`configs/host-loopback-vdif.toml`) recorded by a `raw` sink
//!   opens in `baseband.vdif`: 4 threads, station "Ar", frame numbers continuous, every
//!   received frame in the file;
//! - rtdaq's counter generator (`configs/host-loopback-counter.toml`) over the loopback of a
//!   namespace whose nftables drop every 11th datagram: `lost` equals nft's counter, per beam;
//! - **spead2** (PyPI, MeerKAT's SPEAD library) `send.UdpStream` sends heaps
//!   (`scripts/peers/spead_peer.py send`) into `rtdaq-socket` on `configs/host-spead2-rx.toml`:
//!   heaps and packets equal what spead2 sent, end-of-stream seen; then with nftables dropping
//!   every 7th datagram, `lost` equals nft's counter exactly;
//! - rtdaq's SPEAD generator (`configs/host-loopback-spead.toml`, TX only) into a
//!   `spead2.recv` stream: spead2 assembles every heap, with the timestamp and data rtdaq put
//!   in.
//!
//! Needs root (namespaces, nftables), `nft`, the repository's Python venv with baseband and
//! spead2 (`scripts/install-test-deps.sh` makes `target/pyenv`) and
//! `target/engines/rtdaq-socket` (`scripts/build-engines.sh`); without them each test
//! fails in `scripts/test.sh` (`RTDAQ_TEST_REQUIRE=1`) and skips, recorded, elsewhere
//! (`rtdaq_testbed::require`).

mod e2e;

use e2e::{edited, finish, http_get, mac, root, show, start, tcpreplay, tmp, u};
use rtdaq_testbed::{Side, VethPair};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// One at a time: each pins rtdaq's threads to cores 0 and 1.
static SERIAL: Mutex<()> = Mutex::new(());

fn python() -> PathBuf {
    root().join("target/pyenv/bin/python")
}

fn peer() -> PathBuf {
    root().join("scripts/peers/vdif_peer.py")
}

fn spead_peer() -> PathBuf {
    root().join("scripts/peers/spead_peer.py")
}

/// Why the tests cannot run here, if they cannot.
fn skip_reason() -> Option<String> {
    if !rtdaq_testbed::is_root() {
        return Some("not root (namespaces and nftables need it)".into());
    }
    let nft = ["/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft"]
        .iter()
        .any(|p| Path::new(p).exists());
    if !nft {
        return Some("no nft (Debian: apt-get install nftables)".into());
    }
    let bb = Command::new(python())
        .args(["-c", "import baseband, spead2, scapy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !bb {
        return Some(
            "no target/pyenv with baseband, spead2 and scapy (scripts/install-test-deps.sh makes it)"
                .into(),
        );
    }
    if !root().join("target/engines/rtdaq-socket").exists() {
        return Some("no target/engines/rtdaq-socket (scripts/build-engines.sh)".into());
    }
    None
}

/// True when the test cannot run here: a failure in `scripts/test.sh`
/// (`rtdaq_testbed::require`), a recorded skip elsewhere.
fn skipped(_test: &str) -> bool {
    match skip_reason() {
        Some(why) => {
            rtdaq_testbed::require::skip(why);
            true
        }
        None => false,
    }
}

/// An nftables table in `side`'s namespace dropping every `every`th UDP datagram to `port`
/// (the one with index ≡ `phase` mod `every`, counting from 0), with a counter.
fn nft_drop(pair: &VethPair, side: Side, port: u16, every: u32, phase: u32) {
    let rules = format!(
        "table inet rtdaq_fmt {{\n chain input {{\n  type filter hook input priority -10; policy accept;\n  udp dport {port} numgen inc mod {every} {phase} counter drop\n }}\n}}\n"
    );
    let f = tmp("nft", "rules");
    std::fs::write(&f, rules).unwrap();
    let out = pair
        .command(side, "nft")
        .arg("-f")
        .arg(&f)
        .output()
        .unwrap();
    assert!(out.status.success(), "nft -f: {}", show(&out));
}

/// The packets nft's rule dropped so far.
fn nft_dropped(pair: &VethPair, side: Side) -> u64 {
    let out = pair
        .command(side, "nft")
        .args(["list", "table", "inet", "rtdaq_fmt"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let n = text
        .split("counter packets ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok());
    n.unwrap_or_else(|| panic!("no counter in {text}"))
}

fn py(args: &[&str]) -> Value {
    json_of(Command::new(python()).arg(peer()).args(args), args)
}

/// The JSON a peer script printed (it must succeed).
fn json_of(cmd: &mut Command, args: &[&str]) -> Value {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "peer {args:?}: {}", show(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
#[ignore = "needs root, nft, baseband and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn baseband_vdif_with_every_7th_datagram_dropped_loses_exactly_those() {
    if skipped("baseband_vdif_with_every_7th_datagram_dropped_loses_exactly_those") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let file = tmp("bb", "vdif");
    // 4 threads x 2500 frames of 1032 bytes at 1000 frames/s: 2.5 s of data, two second
    // boundaries (the receiver learns the rate at the first).
    let made = py(&[
        "write",
        file.to_str().unwrap(),
        "--threads",
        "4",
        "--frames",
        "2500",
        "--frame-bytes",
        "1032",
        "--fps",
        "1000",
    ]);
    assert_eq!(made["frames"], 10_000);
    let pair = VethPair::new("fmt-vdif").unwrap();
    let ip = pair.ip(Side::B).to_string();
    let cfg = edited(
        "host-vdif-rx.toml",
        &[(
            "address = \"udp://127.0.0.1:7150\"",
            format!("address = \"udp://{ip}:7150\""),
        )],
        "vdif-rx",
    );
    // Index ≡ 5 mod 7: neither the first 4 frames (one per thread: the streams' bases) nor
    // the last 4 (tail loss is invisible to sequence numbers) are dropped.
    nft_drop(&pair, Side::B, 7150, 7, 5);
    let rx = start(&pair, Side::B, "socket", &cfg, 5.0, "vdif-rx");
    let sent = pair
        .command(Side::A, python().to_str().unwrap())
        .arg(peer())
        .args([
            "send",
            file.to_str().unwrap(),
            &ip,
            "7150",
            "--pps",
            "20000",
        ])
        .output()
        .unwrap();
    assert!(sent.status.success(), "{}", show(&sent));
    let (out, r) = finish(rx, "vdif-rx");
    let dropped = nft_dropped(&pair, Side::B);
    let _ = std::fs::remove_file(&file);
    assert_eq!(
        dropped,
        10_000 / 7 + u64::from(10_000 % 7 > 5),
        "{}",
        show(&out)
    );
    let received = u(&r, "/rx/totals/packets");
    assert_eq!(received + dropped, 10_000, "{}", show(&out));
    assert_eq!(
        u(&r, "/lost"),
        dropped,
        "lost = nft's drops:\n{}",
        show(&out)
    );
    assert_eq!(u(&r, "/rx/totals/seq_gaps"), dropped);
    assert_eq!(u(&r, "/rx/totals/malformed"), 0);
    let q = &r["rx"]["queues"][0];
    assert_eq!(q["format"]["kind"], "vdif");
    assert_eq!(q["format"]["frames_per_second"], 1000, "learned");
    assert_eq!(q["format"]["learned"], true);
    let streams = q["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 4, "one stream per VDIF thread");
    let station = u64::from(u16::from_be_bytes(*b"Ar"));
    let mut missing = 0;
    for (t, s) in streams.iter().enumerate() {
        assert_eq!(u(s, "/id"), station << 10 | t as u64, "{s}");
        assert_eq!(u(s, "/packets") + u(s, "/missing"), 2500, "{s}");
        missing += u(s, "/missing");
    }
    assert_eq!(missing, dropped);
    // The socket's address is on veth B: its NIC counters (issue #18) saw every datagram
    // arrive (nft dropped above the device), and no drop before the queues.
    let nic = &r["nics"][0];
    assert_eq!(nic["netdev"], pair.ifname(Side::B), "{}", show(&out));
    assert_eq!(nic["rx_dropped"], 0, "{nic}");
    let rx_packets = nic["changed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["source"] == "kernel" && c["name"] == "rx_packets")
        .unwrap_or_else(|| panic!("kernel rx_packets: {nic}"));
    assert!(u(rx_packets, "/delta") >= 10_000, "{nic}");
    // The report is exit code 1: frames were lost.
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
}

/// Issue #29: 100 VDIF threads (baseband's) into one queue whose table holds 64 streams:
/// the 36 threads beyond it are counted as `streams_overflow` in the text report, the JSON
/// report and `/metrics` (scraped during the run), and as lost (exit 1). With
/// `max_streams = 128` the same stream is tracked whole: 100 streams, nothing lost.
#[test]
#[ignore = "needs root, baseband and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn hundred_vdif_threads_overflow_a_64_stream_table_visibly_and_fit_a_larger_one() {
    if skipped("hundred_vdif_threads_overflow_a_64_stream_table_visibly_and_fit_a_larger_one") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let file = tmp("bb100", "vdif");
    let made = py(&[
        "write",
        file.to_str().unwrap(),
        "--threads",
        "100",
        "--frames",
        "40",
        "--frame-bytes",
        "1032",
        "--fps",
        "1000",
    ]);
    assert_eq!(made["frames"], 4000);
    let pair = VethPair::new("fmt-vdif100").unwrap();
    let ip = pair.ip(Side::B).to_string();
    for (max_streams, tracked, overflow) in [(None, 64, 36 * 40), (Some(128), 100, 0)] {
        let tag = format!("vdif100-{}", max_streams.unwrap_or(64));
        let table = max_streams.map_or(String::new(), |n| format!("max_streams = {n}\n"));
        let cfg = edited(
            "host-vdif-rx.toml",
            &[
                (
                    "address = \"udp://127.0.0.1:7150\"",
                    format!("address = \"udp://{ip}:7150\"\n{table}"),
                ),
                ("[run]\n", format!("[run]\nmetrics = \"{ip}:9464\"\n")),
            ],
            &tag,
        );
        let rx = start(&pair, Side::B, "socket", &cfg, 4.0, &tag);
        let sent = pair
            .command(Side::A, python().to_str().unwrap())
            .arg(peer())
            .args([
                "send",
                file.to_str().unwrap(),
                &ip,
                "7150",
                "--pps",
                "20000",
            ])
            .output()
            .unwrap();
        assert!(sent.status.success(), "{}", show(&sent));
        // The live counters settle once the queue is idle: scrape until they do.
        let addr: std::net::SocketAddr = format!("{ip}:9464").parse().unwrap();
        let line = format!(
            "rtdaq_rx_checks_total{{counter=\"streams_overflow\",interface=\"vdif\",queue=\"0\"}} {overflow}"
        );
        let t0 = std::time::Instant::now();
        let metrics = loop {
            let (code, body) = pair.in_ns(Side::B, || http_get(addr, "/metrics"));
            assert_eq!(code, 200, "{body}");
            if body.contains(&line) || t0.elapsed() > std::time::Duration::from_secs(2) {
                break body;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        assert!(metrics.contains(&line), "{line} in:\n{metrics}");
        assert!(
            metrics.contains(&format!(
                "rtdaq_rx_streams{{interface=\"vdif\",queue=\"0\"}} {tracked}"
            )),
            "{metrics}"
        );
        let (out, r) = finish(rx, &tag);
        let text = show(&out);
        assert_eq!(u(&r, "/rx/totals/packets"), 4000, "{text}");
        let q = &r["rx"]["queues"][0];
        assert_eq!(u(q, "/streams_overflow"), overflow, "{text}");
        assert_eq!(u(q, "/streams_tracked"), tracked, "{text}");
        assert_eq!(u(q, "/max_streams"), max_streams.unwrap_or(64), "{text}");
        assert_eq!(u(q, "/seq_gaps"), 0, "{text}");
        assert_eq!(u(&r, "/lost"), overflow, "overflow counts as lost: {text}");
        if overflow > 0 {
            assert!(
                text.contains(&format!(
                    "{overflow} packets of streams beyond the table of 64 were not sequence-checked: counted as lost; raise max_streams of interface vdif"
                )),
                "{text}"
            );
            assert_eq!(out.status.code(), Some(1), "{text}");
        } else {
            assert!(text.contains("streams 100 of 128 · overflow 0"), "{text}");
            assert_eq!(out.status.code(), Some(0), "{text}");
        }
    }
}

#[test]
#[ignore = "needs root, baseband and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn generated_vdif_recorded_raw_opens_in_baseband_with_continuous_frames() {
    if skipped("generated_vdif_recorded_raw_opens_in_baseband_with_continuous_frames") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tmp("vdif-rec", "d");
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = edited(
        "host-loopback-vdif.toml",
        &[
            (
                "consumer_core = 0\n",
                "consumer_core = 0\nrecord = [\"vdif\"]\n".into(),
            ),
            (
                "[run]\n",
                "[[recorders]]\nname = \"vdif\"\nformat = \"raw\"\ndirectory = \"unused\"\nfile_name = \"{config}.vdif\"\n\n[run]\n".into(),
            ),
        ],
        "vdif-rec",
    );
    let json = tmp("vdif-rec", "json");
    let out = Command::new(root().join("target/engines/rtdaq-socket"))
        .args(["run", "--config", cfg.to_str().unwrap(), "--duration", "2"])
        .arg("--output-dir")
        .arg(&dir)
        .arg("--report-json")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let received = u(&r, "/rx/totals/packets");
    assert!(received > 4 * 1000, "2 s at 6400 frames/s: {}", show(&out));
    assert_eq!(u(&r, "/lost"), 0);
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "vdif"))
        .unwrap_or_else(|| panic!("no .vdif in {}", dir.display()));
    let c = py(&[
        "check",
        file.to_str().unwrap(),
        "--threads",
        "4",
        "--fps",
        "1600",
    ]);
    assert_eq!(c["frames"], received, "{c}");
    assert_eq!(c["continuous"], true, "{c}");
    assert_eq!(c["station"], "Ar", "{c}");
    assert_eq!(c["bps"], 2, "{c}");
    let threads = c["threads"].as_object().unwrap();
    assert_eq!(threads.len(), 4, "{c}");
    for n in threads.values() {
        let n = n.as_u64().unwrap();
        assert!(n.abs_diff(received / 4) <= 1, "{c}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&json);
}

/// `config` (a loopback generator → receiver deployment on UDP `port`) run for 2 s at
/// 20 000 pps inside a namespace whose nftables drop every `every`th datagram: received +
/// dropped = sent, `lost` = nft's counter, the queue's format is `kind` with streams `ids`
/// whose missing add up to the drops (save a dropped last packet of a stream: tail loss,
/// which only the generator's count reveals), 0 malformed; returns the RX queue's report.
fn loopback_with_drops(
    config: &str,
    rate: (&str, &str),
    (port, every): (u16, u32),
    (kind, ids): (&str, &[u64]),
    tag: &str,
) -> Value {
    let pair = VethPair::new(&format!("fmt-{tag}")).unwrap();
    // Inside the namespace: generator and receiver over its loopback, nft on its input.
    let cfg = edited(config, &[(rate.0, rate.1.into())], tag);
    nft_drop(&pair, Side::B, port, every, 4);
    let up = pair
        .command(Side::B, "ip")
        .args(["link", "set", "lo", "up"])
        .output()
        .unwrap();
    assert!(up.status.success(), "{}", show(&up));
    let rx = start(&pair, Side::B, "socket", &cfg, 2.0, tag);
    let (out, r) = finish(rx, tag);
    let dropped = nft_dropped(&pair, Side::B);
    assert!(
        dropped > 10_000 / u64::from(every),
        "2 s at 20 000 pps, every {every}th: {dropped}\n{}",
        show(&out)
    );
    let sent = u(&r, "/tx/totals/packets");
    assert_eq!(
        u(&r, "/rx/totals/packets") + dropped,
        sent,
        "{}",
        show(&out)
    );
    assert_eq!(
        u(&r, "/lost"),
        dropped,
        "lost = nft's drops:\n{}",
        show(&out)
    );
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let q = r["rx"]["queues"][0].clone();
    assert_eq!(q["format"]["kind"], kind);
    let streams = q["streams"].as_array().unwrap();
    assert_eq!(
        streams.iter().map(|s| u(s, "/id")).collect::<Vec<_>>(),
        ids,
        "{}",
        show(&out)
    );
    let missing: u64 = streams.iter().map(|s| u(s, "/missing")).sum();
    let n = ids.len() as u64;
    assert!(
        dropped - missing <= n,
        "{missing} of {dropped}: {}",
        show(&out)
    );
    assert_eq!(u(&q, "/malformed"), 0);
    // The live line names the streams and the one missing the most while the run goes on.
    let live = String::from_utf8_lossy(&out.stderr);
    assert!(
        live.contains(&format!(", streams {n} (most missing: 0x")),
        "live line: {live}"
    );
    q
}

#[test]
#[ignore = "needs root, nft and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn counter_stream_with_every_11th_datagram_dropped_loses_exactly_those() {
    if skipped("counter_stream_with_every_11th_datagram_dropped_loses_exactly_those") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Two beams (stream field values 1 and 2).
    loopback_with_drops(
        "host-loopback-counter.toml",
        ("rate_gbps = 0.5", "rate_pps = 20000"),
        (7152, 11),
        ("counter", &[1, 2]),
        "ctr",
    );
}

#[test]
#[ignore = "needs root, nft and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn codif_stream_with_every_13th_datagram_dropped_loses_exactly_those() {
    if skipped("codif_stream_with_every_13th_datagram_dropped_loses_exactly_those") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 20 000 frames/s of two threads at 8000 frames per 1-s period: 2 period boundaries.
    // Threads 0 and 1 of group 0.
    let q = loopback_with_drops(
        "host-loopback-codif.toml",
        ("rate_pps = 16000", "rate_pps = 20000"),
        (7153, 13),
        ("codif", &[0, 1]),
        "codif",
    );
    assert_eq!(q["format"]["frames_per_second"], 8000, "frames per period");
}

/// Sends `heaps` spead2 heaps (5000 bytes, 1472-byte packets, end-of-stream after them)
/// from `pair`'s side A into rtdaq on side B; rtdaq's output and report, spead2's count.
fn spead2_into_rtdaq(
    pair: &VethPair,
    cfg: &Path,
    heaps: u32,
    tag: &str,
) -> (std::process::Output, Value, Value) {
    let ip = pair.ip(Side::B).to_string();
    let rx = start(pair, Side::B, "socket", cfg, 4.0, tag);
    let n = heaps.to_string();
    let args = ["send", ip.as_str(), "7148", "--heaps", n.as_str(), "--end"];
    let sent = json_of(
        pair.command(Side::A, python().to_str().unwrap())
            .arg(spead_peer())
            .args(args),
        &args,
    );
    let (out, r) = finish(rx, tag);
    (out, r, sent)
}

#[test]
#[ignore = "needs root, nft, spead2 and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn spead2_heaps_arrive_whole_and_every_7th_datagram_dropped_is_lost_exactly() {
    if skipped("spead2_heaps_arrive_whole_and_every_7th_datagram_dropped_is_lost_exactly") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pair = VethPair::new("fmt-spead").unwrap();
    let ip = pair.ip(Side::B).to_string();
    let cfg = edited(
        "host-spead2-rx.toml",
        &[(
            "address = \"udp://127.0.0.1:7148\"",
            format!("address = \"udp://{ip}:7148\""),
        )],
        "spead-rx",
    );
    // 1. Nothing dropped: heaps and packets are what spead2 sent.
    let (out, r, sent) = spead2_into_rtdaq(&pair, &cfg, 400, "spead-rx");
    let packets = u(&sent, "/packets");
    assert_eq!(
        u(&sent, "/packets_per_heap"),
        4,
        "5000 B in 1416 + 2 x 1432 + 720"
    );
    assert_eq!(packets, 400 * 4 + 1, "{sent}");
    assert_eq!(u(&r, "/rx/totals/packets"), packets, "{}", show(&out));
    assert_eq!(u(&r, "/lost"), 0, "{}", show(&out));
    let h = &r["rx"]["totals"]["heaps"];
    assert_eq!(
        (
            u(h, "/complete"),
            u(h, "/incomplete"),
            u(h, "/missing"),
            u(h, "/ends")
        ),
        (400, 0, 0, 1),
        "{}",
        show(&out)
    );
    let q = &r["rx"]["queues"][0];
    assert_eq!(q["format"]["kind"], "spead");
    assert_eq!(q["streams"].as_array().unwrap().len(), 1);
    assert_eq!(u(&q["streams"][0], "/packets"), packets);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));

    // 2. nftables drop every 7th datagram (index ≡ 2 mod 7): lost = nft's counter. Not
    // index 4000, the end-of-stream packet: a heap lost after the last one is invisible.
    nft_drop(&pair, Side::B, 7148, 7, 2);
    let (out, r, sent) = spead2_into_rtdaq(&pair, &cfg, 1000, "spead-rx");
    let packets = u(&sent, "/packets");
    let dropped = nft_dropped(&pair, Side::B);
    assert_eq!(packets, 4001, "{sent}");
    assert_eq!(dropped, 572, "indices 2, 9, ..., 3999: {}", show(&out));
    assert_eq!(
        u(&r, "/rx/totals/packets") + dropped,
        packets,
        "{}",
        show(&out)
    );
    assert_eq!(
        u(&r, "/lost"),
        dropped,
        "lost = nft's drops:\n{}",
        show(&out)
    );
    assert_eq!(u(&r, "/rx/totals/seq_gaps"), dropped);
    assert_eq!(u(&r, "/rx/totals/malformed"), 0);
    let h = &r["rx"]["totals"]["heaps"];
    // No heap loses all 4 packets to 1 drop in 7: every heap arrived, some incomplete.
    assert_eq!(
        u(h, "/complete") + u(h, "/incomplete"),
        1000,
        "{}",
        show(&out)
    );
    assert_eq!(u(h, "/missing"), 0);
    assert!(u(h, "/incomplete") >= dropped / 2, "{}", show(&out));
    assert_eq!(u(h, "/ends"), 1, "{}", show(&out));
    assert_eq!(u(&r["rx"]["queues"][0]["streams"][0], "/missing"), dropped);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
}

#[test]
#[ignore = "needs root, spead2 and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn generated_spead_heaps_assemble_in_spead2_with_rtdaqs_items() {
    if skipped("generated_spead_heaps_assemble_in_spead2_with_rtdaqs_items") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // TX only: the generator sends to spead2's port, nothing of rtdaq receives.
    let cfg = edited(
        "host-loopback-spead.toml",
        &[
            (
                "[[memory_regions]]\nname = \"rx_bufs\"\nkind = \"host\"\nbuf_size = 8192\nbuf_count = 2048\n\n",
                String::new(),
            ),
            (
                "[[interfaces.rx_queues]]\nid = 0\ncpu_core = 1\nrt_priority = 50\nbatch_size = 64\ntimeout_us = 100\nring_depth = 1024\nmemory_regions = [\"rx_bufs\"]\nconsumer_core = 0\n\n",
                String::new(),
            ),
            (
                "destination = \"udp://127.0.0.1:7149\"",
                "destination = \"udp://127.0.0.1:7160\"".into(),
            ),
            ("rate_gbps = 0.5", "rate_gbps = 0.2".into()),
        ],
        "spead-tx",
    );
    let args = [
        "recv",
        "127.0.0.1",
        "7160",
        "--heap-bytes",
        "65536",
        "--heap-step",
        "2",
        "--timeout",
        "6",
    ];
    let recv = Command::new(python())
        .arg(spead_peer())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let json = tmp("spead-tx", "json");
    let out = Command::new(root().join("target/engines/rtdaq-socket"))
        .args(["run", "--config", cfg.to_str().unwrap(), "--duration", "2"])
        .arg("--report-json")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let got = recv.wait_with_output().unwrap();
    assert!(got.status.success(), "spead_peer recv: {}", show(&got));
    let c: Value = serde_json::from_slice(&got.stdout).unwrap();
    let sent = u(&r, "/tx/totals/packets");
    // 65536-byte heaps in 8000-byte packets: 7944 + 7 x 7960 + 1872 bytes, 9 packets; the
    // generator stops at a heap boundary of both senders.
    assert_eq!(sent % 18, 0, "{}", show(&out));
    let heaps = sent / 9;
    assert!(heaps > 500, "2 s at 0.2 Gb/s: {}", show(&out));
    assert_eq!(u(&c, "/heaps"), heaps, "spead2 assembled every heap: {c}");
    assert_eq!((u(&c, "/good"), u(&c, "/bad")), (heaps, 0), "{c}");
    assert_eq!(u(&c, "/stats/incomplete_heaps_evicted"), 0, "{c}");
    for residue in ["0", "1"] {
        let t = &c["timestamps"][residue];
        assert_eq!(
            (u(t, "/0"), u(t, "/1"), u(t, "/2")),
            (0, heaps / 2 - 1, heaps / 2),
            "sender {residue}: timestamps 0.. without a gap: {c}"
        );
    }
}

#[test]
#[ignore = "needs root, scapy, tcpreplay and target/engines/rtdaq-afpacket; scripts/test.sh runs it"]
fn scapy_ecpri_over_ethernet_replayed_into_afpacket_tracks_seq_ids_per_pc_id() {
    if skipped("scapy_ecpri_over_ethernet_replayed_into_afpacket_tracks_seq_ids_per_pc_id") {
        return;
    }
    if !root().join("target/engines/rtdaq-afpacket").exists() {
        rtdaq_testbed::require::skip(
            "no target/engines/rtdaq-afpacket (scripts/build-engines.sh afpacket)",
        );
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pair = VethPair::new("fmt-ecpri").unwrap();
    let (dst, src) = (mac(pair.mac(Side::B)), mac(pair.mac(Side::A)));
    // 4 PC_IDs x 610 IQ messages (SEQ_ID wraps twice); PC_ID index 2 loses every 50th
    // (12 of them, none its last).
    let pcap = tmp("ecpri", "pcap");
    let args = [
        "write",
        pcap.to_str().unwrap(),
        "--dst-mac",
        dst.as_str(),
        "--src-mac",
        src.as_str(),
        "--pc-ids",
        "4",
        "--messages",
        "610",
        "--skip-pc",
        "2",
        "--skip-every",
        "50",
    ];
    let made = json_of(
        Command::new(python())
            .arg(root().join("scripts/peers/ecpri_peer.py"))
            .args(args),
        &args,
    );
    assert_eq!(
        (u(&made, "/frames"), u(&made, "/skipped")),
        (2428, 12),
        "{made}"
    );
    let cfg = edited(
        "veth-afpacket-ecpri-rx.toml",
        &[(
            "address = \"rtdaq0b\"",
            format!("address = \"{}\"", pair.ifname(Side::B)),
        )],
        "ecpri-rx",
    );
    let rx = start(&pair, Side::B, "afpacket", &cfg, 4.0, "ecpri-rx");
    tcpreplay(&pair, &pcap, 5000);
    let (out, r) = finish(rx, "ecpri-rx");
    let _ = std::fs::remove_file(&pcap);
    assert_eq!(u(&r, "/rx/totals/packets"), 2428, "{}", show(&out));
    assert_eq!(u(&r, "/lost"), 12, "the 12 left out:\n{}", show(&out));
    assert_eq!(u(&r, "/rx/totals/malformed"), 0, "{}", show(&out));
    let q = &r["rx"]["queues"][0];
    assert_eq!(q["format"]["kind"], "ecpri");
    let streams = q["streams"].as_array().unwrap();
    assert_eq!(
        streams.iter().map(|s| u(s, "/id")).collect::<Vec<_>>(),
        [0x100, 0x101, 0x102, 0x103],
        "message type 0 << 16 | PC_ID: {}",
        show(&out)
    );
    for s in streams {
        let lost = if u(s, "/id") == 0x102 { 12 } else { 0 };
        assert_eq!(
            (u(s, "/packets"), u(s, "/missing")),
            (610 - lost, lost),
            "{s}"
        );
    }
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
}
