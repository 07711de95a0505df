//! `ppoll` over a preallocated `pollfd` array: the readiness wait of the sleeping RX queues
//! (hot path: no allocation, no log).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

pub use libc::pollfd;
pub use libc::{POLLERR, POLLHUP, POLLIN, POLLOUT};

use crate::sys;

/// `ppoll(fds, timeout)`; `None` waits forever. Returns the ready entries; `EINTR` comes
/// back as an error for the caller to treat as "nothing ready".
#[inline]
pub fn ppoll(fds: &mut [pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    sys::ppoll(fds, timeout)
}

/// Waits up to `timeout` for `events` on one descriptor; `true` when one is ready, `false`
/// on timeout or `EINTR`.
#[inline]
pub fn poll_one(fd: BorrowedFd<'_>, events: i16, timeout: Duration) -> io::Result<bool> {
    let mut p = [pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    }];
    match sys::ppoll(&mut p, Some(timeout)) {
        Ok(n) => Ok(n > 0),
        Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(false),
        Err(e) => Err(e),
    }
}
