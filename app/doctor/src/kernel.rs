//! Kernel and CPU checks: PREEMPT_RT, the command line (`isolcpus`, `nohz_full`,
//! `rcu_nocbs`, `irqaffinity`), governor, deep C-states, RT throttling, timer migration.

use rtdaq_platform::CpuList;

use crate::host::{self, shown};
use crate::{Ctx, Finding};

const GRUB: &str = "(rt-tuning/tune.sh apply writes it as a GRUB snippet) and reboot";

/// `kernel.preempt_rt`: `sys/kernel/realtime` is `1`, or `proc/version` names PREEMPT_RT.
pub(crate) fn preempt_rt(ctx: &Ctx<'_>) -> Finding {
    const C: &str = "kernel.preempt_rt";
    if host::read(ctx.root, "sys/kernel/realtime").as_deref() == Some("1") {
        return Finding::pass(C, "PREEMPT_RT kernel (/sys/kernel/realtime = 1)".into());
    }
    let version = host::read(ctx.root, "proc/version").unwrap_or_default();
    if version.contains("PREEMPT_RT") {
        return Finding::pass(C, "PREEMPT_RT kernel (/proc/version)".into());
    }
    let release = version.split_whitespace().nth(2).unwrap_or("unknown");
    let preempt = if version.contains("PREEMPT_DYNAMIC") {
        "PREEMPT_DYNAMIC"
    } else if version.contains("PREEMPT") {
        "PREEMPT"
    } else {
        "no PREEMPT_RT"
    };
    Finding::fail(
        C,
        format!(
            "kernel {release} is not PREEMPT_RT ({preempt}; /sys/kernel/realtime absent): \
             kernel paths can delay queue threads by milliseconds"
        ),
        "boot a PREEMPT_RT kernel (IGX OS / Ubuntu: the linux-realtime kernel; Debian: \
         linux-image-rt-<arch>)"
            .into(),
    )
}

/// The four command-line checks.
pub(crate) fn cmdline_checks(ctx: &Ctx<'_>) -> Vec<Finding> {
    let Some(cmd) = &ctx.cmdline else {
        let f = |c: &str| {
            Finding::warn(
                c,
                "cannot read /proc/cmdline".into(),
                "run doctor where /proc is mounted".into(),
            )
        };
        return ["isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity"]
            .iter()
            .map(|k| f(&format!("cmdline.{k}")))
            .collect();
    };
    let q = &ctx.queue_cores;
    let iso = ctx.to_isolate();
    let mut out = Vec::new();
    for (key, why, value) in [
        (
            "isolcpus",
            "the scheduler puts other tasks on them",
            format!("managed_irq,domain,{iso}"),
        ),
        (
            "nohz_full",
            "the scheduler tick interrupts them",
            iso.to_string(),
        ),
        ("rcu_nocbs", "RCU callbacks run on them", iso.to_string()),
    ] {
        let check = format!("cmdline.{key}");
        let fix = format!("add `{key}={value}` to the kernel command line {GRUB}");
        let f = match cmd.cpus(key) {
            None if cmd.get(key).is_some() => Finding::fail(
                &check,
                format!("{key}={} is not a CPU list", cmd.get(key).unwrap_or("")),
                fix,
            ),
            None => Finding::fail(
                &check,
                format!("{key} not set: {why} (queue cores {q})"),
                fix,
            ),
            Some(set) => {
                let missing: CpuList = q.iter().filter(|c| !set.contains(*c)).collect();
                if missing.is_empty() {
                    Finding::pass(
                        &check,
                        format!(
                            "{key}={} covers queue cores {q}",
                            cmd.get(key).unwrap_or("")
                        ),
                    )
                } else {
                    Finding::fail(
                        &check,
                        format!(
                            "{key}={} leaves queue cores {missing} out: {why}",
                            cmd.get(key).unwrap_or("")
                        ),
                        fix,
                    )
                }
            }
        };
        out.push(f);
    }
    let hk = ctx.housekeeping();
    let fix = format!("add `irqaffinity={hk}` to the kernel command line {GRUB}");
    const C: &str = "cmdline.irqaffinity";
    out.push(match cmd.cpus("irqaffinity") {
        Some(set) if !set.is_empty() => {
            let on_queue: CpuList = set.iter().filter(|c| q.contains(*c)).collect();
            if on_queue.is_empty() {
                Finding::pass(
                    C,
                    format!("irqaffinity={set} keeps IRQs off queue cores {q}"),
                )
            } else {
                Finding::fail(
                    C,
                    format!("irqaffinity={set} lets IRQs run on queue cores {on_queue}"),
                    fix,
                )
            }
        }
        _ => Finding::fail(
            C,
            format!("irqaffinity not set: new IRQs may run on any CPU, queue cores {q} included"),
            fix,
        ),
    });
    out
}

/// `cpu.governor`: every online CPU runs the `performance` governor (queue cores: fail,
/// others: warn).
pub(crate) fn governor(ctx: &Ctx<'_>) -> Finding {
    const C: &str = "cpu.governor";
    let want = ctx.board.map_or("performance", |b| b.tuning.governor);
    let Some(online) = host::online_cpus(ctx.root) else {
        return Finding::warn(
            C,
            "cannot read /sys/devices/system/cpu/online".into(),
            "run doctor where /sys is mounted".into(),
        );
    };
    let mut other = Vec::new();
    let mut seen = 0usize;
    let mut govs: Vec<String> = Vec::new();
    for cpu in online.iter() {
        let g = host::read(
            ctx.root,
            &format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"),
        );
        if let Some(g) = &g {
            seen += 1;
            if !govs.contains(g) {
                govs.push(g.clone());
            }
        }
        if g.as_deref() != Some(want) {
            other.push(cpu);
        }
    }
    if seen == 0 {
        return Finding::warn(
            C,
            "no cpufreq driver (no /sys/devices/system/cpu/cpu*/cpufreq): the firmware sets the \
             clock"
                .into(),
            "check in the firmware/BIOS that the cores run at full clock (no power saving)".into(),
        );
    }
    if other.is_empty() {
        return Finding::pass(C, format!("{want} on every online CPU ({online})"));
    }
    let other = CpuList::from_ids(other);
    let queue_bad: CpuList = other
        .iter()
        .filter(|c| ctx.queue_cores.contains(*c))
        .collect();
    Finding::bad(
        C,
        !queue_bad.is_empty(),
        format!(
            "CPUs {other} do not run {want} (governors seen: {}){}",
            govs.join(", "),
            if queue_bad.is_empty() {
                String::new()
            } else {
                format!(", queue cores {queue_bad} among them")
            }
        ),
        format!(
            "cpupower frequency-set -g {want} (or echo {want} > \
             /sys/devices/system/cpu/cpuN/cpufreq/scaling_governor for CPUs {other})"
        ),
    )
}

/// `cpu.cstates`: queue cores do not enter deep idle states (command line, or every
/// `cpuidle/state<K>` with K ≥ 1 disabled).
pub(crate) fn cstates(ctx: &Ctx<'_>) -> Finding {
    const C: &str = "cpu.cstates";
    if let Some(cmd) = &ctx.cmdline {
        let le1 = |k: &str| {
            cmd.get(k)
                .and_then(|v| v.parse::<u32>().ok())
                .is_some_and(|n| n <= 1)
        };
        for (key, ok) in [
            ("idle", cmd.get("idle") == Some("poll")),
            ("cpuidle.off", cmd.get("cpuidle.off") == Some("1")),
            ("intel_idle.max_cstate", le1("intel_idle.max_cstate")),
            ("processor.max_cstate", le1("processor.max_cstate")),
        ] {
            if ok {
                return Finding::pass(
                    C,
                    format!(
                        "{key}={} on the kernel command line",
                        cmd.get(key).unwrap_or("")
                    ),
                );
            }
        }
    }
    let mut enabled: Vec<(usize, String)> = Vec::new();
    let mut any_states = false;
    for cpu in ctx.queue_cores.iter() {
        let dir = format!("sys/devices/system/cpu/cpu{cpu}/cpuidle");
        for state in host::list_dir(ctx.root, &dir) {
            let Some(k) = state
                .strip_prefix("state")
                .and_then(|k| k.parse::<u32>().ok())
            else {
                continue;
            };
            any_states = true;
            if k == 0 {
                continue; // state0 is the shallow one (WFI / POLL)
            }
            let disabled = host::read(ctx.root, &format!("{dir}/{state}/disable"));
            if disabled.as_deref() != Some("1") {
                let name = host::read(ctx.root, &format!("{dir}/{state}/name"))
                    .unwrap_or_else(|| state.clone());
                enabled.push((cpu, format!("{state} ({name})")));
            }
        }
    }
    if !any_states {
        return Finding::pass(
            C,
            format!(
                "no cpuidle states on queue cores {} (no idle driver)",
                ctx.queue_cores
            ),
        );
    }
    if enabled.is_empty() {
        return Finding::pass(
            C,
            format!(
                "deep idle states disabled on queue cores {}",
                ctx.queue_cores
            ),
        );
    }
    let cores = CpuList::from_ids(enabled.iter().map(|(c, _)| *c));
    let mut states: Vec<&str> = enabled.iter().map(|(_, s)| s.as_str()).collect();
    states.sort_unstable();
    states.dedup();
    Finding::warn(
        C,
        format!(
            "queue cores {cores} may enter deep idle states {}: waking costs microseconds when \
             a sleeping queue thread gets work",
            states.join(", ")
        ),
        format!(
            "echo 1 > /sys/devices/system/cpu/cpuN/cpuidle/stateK/disable for K >= 1 on CPUs \
             {cores} (or boot with cpuidle.off=1)"
        ),
    )
}

/// `kernel.sched_rt_runtime_us`: -1, so `SCHED_FIFO` threads are never throttled (fail when
/// a queue busy-polls, else warn).
pub(crate) fn sched_rt_runtime(ctx: &Ctx<'_>) -> Finding {
    const C: &str = "kernel.sched_rt_runtime_us";
    const REL: &str = "proc/sys/kernel/sched_rt_runtime_us";
    let fix = "sysctl -w kernel.sched_rt_runtime_us=-1 (persist it in /etc/sysctl.d/)".to_owned();
    match host::read_i64(ctx.root, REL) {
        Some(-1) => Finding::pass(C, "-1: real-time threads are never throttled".into()),
        Some(v) => {
            let period =
                host::read_i64(ctx.root, "proc/sys/kernel/sched_rt_period_us").unwrap_or(1_000_000);
            Finding::bad(
                C,
                ctx.busy_poll,
                format!(
                    "{v} of {period} us: SCHED_FIFO threads are stopped for {} ms of every {} ms \
                     once they use the rest{}",
                    (period - v).max(0) / 1000,
                    period / 1000,
                    if ctx.busy_poll {
                        " (a busy-polling queue always does)"
                    } else {
                        ""
                    }
                ),
                fix,
            )
        }
        None => Finding::warn(C, format!("cannot read {}", shown(REL)), fix),
    }
}

/// `kernel.timer_migration`: 0, so timers armed on housekeeping cores stay there.
pub(crate) fn timer_migration(ctx: &Ctx<'_>) -> Finding {
    const C: &str = "kernel.timer_migration";
    const REL: &str = "proc/sys/kernel/timer_migration";
    match host::read_i64(ctx.root, REL) {
        Some(0) => Finding::pass(C, "0: timers stay on the CPU that armed them".into()),
        Some(v) => Finding::warn(
            C,
            format!("{v}: the kernel may move timers onto queue cores"),
            "sysctl -w kernel.timer_migration=0 (persist it in /etc/sysctl.d/)".into(),
        ),
        None => Finding::skip(
            C,
            format!("{} absent (kernel without NO_HZ_COMMON)", shown(REL)),
        ),
    }
}

/// `cpu.steal`: no queue core has lost time to a hypervisor since boot (`proc/stat`, the
/// 8th value of each `cpuN` line, over the sum of its values). Steal is a stall that no
/// priority inside the guest prevents; warn, skip when `proc/stat` is absent.
pub(crate) fn steal(ctx: &Ctx<'_>) -> Finding {
    const C: &str = "cpu.steal";
    let Some(text) = host::read(ctx.root, "proc/stat") else {
        return Finding::skip(C, format!("n/a: cannot read {}", shown("proc/stat")));
    };
    let mut stolen = Vec::new();
    let mut seen = 0usize;
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let Some(cpu) = f
            .next()
            .and_then(|c| c.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        if !ctx.queue_cores.contains(cpu) {
            continue;
        }
        let ticks: Vec<u64> = f.filter_map(|v| v.parse().ok()).collect();
        seen += 1;
        let (steal, total) = (
            ticks.get(7).copied().unwrap_or(0),
            ticks.iter().sum::<u64>(),
        );
        if steal > 0 && total > 0 {
            stolen.push(format!(
                "{cpu}: {:.2} %",
                100.0 * steal as f64 / total as f64
            ));
        }
    }
    if seen == 0 {
        return Finding::skip(C, format!("n/a: no queue core in {}", shown("proc/stat")));
    }
    if stolen.is_empty() {
        return Finding::pass(
            C,
            format!("no steal on queue cores {} since boot", ctx.queue_cores),
        );
    }
    Finding::warn(
        C,
        format!(
            "time stolen by the hypervisor since boot on queue cores {}: this is a VM, and \
             SCHED_FIFO cannot keep the host from descheduling its vCPUs; every such stall \
             must fit in the queue's buffers (the run report's longest_stall_us and \
             cpu_steal_s show them)",
            stolen.join(", ")
        ),
        "give the VM dedicated, pinned vCPUs (no overcommit) or run on bare metal; size \
         ring_depth >= stall x packet rate (docs/concepts.md: Stall)"
            .into(),
    )
}
