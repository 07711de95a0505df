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
