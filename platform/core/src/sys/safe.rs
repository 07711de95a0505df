//! Layer 3: safe types and functions used by `rt` and `memory`, over `nix` where it wraps
//! the call (affinity, memory locking and mapping, resource limits, clocks, `sysconf`) and
//! over [`result`] for the rest. A `nix` `Errno` becomes an [`io::Error`] through
//! `io::Error::from` (`from_raw_os_error`), so the errors are the OS errno as before.

use std::io;
use std::num::NonZeroUsize;
use std::ptr::NonNull;

use libc::{c_int, c_ulong};
use nix::errno::Errno;
use nix::sched::CpuSet;
use nix::sys::mman::{self, MapFlags, MlockAllFlags, MmapAdvise, ProtFlags};
use nix::sys::resource::{self, Resource};
use nix::time::ClockId;
use nix::unistd::{Pid, SysconfVar};
use rtdaq_core::traits::{DmaTarget, MemKind, MemoryRegion};

use super::raw;
use super::result;
use crate::cpulist::CpuList;
use crate::hugepages::HugePageSize;
use crate::memory::Region;
use crate::rt::SchedPolicy;

// ---------------------------------------------------------------------------------------------
// CPU masks, affinity, scheduling

/// A fixed-size CPU mask (nix's [`CpuSet`], a `cpu_set_t`; CPUs `0..CpuMask::CAPACITY`).
#[derive(Clone, Copy)]
pub(crate) struct CpuMask(CpuSet);

impl CpuMask {
    /// Highest CPU number + 1 a mask can hold (the bits of a `cpu_set_t`: `CPU_SETSIZE`,
    /// 1024 with glibc).
    pub(crate) const CAPACITY: usize = CpuSet::count();

    /// The mask holding only `cpu`; `None` when `cpu >= CAPACITY`.
    pub(crate) fn single(cpu: usize) -> Option<Self> {
        let mut set = CpuSet::new();
        // `set` refuses (EINVAL) a CPU at or above `CAPACITY`.
        set.set(cpu).ok()?;
        Some(Self(set))
    }

    /// The mask holding the CPUs of `cpus` below [`CAPACITY`](Self::CAPACITY) (others are
    /// left out).
    pub(crate) fn from_cpus(cpus: impl IntoIterator<Item = usize>) -> Self {
        let mut set = CpuSet::new();
        for cpu in cpus {
            // `set` refuses (EINVAL) a CPU at or above `CAPACITY`: it is left out.
            let _ = set.set(cpu);
        }
        Self(set)
    }

    /// True when `cpu` is in the mask.
    pub(crate) fn contains(&self, cpu: usize) -> bool {
        // `is_set` refuses (EINVAL) a CPU at or above `CAPACITY`: not in the mask.
        self.0.is_set(cpu).unwrap_or(false)
    }

    /// The members as a [`CpuList`].
    pub(crate) fn to_list(self) -> CpuList {
        (0..Self::CAPACITY).filter(|&c| self.contains(c)).collect()
    }
}

/// Restricts the calling thread to the CPUs of `mask` (`sched_setaffinity(0, ...)`; pid 0
/// is the calling thread).
pub(crate) fn set_thread_affinity(mask: &CpuMask) -> io::Result<()> {
    Ok(nix::sched::sched_setaffinity(Pid::from_raw(0), &mask.0)?)
}

/// The calling thread's CPU mask (`sched_getaffinity(0, ...)`).
pub(crate) fn thread_affinity() -> io::Result<CpuMask> {
    Ok(CpuMask(nix::sched::sched_getaffinity(Pid::from_raw(0))?))
}

/// Switches the calling thread to `SCHED_FIFO` at `priority`.
pub(crate) fn set_thread_fifo(priority: u8) -> io::Result<()> {
    result::sched_setscheduler_self(raw::SCHED_FIFO, c_int::from(priority))
}

/// CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`), in ns. Never
/// allocates: nix's `clock_gettime` is the one libc (vDSO) call into a stack `timespec`.
pub(crate) fn thread_cpu_ns() -> io::Result<u64> {
    let ts = ClockId::CLOCK_THREAD_CPUTIME_ID.now()?;
    Ok((ts.tv_sec() as u64).saturating_mul(1_000_000_000) + ts.tv_nsec() as u64)
}

/// The calling thread's scheduling policy and priority.
pub(crate) fn thread_policy() -> io::Result<SchedPolicy> {
    let policy = result::sched_getscheduler_self()? & !raw::SCHED_RESET_ON_FORK;
    Ok(match policy {
        raw::SCHED_OTHER => SchedPolicy::Other,
        raw::SCHED_BATCH => SchedPolicy::Batch,
        raw::SCHED_IDLE => SchedPolicy::Idle,
        raw::SCHED_DEADLINE => SchedPolicy::Deadline,
        raw::SCHED_FIFO | raw::SCHED_RR => {
            let prio = u8::try_from(result::sched_getparam_self()?).unwrap_or(u8::MAX);
            if policy == raw::SCHED_FIFO {
                SchedPolicy::Fifo(prio)
            } else {
                SchedPolicy::RoundRobin(prio)
            }
        }
        other => SchedPolicy::Unknown(other),
    })
}

/// `mlockall(MCL_CURRENT | MCL_FUTURE)`.
pub(crate) fn lock_all_memory() -> io::Result<()> {
    Ok(mman::mlockall(
        MlockAllFlags::MCL_CURRENT | MlockAllFlags::MCL_FUTURE,
    )?)
}

/// `munlockall()`.
pub(crate) fn unlock_all_memory() -> io::Result<()> {
    Ok(mman::munlockall()?)
}

/// The soft limit of `resource` (`None`: unlimited, `RLIM_INFINITY`).
fn soft_rlimit(resource: Resource) -> io::Result<Option<u64>> {
    let (soft, _hard) = resource::getrlimit(resource)?;
    // `rlim_t` is `u32` on some 32-bit targets.
    #[allow(clippy::unnecessary_cast)]
    Ok((soft != resource::RLIM_INFINITY).then_some(soft as u64))
}

/// Soft `RLIMIT_MEMLOCK` in bytes (`None`: unlimited).
pub(crate) fn rlimit_memlock() -> io::Result<Option<u64>> {
    soft_rlimit(Resource::RLIMIT_MEMLOCK)
}

/// Soft `RLIMIT_RTPRIO` (`None`: unlimited).
pub(crate) fn rlimit_rtprio() -> io::Result<Option<u64>> {
    soft_rlimit(Resource::RLIMIT_RTPRIO)
}

/// The base page size (`sysconf(_SC_PAGESIZE)`), 4096 if the call fails (it cannot on
/// Linux).
pub(crate) fn page_size() -> usize {
    match nix::unistd::sysconf(SysconfVar::PAGE_SIZE) {
        Ok(Some(v)) if v > 0 => v as usize,
        _ => 4096,
    }
}

/// The calling thread's stack as `(lowest address, size)`.
pub(crate) fn thread_stack() -> io::Result<(usize, usize)> {
    result::thread_stack()
}

// ---------------------------------------------------------------------------------------------
// Memory mappings

/// An owned anonymous private mapping; `munmap` on drop.
///
/// Holds a raw pointer, so it is `!Send`/`!Sync` by default; see the impls below.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    /// Mapped bytes (a multiple of the page size of the mapping).
    len: usize,
}

// SAFETY: a `Mapping` exclusively owns its memory (no aliasing handle exists elsewhere in the
// process); moving the owner to another thread is fine, and shared `&Mapping` only reads it.
unsafe impl Send for Mapping {}
// SAFETY: `&Mapping` exposes reads (`as_slice`) and kernel calls that do not change contents
// (`lock`); writes need `&mut Mapping`.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes (rounded up to the page size) of zeroed, readable and writable
    /// anonymous memory aligned to at least `align` (a power of two). `huge` selects
    /// `MAP_HUGETLB` with that page size.
    pub(crate) fn anonymous(
        len: usize,
        align: usize,
        huge: Option<HugePageSize>,
    ) -> io::Result<Self> {
        let page = huge.map_or_else(page_size, HugePageSize::bytes);
        let len = len
            .checked_next_multiple_of(page)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        // The kernel refuses an empty mapping with EINVAL; nix takes the length as non-zero.
        let nz_len =
            NonZeroUsize::new(len).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        let mut flags = MapFlags::MAP_PRIVATE;
        if let Some(size) = huge {
            flags |= MapFlags::MAP_HUGETLB
                | match size {
                    HugePageSize::Size2M => MapFlags::MAP_HUGE_2MB,
                    HugePageSize::Size1G => MapFlags::MAP_HUGE_1GB,
                };
        }
        let prot = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
        if align <= page {
            // SAFETY: no MAP_FIXED: the kernel picks a fresh range.
            let ptr = unsafe { mman::mmap_anonymous(None, nz_len, prot, flags)? };
            return Ok(Self {
                ptr: ptr.cast(),
                len,
            });
        }
        // Over-aligned: reserve `len + align` of address space, map the aligned part over it
        // with MAP_FIXED, give back the head and the tail.
        let span = nz_len
            .checked_add(align)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        // SAFETY: no MAP_FIXED; PROT_NONE + MAP_NORESERVE only reserves address space.
        let base = unsafe {
            mman::mmap_anonymous(
                None,
                span,
                ProtFlags::PROT_NONE,
                MapFlags::MAP_PRIVATE | MapFlags::MAP_NORESERVE,
            )?
        };
        let base_addr = base.addr().get();
        let head = base_addr.next_multiple_of(align) - base_addr;
        let tail = span.get() - head - len;
        // Inside the reservation, so it cannot saturate.
        let start = base.addr().saturating_add(head);
        // SAFETY: `[start, start + len)` lies inside the reservation we just made and nobody
        // else references, so MAP_FIXED replaces only our own PROT_NONE pages.
        let mapped =
            unsafe { mman::mmap_anonymous(Some(start), nz_len, prot, flags | MapFlags::MAP_FIXED) };
        let ptr = match mapped {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: the whole reservation is ours and unused.
                unsafe { mman::munmap(base, span.get()) }
                    .map_err(io::Error::from)
                    .unwrap_or_else(|e2| panic!("munmap of an unused reservation failed: {e2}"));
                return Err(e.into());
            }
        };
        if head > 0 {
            // SAFETY: the head `[base, start)` is part of our reservation, not of the mapping.
            unsafe { mman::munmap(base, head) }
                .map_err(io::Error::from)
                .unwrap_or_else(|e| panic!("munmap of a reservation head failed: {e}"));
        }
        if tail > 0 {
            // SAFETY: the tail `[start + len, base + span)` is part of our reservation only
            // (so the offset stays inside it).
            unsafe { mman::munmap(base.byte_add(head + len), tail) }
                .map_err(io::Error::from)
                .unwrap_or_else(|e| panic!("munmap of a reservation tail failed: {e}"));
        }
        Ok(Self {
            ptr: ptr.cast(),
            len,
        })
    }

    /// Binds the mapping's pages to NUMA node `node` (`mbind(MPOL_BIND)`); call before the
    /// first touch. Nodes at or above 1023 are rejected with `EINVAL`.
    pub(crate) fn bind_to_node(&self, node: u32) -> io::Result<()> {
        const WORDS: usize = 16; // 1024 node bits
        let node = node as usize;
        if node >= WORDS * c_ulong::BITS as usize - 1 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let mut mask = [0 as c_ulong; WORDS];
        let bits = c_ulong::BITS as usize;
        mask[node / bits] |= 1 << (node % bits);
        // SAFETY: the range is exactly our mapping; binding changes placement, not contents.
        unsafe { result::mbind(self.ptr.as_ptr().cast(), self.len, raw::MPOL_BIND, &mask, 0) }
    }

    /// Faults every page in for writing. Uses `MADV_POPULATE_WRITE` (Linux 5.14+), which
    /// reports a failure (`ENOMEM`, or `EFAULT` where touching would raise `SIGBUS`, e.g. no
    /// hugepage left on the bound node) instead of killing the process; on older kernels
    /// (`EINVAL`) it writes one byte per 4 KiB, keeping the contents.
    pub(crate) fn populate_write(&mut self) -> io::Result<()> {
        // SAFETY: the range is exactly our mapping; populating does not change contents.
        match unsafe { mman::madvise(self.ptr.cast(), self.len, MmapAdvise::MADV_POPULATE_WRITE) } {
            Err(Errno::EINVAL) => {
                let slice = self.as_mut_slice();
                for i in (0..slice.len()).step_by(4096) {
                    slice[i] = std::hint::black_box(slice[i]);
                }
                Ok(())
            }
            other => Ok(other?),
        }
    }

    /// Locks the mapping's pages in RAM (`mlock`).
    pub(crate) fn lock(&self) -> io::Result<()> {
        // SAFETY: the range is exactly our mapping; mlock does not change contents.
        Ok(unsafe { mman::mlock(self.ptr.cast(), self.len) }?)
    }

    /// Start address.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Mapped bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The whole mapping as bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` initialised (zero-filled anonymous) bytes for as
        // long as `self` lives; `&self` excludes writers through `as_mut_slice`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The whole mapping as mutable bytes.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as `as_slice`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Mapping {
    /// # Panics
    /// When `munmap` fails: our own mapping can only fail to unmap through a bug (a corrupted
    /// pointer/length), and continuing could leave a NIC writing into reused memory.
    fn drop(&mut self) {
        // SAFETY: we own `[ptr, ptr + len)`; `&mut self` in drop means no reference into it
        // remains.
        let unmapped = unsafe { mman::munmap(self.ptr.cast(), self.len) };
        if let Err(e) = unmapped.map_err(io::Error::from) {
            panic!(
                "munmap({:p}, {}) failed: {e} (errno {})",
                self.ptr,
                self.len,
                e.raw_os_error().unwrap_or(0)
            );
        }
    }
}

// SAFETY: `dma()` returns the start of the region's `Mapping`, an anonymous private mapping
// owned by the region: it stays mapped, at the same virtual address and with the same length,
// until the region is dropped (`Region` never remaps, moves or shrinks it), and its pages are
// resident (prefaulted, then mlocked or hugetlb). Pinning the physical pages for a device is
// what the engine's registration (ibv_reg_mr, VFIO/DPDK mapping) adds on top, as for any
// `VirtAddr` target. `Region` is `Send + Sync` through `Mapping`.
unsafe impl MemoryRegion for Region {
    fn kind(&self) -> MemKind {
        Region::kind(self)
    }

    fn len(&self) -> usize {
        Region::len(self)
    }

    fn dma(&self) -> DmaTarget {
        DmaTarget::VirtAddr(self.mapping().as_ptr())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_masks_hold_cpus_below_capacity_only() {
        assert_eq!(CpuMask::CAPACITY, libc::CPU_SETSIZE as usize);
        let one = CpuMask::single(3).unwrap();
        assert!(one.contains(3) && !one.contains(2) && !one.contains(CpuMask::CAPACITY));
        assert!(CpuMask::single(CpuMask::CAPACITY).is_none());
        let some = CpuMask::from_cpus([0, 5, CpuMask::CAPACITY, usize::MAX]);
        assert_eq!(some.to_list().to_string(), "0,5");
    }

    #[test]
    fn the_thread_affinity_round_trips() {
        let before = thread_affinity().unwrap();
        set_thread_affinity(&before).unwrap();
        assert_eq!(thread_affinity().unwrap().to_list(), before.to_list());
        let e = set_thread_affinity(&CpuMask::from_cpus([])).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
    }

    #[test]
    fn an_empty_mapping_is_einval_as_from_the_kernel() {
        let e = Mapping::anonymous(0, 1, None).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
    }

    #[test]
    fn over_aligned_mappings_are_aligned_and_zeroed() {
        let align = 1 << 21;
        let mut m = Mapping::anonymous(3 * page_size(), align, None).unwrap();
        assert_eq!(m.as_ptr() as usize % align, 0);
        assert_eq!(m.len(), 3 * page_size());
        m.populate_write().unwrap();
        assert!(m.as_slice().iter().all(|&b| b == 0));
    }

    #[test]
    fn clocks_limits_and_page_size_answer() {
        assert!(page_size().is_power_of_two() && page_size() >= 4096);
        let t0 = thread_cpu_ns().unwrap();
        assert!(thread_cpu_ns().unwrap() >= t0);
        rlimit_memlock().unwrap();
        rlimit_rtprio().unwrap();
    }
}
