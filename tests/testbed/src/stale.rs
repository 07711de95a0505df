//! Removing what killed test processes left behind.

use std::fs;
use std::path::Path;

use crate::{ip, lease, sys};

/// Where `ip netns add` puts its namespace files.
pub(crate) const NETNS_DIR: &str = "/run/netns";

/// The pid in a test bed namespace name `rtdaq-<pid>-<n>-...`; `None` for any other name
/// (`rtdaq-a` of `scripts/netns.sh`, `rtdaq-iperf3-...`, ...).
pub(crate) fn owner_pid(ns: &str) -> Option<u32> {
    let rest = ns.strip_prefix("rtdaq-")?;
    let (pid, tail) = rest.split_once('-')?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (n, _) = tail.split_once('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// SIGKILLs every process still inside namespace `ns` (`ip netns pids`), except this one.
/// Returns how many were signalled.
pub(crate) fn kill_processes_in(ns: &str) -> usize {
    let Ok(out) = ip::ip(&["netns", "pids", ns]) else {
        return 0;
    };
    let me = std::process::id();
    out.split_whitespace()
        .filter_map(|p| p.parse::<u32>().ok())
        .filter(|p| *p != me)
        .filter(|p| sys::kill9(*p as i32).is_ok())
        .count()
}

/// Deletes namespace `ns` (and so the veth end in it), first killing what still runs inside.
pub(crate) fn delete_ns(ns: &str) -> Result<(), crate::TestbedError> {
    if !Path::new(NETNS_DIR).join(ns).exists() {
        return Ok(());
    }
    kill_processes_in(ns);
    ip::ip(&["netns", "delete", ns]).map(drop)
}

/// Removes the test bed namespaces (`rtdaq-<pid>-<n>-...`) whose process `<pid>` is no longer
/// running, and the subnet markers under `/run/rtdaq-testbed/` of processes no longer
/// running. Returns the names of the namespaces it removed.
///
/// [`VethPair::new`](crate::VethPair::new) and [`Builder::build`](crate::Builder::build) call it
/// first, so a test process that was killed (SIGKILL, a CI timeout) leaks nothing for long.
/// Best effort: errors are ignored (there is nothing a caller could do about them), and it never
/// touches namespaces of a running process or names of another shape (`scripts/netns.sh`'s
/// `rtdaq-a`, `scripts/iperf3-interop.sh`'s `rtdaq-iperf3-*`).
pub fn cleanup_stale() -> Vec<String> {
    let mut removed = Vec::new();
    if let Ok(entries) = fs::read_dir(NETNS_DIR) {
        let me = std::process::id();
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for ns in names {
            let Some(pid) = owner_pid(&ns) else { continue };
            if pid == me || lease::pid_alive(pid) {
                continue;
            }
            if delete_ns(&ns).is_ok() {
                removed.push(ns);
            }
        }
    }
    lease::remove_stale(Path::new(lease::RUN_DIR));
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pid_only_matches_test_bed_names() {
        assert_eq!(owner_pid("rtdaq-1234-0-udp-a"), Some(1234));
        assert_eq!(owner_pid("rtdaq-1234-17-a"), Some(1234));
        assert_eq!(owner_pid("rtdaq-a"), None);
        assert_eq!(owner_pid("rtdaq-b"), None);
        assert_eq!(owner_pid("rtdaq-iperf3-cli-1234"), None);
        assert_eq!(owner_pid("rtdaq-1234"), None);
        assert_eq!(owner_pid("rtdaq-12x4-0-a"), None);
        assert_eq!(owner_pid("other-1234-0-a"), None);
    }
}
