//! Memory checks: hugepages for the config's `huge` regions, transparent hugepages, swap.

use rtdaq_platform::hugepages::{self, HugePageSize};

use crate::host::{self, shown};
use crate::{Ctx, Finding};

/// `mm.hugepages`: each pool has at least the pages the config's `huge` regions need
/// available (free − reserved + overcommit headroom).
pub(crate) fn hugepages(ctx: &Ctx<'_>) -> Finding {
    const C: &str = "mm.hugepages";
    let needs = [
        (HugePageSize::Size2M, ctx.summary.hugepages_2m),
        (HugePageSize::Size1G, ctx.summary.hugepages_1g),
    ];
    if needs.iter().all(|(_, n)| *n == 0) {
        return Finding::pass(
            C,
            "the config needs no hugepages (no `huge` regions)".into(),
        );
    }
    let dpdk = if ctx.config.engine_kind().as_str() == "dpdk" {
        " (DPDK's own EAL memory and mempools come on top)"
    } else {
        ""
    };
    let mut ok = Vec::new();
    let mut short = Vec::new();
    let mut fixes = Vec::new();
    for (size, needed) in needs.into_iter().filter(|(_, n)| *n > 0) {
        let rel = format!(
            "sys/kernel/mm/hugepages/{}/nr_hugepages",
            size.sysfs_dir_name()
        );
        match hugepages::status(ctx.root, size) {
            Ok(st) if st.available() >= needed => ok.push(format!(
                "{size}: {} available of {needed} needed (pool of {})",
                st.available(),
                st.total
            )),
            Ok(st) => {
                short.push(format!(
                    "{size}: {} available of {needed} needed (pool of {})",
                    st.available(),
                    st.total
                ));
                fixes.push(format!("echo {} > {}", st.total_for(needed), shown(&rel)));
            }
            Err(_) => {
                short.push(format!(
                    "{size}: no pool ({} missing: the kernel lacks this page size)",
                    shown(&rel)
                ));
                fixes.push(format!(
                    "boot with hugepagesz={} hugepages={needed}",
                    if size == HugePageSize::Size2M {
                        "2M"
                    } else {
                        "1G"
                    }
                ));
            }
        }
    }
    if short.is_empty() {
        Finding::pass(C, format!("{}{dpdk}", ok.join("; ")))
    } else {
        let mut all = short;
        all.extend(ok);
        Finding::fail(
            C,
            format!("{}{dpdk}", all.join("; ")),
            format!(
                "as root: {} (rt-tuning/tune.sh apply --config FILE does it)",
                fixes.join("; ")
            ),
        )
    }
}

/// `mm.transparent_hugepages`: `never` or `madvise`, so khugepaged does not compact memory
/// under the queue threads.
pub(crate) fn transparent_hugepages(ctx: &Ctx<'_>) -> Finding {
    const C: &str = "mm.transparent_hugepages";
    const REL: &str = "sys/kernel/mm/transparent_hugepage/enabled";
    let Some(text) = host::read(ctx.root, REL) else {
        return Finding::skip(C, format!("{} absent (kernel without THP)", shown(REL)));
    };
    let selected = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .unwrap_or("");
    match selected {
        "never" | "madvise" => Finding::pass(C, format!("{selected} ({})", shown(REL))),
        other => Finding::warn(
            C,
            format!(
                "{} ({}): khugepaged scans and compacts memory in the background, which stalls \
                 page faults and takes locks",
                if other.is_empty() { "unknown" } else { other },
                shown(REL)
            ),
            format!(
                "echo never > {} (or boot with transparent_hugepage=never)",
                shown(REL)
            ),
        ),
    }
}

/// `mm.swap`: no swap device (rtdaq locks its own memory, but swapping elsewhere means disk
/// I/O and reclaim on the machine).
pub(crate) fn swap(ctx: &Ctx<'_>) -> Finding {
    const C: &str = "mm.swap";
    let Some(text) = host::read(ctx.root, "proc/swaps") else {
        return Finding::warn(
            C,
            "cannot read /proc/swaps".into(),
            "run doctor where /proc is mounted".into(),
        );
    };
    let devices: Vec<&str> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    if devices.is_empty() {
        return Finding::pass(C, "no swap".into());
    }
    let locked = if ctx.config.rt.lock_memory {
        "rtdaq locks its memory, but reclaim and swap I/O still disturb the machine"
    } else {
        "rt.lock_memory = false: rtdaq's own pages may be swapped out"
    };
    Finding::bad(
        C,
        !ctx.config.rt.lock_memory,
        format!("swap on {}: {locked}", devices.join(", ")),
        "swapoff -a, and remove the swap entries from /etc/fstab".into(),
    )
}
