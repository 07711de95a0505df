//! The C UCX receiver (`scripts/peers/ucx_recv.c`) for the UCX egress tests
//! (`egress_ucx.rs`, `egress_units.rs`, `gpu_egress.rs`): built, started, its summary read.

use super::{root, show};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A TCP port free on 127.0.0.1 now (a receiver's listener).
pub fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A UDP port free on 127.0.0.1 now (rtdaq's receive socket).
pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The receiver: `RTDAQ_UCX_RECV` when set (a host without a compiler, e.g. the GPU host),
/// else built to `out` with `cc` and `pkg-config ucx`.
pub fn ucx_recv(out: &Path) -> PathBuf {
    if let Some(p) = std::env::var_os("RTDAQ_UCX_RECV") {
        return PathBuf::from(p);
    }
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "ucx"])
        .output()
        .expect("pkg-config (Debian: apt-get install pkg-config libucx-dev)");
    assert!(flags.status.success(), "pkg-config ucx: {}", show(&flags));
    let flags = String::from_utf8(flags.stdout).unwrap();
    let cc = Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(out)
        .arg(root().join("scripts/peers/ucx_recv.c"))
        .args(flags.split_whitespace())
        .output()
        .expect("cc");
    assert!(cc.status.success(), "cc ucx_recv.c: {}", show(&cc));
    out.to_path_buf()
}

/// A receiver on `port`, expecting `streams` ends, writing its summary to `json` (and the
/// payload data to `data`); returns once it listens.
pub fn receiver(bin: &Path, port: u16, json: &Path, data: Option<&Path>, extra: &[&str]) -> Child {
    let mut cmd = Command::new(bin);
    // TCP_CM_REUSEADDR: a receiver restarted on a killed one's port binds though the killed
    // one's connections are still in TIME_WAIT.
    cmd.env("UCX_TLS", "tcp")
        .env("UCX_TCP_CM_REUSEADDR", "y")
        .args([
            "--port",
            &port.to_string(),
            "--streams",
            "1",
            "--seconds",
            "60",
        ])
        .arg("--json")
        .arg(json)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(d) = data {
        cmd.arg("--data").arg(d);
    }
    let mut child = cmd.spawn().expect("spawn ucx_recv");
    // UCX logs to stdout too (e.g. a bind refused while a killed receiver's port is still
    // held, which ucx_recv retries): read up to its own line.
    let mut line = String::new();
    let mut reader = BufReader::new(child.stdout.as_mut().unwrap());
    while !line.starts_with("listening") {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
    }
    if !line.starts_with("listening") {
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!("ucx_recv did not listen: {line:?} {}", show(&out));
    }
    child
}

/// Waits for a receiver and reads its summary.
pub fn summary(child: Child, json: &Path) -> Value {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "ucx_recv: {}", show(&out));
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}
