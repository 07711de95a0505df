//! Result layer of the hot-path calls: `recvmmsg`/`sendmmsg` over arrays of `mmsghdr`s kept
//! posted between calls (each with its pool buffer) and `recvmsg`/`sendmsg` over the TCP
//! records' iovecs, one thin function each, turning `-1` + `errno` into `io::Error`.
//!
//! Kept raw on purpose: nix's `recvmmsg`/`sendmmsg` rebuild their headers from iterators of
//! buffers and addresses on every call (`MultiHeaders` + per-message setup), work this
//! engine does once at set-up. Every other call (socket, bind, options, `ppoll`, ...) goes
//! through `rtdaq-netsys` and nix. These functions pass kernel-visible structures full of
//! raw pointers, so they are `unsafe fn` with a `# Safety` contract that the safe layer
//! ([`super::mmsg`], [`super::recv_ring`], [`super::iov`]) upholds.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, BorrowedFd};

use libc::{c_int, c_uint};
use rtdaq_netsys::cvt;

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
