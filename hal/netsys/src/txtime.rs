//! Launch times (`SO_TXTIME`) on any socket: arming a socket, sending a packet socket's TX
//! ring frames at a time, and reading back what the qdisc dropped.
//!
//! With `SO_TXTIME` set, a send's `SCM_TXTIME` control message is the time its packets leave
//! (on the socket's clock): the `etf` qdisc (or the NIC, with its offload) holds each until
//! then, `fq` paces on it. `etf` drops a packet whose time has passed when it arrives, or
//! that it could not hand over in time, and with `SOF_TXTIME_REPORT_ERRORS` queues a report
//! on the socket's error queue ([`ErrQueue::drain`]): a UDP socket gets it as `IP_RECVERR`,
//! a packet socket as `PACKET_TX_TIMESTAMP`; both carry a `sock_extended_err` of origin
//! `SO_EE_ORIGIN_TXTIME`.

use std::io;
use std::os::fd::BorrowedFd;

use crate::sys::CmsgBuf;

/// `SOF_TXTIME_REPORT_ERRORS` (`linux/net_tstamp.h`).
const REPORT_ERRORS: u32 = 1 << 1;
/// `SO_EE_ORIGIN_TXTIME`, `SO_EE_CODE_TXTIME_INVALID_PARAM`, `SO_EE_CODE_TXTIME_MISSED`
/// (`linux/errqueue.h`).
const ORIGIN_TXTIME: u8 = 6;
const CODE_INVALID: u8 = 1;
const CODE_MISSED: u8 = 2;
/// `PACKET_TX_TIMESTAMP` (`linux/if_packet.h`): a packet socket's error-queue reports.
const PACKET_TX_TIMESTAMP: i32 = 16;

/// Sets `SO_TXTIME` on `fd`: launch times on `clockid`, drops reported on the error queue.
/// Cold path.
///
/// # Errors
/// What `setsockopt` says (`ENOPROTOOPT` before Linux 4.19; `EPERM` for a clock other than
/// `CLOCK_MONOTONIC` without `CAP_NET_ADMIN`).
pub fn arm(fd: BorrowedFd<'_>, clockid: libc::clockid_t) -> io::Result<()> {
    let t = libc::sock_txtime {
        clockid,
        flags: REPORT_ERRORS,
    };
    crate::sockopt::set(fd, libc::SOL_SOCKET, libc::SO_TXTIME, &t)
}

/// Sends every frame of a packet socket's TX ring marked for sending, all at `at_ns` (on
/// the socket's `SO_TXTIME` clock), without waiting; returns the bytes sent. Never
/// allocates.
///
/// # Errors
/// What `sendmsg` says (`EAGAIN`/`ENOBUFS`: the send buffer is full, try again).
#[inline]
pub fn kick_at(fd: BorrowedFd<'_>, at_ns: u64) -> io::Result<usize> {
    crate::sys::sendmsg_txtime(fd, at_ns)
}

/// The bytes `fd` has handed to the kernel that it still holds (`SIOCOUTQ`: in a qdisc or
/// the device, counted as the kernel allocated them, headers and bookkeeping included): 0
/// once all of a timed sender's packets have left. Never allocates.
///
/// # Errors
/// What `ioctl` says (`ENOTTY` on a socket kind without it).
pub fn unsent_bytes(fd: BorrowedFd<'_>) -> io::Result<u32> {
    crate::sys::outq(fd)
}

/// Waits up to `wait` for the kernel to let go of every byte `fds` handed it (their
/// [`unsent_bytes`], read every millisecond); returns the bytes still unsent then (0: all
/// left). A timed sender asks once its last launch time has passed. Cold path: sleeps.
pub fn wait_unsent(fds: &[BorrowedFd<'_>], wait: std::time::Duration) -> u64 {
    let unsent = || -> u64 {
        fds.iter()
            .map(|&fd| u64::from(unsent_bytes(fd).unwrap_or(0)))
            .sum()
    };
    let end = std::time::Instant::now() + wait;
    let mut left = unsent();
    while left > 0 && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(1));
        left = unsent();
    }
    left
}

/// Packets the qdisc dropped, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    /// The launch time was already past, or earlier than one already queued, when the
    /// packet reached the qdisc (`SO_EE_CODE_TXTIME_INVALID_PARAM`).
    pub invalid: u64,
    /// The qdisc could not hand it to the device in time (`SO_EE_CODE_TXTIME_MISSED`).
    pub missed: u64,
}

/// Preallocated buffers to read a socket's error queue with. Never allocates after
/// [`new`](Self::new).
#[derive(Debug, Clone)]
pub struct ErrQueue {
    data: [u8; 64],
    control: CmsgBuf,
}

impl Default for ErrQueue {
    fn default() -> Self {
        ErrQueue {
            data: [0; 64],
            control: CmsgBuf([0; 256]),
        }
    }
}

impl ErrQueue {
    /// Buffers for one report at a time.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads every report waiting on `fd`'s error queue (none: one `EAGAIN`), adding the
    /// qdisc's drops to `out`. Never blocks, never allocates.
    pub fn drain(&mut self, fd: BorrowedFd<'_>, out: &mut Dropped) {
        while let Ok(len) = crate::sys::recv_errqueue(fd, &mut self.data, &mut self.control) {
            let bytes = &self.control.0[..];
            let mut at = 0;
            while let Some((level, kind, data, next)) = cmsg_at(bytes, len, at) {
                let ours = matches!(
                    (level, kind),
                    (libc::SOL_IP, libc::IP_RECVERR)
                        | (libc::SOL_IPV6, libc::IPV6_RECVERR)
                        | (libc::SOL_PACKET, PACKET_TX_TIMESTAMP)
                );
                // sock_extended_err: ee_errno u32, ee_origin u8, ee_type u8, ee_code u8, ...
                if ours && data.len() >= 16 && data[4] == ORIGIN_TXTIME {
                    match data[6] {
                        CODE_INVALID => out.invalid += 1,
                        CODE_MISSED => out.missed += 1,
                        _ => {}
                    }
                }
                at = next;
            }
        }
    }
}

/// The control message at byte `at` of `buf` (of which the kernel wrote `len` bytes):
/// `(level, type, data, offset of the next)`; `None` past the last.
fn cmsg_at(buf: &[u8], len: usize, at: usize) -> Option<(i32, i32, &[u8], usize)> {
    const W: usize = std::mem::size_of::<usize>();
    let align = |n: usize| (n + W - 1) & !(W - 1);
    let hdr = W + 8;
    let len = len.min(buf.len());
    if at + hdr > len {
        return None;
    }
    let clen = usize::from_ne_bytes(buf[at..at + W].try_into().ok()?);
    let level = i32::from_ne_bytes(buf[at + W..at + W + 4].try_into().ok()?);
    let kind = i32::from_ne_bytes(buf[at + W + 4..at + W + 8].try_into().ok()?);
    if clen < hdr || at + clen > len {
        return None;
    }
    let data = &buf[at + align(hdr)..at + clen];
    Some((level, kind, data, at + align(clen)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One control message as the kernel lays it out: header (`cmsg_len`, level, type),
    /// data, padding to the word size.
    fn cmsg(level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
        const W: usize = std::mem::size_of::<usize>();
        let hdr = W + 8;
        let mut v = (hdr + data.len()).to_ne_bytes().to_vec();
        v.extend_from_slice(&level.to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.resize(hdr.div_ceil(W) * W, 0);
        v.extend_from_slice(data);
        v.resize(v.len().div_ceil(W) * W, 0);
        v
    }

    /// A `sock_extended_err` of `origin` and `code`, followed by an address.
    fn ee(origin: u8, code: u8) -> Vec<u8> {
        let mut v = vec![0u8; 16 + 16];
        v[0..4].copy_from_slice(&(libc::ECANCELED as u32).to_ne_bytes());
        v[4] = origin;
        v[6] = code;
        v
    }

    #[test]
    fn control_messages_are_walked_in_order() {
        let mut buf = cmsg(libc::SOL_PACKET, PACKET_TX_TIMESTAMP, &ee(ORIGIN_TXTIME, 2));
        buf.extend(cmsg(libc::SOL_IP, libc::IP_RECVERR, &ee(ORIGIN_TXTIME, 1)));
        let (l, k, d, next) = cmsg_at(&buf, buf.len(), 0).unwrap();
        assert_eq!(
            (l, k, d.len(), d[4], d[6]),
            (libc::SOL_PACKET, 16, 32, 6, 2)
        );
        let (l, k, d, end) = cmsg_at(&buf, buf.len(), next).unwrap();
        assert_eq!((l, k, d[6]), (libc::SOL_IP, libc::IP_RECVERR, 1));
        assert_eq!(end, buf.len());
        assert!(cmsg_at(&buf, buf.len(), end).is_none());
        // A length the kernel did not write, or a header claiming more than there is.
        assert!(cmsg_at(&buf, 8, 0).is_none());
        let mut bad = buf.clone();
        bad[..std::mem::size_of::<usize>()].copy_from_slice(&4096usize.to_ne_bytes());
        assert!(cmsg_at(&bad, bad.len(), 0).is_none());
    }

    /// A fresh socket has no reports: one `EAGAIN`, nothing counted. Arming it takes the
    /// option (any kernel since 4.19).
    /// A UDP socket's datagrams to loopback leave at once: nothing stays unsent.
    #[test]
    fn sent_datagrams_leave_the_socket_accounting() {
        use std::os::fd::AsFd;
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(unsent_bytes(tx.as_fd()).unwrap(), 0);
        tx.send_to(&[7; 1000], rx.local_addr().unwrap()).unwrap();
        assert_eq!(
            unsent_bytes(tx.as_fd()).unwrap(),
            0,
            "loopback frees at once"
        );
        let wait = std::time::Duration::from_millis(50);
        assert_eq!(wait_unsent(&[tx.as_fd(), rx.as_fd()], wait), 0);
    }

    #[test]
    fn a_fresh_socket_reports_nothing() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        use std::os::fd::AsFd;
        arm(s.as_fd(), libc::CLOCK_MONOTONIC).unwrap();
        let mut d = Dropped::default();
        ErrQueue::new().drain(s.as_fd(), &mut d);
        assert_eq!(d, Dropped::default());
    }
}
