//! Safe layer over `recvmmsg` / `sendmmsg`: preallocated `mmsghdr`, `iovec`, address and
//! control-message arrays, sized at open so the hot path allocates nothing.
//!
//! The headers point into the batch's own boxed arrays (heap memory that does not move when
//! the batch moves). Data buffers are borrowed only for the call that uses them:
//! [`RecvBatch::recv`] consumes an iterator of `&mut [u8]`, and a [`SendBuilder`] borrows the
//! `&[u8]` it was given for its own lifetime.

use std::io;
use std::marker::PhantomData;
use std::mem::{size_of, MaybeUninit};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsFd;
use std::ptr;

use super::ffi;
use super::socket::Socket;

/// Control bytes per received message: room for `SCM_TIMESTAMPNS` (16 B), `SO_RXQ_OVFL`
/// (4 B), `UDP_GRO` (4 B) and `IP_PKTINFO` (12 B), each with its 16-byte header, aligned.
/// (The UDP queue no longer enables `SO_RXQ_OVFL`, but the batch still parses it.)
const RX_CONTROL: usize = 128;
/// Control bytes per sent message: one `UDP_SEGMENT` (`u16`).
const TX_CONTROL: usize = 32;

/// A control-message buffer, aligned for `cmsghdr`.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Control<const B: usize>([u8; B]);

/// An all-zero `msghdr` (every field an integer or a nullable pointer, so zero is valid; this
/// also covers libc targets with private padding fields).
fn zeroed_msghdr() -> libc::msghdr {
    // SAFETY: `msghdr` is a plain C struct of integers and raw pointers; all-zero is valid.
    unsafe { MaybeUninit::<libc::msghdr>::zeroed().assume_init() }
}

const EMPTY_IOV: libc::iovec = libc::iovec {
    iov_base: ptr::null_mut(),
    iov_len: 0,
};

/// What the kernel reported about one received datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecvMsg {
    /// Full datagram length (with `MSG_TRUNC` in the call's flags, even when the buffer was
    /// shorter); with GRO, the length of the whole coalesced read.
    pub(crate) len: usize,
    /// The buffer was shorter than the datagram (`MSG_TRUNC` in `msg_flags`).
    pub(crate) truncated: bool,
    /// Sender.
    pub(crate) src: SocketAddrV4,
    /// Destination address (`IP_PKTINFO`), when enabled.
    pub(crate) dst: Option<Ipv4Addr>,
    /// Kernel receive time (`SCM_TIMESTAMPNS`, `CLOCK_REALTIME`) in ns; 0 when absent.
    pub(crate) timestamp_ns: u64,
    /// The socket's drop counter when this datagram was queued (`SO_RXQ_OVFL`).
    pub(crate) kernel_drops: Option<u32>,
    /// GRO segment size (`UDP_GRO`): the read holds `len / seg` datagrams of `seg` bytes
    /// (the last may be shorter).
    pub(crate) gro_segment: Option<u16>,
}

/// Preallocated `recvmmsg` arrays for up to `capacity` datagrams.
pub(crate) struct RecvBatch {
    hdrs: Box<[libc::mmsghdr]>,
    iovs: Box<[libc::iovec]>,
    names: Box<[libc::sockaddr_in]>,
    control: Box<[Control<RX_CONTROL>]>,
    /// Ask the kernel for each sender's address (`msg_name`).
    want_names: bool,
    /// Ask the kernel for control messages (`msg_control`).
    want_control: bool,
}

// SAFETY: the raw pointers inside point only into the batch's own boxed arrays (which move
// with it and are never shared) and, during one call, into buffers borrowed for that call.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// Arrays for `capacity` (≥ 1) datagrams. Without `names` the kernel copies no sender
    /// address ([`RecvMsg::src`] reads 0.0.0.0:0); without `control` it builds no control
    /// messages (no timestamps, GRO sizes or destination addresses). Each saves kernel work
    /// per datagram. Cold path (allocates).
    pub(crate) fn with_parts(capacity: usize, names: bool, control: bool) -> RecvBatch {
        let capacity = capacity.max(1);
        let unspecified = ffi::to_sockaddr(&SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        RecvBatch {
            hdrs: (0..capacity)
                .map(|_| libc::mmsghdr {
                    msg_hdr: zeroed_msghdr(),
                    msg_len: 0,
                })
                .collect(),
            iovs: vec![EMPTY_IOV; capacity].into_boxed_slice(),
            names: vec![unspecified; capacity].into_boxed_slice(),
            control: vec![Control([0; RX_CONTROL]); capacity].into_boxed_slice(),
            want_names: names,
            want_control: control,
        }
    }

    /// Most datagrams one call takes.
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Points the first `n` headers at their own name, iovec and control slots (fresh
    /// pointers, taken after the iovecs were written) and resets their in/out fields.
    #[inline]
    fn reset(&mut self, n: usize) {
        let iov = self.iovs.as_mut_ptr();
        let name = self.names.as_mut_ptr();
        let control = self.control.as_mut_ptr();
        let (names, control_len) = (self.want_names, self.want_control);
        for (i, h) in self.hdrs[..n].iter_mut().enumerate() {
            h.msg_hdr.msg_iov = iov.wrapping_add(i);
            h.msg_hdr.msg_iovlen = 1;
            h.msg_len = 0;
            h.msg_hdr.msg_flags = 0;
            if names {
                h.msg_hdr.msg_name = name.wrapping_add(i).cast();
                h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as _;
            } else {
                h.msg_hdr.msg_name = ptr::null_mut();
                h.msg_hdr.msg_namelen = 0;
            }
            if control_len {
                h.msg_hdr.msg_control = control.wrapping_add(i).cast();
                h.msg_hdr.msg_controllen = RX_CONTROL as _;
            } else {
                h.msg_hdr.msg_control = ptr::null_mut();
                h.msg_hdr.msg_controllen = 0;
            }
        }
    }

    /// Receives up to `capacity()` datagrams, datagram `i` into the `i`-th buffer `bufs`
    /// yields; returns how many arrived. `flags` are `recvmmsg` flags (`MSG_DONTWAIT`,
    /// `MSG_TRUNC`, ...). Never allocates.
    #[inline]
    pub(crate) fn recv<'b, I>(&mut self, sock: &Socket, bufs: I, flags: i32) -> io::Result<usize>
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
        if n == 0 {
            return Ok(0);
        }
        self.reset(n);
        // SAFETY: headers 0..n point to their own name, iovec and control arrays (valid for
        // writes of the lengths set by `new`/`reset`); iovec i points to the i-th buffer, an
        // exclusive borrow that outlives this call ('b). Nothing else touches them meanwhile.
        unsafe { ffi::recvmmsg(sock.as_fd(), self.hdrs.as_mut_ptr(), n, flags) }
    }

    /// Receives up to `n` datagrams into one discard buffer (every iovec points to
    /// `scratch`): drains the socket when no pool buffer is free. Never allocates.
    #[inline]
    pub(crate) fn recv_discard(
        &mut self,
        sock: &Socket,
        scratch: &mut [u8],
        n: usize,
        flags: i32,
    ) -> io::Result<usize> {
        let n = n.min(self.capacity());
        if n == 0 {
            return Ok(0);
        }
        let base = scratch.as_mut_ptr();
        for iov in &mut self.iovs[..n] {
            *iov = libc::iovec {
                iov_base: base.cast(),
                iov_len: scratch.len(),
            };
        }
        self.reset(n);
        // SAFETY: as in `recv`; the iovecs alias `scratch`, which the kernel writes one
        // datagram after the other during the call and nobody reads meanwhile.
        unsafe { ffi::recvmmsg(sock.as_fd(), self.hdrs.as_mut_ptr(), n, flags) }
    }

    /// What the kernel reported for datagram `i` of the last call (`i` below its return
    /// value). Never allocates.
    pub(crate) fn msg(&self, i: usize) -> RecvMsg {
        let h = &self.hdrs[i];
        let mut m = RecvMsg {
            len: h.msg_len as usize,
            truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
            src: ffi::from_sockaddr(&self.names[i]),
            dst: None,
            timestamp_ns: 0,
            kernel_drops: None,
            gro_segment: None,
        };
        let hdr: *const libc::msghdr = &h.msg_hdr;
        // SAFETY: `hdr` is a header the kernel filled: `msg_control` points to this message's
        // control buffer and `msg_controllen` (≤ RX_CONTROL) is what the kernel wrote, so the
        // CMSG_* walk stays inside it. Payloads are read unaligned with their own size after
        // checking `cmsg_len`.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(hdr);
            while !c.is_null() {
                let level = (*c).cmsg_level;
                let kind = (*c).cmsg_type;
                let data = libc::CMSG_DATA(c);
                let avail = ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
                match (level, kind) {
                    (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS)
                        if avail >= size_of::<libc::timespec>() =>
                    {
                        let ts = ptr::read_unaligned(data.cast::<libc::timespec>());
                        m.timestamp_ns = (ts.tv_sec as u64)
                            .wrapping_mul(1_000_000_000)
                            .wrapping_add(ts.tv_nsec as u64);
                    }
                    (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) if avail >= size_of::<u32>() => {
                        m.kernel_drops = Some(ptr::read_unaligned(data.cast::<u32>()));
                    }
                    (libc::SOL_UDP, libc::UDP_GRO) if avail >= size_of::<libc::c_int>() => {
                        let seg = ptr::read_unaligned(data.cast::<libc::c_int>());
                        m.gro_segment = u16::try_from(seg).ok().filter(|&s| s > 0);
                    }
                    (libc::IPPROTO_IP, libc::IP_PKTINFO)
                        if avail >= size_of::<libc::in_pktinfo>() =>
                    {
                        let pi = ptr::read_unaligned(data.cast::<libc::in_pktinfo>());
                        m.dst = Some(Ipv4Addr::from(pi.ipi_addr.s_addr.to_ne_bytes()));
                    }
                    _ => {}
                }
                c = libc::CMSG_NXTHDR(hdr, c);
            }
        }
        m
    }
}

/// Preallocated `sendmmsg` arrays: up to `max_msgs` messages gathering up to `max_iovs`
/// buffers in all, each optionally with a `UDP_SEGMENT` (GSO) control message.
pub(crate) struct SendBatch {
    hdrs: Box<[libc::mmsghdr]>,
    /// Index of each message's first iovec.
    starts: Box<[usize]>,
    iovs: Box<[libc::iovec]>,
    control: Box<[Control<TX_CONTROL>]>,
    dest: Box<libc::sockaddr_in>,
    has_dest: bool,
}

// SAFETY: as for `RecvBatch`: the raw pointers point into the batch's own boxed arrays and,
// while a `SendBuilder` lives, into data it borrows.
unsafe impl Send for SendBatch {}

impl SendBatch {
    /// Arrays for `max_msgs` messages and `max_iovs` buffers (both ≥ 1). Cold path.
    pub(crate) fn new(max_msgs: usize, max_iovs: usize) -> SendBatch {
        let max_msgs = max_msgs.max(1);
        SendBatch {
            hdrs: (0..max_msgs)
                .map(|_| libc::mmsghdr {
                    msg_hdr: zeroed_msghdr(),
                    msg_len: 0,
                })
                .collect(),
            starts: vec![0; max_msgs].into_boxed_slice(),
            iovs: vec![EMPTY_IOV; max_iovs.max(1)].into_boxed_slice(),
            control: vec![Control([0; TX_CONTROL]); max_msgs].into_boxed_slice(),
            dest: Box::new(ffi::to_sockaddr(&SocketAddrV4::new(
                Ipv4Addr::UNSPECIFIED,
                0,
            ))),
            has_dest: false,
        }
    }

    /// Sets (or clears, for connected sockets) the destination of every message.
    pub(crate) fn set_dest(&mut self, dest: Option<SocketAddrV4>) {
        if let Some(d) = dest {
            *self.dest = ffi::to_sockaddr(&d);
        }
        self.has_dest = dest.is_some();
    }

    /// Starts filling the batch; every buffer pushed must outlive the builder (`'b`).
    #[inline]
    pub(crate) fn builder<'b>(&mut self) -> SendBuilder<'_, 'b> {
        SendBuilder {
            batch: self,
            msgs: 0,
            iovs: 0,
            _data: PhantomData,
        }
    }
}

/// Fills a [`SendBatch`] with messages, then sends them. Never allocates.
pub(crate) struct SendBuilder<'s, 'b> {
    batch: &'s mut SendBatch,
    msgs: usize,
    iovs: usize,
    _data: PhantomData<&'b [u8]>,
}

impl<'b> SendBuilder<'_, 'b> {
    /// Starts a new message; with `segment`, the kernel cuts its payload into datagrams of
    /// that size (`UDP_SEGMENT`). False when the batch has no room for another message.
    #[inline]
    pub(crate) fn begin(&mut self, segment: Option<u16>) -> bool {
        if self.msgs == self.batch.hdrs.len() || self.iovs == self.batch.iovs.len() {
            return false;
        }
        let i = self.msgs;
        let mut h = zeroed_msghdr();
        if let Some(seg) = segment {
            let buf = &mut self.batch.control[i].0;
            h.msg_control = buf.as_mut_ptr().cast();
            h.msg_controllen = TX_CONTROL as _;
            let hdr: *const libc::msghdr = &h;
            // SAFETY: `msg_control` points to this message's aligned TX_CONTROL-byte buffer,
            // which holds one cmsghdr plus a u16 (CMSG_SPACE(2) = 24 ≤ 32); we write inside it.
            unsafe {
                let c = libc::CMSG_FIRSTHDR(hdr);
                (*c).cmsg_level = libc::SOL_UDP;
                (*c).cmsg_type = libc::UDP_SEGMENT;
                (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
                ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg);
                h.msg_controllen = libc::CMSG_SPACE(size_of::<u16>() as u32) as _;
            }
        }
        self.batch.starts[i] = self.iovs;
        self.batch.hdrs[i] = libc::mmsghdr {
            msg_hdr: h,
            msg_len: 0,
        };
        self.msgs += 1;
        true
    }

    /// Appends a buffer to the current message. False when there is no room (or no message
    /// was begun).
    #[inline]
    pub(crate) fn push(&mut self, data: &'b [u8]) -> bool {
        if self.msgs == 0 || self.iovs == self.batch.iovs.len() {
            return false;
        }
        self.batch.iovs[self.iovs] = libc::iovec {
            iov_base: data.as_ptr().cast_mut().cast(),
            iov_len: data.len(),
        };
        self.iovs += 1;
        self.batch.hdrs[self.msgs - 1].msg_hdr.msg_iovlen += 1;
        true
    }

    /// Messages begun so far.
    #[inline]
    pub(crate) fn messages(&self) -> usize {
        self.msgs
    }

    /// Buffers (datagrams) in message `msg`.
    #[inline]
    #[allow(clippy::unnecessary_cast)] // `msg_iovlen` is a `c_int` on musl
    pub(crate) fn buffers(&self, msg: usize) -> usize {
        self.batch.hdrs[msg].msg_hdr.msg_iovlen as usize
    }

    /// Sends messages `first..` with one `sendmmsg`; returns how many the kernel accepted.
    /// Never allocates.
    #[inline]
    pub(crate) fn send(&mut self, sock: &Socket, first: usize, flags: i32) -> io::Result<usize> {
        if first >= self.msgs {
            return Ok(0);
        }
        // Fresh pointers, taken after every iovec and control buffer was written.
        let iov = self.batch.iovs.as_mut_ptr();
        let control = self.batch.control.as_mut_ptr();
        let dest: *mut libc::sockaddr_in = &mut *self.batch.dest;
        for i in first..self.msgs {
            let h = &mut self.batch.hdrs[i].msg_hdr;
            h.msg_iov = iov.wrapping_add(self.batch.starts[i]);
            if h.msg_controllen != 0 {
                h.msg_control = control.wrapping_add(i).cast();
            }
            if self.batch.has_dest {
                h.msg_name = dest.cast();
                h.msg_namelen = size_of::<libc::sockaddr_in>() as _;
            }
        }
        // SAFETY: headers first..msgs were written by `begin` in this builder: their iovecs
        // point to data borrowed for 'b (alive while the builder lives), their name to
        // `dest` and their control to this batch's buffers, all valid for reads.
        unsafe {
            ffi::sendmmsg(
                sock.as_fd(),
                self.batch.hdrs[first..].as_mut_ptr(),
                self.msgs - first,
                flags | libc::MSG_NOSIGNAL,
            )
        }
    }
}
