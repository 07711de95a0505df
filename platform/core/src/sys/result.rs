//! Layer 2 for the calls `nix` does not wrap: one call each, status turned into
//! [`io::Result`]. The only code that reads `errno` itself (through
//! [`io::Error::last_os_error`]) or turns a returned error number into an error. For the calls
//! `nix` wraps, `nix` reads `errno` and returns an `Errno`; `safe` (and [`ethtool`] here, over
//! the `nix`-declared ioctl) turn it into an [`io::Error`] with `io::Error::from`, which is
//! `from_raw_os_error`: the same error as before.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd};

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

/// `sched_getparam(0)`: the static priority.
pub(super) fn sched_getparam_self() -> io::Result<c_int> {
    let mut param = raw::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a writable `sched_param`.
    cvt(unsafe { raw::sched_getparam(0, &mut param) })?;
    Ok(param.sched_priority)
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

/// `ioctl(fd, SIOCETHTOOL, &ifreq { ifr_name: name, ifr_data: data })`.
///
/// # Errors
/// `InvalidInput` for a name that does not fit `IFNAMSIZ` or holds a NUL; the `errno` of the
/// ioctl otherwise (`ENODEV`: no such device, `EOPNOTSUPP`: the driver lacks the command).
///
/// # Safety
/// `fd` must be a socket (another kind of file could read the request number as its own);
/// `data` must point to the ethtool command struct its first `u32` names, writable and as
/// large as the kernel fills for that command on this device.
pub(super) unsafe fn ethtool(fd: BorrowedFd<'_>, name: &str, data: *mut c_void) -> io::Result<()> {
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
    // SAFETY: `fd` is an open socket (borrowed, the caller's contract); `ifr` is a valid
    // `ifreq` with a NUL-terminated name; `data` is as the caller promised.
    unsafe { raw::siocethtool(fd.as_raw_fd(), &mut ifr) }
        .map(drop)
        .map_err(io::Error::from)
}
