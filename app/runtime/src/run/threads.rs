//! The run's own thread helpers: names, stacks, spawning, CPU time, joining (a panic becomes
//! a [`ThreadFailure`] that fails the run).

use super::results::ThreadFailure;
use crate::error::RuntimeError;
use rtdaq_config::model::Config;
use rtdaq_platform::rt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Release};
use std::thread::{self as std_thread, JoinHandle};

/// `interface.rxN` / `interface.txN`.
pub(super) fn queue_name(config: &Config, interface: usize, dir: &str, q: usize) -> String {
    format!("{}.{dir}{q}", config.interfaces[interface].name)
}

/// The message of a thread's panic payload (`panic!("...")` gives a `&str` or a `String`).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// Joins a queue thread: its result, or `fallback` and a [`ThreadFailure`] naming the thread
/// and its panic.
pub(super) fn join_queue_thread<T>(
    h: JoinHandle<T>,
    thread: &str,
    fallback: impl FnOnce() -> T,
    failed: &mut Vec<ThreadFailure>,
) -> T {
    match h.join() {
        Ok(v) => v,
        Err(payload) => {
            let panic = panic_message(payload.as_ref());
            log::error!("queue thread {thread} panicked: {panic}; the run fails");
            failed.push(ThreadFailure {
                thread: thread.to_string(),
                panic,
            });
            fallback()
        }
    }
}

/// Sets a flag when dropped: the I/O thread's `io_done` is raised also when it panics, so
/// its consumer drains the ring and ends instead of waiting forever.
pub(super) struct RaiseOnDrop(pub &'static AtomicBool);

impl Drop for RaiseOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Release);
    }
}

/// Stores the calling thread's CPU time so far (its total, when called as it ends).
pub(super) fn store_cpu(slot: &AtomicU64) {
    slot.store(rt::thread_cpu_ns().unwrap_or(0), Release);
}

/// Stack of a queue thread: 1 MiB (a burst of 1024 packets on the stack is ~100 KiB) plus
/// the part `rt.prefault_stack_kib` touches. Kept small on purpose: with `mlockall(MCL_FUTURE)`
/// the kernel populates and locks the whole stack when the thread is created, and RX
/// sockets are already bound then (a 4 MiB stack took ~15 ms to populate here: datagrams
/// arriving meanwhile can overflow the socket buffer before the first read).
pub(super) fn thread_stack(config: &Config) -> usize {
    (1 << 20) + config.rt.prefault_stack_kib as usize * 1024
}

pub(super) fn spawn<T: Send + 'static>(
    name: &str,
    stack: usize,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, RuntimeError> {
    std_thread::Builder::new()
        .name(name.chars().take(15).collect())
        .stack_size(stack)
        .spawn(f)
        .map_err(|e| RuntimeError::Thread {
            queue: name.to_string(),
            message: format!("cannot spawn its thread: {e}"),
        })
}
