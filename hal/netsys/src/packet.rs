//! `AF_PACKET` sockets: create one (nix) and bind it to a device (raw: nix builds no
//! `sockaddr_ll`).

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use nix::sys::socket::{self as s, AddressFamily, SockFlag, SockType};

/// `socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)`: a packet socket that
/// receives nothing until it is bound with a protocol.
pub fn socket() -> io::Result<OwnedFd> {
    s::socket(
        AddressFamily::Packet,
        SockType::Raw,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(io::Error::from)
}

/// `bind(fd, sockaddr_ll { ifindex, protocol })`; `protocol` in host order (`ETH_P_ALL`,
/// or 0 for a socket that only sends).
pub fn bind(fd: BorrowedFd<'_>, ifindex: i32, protocol: u16) -> io::Result<()> {
    crate::sys::bind_ll(fd, ifindex, protocol)
}
