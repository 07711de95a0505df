//! The egress stage (issue #31) end to end, against a real SPEAD receiver: **spead2**
//! (PyPI, MeerKAT's SPEAD library) assembling rtdaq's heaps (`scripts/peers/spead_peer.py
//! egress-recv`, a `spead2.recv` stream and an `ItemGroup`).
//!
//! rtdaq runs `configs/host-udp-egress-spead.toml` in side A of a namespace pair (its
//! generator → 127.0.0.1:5000 → one RX queue whose egress stage forwards every payload) and
//! sends its heaps to spead2 in side B:
//!
//! - every heap arrives whole, the descriptors name the items, the end of stream arrives,
//!   and the data items are exactly the payloads rtdaq received (sequence header and pattern
//!   checked, no sequence number missing), as many as rtdaq's report says it sent;
//! - with nftables in side B dropping every 7th egress datagram (heaps of 4 payloads in 4
//!   packets each), every drop costs exactly one heap: spead2's incomplete heaps plus the
//!   heaps it never started (their first packet was the one dropped: spead2 cannot see
//!   those) equal nft's drop count, and the payloads missing at the receiver are those
//!   heaps' payloads;
//! - two multicast groups as destinations (heaps round-robin, sent out of side A's veth by
//!   `multicast_interface`): a spead2 receiver per group in side B gets the descriptors,
//!   every other data heap whole and the end of stream; together every payload;
//! - a chain: rtdaq A forwards to rtdaq B (`configs/host-spead2-rx.toml`, a `spead` format
//!   interface) in side B, which assembles every heap A sent, none incomplete or missing;
//! - a destination with no route from side A stops the start with exit 2, naming its key;
//! - the receiver killed (SIGKILL) mid-run: rtdaq keeps receiving (no gap on its own
//!   queue), counts what it could not deliver (`peer_gone`, from the ICMP port-unreachable
//!   answers) and every payload is accounted for (sent + not sent = taken); the run fails
//!   on that loss.
//!
//! Needs root (namespaces, nftables), `nft`, the repository's Python venv with spead2
//! (`scripts/install-test-deps.sh` makes `target/pyenv`) and `target/engines/rtdaq-socket`
//! (`scripts/build-engines.sh`); without them each test fails in `scripts/test.sh`
//! (`RTDAQ_TEST_REQUIRE=1`) and skips, recorded, elsewhere (`rtdaq_testbed::require`).

mod e2e;

use e2e::{edited, finish, root, show, start, tmp, u};
use rtdaq_testbed::{Side, VethPair};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// One at a time: each pins rtdaq's threads to cores 0 and 1.
static SERIAL: Mutex<()> = Mutex::new(());

/// The egress destination port in side B.
const PORT: &str = "7149";

fn python() -> PathBuf {
    root().join("target/pyenv/bin/python")
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
    let spead2 = Command::new(python())
        .args(["-c", "import spead2, numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !spead2 {
        return Some("no target/pyenv with spead2 (scripts/install-test-deps.sh makes it)".into());
    }
    if !root().join("target/engines/rtdaq-socket").exists() {
        return Some("no target/engines/rtdaq-socket (scripts/build-engines.sh)".into());
    }
    None
}

/// True when the test cannot run here: a failure in `scripts/test.sh`, a recorded skip
/// elsewhere.
fn skipped() -> bool {
    match skip_reason() {
        Some(why) => {
            rtdaq_testbed::require::skip(why);
            true
        }
        None => false,
    }
}

/// The shipped egress config sending to side B, at `rate_gbps`, with `packets_per_heap`
/// payloads per heap, descriptors only at the start.
fn config(pair: &VethPair, rate_gbps: &str, per_heap: u32, tag: &str) -> PathBuf {
    let ip = pair.ip(Side::B).to_string();
    edited(
        "host-udp-egress-spead.toml",
        &[
            (
                "destinations = [\"127.0.0.1:7149\"]",
                format!("destinations = [\"{ip}:{PORT}\"]"),
            ),
            (
                "packets_per_heap = 1 ",
                format!("packets_per_heap = {per_heap} "),
            ),
            ("descriptors_every = 1000 ", "descriptors_every = 0 ".into()),
            ("rate_gbps = 1.0 ", format!("rate_gbps = {rate_gbps} ")),
        ],
        tag,
    )
}

/// spead2 receiving in side B until the end of stream (or `timeout_s`), checking every data
/// item as 1400-byte rtdaq payloads; its stdout is piped.
fn receiver(pair: &VethPair, timeout_s: u32) -> Child {
    let ip = pair.ip(Side::B).to_string();
    let child = pair
        .command(Side::B, python().to_str().unwrap())
        .arg(spead_peer())
        .args(["egress-recv", &ip, PORT, "--payload-size", "1400"])
        // Every heap of the run fits the ring: the Python checks never hold spead2 up.
        .args(["--ring-heaps", "65536", "--timeout"])
        .arg(timeout_s.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn spead_peer.py");
    // spead2 binds within a fraction of a second; rtdaq's descriptors go first.
    std::thread::sleep(Duration::from_millis(800));
    child
}

/// Side B's ICMP "destination unreachable" messages sent so far (`/proc/net/snmp`, its
/// namespace's counters).
fn icmp_out_dest_unreachs(pair: &VethPair) -> u64 {
    let out = pair
        .command(Side::B, "cat")
        .arg("/proc/net/snmp")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut icmp = text.lines().filter(|l| l.starts_with("Icmp:"));
    let (names, values) = (icmp.next().unwrap_or(""), icmp.next().unwrap_or(""));
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "OutDestUnreachs")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or_else(|| panic!("no Icmp OutDestUnreachs in side B's /proc/net/snmp:\n{text}"))
}

/// Side B's UDP sockets bound to the egress port (`ss -Hlun`), one line each.
fn listeners(pair: &VethPair) -> Vec<String> {
    let out = pair
        .command(Side::B, "ss")
        .args(["-Hlun", &format!("sport = :{PORT}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The JSON the receiver printed.
fn received(child: Child) -> Value {
    e2e::peer_json(child, "spead_peer egress-recv")
}

/// The report's one egress sink.
fn egress(r: &Value) -> &Value {
    &r["rx"]["queues"][0]["egress"][0]
}

/// An nftables table in side B dropping every `every`th UDP datagram to the egress port
/// (index ≡ `phase` mod `every`), with a counter; the packets it dropped, read later.
fn nft_drop(pair: &VethPair, every: u32, phase: u32) {
    let rules = format!(
        "table inet rtdaq_egress {{\n chain input {{\n  type filter hook input priority -10; policy accept;\n  udp dport {PORT} numgen inc mod {every} {phase} counter drop\n }}\n}}\n"
    );
    let f = tmp("nft", "rules");
    std::fs::write(&f, rules).unwrap();
    let out = pair
        .command(Side::B, "nft")
        .arg("-f")
        .arg(&f)
        .output()
        .unwrap();
    assert!(out.status.success(), "nft -f: {}", show(&out));
}

fn nft_dropped(pair: &VethPair) -> u64 {
    let out = pair
        .command(Side::B, "nft")
        .args(["list", "table", "inet", "rtdaq_egress"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.split("counter packets ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no counter in {text}"))
}

#[test]
#[ignore = "needs root, nft, spead2 and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn spead2_assembles_every_heap_and_its_data_is_what_rtdaq_received() {
    if skipped() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pair = VethPair::new("egr-whole").unwrap();
    let cfg = config(&pair, "0.1", 1, "egress-whole");
    let rx = receiver(&pair, 30);
    let run = start(&pair, Side::A, "socket", &cfg, 3.0, "egress-whole");
    let (out, r) = finish(run, "egress-whole");
    let got = received(rx);
    let e = egress(&r);
    let received_by_rtdaq = u(&r, "/rx/totals/packets");
    assert_eq!(u(&r, "/lost"), 0, "{}", show(&out));
    assert!(received_by_rtdaq > 10_000, "{}", show(&out));
    // rtdaq: every payload it received went out, one heap each.
    assert_eq!(u(e, "/payloads"), received_by_rtdaq, "{e}");
    assert_eq!(u(e, "/payloads_sent"), received_by_rtdaq, "{e}");
    assert_eq!(u(e, "/heaps"), received_by_rtdaq, "{e}");
    assert_eq!(u(e, "/descriptors"), 1, "{e}");
    // spead2: every heap whole, described, ended; the data is the payloads, none missing.
    assert_eq!(u(&got, "/heaps"), received_by_rtdaq, "{got}");
    assert_eq!(u(&got, "/incomplete"), 0, "{got}");
    assert_eq!(got["end"], true, "{got}");
    assert_eq!(got["undescribed"], serde_json::json!([]), "{got}");
    for (id, name) in [
        ("0x1600", "timestamp"),
        ("0x1601", "packets"),
        ("0x1800", "data"),
    ] {
        assert_eq!(got["names"][id], name, "{got}");
    }
    assert_eq!(u(&got, "/data_bytes"), 1400 * received_by_rtdaq, "{got}");
    assert_eq!(u(&got, "/payloads/good"), received_by_rtdaq, "{got}");
    assert_eq!(u(&got, "/payloads/bad"), 0, "{got}");
    let s = &got["streams"]["1"];
    assert_eq!((u(s, "/gaps"), u(s, "/duplicates")), (0, 0), "{got}");
    assert_eq!(u(s, "/count"), received_by_rtdaq, "{got}");
    assert_eq!(got["cnt"]["missing"], 0, "{got}");
}

#[test]
#[ignore = "needs root, nft, spead2 and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn every_egress_datagram_nft_drops_costs_spead2_exactly_one_heap() {
    if skipped() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pair = VethPair::new("egr-nft").unwrap();
    // 4 payloads of 1400 B per heap: 5 608 bytes in 4 packets of at most 1472, so two
    // drops 7 datagrams apart never hit one heap. The descriptor heap (the first datagrams)
    // is spared: index 6, 13, ... are dropped.
    let cfg = config(&pair, "0.1", 4, "egress-nft");
    nft_drop(&pair, 7, 6);
    let rx = receiver(&pair, 12);
    let run = start(&pair, Side::A, "socket", &cfg, 3.0, "egress-nft");
    let (out, r) = finish(run, "egress-nft");
    let got = received(rx);
    let dropped = nft_dropped(&pair);
    let e = egress(&r);
    assert_eq!(u(&r, "/lost"), 0, "rtdaq sent everything: {}", show(&out));
    assert!(dropped > 100, "nft dropped {dropped}");
    // Each drop breaks a different heap (drops are 7 datagrams apart, heaps 4 packets
    // long). spead2 counts a heap that lost a later packet as incomplete; one that lost its
    // first packet it never starts, so that heap is simply missing. The end-of-stream
    // packet (one datagram) may be one nft dropped: then spead2 ends at its timeout.
    let (complete, incomplete) = (u(&got, "/heaps"), u(&got, "/incomplete"));
    let heaps = u(e, "/heaps");
    let vanished = heaps - complete - incomplete;
    let end_dropped = u64::from(got["end"] != true);
    assert!(
        incomplete > dropped / 2,
        "most drops hit a later packet: {got}"
    );
    assert_eq!(incomplete + vanished + end_dropped, dropped, "{got} vs {e}");
    // The receiver misses exactly the payloads of the heaps it lost: 4 each, but the last
    // heap of the run, which `finish` may have closed with fewer (its sequence numbers may
    // lie past the last one seen, so they are not all gaps).
    let s = &got["streams"]["1"];
    let sent = u(e, "/payloads_sent");
    let missing = sent - u(s, "/count");
    let lost_heaps = incomplete + vanished;
    assert!(
        missing <= 4 * lost_heaps && missing + 3 >= 4 * lost_heaps,
        "{missing} payloads missing, {lost_heaps} heaps lost: {got}"
    );
    assert!(u(s, "/gaps") <= missing, "{got}");
    assert_eq!(u(&got, "/payloads/bad"), 0, "{got}");
}

#[test]
#[ignore = "needs root, nft, spead2 and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn a_receiver_killed_mid_run_stalls_nothing_and_every_payload_is_accounted_for() {
    if skipped() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pair = VethPair::new("egr-kill").unwrap();
    let cfg = config(&pair, "0.2", 1, "egress-kill");
    // Side B's kernel answers every datagram to the dead port, not one a second (its default
    // per-peer ICMP rate limit let through as few as 3 in 3.5 s here, and none in one CI run).
    let st = pair
        .command(Side::B, "sysctl")
        .args(["-qw", "net.ipv4.icmp_ratelimit=0"])
        .status()
        .unwrap();
    assert!(
        st.success(),
        "sysctl net.ipv4.icmp_ratelimit=0 in side B: {st}"
    );
    let mut rx = receiver(&pair, 30);
    let run = start(&pair, Side::A, "socket", &cfg, 5.0, "egress-kill");
    std::thread::sleep(Duration::from_millis(1500));
    rx.kill().unwrap();
    let _ = rx.wait();
    // From here side B answers every datagram with an ICMP port unreachable (rate-limited),
    // which the sender's connected socket reports as ECONNREFUSED.
    let unreachable0 = icmp_out_dest_unreachs(&pair);
    let listening = listeners(&pair);
    let (out, r) = finish(run, "egress-kill");
    let why = format!(
        "side B after the kill: ICMP destination unreachables sent {}, UDP listeners on port {PORT}: {listening:?}",
        icmp_out_dest_unreachs(&pair) - unreachable0
    );
    let e = egress(&r);
    let q = &r["rx"]["queues"][0];
    // The receive path never waited for the downstream: no gap, nothing dropped on the queue.
    assert_eq!(u(q, "/seq_gaps"), 0, "{}", show(&out));
    assert_eq!(u(q, "/drops_total"), 0, "{}", show(&out));
    // Every payload taken is sent or counted, by reason; peer_gone from the refused sends.
    let taken = u(e, "/payloads");
    let not_sent: u64 = ["egress_full", "egress_error", "peer_gone"]
        .iter()
        .map(|k| u(&e["dropped"], &format!("/{k}")))
        .sum();
    assert_eq!(u(e, "/payloads_sent") + not_sent, taken, "{e}");
    assert!(u(&e["dropped"], "/peer_gone") > 0, "{e}; {why}");
    assert!(u(e, "/payloads_sent") > 0, "{e}");
    // The run fails on that loss, and says why.
    assert_eq!(u(&r, "/lost"), not_sent, "{}", show(&out));
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("Connection refused"), "{log}");
}

#[test]
#[ignore = "needs root, nft, spead2 and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn a_second_rtdaq_receives_the_egress_as_a_spead_stream_and_loses_nothing() {
    if skipped() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pair = VethPair::new("egr-chain").unwrap();
    let ip_b = pair.ip(Side::B).to_string();
    // B: the shipped SPEAD receiver (a `spead` format interface) on side B's address.
    let cfg_b = edited(
        "host-spead2-rx.toml",
        &[(
            "address = \"udp://127.0.0.1:7148\"",
            format!("address = \"udp://{ip_b}:7148\""),
        )],
        "egress-chain-b",
    );
    // A: the egress job, sending to B, 4 payloads per heap (4 packets each).
    let cfg_a = edited(
        "host-udp-egress-spead.toml",
        &[
            (
                "destinations = [\"127.0.0.1:7149\"]",
                format!("destinations = [\"{ip_b}:7148\"]"),
            ),
            ("packets_per_heap = 1 ", "packets_per_heap = 4 ".into()),
            ("rate_gbps = 1.0 ", "rate_gbps = 0.2 ".into()),
        ],
        "egress-chain-a",
    );
    let b = start(&pair, Side::B, "socket", &cfg_b, 6.0, "egress-chain-b");
    let a = start(&pair, Side::A, "socket", &cfg_a, 3.0, "egress-chain-a");
    let (out_a, ra) = finish(a, "egress-chain-a");
    let (out_b, rb) = finish(b, "egress-chain-b");
    let e = egress(&ra);
    assert_eq!(u(&ra, "/lost"), 0, "A: {}", show(&out_a));
    assert_eq!(u(e, "/payloads_sent"), u(&ra, "/rx/totals/packets"), "{e}");
    // B: every heap A sent (its data heaps, the descriptor heap; the end of stream is a
    // control heap) complete, none incomplete or missing, nothing lost.
    assert_eq!(u(&rb, "/lost"), 0, "B: {}", show(&out_b));
    let h = &rb["rx"]["totals"]["heaps"];
    assert_eq!(
        (u(h, "/incomplete"), u(h, "/missing")),
        (0, 0),
        "B: {}",
        show(&out_b)
    );
    assert_eq!(
        u(h, "/complete"),
        u(e, "/heaps") + u(e, "/descriptors"),
        "B heaps {h} vs A {e}"
    );
    assert_eq!(u(&rb, "/rx/totals/packets"), u(e, "/datagrams"), "{e}");
}

#[test]
#[ignore = "needs root, nft, spead2 and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn heaps_go_round_robin_to_two_multicast_groups_each_receiver_assembling_its_share() {
    if skipped() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pair = VethPair::new("egr-mcast").unwrap();
    let (ip_a, ip_b) = (pair.ip(Side::A).to_string(), pair.ip(Side::B).to_string());
    let groups = ["239.9.31.1", "239.9.31.2"];
    let cfg = edited(
        "host-udp-egress-spead.toml",
        &[
            (
                "destinations = [\"127.0.0.1:7149\"]",
                format!(
                    "destinations = [\"{}:{PORT}\", \"{}:{PORT}\"]\nmulticast_interface = \"{ip_a}\"",
                    groups[0], groups[1]
                ),
            ),
            ("descriptors_every = 1000 ", "descriptors_every = 0 ".into()),
            ("rate_gbps = 1.0 ", "rate_gbps = 0.1 ".into()),
        ],
        "egress-mcast",
    );
    // One spead2 receiver per group in side B, each joining its group on B's veth.
    let rx: Vec<Child> = groups
        .iter()
        .map(|g| {
            pair.command(Side::B, python().to_str().unwrap())
                .arg(spead_peer())
                .args([
                    "egress-recv",
                    &ip_b,
                    PORT,
                    "--group",
                    g,
                    "--payload-size",
                    "1400",
                ])
                .args(["--ring-heaps", "65536", "--timeout", "30"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn spead_peer.py")
        })
        .collect();
    std::thread::sleep(Duration::from_millis(800));
    let run = start(&pair, Side::A, "socket", &cfg, 3.0, "egress-mcast");
    let (out, r) = finish(run, "egress-mcast");
    let got: Vec<Value> = rx.into_iter().map(received).collect();
    let e = egress(&r);
    let sent = u(e, "/payloads_sent");
    assert_eq!(u(&r, "/lost"), 0, "{}", show(&out));
    assert_eq!(sent, u(&r, "/rx/totals/packets"), "{e}");
    // Each group got the descriptors, every other data heap, whole, and the end of stream.
    for g in &got {
        assert_eq!(g["end"], true, "{g}");
        assert_eq!(u(g, "/incomplete"), 0, "{g}");
        assert_eq!(g["names"]["0x1800"], "data", "{g}");
        assert_eq!(u(g, "/payloads/bad"), 0, "{g}");
        let share = u(g, "/heaps");
        assert!(share.abs_diff(sent / 2) <= 1, "{share} of {sent}: {g}");
    }
    let good: u64 = got.iter().map(|g| u(g, "/payloads/good")).sum();
    assert_eq!(good, sent, "{got:?}");
}

#[test]
#[ignore = "needs root, nft, spead2 and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn a_destination_with_no_route_stops_the_start_with_exit_2_naming_its_key() {
    if skipped() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pair = VethPair::new("egr-route").unwrap();
    // TEST-NET-2: side A has no route there (only its veth's link and loopback); nothing is
    // ever sent.
    let cfg = edited(
        "host-udp-egress-spead.toml",
        &[(
            "destinations = [\"127.0.0.1:7149\"]",
            "destinations = [\"127.0.0.1:7149\", \"198.51.100.7:7149\"]".into(),
        )],
        "egress-route",
    );
    let out = pair
        .command(Side::A, e2e::bin("socket").to_str().unwrap())
        .args(["run", "--config", cfg.to_str().unwrap(), "--duration", "1"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        log.contains("egress[0].destinations[1]") && log.contains("198.51.100.7:7149"),
        "{log}"
    );
}
