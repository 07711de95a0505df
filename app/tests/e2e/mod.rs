//! Helpers shared by the end-to-end tests that run the per-engine binaries
//! (`target/engines/rtdaq-*` from `scripts/build-engines.sh`) in `rtdaq-testbed` namespaces:
//! `raw.rs`, `dpdk.rs` and others (each uses its own subset).
#![allow(dead_code)] // each test binary uses its own subset

use rtdaq_testbed::{Side, VethPair};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

pub mod ucx;

/// Workspace root: `RTDAQ_ROOT` when set (test binaries carried to another host, e.g. the
/// GPU host by scripts/gpu-host.sh), else this checkout.
pub fn root() -> PathBuf {
    std::env::var_os("RTDAQ_ROOT").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
        PathBuf::from,
    )
}

/// The binary built with `engine-<engine>`.
pub fn bin(engine: &str) -> PathBuf {
    let p = root().join(format!("target/engines/rtdaq-{engine}"));
    assert!(
        p.exists(),
        "{} is missing: run scripts/build-engines.sh first (scripts/test.sh does)",
        p.display()
    );
    p
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A file in this test's own temporary directory (removed when the test ends).
pub fn tmp(tag: &str, ext: &str) -> PathBuf {
    rtdaq_testbed::test_path(format!("{tag}.{ext}"))
}

/// Where the run tagged `tag` writes its JSON report.
pub fn report_path(tag: &str) -> PathBuf {
    tmp(tag, "json")
}

fn stderr_path(tag: &str) -> PathBuf {
    tmp(tag, "err")
}

/// Starts `engine`'s binary in `side`'s namespace on `cfg` for `secs` and waits until its
/// queues run (the runtime logs "queues running" once every queue thread has its queue), so
/// a peer started next is never early, however slowly a loaded host starts the process.
pub fn start(pair: &VethPair, side: Side, engine: &str, cfg: &Path, secs: f64, tag: &str) -> Child {
    start_as(pair, side, &[], engine, cfg, secs, tag)
}

/// [`start`] with the binary run by `wrapper` (a program and its arguments, e.g. `setpriv`
/// with the unit's user and capabilities; empty: the binary itself).
pub fn start_as(
    pair: &VethPair,
    side: Side,
    wrapper: &[String],
    engine: &str,
    cfg: &Path,
    secs: f64,
    tag: &str,
) -> Child {
    let _ = std::fs::remove_file(report_path(tag));
    let err = std::fs::File::create(stderr_path(tag)).unwrap();
    let binary = bin(engine).to_str().unwrap().to_owned();
    let (program, pre) = match wrapper.split_first() {
        Some((p, rest)) => (p.clone(), [rest, &[binary]].concat()),
        None => (binary, Vec::new()),
    };
    let mut child = pair
        .command(side, &program)
        .args(pre)
        .args(["run", "--config", cfg.to_str().unwrap(), "--duration"])
        .arg(secs.to_string())
        .arg("--report-json")
        .arg(report_path(tag))
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(err))
        .spawn()
        .expect("spawn rtdaq");
    let t0 = Instant::now();
    loop {
        let log = std::fs::read_to_string(stderr_path(tag)).unwrap_or_default();
        if log.contains("queues running") {
            return child;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{tag}: rtdaq exited ({status}) before its queues ran:\n{log}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{tag}: queues not running after 30 s:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `config` (a file under `configs/`) with each `(from, to)` replaced once, written to a
/// temp file of tag `tag`. Panics when a `from` is missing, so an edited config cannot
/// silently differ from what the test means.
pub fn edited(config: &str, edits: &[(&str, String)], tag: &str) -> PathBuf {
    let mut text = std::fs::read_to_string(root().join("configs").join(config)).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{config} has no {from:?}");
        text = text.replacen(from, to, 1);
    }
    let p = tmp(tag, "toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Waits for a run started with [`start`]; its output (stderr included) and its report.
pub fn finish(child: Child, tag: &str) -> (Output, Value) {
    let mut out = child.wait_with_output().unwrap();
    out.stderr = std::fs::read(stderr_path(tag)).unwrap_or_default();
    let _ = std::fs::remove_file(stderr_path(tag));
    let text = std::fs::read_to_string(report_path(tag)).unwrap_or_else(|e| {
        panic!("{tag}: no report ({e}); {}", show(&out));
    });
    (out, serde_json::from_str(&text).unwrap())
}

/// The JSON object a peer (`what`) printed as its last line, once it exited 0.
pub fn peer_json(child: Child, what: &str) -> Value {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{what}: {}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{what} printed no JSON ({e}): {}", show(&out)))
}

/// The unsigned number at JSON pointer `ptr`.
pub fn u(v: &Value, ptr: &str) -> u64 {
    v.pointer(ptr)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{ptr} missing in {v}"))
}

/// Exit code, stdout and stderr of a run, for assertion messages.
pub fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `tcpreplay` sends `pcap` out of `pair`'s side A at `pps` packets per second.
pub fn tcpreplay(pair: &VethPair, pcap: &Path, pps: u32) {
    let rate = format!("--pps={pps}");
    let replay = pair
        .exec(
            Side::A,
            "tcpreplay",
            &[
                "-q",
                &rate,
                "-i",
                pair.ifname(Side::A),
                pcap.to_str().unwrap(),
            ],
        )
        .unwrap();
    assert!(replay.status.success(), "tcpreplay: {}", show(&replay));
}

/// The capabilities `key` grants in the shipped unit plus `dropin` (a file of
/// `rt-tuning/systemd/rtdaq.service.d-examples/`, or none): `net_raw`, `bpf`, ...
pub fn unit_caps(key: &str, dropin: Option<&str>) -> Vec<String> {
    let dir = root().join("rt-tuning/systemd");
    let mut files = vec![dir.join("rtdaq.service")];
    files.extend(dropin.map(|d| dir.join("rtdaq.service.d-examples").join(d)));
    let mut caps = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for l in text.lines() {
            if let Some(v) = l.strip_prefix(&format!("{key}=")) {
                caps.extend(
                    v.split_whitespace()
                        .map(|c| c.trim_start_matches("CAP_").to_ascii_lowercase()),
                );
            }
        }
    }
    assert!(!caps.is_empty(), "{key} in the unit");
    caps
}

/// `setpriv` as the unit runs the binary: user nobody, no groups, exactly `caps` as
/// inheritable, ambient and bounding set, no new privileges.
pub fn as_unit(caps: &[String]) -> Vec<String> {
    let list: Vec<String> = caps.iter().map(|c| format!("+{c}")).collect();
    let set = format!("-all,{}", list.join(","));
    [
        "setpriv",
        "--reuid=nobody",
        "--regid=nogroup",
        "--clear-groups",
        &format!("--inh-caps={set}"),
        &format!("--ambient-caps={set}"),
        &format!("--bounding-set={set}"),
        "--no-new-privs",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// `GET path` over HTTP/1.0; (status code, body).
pub fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let code = raw
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = raw
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (code, body)
}
