//! GPU products downstream (issue #31): `cargo test -p rtdaq --features gpu,ucx --test
//! gpu_egress`.
//!
//! On a host with a CUDA driver (the GPU host): the shipped
//! `configs/host-loopback-udp-gpu-egress-ucx.toml` end to end: socket loopback ->
//! host_pinned buffers -> GPU reorder + int16le->fp32 + FFT -> each batch's spectra both
//! into a DADA file and, one tagged UCX message each, to `scripts/peers/ucx_recv.c` (a C
//! receiver against the system's UCX, no rtdaq code) over TCP on loopback. Every product
//! arrives, in sequence, and the bytes the receiver got are the DADA file's data byte for
//! byte; nothing lost, no allocation on the data path. Without a driver it skips
//! (recorded, `rtdaq_testbed::require::skip_gpu`).
//!
//! Carried to the GPU host as a binary (scripts/gpu-host.sh): `RTDAQ_BIN` names the rtdaq
//! binary (`--features gpu,ucx`), `RTDAQ_ROOT` the repository root and `RTDAQ_UCX_RECV` a
//! built `ucx_recv` there (no compiler there); elsewhere the test builds the receiver with
//! `cc` and `pkg-config ucx`.
#![cfg(all(feature = "gpu", feature = "ucx"))]

mod e2e;

use e2e::ucx::{free_tcp_port, free_udp_port, receiver, summary, ucx_recv};
use e2e::{root, show, u};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The rtdaq binary: `RTDAQ_BIN`, else this build's.
fn bin() -> PathBuf {
    std::env::var_os("RTDAQ_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rtdaq")), PathBuf::from)
}

/// The shipped config on free ports, written into `dir`.
fn config(dir: &Path, dest: u16) -> PathBuf {
    let rx = free_udp_port();
    let mut text =
        std::fs::read_to_string(root().join("configs/host-loopback-udp-gpu-egress-ucx.toml"))
            .unwrap();
    for (from, to) in [
        ("127.0.0.1:13338\"]", format!("127.0.0.1:{dest}\"]")),
        ("udp://127.0.0.1:5000", format!("udp://127.0.0.1:{rx}")),
        ("udp://127.0.0.1:5000", format!("udp://127.0.0.1:{rx}")),
    ] {
        assert!(text.contains(from), "the shipped config has no {from:?}");
        text = text.replacen(from, &to, 1);
    }
    let p = dir.join("gpu-egress.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// The data of the run's one DADA file (after its 4096-byte header).
fn dada_data(dir: &Path) -> Vec<u8> {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "dada"))
        .collect();
    assert_eq!(files.len(), 1, "one DADA file: {files:?}");
    let bytes = std::fs::read(&files[0]).unwrap();
    assert!(bytes.len() >= 4096);
    bytes[4096..].to_vec()
}

#[test]
fn gpu_products_reach_a_ucx_receiver_equal_to_their_recording() {
    if !rtdaq_gpu::driver_present() {
        rtdaq_testbed::require::skip_gpu("no CUDA driver");
        return;
    }
    let dir = rtdaq_testbed::test_path("gpu-egress");
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_tcp_port();
    let (rjson, rdata) = (dir.join("recv.json"), dir.join("recv.bin"));
    let child = receiver(
        &ucx_recv(&dir.join("ucx_recv")),
        port,
        &rjson,
        Some(&rdata),
        &["--max-bytes", "8388608"],
    );
    let cfg = config(&dir, port);
    let json = dir.join("report.json");
    let rec = dir.join("rec");
    let out = Command::new(bin())
        .args(["run", "--config"])
        .arg(&cfg)
        .args(["--duration", "4", "--output-dir"])
        .arg(&rec)
        .arg("--report-json")
        .arg(&json)
        .env("RUST_LOG", "info")
        .output()
        .expect("run rtdaq");
    println!("{}", show(&out));
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let g = summary(child, &rjson);
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["lost"], 0, "{r}");
    assert_eq!(r["io_thread_allocations"], 0, "{r}");
    let q = &r["rx"]["queues"][0];
    let batches = u(q, "/gpu/batches_completed");
    assert!(batches >= 10, "{}", q["gpu"]);
    assert_eq!(u(q, "/gpu/checksum_ok"), batches, "{}", q["gpu"]);
    let e = &q["egress"][0];
    assert_eq!(e["unit"], "batches", "{e}");
    assert_eq!(u(e, "/payloads"), batches, "{e}");
    assert_eq!(u(e, "/payloads_sent"), batches, "{e}");
    for why in ["egress_full", "egress_error", "peer_gone"] {
        assert_eq!(u(e, &format!("/dropped/{why}")), 0, "{e}");
    }
    assert_eq!(u(&g, "/payloads"), batches, "one message a product: {g}");
    assert_eq!(u(&g, "/missing"), 0, "{g}");
    assert_eq!(u(&g, "/bad"), 0, "{g}");
    let got = std::fs::read(&rdata).unwrap();
    let product = 4_079_616;
    assert_eq!(got.len() as u64, batches * product, "whole products");
    let recorded = dada_data(&rec);
    assert_eq!(
        recorded.len(),
        got.len(),
        "the recording holds as many bytes"
    );
    assert!(
        recorded == got,
        "the products received equal the products recorded, byte for byte"
    );
}
