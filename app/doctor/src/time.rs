//! `time.ptp`: with `[time]`, whether the clock follows a PTP master now, as linuxptp's
//! `ptp4l` says over its management socket (`rtdaq_platform::ptp`, the question a run
//! asks at start). Asked only on the live host (root `/`); no finding without `[time]`.

use crate::{Ctx, Finding};
use std::path::Path;
use std::time::Duration;

/// The `time.ptp` finding; none without `[time]` (the clock is not checked).
pub(crate) fn ptp(ctx: &Ctx<'_>) -> Option<Finding> {
    const C: &str = "time.ptp";
    let t = ctx.config.time.as_ref()?;
    if ctx.root != Path::new("/") {
        return Some(Finding::skip(
            C,
            "ptp4l is asked on the live host only (root /)".into(),
        ));
    }
    let sock = t.ptp4l.display();
    let bad = |detail: String, fix: String| {
        if t.require_sync {
            Finding::fail(C, detail, fix)
        } else {
            Finding::warn(C, detail, fix)
        }
    };
    let status = rtdaq_platform::ptp::Ptp4l::new(&t.ptp4l, t.domain)
        .and_then(|mut c| c.status(Duration::from_millis(500)));
    Some(match status {
        Ok(s) if s.synchronised(t.max_offset_ns) => Finding::pass(
            C,
            format!("ptp4l at {sock}: {s} (within {} ns)", t.max_offset_ns),
        ),
        Ok(s) => bad(
            format!(
                "ptp4l at {sock}: {s}: not synchronised (a port SLAVE within {} ns)",
                t.max_offset_ns
            ),
            "wait until ptp4l follows its master (pmc -u -b 0 'GET PORT_DATA_SET'); check its interface, domain and the master".into(),
        ),
        Err(e) => bad(
            e.to_string(),
            format!("start ptp4l (linuxptp) with uds_address {sock}, or fix [time] ptp4l"),
        ),
    })
}

/// `time.phc:<if>`: with `[time]`, per interface, what its device can stamp and, when it has
/// a PTP hardware clock, that clock against the system clock (`rtdaq_platform::phc`).
/// Software stamps only is a warning: receive times are then the kernel's, to a few µs.
pub(crate) fn phc(ctx: &Ctx<'_>) -> Vec<Finding> {
    if ctx.config.time.is_none() {
        return Vec::new();
    }
    ctx.config
        .interfaces
        .iter()
        .map(|iface| {
            let c = format!("time.phc:{}", iface.name);
            if ctx.root != Path::new("/") {
                return Finding::skip(
                    &c,
                    "ethtool -T is asked on the live host only (root /)".into(),
                );
            }
            let port = crate::net::resolve(ctx, iface);
            let Some(dev) = port.netdev else {
                return Finding::skip(&c, port.no_netdev);
            };
            phc_finding(&c, &dev)
        })
        .collect()
}

fn phc_finding(c: &str, dev: &str) -> Finding {
    let ts = match rtdaq_platform::phc::timestamping(dev) {
        Ok(t) => t,
        Err(e) => {
            return Finding::warn(
                c,
                format!(
                    "{e}: {}",
                    std::error::Error::source(&e).map_or(String::new(), ToString::to_string)
                ),
                format!("ethtool -T {dev}"),
            )
        }
    };
    let Some(index) = ts.phc.filter(|_| ts.hardware_rx) else {
        return Finding::warn(
            c,
            format!("{ts}: receive times are the kernel's software stamps (µs), not the NIC's"),
            "for hardware receive times use a NIC with a PTP hardware clock (ethtool -T lists one) and run ptp4l on it".into(),
        );
    };
    match rtdaq_platform::phc::offset(index) {
        Ok(o) => {
            let (err_ns, secs) = o.less_whole_seconds();
            Finding::pass(
                c,
                format!(
                    "{ts}; PHC − CLOCK_REALTIME = {secs} s {err_ns:+} ns (read within {} ns; {secs} s is TAI − UTC when ptp4l keeps the PHC on TAI)",
                    o.window_ns
                ),
            )
        }
        Err(e) => Finding::warn(
            c,
            format!(
                "{ts}; {e}: {}",
                std::error::Error::source(&e).map_or(String::new(), ToString::to_string)
            ),
            format!("run doctor as root, or check /dev/ptp{index}"),
        ),
    }
}
