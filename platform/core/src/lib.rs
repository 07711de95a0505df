//! # rtdaq-platform: the board-independent platform layer
//!
//! What every board crate (`rtdaq-platform-host`, the IGX crates) builds on, and the only
//! place in rtdaq that talks to the kernel about threads and memory:
//!
//! | module | what |
//! |---|---|
//! | [`board`] | [`BoardFacts`]: the one table of board facts (cores to isolate, NIC ports, GPU kind, tuning targets) that the board crates, the config validator and `rtdaq doctor` share |
//! | [`topology`] | [`Topology`]: online CPUs, NUMA node of each CPU, isolated and `nohz_full` CPUs, read from sysfs below a root directory |
//! | [`rt`] | **all** real-time setup: pin ([`sched_setaffinity`]), `SCHED_FIFO`, `mlockall`, stack and region prefault; warn-once degradation without privileges |
//! | [`memory`] | [`Region`]: preallocated, prefaulted `host` / `huge` memory, optionally NUMA-bound, implementing [`MemoryRegion`] |
//! | [`hugepages`] | hugepage pool status, [`pages_needed`](hugepages::pages_needed), reservation |
//! | [`ethtool_netlink`] | the standard pause-frame statistics of a device over ethtool's generic netlink family (`ethtool -I -a`) |
//! | [`nic`] | NIC and port counters (ethtool statistics, kernel netdev statistics), pause frames and settings, the device of an address |
//! | [`ptp`] | whether this host's clock is synchronised: linuxptp's `ptp4l` asked over its management socket (`pmc`'s `GET PORT_DATA_SET`, `TIME_STATUS_NP`) |
//! | [`phc`] | a network device's time stamping (`ethtool -T`) and its PTP hardware clock's offset from the system clock (`PTP_SYS_OFFSET_EXTENDED`) |
//! | [`cpulist`] | [`CpuList`], the kernel's `0-3,8` set format |
//! | [`error`] | [`PlatformError`], one `thiserror` enum with a variant per failing operation |
//!
//! It re-exports the platform traits of `rtdaq-core` ([`Platform`], [`GpuDirect`],
//! [`MemoryRegion`], [`MemKind`], [`DmaTarget`]) and extends [`Platform`] with
//! [`PlatformExt`] (topology, real-time entry, a human summary).
//!
//! [`sched_setaffinity`]: https://man7.org/linux/man-pages/man2/sched_setaffinity.2.html
//!
//! ## What this crate must not do
//! - Nothing here runs on the hot path: every function may read sysfs, allocate or log.
//!   Call it at start and at the top of each I/O thread, never from the packet loop.
//! - No other crate touches affinity, scheduling policy or memory locking; engines ask
//!   through [`rt`] (DAQIRI repeated `pthread_setaffinity_np` in four engine files).
//! - No `unsafe` outside the private `sys` module (`nix` where it wraps the system call, raw
//!   `libc` for the rest → `io::Result` → safe RAII types), and no C dependency besides libc
//!   (NUMA binding is the raw `mbind` call, not libnuma).
//! - It does not change system settings on its own: hugepages are reserved by the
//!   administrator (the errors say how); [`hugepages::set_total`] exists for tools and tests.
//!
//! ## Quick start
//! ```no_run
//! use rtdaq_platform::memory::{Region, RegionSpec};
//! use rtdaq_platform::hugepages::HugePageSize;
//! use rtdaq_platform::rt::{self, RtRequest};
//! use rtdaq_platform::Topology;
//!
//! # fn main() -> rtdaq_platform::Result<()> {
//! let topo = Topology::current()?;
//! println!("online CPUs {}, isolated {}", topo.online_cpus(), topo.isolated_cpus());
//!
//! // At start: every region, then lock everything.
//! let mut rx = Region::allocate(&RegionSpec {
//!     numa_node: Some(0),
//!     ..RegionSpec::huge("rx", 64 << 20, HugePageSize::Size2M)
//! })?;
//! rx.as_mut_slice()[0] = 1;
//! let locked = rt::lock_memory(false)?;
//! if !locked.memory_locked {
//!     eprintln!("running with pageable memory");
//! }
//!
//! // Each I/O thread, first thing:
//! std::thread::spawn(|| -> rtdaq_platform::Result<()> {
//!     let out = rt::enter_thread(&RtRequest {
//!         core: Some(2),
//!         priority: Some(80),
//!         prefault_stack_kib: 256,
//!         required: false,
//!     })?;
//!     assert_eq!(out.core, Some(2));
//!     // ... poll loop ...
//!     Ok(())
//! });
//! # Ok(())
//! # }
//! ```
//!
//! ## Privileges
//! `SCHED_FIFO` needs `CAP_SYS_NICE`, memory locking `CAP_IPC_LOCK` (or generous
//! `RLIMIT_RTPRIO` / `RLIMIT_MEMLOCK`). Without them the calls warn once per capability and
//! continue, unless the request says `required`; see [`rt`].
//!
//! ## Thread safety
//! Every function may be called from any thread; [`rt::enter_thread`] acts on the calling
//! thread only, [`rt::lock_memory`] on the whole process. [`Region`] is `Send + Sync`.
//!
//! ## Resource cleanup
//! - A [`Region`] unmaps its memory when dropped (RAII). A failing `munmap` is a bug and
//!   panics with the errno (see [`Region`]'s `# Panics`). Drop a region only after every
//!   device registration of it is gone (engines wrap regions they register, so the borrow
//!   checker enforces that).
//! - Scheduling policy and affinity belong to the thread and end with it.
//! - `mlockall` lasts for the life of the process ([`rt::unlock_memory`] exists for tools).
//! - Nothing else is held: no file descriptors stay open.
#![deny(unsafe_code)]
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod alloc_audit;
pub mod board;
mod board_crate;
pub mod cpulist;
pub mod error;
pub mod ethtool_netlink;
pub mod hugepages;
pub mod memory;
pub mod neigh;
pub mod netdev;
pub mod nic;
pub mod phc;
pub mod ptp;
pub mod qdisc;
pub mod rt;
mod rtnetlink;
mod sys;
mod sysfs;
pub mod topology;

pub use board::{BoardFacts, GpuKind, NicPort, TuningTargets};
pub use cpulist::CpuList;
pub use error::{PlatformError, Result};
pub use hugepages::{HugePageSize, HugepageStatus};
pub use memory::{Region, RegionSpec};
pub use rt::{RtOutcome, RtRequest};
pub use rtdaq_core::traits::{DmaTarget, GpuDirect, MemKind, MemoryRegion, Platform};
pub use topology::{NumaNode, Topology};

/// What a board offers beyond the compile-time facts of [`Platform`]: its topology,
/// real-time thread entry, and a human summary. Boards override the defaults to add their
/// own checks (an IGX crate refuses a core that is not isolated, for example).
pub trait PlatformExt: Platform {
    /// The board's CPU/NUMA layout.
    ///
    /// # Errors
    /// As [`Topology::current`].
    fn topology() -> Result<Topology> {
        Topology::current()
    }

    /// Makes the calling thread real-time (see [`rt::enter_thread`]).
    ///
    /// # Errors
    /// As [`rt::enter_thread`].
    fn enter_rt(req: &RtRequest) -> Result<RtOutcome> {
        rt::enter_thread(req)
    }

    /// The board's facts (cores to isolate, NIC ports, GPU kind, tuning targets); `None` for
    /// the generic `host`, which knows no board.
    fn board() -> Option<&'static BoardFacts> {
        None
    }

    /// A short human summary of the board for `rtdaq version` / `rtdaq config check`.
    fn describe() -> String;
}
