//! systemd service notifications (issue #18): `READY=1`, `WATCHDOG=1`, `STATUS=` and
//! `STOPPING=1` on `$NOTIFY_SOCKET`, through the `sd-notify` crate.
//!
//! - `READY=1` once every queue thread has its queue (memory locked, queues open, threads
//!   at their `SCHED_FIFO` priority: set-up refused any of those before this point), with a
//!   `STATUS=` naming the queues.
//! - `STATUS=` every second: the live line's totals (`systemctl status` shows it).
//! - `WATCHDOG=1` every quarter of `WATCHDOG_USEC` (systemd's `WatchdogSec=`; sd_notify
//!   asks for at least every half: the quarter leaves the supervising thread, which runs at
//!   normal priority, half the interval of slack when the host is busy), sent by the run's
//!   supervising (main) thread **only while everything that moves the data makes
//!   progress**: every RX I/O thread, RX consumer, TX generator, record writer and shared
//!   sink merger stores a recent turn's time in its [`StallWatch`] every 20 ms, and every
//!   GPU stage stores one while its batches come back (or none is in flight). One that has
//!   made no progress for half the watchdog interval (at least 1 s) stops the pings, the
//!   run logs which one it is, and systemd restarts the service when the interval runs
//!   out. A queue that merely has no traffic still turns (its waits are bounded), a writer
//!   with nothing to write too; a GPU that holds batches and completes none does not.
//! - `STOPPING=1` when the run begins to stop (SIGTERM/SIGINT or the end of its duration).
//!
//! Without `$NOTIFY_SOCKET` (not run by systemd with `Type=notify`) nothing is sent. Nothing
//! here runs on a queue thread.

use crate::stall::StallWatch;

/// Least time a queue thread may go without a turn before the pings stop.
const MIN_STALE_NS: u64 = 1_000_000_000;

/// The run's notifier; see the [module docs](self).
#[derive(Debug)]
pub struct Notifier {
    enabled: bool,
    watchdog: Option<Watchdog>,
    failed: bool,
}

#[derive(Debug)]
struct Watchdog {
    period_ns: u64,
    stale_ns: u64,
    next_ns: u64,
    /// The thread whose stall stopped the pings (logged once).
    stalled: Option<String>,
}

impl Notifier {
    /// From the environment systemd sets (`NOTIFY_SOCKET`, `WATCHDOG_USEC`, `WATCHDOG_PID`).
    pub fn from_env() -> Self {
        let enabled = std::env::var_os("NOTIFY_SOCKET").is_some();
        let mut usec = 0;
        let watchdog =
            (enabled && sd_notify::watchdog_enabled(false, &mut usec) && usec > 0).then(|| {
                let interval_ns = usec.saturating_mul(1000);
                Watchdog {
                    period_ns: (interval_ns / 4).max(1),
                    stale_ns: (interval_ns / 2).max(MIN_STALE_NS),
                    next_ns: 0,
                    stalled: None,
                }
            });
        if let Some(w) = &watchdog {
            log::info!(
                "systemd watchdog: WATCHDOG=1 every {:.3} s while every thread that moves the data (and every GPU stage) makes progress at least every {:.3} s",
                w.period_ns as f64 / 1e9,
                w.stale_ns as f64 / 1e9
            );
        }
        Self {
            enabled,
            watchdog,
            failed: false,
        }
    }

    fn send(&mut self, states: &[sd_notify::NotifyState<'_>]) {
        if !self.enabled || self.failed {
            return;
        }
        if let Err(e) = sd_notify::notify(false, states) {
            log::warn!("systemd notification failed ({e}); no more are sent");
            self.failed = true;
        }
    }

    /// `READY=1` with `STATUS=status`.
    pub fn ready(&mut self, status: &str) {
        self.send(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(status),
        ]);
    }

    /// `STATUS=status`.
    pub fn status(&mut self, status: &str) {
        self.send(&[sd_notify::NotifyState::Status(status)]);
    }

    /// `STOPPING=1`.
    pub fn stopping(&mut self) {
        self.send(&[sd_notify::NotifyState::Stopping]);
    }

    /// Sends `WATCHDOG=1` when one is due and every thread of `threads` (name, its watch)
    /// turned within the stale limit; logs once the first that did not. Cheap when no
    /// watchdog is set (one branch).
    pub fn watchdog<'a>(
        &mut self,
        now_ns: u64,
        threads: impl IntoIterator<Item = (&'a str, &'a StallWatch)>,
    ) {
        let Some(w) = self.watchdog.as_mut() else {
            return;
        };
        if now_ns < w.next_ns {
            return;
        }
        let stuck = threads.into_iter().find(|(_, s)| {
            let alive = s.alive_ns();
            alive != 0 && now_ns.saturating_sub(alive) > w.stale_ns
        });
        if let Some((name, s)) = stuck {
            if w.stalled.is_none() {
                log::error!(
                    "{name} has made no progress for {:.3} s: WATCHDOG=1 pings stop (systemd restarts the service when WatchdogSec= runs out)",
                    now_ns.saturating_sub(s.alive_ns()) as f64 / 1e9
                );
                w.stalled = Some(name.to_string());
            }
            return;
        }
        w.stalled = None;
        // On the schedule (a late ping does not push the next one later), never in a burst.
        w.next_ns = (w.next_ns + w.period_ns).max(now_ns + w.period_ns / 2);
        self.send(&[sd_notify::NotifyState::Watchdog]);
    }
}
