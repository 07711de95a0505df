//! The raw engines end to end (issue #4): a generator process in one network namespace, the
//! appliance in the other, joined by a private veth pair (`rtdaq-testbed`).
//!
//! The engine is a compile-time feature, so these tests run the per-engine binaries that
//! `scripts/build-engines.sh` builds into `target/engines/rtdaq-{socket,afpacket,afxdp}`. They
//! need root (namespaces, raw sockets) and those binaries, so a plain `cargo test` skips them
//! (`#[ignore]`); `scripts/test.sh` builds the binaries and runs them with `-- --ignored`,
//! where a missing binary or missing root fails with a message saying what to do.
//!
//! Covered: lossless runs per engine; cross-engine interop (AF_PACKET TX into AF_XDP RX and
//! back); the socket engine's UDP TX (real kernel-built frames) into each raw RX; jumbo
//! frames on AF_PACKET; a real external sender, `tcpreplay`, replaying a pcap of good and
//! malformed frames that this test writes.

mod e2e;

use e2e::*;
use rtdaq_testbed::{Side, VethPair};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn pair(tag: &str, mtu: u32) -> VethPair {
    let p = VethPair::builder(tag)
        .mtu(mtu)
        .build()
        .unwrap_or_else(|e| panic!("test bed: {e}"));
    p.add_static_neighbors().expect("static neighbours");
    p
}

/// A shipped config with the test bed's names and addresses swapped for `pair`'s, plus edits.
fn config(file: &str, pair: &VethPair, edits: &[(&str, String)], tag: &str) -> PathBuf {
    let mut text = std::fs::read_to_string(root().join("configs").join(file)).unwrap();
    let swaps = [
        ("rtdaq0a", pair.ifname(Side::A).to_string()),
        ("rtdaq0b", pair.ifname(Side::B).to_string()),
        ("169.254.90.1", pair.ip(Side::A).to_string()),
        ("169.254.90.2", pair.ip(Side::B).to_string()),
        ("02:72:74:00:5a:02", mac(pair.mac(Side::B))),
    ];
    // The test bed's names: whichever the file has.
    for (from, to) in &swaps {
        text = text.replace(from, to);
    }
    for (from, to) in edits {
        assert!(text.contains(from), "{file}: no {from:?} to replace");
        text = text.replace(from, to);
    }
    let path = rtdaq_testbed::test_path(format!("rtdaq-raw-{tag}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Receiver first (in B, `secs + 3` s), then the generator (in A, `secs` s): returns both
/// reports after checking that every generated packet arrived exactly once, intact.
fn lossless(
    pair: &VethPair,
    rx: (&str, PathBuf),
    tx: (&str, PathBuf),
    secs: f64,
    tag: &str,
) -> (Value, Value) {
    let (r, t, _) = lossless_as(pair, rx, tx, secs, tag, &[]);
    (r, t)
}

/// [`lossless`] with the receiver run by `rx_wrapper` (see [`start_as`]); also returns the
/// receiver's log.
fn lossless_as(
    pair: &VethPair,
    rx: (&str, PathBuf),
    tx: (&str, PathBuf),
    secs: f64,
    tag: &str,
    rx_wrapper: &[String],
) -> (Value, Value, String) {
    let rtag = format!("{tag}-rx");
    let ttag = format!("{tag}-tx");
    let receiver = start_as(pair, Side::B, rx_wrapper, rx.0, &rx.1, secs + 3.0, &rtag);
    let sender = start(pair, Side::A, tx.0, &tx.1, secs, &ttag);
    let (tout, t) = finish(sender, &ttag);
    let (rout, r) = finish(receiver, &rtag);
    assert_eq!(tout.status.code(), Some(0), "sender: {}", show(&tout));
    assert_eq!(rout.status.code(), Some(0), "receiver: {}", show(&rout));
    let sent = u(&t, "/tx/totals/packets");
    assert!(
        sent > 1000,
        "the generator sent only {sent}: {}",
        show(&tout)
    );
    assert_eq!(
        u(&t, "/tx/totals/drops_total"),
        0,
        "sender drops: {}",
        show(&tout)
    );
    assert_eq!(
        u(&r, "/rx/totals/packets"),
        sent,
        "delivered != sent\nreceiver: {}",
        show(&rout)
    );
    for k in ["seq_gaps", "corrupt", "malformed", "duplicates"] {
        assert_eq!(u(&r, &format!("/rx/totals/{k}")), 0, "{k}: {}", show(&rout));
    }
    assert_eq!(u(&r, "/io_thread_allocations"), 0);
    assert_eq!(u(&t, "/io_thread_allocations"), 0);
    // Where the receive times came from (issue #33): AF_PACKET's frames carry the kernel's
    // stamp (veth has no hardware clock); AF_XDP and DPDK stamp after the poll.
    let want = if rx.0 == "afpacket" { "kernel" } else { "poll" };
    for q in r["rx"]["queues"].as_array().unwrap() {
        if u(q, "/packets") > 0 {
            assert_eq!(q["timestamps"], serde_json::json!([want]), "{q}");
        }
    }
    nic_counters(pair, Side::B, &r, "rx_packets", sent, &rout);
    nic_counters(pair, Side::A, &t, "tx_packets", sent, &tout);
    (r, t, String::from_utf8_lossy(&rout.stderr).into_owned())
}

/// The report's NIC counters of the veth on `side` (issue #18): one device, the veth, no
/// pause frames, drops or warnings; its kernel `counter` grew by at least `packets`; every
/// driver counter it lists ends at what `ethtool -S` prints after the run (the XDP counters
/// freeze once the program is detached, the others do not move on this quiet link).
fn nic_counters(
    pair: &VethPair,
    side: Side,
    r: &Value,
    counter: &str,
    packets: u64,
    out: &std::process::Output,
) {
    eprintln!("NIC counters of {}: {}", pair.ifname(side), r["nics"]);
    let nics = r["nics"]
        .as_array()
        .unwrap_or_else(|| panic!("no nics in the report: {}", show(out)));
    assert_eq!(nics.len(), 1, "{nics:?}");
    let n = &nics[0];
    assert_eq!(n["netdev"], pair.ifname(side), "{n}");
    assert_eq!(n["driver"], "veth", "{n}");
    for k in ["pause_received", "pause_sent", "rx_dropped"] {
        assert_eq!(n[k], 0, "{k}: {n}");
    }
    assert_eq!(n["warnings"].as_array().map(Vec::len), Some(0), "{n}");
    let changed = n["changed"].as_array().expect("changed");
    let kernel = changed
        .iter()
        .find(|c| c["source"] == "kernel" && c["name"] == counter)
        .unwrap_or_else(|| panic!("kernel {counter} did not change: {n}"));
    assert!(
        u(kernel, "/delta") >= packets,
        "kernel {counter} +{} < {packets} packets: {n}",
        kernel["delta"]
    );
    // AF_XDP: the veth's XDP program redirected exactly the frames the queue received.
    if let Some(c) = changed
        .iter()
        .find(|c| c["name"] == "rx_queue_0_xdp_redirect")
    {
        assert_eq!(u(c, "/delta"), packets, "xdp_redirect: {n}");
    }
    let cli = pair
        .exec(side, "ethtool", &["-S", pair.ifname(side)])
        .expect("ethtool -S (scripts/install-test-deps.sh installs ethtool)");
    let text = String::from_utf8_lossy(&cli.stdout);
    for c in changed.iter().filter(|c| c["source"] == "ethtool") {
        let name = c["name"].as_str().unwrap();
        let want = text
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("ethtool -S has no {name}:\n{text}"));
        assert_eq!(
            c["end"].to_string(),
            want.trim(),
            "{name}: {n}\nethtool -S:\n{text}"
        );
    }
}

/// A paced, short generator: `pps` packets/s of `payload` bytes.
fn tx_edits(pps: u32, payload: u32) -> Vec<(&'static str, String)> {
    vec![
        ("rate_gbps = 0.5", format!("rate_pps = {pps}")),
        ("payload_size = 1400", format!("payload_size = {payload}")),
        ("duration_s = 10\n\n[run]", "\n[run]".to_string()),
    ]
}

#[test]
#[ignore = "needs root and scripts/build-engines.sh; scripts/test.sh runs it"]
fn afxdp_to_afxdp_lossless() {
    let p = pair("e2e-xdp", 1500);
    let rx = config("veth-afxdp-rx.toml", &p, &[], "xx-rx");
    let tx = config("veth-afxdp-tx.toml", &p, &tx_edits(20_000, 1400), "xx-tx");
    lossless(&p, ("afxdp", rx), ("afxdp", tx), 2.0, "xx");
}

#[test]
#[ignore = "needs root and scripts/build-engines.sh; scripts/test.sh runs it"]
fn afpacket_to_afpacket_lossless() {
    let p = pair("e2e-pkt", 1500);
    let rx = config("veth-afpacket-rx.toml", &p, &[], "pp-rx");
    let tx = config(
        "veth-afpacket-tx.toml",
        &p,
        &tx_edits(20_000, 1400),
        "pp-tx",
    );
    lossless(&p, ("afpacket", rx), ("afpacket", tx), 2.0, "pp");
}

#[test]
#[ignore = "needs root and scripts/build-engines.sh; scripts/test.sh runs it"]
fn afpacket_jumbo_frames_lossless() {
    let p = pair("e2e-jumbo", 9000);
    let big = [
        ("mtu = 1500", "mtu = 9000".to_string()),
        ("buf_size = 2048", "buf_size = 9216".to_string()),
    ];
    let mut rx_edits = big.to_vec();
    rx_edits.push(("frame_size = 2048", "frame_size = 9216".to_string()));
    let rx = config("veth-afpacket-rx.toml", &p, &rx_edits, "jj-rx");
    let mut t = tx_edits(5_000, 8900);
    t.extend(big.iter().cloned());
    t.push(("frame_size = 2048", "frame_size = 9216".to_string()));
    let tx = config("veth-afpacket-tx.toml", &p, &t, "jj-tx");
    let (r, _) = lossless(&p, ("afpacket", rx), ("afpacket", tx), 2.0, "jj");
    // Raw engines count whole frames: 8900 B payload + 14 Ethernet + 20 IPv4 + 8 UDP.
    assert_eq!(r["bytes_are"], "frame");
    assert_eq!(
        u(&r, "/rx/totals/bytes"),
        u(&r, "/rx/totals/packets") * 8942
    );
}

/// AF_XDP multi-buffer (issue #20): MTU 9000 on the veth pair, 8000 B payloads from the
/// AF_PACKET generator into AF_XDP RX with 4096 B UMEM frames, so every frame (8042 B)
/// arrives in three UMEM frames (XDP_USE_SG) and the consumer sees three segments.
#[test]
#[ignore = "needs root and scripts/build-engines.sh; scripts/test.sh runs it"]
fn afxdp_jumbo_frames_lossless() {
    let p = pair("e2e-xjumbo", 9000);
    let rx_edits = [
        ("mtu = 1500", "mtu = 9000".to_string()),
        ("frame_size = 2048", "frame_size = 4096".to_string()),
        ("buf_size = 2048", "buf_size = 4096".to_string()),
    ];
    let rx = config("veth-afxdp-rx.toml", &p, &rx_edits, "xj-rx");
    let mut t = tx_edits(5_000, 8000);
    t.extend([
        ("mtu = 1500", "mtu = 9000".to_string()),
        ("buf_size = 2048", "buf_size = 9216".to_string()),
        ("frame_size = 2048", "frame_size = 9216".to_string()),
    ]);
    let tx = config("veth-afpacket-tx.toml", &p, &t, "xj-tx");
    let (r, _, log) = lossless_as(&p, ("afxdp", rx), ("afpacket", tx), 2.0, "xj", &[]);
    assert_eq!(r["bytes_are"], "frame");
    assert_eq!(
        u(&r, "/rx/totals/bytes"),
        u(&r, "/rx/totals/packets") * 8042
    );
    assert!(log.contains("multi-buffer"), "the engine says it: {log}");
}

/// Two RX queues with flow rules on one jumbo interface: both sockets on NIC queue 0 share one
/// multi-buffer UMEM (the second binds with `XDP_SHARED_UMEM` alone: the kernel refuses
/// `XDP_USE_SG` beside it), and the steering program sends each stream's jumbo frames to its
/// queue by UDP source port: every frame delivered once, intact, on the queue of its stream.
#[test]
#[ignore = "needs root and scripts/build-engines.sh; scripts/test.sh runs it"]
fn afxdp_jumbo_frames_on_two_queues_sharing_one_umem() {
    let p = pair("e2e-xjumbo2", 9000);
    let second_queue_and_rules = "[[interfaces.rx_queues]]
id = 1
cpu_core = 0
rt_priority = 50
batch_size = 64
timeout_us = 100
ring_depth = 1024
memory_regions = [\"umem\"]
mode = \"direct\"

[[flows]]
interface = \"veth_b\"
id = 1
queue = 0
[flows.match]
udp_src = 4000

[[flows]]
interface = \"veth_b\"
id = 2
queue = 1
[flows.match]
udp_src = 4001
";
    let rx_edits = [
        ("mtu = 1500", "mtu = 9000".to_string()),
        ("frame_size = 2048", "frame_size = 4096".to_string()),
        ("buf_size = 2048", "buf_size = 4096".to_string()),
        (
            "[[flows]]\ninterface = \"veth_b\"\nid = 1\nqueue = 0\n[flows.match]\nudp_dst = 5000\n",
            second_queue_and_rules.to_string(),
        ),
    ];
    let rx = config("veth-afxdp-rx.toml", &p, &rx_edits, "xj2-rx");
    let mut t = tx_edits(5_000, 8000);
    t.extend([
        ("mtu = 1500", "mtu = 9000".to_string()),
        ("buf_size = 2048", "buf_size = 9216".to_string()),
        ("frame_size = 2048", "frame_size = 9216".to_string()),
        (
            "payload_size = 8000",
            "payload_size = 8000\nstreams = 2".to_string(),
        ),
    ]);
    let tx = config("veth-afpacket-tx.toml", &p, &t, "xj2-tx");
    let (r, t, log) = lossless_as(&p, ("afxdp", rx), ("afpacket", tx), 2.0, "xj2", &[]);
    let sent = u(&t, "/tx/totals/packets");
    let queues = r["rx"]["queues"].as_array().expect("rx queues");
    assert_eq!(queues.len(), 2, "{r}");
    let per: Vec<u64> = queues
        .iter()
        .map(|q| q["packets"].as_u64().unwrap())
        .collect();
    // The generator alternates its two lanes (source ports 4000, 4001).
    assert_eq!(
        per,
        vec![sent.div_ceil(2), sent / 2],
        "each stream on its queue: {r}"
    );
    assert_eq!(u(&r, "/rx/totals/bytes"), sent * 8042);
    assert!(log.contains("multi-buffer"), "the engine says it: {log}");
}

#[test]
#[ignore = "needs root and scripts/build-engines.sh; scripts/test.sh runs it"]
fn afpacket_tx_into_afxdp_rx_and_back() {
    let p = pair("e2e-cross", 1500);
    let rx = config("veth-afxdp-rx.toml", &p, &[], "px-rx");
    let tx = config(
        "veth-afpacket-tx.toml",
        &p,
        &tx_edits(20_000, 1400),
        "px-tx",
    );
    lossless(&p, ("afxdp", rx), ("afpacket", tx), 2.0, "px");
    let rx = config("veth-afpacket-rx.toml", &p, &[], "xp-rx");
    let tx = config("veth-afxdp-tx.toml", &p, &tx_edits(20_000, 1400), "xp-tx");
    lossless(&p, ("afpacket", rx), ("afxdp", tx), 2.0, "xp");
}

/// The socket engine's generator in A: real kernel-built UDP frames (IP ident, checksums,
/// neighbour lookup) into a raw receiver in B.
fn socket_tx(p: &VethPair, tag: &str) -> PathBuf {
    let text = format!(
        r#"name = "socket-tx-{tag}"
platform = "host"
[engine]
kind = "socket"
[[memory_regions]]
name = "tx_bufs"
kind = "host"
buf_size = 2048
buf_count = 1024
[[interfaces]]
name = "kernel_udp"
address = "udp://{a}:4000"
mtu = 1500
default_action = "drop"
[[interfaces.tx_queues]]
id = 0
cpu_core = 0
batch_size = 64
ring_depth = 1024
memory_regions = ["tx_bufs"]
[generator]
interface = "kernel_udp"
tx_queue = 0
destination = "udp://{b}:5000"
payload_size = 1400
rate_pps = 20000
[run]
drain_ms = 0
"#,
        a = p.ip(Side::A),
        b = p.ip(Side::B)
    );
    let path = rtdaq_testbed::test_path(format!("rtdaq-raw-{tag}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
#[ignore = "needs root and scripts/build-engines.sh; scripts/test.sh runs it"]
fn socket_engine_udp_into_each_raw_rx() {
    let p = pair("e2e-sock", 1500);
    for engine in ["afpacket", "afxdp"] {
        let rx = config(
            &format!("veth-{engine}-rx.toml"),
            &p,
            &[],
            &format!("s{engine}-rx"),
        );
        let tx = socket_tx(&p, &format!("s{engine}-tx"));
        lossless(&p, (engine, rx), ("socket", tx), 2.0, &format!("s{engine}"));
    }
}

// ---------------------------------------------------------------- the unit's privileges

/// Issue #18: the shipped unit's privileges suffice for each raw engine. The receiver runs
/// as user nobody with exactly the unit's capabilities (AF_PACKET) or the unit's plus its
/// AF_XDP drop-in's (`CAP_BPF`), and is lossless with its queue threads at SCHED_FIFO and
/// memory locked; AF_XDP without the drop-in fails before any packet with an error that
/// names the missing capability.
#[test]
#[ignore = "needs root and scripts/build-engines.sh; scripts/test.sh runs it"]
fn afxdp_and_afpacket_run_with_only_the_units_privileges() {
    let p = pair("e2e-unit", 1500);
    for (engine, dropin) in [("afpacket", None), ("afxdp", Some("afxdp.conf"))] {
        let ambient = unit_caps("AmbientCapabilities", dropin);
        assert_eq!(ambient, unit_caps("CapabilityBoundingSet", dropin));
        let rx = config(
            &format!("veth-{engine}-rx.toml"),
            &p,
            &[],
            &format!("u{engine}-rx"),
        );
        let tx = config(
            &format!("veth-{engine}-tx.toml"),
            &p,
            &tx_edits(20_000, 1400),
            &format!("u{engine}-tx"),
        );
        let tag = format!("u{engine}");
        let (_, _, log) = lossless_as(
            &p,
            (engine, rx),
            (engine, tx),
            2.0,
            &tag,
            &as_unit(&ambient),
        );
        eprintln!("{engine} as the unit ({}):\n{log}", ambient.join(","));
        for bad in [
            "CAP_",
            "without SCHED_FIFO",
            "not locked",
            "permission denied",
        ] {
            assert!(
                !log.contains(bad),
                "{engine} as the unit: {bad:?} in\n{log}"
            );
        }
    }
    // AF_XDP with the base unit only (no CAP_BPF).
    let caps = unit_caps("AmbientCapabilities", None);
    let rx = config("veth-afxdp-rx.toml", &p, &[], "unobpf-rx");
    let out = p
        .command(Side::B, "setpriv")
        .args(&as_unit(&caps)[1..])
        .arg(bin("afxdp"))
        .args(["run", "--config", rx.to_str().unwrap(), "--duration", "1"])
        .output()
        .unwrap();
    let text = show(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("CAP_BPF"), "the error names CAP_BPF: {text}");
}

// ---------------------------------------------------------------- tcpreplay

/// Frames of the replay: `good` rtdaq frames (stream 9, seq 0..good) to UDP port 5000, and
/// the malformed kinds the issue lists, each `bad_each` times.
fn replay_frames(p: &VethPair, good: u64, bad_each: usize) -> (Vec<Vec<u8>>, usize) {
    replay_frames_of(p, good, bad_each, 200)
}

/// [`replay_frames`] with `plen`-byte payloads.
fn replay_frames_of(
    p: &VethPair,
    good: u64,
    bad_each: usize,
    plen: usize,
) -> (Vec<Vec<u8>>, usize) {
    use rtdaq_core::wire::{
        emit_udp_frame, fill_pattern, SeqHeader, UdpChecksumMode, UdpFrameSpec,
    };
    let spec = |len: usize| UdpFrameSpec {
        dst_mac: p.mac(Side::B),
        src_mac: p.mac(Side::A),
        src_ip: p.ip(Side::A).octets(),
        dst_ip: p.ip(Side::B).octets(),
        src_port: 4000,
        dst_port: 5000,
        payload_len: len,
        checksum: UdpChecksumMode::Compute,
        ..UdpFrameSpec::default()
    };
    let frame = |seq: u64| {
        let s = spec(plen);
        let mut f = vec![0u8; s.frame_len()];
        let off = s.payload_offset();
        let h = SeqHeader {
            flags: rtdaq_core::wire::seqhdr::FLAG_PATTERN,
            stream_id: 9,
            seq,
            tx_timestamp_ns: 0,
            payload_len: (plen - 32) as u32,
        };
        h.emit(&mut f[off..]).unwrap();
        fill_pattern(9, seq, &mut f[off + 32..]);
        emit_udp_frame(&mut f, &s).unwrap();
        f
    };
    let mut out: Vec<Vec<u8>> = (0..good).map(frame).collect();
    let mut bad = 0;
    for k in 0..bad_each {
        let base = frame(1_000_000 + k as u64);
        // truncated IPv4: the IP total length says more than the frame holds
        let mut t = base.clone();
        t.truncate(14 + 20 + 8 + 50);
        out.push(t);
        // bad IHL (4 words < 5)
        let mut b = base.clone();
        b[14] = 0x44;
        out.push(b);
        // bad UDP length (longer than the IP payload)
        let mut l = base.clone();
        let too_long = (plen + 8 + 100) as u16;
        l[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&too_long.to_be_bytes());
        out.push(l);
        // runt: an Ethernet header and 6 bytes of an IPv4 header
        out.push(base[..20].to_vec());
        bad += 4;
    }
    (out, bad)
}

/// `tcpreplay` sends `pcap` out of side A at 5000 packets/s.
fn tcpreplay_5000pps(p: &VethPair, pcap: &Path) {
    tcpreplay(p, pcap, 5000);
}

/// A classic pcap file (LINKTYPE_ETHERNET, microsecond stamps 1 ms apart).
fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut b = Vec::new();
    for v in [
        0xa1b2_c3d4u32.to_le_bytes().as_slice(),
        &2u16.to_le_bytes(),
        &4u16.to_le_bytes(),
    ] {
        b.extend_from_slice(v);
    }
    b.extend_from_slice(&0i32.to_le_bytes()); // thiszone
    b.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
    b.extend_from_slice(&65535u32.to_le_bytes()); // snaplen
    b.extend_from_slice(&1u32.to_le_bytes()); // Ethernet
    for (i, f) in frames.iter().enumerate() {
        b.extend_from_slice(&((i / 1000) as u32).to_le_bytes());
        b.extend_from_slice(&(((i % 1000) * 1000) as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    std::fs::write(path, b).unwrap();
}

/// tcpreplay'd jumbo frames (8000 B payloads, MTU 9000) into AF_XDP multi-buffer RX (4096 B
/// UMEM frames): every good frame delivered intact, every malformed one counted.
#[test]
#[ignore = "needs root, tcpreplay and scripts/build-engines.sh; scripts/test.sh runs it"]
fn tcpreplay_jumbo_frames_into_afxdp_multi_buffer() {
    let p = pair("e2e-xreplay", 9000);
    let (frames, bad) = replay_frames_of(&p, 2000, 5, 8000);
    let pcap = rtdaq_testbed::test_path("rtdaq-raw-jumbo.pcap");
    write_pcap(&pcap, &frames);
    let rx = config(
        "veth-afxdp-rx.toml",
        &p,
        &[
            (
                "default_action = \"drop\"",
                "default_action = 0".to_string(),
            ),
            ("mtu = 1500", "mtu = 9000".to_string()),
            ("frame_size = 2048", "frame_size = 4096".to_string()),
            ("buf_size = 2048", "buf_size = 4096".to_string()),
        ],
        "xjr-rx",
    );
    let text = std::fs::read_to_string(&rx).unwrap();
    let cut = text.find("[[flows]]").unwrap();
    let end = text.find("[run]").unwrap();
    std::fs::write(&rx, format!("{}{}", &text[..cut], &text[end..])).unwrap();
    let receiver = start(&p, Side::B, "afxdp", &rx, 5.0, "xjr");
    tcpreplay_5000pps(&p, &pcap);
    let (out, r) = finish(receiver, "xjr");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(u(&r, "/rx/totals/packets"), 2000, "{}", show(&out));
    assert_eq!(u(&r, "/rx/totals/bytes"), 2000 * 8042, "{}", show(&out));
    assert_eq!(
        u(&r, "/rx/totals/drops/malformed"),
        bad as u64,
        "every malformed frame counted: {}",
        show(&out)
    );
    for k in ["seq_gaps", "corrupt", "malformed"] {
        assert_eq!(u(&r, &format!("/rx/totals/{k}")), 0, "{k}: {}", show(&out));
    }
    let _ = std::fs::remove_file(pcap);
}

#[test]
#[ignore = "needs root, tcpreplay and scripts/build-engines.sh; scripts/test.sh runs it"]
fn tcpreplay_good_and_malformed_frames_into_each_raw_rx() {
    assert!(
        std::process::Command::new("tcpreplay")
            .arg("--version")
            .output()
            .is_ok(),
        "tcpreplay is missing: apt-get install tcpreplay (scripts/test.sh installs it)"
    );
    let p = pair("e2e-replay", 1500);
    let (frames, bad) = replay_frames(&p, 2000, 5);
    let pcap = rtdaq_testbed::test_path("rtdaq-raw.pcap");
    write_pcap(&pcap, &frames);
    for engine in ["afpacket", "afxdp"] {
        // No flow rules: every frame reaches queue 0, where the engine parses it.
        let rx = config(
            &format!("veth-{engine}-rx.toml"),
            &p,
            &[(
                "default_action = \"drop\"",
                "default_action = 0".to_string(),
            )],
            &format!("r{engine}-rx"),
        );
        let text = std::fs::read_to_string(&rx).unwrap();
        let cut = text.find("[[flows]]").unwrap();
        let end = text.find("[run]").unwrap();
        std::fs::write(&rx, format!("{}{}", &text[..cut], &text[end..])).unwrap();
        let rtag = format!("r{engine}");
        let receiver = start(&p, Side::B, engine, &rx, 5.0, &rtag);
        let t0 = Instant::now();
        tcpreplay_5000pps(&p, &pcap);
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "replay too slow for the window"
        );
        let (out, r) = finish(receiver, &rtag);
        assert_eq!(out.status.code(), Some(0), "{engine}: {}", show(&out));
        assert_eq!(
            u(&r, "/rx/totals/packets"),
            2000,
            "{engine}: {}",
            show(&out)
        );
        assert_eq!(
            u(&r, "/rx/totals/drops/malformed"),
            bad as u64,
            "{engine}: every malformed frame counted: {}",
            show(&out)
        );
        for k in ["seq_gaps", "corrupt", "malformed"] {
            assert_eq!(u(&r, &format!("/rx/totals/{k}")), 0, "{engine} {k}");
        }
    }
    let _ = std::fs::remove_file(pcap);
}

#[test]
#[ignore = "needs root and scripts/build-engines.sh; scripts/test.sh runs it"]
fn missing_interface_is_a_clear_error_for_each_raw_engine() {
    for engine in ["afpacket", "afxdp"] {
        let text = std::fs::read_to_string(root().join(format!("configs/veth-{engine}-rx.toml")))
            .unwrap()
            .replace("rtdaq0b", "nosuchdev0");
        let cfg = rtdaq_testbed::test_path(format!("rtdaq-raw-nodev-{engine}.toml"));
        std::fs::write(&cfg, text).unwrap();
        let out = std::process::Command::new(bin(engine))
            .args(["run", "--config", cfg.to_str().unwrap(), "--duration", "1"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{engine}: {}", show(&out));
        assert!(err.contains("nosuchdev0"), "{engine}: {err}");
        assert!(err.contains("interfaces[0].address"), "{engine}: {err}");
    }
}

#[test]
#[ignore = "needs root, DPDK and scripts/build-engines.sh; scripts/test.sh runs it"]
fn dpdk_ring_pmd_loopback_lossless() {
    // The shipped configs/vdev-dpdk-ring.toml (embedded in the binary): the generator sends
    // into DPDK's ring PMD, whose TX ring is its RX ring; one RX queue receives it all.
    let json = report_path("dpdk-ring");
    let _ = std::fs::remove_file(&json);
    let out = std::process::Command::new(bin("dpdk"))
        .args(["run", "--duration", "2", "--report-json"])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["engine"], "dpdk");
    assert_eq!(r["bytes_are"], "frame");
    let sent = u(&r, "/tx/totals/packets");
    assert!(
        sent > 25_000,
        "0.3 Gb/s of 1400 B for 2 s is ~53 000 frames, sent {sent}"
    );
    assert_eq!(u(&r, "/rx/totals/packets"), sent);
    assert_eq!(u(&r, "/lost"), 0);
    assert_eq!(u(&r, "/rx/totals/drops_total"), 0);
    assert_eq!(u(&r, "/io_thread_allocations"), 0);
}

// ---------------------------------------------------------------- recording (issue #16)

/// The file with extension `ext` in `dir`.
/// Issue #18: a DPDK port's own counters are live in `/metrics` (read once a second by the
/// main thread), not only in the report at the end.
#[test]
#[ignore = "needs root, DPDK and scripts/build-engines.sh; scripts/test.sh runs it"]
fn dpdk_ring_pmd_port_counters_are_live_in_metrics() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let json = report_path("dpdk-metrics");
    let mut child = std::process::Command::new(bin("dpdk"))
        .args([
            "run",
            "--duration",
            "4",
            "--metrics",
            &addr.to_string(),
            "--report-json",
        ])
        .arg(&json)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let value = |text: &str, series: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series))
            .and_then(|v| v.trim().parse().ok())
    };
    let rx = "rtdaq_port_packets_total{direction=\"rx\",interface=\"ring\",port=\"net_ring0\"}";
    // Scrapes every 300 ms until the port's counters appear (the EAL takes a while to start;
    // the main thread reads the port a second into the run), then one a second later.
    let t0 = Instant::now();
    let first = loop {
        std::thread::sleep(Duration::from_millis(300));
        if let Ok(s) = std::net::TcpStream::connect(addr) {
            drop(s);
            let (code, text) = http_get(addr, "/metrics");
            assert_eq!(code, 200, "{text}");
            if value(&text, rx).is_some_and(|v| v > 0) {
                break text;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "no port counters in /metrics after 5 s"
        );
    };
    std::thread::sleep(Duration::from_millis(1100));
    let (_, second) = http_get(addr, "/metrics");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let (a, b) = (value(&first, rx), value(&second, rx));
    assert!(
        a.is_some_and(|a| a > 0) && b > a,
        "the port's RX packets grow during the run: {a:?} then {b:?}\n{second}"
    );
    assert!(
        second.contains("# TYPE rtdaq_port_counter gauge"),
        "{second}"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(
        b.unwrap() <= u(&r, "/ports/0/ipackets"),
        "the report's end count is the last"
    );
}

fn recorded(dir: &Path, ext: &str) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|f| f.extension().is_some_and(|x| x == ext))
        .unwrap_or_else(|| panic!("no .{ext} in {}", dir.display()))
}

/// A recording of `received` 1400-byte payloads in `dir` (the shipped record configs' two
/// recorders): capinfos counts every frame in the pcap, the raw file holds every payload
/// less its 32-byte sequence header. Returns the pcap.
fn assert_recorded(dir: &Path, received: u64) -> PathBuf {
    let pcap = recorded(dir, "pcap");
    let caps = std::process::Command::new("capinfos")
        .args(["-c", "-M"])
        .arg(&pcap)
        .output()
        .expect("capinfos (scripts/install-test-deps.sh installs it)");
    let said = String::from_utf8_lossy(&caps.stdout);
    assert!(
        said.contains(&format!("Number of packets:   {received}")),
        "capinfos: {said}"
    );
    assert_eq!(
        std::fs::metadata(recorded(dir, "raw")).unwrap().len(),
        received * (1400 - 32),
        "raw: the payloads less their 32-byte sequence header"
    );
    pcap
}

/// The veth record configs' edits: both recorders write into `d`.
fn record_into(d: &str) -> [(&'static str, String); 2] {
    [
        ("directory = \"recordings\"", format!("directory = \"{d}\"")),
        (
            "format = \"raw\"\n",
            format!("format = \"raw\"\ndirectory = \"{d}\"\n"),
        ),
    ]
}

/// The DPDK engine's record stage (`configs/vdev-dpdk-ring-record.toml`: the ring PMD loops
/// the generator's frames back): every received frame is in the pcap (capinfos), every
/// payload less its sequence header in the raw file, straight from the mbufs.
#[test]
#[ignore = "needs root, capinfos and scripts/build-engines.sh; scripts/test.sh runs it"]
fn dpdk_ring_pmd_records_every_frame() {
    let dir = tmp("dpdk-rec", "d");
    let _ = std::fs::remove_dir_all(&dir);
    let json = report_path("dpdk-rec");
    let out = std::process::Command::new(bin("dpdk"))
        .args(["run", "--config"])
        .arg(root().join("configs/vdev-dpdk-ring-record.toml"))
        .args(["--duration", "2", "--output-dir"])
        .arg(&dir)
        .arg("--report-json")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let received = u(&r, "/rx/totals/packets");
    assert!(received > 25_000, "{}", show(&out));
    assert_eq!(u(&r, "/lost"), 0);
    assert_recorded(&dir, received);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&json);
}

/// The AF_XDP engine's record stage (`configs/veth-afxdp-record.toml`, direct mode: the
/// I/O thread validates and records from the UMEM): every received frame is in the pcap
/// (capinfos) and every payload, less its sequence header, in the raw file.
#[test]
#[ignore = "needs root, capinfos and scripts/build-engines.sh; scripts/test.sh runs it"]
fn afxdp_records_every_frame() {
    let p = pair("e2e-xrec", 1500);
    let dir = tmp("xrec", "d");
    let _ = std::fs::remove_dir_all(&dir);
    let rx = config(
        "veth-afxdp-record.toml",
        &p,
        &record_into(&dir.display().to_string()),
        "xrec-rx",
    );
    let tx = config(
        "veth-afpacket-tx.toml",
        &p,
        &tx_edits(20_000, 1400),
        "xrec-tx",
    );
    let (r, _) = lossless(&p, ("afxdp", rx), ("afpacket", tx), 2.0, "xrec");
    assert_recorded(&dir, u(&r, "/rx/totals/packets"));
    for s in 0..2 {
        for k in ["record_full", "record_error"] {
            assert_eq!(
                u(&r, &format!("/rx/queues/0/record/{s}/dropped/{k}")),
                0,
                "sink {s} {k}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs root, tcpreplay, capinfos and scripts/build-engines.sh; scripts/test.sh runs it"]
fn afpacket_records_frames_that_tcpreplay_and_rtdaq_replay_lossless() {
    let p = pair("e2e-rec", 1500);
    let dir = tmp("rec", "d");
    let _ = std::fs::remove_dir_all(&dir);
    // 1. The AF_PACKET engine records what it receives: frames to pcap, payloads to raw.
    let rx = config(
        "veth-afpacket-record.toml",
        &p,
        &record_into(&dir.display().to_string()),
        "rec-rx",
    );
    let tx = config("veth-afpacket-tx.toml", &p, &tx_edits(5000, 1400), "rec-tx");
    let (r, _) = lossless(&p, ("afpacket", rx), ("afpacket", tx.clone()), 2.0, "rec");
    let received = u(&r, "/rx/totals/packets");
    let pcap = assert_recorded(&dir, received);
    // 2. tcpreplay sends the recorded frames into the AF_XDP and the AF_PACKET engine: every
    //    one arrives intact.
    for (engine, file) in [
        ("afxdp", "veth-afxdp-rx.toml"),
        ("afpacket", "veth-afpacket-rx.toml"),
    ] {
        let tag = format!("rec-replay-{engine}");
        let rx = config(file, &p, &[], &tag);
        let receiver = start(
            &p,
            Side::B,
            engine,
            &rx,
            received as f64 / 5000.0 + 3.0,
            &tag,
        );
        tcpreplay_5000pps(&p, &pcap);
        let (out, x) = finish(receiver, &tag);
        assert_eq!(out.status.code(), Some(0), "{engine}: {}", show(&out));
        assert_eq!(
            u(&x, "/rx/totals/packets"),
            received,
            "{engine}: {}",
            show(&out)
        );
        for k in ["seq_gaps", "corrupt", "malformed", "duplicates"] {
            assert_eq!(
                u(&x, &format!("/rx/totals/{k}")),
                0,
                "{engine} {k}: {}",
                show(&out)
            );
        }
    }
    // 3. rtdaq's own replay (the AF_PACKET engine sending the recorded frames as they are)
    //    into the AF_PACKET receiver: lossless, as the original stream.
    let text = std::fs::read_to_string(&tx).unwrap().replace(
        "[generator]\n",
        &format!("[generator]\nreplay = \"{}\"\n", pcap.display()),
    );
    std::fs::write(&tx, text).unwrap();
    let rx2 = config("veth-afpacket-rx.toml", &p, &[], "rec-rx2");
    let (r2, t2) = lossless(&p, ("afpacket", rx2), ("afpacket", tx), 3.0, "rec2");
    assert_eq!(u(&t2, "/tx/totals/packets"), received);
    assert_eq!(u(&r2, "/lost"), 0);
    let _ = std::fs::remove_dir_all(&dir);
}
