//! Queue pairs and work requests: the [`SendRequest`]/[`RecvRequest`] descriptions (and
//! [`ScatterRecvRequest`], a receive scattering into up to [`MAX_RECV_SGE`] buffers: header-data
//! split), the preallocated [`SendBatch`]/[`RecvBatch`] (one generic [`WrBatch`]) that turn
//! them into linked `ibv_send_wr` / `ibv_recv_wr` lists, and [`Qp`] (raw packet QPs; RC QPs
//! belong to a [`CmId`](crate::CmId)).
use std::ptr::NonNull;
use std::sync::Arc;

use super::raw;
use super::result::{non_null, zero_or_errno};
use super::verbs::{Cq, Pd, PdInner};
use crate::error::Result;

/// Capacities of a new queue pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCaps {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// Gather entries per send.
    pub max_send_sge: u32,
    /// Scatter entries per receive.
    pub max_recv_sge: u32,
    /// Inline bytes per send (0: none).
    pub max_inline: u32,
}

impl QpCaps {
    pub(crate) fn raw(&self) -> raw::ibv_qp_cap {
        raw::ibv_qp_cap {
            max_send_wr: self.max_send_wr,
            max_recv_wr: self.max_recv_wr,
            max_send_sge: self.max_send_sge,
            max_recv_sge: self.max_recv_sge,
            max_inline_data: self.max_inline,
        }
    }
}

/// The operation of a [`SendRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// `IBV_WR_SEND`: consumes one posted receive of the peer.
    Send,
    /// `IBV_WR_SEND_WITH_IMM`: a SEND carrying 32 bits in the completion.
    SendImm,
    /// `IBV_WR_RDMA_WRITE_WITH_IMM`: writes `remote_addr` and consumes one posted receive
    /// of the peer, whose completion carries the immediate.
    WriteImm,
    /// `IBV_WR_RDMA_WRITE`: writes `remote_addr`, invisible to the peer's CPU.
    Write,
    /// `IBV_WR_RDMA_READ`: reads `remote_addr` into the local buffer.
    Read,
}

impl SendOp {
    /// The `ibv_wr_opcode`.
    pub fn opcode(self) -> u32 {
        match self {
            SendOp::Send => raw::IBV_WR_SEND,
            SendOp::SendImm => raw::IBV_WR_SEND_WITH_IMM,
            SendOp::WriteImm => raw::IBV_WR_RDMA_WRITE_WITH_IMM,
            SendOp::Write => raw::IBV_WR_RDMA_WRITE,
            SendOp::Read => raw::IBV_WR_RDMA_READ,
        }
    }
    fn has_imm(self) -> bool {
        matches!(self, SendOp::SendImm | SendOp::WriteImm)
    }
    fn has_remote(self) -> bool {
        matches!(self, SendOp::WriteImm | SendOp::Write | SendOp::Read)
    }
}

/// One send-queue work request (one gather entry, or none when `len` is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendRequest {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Operation.
    pub op: SendOp,
    /// Local buffer address (inside a registered region with `lkey`).
    pub addr: u64,
    /// Bytes.
    pub len: u32,
    /// Local key of the region holding the buffer.
    pub lkey: u32,
    /// Immediate value, host order (`SendImm`, `WriteImm`).
    pub imm: u32,
    /// Peer address (`WriteImm`, `Write`, `Read`).
    pub remote_addr: u64,
    /// Peer region's key (`WriteImm`, `Write`, `Read`).
    pub rkey: u32,
    /// Generate a completion (`IBV_SEND_SIGNALED`); unsignaled requests complete silently
    /// with the next signaled one (selective signaling).
    pub signaled: bool,
    /// Copy the bytes into the WQE (`IBV_SEND_INLINE`, up to the QP's `max_inline`).
    pub inline: bool,
}

impl SendRequest {
    /// A signaled SEND-with-immediate of `len` bytes at `addr` (region `lkey`), not inline:
    /// the shape of every control message (credits, slot grants and returns, READ
    /// descriptors), whose completion frees its buffer.
    pub fn signaled_send_imm(wr_id: u64, addr: u64, len: u32, lkey: u32, imm: u32) -> Self {
        SendRequest {
            wr_id,
            op: SendOp::SendImm,
            addr,
            len,
            lkey,
            imm,
            remote_addr: 0,
            rkey: 0,
            signaled: true,
            inline: false,
        }
    }
}

/// Fills `wr`/`sge` from `req` (pure: no call into C). `wr.next` and `wr.sg_list` are left
/// for the batch to link. Used by [`SendBatch::push`]; public for tests and tools.
pub fn fill_send_wr(req: &SendRequest, wr: &mut raw::ibv_send_wr, sge: &mut raw::ibv_sge) {
    *wr = raw::ibv_send_wr::default();
    *sge = raw::ibv_sge {
        addr: req.addr,
        length: req.len,
        lkey: req.lkey,
    };
    wr.wr_id = req.wr_id;
    wr.num_sge = i32::from(req.len > 0);
    wr.opcode = req.op.opcode();
    let mut flags = 0;
    if req.signaled {
        flags |= raw::IBV_SEND_SIGNALED;
    }
    if req.inline {
        flags |= raw::IBV_SEND_INLINE;
    }
    wr.send_flags = flags;
    if req.op.has_imm() {
        wr.__bindgen_anon_1.imm_data = req.imm.to_be();
    }
    if req.op.has_remote() {
        wr.wr.rdma = raw::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
            remote_addr: req.remote_addr,
            rkey: req.rkey,
        };
    }
}

/// One receive work request (one scatter entry, or none when `len` is 0: a receive for a
/// WRITE with immediate or a zero-length SEND).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvRequest {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Buffer address.
    pub addr: u64,
    /// Bytes the buffer holds.
    pub len: u32,
    /// Local key of its region.
    pub lkey: u32,
}

/// Fills `wr`/`sge` from `req` (pure).
pub fn fill_recv_wr(req: &RecvRequest, wr: &mut raw::ibv_recv_wr, sge: &mut raw::ibv_sge) {
    *wr = raw::ibv_recv_wr::default();
    *sge = raw::ibv_sge {
        addr: req.addr,
        length: req.len,
        lkey: req.lkey,
    };
    wr.wr_id = req.wr_id;
    wr.num_sge = i32::from(req.len > 0);
}

/// Most scatter entries of one [`ScatterRecvRequest`] (header-data split: the header buffer,
/// then the data buffer).
pub const MAX_RECV_SGE: usize = 2;

/// One scatter/gather entry: `len` bytes at `addr` in the registered region of `lkey`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sge {
    /// Buffer address (a CPU virtual address, or the device address of a dma-buf region).
    pub addr: u64,
    /// Bytes the buffer takes.
    pub len: u32,
    /// Local key of its region.
    pub lkey: u32,
}

/// One receive work request scattering a message into up to [`MAX_RECV_SGE`] buffers, in
/// order: the NIC fills the first entry's `len` bytes, then the next (header-data split: the
/// first bytes of a frame into a header buffer, the rest into a data buffer). Entries of 0
/// bytes are left out of the posted list. `Copy`, built on the hot path without allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScatterRecvRequest {
    wr_id: u64,
    sges: [Sge; MAX_RECV_SGE],
    n: u8,
}

impl ScatterRecvRequest {
    /// A receive into one buffer (what [`RecvRequest`] describes).
    #[inline]
    pub fn single(wr_id: u64, sge: Sge) -> Self {
        ScatterRecvRequest {
            wr_id,
            sges: [sge, Sge::default()],
            n: 1,
        }
    }

    /// A receive into `first`, then `second` (header-data split: header, data).
    #[inline]
    pub fn split(wr_id: u64, first: Sge, second: Sge) -> Self {
        ScatterRecvRequest {
            wr_id,
            sges: [first, second],
            n: 2,
        }
    }

    /// Returned in the completion.
    #[inline]
    pub fn wr_id(&self) -> u64 {
        self.wr_id
    }

    /// The entries as given (1 or 2, including any of 0 bytes).
    #[inline]
    pub fn sges(&self) -> &[Sge] {
        &self.sges[..usize::from(self.n)]
    }

    /// Entries that will be posted (those of more than 0 bytes).
    #[inline]
    pub fn posted_sges(&self) -> usize {
        self.sges().iter().filter(|s| s.len > 0).count()
    }
}

/// Fills `wr` and the first entries of `sges` from `req` (pure), leaving out entries of 0
/// bytes; `wr.num_sge` is the number written. Returns `false`, with `wr` cleared and
/// `num_sge` 0, when `sges` has room for fewer entries than the request posts. `wr.next`
/// and `wr.sg_list` are left for the batch to link. Used by [`RecvBatch::push_scatter`];
/// public for tests and tools.
pub fn fill_scatter_recv_wr(
    req: &ScatterRecvRequest,
    wr: &mut raw::ibv_recv_wr,
    sges: &mut [raw::ibv_sge],
) -> bool {
    *wr = raw::ibv_recv_wr::default();
    if req.posted_sges() > sges.len() {
        return false;
    }
    let mut n = 0;
    for s in req.sges().iter().filter(|s| s.len > 0) {
        sges[n] = raw::ibv_sge {
            addr: s.addr,
            length: s.len,
            lkey: s.lkey,
        };
        n += 1;
    }
    wr.wr_id = req.wr_id;
    wr.num_sge = n as i32;
    true
}

/// A failed post: the provider's errno and how many requests of the batch were posted
/// before the failing one. `Copy`, built on the hot path without allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostError {
    /// Positive errno (`ENOMEM`: the queue is full; `EINVAL`: a bad request).
    pub errno: i32,
    /// Requests posted before the failure.
    pub posted: usize,
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::raw::ibv_send_wr {}
    impl Sealed for super::raw::ibv_recv_wr {}
}

/// A work request a [`WrBatch`] links into a list: `ibv_send_wr` or `ibv_recv_wr` (sealed).
pub trait WorkRequest: sealed::Sealed + Default + Clone {
    /// Points the request at the next one and at its scatter/gather entry (null when it
    /// has none).
    fn link_to(&mut self, next: *mut Self, sge: *mut raw::ibv_sge);
}

/// Both work request structs link the same way (`next`, `sg_list`, `num_sge`).
macro_rules! work_request {
    ($($wr:ty),*) => {$(
        impl WorkRequest for $wr {
            #[inline]
            fn link_to(&mut self, next: *mut Self, sge: *mut raw::ibv_sge) {
                self.next = next;
                self.sg_list = if self.num_sge > 0 {
                    sge
                } else {
                    std::ptr::null_mut()
                };
            }
        }
    )*};
}
work_request!(raw::ibv_send_wr, raw::ibv_recv_wr);

/// Up to `capacity` work requests with one scatter/gather entry each (or up to
/// [`MAX_RECV_SGE`] for receives, [`RecvBatch::with_sges`]), preallocated; linked and posted
/// in one call ([`SendBatch`], [`RecvBatch`]).
pub struct WrBatch<W> {
    wrs: Box<[W]>,
    /// `per` entries for each WR: WR `i`'s list starts at `i * per`.
    sges: Box<[raw::ibv_sge]>,
    per: usize,
    n: usize,
}

/// Send requests ([`SendRequest`]), posted with one `ibv_post_send`.
pub type SendBatch = WrBatch<raw::ibv_send_wr>;
/// Receive requests ([`RecvRequest`]), posted with one `ibv_post_recv`.
pub type RecvBatch = WrBatch<raw::ibv_recv_wr>;

// SAFETY: the raw pointers inside the WRs point into the batch's own boxes (relinked at
// every post) or are null; nothing is shared.
unsafe impl<W> Send for WrBatch<W> {}

impl<W: WorkRequest> WrBatch<W> {
    /// A batch of at most `capacity` requests of one scatter/gather entry. Cold path.
    pub fn with_capacity(capacity: usize) -> Self {
        Self::with_per(capacity, 1)
    }
    /// A batch of at most `capacity` requests of up to `per` entries. Cold path.
    fn with_per(capacity: usize, per: usize) -> Self {
        let (capacity, per) = (capacity.max(1), per.max(1));
        WrBatch {
            wrs: vec![W::default(); capacity].into_boxed_slice(),
            sges: vec![raw::ibv_sge::default(); capacity * per].into_boxed_slice(),
            per,
            n: 0,
        }
    }
    /// Scatter/gather entries each request may have.
    #[inline]
    pub fn sges_per_request(&self) -> usize {
        self.per
    }
    /// Requests in the batch.
    #[inline]
    pub fn len(&self) -> usize {
        self.n
    }
    /// True when empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// Free room.
    #[inline]
    pub fn room(&self) -> usize {
        self.wrs.len() - self.n
    }
    /// Empties the batch.
    #[inline]
    pub fn clear(&mut self) {
        self.n = 0;
    }
    /// Request `i` as built, with its first scatter/gather entry (for tests and tools).
    pub fn wr(&self, i: usize) -> Option<(&W, &raw::ibv_sge)> {
        (i < self.n).then(|| (&self.wrs[i], &self.sges[i * self.per]))
    }
    /// Request `i` as built, with all of its [`sges_per_request`](Self::sges_per_request)
    /// entry slots (the first `num_sge` are used; for tests and tools).
    pub fn wr_sges(&self, i: usize) -> Option<(&W, &[raw::ibv_sge])> {
        (i < self.n).then(|| (&self.wrs[i], &self.sges[i * self.per..(i + 1) * self.per]))
    }
    /// Fills the next request with `fill` (given the request's entry slots), which returns
    /// whether it built one; `false` when full or when `fill` refused. Never allocates.
    #[inline]
    fn push_with(&mut self, fill: impl FnOnce(&mut W, &mut [raw::ibv_sge]) -> bool) -> bool {
        if self.n == self.wrs.len() {
            return false;
        }
        let at = self.n * self.per;
        if !fill(&mut self.wrs[self.n], &mut self.sges[at..at + self.per]) {
            return false;
        }
        self.n += 1;
        true
    }
    /// Links the WRs into a list and returns its head. Never allocates.
    fn link(&mut self) -> *mut W {
        let base = self.wrs.as_mut_ptr();
        let sbase = self.sges.as_mut_ptr();
        for i in 0..self.n {
            let next = if i + 1 < self.n {
                // SAFETY: i + 1 < n <= len: in bounds of the box.
                unsafe { base.add(i + 1) }
            } else {
                std::ptr::null_mut()
            };
            // SAFETY: i < n <= len of the WR box, and the sge box holds `per` entries for
            // each WR, so i * per is in bounds.
            let sge = unsafe { sbase.add(i * self.per) };
            self.wrs[i].link_to(next, sge);
        }
        base
    }
    /// Links the batch, hands the list to `post` (`ibv_post_send`/`_recv` with its
    /// bad-request out-pointer) and empties the batch. Never allocates.
    ///
    /// # Safety
    /// `post` posts the list on a live QP (buffer contract as in [`post_send`]).
    unsafe fn post_with(
        &mut self,
        post: impl FnOnce(*mut W, &mut *mut W) -> i32,
    ) -> core::result::Result<(), PostError> {
        if self.n == 0 {
            return Ok(());
        }
        let head = self.link();
        let mut bad: *mut W = std::ptr::null_mut();
        let rc = post(head, &mut bad);
        let n = self.n;
        self.n = 0;
        if rc == 0 {
            return Ok(());
        }
        let posted = if bad.is_null() {
            0
        } else {
            // SAFETY: the provider sets `bad` to a request of the list, inside the box.
            (unsafe { bad.offset_from(head) }).clamp(0, n as isize) as usize
        };
        Err(PostError {
            errno: rc.abs(),
            posted,
        })
    }
}

impl SendBatch {
    /// Appends a request; `false` when full. Never allocates.
    #[inline]
    pub fn push(&mut self, req: &SendRequest) -> bool {
        self.push_with(|w, s| {
            fill_send_wr(req, w, &mut s[0]);
            true
        })
    }
    /// Marks the last request signaled (selective signaling: the end of a burst).
    #[inline]
    pub fn signal_last(&mut self) {
        if self.n > 0 {
            self.wrs[self.n - 1].send_flags |= raw::IBV_SEND_SIGNALED;
        }
    }
}

impl RecvBatch {
    /// A batch of at most `capacity` receives of up to `sges` scatter entries each (1 to
    /// [`MAX_RECV_SGE`]; match the QP's [`QpCaps::max_recv_sge`]), for
    /// [`push_scatter`](Self::push_scatter). Cold path.
    pub fn with_sges(capacity: usize, sges: usize) -> Self {
        Self::with_per(capacity, sges.clamp(1, MAX_RECV_SGE))
    }
    /// Appends a request; `false` when full. Never allocates.
    #[inline]
    pub fn push(&mut self, req: &RecvRequest) -> bool {
        self.push_with(|w, s| {
            fill_recv_wr(req, w, &mut s[0]);
            true
        })
    }
    /// Appends a scattering request; `false` when full or when it posts more entries than
    /// the batch's [`sges_per_request`](Self::sges_per_request). Never allocates.
    #[inline]
    pub fn push_scatter(&mut self, req: &ScatterRecvRequest) -> bool {
        self.push_with(|w, s| fill_scatter_recv_wr(req, w, s))
    }
}

/// Posts a send batch on `qp` and empties it. Never allocates.
///
/// # Safety
/// `qp` is a live QP. (Buffer contract: the SGEs name registered memory the caller does
/// not hand to anyone else until the request completed; the HCA checks the keys and
/// bounds, so a wrong key fails the request instead of touching other memory.)
pub(crate) unsafe fn post_send(
    qp: *mut raw::ibv_qp,
    batch: &mut SendBatch,
) -> core::result::Result<(), PostError> {
    // SAFETY: `head` is the batch's linked list, `bad` a valid out-pointer; qp is live
    // (caller).
    unsafe { batch.post_with(|head, bad| raw::rtdaq_ibv_post_send(qp, head, bad)) }
}

/// Posts a receive batch on `qp` and empties it. Never allocates.
///
/// # Safety
/// As [`post_send`].
pub(crate) unsafe fn post_recv(
    qp: *mut raw::ibv_qp,
    batch: &mut RecvBatch,
) -> core::result::Result<(), PostError> {
    // SAFETY: as in post_send.
    unsafe { batch.post_with(|head, bad| raw::rtdaq_ibv_post_recv(qp, head, bad)) }
}

/// A raw packet queue pair (`IBV_QPT_RAW_PACKET`: whole Ethernet frames, steered to it
/// by flow rules), created RESET → INIT → RTR → RTS. Destroyed on drop (before its CQs),
/// after the flow rules attached with [`attach_flow`](Self::attach_flow) (the kernel
/// refuses to destroy a QP that flows still use: `EBUSY`).
pub struct Qp {
    ptr: NonNull<raw::ibv_qp>,
    flows: Vec<NonNull<raw::ibv_flow>>,
    _pd: Arc<PdInner>,
}

// SAFETY: ibv_post_send/recv are thread-safe; one owner thread posts in rtdaq anyway.
unsafe impl Send for Qp {}
// SAFETY: as above.
unsafe impl Sync for Qp {}

impl Qp {
    /// Creates a raw packet QP on `port` (needs `CAP_NET_RAW`; ConnectX, not Soft-RoCE).
    ///
    /// # Errors
    /// `ibv_create_qp` (`EPERM`: no `CAP_NET_RAW`; `EOPNOTSUPP`: the device has no raw
    /// packet QPs, e.g. Soft-RoCE) or `ibv_modify_qp` failed.
    pub fn create_raw_packet(
        pd: &Pd,
        send_cq: &Cq,
        recv_cq: &Cq,
        caps: QpCaps,
        port: u8,
    ) -> Result<Qp> {
        let mut attr = raw::ibv_qp_init_attr {
            send_cq: send_cq.ptr.as_ptr(),
            recv_cq: recv_cq.ptr.as_ptr(),
            cap: caps.raw(),
            qp_type: raw::IBV_QPT_RAW_PACKET,
            ..Default::default()
        };
        // SAFETY: valid PD, CQs and attributes.
        let p = unsafe { raw::ibv_create_qp(pd.as_raw(), &mut attr) };
        let qp = Qp {
            ptr: non_null(p, "ibv_create_qp")?,
            flows: Vec::new(),
            _pd: Arc::clone(&pd.0),
        };
        let mut a = raw::ibv_qp_attr {
            qp_state: raw::IBV_QPS_INIT,
            port_num: port,
            ..Default::default()
        };
        qp.modify(&mut a, raw::IBV_QP_STATE | raw::IBV_QP_PORT)?;
        let mut a = raw::ibv_qp_attr {
            qp_state: raw::IBV_QPS_RTR,
            ..Default::default()
        };
        qp.modify(&mut a, raw::IBV_QP_STATE)?;
        let mut a = raw::ibv_qp_attr {
            qp_state: raw::IBV_QPS_RTS,
            ..Default::default()
        };
        qp.modify(&mut a, raw::IBV_QP_STATE)?;
        Ok(qp)
    }

    fn modify(&self, attr: &mut raw::ibv_qp_attr, mask: u32) -> Result<()> {
        // SAFETY: live QP, valid attributes for the mask.
        let rc = unsafe { raw::ibv_modify_qp(self.ptr.as_ptr(), attr, mask as i32) };
        zero_or_errno(rc, "ibv_modify_qp")
    }

    /// Attaches a steering rule that lives as long as the QP (destroyed by its drop, before
    /// the QP). [`Flow`](crate::Flow) is the borrowed alternative. Cold path.
    ///
    /// # Errors
    /// `ibv_create_flow` failed (see [`Flow::create`](crate::Flow::create)).
    pub fn attach_flow(&mut self, attr: &super::flow::FlowAttr) -> Result<()> {
        let mut bytes = attr.bytes().to_vec();
        self.flows.reserve(1);
        // SAFETY: bytes hold a complete ibv_flow_attr with its specs (the provider copies
        // what it needs during the call); the QP is live.
        let p = unsafe { raw::rtdaq_ibv_create_flow(self.ptr.as_ptr(), bytes.as_mut_ptr().cast()) };
        self.flows.push(non_null(p, "ibv_create_flow")?);
        Ok(())
    }

    /// Flow rules attached with [`attach_flow`](Self::attach_flow).
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// The QP number.
    pub fn num(&self) -> u32 {
        // SAFETY: live QP.
        unsafe { raw::rtdaq_ibv_qp_num(self.ptr.as_ptr()) }
    }

    /// Posts and empties `batch`. Never allocates.
    ///
    /// # Errors
    /// [`PostError`] (queue full, bad request).
    #[inline]
    pub fn post_send(&self, batch: &mut SendBatch) -> core::result::Result<(), PostError> {
        // SAFETY: self is a live QP.
        unsafe { post_send(self.ptr.as_ptr(), batch) }
    }

    /// Posts and empties `batch`. Never allocates.
    ///
    /// # Errors
    /// [`PostError`].
    #[inline]
    pub fn post_recv(&self, batch: &mut RecvBatch) -> core::result::Result<(), PostError> {
        // SAFETY: self is a live QP.
        unsafe { post_recv(self.ptr.as_ptr(), batch) }
    }

    /// The raw pointer (escape hatch).
    pub fn as_raw(&self) -> *mut raw::ibv_qp {
        self.ptr.as_ptr()
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        for f in self.flows.drain(..) {
            // SAFETY: created by attach_flow on this QP, destroyed once, before the QP.
            let rc = unsafe { raw::rtdaq_ibv_destroy_flow(f.as_ptr()) };
            debug_assert!(zero_or_errno(rc, "ibv_destroy_flow").is_ok());
        }
        // SAFETY: created once, destroyed once, after its attached flows; borrowed flows
        // ([`Flow`]) hold no pointer after their own drop (they borrow the QP).
        let rc = unsafe { raw::ibv_destroy_qp(self.ptr.as_ptr()) };
        debug_assert_eq!(rc, 0, "ibv_destroy_qp");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_imm_request_carries_remote_slot_and_big_endian_imm() {
        let mut b = SendBatch::with_capacity(2);
        assert!(b.push(&SendRequest {
            wr_id: 7,
            op: SendOp::WriteImm,
            addr: 0x1000,
            len: 1400,
            lkey: 11,
            imm: 42,
            remote_addr: 0xdead_0000,
            rkey: 99,
            signaled: true,
            inline: false,
        }));
        let (wr, sge) = b.wr(0).unwrap();
        assert_eq!(wr.opcode, raw::IBV_WR_RDMA_WRITE_WITH_IMM);
        assert_eq!(wr.wr_id, 7);
        assert_eq!(wr.num_sge, 1);
        assert_eq!(wr.send_flags, raw::IBV_SEND_SIGNALED);
        // SAFETY: the union members were written by fill_send_wr as imm_data / rdma.
        let (imm, rdma) = unsafe { (wr.__bindgen_anon_1.imm_data, wr.wr.rdma) };
        assert_eq!(imm, 42u32.to_be());
        assert_eq!((rdma.remote_addr, rdma.rkey), (0xdead_0000, 99));
        assert_eq!((sge.addr, sge.length, sge.lkey), (0x1000, 1400, 11));
    }

    #[test]
    fn send_without_payload_has_no_sge_and_batch_links_in_order() {
        let mut b = SendBatch::with_capacity(3);
        let r = SendRequest {
            wr_id: 1,
            op: SendOp::SendImm,
            addr: 0,
            len: 0,
            lkey: 0,
            imm: 5,
            remote_addr: 0,
            rkey: 0,
            signaled: false,
            inline: false,
        };
        assert!(b.push(&r));
        assert!(b.push(&SendRequest {
            wr_id: 2,
            len: 8,
            addr: 64,
            op: SendOp::Send,
            ..r
        }));
        assert!(b.push(&SendRequest { wr_id: 3, ..r }));
        assert!(!b.push(&r), "full");
        let head = b.link();
        // SAFETY: head is the batch's first WR; the list has 3 entries in the batch box.
        unsafe {
            assert_eq!((*head).wr_id, 1);
            assert!((*head).sg_list.is_null());
            let second = (*head).next;
            assert_eq!((*second).wr_id, 2);
            assert_eq!((*(*second).sg_list).addr, 64);
            assert_eq!((*second).opcode, raw::IBV_WR_SEND);
            let third = (*second).next;
            assert_eq!((*third).wr_id, 3);
            assert!((*third).next.is_null());
        }
    }

    #[test]
    fn read_and_recv_requests() {
        let mut b = SendBatch::with_capacity(1);
        assert!(b.push(&SendRequest {
            wr_id: 9,
            op: SendOp::Read,
            addr: 0x2000,
            len: 512,
            lkey: 1,
            imm: 0,
            remote_addr: 0x9000,
            rkey: 2,
            signaled: true,
            inline: false,
        }));
        let (wr, _) = b.wr(0).unwrap();
        assert_eq!(wr.opcode, raw::IBV_WR_RDMA_READ);
        // SAFETY: written as rdma by fill_send_wr.
        assert_eq!(unsafe { wr.wr.rdma.rkey }, 2);
        let mut r = RecvBatch::with_capacity(2);
        assert!(r.push(&RecvRequest {
            wr_id: 4,
            addr: 0x100,
            len: 2048,
            lkey: 3
        }));
        assert!(r.push(&RecvRequest {
            wr_id: 5,
            addr: 0,
            len: 0,
            lkey: 0
        }));
        let (w0, s0) = r.wr(0).unwrap();
        assert_eq!((w0.wr_id, w0.num_sge, s0.length), (4, 1, 2048));
        assert_eq!(r.wr(1).unwrap().0.num_sge, 0);
    }

    fn sge(addr: u64, len: u32, lkey: u32) -> Sge {
        Sge { addr, len, lkey }
    }

    #[test]
    fn scatter_request_fills_both_entries_in_order() {
        let req = ScatterRecvRequest::split(12, sge(0x1000, 42, 7), sge(0x7f00_0000_0000, 8192, 9));
        assert_eq!(req.wr_id(), 12);
        assert_eq!(req.sges().len(), 2);
        assert_eq!(req.posted_sges(), 2);
        let mut wr = raw::ibv_recv_wr::default();
        let mut sges = [raw::ibv_sge::default(); 2];
        assert!(fill_scatter_recv_wr(&req, &mut wr, &mut sges));
        assert_eq!((wr.wr_id, wr.num_sge), (12, 2));
        assert_eq!(
            (sges[0].addr, sges[0].length, sges[0].lkey),
            (0x1000, 42, 7)
        );
        assert_eq!(
            (sges[1].addr, sges[1].length, sges[1].lkey),
            (0x7f00_0000_0000, 8192, 9)
        );
        // Too few entry slots: refused, nothing half-built.
        let mut one = [raw::ibv_sge::default(); 1];
        assert!(!fill_scatter_recv_wr(&req, &mut wr, &mut one));
        assert_eq!((wr.wr_id, wr.num_sge), (0, 0));
        // A 0-byte entry is left out of the list.
        let req = ScatterRecvRequest::split(3, sge(0x1000, 0, 7), sge(0x2000, 64, 9));
        assert_eq!(req.posted_sges(), 1);
        assert!(fill_scatter_recv_wr(&req, &mut wr, &mut sges));
        assert_eq!(wr.num_sge, 1);
        assert_eq!(
            (sges[0].addr, sges[0].length, sges[0].lkey),
            (0x2000, 64, 9)
        );
    }

    #[test]
    fn one_entry_scatter_request_is_a_plain_receive() {
        // The same ibv_recv_wr and ibv_sge as RecvRequest / push, in a one-entry batch.
        let mut plain = RecvBatch::with_capacity(1);
        assert!(plain.push(&RecvRequest {
            wr_id: 5,
            addr: 0x4000,
            len: 2048,
            lkey: 3
        }));
        let mut sg = RecvBatch::with_sges(1, 1);
        assert_eq!(sg.sges_per_request(), 1);
        assert!(sg.push_scatter(&ScatterRecvRequest::single(5, sge(0x4000, 2048, 3))));
        let ((pw, ps), (sw, ss)) = (plain.wr(0).unwrap(), sg.wr(0).unwrap());
        assert_eq!((pw.wr_id, pw.num_sge), (sw.wr_id, sw.num_sge));
        assert_eq!((sw.wr_id, sw.num_sge), (5, 1));
        assert_eq!((ps.addr, ps.length, ps.lkey), (ss.addr, ss.length, ss.lkey));
        assert_eq!(plain.sges.len(), sg.sges.len());
        // A two-entry request does not fit a one-entry batch.
        assert!(!sg.push_scatter(&ScatterRecvRequest::split(6, sge(1, 1, 1), sge(2, 2, 2))));
        let mut sg1 = RecvBatch::with_sges(2, 1);
        assert!(!sg1.push_scatter(&ScatterRecvRequest::split(6, sge(1, 1, 1), sge(2, 2, 2))));
        assert_eq!(sg1.len(), 0);
        // Entry counts are clamped to 1..=MAX_RECV_SGE.
        assert_eq!(RecvBatch::with_sges(1, 0).sges_per_request(), 1);
        assert_eq!(RecvBatch::with_sges(1, 9).sges_per_request(), MAX_RECV_SGE);
        assert_eq!(SendBatch::with_capacity(4).sges_per_request(), 1);
    }

    #[test]
    fn two_entry_batch_links_each_request_to_its_own_entries() {
        let mut b = RecvBatch::with_sges(3, 2);
        assert!(b.push_scatter(&ScatterRecvRequest::split(
            0,
            sge(0x100, 42, 1),
            sge(0x9000, 4096, 2)
        )));
        assert!(b.push_scatter(&ScatterRecvRequest::split(
            1,
            sge(0x200, 42, 1),
            sge(0xa000, 4096, 2)
        )));
        // A plain request in a two-entry batch uses the first slot of its pair.
        assert!(b.push(&RecvRequest {
            wr_id: 2,
            addr: 0x300,
            len: 42,
            lkey: 1
        }));
        assert!(
            !b.push_scatter(&ScatterRecvRequest::single(3, sge(0x400, 42, 1))),
            "full"
        );
        let (w1, s1) = b.wr_sges(1).unwrap();
        assert_eq!((w1.wr_id, w1.num_sge, s1.len()), (1, 2, 2));
        assert_eq!(
            (s1[0].addr, s1[1].addr, s1[1].length),
            (0x200, 0xa000, 4096)
        );
        let head = b.link();
        // SAFETY: head is the batch's first WR; the list has 3 entries in the batch box, and
        // each sg_list points at num_sge entries of the sge box.
        unsafe {
            assert_eq!((*head).num_sge, 2);
            let l0 = std::slice::from_raw_parts((*head).sg_list, 2);
            assert_eq!((l0[0].addr, l0[0].length), (0x100, 42));
            assert_eq!((l0[1].addr, l0[1].length, l0[1].lkey), (0x9000, 4096, 2));
            let second = (*head).next;
            let l1 = std::slice::from_raw_parts((*second).sg_list, 2);
            assert_eq!((l1[0].addr, l1[1].addr), (0x200, 0xa000));
            let third = (*second).next;
            assert_eq!(((*third).wr_id, (*third).num_sge), (2, 1));
            assert_eq!((*(*third).sg_list).addr, 0x300);
            assert!((*third).next.is_null());
        }
    }
}
