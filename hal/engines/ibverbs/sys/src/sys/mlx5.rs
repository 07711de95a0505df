//! The mlx5 striding (multi-packet) receive queue: one receive WQE covers a buffer of
//! `2^log_strides` strides of `2^log_stride_bytes` bytes, and the NIC writes one frame
//! after the other into it, each starting on a stride boundary, with one completion per
//! frame.
//!
//! | item | what |
//! |---|---|
//! | [`StridingCaps`] | what `mlx5dv_query_device` reports ([`Context::striding_rq_caps`]) |
//! | [`StrideGeometry`] | the stride size and count a queue is created with |
//! | [`StrideCursor`] | pure decoding of completions: stride index, strides consumed, filler, length, WQE done |
//! | [`StridingRq`] | RAII: completion queue, `mlx5dv_create_wq` WQ, indirection table, raw packet QP with `rx_hash_conf` over it (no hashing: one WQ), its flow rules |
//!
//! ## How it is driven
//! `ibv_post_wq_recv` does not know the striding WQE layout (a next segment before the data
//! segment), so [`StridingRq::post`] writes WQEs into the ring that `mlx5dv_init_obj`
//! exposes and [`StridingRq::commit`] rings the doorbell record after the device store
//! barrier (`csrc/mlx5dv_shim.c`). Completions are polled with `ibv_poll_cq` (the provider
//! decodes status and the raw `byte_cnt`; its `wr_id` is meaningless for a striding WQ and
//! ignored). The stride index of a completion is the running count of strides the queue's
//! WQEs consumed: the NIC fills strides in order, WQEs in order, and every completion
//! (fillers included) reports how many strides it consumed ([`StrideCursor`]).
//!
//! ## Buffer contract
//! As for [`Qp`](crate::Qp): a posted buffer belongs to the NIC until the completion that
//! finishes its WQE ([`StrideCompletion::wqe_done`]); the caller keeps it meanwhile. Frames
//! of a finished WQE stay valid until the caller reposts the buffer. The queue refuses to
//! post more WQEs than the ring holds, counted from the WQEs the NIC reported finished, so a
//! WQE still owned by the NIC is never overwritten.
use std::ffi::CStr;
use std::ptr::NonNull;
use std::sync::Arc;

use super::flow::FlowAttr;
use super::raw;
use super::result::{non_null, zero_or_errno};
use super::verbs::{Context, ContextInner, Cq, Mr, Pd, PdInner, WorkCompletion};
use crate::error::{IbError, Result};

/// Striding RQ capabilities of a device (`mlx5dv_striding_rq_caps`), in log2 units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StridingCaps {
    /// Smallest stride, log2 bytes.
    pub min_log_stride_bytes: u32,
    /// Largest stride, log2 bytes.
    pub max_log_stride_bytes: u32,
    /// Fewest strides per WQE, log2.
    pub min_log_strides: u32,
    /// Most strides per WQE, log2.
    pub max_log_strides: u32,
    /// QP types with striding RQs, one bit per `ibv_qp_type`.
    pub supported_qpts: u32,
}

impl StridingCaps {
    /// True when raw packet QPs can sit on a striding RQ (`supported_qpts` has
    /// `IBV_QPT_RAW_PACKET`).
    pub fn raw_packet(&self) -> bool {
        self.supported_qpts & (1 << raw::IBV_QPT_RAW_PACKET) != 0
    }
}

/// Stride size and count of a striding RQ's WQEs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrideGeometry {
    /// log2 of the stride size in bytes.
    pub log_stride_bytes: u8,
    /// log2 of the strides per WQE.
    pub log_strides: u8,
}

impl StrideGeometry {
    /// Bytes per stride.
    pub fn stride_bytes(&self) -> u32 {
        1 << self.log_stride_bytes
    }
    /// Strides per WQE.
    pub fn strides(&self) -> u32 {
        1 << self.log_strides
    }
    /// Bytes of one WQE's buffer (`strides × stride_bytes`).
    pub fn wqe_bytes(&self) -> u64 {
        1u64 << (u32::from(self.log_stride_bytes) + u32::from(self.log_strides))
    }
}

/// What one striding completion was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrideKind {
    /// A frame of `len` bytes at the completion's stride.
    Frame,
    /// A filler: the NIC skipped the rest of the WQE (the next frame did not fit).
    Filler,
    /// A failed completion (`status`, e.g. a flush when the queue is destroyed): the rest
    /// of the WQE is given up.
    Error,
    /// A completion that contradicts the queue's geometry (more strides than the WQE has
    /// left, zero strides, or more bytes than its strides hold), or one with no WQE posted.
    /// The rest of the WQE is given up; count it.
    Corrupt,
}

/// One decoded completion of a striding RQ. `Copy`, built on the hot path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrideCompletion {
    /// Sequence number of the WQE (the value [`StridingRq::post`] returned for it).
    pub wqe: u32,
    /// First stride of the frame in that WQE.
    pub stride: u32,
    /// Strides consumed.
    pub strides: u32,
    /// Frame bytes (`Frame` only).
    pub len: u32,
    /// What it was.
    pub kind: StrideKind,
    /// The WQE is finished: the NIC will write no more into its buffer.
    pub wqe_done: bool,
    /// The completion status (`IBV_WC_SUCCESS` = 0 except for `Error`).
    pub status: u32,
}

impl Default for StrideCompletion {
    fn default() -> Self {
        StrideCompletion {
            wqe: 0,
            stride: 0,
            strides: 0,
            len: 0,
            kind: StrideKind::Corrupt,
            wqe_done: false,
            status: 0,
        }
    }
}

/// `byte_cnt` of a striding completion: bytes in bits 0..16.
const LEN_MASK: u32 = 0xffff;
/// Strides consumed in bits 16..30.
const STRIDES_SHIFT: u32 = 16;
/// (14 bits).
const STRIDES_MASK: u32 = 0x3fff;
/// Bit 31: a filler completion.
const FILLER: u32 = 1 << 31;

/// Where the NIC is in the striding RQ: the oldest unfinished WQE and the strides of it
/// already consumed. Pure; unit-tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrideCursor {
    geometry: StrideGeometry,
    /// Sequence number of the oldest unfinished WQE (the NIC's current one).
    tail: u32,
    /// Strides of it consumed so far.
    used: u32,
}

impl StrideCursor {
    /// A cursor at WQE 0, stride 0.
    pub fn new(geometry: StrideGeometry) -> Self {
        StrideCursor {
            geometry,
            tail: 0,
            used: 0,
        }
    }

    /// Sequence number of the oldest WQE not finished yet.
    pub fn tail(&self) -> u32 {
        self.tail
    }

    /// Strides of the current WQE consumed so far.
    pub fn used(&self) -> u32 {
        self.used
    }

    fn finish(&mut self) {
        self.tail = self.tail.wrapping_add(1);
        self.used = 0;
    }

    /// Decodes one completion: `ok` (status success), `status`, the raw `byte_cnt` and
    /// `posted` (WQEs posted so far: nothing is outstanding when it equals the tail). Never
    /// allocates.
    pub fn decode(
        &mut self,
        ok: bool,
        status: u32,
        byte_cnt: u32,
        posted: u32,
    ) -> StrideCompletion {
        let mut c = StrideCompletion {
            wqe: self.tail,
            stride: self.used,
            status,
            ..StrideCompletion::default()
        };
        if posted == self.tail {
            // Nothing posted: nothing to advance.
            return c;
        }
        let per_wqe = self.geometry.strides();
        if !ok {
            c.kind = StrideKind::Error;
            c.strides = per_wqe - self.used;
            c.wqe_done = true;
            self.finish();
            return c;
        }
        let strides = (byte_cnt >> STRIDES_SHIFT) & STRIDES_MASK;
        let len = byte_cnt & LEN_MASK;
        let filler = byte_cnt & FILLER != 0;
        let room = per_wqe - self.used;
        let holds = u64::from(strides) << self.geometry.log_stride_bytes;
        if strides == 0 || strides > room || (!filler && u64::from(len) > holds) {
            c.kind = StrideKind::Corrupt;
            c.strides = room;
            c.wqe_done = true;
            self.finish();
            return c;
        }
        c.strides = strides;
        c.kind = if filler {
            StrideKind::Filler
        } else {
            c.len = len;
            StrideKind::Frame
        };
        self.used += strides;
        if self.used == per_wqe {
            c.wqe_done = true;
            self.finish();
        }
        c
    }
}

impl Context {
    /// The device's striding RQ capabilities (`mlx5dv_query_device`, libmlx5 loaded with
    /// `dlopen` at first use). Cold path.
    ///
    /// # Errors
    /// [`IbError::Unsupported`] naming why: libmlx5 cannot be loaded, the device is not an
    /// mlx5 device (`EOPNOTSUPP`: Soft-RoCE, ...), or it reports no striding RQ caps;
    /// [`IbError::Call`] for any other failure of the query.
    pub fn striding_rq_caps(&self) -> Result<StridingCaps> {
        // SAFETY: no arguments; loads the library once under pthread_once.
        if unsafe { raw::rtdaq_mlx5_load() } != 0 {
            // SAFETY: a NUL-terminated string in static storage of the shim.
            let why = unsafe { CStr::from_ptr(raw::rtdaq_mlx5_load_error()) };
            return Err(IbError::Unsupported(format!(
                "libmlx5 (ibverbs-providers) not loaded: {}",
                why.to_string_lossy()
            )));
        }
        let mut attrs = raw::mlx5dv_context {
            comp_mask: u64::from(raw::MLX5DV_CONTEXT_MASK_STRIDING_RQ),
            ..Default::default()
        };
        // SAFETY: live context; attrs is a writable mlx5dv_context of this header version.
        let rc = unsafe { raw::rtdaq_mlx5dv_query_device(self.as_raw(), &mut attrs) };
        if rc == libc::EOPNOTSUPP || rc == -libc::EOPNOTSUPP {
            return Err(IbError::Unsupported(
                "not an mlx5 device (mlx5dv_query_device: EOPNOTSUPP)".into(),
            ));
        }
        zero_or_errno(rc, "mlx5dv_query_device")?;
        if attrs.comp_mask & u64::from(raw::MLX5DV_CONTEXT_MASK_STRIDING_RQ) == 0 {
            return Err(IbError::Unsupported(
                "the device reports no striding RQ capabilities (mlx5dv_query_device)".into(),
            ));
        }
        let c = attrs.striding_rq_caps;
        Ok(StridingCaps {
            min_log_stride_bytes: c.min_single_stride_log_num_of_bytes,
            max_log_stride_bytes: c.max_single_stride_log_num_of_bytes,
            min_log_strides: c.min_single_wqe_log_num_of_strides,
            max_log_strides: c.max_single_wqe_log_num_of_strides,
            supported_qpts: c.supported_qpts,
        })
    }
}

/// The 40-byte Toeplitz key `ibv_create_qp_ex` requires with `rx_hash_conf`; unused (no
/// hash fields: the one WQ gets every frame the flow rules steer to the QP).
static RSS_KEY: [u8; 40] = [0; 40];

/// A striding receive queue with its completion queue, indirection table, raw packet QP
/// and flow rules, destroyed in that dependency order on drop (flows, QP, table, WQ, CQ).
pub struct StridingRq {
    flows: Vec<NonNull<raw::ibv_flow>>,
    qp: NonNull<raw::ibv_qp>,
    table: NonNull<raw::ibv_rwq_ind_table>,
    wq: NonNull<raw::ibv_wq>,
    cq: Cq,
    ring: NonNull<u8>,
    dbrec: NonNull<u32>,
    wqe_cnt: u32,
    head: u32,
    rung: u32,
    cursor: StrideCursor,
    geometry: StrideGeometry,
    wcs: Box<[WorkCompletion]>,
    _pd: Arc<PdInner>,
    _ctx: Arc<ContextInner>,
}

// SAFETY: the handles are used by one owner thread (posting and polling need `&mut self`);
// create/destroy verbs are thread-safe; the ring and doorbell pointers are only written
// through `&mut self`.
unsafe impl Send for StridingRq {}

/// Completions polled per `ibv_poll_cq` call at most.
pub const STRIDING_POLL_MAX: usize = 64;

impl StridingRq {
    /// Creates a striding RQ of at least `wqes` WQEs (a power of two) with `geometry`,
    /// its own completion queue of `cq_depth` entries, and the raw packet QP over it (needs
    /// `CAP_NET_RAW`). Attach flow rules with [`attach_flow`](Self::attach_flow). Cold
    /// path.
    ///
    /// # Errors
    /// [`IbError::Unsupported`] when libmlx5 is missing or the ring does not have the
    /// striding WQE layout; [`IbError::Call`] naming the failing verb (`mlx5dv_create_wq`
    /// `EINVAL`: a geometry outside the device's caps).
    pub fn create(
        ctx: &Context,
        pd: &Pd,
        geometry: StrideGeometry,
        wqes: u32,
        cq_depth: u32,
    ) -> Result<StridingRq> {
        if !wqes.is_power_of_two() || wqes > 1 << 15 {
            return Err(IbError::Invalid(format!(
                "striding RQ of {wqes} WQEs: a power of two up to 32768"
            )));
        }
        let cq = ctx.create_cq(cq_depth)?;
        let mut wq_attr = raw::ibv_wq_init_attr {
            wq_type: raw::IBV_WQT_RQ,
            max_wr: wqes,
            max_sge: 1,
            pd: pd.as_raw(),
            cq: cq.as_raw(),
            ..Default::default()
        };
        let mut dv_attr = raw::mlx5dv_wq_init_attr {
            comp_mask: u64::from(raw::MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ),
            striding_rq_attrs: raw::mlx5dv_striding_rq_init_attr {
                single_stride_log_num_of_bytes: u32::from(geometry.log_stride_bytes),
                single_wqe_log_num_of_strides: u32::from(geometry.log_strides),
                two_byte_shift_en: 0,
            },
        };
        // SAFETY: live context, PD and CQ; attributes fully initialised.
        let p = unsafe { raw::rtdaq_mlx5dv_create_wq(ctx.as_raw(), &mut wq_attr, &mut dv_attr) };
        let wq = non_null(p, "mlx5dv_create_wq")?;
        // From here on a failure destroys what was created, in reverse order.
        let destroy_wq = |wq: NonNull<raw::ibv_wq>| {
            // SAFETY: created above, destroyed once on this error path.
            unsafe { raw::rtdaq_ibv_destroy_wq(wq.as_ptr()) };
        };
        let mut mod_attr = raw::ibv_wq_attr {
            attr_mask: raw::IBV_WQ_ATTR_STATE,
            wq_state: raw::IBV_WQS_RDY,
            ..Default::default()
        };
        // SAFETY: live WQ, valid attributes.
        let rc = unsafe { raw::rtdaq_ibv_modify_wq(wq.as_ptr(), &mut mod_attr) };
        if let Err(e) = zero_or_errno(rc, "ibv_modify_wq") {
            destroy_wq(wq);
            return Err(e);
        }
        let mut rwq = raw::mlx5dv_rwq::default();
        let mut obj = raw::mlx5dv_obj {
            qp: raw::mlx5dv_obj__bindgen_ty_1 {
                in_: std::ptr::null_mut(),
                out: std::ptr::null_mut(),
            },
            cq: raw::mlx5dv_obj__bindgen_ty_2 {
                in_: std::ptr::null_mut(),
                out: std::ptr::null_mut(),
            },
            srq: raw::mlx5dv_obj__bindgen_ty_3 {
                in_: std::ptr::null_mut(),
                out: std::ptr::null_mut(),
            },
            rwq: raw::mlx5dv_obj__bindgen_ty_4 {
                in_: wq.as_ptr(),
                out: &mut rwq,
            },
            dm: raw::mlx5dv_obj__bindgen_ty_5 {
                in_: std::ptr::null_mut(),
                out: std::ptr::null_mut(),
            },
            ah: raw::mlx5dv_obj__bindgen_ty_6 {
                in_: std::ptr::null_mut(),
                out: std::ptr::null_mut(),
            },
            pd: raw::mlx5dv_obj__bindgen_ty_7 {
                in_: std::ptr::null_mut(),
                out: std::ptr::null_mut(),
            },
        };
        // SAFETY: obj.rwq names a live WQ of this context and a writable output; only the
        // RWQ type is requested, so the other members are not read.
        let rc = unsafe { raw::rtdaq_mlx5dv_init_obj(&mut obj, u64::from(raw::MLX5DV_OBJ_RWQ)) };
        if let Err(e) = zero_or_errno(rc, "mlx5dv_init_obj") {
            destroy_wq(wq);
            return Err(e);
        }
        let (Some(ring), Some(dbrec)) = (
            NonNull::new(rwq.buf.cast::<u8>()),
            NonNull::new(rwq.dbrec.cast::<u32>()),
        ) else {
            destroy_wq(wq);
            return Err(IbError::Unsupported(
                "mlx5dv_init_obj gave no WQ ring or doorbell record".into(),
            ));
        };
        if rwq.stride != raw::RTDAQ_MLX5_MPRQ_WQE_BYTES
            || !rwq.wqe_cnt.is_power_of_two()
            || rwq.wqe_cnt < wqes
        {
            destroy_wq(wq);
            return Err(IbError::Unsupported(format!(
                "the WQ ring has {} WQEs of {} B; a striding RQ needs ≥ {wqes} of {} B",
                rwq.wqe_cnt,
                rwq.stride,
                raw::RTDAQ_MLX5_MPRQ_WQE_BYTES
            )));
        }
        let mut tbl = [wq.as_ptr()];
        let mut t_attr = raw::ibv_rwq_ind_table_init_attr {
            log_ind_tbl_size: 0,
            ind_tbl: tbl.as_mut_ptr(),
            comp_mask: 0,
        };
        // SAFETY: live context; the table lists one live WQ.
        let t = unsafe { raw::rtdaq_ibv_create_rwq_ind_table(ctx.as_raw(), &mut t_attr) };
        let table = match non_null(t, "ibv_create_rwq_ind_table") {
            Ok(t) => t,
            Err(e) => {
                destroy_wq(wq);
                return Err(e);
            }
        };
        let mut q_attr = raw::ibv_qp_init_attr_ex {
            qp_type: raw::IBV_QPT_RAW_PACKET,
            comp_mask: raw::IBV_QP_INIT_ATTR_PD
                | raw::IBV_QP_INIT_ATTR_IND_TABLE
                | raw::IBV_QP_INIT_ATTR_RX_HASH,
            pd: pd.as_raw(),
            rwq_ind_tbl: table.as_ptr(),
            rx_hash_conf: raw::ibv_rx_hash_conf {
                rx_hash_function: raw::IBV_RX_HASH_FUNC_TOEPLITZ as u8,
                rx_hash_key_len: RSS_KEY.len() as u8,
                // The provider copies the key; it is never written through.
                rx_hash_key: RSS_KEY.as_ptr().cast_mut(),
                rx_hash_fields_mask: 0,
            },
            ..Default::default()
        };
        // SAFETY: live context, PD and table; attributes valid for an RSS raw packet QP.
        let q = unsafe { raw::rtdaq_ibv_create_qp_ex(ctx.as_raw(), &mut q_attr) };
        let qp = match non_null(q, "ibv_create_qp_ex") {
            Ok(q) => q,
            Err(e) => {
                // SAFETY: created above, destroyed once, before its WQ.
                unsafe { raw::rtdaq_ibv_destroy_rwq_ind_table(table.as_ptr()) };
                destroy_wq(wq);
                return Err(e);
            }
        };
        Ok(StridingRq {
            flows: Vec::new(),
            qp,
            table,
            wq,
            cq,
            ring,
            dbrec,
            wqe_cnt: rwq.wqe_cnt,
            head: 0,
            rung: 0,
            cursor: StrideCursor::new(geometry),
            geometry,
            wcs: vec![WorkCompletion::default(); STRIDING_POLL_MAX].into_boxed_slice(),
            _pd: Arc::clone(&pd.0),
            _ctx: Arc::clone(&ctx.0),
        })
    }

    /// Attaches a flow rule to the QP; it lives (and is destroyed) with the queue. Cold path.
    ///
    /// # Errors
    /// `ibv_create_flow` failed (see [`Flow::create`](crate::Flow::create)).
    pub fn attach_flow(&mut self, attr: &FlowAttr) -> Result<()> {
        let mut bytes = attr.bytes().to_vec();
        self.flows.reserve(1);
        // SAFETY: bytes hold a complete ibv_flow_attr with its specs; the QP is live.
        let p = unsafe { raw::rtdaq_ibv_create_flow(self.qp.as_ptr(), bytes.as_mut_ptr().cast()) };
        self.flows.push(non_null(p, "ibv_create_flow")?);
        Ok(())
    }

    /// Flow rules attached.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// The geometry the queue was created with.
    pub fn geometry(&self) -> StrideGeometry {
        self.geometry
    }

    /// WQEs the ring holds.
    pub fn wqe_capacity(&self) -> u32 {
        self.wqe_cnt
    }

    /// WQEs that can be posted now (ring size − posted and not finished).
    #[inline]
    pub fn room(&self) -> u32 {
        self.wqe_cnt - self.head.wrapping_sub(self.cursor.tail())
    }

    /// Writes one WQE for the `geometry().wqe_bytes()` bytes at `addr` (inside `mr`) and
    /// returns its sequence number; `None` when the ring is full or the buffer is not
    /// inside `mr`. Not visible to the NIC before [`commit`](Self::commit). Never
    /// allocates.
    #[inline]
    pub fn post(&mut self, mr: &Mr, addr: u64) -> Option<u32> {
        let len = u32::try_from(self.geometry.wqe_bytes()).ok()?;
        if self.room() == 0 || !mr.contains(addr, len) {
            return None;
        }
        let idx = self.head & (self.wqe_cnt - 1);
        // SAFETY: the ring has wqe_cnt WQEs of 32 bytes (checked at creation) and
        // idx < wqe_cnt; WQE idx is not owned by the NIC (room > 0: every WQE posted at this
        // index before has finished).
        unsafe {
            raw::rtdaq_mlx5_mprq_wqe_write(self.ring.as_ptr().cast(), idx, addr, len, mr.lkey())
        };
        let seq = self.head;
        self.head = self.head.wrapping_add(1);
        Some(seq)
    }

    /// Hands every WQE written since the last call to the NIC (barrier + doorbell record).
    /// Never allocates.
    #[inline]
    pub fn commit(&mut self) {
        if self.rung != self.head {
            // SAFETY: the doorbell record of this live WQ (from mlx5dv_init_obj).
            unsafe { raw::rtdaq_mlx5_rq_doorbell(self.dbrec.as_ptr(), self.head) };
            self.rung = self.head;
        }
    }

    /// Polls up to `out.len()` (at most [`STRIDING_POLL_MAX`]) completions and decodes
    /// them; returns how many, or the provider's negative code. Never allocates, never
    /// blocks.
    #[inline]
    pub fn poll(&mut self, out: &mut [StrideCompletion]) -> core::result::Result<usize, i32> {
        let n = out.len().min(self.wcs.len());
        let got = self.cq.poll(&mut self.wcs[..n])?;
        for (o, wc) in out.iter_mut().zip(self.wcs.iter()).take(got) {
            *o = self
                .cursor
                .decode(wc.ok(), wc.status(), wc.byte_len(), self.head);
        }
        Ok(got)
    }

    /// The QP (escape hatch).
    pub fn qp_raw(&self) -> *mut raw::ibv_qp {
        self.qp.as_ptr()
    }
}

impl Drop for StridingRq {
    fn drop(&mut self) {
        for f in self.flows.drain(..) {
            // SAFETY: created by attach_flow, destroyed once, before the QP.
            let rc = unsafe { raw::rtdaq_ibv_destroy_flow(f.as_ptr()) };
            debug_assert!(zero_or_errno(rc, "ibv_destroy_flow").is_ok());
        }
        // SAFETY: created once, destroyed once, after its flows and before the table.
        let rc = unsafe { raw::ibv_destroy_qp(self.qp.as_ptr()) };
        debug_assert_eq!(rc, 0, "ibv_destroy_qp (striding RQ)");
        // SAFETY: as above, after the QP using it and before its WQ.
        let rc = unsafe { raw::rtdaq_ibv_destroy_rwq_ind_table(self.table.as_ptr()) };
        debug_assert_eq!(rc, 0, "ibv_destroy_rwq_ind_table");
        // SAFETY: as above, after the table; the CQ field is dropped after this body.
        let rc = unsafe { raw::rtdaq_ibv_destroy_wq(self.wq.as_ptr()) };
        debug_assert_eq!(rc, 0, "ibv_destroy_wq");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(log_stride_bytes: u8, log_strides: u8) -> StrideGeometry {
        StrideGeometry {
            log_stride_bytes,
            log_strides,
        }
    }

    fn cnt(len: u32, strides: u32, filler: bool) -> u32 {
        len | (strides << 16) | if filler { 1 << 31 } else { 0 }
    }

    #[test]
    fn geometry_sizes() {
        let g = geo(11, 6);
        assert_eq!(
            (g.stride_bytes(), g.strides(), g.wqe_bytes()),
            (2048, 64, 131072)
        );
    }

    #[test]
    fn frames_advance_strides_and_finish_wqes() {
        // 8 strides of 64 B per WQE.
        let mut c = StrideCursor::new(geo(6, 3));
        let posted = 2;
        // 100 B: 2 strides at stride 0.
        let a = c.decode(true, 0, cnt(100, 2, false), posted);
        assert_eq!((a.wqe, a.stride, a.strides, a.len), (0, 0, 2, 100));
        assert_eq!((a.kind, a.wqe_done), (StrideKind::Frame, false));
        // 64 B: 1 stride at stride 2.
        let b = c.decode(true, 0, cnt(64, 1, false), posted);
        assert_eq!((b.stride, b.strides), (2, 1));
        // 300 B: 5 strides at 3 -> the WQE is full.
        let d = c.decode(true, 0, cnt(300, 5, false), posted);
        assert_eq!((d.wqe, d.stride, d.wqe_done), (0, 3, true));
        assert_eq!((c.tail(), c.used()), (1, 0));
        // Next WQE starts at stride 0.
        let e = c.decode(true, 0, cnt(60, 1, false), posted);
        assert_eq!((e.wqe, e.stride), (1, 0));
    }

    #[test]
    fn filler_closes_the_wqe() {
        let mut c = StrideCursor::new(geo(6, 3));
        c.decode(true, 0, cnt(400, 7, false), 1);
        let f = c.decode(true, 0, cnt(0, 1, true), 1);
        assert_eq!(
            (f.kind, f.stride, f.strides, f.wqe_done),
            (StrideKind::Filler, 7, 1, true)
        );
        assert_eq!(f.len, 0);
        assert_eq!(c.tail(), 1);
    }

    #[test]
    fn errors_and_contradictions_give_up_the_wqe() {
        let mut c = StrideCursor::new(geo(6, 3));
        c.decode(true, 0, cnt(64, 1, false), 3);
        let e = c.decode(false, 5, 0xdead_beef, 3);
        assert_eq!(
            (e.kind, e.wqe, e.stride, e.strides, e.wqe_done),
            (StrideKind::Error, 0, 1, 7, true)
        );
        assert_eq!(e.status, 5);
        // More strides than the WQE has left.
        c.decode(true, 0, cnt(64, 1, false), 3);
        let x = c.decode(true, 0, cnt(64, 8, false), 3);
        assert_eq!((x.kind, x.wqe, x.wqe_done), (StrideKind::Corrupt, 1, true));
        // More bytes than the strides hold, and zero strides.
        let y = c.decode(true, 0, cnt(129, 2, false), 3);
        assert_eq!((y.kind, y.wqe), (StrideKind::Corrupt, 2));
        assert_eq!(c.tail(), 3);
        // Nothing outstanding: no advance.
        let z = c.decode(true, 0, cnt(64, 1, false), 3);
        assert_eq!(
            (z.kind, z.wqe_done, c.tail()),
            (StrideKind::Corrupt, false, 3)
        );
        let mut c = StrideCursor::new(geo(6, 3));
        let w = c.decode(true, 0, cnt(0, 0, false), 1);
        assert_eq!(w.kind, StrideKind::Corrupt);
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut c = StrideCursor::new(geo(6, 3));
        c.tail = u32::MAX;
        let a = c.decode(true, 0, cnt(512, 8, false), 0);
        assert_eq!((a.wqe, a.wqe_done, c.tail()), (u32::MAX, true, 0));
    }

    #[test]
    fn caps_raw_packet_bit() {
        let mut caps = StridingCaps::default();
        assert!(!caps.raw_packet());
        caps.supported_qpts = 1 << raw::IBV_QPT_RAW_PACKET;
        assert!(caps.raw_packet());
    }
}
