//! EAL initialisation errors. DPDK initialises once per process, so each scenario runs in a
//! child process: the parent test re-executes this test binary filtered to `child`, with
//! `RTDAQ_DPDK_CHILD=<scenario>`; the child prints `CHILD-RESULT: <error text>`.
//!
//! Run (as root): `cargo test -p rtdaq-dpdk-sys --test errors`.
use std::process::Command;

use rtdaq_dpdk_sys::{DpdkError, Eal};

const ENV: &str = "RTDAQ_DPDK_CHILD";

/// The child side: does nothing in a normal run.
#[test]
fn child() {
    let Ok(scenario) = std::env::var(ENV) else {
        return;
    };
    let base = [
        "-l",
        "0",
        "--no-shconf",
        "--no-pci",
        "--log-level=lib.eal:notice",
    ];
    let extra: &[&str] = match scenario.as_str() {
        "bad_arg" => &["--no-huge", "-m", "512", "--definitely-not-an-eal-flag"],
        "unknown_vdev" => &["--no-huge", "-m", "512", "--vdev", "net_bogus0"],
        "no_hugepages" => &["-m", "64"],
        other => panic!("unknown scenario {other}"),
    };
    let args: Vec<&str> = base.iter().chain(extra).copied().collect();
    let e = Eal::init(&args).expect_err("EAL init must fail");
    println!("CHILD-RESULT: {e}");
    if let DpdkError::EalInit { errno, .. } = e {
        println!("CHILD-ERRNO: {errno}");
    }
    // A second attempt in the same process is refused without calling DPDK again.
    let again = Eal::init(&args).expect_err("no retry");
    assert!(
        matches!(again, DpdkError::EalInitFailedBefore { .. }),
        "{again}"
    );
    println!("CHILD-AGAIN: {again}");
}

fn run_child(scenario: &str) -> String {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(ENV, scenario)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "child {scenario} failed: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("CHILD-RESULT: ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no result from child {scenario}:\n{stdout}\n{stderr}"));
    assert!(
        stdout.contains("CHILD-AGAIN: EAL init already failed"),
        "{stdout}"
    );
    eprintln!("{scenario}: {line}");
    line.to_owned()
}

#[test]
fn bad_eal_argument_names_cause_and_fix() {
    let msg = run_child("bad_arg");
    assert!(
        msg.starts_with("EAL init failed: invalid EAL arguments"),
        "{msg}"
    );
    assert!(msg.contains("EINVAL"), "{msg}");
    assert!(
        msg.contains("--no-huge -m 512"),
        "suggests working args: {msg}"
    );
}

#[test]
fn unknown_vdev_is_a_probe_error() {
    let msg = run_child("unknown_vdev");
    assert!(msg.starts_with("EAL init failed:"), "{msg}");
    assert!(msg.contains("ENODEV") && msg.contains("--vdev"), "{msg}");
}

/// Without `--no-huge` and with no hugepages reserved, the error says to reserve them or
/// pass `--no-huge`. Skipped (with a note) when this host has hugepages reserved.
#[test]
fn no_hugepages_says_reserve_or_no_huge() {
    let reserved: u64 = std::fs::read_dir("/sys/kernel/mm/hugepages")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| std::fs::read_to_string(e.path().join("nr_hugepages")).ok())
                .filter_map(|s| s.trim().parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    if reserved > 0 {
        rtdaq_testbed::require::skip(format!(
            "{reserved} hugepages reserved on this host: the error for none cannot be seen"
        ));
        return;
    }
    let msg = run_child("no_hugepages");
    assert!(msg.contains("hugepages"), "{msg}");
    assert!(
        msg.contains("nr_hugepages") && msg.contains("--no-huge -m 512"),
        "{msg}"
    );
}
