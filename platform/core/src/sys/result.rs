//! Layer 2: one call each, status turned into [`io::Result`]. The only code that reads `errno`
//! (through [`io::Error::last_os_error`]) or turns a returned error number into an error.

use std::io;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use libc::{c_int, c_ulong, c_void};

use super::raw;

/// `-1` → the current `errno`.
fn cvt(ret: c_int) -> io::Result<c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// pthread functions return the error number instead of setting `errno`.
fn cvt_pthread(ret: c_int) -> io::Result<()> {
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(ret))
    }
}

/// An empty CPU set.
pub(super) fn cpu_set_zeroed() -> raw::cpu_set_t {
    // SAFETY: `cpu_set_t` is a plain array of integers; all-zero is the valid empty set.
    unsafe { MaybeUninit::<raw::cpu_set_t>::zeroed().assume_init() }
}

/// `sched_setaffinity(0, ...)`: the calling thread's CPU mask.
pub(super) fn sched_setaffinity_self(set: &raw::cpu_set_t) -> io::Result<()> {
    // SAFETY: `set` is a valid `cpu_set_t` of exactly the size passed; tid 0 is the caller.
    cvt(unsafe { raw::sched_setaffinity(0, size_of::<raw::cpu_set_t>(), set) }).map(drop)
}

/// `sched_getaffinity(0, ...)`.
pub(super) fn sched_getaffinity_self() -> io::Result<raw::cpu_set_t> {
    let mut set = cpu_set_zeroed();
    // SAFETY: `set` is a writable `cpu_set_t` of exactly the size passed.
    cvt(unsafe { raw::sched_getaffinity(0, size_of::<raw::cpu_set_t>(), &mut set) })?;
    Ok(set)
}

/// `sched_setscheduler(0, policy, {priority})`: the calling thread (Linux schedules threads).
pub(super) fn sched_setscheduler_self(policy: c_int, priority: c_int) -> io::Result<()> {
    let param = raw::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid `sched_param` that outlives the call.
    cvt(unsafe { raw::sched_setscheduler(0, policy, &param) }).map(drop)
}

/// `sched_getscheduler(0)`: the raw policy (possibly with `SCHED_RESET_ON_FORK` set).
pub(super) fn sched_getscheduler_self() -> io::Result<c_int> {
    // SAFETY: no pointers; tid 0 is the caller.
    cvt(unsafe { raw::sched_getscheduler(0) })
}

/// `clock_gettime(clock)`.
pub(super) fn clock_gettime(clock: libc::clockid_t) -> io::Result<raw::timespec> {
    let mut ts = raw::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a writable `timespec`.
    cvt(unsafe { raw::clock_gettime(clock, &mut ts) })?;
    Ok(ts)
}

/// `sched_getparam(0)`: the static priority.
pub(super) fn sched_getparam_self() -> io::Result<c_int> {
    let mut param = raw::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a writable `sched_param`.
    cvt(unsafe { raw::sched_getparam(0, &mut param) })?;
    Ok(param.sched_priority)
}

/// `mlockall(flags)`.
pub(super) fn mlockall(flags: c_int) -> io::Result<()> {
    // SAFETY: no pointers; only changes the process's paging behaviour.
    cvt(unsafe { raw::mlockall(flags) }).map(drop)
}

/// `munlockall()`.
pub(super) fn munlockall() -> io::Result<()> {
    // SAFETY: no pointers.
    cvt(unsafe { raw::munlockall() }).map(drop)
}

/// Which resource limit to read.
#[derive(Debug, Clone, Copy)]
pub(super) enum Rlimit {
    /// `RLIMIT_MEMLOCK` (bytes).
    Memlock,
    /// `RLIMIT_RTPRIO` (highest real-time priority).
    Rtprio,
}

/// `getrlimit(resource)` → `(soft, hard)`, `None` meaning unlimited.
pub(super) fn getrlimit(which: Rlimit) -> io::Result<(Option<u64>, Option<u64>)> {
    let mut lim = raw::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a writable `rlimit`; the resource constants have the parameter type
    // of this target's `getrlimit`.
    let ret = unsafe {
        match which {
            Rlimit::Memlock => libc::getrlimit(raw::RLIMIT_MEMLOCK, &mut lim),
            Rlimit::Rtprio => libc::getrlimit(raw::RLIMIT_RTPRIO, &mut lim),
        }
    };
    cvt(ret)?;
    // `rlim_t` is `u32` on some 32-bit targets.
    #[allow(clippy::unnecessary_cast)]
    let conv = |v: libc::rlim_t| (v != raw::RLIM_INFINITY).then_some(v as u64);
    Ok((conv(lim.rlim_cur), conv(lim.rlim_max)))
}

/// `sysconf(_SC_PAGESIZE)`, 4096 if the call fails (it cannot on Linux).
pub(super) fn page_size() -> usize {
    // SAFETY: no pointers.
    let v = unsafe { raw::sysconf(raw::_SC_PAGESIZE) };
    if v > 0 {
        v as usize
    } else {
        4096
    }
}

/// The calling thread's stack as `(lowest address, size in bytes)`.
pub(super) fn thread_stack() -> io::Result<(usize, usize)> {
    let mut attr = MaybeUninit::<raw::pthread_attr_t>::uninit();
    // SAFETY: `pthread_getattr_np` initialises `attr` on success (checked before use).
    cvt_pthread(unsafe { raw::pthread_getattr_np(raw::pthread_self(), attr.as_mut_ptr()) })?;
    let mut addr: *mut c_void = std::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: `attr` was initialised above; `addr`/`size` are writable.
    let got =
        cvt_pthread(unsafe { raw::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size) });
    // SAFETY: `attr` was initialised by `pthread_getattr_np` and is destroyed exactly once.
    unsafe { raw::pthread_attr_destroy(attr.as_mut_ptr()) };
    got?;
    Ok((addr as usize, size))
}

/// `mmap` of anonymous private memory.
///
/// # Safety
/// With `MAP_FIXED` in `flags`, `[addr, addr + len)` must be a range the caller owns and
/// nothing else references (it is replaced).
pub(super) unsafe fn mmap_anonymous(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
) -> io::Result<NonNull<u8>> {
    // SAFETY: anonymous mapping (fd -1, offset 0); the MAP_FIXED contract is the caller's.
    let p = unsafe { raw::mmap(addr, len, prot, flags | raw::MAP_ANONYMOUS, -1, 0) };
    if p == raw::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidData))
}

/// `munmap(addr, len)`.
///
/// # Safety
/// `[addr, addr + len)` must be mapped by the caller and no reference into it may be used
/// afterwards.
pub(super) unsafe fn munmap(addr: *mut c_void, len: usize) -> io::Result<()> {
    // SAFETY: the caller's contract above.
    cvt(unsafe { raw::munmap(addr, len) }).map(drop)
}

/// `mlock(addr, len)`.
///
/// # Safety
/// `[addr, addr + len)` must be mapped by the caller.
pub(super) unsafe fn mlock(addr: *const c_void, len: usize) -> io::Result<()> {
    // SAFETY: the caller's contract above; mlock does not change the contents.
    cvt(unsafe { raw::mlock(addr, len) }).map(drop)
}

/// `madvise(addr, len, advice)`.
///
/// # Safety
/// `[addr, addr + len)` must be mapped by the caller, and `advice` must not change the
/// contents in a way the caller's references do not expect (the populate advices do not).
pub(super) unsafe fn madvise(addr: *mut c_void, len: usize, advice: c_int) -> io::Result<()> {
    // SAFETY: the caller's contract above.
    cvt(unsafe { raw::madvise(addr, len, advice) }).map(drop)
}

/// `mbind(addr, len, mode, nodemask, nodemask bits + 1, flags)`.
///
/// # Safety
/// `[addr, addr + len)` must be mapped by the caller.
pub(super) unsafe fn mbind(
    addr: *mut c_void,
    len: usize,
    mode: c_int,
    nodemask: &[c_ulong],
    flags: u32,
) -> io::Result<()> {
    let bits = nodemask.len() * c_ulong::BITS as usize;
    // SAFETY: the mapping is the caller's contract; `nodemask` holds `bits` readable bits and
    // the kernel reads `maxnode - 1` of them.
    let ret = unsafe {
        raw::mbind(
            addr,
            len as c_ulong,
            mode as c_ulong,
            nodemask.as_ptr(),
            (bits + 1) as c_ulong,
            c_ulong::from(flags),
        )
    };
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A datagram socket (`AF_INET`, `SOCK_DGRAM`): the handle `SIOCETHTOOL` needs.
pub(super) fn inet_dgram_socket() -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: no pointers.
    let fd = cvt(unsafe { raw::socket(raw::AF_INET, raw::SOCK_DGRAM | raw::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` was just returned by `socket` and is owned by nothing else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// `ioctl(fd, SIOCETHTOOL, &ifreq { ifr_name: name, ifr_data: data })`.
///
/// # Errors
/// `InvalidInput` for a name that does not fit `IFNAMSIZ` or holds a NUL; the `errno` of the
/// ioctl otherwise (`ENODEV`: no such device, `EOPNOTSUPP`: the driver lacks the command).
///
/// # Safety
/// `data` must point to the ethtool command struct its first `u32` names, writable and as
/// large as the kernel fills for that command on this device.
pub(super) unsafe fn ethtool(fd: c_int, name: &str, data: *mut c_void) -> io::Result<()> {
    if name.len() >= raw::IFNAMSIZ || name.as_bytes().contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{name}` is not a network device name (at most 15 bytes, no NUL)"),
        ));
    }
    // SAFETY: `ifreq` is plain old data; all zero is a valid value.
    let mut ifr: raw::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = data.cast();
    // SAFETY: `ifr` is a valid `ifreq` with a NUL-terminated name; `data` is as the caller
    // promised. The request type differs between libcs (`as _`).
    cvt(unsafe { raw::ioctl(fd, raw::SIOCETHTOOL as _, &mut ifr) }).map(drop)
}
