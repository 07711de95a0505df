//! Top-level keys, `[run]` and `[rt]`.

use super::int;
use crate::error::Errors;
use crate::model::{Rt, Run};
use crate::parse::is_identifier;
use crate::schema::RawConfig;
use std::path::PathBuf;

/// `name` is a plain identifier (it names reports, metrics and generated constants).
pub(super) fn name(raw: &RawConfig, errs: &mut Errors) {
    if !is_identifier(&raw.name) {
        errs.push(
            "name",
            format!(
                "{:?} is not a plain name; use 1..=64 letters, digits, '_' or '-' (e.g. \"lab-rx-1\")",
                raw.name
            ),
        );
    }
}

/// The longest run, seconds: one year (`run.duration_s` and `rtdaq run --duration`).
pub const MAX_RUN_DURATION_S: f64 = 31_536_000.0;

/// Checks a run duration in seconds (`run.duration_s`, or the `--duration` override):
/// finite, in `0..=MAX_RUN_DURATION_S`. The error says what is allowed.
///
/// # Errors
/// The message for a value outside the range.
pub fn check_run_duration(secs: f64) -> Result<(), String> {
    if secs.is_finite() && (0.0..=MAX_RUN_DURATION_S).contains(&secs) {
        Ok(())
    } else {
        Err(format!(
            "{secs} is not a duration; use seconds in 0..=31536000 (one year; 0 = run until SIGINT/SIGTERM)"
        ))
    }
}

/// The metrics endpoint's address, `ip:port` (`127.0.0.1:9464`, `[::1]:9464`; port 0 takes
/// any free port, the log names it). The message for anything else.
pub fn parse_metrics_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    s.trim().parse().map_err(|_| {
        format!(
            "{s:?} is not an address and port; write \"127.0.0.1:9464\" (this host only) or \"0.0.0.0:9464\" (every interface)"
        )
    })
}

/// `[run]`: a finite non-negative duration, a non-empty report path, bounded drain.
pub(super) fn run(raw: &RawConfig, errs: &mut Errors) -> Option<Run> {
    let r = &raw.run;
    let mut ok = true;
    if let Err(why) = check_run_duration(r.duration_s) {
        errs.push("run.duration_s", why);
        ok = false;
    }
    if let Some(p) = &r.report_json {
        if p.trim().is_empty() {
            errs.push(
                "run.report_json",
                "empty path; remove the key or give a file path such as \"report.json\"",
            );
            ok = false;
        }
    }
    let loss = int::<u64>(
        r.loss_tolerance,
        0,
        i64::MAX,
        "run.loss_tolerance",
        " (packets that may be lost)",
        errs,
    );
    let drain = int::<u32>(
        r.drain_ms,
        0,
        60_000,
        "run.drain_ms",
        " (milliseconds RX keeps draining after TX stops)",
        errs,
    );
    let metrics = match r.metrics.as_deref().map(parse_metrics_addr) {
        None => None,
        Some(Ok(a)) => Some(a),
        Some(Err(why)) => {
            errs.push("run.metrics", why);
            ok = false;
            None
        }
    };
    if !ok {
        return None;
    }
    Some(Run {
        metrics,
        duration_s: r.duration_s,
        report_json: r.report_json.as_ref().map(PathBuf::from),
        loss_tolerance: loss?,
        drain_ms: drain?,
        validate: r.validate,
    })
}

/// `[rt]`: the prefaulted stack fits an ordinary thread stack (8 MiB).
pub(super) fn rt(raw: &RawConfig, errs: &mut Errors) -> Option<Rt> {
    let r = &raw.rt;
    let kib = int::<u32>(
        r.prefault_stack_kib,
        0,
        8192,
        "rt.prefault_stack_kib",
        " KiB (queue threads get an 8 MiB stack; prefault at most that)",
        errs,
    )?;
    Some(Rt {
        required: r.required,
        lock_memory: r.lock_memory,
        prefault_stack_kib: kib,
    })
}
