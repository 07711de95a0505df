//! The DPDK engine end to end on a veth pair (issue #5): `dpdk-testpmd` (Debian's `dpdk`) as a
//! real peer sending into rtdaq's DPDK RX over `net_af_packet` and `net_af_xdp` (paced, and an
//! unpaced flood that must not stall the `net_af_xdp` port), rtdaq's DPDK TX into rtdaq's
//! AF_PACKET RX (with `pacing = "nic"`, which `net_af_packet` refuses: the report says so),
//! and the EAL misconfiguration errors (unknown vdev, no hugepages).
//!
//! Like `raw.rs`, these run the per-engine binaries that `scripts/build-engines.sh` builds
//! (`target/engines/rtdaq-{dpdk,afpacket}`) in the namespaces of an `rtdaq_testbed::VethPair`.
//! They need root, DPDK and those binaries, so a plain `cargo test` skips them (`#[ignore]`);
//! `scripts/test.sh` runs them with `-- --ignored --test-threads 1`.
//!
//! Every DPDK process here uses `--no-huge -m 512 --no-shconf` and its own `--file-prefix`, so
//! the two DPDK processes of a test (and other tests' DPDK processes) never share EAL state.
//! testpmd runs with `--no-mlockall`: its default `mlockall` of 512 MiB of no-huge memory
//! stalled it for seconds on the 2-core VM (one burst sent, then nothing; its main thread then
//! also shared a CPU with rtdaq's SCHED_FIFO RX thread, which `--lcores 0@0,1@0` now avoids).

mod e2e;

use e2e::*;
use rtdaq_testbed::{Side, VethPair};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::{Arc, Mutex};

/// The EAL runtime directories (`/var/run/dpdk/<file prefix>`) of this binary's DPDK
/// processes: the EAL makes one per process even with `--no-shconf`, and leaves it behind.
static RUNTIME_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn note_runtime_dir(prefix: &str) {
    RUNTIME_DIRS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Path::new("/var/run/dpdk").join(prefix));
}

/// Removes the runtime directories of the test's DPDK processes when the test ends (also
/// when it fails): every DPDK test holds one, declared first so that it drops last.
struct RuntimeDirs;

impl Drop for RuntimeDirs {
    fn drop(&mut self) {
        for d in RUNTIME_DIRS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Runs an `rtdaq-dpdk` command to its end; the EAL prefix rtdaq derives (`rtdaq-<pid>`)
/// is noted for [`RuntimeDirs`].
fn run_dpdk(cmd: &mut std::process::Command) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    note_runtime_dir(&format!("rtdaq-{}", child.id()));
    child.wait_with_output().unwrap()
}
use std::time::{Duration, Instant};

fn pair(tag: &str) -> VethPair {
    let p = VethPair::builder(tag)
        .build()
        .unwrap_or_else(|e| panic!("test bed: {e}"));
    p.add_static_neighbors().expect("static neighbours");
    p
}

/// A unique EAL `--file-prefix` for one DPDK process of this test binary.
fn prefix(tag: &str) -> String {
    let p = format!("rtdaq-{}-{tag}", std::process::id());
    note_runtime_dir(&p);
    p
}

/// `text` with each `(from, to)` replaced; every `from` must be there.
fn edit(file: &str, mut text: String, edits: &[(&str, String)]) -> String {
    for (from, to) in edits {
        assert!(text.contains(from), "{file}: no {from:?} to replace");
        text = text.replace(from, to);
    }
    text
}

/// `text` without the part from `start` (included) to `end` (excluded).
fn cut(text: &str, start: &str, end: &str) -> String {
    let a = text.find(start).unwrap_or_else(|| panic!("no {start:?}"));
    let b = a + text[a..].find(end).unwrap_or_else(|| panic!("no {end:?}"));
    format!("{}{}", &text[..a], &text[b..])
}

fn ring_config() -> String {
    std::fs::read_to_string(root().join("configs/vdev-dpdk-ring.toml")).unwrap()
}

/// The DPDK side of `configs/vdev-dpdk-ring.toml` moved onto `net_af_packet0` over `ifname`
/// (`devargs`: more of the PMD's arguments, each with a leading comma).
fn af_packet_vdev(ifname: &str, devargs: &str, tag: &str) -> Vec<(&'static str, String)> {
    vdev("net_af_packet0", ifname, devargs, tag)
}

/// The same for any vdev `port` (`net_af_packet0`, `net_af_xdp0`) over `ifname`.
fn vdev(port: &str, ifname: &str, devargs: &str, tag: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "\"--vdev\", \"net_ring0\"",
            format!(
                "\"--vdev\", \"{port},iface={ifname}{devargs}\", \"--file-prefix\", \"{}\"",
                prefix(tag)
            ),
        ),
        ("address = \"net_ring0\"", format!("address = \"{port}\"")),
    ]
}

fn write(tag: &str, text: &str) -> PathBuf {
    let path = tmp(tag, "toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A shipped config with the test bed's names and addresses swapped for `pair`'s.
fn swapped(file: &str, pair: &VethPair, tag: &str) -> PathBuf {
    let mut text = std::fs::read_to_string(root().join("configs").join(file)).unwrap();
    let swaps = [
        ("rtdaq0a", pair.ifname(Side::A).to_string()),
        ("rtdaq0b", pair.ifname(Side::B).to_string()),
        ("169.254.90.1", pair.ip(Side::A).to_string()),
        ("169.254.90.2", pair.ip(Side::B).to_string()),
        ("02:72:74:00:5a:02", mac(pair.mac(Side::B))),
    ];
    for (from, to) in &swaps {
        text = text.replace(from, to);
    }
    write(tag, &text)
}

/// `ip` + 4 in the last octet: in no /30 of the test bed's pair.
fn unowned(ip: std::net::Ipv4Addr) -> std::net::Ipv4Addr {
    let [a, b, c, d] = ip.octets();
    std::net::Ipv4Addr::new(a, b, c, d.wrapping_add(4))
}

/// A counter of a veth end, read inside its namespace.
fn veth_stat(pair: &VethPair, side: Side, name: &str) -> u64 {
    let path = format!("/sys/class/net/{}/statistics/{name}", pair.ifname(side));
    let out = pair.exec(side, "cat", &[&path]).unwrap();
    assert!(out.status.success(), "{path}: {}", show(&out));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// What the kernel dropped on the pair so far (A's TX side, B's RX side).
fn veth_drops(pair: &VethPair) -> u64 {
    veth_stat(pair, Side::A, "tx_dropped") + veth_stat(pair, Side::B, "rx_dropped")
}

// ---------------------------------------------------------------- testpmd -> rtdaq DPDK RX

/// `dpdk-testpmd` in interactive mode, its stdout collected by a thread.
struct Testpmd {
    child: Child,
    out: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Testpmd {
    fn spawn(pair: &VethPair, side: Side, peer: Side, frame_len: usize, tag: &str) -> Testpmd {
        // stdbuf: testpmd's printf output is block-buffered into a pipe; the statistics
        // after each `stop` are needed as they come.
        let mut child = pair
            .command(side, "stdbuf")
            .args(["-o0", "dpdk-testpmd"])
            // main lcore 0 and forwarding lcore 1 both on CPU 0: rtdaq's RX thread (SCHED_FIFO)
            // has CPU 1, and would starve testpmd's command line there (slow `stop`, `quit`)
            .args(["--lcores", "0@0,1@0"])
            .args(["--no-huge", "-m", "512", "--no-pci", "--no-shconf"])
            .args(["--file-prefix", &prefix(tag)])
            .arg("--vdev")
            .arg(format!("net_af_packet0,iface={}", pair.ifname(side)))
            .args(["--log-level=lib.eal:notice", "--"])
            .args(["-i", "--no-mlockall", "--nb-cores=1", "--burst=32"])
            .arg("--total-num-mbufs=8192")
            .arg(format!("--txpkts={frame_len}"))
            .arg(format!("--eth-peer=0,{}", mac(pair.mac(peer))))
            // txonly's default addresses are 198.18.0.x: the test bed's link-local ones
            // instead, to an address nobody owns (the peer's + 4, outside the pair's /30),
            // so the peer's kernel drops what it sees of them silently (no ICMP back, which
            // net_af_packet would receive too)
            .arg(format!(
                "--tx-ip={},{}",
                pair.ip(side),
                unowned(pair.ip(peer))
            ))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("dpdk-testpmd (apt-get install dpdk)");
        let out = Arc::new(Mutex::new(String::new()));
        let mut stdout = child.stdout.take().unwrap();
        let sink = out.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Testpmd {
            child,
            out,
            reader: Some(reader),
        }
    }

    fn text(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    /// Waits until testpmd has printed `what` `count` times in all.
    fn wait_for(&mut self, what: &str, count: usize, timeout: Duration) {
        let t0 = Instant::now();
        while self.text().matches(what).count() < count {
            if let Some(st) = self.child.try_wait().unwrap() {
                panic!("testpmd exited ({st}) early:\n{}", self.text());
            }
            assert!(
                t0.elapsed() < timeout,
                "testpmd: no {what:?} after {timeout:?}:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn cmd(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// `quit`, then its whole output.
    fn quit(mut self) -> String {
        self.cmd("quit");
        drop(self.child.stdin.take());
        let t0 = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            if t0.elapsed() > Duration::from_secs(20) {
                let _ = self.child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.wait();
        self.reader.take().unwrap().join().unwrap();
        self.text()
    }
}

/// The number after `key` (e.g. "TX-packets:") in `line`.
fn field(line: &str, key: &str) -> Option<u64> {
    let rest = &line[line.find(key)? + key.len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// Sums "TX-packets" / "TX-dropped" of every "Accumulated forward statistics" block (one per
/// `stop`), and the port's cumulative "TX-packets" from the last `show port stats 0`.
fn testpmd_tx(out: &str) -> (u64, u64, u64) {
    let mut sent = 0;
    let mut dropped = 0;
    for block in out.split("Accumulated forward statistics").skip(1) {
        let line = block
            .lines()
            .find(|l| l.contains("TX-packets:"))
            .expect("TX-packets in the forward statistics");
        sent += field(line, "TX-packets:").unwrap();
        dropped += field(line, "TX-dropped:").unwrap();
    }
    let nic = out
        .rsplit("NIC statistics for port 0")
        .next()
        .and_then(|b| b.lines().find(|l| l.contains("TX-packets:")))
        .and_then(|l| field(l, "TX-packets:"))
        .expect("TX-packets in `show port stats 0`");
    (sent, dropped, nic)
}

/// rtdaq's DPDK RX (`net_af_packet0` on B's veth end, count-only validation: testpmd's frames
/// carry no rtdaq header) receiving what testpmd sends from A with `start tx_first N`: N bursts
/// of 32 `txonly` frames of `frame_len` bytes per round, ROUNDS rounds ~0.2 s apart (txonly
/// alone is unpaced and overruns the receiver's AF_PACKET ring, whose drops nobody counts).
fn testpmd_into_rtdaq(pair: &VethPair, frame_len: usize, tag: &str) {
    // A 4096-frame PACKET_RX_RING (the PMD's default is 512): one round of 1600 frames
    // fits even if the RX thread is late; the ring's own drops are in no counter here.
    let rx = af_packet_vdev(pair.ifname(Side::B), ",framecnt=4096", &format!("{tag}-rx"));
    testpmd_into(pair, &rx, 50, frame_len, tag);
}

/// vdev-dpdk-ring.toml as a receiver on the vdev `rx_vdev` (edits of it): no generator,
/// count-only validation (testpmd's frames carry no rtdaq header), written for run `tag`.
fn rx_config(rx_vdev: &[(&str, String)], tag: &str) -> PathBuf {
    let text = edit("vdev-dpdk-ring.toml", ring_config(), rx_vdev);
    // net_af_xdp (like net_tap) refuses rte_eth_dev_configure with RX but no TX queues:
    // keep the (idle) TX queue there, drop only the generator.
    let xdp = rx_vdev.iter().any(|(_, to)| to.contains("net_af_xdp"));
    let from = if xdp {
        "[generator]"
    } else {
        "[[interfaces.tx_queues]]"
    };
    let text = cut(&text, from, "[run]");
    let text = edit(
        "vdev-dpdk-ring.toml",
        text,
        &[(
            "loss_tolerance = 0",
            "loss_tolerance = 0\nvalidate = \"count\"".into(),
        )],
    );
    write(tag, &text)
}

/// testpmd on A (`net_af_packet`) into rtdaq's DPDK RX on B with the vdev `rx_vdev` (edits
/// of vdev-dpdk-ring.toml), `bursts` bursts of 32 per round.
fn testpmd_into(
    pair: &VethPair,
    rx_vdev: &[(&str, String)],
    bursts: u32,
    frame_len: usize,
    tag: &str,
) {
    const ROUNDS: u32 = 10;
    let cfg = rx_config(rx_vdev, &format!("{tag}-rx"));
    let drops_before = veth_drops(pair);
    // Stopped by SIGINT once testpmd is done (the report is written as at the end of a run).
    let rtag = format!("{tag}-rx");
    let rx = start(pair, Side::B, "dpdk", &cfg, 60.0, &rtag);

    let mut tp = Testpmd::spawn(pair, Side::A, Side::B, frame_len, &format!("{tag}-tp"));
    tp.wait_for("testpmd> ", 1, Duration::from_secs(30));
    tp.cmd("set fwd rxonly");
    for round in 1..=ROUNDS {
        tp.cmd(&format!("start tx_first {bursts}"));
        std::thread::sleep(Duration::from_millis(200));
        tp.cmd("stop");
        tp.wait_for(
            "Accumulated forward statistics",
            round as usize,
            Duration::from_secs(10),
        );
    }
    tp.cmd("show port stats 0");
    tp.wait_for("NIC statistics for port 0", 1, Duration::from_secs(10));
    let tp_out = tp.quit();
    let (sent, tp_dropped, nic_sent) = testpmd_tx(&tp_out);

    std::thread::sleep(Duration::from_millis(500));
    let kill = std::process::Command::new("kill")
        .args(["-INT", &rx.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let (rout, r) = finish(rx, &rtag);
    let kernel = veth_drops(pair) - drops_before;

    let received = u(&r, "/rx/totals/packets");
    let rtdaq_drops = u(&r, "/rx/totals/drops_total");
    let expected = u64::from(ROUNDS * bursts * 32);
    eprintln!(
        "{tag}: testpmd sent {sent} frames of {frame_len} B (port counter {nic_sent}, \
         not taken by the PMD {tp_dropped}); kernel veth drops {kernel}; rtdaq received \
         {received}, dropped {rtdaq_drops}"
    );
    assert_eq!(rout.status.code(), Some(0), "rtdaq: {}", show(&rout));
    assert_eq!(tp_dropped, 0, "testpmd TX-dropped:\n{tp_out}");
    assert_eq!(
        sent, expected,
        "testpmd: {ROUNDS} x {bursts} bursts of 32:\n{tp_out}"
    );
    assert_eq!(
        nic_sent, sent,
        "testpmd: port counter vs forward statistics"
    );
    assert_eq!(
        received + rtdaq_drops,
        sent - kernel,
        "every frame testpmd sent is received or counted as dropped\nrtdaq: {}",
        show(&rout)
    );
    assert_eq!(rtdaq_drops, 0, "rtdaq: {}", show(&rout));
    assert_eq!(
        u(&r, "/rx/totals/bytes"),
        received * frame_len as u64,
        "frame bytes"
    );
    assert_eq!(u(&r, "/io_thread_allocations"), 0);
}

#[test]
#[ignore = "needs root, DPDK and scripts/build-engines.sh; scripts/test.sh runs it"]
fn testpmd_txonly_into_dpdk_af_packet_rx() {
    let _dirs = RuntimeDirs;
    let p = pair("dpdk-tp");
    testpmd_into_rtdaq(&p, 64, "tp64");
    testpmd_into_rtdaq(&p, 1514, "tp1514");
}

// ---------------------------------------------------------------- rtdaq DPDK TX -> AF_PACKET RX

#[test]
#[ignore = "needs root, DPDK and scripts/build-engines.sh; scripts/test.sh runs it"]
fn dpdk_tx_into_afpacket_rx_lossless() {
    let _dirs = RuntimeDirs;
    // The NIC's rate limit asked for: net_af_packet has none, so the software pacer keeps
    // the rate alone, and the report says why (issue #33).
    dpdk_tx_into_afpacket(
        "pacing = \"nic\"",
        "software (the NIC refused a per-queue rate limit: Operation not supported",
        "",
        "tx",
    );
    // Launch times asked for: net_af_packet has no RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP,
    // so the queue is not armed, the log says why, the software pacer keeps the times and
    // the report says so; the run is the same loss-free run.
    dpdk_tx_into_afpacket(
        "pacing = \"txtime\"",
        "software (the device cannot send at a launch time; the log says why)",
        "does not offer launch times (RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP",
        "txt",
    );
}

/// The generator of vdev-dpdk-ring.toml on net_af_packet over a veth end at 20 000 frames/s
/// with `pacing`, into the AF_PACKET engine on the other end: every frame arrives; the
/// sender's report says `said` (a prefix) and its log `logged`.
fn dpdk_tx_into_afpacket(pacing: &str, said: &str, logged: &str, tag: &str) {
    let p = pair(&format!("dpdk-{tag}"));
    let (tx_tag, rx_tag) = (format!("{tag}-tx"), format!("{tag}-rx"));
    // The generator of vdev-dpdk-ring.toml on net_af_packet0 over A's veth end, no RX queue,
    // addressed to B (the AF_PACKET receiver's flow rule matches UDP port 5000).
    let text = edit(
        "vdev-dpdk-ring.toml",
        ring_config(),
        &af_packet_vdev(p.ifname(Side::A), "", &tx_tag),
    );
    let text = cut(
        &text,
        "[[interfaces.rx_queues]]",
        "[[interfaces.tx_queues]]",
    );
    let text = edit(
        "vdev-dpdk-ring.toml",
        text,
        &[
            (
                "udp://169.254.91.2:5000",
                format!("udp://{}:5000", p.ip(Side::B)),
            ),
            (
                "udp://169.254.91.1:4000",
                format!("udp://{}:4000", p.ip(Side::A)),
            ),
            ("02:72:74:00:5b:02", mac(p.mac(Side::B))),
            ("rate_gbps = 0.3", format!("rate_pps = 20000\n{pacing}")),
            ("default_action = 0", "default_action = \"drop\"".into()),
        ],
    );
    let tx = write(&tx_tag, &text);
    let rx = swapped("veth-afpacket-rx.toml", &p, &rx_tag);

    let secs = 2.0;
    let receiver = start(&p, Side::B, "afpacket", &rx, secs + 3.0, &rx_tag);
    let sender = start(&p, Side::A, "dpdk", &tx, secs, &tx_tag);
    let (tout, t) = finish(sender, &tx_tag);
    let (rout, r) = finish(receiver, &rx_tag);
    assert_eq!(tout.status.code(), Some(0), "sender: {}", show(&tout));
    assert_eq!(rout.status.code(), Some(0), "receiver: {}", show(&rout));
    assert_eq!(t["engine"], "dpdk");
    assert_eq!(r["engine"], "afpacket");
    let pacing = t["tx"]["queues"][0]["pacing"].as_str().unwrap_or_default();
    assert!(
        pacing.starts_with(said),
        "pacing {pacing:?}: {}",
        show(&tout)
    );
    assert!(
        String::from_utf8_lossy(&tout.stderr).contains(logged),
        "the log names why: {}",
        show(&tout)
    );
    let sent = u(&t, "/tx/totals/packets");
    eprintln!(
        "DPDK TX (net_af_packet) sent {sent}, AF_PACKET RX received {}",
        u(&r, "/rx/totals/packets")
    );
    assert!(
        sent > 10_000,
        "20 000 pps for 2 s (a quarter is enough: a stalled sender forgets the time), sent {sent}: {}",
        show(&tout)
    );
    assert_eq!(
        u(&t, "/tx/totals/drops_total"),
        0,
        "sender: {}",
        show(&tout)
    );
    assert_eq!(
        u(&r, "/rx/totals/packets"),
        sent,
        "delivered != sent\nreceiver: {}",
        show(&rout)
    );
    for k in [
        "seq_gaps",
        "corrupt",
        "malformed",
        "duplicates",
        "reordered",
    ] {
        assert_eq!(u(&r, &format!("/rx/totals/{k}")), 0, "{k}: {}", show(&rout));
    }
    assert_eq!(u(&r, "/lost"), 0);
    assert_eq!(u(&r, "/io_thread_allocations"), 0);
    assert_eq!(u(&t, "/io_thread_allocations"), 0);
}

// ---------------------------------------------------------------- misconfiguration

/// Runs the DPDK binary on vdev-dpdk-ring.toml with `edits`; returns (exit code, stderr).
fn run_misconfigured(edits: &[(&str, String)], tag: &str) -> (Option<i32>, String, Output) {
    let text = edit("vdev-dpdk-ring.toml", ring_config(), edits);
    let cfg = write(tag, &text);
    let out = run_dpdk(std::process::Command::new(bin("dpdk")).args([
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--duration",
        "1",
    ]));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), err, out)
}

#[test]
#[ignore = "needs root, DPDK and scripts/build-engines.sh; scripts/test.sh runs it"]
fn unknown_vdev_is_a_clear_error() {
    let _dirs = RuntimeDirs;
    let (code, err, out) = run_misconfigured(
        &[
            (
                "\"--vdev\", \"net_ring0\"",
                "\"--vdev\", \"net_bogus0\"".into(),
            ),
            ("address = \"net_ring0\"", "address = \"net_bogus0\"".into()),
        ],
        "bogus",
    );
    assert_eq!(code, Some(2), "{}", show(&out));
    for want in [
        "engine.dpdk.eal_args",
        "net_bogus0",
        "ENODEV",
        "unknown --vdev driver name",
        "net_af_packet0,iface=X",
    ] {
        assert!(err.contains(want), "no {want:?} in:\n{err}");
    }
}

#[test]
#[ignore = "needs root, DPDK and scripts/build-engines.sh; scripts/test.sh runs it"]
fn no_hugepages_is_a_clear_error() {
    let _dirs = RuntimeDirs;
    let nr = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
    let reserved: u64 = std::fs::read_to_string(nr)
        .map(|s| s.trim().parse().unwrap_or(0))
        .unwrap_or(0);
    if reserved > 0 {
        rtdaq_testbed::require::skip(format!("{reserved} hugepages of 2 MiB are reserved ({nr}), so EAL init without --no-huge would succeed"));
        return;
    }
    let (code, err, out) = run_misconfigured(
        &[("\"--no-huge\", \"-m\", \"512\", ", String::new())],
        "nohuge",
    );
    assert_eq!(code, Some(2), "{}", show(&out));
    for want in [
        "engine.dpdk.eal_args",
        "no hugepages reserved",
        "EACCES",
        "nr_hugepages",
        "--no-huge -m 512",
    ] {
        assert!(err.contains(want), "no {want:?} in:\n{err}");
    }
}

// ---------------------------------------------------------------- testpmd -> net_af_xdp RX

/// The `net_af_xdp` PMD of the installed DPDK (`.../dpdk/pmds-*/librte_net_af_xdp.so`), if
/// any: Debian builds it when libxdp/libbpf were there at build time.
fn af_xdp_pmd() -> Option<PathBuf> {
    let pc = std::process::Command::new("pkg-config")
        .args(["--variable=libdir", "libdpdk"])
        .output()
        .ok()?;
    let libdir = PathBuf::from(String::from_utf8_lossy(&pc.stdout).trim());
    std::fs::read_dir(libdir.join("dpdk"))
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("librte_net_af_xdp.so"))
        .find(|p| p.exists())
}

#[test]
#[ignore = "needs root, DPDK and scripts/build-engines.sh; scripts/test.sh runs it"]
fn testpmd_txonly_into_dpdk_af_xdp_rx() {
    let _dirs = RuntimeDirs;
    // net_af_xdp: an AF_XDP socket (copy mode on a veth) on B's queue 0, its UMEM carved
    // from the port's mempool; libxdp loads its default XDP program (without /sys/fs/bpf it
    // says "Falling back to loading single prog without dispatcher", which works).
    let Some(pmd) = af_xdp_pmd() else {
        rtdaq_testbed::require::skip("this DPDK has no net_af_xdp PMD (librte_net_af_xdp.so; built only with libxdp + libbpf)");
        return;
    };
    eprintln!("net_af_xdp PMD: {}", pmd.display());
    let p = pair("dpdk-xdp");
    for (len, t) in [(64, "xdp64"), (1514, "xdp1514")] {
        let rx = vdev(
            "net_af_xdp0",
            p.ifname(Side::B),
            ",start_queue=0,queue_count=1",
            &format!("{t}-rx"),
        );
        // 8 bursts of 32 per round: 256 frames, what the veth's XDP ring holds (a veth with
        // an XDP program queues frames in a 256-entry ring; its overflow shows as veth
        // drops, which the test subtracts), and well within the 1024-entry AF_XDP RX ring
        // (whose overflow is in no counter of the report).
        testpmd_into(&p, &rx, 8, len, t);
    }
}

/// The RX total of rtdaq's latest live-stats line (`[.. s] ring.rx0 rx .. total N pkts`) in
/// the stderr of the run tagged `tag` (see `e2e::start`), if it printed one yet.
fn live_rx_total(tag: &str) -> Option<u64> {
    let log = std::fs::read_to_string(tmp(tag, "err")).ok()?;
    log.lines()
        .filter(|l| l.contains("ring.rx0 rx "))
        .filter_map(|l| field(l, "total "))
        .next_back()
}

/// Waits until rtdaq's live RX total has stayed the same over two stats lines (the receiver
/// has taken everything the kernel still held); that total.
fn settled_rx_total(tag: &str) -> u64 {
    let t0 = Instant::now();
    let mut last = (None, 0usize);
    loop {
        let log = std::fs::read_to_string(tmp(tag, "err")).unwrap_or_default();
        let lines = log.lines().filter(|l| l.contains("ring.rx0 rx ")).count();
        let total = live_rx_total(tag);
        if lines > last.1 {
            if let Some(t) = total.filter(|_| total == last.0) {
                return t;
            }
            last = (total, lines);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "{tag}: live RX total not settled after 15 s:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[ignore = "needs root, DPDK and scripts/build-engines.sh; scripts/test.sh runs it"]
fn testpmd_txonly_flood_into_dpdk_af_xdp_rx_keeps_receiving() {
    let _dirs = RuntimeDirs;
    // The defect this guards against: DPDK 22.11's net_af_xdp registers its UMEM as
    // populated_size × object size from the pool's first page (objects back to back), while
    // DPDK's default pool layout gives each 2368 B mbuf its own 4 KiB page under --no-huge.
    // The mbufs beyond the UMEM (~42% of the pool) were dropped by the kernel from the fill
    // ring as invalid, never to come back, and once the fill ring held only those the port
    // received nothing more (imissed counting everything): after 4 736 frames of an unpaced
    // flood with the 8192 mbufs of vdev-dpdk-ring.toml. The engine now gives net_af_xdp a
    // page-tiled pool (4 KiB objects, all inside the UMEM) and checks that at open.
    // Two unpaced 1-s floods: the first walks the whole pool through the fill ring (the old
    // port stalled within it), the second must still be received; every frame testpmd sent is
    // received or in a kernel counter.
    let Some(pmd) = af_xdp_pmd() else {
        rtdaq_testbed::require::skip("this DPDK has no net_af_xdp PMD (librte_net_af_xdp.so; built only with libxdp + libbpf)");
        return;
    };
    eprintln!("net_af_xdp PMD: {}", pmd.display());
    const FLOOD: Duration = Duration::from_secs(1);
    const MBUFS: u64 = 8192; // buf_count of vdev-dpdk-ring.toml
    let p = pair("dpdk-xflood");
    let rtag = "xflood-rx";
    let cfg = rx_config(
        &vdev(
            "net_af_xdp0",
            p.ifname(Side::B),
            ",start_queue=0,queue_count=1",
            rtag,
        ),
        rtag,
    );
    assert!(
        std::fs::read_to_string(&cfg)
            .unwrap()
            .contains(&format!("buf_count = {MBUFS}")),
        "vdev-dpdk-ring.toml's region changed: adjust MBUFS"
    );
    let a_tx_dropped = veth_stat(&p, Side::A, "tx_dropped");
    let b_rx_dropped = veth_stat(&p, Side::B, "rx_dropped");
    let rx = start(&p, Side::B, "dpdk", &cfg, 60.0, rtag);

    let mut tp = Testpmd::spawn(&p, Side::A, Side::B, 64, "xflood-tp");
    tp.wait_for("testpmd> ", 1, Duration::from_secs(30));
    tp.cmd("set fwd txonly");
    let mut totals = Vec::new();
    for round in 1..=2 {
        tp.cmd("start");
        std::thread::sleep(FLOOD);
        tp.cmd("stop");
        tp.wait_for(
            "Accumulated forward statistics",
            round,
            Duration::from_secs(20),
        );
        totals.push(settled_rx_total(rtag));
    }
    tp.cmd("show port stats 0");
    tp.wait_for("NIC statistics for port 0", 1, Duration::from_secs(10));
    let tp_out = tp.quit();
    let (sent, tp_dropped, nic_sent) = testpmd_tx(&tp_out);

    let kill = std::process::Command::new("kill")
        .args(["-INT", &rx.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let (rout, r) = finish(rx, rtag);
    let a_dropped = veth_stat(&p, Side::A, "tx_dropped") - a_tx_dropped;
    let b_dropped = veth_stat(&p, Side::B, "rx_dropped") - b_rx_dropped;
    let received = u(&r, "/rx/totals/packets");
    let rtdaq_drops = u(&r, "/rx/totals/drops_total");
    let port = &r["ports"][0];
    let (ipackets, imissed) = (u(port, "/ipackets"), u(port, "/imissed"));
    eprintln!(
        "flood: testpmd sent {sent} frames of 64 B in two unpaced {FLOOD:?} floods (port \
         counter {nic_sent}); rtdaq received {} after the first, {received} in all \
         ({} after the first flood), dropped {rtdaq_drops}; port ipackets {ipackets} \
         imissed {imissed} rx_nombuf {}; veth drops: A tx {a_dropped}, B rx {b_dropped} \
         (XDP redirects that failed: fill ring empty = imissed, or AF_XDP RX ring full)",
        totals[0],
        received - totals[0],
        u(port, "/rx_nombuf")
    );
    let log = show(&rout);
    assert_eq!(rout.status.code(), Some(0), "rtdaq: {log}");
    assert_eq!(tp_dropped, 0, "testpmd TX-dropped:\n{tp_out}");
    assert_eq!(
        nic_sent, sent,
        "testpmd: port counter vs forward statistics"
    );
    // Reception never stopped: the first flood took more frames than the pool has mbufs (so
    // every mbuf went through the fill ring and came back; the old port stalled at 4 736),
    // and the second flood was received too.
    assert!(
        totals[0] > MBUFS,
        "first flood: only {} frames received (stalled?)\n{log}",
        totals[0]
    );
    assert!(
        received - totals[0] > MBUFS,
        "second flood: only {} frames received after the first (stalled?)\n{log}",
        received - totals[0]
    );
    // Every frame accounted for: received by rtdaq (delivered or counted), or dropped by the
    // kernel — A's veth TX, or B's XDP redirect into the socket (B rx_dropped, which
    // includes imissed: the socket's own drops for an empty fill ring).
    assert_eq!(
        received + rtdaq_drops + a_dropped + b_dropped,
        sent,
        "every frame testpmd sent is received or counted as dropped\nrtdaq: {log}"
    );
    assert!(
        log.contains("lie inside the"),
        "the open-time UMEM check is logged: {log}"
    );
    assert_eq!(ipackets, received + rtdaq_drops, "port ipackets vs rtdaq");
    assert!(
        imissed <= b_dropped,
        "imissed {imissed} > veth rx_dropped {b_dropped}"
    );
    assert_eq!(u(port, "/rx_nombuf"), 0);
    assert_eq!(u(&r, "/io_thread_allocations"), 0);
}

// ---------------------------------------------------------------- rte_flow

#[test]
#[ignore = "needs root, DPDK and scripts/build-engines.sh; scripts/test.sh runs it"]
fn rte_flow_hardware_on_a_pmd_without_it_is_a_clear_error() {
    let _dirs = RuntimeDirs;
    // vdev-dpdk-ring.toml plus one flow, flow_offload = "hardware": net_ring has no rte_flow.
    let (code, err, out) = run_misconfigured(
        &[
            (
                "main_core = 0 ",
                "flow_offload = \"hardware\"\nmain_core = 0 ".into(),
            ),
            (
                "[run]",
                "[[flows]]\ninterface = \"ring\"\nid = 1\nqueue = 0\n[flows.match]\nudp_dst = 5000\n\n[run]"
                    .into(),
            ),
        ],
        "flowhw",
    );
    assert_eq!(code, Some(2), "{}", show(&out));
    for want in [
        "flows[0] (id 1: udp_dst=5000 -> rx_queues[0])",
        "DPDK port \"net_ring0\" (PMD net_ring)",
        "engine.dpdk.flow_offload = \"hardware\"",
        "[prio 0: eth / ipv4 / udp dst 5000 -> queue 0]",
        "no rte_flow support",
        "Function not implemented",
        "ENOSYS",
        "flow_offload = \"auto\"",
    ] {
        assert!(err.contains(want), "no {want:?} in:\n{err}");
    }
}

// ---------------------------------------------------------------- with hugepages

/// 2 MiB hugepages reserved now (`nr_hugepages`).
fn hugepages() -> u64 {
    std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")
        .map(|s| s.trim().parse().unwrap_or(0))
        .unwrap_or(0)
}

/// vdev-dpdk-ring.toml without `--no-huge -m 512`, with `--in-memory`: the EAL maps its
/// memory (mempool, rings) from hugepages, which scripts/test.sh reserves
/// (`RTDAQ_TEST_HUGEPAGES=1`) before the `with_hugepages` tests and releases after (without
/// them the EAL fails: `no_hugepages_is_a_clear_error`). `None` (the test skips) when none
/// is reserved outside scripts/test.sh.
fn huge_ring_config(tag: &str) -> Option<PathBuf> {
    let n = hugepages();
    if n == 0 {
        assert!(
            std::env::var_os("RTDAQ_TEST_HUGEPAGES").is_none(),
            "RTDAQ_TEST_HUGEPAGES is set but no 2 MiB hugepage is reserved"
        );
        rtdaq_testbed::require::skip(
            "no 2 MiB hugepages reserved (scripts/test.sh reserves 256 for this test)",
        );
        return None;
    }
    let text = edit(
        "vdev-dpdk-ring.toml",
        ring_config(),
        &[
            ("\"--no-huge\", \"-m\", \"512\", ", String::new()),
            // --in-memory: no shared config and no hugepage files left behind (rtdaq never
            // calls rte_eal_cleanup), so the pages are free again when the process exits.
            ("\"--no-shconf\",", "\"--in-memory\",".into()),
            // 20 000 pps: the 1024-frame ring covers a 50 ms stall of the RX thread (seen on
            // a loaded 2-core host); these tests are about the EAL on hugepages, not speed.
            ("rate_gbps = 0.3", "rate_pps = 20000".into()),
        ],
    );
    Some(write(tag, &text))
}

#[test]
#[ignore = "needs root, DPDK, reserved 2 MiB hugepages and scripts/build-engines.sh; scripts/test.sh reserves them and runs it"]
fn with_hugepages_ring_pmd_loopback_lossless() {
    let _dirs = RuntimeDirs;
    let Some(cfg) = huge_ring_config("huge") else {
        return;
    };
    let json = report_path("huge");
    let _ = std::fs::remove_file(&json);
    let free_before = meminfo("HugePages_Free");
    let out = run_dpdk(
        std::process::Command::new(bin("dpdk"))
            .args(["run", "--config", cfg.to_str().unwrap(), "--duration", "2"])
            .arg("--report-json")
            .arg(&json),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let sent = u(&r, "/tx/totals/packets");
    eprintln!(
        "{} hugepages reserved ({free_before} free before); ring PMD: sent {sent}",
        hugepages()
    );
    assert!(
        sent > 10_000,
        "20 000 pps for 2 s (a quarter is enough: a stalled sender forgets the time), sent {sent}: {}",
        show(&out)
    );
    assert_eq!(u(&r, "/rx/totals/packets"), sent);
    assert_eq!(u(&r, "/lost"), 0);
    assert_eq!(u(&r, "/rx/totals/drops_total"), 0);
    assert_eq!(
        meminfo("HugePages_Free"),
        free_before,
        "the run gave its hugepages back"
    );
}

/// Issue #18: the DPDK engine with real hugepages under the shipped unit's privileges: user
/// nobody, exactly the unit's capabilities (the DPDK drop-in adds device access only, for
/// VFIO/mlx5 ports this host does not have). The EAL maps hugepages (`--in-memory`: no
/// hugetlbfs mount or runtime files to own), locks memory, and the queue threads run
/// SCHED_FIFO: lossless, no capability warning, the hugepages back after the run.
#[test]
#[ignore = "needs root, DPDK, reserved 2 MiB hugepages and scripts/build-engines.sh; scripts/test.sh reserves them and runs it"]
fn with_hugepages_ring_pmd_runs_with_only_the_units_privileges() {
    let _dirs = RuntimeDirs;
    let Some(cfg) = huge_ring_config("huge-unit") else {
        return;
    };
    // The report goes where user nobody may write.
    let dir = rtdaq_testbed::test_path("rtdaq-dpdk-unit");
    std::fs::create_dir_all(&dir).unwrap();
    std::process::Command::new("chmod")
        .args(["777", dir.to_str().unwrap()])
        .status()
        .unwrap();
    let json = dir.join("report.json");
    let caps = unit_caps("AmbientCapabilities", Some("dpdk.conf"));
    let wrapper = as_unit(&caps);
    let free_before = meminfo("HugePages_Free");
    let out = run_dpdk(
        std::process::Command::new(&wrapper[0])
            .args(&wrapper[1..])
            .arg(bin("dpdk"))
            .args(["run", "--config", cfg.to_str().unwrap(), "--duration", "2"])
            .arg("--report-json")
            .arg(&json)
            .env("RUST_LOG", "info"),
    );
    let text = show(&out);
    let report = std::fs::read_to_string(&json);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        out.status.code(),
        Some(0),
        "as the unit ({}): {text}",
        caps.join(",")
    );
    let r: serde_json::Value = serde_json::from_str(&report.unwrap()).unwrap();
    let sent = u(&r, "/tx/totals/packets");
    assert!(
        sent > 10_000,
        "20 000 pps for 2 s (a quarter will do), sent {sent}: {text}"
    );
    assert_eq!(u(&r, "/rx/totals/packets"), sent);
    assert_eq!(u(&r, "/lost"), 0);
    for bad in [
        "CAP_",
        "without SCHED_FIFO",
        "not locked",
        "ermission denied",
    ] {
        assert!(!text.contains(bad), "{bad:?} as the unit: {text}");
    }
    assert_eq!(
        meminfo("HugePages_Free"),
        free_before,
        "hugepages given back"
    );
}

/// A number from /proc/meminfo.
fn meminfo(key: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix(key)?
                .trim_start_matches(':')
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("{key} in /proc/meminfo"))
}
