//! IPv4 sockets through `nix`: create (non-blocking, close-on-exec), bind, listen,
//! connect, accept, the local address, the blocking mode. Cold path, except `accept` on a
//! listening queue.

use std::io;
use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::sys::socket::{self as s, AddressFamily, SockFlag, SockType, SockaddrIn};

/// Which kind of IPv4 socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `SOCK_DGRAM` (UDP; also a handle for device ioctls).
    Datagram,
    /// `SOCK_STREAM` (TCP).
    Stream,
}

/// `socket(AF_INET, kind | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)`.
pub fn socket(kind: Kind) -> io::Result<OwnedFd> {
    let ty = match kind {
        Kind::Datagram => SockType::Datagram,
        Kind::Stream => SockType::Stream,
    };
    s::socket(
        AddressFamily::Inet,
        ty,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(io::Error::from)
}

/// `bind(fd, addr)`.
pub fn bind(fd: BorrowedFd<'_>, addr: SocketAddrV4) -> io::Result<()> {
    s::bind(fd.as_raw_fd(), &SockaddrIn::from(addr)).map_err(io::Error::from)
}

/// `listen(fd, backlog)` (clamped to the kernel's `somaxconn`).
pub fn listen(fd: BorrowedFd<'_>, backlog: i32) -> io::Result<()> {
    let b =
        s::Backlog::new(backlog.clamp(0, s::Backlog::MAXCONN.into())).map_err(io::Error::from)?;
    s::listen(&fd, b).map_err(io::Error::from)
}

/// `connect(fd, addr)`; on a non-blocking socket `EINPROGRESS` while the handshake runs.
pub fn connect(fd: BorrowedFd<'_>, addr: SocketAddrV4) -> io::Result<()> {
    s::connect(fd.as_raw_fd(), &SockaddrIn::from(addr)).map_err(io::Error::from)
}

/// `accept4(fd, SOCK_NONBLOCK | SOCK_CLOEXEC)`: the new connection and its peer.
pub fn accept(fd: BorrowedFd<'_>) -> io::Result<(OwnedFd, SocketAddrV4)> {
    let raw = s::accept4(
        fd.as_raw_fd(),
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
    )
    .map_err(io::Error::from)?;
    // nix returns the new descriptor raw: own it at once so that it closes on every path.
    let owned = crate::sys::own_fd(raw);
    let peer: SockaddrIn = s::getpeername(owned.as_raw_fd()).map_err(io::Error::from)?;
    Ok((owned, SocketAddrV4::from(peer)))
}

/// `getsockname` of an IPv4 socket.
pub fn local_addr(fd: BorrowedFd<'_>) -> io::Result<SocketAddrV4> {
    s::getsockname::<SockaddrIn>(fd.as_raw_fd())
        .map(SocketAddrV4::from)
        .map_err(io::Error::from)
}

/// Sets or clears `O_NONBLOCK`.
pub fn set_nonblocking(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL).map_err(io::Error::from)?);
    let want = if on {
        flags | OFlag::O_NONBLOCK
    } else {
        flags - OFlag::O_NONBLOCK
    };
    fcntl(fd, FcntlArg::F_SETFL(want))
        .map(drop)
        .map_err(io::Error::from)
}
