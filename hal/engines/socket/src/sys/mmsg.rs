//! Safe layer over `sendmmsg` (preallocated `mmsghdr`, `iovec` and control-message arrays,
//! sized at open so the hot path allocates nothing) and the parsing of what `recvmmsg`
//! reported (used by [`RecvRing`](super::recv_ring::RecvRing)).
//!
//! The send headers point into the batch's own boxed arrays (heap memory that does not move
//! when the batch moves). Data buffers are borrowed only while they are used: a
//! [`SendBuilder`] borrows the `&[u8]` it was given for its own lifetime.

use std::io;
use std::marker::PhantomData;
use std::mem::{size_of, MaybeUninit};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsFd;
use std::ptr;

use super::ffi;
use super::socket::Socket;

/// Control bytes per received message: room for `SCM_TIMESTAMPNS` (16 B) or
/// `SCM_TIMESTAMPING` (48 B), `UDP_GRO` (4 B) and `IP_PKTINFO` (12 B), each with its 16-byte
/// header, aligned (64 + 24 + 32 = 120), or `SO_RXQ_OVFL` (4 B) instead of the larger stamp.
/// (The UDP queue no longer enables `SO_RXQ_OVFL`, but the batch still parses it.)
pub(super) const RX_CONTROL: usize = 128;
/// Control bytes per sent message: one `UDP_SEGMENT` (`u16`) or one `SCM_TXTIME` (`u64`).
const TX_CONTROL: usize = 32;

/// A control-message buffer, aligned for `cmsghdr`.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub(super) struct Control<const B: usize>(pub(super) [u8; B]);

/// An all-zero `msghdr` (every field an integer or a nullable pointer, so zero is valid; this
/// also covers libc targets with private padding fields).
pub(super) fn zeroed_msghdr() -> libc::msghdr {
    // SAFETY: `msghdr` is a plain C struct of integers and raw pointers; all-zero is valid.
    unsafe { MaybeUninit::<libc::msghdr>::zeroed().assume_init() }
}

pub(super) const EMPTY_IOV: libc::iovec = libc::iovec {
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
    /// Kernel receive time (`SCM_TIMESTAMPNS`, or the software stamp of `SCM_TIMESTAMPING`;
    /// `CLOCK_REALTIME`) in ns; 0 when absent.
    pub(crate) timestamp_ns: u64,
    /// The NIC's receive time (`SCM_TIMESTAMPING`'s raw hardware stamp: the PTP hardware
    /// clock's time) in ns; 0 when absent.
    pub(crate) hw_timestamp_ns: u64,
    /// The socket's drop counter when this datagram was queued (`SO_RXQ_OVFL`).
    pub(crate) kernel_drops: Option<u32>,
    /// GRO segment size (`UDP_GRO`): the read holds `len / seg` datagrams of `seg` bytes
    /// (the last may be shorter).
    pub(crate) gro_segment: Option<u16>,
}

/// A `timespec` in ns (0 stays 0: no stamp).
fn ns_of(ts: &libc::timespec) -> u64 {
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// What the kernel reported in one received header (`name`: its address slot). Reads the
/// sender address only when `names` was asked for and walks the control messages only when
/// `control` was. Never allocates.
pub(super) fn parse_msg(
    h: &libc::mmsghdr,
    name: &libc::sockaddr_in,
    names: bool,
    control: bool,
) -> RecvMsg {
    let mut m = RecvMsg {
        len: h.msg_len as usize,
        truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
        src: if names {
            ffi::from_sockaddr(name)
        } else {
            SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)
        },
        dst: None,
        timestamp_ns: 0,
        hw_timestamp_ns: 0,
        kernel_drops: None,
        gro_segment: None,
    };
    if !control {
        return m;
    }
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
                    m.timestamp_ns = ns_of(&ts);
                }
                // Three stamps: software, (deprecated, zero), raw hardware.
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPING)
                    if avail >= 3 * size_of::<libc::timespec>() =>
                {
                    let ts = ptr::read_unaligned(data.cast::<[libc::timespec; 3]>());
                    m.timestamp_ns = ns_of(&ts[0]);
                    m.hw_timestamp_ns = ns_of(&ts[2]);
                }
                (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) if avail >= size_of::<u32>() => {
                    m.kernel_drops = Some(ptr::read_unaligned(data.cast::<u32>()));
                }
                (libc::SOL_UDP, libc::UDP_GRO) if avail >= size_of::<libc::c_int>() => {
                    let seg = ptr::read_unaligned(data.cast::<libc::c_int>());
                    m.gro_segment = u16::try_from(seg).ok().filter(|&s| s > 0);
                }
                (libc::IPPROTO_IP, libc::IP_PKTINFO) if avail >= size_of::<libc::in_pktinfo>() => {
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

// SAFETY: the raw pointers point into the batch's own boxed arrays and,
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

    /// Starts a new message of one datagram that leaves at `at_ns` (`SCM_TXTIME`, on the
    /// socket's `SO_TXTIME` clock). False when the batch has no room for another message.
    #[inline]
    pub(crate) fn begin_at(&mut self, at_ns: u64) -> bool {
        if !self.begin(None) {
            return false;
        }
        let i = self.msgs - 1;
        let h = &mut self.batch.hdrs[i].msg_hdr;
        h.msg_control = self.batch.control[i].0.as_mut_ptr().cast();
        h.msg_controllen = TX_CONTROL as _;
        let hdr: *const libc::msghdr = h;
        // SAFETY: `msg_control` points to this message's aligned TX_CONTROL-byte buffer,
        // which holds one cmsghdr plus a u64 (CMSG_SPACE(8) = 24 ≤ 32); we write inside it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(hdr);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_TXTIME;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<u64>() as u32) as _;
            ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u64>(), at_ns);
            h.msg_controllen = libc::CMSG_SPACE(size_of::<u64>() as u32) as _;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(sec: i64, nsec: i64) -> libc::timespec {
        // SAFETY: `timespec` is plain integers; all zero is valid.
        let mut t: libc::timespec = unsafe { MaybeUninit::zeroed().assume_init() };
        t.tv_sec = sec as libc::time_t;
        t.tv_nsec = nsec as _;
        t
    }

    /// `parse_msg` of a header whose control buffer holds one `SCM_TIMESTAMPING` message
    /// with `stamps` (software, deprecated, raw hardware), as the kernel writes it.
    fn parse_timestamping(stamps: [libc::timespec; 3]) -> RecvMsg {
        let mut ctl = Control::<RX_CONTROL>([0; RX_CONTROL]);
        // SAFETY: `mmsghdr` is plain integers and pointers; all zero is valid.
        let mut h: libc::mmsghdr = unsafe { MaybeUninit::zeroed().assume_init() };
        h.msg_hdr = zeroed_msghdr();
        h.msg_hdr.msg_control = ctl.0.as_mut_ptr().cast();
        h.msg_hdr.msg_controllen = RX_CONTROL as _;
        let len = size_of::<[libc::timespec; 3]>() as u32;
        // SAFETY: the control buffer is RX_CONTROL (128) aligned bytes, room for the header
        // and the 48-byte payload written here; CMSG_FIRSTHDR of a buffer that large is
        // non-null and inside it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&h.msg_hdr);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_TIMESTAMPING;
            (*c).cmsg_len = libc::CMSG_LEN(len) as _;
            ptr::write_unaligned(libc::CMSG_DATA(c).cast::<[libc::timespec; 3]>(), stamps);
            h.msg_hdr.msg_controllen = libc::CMSG_SPACE(len) as _;
        }
        // SAFETY: `sockaddr_in` is plain integers; all zero is valid.
        let name: libc::sockaddr_in = unsafe { MaybeUninit::zeroed().assume_init() };
        parse_msg(&h, &name, false, true)
    }

    #[test]
    fn scm_timestamping_gives_the_software_and_the_hardware_stamp() {
        let m = parse_timestamping([ts(1_700_000_000, 5), ts(0, 0), ts(1_700_000_037, 7)]);
        assert_eq!(m.timestamp_ns, 1_700_000_000_000_000_005);
        assert_eq!(m.hw_timestamp_ns, 1_700_000_037_000_000_007);
        // A datagram the NIC left unstamped: the software stamp only.
        let m = parse_timestamping([ts(1_700_000_000, 9), ts(0, 0), ts(0, 0)]);
        assert_eq!(
            (m.timestamp_ns, m.hw_timestamp_ns),
            (1_700_000_000_000_000_009, 0)
        );
    }
}
