//! Safe layer: an owned IPv4 socket, a preallocated `ppoll` set, and an atomic slot that hands
//! an accepted connection from the accepting thread to the queue that serves it.

use std::io;
use std::net::SocketAddrV4;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use nix::sys::socket::{setsockopt, sockopt as nix_opt, IpMembershipRequest};
use nix::sys::time::TimeVal;
use rtdaq_netsys::{inet, poll, sockopt};

/// An owned, non-blocking, close-on-exec IPv4 socket. Closed on drop.
#[derive(Debug)]
pub(crate) struct Socket {
    fd: OwnedFd,
}

impl Socket {
    /// A new UDP socket. Cold path.
    pub(crate) fn udp() -> io::Result<Socket> {
        inet::socket(inet::Kind::Datagram).map(|fd| Socket { fd })
    }

    /// A new TCP socket. Cold path.
    pub(crate) fn tcp() -> io::Result<Socket> {
        inet::socket(inet::Kind::Stream).map(|fd| Socket { fd })
    }

    /// Sets an integer option.
    pub(crate) fn set_int(&self, level: i32, option: i32, value: i32) -> io::Result<()> {
        sockopt::set_int(self.fd.as_fd(), level, option, value)
    }

    /// Joins multicast `group` on the interface with address `local` (`0.0.0.0`: by route),
    /// from any source (`sources` empty) or from each of `sources` (source-specific).
    pub(crate) fn join_multicast(
        &self,
        group: std::net::Ipv4Addr,
        local: std::net::Ipv4Addr,
        sources: &[std::net::Ipv4Addr],
    ) -> io::Result<()> {
        if sources.is_empty() {
            let m = IpMembershipRequest::new(group, Some(local));
            return setsockopt(&self.fd, nix_opt::IpAddMembership, &m).map_err(io::Error::from);
        }
        for &s in sources {
            // IP_ADD_SOURCE_MEMBERSHIP: nix has no wrapper for it.
            let m = libc::ip_mreq_source {
                imr_multiaddr: in_addr(group),
                imr_interface: in_addr(local),
                imr_sourceaddr: in_addr(s),
            };
            sockopt::set(
                self.fd.as_fd(),
                libc::IPPROTO_IP,
                libc::IP_ADD_SOURCE_MEMBERSHIP,
                &m,
            )?;
        }
        Ok(())
    }

    /// Sends multicast out of the interface with address `local` (`IP_MULTICAST_IF`).
    pub(crate) fn set_multicast_if(&self, local: std::net::Ipv4Addr) -> io::Result<()> {
        sockopt::set(
            self.fd.as_fd(),
            libc::IPPROTO_IP,
            libc::IP_MULTICAST_IF,
            &in_addr(local),
        )
    }

    /// Makes receives without `MSG_DONTWAIT` block for at most `timeout` (`SO_RCVTIMEO`,
    /// which the kernel rounds up to a jiffy) by clearing `O_NONBLOCK`. Sends and reads
    /// that pass `MSG_DONTWAIT` stay non-blocking.
    pub(crate) fn set_recv_timeout(&self, timeout: Duration) -> io::Result<()> {
        setsockopt(
            &self.fd,
            nix_opt::ReceiveTimeout,
            &TimeVal::from(timeout_tv(timeout)),
        )
        .map_err(io::Error::from)?;
        inet::set_nonblocking(self.fd.as_fd(), false)
    }

    /// Reads an integer option.
    pub(crate) fn get_int(&self, level: i32, option: i32) -> io::Result<i32> {
        sockopt::get_int(self.fd.as_fd(), level, option)
    }

    /// The kernel's drop counter for this socket (`SO_MEMINFO`); never allocates.
    #[inline]
    pub(crate) fn kernel_drops(&self) -> io::Result<u32> {
        sockopt::meminfo_drops(self.fd.as_fd())
    }

    /// `bind`.
    pub(crate) fn bind(&self, addr: &SocketAddrV4) -> io::Result<()> {
        inet::bind(self.fd.as_fd(), *addr)
    }

    /// `listen`.
    pub(crate) fn listen(&self, backlog: i32) -> io::Result<()> {
        inet::listen(self.fd.as_fd(), backlog)
    }

    /// Accepts one pending connection without waiting; `Ok(None)` when there is none.
    /// Never allocates.
    #[inline]
    pub(crate) fn accept(&self) -> io::Result<Option<(Socket, SocketAddrV4)>> {
        match inet::accept(self.fd.as_fd()) {
            Ok((fd, peer)) => Ok(Some((Socket { fd }, peer))),
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Connects, waiting at most `timeout` for the handshake. Cold path.
    pub(crate) fn connect_timeout(&self, addr: &SocketAddrV4, timeout: Duration) -> io::Result<()> {
        match inet::connect(self.fd.as_fd(), *addr) {
            Ok(()) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        let mut fds = [libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        }];
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match poll::ppoll(&mut fds, Some(left)) {
                Ok(0) => return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT)),
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(e),
            }
        }
        match self.get_int(libc::SOL_SOCKET, libc::SO_ERROR)? {
            0 => Ok(()),
            errno => Err(io::Error::from_raw_os_error(errno)),
        }
    }

    /// The local address.
    pub(crate) fn local_addr(&self) -> io::Result<SocketAddrV4> {
        inet::local_addr(self.fd.as_fd())
    }

    /// A second descriptor for the same socket (`F_DUPFD_CLOEXEC`). Never allocates.
    pub(crate) fn try_clone(&self) -> io::Result<Socket> {
        self.fd.try_clone().map(|fd| Socket { fd })
    }

    /// The raw descriptor (for `ppoll`).
    #[inline]
    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Socket {
    #[inline]
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A preallocated `ppoll` set. Entries are raw descriptor numbers: a stale entry can only make
/// `ppoll` report the wrong readiness, never touch memory.
#[derive(Debug)]
pub(crate) struct PollSet {
    fds: Vec<libc::pollfd>,
}

/// What to wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interest {
    /// Data to read, or a connection to accept.
    Read,
    /// Room to write.
    Write,
}

impl PollSet {
    /// Room for `capacity` descriptors. Cold path.
    pub(crate) fn with_capacity(capacity: usize) -> PollSet {
        PollSet {
            fds: Vec::with_capacity(capacity),
        }
    }

    /// Empties the set (keeps its memory).
    #[inline]
    pub(crate) fn clear(&mut self) {
        self.fds.clear();
    }

    /// Adds a socket; returns false (and adds nothing) when the set is full, so it never
    /// allocates.
    #[inline]
    pub(crate) fn push(&mut self, sock: &Socket, interest: Interest) -> bool {
        if self.fds.len() == self.fds.capacity() {
            return false;
        }
        self.fds.push(libc::pollfd {
            fd: sock.raw(),
            events: match interest {
                Interest::Read => libc::POLLIN,
                Interest::Write => libc::POLLOUT,
            },
            revents: 0,
        });
        true
    }

    /// Waits up to `timeout` for any entry to become ready (an empty set just sleeps);
    /// returns how many are. `EINTR` counts as none. Never allocates.
    #[inline]
    pub(crate) fn wait(&mut self, timeout: Duration) -> io::Result<usize> {
        match poll::ppoll(&mut self.fds, Some(timeout)) {
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(0),
            r => r,
        }
    }
}

/// One connection handed from the thread that accepted (or connected) it to the queue that
/// serves it: an atomic descriptor slot, `-1` when empty. Closes a descriptor nobody took.
#[derive(Debug)]
pub(crate) struct FdSlot(AtomicI32);

/// The empty slot.
const EMPTY: RawFd = -1;

impl FdSlot {
    /// An empty slot.
    pub(crate) const fn new() -> FdSlot {
        FdSlot(AtomicI32::new(EMPTY))
    }

    /// Stores a socket; gives it back when the slot is already full. Never allocates.
    #[inline]
    pub(crate) fn put(&self, sock: Socket) -> Result<(), Socket> {
        let fd = sock.fd.into_raw_fd();
        if self
            .0
            .compare_exchange(EMPTY, fd, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return Ok(());
        }
        // SAFETY: `fd` came from `into_raw_fd` above and was not published: we still own it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Err(Socket { fd })
    }

    /// Takes the socket, if any. Never allocates.
    #[inline]
    pub(crate) fn take(&self) -> Option<Socket> {
        let fd = self.0.swap(EMPTY, Ordering::AcqRel);
        if fd < 0 {
            return None;
        }
        // SAFETY: a non-empty value was stored by `put` from `into_raw_fd`, and the swap gives
        // it to exactly one taker, so ownership moves here once.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Some(Socket { fd })
    }
}

impl Drop for FdSlot {
    fn drop(&mut self) {
        drop(self.take());
    }
}

/// An `in_addr` (network byte order).
fn in_addr(ip: std::net::Ipv4Addr) -> libc::in_addr {
    libc::in_addr {
        s_addr: u32::from_ne_bytes(ip.octets()),
    }
}

/// `timeout` as a `timeval` (whole microseconds).
fn timeout_tv(timeout: Duration) -> libc::timeval {
    libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    }
}
