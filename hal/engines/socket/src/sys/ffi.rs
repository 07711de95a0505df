//! Result layer: one thin function per Linux call, turning `-1` + `errno` into `io::Error`.
//!
//! This is the only module that reads `errno` (through `io::Error::last_os_error`, which does
//! not allocate). Functions whose arguments are plain values or borrowed Rust data are safe;
//! those that pass kernel-visible structures full of raw pointers are `unsafe fn` with a
//! `# Safety` contract that the safe layer ([`super::mmsg`], [`super::iov`]) upholds.

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

use libc::{c_int, c_uint, c_void, socklen_t};

/// `-1` → the thread's `errno` as an `io::Error`.
#[inline]
fn cvt(r: c_int) -> io::Result<c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `-1` → `errno`, otherwise the byte count.
#[inline]
fn cvt_size(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// A `sockaddr_in` for `addr` (network byte order).
#[inline]
pub(crate) fn to_sockaddr(addr: &SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(addr.ip().octets()),
        },
        sin_zero: [0; 8],
    }
}

/// The address in a `sockaddr_in` (the family is not checked: callers pass IPv4 sockets).
#[inline]
pub(crate) fn from_sockaddr(sa: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(
        Ipv4Addr::from(sa.sin_addr.s_addr.to_ne_bytes()),
        u16::from_be(sa.sin_port),
    )
}

/// Sets or clears `O_NONBLOCK` on `fd` (`fcntl` F_GETFL / F_SETFL).
pub(crate) fn set_nonblocking(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    // SAFETY: integer arguments only, on a descriptor the caller owns.
    let flags = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    let want = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, want) }).map(drop)
}

/// `socket(AF_INET, ty | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)`.
pub(crate) fn socket(ty: c_int) -> io::Result<OwnedFd> {
    // SAFETY: integer arguments only.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_INET,
            ty | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` is a descriptor the kernel just created for us; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, level, option, &value, sizeof(int))`.
pub(crate) fn setsockopt_int(
    fd: BorrowedFd<'_>,
    level: c_int,
    option: c_int,
    value: c_int,
) -> io::Result<()> {
    setsockopt_struct(fd, level, option, &value)
}

fn in_addr(ip: Ipv4Addr) -> libc::in_addr {
    libc::in_addr {
        s_addr: u32::from_ne_bytes(ip.octets()),
    }
}

/// `setsockopt(fd, level, option, &value, sizeof value)` for a plain-data option value.
fn setsockopt_struct<T: Copy>(
    fd: BorrowedFd<'_>,
    level: c_int,
    option: c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` is a plain `Copy` value borrowed across the call; its size is passed.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            option,
            (value as *const T).cast::<c_void>(),
            size_of::<T>() as socklen_t,
        )
    })
    .map(drop)
}

/// `IP_ADD_MEMBERSHIP` (any-source) of `group` on the interface with address `local`
/// (`0.0.0.0`: the kernel picks it by route).
pub(crate) fn join_group(fd: BorrowedFd<'_>, group: Ipv4Addr, local: Ipv4Addr) -> io::Result<()> {
    let m = libc::ip_mreqn {
        imr_multiaddr: in_addr(group),
        imr_address: in_addr(local),
        imr_ifindex: 0,
    };
    setsockopt_struct(fd, libc::IPPROTO_IP, libc::IP_ADD_MEMBERSHIP, &m)
}

/// `IP_ADD_SOURCE_MEMBERSHIP`: `group` from `source` only, on the interface with address
/// `local`.
pub(crate) fn join_source_group(
    fd: BorrowedFd<'_>,
    group: Ipv4Addr,
    source: Ipv4Addr,
    local: Ipv4Addr,
) -> io::Result<()> {
    let m = libc::ip_mreq_source {
        imr_multiaddr: in_addr(group),
        imr_interface: in_addr(local),
        imr_sourceaddr: in_addr(source),
    };
    setsockopt_struct(fd, libc::IPPROTO_IP, libc::IP_ADD_SOURCE_MEMBERSHIP, &m)
}

/// `IP_MULTICAST_IF`: send multicast out of the interface with address `local`.
pub(crate) fn set_multicast_if(fd: BorrowedFd<'_>, local: Ipv4Addr) -> io::Result<()> {
    setsockopt_struct(fd, libc::IPPROTO_IP, libc::IP_MULTICAST_IF, &in_addr(local))
}

/// `setsockopt(fd, level, option)` for a `struct timeval` option (`SO_RCVTIMEO`).
pub(crate) fn setsockopt_timeval(
    fd: BorrowedFd<'_>,
    level: c_int,
    option: c_int,
    value: std::time::Duration,
) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: value.as_secs() as libc::time_t,
        tv_usec: value.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: `tv` lives across the call and its size is passed.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            option,
            (&tv as *const libc::timeval).cast::<c_void>(),
            size_of::<libc::timeval>() as socklen_t,
        )
    })
    .map(drop)
}

/// `getsockopt(fd, level, option)` for an integer option.
pub(crate) fn getsockopt_int(fd: BorrowedFd<'_>, level: c_int, option: c_int) -> io::Result<c_int> {
    let mut value: c_int = 0;
    let mut len = size_of::<c_int>() as socklen_t;
    // SAFETY: `value` and `len` are valid for writes; `len` holds the buffer size.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            option,
            (&mut value as *mut c_int).cast::<c_void>(),
            &mut len,
        )
    })?;
    Ok(value)
}

/// `SK_MEMINFO_VARS`: the length of the `SO_MEMINFO` array (Linux ≥ 4.20).
const SK_MEMINFO_VARS: usize = 9;

/// The socket's drop counter (`sk_drops`, the same counter `SO_RXQ_OVFL` reports), read with
/// `getsockopt(SO_MEMINFO)`.
pub(crate) fn meminfo_drops(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut info = [0u32; SK_MEMINFO_VARS];
    let mut len = size_of::<[u32; SK_MEMINFO_VARS]>() as socklen_t;
    // SAFETY: `info` and `len` are valid for writes; `len` holds the buffer size.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            info.as_mut_ptr().cast::<c_void>(),
            &mut len,
        )
    })?;
    let idx = libc::SK_MEMINFO_DROPS as usize;
    if (len as usize) < (idx + 1) * size_of::<u32>() {
        return Err(io::Error::from_raw_os_error(libc::ENOPROTOOPT));
    }
    Ok(info[idx])
}

/// `bind(fd, addr)`.
pub(crate) fn bind(fd: BorrowedFd<'_>, addr: &SocketAddrV4) -> io::Result<()> {
    let sa = to_sockaddr(addr);
    // SAFETY: `sa` is a valid `sockaddr_in` living across the call; its size is passed.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_in).cast::<libc::sockaddr>(),
            size_of::<libc::sockaddr_in>() as socklen_t,
        )
    })
    .map(drop)
}

/// `listen(fd, backlog)`.
pub(crate) fn listen(fd: BorrowedFd<'_>, backlog: c_int) -> io::Result<()> {
    // SAFETY: integer arguments only.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), backlog) }).map(drop)
}

/// `connect(fd, addr)` (on a non-blocking socket: `EINPROGRESS` while the handshake runs).
pub(crate) fn connect(fd: BorrowedFd<'_>, addr: &SocketAddrV4) -> io::Result<()> {
    let sa = to_sockaddr(addr);
    // SAFETY: `sa` is a valid `sockaddr_in` living across the call; its size is passed.
    cvt(unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_in).cast::<libc::sockaddr>(),
            size_of::<libc::sockaddr_in>() as socklen_t,
        )
    })
    .map(drop)
}

/// `accept4(fd, .., SOCK_NONBLOCK | SOCK_CLOEXEC)`: the new connection and its peer.
pub(crate) fn accept(fd: BorrowedFd<'_>) -> io::Result<(OwnedFd, SocketAddrV4)> {
    let mut sa = MaybeUninit::<libc::sockaddr_in>::zeroed();
    let mut len = size_of::<libc::sockaddr_in>() as socklen_t;
    // SAFETY: `sa` and `len` are valid for writes; `len` holds the buffer size.
    let new = cvt(unsafe {
        libc::accept4(
            fd.as_raw_fd(),
            sa.as_mut_ptr().cast::<libc::sockaddr>(),
            &mut len,
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    })?;
    // SAFETY: `new` is a descriptor the kernel just created for us; nobody else owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(new) };
    // SAFETY: zero-initialised, then (partly) written by the kernel: a valid `sockaddr_in`.
    let sa = unsafe { sa.assume_init() };
    Ok((owned, from_sockaddr(&sa)))
}

/// `getsockname` of an IPv4 socket.
pub(crate) fn local_addr(fd: BorrowedFd<'_>) -> io::Result<SocketAddrV4> {
    let mut sa = MaybeUninit::<libc::sockaddr_in>::zeroed();
    let mut len = size_of::<libc::sockaddr_in>() as socklen_t;
    // SAFETY: `sa` and `len` are valid for writes; `len` holds the buffer size.
    cvt(unsafe { libc::getsockname(fd.as_raw_fd(), sa.as_mut_ptr().cast(), &mut len) })?;
    // SAFETY: zero-initialised, then written by the kernel.
    Ok(from_sockaddr(&unsafe { sa.assume_init() }))
}

/// `ppoll(fds, timeout)`; `None` waits forever. Returns the number of ready entries; `EINTR`
/// is returned as an error for the caller to treat as "nothing ready".
pub(crate) fn ppoll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds` is a valid, exclusively borrowed array of `len` entries; `tsp` is null or
    // points to `ts`, alive across the call; a null signal mask keeps the current one.
    let n = cvt(unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    })?;
    Ok(n as usize)
}

/// `recvmmsg(fd, msgs, n, flags, NULL)`: the number of messages received.
///
/// # Safety
/// `msgs` points to `n` initialised `mmsghdr`s whose `msg_name`, `msg_iov` (with every
/// `iov_base` / `iov_len`) and `msg_control` point to memory valid for writes of the given
/// lengths for the duration of the call, and not otherwise accessed meanwhile.
pub(crate) unsafe fn recvmmsg(
    fd: BorrowedFd<'_>,
    msgs: *mut libc::mmsghdr,
    n: usize,
    flags: c_int,
) -> io::Result<usize> {
    // SAFETY: forwarded to the caller's contract.
    let r = unsafe {
        libc::recvmmsg(
            fd.as_raw_fd(),
            msgs,
            n as c_uint,
            flags,
            std::ptr::null_mut(),
        )
    };
    cvt(r).map(|r| r as usize)
}

/// `sendmmsg(fd, msgs, n, flags)`: the number of messages the kernel accepted.
///
/// # Safety
/// `msgs` points to `n` initialised `mmsghdr`s whose `msg_name`, `msg_iov` (with every
/// `iov_base` / `iov_len`) and `msg_control` point to memory valid for reads of the given
/// lengths for the duration of the call.
pub(crate) unsafe fn sendmmsg(
    fd: BorrowedFd<'_>,
    msgs: *mut libc::mmsghdr,
    n: usize,
    flags: c_int,
) -> io::Result<usize> {
    // SAFETY: forwarded to the caller's contract.
    let r = unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs, n as c_uint, flags) };
    cvt(r).map(|r| r as usize)
}

/// `recvmsg(fd, msg, flags)`: bytes received (0 = end of stream).
///
/// # Safety
/// `msg` is an initialised `msghdr` whose `msg_iov` (with every `iov_base` / `iov_len`),
/// `msg_name` and `msg_control` (when non-null) point to memory valid for writes of the given
/// lengths for the duration of the call.
pub(crate) unsafe fn recvmsg(
    fd: BorrowedFd<'_>,
    msg: *mut libc::msghdr,
    flags: c_int,
) -> io::Result<usize> {
    // SAFETY: forwarded to the caller's contract.
    cvt_size(unsafe { libc::recvmsg(fd.as_raw_fd(), msg, flags) })
}

/// `sendmsg(fd, msg, flags)`: bytes the kernel accepted.
///
/// # Safety
/// `msg` is an initialised `msghdr` whose `msg_iov` (with every `iov_base` / `iov_len`),
/// `msg_name` and `msg_control` (when non-null) point to memory valid for reads of the given
/// lengths for the duration of the call.
pub(crate) unsafe fn sendmsg(
    fd: BorrowedFd<'_>,
    msg: *const libc::msghdr,
    flags: c_int,
) -> io::Result<usize> {
    // SAFETY: forwarded to the caller's contract.
    cvt_size(unsafe { libc::sendmsg(fd.as_raw_fd(), msg, flags) })
}
