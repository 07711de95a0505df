//! The sender half of an egress sink: one thread that takes the sink's heaps in order,
//! splits each into SPEAD packets and sends them in `sendmmsg` batches on a connected UDP
//! socket per destination (see the [module docs](super)).

use super::common::{EgressCounters, SinkShared, ITEM_DATA, ITEM_PACKETS, ITEM_TIMESTAMP};
use super::heap::HeapBuf;
use crate::error::RuntimeError;
use rtdaq_config::model::Egress;
use rtdaq_core::format::spead::{self, Flavour};
use rtdaq_core::format::spead_tx::{self, Heap, Packetizer};
use rtdaq_core::format::UnitKind;
use rtdaq_core::slot_ring::SlotConsumer;
use rtdaq_netsys::dgram::DatagramBatch;
use rtdaq_netsys::inet;
use rtdaq_netsys::txtime::{self, Dropped, ErrQueue};
use rtdaq_platform::qdisc::{self, LaunchQdisc, Timed};
use std::net::SocketAddrV4;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::time::Duration;

/// How long an idle sender sleeps before it looks at the ring again.
const IDLE: Duration = Duration::from_micros(50);
/// Datagrams per `sendmmsg`.
const BATCH: usize = 64;
/// With launch times, how long after the last packet's time the sender still reads the
/// qdisc's reports, and the longest it waits for them at the end.
const SETTLE_AFTER: Duration = Duration::from_millis(20);
const SETTLE_MAX: Duration = Duration::from_secs(2);
/// After that, the longest wait for the kernel to let go of the sockets' packets.
const HELD_WAIT: Duration = Duration::from_millis(200);
/// Requested socket send buffer (the kernel caps it at `net.core.wmem_max` without
/// `CAP_NET_ADMIN`).
const SNDBUF: i32 = 4 << 20;

/// Why packets were not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lost {
    /// The send failed (`egress_error`).
    Error,
    /// The destination refused them: no receiver there (`peer_gone`).
    PeerGone,
}

/// Launch times (`pacing = "txtime"`): the clock of the qdisc that keeps them, the least
/// time between handing a packet over and its departure, and the error queue's buffers.
struct Launch {
    clockid: libc::clockid_t,
    /// `txtime_lead_us` on `etf`; 0 on `fq`, which sends a late packet at once.
    lead_ns: u64,
    /// Boxed: 320 bytes of buffers a sender without launch times does without.
    errq: Box<ErrQueue>,
    /// The qdiscs that keep the times (one per device the destinations are reached by),
    /// asked at the end what they still hold.
    qdiscs: Vec<LaunchQdisc>,
}

/// One destination: its connected socket and the batch of packets waiting for it.
struct Dest {
    fd: OwnedFd,
    batch: DatagramBatch,
    /// Heaps in the batch: (index after its last packet, its payloads), oldest first.
    marks: Box<[(usize, u32)]>,
    nmarks: usize,
}

/// The sender of one queue's egress sink; [`run`](SpeadSender::run) is its thread.
pub struct SpeadSender {
    label: String,
    cons: Option<SlotConsumer<'static, HeapBuf>>,
    counters: &'static EgressCounters,
    shared: &'static SinkShared,
    dests: Vec<Dest>,
    packetizer: Packetizer,
    flavour: Flavour,
    /// Heap counter: `(n + 1) × step + residue` for the `n`-th heap of this sender.
    step: u64,
    residue: u64,
    next_heap: u64,
    descriptors_every: u64,
    data_heaps: u64,
    /// Paced rate in bits per second, and when the next bytes may go (monotonic ns; with
    /// launch times, on the clock of the qdisc that keeps them).
    rate_bps: Option<f64>,
    next_send_ns: f64,
    /// Each packet goes with its departure time (`pacing = "txtime"`), the sender never
    /// sleeps to pace.
    launch: Option<Launch>,
    /// Descriptor blobs, encoded once: timestamp, packets, data.
    descriptors: Vec<Vec<u8>>,
    /// Whole SPEAD heaps of the input go out as the packets they arrived in (`unit =
    /// "heap"`): no heap of rtdaq's items, no descriptors of its own.
    forward: bool,
}

impl SpeadSender {
    /// The sender of `eg` (`egress[id]`) over `cons`: one socket per destination, created and
    /// connected now (a destination with no route stops the start, naming its key).
    pub(crate) fn new(
        eg: &Egress,
        id: usize,
        cons: SlotConsumer<'static, HeapBuf>,
        counters: &'static EgressCounters,
        shared: &'static SinkShared,
        (step, residue): (u64, u64),
        label: String,
    ) -> Result<Self, RuntimeError> {
        let flavour = Flavour {
            heap_address_bits: eg.heap_address_bits,
        };
        let max_packet = eg.max_packet as usize;
        let packetizer =
            Packetizer::new(flavour, max_packet).ok_or_else(|| RuntimeError::Egress {
                key: format!("egress[{id}].max_packet"),
                message: format!(
                    "{max_packet} bytes cannot hold a SPEAD header and its item pointers; raise it"
                ),
            })?;
        let mut dests = Vec::with_capacity(eg.destinations.len());
        let mut launch: Option<Launch> = None;
        let mut by: Vec<String> = Vec::new();
        for (k, &addr) in eg.destinations.iter().enumerate() {
            let fd = socket_to(addr, eg.ttl, eg.multicast_interface).map_err(|e| {
                RuntimeError::Egress {
                    key: format!("egress[{id}].destinations[{k}]"),
                    message: format!(
                        "cannot send to {addr}: {e} (is there a route to it from this host?)"
                    ),
                }
            })?;
            if let Some(lead_us) = eg.txtime {
                let lead_ns = u64::from(lead_us) * 1000;
                let key = format!("egress[{id}].txtime_lead_us");
                let armed = txtime_ready(fd.as_fd(), addr, lead_ns, &key).map_err(|message| {
                    RuntimeError::Egress {
                        key: format!("egress[{id}].pacing"),
                        message,
                    }
                })?;
                let clockid = armed.clock.linux_clockid();
                if launch.as_ref().is_some_and(|l| l.clockid != clockid) {
                    return Err(RuntimeError::Egress {
                        key: format!("egress[{id}].destinations[{k}]"),
                        message: format!("packets to {addr} leave by {}, whose launch times are on another clock than the destinations' before it ({}): one sender keeps one schedule; give the qdiscs the same clockid", armed.by, by.join("; ")),
                    });
                }
                let mut qdiscs = launch.take().map(|l| l.qdiscs).unwrap_or_default();
                if !by.contains(&armed.by) {
                    by.push(armed.by.clone());
                    qdiscs.push(armed.clone());
                }
                launch = Some(Launch {
                    clockid,
                    lead_ns: if armed.etf { lead_ns } else { 0 },
                    errq: Box::new(ErrQueue::new()),
                    qdiscs,
                });
            }
            let batch = if eg.txtime.is_some() {
                DatagramBatch::timed(BATCH, max_packet)
            } else {
                DatagramBatch::new(BATCH, max_packet)
            };
            dests.push(Dest {
                fd,
                batch,
                marks: vec![(0, 0); BATCH].into_boxed_slice(),
                nmarks: 0,
            });
        }
        let descriptors = descriptors(flavour);
        if !by.is_empty() {
            let _ = counters.launch_times.set(by.join("; "));
        }
        Ok(SpeadSender {
            label,
            cons: Some(cons),
            counters,
            shared,
            dests,
            packetizer,
            flavour,
            step: step.max(1),
            residue,
            next_heap: 0,
            descriptors_every: u64::from(eg.descriptors_every),
            data_heaps: 0,
            rate_bps: eg.rate_bps,
            next_send_ns: 0.0,
            launch,
            descriptors,
            forward: eg.units.is_some_and(|u| u.kind == UnitKind::SpeadHeap),
        })
    }

    /// The sink's name in messages (`lo_udp.rx0 egress spead-out`).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The pacing clock: the process's monotonic clock, or the clock of the qdisc that
    /// holds packets until their departure times.
    fn clock_ns(&self) -> u64 {
        match &self.launch {
            Some(l) => rtdaq_netsys::clock::now_ns(l.clockid),
            None => crate::pacer::now_ns(),
        }
    }

    /// A packet's departure time (launch times; 0, unused, for the software pacer): at the
    /// earliest the lead from now.
    fn departure(&mut self, len: usize) -> u64 {
        match &self.launch {
            Some(l) => {
                let earliest = rtdaq_netsys::clock::now_ns(l.clockid) + l.lead_ns;
                departure(self.rate_bps, &mut self.next_send_ns, len as u64, earliest)
            }
            None => 0,
        }
    }

    /// The next heap counter.
    fn heap_cnt(&mut self) -> u64 {
        self.next_heap += 1;
        self.next_heap * self.step + self.residue
    }

    /// The sender thread: descriptors, then every heap the consumer hands over until it is
    /// done and the ring is empty, then (the last sender of the sink) the end of stream.
    pub fn run(mut self) -> u64 {
        let Some(mut cons) = self.cons.take() else {
            return 0;
        };
        let mut turns = crate::stall::StallClock::start(
            &self.counters.stall,
            crate::pacer::now_ns(),
            crate::stall::ThreadKind::Writer,
        );
        self.next_send_ns = self.clock_ns() as f64;
        // From here on nothing allocates (the audit counts it if something did).
        rtdaq_platform::alloc_audit::arm_current_thread();
        if !self.forward {
            self.send_descriptors();
        }
        loop {
            turns.tick(crate::pacer::now_ns());
            // Read before the ring: the consumer raises it after its last commit.
            let done = self.counters.producer_done.load(Acquire);
            match cons.front() {
                Some(h) => {
                    self.send_heap(h);
                    let released = cons.release();
                    debug_assert!(released.is_ok());
                }
                None => {
                    self.flush_all();
                    if done {
                        break;
                    }
                    std::thread::sleep(IDLE);
                }
            }
        }
        if self.shared.running.fetch_sub(1, AcqRel) == 1 {
            self.send_stop();
        }
        // The end may read the qdiscs (netlink, allocating): after the hot loop.
        rtdaq_platform::alloc_audit::disarm_current_thread();
        self.settle();
        rtdaq_platform::rt::thread_cpu_ns().unwrap_or(0)
    }

    /// Descriptors to every destination (one heap each).
    fn send_descriptors(&mut self) {
        for d in 0..self.dests.len() {
            let cnt = self.heap_cnt();
            // Taken out while `self` sends them (no copy), put back after.
            let descs = std::mem::take(&mut self.descriptors);
            let items: [(u32, &[u8]); 3] = [
                (spead_tx::ITEM_DESCRIPTOR, &descs[0]),
                (spead_tx::ITEM_DESCRIPTOR, &descs[1]),
                (spead_tx::ITEM_DESCRIPTOR, &descs[2]),
            ];
            let heap = Heap {
                cnt,
                immediates: &[],
                items: &items,
            };
            self.put_heap(d, &heap, 0);
            self.descriptors = descs;
            EgressCounters::add(&self.counters.descriptors, 1);
        }
    }

    /// One data heap, to the next destination in turn (descriptors first when due); a
    /// forwarded heap as the packets it arrived in.
    fn send_heap(&mut self, h: &HeapBuf) {
        if !self.forward
            && self.descriptors_every > 0
            && self.data_heaps > 0
            && self.data_heaps % self.descriptors_every == 0
        {
            self.send_descriptors();
        }
        let d = (self.data_heaps % self.dests.len() as u64) as usize;
        self.data_heaps += 1;
        if self.forward {
            // The unit's datagrams, back to back, each a SPEAD packet, copied as they are;
            // a heap with one too large for a packet buffer goes nowhere, not in part.
            if !fits_packets(h.data(), self.packetizer.max_packet()) {
                EgressCounters::add(&self.counters.heaps, 1);
                self.drop_payloads(Lost::Error, h.payloads);
                return;
            }
            let mut rest = h.data();
            self.put_packets(d, h.payloads as usize, h.payloads, |_, _, out| {
                let Some(len) = spead::packet_len(rest).filter(|&n| n <= out.len()) else {
                    return 0;
                };
                out[..len].copy_from_slice(&rest[..len]);
                rest = &rest[len..];
                len
            });
            return;
        }
        let cnt = self.heap_cnt();
        let ts = h.first_rx_ns.to_be_bytes();
        let items: [(u32, &[u8]); 2] = [(ITEM_TIMESTAMP, &ts), (ITEM_DATA, h.data())];
        let immediates = [(ITEM_PACKETS, u64::from(h.payloads))];
        let heap = Heap {
            cnt,
            immediates: &immediates,
            items: &items,
        };
        self.put_heap(d, &heap, h.payloads);
    }

    /// Puts every packet of `heap` into destination `d`'s batch, sending full batches; the
    /// heap's `payloads` count as sent or dropped with its packets.
    fn put_heap(&mut self, d: usize, heap: &Heap<'_>, payloads: u32) {
        let n = self.packetizer.count(heap);
        self.put_packets(d, n, payloads, |pk, k, out| pk.emit(heap, k, out));
    }

    /// Puts the `n` packets of one heap into destination `d`'s batch, sending full batches:
    /// `emit(packetizer, k, out)` writes packet `k` into `out` and returns its length (0:
    /// it cannot, and the heap is counted as `egress_error`). The heap's `payloads` count as
    /// sent or dropped with its packets.
    fn put_packets(
        &mut self,
        d: usize,
        n: usize,
        payloads: u32,
        mut emit: impl FnMut(&Packetizer, usize, &mut [u8]) -> usize,
    ) {
        // A batch sent while it held the heap's first packets, and not all of them went; or
        // a heap the packetizer cannot split (none within the config's limits).
        let mut failed = (n == 0).then_some(Lost::Error);
        for k in 0..n {
            if self.dests[d].batch.slot().is_none() {
                failed = failed.or(self.flush(d));
            }
            let dest = &mut self.dests[d];
            let Some(out) = dest.batch.slot() else { return };
            let len = emit(&self.packetizer, k, out);
            if len == 0 {
                // Cannot happen for a heap within the config's limits: counted, not sent.
                failed = Some(Lost::Error);
                break;
            }
            let at = self.departure(len);
            self.dests[d].batch.push_at(len, at);
        }
        if payloads > 0 {
            EgressCounters::add(&self.counters.heaps, 1);
        }
        if let Some(why) = failed {
            self.drop_payloads(why, payloads);
            return;
        }
        // A batch holds at most BATCH packets, so at most BATCH heaps end in it.
        let dest = &mut self.dests[d];
        debug_assert!(dest.nmarks < dest.marks.len());
        let end = dest.batch.pending();
        if let Some(m) = dest.marks.get_mut(dest.nmarks) {
            *m = (end, payloads);
            dest.nmarks += 1;
        }
    }

    /// Counts `payloads` as not sent, for `why`.
    fn drop_payloads(&self, why: Lost, payloads: u32) {
        let c = self.counters;
        let counter = match why {
            Lost::Error => &c.dropped_error,
            Lost::PeerGone => &c.dropped_peer_gone,
        };
        EgressCounters::add(counter, u64::from(payloads));
    }

    /// Sends everything pending for every destination.
    fn flush_all(&mut self) {
        for d in 0..self.dests.len() {
            let _ = self.flush(d);
        }
    }

    /// Sends destination `d`'s batch (paced), counting the heaps that end in it as sent or
    /// dropped; `Some(why)` when not every packet went.
    fn flush(&mut self, d: usize) -> Option<Lost> {
        let dest = &mut self.dests[d];
        let total = dest.batch.pending();
        if total == 0 {
            return None;
        }
        let bytes = dest.batch.pending_bytes();
        match &self.launch {
            Some(l) => hold_back(l, dest.batch.first_at()),
            None => pace(self.rate_bps, &mut self.next_send_ns, bytes),
        }
        let mut sent = 0usize;
        let mut err = None;
        while sent < total {
            match dest.batch.send(dest.fd.as_fd()) {
                Ok(0) => break,
                Ok(k) => sent += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        dest.batch.clear();
        let c = self.counters;
        if let Some(l) = &mut self.launch {
            qdisc_drops(l, dest, c);
        }
        EgressCounters::add(&c.datagrams, sent as u64);
        if err.is_none() {
            EgressCounters::add(&c.bytes, bytes);
        }
        // Heaps whose last packet went are sent; the others are dropped, by reason.
        let refused = err
            .as_ref()
            .is_some_and(|e| e.raw_os_error() == Some(libc::ECONNREFUSED));
        let why = if refused { Lost::PeerGone } else { Lost::Error };
        for &(end, payloads) in &dest.marks[..dest.nmarks] {
            let p = u64::from(payloads);
            if end <= sent {
                EgressCounters::add(&c.payloads_sent, p);
            } else if refused {
                EgressCounters::add(&c.dropped_peer_gone, p);
            } else {
                EgressCounters::add(&c.dropped_error, p);
            }
        }
        dest.nmarks = 0;
        let failed = (sent < total).then_some(why);
        // Said once, by the main thread at the end (a log line would allocate here).
        if let Some(e) = &err {
            let code = e.raw_os_error().unwrap_or(-1);
            let _ = c.first_errno.compare_exchange(0, code, Relaxed, Relaxed);
        }
        failed
    }

    /// With launch times, waits until the last packet's time has passed (at most
    /// [`SETTLE_MAX`]) and reads what the qdisc dropped meanwhile: it reports a packet it
    /// could not hand over in time only when that time comes. Then waits up to
    /// [`HELD_WAIT`] for the kernel to let go of every packet (the sockets' `SIOCOUTQ`);
    /// what the launch-time qdiscs still hold then is counted (`txtime_held`).
    fn settle(&mut self) {
        if self.launch.is_none() {
            return;
        }
        let (now, last) = (self.clock_ns(), self.next_send_ns as u64);
        let wait = last.saturating_sub(now) + SETTLE_AFTER.as_nanos() as u64;
        std::thread::sleep(Duration::from_nanos(wait).min(SETTLE_MAX));
        let fds: Vec<_> = self.dests.iter().map(|d| d.fd.as_fd()).collect();
        let left = txtime::wait_unsent(&fds, HELD_WAIT);
        if let Some(l) = &mut self.launch {
            for dest in &self.dests {
                qdisc_drops(l, dest, self.counters);
            }
            if left > 0 {
                let held: u64 = l.qdiscs.iter().map(|q| qdisc::held(q).unwrap_or(0)).sum();
                EgressCounters::add(&self.counters.txtime_held, held.max(1));
                log::warn!(
                    "{}: the kernel still held {} SPEAD packets ({left} bytes unsent) after their launch times had passed (counted as lost: they leave late or never): the qdisc ({}) did not hand them to the device; check that nothing above it throttles (tc -s qdisc show) and that its clock is the one the launch times are on; if the qdisc holds none, they wait for the next hop's link address (ip neigh show)",
                    self.label,
                    held.max(1),
                    l.qdiscs.iter().map(|q| q.by.as_str()).collect::<Vec<_>>().join("; ")
                );
            }
        }
    }

    /// The end-of-stream heap to every destination.
    fn send_stop(&mut self) {
        for d in 0..self.dests.len() {
            let cnt = self.heap_cnt();
            let flavour = self.flavour;
            if let Some(len) = self.dests[d]
                .batch
                .slot()
                .map(|out| spead_tx::emit_end(flavour, cnt, out))
            {
                let at = self.departure(len);
                self.dests[d].batch.push_at(len, at);
            }
            let _ = self.flush(d);
        }
    }
}

/// With launch times, waits until the batch whose first packet leaves at `first_at` is at
/// most the lead ahead: a sender fed faster than its rate would otherwise hand the qdisc
/// an ever longer schedule, and `fq` holds at most `flow_limit` packets of a flow (100 by
/// default), dropping the rest unreported. So the qdisc holds at most the lead and one
/// batch; the heaps waiting meanwhile fill the sink's buffers, and what finds none is
/// counted (`egress_full`).
fn hold_back(l: &Launch, first_at: Option<u64>) {
    let Some(first) = first_at else { return };
    let due = first.saturating_sub(l.lead_ns);
    let now = rtdaq_netsys::clock::now_ns(l.clockid);
    if due > now {
        std::thread::sleep(Duration::from_nanos(due - now));
    }
}

/// Reads what the qdisc reported dropped on `dest`'s socket (its error queue) into the
/// counters: packets whose launch time had passed, or that it could not hand over in time.
fn qdisc_drops(l: &mut Launch, dest: &Dest, c: &EgressCounters) {
    let mut d = Dropped::default();
    l.errq.drain(dest.fd.as_fd(), &mut d);
    EgressCounters::add(&c.txtime_invalid, d.invalid);
    EgressCounters::add(&c.txtime_missed, d.missed);
}

/// Every SPEAD packet in `data` (back to back) is at most `max` bytes.
fn fits_packets(mut data: &[u8], max: usize) -> bool {
    while !data.is_empty() {
        match spead::packet_len(data) {
            Some(n) if n <= max => data = &data[n..],
            _ => return false,
        }
    }
    true
}

/// Waits until `bytes` more may go at `rate_bps` (`None`: unpaced); a sender that fell
/// behind catches up at most 1 ms of schedule.
pub(super) fn pace(rate_bps: Option<f64>, next_ns: &mut f64, bytes: u64) {
    let Some(rate) = rate_bps else { return };
    let now = crate::pacer::now_ns() as f64;
    if *next_ns < now - 1e6 {
        *next_ns = now - 1e6;
    }
    if *next_ns > now {
        std::thread::sleep(Duration::from_nanos((*next_ns - now) as u64));
    }
    *next_ns += bytes as f64 * 8e9 / rate;
}

/// The departure time (ns on the qdisc's clock) of a packet of `bytes` at `rate_bps`, one
/// packet time after the last, and never before `earliest_ns` (now plus the lead): `etf`
/// drops a packet whose time has passed when it arrives, `fq` sends it at once, so a
/// sender that was idle or fell behind starts the schedule again from there (no catch-up
/// burst, unlike the software pacer's 1 ms).
pub(super) fn departure(
    rate_bps: Option<f64>,
    next_ns: &mut f64,
    bytes: u64,
    earliest_ns: u64,
) -> u64 {
    let Some(rate) = rate_bps else { return 0 };
    let earliest = earliest_ns as f64;
    if *next_ns < earliest {
        *next_ns = earliest;
    }
    let at = *next_ns;
    *next_ns += bytes as f64 * 8e9 / rate;
    at as u64
}

/// Launch times on a sink's socket connected to `addr`: the qdisc of the interface its
/// packets leave by must keep them (`etf`, with a `delta` under `lead_ns`, or `fq`: without
/// one the kernel ignores the times and packets would go unpaced), and `SO_TXTIME` is set
/// on that qdisc's clock with error reports; the qdisc, or the reason in words, when not.
/// `lead_key` names the lead in messages.
fn txtime_ready(
    fd: std::os::fd::BorrowedFd<'_>,
    addr: SocketAddrV4,
    lead_ns: u64,
    lead_key: &str,
) -> Result<LaunchQdisc, String> {
    let local = inet::local_addr(fd).map_err(|e| format!("the socket to {addr}: {e}"))?;
    let dev = rtdaq_platform::nic::netdev_of_ipv4(*local.ip())
        .ok()
        .flatten()
        .ok_or_else(|| {
            format!(
                "no interface holds {}, the address packets to {addr} leave from",
                local.ip()
            )
        })?;
    let qdiscs = qdisc::of(&dev).map_err(|e| format!("{e}"))?;
    let packets = format!("packets to {addr}");
    let who = Timed {
        packets: &packets,
        lead_key,
    };
    let armed = qdisc::launch_times(&dev, &qdiscs, lead_ns, who)?;
    qdisc::arp_blocked(&dev, &qdiscs, *addr.ip())?;
    txtime::arm(fd, armed.clock.linux_clockid()).map_err(|e| {
        format!(
            "SO_TXTIME on {}: {e} (it needs Linux 4.19 or later, and CAP_NET_ADMIN for a clock other than CLOCK_MONOTONIC); use pacing = \"software\"",
            armed.clock.as_str()
        )
    })?;
    Ok(armed)
}

/// A blocking UDP socket connected to `addr` (a multicast group: TTL `ttl`, sent out of the
/// interface with address `mcast_if` when given).
fn socket_to(
    addr: SocketAddrV4,
    ttl: u8,
    mcast_if: Option<std::net::Ipv4Addr>,
) -> std::io::Result<OwnedFd> {
    let fd = inet::socket(inet::Kind::Datagram)?;
    inet::set_nonblocking(fd.as_fd(), false)?;
    // Best effort: the kernel caps it, and a smaller buffer only makes sends block sooner.
    let _ = rtdaq_netsys::sockopt::set_int(fd.as_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, SNDBUF);
    if addr.ip().is_multicast() {
        rtdaq_netsys::sockopt::set_int(
            fd.as_fd(),
            libc::IPPROTO_IP,
            libc::IP_MULTICAST_TTL,
            i32::from(ttl),
        )?;
        if let Some(ip) = mcast_if {
            let a = libc::in_addr {
                s_addr: u32::from_ne_bytes(ip.octets()),
            };
            rtdaq_netsys::sockopt::set(fd.as_fd(), libc::IPPROTO_IP, libc::IP_MULTICAST_IF, &a)?;
        }
    }
    inet::connect(fd.as_fd(), addr)?;
    Ok(fd)
}

/// The item descriptors of a data heap, encoded: timestamp, packets, data.
fn descriptors(flavour: Flavour) -> Vec<Vec<u8>> {
    use spead_tx::{Descriptor, ItemType};
    let imm = [(b'u', u32::from(flavour.heap_address_bits))];
    let all = [
        Descriptor {
            id: ITEM_TIMESTAMP,
            name: b"timestamp",
            description: b"receive time of the heap's first payload, ns since the Unix epoch",
            shape: &[],
            ty: ItemType::Format(&[(b'u', 64)]),
        },
        Descriptor {
            id: ITEM_PACKETS,
            name: b"packets",
            description: b"payloads in the heap",
            shape: &[],
            ty: ItemType::Format(&imm),
        },
        Descriptor {
            id: ITEM_DATA,
            name: b"data",
            description: b"the payloads back to back",
            shape: &[None],
            ty: ItemType::Format(&[(b'u', 8)]),
        },
    ];
    all.iter()
        .map(|d| {
            let mut buf = vec![0u8; d.len(flavour).unwrap_or(0)];
            let n = d.emit(flavour, &mut buf);
            buf.truncate(n);
            buf
        })
        .collect()
}
