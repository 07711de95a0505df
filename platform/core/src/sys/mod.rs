//! The only module of `rtdaq-platform` that contains `unsafe` code.
//!
//! Every system call goes through three layers (cudarc's `sys` → `result` → `safe` split).
//! Where `nix` wraps the call, `nix` *is* the first two layers and [`safe`] calls it
//! directly; the calls `nix` 0.30 lacks go through our own `raw` and `result`, each with the
//! reason it stays raw:
//!
//! - **Through `nix`**: CPU affinity (`sched_setaffinity`/`sched_getaffinity` with
//!   `nix::sched::CpuSet` behind our [`CpuMask`]), `mlockall`/`munlockall`/`mlock`,
//!   anonymous `mmap`/`munmap`/`madvise` (`nix::sys::mman`), `getrlimit`
//!   (`nix::sys::resource`), `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` (`nix::time`, still
//!   one vDSO call, no allocation), `sysconf(_SC_PAGESIZE)` (`nix::unistd`), the ethtool
//!   socket (`nix::sys::socket::socket`), and the `SIOCETHTOOL` ioctl itself, declared with
//!   `nix::ioctl_readwrite_bad!`. A `nix` `Errno` becomes an [`std::io::Error`] with
//!   `io::Error::from` (`from_raw_os_error`): the same OS errno as the hand-written calls
//!   gave.
//! - **Through `libc`** (nix has no wrapper): `sched_setscheduler`, `sched_getscheduler` and
//!   `sched_getparam` (no scheduling-policy calls in nix), `pthread_getattr_np` and
//!   `pthread_attr_getstack` (no pthread attribute queries in nix), the `mbind` system call
//!   (wrapped by neither glibc nor nix; we do not link libnuma), and the `ifreq` plus ethtool
//!   command structs around the ioctl (nix has no ethtool types).
//!
//! 1. [`raw`]: the foreign declarations `nix` does not provide. The `libc` crate is our
//!    bindgen; `raw` re-exports what we still call through it, adds the `mbind` system call
//!    and the ethtool command structs, and declares the `SIOCETHTOOL` ioctl with `nix`'s
//!    macro.
//! 2. [`result`]: thin functions that make one of those calls and turn its status into
//!    [`std::io::Result`]. This is the **only** place that reads `errno` itself (for the
//!    calls it wraps, `nix` reads it). Functions taking raw pointers stay `unsafe fn` with a
//!    `# Safety` section.
//! 3. [`safe`]: safe types used by `rt` and `memory`: [`CpuMask`], the owned [`Mapping`]
//!    (munmap on drop), thread scheduling/affinity/stack queries, and the `unsafe impl` of
//!    [`MemoryRegion`](rtdaq_core::traits::MemoryRegion) for
//!    [`Region`](crate::memory::Region).
//!
//!    [`ethtool`] is the same layer for `SIOCETHTOOL`: driver info, statistics names and
//!    values, pause settings of a network device (what [`crate::nic`] reads).
//!
//! Nothing here logs or decides policy (what to do on `EPERM` is `rt`'s business).
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub(crate) mod audit;
pub(crate) mod ethtool;
mod raw;
mod result;
mod safe;

pub(crate) use safe::*;
