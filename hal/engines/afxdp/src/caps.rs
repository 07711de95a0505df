//! Privilege and limit checks before anything is opened (cold path, no `unsafe`): effective
//! capabilities of the calling thread (`/proc/thread-self/status`, so a thread that dropped
//! its capabilities is judged as itself) and the locked-memory limit for error messages.

/// `CAP_NET_ADMIN`: attach XDP programs, bind AF_XDP sockets.
const CAP_NET_ADMIN: u32 = 12;
/// `CAP_NET_RAW`: create AF_XDP sockets.
const CAP_NET_RAW: u32 = 13;
/// `CAP_IPC_LOCK`: pin UMEM pages beyond `RLIMIT_MEMLOCK`.
const CAP_IPC_LOCK: u32 = 14;
/// `CAP_SYS_ADMIN`: the pre-5.8 way to load BPF.
const CAP_SYS_ADMIN: u32 = 21;
/// `CAP_BPF`: load BPF programs and create maps.
const CAP_BPF: u32 = 39;

/// Effective capability mask of the calling thread, `None` when unreadable.
fn effective() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/status")
        .or_else(|_| std::fs::read_to_string("/proc/self/status"))
        .ok()?;
    let line = s.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line["CapEff:".len()..].trim(), 16).ok()
}

/// The capabilities the engine needs and the calling thread lacks (empty when all are there
/// or the mask cannot be read: then the kernel's own refusal is reported later).
pub(crate) fn missing() -> Vec<&'static str> {
    let Some(eff) = effective() else {
        return Vec::new();
    };
    let has = |c: u32| eff & (1u64 << c) != 0;
    let mut out = Vec::new();
    if !has(CAP_NET_ADMIN) {
        out.push("CAP_NET_ADMIN");
    }
    if !has(CAP_NET_RAW) {
        out.push("CAP_NET_RAW");
    }
    if !has(CAP_BPF) && !has(CAP_SYS_ADMIN) {
        out.push("CAP_BPF");
    }
    out
}

/// True when the calling thread may lock memory without limit.
pub(crate) fn has_ipc_lock() -> bool {
    effective().is_some_and(|e| e & (1u64 << CAP_IPC_LOCK) != 0)
}

/// `RLIMIT_MEMLOCK` (soft) in words, from `/proc/self/limits`.
pub(crate) fn memlock_limit() -> String {
    let Ok(s) = std::fs::read_to_string("/proc/self/limits") else {
        return "unknown".to_owned();
    };
    s.lines()
        .find(|l| l.starts_with("Max locked memory"))
        .and_then(|l| l.split_whitespace().nth(3))
        .map_or_else(
            || "unknown".to_owned(),
            |v| match v.parse::<u64>() {
                Ok(b) => format!("{} KiB", b / 1024),
                Err(_) => v.to_owned(),
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_mask_and_the_limit() {
        assert!(effective().is_some());
        assert!(!memlock_limit().is_empty());
    }
}
