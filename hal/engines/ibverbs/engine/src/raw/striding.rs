//! The raw RX path over the mlx5 striding (multi-packet) receive queue
//! (`engine.ibverbs.striding_rq`).
//!
//! ## Buffers, frames and their lifetime
//! Each WQE of the striding RQ is one **pool slot** of the queue's first region: the NIC
//! writes frame after frame into it, each at a stride boundary (`stride index × stride
//! size`), one completion per frame. The queue takes a fixed set of slots from the pool
//! at open ([`StrideShared`]: the `Buf`s, never moved or mutated afterwards, plus one
//! atomic reference count per slot) and keeps cycling them:
//!
//! ```text
//!  free ──post (refs = 1: the NIC's hold)──▶ posted
//!    ▲                                          │ a frame completes: refs += 1, the burst holds
//!    │                                          │ (entry, offset); burst cleared: refs −= 1
//!    │                                          ▼
//!    ├──── refs reached 0 here ◀── the WQE is finished (its last stride, a filler, an
//!    │                            error): the NIC's hold ends, refs −= 1
//!    │                                          │ frames still held by bursts
//!    │                                          ▼
//!    └──── the last burst releases (refs 0, `released` bumped) ◀── lent
//! ```
//!
//! A slot goes back to the NIC only when the NIC is done with it **and** every frame in it
//! has been released, whatever thread releases last. Frames are borrowed straight from the
//! slot (`Buf::bytes_at`): no copy. The I/O thread alone posts; it learns about slots a
//! consumer thread freed through the `released` counter and then scans its short `lent`
//! list. `free`, `lent` and the WQE → slot table are preallocated to the number of slots:
//! the hot path never allocates, logs or builds an error; it counts (drops in the queue
//! counters, the rest in [`StrideStats`], logged when the queue is dropped).
//!
//! ## Geometry and fallback
//! [`plan`] decides per queue from the device's capabilities (`mlx5dv_query_device`), the
//! queue's buffers and the config: [`choose_geometry`] picks the stride (configured, or the
//! largest frame rounded up to a power of two) and the most strides a slot holds within the
//! device's limits; [`ring_plan`] sizes the WQ (enough strides for `ring_depth` frames), the
//! slots taken (twice the WQEs, so that consumers can hold one WQ's worth of frames while
//! the NIC fills the other) and the completion queue (one entry per stride posted).
//! `"auto"` falls back to one frame per receive with the reason logged, `"on"` fails.
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use ffi::{
    Context, FlowAttr, IbError, Mr, Pd, StrideCompletion, StrideGeometry, StrideKind, StridingCaps,
    StridingRq, STRIDING_POLL_MAX,
};
use rtdaq_config::model::StridingRq as StridingMode;
use rtdaq_core::traits::Segment;
use rtdaq_core::{Buf, BufferPool, ConnId, DropReason, FlowId, PacketMeta, QueueCounters, QueueId};

use super::burst::RawBurst;

/// Smallest stride (mlx5: 2^6 bytes).
const STRIDE_MIN: u32 = 64;
/// Largest default stride (mlx5: 2^13 bytes).
const STRIDE_MAX: u32 = 8192;
/// Most strides per WQE used: a completion reports the strides it consumed in 14 bits, so
/// a filler must never need more than 2^14 − 1.
const MAX_LOG_STRIDES: u32 = 14;
/// Most WQEs per queue.
const MAX_WQES: u32 = 1024;
/// Most completion queue entries.
const MAX_CQ_DEPTH: u64 = 1 << 22;

/// How a raw RX queue receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RxPlan {
    /// One frame per receive (`fallback`: why the striding RQ is not used, `None` when
    /// `striding_rq = "off"`).
    Frames {
        /// The reason, logged when `striding_rq = "auto"`.
        fallback: Option<String>,
    },
    /// The striding RQ with this geometry.
    Strides(StrideGeometry),
}

/// What [`plan`] needs to know about a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueFacts {
    /// Bytes of one slot of the queue's first pool (one WQE's buffer).
    pub slot_size: usize,
    /// Largest frame the interface receives (mtu + Ethernet + two VLAN tags).
    pub max_frame: u32,
    /// Header-data split configured (several pools): the striding RQ has one buffer per WQE.
    pub hds: bool,
}

/// The stride a queue gets without `stride_size`: the largest frame rounded up to a power
/// of two, within 64..=8192 (the config crate's default, `default_stride`, is the same).
pub fn default_stride(max_frame: u32) -> u32 {
    max_frame.next_power_of_two().clamp(STRIDE_MIN, STRIDE_MAX)
}

/// The geometry for a slot of `slot_size` bytes: the stride (`stride_size`, else
/// [`default_stride`], clamped into the device's range) and the most strides (a power of
/// two) the slot holds, at most the device's maximum and 2^14. Pure.
///
/// # Errors
/// Why it cannot be used: the device's caps are inconsistent, a configured stride outside
/// them, fewer strides than the device's minimum fit the slot, or one WQE cannot hold the
/// largest frame.
pub fn choose_geometry(
    caps: &StridingCaps,
    slot_size: usize,
    max_frame: u32,
    stride_size: Option<u32>,
) -> Result<StrideGeometry, String> {
    let (lo, hi) = (caps.min_log_stride_bytes, caps.max_log_stride_bytes);
    let (nlo, nhi) = (
        caps.min_log_strides,
        caps.max_log_strides.min(MAX_LOG_STRIDES),
    );
    if lo > hi || hi > 31 || nlo > nhi {
        return Err(format!(
            "the device reports unusable striding RQ caps (strides 2^{lo}..=2^{hi} B, 2^{}..=2^{} per WQE)",
            caps.min_log_strides, caps.max_log_strides
        ));
    }
    let stride = stride_size.unwrap_or_else(|| default_stride(max_frame));
    if !stride.is_power_of_two() {
        return Err(format!("stride_size {stride} is not a power of two"));
    }
    let mut log_s = stride.trailing_zeros();
    if log_s < lo || log_s > hi {
        if stride_size.is_some() {
            return Err(format!(
                "stride_size {stride} B is outside the device's {}..={} B",
                1u64 << lo,
                1u64 << hi
            ));
        }
        log_s = log_s.clamp(lo, hi);
    }
    let stride = 1u64 << log_s;
    let fit = slot_size as u64 / stride;
    let log_n = if fit == 0 {
        0
    } else {
        63 - fit.leading_zeros()
    }
    .min(nhi);
    if fit == 0 || log_n < nlo {
        return Err(format!(
            "RX buffers of {slot_size} B hold {fit} stride(s) of {stride} B, and the device needs {} per WQE: set the region's buf_size ≥ {} or lower engine.ibverbs.stride_size",
            1u64 << nlo,
            stride << nlo
        ));
    }
    let wqe = stride << log_n;
    if wqe < u64::from(max_frame) {
        return Err(format!(
            "a WQE of {} strides of {stride} B ({wqe} B) cannot hold the largest frame of {max_frame} B",
            1u64 << log_n
        ));
    }
    Ok(StrideGeometry {
        log_stride_bytes: log_s as u8,
        log_strides: log_n as u8,
    })
}

/// Decides how a queue receives. `caps` is the device's striding RQ caps, or why there are
/// none (libmlx5 missing, not an mlx5 device, ...). Pure.
///
/// # Errors
/// With `striding_rq = "on"`, why it cannot be used (with `"auto"` that reason is the
/// fallback's instead).
pub fn plan(
    mode: StridingMode,
    caps: Result<&StridingCaps, &str>,
    facts: QueueFacts,
    stride_size: Option<u32>,
) -> Result<RxPlan, String> {
    if mode == StridingMode::Off {
        return Ok(RxPlan::Frames { fallback: None });
    }
    let verdict = if facts.hds {
        Err("header-data split is configured (a striding WQE is one buffer)".to_owned())
    } else {
        match caps {
            Err(why) => Err(why.to_owned()),
            Ok(c) if !c.raw_packet() => {
                Err("the device's striding RQ does not serve raw packet QPs".to_owned())
            }
            Ok(c) => choose_geometry(c, facts.slot_size, facts.max_frame, stride_size),
        }
    };
    match (verdict, mode) {
        (Ok(g), _) => Ok(RxPlan::Strides(g)),
        (Err(why), StridingMode::On) => Err(why),
        (Err(why), _) => Ok(RxPlan::Frames {
            fallback: Some(why),
        }),
    }
}

/// Sizes of one striding queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingPlan {
    /// WQEs posted at most (the WQ size, a power of two).
    pub wqes: u32,
    /// Pool slots the queue takes (posted + lent to consumers).
    pub entries: u32,
    /// Completion queue entries (one per stride posted).
    pub cq_depth: u32,
}

/// The WQ holds `ring_depth` frames of one stride (at least 2, at most 1024 WQEs and
/// 2^22 strides); the queue takes twice as many slots if the pool has them. Pure.
///
/// # Errors
/// The pool has fewer than 2 free slots.
pub fn ring_plan(
    ring_depth: u32,
    geometry: StrideGeometry,
    pool_free: usize,
) -> Result<RingPlan, String> {
    let strides = geometry.strides();
    let cq_room = (MAX_CQ_DEPTH / u64::from(strides)).max(2) as u32;
    let wqes = ring_depth
        .div_ceil(strides)
        .next_power_of_two()
        .clamp(2, MAX_WQES)
        .min(prev_power_of_two(cq_room));
    let entries = (2 * wqes as usize).min(pool_free) as u32;
    if entries < 2 {
        return Err(format!(
            "the RX pool has {pool_free} free buffer(s); a striding RQ needs at least 2"
        ));
    }
    let cq_depth = (u64::from(wqes) * u64::from(strides)).clamp(64, MAX_CQ_DEPTH) as u32;
    Ok(RingPlan {
        wqes,
        entries,
        cq_depth,
    })
}

fn prev_power_of_two(v: u32) -> u32 {
    if v == 0 {
        0
    } else {
        1 << (31 - v.leading_zeros())
    }
}

/// Byte offset of the frame that starts at `stride` in a WQE buffer. Pure.
#[inline]
pub fn frame_offset(geometry: StrideGeometry, stride: u32) -> u32 {
    stride << geometry.log_stride_bytes
}

/// The pool slots of one striding queue and their reference counts, shared by the queue and
/// every burst holding frames of it (see the [module docs](self)).
pub struct StrideShared {
    bufs: Box<[Buf<'static>]>,
    refs: Box<[AtomicU32]>,
    /// Bumped (Release) each time a release ended a slot's last reference; the I/O thread
    /// looks at its lent slots only when it changed.
    released: AtomicU32,
}

impl StrideShared {
    /// Takes ownership of the slots (index = entry). Cold path.
    pub fn new(bufs: Vec<Buf<'static>>) -> Self {
        let refs = bufs.iter().map(|_| AtomicU32::new(0)).collect();
        StrideShared {
            bufs: bufs.into_boxed_slice(),
            refs,
            released: AtomicU32::new(0),
        }
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.bufs.len()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.bufs.is_empty()
    }

    /// Address of slot `e` (for the WQE).
    #[inline]
    pub fn addr(&self, e: u32) -> u64 {
        self.bufs[e as usize].addr()
    }

    /// I/O thread, before posting a free slot: the NIC's hold (refs 0 → 1).
    #[inline]
    pub fn hold(&self, e: u32) {
        debug_assert_eq!(self.refs[e as usize].load(Ordering::Relaxed), 0);
        self.refs[e as usize].store(1, Ordering::Relaxed);
    }

    /// I/O thread, a frame of slot `e` goes into a burst (the NIC's hold is still there).
    #[inline]
    pub fn acquire(&self, e: u32) {
        self.refs[e as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// I/O thread, the NIC finished slot `e`: ends its hold; true when that was the last
    /// reference (free again), false when bursts still hold frames of it (lent).
    #[inline]
    pub fn end_hold(&self, e: u32) -> bool {
        self.refs[e as usize].fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// Any thread, a burst drops a frame of slot `e`. The last release bumps `released`.
    #[inline]
    pub fn release(&self, e: u32) {
        if self.refs[e as usize].fetch_sub(1, Ordering::Release) == 1 {
            self.released.fetch_add(1, Ordering::Release);
        }
    }

    /// I/O thread: slot `e` has no reference left (Acquire: every reader's accesses to it
    /// happened before).
    #[inline]
    pub fn is_free(&self, e: u32) -> bool {
        self.refs[e as usize].load(Ordering::Acquire) == 0
    }

    /// References on slot `e` now (tests, tools).
    pub fn refs(&self, e: u32) -> u32 {
        self.refs[e as usize].load(Ordering::Relaxed)
    }

    /// The `released` counter.
    #[inline]
    pub fn released(&self) -> u32 {
        self.released.load(Ordering::Acquire)
    }

    /// The frame of `len` bytes at `off` in slot `e`: `Host` bytes, or `Device` for GPU
    /// memory.
    ///
    /// # Panics
    /// When the range leaves the slot (the queue checked it when it delivered the frame).
    #[inline]
    pub fn frame(&self, e: u32, off: u32, len: u32) -> Segment<'_> {
        let b = &self.bufs[e as usize];
        if !b.is_cpu_accessible() {
            return Segment::Device {
                ptr: b.addr() + u64::from(off),
                len,
            };
        }
        Segment::Host(
            b.bytes_at(off as usize, len as usize)
                .expect("a stride frame inside its slot"),
        )
    }
}

/// What a striding queue counts besides the queue counters (logged at drop).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StrideStats {
    /// Frames delivered.
    pub frames: u64,
    /// Filler completions (the rest of a WQE skipped).
    pub fillers: u64,
    /// WQEs finished.
    pub wqes: u64,
    /// Failed completions.
    pub errors: u64,
    /// Completions contradicting the geometry, or zero-length frames.
    pub corrupt: u64,
    /// Polls that found no WQE posted (every slot held by consumers: the NIC drops).
    pub starved: u64,
    /// `ibv_poll_cq` failures.
    pub poll_errors: u64,
}

/// The bookkeeping of one striding queue without the NIC: which slot each WQE holds, which
/// slots are free or lent, the completion → frame mapping. Pure apart from the atomics;
/// unit-tested with made-up completions.
pub(crate) struct StrideBook {
    pub(crate) shared: Arc<StrideShared>,
    geometry: StrideGeometry,
    /// WQE sequence number & mask → slot.
    wqe_entry: Box<[u32]>,
    mask: u32,
    free: Vec<u32>,
    lent: Vec<u32>,
    seen: u32,
    pub(crate) stats: StrideStats,
}

impl StrideBook {
    /// Bookkeeping for `shared`'s slots over a WQ ring of `ring_wqes` (a power of two).
    /// Cold path.
    pub(crate) fn new(shared: Arc<StrideShared>, geometry: StrideGeometry, ring_wqes: u32) -> Self {
        let n = shared.len();
        StrideBook {
            geometry,
            wqe_entry: vec![u32::MAX; ring_wqes as usize].into_boxed_slice(),
            mask: ring_wqes - 1,
            free: (0..n as u32).rev().collect(),
            lent: Vec::with_capacity(n),
            seen: shared.released(),
            shared,
            stats: StrideStats::default(),
        }
    }

    /// Slots free to post.
    pub(crate) fn free(&self) -> usize {
        self.free.len()
    }

    /// Slots the NIC finished whose frames bursts still hold.
    pub(crate) fn lent(&self) -> usize {
        self.lent.len()
    }

    /// Moves slots consumers freed since the last look from `lent` to `free`. Never
    /// allocates (`free` has room for every slot).
    #[inline]
    pub(crate) fn reclaim(&mut self) {
        let r = self.shared.released();
        if r == self.seen {
            return;
        }
        self.seen = r;
        let mut i = 0;
        while i < self.lent.len() {
            let e = self.lent[i];
            if self.shared.is_free(e) {
                self.lent.swap_remove(i);
                self.free.push(e);
            } else {
                i += 1;
            }
        }
    }

    /// Takes a free slot to post (with the NIC's hold): `(slot, address)`.
    #[inline]
    pub(crate) fn take(&mut self) -> Option<(u32, u64)> {
        let e = self.free.pop()?;
        self.shared.hold(e);
        Some((e, self.shared.addr(e)))
    }

    /// Gives back a slot [`take`](Self::take) gave whose post was refused.
    #[inline]
    pub(crate) fn untake(&mut self, e: u32) {
        if self.shared.end_hold(e) {
            self.free.push(e);
        }
    }

    /// Records that WQE `seq` holds slot `e`.
    #[inline]
    pub(crate) fn posted(&mut self, seq: u32, e: u32) {
        self.wqe_entry[(seq & self.mask) as usize] = e;
    }

    /// Applies one completion: a frame goes into `burst` (zero copy), drops are counted,
    /// a finished WQE ends the NIC's hold on its slot. Returns the frame bytes delivered
    /// (`None`: no frame). Never allocates.
    #[inline]
    pub(crate) fn complete(
        &mut self,
        c: &StrideCompletion,
        burst: &mut RawBurst,
        counters: &QueueCounters,
        queue: QueueId,
    ) -> Option<u32> {
        let e = self.wqe_entry[(c.wqe & self.mask) as usize];
        if e as usize >= self.shared.len() {
            // A completion for a WQE never posted (only a contradicting one can say so).
            self.stats.corrupt += 1;
            counters.record_drop(DropReason::Malformed);
            return None;
        }
        let mut delivered = None;
        match c.kind {
            StrideKind::Frame if c.len > 0 => {
                let off = frame_offset(self.geometry, c.stride);
                self.shared.acquire(e);
                let meta = PacketMeta {
                    len: c.len,
                    flow: FlowId::NONE,
                    queue,
                    rx_timestamp_ns: 0,
                    conn: ConnId(0),
                    ..PacketMeta::default()
                };
                if burst.push_stride(e, off, meta) {
                    self.stats.frames += 1;
                    delivered = Some(c.len);
                } else {
                    self.shared.release(e);
                    counters.record_drop(DropReason::RingFull);
                }
            }
            StrideKind::Frame | StrideKind::Corrupt => {
                self.stats.corrupt += 1;
                counters.record_drop(DropReason::Malformed);
            }
            StrideKind::Filler => self.stats.fillers += 1,
            StrideKind::Error => {
                self.stats.errors += 1;
                counters.record_drop(DropReason::Kernel);
            }
        }
        if c.wqe_done {
            self.stats.wqes += 1;
            self.wqe_entry[(c.wqe & self.mask) as usize] = u32::MAX;
            if self.shared.end_hold(e) {
                self.free.push(e);
            } else {
                self.lent.push(e);
            }
        }
        delivered
    }
}

/// A raw RX queue on a striding RQ: the NIC side ([`StridingRq`]), the registered pool,
/// the bookkeeping. Field order is drop order: the WQ (and its QP, flows, CQ) before the
/// memory registration; the slots go back to the pool when the last burst holding a frame
/// of them is gone.
pub(crate) struct StridingRx {
    rq: StridingRq,
    mr: Mr,
    book: StrideBook,
    comps: Box<[StrideCompletion]>,
    wqes: u32,
    key: String,
}

impl StridingRx {
    /// Creates the striding RQ with `flows`, takes `plan.entries` slots of `pool`, posts
    /// them. Cold path.
    ///
    /// # Errors
    /// Creating the queue or a flow failed, or the pool had too few free slots.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        ctx: &Context,
        pd: &Pd,
        mr: Mr,
        pool: &'static BufferPool<'static>,
        geometry: StrideGeometry,
        plan: RingPlan,
        flows: &[FlowAttr],
        key: String,
    ) -> Result<StridingRx, IbError> {
        let mut rq = StridingRq::create(ctx, pd, geometry, plan.wqes, plan.cq_depth)?;
        for f in flows {
            rq.attach_flow(f)?;
        }
        let mut bufs = Vec::with_capacity(plan.entries as usize);
        pool.get_bulk(plan.entries as usize, |b| bufs.push(b));
        if bufs.len() < 2 {
            return Err(IbError::Invalid(format!(
                "the RX pool gave {} buffer(s); a striding RQ needs at least 2",
                bufs.len()
            )));
        }
        let shared = Arc::new(StrideShared::new(bufs));
        let book = StrideBook::new(shared, geometry, rq.wqe_capacity());
        let mut q = StridingRx {
            rq,
            mr,
            book,
            comps: vec![StrideCompletion::default(); STRIDING_POLL_MAX].into_boxed_slice(),
            wqes: plan.wqes,
            key,
        };
        q.refill();
        Ok(q)
    }

    /// The slots and their counts, for bursts.
    pub(crate) fn shared(&self) -> &Arc<StrideShared> {
        &self.book.shared
    }

    /// The geometry.
    pub(crate) fn geometry(&self) -> StrideGeometry {
        self.rq.geometry()
    }

    /// Flow rules attached.
    pub(crate) fn flows(&self) -> usize {
        self.rq.flows()
    }

    /// Posts free slots while fewer than `wqes` WQEs are outstanding; one doorbell. Never
    /// allocates.
    #[inline]
    fn refill(&mut self) {
        while self.rq.wqe_capacity() - self.rq.room() < self.wqes {
            let Some((e, addr)) = self.book.take() else {
                break;
            };
            match self.rq.post(&self.mr, addr) {
                Some(seq) => self.book.posted(seq, e),
                None => {
                    self.book.untake(e);
                    break;
                }
            }
        }
        self.rq.commit();
        if self.rq.room() == self.rq.wqe_capacity() {
            self.book.stats.starved += 1;
        }
    }

    /// Appends ready frames to `burst` (at most `batch` in it). Never allocates, logs or
    /// builds an error.
    #[inline]
    pub(crate) fn poll(
        &mut self,
        burst: &mut RawBurst,
        counters: &QueueCounters,
        queue: QueueId,
        batch: usize,
    ) -> usize {
        self.book.reclaim();
        if !burst.bind(&self.book.shared) {
            // Another queue's burst with frames in it: not ours to fill.
            self.refill();
            return 0;
        }
        let room = batch
            .saturating_sub(rtdaq_core::traits::RxBurst::len(burst))
            .min(burst.room())
            .min(self.comps.len());
        let n = if room == 0 {
            0
        } else {
            match self.rq.poll(&mut self.comps[..room]) {
                Ok(n) => n,
                Err(_) => {
                    self.book.stats.poll_errors += 1;
                    0
                }
            }
        };
        let (mut got, mut bytes) = (0u64, 0u64);
        for i in 0..n {
            let c = self.comps[i];
            if let Some(len) = self.book.complete(&c, burst, counters, queue) {
                got += 1;
                bytes += u64::from(len);
            }
        }
        if got > 0 {
            counters.record_rx_burst(got, bytes);
        }
        self.refill();
        got as usize
    }
}

impl Drop for StridingRx {
    fn drop(&mut self) {
        let s = self.book.stats;
        log::info!(
            "{}: striding RQ ({} WQEs of {} × {} B strides, {} slots, {} free and {} lent at the end): {} frames, {} WQEs finished, {} fillers, {} failed and {} contradicting completions, {} polls with no WQE posted, {} poll errors",
            self.key,
            self.wqes,
            self.geometry().strides(),
            self.geometry().stride_bytes(),
            self.book.shared.len(),
            self.book.free(),
            self.book.lent(),
            s.frames,
            s.wqes,
            s.fillers,
            s.errors,
            s.corrupt,
            s.starved,
            s.poll_errors
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ffi::StrideCursor;
    use rtdaq_core::traits::RxBurst;

    fn caps() -> StridingCaps {
        // ConnectX-5 and later with the extended stride-count range.
        StridingCaps {
            min_log_stride_bytes: 6,
            max_log_stride_bytes: 13,
            min_log_strides: 3,
            max_log_strides: 16,
            supported_qpts: 1 << 8,
        }
    }

    fn geo(log_stride_bytes: u8, log_strides: u8) -> StrideGeometry {
        StrideGeometry {
            log_stride_bytes,
            log_strides,
        }
    }

    fn facts(slot_size: usize) -> QueueFacts {
        QueueFacts {
            slot_size,
            max_frame: 1522,
            hds: false,
        }
    }

    #[test]
    fn geometry_default_stride_is_the_frame_rounded_up() {
        // 1522 B frames: 2048 B strides; 256 KiB slots: 128 strides.
        assert_eq!(default_stride(1522), 2048);
        assert_eq!(default_stride(9622), 8192);
        assert_eq!(default_stride(60), 64);
        let g = choose_geometry(&caps(), 262_144, 1522, None).unwrap();
        assert_eq!((g.stride_bytes(), g.strides()), (2048, 128));
        // A slot that is not a power of two of strides uses the largest power that fits.
        let g = choose_geometry(&caps(), 262_144 + 4096 + 128, 1522, None).unwrap();
        assert_eq!(g.strides(), 128);
        // Jumbo frames span strides: 9622 B -> 8192 B strides, 2 per frame.
        let g = choose_geometry(&caps(), 1 << 20, 9622, None).unwrap();
        assert_eq!((g.stride_bytes(), g.strides()), (8192, 128));
    }

    #[test]
    fn geometry_configured_stride_and_device_limits() {
        let g = choose_geometry(&caps(), 65_536, 1522, Some(64)).unwrap();
        assert_eq!((g.stride_bytes(), g.strides()), (64, 1024));
        // At most 2^14 strides, even if the device allows 2^16.
        let g = choose_geometry(&caps(), 1 << 24, 1522, Some(64)).unwrap();
        assert_eq!(g.strides(), 1 << 14);
        let mut c = caps();
        c.max_log_strides = 6;
        assert_eq!(
            choose_geometry(&c, 1 << 24, 1522, None).unwrap().strides(),
            64
        );
        // A configured stride outside the device's range is an error, a default is clamped.
        c.min_log_stride_bytes = 8;
        let e = choose_geometry(&c, 65_536, 100, Some(64)).unwrap_err();
        assert!(e.contains("outside the device's 256..=8192 B"), "{e}");
        assert_eq!(
            choose_geometry(&c, 65_536, 100, None)
                .unwrap()
                .stride_bytes(),
            256
        );
    }

    #[test]
    fn geometry_refuses_small_slots_and_bad_caps() {
        // 2048 B slots hold one 2048 B stride; the device wants 8.
        let e = choose_geometry(&caps(), 2048, 1522, None).unwrap_err();
        assert!(
            e.contains("hold 1 stride(s) of 2048 B") && e.contains("buf_size ≥ 16384"),
            "{e}"
        );
        // Older devices: 512 strides per WQE at least.
        let mut c = caps();
        c.min_log_strides = 9;
        let e = choose_geometry(&c, 262_144, 1522, None).unwrap_err();
        assert!(e.contains("needs 512 per WQE"), "{e}");
        // A slot smaller than one stride.
        assert!(choose_geometry(&caps(), 100, 60, Some(128)).is_err());
        // A WQE smaller than the frame: 8 strides of 64 B for a 1522 B frame.
        let e = choose_geometry(&caps(), 512, 1522, Some(64)).unwrap_err();
        assert!(e.contains("cannot hold the largest frame"), "{e}");
        let mut c = caps();
        c.min_log_stride_bytes = 14;
        assert!(choose_geometry(&c, 1 << 20, 1522, None)
            .unwrap_err()
            .contains("unusable"));
    }

    #[test]
    fn fallback_decision() {
        let c = caps();
        // off: frames, nothing to log.
        assert_eq!(
            plan(StridingMode::Off, Ok(&c), facts(1 << 18), None),
            Ok(RxPlan::Frames { fallback: None })
        );
        // auto with support and big slots: strides.
        assert_eq!(
            plan(StridingMode::Auto, Ok(&c), facts(1 << 18), None),
            Ok(RxPlan::Strides(geo(11, 7)))
        );
        // auto without libmlx5 / on Soft-RoCE: frames with the reason; on: the reason.
        let why = "not an mlx5 device (mlx5dv_query_device: EOPNOTSUPP)";
        assert_eq!(
            plan(StridingMode::Auto, Err(why), facts(1 << 18), None),
            Ok(RxPlan::Frames {
                fallback: Some(why.to_owned())
            })
        );
        assert_eq!(
            plan(StridingMode::On, Err(why), facts(1 << 18), None),
            Err(why.to_owned())
        );
        // No raw packet QPs on the striding RQ.
        let mut nc = c;
        nc.supported_qpts = 0;
        let e = plan(StridingMode::On, Ok(&nc), facts(1 << 18), None).unwrap_err();
        assert!(e.contains("raw packet"), "{e}");
        // Default 2048 B buffers: auto falls back, on fails, both naming buf_size.
        match plan(StridingMode::Auto, Ok(&c), facts(2048), None).unwrap() {
            RxPlan::Frames { fallback: Some(w) } => assert!(w.contains("buf_size"), "{w}"),
            other => panic!("{other:?}"),
        }
        assert!(plan(StridingMode::On, Ok(&c), facts(2048), None).is_err());
        // Header-data split.
        let mut f = facts(1 << 18);
        f.hds = true;
        let e = plan(StridingMode::On, Ok(&c), f, None).unwrap_err();
        assert!(e.contains("header-data split"), "{e}");
    }

    #[test]
    fn ring_sizes() {
        // 1024 frames of 128 strides per WQE: 8 WQEs, 16 slots, 1024 CQEs.
        let p = ring_plan(1024, geo(11, 7), 64).unwrap();
        assert_eq!((p.wqes, p.entries, p.cq_depth), (8, 16, 1024));
        // At least 2 WQEs; the pool limits the slots.
        let p = ring_plan(64, geo(11, 7), 3).unwrap();
        assert_eq!((p.wqes, p.entries, p.cq_depth), (2, 3, 256));
        assert!(ring_plan(64, geo(11, 7), 1).is_err());
        // The completion queue stays within 2^22 entries.
        let p = ring_plan(1 << 30, geo(6, 14), 1 << 20).unwrap();
        assert_eq!(p.wqes, 256);
        assert_eq!(p.cq_depth, 1 << 22);
    }

    #[test]
    fn stride_to_frame_offset() {
        let g = geo(11, 7);
        assert_eq!(frame_offset(g, 0), 0);
        assert_eq!(frame_offset(g, 1), 2048);
        assert_eq!(frame_offset(g, 127), 127 * 2048);
        assert_eq!(frame_offset(geo(6, 3), 5), 320);
    }

    /// A pool of `n` slots of `size` bytes, leaked (the queues use `'static` pools).
    fn pool(n: usize, size: usize) -> &'static BufferPool<'static> {
        let mem: &'static mut [u8] = Box::leak(vec![0u8; n * size].into_boxed_slice());
        let links: &'static mut [AtomicU32] =
            Box::leak((0..n).map(|_| AtomicU32::new(0)).collect::<Box<[_]>>());
        Box::leak(Box::new(BufferPool::new(mem, links, size).unwrap()))
    }

    fn cnt(len: u32, strides: u32, filler: bool) -> u32 {
        len | (strides << 16) | if filler { 1 << 31 } else { 0 }
    }

    /// A fake NIC: the bookkeeping with WQEs "posted" in order and completions decoded by the
    /// sys crate's cursor, as `StridingRx` does with the real queue.
    struct Fake {
        book: StrideBook,
        cursor: StrideCursor,
        head: u32,
        ring: u32,
    }

    impl Fake {
        fn new(
            p: &'static BufferPool<'static>,
            slots: usize,
            g: StrideGeometry,
            ring: u32,
        ) -> Self {
            let mut bufs = Vec::new();
            p.get_bulk(slots, |b| bufs.push(b));
            // Recognisable bytes: entry × 16 + the 64-byte block of the offset (CPU pools).
            for (e, b) in bufs.iter_mut().enumerate() {
                for (i, x) in b.slot_mut().into_iter().flatten().enumerate() {
                    *x = (e * 16 + i / 64) as u8;
                }
            }
            let shared = Arc::new(StrideShared::new(bufs));
            Fake {
                book: StrideBook::new(shared, g, ring),
                cursor: StrideCursor::new(g),
                head: 0,
                ring,
            }
        }
        /// Posts free slots while the ring has room.
        fn refill(&mut self) -> Vec<u32> {
            let mut posted = Vec::new();
            while self.head.wrapping_sub(self.cursor.tail()) < self.ring {
                let Some((e, _)) = self.book.take() else {
                    break;
                };
                self.book.posted(self.head, e);
                posted.push(e);
                self.head += 1;
            }
            posted
        }
        fn complete(
            &mut self,
            byte_cnt: u32,
            burst: &mut RawBurst,
            counters: &QueueCounters,
        ) -> Option<u32> {
            let c = self.cursor.decode(true, 0, byte_cnt, self.head);
            self.book.complete(&c, burst, counters, QueueId(0))
        }
    }

    #[test]
    fn frames_map_to_slot_offsets_without_copy() {
        let p = pool(4, 512);
        // 8 strides of 64 B per 512 B slot.
        let g = geo(6, 3);
        let mut f = Fake::new(p, 4, g, 2);
        let counters = QueueCounters::new();
        let posted = f.refill();
        assert_eq!(posted.len(), 2);
        let e = posted[0];
        let mut burst = RawBurst::new(QueueId(0), Some(Arc::clone(&f.book.shared)));
        // 100 B at stride 0, 64 B at stride 2, 300 B at stride 3 (finishes WQE 0).
        assert_eq!(
            f.complete(cnt(100, 2, false), &mut burst, &counters),
            Some(100)
        );
        assert_eq!(
            f.complete(cnt(64, 1, false), &mut burst, &counters),
            Some(64)
        );
        assert_eq!(
            f.complete(cnt(300, 5, false), &mut burst, &counters),
            Some(300)
        );
        assert_eq!(burst.len(), 3);
        // Each frame is the slot's own memory at stride × 64 (the pattern says where).
        for (pkt, (stride, len)) in [(0u32, 100usize), (2, 64), (3, 300)]
            .into_iter()
            .enumerate()
        {
            assert!(burst.is_stride_frame(pkt));
            assert_eq!(burst.meta(pkt).len as usize, len);
            match burst.segment(pkt, 0) {
                Segment::Host(b) => {
                    assert_eq!(b.len(), len);
                    assert_eq!(u32::from(b[0]), e * 16 + stride, "packet {pkt}");
                    let slot = f.book.shared.addr(e);
                    assert_eq!(b.as_ptr() as u64, slot + u64::from(frame_offset(g, stride)));
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            f.book.shared.refs(e),
            3,
            "three frames, the NIC's hold ended"
        );
        assert_eq!(f.book.lent(), 1);
        drop(burst);
        assert_eq!(f.book.shared.refs(e), 0);
        f.book.reclaim();
        assert_eq!((f.book.lent(), f.book.free()), (0, 3));
        // The slots go back to the pool with the last reference to them.
        assert_eq!(p.available(), 0);
        drop(f);
        assert_eq!(p.available(), 4);
    }

    /// Striding buffers in GPU memory (a `device` region registered through its dma-buf):
    /// each frame is handed up as the device address of its stride, never read.
    #[test]
    fn frames_in_gpu_memory_are_device_segments_at_their_stride() {
        const BASE: u64 = 0x7f00_0000_0000;
        let links: &'static mut [AtomicU32] =
            Box::leak((0..4).map(|_| AtomicU32::new(0)).collect::<Box<[_]>>());
        let p: &'static BufferPool<'static> = Box::leak(Box::new(
            BufferPool::over_device_memory(BASE, 4 * 512, links, 512).unwrap(),
        ));
        let g = geo(6, 3);
        let mut f = Fake::new(p, 4, g, 2);
        let counters = QueueCounters::new();
        let e = f.refill()[0];
        let mut burst = RawBurst::new(QueueId(0), Some(Arc::clone(&f.book.shared)));
        assert_eq!(
            f.complete(cnt(100, 2, false), &mut burst, &counters),
            Some(100)
        );
        assert_eq!(
            f.complete(cnt(200, 4, false), &mut burst, &counters),
            Some(200)
        );
        let slot = f.book.shared.addr(e);
        assert!((BASE..BASE + 4 * 512).contains(&slot));
        for (pkt, (stride, len)) in [(0u32, 100u32), (2, 200)].into_iter().enumerate() {
            assert_eq!(
                burst.segment(pkt, 0),
                Segment::Device {
                    ptr: slot + u64::from(frame_offset(g, stride)),
                    len
                }
            );
        }
        drop(burst);
        drop(f);
        assert_eq!(p.available(), 4);
    }

    #[test]
    fn a_slot_returns_only_after_every_frame_is_released_in_any_order() {
        let p = pool(4, 512);
        let g = geo(6, 3);
        let mut f = Fake::new(p, 4, g, 2);
        let counters = QueueCounters::new();
        let first = f.refill();
        assert_eq!(first.len(), 2);
        let (s0, s1) = (first[0], first[1]);
        // Two bursts, each with frames of WQE 0 (slot s0); the second burst also starts WQE 1.
        let mut a = RawBurst::new(QueueId(0), Some(Arc::clone(&f.book.shared)));
        let mut b = RawBurst::new(QueueId(0), Some(Arc::clone(&f.book.shared)));
        f.complete(cnt(200, 4, false), &mut a, &counters).unwrap();
        f.complete(cnt(200, 4, false), &mut b, &counters).unwrap(); // finishes WQE 0
        f.complete(cnt(64, 1, false), &mut b, &counters).unwrap(); // WQE 1, slot s1
        assert_eq!(f.book.shared.refs(s0), 2);
        assert_eq!(f.book.shared.refs(s1), 2, "the NIC's hold + one frame");
        // A new WQE can be posted from the free slots meanwhile.
        assert_eq!(f.refill().len(), 1);
        // Releasing burst a (one frame of slot s0): still lent.
        drop(a);
        f.book.reclaim();
        assert_eq!(f.book.shared.refs(s0), 1);
        assert_eq!((f.book.lent(), f.book.free()), (1, 1));
        // Clearing b (on another thread: the order does not matter): slot s0 is free again,
        // slot s1 keeps the NIC's hold (WQE 1 is not finished).
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut b = b;
                b.clear();
            });
        });
        f.book.reclaim();
        assert_eq!(f.book.shared.refs(s0), 0);
        assert_eq!(f.book.shared.refs(s1), 1);
        assert_eq!((f.book.lent(), f.book.free()), (0, 2));
        // WQE 1 finished by a filler with no frame left out: free at once, never lent.
        let mut c = RawBurst::new(QueueId(0), Some(Arc::clone(&f.book.shared)));
        assert_eq!(f.complete(cnt(0, 7, true), &mut c, &counters), None);
        assert_eq!(f.book.shared.refs(s1), 0);
        assert_eq!((f.book.lent(), f.book.free()), (0, 3));
        assert_eq!(f.book.stats.fillers, 1);
        assert_eq!(f.book.stats.wqes, 2);
        // Every slot back in the bookkeeping: 3 free + 1 posted (WQE 2).
        assert_eq!(f.book.free() + f.book.lent() + 1, 4);
    }

    #[test]
    fn drops_are_counted_and_release_their_reference() {
        let p = pool(2, 512);
        let g = geo(6, 3);
        let mut f = Fake::new(p, 2, g, 1);
        let counters = QueueCounters::new();
        f.refill();
        let mut burst = RawBurst::new(QueueId(0), Some(Arc::clone(&f.book.shared)));
        // A zero-length frame and a contradicting completion: malformed, no frame kept.
        assert_eq!(f.complete(cnt(0, 1, false), &mut burst, &counters), None);
        assert_eq!(counters.drops(DropReason::Malformed), 1);
        assert_eq!(f.complete(cnt(64, 9, false), &mut burst, &counters), None);
        assert_eq!(counters.drops(DropReason::Malformed), 2);
        // The contradicting one gave up WQE 0: its slot is free (no frame held).
        assert_eq!(f.book.free(), 2);
        // A failed completion: a kernel drop, the WQE given up.
        f.refill();
        let c = f.cursor.decode(false, 5, 0, f.head);
        assert_eq!(f.book.complete(&c, &mut burst, &counters, QueueId(0)), None);
        assert_eq!(counters.drops(DropReason::Kernel), 1);
        assert_eq!(f.book.free(), 2);
        assert_eq!(burst.len(), 0);
    }

    #[test]
    fn the_hot_path_never_grows_its_lists() {
        // Every slot is in exactly one place, so the preallocated lists never reallocate.
        let p = pool(8, 512);
        let g = geo(6, 3);
        let mut f = Fake::new(p, 8, g, 4);
        let counters = QueueCounters::new();
        let (cap_free, cap_lent) = (f.book.free.capacity(), f.book.lent.capacity());
        let mut held = Vec::new();
        for round in 0..50u32 {
            f.refill();
            let mut b = RawBurst::new(QueueId(0), Some(Arc::clone(&f.book.shared)));
            for _ in 0..8 {
                f.complete(cnt(60, 1, false), &mut b, &counters);
            }
            // Keep every third burst for a while (a slow consumer).
            if round % 3 == 0 {
                held.push(b);
            }
            if held.len() > 2 {
                held.remove(0);
            }
            f.book.reclaim();
            assert_eq!(f.book.free.capacity(), cap_free);
            assert_eq!(f.book.lent.capacity(), cap_lent);
        }
        held.clear();
        f.book.reclaim();
        let outstanding = f.head.wrapping_sub(f.cursor.tail()) as usize;
        assert_eq!(f.book.free() + f.book.lent() + outstanding, 8);
        assert_eq!(f.book.lent(), 0);
        assert_eq!(f.book.stats.frames, 400);
    }
}
