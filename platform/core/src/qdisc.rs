//! The queueing disciplines of a network device over rtnetlink (`tc qdisc show dev DEV`):
//! their kinds (`fq`, `etf`, `mq`, `noqueue`, ...). The egress stage's `pacing = "txtime"`
//! needs `fq` on the interface its datagrams leave by, which honours each datagram's
//! `SO_TXTIME` departure time; without it the kernel sends them at once, unpaced, and says
//! nothing, so the start checks here first.
//!
//! One dump request (`RTM_GETQDISC`, the rtnetlink exchange shared with
//! [`neigh`](crate::neigh)) and a flat walk of its answers; no `unsafe`. Cold path.
//!
//! Layout (linux/rtnetlink.h, linux/pkt_sched.h): each answer is a 16-byte `nlmsghdr`, a
//! 20-byte `tcmsg` (family, pads, ifindex at 4, handle, parent, info), then attributes;
//! `TCA_KIND` (1) is the kind, NUL-terminated; `TCA_OPTIONS` (2) nests the kind's
//! parameters, of which [`etf`](Qdisc::etf)'s are read (`TCA_ETF_PARMS`, a
//! `tc_etf_qopt`: delta, clockid, flags), the generator's `pacing = "txtime"` needing its
//! clock. `TCA_STATS2` (7) nests `TCA_STATS_QUEUE` (3), a `gnet_stats_queue` whose first
//! word is the queue length in packets: what a launch-time qdisc still holds when a timed
//! sender ends ([`held`]).

use std::io;

use crate::error::{PlatformError, Result};
use crate::ethtool_netlink::attrs;
use crate::rtnetlink::{exchange, request, split, NLM_F_DUMP};
use rtdaq_core::traits::LaunchClock;

const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_ETF_PARMS: u16 = 1;
const TCA_STATS2: u16 = 7;
const TCA_STATS_QUEUE: u16 = 3;
const TCMSG_LEN: usize = 20;
const TC_H_ROOT: u32 = 0xFFFF_FFFF;
/// `IFF_LOOPBACK` and `IFF_NOARP` (linux/if.h): the device resolves no link addresses.
const IFF_LOOPBACK: u32 = 0x8;
const IFF_NOARP: u32 = 0x80;

/// One queueing discipline of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qdisc {
    /// Its kind (`fq`, `etf`, `mq`, `noqueue`, ...).
    pub kind: String,
    /// An `etf` qdisc's parameters; `None` for other kinds.
    pub etf: Option<Etf>,
    /// Packets it holds (its queue length when the dump was made; 0 when the kernel did
    /// not say).
    pub qlen: u32,
    /// It is the device's root qdisc (`tcm_parent` is `TC_H_ROOT`): every packet of the
    /// device goes through it.
    pub root: bool,
}

/// The parameters of an `etf` (earliest txtime first) qdisc (`tc qdisc add ... etf clockid
/// CLOCK_TAI delta 200000`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Etf {
    /// ns before a packet's launch time at which the qdisc hands it to the device.
    pub delta_ns: i32,
    /// The clock the launch times are on (`libc::CLOCK_TAI`, ...): a socket's `SO_TXTIME`
    /// clock must be the same, or every packet is dropped.
    pub clockid: i32,
    /// `deadline_mode`: launch times are deadlines (the packet goes as soon as it can).
    pub deadline_mode: bool,
    /// `offload`: the NIC keeps the launch times (LaunchTime of i210/i225/igc and others).
    pub offload: bool,
    /// `skip_sock_check`: datagrams of sockets without `SO_TXTIME` are not dropped.
    pub skip_sock_check: bool,
}

impl Etf {
    /// From a `tc_etf_qopt` (12 bytes: delta, clockid, flags).
    fn parse(b: &[u8]) -> Option<Etf> {
        let w = |i: usize| b.get(i..i + 4).map(|x| [x[0], x[1], x[2], x[3]]);
        let flags = u32::from_ne_bytes(w(8)?);
        Some(Etf {
            delta_ns: i32::from_ne_bytes(w(0)?),
            clockid: i32::from_ne_bytes(w(4)?),
            deadline_mode: flags & 1 != 0,
            offload: flags & 2 != 0,
            skip_sock_check: flags & 4 != 0,
        })
    }
}

/// What one receive of the dump holds: `(ifindex, qdisc)` of each qdisc, and whether the
/// dump ended (`NLMSG_DONE`); the kernel's error as an error.
pub fn parse_dump(buf: &[u8]) -> io::Result<(Vec<(i32, Qdisc)>, bool)> {
    let (msgs, done) = split(buf)?;
    Ok((
        msgs.iter()
            .filter_map(|(t, m)| parse_qdisc(*t, m))
            .collect(),
        done,
    ))
}

/// One `RTM_NEWQDISC` answer (`msg`: its body, after the `nlmsghdr`): its device index and
/// qdisc; `None` for another message or one without a kind.
fn parse_qdisc(ty: u16, msg: &[u8]) -> Option<(i32, Qdisc)> {
    if ty != RTM_NEWQDISC || msg.len() < TCMSG_LEN {
        return None;
    }
    let ifindex = i32::from_ne_bytes([msg[4], msg[5], msg[6], msg[7]]);
    let root = u32::from_ne_bytes([msg[12], msg[13], msg[14], msg[15]]) == TC_H_ROOT;
    let a = attrs(&msg[TCMSG_LEN..]);
    let kind = a.iter().find(|(t, _)| *t == TCA_KIND).map(|(_, p)| {
        let p = p.split(|&b| b == 0).next().unwrap_or_default();
        String::from_utf8_lossy(p).into_owned()
    })?;
    let etf = (kind == "etf")
        .then(|| a.iter().find(|(t, _)| *t == TCA_OPTIONS))
        .flatten()
        .and_then(|(_, o)| {
            attrs(o)
                .into_iter()
                .find(|(t, _)| *t == TCA_ETF_PARMS)
                .and_then(|(_, p)| Etf::parse(p))
        });
    let qlen = a
        .iter()
        .find(|(t, _)| *t == TCA_STATS2)
        .and_then(|(_, s)| {
            attrs(s)
                .into_iter()
                .find(|(t, _)| *t == TCA_STATS_QUEUE)
                .and_then(|(_, q)| q.get(..4))
                .map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
        })
        .unwrap_or(0);
    Some((
        ifindex,
        Qdisc {
            kind,
            etf,
            qlen,
            root,
        },
    ))
}

/// The kinds of the qdiscs on `netdev` (the root one and any per-queue children, in the
/// kernel's order); empty for a device with none (`noqueue` is reported as a kind).
///
/// # Errors
/// [`PlatformError::NoSuchNetdev`] when there is no such device;
/// [`PlatformError::Qdisc`] when the dump fails.
pub fn kinds(netdev: &str) -> Result<Vec<String>> {
    Ok(of(netdev)?.into_iter().map(|q| q.kind).collect())
}

/// How the qdiscs of a device keep launch times: their clock, and the qdisc in words
/// (`pA: etf clockid CLOCK_TAI delta 200000 ns`) for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchQdisc {
    /// The device whose qdiscs keep them.
    pub dev: String,
    /// The clock of the launch times.
    pub clock: LaunchClock,
    /// They are kept by `etf`, which drops a packet whose time has passed (a sender must
    /// hand packets over ahead of their times); `false`: by `fq`, which sends it at once.
    pub etf: bool,
    /// The device and its qdisc, in words.
    pub by: String,
}

/// Who sends with launch times, for the messages of [`launch_times`]: whose packets, and
/// the config key of their lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timed<'a> {
    /// Whose packets, in words (`the generator's packets`).
    pub packets: &'a str,
    /// The key of the lead (`generator.txtime_lead_us`).
    pub lead_key: &'a str,
}

/// The generator's and the replay's launch times.
pub const GENERATOR: Timed<'static> = Timed {
    packets: "the generator's packets",
    lead_key: "generator.txtime_lead_us",
};

/// What the qdiscs `qdiscs` of `dev` make of launch times given `lead_ns` ahead (`who`'s
/// `txtime_lead_us`): the clock and the qdisc in words, or why they cannot keep them,
/// naming the `tc` command that would. `etf` (anywhere in the tree: as the root or a child
/// of `mqprio`/`taprio`) on its `clockid`, not in `deadline_mode`, with a `delta` under the
/// lead; else `fq` on `CLOCK_MONOTONIC`.
///
/// # Errors
/// The reason, in words, when neither can.
pub fn launch_times(
    dev: &str,
    qdiscs: &[Qdisc],
    lead_ns: u64,
    who: Timed<'_>,
) -> std::result::Result<LaunchQdisc, String> {
    if let Some(etf) = qdiscs.iter().find_map(|q| q.etf) {
        let clock = LaunchClock::from_linux_clockid(etf.clockid).ok_or_else(|| {
            format!("the etf qdisc on {dev} has clockid {}, which rtdaq cannot read; use clockid CLOCK_TAI", etf.clockid)
        })?;
        if etf.deadline_mode {
            return Err(format!("the etf qdisc on {dev} is in deadline_mode (packets leave as soon as they can, not at their time); replace it without deadline_mode"));
        }
        if u64::try_from(etf.delta_ns).unwrap_or(0) >= lead_ns {
            return Err(format!(
                "the etf qdisc on {dev} hands packets over {} ns before their time, which is not less than {} ({} µs): raise txtime_lead_us above delta (with room for the sender's own wake-up latency), or lower delta",
                etf.delta_ns,
                who.lead_key,
                lead_ns / 1000
            ));
        }
        let by = format!(
            "{dev}: etf clockid {} delta {} ns{}",
            clock.as_str(),
            etf.delta_ns,
            if etf.offload {
                " offload (the NIC keeps the times)"
            } else {
                ""
            }
        );
        return Ok(LaunchQdisc {
            dev: dev.to_owned(),
            clock,
            etf: true,
            by,
        });
    }
    if qdiscs.iter().any(|q| q.kind == "fq") {
        return Ok(LaunchQdisc {
            dev: dev.to_owned(),
            clock: LaunchClock::Monotonic,
            etf: false,
            by: format!("{dev}: fq (CLOCK_MONOTONIC)"),
        });
    }
    let kinds: Vec<&str> = qdiscs.iter().map(|q| q.kind.as_str()).collect();
    Err(format!(
        "\"txtime\" needs the etf or fq qdisc on {dev} ({} leave by it), which has {}: without one the kernel ignores launch times and sends at once; as root, `tc qdisc replace dev {dev} root etf clockid CLOCK_TAI delta 200000` (or `... root fq`), or use pacing = \"software\"",
        who.packets,
        if kinds.is_empty() { "none".to_owned() } else { kinds.join(", ") }
    ))
}

/// Whether `qdiscs` drop every packet sent without a launch time: an `etf` that checks
/// sockets (not `skip_sock_check`), silently. A sender without launch times refuses to
/// start on such a device.
pub fn drops_untimed(qdiscs: &[Qdisc]) -> bool {
    qdiscs
        .iter()
        .filter_map(|q| q.etf)
        .any(|e| !e.skip_sock_check)
}

/// Whether `etf` would starve the kernel's address resolution for datagrams from `dev` (whose
/// qdiscs are `qdiscs`) to `dest`: when `etf` is the device's root qdisc it drops every
/// packet without a launch time, the kernel's ARP requests and probes too, so the next
/// hop's link address can be neither resolved nor re-confirmed. Once its entry goes stale
/// the datagrams wait in the neighbour queue and die there, unreported, while every send
/// succeeds ([`crate::neigh`]). Fine when the entry is pinned (`nud permanent`), the device
/// resolves nothing (`lo`, `IFF_NOARP`), the destination is a multicast or broadcast address, or `etf`
/// sits under `mqprio`/`taprio` (ARP may leave by another TX queue), or the route to `dest`
/// does not leave by `dev` (a local destination goes by `lo`). A route or entry that cannot
/// be read is let be. Cold path.
///
/// # Errors
/// Why, in words, naming the `ip neigh` command that pins the entry.
pub fn arp_blocked(
    dev: &str,
    qdiscs: &[Qdisc],
    dest: std::net::Ipv4Addr,
) -> std::result::Result<(), String> {
    let root_etf = qdiscs.iter().any(|q| q.root && q.kind == "etf");
    if !root_etf || dest.is_multicast() || dest.is_broadcast() {
        return Ok(());
    }
    let flags = std::fs::read_to_string(format!("/sys/class/net/{dev}/flags"))
        .ok()
        .and_then(|s| u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok())
        .unwrap_or(0);
    if flags & (IFF_NOARP | IFF_LOOPBACK) != 0 {
        return Ok(());
    }
    let Ok(hop) = crate::neigh::next_hop(dest) else {
        return Ok(());
    };
    // Packets that do not leave by `dev` (a destination on this host goes by `lo`) meet
    // neither its etf nor its resolution.
    let ifindex = nix::net::if_::if_nametoindex(dev).map_or(-1, |i| i as i32);
    if hop.ifindex != ifindex {
        return Ok(());
    }
    let entry = match crate::neigh::entry(hop) {
        Ok(e) => e,
        Err(_) => return Ok(()),
    };
    if entry.is_some_and(|e| e.pinned()) {
        return Ok(());
    }
    let mac = entry.and_then(|e| e.lladdr).map_or_else(
        || "MAC".to_owned(),
        |m| {
            m.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":")
        },
    );
    Err(format!(
        "the etf qdisc is the root of {dev}: it drops every packet without a launch time, the kernel's ARP requests too, so the link address of {} ({}) cannot be resolved or re-confirmed; once that entry goes stale the datagrams to {dest} wait for it and are dropped unreported. Pin it, as root: `ip neigh replace {} lladdr {mac} dev {dev} nud permanent`{}, or put etf under mqprio/taprio on a TX queue of its own",
        hop.addr,
        match entry {
            Some(e) => format!("neighbour state 0x{:02x}", e.state),
            None => "no neighbour entry".to_owned(),
        },
        hop.addr,
        if mac == "MAC" { " (MAC: the next hop's link address)" } else { "" },
    ))
}

/// The packets the launch-time qdiscs of `q`'s device hold now: the queue lengths of its
/// `etf` qdiscs (every one: a socket's packets may sit in any TX queue's), or of its `fq`
/// when `fq` keeps the times. A timed sender asks once its last launch time has passed and
/// its socket still has bytes in flight: what is still held then left late or never. The
/// count is the qdiscs', other senders' packets on the same qdiscs included. Cold path.
///
/// # Errors
/// As [`kinds`].
pub fn held(q: &LaunchQdisc) -> Result<u64> {
    let kind = if q.etf { "etf" } else { "fq" };
    Ok(of(&q.dev)?
        .iter()
        .filter(|d| d.kind == kind)
        .map(|d| u64::from(d.qlen))
        .sum())
}

/// The qdiscs on `netdev` with their parameters (see [`kinds`]).
///
/// # Errors
/// As [`kinds`].
pub fn of(netdev: &str) -> Result<Vec<Qdisc>> {
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
        .map(|(_, q)| q)
        .collect())
}

/// Every qdisc of this network namespace: `(ifindex, qdisc)` (an `RTM_GETQDISC` dump of
/// every device: a zeroed `tcmsg`, `AF_UNSPEC`).
fn dump() -> io::Result<Vec<(i32, Qdisc)>> {
    let req = request(RTM_GETQDISC, NLM_F_DUMP, &[0; TCMSG_LEN], &[]);
    Ok(exchange(&req)?
        .iter()
        .filter_map(|(t, m)| parse_qdisc(*t, m))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtnetlink::{NLMSG_DONE, NLMSG_ERROR};

    fn q(kind: &str, etf: Option<Etf>) -> Qdisc {
        Qdisc {
            kind: kind.into(),
            etf,
            qlen: 0,
            root: true,
        }
    }

    fn etf(clockid: i32, delta_ns: i32, deadline_mode: bool) -> Option<Etf> {
        Some(Etf {
            delta_ns,
            clockid,
            deadline_mode,
            offload: false,
            skip_sock_check: false,
        })
    }

    #[test]
    fn the_qdisc_decides_the_clock_or_the_refusal() {
        let a = launch_times(
            "pA",
            &[q("etf", etf(libc::CLOCK_TAI, 200_000, false))],
            1_000_000,
            GENERATOR,
        )
        .unwrap();
        assert_eq!(a.clock, LaunchClock::Tai);
        assert_eq!(a.by, "pA: etf clockid CLOCK_TAI delta 200000 ns");
        // etf as a child of mqprio counts too.
        let a = launch_times(
            "eth0",
            &[
                q("mqprio", None),
                q("etf", etf(libc::CLOCK_MONOTONIC, 50_000, false)),
            ],
            100_000,
            GENERATOR,
        )
        .unwrap();
        assert_eq!(a.clock, LaunchClock::Monotonic);
        assert_eq!(
            launch_times("pA", &[q("fq", None)], 10_000, GENERATOR)
                .unwrap()
                .clock,
            LaunchClock::Monotonic
        );
        let e = launch_times(
            "pA",
            &[q("etf", etf(libc::CLOCK_TAI, 200_000, true))],
            1_000_000,
            GENERATOR,
        )
        .unwrap_err();
        assert!(e.contains("deadline_mode"), "{e}");
        let e = launch_times(
            "pA",
            &[q("etf", etf(libc::CLOCK_TAI, 200_000, false))],
            150_000,
            GENERATOR,
        )
        .unwrap_err();
        assert!(
            e.contains("200000 ns") && e.contains("generator.txtime_lead_us (150 µs)"),
            "{e}"
        );
        let e = launch_times("lo", &[q("noqueue", None)], 1_000_000, GENERATOR).unwrap_err();
        assert!(
            e.contains("which has noqueue")
                && e.contains("tc qdisc replace dev lo root etf clockid CLOCK_TAI delta 200000"),
            "{e}"
        );
        assert!(launch_times("x", &[], 1, GENERATOR)
            .unwrap_err()
            .contains("which has none"));
    }

    fn qdisc_msg(ifindex: i32, kind: &[u8]) -> Vec<u8> {
        qdisc_msg_with(ifindex, kind, &[])
    }

    /// A qdisc answer with `options` (already laid out as attributes) in `TCA_OPTIONS`.
    fn qdisc_msg_with(ifindex: i32, kind: &[u8], options: &[u8]) -> Vec<u8> {
        let alen = 4 + kind.len();
        let olen = if options.is_empty() {
            0
        } else {
            4 + options.len()
        };
        let len = 16 + TCMSG_LEN + alen.next_multiple_of(4) + olen.next_multiple_of(4);
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
        m.resize(16 + TCMSG_LEN + alen.next_multiple_of(4), 0);
        if olen > 0 {
            m.extend_from_slice(&(olen as u16).to_ne_bytes());
            m.extend_from_slice(&(TCA_OPTIONS | 0x8000).to_ne_bytes());
            m.extend_from_slice(options);
        }
        m.resize(len, 0);
        m
    }

    #[test]
    fn etf_parameters_parse() {
        let mut parms = Vec::new();
        parms.extend_from_slice(&16u16.to_ne_bytes());
        parms.extend_from_slice(&TCA_ETF_PARMS.to_ne_bytes());
        parms.extend_from_slice(&200_000i32.to_ne_bytes());
        parms.extend_from_slice(&libc::CLOCK_TAI.to_ne_bytes());
        parms.extend_from_slice(&2u32.to_ne_bytes());
        let b = qdisc_msg_with(4, b"etf\0", &parms);
        let (q, _) = parse_dump(&b).unwrap();
        assert_eq!(
            q,
            vec![(
                4,
                Qdisc {
                    kind: "etf".into(),
                    etf: Some(Etf {
                        delta_ns: 200_000,
                        clockid: libc::CLOCK_TAI,
                        deadline_mode: false,
                        offload: true,
                        skip_sock_check: false,
                    }),
                    qlen: 0,
                    root: false,
                }
            )]
        );
        // Another kind's options are not read as etf's.
        let (q, _) = parse_dump(&qdisc_msg_with(4, b"fq\0", &parms)).unwrap();
        assert_eq!(q[0].1.etf, None);
    }

    /// The queue length comes from `TCA_STATS2`/`TCA_STATS_QUEUE` (a `gnet_stats_queue`:
    /// qlen, backlog, drops, requeues, overlimits), after the kind.
    #[test]
    fn queue_lengths_parse() {
        let mut m = qdisc_msg(4, b"etf\0");
        let mut queue = Vec::new();
        for w in [37u32, 37 * 1500, 2, 0, 0] {
            queue.extend_from_slice(&w.to_ne_bytes());
        }
        let inner = 4 + queue.len();
        let outer = 4 + inner;
        m.extend_from_slice(&(outer as u16).to_ne_bytes());
        m.extend_from_slice(&TCA_STATS2.to_ne_bytes());
        m.extend_from_slice(&(inner as u16).to_ne_bytes());
        m.extend_from_slice(&TCA_STATS_QUEUE.to_ne_bytes());
        m.extend_from_slice(&queue);
        let len = m.len() as u32;
        m[..4].copy_from_slice(&len.to_ne_bytes());
        let (q, _) = parse_dump(&m).unwrap();
        assert_eq!((q[0].1.kind.as_str(), q[0].1.qlen), ("etf", 37));
        // Without the attribute: 0.
        let (q, _) = parse_dump(&qdisc_msg(4, b"etf\0")).unwrap();
        assert_eq!(q[0].1.qlen, 0);
    }

    #[test]
    fn dump_answers_parse() {
        let mut b = qdisc_msg(1, b"noqueue\0");
        b.extend(qdisc_msg(7, b"fq\0"));
        let (q, done) = parse_dump(&b).unwrap();
        let k: Vec<(i32, &str)> = q.iter().map(|(i, q)| (*i, q.kind.as_str())).collect();
        assert_eq!(k, vec![(1, "noqueue"), (7, "fq")]);
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

    /// No root etf, a multicast destination, or a device that resolves nothing: never
    /// blocked (the refusal itself is tested on the wire in the QEMU guest:
    /// scripts/vm/txtime-tests.sh).
    #[test]
    fn etf_blocks_resolution_only_as_the_root_of_a_resolving_device() {
        let lo = std::net::Ipv4Addr::LOCALHOST;
        let mut child = q("etf", etf(libc::CLOCK_TAI, 200_000, false));
        child.root = false;
        assert_eq!(arp_blocked("pA", &[q("mqprio", None), child], lo), Ok(()));
        let root = [q("etf", etf(libc::CLOCK_TAI, 200_000, false))];
        assert_eq!(
            arp_blocked("pA", &root, "239.1.2.3".parse().unwrap()),
            Ok(())
        );
        // Loopback resolves nothing (IFF_LOOPBACK).
        assert_eq!(arp_blocked("lo", &root, lo), Ok(()));
    }

    /// The running kernel answers for loopback (`noqueue` unless someone set another) and
    /// names a missing device.
    #[test]
    fn the_running_kernel_answers_for_loopback() {
        let k = kinds("lo").unwrap();
        assert!(!k.is_empty(), "loopback has a qdisc entry: {k:?}");
        // Nothing holds launch times on loopback here, so nothing is held.
        let lo = |etf| LaunchQdisc {
            dev: "lo".into(),
            clock: LaunchClock::Tai,
            etf,
            by: String::new(),
        };
        assert_eq!(held(&lo(true)).unwrap(), 0);
        assert_eq!(held(&lo(false)).unwrap(), 0);
        assert!(matches!(
            held(&LaunchQdisc {
                dev: "rtdaq-no-such0".into(),
                ..lo(true)
            }),
            Err(PlatformError::NoSuchNetdev { .. })
        ));
        assert!(matches!(
            kinds("rtdaq-no-such0"),
            Err(PlatformError::NoSuchNetdev { .. })
        ));
    }
}
