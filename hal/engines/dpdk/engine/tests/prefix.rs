//! Two rtdaq processes run DPDK at once (as root): `eal_args` without `--no-shconf` and
//! without `--file-prefix`, so both would fight over `/var/run/dpdk/rte` — but the engine
//! adds `--file-prefix rtdaq-<pid>`. The test binary re-runs itself as the second process
//! while its own EAL and port are up.

mod common;

use std::process::Command;

use common::*;

const EAL: &[&str] = &[
    "--no-huge",
    "-m",
    "256",
    "--no-pci",
    "--vdev",
    "net_ring0",
    "--log-level=lib.eal:notice",
];

const CHILD: &str = "RTDAQ_DPDK_PREFIX_CHILD";

#[test]
fn two_processes_run_at_once_with_their_own_file_prefix() {
    require_root();
    let s = Setup::new(&config_toml(EAL, "net_ring0", 1, 1, true, 0));
    let engine = s.open().unwrap_or_else(|e| panic!("{e}"));
    let prefix = format!("rtdaq-{}", std::process::id());
    let args = engine.eal().args();
    assert!(
        args.windows(2)
            .any(|w| w[0] == "--file-prefix" && w[1] == prefix),
        "{args:?}"
    );
    if std::env::var_os(CHILD).is_some() {
        println!("CHILD OPENED {prefix}");
        return;
    }
    assert!(
        std::path::Path::new(&format!("/var/run/dpdk/{prefix}")).exists(),
        "the EAL's runtime directory is per process"
    );
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "two_processes_run_at_once_with_their_own_file_prefix",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "second process failed:\n{text}");
    assert!(text.contains("CHILD OPENED rtdaq-"), "{text}");
    assert!(!text.contains(&format!("CHILD OPENED {prefix}")), "{text}");
    drop(engine);
    // DPDK leaves its runtime directory behind (without --in-memory / --no-shconf): tidy up.
    let child = text
        .split("CHILD OPENED ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .unwrap_or_default()
        .to_owned();
    for p in [prefix, child] {
        if p.starts_with("rtdaq-") {
            let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{p}"));
        }
    }
}
