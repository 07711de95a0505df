//! # rtdaq-ucx-sys: UCX (UCP) for rtdaq
//!
//! The FFI foundation of UCX egress (issue #31), over Debian's UCX 1.13 (`libucx-dev`;
//! `pkg-config ucx`: `-lucp -luct -lucs -lucm`). Three layers (style guide §3.5):
//!
//! | layer | where | what |
//! |---|---|---|
//! | raw | [`raw`] | bindgen bindings of `<ucp/api/ucp.h>`, allowlisted to what the crate uses |
//! | result | `result` (private) | `ucs_status_t` → [`Result`]`<_, `[`UcxError`]`>` naming the call; `ucs_status_ptr_t` sorted into done / request / error (UCX's `UCS_PTR_*` macros, in Rust) |
//! | safe | crate root | [`Context`] ([`Features`], [`MemHandle`]), [`Worker`], [`Endpoint`] (client-server connect, tagged sends, flush, peer failure), [`Listener`], requests ([`Request`], [`RecvRequest`], [`SendTransfer`], [`RecvTransfer`]) |
//!
//! ## Use
//! ```no_run
//! use rtdaq_ucx_sys::{Context, Endpoint, Features, MemHandle, Poll, Worker};
//! use std::time::Duration;
//! # fn main() -> rtdaq_ucx_sys::Result<()> {
//! let ctx = Context::new(Features { tag: true, am: false })?;
//! let worker = Worker::new(&ctx)?; // Send: move it to the thread that uses it
//! let ep = Endpoint::connect(&worker, "192.0.2.1:13337".parse().unwrap())?;
//! ep.flush_blocking(Duration::from_secs(5))?; // the connection is up
//! let mut heap = vec![0u8; 1 << 20];
//! let memh = MemHandle::map(&ctx, &mut heap)?;
//! let mut t = ep.tag_send_owned(heap, 7, Some(&memh));
//! while t.check() == Poll::InProgress {
//!     worker.progress();
//!     if let Some(s) = ep.failed() {
//!         eprintln!("peer gone: {s}");
//!     }
//! }
//! let heap = t.into_buf().unwrap(); // reuse it
//! # drop(heap); Ok(()) }
//! ```
//!
//! ## Buffers of transfers in flight
//! UCX reads a send buffer (writes a receive buffer) until the request completes, possibly
//! after the call that posted it returned. Two APIs:
//!
//! - **owned, safe**: [`Endpoint::tag_send_owned`] / [`Worker::tag_recv_owned`] take the
//!   buffer ([`SendBuf`]: `Vec<u8>`, `Box<[u8]>`, `Arc<[u8]>`, `&'static [u8]`;
//!   [`RecvBuf`]: `Vec<u8>`, `Box<[u8]>`) and give it back when complete. A transfer dropped
//!   in flight parks its buffer with the worker, which frees it once UCX completes the
//!   request; one leaked with `mem::forget` leaks its buffer. Neither can let UCX touch
//!   freed memory. This is what code under `#![forbid(unsafe_code)]` (the appliance) uses;
//! - **borrowed, `unsafe`**: [`Endpoint::tag_send`] / [`Worker::tag_recv`] take `&'a [u8]` /
//!   `&'a mut [u8]` and return a request borrowing it, so the borrow checker holds the
//!   buffer while the request lives. That cannot be made safe by itself: a request can be
//!   leaked (`mem::forget` is safe) or dropped in flight (`ucp_request_free` lets UCX finish
//!   it later), ending the borrow while UCX still uses the buffer. The caller promises
//!   (`# Safety`) to keep the buffer until the request completes.
//!
//! A [`MemHandle`] passed with a transfer stays mapped until the transfer completes (owned:
//! a clone travels with it; borrowed: the request borrows it).
//!
//! ## Lifetimes and drop order
//! [`Worker`], [`MemHandle`] hold the context (`Arc`), so `ucp_cleanup` runs after the last
//! of them. [`Endpoint`]`<'w>`, [`Listener`]`<'w>` and requests borrow their [`Worker`]:
//! they are gone before `ucp_worker_destroy`, and an endpoint's `Drop` can progress the
//! worker until its forced close (`ucp_ep_close_nbx`, `UCP_EP_CLOSE_FLAG_FORCE`) completes
//! (bounded: [`CLOSE_TIMEOUT`]). The error-handler state each endpoint gives UCX lives on
//! the heap, owned by the endpoint, and is handed to the worker (freed after
//! `ucp_worker_destroy`) if the close did not complete, so a late callback never writes
//! freed memory.
//!
//! ## Threads
//! - [`Context`] and [`MemHandle`] are `Send + Sync`. The context is created with
//!   `mt_workers_shared = 0` (one worker per thread, no UCX-internal context locking
//!   requested); the context-level calls of this crate (`ucp_worker_create`/`_destroy`,
//!   `ucp_mem_map`/`_unmap`) take a Rust mutex, and the context state workers reach while
//!   they progress (registration cache, memory-type cache, `context->mt_lock`) is locked by
//!   UCX 1.13 itself in that mode too (checked in its source: `UCP_THREAD_CS_ENTER` falls
//!   back to a recursive spinlock). The appliance uses one worker per context.
//! - [`Worker`] is `Send`, not `Sync` (`UCS_THREAD_MODE_SINGLE`): create it anywhere, move
//!   it to its thread, use it there. Everything borrowing it (endpoints, listeners,
//!   requests, transfers) is therefore neither `Send` nor `Sync`: create those on the
//!   worker's thread.
//!
//! ## Failures
//! Endpoints use `UCP_ERR_HANDLING_MODE_PEER`: when the peer goes away, UCX calls the
//! endpoint's error handler from [`Worker::progress`] and [`Endpoint::failed`] reports the
//! status from then on; requests in flight on it complete with an error and new sends fail
//! without blocking. What UCX 1.13 reports over loopback TCP (measured by
//! `tests/loopback.rs`; match on [`Status::is_err`], not on one code):
//!
//! | event | status | after |
//! |---|---|---|
//! | nobody listens at the address (`ucp_ep_create` succeeds) | `UCS_ERR_NOT_CONNECTED` | < 5 ms of progress |
//! | the listener is dropped with the request queued | `UCS_ERR_REJECTED` | ms |
//! | the peer closes its endpoint or goes away | `UCS_ERR_CONNECTION_RESET` or `UCS_ERR_ENDPOINT_TIMEOUT` (depends on the transports) | ~1 ms |
//! | a send on an endpoint that failed | `UCS_ERR_ENDPOINT_TIMEOUT` | at once |
//!
//! A peer that vanishes without closing its sockets (power loss, cable) is only noticed by
//! UCX's keepalive (`UCX_KEEPALIVE_INTERVAL`, 20 s by default) or TCP's.
//!
//! ## Configuration
//! UCX reads its `UCX_*` environment variables in [`Context::new`] (`ucp_config_read`);
//! [`Context::with_options`] sets options on top without touching the environment
//! (e.g. `[("TLS", "tcp"), ("NET_DEVICES", "lo")]` for loopback TCP, what the tests use).
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod buf;
mod context;
mod endpoint;
mod error;
pub mod raw;
mod request;
mod result;
mod sockaddr;
mod worker;

pub use buf::{RecvBuf, SendBuf};
pub use context::{Context, Features, MemHandle, MemoryType};
pub use endpoint::{Endpoint, Listener, CLOSE_TIMEOUT};
pub use error::{Result, Status, UcxError};
pub use request::{
    Poll, RecvInfo, RecvPoll, RecvRequest, RecvState, RecvTransfer, Request, SendState,
    SendTransfer,
};
pub use worker::Worker;

/// The UCX version built against (`pkg-config --modversion ucx`).
pub const UCX_VERSION: &str = env!("RTDAQ_UCX_VERSION");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_display_is_ucx_text() {
        assert_eq!(Status::OK.text(), "Success");
        let s = Status::CONNECTION_RESET;
        assert!(s.is_err() && !s.is_ok());
        assert!(s.to_string().contains("-25"), "{s}");
        assert!(format!("{s:?}").starts_with("Status(-25: "), "{s:?}");
        let e = UcxError::call("ucp_ep_create", Status::UNREACHABLE);
        assert_eq!(e.status(), Some(Status::UNREACHABLE));
    }

    #[test]
    fn version_is_the_one_built_against() {
        let v = Context::version();
        assert!(
            v.starts_with(UCX_VERSION) || UCX_VERSION.starts_with(&v),
            "{v} vs {UCX_VERSION}"
        );
    }

    #[test]
    fn context_refuses_no_features_and_bad_options() {
        assert!(matches!(
            Context::new(Features::default()),
            Err(UcxError::Invalid(_))
        ));
        // A value UCX cannot parse is refused; an unknown name is not (UCX 1.13 keeps it
        // for the transports' configuration, which ignore what they do not know).
        let tag = Features {
            tag: true,
            am: false,
        };
        let e = Context::with_options(tag, &[("UCX_RNDV_THRESH", "lots")]).unwrap_err();
        assert!(matches!(e, UcxError::Option { .. }), "{e}");
        assert!(e.to_string().contains("RNDV_THRESH=\"lots\""), "{e}");
        assert!(matches!(
            Context::with_options(tag, &[("TL\0S", "tcp")]),
            Err(UcxError::Invalid(_))
        ));
    }

    #[test]
    fn context_from_the_environment() {
        // Whatever UCX_* variables the test runs with (none in CI): the defaults work.
        let ctx = Context::new(Features {
            tag: true,
            am: true,
        })
        .unwrap();
        assert!(ctx.features().tag && ctx.features().am);
        assert!(!ctx.as_raw().is_null());
    }

    #[test]
    fn worker_is_send_and_not_sync() {
        fn send<T: Send>() {}
        send::<Worker>();
        send::<Context>();
        send::<MemHandle>();
        // Not Sync: checked by the absence of `unsafe impl Sync` (RefCell inside); a
        // compile-fail test would need trybuild.
    }

    #[test]
    fn mem_handle_range_and_owned_sends_without_tag_feature() {
        let ctx = Context::with_options(
            Features {
                tag: false,
                am: true,
            },
            &[("TLS", "tcp"), ("NET_DEVICES", "lo")],
        )
        .unwrap();
        let mut buf = vec![0u8; 4096];
        let m = MemHandle::map(&ctx, &mut buf).unwrap();
        assert_eq!((m.addr(), m.len()), (buf.as_ptr() as usize, 4096));
        assert!(m.contains(buf[10..].as_ptr(), 4086));
        assert!(!m.contains(buf[10..].as_ptr(), 4087));
        assert!(MemHandle::map(&ctx, &mut []).is_err());
        let w = Worker::new(&ctx).unwrap();
        let mut t = w.tag_recv_owned(vec![0u8; 8], 1, u64::MAX);
        assert_eq!(t.check(), RecvPoll::Failed(Status::INVALID_PARAM));
        assert_eq!(t.into_buf().unwrap().len(), 8);
        drop(m);
        drop(ctx); // the worker keeps the context alive
        w.progress();
    }
}
