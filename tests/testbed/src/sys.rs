//! Everything `unsafe` in the crate: four libc calls, each wrapped in a function returning
//! `io::Result` (or a plain value where the call cannot fail). This is the only place that
//! reads `errno`.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// The effective user id of the process.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments, touches no memory of ours and cannot fail.
    unsafe { libc::geteuid() }
}

/// Moves the calling thread (only this thread) into the network namespace `ns`, an open
/// `/run/netns/<name>` (or `/proc/<pid>/ns/net`) file.
pub(crate) fn setns_net(ns: &File) -> io::Result<()> {
    // SAFETY: the descriptor is valid for the whole call (borrowed from `ns`, which outlives
    // it); setns reads no memory of ours and only changes the calling thread's network
    // namespace, which Rust's runtime does not depend on.
    let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Takes an exclusive `flock` on `file`, waiting for it. The lock is released when the last
/// descriptor of this open file description is closed (i.e. when `file` is dropped), also
/// when the process dies.
pub(crate) fn flock_exclusive(file: &File) -> io::Result<()> {
    loop {
        // SAFETY: the descriptor is valid for the whole call (borrowed from `file`); flock
        // reads no memory of ours.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Sends SIGKILL to process `pid`.
pub(crate) fn kill9(pid: i32) -> io::Result<()> {
    if pid <= 0 {
        // kill(0 or negative) would signal process groups: never.
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: kill with a positive pid signals exactly that process; it reads no memory of
    // ours. The callers only pass pids of processes inside the test bed's own namespaces.
    let rc = unsafe { libc::kill(pid, libc::SIGKILL) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
