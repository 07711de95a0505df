//! UDP receive queue: `recvmmsg` straight into pool slots.
//!
//! One socket per RX queue, bound to the interface address (`SO_REUSEPORT` when the interface
//! has several RX queues: the kernel spreads flows over them by 4-tuple hash). Each `poll`:
//!
//! 1. hands over GRO segments left from the previous poll (when the burst filled up);
//! 2. keeps up to `batch` free buffers posted in a [`RecvRing`] (like a NIC RX ring: the
//!    `recvmmsg` headers and iovecs stay set up between calls and point straight into the
//!    buffers' slots, so there is no copy after the kernel's, and each call only re-posts
//!    the entries the previous one filled);
//! 3. reads with one `recvmmsg`:
//!    - a sleeping queue (`busy_poll = false`, `timeout_us > 0`) handed an **empty** burst
//!      blocks in `recvmmsg(MSG_WAITFORONE)` until the first datagram, then takes what else
//!      is queued: one system call per burst, as a plain C receiver does. The wait is
//!      bounded by `SO_RCVTIMEO` = `timeout_us`, which the kernel rounds up to one jiffy
//!      (1–4 ms): harmless, since an empty burst has nothing to hand over;
//!    - a sleeping queue handed a **partial** burst (the runtime is still filling it) reads
//!      with `MSG_DONTWAIT`; when nothing was there it waits up to `timeout_us` in `ppoll`
//!      (hrtimer precision) and reads again, so partial bursts leave on time;
//!    - with `engine.socket.rx_coalesce_us` (receive interrupt moderation), a sleeping queue
//!      whose last read emptied the socket first sleeps that long and reads with
//!      `MSG_DONTWAIT`, so datagrams gather into larger reads (fewer system calls and
//!      wake-ups per datagram, for the sender too; up to that much more latency); only when
//!      nothing came does it block as above. Adaptive: the queue measures its thread's CPU
//!      per datagram over 4096 datagrams with the waits and 4096 without and keeps the
//!      cheaper for 30 such periods (`Moderation`); and after 4 waits in a row that
//!      gathered fewer than 8 datagrams (a slow stream, or datagrams so large that a few
//!      fill the wait) it stops waiting for 1024 turns at once;
//!    - a busy-polling queue always reads with `MSG_DONTWAIT`;
//! 4. per datagram: `SO_RXQ_OVFL` delta → `kernel` drops, `MSG_TRUNC` → `too_large`, GRO
//!    reads split into datagrams (copies into further slots), flow rules → flow id or
//!    `malformed` / `no_flow` / `flow_drop`, the receive time → `rx_timestamp_ns` per
//!    `engine.socket.rx_timestamps`: `SCM_TIMESTAMPNS` (`kernel`), the NIC's stamp from
//!    `SCM_TIMESTAMPING` (`hardware`, [`crate::hwstamp`]; the software stamp for a datagram
//!    it left unstamped), one `CLOCK_REALTIME` read per `recvmmsg` (`batch`) or 0 (`off`).
//!
//! With no free buffer at all, the queue still drains the socket into a scratch buffer and
//! counts every datagram as `pool_empty`, so no loss goes uncounted.

use rtdaq_netsys::OsError;
use std::net::SocketAddrV4;
use std::time::Duration;

use rtdaq_config::model::{RxQueue as RxQueueConfig, RxTimestamps, SocketUri};
use rtdaq_core::flow::{Classified, DefaultAction, FlowTable};
use rtdaq_core::{
    Buf, BufferPool, Burst, ConnId, DropReason, FlowId, Packet, PacketMeta, QueueCounters, QueueId,
    TimestampSource,
};

use crate::ctx::{OpenCtx, QueueRes};
use crate::error::{explain_bind, Result, SocketError};
use crate::sockopt::{apply_sockopts, enable_feature, set_buffer, BufDir};
use crate::stats::RxStats;
use crate::sys::consts::{
    EAGAIN, EINTR, IPPROTO_IP, IP_PKTINFO, MSG_DONTWAIT, MSG_TRUNC, MSG_WAITFORONE, SOL_SOCKET,
    SOL_UDP, SO_REUSEADDR, SO_REUSEPORT, SO_TIMESTAMPNS, UDP_GRO,
};
use crate::sys::socket::Interest;
use crate::sys::{PollSet, RecvMsg, RecvRing, Socket};

/// Most datagrams the kernel coalesces into one GRO read (`UDP_GRO_CNT_MAX`).
pub const GRO_MAX_SEGMENTS: usize = 64;

/// Smallest buffer that holds any GRO read (64 KiB less nothing: the kernel caps a coalesced
/// read at the IPv4 maximum).
pub const GRO_MIN_BUFFER: usize = 65_535;

/// Flow table of one interface.
pub(crate) type Flows = FlowTable<{ rtdaq_config::MAX_FLOWS_PER_INTERFACE }>;

/// Empty polls between two `SO_MEMINFO` reads in busy-poll mode.
const BUSY_DROP_SYNC: u32 = 1024;

/// Reads with datagrams between two `SO_MEMINFO` reads (besides the one after each full read).
const DROP_SYNC_READS: u32 = 64;

/// A coalescing wait that gathers fewer datagrams than this did not pay for its timer (a
/// sleep costs a timer and a wake-up, about what a wake-up by a datagram costs: worth it when
/// it saves several).
const COALESCE_MIN_GATHER: usize = 8;
/// Coalescing waits in a row that gather too little before the queue stops waiting...
const COALESCE_MISSES: u32 = 4;
/// ...for this many turns that would have waited; then it tries again.
const COALESCE_BACKOFF: u32 = 1024;

/// Datagrams per measuring period of [`Moderation`].
const MODERATION_PERIOD: u64 = 4096;
/// Periods the cheaper read mode is kept before both are measured again.
const MODERATION_SETTLE: u32 = 30;

/// Adaptive receive moderation by measurement: whether waiting `rx_coalesce_us` before a read
/// costs this thread less CPU per datagram than reading as soon as datagrams come. It measures
/// one period with waits (as configured) and one without, keeps the cheaper mode for
/// [`MODERATION_SETTLE`] periods, and measures again (load, datagram size and the host's timer
/// cost all change the answer: in a VM a timer is a hypervisor exit). Checked once a turn:
/// one compare; a period's end reads the thread's CPU clock once.
#[derive(Debug)]
struct Moderation {
    /// Waits are in use now.
    on: bool,
    /// 0: settled (periods left in `settle`); 1: measuring with waits; 2: without.
    phase: u8,
    settle: u32,
    /// The first turn (on the queue's thread) has set the start.
    started: bool,
    /// Datagrams taken and thread CPU time at the start of this period.
    start_datagrams: u64,
    start_cpu_ns: u64,
    /// CPU ns per datagram (× 1000) of the last period with waits.
    cost_on: u64,
}

impl Moderation {
    /// Waits on, the first period to be measured from the first turn.
    const fn new() -> Self {
        Moderation {
            on: true,
            phase: 1,
            settle: 0,
            started: false,
            start_datagrams: 0,
            start_cpu_ns: 0,
            cost_on: 0,
        }
    }

    /// `datagrams` taken so far; ends a period when it is full. Returns whether waits are
    /// in use.
    #[inline]
    fn turn(&mut self, datagrams: u64, stats: &mut RxStats) -> bool {
        let n = datagrams.wrapping_sub(self.start_datagrams);
        if !self.started || n >= MODERATION_PERIOD {
            self.end_period(datagrams, n, rtdaq_netsys::clock::thread_cpu_ns(), stats);
        }
        self.on
    }

    /// A period of `n` datagrams ended at `datagrams` taken and `cpu` ns of thread CPU.
    #[cold]
    fn end_period(&mut self, datagrams: u64, n: u64, cpu: Option<u64>, stats: &mut RxStats) {
        let Some(cpu) = cpu else {
            // No CPU clock: keep waiting, as configured.
            self.on = true;
            self.phase = 0;
            self.settle = u32::MAX;
            self.started = true;
            self.start_datagrams = datagrams;
            return;
        };
        if self.started {
            let cost = cpu.saturating_sub(self.start_cpu_ns).saturating_mul(1000) / n.max(1);
            match self.phase {
                1 => {
                    self.cost_on = cost;
                    self.phase = 2;
                    self.on = false;
                }
                2 => {
                    self.on = self.cost_on < cost;
                    stats.moderation_on_ppd = self.cost_on;
                    stats.moderation_off_ppd = cost;
                    if self.on {
                        stats.moderation_chose_waits += 1;
                    } else {
                        stats.moderation_chose_reads += 1;
                    }
                    self.phase = 0;
                    self.settle = MODERATION_SETTLE;
                }
                _ => {
                    self.settle = self.settle.saturating_sub(1);
                    if self.settle == 0 {
                        self.phase = 1;
                        self.on = true;
                    }
                }
            }
        }
        self.started = true;
        self.start_datagrams = datagrams;
        self.start_cpu_ns = cpu;
    }
}

/// One UDP RX queue.
pub(crate) struct UdpRx<'a, const N: usize> {
    sock: Socket,
    local: SocketAddrV4,
    pool: &'a BufferPool<'a>,
    counters: &'a QueueCounters,
    queue: QueueId,
    batch: usize,
    timeout: Duration,
    /// Sleeping queue: an empty burst blocks in `recvmmsg` (bounded by `SO_RCVTIMEO`).
    block: bool,
    /// `rx_timestamps = "batch"`: one clock read per `recvmmsg`.
    batch_clock: bool,
    /// Subtracted from each hardware stamp: the device clock's whole seconds ahead of
    /// `CLOCK_REALTIME` ([`crate::hwstamp`]).
    hw_shift_ns: i64,
    /// `engine.socket.rx_coalesce_us`: after a read that drained the socket, a sleeping queue
    /// waits this long before reading again, so datagrams gather (zero: off).
    coalesce: Duration,
    /// The last read drained the socket (took fewer datagrams than asked for).
    drained: bool,
    /// Coalescing waits in a row that gathered fewer than [`COALESCE_MIN_GATHER`].
    coalesce_misses: u32,
    /// Turns left in which the queue does not wait to coalesce (backed off).
    coalesce_off: u32,
    /// Measures whether the waits pay (with `coalesce` set).
    moderation: Moderation,
    /// Datagrams taken from the socket so far (delivered or dropped).
    datagrams: u64,
    gro: bool,
    flows: Option<Box<Flows>>,
    /// Posted receive buffers and their `recvmmsg` entries.
    ring: RecvRing<'a>,
    /// `recvmmsg` calls that returned datagrams (paces the `SO_MEMINFO` reads).
    reads: u32,
    /// Copies of the segments of one GRO read.
    stage: Vec<Buf<'a>>,
    /// Segments of a GRO read that did not fit the burst; handed over first next time.
    pending: Vec<Packet<'a>>,
    scratch: Box<[u8]>,
    pollset: PollSet,
    last_drops: u32,
    idle: u32,
    rcvbuf: Option<usize>,
    stats: RxStats,
    key: String,
}

impl<'a, const N: usize> UdpRx<'a, N> {
    /// Opens RX queue `j` of UDP interface `i`. Cold path.
    pub(crate) fn open(
        ctx: &mut OpenCtx<'_, 'a>,
        i: usize,
        j: usize,
        uri: SocketUri,
        q: &RxQueueConfig,
        res: QueueRes<'a>,
    ) -> Result<Self> {
        let key = OpenCtx::addr_key(i);
        let iface = &ctx.cfg.interfaces[i];
        let multi = iface.rx_queues.len() > 1;
        let slot = res.pool.slot_size();
        let sock = Socket::udp().map_err(|source| SocketError::Create {
            key: key.clone(),
            uri: uri.to_string(),
            source,
        })?;
        if multi && ctx.sock.reuseport {
            sock.set_int(SOL_SOCKET, SO_REUSEPORT, 1)
                .map_err(|source| {
                    SocketError::SetOption(OsError::new(
                        "engine.socket.reuseport".to_owned(),
                        format!("setsockopt(SO_REUSEPORT) failed ({source})"),
                        source,
                    ))
                })?;
        }
        let rcvbuf = match ctx.sock.rcvbuf {
            Some(b) => Some(set_buffer(
                &sock,
                BufDir::Rcv,
                b,
                ctx.opts.force_buffers,
                &mut ctx.warned_rcv,
            )?),
            None => None,
        };
        let stamps = ctx.sock.rx_timestamps;
        let mut hw_shift_ns = 0;
        match stamps {
            RxTimestamps::Kernel => {
                enable_feature(&sock, SOL_SOCKET, SO_TIMESTAMPNS, 1, "SO_TIMESTAMPNS", &key)?;
            }
            RxTimestamps::Hardware => {
                // The device that receives: the group's interface, or the bound address's.
                let at = iface.multicast.as_ref().map_or(uri.ip, |m| m.interface);
                let hw = crate::hwstamp::enable(&sock, at)?;
                if j == 0 {
                    log::info!(
                        "{key} (\"{uri}\"): hardware receive stamps from {} (its clock {:+} s from CLOCK_REALTIME, taken off each stamp)",
                        hw.device,
                        hw.shift_ns / 1_000_000_000
                    );
                }
                hw_shift_ns = hw.shift_ns;
            }
            RxTimestamps::Batch | RxTimestamps::Off => {}
        }
        let timeout = Duration::from_micros(u64::from(q.timeout_us));
        let block = !q.busy_poll && !timeout.is_zero();
        if block {
            sock.set_recv_timeout(timeout).map_err(|source| {
                SocketError::SetOption(OsError::new(
                    format!("interfaces[{i}].rx_queues[{j}].timeout_us"),
                    format!("setsockopt(SO_RCVTIMEO) failed ({source})"),
                    source,
                ))
            })?;
        }
        let gro = if !ctx.sock.gro {
            false
        } else if slot < GRO_MIN_BUFFER {
            if j == 0 {
                log::warn!(
                    "engine.socket.gro = true is not used on {key} (\"{uri}\"): a GRO read carries up to {GRO_MIN_BUFFER} bytes but the RX buffers hold {slot}; set the region's buf_size ≥ {GRO_MIN_BUFFER} (and max_message_size = 65507) to use GRO"
                );
            }
            false
        } else {
            enable_feature(&sock, SOL_UDP, UDP_GRO, 1, "UDP_GRO", "engine.socket.gro")?
        };
        // Without rules and with a queue as default action every datagram is delivered here
        // with no flow id: skip classification. Otherwise classify each datagram.
        let table: Flows = ctx.cfg.flow_table(i);
        let default_queue = matches!(table.default_action(), DefaultAction::Queue(_));
        let flows = (!table.is_empty() || !default_queue).then(|| Box::new(table));
        let pktinfo = flows.is_some() && uri.ip.is_unspecified();
        if pktinfo {
            enable_feature(&sock, IPPROTO_IP, IP_PKTINFO, 1, "IP_PKTINFO", "flows")?;
        }
        // Per-datagram kernel work only for what is used: sender addresses for flow rules and
        // pcap recorders,
        // control messages for kernel timestamps, GRO sizes or destination addresses.
        let control =
            matches!(stamps, RxTimestamps::Kernel | RxTimestamps::Hardware) || gro || pktinfo;
        // The queue's stages ask for each datagram's real sender (a pcap recorder rebuilds
        // its IPv4/UDP headers from it).
        let ring = RecvRing::new(
            res.pool,
            (q.batch_size as usize).clamp(1, N.max(1)),
            flows.is_some() || res.wants.source_addresses,
            control,
        );
        apply_sockopts(&sock, &ctx.sock.sockopts)?;
        if iface.multicast.is_some() {
            // Several processes (and tcpdump-like readers) may receive one group: each
            // socket bound to group:port gets its own copy.
            sock.set_int(SOL_SOCKET, SO_REUSEADDR, 1)
                .map_err(|source| {
                    SocketError::SetOption(OsError::new(
                        key.clone(),
                        format!("setsockopt(SO_REUSEADDR) failed ({source})"),
                        source,
                    ))
                })?;
        }
        let addr = SocketAddrV4::new(uri.ip, uri.port);
        sock.bind(&addr).map_err(|source| SocketError::Bind {
            detail: explain_bind(&source, &key, &uri, multi),
            key: key.clone(),
            uri: uri.to_string(),
            source,
        })?;
        if let Some(m) = &iface.multicast {
            sock.join_multicast(m.group, m.interface, &m.sources)
                .map_err(|source| SocketError::SetOption(OsError::new(if m.sources.is_empty() {
                        format!("interfaces[{i}].multicast_interface")
                    } else {
                        format!("interfaces[{i}].multicast_interface / multicast_sources")
                    }, format!(
                        "joining multicast group {} on {} ({}) failed ({source}); multicast_interface must be the IPv4 address of a local network interface (ip -4 addr), with a route or interface for the group{}",
                        m.group,
                        if m.interface.is_unspecified() { "the interface the route picks".to_owned() } else { m.interface.to_string() },
                        if m.sources.is_empty() { "any source".to_owned() } else { format!("sources {:?}", m.sources) },
                        if m.sources.is_empty() { "" } else { "; multicast_sources must be unicast IPv4 addresses of the senders (a source-specific join needs IGMPv3: net.ipv4.conf.<if>.force_igmp_version 0 or 3)" },
                    ), source)))?;
            log::info!(
                "interfaces[{i}]: joined multicast group {} on {} ({})",
                m.group,
                m.interface,
                if m.sources.is_empty() {
                    "any source".to_owned()
                } else {
                    format!("from {:?}", m.sources)
                }
            );
        }
        let local = sock.local_addr().map_err(|source| {
            SocketError::Query(OsError::new(
                key.clone(),
                format!("getsockname failed ({source})"),
                source,
            ))
        })?;
        let last_drops = sock.kernel_drops().unwrap_or(0);
        let batch = (q.batch_size as usize).clamp(1, N.max(1));
        if q.batch_size as usize > N {
            log::warn!(
                "interfaces[{i}].rx_queues[{j}].batch_size = {} exceeds the burst capacity {N} of this build; polls return at most {N}",
                q.batch_size
            );
        }
        let mut pollset = PollSet::with_capacity(1);
        pollset.push(&sock, Interest::Read);
        let queue = QueueId(j as u16);
        Ok(UdpRx {
            sock,
            local,
            pool: res.pool,
            counters: res.counters,
            queue,
            batch,
            timeout,
            block,
            batch_clock: stamps == RxTimestamps::Batch,
            hw_shift_ns,
            coalesce: Duration::from_micros(u64::from(ctx.sock.rx_coalesce_us)),
            drained: false,
            coalesce_misses: 0,
            coalesce_off: 0,
            moderation: Moderation::new(),
            datagrams: 0,
            gro,
            flows,
            ring,
            reads: 0,
            stage: Vec::with_capacity(GRO_MAX_SEGMENTS),
            pending: Vec::with_capacity(GRO_MAX_SEGMENTS),
            scratch: vec![0u8; slot.max(GRO_MIN_BUFFER * usize::from(gro))].into_boxed_slice(),
            pollset,
            last_drops,
            idle: 0,
            rcvbuf,
            stats: RxStats::default(),
            key: format!("interfaces[{i}].rx_queues[{j}]"),
        })
    }

    /// The bound address.
    pub(crate) fn local_addr(&self) -> SocketAddrV4 {
        self.local
    }

    /// The socket.
    pub(crate) fn socket(&self) -> &Socket {
        &self.sock
    }

    /// Effective `SO_RCVBUF` after open (when `rcvbuf` was set).
    pub(crate) fn rcvbuf(&self) -> Option<usize> {
        self.rcvbuf
    }

    /// GRO in use.
    pub(crate) fn gro(&self) -> bool {
        self.gro
    }

    /// Events so far.
    pub(crate) fn stats(&self) -> RxStats {
        self.stats
    }

    /// Appends ready datagrams to `burst`; see the module docs. Never allocates, never logs.
    pub(crate) fn poll(&mut self, burst: &mut Burst<'a, N>) -> usize {
        let before = burst.len();
        if !self.pending.is_empty() {
            let k = self.pending.len().min(N - burst.len());
            for p in self.pending.drain(..k) {
                // Cannot fail: `k` is bounded by the free capacity.
                let _ = burst.push(p);
            }
        }
        if !self.pending.is_empty() || burst.is_full() {
            return burst.len() - before;
        }
        if self.block && burst.is_empty() {
            if self.drained
                && !self.coalesce.is_zero()
                && self.moderation.turn(self.datagrams, &mut self.stats)
            {
                if self.coalesce_off > 0 {
                    self.coalesce_off -= 1;
                } else {
                    // Interrupt moderation: let datagrams gather instead of waking for each
                    // few.
                    std::thread::sleep(self.coalesce);
                    self.stats.coalesce_waits += 1;
                    let got = self.recv_once(burst, MSG_DONTWAIT | MSG_TRUNC);
                    self.judge_coalesce(got);
                    if got > 0 {
                        return burst.len() - before;
                    }
                }
            }
            if self.recv_once(burst, MSG_WAITFORONE | MSG_TRUNC) == 0 {
                self.sync_kernel_drops();
            }
            return burst.len() - before;
        }
        if self.recv_once(burst, MSG_DONTWAIT | MSG_TRUNC) == 0 {
            if self.block {
                match self.pollset.wait(self.timeout) {
                    Ok(n) if n > 0 => {
                        self.recv_once(burst, MSG_DONTWAIT | MSG_TRUNC);
                    }
                    _ => self.sync_kernel_drops(),
                }
            } else {
                self.idle = self.idle.wrapping_add(1);
                if self.idle % BUSY_DROP_SYNC == 0 {
                    self.sync_kernel_drops();
                }
            }
        }
        burst.len() - before
    }

    /// Adaptive moderation: a coalescing wait that gathered `got` datagrams. After
    /// [`COALESCE_MISSES`] waits in a row that gathered fewer than [`COALESCE_MIN_GATHER`]
    /// (the stream is too slow, or its datagrams too large, for the wait to save wake-ups),
    /// the queue reads as without coalescing for [`COALESCE_BACKOFF`] turns, then tries again.
    #[inline]
    fn judge_coalesce(&mut self, got: usize) {
        if got >= COALESCE_MIN_GATHER {
            self.coalesce_misses = 0;
            return;
        }
        self.coalesce_misses += 1;
        if self.coalesce_misses >= COALESCE_MISSES {
            self.coalesce_misses = 0;
            self.coalesce_off = COALESCE_BACKOFF;
            self.stats.coalesce_backoffs += 1;
        }
    }

    /// One `recvmmsg`; returns datagrams taken from the socket (delivered or dropped).
    #[inline]
    fn recv_once(&mut self, burst: &mut Burst<'a, N>, flags: i32) -> usize {
        let free = N - burst.len();
        let per_read = if self.gro { GRO_MAX_SEGMENTS } else { 1 };
        let want = self.batch.min((free / per_read).max(1)).min(free);
        if want == 0 {
            return 0;
        }
        // `recv` refills the ring first; with nothing posted (pool empty) it makes no call.
        let n = match self.ring.recv(&self.sock, want, flags) {
            Ok(0) if self.ring.posted() == 0 => return self.drain_to_scratch(flags),
            Ok(n) => n,
            Err(e) => {
                self.note_error(e.raw_os_error().unwrap_or(0));
                return 0;
            }
        };
        let k = want.min(self.ring.posted());
        self.drained = n < k;
        self.datagrams = self.datagrams.wrapping_add(n as u64);
        if n > 0 {
            self.stats.reads += 1;
        }
        // Kernel drops happen only while the socket buffer is full, i.e. while reads come
        // back full: read the drop counter then, and every DROP_SYNC_READS reads anyway.
        self.reads = self.reads.wrapping_add(1);
        if n == k || self.reads % DROP_SYNC_READS == 0 {
            self.sync_kernel_drops();
        }
        let stamp = if self.batch_clock { wall_clock_ns() } else { 0 };
        let mut out = Out {
            stamp,
            hw_shift_ns: self.hw_shift_ns,
            burst,
            pending: &mut self.pending,
            counters: self.counters,
            flows: self.flows.as_deref(),
            queue: self.queue,
            local: self.local,
            packets: 0,
            bytes: 0,
        };
        for i in 0..n {
            let m = self.ring.msg(i);
            let Some(mut buf) = self.ring.take(i) else {
                continue; // unreachable: entries 0..n are posted
            };
            note_kernel_drops(&mut self.last_drops, self.counters, m.kernel_drops);
            if m.truncated || m.len > buf.capacity() {
                self.counters.record_drop(DropReason::TooLarge);
                continue;
            }
            match m.gro_segment.map(usize::from) {
                Some(seg) if seg < m.len => {
                    self.stats.gro_reads += 1;
                    if let Some(src) = buf.slot_mut() {
                        let mut off = seg;
                        while off < m.len {
                            let end = (off + seg).min(m.len);
                            match self.pool.get() {
                                Some(mut b) if self.stage.len() < self.stage.capacity() => {
                                    if let Some(dst) = b.slot_mut() {
                                        dst[..end - off].copy_from_slice(&src[off..end]);
                                    }
                                    b.set_len(end - off);
                                    self.stage.push(b);
                                    self.stats.gro_copies += 1;
                                }
                                _ => self.counters.record_drop(DropReason::PoolEmpty),
                            }
                            off = end;
                        }
                    }
                    buf.set_len(seg);
                    out.deliver(buf, &m);
                    for b in self.stage.drain(..) {
                        out.deliver(b, &m);
                    }
                }
                _ => {
                    buf.set_len(m.len);
                    out.deliver(buf, &m);
                }
            }
        }
        let (packets, bytes) = (out.packets, out.bytes);
        self.counters.record_rx_burst(packets, bytes);
        n
    }

    /// No free buffer: drain up to `batch` datagrams into the scratch buffer, counting each
    /// as `pool_empty` (or `too_large`).
    fn drain_to_scratch(&mut self, flags: i32) -> usize {
        match self
            .ring
            .recv_discard(&self.sock, &mut self.scratch, self.batch, flags)
        {
            Ok(n) => {
                for i in 0..n {
                    let m = self.ring.msg(i);
                    note_kernel_drops(&mut self.last_drops, self.counters, m.kernel_drops);
                    if m.truncated {
                        self.counters.record_drop(DropReason::TooLarge);
                    } else {
                        let segs = match m.gro_segment.map(usize::from) {
                            Some(s) if s > 0 => m.len.div_ceil(s).max(1),
                            _ => 1,
                        };
                        self.counters
                            .record_drops(DropReason::PoolEmpty, segs as u64);
                    }
                }
                n
            }
            Err(e) => {
                self.note_error(e.raw_os_error().unwrap_or(0));
                0
            }
        }
    }

    /// Counts drops the kernel reports outside datagrams (`SO_MEMINFO`), e.g. after the last
    /// datagram of a burst of losses.
    fn sync_kernel_drops(&mut self) {
        if let Ok(v) = self.sock.kernel_drops() {
            note_kernel_drops(&mut self.last_drops, self.counters, Some(v));
        }
    }

    fn note_error(&mut self, errno: i32) {
        if errno != EAGAIN && errno != EINTR {
            self.stats.errors += 1;
            self.stats.last_errno = errno;
        }
    }
}

impl<const N: usize> Drop for UdpRx<'_, N> {
    fn drop(&mut self) {
        // Drops since the last read of the counter still count.
        self.sync_kernel_drops();
        if !self.coalesce.is_zero() {
            log::info!(
                "{} ({}): rx_coalesce_us {}: {} reads ({:.1} datagrams each), {} coalescing waits, {} back-offs; measured periods chose waits {} times, plain reads {} (last: {:.0} vs {:.0} ns CPU per datagram)",
                self.key,
                self.local,
                self.coalesce.as_micros(),
                self.stats.reads,
                self.datagrams as f64 / self.stats.reads.max(1) as f64,
                self.stats.coalesce_waits,
                self.stats.coalesce_backoffs,
                self.stats.moderation_chose_waits,
                self.stats.moderation_chose_reads,
                self.stats.moderation_on_ppd as f64 / 1000.0,
                self.stats.moderation_off_ppd as f64 / 1000.0,
            );
        }
        if self.stats.errors > 0 {
            log::warn!(
                "{} ({}): {} receive errors, last errno {}",
                self.key,
                self.local,
                self.stats.errors,
                self.stats.last_errno
            );
        }
    }
}

/// `CLOCK_REALTIME` in ns (vDSO; no allocation, no system call on Linux).
#[inline]
fn wall_clock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Adds the growth of the kernel's drop counter (`sk_drops`) since the last report as
/// `kernel` drops. Counter values may arrive out of order (a datagram queued before a later
/// `SO_MEMINFO` read), so only forward steps count.
#[inline]
fn note_kernel_drops(last: &mut u32, counters: &QueueCounters, now: Option<u32>) {
    if let Some(v) = now {
        let d = v.wrapping_sub(*last) as i32;
        if d > 0 {
            counters.record_drops(DropReason::Kernel, d as u64);
            *last = v;
        }
    }
}

/// Where datagrams go: the burst, or (for GRO segments past its capacity) the pending list.
struct Out<'r, 'a, const N: usize> {
    /// Receive time for datagrams without a kernel timestamp (0 = none).
    stamp: u64,
    /// Taken off each hardware stamp ([`UdpRx::hw_shift_ns`]).
    hw_shift_ns: i64,
    burst: &'r mut Burst<'a, N>,
    pending: &'r mut Vec<Packet<'a>>,
    counters: &'r QueueCounters,
    flows: Option<&'r Flows>,
    queue: QueueId,
    local: SocketAddrV4,
    packets: u64,
    bytes: u64,
}

impl<'a, const N: usize> Out<'_, 'a, N> {
    /// Classifies and hands over one datagram (in `buf`, length set). Never allocates.
    #[inline]
    fn deliver(&mut self, buf: Buf<'a>, m: &RecvMsg) {
        let flow = match self.flows {
            None => FlowId::NONE,
            Some(t) => {
                let dst = m.dst.unwrap_or(*self.local.ip());
                let payload = buf.as_slice().unwrap_or_default();
                match t.classify_udp(
                    m.src.ip().octets(),
                    m.src.port(),
                    dst.octets(),
                    self.local.port(),
                    payload,
                ) {
                    Classified::Deliver { flow, .. } => flow,
                    Classified::Malformed => {
                        return self.counters.record_drop(DropReason::Malformed)
                    }
                    Classified::NoFlow => return self.counters.record_drop(DropReason::NoFlow),
                    Classified::FlowDrop => return self.counters.record_drop(DropReason::FlowDrop),
                }
            }
        };
        let len = buf.len();
        let (rx_timestamp_ns, ts_source) = if m.hw_timestamp_ns != 0 {
            (
                m.hw_timestamp_ns.wrapping_sub(self.hw_shift_ns as u64),
                TimestampSource::Hardware,
            )
        } else if m.timestamp_ns != 0 {
            (m.timestamp_ns, TimestampSource::Kernel)
        } else if self.stamp != 0 {
            (self.stamp, TimestampSource::Poll)
        } else {
            (0, TimestampSource::None)
        };
        let meta = PacketMeta {
            len: len as u32,
            flow,
            queue: self.queue,
            rx_timestamp_ns,
            ts_source,
            conn: ConnId(0),
            src_ip: m.src.ip().octets(),
            src_port: m.src.port(),
        };
        let mut buf = buf;
        if self.pending.is_empty() {
            match self.burst.push_single(buf, meta) {
                Ok(()) => {
                    self.packets += 1;
                    self.bytes += len as u64;
                    return;
                }
                Err(b) => buf = b,
            }
        }
        if self.pending.len() < self.pending.capacity() {
            self.pending.push(Packet::single(buf, meta));
            self.packets += 1;
            self.bytes += len as u64;
        } else {
            // Unreachable by construction (one GRO read never exceeds the pending room).
            self.counters.record_drop(DropReason::RingFull);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs one measured period of `MODERATION_PERIOD` datagrams costing `ns` each.
    fn period(m: &mut Moderation, taken: &mut u64, cpu: &mut u64, ns: u64, st: &mut RxStats) {
        *taken += MODERATION_PERIOD;
        *cpu += ns * MODERATION_PERIOD;
        m.end_period(*taken, MODERATION_PERIOD, Some(*cpu), st);
    }

    /// Measures with waits, then without, keeps the cheaper for the settling periods, then
    /// measures again (waits first); no CPU clock: waits as configured.
    #[test]
    fn moderation_keeps_the_mode_that_costs_less_cpu_per_datagram() {
        let mut st = RxStats::default();
        let (mut taken, mut cpu) = (0, 1_000);
        let mut m = Moderation::new();
        assert!(m.on, "configured: waits");
        m.end_period(0, 0, Some(cpu), &mut st); // the first turn sets the start
        assert!(m.on);
        period(&mut m, &mut taken, &mut cpu, 3000, &mut st); // with waits: 3 µs
        assert!(!m.on, "now measuring plain reads");
        period(&mut m, &mut taken, &mut cpu, 2000, &mut st); // without: 2 µs
        assert!(!m.on, "plain reads were cheaper");
        assert_eq!(
            (st.moderation_chose_reads, st.moderation_chose_waits),
            (1, 0)
        );
        assert_eq!(
            (st.moderation_on_ppd, st.moderation_off_ppd),
            (3_000_000, 2_000_000)
        );
        for _ in 0..MODERATION_SETTLE - 1 {
            period(&mut m, &mut taken, &mut cpu, 2000, &mut st);
            assert!(!m.on, "settled");
        }
        period(&mut m, &mut taken, &mut cpu, 2000, &mut st);
        assert!(m.on, "measuring again, waits first");
        period(&mut m, &mut taken, &mut cpu, 1000, &mut st); // with waits: 1 µs
        period(&mut m, &mut taken, &mut cpu, 2000, &mut st); // without: 2 µs
        assert!(m.on, "waits were cheaper");
        assert_eq!(st.moderation_chose_waits, 1);
        let mut m = Moderation::new();
        m.end_period(0, 0, None, &mut st);
        assert!(m.on);
        m.end_period(MODERATION_PERIOD, MODERATION_PERIOD, None, &mut st);
        assert!(m.on, "still waiting without a CPU clock");
    }

    #[test]
    fn kernel_drop_counter_counts_forward_steps_only_and_wraps() {
        let c = QueueCounters::new();
        let mut last = 0;
        note_kernel_drops(&mut last, &c, Some(5));
        note_kernel_drops(&mut last, &c, Some(3)); // an older snapshot: ignored
        note_kernel_drops(&mut last, &c, None);
        note_kernel_drops(&mut last, &c, Some(5));
        assert_eq!((c.drops(DropReason::Kernel), last), (5, 5));
        let mut last = u32::MAX - 1;
        note_kernel_drops(&mut last, &c, Some(2)); // wrapped: 4 more
        assert_eq!((c.drops(DropReason::Kernel), last), (9, 2));
    }
}
