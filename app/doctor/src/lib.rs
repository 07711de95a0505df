//! # rtdaq-doctor: is this host ready for this deployment?
//!
//! Read-only checks of a Linux host against the deployment config it will run: each check
//! reads `/proc` and `/sys` **below a root directory** (`/` on the host, a fixture tree in
//! tests, a fake root after `rt-tuning/tune.sh apply --root DIR`), and reports
//! [`Status::Pass`], [`Status::Warn`], [`Status::Fail`] or [`Status::Skip`] ("n/a: ...") with
//! a detail and, when it is not a pass, a one-line fix. `rtdaq doctor` prints them; the exit
//! code is 1 when any check fails.
//!
//! Unlike DAQIRI's `tune_system.py`, the expectations come from the config: the cores to
//! isolate are the queue cores, the hugepages are what the regions need, the MTU is the
//! interfaces' `mtu`, the BAR1 must hold the `device` regions. The board's facts
//! (`rtdaq_platform::board`: housekeeping cores, MRRS target) fill in the fixes.
//!
//! | check | reads (below the root) |
//! |---|---|
//! | `kernel.preempt_rt` | `sys/kernel/realtime`, else `proc/version` |
//! | `cmdline.isolcpus`, `cmdline.nohz_full`, `cmdline.rcu_nocbs`, `cmdline.irqaffinity` | `proc/cmdline` |
//! | `cpu.governor` | `sys/devices/system/cpu/online`, `sys/devices/system/cpu/cpu<N>/cpufreq/scaling_governor` |
//! | `cpu.cstates` | `proc/cmdline`, `sys/devices/system/cpu/cpu<N>/cpuidle/state<K>/{name,disable}` (queue cores) |
//! | `cpu.steal` | `proc/stat` (steal of the queue cores since boot) |
//! | `kernel.sched_rt_runtime_us` | `proc/sys/kernel/sched_rt_runtime_us` |
//! | `kernel.timer_migration` | `proc/sys/kernel/timer_migration` |
//! | `mm.hugepages` | `sys/kernel/mm/hugepages/hugepages-{2048,1048576}kB/{nr,free,resv,surplus}_hugepages`, `nr_overcommit_hugepages` |
//! | `mm.transparent_hugepages` | `sys/kernel/mm/transparent_hugepage/enabled` |
//! | `mm.swap` | `proc/swaps` |
//! | `net.mtu:<if>` | `sys/class/net/<netdev>/mtu` (netdev of a PCI address: `sys/bus/pci/devices/<bdf>/net/`) |
//! | `net.pause:<if>` | the NIC's pause settings (`ETHTOOL_GPAUSEPARAM`, root `/`; below another root the file `ethtool-a/<netdev>` holding `ethtool -a` output) against `interfaces[].flow_control` |
//! | `net.irq_affinity:<if>` | `sys/bus/pci/devices/<bdf>/msi_irqs/`, `proc/irq/<N>/smp_affinity_list`, `proc/cmdline` |
//! | `pcie.mrrs:<if>`, `pcie.mps:<if>` | `sys/bus/pci/devices/<bdf>/config` (the PCI Express capability), PCI function of a netdev: `sys/class/net/<netdev>/device/uevent` |
//! | `time.ptp` | only with `[time]`: `ptp4l`'s management socket (root `/` only): a port SLAVE within `max_offset_ns` |
//! | `time.phc:<if>` | only with `[time]` (root `/` only): what the interface's device can stamp (`ethtool -T`) and its PTP hardware clock against `CLOCK_REALTIME` (`PTP_SYS_OFFSET_EXTENDED`); software stamps only warns |
//! | `gpu.present`, `gpu.bar1`, `gpu.clocks`, `gpu.direct` | `nvidia-smi -q` (root `/`) or the file `nvidia-smi-q.txt` at the root; `proc/modules`, `proc/driver/nvidia/version` |
//!
//! `docs/doctor.md` explains each check and its fix.
//!
//! ## What this crate must not do
//! Change anything: every check opens files read-only, the only program it runs is
//! `nvidia-smi -q` (root `/` only), and the only process it asks is `ptp4l` (a management
//! GET, root `/` only). No `unsafe` (`#![forbid(unsafe_code)]`).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod gpu;
mod host;
mod kernel;
mod memory;
mod net;
mod pcie;
mod time;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use rtdaq_config::{Config, Summary};
use rtdaq_platform::board::BoardFacts;
use rtdaq_platform::CpuList;
use serde::Serialize;

pub use gpu::GpuSource;
pub use gpu::NVIDIA_SMI_FILE;
pub use net::PAUSE_FIXTURE_DIR;
pub use pcie::{parse_pcie_capability, PcieDevice, PcieParseError};

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// As the deployment needs it.
    Pass,
    /// Works, but costs latency or headroom.
    Warn,
    /// The deployment will lose packets, miss deadlines or not start.
    Fail,
    /// Not applicable here (the detail starts with `n/a:`).
    Skip,
}

impl Status {
    /// `PASS`, `WARN`, `FAIL` or `SKIP`.
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
        }
    }
}

/// One finding: a check, its status, what was found and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Check name (`cmdline.isolcpus`, `net.mtu:cx7_p0`).
    pub check: String,
    /// Outcome.
    pub status: Status,
    /// What was read and how it compares (paths shown as on the host, without the root).
    pub detail: String,
    /// One-line fix; `None` for a pass or a skip.
    pub fix: Option<String>,
}

impl Finding {
    fn new(check: &str, status: Status, detail: String, fix: Option<String>) -> Self {
        Self {
            check: check.to_owned(),
            status,
            detail,
            fix,
        }
    }

    pub(crate) fn pass(check: &str, detail: String) -> Self {
        Self::new(check, Status::Pass, detail, None)
    }

    pub(crate) fn skip(check: &str, detail: String) -> Self {
        Self::new(check, Status::Skip, format!("n/a: {detail}"), None)
    }

    pub(crate) fn warn(check: &str, detail: String, fix: String) -> Self {
        Self::new(check, Status::Warn, detail, Some(fix))
    }

    pub(crate) fn fail(check: &str, detail: String, fix: String) -> Self {
        Self::new(check, Status::Fail, detail, Some(fix))
    }

    /// Fail or warn, as `fail` says.
    pub(crate) fn bad(check: &str, fail: bool, detail: String, fix: String) -> Self {
        if fail {
            Self::fail(check, detail, fix)
        } else {
            Self::warn(check, detail, fix)
        }
    }
}

/// Where and against what the checks run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Root of the file system to inspect (`/`, or a fixture / fake root).
    pub root: PathBuf,
    /// Where the GPU facts come from.
    pub gpu: GpuSource,
}

impl Options {
    /// Checks below `root`; GPU facts from [`GpuSource::for_root`].
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_owned(),
            gpu: GpuSource::for_root(root),
        }
    }
}

/// What every check may look at.
pub(crate) struct Ctx<'a> {
    pub root: &'a Path,
    pub config: &'a Config,
    pub summary: Summary,
    pub board: Option<&'static BoardFacts>,
    /// Cores of every queue thread (I/O and consumer).
    pub queue_cores: CpuList,
    /// True when some queue busy-polls.
    pub busy_poll: bool,
    /// `/proc/cmdline`, when readable.
    pub cmdline: Option<host::Cmdline>,
}

impl Ctx<'_> {
    /// Cores for the OS and IRQs: the board's housekeeping cores, else the online CPUs that
    /// run no queue, else `0`.
    pub fn housekeeping(&self) -> CpuList {
        if let Some(b) = self.board {
            return CpuList::from_ids(b.housekeeping_cores.iter().map(|&c| c as usize));
        }
        let online = host::online_cpus(self.root).unwrap_or_default();
        let rest: CpuList = online
            .iter()
            .filter(|c| !self.queue_cores.contains(*c))
            .collect();
        if rest.is_empty() {
            CpuList::from_ids([0])
        } else {
            rest
        }
    }

    /// Cores to isolate: the queue cores plus the board's isolated cores.
    pub fn to_isolate(&self) -> CpuList {
        let mut all: Vec<usize> = self.queue_cores.iter().collect();
        if let Some(b) = self.board {
            all.extend(b.isolated_cores.iter().map(|&c| c as usize));
        }
        CpuList::from_ids(all)
    }
}

/// Runs every check against `config`, in a fixed order (see the crate docs).
pub fn run(config: &Config, opts: &Options) -> Vec<Finding> {
    let summary = config.summary();
    let ctx = Ctx {
        root: &opts.root,
        config,
        board: config.platform().board(),
        queue_cores: CpuList::from_ids(summary.cores.iter().map(|&c| c as usize)),
        busy_poll: summary.queues.iter().any(|q| q.busy_poll),
        cmdline: host::Cmdline::read(&opts.root),
        summary,
    };
    let mut out = vec![kernel::preempt_rt(&ctx)];
    out.extend(kernel::cmdline_checks(&ctx));
    out.push(kernel::governor(&ctx));
    out.push(kernel::cstates(&ctx));
    out.push(kernel::steal(&ctx));
    out.push(kernel::sched_rt_runtime(&ctx));
    out.push(kernel::timer_migration(&ctx));
    out.push(memory::hugepages(&ctx));
    out.push(memory::transparent_hugepages(&ctx));
    out.push(memory::swap(&ctx));
    out.extend(net::checks(&ctx));
    out.extend(gpu::checks(&ctx, &opts.gpu));
    out.extend(time::ptp(&ctx));
    out.extend(time::phc(&ctx));
    out
}

/// 1 when any finding failed, else 0 (warnings and skips allowed).
pub fn exit_code(findings: &[Finding]) -> u8 {
    u8::from(findings.iter().any(|f| f.status == Status::Fail))
}

/// The findings as a JSON array of `{check, status, detail, fix}` (pretty-printed, one key
/// per line, so expected files diff well).
pub fn to_json(findings: &[Finding]) -> String {
    let mut s = serde_json::to_string_pretty(findings).expect("findings serialize");
    s.push('\n');
    s
}

/// The findings for people: one line per check (`STATUS check: detail`, then `fix: ...` on
/// the same line when there is one) and a count line.
pub fn to_text(findings: &[Finding]) -> String {
    let width = findings.iter().map(|f| f.check.len()).max().unwrap_or(0);
    let mut s = String::new();
    for f in findings {
        let _ = write!(s, "{} {:width$}  {}", f.status.label(), f.check, f.detail);
        if let Some(fix) = &f.fix {
            let _ = write!(s, "  -> fix: {fix}");
        }
        s.push('\n');
    }
    let count = |st: Status| findings.iter().filter(|f| f.status == st).count();
    let _ = writeln!(
        s,
        "{} pass, {} warn, {} fail, {} n/a",
        count(Status::Pass),
        count(Status::Warn),
        count(Status::Fail),
        count(Status::Skip)
    );
    s
}
