//! [`DpdkError`]: every failure of this crate, each message naming the cause and the fix.
//!
//! Codes come from the thin layer (`sys::result`), the only place that reads `rte_errno`.

/// `Result` with [`DpdkError`].
pub type Result<T, E = DpdkError> = std::result::Result<T, E>;

/// Every error of `rtdaq-dpdk-sys`. Display texts are complete sentences: what failed, why
/// (DPDK's `rte_strerror` text and the errno name) and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DpdkError {
    /// `rte_eal_init` failed.
    #[error("EAL init failed: {cause} ({errno_name}, rte_errno {errno}) — {fix}")]
    EalInit {
        /// `rte_errno` after the call.
        errno: i32,
        /// Its symbolic name (`EINVAL`, ...).
        errno_name: &'static str,
        /// What that code means for `rte_eal_init`.
        cause: &'static str,
        /// What to do about it.
        fix: &'static str,
    },
    /// `Eal::init` called again with different arguments (DPDK cannot re-initialise).
    #[error(
        "EAL already initialised in this process with {existing:?}, cannot re-init with \
         {requested:?} — DPDK initialises once per process: reuse the first Eal (Eal::get) or \
         run the other configuration in its own process"
    )]
    EalAlreadyInitialized {
        /// Arguments of the successful first init.
        existing: Vec<String>,
        /// Arguments of this call.
        requested: Vec<String>,
    },
    /// An earlier `Eal::init` of this process failed; DPDK cannot be retried reliably.
    #[error(
        "EAL init already failed earlier in this process ({first}) — DPDK cannot retry \
         initialisation in the same process: fix the arguments and restart"
    )]
    EalInitFailedBefore {
        /// The first failure, as text.
        first: String,
    },
    /// A string handed to DPDK contains a NUL byte, or is too long.
    #[error("invalid {what} {value:?}: {why}")]
    InvalidArgument {
        /// Which argument.
        what: &'static str,
        /// Its value.
        value: String,
        /// What is wrong and how to fix it.
        why: &'static str,
    },
    /// No ethdev port with this name.
    #[error(
        "no DPDK port named {name:?} (ports present: {present:?}) — add `--vdev {name}` \
         (virtual device, e.g. net_null0, net_ring0, net_tap0,iface=X) or `-a <PCI BDF>` to the \
         EAL arguments; PMDs are loaded from {pmd_dir:?} (or `-d <dir|.so>`)"
    )]
    PortNotFound {
        /// The name asked for.
        name: String,
        /// Names of the ports that exist.
        present: Vec<String>,
        /// The PMD plugin directory found at build time.
        pmd_dir: &'static str,
    },
    /// The port is already opened by a `Port` of this process.
    #[error(
        "DPDK port {port} ({name}) is already open in this process — one Port owns a port; \
         share its queues instead (a closed vdev port cannot be reopened)"
    )]
    PortInUse {
        /// Port id.
        port: u16,
        /// Port name.
        name: String,
    },
    /// The port cannot take that many queues.
    #[error(
        "port {port} ({name}): {what} = {asked} exceeds the PMD's maximum {max} — lower it \
         in the config"
    )]
    PortLimit {
        /// Port id.
        port: u16,
        /// Port name.
        name: String,
        /// Which parameter (`rx_queues`, `tx_queues`).
        what: &'static str,
        /// Requested value.
        asked: u32,
        /// The PMD's limit.
        max: u32,
    },
    /// An ethdev call on a port failed.
    #[error("{op} on DPDK port {port} failed: {msg} ({errno_name}) — {fix}")]
    Port {
        /// The DPDK function.
        op: &'static str,
        /// Port id.
        port: u16,
        /// Positive errno.
        errno: i32,
        /// Its symbolic name.
        errno_name: &'static str,
        /// `rte_strerror` text.
        msg: String,
        /// What to check.
        fix: &'static str,
    },
    /// A dynamic mbuf field or flag could not be registered.
    #[error("registering the mbuf's {what} failed: {msg} (errno {errno}) — no room is left for another dynamic mbuf field or flag in this process")]
    Dynfield {
        /// The field.
        what: &'static str,
        /// Positive errno.
        errno: i32,
        /// `rte_strerror` text.
        msg: String,
    },
    /// `rte_thread_register` failed: the thread goes on without an lcore id.
    #[error("rte_thread_register failed: {msg} ({errno_name}) — every lcore id below RTE_MAX_LCORE is taken (EAL lcores and registered threads); the thread goes on without per-lcore mempool caches")]
    ThreadRegister {
        /// Positive errno.
        errno: i32,
        /// Its symbolic name.
        errno_name: &'static str,
        /// `rte_strerror` text.
        msg: String,
    },
    /// `rte_pktmbuf_pool_create` failed.
    #[error("mbuf pool {name:?} ({n} mbufs of {data_room} B) could not be created: {msg} ({errno_name}) — {fix}")]
    Mempool {
        /// Pool name.
        name: String,
        /// Requested mbuf count.
        n: u32,
        /// Requested data room per mbuf.
        data_room: u16,
        /// Positive errno.
        errno: i32,
        /// Its symbolic name.
        errno_name: &'static str,
        /// `rte_strerror` text.
        msg: String,
        /// What to do.
        fix: &'static str,
    },
    /// The pool has no free mbufs (cold-path allocation; the hot path gets `None`/`false`).
    #[error(
        "mbuf pool {name:?} is empty ({in_use} mbufs in use) — enlarge it or free bursts sooner"
    )]
    PoolEmpty {
        /// Pool name.
        name: String,
        /// Mbufs currently allocated.
        in_use: u32,
    },
    /// `rte_flow_validate` / `rte_flow_create` refused a rule (or the PMD has no `rte_flow`).
    #[error("{op} on DPDK port {port} ({driver}) refused the rule: {message} (rte_flow error type {cause}, {errno_name})")]
    Flow {
        /// The DPDK function (`rte_flow_validate`, `rte_flow_create`).
        op: &'static str,
        /// Port id.
        port: u16,
        /// The port's PMD (`net_tap`, `mlx5_pci`, ...).
        driver: String,
        /// Positive errno (`ENOSYS`: the PMD has no `rte_flow`; `ENOTSUP`: this rule is not).
        errno: i32,
        /// Its symbolic name.
        errno_name: &'static str,
        /// `rte_flow_error.type`, as its name (`ITEM_MASK`, `ACTION`, `ATTR_PRIORITY`, ...).
        cause: &'static str,
        /// `rte_flow_error.message`, the PMD's reason (or `rte_strerror` when it gave none).
        message: String,
    },
    /// `Mbuf::set_len` beyond the room of a single-segment mbuf.
    #[error("mbuf length {len} exceeds its room {room} (or the mbuf is chained) — use a larger data_room")]
    MbufTooSmall {
        /// Requested length.
        len: usize,
        /// Bytes available from the data start.
        room: u16,
    },
    /// Registering, mapping or unregistering external memory failed.
    #[error("{op} for external memory {addr:#x}+{len} failed: {msg} ({errno_name}) — {fix}")]
    ExtMem {
        /// The DPDK function.
        op: &'static str,
        /// Start address.
        addr: usize,
        /// Bytes.
        len: usize,
        /// Positive errno.
        errno: i32,
        /// Its symbolic name.
        errno_name: &'static str,
        /// `rte_strerror` text.
        msg: String,
        /// What to do.
        fix: &'static str,
    },
    /// The PMD lacks a feature the port configuration asks for (RSS, buffer split, ...).
    #[error("DPDK port {port} ({driver}): {what} — {fix}")]
    Unsupported {
        /// Port id.
        port: u16,
        /// The port's PMD.
        driver: String,
        /// The feature and what the PMD offers instead.
        what: String,
        /// What to do.
        fix: &'static str,
    },
}

/// Symbolic name of an errno value (the ones DPDK uses).
pub(crate) fn errno_name(e: i32) -> &'static str {
    match e {
        1 => "EPERM",
        2 => "ENOENT",
        5 => "EIO",
        12 => "ENOMEM",
        13 => "EACCES",
        14 => "EFAULT",
        16 => "EBUSY",
        17 => "EEXIST",
        19 => "ENODEV",
        22 => "EINVAL",
        28 => "ENOSPC",
        11 => "EAGAIN",
        8 => "ENOEXEC",
        71 => "EPROTO",
        95 => "ENOTSUP",
        114 => "EALREADY",
        38 => "ENOSYS",
        _ => "E?",
    }
}

/// Cause and fix of an `rte_eal_init` failure, from `rte_errno` (see `rte_eal.h`).
pub(crate) fn eal_init_error(errno: i32) -> DpdkError {
    let (cause, fix) = match errno {
        22 => (
            "invalid EAL arguments (the EAL printed its usage above)",
            "fix the argument: e.g. `-l 0`, `--vdev net_null0`, `--no-huge -m 512 --no-shconf`",
        ),
        12 => (
            "no hugepages / not enough memory",
            "reserve hugepages (echo 512 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages) \
             or pass --no-huge -m 512",
        ),
        13 => (
            "cannot get hugepage information: no hugepages reserved (or no permission to use them)",
            "reserve hugepages (echo 512 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages) \
             or pass --no-huge -m 512; run as root (or with CAP_SYS_ADMIN and CAP_IPC_LOCK)",
        ),
        95 => (
            "a device could not be probed (unknown or failing --vdev / PCI device)",
            "check the --vdev driver names (net_null, net_ring, net_tap, net_af_packet, net_af_xdp) \
             and their arguments, and that the PMDs load (`-d <pmd dir>`; see the EAL log above)",
        ),
        19 => (
            "a device argument could not be parsed (unknown --vdev driver name or bad -a/--vdev syntax)",
            "use a driver the PMD directory provides (net_null0, net_ring0, net_tap0,iface=X, \
             net_af_packet0,iface=X, net_af_xdp0,iface=X) or a PCI BDF; see the EAL log above",
        ),
        11 => (
            "a resource was temporarily unavailable (bus scan or shared config)",
            "pass --no-shconf (or a unique --file-prefix) when another DPDK process runs",
        ),
        14 => (
            "the tailq configuration is broken",
            "the DPDK installation is inconsistent: reinstall libdpdk",
        ),
        114 => (
            "the EAL was already initialised (or a previous attempt failed) in this process",
            "initialise once per process and reuse the Eal",
        ),
        71 => (
            "an EAL thread could not be created or configured",
            "check the -l / --lcores CPU list against the CPUs this process may use",
        ),
        8 => (
            "the CPU lacks an instruction set DPDK was built for",
            "use a DPDK build for this CPU",
        ),
        _ => ("an unexpected error", "read the EAL log above"),
    };
    DpdkError::EalInit {
        errno,
        errno_name: errno_name(errno),
        cause,
        fix,
    }
}
