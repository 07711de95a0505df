//! Connections: client [`Endpoint`]s (`ucp_ep_create` to a socket address), the server's
//! [`Listener`] (`ucp_listener_create`) and the endpoints it accepts, tagged sends.
use std::collections::VecDeque;
use std::ffi::c_void;
use std::net::SocketAddr;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::buf::sealed::Held;
use crate::buf::SendBuf;
use crate::context::MemHandle;
use crate::error::{Result, Status, UcxError};
use crate::raw;
use crate::request::{free_request, poll_send, Poll, Request, SendState, SendTransfer};
use crate::result::{check, dt_make_contig, status_ptr, StatusPtr};
use crate::sockaddr::{from_storage, CSockAddr};
use crate::worker::Worker;

/// How long dropping an [`Endpoint`] progresses its worker for the close to complete.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// The error handler's state: 0 while the endpoint is fine, else the first failure status.
type EpState = AtomicI32;

/// `ucp_err_handler_cb_t`: records the first failure of the endpoint.
unsafe extern "C" fn ep_error_cb(arg: *mut c_void, _ep: raw::ucp_ep_h, status: raw::ucs_status_t) {
    if arg.is_null() {
        return;
    }
    // SAFETY: arg is the Box<EpState> of the endpoint, alive until its close completed (or,
    // when it did not, until the worker is destroyed: Worker::bury).
    let state = unsafe { &*arg.cast::<EpState>() };
    let code = if status < 0 {
        i32::from(status)
    } else {
        i32::from(raw::UCS_ERR_IO_ERROR)
    };
    // The first failure wins.
    let _ = state.compare_exchange(0, code, Ordering::Release, Ordering::Relaxed);
}

/// A UCP endpoint (`ucp_ep_h`): a connection to one peer, created in
/// `UCP_ERR_HANDLING_MODE_PEER` with an error handler that [`failed`](Self::failed) reports.
///
/// It borrows its [`Worker`]: the borrow checker keeps the worker alive (and on its one
/// thread) while the endpoint exists, which its `Drop` needs: dropping closes it
/// (`ucp_ep_close_nbx`, `UCP_EP_CLOSE_FLAG_FORCE`: no goodbye to the peer, outstanding
/// requests complete with `UCS_ERR_CANCELED`) and progresses the worker until the close
/// completes, for at most [`CLOSE_TIMEOUT`]. After that, the error handler's state is kept
/// by the worker until it is destroyed, so a late callback never writes freed memory.
pub struct Endpoint<'w> {
    h: NonNull<raw::ucp_ep>,
    worker: &'w Worker,
    /// `None` only during drop.
    state: Option<Box<EpState>>,
    peer: Option<SocketAddr>,
}

impl<'w> Endpoint<'w> {
    /// Starts a client-server connection to a UCP [`Listener`] at `addr` (`ucp_ep_create`
    /// with `UCP_EP_PARAMS_FLAGS_CLIENT_SERVER`, `UCP_EP_PARAM_FIELD_SOCK_ADDR`, error
    /// handling `PEER`).
    ///
    /// Returns at once: the connection completes while the worker progresses. Sends may be
    /// posted right away (UCX queues them until it is up); to know that it is,
    /// [`flush_blocking`](Self::flush_blocking). A peer that cannot be reached shows as
    /// [`failed`](Self::failed) after some progress, not as an error here.
    ///
    /// # Errors
    /// [`UcxError::Call`] when `ucp_ep_create` fails at once (no transport can reach the
    /// address family, ...).
    pub fn connect(worker: &'w Worker, addr: SocketAddr) -> Result<Endpoint<'w>> {
        let sa = CSockAddr::new(&addr);
        let params = raw::ucp_ep_params_t {
            field_mask: u64::from(
                raw::UCP_EP_PARAM_FIELD_FLAGS
                    | raw::UCP_EP_PARAM_FIELD_SOCK_ADDR
                    | raw::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE
                    | raw::UCP_EP_PARAM_FIELD_ERR_HANDLER,
            ),
            flags: raw::UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
            sockaddr: sa.as_ucs(),
            ..Default::default()
        };
        // `sa` outlives the call; UCX copies the address.
        Endpoint::create(worker, params, Some(addr))
    }

    /// The server side of an accepted connection request.
    fn from_conn_request(
        worker: &'w Worker,
        req: NonNull<raw::ucp_conn_request>,
    ) -> Result<Endpoint<'w>> {
        let params = raw::ucp_ep_params_t {
            field_mask: u64::from(
                raw::UCP_EP_PARAM_FIELD_CONN_REQUEST
                    | raw::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE
                    | raw::UCP_EP_PARAM_FIELD_ERR_HANDLER,
            ),
            conn_request: req.as_ptr(),
            ..Default::default()
        };
        Endpoint::create(worker, params, None)
    }

    /// `ucp_ep_create` with `params` plus error handling `PEER` and the error handler.
    fn create(
        worker: &'w Worker,
        mut params: raw::ucp_ep_params_t,
        peer: Option<SocketAddr>,
    ) -> Result<Endpoint<'w>> {
        let state = Box::new(EpState::new(0));
        params.err_mode = raw::UCP_ERR_HANDLING_MODE_PEER;
        params.err_handler = raw::ucp_err_handler_t {
            cb: Some(ep_error_cb),
            arg: (&*state as *const EpState).cast_mut().cast(),
        };
        let mut h: raw::ucp_ep_h = std::ptr::null_mut();
        // SAFETY: a live worker on its thread; params point at memory valid for the call
        // (the socket address, owned by the caller) and at the error state, which lives
        // until the endpoint's close completed (Drop); h is a valid out pointer.
        let st = unsafe { raw::ucp_ep_create(worker.as_raw(), &params, &mut h) };
        check(st, "ucp_ep_create")?;
        let h = NonNull::new(h).ok_or(UcxError::call("ucp_ep_create", Status::IO_ERROR))?;
        Ok(Endpoint {
            h,
            worker,
            state: Some(state),
            peer,
        })
    }

    /// The failure UCX reported for this endpoint, or `None` while it is fine: over TCP,
    /// `UCS_ERR_NOT_CONNECTED` when nobody listens at the address, `UCS_ERR_REJECTED` when
    /// the server rejected the request, `UCS_ERR_CONNECTION_RESET` or
    /// `UCS_ERR_ENDPOINT_TIMEOUT` when the peer went away (see the crate docs, "Failures").
    /// Updated by [`Worker::progress`]. A failed endpoint stays failed: drop it and connect
    /// anew.
    pub fn failed(&self) -> Option<Status> {
        let code = self.state.as_ref().map_or(0, |s| s.load(Ordering::Acquire));
        // Only ucs_status_t values (i8) are stored.
        (code != 0).then_some(Status(code as raw::ucs_status_t))
    }

    /// Flushes the endpoint (`ucp_ep_flush_nbx`) and progresses the worker until the flush
    /// completes or `timeout` passes. On a new client endpoint, success means the
    /// connection is up.
    ///
    /// # Errors
    /// [`UcxError::Call`] when the flush fails (the endpoint failed: the status is that of
    /// [`failed`](Self::failed)); [`UcxError::Timeout`] when it did not complete in time
    /// (the flush request is released when it completes).
    pub fn flush_blocking(&self, timeout: Duration) -> Result<()> {
        let param = raw::ucp_request_param_t::default();
        // SAFETY: a live endpoint of a live worker, on its thread; param valid for the call.
        let p = unsafe { raw::ucp_ep_flush_nbx(self.h.as_ptr(), &param) };
        let req = match status_ptr(p) {
            StatusPtr::Done => return Ok(()),
            StatusPtr::Err(s) => return Err(UcxError::call("ucp_ep_flush_nbx", s)),
            StatusPtr::Pending(req) => req,
        };
        let start = Instant::now();
        let res = loop {
            match poll_send(req) {
                Poll::Done => break Ok(()),
                Poll::Failed(s) => break Err(UcxError::call("ucp_ep_flush_nbx", s)),
                Poll::InProgress if start.elapsed() >= timeout => {
                    break Err(UcxError::Timeout {
                        what: "ucp_ep_flush_nbx",
                        after: timeout,
                    })
                }
                Poll::InProgress => {
                    self.worker.progress();
                }
            }
        };
        free_request(req);
        res
    }

    /// Sends `data` with `tag` (`ucp_tag_send_nbx`, contiguous bytes, no callback;
    /// `UCP_OP_ATTR_FIELD_MEMH` with `memh`, which must cover `data`).
    ///
    /// Returns [`SendState::Done`] when the send completed in the call (small messages are
    /// copied out), else [`SendState::Pending`] with the request, completed by
    /// [`Worker::progress`]. A send on a failed endpoint fails, at once or on completion;
    /// it never blocks.
    ///
    /// # Safety
    /// UCX reads `data` until the request completes. The request borrows `data` (and
    /// `memh`), so while it lives the borrow checker keeps them alive and unmodified; the
    /// caller must keep it that way until [`Request::check`] stops returning
    /// `InProgress`, or until the worker is dropped: do not leak the request
    /// (`mem::forget`), and do not free or modify `data` after dropping an incomplete one.
    /// The safe alternative is [`tag_send_owned`](Self::tag_send_owned).
    ///
    /// # Errors
    /// [`UcxError::Invalid`] when the context lacks [`Features::tag`](crate::Features) or
    /// `memh` is of another context or does not cover `data`; [`UcxError::Call`] for an
    /// immediate error (e.g. the endpoint's failure status).
    pub unsafe fn tag_send<'a>(
        &self,
        data: &'a [u8],
        tag: u64,
        memh: Option<&'a MemHandle>,
    ) -> Result<SendState<'a>>
    where
        'w: 'a,
    {
        match self.post_send(data.as_ptr(), data.len(), tag, memh)? {
            None => Ok(SendState::Done),
            Some(req) => Ok(SendState::Pending(Request::new(req))),
        }
    }

    /// [`tag_send`](Self::tag_send) of an owned buffer: safe. The transfer holds the buffer
    /// (and a clone of `memh`) until the send completes, then gives it back
    /// ([`SendTransfer::into_buf`]). An immediate failure is a transfer in the failed state:
    /// the endpoint's failure status, or `UCS_ERR_INVALID_PARAM` for what
    /// [`tag_send`](Self::tag_send) refuses as [`UcxError::Invalid`].
    pub fn tag_send_owned<B: SendBuf>(
        &self,
        buf: B,
        tag: u64,
        memh: Option<&MemHandle>,
    ) -> SendTransfer<'w, B> {
        self.send_owned(buf, None, tag, memh)
    }

    /// [`tag_send_owned`](Self::tag_send_owned) of the first `len` bytes of `buf` (a
    /// fixed-capacity buffer filled in part); the whole buffer comes back. `len` beyond the
    /// buffer is a transfer failed with `UCS_ERR_INVALID_PARAM`.
    pub fn tag_send_prefix_owned<B: SendBuf>(
        &self,
        buf: B,
        len: usize,
        tag: u64,
        memh: Option<&MemHandle>,
    ) -> SendTransfer<'w, B> {
        self.send_owned(buf, Some(len), tag, memh)
    }

    /// Owned send of the first `len` bytes (`None`: all); `len` beyond the buffer fails.
    fn send_owned<B: SendBuf>(
        &self,
        buf: B,
        len: Option<usize>,
        tag: u64,
        memh: Option<&MemHandle>,
    ) -> SendTransfer<'w, B> {
        let held = buf.into_held();
        let n = len.unwrap_or(held.len());
        let posted = if n > held.len() {
            Err(Status::INVALID_PARAM)
        } else {
            self.post_send(held.ptr(), n, tag, memh)
                .map_err(|e| e.status().unwrap_or(Status::INVALID_PARAM))
        };
        SendTransfer::new(self.worker, held, n, memh.cloned(), posted)
    }

    /// `ucp_tag_send_nbx` of `len` bytes at `ptr`: `None` when done in the call, else the
    /// request.
    fn post_send(
        &self,
        ptr: *const u8,
        len: usize,
        tag: u64,
        memh: Option<&MemHandle>,
    ) -> Result<Option<NonNull<c_void>>> {
        self.worker.require_tag()?;
        let mut param = raw::ucp_request_param_t {
            op_attr_mask: raw::UCP_OP_ATTR_FIELD_DATATYPE,
            datatype: dt_make_contig(1),
            ..Default::default()
        };
        if let Some(m) = memh {
            if !m.same_context(&self.worker.ctx) {
                return Err(UcxError::Invalid(
                    "memory handle of another UCP context".into(),
                ));
            }
            if !m.contains(ptr, len) {
                return Err(UcxError::Invalid(format!(
                    "{len} bytes at {ptr:p} are outside the memory handle ({:#x}, {} bytes)",
                    m.addr(),
                    m.len()
                )));
            }
            param.op_attr_mask |= raw::UCP_OP_ATTR_FIELD_MEMH | raw::UCP_OP_ATTR_FIELD_MEMORY_TYPE;
            param.memh = m.as_raw();
            param.memory_type = m.memory_type().raw();
        }
        // SAFETY: a live endpoint of a live worker, on its thread; ptr..ptr+len is readable
        // memory the caller keeps valid until the request completes (tag_send's contract,
        // or owned by the transfer); memh, when given, covers it and stays mapped as long
        // (borrowed by the request, or cloned into the transfer); param is valid for the
        // call.
        let p = unsafe { raw::ucp_tag_send_nbx(self.h.as_ptr(), ptr.cast(), len, tag, &param) };
        match status_ptr(p) {
            StatusPtr::Done => Ok(None),
            StatusPtr::Pending(req) => Ok(Some(req)),
            StatusPtr::Err(s) => Err(UcxError::call("ucp_tag_send_nbx", s)),
        }
    }

    /// The worker this endpoint belongs to.
    pub fn worker(&self) -> &'w Worker {
        self.worker
    }

    /// The address connected to (client endpoints; `None` for accepted ones).
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// The raw handle; valid while `self` lives.
    pub fn as_raw(&self) -> raw::ucp_ep_h {
        self.h.as_ptr()
    }
}

impl std::fmt::Debug for Endpoint<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("handle", &self.h)
            .field("peer", &self.peer)
            .field("failed", &self.failed())
            .finish()
    }
}

impl Drop for Endpoint<'_> {
    fn drop(&mut self) {
        let param = raw::ucp_request_param_t {
            op_attr_mask: raw::UCP_OP_ATTR_FIELD_FLAGS,
            flags: raw::UCP_EP_CLOSE_FLAG_FORCE,
            ..Default::default()
        };
        // SAFETY: a live endpoint of the live worker it borrows, on the worker's thread,
        // closed once; param valid for the call.
        let p = unsafe { raw::ucp_ep_close_nbx(self.h.as_ptr(), &param) };
        let closed = match status_ptr(p) {
            StatusPtr::Done => true,
            // The endpoint may live on: keep its state until the worker is destroyed.
            StatusPtr::Err(_) => false,
            StatusPtr::Pending(req) => {
                let done = self
                    .worker
                    .progress_until(CLOSE_TIMEOUT, || poll_send(req) != Poll::InProgress);
                free_request(req);
                done
            }
        };
        if let Some(state) = self.state.take() {
            if !closed {
                self.worker.bury(state);
            }
        }
    }
}

/// A queued connection request (`ucp_conn_request_h`).
struct ConnRequest(NonNull<raw::ucp_conn_request>);

// SAFETY: a handle of the listener's worker, only passed back to UCX on that worker's
// thread (Listener borrows the worker).
unsafe impl Send for ConnRequest {}

/// The listener's connection-request queue, filled by the callback.
struct ListenerState {
    queue: Mutex<VecDeque<ConnRequest>>,
}

/// `ucp_listener_conn_callback_t`: queues the request for [`Listener::accept`].
unsafe extern "C" fn conn_request_cb(req: raw::ucp_conn_request_h, arg: *mut c_void) {
    let (Some(req), false) = (NonNull::new(req), arg.is_null()) else {
        return;
    };
    // SAFETY: arg is the listener's Box<ListenerState>, alive until after
    // ucp_listener_destroy (which removes pending callbacks).
    let state = unsafe { &*arg.cast::<ListenerState>() };
    state
        .queue
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push_back(ConnRequest(req));
}

/// A UCP listener (`ucp_listener_h`): accepts client-server connections on a socket
/// address. Connection requests are queued as [`Worker::progress`] sees them and become
/// endpoints with [`accept`](Self::accept); dropping the listener rejects those still
/// queued. Borrows its worker, like [`Endpoint`].
pub struct Listener<'w> {
    h: NonNull<raw::ucp_listener>,
    worker: &'w Worker,
    state: Box<ListenerState>,
    local: SocketAddr,
}

impl<'w> Listener<'w> {
    /// Listens on `addr` (`ucp_listener_create`, `UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
    /// CONN_HANDLER`); port 0 picks a free port ([`local_addr`](Self::local_addr)).
    ///
    /// # Errors
    /// [`UcxError::Call`] when `ucp_listener_create` fails (`UCS_ERR_BUSY`: address in use;
    /// `UCS_ERR_UNSUPPORTED`/`UCS_ERR_NO_DEVICE`: no connection manager for it) or
    /// `ucp_listener_query` does.
    pub fn new(worker: &'w Worker, addr: SocketAddr) -> Result<Listener<'w>> {
        let state = Box::new(ListenerState {
            queue: Mutex::new(VecDeque::new()),
        });
        let sa = CSockAddr::new(&addr);
        let params = raw::ucp_listener_params_t {
            field_mask: u64::from(
                raw::UCP_LISTENER_PARAM_FIELD_SOCK_ADDR
                    | raw::UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
            ),
            sockaddr: sa.as_ucs(),
            conn_handler: raw::ucp_listener_conn_handler_t {
                cb: Some(conn_request_cb),
                arg: (&*state as *const ListenerState).cast_mut().cast(),
            },
            ..Default::default()
        };
        let mut h: raw::ucp_listener_h = std::ptr::null_mut();
        // SAFETY: a live worker on its thread; params valid for the call (UCX copies the
        // address); the callback's state lives until after ucp_listener_destroy (Drop).
        let st = unsafe { raw::ucp_listener_create(worker.as_raw(), &params, &mut h) };
        check(st, "ucp_listener_create")?;
        let h = NonNull::new(h).ok_or(UcxError::call("ucp_listener_create", Status::IO_ERROR))?;
        let mut listener = Listener {
            h,
            worker,
            state,
            local: addr,
        };
        listener.local = listener.query()?;
        Ok(listener)
    }

    /// `ucp_listener_query`: the address actually bound.
    fn query(&self) -> Result<SocketAddr> {
        let mut attr = raw::ucp_listener_attr_t {
            field_mask: u64::from(raw::UCP_LISTENER_ATTR_FIELD_SOCKADDR),
            ..Default::default()
        };
        // SAFETY: a live listener; attr a valid out pointer.
        let st = unsafe { raw::ucp_listener_query(self.h.as_ptr(), &mut attr) };
        check(st, "ucp_listener_query")?;
        from_storage(&attr.sockaddr).ok_or_else(|| {
            UcxError::Invalid(format!(
                "ucp_listener_query returned address family {}",
                attr.sockaddr.ss_family
            ))
        })
    }

    /// The address listened on, with the port chosen when created with port 0.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Connection requests waiting for [`accept`](Self::accept).
    pub fn pending(&self) -> usize {
        self.lock_queue().len()
    }

    /// Accepts the oldest queued connection request (`ucp_ep_create` with
    /// `UCP_EP_PARAM_FIELD_CONN_REQUEST`, error handling `PEER`); `None` when none is
    /// queued ([`Worker::progress`] queues them).
    pub fn accept(&self) -> Option<Result<Endpoint<'w>>> {
        let req = self.lock_queue().pop_front()?;
        Some(Endpoint::from_conn_request(self.worker, req.0))
    }

    fn lock_queue(&self) -> std::sync::MutexGuard<'_, VecDeque<ConnRequest>> {
        self.state.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The raw handle; valid while `self` lives.
    pub fn as_raw(&self) -> raw::ucp_listener_h {
        self.h.as_ptr()
    }
}

impl std::fmt::Debug for Listener<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("local", &self.local)
            .field("pending", &self.pending())
            .finish()
    }
}

impl Drop for Listener<'_> {
    fn drop(&mut self) {
        let queued: Vec<ConnRequest> = self.lock_queue().drain(..).collect();
        for r in queued {
            // A failure needs nothing done (the client may be gone already).
            // SAFETY: a connection request of this live listener, neither accepted nor
            // rejected before (popped from the queue once).
            let _ = unsafe { raw::ucp_listener_reject(self.h.as_ptr(), r.0.as_ptr()) };
        }
        // SAFETY: created by ucp_listener_create, destroyed once, on the worker's thread;
        // it removes pending connection callbacks, so `state` (dropped after this) is
        // never used again.
        unsafe { raw::ucp_listener_destroy(self.h.as_ptr()) }
    }
}
