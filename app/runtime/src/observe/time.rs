//! The clock check (`[time]`): whether this host's clock follows a PTP master, asked of
//! linuxptp's `ptp4l` over its management socket ([`rtdaq_platform::ptp`]).
//!
//! - At start (step 1, before anything is allocated): one question. With `require_sync`,
//!   a clock that is not synchronised (no port SLAVE, or the offset from the master beyond
//!   `max_offset_ns`) or a `ptp4l` that does not answer stops the run (exit 2) with what
//!   `ptp4l` said; without it, a warning.
//! - During the run: once a second, from the run's watch (never a queue thread). The
//!   state goes to `/metrics` (`rtdaq_time_synchronised`, `rtdaq_time_offset_ns`,
//!   `rtdaq_time_sync_lost_total`); a change is logged, and each loss of sync (a clock that
//!   was synchronised and no longer is, or a `ptp4l` that stops answering) is counted.
//! - At the end: the report's `time`.

use crate::error::RuntimeError;
use rtdaq_config::model::{Config, TimeSync};
use rtdaq_platform::ptp::{Ptp4l, PtpStatus};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// How long the first question waits for `ptp4l`.
const START_WAIT: Duration = Duration::from_millis(500);
/// How long each question of the run waits (the run's watch waits with it).
const POLL_WAIT: Duration = Duration::from_millis(200);

/// The state `/metrics` shows, updated once a second.
#[derive(Debug, Default)]
pub struct TimeShared {
    /// `ptp4l`'s management socket (the metrics' label).
    pub ptp4l: String,
    /// Synchronised at the last question.
    pub synchronised: AtomicBool,
    /// The last offset from the master (ns).
    pub offset_ns: AtomicI64,
    /// Times the clock stopped being synchronised.
    pub lost: AtomicU64,
}

/// What the report says of the clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimeReport {
    /// `ptp4l`'s management socket.
    pub ptp4l: String,
    /// The largest offset from the master that counts as synchronised (ns).
    pub max_offset_ns: u64,
    /// What `ptp4l` said at start, or why it said nothing.
    pub at_start: String,
    /// Synchronised at start.
    pub synchronised_at_start: bool,
    /// Synchronised at the last question.
    pub synchronised_at_end: bool,
    /// What `ptp4l` said last.
    pub last: String,
    /// Times the clock stopped being synchronised during the run.
    pub sync_lost: u64,
    /// Questions `ptp4l` did not answer.
    pub unanswered: u64,
}

impl std::fmt::Display for TimeReport {
    /// `time: ptp4l /var/run/ptp4l: synchronised at start and at the end (max 1000 ns) ·
    /// sync lost 0 times · last: port SLAVE, offset from master -76 ns, grandmaster present`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let yes = |b: bool| {
            if b {
                "synchronised"
            } else {
                "not synchronised"
            }
        };
        write!(
            f,
            "time: ptp4l {}: {} at start, {} at the end (max {} ns) · sync lost {} times",
            self.ptp4l,
            yes(self.synchronised_at_start),
            yes(self.synchronised_at_end),
            self.max_offset_ns,
            self.sync_lost
        )?;
        if self.unanswered > 0 {
            write!(f, " · {} questions unanswered", self.unanswered)?;
        }
        write!(f, " · last: {}", self.last)
    }
}

/// The run's clock check (see the [module docs](self)).
pub struct TimeWatch {
    t: &'static TimeSync,
    client: Ptp4l,
    shared: &'static TimeShared,
    at_start: Result<PtpStatus, String>,
    last: Result<PtpStatus, String>,
    unanswered: u64,
}

impl TimeWatch {
    /// Asks `ptp4l` once (the config's `[time]`, if any): an error stops the run when the
    /// clock must be synchronised and is not.
    pub fn start(config: &'static Config) -> Result<Option<TimeWatch>, RuntimeError> {
        let Some(t) = config.time.as_ref() else {
            return Ok(None);
        };
        let mut client = Ptp4l::new(&t.ptp4l, t.domain).map_err(|e| RuntimeError::Time {
            key: "time.ptp4l".into(),
            message: e.to_string(),
        })?;
        let at_start = client.status(START_WAIT).map_err(|e| e.to_string());
        match (&at_start, t.require_sync) {
            (Ok(s), true) if !s.synchronised(t.max_offset_ns) => {
                return Err(RuntimeError::Time {
                    key: "time.require_sync".into(),
                    message: format!(
                        "the clock is not synchronised: ptp4l at {} says {s} (synchronised: a port SLAVE within {} ns); wait until ptp4l follows its master (pmc -u -b 0 'GET PORT_DATA_SET' shows SLAVE), or set [time] require_sync = false",
                        t.ptp4l.display(),
                        t.max_offset_ns
                    ),
                })
            }
            (Err(e), true) => {
                return Err(RuntimeError::Time {
                    key: "time.ptp4l".into(),
                    message: format!("{e}; or set [time] require_sync = false"),
                })
            }
            (Ok(s), false) if !s.synchronised(t.max_offset_ns) => {
                log::warn!("the clock is not synchronised: ptp4l says {s}; running all the same ([time] require_sync = false)");
            }
            (Err(e), false) => log::warn!("{e}; running without knowing the clock"),
            (Ok(s), _) => log::info!("the clock is synchronised: ptp4l says {s}"),
        }
        let shared: &'static TimeShared = Box::leak(Box::new(TimeShared {
            ptp4l: t.ptp4l.display().to_string(),
            ..TimeShared::default()
        }));
        let synced = matches!(&at_start, Ok(s) if s.synchronised(t.max_offset_ns));
        shared.synchronised.store(synced, Relaxed);
        if let Ok(s) = &at_start {
            shared.offset_ns.store(s.offset_ns, Relaxed);
        }
        Ok(Some(TimeWatch {
            t,
            client,
            shared,
            last: at_start.clone(),
            at_start,
            unanswered: 0,
        }))
    }

    /// The state `/metrics` reads.
    pub fn shared(&self) -> &'static TimeShared {
        self.shared
    }

    /// Once a second (the run's watch): asks again, logs a change, counts a loss.
    pub fn poll(&mut self) {
        let now = self.client.status(POLL_WAIT).map_err(|e| e.to_string());
        let max = self.t.max_offset_ns;
        let was = self.shared.synchronised.load(Relaxed);
        let is = matches!(&now, Ok(s) if s.synchronised(max));
        match &now {
            Ok(s) => self.shared.offset_ns.store(s.offset_ns, Relaxed),
            Err(_) => self.unanswered += 1,
        }
        if was && !is {
            self.shared.lost.fetch_add(1, Relaxed);
            match &now {
                Ok(s) => log::warn!("the clock is no longer synchronised: ptp4l says {s}"),
                Err(e) => log::warn!("the clock is no longer known to be synchronised: {e}"),
            }
        } else if !was && is {
            if let Ok(s) = &now {
                log::info!("the clock is synchronised: ptp4l says {s}");
            }
        }
        self.shared.synchronised.store(is, Relaxed);
        self.last = now;
    }

    /// The report's `time`.
    pub fn finish(self) -> TimeReport {
        let max = self.t.max_offset_ns;
        let text = |r: &Result<PtpStatus, String>| match r {
            Ok(s) => s.to_string(),
            Err(e) => e.clone(),
        };
        TimeReport {
            ptp4l: self.shared.ptp4l.clone(),
            max_offset_ns: max,
            at_start: text(&self.at_start),
            synchronised_at_start: matches!(&self.at_start, Ok(s) if s.synchronised(max)),
            synchronised_at_end: self.shared.synchronised.load(Relaxed),
            last: text(&self.last),
            sync_lost: self.shared.lost.load(Relaxed),
            unanswered: self.unanswered,
        }
    }
}
