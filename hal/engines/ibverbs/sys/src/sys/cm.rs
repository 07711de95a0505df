//! librdmacm: [`EventChannel`], [`CmId`] (listen / accept / connect / disconnect, its RC
//! QP), and owned [`CmEvent`] copies (each event is acknowledged as soon as it is copied,
//! so no id destruction ever waits on an unacknowledged event).
use std::net::SocketAddrV4;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

use super::qp::{post_recv, post_send, PostError, QpCaps, RecvBatch, SendBatch};
use super::raw;
use super::result::{errno, minus_one_errno};
use super::verbs::{Context, Cq, Pd};
use crate::error::{IbError, Result};

/// Most private data bytes an event can carry (REP/ACCEPT: 196; REQ: 56).
pub const MAX_PRIVATE_DATA: usize = 196;
/// Most private data bytes a connect request carries over RoCE/IB (56).
pub const MAX_CONNECT_PRIVATE_DATA: usize = 56;

struct ChannelInner {
    ptr: NonNull<raw::rdma_event_channel>,
}

// SAFETY: the channel is a file descriptor plus immutable state; rdma_get_cm_event is
// called by one thread (the engine's CM thread).
unsafe impl Send for ChannelInner {}
// SAFETY: as above.
unsafe impl Sync for ChannelInner {}

impl Drop for ChannelInner {
    fn drop(&mut self) {
        // SAFETY: every CmId holds an Arc of this, so all ids are destroyed before.
        unsafe { raw::rdma_destroy_event_channel(self.ptr.as_ptr()) }
    }
}

/// An RDMA CM event channel (non-blocking file descriptor).
#[derive(Clone)]
pub struct EventChannel(Arc<ChannelInner>);

/// The kind of an RDMA CM event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmEventKind {
    /// `RDMA_CM_EVENT_ADDR_RESOLVED`.
    AddrResolved,
    /// `RDMA_CM_EVENT_ADDR_ERROR`.
    AddrError,
    /// `RDMA_CM_EVENT_ROUTE_RESOLVED`.
    RouteResolved,
    /// `RDMA_CM_EVENT_ROUTE_ERROR`.
    RouteError,
    /// `RDMA_CM_EVENT_CONNECT_REQUEST`: [`CmEvent::new_id`] holds the new connection.
    ConnectRequest,
    /// `RDMA_CM_EVENT_CONNECT_ERROR`.
    ConnectError,
    /// `RDMA_CM_EVENT_UNREACHABLE`.
    Unreachable,
    /// `RDMA_CM_EVENT_REJECTED` (nobody listening, or the server refused).
    Rejected,
    /// `RDMA_CM_EVENT_ESTABLISHED`.
    Established,
    /// `RDMA_CM_EVENT_DISCONNECTED`.
    Disconnected,
    /// `RDMA_CM_EVENT_DEVICE_REMOVAL`.
    DeviceRemoval,
    /// `RDMA_CM_EVENT_TIMEWAIT_EXIT`.
    TimewaitExit,
    /// Anything else (the raw code).
    Other(u32),
}

impl CmEventKind {
    fn from_raw(e: u32) -> Self {
        match e {
            raw::RDMA_CM_EVENT_ADDR_RESOLVED => CmEventKind::AddrResolved,
            raw::RDMA_CM_EVENT_ADDR_ERROR => CmEventKind::AddrError,
            raw::RDMA_CM_EVENT_ROUTE_RESOLVED => CmEventKind::RouteResolved,
            raw::RDMA_CM_EVENT_ROUTE_ERROR => CmEventKind::RouteError,
            raw::RDMA_CM_EVENT_CONNECT_REQUEST => CmEventKind::ConnectRequest,
            raw::RDMA_CM_EVENT_CONNECT_ERROR => CmEventKind::ConnectError,
            raw::RDMA_CM_EVENT_UNREACHABLE => CmEventKind::Unreachable,
            raw::RDMA_CM_EVENT_REJECTED => CmEventKind::Rejected,
            raw::RDMA_CM_EVENT_ESTABLISHED => CmEventKind::Established,
            raw::RDMA_CM_EVENT_DISCONNECTED => CmEventKind::Disconnected,
            raw::RDMA_CM_EVENT_DEVICE_REMOVAL => CmEventKind::DeviceRemoval,
            raw::RDMA_CM_EVENT_TIMEWAIT_EXIT => CmEventKind::TimewaitExit,
            other => CmEventKind::Other(other),
        }
    }
}

/// An RDMA CM event, copied out and already acknowledged.
pub struct CmEvent {
    /// What happened.
    pub kind: CmEventKind,
    /// The event's status (negative errno for errors, the reject reason for `Rejected`).
    pub status: i32,
    /// The tag of the id the event is about ([`CmId::set_tag`]); for a connect request, the
    /// listener's tag.
    pub tag: u64,
    /// The new connection id of a `ConnectRequest`.
    pub new_id: Option<CmId>,
    private: [u8; MAX_PRIVATE_DATA],
    private_len: usize,
}

impl CmEvent {
    /// The peer's private data (connect request, accept or reject), zero-padded by the CM
    /// to its maximum length.
    pub fn private_data(&self) -> &[u8] {
        &self.private[..self.private_len]
    }
}

impl std::fmt::Debug for CmEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmEvent")
            .field("kind", &self.kind)
            .field("status", &self.status)
            .field("tag", &self.tag)
            .finish()
    }
}

impl EventChannel {
    /// Creates a channel, its descriptor non-blocking.
    ///
    /// # Errors
    /// [`IbError::NoDevice`] when the kernel has no RDMA CM (`/dev/infiniband/rdma_cm`
    /// missing: `ENODEV`/`ENOENT`/`ENOSYS`), else `rdma_create_event_channel`'s errno.
    pub fn new() -> Result<EventChannel> {
        // SAFETY: no arguments.
        let p = unsafe { raw::rdma_create_event_channel() };
        let Some(ptr) = NonNull::new(p) else {
            let e = errno().max(1);
            if matches!(e, libc::ENODEV | libc::ENOENT | libc::ENOSYS) {
                return Err(IbError::NoDevice {
                    detail: format!(
                        "rdma_create_event_channel failed ({}: /dev/infiniband/rdma_cm missing, the kernel has no RDMA CM)",
                        crate::error::errno_name(e)
                    ),
                });
            }
            return Err(IbError::call("rdma_create_event_channel", e));
        };
        let ch = EventChannel(Arc::new(ChannelInner { ptr }));
        let fd = ch.fd();
        // SAFETY: fd is the channel's open descriptor.
        let rc = unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK)
        };
        minus_one_errno(rc.min(0), "fcntl(O_NONBLOCK)")?;
        Ok(ch)
    }

    /// The channel's file descriptor.
    pub fn fd(&self) -> i32 {
        // SAFETY: live channel; fd is a plain field.
        unsafe { (*self.0.ptr.as_ptr()).fd }
    }

    /// Waits up to `timeout` for an event to be readable; true when one is.
    pub fn wait(&self, timeout: Duration) -> bool {
        let mut p = libc::pollfd {
            fd: self.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut p, 1, timeout.as_millis().min(i32::MAX as u128) as i32) };
        rc > 0
    }

    /// The next event without blocking (`None`: nothing pending). The event is copied and
    /// acknowledged before this returns.
    ///
    /// # Errors
    /// `rdma_get_cm_event` failed with something other than `EAGAIN`.
    pub fn next(&self) -> Result<Option<CmEvent>> {
        let mut ev: *mut raw::rdma_cm_event = std::ptr::null_mut();
        // SAFETY: live channel, valid out pointer.
        let rc = unsafe { raw::rdma_get_cm_event(self.0.ptr.as_ptr(), &mut ev) };
        if rc != 0 {
            let e = errno();
            if e == libc::EAGAIN || e == libc::EWOULDBLOCK || e == libc::EINTR {
                return Ok(None);
            }
            return Err(IbError::call("rdma_get_cm_event", e.max(1)));
        }
        // SAFETY: rdma_get_cm_event returned a valid event; we copy what we need and then
        // acknowledge it exactly once.
        unsafe {
            let e = &*ev;
            let kind = CmEventKind::from_raw(e.event);
            let tag = if e.id.is_null() {
                0
            } else {
                (*e.id).context as u64
            };
            let mut private = [0u8; MAX_PRIVATE_DATA];
            let mut private_len = 0;
            let conn = e.param.conn;
            if !conn.private_data.is_null() && conn.private_data_len > 0 {
                private_len = usize::from(conn.private_data_len).min(MAX_PRIVATE_DATA);
                std::ptr::copy_nonoverlapping(
                    conn.private_data.cast::<u8>(),
                    private.as_mut_ptr(),
                    private_len,
                );
            }
            let new_id = if kind == CmEventKind::ConnectRequest {
                NonNull::new(e.id).map(|id| CmId {
                    ptr: id,
                    has_qp: false,
                    pd: None,
                    _ch: Arc::clone(&self.0),
                })
            } else {
                None
            };
            let status = e.status;
            raw::rdma_ack_cm_event(ev);
            Ok(Some(CmEvent {
                kind,
                status,
                tag,
                new_id,
                private,
                private_len,
            }))
        }
    }

    /// A new id on this channel (`RDMA_PS_TCP`: reliable connections).
    ///
    /// # Errors
    /// `rdma_create_id` failed.
    pub fn create_id(&self, tag: u64) -> Result<CmId> {
        let mut id: *mut raw::rdma_cm_id = std::ptr::null_mut();
        // SAFETY: live channel; out pointer; the context is an integer tag, never
        // dereferenced.
        let rc = unsafe {
            raw::rdma_create_id(
                self.0.ptr.as_ptr(),
                &mut id,
                tag as usize as *mut libc::c_void,
                raw::RDMA_PS_TCP,
            )
        };
        minus_one_errno(rc, "rdma_create_id")?;
        let ptr = NonNull::new(id).ok_or_else(|| IbError::call("rdma_create_id", libc::EINVAL))?;
        Ok(CmId {
            ptr,
            has_qp: false,
            pd: None,
            _ch: Arc::clone(&self.0),
        })
    }
}

/// Connection parameters of `rdma_connect` / `rdma_accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnParams {
    /// RDMA READs the peer may have outstanding on us.
    pub responder_resources: u8,
    /// RDMA READs we may have outstanding on the peer.
    pub initiator_depth: u8,
    /// Transport retries (7 max).
    pub retry_count: u8,
    /// Receiver-not-ready retries (7 = infinite).
    pub rnr_retry_count: u8,
}

impl Default for ConnParams {
    fn default() -> Self {
        ConnParams {
            responder_resources: 8,
            initiator_depth: 8,
            retry_count: 7,
            rnr_retry_count: 7,
        }
    }
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.ip().octets()),
        },
        sin_zero: [0; 8],
    }
}

/// An RDMA CM identifier: a listener or one connection, with its RC QP once created.
/// Destroyed on drop (QP first).
pub struct CmId {
    ptr: NonNull<raw::rdma_cm_id>,
    has_qp: bool,
    /// The PD of the QP, kept until the QP is destroyed.
    pd: Option<Pd>,
    _ch: Arc<ChannelInner>,
}

// SAFETY: librdmacm ids may be used from any thread; rtdaq serialises CM calls on one
// thread and only posts (thread-safe verbs) from another.
unsafe impl Send for CmId {}
// SAFETY: the &self methods posting work requests are thread-safe verbs calls.
unsafe impl Sync for CmId {}

impl CmId {
    /// Sets the id's tag (reported in its events).
    pub fn set_tag(&self, tag: u64) {
        // SAFETY: live id; context is an opaque integer for rtdaq.
        unsafe { (*self.ptr.as_ptr()).context = tag as usize as *mut libc::c_void }
    }

    /// Binds to a local address (a listener's address, or a client's source).
    ///
    /// # Errors
    /// `rdma_bind_addr` failed (`EADDRNOTAVAIL`/`ENODEV`: the address is on no RDMA
    /// device; `EADDRINUSE`).
    pub fn bind(&self, addr: SocketAddrV4) -> Result<()> {
        let mut sa = sockaddr(addr);
        // SAFETY: live id; sa is a valid sockaddr_in for the duration of the call.
        let rc = unsafe {
            raw::rdma_bind_addr(
                self.ptr.as_ptr(),
                (&mut sa as *mut libc::sockaddr_in).cast(),
            )
        };
        minus_one_errno(rc, "rdma_bind_addr")
    }

    /// Listens (after [`bind`](Self::bind)).
    ///
    /// # Errors
    /// `rdma_listen` failed.
    pub fn listen(&self, backlog: i32) -> Result<()> {
        // SAFETY: live, bound id.
        minus_one_errno(
            unsafe { raw::rdma_listen(self.ptr.as_ptr(), backlog) },
            "rdma_listen",
        )
    }

    /// Starts resolving `dst` (event `AddrResolved` / `AddrError`).
    ///
    /// # Errors
    /// `rdma_resolve_addr` failed at once.
    pub fn resolve_addr(
        &self,
        src: Option<SocketAddrV4>,
        dst: SocketAddrV4,
        timeout: Duration,
    ) -> Result<()> {
        let mut s = src.map(sockaddr);
        let mut d = sockaddr(dst);
        let sp = s.as_mut().map_or(std::ptr::null_mut(), |s| {
            (s as *mut libc::sockaddr_in).cast()
        });
        // SAFETY: live id; valid sockaddrs for the call.
        let rc = unsafe {
            raw::rdma_resolve_addr(
                self.ptr.as_ptr(),
                sp,
                (&mut d as *mut libc::sockaddr_in).cast(),
                timeout.as_millis().min(i32::MAX as u128) as i32,
            )
        };
        minus_one_errno(rc, "rdma_resolve_addr")
    }

    /// Starts resolving the route (event `RouteResolved` / `RouteError`).
    ///
    /// # Errors
    /// `rdma_resolve_route` failed at once.
    pub fn resolve_route(&self, timeout: Duration) -> Result<()> {
        // SAFETY: live id with a resolved address.
        let rc = unsafe {
            raw::rdma_resolve_route(
                self.ptr.as_ptr(),
                timeout.as_millis().min(i32::MAX as u128) as i32,
            )
        };
        minus_one_errno(rc, "rdma_resolve_route")
    }

    /// The device context librdmacm bound this id to (after bind to a device address or
    /// address resolution).
    pub fn context(&self) -> Option<Context> {
        // SAFETY: live id; verbs is set by the CM once bound and stays valid while the id
        // (or any id on the device) lives; librdmacm owns and closes it.
        let v = unsafe { (*self.ptr.as_ptr()).verbs };
        NonNull::new(v).map(Context::borrowed)
    }

    /// Creates the id's RC QP on `pd` with the given CQs.
    ///
    /// # Errors
    /// `rdma_create_qp` failed (`EINVAL`/`ENOMEM`: caps above the device limits).
    pub fn create_qp(&mut self, pd: &Pd, send_cq: &Cq, recv_cq: &Cq, caps: QpCaps) -> Result<()> {
        let mut attr = raw::ibv_qp_init_attr {
            send_cq: send_cq.as_raw(),
            recv_cq: recv_cq.as_raw(),
            cap: caps.raw(),
            qp_type: raw::IBV_QPT_RC,
            sq_sig_all: 0,
            ..Default::default()
        };
        // SAFETY: live id, PD and CQs; attributes valid.
        let rc = unsafe { raw::rdma_create_qp(self.ptr.as_ptr(), pd.as_raw(), &mut attr) };
        minus_one_errno(rc, "rdma_create_qp")?;
        self.has_qp = true;
        self.pd = Some(pd.clone());
        Ok(())
    }

    fn qp(&self) -> *mut raw::ibv_qp {
        // SAFETY: live id; qp is set by rdma_create_qp and cleared by rdma_destroy_qp.
        unsafe { (*self.ptr.as_ptr()).qp }
    }

    /// The QP number (0 without a QP).
    pub fn qp_num(&self) -> u32 {
        let qp = self.qp();
        if qp.is_null() {
            return 0;
        }
        // SAFETY: live QP.
        unsafe { raw::rtdaq_ibv_qp_num(qp) }
    }

    fn conn_param(private: &[u8], p: ConnParams) -> raw::rdma_conn_param {
        raw::rdma_conn_param {
            private_data: private.as_ptr().cast(),
            private_data_len: private.len().min(255) as u8,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            flow_control: 1,
            retry_count: p.retry_count,
            rnr_retry_count: p.rnr_retry_count,
            srq: 0,
            qp_num: 0,
        }
    }

    /// Connects (after `RouteResolved`, with the QP created); events `Established`,
    /// `Rejected`, `Unreachable` or `ConnectError` follow.
    ///
    /// # Errors
    /// `rdma_connect` failed at once, or `private` exceeds 56 bytes.
    pub fn connect(&self, private: &[u8], p: ConnParams) -> Result<()> {
        if private.len() > MAX_CONNECT_PRIVATE_DATA {
            return Err(IbError::Invalid(format!(
                "{} bytes of connect private data (at most {MAX_CONNECT_PRIVATE_DATA})",
                private.len()
            )));
        }
        let mut cp = Self::conn_param(private, p);
        // SAFETY: live id; cp and the private data live for the call.
        minus_one_errno(
            unsafe { raw::rdma_connect(self.ptr.as_ptr(), &mut cp) },
            "rdma_connect",
        )
    }

    /// Accepts a connect request (the id from [`CmEvent::new_id`], QP created).
    ///
    /// # Errors
    /// `rdma_accept` failed.
    pub fn accept(&self, private: &[u8], p: ConnParams) -> Result<()> {
        let mut cp = Self::conn_param(&private[..private.len().min(MAX_PRIVATE_DATA)], p);
        // SAFETY: live id; cp valid for the call.
        minus_one_errno(
            unsafe { raw::rdma_accept(self.ptr.as_ptr(), &mut cp) },
            "rdma_accept",
        )
    }

    /// Rejects a connect request.
    pub fn reject(&self, private: &[u8]) {
        // SAFETY: live id; the private data is valid for the call.
        let _ = unsafe {
            raw::rdma_reject(
                self.ptr.as_ptr(),
                private.as_ptr().cast(),
                private.len().min(MAX_PRIVATE_DATA) as u8,
            )
        };
    }

    /// Disconnects (the QP goes to the error state: posted requests are flushed). Errors
    /// (already disconnected) are ignored.
    pub fn disconnect(&self) {
        // SAFETY: live id.
        let _ = unsafe { raw::rdma_disconnect(self.ptr.as_ptr()) };
    }

    /// Posts and empties `batch` on the id's QP. Never allocates.
    ///
    /// # Errors
    /// [`PostError`]; `EINVAL` when the id has no QP.
    #[inline]
    pub fn post_send(&self, batch: &mut SendBatch) -> core::result::Result<(), PostError> {
        let qp = self.qp();
        if qp.is_null() {
            batch.clear();
            return Err(PostError {
                errno: libc::EINVAL,
                posted: 0,
            });
        }
        // SAFETY: live QP of this id.
        unsafe { post_send(qp, batch) }
    }

    /// Posts and empties `batch` on the id's QP. Never allocates.
    ///
    /// # Errors
    /// [`PostError`]; `EINVAL` when the id has no QP.
    #[inline]
    pub fn post_recv(&self, batch: &mut RecvBatch) -> core::result::Result<(), PostError> {
        let qp = self.qp();
        if qp.is_null() {
            batch.clear();
            return Err(PostError {
                errno: libc::EINVAL,
                posted: 0,
            });
        }
        // SAFETY: live QP of this id.
        unsafe { post_recv(qp, batch) }
    }

    /// The raw pointer (escape hatch).
    pub fn as_raw(&self) -> *mut raw::rdma_cm_id {
        self.ptr.as_ptr()
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: the QP (if any) and the id are destroyed once; every event of this id was
        // acknowledged when it was read (EventChannel::next).
        unsafe {
            if self.has_qp {
                raw::rdma_destroy_qp(self.ptr.as_ptr());
            }
            raw::rdma_destroy_id(self.ptr.as_ptr());
        }
        self.pd = None;
    }
}
