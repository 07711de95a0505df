//! Raw Ethernet over verbs (`engine.ibverbs.mode = "raw"`): one raw packet QP per RX
//! queue, steered by `ibv_create_flow` rules built from `[[flows]]` ([`flow_matches`]),
//! receives into the pool with CQ polling; TX queues send whole frames (built by the
//! runtime's generator) from pool buffers. Raw packet QPs exist on ConnectX NICs, not on
//! Soft-RoCE; the hardware test is `tests/raw_hw.rs` (`RTDAQ_TEST_IBDEV`).
//!
//! An RX queue receives one frame per receive (a pool buffer per frame), or, when the
//! device has it and `engine.ibverbs.striding_rq` allows it, through the mlx5 striding
//! (multi-packet) receive queue: many frames per pool buffer at stride offsets, delivered
//! in place ([`striding`]). Both fill a [`RawBurst`].
//!
//! A queue with header-data split (`hds_split = h`, two memory regions, header region
//! first) receives one frame per receive with a two-SGE receive ([`hds`]): the first `h`
//! bytes into a buffer of the header region, the rest into a buffer of the data region,
//! delivered as a packet of two segments. The data region may be GPU memory: a pool the CPU
//! cannot reach is registered through its dma-buf (`ibv_reg_dmabuf_mr`) and its segments are
//! `Segment::Device`. The striding RQ never splits (with `striding_rq = "auto"` such a queue
//! falls back to one frame per receive; `"on"` refuses it).
//!
//! A queue whose one region is GPU memory receives whole frames there, one per receive or
//! through the striding RQ (its buffers registered through the dma-buf alike): the NIC
//! steers by the flow rules, nothing here reads a frame, and every frame goes up as
//! `Segment::Device` (`Buf::as_segment`, `StrideShared::frame`).
mod burst;
pub mod hds;
pub mod striding;

pub use burst::RawBurst;

use rtdaq_config::model::{Address, StridingRq as StridingMode};
use rtdaq_config::Config;
use rtdaq_core::flow::{FlowAction, FlowRule, PortRange};
use rtdaq_core::traits::{Engine, EngineArgs, RxBurst, RxQueue, TxBurst, TxQueue};
use rtdaq_core::{
    Buf, Burst, ConnId, DropReason, FlowId, Packet, PacketMeta, QueueCounters, QueueId,
};

use ffi::{
    Access, Context, Cq, DeviceList, Mr, Pd, Qp, QpCaps, RecvBatch, SendBatch, SendOp, SendRequest,
    StrideGeometry, StridingCaps, WorkCompletion,
};

use crate::error::{IbvError, Result};
use crate::register::register_pool;
use crate::roce::{settings, MAX_BATCH};
use hds::FrameLayout;

/// Splits an inclusive port range into aligned `(port, mask)` blocks (what a flow spec's
/// masked port can express). Pure.
pub fn port_blocks(r: PortRange) -> Vec<(u16, u16)> {
    let (mut lo, hi) = (u32::from(r.lo), u32::from(r.hi));
    let mut out = Vec::new();
    while lo <= hi {
        let mut size = if lo == 0 {
            1 << 16
        } else {
            1u32 << lo.trailing_zeros()
        };
        while lo + size - 1 > hi {
            size >>= 1;
        }
        out.push((lo as u16, (!(size - 1)) as u16));
        lo += size;
    }
    out
}

fn prefix(p: rtdaq_core::flow::Ipv4Prefix) -> ([u8; 4], [u8; 4]) {
    let m = if p.len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(p.len))
    };
    (p.addr, m.to_be_bytes())
}

/// The verbs flow specs of one rule (several when a port range needs several blocks).
///
/// # Errors
/// A match field flow steering cannot express (`word`, `ecpri_msg_type`,
/// `ipv4_total_len`, a non-IPv4 ethertype), naming the field.
pub fn flow_matches(rule: &FlowRule) -> std::result::Result<Vec<ffi::FlowMatch>, &'static str> {
    let m = &rule.matcher;
    if m.word.is_some() {
        return Err("word");
    }
    if m.ecpri_msg_type.is_some() {
        return Err("ecpri_msg_type");
    }
    if m.ipv4_total_len.is_some() {
        return Err("ipv4_total_len");
    }
    if matches!(m.ethertype, Some(t) if t != 0x0800) {
        return Err("ethertype");
    }
    let base = ffi::FlowMatch {
        dst_mac: None,
        vlan: m.vlan_id,
        ipv4_src: m.ipv4_src.map(prefix),
        ipv4_dst: m.ipv4_dst.map(prefix),
        udp_src: None,
        udp_dst: None,
    };
    let src = m.udp_src.map_or(vec![None], |r| {
        port_blocks(r).into_iter().map(Some).collect()
    });
    let dst = m.udp_dst.map_or(vec![None], |r| {
        port_blocks(r).into_iter().map(Some).collect()
    });
    let mut out = Vec::new();
    for s in &src {
        for d in &dst {
            out.push(ffi::FlowMatch {
                udp_src: *s,
                udp_dst: *d,
                ..base
            });
        }
    }
    Ok(out)
}

/// The RDMA device of interface `i`: `engine.ibverbs.device`, else the one sysfs lists
/// under the netdev (`/sys/class/net/<if>/device/infiniband/`) or PCI function.
fn device_of(cfg: &Config, i: usize, configured: Option<&str>) -> Result<String> {
    if let Some(d) = configured {
        return Ok(d.to_owned());
    }
    let dir = match &cfg.interfaces[i].address {
        Address::Netdev(n) => format!("/sys/class/net/{n}/device/infiniband"),
        Address::Pci(p) => format!("/sys/bus/pci/devices/{p}/infiniband"),
        Address::Socket(_) => {
            return Err(IbvError::config(
                format!("interfaces[{i}].address"),
                "raw mode needs a netdev or PCI address",
            ))
        }
    };
    std::fs::read_dir(&dir)
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .ok_or_else(|| IbvError::NoDevice {
            detail: format!("interfaces[{i}].address = \"{}\" has no RDMA device ({dir} missing); set engine.ibverbs.device", cfg.interfaces[i].address),
        })
}

/// The raw Ethernet engine.
pub struct RawEngine {
    rx: Vec<RawRx>,
    tx: Vec<RawTx>,
}

/// A raw packet RX queue: one frame per receive, or the mlx5 striding RQ.
pub struct RawRx {
    path: RxPath,
    counters: &'static QueueCounters,
    queue: QueueId,
    batch: usize,
}

/// How a raw RX queue receives.
enum RxPath {
    /// One frame per receive.
    Frames(FrameRx),
    /// Many frames per pool buffer (mlx5 striding RQ).
    Strides(striding::StridingRx),
}

/// One frame per receive: a raw packet QP with its own receive queue.
struct FrameRx {
    // Field order = drop order: the QP (and its flows) before the CQ and the regions.
    qp: Qp,
    cq: Cq,
    mr: Mr,
    /// The whole frames' pool, or the header pool with header-data split.
    pool: &'static rtdaq_core::BufferPool<'static>,
    /// The data side of header-data split; `None` for one region.
    split: Option<DataSide>,
    /// The buffer of each posted receive (the header buffer with header-data split).
    posted: Vec<Option<Buf<'static>>>,
    empty: Vec<u32>,
    wcs: Box<[WorkCompletion]>,
    rbatch: RecvBatch,
}

/// The second scatter entry of a split queue's receives: the data region.
struct DataSide {
    /// `hds_split`: bytes of the header entry.
    header: u32,
    mr: Mr,
    pool: &'static rtdaq_core::BufferPool<'static>,
    /// The data buffer of each posted receive (same index as `FrameRx::posted`).
    posted: Vec<Option<Buf<'static>>>,
}

/// The largest frame interface `i` receives: mtu + 14 Ethernet + 8 for two VLAN tags (the
/// config's rule for raw engines).
fn max_frame(cfg: &Config, i: usize) -> u32 {
    cfg.interfaces[i].mtu + 14 + 8
}

/// A raw packet TX queue.
pub struct RawTx {
    qp: Qp,
    cq: Cq,
    mr: Mr,
    pool: &'static rtdaq_core::BufferPool<'static>,
    inflight: std::collections::VecDeque<(u32, Packet<'static>)>,
    seq: u32,
    depth: u32,
    wcs: Box<[WorkCompletion]>,
    sbatch: SendBatch,
    counters: &'static QueueCounters,
    queue: QueueId,
}

impl Engine<'static> for RawEngine {
    const NAME: &'static str = "ibverbs";
    const FRAMES: bool = true;
    type Config = EngineArgs<'static, Config>;
    type Rx = RawRx;
    type Tx = RawTx;
    type Error = IbvError;

    fn open(args: Self::Config) -> Result<Self> {
        let cfg = args.config;
        let ib = settings(cfg)?;
        let list = DeviceList::get()
            .map_err(|e| IbvError::verbs("engine.ibverbs.device", "listing RDMA devices", e))?;
        let mut e = RawEngine {
            rx: Vec::new(),
            tx: Vec::new(),
        };
        for (i, _) in cfg.interfaces.iter().enumerate() {
            let dev = device_of(cfg, i, ib.device.as_deref())?;
            let ctx: Context = list.open(&dev).map_err(|e| {
                IbvError::verbs("engine.ibverbs.device", format!("opening {dev}"), e)
            })?;
            let pd: Pd = ctx
                .alloc_pd()
                .map_err(|e| IbvError::verbs("engine.ibverbs.device", "ibv_alloc_pd", e))?;
            let rules = cfg.flow_rules(i);
            // The striding RQ caps, once per device that receives (libmlx5 is not even loaded
            // with "off").
            let receives = args.rx.iter().any(|r| r.interface == i);
            let caps: std::result::Result<StridingCaps, String> = match ib.striding_rq {
                StridingMode::Off => Err("striding_rq = \"off\"".to_owned()),
                _ if !receives => Err("no RX queue".to_owned()),
                _ => ctx.striding_rq_caps().map_err(|e| e.to_string()),
            };
            for r in args.rx.iter().filter(|r| r.interface == i) {
                let key = format!("interfaces[{i}].rx_queues[{}]", r.queue);
                let qcfg = &cfg.interfaces[i].rx_queues[r.queue];
                let depth = qcfg.ring_depth.clamp(64, 16384);
                let pool = r.pools[0];
                let mut attrs = Vec::new();
                for (p, rule) in rules.iter().enumerate() {
                    let to_me =
                        matches!(&rule.action, FlowAction::Queue(q) if usize::from(q.0) == r.queue);
                    if !to_me {
                        continue;
                    }
                    let ms = flow_matches(rule).map_err(|f| {
                        IbvError::config(
                            format!("flows[{p}].match.{f}"),
                            "verbs flow steering cannot match this field",
                        )
                    })?;
                    for m in ms {
                        attrs.push(ffi::FlowAttr::build(&m, ib.port, p as u16));
                    }
                }
                if attrs.is_empty() && r.queue == 0 {
                    attrs.push(ffi::FlowAttr::build(
                        &ffi::FlowMatch::default(),
                        ib.port,
                        0x0fff,
                    ));
                }
                let facts = striding::QueueFacts {
                    slot_size: pool.slot_size(),
                    max_frame: max_frame(cfg, i),
                    hds: r.pools.len() > 1,
                };
                let on = ib.striding_rq == StridingMode::On;
                let refuse = |why: &str| {
                    IbvError::config(
                        "engine.ibverbs.striding_rq",
                        format!("\"on\", but {key} cannot use the mlx5 striding RQ: {why}; set striding_rq = \"auto\" (falls back to one frame per receive) or \"off\""),
                    )
                };
                let plan = striding::plan(
                    ib.striding_rq,
                    caps.as_ref().map_err(String::as_str),
                    facts,
                    ib.stride_size,
                )
                .map_err(|why| refuse(&why))?;
                let mut path = None;
                match plan {
                    striding::RxPlan::Strides(g) => {
                        match open_striding(&ctx, &pd, pool, g, depth, &attrs, &key) {
                            Ok(s) => path = Some(RxPath::Strides(s)),
                            Err(why) if on => return Err(refuse(&why)),
                            Err(why) => log::info!(
                                "{key}: striding RQ not used ({why}); one frame per receive"
                            ),
                        }
                    }
                    striding::RxPlan::Frames {
                        fallback: Some(why),
                    } => log::info!("{key}: striding RQ not used ({why}); one frame per receive"),
                    striding::RxPlan::Frames { fallback: None } => {}
                }
                let path = match path {
                    Some(p) => p,
                    None => {
                        let layout =
                            FrameLayout::of(r.pools.len(), qcfg.hds_split, pool.slot_size(), &key)?;
                        RxPath::Frames(FrameRx::open(
                            &ctx, &pd, r.pools, layout, depth, &attrs, ib.port, &key,
                        )?)
                    }
                };
                let mut q = RawRx {
                    path,
                    counters: r.counters,
                    queue: QueueId(r.queue as u16),
                    batch: (qcfg.batch_size as usize).clamp(1, MAX_BATCH),
                };
                if let RxPath::Frames(f) = &mut q.path {
                    f.refill();
                }
                e.rx.push(q);
            }
            for r in args.tx.iter().filter(|r| r.interface == i) {
                let key = format!("interfaces[{i}].tx_queues[{}]", r.queue);
                let depth = cfg.interfaces[i].tx_queues[r.queue]
                    .ring_depth
                    .clamp(64, 16384);
                let pool = r.pools[0];
                let mr = pd
                    .register_pool(pool, Access::default())
                    .map_err(|e| IbvError::verbs(&key, "ibv_reg_mr", e))?;
                let cq = ctx
                    .create_cq(depth)
                    .map_err(|e| IbvError::verbs(&key, "ibv_create_cq", e))?;
                let caps = QpCaps {
                    max_send_wr: depth,
                    max_recv_wr: 1,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline: 0,
                };
                let qp = Qp::create_raw_packet(&pd, &cq, &cq, caps, ib.port)
                    .map_err(|e| IbvError::verbs(&key, "creating the raw packet QP", e))?;
                e.tx.push(RawTx {
                    qp,
                    cq,
                    mr,
                    pool,
                    inflight: std::collections::VecDeque::with_capacity(depth as usize),
                    seq: 0,
                    depth,
                    wcs: vec![WorkCompletion::default(); 64].into_boxed_slice(),
                    sbatch: SendBatch::with_capacity(1),
                    counters: r.counters,
                    queue: QueueId(r.queue as u16),
                });
            }
        }
        Ok(e)
    }

    fn split(self, rx: &mut dyn FnMut(Self::Rx), tx: &mut dyn FnMut(Self::Tx)) {
        self.rx.into_iter().for_each(rx);
        self.tx.into_iter().for_each(tx);
    }
}

/// Opens the striding path of one queue; the reason as text when it cannot (the caller
/// falls back or refuses). Cold path.
fn open_striding(
    ctx: &Context,
    pd: &Pd,
    pool: &'static rtdaq_core::BufferPool<'static>,
    geometry: StrideGeometry,
    depth: u32,
    attrs: &[ffi::FlowAttr],
    key: &str,
) -> std::result::Result<striding::StridingRx, String> {
    let plan = striding::ring_plan(depth, geometry, pool.available())?;
    let mr = pd
        .register_pool(pool, Access::LOCAL_WRITE)
        .map_err(|e| format!("ibv_reg_mr: {e}"))?;
    let q = striding::StridingRx::open(ctx, pd, mr, pool, geometry, plan, attrs, key.to_owned())
        .map_err(|e| e.to_string())?;
    log::info!(
        "{key}: striding RQ: {} WQEs of {} strides × {} B, {} pool buffers of {} B",
        plan.wqes,
        geometry.strides(),
        geometry.stride_bytes(),
        plan.entries,
        pool.slot_size()
    );
    Ok(q)
}

impl FrameRx {
    /// The raw packet QP of one queue over `pools` (header pool first), laying frames as
    /// `layout` says (from [`FrameLayout::of`] over the same pools), with its receives
    /// posted later by [`refill`](Self::refill). Every pool is registered through
    /// [`register_pool`] (a GPU pool through its dma-buf). Cold path.
    #[allow(clippy::too_many_arguments)]
    fn open(
        ctx: &Context,
        pd: &Pd,
        pools: &[&'static rtdaq_core::BufferPool<'static>],
        layout: FrameLayout,
        depth: u32,
        attrs: &[ffi::FlowAttr],
        port: u8,
        key: &str,
    ) -> Result<FrameRx> {
        let pool = pools[0];
        let mr = register_pool(
            ctx,
            pd,
            pool,
            Access::LOCAL_WRITE,
            format!("{key}.memory_regions[0]"),
        )?;
        let split = match layout {
            FrameLayout::Whole => None,
            FrameLayout::Split { header } => {
                let data = *pools.get(1).ok_or_else(|| {
                    IbvError::config(
                        format!("{key}.memory_regions"),
                        "header-data split needs a second (data) region",
                    )
                })?;
                Some(DataSide {
                    header,
                    mr: register_pool(
                        ctx,
                        pd,
                        data,
                        Access::LOCAL_WRITE,
                        format!("{key}.memory_regions[1]"),
                    )?,
                    pool: data,
                    posted: (0..depth).map(|_| None).collect(),
                })
            }
        };
        let cq = ctx
            .create_cq(depth)
            .map_err(|e| IbvError::verbs(key, "ibv_create_cq", e))?;
        let caps = layout.qp_caps(depth);
        let mut qp = Qp::create_raw_packet(pd, &cq, &cq, caps, port).map_err(|e| {
            IbvError::verbs(
                key,
                "creating the raw packet QP (needs CAP_NET_RAW and a ConnectX NIC)",
                e,
            )
        })?;
        for a in attrs {
            // Rules live as long as the QP and are destroyed before it.
            qp.attach_flow(a)
                .map_err(|e| IbvError::verbs(key, "ibv_create_flow", e))?;
        }
        let rbatch = match layout {
            FrameLayout::Whole => RecvBatch::with_capacity(depth as usize),
            FrameLayout::Split { .. } => {
                RecvBatch::with_sges(depth as usize, layout.sges() as usize)
            }
        };
        Ok(FrameRx {
            qp,
            cq,
            mr,
            pool,
            split,
            posted: (0..depth).map(|_| None).collect(),
            empty: (0..depth).collect(),
            wcs: vec![WorkCompletion::default(); 64].into_boxed_slice(),
            rbatch,
        })
    }

    /// Posts a buffer (a header and a data buffer with header-data split) for every empty
    /// receive. When a pool runs dry it stops; with header-data split a header buffer whose
    /// data buffer is missing goes straight back to its pool. Never allocates.
    fn refill(&mut self) {
        self.rbatch.clear();
        let lkey = self.mr.lkey();
        match &mut self.split {
            None => {
                while let Some(&r) = self.empty.last() {
                    let Some(b) = self.pool.get() else { break };
                    self.empty.pop();
                    self.rbatch.push(&hds::whole_recv(
                        u64::from(r),
                        b.addr(),
                        b.capacity() as u32,
                        lkey,
                    ));
                    self.posted[r as usize] = Some(b);
                }
            }
            Some(s) => {
                let data_lkey = s.mr.lkey();
                while let Some(&r) = self.empty.last() {
                    let Some((h, d)) = hds::take_pair(self.pool, s.pool) else {
                        break;
                    };
                    self.empty.pop();
                    self.rbatch.push_scatter(&hds::split_recv(
                        u64::from(r),
                        (h.addr(), s.header, lkey),
                        (d.addr(), d.capacity() as u32, data_lkey),
                    ));
                    self.posted[r as usize] = Some(h);
                    s.posted[r as usize] = Some(d);
                }
            }
        }
        let _ = self.qp.post_recv(&mut self.rbatch);
    }

    /// Appends completed frames to `burst`. Never allocates.
    #[inline]
    fn poll(
        &mut self,
        burst: &mut RawBurst,
        counters: &QueueCounters,
        queue: QueueId,
        batch: usize,
    ) -> usize {
        let room = batch
            .saturating_sub(RxBurst::len(burst))
            .min(burst.room())
            .min(self.wcs.len());
        let n = self.cq.poll(&mut self.wcs[..room]).unwrap_or(0);
        let (mut got, mut bytes) = (0u64, 0u64);
        for i in 0..n {
            let wc = self.wcs[i];
            let r = wc.wr_id() as u32;
            let Some(mut b) = self.posted.get_mut(r as usize).and_then(Option::take) else {
                continue;
            };
            self.empty.push(r);
            // Header-data split: the data buffer posted with `b` (an error frees both).
            let data = match &mut self.split {
                None => None,
                Some(s) => s.posted.get_mut(r as usize).and_then(Option::take),
            };
            if !wc.ok() {
                counters.record_drop(DropReason::Kernel);
                continue;
            }
            let (len, pushed) = match (&self.split, data) {
                (None, _) => {
                    let len = (wc.byte_len() as usize).min(b.capacity());
                    b.set_len(len);
                    (len, burst.push_buf(b, frame_meta(len, queue)).is_ok())
                }
                (Some(s), Some(mut d)) => {
                    let len = hds::set_split_lens(&mut b, &mut d, wc.byte_len(), s.header);
                    (len, burst.push_split(b, d, frame_meta(len, queue)).is_ok())
                }
                // Never (both buffers of a split receive are posted together); counted
                // should it happen, not skipped silently.
                (Some(_), None) => {
                    counters.record_drop(DropReason::Kernel);
                    continue;
                }
            };
            if pushed {
                got += 1;
                bytes += len as u64;
            } else {
                counters.record_drop(DropReason::RingFull);
            }
        }
        if got > 0 {
            counters.record_rx_burst(got, bytes);
        }
        self.refill();
        got as usize
    }
}

/// The metadata of a frame of `len` bytes received by a one-frame-per-receive queue.
#[inline]
fn frame_meta(len: usize, queue: QueueId) -> PacketMeta {
    PacketMeta {
        len: len as u32,
        flow: FlowId::NONE,
        queue,
        rx_timestamp_ns: 0,
        conn: ConnId(0),
        ..PacketMeta::default()
    }
}

impl RawRx {
    /// Flow rules attached to the queue.
    pub fn flows(&self) -> usize {
        match &self.path {
            RxPath::Frames(f) => f.qp.flows(),
            RxPath::Strides(s) => s.flows(),
        }
    }

    /// The striding RQ geometry when the queue uses the mlx5 striding RQ, `None` for one
    /// frame per receive.
    pub fn striding_rq(&self) -> Option<StrideGeometry> {
        match &self.path {
            RxPath::Frames(_) => None,
            RxPath::Strides(s) => Some(s.geometry()),
        }
    }
}

impl RxQueue for RawRx {
    type Burst = RawBurst;
    fn new_burst(&self) -> Self::Burst {
        let strides = match &self.path {
            RxPath::Frames(_) => None,
            RxPath::Strides(s) => Some(std::sync::Arc::clone(s.shared())),
        };
        RawBurst::new(self.queue, strides)
    }
    fn poll(&mut self, burst: &mut Self::Burst) -> usize {
        match &mut self.path {
            RxPath::Frames(f) => f.poll(burst, self.counters, self.queue, self.batch),
            RxPath::Strides(s) => s.poll(burst, self.counters, self.queue, self.batch),
        }
    }
}

/// Frames to send.
pub struct RawTxBurst {
    pkts: Burst<'static, MAX_BATCH>,
}

impl TxBurst for RawTxBurst {
    fn len(&self) -> usize {
        self.pkts.len()
    }
    fn packet_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        self.pkts
            .packet_mut(i)
            .expect("RawTxBurst: index out of range")
            .segments_mut()
            .first_mut()?
            .slot_mut()
    }
    fn set_len(&mut self, i: usize, len: usize) {
        let p = self
            .pkts
            .packet_mut(i)
            .expect("RawTxBurst: index out of range");
        if let Some(b) = p.segments_mut().first_mut() {
            b.set_len(len);
        }
        p.meta_mut().len = len as u32;
    }
}

impl TxQueue for RawTx {
    type Burst = RawTxBurst;
    fn new_burst(&self) -> Self::Burst {
        RawTxBurst {
            pkts: Burst::new(self.queue),
        }
    }
    fn reserve(&mut self, burst: &mut Self::Burst, n: usize) -> usize {
        for _ in 0..n.min(MAX_BATCH - burst.pkts.len()) {
            let Some(b) = self.pool.get() else { break };
            if burst
                .pkts
                .push(Packet::single(
                    b,
                    PacketMeta {
                        queue: self.queue,
                        ..Default::default()
                    },
                ))
                .is_err()
            {
                break;
            }
        }
        burst.pkts.len()
    }
    fn send(&mut self, burst: &mut Self::Burst) -> usize {
        let (mut sent, mut bytes) = (0u64, 0u64);
        let pkts = core::mem::replace(&mut burst.pkts, Burst::new(self.queue));
        for p in pkts {
            let n = self.cq.poll(&mut self.wcs).unwrap_or(0);
            for i in 0..n {
                let done = self.wcs[i].wr_id() as u32;
                while self
                    .inflight
                    .front()
                    .is_some_and(|(s, _)| s.wrapping_sub(done) as i32 <= 0)
                {
                    self.inflight.pop_front();
                }
            }
            if self.inflight.len() as u32 + 1 >= self.depth {
                self.counters.record_drop(DropReason::RingFull);
                continue;
            }
            let Some((addr, len)) = p.segments().first().map(|b| (b.addr(), b.len() as u32)) else {
                continue;
            };
            self.sbatch.clear();
            self.sbatch.push(&SendRequest {
                wr_id: u64::from(self.seq),
                op: SendOp::Send,
                addr,
                len,
                lkey: self.mr.lkey(),
                imm: 0,
                remote_addr: 0,
                rkey: 0,
                signaled: true,
                inline: false,
            });
            if self.qp.post_send(&mut self.sbatch).is_err() {
                self.counters.record_drop(DropReason::Kernel);
                continue;
            }
            self.inflight.push_back((self.seq, p));
            self.seq = self.seq.wrapping_add(1);
            sent += 1;
            bytes += u64::from(len);
        }
        if sent > 0 {
            self.counters.record_rx_burst(sent, bytes);
        }
        sent as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtdaq_core::flow::{FlowMatch, Ipv4Prefix};

    #[test]
    fn port_ranges_become_aligned_blocks() {
        assert_eq!(
            port_blocks(PortRange { lo: 5000, hi: 5000 }),
            vec![(5000, 0xffff)]
        );
        assert_eq!(
            port_blocks(PortRange { lo: 4096, hi: 4111 }),
            vec![(4096, 0xfff0)]
        );
        let b = port_blocks(PortRange { lo: 1000, hi: 1010 });
        let covered: u32 = b.iter().map(|(_, m)| u32::from(!*m) + 1).sum();
        assert_eq!(covered, 11);
        for (p, m) in &b {
            assert_eq!(p & !m, 0, "aligned");
        }
    }

    #[test]
    fn rules_translate_and_unsupported_fields_are_named() {
        let rule = FlowRule {
            id: FlowId(1),
            matcher: FlowMatch {
                vlan_id: Some(100),
                ipv4_dst: Some(Ipv4Prefix {
                    addr: [169, 254, 90, 0],
                    len: 24,
                }),
                udp_dst: Some(PortRange { lo: 5000, hi: 5001 }),
                ..Default::default()
            },
            action: FlowAction::Queue(QueueId(0)),
        };
        let ms = flow_matches(&rule).unwrap();
        assert_eq!(ms.len(), 1);
        assert_eq!(
            ms[0].ipv4_dst,
            Some(([169, 254, 90, 0], [255, 255, 255, 0]))
        );
        assert_eq!(ms[0].udp_dst, Some((5000, 0xfffe)));
        assert_eq!(ms[0].vlan, Some(100));
        let a = ffi::FlowAttr::build(&ms[0], 1, 0);
        assert_eq!(a.specs(), 3);
        let mut bad = rule.clone();
        bad.matcher.ipv4_total_len = Some(100);
        assert_eq!(flow_matches(&bad), Err("ipv4_total_len"));
    }
}
