//! The main job on a busy host: one busy loop per online CPU at normal priority (what any
//! ordinary work does to a small box), and the shipped loopback deployments must still lose
//! nothing, run after run. This is what `SCHED_FIFO` queue threads are for; it needs root
//! (or `CAP_SYS_NICE` and `CAP_IPC_LOCK`) to get them, so without root each test fails in `scripts/test.sh` (`RTDAQ_TEST_REQUIRE=1`) and skips, recorded, elsewhere
//! (`rtdaq_testbed::require`).
//!
//! `scripts/test.sh` runs it with the release binary:
//! `cargo test --release -p rtdaq --test busy_host -- --ignored --test-threads 1`.
//! Env: `RTDAQ_BUSY_RUNS` (default 5 runs in a row), `RTDAQ_BUSY_SECS` (default 10 s each).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn env_u32(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Online CPUs (`/sys/devices/system/cpu/online`, e.g. "0-1" or "0,2-3").
fn online_cpus() -> Vec<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let mut cpus = Vec::new();
    for part in text.trim().split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus
}

/// One busy loop per CPU at normal priority (SCHED_OTHER, nice 0), pinned with taskset;
/// killed on drop.
struct BusyLoops(Vec<(u32, Child)>);

impl BusyLoops {
    fn start() -> Self {
        let loops = online_cpus()
            .into_iter()
            .map(|cpu| {
                let child = Command::new("taskset")
                    .args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"])
                    .stdin(Stdio::null())
                    .spawn()
                    .expect("start a busy loop (taskset, from util-linux)");
                (cpu, child)
            })
            .collect();
        // Let them reach their loops before the run starts.
        std::thread::sleep(Duration::from_millis(200));
        BusyLoops(loops)
    }

    /// CPU seconds each loop has used so far (utime + stime from /proc/PID/stat).
    fn cpu_seconds(&self) -> Vec<f64> {
        let tick = 100.0; // USER_HZ on Linux
        self.0
            .iter()
            .map(|(_, c)| {
                let stat = std::fs::read_to_string(format!("/proc/{}/stat", c.id())).unwrap();
                // Fields after the ")" of the command name: state is field 3, utime 14, stime 15.
                let rest = &stat[stat.rfind(')').unwrap() + 2..];
                let f: Vec<&str> = rest.split_whitespace().collect();
                (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / tick
            })
            .collect()
    }

    fn all_running(&mut self) -> bool {
        self.0
            .iter_mut()
            .all(|(_, c)| c.try_wait().unwrap().is_none())
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The longest loop turn of each queue thread and the CPU steal of the run (the report's
/// `longest_stall_us`, `longest_stall_at_s`, `cpu_steal_s`): what a lost run is explained by.
fn stalls(r: &Value) -> String {
    let mut parts = Vec::new();
    for dir in ["rx", "tx"] {
        for q in r[dir]["queues"].as_array().into_iter().flatten() {
            if let (Some(us), Some(at)) = (
                q["longest_stall_us"].as_f64(),
                q["longest_stall_at_s"].as_f64(),
            ) {
                parts.push(format!(
                    "{dir} {}:{} longest turn {:.1} ms at {at:.2} s",
                    q["interface"].as_str().unwrap_or("?"),
                    q["queue"],
                    us / 1e3
                ));
            }
        }
    }
    format!("{}; CPU steal {}", parts.join(", "), r["cpu_steal_s"])
}

fn report(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("report written")).unwrap()
}

/// `runs` runs of `config` (`None`: the embedded default) of `secs` s each beside the busy
/// loops; every one must exit 0 with 0 lost and every packet it generated received.
fn zero_loss_beside_busy_loops(label: &str, config: Option<&Path>) {
    zero_loss_with(Path::new(env!("CARGO_BIN_EXE_rtdaq")), label, config);
}

/// As [`zero_loss_beside_busy_loops`] with the binary `bin`.
fn zero_loss_with(bin: &Path, label: &str, config: Option<&Path>) {
    if !rtdaq_testbed::require::need_root(&format!(
        "{label} on a busy host: SCHED_FIFO queue threads and locked memory; run as root: cargo test --release -p rtdaq --test busy_host -- --ignored"
    )) {
        return;
    }
    let runs = env_u32("RTDAQ_BUSY_RUNS", 5);
    let secs = env_u32("RTDAQ_BUSY_SECS", 10);
    let dir = rtdaq_testbed::test_dir();
    let mut busy = BusyLoops::start();
    let before = busy.cpu_seconds();
    for k in 1..=runs {
        let json = dir.join(format!("{label}-{k}.json"));
        let mut cmd = Command::new(bin);
        cmd.arg("run").env("RUST_LOG", "warn");
        if let Some(c) = config {
            cmd.arg("--config").arg(c);
        }
        let out = cmd
            .args(["--duration", &secs.to_string(), "--report-json"])
            .arg(&json)
            .output()
            .expect("run rtdaq");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            busy.all_running(),
            "{label} run {k}: a busy loop ended during the run"
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{label} run {k} of {runs} beside busy loops failed:\n{stdout}\n{stderr}"
        );
        let r = report(&json);
        let rx = r["rx"]["totals"]["packets"].as_u64().unwrap();
        assert_eq!(r["lost"], 0, "{label} run {k}: {stdout}");
        assert!(rx > 0, "{label} run {k}: nothing received:\n{stdout}");
        assert_eq!(
            r["rx"]["totals"]["drops_total"], 0,
            "{label} run {k}: drops:\n{stdout}"
        );
        eprintln!(
            "{label} run {k}/{runs}: {rx} packets received, 0 lost, exit 0; {}",
            stalls(&r)
        );
    }
    // The loops really competed: each got CPU time during the runs (they run whenever no
    // queue thread does), so the runs above shared every core with ordinary work.
    let after = busy.cpu_seconds();
    for ((cpu, _), (a, b)) in busy.0.iter().zip(after.iter().zip(&before)) {
        assert!(
            a - b > 0.5,
            "the busy loop on CPU {cpu} got only {:.2} s of CPU: the host was not busy",
            a - b
        );
    }
}

#[test]
#[ignore = "needs root; 5 runs x 10 s; scripts/test.sh runs it"]
fn default_deployment_loses_nothing_on_a_busy_host() {
    zero_loss_beside_busy_loops("host-loopback-udp", None);
}

#[test]
#[ignore = "needs root; 5 runs x 10 s; scripts/test.sh runs it"]
fn four_queue_deployment_loses_nothing_on_a_busy_host() {
    zero_loss_beside_busy_loops(
        "host-udp-4q",
        Some(&root().join("configs/host-udp-4q.toml")),
    );
}

/// The DPDK engine's ring-PMD loopback (`configs/vdev-dpdk-ring.toml`, embedded in
/// `target/engines/rtdaq-dpdk` by `scripts/build-engines.sh --release`; a debug build is too
/// slow to ever drain the port at this rate): its sleeping RX queue must
/// pause after draining the port (receive moderation), or the kernel hands its core to the
/// busy loop for 50 ms a second and the ring PMD overflows.
#[test]
#[ignore = "needs root, DPDK and target/engines/rtdaq-dpdk; scripts/test.sh runs it"]
fn dpdk_ring_loopback_loses_nothing_on_a_busy_host() {
    let bin = root().join("target/engines/rtdaq-dpdk");
    if !rtdaq_testbed::require::need_file(&bin, "scripts/build-engines.sh dpdk builds it") {
        return;
    }
    zero_loss_with(&bin, "vdev-dpdk-ring", None);
}
