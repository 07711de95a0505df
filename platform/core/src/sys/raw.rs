//! Layer 1: raw foreign declarations. `libc` provides almost everything; this file names what
//! we use and adds the `mbind(2)` system call.

use libc::{c_long, c_ulong, c_void};

pub(super) use libc::{
    clock_gettime, cpu_set_t, madvise, mlock, mlockall, mmap, munlockall, munmap,
    pthread_attr_destroy, pthread_attr_getstack, pthread_attr_t, pthread_getattr_np, pthread_self,
    rlimit, sched_getaffinity, sched_getparam, sched_getscheduler, sched_param, sched_setaffinity,
    sched_setscheduler, sysconf, timespec, _SC_PAGESIZE, CLOCK_THREAD_CPUTIME_ID, CPU_ISSET,
    CPU_SET, CPU_SETSIZE, MADV_POPULATE_WRITE, MAP_ANONYMOUS, MAP_FAILED, MAP_FIXED, MAP_HUGETLB,
    MAP_HUGE_1GB, MAP_HUGE_2MB, MAP_NORESERVE, MAP_PRIVATE, MCL_CURRENT, MCL_FUTURE, MPOL_BIND,
    PROT_NONE, PROT_READ, PROT_WRITE, RLIMIT_MEMLOCK, RLIMIT_RTPRIO, RLIM_INFINITY, SCHED_BATCH,
    SCHED_DEADLINE, SCHED_FIFO, SCHED_IDLE, SCHED_OTHER, SCHED_RESET_ON_FORK, SCHED_RR,
};

/// `mbind(2)`: sets the NUMA memory policy of `[addr, addr + len)`.
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
