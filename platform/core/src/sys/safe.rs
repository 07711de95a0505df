//! Layer 3: safe types and functions over [`result`](super::result), used by `rt` and
//! `memory`.

use std::io;
use std::ptr::NonNull;

use libc::{c_int, c_ulong, c_void};
use rtdaq_core::traits::{DmaTarget, MemKind, MemoryRegion};

use super::raw;
use super::result::{self, Rlimit};
use crate::cpulist::CpuList;
use crate::hugepages::HugePageSize;
use crate::memory::Region;
use crate::rt::SchedPolicy;

// ---------------------------------------------------------------------------------------------
// CPU masks, affinity, scheduling

/// A fixed-size CPU mask (`cpu_set_t`, CPUs `0..CpuMask::CAPACITY`).
#[derive(Clone, Copy)]
pub(crate) struct CpuMask(raw::cpu_set_t);

impl CpuMask {
    /// Highest CPU number + 1 a mask can hold (`CPU_SETSIZE`, 1024 with glibc).
    pub(crate) const CAPACITY: usize = raw::CPU_SETSIZE as usize;

    /// The mask holding only `cpu`; `None` when `cpu >= CAPACITY`.
    pub(crate) fn single(cpu: usize) -> Option<Self> {
        if cpu >= Self::CAPACITY {
            return None;
        }
        let mut set = result::cpu_set_zeroed();
        // SAFETY: `cpu < CPU_SETSIZE`, so the bit lies inside `set` (CPU_SET does not check).
        unsafe { raw::CPU_SET(cpu, &mut set) };
        Some(Self(set))
    }

    /// The mask holding the CPUs of `cpus` below [`CAPACITY`](Self::CAPACITY) (others are
    /// left out).
    pub(crate) fn from_cpus(cpus: impl IntoIterator<Item = usize>) -> Self {
        let mut set = result::cpu_set_zeroed();
        for cpu in cpus.into_iter().filter(|&c| c < Self::CAPACITY) {
            // SAFETY: `cpu < CPU_SETSIZE`, so the bit lies inside `set` (CPU_SET does not check).
            unsafe { raw::CPU_SET(cpu, &mut set) };
        }
        Self(set)
    }

    /// True when `cpu` is in the mask.
    pub(crate) fn contains(&self, cpu: usize) -> bool {
        // SAFETY: `cpu < CPU_SETSIZE` is checked first, so the bit lies inside the set.
        cpu < Self::CAPACITY && unsafe { raw::CPU_ISSET(cpu, &self.0) }
    }

    /// The members as a [`CpuList`].
    pub(crate) fn to_list(self) -> CpuList {
        (0..Self::CAPACITY).filter(|&c| self.contains(c)).collect()
    }
}

/// Restricts the calling thread to the CPUs of `mask` (`sched_setaffinity`).
pub(crate) fn set_thread_affinity(mask: &CpuMask) -> io::Result<()> {
    result::sched_setaffinity_self(&mask.0)
}

/// The calling thread's CPU mask (`sched_getaffinity`).
pub(crate) fn thread_affinity() -> io::Result<CpuMask> {
    result::sched_getaffinity_self().map(CpuMask)
}

/// Switches the calling thread to `SCHED_FIFO` at `priority`.
pub(crate) fn set_thread_fifo(priority: u8) -> io::Result<()> {
    result::sched_setscheduler_self(raw::SCHED_FIFO, c_int::from(priority))
}

/// CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`), in ns.
pub(crate) fn thread_cpu_ns() -> io::Result<u64> {
    let ts = result::clock_gettime(raw::CLOCK_THREAD_CPUTIME_ID)?;
    Ok((ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64)
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
    result::mlockall(raw::MCL_CURRENT | raw::MCL_FUTURE)
}

/// `munlockall()`.
pub(crate) fn unlock_all_memory() -> io::Result<()> {
    result::munlockall()
}

/// Soft `RLIMIT_MEMLOCK` in bytes (`None`: unlimited).
pub(crate) fn rlimit_memlock() -> io::Result<Option<u64>> {
    result::getrlimit(Rlimit::Memlock).map(|(soft, _)| soft)
}

/// Soft `RLIMIT_RTPRIO` (`None`: unlimited).
pub(crate) fn rlimit_rtprio() -> io::Result<Option<u64>> {
    result::getrlimit(Rlimit::Rtprio).map(|(soft, _)| soft)
}

/// The base page size.
pub(crate) fn page_size() -> usize {
    result::page_size()
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
        let mut flags = raw::MAP_PRIVATE;
        if let Some(size) = huge {
            flags |= raw::MAP_HUGETLB
                | match size {
                    HugePageSize::Size2M => raw::MAP_HUGE_2MB,
                    HugePageSize::Size1G => raw::MAP_HUGE_1GB,
                };
        }
        let prot = raw::PROT_READ | raw::PROT_WRITE;
        if align <= page {
            // SAFETY: no MAP_FIXED: the kernel picks a fresh range.
            let ptr = unsafe { result::mmap_anonymous(std::ptr::null_mut(), len, prot, flags)? };
            return Ok(Self { ptr, len });
        }
        // Over-aligned: reserve `len + align` of address space, map the aligned part over it
        // with MAP_FIXED, give back the head and the tail.
        let span = len
            .checked_add(align)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        // SAFETY: no MAP_FIXED; PROT_NONE + MAP_NORESERVE only reserves address space.
        let base = unsafe {
            result::mmap_anonymous(
                std::ptr::null_mut(),
                span,
                raw::PROT_NONE,
                raw::MAP_PRIVATE | raw::MAP_NORESERVE,
            )?
        };
        let base_addr = base.as_ptr() as usize;
        let start = base_addr.next_multiple_of(align);
        let head = start - base_addr;
        let tail = span - head - len;
        // SAFETY: `[start, start + len)` lies inside the reservation we just made and nobody
        // else references, so MAP_FIXED replaces only our own PROT_NONE pages.
        let mapped = unsafe {
            result::mmap_anonymous(
                base.as_ptr().add(head).cast::<c_void>(),
                len,
                prot,
                flags | raw::MAP_FIXED,
            )
        };
        let ptr = match mapped {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: the whole reservation is ours and unused.
                unsafe { result::munmap(base.as_ptr().cast(), span) }
                    .unwrap_or_else(|e2| panic!("munmap of an unused reservation failed: {e2}"));
                return Err(e);
            }
        };
        if head > 0 {
            // SAFETY: the head `[base, start)` is part of our reservation, not of the mapping.
            unsafe { result::munmap(base.as_ptr().cast(), head) }
                .unwrap_or_else(|e| panic!("munmap of a reservation head failed: {e}"));
        }
        if tail > 0 {
            // SAFETY: the tail `[start + len, base + span)` is part of our reservation only.
            unsafe { result::munmap(base.as_ptr().add(head + len).cast(), tail) }
                .unwrap_or_else(|e| panic!("munmap of a reservation tail failed: {e}"));
        }
        Ok(Self { ptr, len })
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
        match unsafe {
            result::madvise(self.ptr.as_ptr().cast(), self.len, raw::MADV_POPULATE_WRITE)
        } {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                let slice = self.as_mut_slice();
                for i in (0..slice.len()).step_by(4096) {
                    slice[i] = std::hint::black_box(slice[i]);
                }
                Ok(())
            }
            other => other,
        }
    }

    /// Locks the mapping's pages in RAM (`mlock`).
    pub(crate) fn lock(&self) -> io::Result<()> {
        // SAFETY: the range is exactly our mapping; mlock does not change contents.
        unsafe { result::mlock(self.ptr.as_ptr().cast(), self.len) }
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
        if let Err(e) = unsafe { result::munmap(self.ptr.as_ptr().cast(), self.len) } {
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
