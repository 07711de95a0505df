//! The only module of `rtdaq-platform` that contains `unsafe` code.
//!
//! Every foreign API goes through three layers (cudarc's `sys` → `result` → `safe` split):
//!
//! 1. [`raw`]: the foreign declarations. The `libc` crate is our bindgen; `raw` re-exports
//!    what we use and adds what `libc` lacks (the `mbind` system call, which glibc does not
//!    wrap; we do not link libnuma).
//! 2. [`result`]: thin functions that make one call and turn its status into
//!    [`std::io::Result`]. This is the **only** place that reads `errno`. Functions taking
//!    raw pointers stay `unsafe fn` with a `# Safety` section.
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
