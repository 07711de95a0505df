//! RX queue: a `TPACKET_V3` ring per queue, frames handed out in place.
//!
//! Each `poll`:
//!
//! 1. walks the blocks the kernel has handed over (`TP_STATUS_USER`), in ring order, frame
//!    by frame, keeping a hold on the current block (it may span polls);
//! 2. per block flagged `TP_STATUS_LOSING`: read the kernel's drop counter after the poll;
//!    per frame: `tp_snaplen < tp_len` (or `TP_STATUS_COPY`) → `truncated`; a VLAN tag the kernel
//!    stripped is put back in place (12 bytes moved, no copy of the frame); the core
//!    `FlowTable` classifies it (flow id, or `malformed` / `no_flow` / `flow_drop`), or, with
//!    no flow table, `parse_frame` checks it (`malformed`);
//! 3. delivers it: without header-data split a reference to the frame in the ring (the block
//!    stays in user hands until every burst holding one of its frames is cleared); with
//!    header-data split two copies into the queue's header and data pools (`pool_empty`,
//!    `too_large` when they cannot take it), and the ring frame is released at once;
//! 4. when nothing was there and the queue sleeps (`busy_poll = false`, `timeout_us > 0`),
//!    waits up to `timeout_us` for a block (`ppoll`) and tries again; then reads
//!    `PACKET_STATISTICS` (kernel drops, reset on read) → `kernel`.
//!
//! Latency: the kernel hands over a block when it is full or when `block_timeout_ms` passed
//! since its first frame, so at low rates a frame waits up to `block_timeout_ms`.

use rtdaq_netsys::{KeyError, OsError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtdaq_config::model::{FanoutMode, RxQueue as RxQueueConfig};
use rtdaq_config::MAX_FLOWS_PER_INTERFACE;
use rtdaq_core::flow::{Classified, FlowTable};
use rtdaq_core::traits::RxQueue;
use rtdaq_core::wire::parse_frame;
use rtdaq_core::{BufferPool, ConnId, DropReason, FlowId, PacketMeta, QueueCounters, QueueId};

use crate::bpf::Program;
use crate::ctx::{OpenCtx, QueueRes};
use crate::error::{ring_error, socket_error, AfpacketError, Result};
use crate::iface::NetDev;
use crate::ring::{BlockHold, FrameHdr, RxRing};
use crate::rx_burst::AfpacketBurst;
use crate::stats::RxStats;
use crate::sys::consts::{
    tpacket_req3, EINTR, ETH_P_ALL, PACKET_FANOUT, PACKET_FANOUT_CPU, PACKET_FANOUT_FLAG_DEFRAG,
    PACKET_FANOUT_FLAG_IGNORE_OUTGOING, PACKET_FANOUT_FLAG_UNIQUEID, PACKET_FANOUT_HASH,
    PACKET_FANOUT_LB, PACKET_FANOUT_QM, PACKET_FANOUT_ROLLOVER, PACKET_IGNORE_OUTGOING,
    PACKET_TIMESTAMP, PACKET_VERSION, SOF_TIMESTAMPING_RAW_HARDWARE, SOL_PACKET, SOL_SOCKET,
    SO_LOCK_FILTER, TPACKET3_HDR_LEN, TP_STATUS_COPY, TP_STATUS_LOSING, TP_STATUS_TS_RAW_HARDWARE,
    TP_STATUS_VLAN_TPID_VALID, TP_STATUS_VLAN_VALID,
};
use crate::sys::{MmapRing, PacketSocket, TPACKET_V3};

/// The flow table of one interface.
pub(crate) type Flows = FlowTable<MAX_FLOWS_PER_INTERFACE>;

/// Longest sleep step while the socket reports readable only because a block of the
/// previous lap is still held by bursts (no new block yet).
const HELD_STEP: Duration = Duration::from_micros(50);

/// A fanout group being formed: the first socket asks the kernel for a unique id
/// (`PACKET_FANOUT_FLAG_UNIQUEID`), the others join it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FanoutGroup {
    /// The mode.
    pub(crate) mode: FanoutMode,
    /// The group id, once the first socket joined.
    pub(crate) id: Option<u16>,
}

/// How one RX queue is steered (decided per interface by the engine).
pub(crate) struct RxPlan<'p> {
    /// The queue's cBPF filter (flow rules on an interface with several RX queues).
    pub(crate) filter: Option<&'p Program>,
    /// The fanout group (several RX queues, no flow rules).
    pub(crate) fanout: Option<&'p mut FanoutGroup>,
    /// The flow table to classify with (`None`: no rules and a default queue).
    pub(crate) flows: Option<Box<Flows>>,
    /// Count frames the table assigns to another queue (filters steer).
    pub(crate) check_queue: bool,
}

/// The position in the block being read.
struct Cursor {
    hold: BlockHold,
    /// Offset of the next frame header.
    off: u32,
    /// Frames left in the block.
    left: u32,
}

/// Header-data split: where the copies go.
struct Split<'a> {
    at: usize,
    hdr: &'a BufferPool<'a>,
    data: &'a BufferPool<'a>,
}

/// One RX queue of the AF_PACKET engine: a packet socket with a `TPACKET_V3` ring, bound to
/// the interface, optionally in a fanout group or behind a cBPF flow filter.
pub struct AfpacketRx<'a, const N: usize> {
    ring: Arc<RxRing>,
    cur: Option<Cursor>,
    next_block: usize,
    counters: &'a QueueCounters,
    queue: QueueId,
    interface: usize,
    batch: usize,
    busy: bool,
    timeout: Duration,
    flows: Option<Box<Flows>>,
    check_queue: bool,
    split: Option<Split<'a>>,
    hw_timestamps: bool,
    fanout: Option<(u16, FanoutMode)>,
    filter_len: Option<usize>,
    netdev: String,
    idle: u32,
    stats_every: u32,
    losing: bool,
    stats: RxStats,
    key: String,
}

/// `PACKET_FANOUT` type and flags of a mode (`None` for no fanout).
/// Every mode also ignores outgoing frames: the group's hook replaces the sockets' own, so
/// `PACKET_IGNORE_OUTGOING` alone would not apply.
fn fanout_type(mode: FanoutMode) -> Option<u32> {
    let ty = match mode {
        FanoutMode::Hash => PACKET_FANOUT_HASH | PACKET_FANOUT_FLAG_DEFRAG,
        FanoutMode::Lb => PACKET_FANOUT_LB,
        FanoutMode::Cpu => PACKET_FANOUT_CPU,
        FanoutMode::Qm => PACKET_FANOUT_QM,
        FanoutMode::Rollover => PACKET_FANOUT_ROLLOVER,
        FanoutMode::None => return None,
    };
    Some(ty | PACKET_FANOUT_FLAG_IGNORE_OUTGOING)
}

/// Joins `sock` to the fanout group (creating it with a kernel-chosen unique id first).
fn join_fanout(sock: &PacketSocket, group: &mut FanoutGroup, netdev: &str) -> Result<Option<u16>> {
    let Some(ty) = fanout_type(group.mode) else {
        return Ok(None);
    };
    let (arg, first) = match group.id {
        Some(id) => (u32::from(id) | (ty << 16), false),
        None => ((ty | PACKET_FANOUT_FLAG_UNIQUEID) << 16, true),
    };
    sock.set_packet(PACKET_FANOUT, arg as i32)
        .map_err(|source| AfpacketError::Fanout {
            detail: format!(
                "cannot {} the \"{}\" fanout group of \"{netdev}\" ({source}); use another mode (hash, lb, cpu, qm, rollover)",
                if first { "create" } else { "join" },
                group.mode.as_str()
            ),
            source,
        })?;
    if first {
        let v =
            sock.get_int(SOL_PACKET, PACKET_FANOUT)
                .map_err(|source| AfpacketError::Fanout {
                    detail: format!("cannot read back the fanout group id ({source})"),
                    source,
                })?;
        group.id = Some((v as u32 & 0xffff) as u16);
    }
    Ok(group.id)
}

impl<'a, const N: usize> AfpacketRx<'a, N> {
    /// Opens RX queue `j` of interface `i` on `dev`. Cold path.
    pub(crate) fn open(
        ctx: &OpenCtx<'_, 'a>,
        i: usize,
        j: usize,
        dev: &NetDev,
        q: &RxQueueConfig,
        res: QueueRes<'a>,
        plan: RxPlan<'_>,
    ) -> Result<Self> {
        let addr_key = OpenCtx::addr_key(i);
        let key = format!("interfaces[{i}].rx_queues[{j}]");
        let af = &ctx.af;
        let sock = PacketSocket::new().map_err(|e| socket_error(&addr_key, e))?;
        let opt = |name: &str, option: i32, value: i32, why: &str| {
            sock.set_packet(option, value).map_err(|source| {
                AfpacketError::SetOption(OsError::new(
                    key.clone(),
                    format!("setsockopt({name}) failed ({source}): {why}"),
                    source,
                ))
            })
        };
        opt(
            "PACKET_VERSION",
            PACKET_VERSION,
            TPACKET_V3,
            "the kernel lacks TPACKET_V3 (Linux ≥ 3.2)",
        )?;
        opt(
            "PACKET_IGNORE_OUTGOING",
            PACKET_IGNORE_OUTGOING,
            1,
            "needed so the queue does not receive this host's own transmitted frames (Linux ≥ 4.20)",
        )?;
        if dev.hw_timestamps {
            opt(
                "PACKET_TIMESTAMP",
                PACKET_TIMESTAMP,
                SOF_TIMESTAMPING_RAW_HARDWARE as i32,
                "hardware receive timestamps",
            )?;
        }
        if let Some(prog) = plan.filter {
            sock.attach_filter(prog.insns().iter().map(|i| (i.code, i.jt, i.jf, i.k)))
                .map_err(|e| AfpacketError::Filter {
                    key: "flows".to_owned(),
                    detail: format!(
                        "the kernel refused the {}-instruction cBPF filter of {key} ({e}); simplify the flow rules of interfaces[{i}]",
                        prog.len()
                    ),
                })?;
            sock.set_int(SOL_SOCKET, SO_LOCK_FILTER, 1)
                .map_err(|source| {
                    AfpacketError::SetOption(OsError::new(
                        key.clone(),
                        format!("setsockopt(SO_LOCK_FILTER) failed ({source})"),
                        source,
                    ))
                })?;
        }
        let (bs, bn, fs) = (af.block_size, af.block_count, af.frame_size);
        let frames = u64::from(bs / fs) * u64::from(bn);
        let Ok(frame_nr) = u32::try_from(frames) else {
            return Err(AfpacketError::Config(KeyError::new("engine.afpacket.block_count".to_owned(), format!(
                    "{bn} blocks × {} frame slots of {fs} B per {bs} B block = {frames} slots, more than the kernel's 2^32 − 1; lower engine.afpacket.block_count or block_size, or raise frame_size"
                    , bs / fs
                ))));
        };
        let req = tpacket_req3 {
            tp_block_size: bs,
            tp_block_nr: bn,
            tp_frame_size: fs,
            tp_frame_nr: frame_nr,
            tp_retire_blk_tov: af.block_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        let geometry = format!(
            "({bn} blocks × {bs} B, frame_size {fs}, engine.afpacket.block_count × block_size = {} MiB)",
            (u64::from(bs) * u64::from(bn)) >> 20
        );
        sock.set_rx_ring(&req)
            .map_err(|e| ring_error(&format!("the RX ring of {key}"), &geometry, e))?;
        let len = bs as usize * bn as usize;
        let map = MmapRing::map(&sock, len)
            .map_err(|e| ring_error(&format!("mapping the RX ring of {key}"), &geometry, e))?;
        sock.bind(dev.ifindex, ETH_P_ALL as u16)
            .map_err(|source| AfpacketError::Bind {
                key: addr_key.clone(),
                netdev: dev.name.clone(),
                detail: "the device may have gone away; check `ip link`".to_owned(),
                source,
            })?;
        let fanout = match plan.fanout {
            Some(g) => join_fanout(&sock, g, &dev.name)?.map(|id| (id, g.mode)),
            None => None,
        };
        let ring = Arc::new(RxRing::new(sock, map, bs as usize, bn as usize));
        let batch = (q.batch_size as usize).clamp(1, N.max(1));
        if q.batch_size as usize > N {
            log::warn!(
                "{key}.batch_size = {} exceeds the burst capacity {N} of this build; polls return at most {N}",
                q.batch_size
            );
        }
        let split = match (q.hds_split, res.split) {
            (Some(at), Some((hdr, data))) => Some(Split {
                at: at as usize,
                hdr,
                data,
            }),
            _ => None,
        };
        Ok(AfpacketRx {
            ring,
            cur: None,
            next_block: 0,
            counters: res.counters,
            queue: QueueId(j as u16),
            interface: i,
            batch,
            busy: q.busy_poll,
            timeout: Duration::from_micros(u64::from(q.timeout_us)),
            flows: plan.flows,
            check_queue: plan.check_queue,
            split,
            hw_timestamps: dev.hw_timestamps,
            fanout,
            filter_len: plan.filter.map(Program::len),
            netdev: dev.name.clone(),
            idle: 0,
            stats_every: ctx.opts.busy_stats_every.max(1),
            losing: false,
            stats: RxStats::default(),
            key,
        })
    }

    /// Index of the queue's interface in the config.
    pub fn interface(&self) -> usize {
        self.interface
    }

    /// Index of the queue within its interface's `rx_queues`.
    pub fn queue(&self) -> usize {
        usize::from(self.queue.0)
    }

    /// The network device.
    pub fn netdev(&self) -> &str {
        &self.netdev
    }

    /// The fanout group (kernel-chosen id, mode) when the interface spreads over queues by
    /// fanout.
    pub fn fanout(&self) -> Option<(u16, FanoutMode)> {
        self.fanout
    }

    /// Instructions of the queue's cBPF flow filter, when flow rules steer.
    pub fn filter_len(&self) -> Option<usize> {
        self.filter_len
    }

    /// Whether frames carry hardware receive timestamps.
    pub fn hw_timestamps(&self) -> bool {
        self.hw_timestamps
    }

    /// Ring geometry: (blocks, bytes per block).
    pub fn ring_geometry(&self) -> (usize, usize) {
        (self.ring.block_count(), self.ring.block_size())
    }

    /// Ring blocks held in user space right now (by this queue and by bursts not yet
    /// cleared). A statistic.
    pub fn held_blocks(&self) -> usize {
        self.ring.held_blocks()
    }

    /// Engine events so far.
    pub fn stats(&self) -> RxStats {
        self.stats
    }

    /// Reads the kernel's drop counter now (`PACKET_STATISTICS`) and counts new drops as
    /// `kernel`. `poll` does this by itself; call it before reading final counters. Never
    /// allocates.
    pub fn sync_kernel_drops(&mut self) {
        match self.ring.sock().packet_stats() {
            Ok((_, drops, freezes)) => {
                if drops > 0 {
                    self.counters
                        .record_drops(DropReason::Kernel, u64::from(drops));
                }
                self.stats.freezes += u64::from(freezes);
                self.losing = false;
            }
            Err(e) => self.note_error(e.raw_os_error().unwrap_or(0)),
        }
    }

    fn note_error(&mut self, errno: i32) {
        if errno != EINTR {
            self.stats.errors += 1;
            self.stats.last_errno = errno;
        }
    }

    /// Moves as many frames as allowed into `burst`; returns how many were delivered.
    #[inline]
    fn fill(&mut self, burst: &mut AfpacketBurst<'a, N>) -> usize {
        use rtdaq_core::traits::RxBurst;
        let room = (N - burst.len()).min(self.batch);
        let (mut got, mut bytes) = (0usize, 0u64);
        while got < room {
            let mut c = match self.cur.take() {
                Some(c) => c,
                None => match self.ring.try_take(self.next_block) {
                    Some(hold) => {
                        self.stats.blocks += 1;
                        if hold.status & TP_STATUS_LOSING != 0 {
                            // TPACKET_V3 flags losses per block, not per frame.
                            self.losing = true;
                            self.stats.losing += 1;
                        }
                        Cursor {
                            off: hold.first,
                            left: hold.num_pkts,
                            hold,
                        }
                    }
                    None => break,
                },
            };
            if c.left == 0 {
                self.ring.release_block(c.hold);
                self.next_block = (self.next_block + 1) % self.ring.block_count();
                continue;
            }
            c.left -= 1;
            match self.ring.frame_hdr(&c.hold, c.off) {
                Some(h) => {
                    if h.next == 0 && c.left > 0 {
                        // The last header of a block that claims more frames: corrupt.
                        self.bad_rest(&mut c);
                    } else {
                        c.off = c.off.saturating_add(h.next);
                    }
                    if let Some(len) = self.frame(&mut c, h, burst) {
                        got += 1;
                        bytes += u64::from(len);
                    }
                }
                None => {
                    self.stats.bad_headers += 1;
                    self.counters.record_drop(DropReason::Malformed);
                    self.bad_rest(&mut c);
                }
            }
            self.cur = Some(c);
        }
        if got > 0 {
            self.counters.record_rx_burst(got as u64, bytes);
        }
        got
    }

    /// Counts the frames left in an inconsistent block as malformed and skips them.
    fn bad_rest(&mut self, c: &mut Cursor) {
        self.stats.bad_headers += u64::from(c.left);
        self.counters
            .record_drops(DropReason::Malformed, u64::from(c.left));
        c.left = 0;
    }

    /// Handles one frame; returns its length when delivered into `burst`.
    #[inline]
    fn frame(
        &mut self,
        c: &mut Cursor,
        h: FrameHdr,
        burst: &mut AfpacketBurst<'a, N>,
    ) -> Option<u32> {
        if h.status & TP_STATUS_LOSING != 0 {
            self.losing = true;
        }
        if h.snaplen < h.len || h.status & TP_STATUS_COPY != 0 {
            self.counters.record_drop(DropReason::Truncated);
            return None;
        }
        let Some(mut start) = h.off.checked_add(u32::from(h.mac)) else {
            self.stats.bad_headers += 1;
            return self.discard(DropReason::Malformed);
        };
        let mut len = h.snaplen;
        if h.status & TP_STATUS_VLAN_VALID != 0 {
            let tpid = if h.status & TP_STATUS_VLAN_TPID_VALID != 0 && h.vlan_tpid != 0 {
                h.vlan_tpid
            } else {
                0x8100
            };
            let room = u32::from(h.mac) >= TPACKET3_HDR_LEN as u32 + 4;
            if room && self.ring.insert_vlan(&mut c.hold, start, tpid, h.vlan_tci) {
                start -= 4;
                len += 4;
                self.stats.vlan_restored += 1;
            } else {
                self.stats.bad_headers += 1;
                self.counters.record_drop(DropReason::Malformed);
                return None;
            }
        }
        let flow = {
            let Some(bytes) = self.ring.bytes(&c.hold, start, len) else {
                self.stats.bad_headers += 1;
                self.counters.record_drop(DropReason::Malformed);
                return None;
            };
            match self.flows.as_deref() {
                Some(t) => match t.classify(bytes) {
                    Classified::Deliver { queue, flow } => {
                        if self.check_queue && queue != self.queue {
                            self.stats.misrouted += 1;
                        }
                        flow
                    }
                    Classified::Malformed => return self.discard(DropReason::Malformed),
                    Classified::NoFlow => return self.discard(DropReason::NoFlow),
                    Classified::FlowDrop => return self.discard(DropReason::FlowDrop),
                },
                None if parse_frame(bytes).is_err() => return self.discard(DropReason::Malformed),
                None => FlowId::NONE,
            }
        };
        // The frame's stamp: the NIC's (SOF_TIMESTAMPING_RAW_HARDWARE asked and given) or
        // the kernel's.
        let ts_source = if h.status & TP_STATUS_TS_RAW_HARDWARE != 0 {
            self.stats.hw_timestamps += 1;
            rtdaq_core::TimestampSource::Hardware
        } else {
            rtdaq_core::TimestampSource::Kernel
        };
        let meta = PacketMeta {
            len,
            flow,
            queue: self.queue,
            rx_timestamp_ns: u64::from(h.sec) * 1_000_000_000 + u64::from(h.nsec),
            ts_source,
            conn: ConnId(0),
            ..PacketMeta::default()
        };
        match &self.split {
            Some(s) => {
                let bytes = self.ring.bytes(&c.hold, start, len)?;
                let at = s.at.min(bytes.len());
                let (Some(mut hb), Some(mut db)) = (s.hdr.get(), s.data.get()) else {
                    return self.discard(DropReason::PoolEmpty);
                };
                if at > hb.capacity() || bytes.len() - at > db.capacity() {
                    return self.discard(DropReason::TooLarge);
                }
                if let (Some(hs), Some(ds)) = (hb.slot_mut(), db.slot_mut()) {
                    hs[..at].copy_from_slice(&bytes[..at]);
                    ds[..bytes.len() - at].copy_from_slice(&bytes[at..]);
                }
                hb.set_len(at);
                db.set_len(bytes.len() - at);
                if !burst.push_split(hb, db, meta) {
                    return self.discard(DropReason::RingFull);
                }
            }
            None => {
                let Some(f) = self.ring.publish(&mut c.hold, start, len) else {
                    self.stats.bad_headers += 1;
                    return self.discard(DropReason::Malformed);
                };
                if let Err(f) = burst.push_ring(f, meta) {
                    // Unreachable: `fill` stops at the burst's free room.
                    self.ring.release(f);
                    return self.discard(DropReason::RingFull);
                }
            }
        }
        Some(len)
    }

    #[inline]
    fn discard(&self, reason: DropReason) -> Option<u32> {
        self.counters.record_drop(reason);
        None
    }

    /// Waits up to the queue's timeout for the next block. Never allocates.
    fn wait(&mut self) {
        let end = Instant::now() + self.timeout;
        loop {
            if self.ring.ready(self.next_block) {
                return;
            }
            let now = Instant::now();
            if now >= end {
                return;
            }
            match self.ring.sock().wait_readable(end - now) {
                // Readable without a new block: the socket reports a block of the previous
                // lap that bursts still hold. Sleep in short steps instead of spinning.
                Ok(true) => {
                    if !self.ring.ready(self.next_block) {
                        std::thread::sleep(
                            HELD_STEP.min(end.saturating_duration_since(Instant::now())),
                        );
                    }
                }
                Ok(false) => return,
                Err(e) => {
                    self.note_error(e.raw_os_error().unwrap_or(0));
                    return;
                }
            }
        }
    }
}

impl<'a, const N: usize> RxQueue for AfpacketRx<'a, N> {
    type Burst = AfpacketBurst<'a, N>;

    fn new_burst(&self) -> AfpacketBurst<'a, N> {
        AfpacketBurst::new(Arc::clone(&self.ring), self.queue)
    }

    /// Appends ready frames to `burst` (at most the queue's `batch_size` per call); see the
    /// module docs. A non-empty burst of another queue is refused (returns 0). Never
    /// allocates, never logs; waits at most `timeout_us` when the queue sleeps.
    #[inline]
    fn poll(&mut self, burst: &mut AfpacketBurst<'a, N>) -> usize {
        if !burst.bind(&self.ring, self.queue) || burst.is_full() {
            return 0;
        }
        let mut got = self.fill(burst);
        if got == 0 {
            if !self.busy && !self.timeout.is_zero() {
                self.wait();
                got = self.fill(burst);
                if got == 0 {
                    self.sync_kernel_drops();
                }
            } else {
                self.idle += 1;
                if self.idle >= self.stats_every {
                    self.idle = 0;
                    self.sync_kernel_drops();
                }
            }
        }
        if self.losing {
            self.sync_kernel_drops();
        }
        got
    }
}

impl<const N: usize> Drop for AfpacketRx<'_, N> {
    fn drop(&mut self) {
        if let Some(c) = self.cur.take() {
            self.ring.release_block(c.hold);
        }
        let s = self.stats;
        if s.errors > 0 || s.misrouted > 0 || s.bad_headers > 0 || s.freezes > 0 {
            log::warn!(
                "{} ({}): {} errors (last errno {}), {} misrouted frames, {} bad ring headers, {} ring freezes (bursts held too long or too few blocks: raise engine.afpacket.block_count)",
                self.key,
                self.netdev,
                s.errors,
                s.last_errno,
                s.misrouted,
                s.bad_headers,
                s.freezes
            );
        }
    }
}

impl<const N: usize> std::fmt::Debug for AfpacketRx<'_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfpacketRx")
            .field("interface", &self.interface)
            .field("queue", &self.queue.0)
            .field("netdev", &self.netdev)
            .field("fanout", &self.fanout)
            .field("filter_len", &self.filter_len)
            .finish()
    }
}
