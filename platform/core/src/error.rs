//! [`PlatformError`]: the one error type of the platform layer.
//!
//! Every variant names the failing operation, what is wrong, and what to do about it, so that
//! `rtdaq` can print the message as is and exit with "configuration or environment error".
//! System-call failures carry the [`std::io::Error`] as their `#[source]`.

use std::io;
use std::path::PathBuf;

use crate::hugepages::HugePageSize;

/// Result of the platform layer.
pub type Result<T, E = PlatformError> = std::result::Result<T, E>;

/// Why a platform operation (real-time setup, topology, memory regions) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlatformError {
    /// `rt::enter_thread`: the requested core is not an online CPU of this host (config error).
    #[error(
        "core {core} does not exist on this host (online CPUs: {online}); \
         fix the core number in the deployment config"
    )]
    InvalidCore {
        /// The requested core.
        core: usize,
        /// The online CPUs, as a cpulist (`0-3,8`).
        online: String,
    },

    /// `rt::enter_thread`: the core exists but the process may not run on it.
    #[error(
        "core {core} is not in this process's allowed CPU set ({allowed}); \
         it is excluded by the cgroup cpuset or by taskset/systemd CPUAffinity: \
         allow it there or pick another core in the deployment config"
    )]
    CoreNotAllowed {
        /// The requested core.
        core: usize,
        /// The CPUs the process may use, as a cpulist.
        allowed: String,
    },

    /// `rt::enter_thread`: `sched_setaffinity` failed for another reason.
    #[error("pinning the thread to core {core} failed (sched_setaffinity)")]
    SetAffinity {
        /// The requested core.
        core: usize,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// `rt::enter_thread`: the SCHED_FIFO priority is outside `1..=99` (config error).
    #[error(
        "SCHED_FIFO priority {priority} is out of range: Linux accepts 1..=99 \
         (fix the priority in the deployment config)"
    )]
    InvalidPriority {
        /// The requested priority.
        priority: u8,
    },

    /// `rt::enter_thread` with `required = true`: SCHED_FIFO is not permitted.
    #[error("{message}")]
    SchedFifoDenied {
        /// The requested priority.
        priority: u8,
        /// What is missing and how to grant it (names CAP_SYS_NICE).
        message: String,
    },

    /// `rt::enter_thread`: `sched_setscheduler` failed for a reason other than permissions.
    #[error("switching the thread to SCHED_FIFO priority {priority} failed (sched_setscheduler)")]
    SetScheduler {
        /// The requested priority.
        priority: u8,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// `mlockall`/`mlock` with `required = true`: locking memory is not permitted.
    #[error("{message}")]
    MemoryLockDenied {
        /// What is missing and how to grant it (names CAP_IPC_LOCK / RLIMIT_MEMLOCK).
        message: String,
    },

    /// `mlockall`/`mlock` failed for a reason other than permissions.
    #[error("locking {what} in RAM failed")]
    LockMemory {
        /// What was being locked (`"the process memory (mlockall)"`, a region).
        what: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// `rt::enter_thread`: the stack prefault does not fit into the thread's stack.
    #[error(
        "cannot prefault {requested_kib} KiB of stack: only about {available_kib} KiB of this \
         thread's stack is left; spawn the thread with a larger stack \
         (std::thread::Builder::stack_size) or prefault less"
    )]
    StackTooSmall {
        /// What was asked for.
        requested_kib: usize,
        /// What is left below the current frame (minus a safety margin).
        available_kib: usize,
    },

    /// Reading the calling thread's scheduling state failed.
    #[error("querying the thread's {what} failed")]
    QueryThread {
        /// What was queried (`"CPU affinity"`, `"scheduling policy"`, `"stack bounds"`).
        what: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// A sysfs/procfs file could not be read.
    #[error("cannot read {}", .path.display())]
    ReadSysfs {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// A sysfs file could not be written (hugepage reservation).
    #[error("cannot write {value} to {} (needs root)", .path.display())]
    WriteSysfs {
        /// The file.
        path: PathBuf,
        /// What was written.
        value: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// A network device named in the config does not exist here.
    #[error(
        "network device `{name}` does not exist in this network namespace \
         (`ip link` lists the devices; inside a namespace run under `ip netns exec`)"
    )]
    NoSuchNetdev {
        /// The device name.
        name: String,
    },

    /// An ethtool request (`SIOCETHTOOL`) for a network device failed.
    #[error("{netdev}: reading its {what} (ethtool) failed")]
    Ethtool {
        /// The device.
        netdev: String,
        /// What was read (`driver info`, `statistics`, `pause settings`).
        what: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// Reading a PTP hardware clock (`/dev/ptpN`) failed.
    #[error("reading the PTP hardware clock /dev/ptp{index} failed (needs read access to it)")]
    Phc {
        /// The clock's index.
        index: u32,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// `ptp4l`'s management socket did not answer (`[time]`, `rtdaq doctor`).
    #[error(
        "ptp4l's management socket {socket} did not answer ({source}): is ptp4l (linuxptp) \
         running with uds_address {socket}? Start it (ptp4l -i IFACE, or -S for software \
         timestamps), or point [time] ptp4l at its uds_address"
    )]
    Ptp {
        /// The socket asked.
        socket: PathBuf,
        /// The OS error, or the time-out.
        #[source]
        source: io::Error,
    },

    /// Listing a network device's queueing disciplines (rtnetlink `RTM_GETQDISC`) failed.
    #[error("{netdev}: listing its qdiscs (rtnetlink) failed")]
    Qdisc {
        /// The device.
        netdev: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// `getifaddrs` failed (listing the host's interface addresses).
    #[error("listing the interface addresses (getifaddrs) failed")]
    ListAddresses {
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// A sysfs/procfs file held something that is not in the expected format.
    #[error("cannot parse {} (content: {content:?}): {what}", .path.display())]
    ParseSysfs {
        /// The file.
        path: PathBuf,
        /// The offending content (trimmed).
        content: String,
        /// What was expected.
        what: &'static str,
    },

    /// `Region::allocate`: the region spec itself is invalid (config error).
    #[error("memory region `{region}`: {reason}")]
    InvalidRegion {
        /// Region name.
        region: String,
        /// What is wrong and how to fix it.
        reason: String,
    },

    /// `Region::allocate`: `host_pinned` or `device` memory without the `gpu` feature.
    #[error(
        "memory region `{region}` of kind `{kind}` needs the `gpu` feature \
         (a later release of this binary; rebuild with --features gpu)"
    )]
    NeedsGpu {
        /// Region name.
        region: String,
        /// The kind as written in the config (`host_pinned`, `device`).
        kind: &'static str,
    },

    /// `Region::allocate`: too few hugepages are reserved.
    #[error(
        "memory region `{region}` needs {needed} hugepages of {size} but {pool} has only \
         {free} free ({total} in total); reserve them as root with \
         `echo {fix_total} > {}`{boot_hint}",
        .sysfs_path.display(),
        pool = pool_name(.node),
        boot_hint = boot_hint(.size, .fix_total),
    )]
    HugePagesExhausted {
        /// Region name.
        region: String,
        /// Hugepage size.
        size: HugePageSize,
        /// Pages the region needs.
        needed: u64,
        /// Pages free for a new mapping (free minus reserved by other mappings).
        free: u64,
        /// Pages in the pool.
        total: u64,
        /// NUMA node the pages were needed on, when the region is bound.
        node: Option<u32>,
        /// The value to write into `sysfs_path`.
        fix_total: u64,
        /// The `nr_hugepages` file to write.
        sysfs_path: PathBuf,
    },

    /// `Region::allocate`: the kernel/CPU does not offer this hugepage size.
    #[error(
        "memory region `{region}`: this host has no {size} hugepages ({} does not exist); \
         use the other hugepage size or enable it (kernel command line `hugepagesz=`)",
        .sysfs_dir.display()
    )]
    HugePageSizeUnsupported {
        /// Region name.
        region: String,
        /// Requested size.
        size: HugePageSize,
        /// The missing sysfs directory.
        sysfs_dir: PathBuf,
    },

    /// `Region::allocate`: the NUMA node does not exist on this host.
    #[error(
        "memory region `{region}`: NUMA node {node} does not exist on this host \
         (nodes: {available}); fix `numa_node` in the deployment config or leave it unset"
    )]
    NumaNodeMissing {
        /// Region name.
        region: String,
        /// Requested node.
        node: u32,
        /// The nodes the host has (`"0-1"`, or `"none reported"`).
        available: String,
    },

    /// `Region::allocate`: `mbind` failed.
    #[error("memory region `{region}`: binding to NUMA node {node} failed (mbind)")]
    NumaBind {
        /// Region name.
        region: String,
        /// Requested node.
        node: u32,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// `Region::allocate`: `mmap` failed.
    #[error("memory region `{region}`: mapping {size} bytes of {kind} memory failed (mmap)")]
    Map {
        /// Region name.
        region: String,
        /// The kind as written in the config.
        kind: &'static str,
        /// Bytes requested.
        size: usize,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// Prefaulting memory (populating the page tables) failed.
    #[error(
        "memory region `{region}`: prefaulting {size} bytes failed \
         (out of memory, or out of hugepages on the bound NUMA node)"
    )]
    Prefault {
        /// Region name.
        region: String,
        /// Bytes.
        size: usize,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

fn pool_name(node: &Option<u32>) -> String {
    match node {
        Some(n) => format!("the hugepage pool of NUMA node {n}"),
        None => "the hugepage pool".to_owned(),
    }
}

fn boot_hint(size: &HugePageSize, fix_total: &u64) -> String {
    if matches!(size, HugePageSize::Size1G) {
        format!(
            " (1 GiB pages are reliably reserved only at boot: kernel command line \
             `hugepagesz=1G hugepages={fix_total}`)"
        )
    } else {
        String::new()
    }
}
