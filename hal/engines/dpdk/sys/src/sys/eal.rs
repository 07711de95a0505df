//! [`Eal`]: the once-per-process DPDK environment.
use std::ffi::{c_char, c_int, CString};
use std::sync::Mutex;

use super::{raw, result};
use crate::error::{eal_init_error, DpdkError, Result};

/// The initialised DPDK Environment Abstraction Layer of this process.
///
/// DPDK initialises once per process and cannot re-initialise, so there is at most one
/// `Eal`, living for the rest of the process (`&'static`). Every other type of the crate
/// takes a `&Eal` at construction: holding one proves the EAL is up.
///
/// The thread that calls [`Eal::init`] becomes the EAL main lcore; other threads are
/// "non-EAL" threads (`lcore_id == LCORE_ID_ANY`), which may use queues, pools and mbufs
/// (mempool per-lcore caches are then bypassed).
///
/// `rte_eal_cleanup` is not called: the process exit releases everything (and a port or
/// pool still in use on another thread would make cleanup unsound).
#[derive(Debug)]
pub struct Eal {
    args: Vec<String>,
    /// Ports opened by a [`Port`](crate::Port) (a closed vdev port stays claimed: DPDK
    /// releases it on close and it cannot be reopened).
    pub(crate) claimed: Mutex<Vec<u16>>,
}

enum State {
    Uninit,
    Ready(&'static Eal),
    Failed(DpdkError),
}

static STATE: Mutex<State> = Mutex::new(State::Uninit);

impl Eal {
    /// Initialises the EAL with `args` (without the program name: `"rtdaq"` is prepended as
    /// `argv[0]`), once per process.
    ///
    /// A second call with the same arguments returns the same `Eal` (so tests of one binary
    /// can share it); with different ones it fails with
    /// [`DpdkError::EalAlreadyInitialized`]. After a failed init every later call fails with
    /// [`DpdkError::EalInitFailedBefore`].
    ///
    /// Arguments that work without hugepages or a NIC:
    /// `["-l", "0", "--no-huge", "-m", "512", "--no-shconf", "--no-pci", "--vdev", "net_null0"]`.
    ///
    /// # Errors
    /// [`DpdkError::EalInit`] with the cause and fix (`EINVAL`: bad argument; `ENOMEM`: no
    /// hugepages; `ENOTSUP`: a device could not be probed; `EACCES`: not root...).
    /// [`DpdkError::InvalidArgument`] for an argument with a NUL byte.
    pub fn init<I, S>(args: I) -> Result<&'static Eal>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let args: Vec<String> = args.into_iter().map(|s| s.as_ref().to_owned()).collect();
        let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
        match &*state {
            State::Ready(eal) if eal.args == args => return Ok(eal),
            State::Ready(eal) => {
                return Err(DpdkError::EalAlreadyInitialized {
                    existing: eal.args.clone(),
                    requested: args,
                })
            }
            State::Failed(e) => {
                return Err(DpdkError::EalInitFailedBefore {
                    first: e.to_string(),
                })
            }
            State::Uninit => {}
        }
        let mut c_args: Vec<CString> = Vec::with_capacity(args.len() + 1);
        c_args.push(CString::new("rtdaq").expect("no NUL"));
        for a in &args {
            c_args.push(
                CString::new(a.as_str()).map_err(|_| DpdkError::InvalidArgument {
                    what: "EAL argument",
                    value: a.clone(),
                    why: "contains a NUL byte",
                })?,
            );
        }
        // The EAL may keep pointers into argv (it permutes the array and saves the strings
        // for telemetry); the strings and the array are leaked on purpose, once per process.
        let c_args: &'static mut [CString] = Vec::leak(c_args);
        let argv: &'static mut [*mut c_char] = Vec::leak(
            c_args
                .iter()
                .map(|c| c.as_ptr().cast_mut())
                .chain(std::iter::once(std::ptr::null_mut()))
                .collect(),
        );
        let argc = c_int::try_from(c_args.len()).map_err(|_| DpdkError::InvalidArgument {
            what: "EAL argument list",
            value: format!("{} arguments", c_args.len()),
            why: "too many arguments",
        })?;
        // SAFETY: argv holds argc valid NUL-terminated strings plus a NULL terminator, all
        // leaked ('static), so whatever the EAL keeps stays valid; STATE's lock guarantees
        // one call at a time and the state machine at most one successful call.
        let rc = unsafe { raw::rte_eal_init(argc, argv.as_mut_ptr()) };
        match result::minus_one_rte_errno(rc) {
            Ok(_) => {
                let eal: &'static Eal = Box::leak(Box::new(Eal {
                    args,
                    claimed: Mutex::new(Vec::new()),
                }));
                *state = State::Ready(eal);
                Ok(eal)
            }
            Err(errno) => {
                let e = eal_init_error(errno);
                *state = State::Failed(e.clone());
                Err(e)
            }
        }
    }

    /// The `Eal` if [`Eal::init`] succeeded in this process.
    pub fn get() -> Option<&'static Eal> {
        match &*STATE.lock().unwrap_or_else(|p| p.into_inner()) {
            State::Ready(eal) => Some(eal),
            _ => None,
        }
    }

    /// The arguments it was initialised with (without `argv[0]`).
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// Number of EAL lcores (`rte_lcore_count`).
    pub fn lcore_count(&self) -> u32 {
        // SAFETY: plain getter; the EAL is initialised (self exists).
        unsafe { raw::rte_lcore_count() }
    }

    /// The main lcore id (`rte_get_main_lcore`).
    pub fn main_lcore(&self) -> u32 {
        // SAFETY: plain getter; the EAL is initialised.
        unsafe { raw::rte_get_main_lcore() }
    }

    /// Gives the calling thread an lcore id if it has none (`rte_thread_register`), so that
    /// DPDK's per-lcore state serves it: above all each mempool's per-lcore cache. A
    /// non-EAL thread's `rte_pktmbuf_alloc`/`free` otherwise go straight to the mempool's
    /// shared ring, first in first out, cycling through every mbuf of the pool (cold mbuf
    /// headers and data on each use) where a cached lcore reuses the few it just freed.
    /// The thread keeps its affinity (DPDK reads it, does not set it): pin it first.
    ///
    /// The registration ends when the thread exits (a thread-local guard calls
    /// `rte_thread_unregister`); a second call on a registered thread, or on an EAL lcore,
    /// returns its id. Cold path.
    ///
    /// # Errors
    /// [`DpdkError::ThreadRegister`] when no lcore id is free.
    pub fn register_thread(&self) -> Result<u32> {
        if let Some(id) = self.current_lcore() {
            return Ok(id);
        }
        // SAFETY: the EAL is initialised (`&self`); registers the calling thread only.
        let rc = unsafe { raw::rte_thread_register() };
        if let Err(e) = result::minus_one_rte_errno(rc) {
            return Err(DpdkError::ThreadRegister {
                errno: e,
                errno_name: crate::error::errno_name(e),
                msg: result::strerror(e),
            });
        }
        REGISTRATION.with(|r| r.set(Some(Registration)));
        self.current_lcore().ok_or(DpdkError::ThreadRegister {
            errno: 0,
            errno_name: "-",
            msg: "rte_thread_register returned 0 but the thread has no lcore id".to_owned(),
        })
    }

    /// This thread's lcore id, `None` for a non-EAL thread (`rte_lcore_id`).
    pub fn current_lcore(&self) -> Option<u32> {
        // SAFETY: reads a thread-local through the shim.
        let id = unsafe { raw::rtdaq_lcore_id() };
        (id != u32::MAX).then_some(id)
    }

    /// Number of usable ethdev ports (`rte_eth_dev_count_avail`).
    pub fn port_count(&self) -> u16 {
        // SAFETY: plain getter; the EAL is initialised.
        unsafe { raw::rte_eth_dev_count_avail() }
    }

    /// Names of every valid port, by port id.
    pub fn port_names(&self) -> Vec<(u16, String)> {
        (0..raw::RTE_MAX_ETHPORTS as u16)
            .filter_map(|p| super::port::port_name(p).map(|n| (p, n)))
            .collect()
    }
}

/// Ends a thread's `rte_thread_register` registration when the thread exits.
struct Registration;

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: runs on the registered thread (a thread-local's destructor), whose
        // registration this ends; the EAL is never cleaned up (see `Eal`).
        unsafe { raw::rte_thread_unregister() };
    }
}

std::thread_local! {
    /// Set on a thread that [`Eal::register_thread`] registered.
    static REGISTRATION: std::cell::Cell<Option<Registration>> = const { std::cell::Cell::new(None) };
}
