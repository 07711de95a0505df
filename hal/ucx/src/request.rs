//! Requests: what a tagged send or receive returns while it is in flight.
//!
//! Two forms:
//!
//! - **borrowed** ([`Request`], [`RecvRequest`], from the `unsafe`
//!   [`Endpoint::tag_send`](crate::Endpoint::tag_send) and
//!   [`Worker::tag_recv`](crate::Worker::tag_recv)): the request borrows the buffer, so the
//!   borrow checker keeps it alive and unmodified *while the request value lives*; the
//!   caller promises the rest (not leaking or dropping an incomplete request while the
//!   buffer matters, see those functions' `# Safety`);
//! - **owned** ([`SendTransfer`], [`RecvTransfer`], from the safe
//!   [`Endpoint::tag_send_owned`](crate::Endpoint::tag_send_owned) and
//!   [`Worker::tag_recv_owned`](crate::Worker::tag_recv_owned)): the transfer owns the
//!   buffer ([`SendBuf`], [`RecvBuf`]) and gives it back once complete. Dropped in flight, it
//!   hands the buffer and the request to its worker, which frees both when UCX completes the
//!   request (checked on each [`Worker::progress`](crate::Worker::progress)) or when the
//!   worker is destroyed; leaked (`mem::forget`), it leaks the buffer, which is safe.
use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::buf::{RecvBuf, SendBuf};
use crate::context::MemHandle;
use crate::error::Status;
use crate::raw;
use crate::worker::Worker;

/// State of a send (or flush) request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// Still in flight: progress the worker.
    InProgress,
    /// Completed: UCX no longer uses the buffer.
    Done,
    /// Completed with an error (`UCS_ERR_CANCELED` after a forced close, the endpoint's
    /// failure status when the peer went away, ...); UCX no longer uses the buffer.
    Failed(Status),
}

/// What a completed tagged receive got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvInfo {
    /// Bytes received (at most the buffer's length).
    pub len: usize,
    /// The sender's tag.
    pub tag: u64,
}

/// State of a receive request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvPoll {
    /// Still waiting for (or receiving) a message: progress the worker.
    InProgress,
    /// A message was received.
    Done(RecvInfo),
    /// Completed with an error (`UCS_ERR_MESSAGE_TRUNCATED`: the message was longer than
    /// the buffer; `UCS_ERR_CANCELED`).
    Failed(Status),
}

/// What [`Endpoint::tag_send`](crate::Endpoint::tag_send) returned.
#[must_use = "a pending send must be kept until it completes"]
#[derive(Debug)]
pub enum SendState<'a> {
    /// Completed in the call (the data was copied out or sent).
    Done,
    /// In flight.
    Pending(Request<'a>),
}

/// What [`Worker::tag_recv`](crate::Worker::tag_recv) returned.
#[must_use = "a pending receive must be kept until it completes"]
#[derive(Debug)]
pub enum RecvState<'a> {
    /// A message that had already arrived was received in the call.
    Done(RecvInfo),
    /// Posted, waiting for a message.
    Pending(RecvRequest<'a>),
}

/// `ucp_request_check_status` of a send or flush request.
pub(crate) fn poll_send(req: NonNull<c_void>) -> Poll {
    // SAFETY: req is a live request handle of a live worker (callers hold it until they
    // free it, and borrow the worker).
    let st = unsafe { raw::ucp_request_check_status(req.as_ptr()) };
    match st {
        raw::UCS_INPROGRESS => Poll::InProgress,
        raw::UCS_OK => Poll::Done,
        e => Poll::Failed(Status(e)),
    }
}

/// `ucp_tag_recv_request_test` of a receive request.
pub(crate) fn poll_recv(req: NonNull<c_void>) -> RecvPoll {
    let mut info = raw::ucp_tag_recv_info_t::default();
    // SAFETY: as in poll_send, for a tagged receive request; info is a valid out pointer.
    let st = unsafe { raw::ucp_tag_recv_request_test(req.as_ptr(), &mut info) };
    match st {
        raw::UCS_INPROGRESS => RecvPoll::InProgress,
        raw::UCS_OK => RecvPoll::Done(RecvInfo {
            len: info.length,
            tag: info.sender_tag,
        }),
        e => RecvPoll::Failed(Status(e)),
    }
}

/// `ucp_request_free`: releases a completed request now, an incomplete one when UCX
/// completes it.
pub(crate) fn free_request(req: NonNull<c_void>) {
    // SAFETY: a request handle returned by a *_nbx call, freed once (callers give up the
    // handle). UCX allows freeing an incomplete request: it is released on completion.
    unsafe { raw::ucp_request_free(req.as_ptr()) }
}

/// A send request in flight that borrows its buffer (from the `unsafe`
/// [`Endpoint::tag_send`](crate::Endpoint::tag_send)).
///
/// Drop frees it (`ucp_request_free`); UCX keeps an incomplete request going and releases
/// it when it completes, and may still read the buffer until then: drop only completed
/// requests unless the buffer outlives the worker (the contract of `tag_send`).
#[derive(Debug)]
pub struct Request<'a> {
    req: NonNull<c_void>,
    _life: PhantomData<(&'a [u8], &'a Worker)>,
}

impl Request<'_> {
    pub(crate) fn new(req: NonNull<c_void>) -> Self {
        Request {
            req,
            _life: PhantomData,
        }
    }

    /// Its state (`ucp_request_check_status`).
    pub fn check(&self) -> Poll {
        poll_send(self.req)
    }

    /// The raw handle.
    pub fn as_raw(&self) -> *mut c_void {
        self.req.as_ptr()
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        free_request(self.req);
    }
}

/// A receive request in flight that borrows its buffer (from the `unsafe`
/// [`Worker::tag_recv`](crate::Worker::tag_recv)).
///
/// Drop of an incomplete receive cancels it (`ucp_request_cancel`: removes it from the
/// worker's expected queue) and frees it. A receive already matched to an arriving
/// rendezvous message cannot be cancelled and completes later, writing the buffer: the
/// contract of `tag_recv`.
#[derive(Debug)]
pub struct RecvRequest<'a> {
    req: NonNull<c_void>,
    worker: &'a Worker,
    _buf: PhantomData<&'a mut [u8]>,
}

impl<'a> RecvRequest<'a> {
    pub(crate) fn new(req: NonNull<c_void>, worker: &'a Worker) -> Self {
        RecvRequest {
            req,
            worker,
            _buf: PhantomData,
        }
    }

    /// Its state (`ucp_tag_recv_request_test`): length and sender tag once done.
    pub fn check(&self) -> RecvPoll {
        poll_recv(self.req)
    }

    /// The raw handle.
    pub fn as_raw(&self) -> *mut c_void {
        self.req.as_ptr()
    }
}

impl Drop for RecvRequest<'_> {
    fn drop(&mut self) {
        if poll_recv(self.req) == RecvPoll::InProgress {
            self.worker.cancel(self.req);
        }
        free_request(self.req);
    }
}

/// State of an owned transfer.
#[derive(Debug)]
enum OpState<T> {
    Pending(NonNull<c_void>),
    Done(T),
    Failed(Status),
}

/// A send that owns its buffer (from the safe
/// [`Endpoint::tag_send_owned`](crate::Endpoint::tag_send_owned)).
///
/// [`check`](Self::check) until it is not [`Poll::InProgress`], then
/// [`into_buf`](Self::into_buf) gives the buffer back for reuse. Dropping it in flight is
/// safe (see the crate docs, "Buffers of transfers in flight"). Borrows the worker: used on
/// the worker's thread.
#[must_use = "dropping a send in flight parks its buffer with the worker until it completes"]
pub struct SendTransfer<'w, B: SendBuf> {
    worker: &'w Worker,
    held: Option<B::H>,
    /// Bytes sent from the start of the buffer.
    len: usize,
    memh: Option<MemHandle>,
    state: OpState<()>,
}

impl<'w, B: SendBuf> SendTransfer<'w, B> {
    /// A send posted (or failed) on `worker`.
    pub(crate) fn new(
        worker: &'w Worker,
        held: B::H,
        len: usize,
        memh: Option<MemHandle>,
        posted: Result<Option<NonNull<c_void>>, Status>,
    ) -> Self {
        let state = match posted {
            Ok(Some(req)) => OpState::Pending(req),
            Ok(None) => OpState::Done(()),
            Err(s) => OpState::Failed(s),
        };
        let memh = if matches!(state, OpState::Pending(_)) {
            memh
        } else {
            None
        };
        SendTransfer {
            worker,
            held: Some(held),
            len,
            memh,
            state,
        }
    }

    /// Its state; a completed request is freed here (the buffer stays in the transfer).
    pub fn check(&mut self) -> Poll {
        if let OpState::Pending(req) = self.state {
            match poll_send(req) {
                Poll::InProgress => return Poll::InProgress,
                Poll::Done => self.state = OpState::Done(()),
                Poll::Failed(s) => self.state = OpState::Failed(s),
            }
            free_request(req);
            self.memh = None;
        }
        match self.state {
            OpState::Pending(_) => Poll::InProgress,
            OpState::Done(()) => Poll::Done,
            OpState::Failed(s) => Poll::Failed(s),
        }
    }

    /// Bytes being sent (from the start of the buffer).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty message.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffer, once the send completed (successfully or not); the transfer itself when
    /// it is still in flight.
    ///
    /// # Errors
    /// `Err(self)` while [`check`](Self::check) says [`Poll::InProgress`].
    pub fn into_buf(mut self) -> Result<B, Self> {
        if self.check() == Poll::InProgress {
            return Err(self);
        }
        match self.held.take() {
            Some(h) => Ok(B::from_held(h)),
            // `held` is only taken here and in Drop.
            None => unreachable!("SendTransfer without its buffer"),
        }
    }
}

impl<B: SendBuf> Drop for SendTransfer<'_, B> {
    fn drop(&mut self) {
        if let OpState::Pending(req) = self.state {
            let keep = (self.held.take(), self.memh.take());
            self.worker.park(req, Box::new(keep));
        }
    }
}

impl<B: SendBuf> std::fmt::Debug for SendTransfer<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendTransfer")
            .field("len", &self.len())
            .field("state", &self.state)
            .finish()
    }
}

/// A receive that owns its buffer (from the safe
/// [`Worker::tag_recv_owned`](crate::Worker::tag_recv_owned)).
///
/// [`check`](Self::check) until it is not [`RecvPoll::InProgress`], then
/// [`into_buf`](Self::into_buf) gives the buffer back: its first [`RecvInfo::len`] bytes are
/// the message. Dropped in flight, the receive is cancelled and the buffer parked with the
/// worker until UCX lets go of it.
#[must_use = "dropping a receive in flight cancels it"]
pub struct RecvTransfer<'w, B: RecvBuf> {
    worker: &'w Worker,
    held: Option<B::H>,
    state: OpState<RecvInfo>,
}

impl<'w, B: RecvBuf> RecvTransfer<'w, B> {
    /// A receive posted (or completed, or failed) on `worker`.
    pub(crate) fn new(
        worker: &'w Worker,
        held: B::H,
        posted: Result<Result<RecvInfo, NonNull<c_void>>, Status>,
    ) -> Self {
        let state = match posted {
            Ok(Ok(info)) => OpState::Done(info),
            Ok(Err(req)) => OpState::Pending(req),
            Err(s) => OpState::Failed(s),
        };
        RecvTransfer {
            worker,
            held: Some(held),
            state,
        }
    }

    /// Its state; a completed request is freed here.
    pub fn check(&mut self) -> RecvPoll {
        if let OpState::Pending(req) = self.state {
            match poll_recv(req) {
                RecvPoll::InProgress => return RecvPoll::InProgress,
                RecvPoll::Done(info) => self.state = OpState::Done(info),
                RecvPoll::Failed(s) => self.state = OpState::Failed(s),
            }
            free_request(req);
        }
        match self.state {
            OpState::Pending(_) => RecvPoll::InProgress,
            OpState::Done(info) => RecvPoll::Done(info),
            OpState::Failed(s) => RecvPoll::Failed(s),
        }
    }

    /// The buffer, once the receive completed; the transfer itself while in flight.
    ///
    /// # Errors
    /// `Err(self)` while [`check`](Self::check) says [`RecvPoll::InProgress`].
    pub fn into_buf(mut self) -> Result<B, Self> {
        if self.check() == RecvPoll::InProgress {
            return Err(self);
        }
        match self.held.take() {
            Some(h) => Ok(B::from_held(h)),
            // `held` is only taken here and in Drop.
            None => unreachable!("RecvTransfer without its buffer"),
        }
    }
}

impl<B: RecvBuf> Drop for RecvTransfer<'_, B> {
    fn drop(&mut self) {
        if let OpState::Pending(req) = self.state {
            if poll_recv(req) == RecvPoll::InProgress {
                self.worker.cancel(req);
            }
            self.worker.park(req, Box::new(self.held.take()));
        }
    }
}

impl<B: RecvBuf> std::fmt::Debug for RecvTransfer<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvTransfer")
            .field("state", &self.state)
            .finish()
    }
}
