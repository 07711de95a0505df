//! The standard pause-frame statistics of a network device over ethtool's generic netlink
//! family (`ethtool -I -a DEV`): IEEE 802.3 `aPAUSEMACCtrlFramesTransmitted` / `Received`,
//! which drivers report there under one name whatever they call them in `ethtool -S`
//! (mlx5, bnxt, ice, ... implement `get_pause_stats`).
//!
//! Written here rather than with a netlink crate: two small messages (resolve the family
//! `ethtool`, then `ETHTOOL_MSG_PAUSE_GET` with `ETHTOOL_FLAG_STATS`) and a flat attribute
//! walk; the sockets are `nix`'s safe wrappers, so this module has no `unsafe`. Cold path.
//!
//! Message layout (linux/netlink.h, linux/genetlink.h, linux/ethtool_netlink.h): a 16-byte
//! `nlmsghdr`, a 4-byte `genlmsghdr`, then attributes `{ u16 len; u16 type; payload }`, each
//! padded to 4 bytes.

use std::io;

use nix::sys::socket::{
    bind, recv, send, socket, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol,
    SockType,
};

use crate::error::{PlatformError, Result};

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NLA_F_NESTED: u16 = 1 << 15;
const NLA_TYPE_MASK: u16 = !(NLA_F_NESTED | (1 << 14));
const ETHTOOL_GENL_VERSION: u8 = 1;
const ETHTOOL_MSG_PAUSE_GET: u8 = 21;
const ETHTOOL_A_HEADER_DEV_NAME: u16 = 2;
const ETHTOOL_A_HEADER_FLAGS: u16 = 3;
const ETHTOOL_FLAG_STATS: u32 = 1 << 2;
const ETHTOOL_A_PAUSE_HEADER: u16 = 1;
const ETHTOOL_A_PAUSE_STATS: u16 = 5;
const ETHTOOL_A_PAUSE_STAT_TX_FRAMES: u16 = 2;
const ETHTOOL_A_PAUSE_STAT_RX_FRAMES: u16 = 3;

/// The standard pause-frame counters of a device (`None`: the driver does not count it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PauseStats {
    /// Pause frames the device sent (it throttled its link partner).
    pub tx_frames: Option<u64>,
    /// Pause frames the device received (its link partner throttled it).
    pub rx_frames: Option<u64>,
}

/// Appends attribute `ty` with `payload` (padded to 4 bytes).
fn attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(buf.len().next_multiple_of(4), 0);
}

/// A generic netlink request: header, `cmd`/`version`, then `attrs` (already encoded).
fn request(family: u16, cmd: u8, version: u8, seq: u32, attrs: &[u8]) -> Vec<u8> {
    let len = 16 + 4 + attrs.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&family.to_ne_bytes());
    m.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&[cmd, version, 0, 0]);
    m.extend_from_slice(attrs);
    m
}

/// The attributes in `buf`: `(type without flags, payload)`; stops at a malformed one.
pub(crate) fn attrs(mut buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while buf.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([buf[0], buf[1]]));
        let ty = u16::from_ne_bytes([buf[2], buf[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > buf.len() {
            break;
        }
        out.push((ty, &buf[4..len]));
        buf = &buf[len.next_multiple_of(4).min(buf.len())..];
    }
    out
}

/// The answer to a request: the attributes of its first message, or the kernel's error.
fn answer(reply: &[u8]) -> io::Result<&[u8]> {
    if reply.len() < 16 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "short netlink reply",
        ));
    }
    let len =
        (u32::from_ne_bytes([reply[0], reply[1], reply[2], reply[3]]) as usize).min(reply.len());
    let ty = u16::from_ne_bytes([reply[4], reply[5]]);
    match ty {
        NLMSG_ERROR if len >= 20 => {
            let code = i32::from_ne_bytes([reply[16], reply[17], reply[18], reply[19]]);
            Err(io::Error::from_raw_os_error(-code))
        }
        NLMSG_ERROR | NLMSG_DONE => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "netlink reply without data",
        )),
        _ if len >= 20 => Ok(&reply[20..len]),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "short netlink reply",
        )),
    }
}

/// Parses a `ETHTOOL_MSG_PAUSE_GET` reply's attributes (after the genetlink header).
pub fn parse_pause_reply(attrs_buf: &[u8]) -> PauseStats {
    let u64_of = |p: &[u8]| {
        p.get(..8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])))
    };
    let mut s = PauseStats::default();
    for (ty, p) in attrs(attrs_buf) {
        if ty == ETHTOOL_A_PAUSE_STATS {
            for (sty, sp) in attrs(p) {
                match sty {
                    ETHTOOL_A_PAUSE_STAT_TX_FRAMES => s.tx_frames = u64_of(sp),
                    ETHTOOL_A_PAUSE_STAT_RX_FRAMES => s.rx_frames = u64_of(sp),
                    _ => {}
                }
            }
        }
    }
    s
}

/// One request/answer exchange on a fresh generic netlink socket.
fn exchange(msg: &[u8]) -> io::Result<Vec<u8>> {
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkGeneric,
    )?;
    bind(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &NetlinkAddr::new(0, 0),
    )?;
    send(std::os::fd::AsRawFd::as_raw_fd(&fd), msg, MsgFlags::empty())?;
    let mut buf = vec![0u8; 16 << 10];
    let n = recv(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &mut buf,
        MsgFlags::empty(),
    )?;
    buf.truncate(n);
    Ok(buf)
}

/// The id of the generic netlink family `ethtool` (kernels from 5.6).
fn ethtool_family() -> io::Result<u16> {
    let mut a = Vec::new();
    attr(&mut a, CTRL_ATTR_FAMILY_NAME, b"ethtool\0");
    let reply = exchange(&request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, 1, &a))?;
    attrs(answer(&reply)?)
        .into_iter()
        .find(|(t, p)| *t == CTRL_ATTR_FAMILY_ID && p.len() >= 2)
        .map(|(_, p)| u16::from_ne_bytes([p[0], p[1]]))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no family id"))
}

/// The standard pause statistics of `netdev`; `None` when the kernel or driver has none
/// (no ethtool netlink family, `EOPNOTSUPP`: veth, loopback).
///
/// # Errors
/// [`PlatformError::Ethtool`] for other failures (`ENODEV`: no such device).
pub fn pause_stats(netdev: &str) -> Result<Option<PauseStats>> {
    let err = |source| PlatformError::Ethtool {
        netdev: netdev.to_owned(),
        what: "pause statistics (netlink)",
        source,
    };
    let family = match ethtool_family() {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(err(e)),
    };
    let mut header = Vec::new();
    let mut name = netdev.as_bytes().to_vec();
    name.push(0);
    attr(&mut header, ETHTOOL_A_HEADER_DEV_NAME, &name);
    attr(
        &mut header,
        ETHTOOL_A_HEADER_FLAGS,
        &ETHTOOL_FLAG_STATS.to_ne_bytes(),
    );
    let mut a = Vec::new();
    attr(&mut a, ETHTOOL_A_PAUSE_HEADER | NLA_F_NESTED, &header);
    let reply = exchange(&request(
        family,
        ETHTOOL_MSG_PAUSE_GET,
        ETHTOOL_GENL_VERSION,
        2,
        &a,
    ))
    .map_err(err)?;
    match answer(&reply) {
        Ok(body) => {
            let s = parse_pause_reply(body);
            Ok((s.tx_frames.is_some() || s.rx_frames.is_some()).then_some(s))
        }
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(None),
        Err(e) => Err(err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PAUSE_GET reply's attributes as a driver with pause statistics gives them: the
    /// header nest, autoneg/rx/tx, and the stats nest (pad, tx 7, rx 123456789).
    fn reply() -> Vec<u8> {
        let mut header = Vec::new();
        attr(&mut header, 1, &7u32.to_ne_bytes()); // ETHTOOL_A_HEADER_DEV_INDEX
        attr(&mut header, ETHTOOL_A_HEADER_DEV_NAME, b"eth9\0");
        let mut stats = Vec::new();
        attr(&mut stats, 1, &[]); // ETHTOOL_A_PAUSE_STAT_PAD
        attr(
            &mut stats,
            ETHTOOL_A_PAUSE_STAT_TX_FRAMES,
            &7u64.to_ne_bytes(),
        );
        attr(
            &mut stats,
            ETHTOOL_A_PAUSE_STAT_RX_FRAMES,
            &123_456_789u64.to_ne_bytes(),
        );
        let mut a = Vec::new();
        attr(&mut a, ETHTOOL_A_PAUSE_HEADER | NLA_F_NESTED, &header);
        attr(&mut a, 2, &[1]); // autoneg
        attr(&mut a, 3, &[1]); // rx
        attr(&mut a, 4, &[0]); // tx
        attr(&mut a, ETHTOOL_A_PAUSE_STATS | NLA_F_NESTED, &stats);
        a
    }

    #[test]
    fn reply_attributes_parse() {
        assert_eq!(
            parse_pause_reply(&reply()),
            PauseStats {
                tx_frames: Some(7),
                rx_frames: Some(123_456_789)
            }
        );
        // A driver that counts neither: no stats nest.
        assert_eq!(parse_pause_reply(&reply()[..24]), PauseStats::default());
        // Truncated garbage does not panic.
        let r = reply();
        for n in 0..r.len() {
            let _ = parse_pause_reply(&r[..n]);
        }
    }

    #[test]
    fn kernel_errors_and_messages() {
        // NLMSG_ERROR with -EOPNOTSUPP.
        let mut m = request(NLMSG_ERROR, 0, 0, 1, &[]);
        m.truncate(16);
        m.extend_from_slice(&(-libc::EOPNOTSUPP).to_ne_bytes());
        let len = m.len() as u32;
        m[..4].copy_from_slice(&len.to_ne_bytes());
        assert_eq!(
            answer(&m).unwrap_err().raw_os_error(),
            Some(libc::EOPNOTSUPP)
        );
        assert!(answer(&[0; 8]).is_err());
    }

    #[test]
    fn the_running_kernel_answers_for_loopback_and_a_missing_device() {
        // The family resolves on any kernel from 5.6; loopback has no pause statistics.
        assert!(ethtool_family().is_ok());
        assert_eq!(pause_stats("lo").unwrap(), None);
        let e = pause_stats("nope0").unwrap_err().to_string();
        assert!(e.contains("nope0"), "{e}");
    }
}
