//! The UCP worker ([`Worker`], `ucp_worker_h`): progress, tagged receives, and the parking
//! lot of transfers dropped in flight.
use std::any::Any;
use std::cell::RefCell;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::buf::sealed::Held;
use crate::buf::RecvBuf;
use crate::context::{Context, ContextInner};
use crate::error::{Result, Status, UcxError};
use crate::raw;
use crate::request::{
    free_request, poll_recv, RecvInfo, RecvPoll, RecvRequest, RecvState, RecvTransfer,
};
use crate::result::{check, dt_make_contig, status_ptr, StatusPtr};

/// A request dropped in flight with what it uses (buffer, memory handle), freed together
/// once UCX completes the request.
struct Parked {
    req: NonNull<c_void>,
    _keep: Box<dyn Any + Send>,
}

/// What the worker keeps for requests and endpoints dropped before UCX was done with them.
#[derive(Default)]
struct Lot {
    /// Transfers dropped in flight: reaped by `progress`, the rest freed after
    /// `ucp_worker_destroy`.
    parked: Vec<Parked>,
    /// Error-handler states of endpoints whose close did not complete in time: UCX may
    /// still call their handler until the worker is destroyed.
    states: Vec<Box<dyn Any + Send>>,
}

/// A UCP worker (`ucp_worker_h`, `UCS_THREAD_MODE_SINGLE`): the progress engine that owns
/// endpoints, listeners and requests.
///
/// `Send` (create it, then move it to the thread that uses it) but not `Sync`: one thread
/// calls it. [`Endpoint`](crate::Endpoint)s, [`Listener`](crate::Listener)s and requests
/// borrow it, so they are created on, and stay on, that thread, and they are gone before
/// `ucp_worker_destroy` runs. Holds its [`Context`] alive.
pub struct Worker {
    h: NonNull<raw::ucp_worker>,
    pub(crate) ctx: Arc<ContextInner>,
    lot: RefCell<Lot>,
}

// SAFETY: a single-thread-mode worker needs calls from one thread at a time, not always the
// same thread: UCX 1.13 always runs its async events on its own async thread
// (UCS_ASYNC_THREAD_LOCK_TYPE, never signal mode, for workers), so nothing is tied to the
// creating thread. Moving the Worker hands it over with a happens-before edge; it is !Sync
// (RefCell), and everything that calls it borrows it, so calls never overlap. The parked
// requests are handles of this worker (they move with it); parked values are Send.
unsafe impl Send for Worker {}

impl Worker {
    /// Creates a worker on `ctx` (`ucp_worker_create`, `UCS_THREAD_MODE_SINGLE`).
    ///
    /// # Errors
    /// [`UcxError::Call`] when `ucp_worker_create` fails.
    pub fn new(ctx: &Context) -> Result<Worker> {
        let params = raw::ucp_worker_params_t {
            field_mask: u64::from(raw::UCP_WORKER_PARAM_FIELD_THREAD_MODE),
            thread_mode: raw::UCS_THREAD_MODE_SINGLE,
            ..Default::default()
        };
        let mut h: raw::ucp_worker_h = std::ptr::null_mut();
        {
            let _g = ctx.inner.lock();
            // SAFETY: a live context, valid params, h a valid out pointer.
            let st = unsafe { raw::ucp_worker_create(ctx.inner.raw(), &params, &mut h) };
            check(st, "ucp_worker_create")?;
        }
        let h = NonNull::new(h).ok_or(UcxError::call("ucp_worker_create", Status::IO_ERROR))?;
        Ok(Worker {
            h,
            ctx: Arc::clone(&ctx.inner),
            lot: RefCell::new(Lot::default()),
        })
    }

    /// One round of progress (`ucp_worker_progress`): sends, receives, connection
    /// establishment and error detection all advance only here. Returns the number of
    /// events processed (0: nothing happened). Also frees transfers dropped in flight that
    /// have completed since.
    pub fn progress(&self) -> u32 {
        // SAFETY: a live worker, called from its one thread (&self of a !Sync type).
        let n = unsafe { raw::ucp_worker_progress(self.h.as_ptr()) };
        self.reap();
        n
    }

    /// Progresses until `done()` returns true (checked before each round) or `timeout`
    /// passes; returns whether `done()` became true.
    pub fn progress_until(&self, timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
        let start = Instant::now();
        loop {
            if done() {
                return true;
            }
            if start.elapsed() >= timeout {
                return false;
            }
            if self.progress() == 0 {
                std::hint::spin_loop();
            }
        }
    }

    /// Posts a tagged receive into `buf` (`ucp_tag_recv_nbx`): matches a message whose tag
    /// equals `tag` in the bits set in `mask` (`u64::MAX`: exactly `tag`; `0`: any).
    /// A message that already arrived completes in the call ([`RecvState::Done`] with its
    /// length and sender tag); otherwise the request is
    /// [`RecvState::Pending`], completed by [`progress`](Self::progress).
    ///
    /// # Safety
    /// UCX writes `buf` until the receive completes. The returned request borrows `buf`,
    /// so while it lives the borrow checker keeps `buf` alive and untouched; the caller must
    /// keep it that way until [`RecvRequest::check`] stops returning `InProgress`, or until
    /// this worker is dropped: do not leak the request (`mem::forget`), and if an incomplete
    /// request is dropped (which cancels it), keep `buf` valid anyway, as a receive already
    /// matched to a rendezvous message cannot be cancelled. The safe alternative is
    /// [`tag_recv_owned`](Self::tag_recv_owned).
    ///
    /// # Errors
    /// [`UcxError::Invalid`] when the context lacks [`Features::tag`](crate::Features);
    /// [`UcxError::Call`] for an immediate error (`UCS_ERR_MESSAGE_TRUNCATED`: an arrived
    /// message longer than `buf`).
    pub unsafe fn tag_recv<'a>(
        &'a self,
        buf: &'a mut [u8],
        tag: u64,
        mask: u64,
    ) -> Result<RecvState<'a>> {
        match self.post_recv(buf.as_mut_ptr(), buf.len(), tag, mask)? {
            Ok(info) => Ok(RecvState::Done(info)),
            Err(req) => Ok(RecvState::Pending(RecvRequest::new(req, self))),
        }
    }

    /// [`tag_recv`](Self::tag_recv) into an owned buffer: safe. The transfer gives the
    /// buffer back once complete ([`RecvTransfer::into_buf`]); an immediate failure is a
    /// transfer in the failed state (`UCS_ERR_INVALID_PARAM` when the context lacks
    /// [`Features::tag`](crate::Features)).
    pub fn tag_recv_owned<B: RecvBuf>(&self, buf: B, tag: u64, mask: u64) -> RecvTransfer<'_, B> {
        let held = buf.into_held();
        let posted = self
            .post_recv(held.ptr(), held.len(), tag, mask)
            .map_err(|e| e.status().unwrap_or(Status::INVALID_PARAM));
        RecvTransfer::new(self, held, posted)
    }

    /// `ucp_tag_recv_nbx` into `len` bytes at `ptr`: the info of an immediate completion,
    /// or the request.
    fn post_recv(
        &self,
        ptr: *mut u8,
        len: usize,
        tag: u64,
        mask: u64,
    ) -> Result<Result<RecvInfo, NonNull<c_void>>> {
        self.require_tag()?;
        // UCX before 1.16 does not fill `recv_info.tag_info` when a receive completes in
        // the call (fixed by openucx/ucx df0798c, "UCP/TAG: Populate tag_info on immediate
        // completion"), though 1.13's header documents it. So immediate completion is
        // denied (UCP_OP_ATTR_FLAG_NO_IMM_CMPL): a request always comes back, completed or
        // not, and ucp_tag_recv_request_test reads length and sender tag from it.
        let param = raw::ucp_request_param_t {
            op_attr_mask: raw::UCP_OP_ATTR_FIELD_DATATYPE | raw::UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
            datatype: dt_make_contig(1),
            ..Default::default()
        };
        // SAFETY: a live worker on its thread; ptr..ptr+len is writable memory the caller
        // keeps valid until the receive completes (tag_recv's contract, or owned by the
        // transfer); param is valid for the call.
        let p =
            unsafe { raw::ucp_tag_recv_nbx(self.h.as_ptr(), ptr.cast(), len, tag, mask, &param) };
        let req = match status_ptr(p) {
            StatusPtr::Pending(req) => req,
            StatusPtr::Err(s) => return Err(UcxError::call("ucp_tag_recv_nbx", s)),
            // Not returned with NO_IMM_CMPL; no info to report.
            StatusPtr::Done => return Err(UcxError::call("ucp_tag_recv_nbx", Status::NO_MESSAGE)),
        };
        match poll_recv(req) {
            RecvPoll::InProgress => Ok(Err(req)),
            RecvPoll::Done(info) => {
                free_request(req);
                Ok(Ok(info))
            }
            RecvPoll::Failed(s) => {
                free_request(req);
                Err(UcxError::call("ucp_tag_recv_nbx", s))
            }
        }
    }

    /// Errors unless the context has the tag feature.
    pub(crate) fn require_tag(&self) -> Result<()> {
        if self.ctx.features().tag {
            Ok(())
        } else {
            Err(UcxError::Invalid(
                "tagged messages need a context created with Features { tag: true, .. }".into(),
            ))
        }
    }

    /// `ucp_request_cancel` of a receive request of this worker.
    pub(crate) fn cancel(&self, req: NonNull<c_void>) {
        // SAFETY: a live request of this live worker, on the worker's thread.
        unsafe { raw::ucp_request_cancel(self.h.as_ptr(), req.as_ptr()) }
    }

    /// Keeps `keep` until request `req` completes (then frees both).
    pub(crate) fn park(&self, req: NonNull<c_void>, keep: Box<dyn Any + Send>) {
        self.lot
            .borrow_mut()
            .parked
            .push(Parked { req, _keep: keep });
    }

    /// Keeps an endpoint's error-handler state until the worker is destroyed.
    pub(crate) fn bury(&self, state: Box<dyn Any + Send>) {
        self.lot.borrow_mut().states.push(state);
    }

    /// Transfers parked and not completed yet.
    pub fn parked(&self) -> usize {
        self.lot.borrow().parked.len()
    }

    /// Frees parked requests UCX has completed, with their buffers.
    fn reap(&self) {
        let Ok(mut lot) = self.lot.try_borrow_mut() else {
            return;
        };
        if lot.parked.is_empty() {
            return;
        }
        lot.parked.retain(|p| {
            // SAFETY: a live request of this worker, not freed yet.
            let st = unsafe { raw::ucp_request_check_status(p.req.as_ptr()) };
            if st == raw::UCS_INPROGRESS {
                return true;
            }
            free_request(p.req);
            false
        });
    }

    /// The raw handle, for calls this crate does not wrap; valid while `self` lives.
    pub fn as_raw(&self) -> raw::ucp_worker_h {
        self.h.as_ptr()
    }
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("handle", &self.h)
            .field("parked", &self.lot.borrow().parked.len())
            .finish()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let lot = self.lot.get_mut();
        for p in &lot.parked {
            // Incomplete ones are released by ucp_worker_destroy; the buffers (in `lot`)
            // are freed after it, below.
            free_request(p.req);
        }
        {
            let _g = self.ctx.lock();
            // SAFETY: created by ucp_worker_create, destroyed once; every endpoint,
            // listener and borrowed request of it is gone (they borrow the worker).
            unsafe { raw::ucp_worker_destroy(self.h.as_ptr()) };
        }
        // Fields drop after this: the parked buffers and endpoint states, then the context.
    }
}
