//! `rtdaq doctor` against the fixture trees under `tests/fixtures/` (written by
//! `tests/fixtures/make-doctor-trees.py`):
//!
//! | tree | config | expected |
//! |---|---|---|
//! | `igx-thor-tuned` | `configs/igx-thor/dpdk-hds.toml` | every check passes, exit 0 |
//! | `igx-orin-half-tuned` | `configs/igx-orin/dpdk-hds.toml` | a mix, exit 1 |
//! | `host-untuned` | `configs/host-loopback-udp.toml` | fails with a fix for each problem, exit 1 |
//!
//! Each run's `--json` is compared, check by check, with the reviewed snapshot
//! `tests/fixtures/doctor-expected/<tree>.json`. After an intended change, rewrite the
//! snapshots with `RTDAQ_UPDATE_EXPECTED=1 cargo test -p rtdaq --test doctor` and review the diff.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn rtdaq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rtdaq"))
        .args(args)
        .current_dir(root())
        .env("RUST_LOG", "warn")
        .output()
        .expect("run rtdaq")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `doctor --json` on a tree with a config; returns the exit code and the findings.
fn doctor_json(tree: &str, config: &str) -> (i32, Vec<Value>) {
    let out = rtdaq(&[
        "doctor",
        "--root",
        &format!("tests/fixtures/{tree}"),
        "--config",
        config,
        "--json",
    ]);
    let stdout = text(&out.stdout);
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("--json is not JSON ({e}):\n{stdout}{}", text(&out.stderr)));
    let arr = v.as_array().expect("a JSON array").clone();
    for f in &arr {
        let o = f.as_object().expect("objects");
        let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["check", "detail", "fix", "status"], "{f}");
        let status = o["status"].as_str().unwrap();
        assert!(["pass", "warn", "fail", "skip"].contains(&status), "{f}");
        // A fix line for every problem; none for a pass or a skip.
        assert_eq!(
            o["fix"].is_string(),
            status == "warn" || status == "fail",
            "{f}"
        );
        if status == "skip" {
            assert!(o["detail"].as_str().unwrap().starts_with("n/a: "), "{f}");
        }
    }
    (out.status.code().expect("exit code"), arr)
}

/// Compares with `tests/fixtures/doctor-expected/<tree>.json` (or rewrites it).
fn assert_snapshot(tree: &str, findings: &[Value]) {
    let path = root().join(format!("tests/fixtures/doctor-expected/{tree}.json"));
    if std::env::var_os("RTDAQ_UPDATE_EXPECTED").is_some() {
        // Written as doctor prints it (keys in the order check, status, detail, fix).
        let config = match tree {
            "igx-thor-tuned" => "configs/igx-thor/dpdk-hds.toml",
            "igx-orin-half-tuned" => "configs/igx-orin/dpdk-hds.toml",
            _ => "configs/host-loopback-udp.toml",
        };
        let out = rtdaq(&[
            "doctor",
            "--root",
            &format!("tests/fixtures/{tree}"),
            "--config",
            config,
            "--json",
        ]);
        let actual = text(&out.stdout);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (RTDAQ_UPDATE_EXPECTED=1 writes it)",
                path.display()
            )
        }))
        .unwrap();
    let mut diffs = Vec::new();
    for (i, (a, e)) in findings.iter().zip(&expected).enumerate() {
        if a != e {
            diffs.push(format!("finding {i}:\n  expected {e}\n  actual   {a}"));
        }
    }
    if findings.len() != expected.len() {
        diffs.push(format!(
            "{} findings, expected {}",
            findings.len(),
            expected.len()
        ));
    }
    assert!(
        diffs.is_empty(),
        "{tree}: doctor's findings differ from {} (RTDAQ_UPDATE_EXPECTED=1 rewrites it; review \
         the diff):\n{}",
        path.display(),
        diffs.join("\n")
    );
}

/// `check` → `status` of a findings array.
fn status_of<'a>(findings: &'a [Value], check: &str) -> &'a str {
    findings
        .iter()
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no finding {check}"))["status"]
        .as_str()
        .unwrap()
}

#[test]
fn igx_thor_tuned_passes_every_check() {
    let (code, f) = doctor_json("igx-thor-tuned", "configs/igx-thor/dpdk-hds.toml");
    let not_pass: Vec<&Value> = f.iter().filter(|x| x["status"] != "pass").collect();
    assert!(not_pass.is_empty(), "{not_pass:#?}");
    assert_eq!(code, 0);
    assert_eq!(f.len(), 22);
    assert_snapshot("igx-thor-tuned", &f);
}

#[test]
fn igx_orin_half_tuned_finds_what_is_missing() {
    let (code, f) = doctor_json("igx-orin-half-tuned", "configs/igx-orin/dpdk-hds.toml");
    assert_eq!(code, 1);
    for (check, want) in [
        ("kernel.preempt_rt", "pass"),
        ("cmdline.isolcpus", "pass"),
        ("cmdline.nohz_full", "fail"),
        ("cmdline.rcu_nocbs", "pass"),
        ("cmdline.irqaffinity", "fail"),
        ("cpu.governor", "pass"),
        ("cpu.cstates", "warn"),
        ("cpu.steal", "pass"),
        ("kernel.sched_rt_runtime_us", "fail"),
        ("kernel.timer_migration", "warn"),
        ("mm.hugepages", "pass"),
        ("mm.transparent_hugepages", "warn"),
        ("mm.swap", "warn"),
        ("net.mtu:cx7_p0", "fail"),
        // Flow control on while the config states nothing: silent throttling is warned.
        ("net.pause:cx7_p0", "warn"),
        ("net.irq_affinity:cx7_p0", "fail"),
        ("pcie.mrrs:cx7_p0", "fail"),
        ("pcie.mps:cx7_p0", "warn"),
        ("gpu.present", "pass"),
        ("gpu.bar1", "fail"),
        ("gpu.clocks", "warn"),
        ("gpu.direct", "fail"),
    ] {
        assert_eq!(status_of(&f, check), want, "{check}");
    }
    assert_snapshot("igx-orin-half-tuned", &f);
}

#[test]
fn host_untuned_fails_with_a_fix_for_each_problem() {
    let (code, f) = doctor_json("host-untuned", "configs/host-loopback-udp.toml");
    assert_eq!(code, 1);
    for check in [
        "kernel.preempt_rt",
        "cmdline.isolcpus",
        "cmdline.nohz_full",
        "cmdline.rcu_nocbs",
        "cmdline.irqaffinity",
        "cpu.governor",
    ] {
        assert_eq!(status_of(&f, check), "fail", "{check}");
    }
    // No GPU tool under the tree: skipped, not guessed.
    assert_eq!(status_of(&f, "gpu.present"), "skip");
    assert_snapshot("host-untuned", &f);
}

#[test]
fn human_output_is_one_line_per_check_with_its_fix() {
    let out = rtdaq(&[
        "doctor",
        "--root",
        "tests/fixtures/igx-orin-half-tuned",
        "--config",
        "configs/igx-orin/dpdk-hds.toml",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("rtdaq doctor: "), "{stdout}");
    assert_eq!(lines.len(), 22 + 2, "{stdout}");
    for l in &lines[1..23] {
        let status = &l[..4];
        assert!(["PASS", "WARN", "FAIL", "SKIP"].contains(&status), "{l}");
        assert_eq!(
            l.contains("  -> fix: "),
            status == "WARN" || status == "FAIL",
            "{l}"
        );
    }
    assert_eq!(lines[23], "7 pass, 7 warn, 8 fail, 0 n/a");
    assert!(
        stdout.contains("FAIL pcie.mrrs:cx7_p0 ",)
            && stdout.contains("setpci -s 0005:03:00.0 CAP_EXP+8.w=5000:7000"),
        "{stdout}"
    );
}

#[test]
fn embedded_config_is_the_default() {
    // Without --config, doctor checks against the config sealed into the binary.
    let embedded = option_env!("RTDAQ_CONFIG").unwrap_or("configs/host-loopback-udp.toml");
    let out = rtdaq(&["doctor", "--root", "tests/fixtures/host-untuned", "--json"]);
    let (code, with_file) = doctor_json("host-untuned", embedded);
    assert_eq!(out.status.code(), Some(code));
    let v: Value = serde_json::from_str(&text(&out.stdout)).expect("JSON");
    assert_eq!(v.as_array().unwrap(), &with_file);
}

#[test]
fn usage_and_config_errors_exit_2() {
    for args in [
        &["doctor", "--root", "tests/fixtures/does-not-exist"][..],
        &["doctor", "--no-such-flag"],
        &[
            "doctor",
            "--root",
            "tests/fixtures/host-untuned",
            "--config",
            "tests/fixtures/config-invalid/unknown-key.toml",
        ],
    ] {
        let out = rtdaq(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

/// `gpu.direct` by engine: on the tuned IGX Thor tree without nvidia_peermem, the open kernel
/// module's DMA-BUF serves the ibverbs engine (it registers a dma-buf) but not DPDK, whose
/// mlx5 PMD registers the GPU address with `ibv_reg_mr`, which only nvidia-peermem pins.
#[test]
fn gpu_direct_needs_peermem_for_dpdk_and_dma_buf_serves_ibverbs() {
    let tree = rtdaq_testbed::test_path("rtdaq-doctor-nopeer");
    let _ = std::fs::remove_dir_all(&tree);
    let src = root().join("tests/fixtures/igx-thor-tuned");
    let st = Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(&tree)
        .status()
        .unwrap();
    assert!(st.success());
    let modules = tree.join("proc/modules");
    let kept: String = std::fs::read_to_string(&modules)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("nvidia_peermem "))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&modules, kept).unwrap();
    let finding = |config: &str| {
        let out = rtdaq(&[
            "doctor",
            "--root",
            tree.to_str().unwrap(),
            "--config",
            config,
            "--json",
        ]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .find(|f| f["check"] == "gpu.direct")
            .cloned()
            .unwrap()
    };
    let dpdk = finding("configs/igx-thor/dpdk-hds.toml");
    assert_eq!(dpdk["status"], "fail", "{dpdk}");
    let detail = dpdk["detail"].as_str().unwrap();
    assert!(
        detail.contains("ibv_reg_mr") && detail.contains("nvidia_peermem is not loaded"),
        "{detail}"
    );
    assert!(dpdk["fix"]
        .as_str()
        .unwrap()
        .contains("modprobe nvidia-peermem"));
    let verbs = finding("configs/igx-thor/roce-gpudirect.toml");
    assert_eq!(verbs["status"], "pass", "{verbs}");
    assert!(
        verbs["detail"].as_str().unwrap().contains("DMA-BUF"),
        "{verbs}"
    );
    let _ = std::fs::remove_dir_all(&tree);
}
