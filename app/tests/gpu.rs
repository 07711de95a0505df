//! The `gpu` feature of the appliance (`cargo test -p rtdaq --features gpu --test gpu`).
//!
//! Everywhere: the gpu build checks the GPU deployment (with its GPU memory), still runs a
//! CPU-only config, and without a CUDA driver refuses the GPU deployment with "no CUDA
//! driver found (libcuda.so)" and exit 2. On a host with a driver (the GPU host): the shipped
//! `configs/host-loopback-udp-gpu.toml` end to end: socket loopback -> host_pinned buffers
//! -> GPU reorder + int16le->fp32 -> every batch's GPU checksum equals the CPU reference of
//! the same received bytes (which the validator checked against the sender's pattern), no
//! loss, no allocation on the data path. GPU-only tests print "skipped: no CUDA driver".
//!
//! Carried to the GPU host as a binary (scripts/gpu-host.sh): `RTDAQ_BIN` names the rtdaq
//! binary and `RTDAQ_ROOT` the repository root there.
#![cfg(feature = "gpu")]

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn bin() -> PathBuf {
    std::env::var_os("RTDAQ_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rtdaq")), PathBuf::from)
}

fn root() -> PathBuf {
    std::env::var_os("RTDAQ_ROOT").map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .unwrap()
                .to_path_buf()
        },
        PathBuf::from,
    )
}

fn rtdaq(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env("RUST_LOG", "info")
        .output()
        .expect("run rtdaq")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn gpu_config() -> String {
    root()
        .join("configs/host-loopback-udp-gpu.toml")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn version_lists_the_gpu_feature() {
    let out = rtdaq(&["version"]);
    assert!(out.status.success());
    let t = text(&out.stdout);
    let features = t.lines().find(|l| l.starts_with("features:")).unwrap();
    assert!(features.contains("gpu"), "{t}");
}

#[test]
fn gpu_config_checks_with_its_gpu_memory() {
    let out = rtdaq(&["config", "check", &gpu_config()]);
    let t = text(&out.stdout);
    assert!(out.status.success(), "{t}{}", text(&out.stderr));
    assert!(t.contains("gpu 0: device memory"), "{t}");
    assert!(t.contains("stages: reorder on lo_udp rx queue 0"), "{t}");
    assert!(t.contains("this host:"), "{t}");
}

#[test]
fn gpu_build_runs_a_cpu_config() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cfg = root().join("configs/host-loopback-udp.toml");
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let text_cfg = std::fs::read_to_string(cfg)
        .unwrap()
        .replace("127.0.0.1:5000", &format!("127.0.0.1:{port}"));
    let path = std::env::temp_dir().join(format!("rtdaq-gpu-cpu-{port}.toml"));
    std::fs::write(&path, text_cfg).unwrap();
    let out = rtdaq(&["run", "--config", path.to_str().unwrap(), "--duration", "2"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("PASS"));
}

#[test]
fn without_a_driver_the_gpu_config_exits_2() {
    if rtdaq_gpu::driver_present() {
        eprintln!("skipped: a CUDA driver is present (this test is for hosts without one)");
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = rtdaq(&["run", "--config", &gpu_config(), "--duration", "1"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no CUDA driver found (libcuda.so)"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn loopback_to_gpu_reorder_checksums_match() {
    if !rtdaq_gpu::driver_present() {
        eprintln!("skipped: no CUDA driver");
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let json = std::env::temp_dir().join(format!("rtdaq-gpu-e2e-{}.json", std::process::id()));
    let out = rtdaq(&[
        "run",
        "--config",
        &gpu_config(),
        "--duration",
        "5",
        "--report-json",
        json.to_str().unwrap(),
    ]);
    let (o, e) = (text(&out.stdout), text(&out.stderr));
    println!("{o}\n{e}");
    assert_eq!(out.status.code(), Some(0), "{o}{e}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["lost"], 0);
    assert_eq!(r["io_thread_allocations"], 0);
    let q = &r["rx"]["queues"][0];
    let g = &q["gpu"];
    assert_eq!(q["corrupt"], 0, "payloads equal the sender's pattern");
    let completed = g["batches_completed"].as_u64().unwrap();
    assert!(completed > 10, "{g}");
    assert_eq!(g["batches_submitted"], g["batches_completed"]);
    assert_eq!(g["checksum_ok"].as_u64(), Some(completed), "{g}");
    assert_eq!(g["checksum_mismatch"], 0);
    assert_eq!(g["errors"], 0);
    assert_eq!(g["batches_dropped"], 0);
    assert_eq!(
        g["packets"], q["packets"],
        "every received packet reached the GPU"
    );
}
