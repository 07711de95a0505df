//! Real-time thread setup with the privileges of the test process (root in CI). Each test
//! that changes scheduling does it in a thread of its own, which takes the state with it.

mod common;

use rtdaq_platform::rt::{self, Capability, RtRequest, SchedPolicy};
use rtdaq_platform::{CpuList, PlatformError, Topology};

/// Runs `f` in a fresh thread (its scheduling state dies with it) and returns its result.
fn in_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f).join().expect("test thread panicked")
}

#[test]
fn fifo_10_on_core_0_is_applied() {
    if common::skip_unless_root("fifo_10_on_core_0_is_applied") {
        return;
    }
    let (outcome, policy, affinity) = in_thread(|| {
        let outcome = rt::enter_thread(&RtRequest {
            core: Some(0),
            priority: Some(10),
            prefault_stack_kib: 256,
            required: true,
        });
        (outcome, rt::current_policy(), rt::current_affinity())
    });
    let outcome = outcome.expect("enter_thread as root");
    assert_eq!(outcome.core, Some(0));
    assert_eq!(outcome.priority, Some(10));
    assert_eq!(outcome.stack_prefaulted_kib, 256);
    assert!(!outcome.is_degraded(), "{outcome:?}");
    let isolated = Topology::current().unwrap().is_isolated(0);
    assert_eq!(outcome.core_isolated, Some(isolated));
    assert_eq!(policy.unwrap(), SchedPolicy::Fifo(10));
    assert_eq!(affinity.unwrap(), CpuList::from_ids([0]));
    assert_eq!(rt::has_capability(Capability::SysNice), Some(true));
}

#[test]
fn request_without_core_or_priority_changes_nothing() {
    let (outcome, before, after) = in_thread(|| {
        let before = (
            rt::current_policy().unwrap(),
            rt::current_affinity().unwrap(),
        );
        let outcome = rt::enter_thread(&RtRequest::default()).unwrap();
        let after = (
            rt::current_policy().unwrap(),
            rt::current_affinity().unwrap(),
        );
        (outcome, before, after)
    });
    assert_eq!(before, after);
    assert_eq!(outcome.core, None);
    assert_eq!(outcome.priority, None);
}

#[test]
fn core_that_does_not_exist_is_an_error_naming_it() {
    let (err, policy, affinity_before, affinity_after) = in_thread(|| {
        let before = rt::current_affinity().unwrap();
        let err = rt::enter_thread(&RtRequest {
            core: Some(4096),
            priority: Some(10),
            prefault_stack_kib: 0,
            required: false,
        })
        .unwrap_err();
        (
            err,
            rt::current_policy().unwrap(),
            before,
            rt::current_affinity().unwrap(),
        )
    });
    assert!(
        matches!(err, PlatformError::InvalidCore { core: 4096, .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("core 4096") && text.contains("online CPUs"),
        "{text}"
    );
    // Validation comes first: nothing was applied.
    assert_eq!(policy, SchedPolicy::Other);
    assert_eq!(affinity_before, affinity_after);

    // The first core past the last online one.
    let past = Topology::current()
        .unwrap()
        .online_cpus()
        .iter()
        .max()
        .unwrap()
        + 1;
    let err = in_thread(move || {
        rt::enter_thread(&RtRequest {
            core: Some(past),
            ..RtRequest::default()
        })
        .unwrap_err()
    });
    assert!(err.to_string().contains(&format!("core {past}")), "{err}");
}

#[test]
fn priority_outside_1_to_99_is_an_error() {
    for priority in [0u8, 100, 255] {
        let err = in_thread(move || {
            rt::enter_thread(&RtRequest {
                core: Some(0),
                priority: Some(priority),
                prefault_stack_kib: 0,
                required: false,
            })
            .unwrap_err()
        });
        assert!(
            matches!(err, PlatformError::InvalidPriority { priority: p } if p == priority),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains(&format!("priority {priority}")), "{text}");
        assert!(text.contains("1..=99"), "{text}");
    }
}

#[test]
fn stack_prefault_is_checked_against_the_stack() {
    let (small, too_big) = in_thread(|| {
        (
            rt::prefault_stack(64),
            rt::enter_thread(&RtRequest {
                prefault_stack_kib: 1 << 30,
                ..RtRequest::default()
            }),
        )
    });
    small.unwrap();
    let err = too_big.unwrap_err();
    assert!(
        matches!(err, PlatformError::StackTooSmall { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("stack_size"), "{err}");

    // A thread with a 4 MiB stack can prefault 3 MiB of it.
    let big = std::thread::Builder::new()
        .stack_size(4 << 20)
        .spawn(|| rt::prefault_stack(3 << 10))
        .unwrap()
        .join()
        .unwrap();
    big.unwrap();
}

/// Undoes `mlockall` even when an assertion fails.
struct UnlockOnDrop;
impl Drop for UnlockOnDrop {
    fn drop(&mut self) {
        let _ = rt::unlock_memory();
    }
}

#[test]
fn lock_memory_as_root() {
    if common::skip_unless_root("lock_memory_as_root") {
        return;
    }
    let _unlock = UnlockOnDrop;
    let out = rt::lock_memory(true).expect("mlockall as root");
    assert!(out.memory_locked && !out.is_degraded(), "{out:?}");
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let locked_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmLck:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(locked_kib > 0, "VmLck is 0 after mlockall");
}

#[test]
fn keep_off_cores_leaves_exactly_the_other_cpus_and_threads_inherit_it() {
    let all = rt::current_affinity().expect("affinity");
    let cpus: Vec<usize> = all.iter().collect();
    if cpus.len() < 2 {
        rtdaq_testbed::require::skip(format!("needs 2 CPUs in the affinity mask, has {cpus:?}"));
        return;
    }
    let first = cpus[0] as u32;
    let (changed, now, child) = in_thread(move || {
        let changed = rt::keep_off_cores(&[first]);
        let now = rt::current_affinity();
        // A thread created afterwards inherits the reduced mask.
        let child = std::thread::spawn(rt::current_affinity).join().unwrap();
        (changed, now, child)
    });
    let rest = CpuList::from_ids(cpus[1..].iter().copied());
    assert_eq!(changed.expect("keep_off_cores"), Some(rest.clone()));
    assert_eq!(now.unwrap(), rest);
    assert_eq!(child.unwrap(), rest);
    // Nothing to move off (no CPU of the list in the mask), or nothing would be left: no change.
    let all_cores: Vec<u32> = cpus.iter().map(|&c| c as u32).collect();
    let (unrelated, everything, after) = in_thread(move || {
        (
            rt::keep_off_cores(&[100_000]),
            rt::keep_off_cores(&all_cores),
            rt::current_affinity(),
        )
    });
    assert_eq!(unrelated.unwrap(), None);
    assert_eq!(everything.unwrap(), None);
    assert_eq!(after.unwrap(), all);
}
