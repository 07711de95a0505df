//! The queueing disciplines of a network device over rtnetlink (`tc qdisc show dev DEV`):
//! their kinds (`fq`, `etf`, `mq`, `noqueue`, ...). The egress stage's `pacing = "txtime"`
//! needs `fq` on the interface its datagrams leave by, which honours each datagram's
//! `SO_TXTIME` departure time; without it the kernel sends them at once, unpaced, and says
//! nothing, so the start checks here first.
//!
//! Written here rather than with a netlink crate, like [`ethtool_netlink`](crate::ethtool_netlink):
//! one dump request (`RTM_GETQDISC`) and a flat walk of its answers; `nix`'s safe socket
//! wrappers, no `unsafe`. Cold path.
//!
//! Layout (linux/rtnetlink.h, linux/pkt_sched.h): each answer is a 16-byte `nlmsghdr`, a
//! 20-byte `tcmsg` (family, pads, ifindex at 4, handle, parent, info), then attributes;
//! `TCA_KIND` (1) is the kind, NUL-terminated.

use std::io;
use std::os::fd::AsRawFd;

use nix::sys::socket::{
    bind, recv, send, socket, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol,
    SockType,
};

use crate::error::{PlatformError, Result};
use crate::ethtool_netlink::attrs;

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
const TCA_KIND: u16 = 1;
const TCMSG_LEN: usize = 20;

/// The `RTM_GETQDISC` dump request.
fn request() -> Vec<u8> {
    let len = 16 + TCMSG_LEN;
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&RTM_GETQDISC.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.resize(len, 0); // tcmsg: AF_UNSPEC, every device
    m
}

/// What one receive of the dump holds: `(ifindex, kind)` of each qdisc, and whether the
/// dump ended (`NLMSG_DONE`); the kernel's error as an error.
pub fn parse_dump(mut buf: &[u8]) -> io::Result<(Vec<(i32, String)>, bool)> {
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
        let msg = &buf[16..len];
        match ty {
            NLMSG_DONE => return Ok((out, true)),
            NLMSG_ERROR => {
                let code = msg
                    .get(..4)
                    .map_or(0, |c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]));
                if code != 0 {
                    return Err(io::Error::from_raw_os_error(-code));
                }
            }
            RTM_NEWQDISC if msg.len() >= TCMSG_LEN => {
                let ifindex = i32::from_ne_bytes([msg[4], msg[5], msg[6], msg[7]]);
                let kind = attrs(&msg[TCMSG_LEN..])
                    .into_iter()
                    .find(|(t, _)| *t == TCA_KIND)
                    .map(|(_, p)| {
                        let p = p.split(|&b| b == 0).next().unwrap_or_default();
                        String::from_utf8_lossy(p).into_owned()
                    });
                if let Some(k) = kind {
                    out.push((ifindex, k));
                }
            }
            _ => {}
        }
        buf = &buf[len.next_multiple_of(4).min(buf.len())..];
    }
    Ok((out, false))
}

/// The kinds of the qdiscs on `netdev` (the root one and any per-queue children, in the
/// kernel's order); empty for a device with none (`noqueue` is reported as a kind).
///
/// # Errors
/// [`PlatformError::NoSuchNetdev`] when there is no such device;
/// [`PlatformError::Qdisc`] when the dump fails.
pub fn kinds(netdev: &str) -> Result<Vec<String>> {
    let ifindex =
        nix::net::if_::if_nametoindex(netdev).map_err(|_| PlatformError::NoSuchNetdev {
            name: netdev.to_owned(),
        })? as i32;
    let err = |source: io::Error| PlatformError::Qdisc {
        netdev: netdev.to_owned(),
        source,
    };
    let all = dump().map_err(err)?;
    Ok(all
        .into_iter()
        .filter(|(i, _)| *i == ifindex)
        .map(|(_, k)| k)
        .collect())
}

/// Every qdisc of this network namespace: `(ifindex, kind)`.
fn dump() -> io::Result<Vec<(i32, String)>> {
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )?;
    bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0))?;
    send(fd.as_raw_fd(), &request(), MsgFlags::empty())?;
    let mut buf = vec![0u8; 64 << 10];
    let mut all = Vec::new();
    loop {
        let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty())?;
        let (mut some, done) = parse_dump(&buf[..n])?;
        all.append(&mut some);
        if done || n == 0 {
            return Ok(all);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qdisc_msg(ifindex: i32, kind: &[u8]) -> Vec<u8> {
        let alen = 4 + kind.len();
        let len = 16 + TCMSG_LEN + alen.next_multiple_of(4);
        let mut m = Vec::new();
        m.extend_from_slice(&(len as u32).to_ne_bytes());
        m.extend_from_slice(&RTM_NEWQDISC.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        let mut t = [0u8; TCMSG_LEN];
        t[4..8].copy_from_slice(&ifindex.to_ne_bytes());
        m.extend_from_slice(&t);
        m.extend_from_slice(&(alen as u16).to_ne_bytes());
        m.extend_from_slice(&TCA_KIND.to_ne_bytes());
        m.extend_from_slice(kind);
        m.resize(len, 0);
        m
    }

    #[test]
    fn dump_answers_parse() {
        let mut b = qdisc_msg(1, b"noqueue\0");
        b.extend(qdisc_msg(7, b"fq\0"));
        let (q, done) = parse_dump(&b).unwrap();
        assert_eq!(q, vec![(1, "noqueue".into()), (7, "fq".into())]);
        assert!(!done);
        let mut end = vec![0u8; 20];
        end[..4].copy_from_slice(&20u32.to_ne_bytes());
        end[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
        b.extend(end);
        assert!(parse_dump(&b).unwrap().1);
        let mut e = vec![0u8; 20];
        e[..4].copy_from_slice(&20u32.to_ne_bytes());
        e[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        e[16..20].copy_from_slice(&(-libc::EPERM).to_ne_bytes());
        assert_eq!(
            parse_dump(&e).unwrap_err().raw_os_error(),
            Some(libc::EPERM)
        );
        assert!(parse_dump(&b[..30]).is_err(), "cut short");
    }

    /// The running kernel answers for loopback (`noqueue` unless someone set another) and
    /// names a missing device.
    #[test]
    fn the_running_kernel_answers_for_loopback() {
        let k = kinds("lo").unwrap();
        assert!(!k.is_empty(), "loopback has a qdisc entry: {k:?}");
        assert!(matches!(
            kinds("rtdaq-no-such0"),
            Err(PlatformError::NoSuchNetdev { .. })
        ));
    }
}
