//! The next hop of an IPv4 destination and its neighbour entry, over rtnetlink (`ip route
//! get ADDR`, `ip neigh show`): whether a packet to it needs the kernel to resolve a link
//! address first (ARP), and whether that entry is pinned (`nud permanent`).
//!
//! Why a timed sender asks: the `etf` qdisc drops every packet without a launch time, the
//! kernel's own ARP requests and probes too. As the root qdisc of the device it leaves the
//! kernel no way to resolve or re-confirm the destination's address: once the entry goes
//! stale, the probes die in `etf`, the entry fails, and the socket's datagrams wait in the
//! neighbour queue (at most `unres_qlen_bytes`, about 200 KiB) and are dropped there,
//! unreported, while every send still succeeds. Seen in the QEMU guest (issue #33): a
//! generator whose last 3486 of 10 000 datagrams never left, none counted. See
//! [`crate::qdisc::arp_blocked`].
//!
//! One request each (`RTM_GETROUTE` for the route, an `RTM_GETNEIGH` dump for the
//! entries; the rtnetlink exchange shared with [`qdisc`](crate::qdisc)) and a flat walk of
//! the answers. Cold path.
//!
//! Layout (linux/rtnetlink.h, linux/neighbour.h): a route answer is a 16-byte `nlmsghdr`, a
//! 12-byte `rtmsg`, then attributes (`RTA_OIF` 4: the device index, `RTA_GATEWAY` 5); a
//! neighbour answer a 12-byte `ndmsg` (family, pads, ifindex at 4, state at 8, flags,
//! type), then attributes (`NDA_DST` 1, `NDA_LLADDR` 2).

use std::io;
use std::net::Ipv4Addr;

use crate::ethtool_netlink::attrs;
use crate::rtnetlink::{exchange, request, NLM_F_DUMP};
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const RTMSG_LEN: usize = 12;
const NDMSG_LEN: usize = 12;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
const AF_INET: u8 = 2;

/// `NUD_NOARP` (the device needs no resolution) and `NUD_PERMANENT` (pinned by hand).
pub const NUD_NOARP: u16 = 0x40;
/// See [`NUD_NOARP`].
pub const NUD_PERMANENT: u16 = 0x80;

/// Where packets to a destination go first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHop {
    /// The address whose link address they need: the gateway, or the destination itself
    /// when it is on the link.
    pub addr: Ipv4Addr,
    /// The device they leave by.
    pub ifindex: i32,
}

/// A neighbour entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Its `NUD_*` state bits.
    pub state: u16,
    /// Its link address, when it has one.
    pub lladdr: Option<[u8; 6]>,
}

impl Entry {
    /// Whether the kernel never needs to resolve it again (`permanent` or `noarp`).
    pub fn pinned(&self) -> bool {
        self.state & (NUD_PERMANENT | NUD_NOARP) != 0
    }
}

fn ipv4(b: &[u8]) -> Option<Ipv4Addr> {
    let o: [u8; 4] = b.get(..4)?.try_into().ok()?;
    Some(Ipv4Addr::from(o))
}

/// The route answer's next hop for `dst`.
fn parse_route(msgs: &[(u16, Vec<u8>)], dst: Ipv4Addr) -> Option<NextHop> {
    let (_, body) = msgs.iter().find(|(t, _)| *t == RTM_NEWROUTE)?;
    let a = attrs(body.get(RTMSG_LEN..)?);
    let ifindex = a
        .iter()
        .find(|(t, _)| *t == RTA_OIF)
        .and_then(|(_, v)| Some(i32::from_ne_bytes(v.get(..4)?.try_into().ok()?)))?;
    let gateway = a
        .iter()
        .find(|(t, _)| *t == RTA_GATEWAY)
        .and_then(|(_, v)| ipv4(v));
    Some(NextHop {
        addr: gateway.unwrap_or(dst),
        ifindex,
    })
}

/// The entry for `hop` among neighbour answers.
fn parse_neigh(msgs: &[(u16, Vec<u8>)], hop: NextHop) -> Option<Entry> {
    msgs.iter()
        .filter(|(t, b)| *t == RTM_NEWNEIGH && b.len() >= NDMSG_LEN && b[0] == AF_INET)
        .find_map(|(_, b)| {
            let ifindex = i32::from_ne_bytes(b[4..8].try_into().ok()?);
            let a = attrs(&b[NDMSG_LEN..]);
            let dst = a
                .iter()
                .find(|(t, _)| *t == NDA_DST)
                .and_then(|(_, v)| ipv4(v));
            (ifindex == hop.ifindex && dst == Some(hop.addr)).then(|| Entry {
                state: u16::from_ne_bytes([b[8], b[9]]),
                lladdr: a
                    .iter()
                    .find(|(t, _)| *t == NDA_LLADDR)
                    .and_then(|(_, v)| v.get(..6)?.try_into().ok()),
            })
        })
}

/// Where packets to `dst` go first (`ip route get DST`).
///
/// # Errors
/// The kernel's answer (`ENETUNREACH`: no route).
pub fn next_hop(dst: Ipv4Addr) -> io::Result<NextHop> {
    let mut rtmsg = [0u8; RTMSG_LEN];
    rtmsg[0] = AF_INET;
    rtmsg[1] = 32; // dst_len
    let req = request(RTM_GETROUTE, 0, &rtmsg, &[(RTA_DST, &dst.octets())]);
    parse_route(&exchange(&req)?, dst).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the kernel's route to {dst} names no device"),
        )
    })
}

/// The neighbour entry of `hop` (`ip neigh show`), `None` when there is none.
///
/// # Errors
/// When the dump fails.
pub fn entry(hop: NextHop) -> io::Result<Option<Entry>> {
    let mut ndmsg = [0u8; NDMSG_LEN];
    ndmsg[0] = AF_INET;
    let req = request(RTM_GETNEIGH, NLM_F_DUMP, &ndmsg, &[]);
    Ok(parse_neigh(&exchange(&req)?, hop))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(t: u16, v: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&t.to_ne_bytes());
        a.extend_from_slice(v);
        a.resize(a.len().next_multiple_of(4), 0);
        a
    }

    #[test]
    fn a_route_answer_names_the_gateway_or_the_destination() {
        let dst = Ipv4Addr::new(169, 254, 9, 2);
        let mut body = vec![0u8; RTMSG_LEN];
        body.extend(attr(RTA_OIF, &7i32.to_ne_bytes()));
        let on_link = parse_route(&[(RTM_NEWROUTE, body.clone())], dst).unwrap();
        assert_eq!(
            on_link,
            NextHop {
                addr: dst,
                ifindex: 7
            }
        );
        body.extend(attr(RTA_GATEWAY, &[169, 254, 9, 1]));
        let via = parse_route(&[(RTM_NEWROUTE, body)], dst).unwrap();
        assert_eq!(via.addr, Ipv4Addr::new(169, 254, 9, 1));
        assert_eq!(parse_route(&[], dst), None);
    }

    #[test]
    fn neighbour_answers_parse_and_pinned_is_permanent_or_noarp() {
        let hop = NextHop {
            addr: Ipv4Addr::new(169, 254, 9, 2),
            ifindex: 7,
        };
        let msg = |ifindex: i32, state: u16, dst: [u8; 4]| {
            let mut b = vec![0u8; NDMSG_LEN];
            b[0] = AF_INET;
            b[4..8].copy_from_slice(&ifindex.to_ne_bytes());
            b[8..10].copy_from_slice(&state.to_ne_bytes());
            b.extend(attr(NDA_DST, &dst));
            b.extend(attr(NDA_LLADDR, &[2, 0, 0, 0, 0, 9]));
            (RTM_NEWNEIGH, b)
        };
        let stale = 0x04;
        let msgs = [
            msg(3, NUD_PERMANENT, [169, 254, 9, 2]),
            msg(7, stale, [169, 254, 9, 3]),
            msg(7, stale, [169, 254, 9, 2]),
        ];
        let e = parse_neigh(&msgs, hop).unwrap();
        assert_eq!(e.state, stale);
        assert_eq!(e.lladdr, Some([2, 0, 0, 0, 0, 9]));
        assert!(!e.pinned());
        assert!(Entry {
            state: NUD_PERMANENT,
            lladdr: None
        }
        .pinned());
        assert!(Entry {
            state: NUD_NOARP,
            lladdr: None
        }
        .pinned());
        assert_eq!(parse_neigh(&msgs[..2], hop), None);
    }

    /// The running kernel: loopback's route leaves by `lo`, which needs no resolution.
    #[test]
    fn the_running_kernel_routes_loopback() {
        let hop = next_hop(Ipv4Addr::LOCALHOST).unwrap();
        assert_eq!(hop.addr, Ipv4Addr::LOCALHOST);
        assert_eq!(
            hop.ifindex as u32,
            nix::net::if_::if_nametoindex("lo").unwrap()
        );
        assert!(entry(hop).is_ok());
    }
}
