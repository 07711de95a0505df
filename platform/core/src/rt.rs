//! All real-time setup of rtdaq, in one place: CPU affinity, `SCHED_FIFO`, `mlockall`,
//! stack and memory prefault.
//!
//! Engines and the app never call `sched_setaffinity`, `sched_setscheduler` or `mlockall`
//! themselves; they describe what they want in an [`RtRequest`] and call [`enter_thread`]
//! from the thread that should become real-time (the app does it once per I/O thread, with
//! `core` and `priority` from the deployment config), and [`lock_memory`] once at start.
//!
//! # Privileges and degradation
//! `SCHED_FIFO` needs `CAP_SYS_NICE` (or an `RLIMIT_RTPRIO` at least the priority);
//! `mlockall`/`mlock` need `CAP_IPC_LOCK` (or an `RLIMIT_MEMLOCK` large enough). When one is
//! missing:
//! - with `required = false` the call **continues without it** (normal scheduling, pageable
//!   memory), records a [`Degradation`] in the [`RtOutcome`], and logs a `warn!` naming the
//!   capability and the fix, **once per capability per process** (sixteen I/O threads print
//!   one line, not sixteen);
//! - with `required = true` it fails with [`PlatformError::SchedFifoDenied`] /
//!   [`PlatformError::MemoryLockDenied`] carrying the same text.
//!
//! Configuration mistakes are errors whatever `required` says: a core that is not online
//! ([`PlatformError::InvalidCore`]) or not allowed by the cpuset
//! ([`PlatformError::CoreNotAllowed`]), a priority outside `1..=99`
//! ([`PlatformError::InvalidPriority`]), a stack prefault larger than the stack
//! ([`PlatformError::StackTooSmall`]). They are all checked before anything is applied.
//!
//! # Order
//! [`enter_thread`] pins first, then switches to `SCHED_FIFO`, then prefaults the stack: the
//! kernel places a page on the NUMA node of the CPU that first touches it, so touching after
//! pinning puts the stack next to the core.
//!
//! Nothing here is for the hot path: every function may read sysfs, allocate and log.

use std::io;
use std::ops::RangeInclusive;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::cpulist::CpuList;
use crate::error::{PlatformError, Result};
use crate::memory::Region;
use crate::sys;
use crate::topology;

/// The `SCHED_FIFO` priorities Linux accepts.
pub const PRIORITY_RANGE: RangeInclusive<u8> = 1..=99;

/// What a thread asks for when it becomes real-time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RtRequest {
    /// Pin the thread to this CPU (`None`: leave the affinity alone).
    pub core: Option<usize>,
    /// Switch to `SCHED_FIFO` at this priority, `1..=99` (`None`: keep the policy).
    pub priority: Option<u8>,
    /// Touch this many KiB of stack below the caller's frame so later calls do not fault
    /// (0: none). Must fit into the thread's stack.
    pub prefault_stack_kib: usize,
    /// Fail instead of degrading when a privilege is missing.
    pub required: bool,
}

/// A privilege whose absence makes the real-time setup degrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// `CAP_SYS_NICE`: real-time scheduling (`SCHED_FIFO`).
    SysNice,
    /// `CAP_IPC_LOCK`: locking memory (`mlockall`, `mlock`).
    IpcLock,
}

impl Capability {
    /// The capability's name, as `capsh`/`setcap` spell it in upper case.
    pub const fn name(self) -> &'static str {
        match self {
            Self::SysNice => "CAP_SYS_NICE",
            Self::IpcLock => "CAP_IPC_LOCK",
        }
    }

    /// Bit number in the capability sets (`linux/capability.h`).
    const fn bit(self) -> u32 {
        match self {
            Self::SysNice => 23,
            Self::IpcLock => 14,
        }
    }

    fn warned_flag(self) -> &'static AtomicBool {
        static SYS_NICE: AtomicBool = AtomicBool::new(false);
        static IPC_LOCK: AtomicBool = AtomicBool::new(false);
        match self {
            Self::SysNice => &SYS_NICE,
            Self::IpcLock => &IPC_LOCK,
        }
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Something that was asked for but not applied because a privilege is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Degradation {
    /// The missing privilege.
    pub capability: Capability,
    /// What was not applied, why, and how to fix it (the text that was logged).
    pub message: String,
}

/// What [`enter_thread`] / [`lock_memory`] applied, and what they degraded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RtOutcome {
    /// The core the thread is now pinned to.
    pub core: Option<usize>,
    /// Whether that core is isolated (`isolcpus=`); `None` when not pinned or unknown.
    pub core_isolated: Option<bool>,
    /// The `SCHED_FIFO` priority now in effect.
    pub priority: Option<u8>,
    /// KiB of stack prefaulted.
    pub stack_prefaulted_kib: usize,
    /// True when `mlockall(MCL_CURRENT | MCL_FUTURE)` is in effect.
    pub memory_locked: bool,
    /// What was asked for but not applied (only with `required = false`).
    pub degraded: Vec<Degradation>,
}

impl RtOutcome {
    /// True when something asked for was not applied.
    pub fn is_degraded(&self) -> bool {
        !self.degraded.is_empty()
    }
}

/// A thread's scheduling policy, as `sched_getscheduler` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SchedPolicy {
    /// `SCHED_OTHER` (normal, CFS/EEVDF).
    Other,
    /// `SCHED_FIFO` at a priority.
    Fifo(u8),
    /// `SCHED_RR` at a priority.
    RoundRobin(u8),
    /// `SCHED_BATCH`.
    Batch,
    /// `SCHED_IDLE`.
    Idle,
    /// `SCHED_DEADLINE`.
    Deadline,
    /// A policy number this crate does not know.
    Unknown(i32),
}

/// Makes the calling thread real-time as `req` asks: pin to `req.core`, switch to
/// `SCHED_FIFO` at `req.priority`, prefault `req.prefault_stack_kib` KiB of stack.
///
/// Call it from the thread itself, at the top of its function, before it allocates its
/// working set.
///
/// # Errors
/// - [`PlatformError::InvalidPriority`]: priority outside [`PRIORITY_RANGE`].
/// - [`PlatformError::InvalidCore`] / [`PlatformError::CoreNotAllowed`]: the core is not
///   online / not in the process's cpuset.
/// - [`PlatformError::StackTooSmall`]: the prefault does not fit into the stack.
/// - [`PlatformError::SchedFifoDenied`]: no privilege for `SCHED_FIFO` and `req.required`.
/// - [`PlatformError::SetAffinity`], [`PlatformError::SetScheduler`],
///   [`PlatformError::QueryThread`]: other system-call failures.
///
/// The configuration checks run before anything is applied, so a configuration error leaves
/// the thread as it was. A privilege error (`required`) comes after pinning; the caller is
/// expected to stop then.
pub fn enter_thread(req: &RtRequest) -> Result<RtOutcome> {
    // 1. Validate everything first.
    if let Some(priority) = req.priority {
        if !PRIORITY_RANGE.contains(&priority) {
            return Err(PlatformError::InvalidPriority { priority });
        }
    }
    let mask = match req.core {
        Some(core) => Some(core_mask(core)?),
        None => None,
    };
    if req.prefault_stack_kib > 0 {
        check_stack(req.prefault_stack_kib)?;
    }

    let mut out = RtOutcome::default();

    // 2. Pin (first, so that what the thread touches next lands on the core's node).
    if let (Some(core), Some(mask)) = (req.core, mask) {
        match sys::set_thread_affinity(&mask) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                return Err(PlatformError::CoreNotAllowed {
                    core,
                    allowed: allowed_cpus_text(),
                });
            }
            Err(source) => return Err(PlatformError::SetAffinity { core, source }),
        }
        out.core = Some(core);
        out.core_isolated = topology::Topology::current()
            .ok()
            .map(|t| t.is_isolated(core));
    }

    // 3. SCHED_FIFO.
    if let Some(priority) = req.priority {
        match sys::set_thread_fifo(priority) {
            Ok(()) => out.priority = Some(priority),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                let message = fifo_denied_message(priority, &e);
                out.degraded.push(degrade(
                    Capability::SysNice,
                    message,
                    "continuing with SCHED_OTHER",
                    req.required,
                    |message| PlatformError::SchedFifoDenied { priority, message },
                )?);
            }
            Err(source) => return Err(PlatformError::SetScheduler { priority, source }),
        }
    }

    // 4. Stack.
    if req.prefault_stack_kib > 0 {
        touch_stack(req.prefault_stack_kib);
        out.stack_prefaulted_kib = req.prefault_stack_kib;
    }
    Ok(out)
}

/// Locks all current and future memory of the process in RAM
/// (`mlockall(MCL_CURRENT | MCL_FUTURE)`), so the real-time threads never take a major page
/// fault. Call once at start, after the memory regions are allocated.
///
/// # Errors
/// - [`PlatformError::MemoryLockDenied`]: no `CAP_IPC_LOCK` / `RLIMIT_MEMLOCK` too low, and
///   `required` (otherwise: warn once and return an outcome with `memory_locked == false`).
/// - [`PlatformError::LockMemory`]: another failure.
pub fn lock_memory(required: bool) -> Result<RtOutcome> {
    const WHAT: &str = "the process memory (mlockall)";
    let mut out = RtOutcome::default();
    match sys::lock_all_memory() {
        Ok(()) => out.memory_locked = true,
        Err(e) if is_memlock_privilege_error(&e) => {
            out.degraded.push(degrade(
                Capability::IpcLock,
                memlock_denied_message(WHAT, &e),
                "continuing with pageable memory (page faults possible on the real-time path)",
                required,
                |message| PlatformError::MemoryLockDenied { message },
            )?);
        }
        Err(source) => {
            return Err(PlatformError::LockMemory {
                what: WHAT.to_owned(),
                source,
            })
        }
    }
    Ok(out)
}

/// Undoes [`lock_memory`] (`munlockall`). For tools and tests; the appliance keeps its
/// memory locked until it exits.
///
/// # Errors
/// [`PlatformError::LockMemory`] when `munlockall` fails.
pub fn unlock_memory() -> Result<()> {
    sys::unlock_all_memory().map_err(|source| PlatformError::LockMemory {
        what: "nothing: munlockall".to_owned(),
        source,
    })
}

/// Touches `kib` KiB of the calling thread's stack below the current frame, so that the
/// pages exist (and, after [`lock_memory`], stay) before the real-time loop needs them.
///
/// # Errors
/// [`PlatformError::StackTooSmall`] when the stack has less room left (with a 32 KiB safety
/// margin); [`PlatformError::QueryThread`] when the stack bounds cannot be read.
pub fn prefault_stack(kib: usize) -> Result<()> {
    if kib > 0 {
        check_stack(kib)?;
        touch_stack(kib);
    }
    Ok(())
}

/// Faults every page of `region` in for writing again (regions are prefaulted when
/// allocated; call this e.g. after the NUMA placement of a region was changed externally).
///
/// # Errors
/// [`PlatformError::Prefault`], or [`PlatformError::HugePagesExhausted`] for a hugepage
/// region whose pages ran out.
pub fn prefault_region(region: &mut Region) -> Result<()> {
    crate::memory::prefault(region)
}

/// CPU time the calling thread has used so far, user + system (`CLOCK_THREAD_CPUTIME_ID`),
/// in ns; `None` if the clock cannot be read. Never allocates (one vDSO call).
pub fn thread_cpu_ns() -> Option<u64> {
    sys::thread_cpu_ns().ok()
}

/// The calling thread's scheduling policy (`sched_getscheduler` + `sched_getparam`).
///
/// # Errors
/// [`PlatformError::QueryThread`].
pub fn current_policy() -> Result<SchedPolicy> {
    sys::thread_policy().map_err(|source| PlatformError::QueryThread {
        what: "scheduling policy",
        source,
    })
}

/// Moves the calling thread (and the threads it creates later, which inherit its mask) off
/// `cores`: it keeps the CPUs of its current affinity that are not among them. Returns the
/// new CPU list, or `None` when nothing changed (no CPU of `cores` in the mask, or no CPU
/// would be left).
///
/// The runtime's main thread calls it with the queue cores before it starts the queue
/// threads. On a PREEMPT_RT kernel a sleeping thread's timer (a soft hrtimer) expires in the
/// `ktimers/N` thread of the core it slept on, at `SCHED_FIFO` 1: on a core that a busy
/// `SCHED_FIFO` queue thread owns, that never runs, and the main thread would oversleep its
/// deadline without bound (seen in the PREEMPT_RT test guest, scripts/vm/README.md).
///
/// # Errors
/// [`PlatformError::QueryThread`] when the affinity cannot be read or set.
pub fn keep_off_cores(cores: &[u32]) -> Result<Option<CpuList>> {
    let now = current_affinity()?;
    let keep: Vec<usize> = now
        .iter()
        .filter(|&c| !cores.iter().any(|&q| q as usize == c))
        .collect();
    if keep.len() == now.len() || keep.is_empty() {
        return Ok(None);
    }
    sys::set_thread_affinity(&sys::CpuMask::from_cpus(keep.iter().copied())).map_err(|source| {
        PlatformError::QueryThread {
            what: "CPU affinity (moving off the queue cores)",
            source,
        }
    })?;
    Ok(Some(CpuList::from_ids(keep)))
}

/// The CPUs the calling thread may run on (`sched_getaffinity`).
///
/// # Errors
/// [`PlatformError::QueryThread`].
pub fn current_affinity() -> Result<CpuList> {
    sys::thread_affinity()
        .map(sys::CpuMask::to_list)
        .map_err(|source| PlatformError::QueryThread {
            what: "CPU affinity",
            source,
        })
}

// ---------------------------------------------------------------------------------------------
// Degradation and its messages (shared with `memory`)

/// With `required`: the error built from `message`. Otherwise: logs `message; continuing`
/// once per capability per process and returns the [`Degradation`].
pub(crate) fn degrade(
    capability: Capability,
    message: String,
    continuing: &str,
    required: bool,
    to_error: impl FnOnce(String) -> PlatformError,
) -> Result<Degradation> {
    if required {
        return Err(to_error(format!(
            "{message}; refusing to continue because real-time setup is required \
             (rt.required = true)"
        )));
    }
    let message = format!("{message}; {continuing}");
    if !capability.warned_flag().swap(true, Ordering::Relaxed) {
        log::warn!("{message}");
    }
    Ok(Degradation {
        capability,
        message,
    })
}

/// `mlock`/`mlockall` errors that mean "not permitted" rather than "broken".
pub(crate) fn is_memlock_privilege_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPERM) | Some(libc::ENOMEM) | Some(libc::EAGAIN)
    )
}

const SETCAP_FIX: &str = "run as root or `setcap cap_sys_nice,cap_ipc_lock+ep rtdaq`";

fn fifo_denied_message(priority: u8, err: &io::Error) -> String {
    let rtprio = match sys::rlimit_rtprio() {
        Ok(Some(v)) => v.to_string(),
        Ok(None) => "unlimited".to_owned(),
        Err(_) => "unknown".to_owned(),
    };
    let mut m = format!(
        "SCHED_FIFO priority {priority} denied ({}): needs CAP_SYS_NICE or an RLIMIT_RTPRIO \
         of at least {priority} (now {rtprio}): {SETCAP_FIX}, or allow `rtprio {priority}` for \
         the service user (/etc/security/limits.conf, LimitRTPRIO= in a systemd unit)",
        errno_text(err)
    );
    if has_capability(Capability::SysNice) == Some(true) {
        m.push_str(
            " [this thread has CAP_SYS_NICE, so its cgroup grants no real-time budget \
             (cpu.rt_runtime_us = 0, common in containers): give the cgroup RT runtime or \
             run outside the container]",
        );
    }
    m
}

pub(crate) fn memlock_denied_message(what: &str, err: &io::Error) -> String {
    let limit = match sys::rlimit_memlock() {
        Ok(Some(v)) => format!("{} KiB", v / 1024),
        Ok(None) => "unlimited".to_owned(),
        Err(_) => "unknown".to_owned(),
    };
    format!(
        "locking {what} in RAM denied ({}): needs CAP_IPC_LOCK or a large enough \
         RLIMIT_MEMLOCK (now {limit}): {SETCAP_FIX}, or allow `memlock unlimited` for the \
         service user (/etc/security/limits.conf, LimitMEMLOCK=infinity in a systemd unit)",
        errno_text(err)
    )
}

/// `EPERM` / `ENOMEM` / `EAGAIN` by name, anything else as the OS describes it.
fn errno_text(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::EPERM) => "EPERM".to_owned(),
        Some(libc::ENOMEM) => "ENOMEM".to_owned(),
        Some(libc::EAGAIN) => "EAGAIN".to_owned(),
        _ => err.to_string(),
    }
}

/// Whether the calling thread has `cap` in its effective set (`CapEff` of
/// `/proc/thread-self/status`); `None` when that cannot be read.
pub fn has_capability(cap: Capability) -> Option<bool> {
    let status = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))?
        .trim();
    let bits = u64::from_str_radix(hex, 16).ok()?;
    Some(bits & (1u64 << cap.bit()) != 0)
}

// ---------------------------------------------------------------------------------------------
// Cores

fn core_mask(core: usize) -> Result<sys::CpuMask> {
    let online = topology::read_online_cpus(Path::new("/")).ok();
    let invalid = |online: String| PlatformError::InvalidCore { core, online };
    if let Some(list) = &online {
        if !list.contains(core) {
            return Err(invalid(list.to_string()));
        }
    }
    sys::CpuMask::single(core)
        .ok_or_else(|| invalid(online.map_or_else(|| "unknown".to_owned(), |l| l.to_string())))
}

/// The CPUs of the process's cgroup cpuset (v2), else the thread's current mask.
fn allowed_cpus_text() -> String {
    let from_cgroup = || -> Option<CpuList> {
        let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let path = cg.lines().find_map(|l| l.strip_prefix("0::"))?;
        let file = format!(
            "/sys/fs/cgroup/{}/cpuset.cpus.effective",
            path.trim_start_matches('/')
        );
        CpuList::parse(&std::fs::read_to_string(file).ok()?).ok()
    };
    if let Some(list) = from_cgroup() {
        return format!("cgroup cpuset {list}");
    }
    match current_affinity() {
        Ok(list) => format!("thread affinity {list}"),
        Err(_) => "unknown".to_owned(),
    }
}

// ---------------------------------------------------------------------------------------------
// Stack

/// Safety margin kept below the prefaulted area (guard page, signal frames, the callees of
/// `touch_stack` itself).
const STACK_MARGIN_KIB: usize = 32;

fn check_stack(kib: usize) -> Result<()> {
    let (low, _size) = sys::thread_stack().map_err(|source| PlatformError::QueryThread {
        what: "stack bounds",
        source,
    })?;
    let marker = 0u8;
    let here = std::hint::black_box(&marker) as *const u8 as usize;
    let available_kib = (here.saturating_sub(low) / 1024).saturating_sub(STACK_MARGIN_KIB);
    if kib > available_kib {
        return Err(PlatformError::StackTooSmall {
            requested_kib: kib,
            available_kib,
        });
    }
    Ok(())
}

/// Writes `kib` KiB of stack, 16 KiB per frame. `black_box` keeps the compiler from eliding
/// the array or turning the recursion into a loop that reuses one frame.
#[inline(never)]
fn touch_stack(kib: usize) {
    const CHUNK_KIB: usize = 16;
    let mut chunk = [0u8; CHUNK_KIB * 1024];
    for i in (0..chunk.len()).step_by(4096) {
        chunk[i] = 1;
    }
    std::hint::black_box(&mut chunk);
    if kib > CHUNK_KIB {
        touch_stack(kib - CHUNK_KIB);
    }
}
