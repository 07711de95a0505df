//! Process facts from `/proc/self` for `/metrics` (issue #18): each thread's scheduling
//! policy, real-time priority and allowed CPUs, and the memory locked in RAM. Read by the
//! metrics thread at each scrape, from the kernel's own view (not from what the threads
//! asked for), so a thread that lost its SCHED_FIFO or its pinning shows it.

/// One thread of the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadFact {
    /// Its name (`comm`, at most 15 bytes: `lo_udp.rx0-io`).
    pub name: String,
    /// `fifo`, `rr`, `other`, `batch`, `idle`, `deadline`.
    pub policy: String,
    /// Real-time priority (0 for non-real-time policies).
    pub rt_priority: u32,
    /// `Cpus_allowed_list` (`1`, `0-3`).
    pub cpus: String,
}

fn policy_name(p: u32) -> &'static str {
    match p {
        0 => "other",
        1 => "fifo",
        2 => "rr",
        3 => "batch",
        5 => "idle",
        6 => "deadline",
        _ => "unknown",
    }
}

/// Parses `/proc/<pid>/task/<tid>/stat`: `(comm, rt_priority, policy)` (fields 2, 40, 41;
/// the name is in parentheses and may hold blanks and parentheses itself).
pub fn parse_stat(text: &str) -> Option<(String, u32, u32)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_owned();
    // After ") ": field 3 (state) onwards; rt_priority is field 40, policy 41.
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    let field = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<u32>().ok());
    Some((name, field(40)?, field(41)?))
}

/// Every thread of this process, sorted by name.
pub fn threads() -> Vec<ThreadFact> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut out: Vec<ThreadFact> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let (name, rt_priority, policy) = parse_stat(&stat)?;
            let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
            let cpus = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map_or_else(String::new, |v| v.trim().to_owned());
            Some(ThreadFact {
                name,
                policy: policy_name(policy).to_owned(),
                rt_priority,
                cpus,
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Memory locked in RAM (`VmLck` of `/proc/self/status`), bytes.
pub fn locked_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmLck:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_blanks_and_parentheses_in_the_name() {
        // A real line's shape: 52 fields, rt_priority 50 and policy 1 (SCHED_FIFO).
        let mut f: Vec<String> = (3..=52).map(|_| "0".to_owned()).collect();
        f[40 - 3] = "50".into();
        f[41 - 3] = "1".into();
        let line = format!("4242 (a (b) c) {}", f.join(" "));
        assert_eq!(parse_stat(&line), Some(("a (b) c".into(), 50, 1)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_has_threads_and_a_locked_figure() {
        let t = threads();
        assert!(!t.is_empty());
        assert!(t.iter().all(|x| !x.cpus.is_empty()), "{t:?}");
        assert!(t.iter().any(|x| x.policy == "other"), "{t:?}");
        assert!(locked_bytes().is_some());
    }
}
