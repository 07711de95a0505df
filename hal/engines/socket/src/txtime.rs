//! `[generator] pacing = "txtime"` (issue #33): each datagram of a UDP TX queue goes to the
//! kernel ahead of time with its own launch time (`SO_TXTIME`, an `SCM_TXTIME` control
//! message per datagram), and the interface's queueing discipline holds it until then:
//! - `etf` (earliest txtime first): on the clock of its `clockid` (`CLOCK_TAI` as a rule),
//!   handed to the device `delta` ns before the launch time; with `offload` the NIC keeps
//!   the time itself. It drops a datagram whose time is already past when it arrives, or
//!   that it could not hand over in time, and says so on the socket's error queue;
//! - `fq`: on `CLOCK_MONOTONIC`, each flow's datagrams not before their time.
//!
//! Without one of them the kernel ignores the times and sends at once, unpaced, and says
//! nothing: [`arm`] checks the qdiscs of the device the datagrams leave by first and
//! refuses the start (naming the `tc` command) instead.
//!
//! The queue reads the error queue ([`ErrQueue::drain`]) on every timed send: each
//! datagram the qdisc dropped is a `kernel` drop of the queue, and
//! [`TxStats::txtime_invalid`](crate::TxStats::txtime_invalid) /
//! [`txtime_missed`](crate::TxStats::txtime_missed) say why.

use std::io::IoSliceMut;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd};

use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags, SockaddrIn};
use rtdaq_core::traits::LaunchClock;
use rtdaq_netsys::{KeyError, OsError};
use rtdaq_platform::qdisc;

use crate::error::{Result, SocketError};
use crate::sys::Socket;

const KEY: &str = "generator.pacing";
/// `SOF_TXTIME_REPORT_ERRORS` (`linux/net_tstamp.h`): dropped datagrams are reported on the
/// error queue.
const REPORT_ERRORS: u32 = 1 << 1;
/// `SO_EE_ORIGIN_TXTIME`, `SO_EE_CODE_TXTIME_INVALID_PARAM`, `SO_EE_CODE_TXTIME_MISSED`
/// (`linux/errqueue.h`).
const ORIGIN_TXTIME: u8 = 6;
const CODE_INVALID: u8 = 1;
const CODE_MISSED: u8 = 2;

/// The launch-time setup of a queue: the clock, and the qdisc that keeps it, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Armed {
    /// The clock of the launch times.
    pub clock: LaunchClock,
    /// The device and qdisc (`pA: etf clockid CLOCK_TAI delta 200000 ns`), for the log.
    pub by: String,
}

/// The device datagrams to `dest` leave by: the one holding the local address the kernel
/// picks for it (`lo` for loopback).
fn device_to(dest: SocketAddrV4) -> std::io::Result<Option<String>> {
    let probe = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    probe.connect(dest)?;
    let std::net::SocketAddr::V4(local) = probe.local_addr()? else {
        return Ok(None);
    };
    Ok(crate::hwstamp::device_of(*local.ip()))
}

/// What the qdiscs of `dev` make of launch times, with `lead_ns` of lead: the clock and
/// the qdisc in words, or why they cannot keep them.
fn choose(dev: &str, qdiscs: &[qdisc::Qdisc], lead_ns: u64) -> std::result::Result<Armed, String> {
    if let Some(etf) = qdiscs.iter().find_map(|q| q.etf) {
        let clock = LaunchClock::from_linux_clockid(etf.clockid).ok_or_else(|| {
            format!("the etf qdisc on {dev} has clockid {}, which rtdaq cannot read; use clockid CLOCK_TAI", etf.clockid)
        })?;
        if etf.deadline_mode {
            return Err(format!("the etf qdisc on {dev} is in deadline_mode (datagrams leave as soon as they can, not at their time); replace it without deadline_mode"));
        }
        if u64::try_from(etf.delta_ns).unwrap_or(0) >= lead_ns {
            return Err(format!(
                "the etf qdisc on {dev} hands datagrams over {} ns before their time, which is not less than generator.txtime_lead_us ({} µs): raise txtime_lead_us above delta (with room for the sender's own wake-up latency), or lower delta",
                etf.delta_ns,
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
        return Ok(Armed { clock, by });
    }
    if qdiscs.iter().any(|q| q.kind == "fq") {
        return Ok(Armed {
            clock: LaunchClock::Monotonic,
            by: format!("{dev}: fq (CLOCK_MONOTONIC)"),
        });
    }
    let kinds: Vec<&str> = qdiscs.iter().map(|q| q.kind.as_str()).collect();
    Err(format!(
        "\"txtime\" needs the etf or fq qdisc on {dev} (the generator's datagrams leave by it), which has {}: without one the kernel ignores launch times and sends at once; as root, `tc qdisc replace dev {dev} root etf clockid CLOCK_TAI delta 200000` (or `... root fq`), or use pacing = \"software\"",
        if kinds.is_empty() { "none".to_owned() } else { kinds.join(", ") }
    ))
}

/// Sets up launch times for datagrams to `dest` on every socket of `socks`: the qdisc of
/// the device they leave by must keep them (see the module docs), and `SO_TXTIME` is set
/// with its clock and error reports. Cold path.
pub(crate) fn arm(socks: &[Socket], dest: SocketAddrV4, lead_ns: u64) -> Result<Armed> {
    let config = |detail: String| SocketError::Config(KeyError::new(KEY, detail));
    let os =
        |detail: String, e: std::io::Error| SocketError::SetOption(OsError::new(KEY, detail, e));
    let dev = device_to(dest)
        .map_err(|e| os(format!("\"txtime\": no route to {dest} ({e})"), e))?
        .ok_or_else(|| config(format!("\"txtime\": no network device here holds the address datagrams to {dest} leave from")))?;
    let qdiscs = qdisc::of(&dev).map_err(|e| config(format!("\"txtime\": {e}")))?;
    let armed = choose(&dev, &qdiscs, lead_ns).map_err(config)?;
    let t = libc::sock_txtime {
        clockid: armed.clock.linux_clockid(),
        flags: REPORT_ERRORS,
    };
    for s in socks {
        rtdaq_netsys::sockopt::set(s.as_fd(), libc::SOL_SOCKET, libc::SO_TXTIME, &t).map_err(|e| {
            os(
                format!("setsockopt(SO_TXTIME) failed ({e}); it needs Linux 4.19 or later, else use pacing = \"software\""),
                e,
            )
        })?;
    }
    Ok(armed)
}

/// A queue that sends without launch times (the software pacer) to `dest`: refused when the
/// device its datagrams leave by has an `etf` qdisc that checks sockets, which drops every
/// datagram of a socket without `SO_TXTIME`, unreported. A device or qdisc that cannot be
/// read is let be (the send path counts what the kernel refuses). Cold path.
pub(crate) fn check_untimed(dest: SocketAddrV4, key: &str) -> Result<()> {
    let Ok(Some(dev)) = device_to(dest) else {
        return Ok(());
    };
    let Ok(qdiscs) = qdisc::of(&dev) else {
        return Ok(());
    };
    if qdiscs
        .iter()
        .filter_map(|q| q.etf)
        .any(|e| !e.skip_sock_check)
    {
        return Err(SocketError::Config(KeyError::new(
            key,
            format!("{dev}, which datagrams to {dest} leave by, has an etf qdisc: it drops every datagram sent without a launch time, unreported; set generator.pacing = \"txtime\", or replace the qdisc (`tc qdisc del dev {dev} root`, or etf with skip_sock_check)"),
        )));
    }
    Ok(())
}

/// Datagrams the qdisc dropped, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Dropped {
    /// The launch time was already past, or earlier than one already sent, when the
    /// datagram reached the qdisc (`SO_EE_CODE_TXTIME_INVALID_PARAM`).
    pub invalid: u64,
    /// The qdisc could not hand it to the device in time (`SO_EE_CODE_TXTIME_MISSED`).
    pub missed: u64,
}

/// Preallocated buffers to read a socket's error queue with. Never allocates after
/// [`new`](Self::new).
pub(crate) struct ErrQueue {
    data: [u8; 64],
    cmsg: Vec<u8>,
}

impl ErrQueue {
    /// Buffers for one report at a time. Cold path.
    pub(crate) fn new() -> Self {
        ErrQueue {
            data: [0; 64],
            cmsg: nix::cmsg_space!(libc::sock_extended_err, libc::sockaddr_in),
        }
    }

    /// Reads every report waiting on `sock`'s error queue (none: one `EAGAIN`), adding the
    /// qdisc's drops to `out`. Never blocks, never allocates.
    pub(crate) fn drain(&mut self, sock: &Socket, out: &mut Dropped) {
        let fd = sock.as_fd().as_raw_fd();
        loop {
            let mut iov = [IoSliceMut::new(&mut self.data)];
            let flags = MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT;
            let Ok(msg) = recvmsg::<SockaddrIn>(fd, &mut iov, Some(&mut self.cmsg), flags) else {
                return;
            };
            let Ok(cmsgs) = msg.cmsgs() else { continue };
            for c in cmsgs {
                if let ControlMessageOwned::Ipv4RecvErr(e, _) = c {
                    if e.ee_origin == ORIGIN_TXTIME {
                        match e.ee_code {
                            CODE_INVALID => out.invalid += 1,
                            CODE_MISSED => out.missed += 1,
                            _ => {}
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(kind: &str, etf: Option<qdisc::Etf>) -> qdisc::Qdisc {
        qdisc::Qdisc {
            kind: kind.into(),
            etf,
        }
    }

    fn etf(clockid: i32, delta_ns: i32, deadline_mode: bool) -> Option<qdisc::Etf> {
        Some(qdisc::Etf {
            delta_ns,
            clockid,
            deadline_mode,
            offload: false,
            skip_sock_check: false,
        })
    }

    #[test]
    fn launch_clocks_are_the_kernels_clockids() {
        for (c, id) in [
            (LaunchClock::Tai, libc::CLOCK_TAI),
            (LaunchClock::Monotonic, libc::CLOCK_MONOTONIC),
            (LaunchClock::Realtime, libc::CLOCK_REALTIME),
            (LaunchClock::Boottime, libc::CLOCK_BOOTTIME),
        ] {
            assert_eq!(
                (c.linux_clockid(), LaunchClock::from_linux_clockid(id)),
                (id, Some(c))
            );
        }
        assert_eq!(
            LaunchClock::from_linux_clockid(libc::CLOCK_THREAD_CPUTIME_ID),
            None
        );
    }

    #[test]
    fn the_qdisc_decides_the_clock_or_the_refusal() {
        let a = choose(
            "pA",
            &[q("etf", etf(libc::CLOCK_TAI, 200_000, false))],
            1_000_000,
        )
        .unwrap();
        assert_eq!(a.clock, LaunchClock::Tai);
        assert_eq!(a.by, "pA: etf clockid CLOCK_TAI delta 200000 ns");
        // etf as a child of mqprio counts too.
        let a = choose(
            "eth0",
            &[
                q("mqprio", None),
                q("etf", etf(libc::CLOCK_MONOTONIC, 50_000, false)),
            ],
            100_000,
        )
        .unwrap();
        assert_eq!(a.clock, LaunchClock::Monotonic);
        assert_eq!(
            choose("pA", &[q("fq", None)], 10_000).unwrap().clock,
            LaunchClock::Monotonic
        );
        let e = choose(
            "pA",
            &[q("etf", etf(libc::CLOCK_TAI, 200_000, true))],
            1_000_000,
        )
        .unwrap_err();
        assert!(e.contains("deadline_mode"), "{e}");
        let e = choose(
            "pA",
            &[q("etf", etf(libc::CLOCK_TAI, 200_000, false))],
            150_000,
        )
        .unwrap_err();
        assert!(
            e.contains("200000 ns") && e.contains("txtime_lead_us (150 µs)"),
            "{e}"
        );
        let e = choose("lo", &[q("noqueue", None)], 1_000_000).unwrap_err();
        assert!(
            e.contains("which has noqueue")
                && e.contains("tc qdisc replace dev lo root etf clockid CLOCK_TAI delta 200000"),
            "{e}"
        );
        assert!(choose("x", &[], 1).unwrap_err().contains("which has none"));
    }

    /// On this host's loopback (noqueue, no etf or fq: the dev/CI kernel has neither) the
    /// start is refused, naming the key, the device and the command.
    #[test]
    fn loopback_without_a_launch_time_qdisc_is_refused() {
        let s = Socket::udp().unwrap();
        let dest = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9);
        match arm(std::slice::from_ref(&s), dest, 1_000_000) {
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.starts_with("generator.pacing: \"txtime\" needs the etf or fq qdisc on lo"),
                    "{e}"
                );
            }
            // A host whose loopback has fq or etf: armed, the socket takes SO_TXTIME.
            Ok(a) => assert!(a.by.starts_with("lo: "), "{a:?}"),
        }
        // Nothing waits on a fresh socket's error queue.
        let mut d = Dropped::default();
        ErrQueue::new().drain(&s, &mut d);
        assert_eq!(d, Dropped::default());
    }
}
