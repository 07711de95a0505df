//! Thread placement: cores exist on the board; busy-polling threads do not share a core with
//! threads they would starve.

use super::{int, rxq, txq, Draft};
use crate::error::Errors;
use crate::model::{Engine, RxMode, WriterPlacement};
use crate::schema::RawConfig;

/// One thread the appliance will start.
struct Thread {
    path: String,
    what: String,
    core: u32,
    /// `SCHED_FIFO` priority; 0 for a non-real-time thread.
    prio: u8,
    busy: bool,
}

fn threads(d: &Draft) -> Vec<Thread> {
    let mut t = Vec::new();
    for (i, iface) in d.interfaces.iter().enumerate() {
        for (n, q) in iface.rx.iter().enumerate() {
            let Some(q) = q else { continue };
            let p = rxq(i, n);
            t.push(Thread {
                path: format!("{p}.cpu_core"),
                what: format!("the I/O thread of {p}"),
                core: q.cpu_core,
                prio: q.rt_priority,
                busy: q.busy_poll,
            });
            if let RxMode::Indirect { consumer_core } = q.mode {
                t.push(Thread {
                    path: format!("{p}.consumer_core"),
                    what: format!("the consumer thread of {p}"),
                    core: consumer_core,
                    prio: q.rt_priority,
                    busy: q.busy_poll,
                });
            }
        }
        for (n, q) in iface.tx.iter().enumerate() {
            let Some(q) = q else { continue };
            let p = txq(i, n);
            t.push(Thread {
                path: format!("{p}.cpu_core"),
                what: format!("the I/O thread of {p}"),
                core: q.cpu_core,
                prio: q.rt_priority,
                busy: q.busy_poll,
            });
        }
    }
    if let Some(Engine::Dpdk(e)) = &d.engine {
        if let Some(c) = e.main_core {
            t.push(Thread {
                path: "engine.dpdk.main_core".into(),
                what: "the DPDK main (housekeeping) thread".into(),
                core: c,
                prio: 0,
                busy: false,
            });
        }
    }
    t
}

/// Every core named exists on the board (`host`: any core up to 1023).
pub(super) fn cores_exist(raw: &RawConfig, d: &Draft, errs: &mut Errors) {
    let Some(n) = raw.platform.cpu_count() else {
        return;
    };
    for t in threads(d) {
        if t.core >= n {
            errs.push(
                t.path,
                format!(
                    "core {} does not exist on {} (cores 0..={})",
                    t.core,
                    raw.platform,
                    n - 1
                ),
            );
        }
    }
}

/// A busy-polling thread never sleeps, so under `SCHED_FIFO` it owns its core: no second
/// busy-polling thread there, and no thread of lower or equal priority (it would never run).
pub(super) fn busy_poll_cores(d: &Draft, errs: &mut Errors) {
    let all = threads(d);
    for (k, t) in all.iter().enumerate() {
        // Report each thread's first conflict once, on the later of the two threads.
        for b in all[..k].iter().filter(|o| o.core == t.core) {
            if let Some(m) = conflict(b, t) {
                errs.push(&t.path, m);
                break;
            }
        }
    }
}

/// Why `b` and `t` (same core) cannot share it, if they cannot.
fn conflict(b: &Thread, t: &Thread) -> Option<String> {
    if b.busy && t.busy {
        return Some(format!(
            "core {} is already used by busy-polling {}; two busy-polling threads on one core starve each other: move one to another core",
            t.core, b.what
        ));
    }
    let (spinner, other) = match (b.busy, t.busy) {
        (true, false) => (b, t),
        (false, true) => (t, b),
        _ => return None,
    };
    (other.prio <= spinner.prio).then(|| {
        format!(
            "core {} is shared by busy-polling {} (priority {}) and {} (priority {}), which would never run; move one of them to another core",
            t.core, spinner.what, spinner.prio, other.what, other.prio
        )
    })
}

/// A pinned helper thread's placement from its `*_core` / `*_priority` keys (`keys`: their
/// paths): the core exists on the board and runs no busy-polling queue thread (which would
/// never let it run); a priority needs a core. `who`: the thread in messages ("writer
/// thread"), `short`: the same with its article ("a writer"). `None`: an error was reported.
pub(crate) fn pinned_thread(
    raw: &RawConfig,
    d: &Draft,
    (core, priority): (Option<i64>, Option<i64>),
    (core_key, prio_key): (&str, &str),
    (who, short): (&str, &str),
    errs: &mut Errors,
) -> Option<Option<WriterPlacement>> {
    let Some(core) = core else {
        if priority.is_some() {
            let leaf = core_key.rsplit('.').next().unwrap_or(core_key);
            errs.push(
                prio_key,
                format!("needs {leaf}: a real-time {who} is pinned to its core"),
            );
            return None;
        }
        return Some(None);
    };
    let max = raw.platform.cpu_count().map_or(4095, |n| i64::from(n) - 1);
    let core = int::<u32>(
        core,
        0,
        max,
        core_key,
        &format!(" (cores of {})", raw.platform),
        errs,
    )?;
    let busy = d.interfaces.iter().flat_map(|i| i.rx.iter().flatten()).any(|q| {
        q.busy_poll
            && (q.cpu_core == core
                || matches!(q.mode, RxMode::Indirect { consumer_core } if consumer_core == core))
    }) || d
        .interfaces
        .iter()
        .flat_map(|i| i.tx.iter().flatten())
        .any(|q| q.busy_poll && q.cpu_core == core);
    if busy {
        errs.push(core_key, format!("core {core} runs a busy-polling queue thread, which never lets {short} run; pick another core"));
        return None;
    }
    let priority = match priority {
        None => None,
        Some(v) => Some(int::<u8>(v, 1, 99, prio_key, " (SCHED_FIFO)", errs)?),
    };
    Some(Some(WriterPlacement { core, priority }))
}
