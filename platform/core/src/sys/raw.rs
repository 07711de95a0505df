//! Layer 1: raw foreign declarations, only for what `nix` does not wrap. `libc` is our
//! bindgen; this file names what we still call through it, adds the `mbind(2)` system call,
//! and declares the `SIOCETHTOOL` ioctl with `nix`'s ioctl macro.

use libc::{c_long, c_ulong, c_void};

// Kept raw, each because nix 0.30 lacks the call:
// - sched_setscheduler / sched_getscheduler / sched_getparam: nix has no scheduling-policy calls;
// - pthread_getattr_np / pthread_attr_getstack / pthread_attr_destroy: nix has no pthread
//   attribute queries (its `pthread` feature is `pthread_self` and `pthread_kill` only).
pub(super) use libc::{
    pthread_attr_destroy, pthread_attr_getstack, pthread_attr_t, pthread_getattr_np, pthread_self,
    sched_getparam, sched_getscheduler, sched_param, sched_setscheduler, MPOL_BIND, SCHED_BATCH,
    SCHED_DEADLINE, SCHED_FIFO, SCHED_IDLE, SCHED_OTHER, SCHED_RESET_ON_FORK, SCHED_RR,
};

/// `mbind(2)`: sets the NUMA memory policy of `[addr, addr + len)`. Raw because neither
/// glibc nor nix wraps it (and we do not link libnuma).
///
/// Every argument is passed as a full machine word, as the kernel reads them
/// (`unsigned long mode`, `unsigned int flags`); a narrower integer through the variadic
/// `syscall` could leave garbage in the upper half of the register.
///
/// # Safety
/// `addr`/`len` must describe a mapping of the caller's that nothing else relies on the
/// placement of; `nodemask` must point to `maxnode - 1` readable bits (rounded up to whole
/// `c_ulong`s).
pub(super) unsafe fn mbind(
    addr: *mut c_void,
    len: c_ulong,
    mode: c_ulong,
    nodemask: *const c_ulong,
    maxnode: c_ulong,
    flags: c_ulong,
) -> c_long {
    // SAFETY: forwarded to the caller's contract above; SYS_mbind takes exactly these six
    // word-sized arguments.
    unsafe { libc::syscall(libc::SYS_mbind, addr, len, mode, nodemask, maxnode, flags) }
}

// --- ethtool (`SIOCETHTOOL`, linux/ethtool.h): `libc` has the ioctl number and `ifreq`, not
// the command structs; nix has neither, but its `ioctl_readwrite_bad!` declares the call.

pub(super) use libc::{ifreq, IFNAMSIZ};

nix::ioctl_readwrite_bad!(
    /// `ioctl(fd, SIOCETHTOOL, ifr)`: the command struct that `ifr.ifr_ifru.ifru_data`
    /// points to says what is read or written. Returns `nix::Result` (the `errno`).
    ///
    /// # Safety
    /// `fd` must be an open socket; `ifr` must point to a valid, writable `ifreq` whose
    /// `ifru_data` points to a writable ethtool command struct as large as the kernel fills
    /// for that command.
    siocethtool,
    libc::SIOCETHTOOL,
    ifreq
);

/// Driver name, bus address and string-set sizes.
pub(super) const ETHTOOL_GDRVINFO: u32 = 0x03;
/// Pause (802.3x flow control) settings.
pub(super) const ETHTOOL_GPAUSEPARAM: u32 = 0x12;
/// The names of a string set.
pub(super) const ETHTOOL_GSTRINGS: u32 = 0x1b;
/// The driver's statistics (values, in the order of the `ETH_SS_STATS` names).
pub(super) const ETHTOOL_GSTATS: u32 = 0x1d;
/// String set: statistics names.
pub(super) const ETH_SS_STATS: u32 = 1;
/// Bytes per name in a string set (NUL-padded).
pub(super) const ETH_GSTRING_LEN: usize = 32;

/// `struct ethtool_drvinfo`.
#[repr(C)]
#[derive(Default)]
#[allow(non_camel_case_types)]
pub(super) struct ethtool_drvinfo {
    pub cmd: u32,
    pub driver: [u8; 32],
    pub version: [u8; 32],
    pub fw_version: [u8; 32],
    pub bus_info: [u8; 32],
    pub erom_version: [u8; 32],
    pub reserved2: [u8; 12],
    pub n_priv_flags: u32,
    pub n_stats: u32,
    pub testinfo_len: u32,
    pub eedump_len: u32,
    pub regdump_len: u32,
}

/// `struct ethtool_pauseparam`.
#[repr(C)]
#[allow(non_camel_case_types)]
pub(super) struct ethtool_pauseparam {
    pub cmd: u32,
    pub autoneg: u32,
    pub rx_pause: u32,
    pub tx_pause: u32,
}
