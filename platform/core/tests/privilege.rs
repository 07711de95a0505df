//! Behaviour without the real-time privileges, tested in a child process.
//!
//! The parent re-runs this test binary (only the `child_scenario` test) under
//! `prlimit --memlock=0:0 --rtprio=0:0` and `setpriv`, which drops every capability (bounding,
//! inheritable, ambient sets) before the exec: the child keeps uid 0 but has no
//! CAP_SYS_NICE / CAP_IPC_LOCK, and its RLIMIT_RTPRIO / RLIMIT_MEMLOCK are 0, so
//! `sched_setscheduler(SCHED_FIFO)`, `mlockall` and `mlock` fail with EPERM. The child
//! asserts; the parent checks that it ran and passed. Nothing outlives the child.
//!
//! Needs `prlimit` and `setpriv` (Debian/Ubuntu package `util-linux`).

mod common;

use std::process::{Command, Output};
use std::sync::Mutex;

use rtdaq_platform::memory::{Region, RegionSpec};
use rtdaq_platform::rt::{self, Capability, RtRequest, SchedPolicy};
use rtdaq_platform::{CpuList, PlatformError};

const CHILD_ENV: &str = "RTDAQ_PLATFORM_TEST_CHILD";

// ---- parent side ---------------------------------------------------------------------------

fn run_child(scenario: &str) -> Output {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = Command::new("prlimit");
    cmd.args(["--memlock=0:0", "--rtprio=0:0", "--"]);
    if common::is_root() {
        // An unprivileged user has no capabilities to drop (and may not shrink the bounding
        // set); the rlimits alone deny it.
        cmd.args([
            "setpriv",
            "--inh-caps=-all",
            "--ambient-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]);
    }
    cmd.arg(exe)
        .args([
            "--exact",
            "child_scenario",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, scenario)
        .env_remove("RUST_LOG");
    cmd.output().unwrap_or_else(|e| {
        panic!("cannot run prlimit/setpriv ({e}): install util-linux (apt-get install util-linux)")
    })
}

fn check_child(scenario: &str) {
    let out = run_child(scenario);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(&format!("CHILD-SCENARIO-DONE {scenario}")),
        "child scenario `{scenario}` failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
}

#[test]
fn without_privileges_optional_rt_degrades_and_warns_once() {
    check_child("optional");
}

#[test]
fn without_privileges_required_rt_fails_with_the_message() {
    check_child("required");
}

// ---- child side ----------------------------------------------------------------------------

/// Runs only in the child (the parent passes `CHILD_ENV`); a no-op in a normal test run.
#[test]
fn child_scenario() {
    let Ok(scenario) = std::env::var(CHILD_ENV) else {
        return;
    };
    capture::install();
    assert_eq!(
        rt::has_capability(Capability::SysNice),
        Some(false),
        "the child still has CAP_SYS_NICE: the privilege drop did not work"
    );
    assert_eq!(rt::has_capability(Capability::IpcLock), Some(false));
    match scenario.as_str() {
        "optional" => optional(),
        "required" => required(),
        other => panic!("unknown scenario {other}"),
    }
    println!("CHILD-SCENARIO-DONE {scenario}");
}

fn request(required: bool) -> RtRequest {
    RtRequest {
        core: Some(0),
        priority: Some(10),
        prefault_stack_kib: 64,
        required,
    }
}

fn optional() {
    for round in 0..2 {
        let out = rt::enter_thread(&request(false)).expect("degrades, does not fail");
        assert_eq!(out.core, Some(0), "pinning needs no privilege");
        assert_eq!(out.priority, None);
        assert_eq!(out.stack_prefaulted_kib, 64);
        assert_eq!(out.degraded.len(), 1, "round {round}: {out:?}");
        assert_eq!(out.degraded[0].capability, Capability::SysNice);
        assert!(out.degraded[0].message.contains("CAP_SYS_NICE"));
        assert!(out.degraded[0]
            .message
            .contains("continuing with SCHED_OTHER"));
    }
    assert_eq!(rt::current_policy().unwrap(), SchedPolicy::Other);
    assert_eq!(rt::current_affinity().unwrap(), CpuList::from_ids([0]));

    // Another thread degrading the same way does not warn again.
    std::thread::spawn(|| rt::enter_thread(&request(false)).unwrap())
        .join()
        .unwrap();

    for _ in 0..2 {
        let out = rt::lock_memory(false).expect("degrades, does not fail");
        assert!(!out.memory_locked);
        assert_eq!(out.degraded[0].capability, Capability::IpcLock);
        assert!(out.degraded[0].message.contains("CAP_IPC_LOCK"));
    }
    // A host region that cannot be locked is still usable; same capability, no new warning.
    let mut r = Region::allocate(&RegionSpec::host("unlocked", 1 << 20)).unwrap();
    assert!(!r.is_locked());
    r.as_mut_slice()[0] = 1;

    let warnings = capture::warnings();
    let nice: Vec<_> = warnings
        .iter()
        .filter(|w| w.contains("CAP_SYS_NICE"))
        .collect();
    let lock: Vec<_> = warnings
        .iter()
        .filter(|w| w.contains("CAP_IPC_LOCK"))
        .collect();
    assert_eq!(
        nice.len(),
        1,
        "CAP_SYS_NICE warned {} times: {warnings:#?}",
        nice.len()
    );
    assert_eq!(
        lock.len(),
        1,
        "CAP_IPC_LOCK warned {} times: {warnings:#?}",
        lock.len()
    );
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    let nice = nice[0];
    assert!(nice.contains("SCHED_FIFO priority 10 denied"), "{nice}");
    assert!(
        nice.contains("setcap cap_sys_nice,cap_ipc_lock+ep"),
        "{nice}"
    );
    assert!(nice.contains("RLIMIT_RTPRIO"), "{nice}");
    assert!(lock[0].contains("RLIMIT_MEMLOCK"), "{}", lock[0]);
    eprintln!("warnings seen by the child:\n{}", warnings.join("\n"));
}

fn required() {
    let err = rt::enter_thread(&request(true)).unwrap_err();
    assert!(
        matches!(err, PlatformError::SchedFifoDenied { priority: 10, .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("CAP_SYS_NICE"), "{text}");
    assert!(
        text.contains("setcap cap_sys_nice,cap_ipc_lock+ep rtdaq"),
        "{text}"
    );
    assert!(!text.contains("continuing"), "{text}");
    assert_eq!(rt::current_policy().unwrap(), SchedPolicy::Other);

    let err = rt::lock_memory(true).unwrap_err();
    assert!(
        matches!(err, PlatformError::MemoryLockDenied { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("CAP_IPC_LOCK"), "{err}");

    let err = Region::allocate(&RegionSpec {
        lock_required: true,
        ..RegionSpec::host("must-lock", 1 << 20)
    })
    .unwrap_err();
    assert!(
        matches!(err, PlatformError::MemoryLockDenied { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("memory region `must-lock`"),
        "{err}"
    );

    assert!(
        capture::warnings().is_empty(),
        "required mode returns errors instead of warning: {:#?}",
        capture::warnings()
    );
    eprintln!("errors seen by the child:\n{text}");
}

/// A `log` backend that records warnings (and echoes everything to stderr).
mod capture {
    use super::Mutex;

    static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

    struct Capture;

    impl log::Log for Capture {
        fn enabled(&self, _: &log::Metadata<'_>) -> bool {
            true
        }
        fn log(&self, record: &log::Record<'_>) {
            eprintln!("[{}] {}", record.level(), record.args());
            if record.level() == log::Level::Warn {
                WARNINGS.lock().unwrap().push(record.args().to_string());
            }
        }
        fn flush(&self) {}
    }

    static LOGGER: Capture = Capture;

    pub fn install() {
        log::set_logger(&LOGGER).expect("logger installed once");
        log::set_max_level(log::LevelFilter::Trace);
    }

    pub fn warnings() -> Vec<String> {
        WARNINGS.lock().unwrap().clone()
    }
}
