//! [`AfxdpRx`]: one RX queue, one AF_XDP socket.
//!
//! Each [`poll`](rtdaq_core::traits::RxQueue::poll):
//!
//! 1. tops up the UMEM's fill ring from the pool (`Umem::refill`; frames lent, not copied);
//! 2. takes up to the burst's room (and `batch_size`) descriptors from the RX ring; each
//!    becomes a [`Buf`] over its UMEM frame again (checked against the lent-frame ledger)
//!    and is classified by the interface's [`FlowTable`] (`rtdaq_core::wire::parse_frame`
//!    inside): delivered with its flow id, or counted `malformed` / `no_flow` /
//!    `flow_drop` and returned to the pool at once;
//! 3. when the ring was empty and the queue sleeps (`busy_poll = false`, `timeout_us > 0`),
//!    waits up to `timeout_us` in `ppoll(POLLIN)` (hrtimer precision; it also performs the
//!    `need_wakeup` wake-up) and tries once more; a busy-polling queue only wakes the
//!    kernel (`recvfrom`) when the fill ring carries `XDP_RING_NEED_WAKEUP`;
//! 4. at most every [`SYNC_INTERVAL_NS`] (checked when frames arrive, when a sleeping
//!    queue's wait times out, and every [`SYNC_EMPTY_POLLS`] empty busy polls) adds the
//!    kernel's drop counters (`XDP_STATISTICS`) and, on the interface's fallback queue, the
//!    XDP program's per-CPU counters to the queue's counters: a drop shows up within about
//!    `max(10 ms, timeout_us)`.
//!
//! Delivered frames are counted with `record_rx_burst` (packets, frame bytes): the runtime
//! must not count them again. Every `poll` never allocates and never logs.

use std::sync::Arc;
use std::time::Duration;

use rtdaq_core::flow::{Classified, FlowTable};
use rtdaq_core::{ConnId, DropReason, PacketMeta, QueueCounters, QueueId};

use crate::burst::XdpBurst;
use crate::engine::XDP_MAX_FRAGS;
use crate::stats::RxStats;
use crate::steer::{Stat, StatsReader, Steering, XdpProgram, STATS};
use crate::sys::consts::{EAGAIN, EINTR, XDP_PKT_CONTD};
use crate::sys::{realtime_ns, ConsRing, XdpDesc, XskSocket, XskStats};
use crate::umem::Umem;

/// Flow table of one interface (the config's maximum number of rules).
pub(crate) type Flows = FlowTable<{ rtdaq_config::MAX_FLOWS_PER_INTERFACE }>;

/// Empty busy polls between two counter syncs.
pub const SYNC_EMPTY_POLLS: u32 = 1024;
/// Shortest time between two counter syncs (10 ms).
pub const SYNC_INTERVAL_NS: u64 = 10_000_000;

/// What `open` hands a new RX queue.
pub(crate) struct RxSetup<'a> {
    pub(crate) sock: XskSocket<'a>,
    pub(crate) ring: ConsRing<XdpDesc>,
    pub(crate) umem: Arc<Umem<'a>>,
    pub(crate) counters: &'a QueueCounters,
    pub(crate) flows: Box<Flows>,
    pub(crate) steering: Steering,
    pub(crate) interface: usize,
    pub(crate) queue: usize,
    pub(crate) batch: usize,
    pub(crate) busy: bool,
    pub(crate) timeout: Duration,
    pub(crate) key: String,
    pub(crate) ifname: String,
    /// Further UMEM frames the largest frame takes (multi-buffer; 0 otherwise).
    pub(crate) max_extra: usize,
}

/// One RX queue of the AF_XDP engine: an AF_XDP socket bound to one NIC queue. `Send`;
/// owned by its I/O thread.
pub struct AfxdpRx<'a, const N: usize = { crate::MAX_BATCH }> {
    // Drop order matters: the socket closes before the UMEM (and its frames) go.
    sock: XskSocket<'a>,
    ring: ConsRing<XdpDesc>,
    umem: Arc<Umem<'a>>,
    prog: Option<Arc<XdpProgram>>,
    bpf: Option<(StatsReader, [u64; STATS])>,
    counters: &'a QueueCounters,
    flows: Box<Flows>,
    steering: Steering,
    interface: usize,
    queue: QueueId,
    batch: usize,
    busy: bool,
    timeout: Duration,
    last: XskStats,
    empty: u32,
    last_sync_ns: u64,
    stats: RxStats,
    key: String,
    ifname: String,
    max_extra: usize,
}

impl<'a, const N: usize> AfxdpRx<'a, N> {
    pub(crate) fn new(s: RxSetup<'a>) -> Self {
        let last = s.sock.stats().unwrap_or_default();
        AfxdpRx {
            sock: s.sock,
            ring: s.ring,
            umem: s.umem,
            prog: None,
            bpf: None,
            counters: s.counters,
            flows: s.flows,
            steering: s.steering,
            interface: s.interface,
            queue: QueueId(s.queue as u16),
            batch: s.batch.clamp(1, N.max(1)),
            busy: s.busy,
            timeout: s.timeout,
            last,
            empty: 0,
            last_sync_ns: 0,
            stats: RxStats::default(),
            key: s.key,
            ifname: s.ifname,
            max_extra: s.max_extra,
        }
    }

    /// Further segments a burst of this queue holds: `batch` frames of the largest size.
    pub(crate) fn rest_per_burst(&self) -> usize {
        self.batch * self.max_extra
    }

    /// Fills the UMEM's fill ring before the first poll. Cold path.
    pub(crate) fn prime(&mut self) {
        self.umem.refill();
    }

    /// Keeps the interface's XDP program alive as long as this queue; with `reader`, this
    /// queue adds the program's drop counters to its own (the fallback queue).
    pub(crate) fn attach_program(&mut self, prog: Arc<XdpProgram>, reader: Option<StatsReader>) {
        self.bpf = reader.map(|r| (r, [0u64; STATS]));
        self.prog = Some(prog);
    }

    /// The socket (to insert into the XSKMAP).
    pub(crate) fn socket(&self) -> &XskSocket<'a> {
        &self.sock
    }

    /// Index of the queue's interface in the config.
    pub fn interface(&self) -> usize {
        self.interface
    }

    /// Index of the queue within its interface's `rx_queues`.
    pub fn queue(&self) -> usize {
        usize::from(self.queue.0)
    }

    /// The netdev name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The NIC queue the socket is bound to.
    pub fn nic_queue(&self) -> u32 {
        self.umem.nic_queue
    }

    /// How frames reach this queue: by NIC queue, or by the XDP program's rules.
    pub fn steering(&self) -> Steering {
        self.steering
    }

    /// Whether the kernel runs the socket in zero-copy mode (false: copy mode).
    pub fn zero_copy(&self) -> bool {
        self.umem.zero_copy
    }

    /// Where the interface's XDP program runs (`None` before open finished).
    pub fn xdp_mode(&self) -> Option<crate::XdpMode> {
        self.prog.as_ref().map(|p| p.mode())
    }

    /// Engine events so far.
    pub fn stats(&self) -> RxStats {
        self.stats
    }

    /// Adds the kernel's and the XDP program's drop counters to the queue's counters now
    /// (`poll` does it by itself from time to time). Never allocates.
    pub fn sync_drops(&mut self) {
        match self.sock.stats() {
            Ok(s) => {
                let c = self.counters;
                c.record_drops(
                    DropReason::PoolEmpty,
                    s.rx_dropped.wrapping_sub(self.last.rx_dropped),
                );
                c.record_drops(
                    DropReason::Kernel,
                    s.rx_ring_full.wrapping_sub(self.last.rx_ring_full),
                );
                self.stats.rx_dropped = s.rx_dropped;
                self.stats.rx_ring_full = s.rx_ring_full;
                self.stats.rx_invalid_descs = s.rx_invalid_descs;
                self.last = s;
            }
            Err(e) => self.note_error(e.raw_os_error().unwrap_or(0)),
        }
        if let Some((reader, last)) = &mut self.bpf {
            match reader.read() {
                Ok(now) => {
                    let d = |s: Stat| now[s as usize].wrapping_sub(last[s as usize]);
                    let c = self.counters;
                    c.record_drops(DropReason::NoFlow, d(Stat::NoFlow) + d(Stat::OtherQueue));
                    c.record_drops(DropReason::FlowDrop, d(Stat::FlowDrop));
                    c.record_drops(DropReason::Kernel, d(Stat::NoXsk));
                    self.stats.other_nic_queue = now[Stat::OtherQueue as usize];
                    self.stats.no_xsk = now[Stat::NoXsk as usize];
                    self.stats.xdp_malformed = now[Stat::Malformed as usize];
                    self.stats.xdp_redirected = now[Stat::Redirected as usize];
                    *last = now;
                }
                Err(e) => {
                    self.stats.errors += 1;
                    self.stats.last_errno = e.raw_os_error().unwrap_or(0);
                }
            }
        }
    }

    fn note_error(&mut self, errno: i32) {
        if errno != EAGAIN && errno != EINTR {
            self.stats.errors += 1;
            self.stats.last_errno = errno;
        }
    }

    /// Appends ready frames to `burst`; see the module docs. Never allocates, never logs.
    pub(crate) fn poll_burst(&mut self, burst: &mut XdpBurst<'a, N>) -> usize {
        self.umem.refill();
        let got = self.recv(burst);
        if got > 0 {
            self.empty = 0;
            return got;
        }
        if !self.busy && !self.timeout.is_zero() {
            match self.sock.wait_readable(self.timeout) {
                Ok(true) => {
                    self.umem.refill();
                    return self.recv(burst);
                }
                Ok(false) => self.maybe_sync(realtime_ns()),
                Err(e) => self.note_error(e.raw_os_error().unwrap_or(0)),
            }
        } else {
            if self.umem.fill_needs_wakeup() {
                self.stats.wakeups += 1;
                if let Err(e) = self.sock.kick_rx() {
                    self.note_error(e.raw_os_error().unwrap_or(0));
                }
            }
            self.empty = self.empty.wrapping_add(1);
            if self.empty % SYNC_EMPTY_POLLS == 0 {
                self.maybe_sync(realtime_ns());
            }
        }
        0
    }

    /// Takes what the RX ring holds (up to the burst's room and the batch size). A frame of
    /// several descriptors (multi-buffer: `XDP_PKT_CONTD` on all but its last) is taken
    /// whole or not at all: what does not fit the burst stays in the ring for the next poll.
    #[inline]
    fn recv(&mut self, burst: &mut XdpBurst<'a, N>) -> usize {
        let room = burst.room().min(self.batch) as u32;
        if room == 0 {
            return 0;
        }
        // Everything published: a multi-buffer frame's end must be visible to take it whole
        // (frames are still taken only up to the room).
        let mut n = self.ring.available(u32::MAX);
        if n == 0 {
            return 0;
        }
        let now = realtime_ns();
        let lent = &self.umem.lent;
        let frame = lent.pool().slot_size() as u64;
        let (mut packets, mut bytes) = (0u64, 0u64);
        let mut frags: heapless::Vec<(rtdaq_core::Buf<'a>, u16), { XDP_MAX_FRAGS as usize }> =
            heapless::Vec::new();
        // Descriptors consumed (whole frames only), frames looked at.
        let mut i = 0u32;
        let mut taken = 0u32;
        while i < n && taken < room {
            // The frame's descriptors: [i, end).
            let mut end = i;
            let mut whole = false;
            while end < n {
                let Some(d) = self.ring.read(end) else { break };
                end += 1;
                if d.options & XDP_PKT_CONTD == 0 {
                    whole = true;
                    break;
                }
            }
            if !whole && end == n {
                // The cached producer index ended inside this frame: the kernel publishes
                // whole frames, so its end may be there already. Look again once.
                let fresh = self.ring.refresh();
                if fresh > n {
                    n = fresh;
                    continue;
                }
            }
            let extra = (end - i - 1) as usize;
            // Not all of it published to us yet, or no room for its further segments (the
            // next poll takes it) — unless even an empty burst could not hold it (more
            // further segments than the burst was made for): then it is dropped, counted,
            // not stuck.
            let never_fits = whole && extra > burst.rest_capacity();
            if !whole || (extra > burst.rest_room() && !never_fits) {
                break;
            }
            let first = i;
            i = end;
            taken += 1;
            frags.clear();
            if never_fits {
                for k in first..end {
                    if let Some(d) = self.ring.read(k) {
                        drop(lent.reclaim(d.addr, (d.addr % frame) as usize + d.len as usize));
                    }
                }
                self.counters.record_drop(DropReason::TooLarge);
                continue;
            }
            let mut bad = false;
            let mut len = 0usize;
            let mut head: Option<(rtdaq_core::Buf<'a>, u16)> = None;
            for k in first..end {
                let Some(d) = self.ring.read(k) else {
                    bad = true;
                    continue;
                };
                let off = (d.addr % frame) as usize;
                let dl = d.len as usize;
                match lent.reclaim(d.addr, off + dl) {
                    Some(buf) => {
                        len += dl;
                        if head.is_none() {
                            head = Some((buf, off as u16));
                        } else if frags.push((buf, off as u16)).is_err() {
                            // More than the kernel's limit: cannot happen; the buffer goes
                            // back to the pool with the frame.
                            bad = true;
                        }
                    }
                    None => bad = true,
                }
            }
            let Some((buf, off)) = head.filter(|_| !bad) else {
                // Every reclaimed buffer of the frame returns to the pool (dropped here). A
                // descriptor outside the UMEM: the frame cannot be read, so it is malformed.
                self.stats.bad_descs += 1;
                self.counters.record_drop(DropReason::Malformed);
                frags.clear();
                continue;
            };
            let first_bytes = buf
                .as_slice()
                .and_then(|s| s.get(usize::from(off)..))
                .unwrap_or_default();
            let verdict = if frags.is_empty() {
                self.flows.classify(first_bytes)
            } else if lengths_fit(first_bytes, len) {
                // Only the headers are in the first segment of a multi-buffer frame; the IPv4
                // total length (eCPRI payload size) was checked against the whole frame's.
                self.flows.classify_head(first_bytes)
            } else {
                Classified::Malformed
            };
            let flow = match verdict {
                Classified::Deliver { queue, flow } => {
                    if self.steering == Steering::Xdp && queue != self.queue {
                        self.stats.misrouted += 1;
                    }
                    flow
                }
                Classified::Malformed => {
                    self.counters.record_drop(DropReason::Malformed);
                    frags.clear();
                    continue;
                }
                Classified::NoFlow => {
                    self.counters.record_drop(DropReason::NoFlow);
                    frags.clear();
                    continue;
                }
                Classified::FlowDrop => {
                    self.counters.record_drop(DropReason::FlowDrop);
                    frags.clear();
                    continue;
                }
            };
            let meta = PacketMeta {
                len: len as u32,
                flow,
                queue: self.queue,
                rx_timestamp_ns: now,
                ts_source: rtdaq_core::TimestampSource::Poll,
                conn: ConnId(0),
                ..PacketMeta::default()
            };
            if burst.push(buf, off, meta).is_err() {
                // Unreachable: `taken` is bounded by the room.
                self.counters.record_drop(DropReason::RingFull);
                frags.clear();
                continue;
            }
            for (b, o) in frags.drain(..) {
                // Cannot fail: the room for them was checked above.
                let _ = burst.push_frag(b, o);
            }
            if extra > 0 {
                self.stats.multi_buffer += 1;
            }
            packets += 1;
            bytes += len as u64;
        }
        self.ring.release(i);
        self.counters.record_rx_burst(packets, bytes);
        self.maybe_sync(now);
        // Frames appended (the RxQueue contract); dropped ones are counted already.
        packets as usize
    }

    /// Syncs the drop counters when [`SYNC_INTERVAL_NS`] passed since the last sync.
    #[inline]
    fn maybe_sync(&mut self, now: u64) {
        if now.wrapping_sub(self.last_sync_ns) >= SYNC_INTERVAL_NS {
            self.last_sync_ns = now;
            self.sync_drops();
        }
    }
}

/// True when the IPv4 packet (total length) or the eCPRI-over-Ethernet message (4 + payload
/// size) that the first segment's headers announce fits the `len` bytes of the whole
/// multi-buffer frame (what `parse_frame` checks for a one-buffer frame); another frame
/// passes (the flow table decides). Never allocates.
#[inline]
fn lengths_fit(head: &[u8], len: usize) -> bool {
    let mut l3 = 14;
    let mut ethertype = match head.get(12..14) {
        Some(b) => u16::from_be_bytes([b[0], b[1]]),
        None => return false,
    };
    // Up to two VLAN tags (802.1Q / 802.1ad), as the parser.
    for _ in 0..2 {
        if ethertype != 0x8100 && ethertype != 0x88a8 {
            break;
        }
        ethertype = match head.get(l3 + 2..l3 + 4) {
            Some(b) => u16::from_be_bytes([b[0], b[1]]),
            None => return false,
        };
        l3 += 4;
    }
    let field = |at: usize| {
        head.get(at..at + 2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    };
    match ethertype {
        // IPv4 total length.
        0x0800 => field(l3 + 2).is_some_and(|total| l3 + total <= len),
        // eCPRI common header + payload size.
        0xAEFE => field(l3 + 2).is_some_and(|size| l3 + 4 + size <= len),
        _ => true,
    }
}

impl<const N: usize> Drop for AfxdpRx<'_, N> {
    fn drop(&mut self) {
        self.sync_drops();
        let s = self.stats;
        if s.errors > 0 || s.bad_descs > 0 || s.misrouted > 0 || s.rx_invalid_descs > 0 {
            log::warn!(
                "{} ({} NIC queue {}): {} errors (last errno {}), {} bad RX descriptors, {} invalid fill descriptors, {} frames the flow table assigned to another queue",
                self.key,
                self.ifname,
                self.umem.nic_queue,
                s.errors,
                s.last_errno,
                s.bad_descs,
                s.rx_invalid_descs,
                s.misrouted
            );
        }
    }
}

impl<const N: usize> std::fmt::Debug for AfxdpRx<'_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfxdpRx")
            .field("interface", &self.interface)
            .field("queue", &self.queue.0)
            .field("ifname", &self.ifname)
            .field("nic_queue", &self.umem.nic_queue)
            .field("steering", &self.steering)
            .field("zero_copy", &self.umem.zero_copy)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::lengths_fit;
    use rtdaq_core::flow::{Classified, DefaultAction, FlowTable};
    use rtdaq_core::wire::EcpriHeader;

    /// The head of a 9000 B eCPRI-over-Ethernet frame (the first segment of a multi-buffer
    /// frame): classified from its headers, its payload size checked against the whole
    /// frame's length, not against the segment.
    #[test]
    fn an_ecpri_jumbo_frame_is_judged_by_its_whole_length() {
        let mut head = [0u8; 3840];
        head[12..14].copy_from_slice(&0xAEFEu16.to_be_bytes());
        let h = EcpriHeader {
            concatenated: false,
            msg_type: 0,
            payload_size: 9000 - 14 - 4,
        };
        h.emit(&mut head[14..]).unwrap();
        assert!(lengths_fit(&head, 9000));
        assert!(!lengths_fit(&head, 8999), "a payload size past the frame");
        let t: FlowTable<4> = FlowTable::new(DefaultAction::Queue(rtdaq_core::QueueId(0)));
        assert!(matches!(t.classify_head(&head), Classified::Deliver { .. }));
        assert_eq!(
            t.classify(&head),
            Classified::Malformed,
            "whole-frame parse of a head"
        );
        // IPv4: the total length against the whole frame.
        let mut ip = [0u8; 64];
        ip[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        ip[16..18].copy_from_slice(&8028u16.to_be_bytes());
        assert!(lengths_fit(&ip, 14 + 8028));
        assert!(!lengths_fit(&ip, 14 + 8027));
        // Another EtherType: the flow table decides.
        ip[12..14].copy_from_slice(&0x86DDu16.to_be_bytes());
        assert!(lengths_fit(&ip, 64));
        assert!(!lengths_fit(&ip[..10], 64), "no EtherType");
    }
}
