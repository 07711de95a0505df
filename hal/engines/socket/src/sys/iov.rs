//! Safe layer over vectored stream I/O (`recvmsg` / `sendmsg` with an `iovec` array): one call
//! reads into, or writes from, many pool slots. The array is preallocated; buffers are
//! borrowed for the one call that uses them.

use std::io;
use std::os::fd::AsFd;

use super::ffi;
use super::socket::Socket;

/// A preallocated `iovec` array for vectored stream I/O.
pub(crate) struct IoVecs {
    iovs: Box<[libc::iovec]>,
}

// SAFETY: the iovecs hold pointers only during one call, into buffers borrowed for that call.
unsafe impl Send for IoVecs {}

impl IoVecs {
    /// Room for `capacity` (≥ 1) buffers per call. Cold path.
    pub(crate) fn new(capacity: usize) -> IoVecs {
        IoVecs {
            iovs: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                };
                capacity.max(1)
            ]
            .into_boxed_slice(),
        }
    }

    /// Most buffers per call.
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.iovs.len()
    }

    /// Reads into the buffers `bufs` yields (at most `capacity()`), in order, without waiting
    /// (`MSG_DONTWAIT`). `Ok(0)` means the peer closed the stream. Never allocates.
    #[inline]
    pub(crate) fn recv<'b, I>(&mut self, sock: &Socket, bufs: I) -> io::Result<usize>
    where
        I: IntoIterator<Item = &'b mut [u8]>,
    {
        let mut n = 0;
        for (iov, buf) in self.iovs.iter_mut().zip(bufs) {
            *iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            n += 1;
        }
        let mut msg = zeroed_msghdr();
        msg.msg_iov = self.iovs.as_mut_ptr();
        msg.msg_iovlen = n as _;
        // SAFETY: the first `n` iovecs point to exclusive borrows that outlive the call ('b);
        // no name and no control buffer.
        unsafe { ffi::recvmsg(sock.as_fd(), &mut msg, libc::MSG_DONTWAIT) }
    }

    /// Writes the buffers `bufs` yields (at most `capacity()`), in order, without waiting
    /// (`MSG_DONTWAIT | MSG_NOSIGNAL`); returns the bytes the kernel accepted (possibly
    /// fewer than offered). Never allocates.
    #[inline]
    pub(crate) fn send<'b, I>(&mut self, sock: &Socket, bufs: I) -> io::Result<usize>
    where
        I: IntoIterator<Item = &'b [u8]>,
    {
        let mut n = 0;
        for (iov, buf) in self.iovs.iter_mut().zip(bufs) {
            *iov = libc::iovec {
                iov_base: buf.as_ptr().cast_mut().cast(),
                iov_len: buf.len(),
            };
            n += 1;
        }
        if n == 0 {
            return Ok(0);
        }
        let mut msg = zeroed_msghdr();
        msg.msg_iov = self.iovs.as_mut_ptr();
        msg.msg_iovlen = n as _;
        // SAFETY: the first `n` iovecs point to shared borrows that outlive the call ('b) and
        // are only read; no name and no control buffer.
        unsafe { ffi::sendmsg(sock.as_fd(), &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) }
    }
}

/// An all-zero `msghdr`.
fn zeroed_msghdr() -> libc::msghdr {
    // SAFETY: `msghdr` is a plain C struct of integers and raw pointers; all-zero is valid.
    unsafe { std::mem::MaybeUninit::<libc::msghdr>::zeroed().assume_init() }
}
