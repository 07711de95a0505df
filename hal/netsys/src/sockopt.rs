//! Socket options by number, for the options `nix` has no typed wrapper for (packet-socket
//! rings, `SO_MEMINFO`, `UDP_GRO`, XDP) and for the socket engine's `sockopts` table, whose
//! levels and options come from the config.

use std::io;
use std::os::fd::BorrowedFd;

use libc::c_int;

use crate::sys;

pub use crate::sys::setsockopt_unchecked as set_unchecked;
pub use crate::sys::PlainOption;

/// `setsockopt(fd, level, option, value)`.
#[inline]
pub fn set<T: PlainOption>(
    fd: BorrowedFd<'_>,
    level: c_int,
    option: c_int,
    value: &T,
) -> io::Result<()> {
    sys::setsockopt(fd, level, option, value)
}

/// `getsockopt(fd, level, option)`: the value and the bytes the kernel wrote. Never
/// allocates.
#[inline]
pub fn get<T: PlainOption>(
    fd: BorrowedFd<'_>,
    level: c_int,
    option: c_int,
) -> io::Result<(T, usize)> {
    sys::getsockopt(fd, level, option)
}

/// `setsockopt(fd, level, option, &value, sizeof(int))`.
#[inline]
pub fn set_int(fd: BorrowedFd<'_>, level: c_int, option: c_int, value: c_int) -> io::Result<()> {
    set(fd, level, option, &value)
}

/// `getsockopt(fd, level, option)` of an integer option.
#[inline]
pub fn get_int(fd: BorrowedFd<'_>, level: c_int, option: c_int) -> io::Result<c_int> {
    get::<c_int>(fd, level, option).map(|(v, _)| v)
}

/// `SO_TXTIME` with `CLOCK_MONOTONIC`: each datagram sent with an `SCM_TXTIME` control
/// message ([`DatagramBatch::timed`](crate::dgram::DatagramBatch::timed)) leaves at that
/// time where the interface's qdisc honours it (`fq`: the earliest departure time; a time
/// in the past leaves at once). Without such a qdisc the time is ignored: the caller checks
/// the qdisc. `EINVAL`/`ENOPROTOOPT` on kernels before 4.19.
pub fn set_txtime(fd: BorrowedFd<'_>) -> io::Result<()> {
    let t = libc::sock_txtime {
        clockid: libc::CLOCK_MONOTONIC,
        flags: 0,
    };
    set(fd, libc::SOL_SOCKET, libc::SO_TXTIME, &t)
}

/// `SO_ATTACH_FILTER`: a classic BPF program (at most 65535 instructions, else `EINVAL`).
pub fn attach_filter(fd: BorrowedFd<'_>, insns: &[libc::sock_filter]) -> io::Result<()> {
    sys::attach_filter(fd, insns)
}

/// `SK_MEMINFO_VARS`: the length of the `SO_MEMINFO` array (Linux ≥ 4.20).
const SK_MEMINFO_VARS: usize = 9;

/// The socket's drop counter (`sk_drops`, what `SO_RXQ_OVFL` reports), read with
/// `getsockopt(SO_MEMINFO)`; `ENOPROTOOPT` from a kernel whose array lacks it. Never
/// allocates (the socket engine reads it on its receive path).
#[inline]
pub fn meminfo_drops(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let (info, len) = get::<[u32; SK_MEMINFO_VARS]>(fd, libc::SOL_SOCKET, libc::SO_MEMINFO)?;
    let idx = libc::SK_MEMINFO_DROPS as usize;
    if len < (idx + 1) * size_of::<u32>() {
        return Err(io::Error::from_raw_os_error(libc::ENOPROTOOPT));
    }
    Ok(info[idx])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn int_options_round_trip_and_errors_carry_errno() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        set_int(s.as_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1).unwrap();
        assert_eq!(
            get_int(s.as_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR).unwrap(),
            1
        );
        let e = set_int(s.as_fd(), libc::SOL_SOCKET, 9999, 1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOPROTOOPT));
        assert_eq!(meminfo_drops(s.as_fd()).unwrap(), 0);
    }
}
