//! `[generator] pacing = "txtime"` on the AF_PACKET engine (issue #33): each frame of the
//! generator's TX queue leaves at its own launch time. The TX ring sends every frame a
//! `sendmsg` finds marked with that call's one `SCM_TXTIME`, so a timed burst marks and
//! kicks one frame at a time ([`AfpacketTx::send_at`](crate::AfpacketTx)), each kick with
//! its frame's time; the device's `etf` or `fq` qdisc holds it until then.
//!
//! [`arm`] checks the device's qdiscs first ([`qdisc::launch_times`]: without `etf` or
//! `fq` the kernel would send at once, unpaced, and say nothing), sets `SO_TXTIME` with
//! the qdisc's clock and error reports, and the queue never bypasses the qdisc
//! (`PACKET_QDISC_BYPASS` stays off for it). [`check_untimed`] refuses the software pacer
//! through an `etf` that drops every frame without a launch time.

use std::os::fd::AsFd;

use rtdaq_core::traits::LaunchClock;
use rtdaq_netsys::{txtime, KeyError, OsError};
use rtdaq_platform::qdisc;

use crate::error::{AfpacketError, Result};
use crate::sys::PacketSocket;

const KEY: &str = "generator.pacing";

/// Sets up launch times on `sock`, which sends on `netdev`, `lead_ns` ahead: returns the
/// clock of the device's qdisc. Cold path.
///
/// # Errors
/// [`AfpacketError::Config`] naming the qdisc to add (or why the one there cannot keep
/// the times); [`AfpacketError::SetOption`] when the kernel refuses `SO_TXTIME`.
pub(crate) fn arm(sock: &PacketSocket, netdev: &str, lead_ns: u64) -> Result<LaunchClock> {
    let config = |detail: String| AfpacketError::Config(KeyError::new(KEY, detail));
    let qdiscs = qdisc::of(netdev).map_err(|e| config(format!("\"txtime\": {e}")))?;
    let armed = qdisc::launch_times(netdev, &qdiscs, lead_ns, qdisc::GENERATOR).map_err(config)?;
    txtime::arm(sock.as_fd(), armed.clock.linux_clockid()).map_err(|e| {
        AfpacketError::SetOption(OsError::new(
            KEY,
            format!("setsockopt(SO_TXTIME) on the packet socket failed ({e}); it needs Linux 4.19 or later, else use pacing = \"software\""),
            e,
        ))
    })?;
    log::info!(
        "the generator's AF_PACKET queue: launch times on {} ({}), {} µs ahead; one kick per frame",
        armed.clock.as_str(),
        armed.by,
        lead_ns / 1000
    );
    Ok(armed.clock)
}

/// A generator queue that sends without launch times on `netdev` through its qdisc:
/// refused when the qdisc is an `etf` that checks sockets (it drops every frame without a
/// launch time, unreported). A qdisc that cannot be read is let be. Cold path.
///
/// # Errors
/// [`AfpacketError::Config`] naming the qdisc and what to do.
pub(crate) fn check_untimed(netdev: &str) -> Result<()> {
    match qdisc::of(netdev) {
        Ok(q) if qdisc::drops_untimed(&q) => Err(AfpacketError::Config(KeyError::new(
            KEY,
            format!("{netdev} has an etf qdisc: it drops every frame sent without a launch time, unreported; set generator.pacing = \"txtime\", or replace the qdisc (`tc qdisc del dev {netdev} root`, or etf with skip_sock_check)"),
        ))),
        _ => Ok(()),
    }
}
