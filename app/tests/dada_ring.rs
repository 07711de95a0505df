//! PSRDADA rings (issue #32) end to end: rtdaq (`configs/host-udp-dada-ring.toml`: the
//! default generator into one RX queue whose `dada_ring` stage writes the ring) against a
//! reader written straight against the psrdada C library (`hal/dada/examples/dada_read.rs`,
//! as `dada_dbdisk` reads), in another process:
//!
//! - the reader gets the DADA header rtdaq wrote and every byte of the run, equal to the
//!   `raw` recording rtdaq made of the same run; 0 lost; the ring is gone after the run;
//! - with no reader and a small ring: the queue never waits (no drop, no gap), the payloads
//!   that found no clear block count as `ring_reader_behind`, every payload is accounted
//!   for, the run fails on that loss (exit 1), and ends without waiting for a reader;
//! - a reader killed in the middle of the run (holding the header and a half-read block):
//!   rtdaq readies its place, and the next reader reads a header whose `OBS_OFFSET` is the
//!   first byte of that block, then every byte from there, equal to the `raw` recording
//!   from that byte on; the report counts the reader that left and was followed;
//! - `create = false` with no ring at the key: exit 2 naming `dada_rings[0]` before any
//!   packet moves;
//! - `numa_node`: the data block's segments are bound to the node (`bind:N` in the
//!   process's `/proc/PID/numa_maps`), the header block's are not; a node the host does
//!   not have stops the start (exit 2) naming `dada_rings[0].numa_node`.
//!
//! Needs `target/engines/rtdaq-socket-dada` (`--features dada`) and
//! `target/debug/examples/dada_read` (`scripts/test.sh` builds both); without them each
//! test fails in `scripts/test.sh` (`RTDAQ_TEST_REQUIRE=1`) and skips, recorded, elsewhere.

mod e2e;

use e2e::ucx::free_udp_port;
use e2e::{root, show, u};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;

/// One at a time: each pins rtdaq's threads to cores 0 and 1.
static SERIAL: Mutex<()> = Mutex::new(());

fn tmp(name: &str) -> PathBuf {
    rtdaq_testbed::test_path(name)
}

fn binary() -> PathBuf {
    root().join("target/engines/rtdaq-socket-dada")
}

fn reader_bin() -> PathBuf {
    root().join("target/debug/examples/dada_read")
}

fn skipped() -> bool {
    let why = if !binary().exists() {
        "no target/engines/rtdaq-socket-dada (scripts/test.sh builds it with --features dada)"
    } else if !reader_bin().exists() {
        "no target/debug/examples/dada_read (cargo build -p rtdaq-dada --example dada_read)"
    } else {
        return false;
    };
    rtdaq_testbed::require::skip(why);
    true
}

/// A key of this test process (no other test or run uses it): from the process id.
fn key(n: u32) -> String {
    format!(
        "{:x}",
        0x6d00_0000 | ((std::process::id() & 0xffff) << 8) | (n << 1)
    )
}

/// The shipped ring config with its key and a free port, and more edits.
fn config(key: &str, edits: &[(&str, String)], name: &str) -> PathBuf {
    let port = free_udp_port();
    let mut all = vec![
        ("key = \"dada\"", format!("key = \"{key}\"")),
        (
            "udp://127.0.0.1:5000\"       # the RX",
            format!("udp://127.0.0.1:{port}\"       # the RX"),
        ),
        (
            "destination = \"udp://127.0.0.1:5000\"",
            format!("destination = \"udp://127.0.0.1:{port}\""),
        ),
    ];
    all.extend(edits.iter().map(|(a, b)| (*a, b.clone())));
    e2e::edited("host-udp-dada-ring.toml", &all, name)
}

/// The shipped ring config at 0.3 Gb/s with a `raw` recorder on the ring's queue.
fn raw_config(key: &str, name: &str) -> PathBuf {
    let recorder = "\n[[recorders]]\nname = \"raw\"\nformat = \"raw\"\n\n[generator]";
    config(
        key,
        &[
            ("rate_gbps = 1.0 ", "rate_gbps = 0.3 ".into()),
            ("\n[generator]", recorder.into()),
            (
                "dada_ring = \"ring\" ",
                "dada_ring = \"ring\"\nrecord = [\"raw\"] ".into(),
            ),
        ],
        name,
    )
}

/// rtdaq on `cfg` for `secs`: its output and report (recordings, if any, in `{name}-out`).
fn rtdaq(cfg: &Path, secs: &str, name: &str, records: bool) -> (Output, Option<Value>) {
    rtdaq_wait(rtdaq_spawn(cfg, secs, name, records), name)
}

/// rtdaq started on `cfg` for `secs` (see [`rtdaq`]).
fn rtdaq_spawn(cfg: &Path, secs: &str, name: &str, records: bool) -> std::process::Child {
    let mut cmd = Command::new(binary());
    cmd.args(["run", "--config"])
        .arg(cfg)
        .args(["--duration", secs, "--report-json"])
        .arg(tmp(&format!("{name}.json")))
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if records {
        cmd.arg("--output-dir").arg(tmp(&format!("{name}-out")));
    }
    cmd.spawn().unwrap()
}

/// The output and report of a run [`rtdaq_spawn`] started.
fn rtdaq_wait(run: std::process::Child, name: &str) -> (Output, Option<Value>) {
    let out = run.wait_with_output().unwrap();
    // A start that failed leaves no report (or an empty file).
    let report = std::fs::read_to_string(tmp(&format!("{name}.json")))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    (out, report)
}

#[test]
#[ignore = "needs target/engines/rtdaq-socket-dada and dada_read; scripts/test.sh runs it"]
fn a_library_reader_gets_every_byte_equal_to_the_raw_recording() {
    if skipped() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let k = key(1);
    let cfg = raw_config(&k, "whole");
    let prefix = tmp("reader");
    let reader = Command::new(reader_bin())
        .arg(&k)
        .arg(&prefix)
        .arg("30")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dada_read");
    let (out, r) = rtdaq(&cfg, "3", "whole", true);
    let read = reader.wait_with_output().unwrap();
    let r = r.unwrap_or_else(|| panic!("no report: {}", show(&out)));
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(read.status.success(), "dada_read: {}", show(&read));
    let received = u(&r, "/rx/totals/packets");
    assert!(received > 20_000, "{}", show(&out));
    assert_eq!(u(&r, "/lost"), 0, "{}", show(&out));
    assert_eq!(u(&r, "/io_thread_allocations"), 0, "{}", show(&out));
    let d = &r["rx"]["queues"][0]["dada_ring"];
    assert_eq!(d["key"], k.as_str(), "{d}");
    assert_eq!(u(d, "/written"), received, "{d}");
    assert_eq!(u(d, "/bytes"), received * 1400, "{d}");
    assert_eq!(u(d, "/dropped/ring_reader_behind"), 0, "{d}");
    // The header rtdaq wrote, read by the library.
    let header = std::fs::read_to_string(prefix.with_extension("header")).unwrap();
    for want in [
        "HDR_SIZE            4096",
        "RTDAQ_QUEUE         lo_udp.rx0",
        "OBS_OFFSET          0",
    ] {
        assert!(header.contains(want), "{want:?} in {header}");
    }
    // The data: the raw recording of the same run, byte for byte.
    let data = std::fs::read(prefix.with_extension("data")).unwrap();
    let raw = raw_recording("whole");
    assert_eq!(data.len() as u64, received * 1400);
    assert!(
        data == raw,
        "the ring's data differs from the raw recording"
    );
    // The ring is gone: a second reader finds none.
    let again = Command::new(reader_bin())
        .arg(&k)
        .arg(tmp("again"))
        .arg("0.2")
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2), "{}", show(&again));
}

/// The `raw` recording of a run (`{name}-out/*.raw`).
fn raw_recording(name: &str) -> Vec<u8> {
    let dir = tmp(&format!("{name}-out"));
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "raw"))
        .unwrap_or_else(|| panic!("no .raw file in {}", dir.display()));
    std::fs::read(file).unwrap()
}

#[test]
#[ignore = "needs target/engines/rtdaq-socket-dada and dada_read; scripts/test.sh runs it"]
fn a_reader_killed_mid_run_is_followed_by_the_next_from_its_obs_offset() {
    use std::io::BufRead;
    if skipped() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let k = key(5);
    let cfg = raw_config(&k, "follow");
    // 4.5 of the ring's 4 MiB blocks read (1 MiB a read), then it stops, holding the
    // header and the fifth block, half read, until killed.
    const BLOCK: u64 = 4 << 20;
    let mut first = Command::new(reader_bin())
        .arg(&k)
        .arg(tmp("first"))
        .arg("30")
        .env("DADA_READ_PAUSE_AFTER", (4 * BLOCK + BLOCK / 2).to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn dada_read");
    let run = rtdaq_spawn(&cfg, "4", "follow", true);
    let mut line = String::new();
    std::io::BufReader::new(first.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("paused_at"), "the first reader: {line:?}");
    first.kill().unwrap();
    first.wait().unwrap();
    let prefix = tmp("next");
    let next = Command::new(reader_bin())
        .arg(&k)
        .arg(&prefix)
        .arg("30")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dada_read");
    let (out, r) = rtdaq_wait(run, "follow");
    let read = next.wait_with_output().unwrap();
    let r = r.unwrap_or_else(|| panic!("no report: {}", show(&out)));
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(read.status.success(), "dada_read: {}", show(&read));
    assert_eq!(u(&r, "/lost"), 0, "{}", show(&out));
    let d = &r["rx"]["queues"][0]["dada_ring"];
    assert_eq!(u(d, "/dropped/ring_reader_behind"), 0, "{d}");
    assert_eq!(
        (
            u(d, "/readers_left"),
            u(d, "/readers_followed"),
            u(d, "/readers_not_followed")
        ),
        (1, 1, 0),
        "{d}"
    );
    let offset = 4 * BLOCK;
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains(&format!("takes its place from byte {offset}")),
        "{log}"
    );
    let header = std::fs::read_to_string(prefix.with_extension("header")).unwrap();
    for want in [
        format!("OBS_OFFSET          {offset}\n"),
        "RTDAQ_QUEUE         lo_udp.rx0".into(),
    ] {
        assert!(header.contains(&want), "{want:?} in {header}");
    }
    let data = std::fs::read(prefix.with_extension("data")).unwrap();
    let raw = raw_recording("follow");
    assert_eq!(raw.len() as u64, u(d, "/bytes"));
    assert_eq!(data.len() as u64, raw.len() as u64 - offset);
    assert!(
        data[..] == raw[offset as usize..],
        "the next reader's data is the raw recording from OBS_OFFSET on"
    );
}

#[test]
#[ignore = "needs target/engines/rtdaq-socket-dada; scripts/test.sh runs it"]
fn no_reader_never_stalls_the_queue_and_the_overflow_is_counted() {
    if skipped() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cfg = config(
        &key(2),
        &[
            ("nbufs = 16 ", "nbufs = 4 ".into()),
            ("bufsz_kib = 4096 ", "bufsz_kib = 256 ".into()),
        ],
        "behind",
    );
    let t0 = std::time::Instant::now();
    let (out, r) = rtdaq(&cfg, "2", "behind", false);
    let took = t0.elapsed();
    let r = r.unwrap_or_else(|| panic!("no report: {}", show(&out)));
    let q = &r["rx"]["queues"][0];
    let d = &q["dada_ring"];
    let received = u(&r, "/rx/totals/packets");
    // 4 blocks of 256 KiB hold 748 whole 1400-byte payloads; the rest waits for nobody.
    assert_eq!(u(d, "/written"), 4 * 262_144 / 1400, "{d}");
    assert_eq!(u(d, "/payloads"), received, "{d}");
    assert_eq!(
        u(d, "/written") + u(d, "/dropped/ring_reader_behind"),
        received,
        "{d}"
    );
    assert_eq!(
        u(q, "/drops_total"),
        0,
        "the queue never waited: {}",
        show(&out)
    );
    assert_eq!(u(&r, "/rx/totals/seq_gaps"), 0, "{}", show(&out));
    assert_eq!(u(&r, "/lost"), u(d, "/dropped/ring_reader_behind"));
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        took.as_secs_f64() < 2.0 + 4.0,
        "the end waited for a reader nobody was: {took:?}"
    );
}

#[test]
#[ignore = "needs target/engines/rtdaq-socket-dada; scripts/test.sh runs it"]
fn attaching_to_a_missing_ring_stops_the_start_naming_it() {
    if skipped() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cfg = config(
        &key(3),
        &[
            ("create = true ", "create = false ".into()),
            ("nbufs = 16 ", String::new()),
            ("bufsz_kib = 4096 ", String::new()),
            ("readers = 1\n", "\n".into()),
            ("lock = false ", String::new()),
        ],
        "missing",
    );
    let (out, _) = rtdaq(&cfg, "2", "missing", false);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("dada_rings[0]"), "{err}");
    assert!(err.contains("no ring at this key"), "{err}");
}

/// The NUMA nodes of this host (`/sys/devices/system/node/nodeN`).
fn numa_nodes() -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.filter_map(|e| {
                let n = e.ok()?.file_name().into_string().ok()?;
                n.strip_prefix("node")?.parse().ok()
            })
            .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

#[test]
#[ignore = "needs target/engines/rtdaq-socket-dada; scripts/test.sh runs it"]
fn a_ring_on_a_numa_node_has_its_data_pages_bound_there() {
    if skipped() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = *numa_nodes()
        .first()
        .expect("no /sys/devices/system/node/node*");
    let small = [
        ("nbufs = 16 ", "nbufs = 4 ".to_string()),
        ("bufsz_kib = 4096 ", "bufsz_kib = 256 ".into()),
        (
            "lock = false ",
            format!("numa_node = {node}\nlock = false "),
        ),
    ];
    let cfg = config(&key(5), &small, "numa");
    let child = Command::new(binary())
        .args(["run", "--config"])
        .arg(&cfg)
        .args(["--duration", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The ring's segments as this process maps them: `ADDR POLICY file=/SYSVkey ...`.
    let maps = format!("/proc/{}/numa_maps", child.id());
    // The writer makes the segments one after another: poll until all of them are mapped
    // (a snapshot taken midway holds only some), keeping every one seen.
    let (mut bound, mut others) = (BTreeSet::new(), BTreeSet::new());
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let text = std::fs::read_to_string(&maps).unwrap_or_default();
        for l in text.lines().filter(|l| l.contains("file=/SYSV")) {
            let mut w = l.split_whitespace();
            let (policy, file) = (w.nth(1), w.next());
            let Some(file) = file.map(str::to_string) else {
                continue;
            };
            if policy == Some(&format!("bind:{node}")) {
                bound.insert(file);
            } else {
                others.insert(file);
            }
        }
        if bound.len() >= 4 && others.len() >= 8 + 2 {
            break;
        }
    }
    let out = child.wait_with_output().unwrap();
    // The 4 data buffers, each its own segment, bound (whoever maps them); the header
    // block's buffers and the two sync segments keep the default policy.
    assert_eq!(bound.len(), 4, "bound: {bound:?}\n{}", show(&out));
    assert!(
        others.len() >= 8 + 2,
        "{others:?} unbound segments\n{}",
        show(&out)
    );
    // No reader: the ring fills and the rest is lost (exit 1), as without numa_node.
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));

    // A node this host does not have: the start stops, naming the key.
    let absent = numa_nodes().last().unwrap() + 1;
    let mut edits = small.to_vec();
    edits[2].1 = format!("numa_node = {absent}\nlock = false ");
    let cfg = config(&key(6), &edits, "numa-absent");
    let (out, _) = rtdaq(&cfg, "2", "numa-absent", false);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("dada_rings[0].numa_node"), "{err}");
    assert!(err.contains(&format!("NUMA node {absent}")), "{err}");
}
