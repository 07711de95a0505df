//! [`DpdkRx`]: one RX queue of a DPDK port.
//!
//! Each [`poll`](rtdaq_core::traits::RxQueue::poll) makes one `rte_eth_rx_burst` of up to
//! `min(burst room, batch_size)` mbufs into a scratch array (the same C call reads each mbuf's
//! `pkt_len` and `nb_segs`), reads the clock once, and
//! classifies every frame by the interface's [`FlowTable`] (`rtdaq_core::wire::parse_frame`
//! inside; skipped when the table has no rules and a queue as default action, so every frame
//! is delivered untouched): delivered into the burst (zero copy, the mbuf itself) with its flow id, or
//! counted `malformed` / `no_flow` / `flow_drop` (chained mbufs: `truncated`) and freed in
//! bulk at the end of the poll.
//!
//! DPDK has no RX interrupt mode here (the vdevs lack it and the engine does not arm
//! `rte_eth_dev_rx_intr_*`): a sleeping queue (`busy_poll = false`, `timeout_us > 0`) that
//! finds nothing sleeps in steps of [`SLEEP_STEP`] and polls again until something arrives
//! or `timeout_us` passed. It also moderates like a NIC interrupt: after a poll that emptied
//! the port queue it sleeps [`MODERATION`] (at most `timeout_us`) before the next one, so a
//! steady stream does not keep its `SCHED_FIFO` thread running without a break (such a
//! thread loses its core to ordinary work for 50 ms a second: RT throttling, or the
//! deadline fair server of Linux 6.12 and later; seen as 50 ms stalls and `ring_full` loss
//! in the ring-PMD loopback beside busy loops). A busy queue returns at once and never
//! sleeps: it owns its core.
//!
//! Delivered frames are counted with `record_rx_burst` (packets, frame bytes): the runtime
//! must not count them again. `poll` never allocates and never logs.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rtdaq_core::flow::{Classified, FlowTable};
use rtdaq_core::{ConnId, DropReason, FlowId, PacketMeta, QueueCounters, QueueId};
use rtdaq_dpdk_sys::{Mbuf, MbufBurst, Mempool, RxQueue as PortRxQueue};

use crate::burst::{DpdkRxBurst, InGpu};
use crate::launch::RxStamps;

/// Flow table of one interface (the config's maximum number of rules).
pub(crate) type Flows = FlowTable<{ rtdaq_config::MAX_FLOWS_PER_INTERFACE }>;

/// Sleep step of a sleeping queue that found nothing (the kernel's timer slack, ~50 µs
/// without `SCHED_FIFO`, makes real steps longer).
pub const SLEEP_STEP: Duration = Duration::from_micros(10);

/// Pause of a sleeping queue after a poll that emptied the port queue (receive moderation;
/// the ring holds 1024 descriptors or more: 50 µs of them at 20 Mpps).
pub const MODERATION: Duration = Duration::from_micros(50);

/// Events of one RX queue that are not drops (those go to its `QueueCounters`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RxStats {
    /// `rte_eth_rx_burst` calls.
    pub polls: u64,
    /// Frames the flow table assigned to another queue of the interface (delivered here
    /// anyway: without RSS / `rte_flow` the port does not steer by the rules).
    pub misrouted: u64,
}

/// `CLOCK_REALTIME` in nanoseconds (no allocation).
#[inline]
pub(crate) fn realtime_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// What `open` hands a new RX queue.
pub(crate) struct RxSetup<'a> {
    pub(crate) q: PortRxQueue,
    /// Segments a frame may have: 1, or 2 with header-data split (buffer split).
    pub(crate) segments: u16,
    pub(crate) pool: Arc<Mempool>,
    pub(crate) counters: &'a QueueCounters,
    /// The interface's flow table; `None` when it has no rules and a queue as default action
    /// (every frame is delivered as it is: no parse, no classification).
    pub(crate) flows: Option<Box<Flows>>,
    pub(crate) interface: usize,
    pub(crate) queue: usize,
    pub(crate) batch: usize,
    pub(crate) busy: bool,
    pub(crate) timeout: Duration,
    pub(crate) port: String,
    /// The port's `rte_flow` rules: alive (steering) while any RX queue of the port is.
    pub(crate) flow_rules: Arc<[rtdaq_dpdk_sys::FlowRule]>,
    /// Which segments lie in GPU memory (never read here: a queue whose segment 0 is GPU
    /// memory has no flow table, a config rule).
    pub(crate) device: InGpu,
    /// The NIC's receive stamps, where the PMD gives them (the `launch` module).
    pub(crate) stamps: Option<RxStamps>,
}

/// One RX queue of the DPDK engine. `Send`; owned by its I/O thread.
pub struct DpdkRx<'a> {
    q: PortRxQueue,
    segments: u16,
    pool: Arc<Mempool>,
    scratch: Box<[Option<Mbuf>]>,
    /// `pkt_len` and `nb_segs` of `scratch[k]`, read by the receive call.
    lens: Box<[u32]>,
    segs: Box<[u16]>,
    drops: MbufBurst,
    counters: &'a QueueCounters,
    flows: Option<Box<Flows>>,
    interface: usize,
    queue: QueueId,
    busy: bool,
    timeout: Duration,
    /// The last poll emptied the port queue (fewer frames than it asked for).
    drained: bool,
    stats: RxStats,
    port: String,
    _flow_rules: Arc<[rtdaq_dpdk_sys::FlowRule]>,
    device: InGpu,
    stamps: Option<RxStamps>,
}

impl<'a> DpdkRx<'a> {
    pub(crate) fn new(s: RxSetup<'a>) -> Self {
        let batch = s.batch.clamp(1, usize::from(u16::MAX));
        DpdkRx {
            q: s.q,
            segments: s.segments,
            pool: s.pool,
            scratch: (0..batch).map(|_| None).collect(),
            lens: vec![0; batch].into_boxed_slice(),
            segs: vec![0; batch].into_boxed_slice(),
            drops: MbufBurst::with_capacity(batch),
            counters: s.counters,
            interface: s.interface,
            queue: QueueId(s.queue as u16),
            busy: s.busy,
            timeout: s.timeout,
            drained: false,
            stats: RxStats::default(),
            port: s.port,
            _flow_rules: s.flow_rules,
            stamps: s.stamps,
            // A frame in GPU memory cannot be classified: no table (the config refuses
            // flows and default_action = "drop" on such an interface).
            flows: if s.device.head { None } else { s.flows },
            device: s.device,
        }
    }

    /// Which segments of this queue's frames lie in GPU memory.
    pub fn in_gpu(&self) -> InGpu {
        self.device
    }

    /// Index of the queue's interface in the config.
    pub fn interface(&self) -> usize {
        self.interface
    }

    /// Index of the queue within its interface's `rx_queues` (= the DPDK queue id).
    pub fn queue(&self) -> usize {
        usize::from(self.queue.0)
    }

    /// The DPDK port name.
    pub fn port_name(&self) -> &str {
        &self.port
    }

    /// The mbuf pool the queue fills from (the header pool with header-data split); its
    /// data buffers are the region's memory (see the crate docs).
    pub fn mempool(&self) -> &Arc<Mempool> {
        &self.pool
    }

    /// Frames per `rte_eth_rx_burst` (`batch_size`).
    pub fn batch(&self) -> usize {
        self.scratch.len()
    }

    /// Events so far.
    pub fn stats(&self) -> RxStats {
        self.stats
    }

    /// Appends ready frames to `burst`; see the module docs. Never allocates, never logs.
    pub(crate) fn poll_burst(&mut self, burst: &mut DpdkRxBurst) -> usize {
        if self.drained && !self.busy && !self.timeout.is_zero() {
            std::thread::sleep(MODERATION.min(self.timeout));
        }
        let got = self.recv(burst);
        if got > 0 || self.busy || self.timeout.is_zero() || burst.room() == 0 {
            return got;
        }
        let deadline = Instant::now() + self.timeout;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return 0;
            }
            std::thread::sleep(SLEEP_STEP.min(deadline - now));
            let got = self.recv(burst);
            if got > 0 {
                return got;
            }
        }
    }

    /// One `rx_burst`: classify, deliver or drop. Returns the frames delivered.
    #[inline]
    fn recv(&mut self, burst: &mut DpdkRxBurst) -> usize {
        burst.set_in_gpu(self.device);
        let room = burst.room().min(self.scratch.len());
        if room == 0 {
            return 0;
        }
        self.stats.polls += 1;
        let n = self.q.rx_burst_lens(
            &mut self.scratch[..room],
            &mut self.lens[..room],
            &mut self.segs[..room],
        );
        self.drained = n < room;
        if n == 0 {
            return 0;
        }
        let now = realtime_ns();
        if let Some(st) = self.stamps.as_mut() {
            st.refresh(&self.q, now);
        }
        if self.flows.is_none()
            && self.stamps.is_none()
            && self.segs[..n].iter().all(|&s| s <= self.segments)
        {
            // Nothing to classify and nothing truncated: every frame goes up, in one move.
            let meta = PacketMeta {
                queue: self.queue,
                rx_timestamp_ns: now,
                ts_source: rtdaq_core::TimestampSource::Poll,
                ..PacketMeta::default()
            };
            if burst.append(&mut self.scratch[..n], &self.lens[..n], meta) {
                let bytes = self.lens[..n].iter().map(|&l| u64::from(l)).sum();
                self.counters.record_rx_burst(n as u64, bytes);
                return n;
            }
        }
        let (mut packets, mut bytes) = (0u64, 0u64);
        for k in 0..n {
            let Some(m) = self.scratch[k].take() else {
                continue;
            };
            let len = self.lens[k] as usize;
            let verdict = if self.segs[k] > self.segments {
                Err(DropReason::Truncated)
            } else {
                // With header-data split segment 0 holds the headers only.
                let split = self.segments > 1;
                let classify = |t: &Flows| {
                    if split {
                        t.classify_head(m.data())
                    } else {
                        t.classify(m.data())
                    }
                };
                match self.flows.as_deref().map(classify) {
                    None => Ok(FlowId::NONE),
                    Some(Classified::Deliver { queue, flow }) => {
                        if queue != self.queue {
                            self.stats.misrouted += 1;
                        }
                        Ok(flow)
                    }
                    Some(Classified::Malformed) => Err(DropReason::Malformed),
                    Some(Classified::NoFlow) => Err(DropReason::NoFlow),
                    Some(Classified::FlowDrop) => Err(DropReason::FlowDrop),
                }
            };
            match verdict {
                Ok(flow) => {
                    let (rx_timestamp_ns, ts_source) =
                        match self.stamps.as_ref().and_then(|st| st.stamp(&m)) {
                            Some(t) => (t, rtdaq_core::TimestampSource::Hardware),
                            None => (now, rtdaq_core::TimestampSource::Poll),
                        };
                    let meta = PacketMeta {
                        len: len as u32,
                        flow,
                        queue: self.queue,
                        rx_timestamp_ns,
                        ts_source,
                        conn: ConnId(0),
                        ..PacketMeta::default()
                    };
                    match burst.push(m, meta) {
                        Ok(()) => {
                            packets += 1;
                            bytes += len as u64;
                        }
                        Err(m) => {
                            // Unreachable: `n` is bounded by the room.
                            self.counters.record_drop(DropReason::RingFull);
                            drop_into(&mut self.drops, m);
                        }
                    }
                }
                Err(reason) => {
                    self.counters.record_drop(reason);
                    drop_into(&mut self.drops, m);
                }
            }
        }
        self.drops.clear();
        self.counters.record_rx_burst(packets, bytes);
        packets as usize
    }
}

/// Queues `m` for the bulk free at the end of the poll (freed at once if that is full).
#[inline]
fn drop_into(drops: &mut MbufBurst, m: Mbuf) {
    if let Err(m) = drops.push(m) {
        drop(m);
    }
}

impl std::fmt::Debug for DpdkRx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpdkRx")
            .field("interface", &self.interface)
            .field("queue", &self.queue.0)
            .field("port", &self.port)
            .field("busy", &self.busy)
            .finish()
    }
}
