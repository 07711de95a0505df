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
//! The queue reads the error queue ([`txtime::ErrQueue::drain`]) on every timed send: each
//! datagram the qdisc dropped is a `kernel` drop of the queue, and
//! [`TxStats::txtime_invalid`](crate::TxStats::txtime_invalid) /
//! [`txtime_missed`](crate::TxStats::txtime_missed) say why.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsFd;

use rtdaq_netsys::{txtime, KeyError, OsError};
use rtdaq_platform::qdisc::{self, LaunchQdisc};

use crate::error::{Result, SocketError};
use crate::sys::Socket;

const KEY: &str = "generator.pacing";
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

/// Sets up launch times for datagrams to `dest` on every socket of `socks`: the qdisc of
/// the device they leave by must keep them (see the module docs), and `SO_TXTIME` is set
/// with its clock and error reports. Cold path.
pub(crate) fn arm(socks: &[Socket], dest: SocketAddrV4, lead_ns: u64) -> Result<LaunchQdisc> {
    let config = |detail: String| SocketError::Config(KeyError::new(KEY, detail));
    let os =
        |detail: String, e: std::io::Error| SocketError::SetOption(OsError::new(KEY, detail, e));
    let dev = device_to(dest)
        .map_err(|e| os(format!("\"txtime\": no route to {dest} ({e})"), e))?
        .ok_or_else(|| config(format!("\"txtime\": no network device here holds the address datagrams to {dest} leave from")))?;
    let qdiscs = qdisc::of(&dev).map_err(|e| config(format!("\"txtime\": {e}")))?;
    let armed = qdisc::launch_times(&dev, &qdiscs, lead_ns, qdisc::GENERATOR).map_err(config)?;
    qdisc::arp_blocked(&dev, &qdiscs, *dest.ip())
        .map_err(|e| config(format!("\"txtime\": {e}")))?;
    for s in socks {
        txtime::arm(s.as_fd(), armed.clock.linux_clockid()).map_err(|e| {
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
    if qdisc::drops_untimed(&qdiscs) {
        return Err(SocketError::Config(KeyError::new(
            key,
            format!("{dev}, which datagrams to {dest} leave by, has an etf qdisc: it drops every datagram sent without a launch time, unreported; set generator.pacing = \"txtime\", or replace the qdisc (`tc qdisc del dev {dev} root`, or etf with skip_sock_check)"),
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtdaq_core::traits::LaunchClock;

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
        let mut d = txtime::Dropped::default();
        txtime::ErrQueue::new().drain(s.as_fd(), &mut d);
        assert_eq!(d, txtime::Dropped::default());
    }
}
