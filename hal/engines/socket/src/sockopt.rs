//! Socket options from the config, applied at open (cold path; may log).
//!
//! - `SO_RCVBUF` / `SO_SNDBUF` from `engine.socket.rcvbuf` / `sndbuf`: the `*FORCE` variant
//!   first (passes `net.core.rmem_max` / `wmem_max` as root or with `CAP_NET_ADMIN`), then
//!   the plain option; the effective size is read back and a clamp is logged as a warning
//!   naming the sysctl.
//! - `engine.socket.sockopts`: integer passthrough, errors name `engine.socket.sockopts[k]`.
//! - Feature options (`SO_TIMESTAMPNS`, `SO_RXQ_OVFL`, `UDP_GRO`, `UDP_SEGMENT`): probed;
//!   when the kernel lacks one the engine logs it and works without.

use rtdaq_netsys::OsError;
use std::io;

use rtdaq_config::model::Sockopt;

use crate::error::{Result, SocketError};
use crate::sys::consts::{
    EINVAL, ENOPROTOOPT, EOPNOTSUPP, EPERM, SOL_SOCKET, SO_RCVBUF, SO_RCVBUFFORCE, SO_SNDBUF,
    SO_SNDBUFFORCE,
};
use crate::sys::Socket;

/// Which socket buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BufDir {
    /// `SO_RCVBUF`.
    Rcv,
    /// `SO_SNDBUF`.
    Snd,
}

impl BufDir {
    fn names(self) -> (&'static str, i32, i32, &'static str) {
        match self {
            BufDir::Rcv => ("rcvbuf", SO_RCVBUF, SO_RCVBUFFORCE, "net.core.rmem_max"),
            BufDir::Snd => ("sndbuf", SO_SNDBUF, SO_SNDBUFFORCE, "net.core.wmem_max"),
        }
    }
}

/// Reads a `net.core.*` sysctl (for the clamp warning).
fn sysctl(name: &str) -> Option<u64> {
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Sets `SO_RCVBUF`/`SO_SNDBUF` to `bytes`; returns the effective size the kernel reports
/// (Linux reports double the request, for its bookkeeping). Warns once per engine (`warned`)
/// when the kernel clamped it.
pub(crate) fn set_buffer(
    sock: &Socket,
    dir: BufDir,
    bytes: u32,
    force: bool,
    warned: &mut bool,
) -> Result<usize> {
    let (key_name, plain, forced, sysctl_name) = dir.names();
    let key = format!("engine.socket.{key_name}");
    let value = i32::try_from(bytes).unwrap_or(i32::MAX);
    let mut done = false;
    if force {
        match sock.set_int(SOL_SOCKET, forced, value) {
            Ok(()) => done = true,
            Err(e) if e.raw_os_error() == Some(EPERM) => {}
            Err(source) => {
                return Err(SocketError::SetOption(OsError::new(
                    key,
                    format!(
                        "setsockopt(SO_{}FORCE, {bytes}) failed ({source})",
                        key_name.to_uppercase()
                    ),
                    source,
                )))
            }
        }
    }
    if !done {
        sock.set_int(SOL_SOCKET, plain, value).map_err(|source| {
            SocketError::SetOption(OsError::new(
                key.clone(),
                format!(
                    "setsockopt(SO_{}, {bytes}) failed ({source}); use a value in 1024..=2^30",
                    key_name.to_uppercase()
                ),
                source,
            ))
        })?;
    }
    let eff = sock
        .get_int(SOL_SOCKET, plain)
        .map_err(|source| {
            SocketError::Query(OsError::new(
                key.clone(),
                format!(
                    "reading SO_{} back failed ({source})",
                    key_name.to_uppercase()
                ),
                source,
            ))
        })?
        .max(0) as usize;
    let want = 2 * bytes as usize;
    if eff < want && !*warned {
        *warned = true;
        let max = sysctl(sysctl_name).map_or_else(|| "?".to_owned(), |v| v.to_string());
        log::warn!(
            "{key} = {bytes}: the kernel capped SO_{} at {eff} bytes (effective; asked for {want} = 2 x {bytes}) because {sysctl_name} = {max}; raise it (`sysctl -w {sysctl_name}={bytes}`) or run with CAP_NET_ADMIN",
            key_name.to_uppercase()
        );
    }
    Ok(eff)
}

/// Applies `engine.socket.sockopts` in order; an error names the entry.
pub(crate) fn apply_sockopts(sock: &Socket, list: &[Sockopt]) -> Result<()> {
    for (k, o) in list.iter().enumerate() {
        sock.set_int(o.level, o.option, o.value)
            .map_err(|source| SocketError::SetOption(OsError::new(format!("engine.socket.sockopts[{k}]"), format!(
                    "setsockopt(level {}, option {}, value {}) failed ({source}); fix or remove this entry",
                    o.level, o.option, o.value
                ), source)))?;
    }
    Ok(())
}

/// Applies `engine.socket.sockopts` to a socket accepted on the hot path: no error values, no
/// logging, no allocation; returns how many failed.
#[inline]
pub(crate) fn apply_sockopts_quiet(sock: &Socket, list: &[Sockopt]) -> u32 {
    list.iter()
        .filter(|o| sock.set_int(o.level, o.option, o.value).is_err())
        .count() as u32
}

/// Turns on a feature option; `Ok(false)` (and a log line) when this kernel lacks it.
pub(crate) fn enable_feature(
    sock: &Socket,
    level: i32,
    option: i32,
    value: i32,
    what: &str,
    key: &str,
) -> Result<bool> {
    match sock.set_int(level, option, value) {
        Ok(()) => Ok(true),
        Err(e) if is_unsupported(&e) => {
            log::warn!("{key}: this kernel does not support {what} ({e}); continuing without it");
            Ok(false)
        }
        Err(source) => Err(SocketError::SetOption(OsError::new(
            key.to_owned(),
            format!("enabling {what} failed ({source})"),
            source,
        ))),
    }
}

/// `ENOPROTOOPT` / `EINVAL` / `EOPNOTSUPP`: the kernel does not know the option.
fn is_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(ENOPROTOOPT) | Some(EINVAL) | Some(EOPNOTSUPP)
    )
}
