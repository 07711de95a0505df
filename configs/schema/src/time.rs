//! The clock rtdaq's timestamps come from (`[time]`): whether it follows a PTP master,
//! asked of linuxptp's `ptp4l` at start and once a second during the run.
//! In one file: the table as written, the typed settings and their rules with key paths.
//!
//! ```toml
//! [time]
//! ptp4l = "/var/run/ptp4l"   # ptp4l's management socket (its uds_address; the default)
//! domain = 0                 # the PTP domain ptp4l runs in (its domainNumber; default 0)
//! require_sync = true        # refuse to start unsynchronised (exit 2); default false
//! max_offset_ns = 1000       # synchronised: a port SLAVE and |offset| <= this; default 1000
//! ```

use crate::error::Errors;
use serde::Deserialize;
use std::path::PathBuf;

/// `[time]`: the PTP check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeSync {
    /// `ptp4l`'s management socket (`ptp4l`).
    pub ptp4l: PathBuf,
    /// Its PTP domain (`domain`).
    pub domain: u8,
    /// Refuse to start when the clock is not synchronised (`require_sync`).
    pub require_sync: bool,
    /// Synchronised: a port SLAVE and the offset from the master within this (`max_offset_ns`).
    pub max_offset_ns: u64,
}

/// `[time]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTime {
    #[serde(default)]
    pub ptp4l: Option<String>,
    #[serde(default)]
    pub domain: Option<i64>,
    #[serde(default)]
    pub require_sync: bool,
    #[serde(default)]
    pub max_offset_ns: Option<i64>,
}

/// The default `ptp4l` management socket (linuxptp's `uds_address`).
pub const DEFAULT_PTP4L: &str = "/var/run/ptp4l";

/// Validates `[time]`; `None` inside when it has an error.
pub(crate) fn time(raw: Option<&RawTime>, errs: &mut Errors) -> Option<Option<TimeSync>> {
    let Some(r) = raw else {
        return Some(None);
    };
    let ptp4l = r.ptp4l.as_deref().unwrap_or(DEFAULT_PTP4L);
    // A Unix socket address holds 107 bytes of path.
    let path_ok = !ptp4l.is_empty() && ptp4l.len() <= 107;
    if !path_ok {
        errs.push("time.ptp4l", format!("{ptp4l:?} is not a path of a Unix socket (1 to 107 bytes): give ptp4l's uds_address, e.g. \"{DEFAULT_PTP4L}\""));
    }
    let domain = crate::validate::int::<u8>(
        r.domain.unwrap_or(0),
        0,
        127,
        "time.domain",
        " (ptp4l's domainNumber)",
        errs,
    );
    let max_offset_ns = crate::validate::int::<u64>(
        r.max_offset_ns.unwrap_or(1000),
        1,
        1_000_000_000,
        "time.max_offset_ns",
        " ns from the master",
        errs,
    );
    Some(Some(TimeSync {
        ptp4l: path_ok.then(|| PathBuf::from(ptp4l))?,
        domain: domain?,
        require_sync: r.require_sync,
        max_offset_ns: max_offset_ns?,
    }))
}
