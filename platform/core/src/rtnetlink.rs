//! The rtnetlink exchange that [`qdisc`](crate::qdisc) and [`neigh`](crate::neigh) share:
//! a request (a 16-byte `nlmsghdr`, the family's fixed part, attributes), sent on a
//! `NETLINK_ROUTE` socket, and its answers split into `(type, body)` until `NLMSG_DONE` (a
//! dump) or the first answer; `NLMSG_ERROR` becomes the kernel's error. Written here rather
//! than with a netlink crate, like [`ethtool_netlink`](crate::ethtool_netlink): `nix`'s safe
//! socket wrappers, no `unsafe`. Cold path.

use std::io;
use std::os::fd::AsRawFd;

use nix::sys::socket::{
    bind, recv, send, socket, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol,
    SockType,
};

pub(crate) const NLMSG_ERROR: u16 = 2;
pub(crate) const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
/// `NLM_F_DUMP`: every object of the kind, not one.
pub(crate) const NLM_F_DUMP: u16 = 0x300;

/// Netlink messages: each one's type and body.
pub(crate) type Messages = Vec<(u16, Vec<u8>)>;

/// One request and its answers (a dump: until `NLMSG_DONE`), each message's type and body.
pub(crate) fn exchange(req: &[u8]) -> io::Result<Messages> {
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )?;
    bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0))?;
    send(fd.as_raw_fd(), req, MsgFlags::empty())?;
    let dump = u16::from_ne_bytes([req[6], req[7]]) & NLM_F_DUMP == NLM_F_DUMP;
    let mut buf = vec![0u8; 64 << 10];
    let mut out = Vec::new();
    loop {
        let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty())?;
        let (mut some, done) = split(&buf[..n])?;
        out.append(&mut some);
        if done || n == 0 || !dump {
            return Ok(out);
        }
    }
}

/// The messages of one receive: `(type, body)`, and whether the dump ended; the kernel's
/// error as an error.
pub(crate) fn split(mut buf: &[u8]) -> io::Result<(Messages, bool)> {
    let mut out = Vec::new();
    while buf.len() >= 16 {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let ty = u16::from_ne_bytes([buf[4], buf[5]]);
        if len < 16 || len > buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "malformed netlink message",
            ));
        }
        let body = &buf[16..len];
        match ty {
            NLMSG_DONE => return Ok((out, true)),
            NLMSG_ERROR => {
                let code = body
                    .get(..4)
                    .map_or(0, |c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]));
                if code != 0 {
                    return Err(io::Error::from_raw_os_error(-code));
                }
            }
            _ => out.push((ty, body.to_vec())),
        }
        buf = &buf[len.next_multiple_of(4).min(buf.len())..];
    }
    Ok((out, false))
}

/// A request: header, the family's fixed part, then attributes.
pub(crate) fn request(ty: u16, flags: u16, fixed: &[u8], attrs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut m = vec![0u8; 16];
    m[4..6].copy_from_slice(&ty.to_ne_bytes());
    m[6..8].copy_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
    m[8..12].copy_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(fixed);
    for (t, v) in attrs {
        m.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
        m.extend_from_slice(&t.to_ne_bytes());
        m.extend_from_slice(v);
        m.resize(m.len().next_multiple_of(4), 0);
    }
    let len = m.len() as u32;
    m[..4].copy_from_slice(&len.to_ne_bytes());
    m
}
