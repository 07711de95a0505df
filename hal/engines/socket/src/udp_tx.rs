//! UDP transmit queue: `sendmmsg` straight from pool slots, with optional GSO.
//!
//! Destination: the generator's `destination` when `[generator]` targets this queue, else the
//! interface's own address (`0.0.0.0` is sent to `127.0.0.1`); the runtime may change it with
//! [`SocketTx::set_destination`](crate::SocketTx::set_destination).
//!
//! **Lanes:** the queue has one socket per lane, each bound to `ip:0` of the interface (so each
//! has its own ephemeral source port, and `SO_REUSEPORT` receivers hash lanes to queues), all
//! sending to the same destination. There are `generator.streams` lanes when `[generator]`
//! targets this queue, else one. The j-th packet handed to `send` since open (accepted or
//! not) goes out on lane `j % lanes` (see [`SocketTx::lanes`](crate::SocketTx::lanes)).
//!
//! `send` gathers each lane's packets of the burst, in burst order, into one `sendmmsg`
//! (several when they exceed one call) on that lane's socket; lanes are sent one after the
//! other. With `engine.socket.gso = true` (and a kernel with `UDP_SEGMENT`) runs of
//! consecutive equal-size datagrams of one lane become one message with a segment-size
//! control message, which the kernel (or NIC) cuts back into datagrams; `EIO`/`EINVAL` on
//! such a message switches the queue to plain `sendmmsg` for good
//! ([`TxStats::gso_fallback`]). `MSG_DONTWAIT` always: when the kernel takes no more
//! (`EAGAIN`/`ENOBUFS`) the queue waits for room at most
//! [`SocketOptions::tx_stall`](crate::SocketOptions::tx_stall) per `send` (all lanes
//! together), then counts the rest of that lane's packets as `ring_full` drops (the
//! kernel's transmit queue is the ring that was full). `EMSGSIZE` → `too_large`; any other
//! error → `kernel`.

use rtdaq_netsys::OsError;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use rtdaq_config::model::{SocketUri, TxQueue as TxQueueConfig};
use rtdaq_core::{BufferPool, DropReason, QueueCounters};

use crate::ctx::{OpenCtx, QueueRes};
use crate::error::{explain_bind, Result, SocketError};
use crate::sockopt::{apply_sockopts, enable_feature, set_buffer, BufDir};
use crate::stats::TxStats;
use crate::sys::consts::{
    EAGAIN, EINTR, EINVAL, EIO, EMSGSIZE, ENOBUFS, IPPROTO_IP, IP_MULTICAST_LOOP, IP_MULTICAST_TTL,
    MSG_DONTWAIT, SOL_UDP, UDP_SEGMENT,
};
use crate::sys::socket::Interest;
use crate::sys::{PollSet, SendBatch, Socket};
use crate::tx_burst::TxBatch;
use rtdaq_config::model::GenPacing;
use rtdaq_core::traits::LaunchClock;
use rtdaq_netsys::txtime::{self, Dropped, ErrQueue};
use rtdaq_platform::qdisc::{self, LaunchQdisc};
use std::os::fd::AsFd;

/// Most datagrams in one GSO message (`UDP_MAX_SEGMENTS` of older kernels).
pub const GSO_MAX_SEGMENTS: usize = 64;
/// Receive buffer of a socket with launch times, which holds the qdisc's drop reports (a
/// copy of each dropped datagram) until the queue reads them.
const ERRQ_RCVBUF: i32 = 8 << 20;
/// Most payload bytes in one GSO message (the largest IPv4 UDP payload).
const GSO_MAX_BYTES: usize = 65_507;

/// One UDP TX queue: one socket per lane.
pub(crate) struct UdpTx<'a, const N: usize> {
    /// One socket per lane (at least one), each with its own source port.
    socks: Box<[Socket]>,
    /// The local address of each lane's socket.
    locals: Box<[SocketAddrV4]>,
    /// Lane of the next packet handed to `send` (packets so far, mod lanes).
    next: usize,
    dest: SocketAddrV4,
    pool: &'a BufferPool<'a>,
    counters: &'a QueueCounters,
    busy: bool,
    stall: Duration,
    gso: bool,
    mmsg: SendBatch,
    pollset: PollSet,
    sndbuf: Option<usize>,
    stats: TxStats,
    key: String,
    /// `generator.pacing = "txtime"`: the launch-time clock, and the error queue reader
    /// that learns of the datagrams the qdisc dropped ([`crate::txtime`]).
    launch: Option<LaunchClock>,
    /// The qdiscs that keep the launch times (asked at the end what they still hold).
    qdisc: Option<LaunchQdisc>,
    errq: Option<ErrQueue>,
    /// The qdisc's drops reported so far (already counted as `kernel` drops).
    txdrops: Dropped,
    /// Bytes the kernel still held at [`settle`](Self::settle) (`SIOCOUTQ`, all lanes).
    unsent_at_end: u64,
}

/// A lane socket of a multicast interface: out of `multicast_interface`, with its TTL and
/// loopback.
fn multicast_sender(sock: &Socket, m: &rtdaq_config::model::Multicast, i: usize) -> Result<()> {
    let err = |what: &str, key: &str| {
        let (what, key) = (what.to_owned(), format!("interfaces[{i}].{key}"));
        move |source: std::io::Error| {
            SocketError::SetOption(OsError::new(
                key,
                format!("setsockopt({what}) failed ({source})"),
                source,
            ))
        }
    };
    if !m.interface.is_unspecified() {
        sock.set_multicast_if(m.interface).map_err(err(
            "IP_MULTICAST_IF: the address of the interface to send from",
            "multicast_interface",
        ))?;
    }
    sock.set_int(IPPROTO_IP, IP_MULTICAST_TTL, i32::from(m.ttl))
        .map_err(err("IP_MULTICAST_TTL", "multicast_ttl"))?;
    sock.set_int(IPPROTO_IP, IP_MULTICAST_LOOP, i32::from(m.loopback))
        .map_err(err("IP_MULTICAST_LOOP", "multicast_loop"))
}

impl<'a, const N: usize> UdpTx<'a, N> {
    /// Opens TX queue `j` of UDP interface `i`: one socket per lane. Cold path.
    pub(crate) fn open(
        ctx: &mut OpenCtx<'_, 'a>,
        i: usize,
        j: usize,
        uri: SocketUri,
        q: &TxQueueConfig,
        res: QueueRes<'a>,
    ) -> Result<Self> {
        let key = OpenCtx::addr_key(i);
        let generator = ctx
            .cfg
            .generator
            .as_ref()
            .filter(|g| g.interface.0 == i && usize::from(g.tx_queue.0) == j);
        let lanes = generator.map_or(1, |g| g.streams.max(1) as usize);
        let mut socks = Vec::with_capacity(lanes);
        let mut locals = Vec::with_capacity(lanes);
        let mut sndbuf = None;
        let mut gso = ctx.sock.gso;
        for _ in 0..lanes {
            let sock = Socket::udp().map_err(|source| SocketError::Create {
                key: if lanes > 1 {
                    "generator.streams".to_owned()
                } else {
                    key.clone()
                },
                uri: uri.to_string(),
                source,
            })?;
            if let Some(b) = ctx.sock.sndbuf {
                sndbuf = Some(set_buffer(
                    &sock,
                    BufDir::Snd,
                    b,
                    ctx.opts.force_buffers,
                    &mut ctx.warned_snd,
                )?);
            }
            gso = gso
                && enable_feature(
                    &sock,
                    SOL_UDP,
                    UDP_SEGMENT,
                    0,
                    "UDP_SEGMENT (GSO)",
                    "engine.socket.gso",
                )?;
            apply_sockopts(&sock, &ctx.sock.sockopts)?;
            let multicast = ctx.cfg.interfaces[i].multicast.as_ref();
            if let Some(m) = multicast {
                multicast_sender(&sock, m, i)?;
            }
            // Port 0: every lane gets its own ephemeral source port. A multicast interface
            // sends from its local address (the group is the destination, never a source).
            let bind_ip = multicast.map_or(uri.ip, |m| m.interface);
            let addr = SocketAddrV4::new(bind_ip, 0);
            sock.bind(&addr).map_err(|source| SocketError::Bind {
                detail: explain_bind(&source, &key, &uri, false),
                key: key.clone(),
                uri: uri.to_string(),
                source,
            })?;
            let local = sock.local_addr().map_err(|source| {
                SocketError::Query(OsError::new(
                    key.clone(),
                    format!("getsockname failed ({source})"),
                    source,
                ))
            })?;
            socks.push(sock);
            locals.push(local);
        }
        let target = generator.and_then(|g| g.destination).unwrap_or(uri);
        let ip = if target.ip.is_unspecified() {
            Ipv4Addr::LOCALHOST
        } else {
            target.ip
        };
        let dest = SocketAddrV4::new(ip, target.port);
        let launch = match generator.map(|g| g.pacing) {
            Some(GenPacing::Txtime { lead_us }) => {
                let armed = crate::txtime::arm(&socks, dest, u64::from(lead_us) * 1000)?;
                log::info!(
                    "interfaces[{i}].tx_queues[{j}]: launch times on {} ({}), {lead_us} µs ahead",
                    armed.clock.as_str(),
                    armed.by
                );
                // Each datagram is its own message with its own time: no GSO.
                gso = false;
                // The qdisc's drop reports wait in the receive buffer until the next send:
                // room for many (best effort; the kernel caps SO_RCVBUF at rmem_max).
                for s in &socks {
                    if s.set_int(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, ERRQ_RCVBUF)
                        .is_err()
                    {
                        let _ = s.set_int(libc::SOL_SOCKET, libc::SO_RCVBUF, ERRQ_RCVBUF);
                    }
                }
                Some(armed)
            }
            Some(GenPacing::Software) => {
                crate::txtime::check_untimed(dest, "generator.pacing")?;
                None
            }
            // "nic" is refused on this engine by the config check.
            Some(GenPacing::Nic) | None => None,
        };
        let cap = N.max(1);
        let mut mmsg = SendBatch::new(cap.min(1024), cap);
        mmsg.set_dest(Some(dest));
        let pollset = PollSet::with_capacity(1);
        if q.batch_size as usize > N {
            log::warn!(
                "interfaces[{i}].tx_queues[{j}].batch_size = {} exceeds the burst capacity {N} of this build",
                q.batch_size
            );
        }
        if lanes > 1 {
            log::info!(
                "interfaces[{i}].tx_queues[{j}]: {lanes} lanes (generator.streams), source ports {}",
                locals
                    .iter()
                    .map(|a| a.port().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        Ok(UdpTx {
            socks: socks.into_boxed_slice(),
            locals: locals.into_boxed_slice(),
            next: 0,
            dest,
            pool: res.pool,
            counters: res.counters,
            busy: q.busy_poll,
            stall: ctx.opts.tx_stall,
            gso,
            mmsg,
            pollset,
            sndbuf,
            stats: TxStats::default(),
            key: format!("interfaces[{i}].tx_queues[{j}]"),
            errq: launch.as_ref().map(|_| ErrQueue::new()),
            launch: launch.as_ref().map(|l| l.clock),
            qdisc: launch,
            txdrops: Dropped::default(),
            unsent_at_end: 0,
        })
    }

    /// Where datagrams go.
    pub(crate) fn destination(&self) -> SocketAddrV4 {
        self.dest
    }

    /// Changes where datagrams go. Cold path.
    pub(crate) fn set_destination(&mut self, dest: SocketAddrV4) {
        self.dest = dest;
        self.mmsg.set_dest(Some(dest));
    }

    /// The local (source) address of lane 0.
    pub(crate) fn local_addr(&self) -> SocketAddrV4 {
        self.locals[0]
    }

    /// The local (source) address of `lane`.
    pub(crate) fn lane_addr(&self, lane: usize) -> Option<SocketAddrV4> {
        self.locals.get(lane).copied()
    }

    /// Lanes (sockets) of the queue.
    pub(crate) fn lanes(&self) -> usize {
        self.socks.len()
    }

    /// The socket of lane 0.
    pub(crate) fn socket(&self) -> &Socket {
        &self.socks[0]
    }

    /// Effective `SO_SNDBUF` (when `sndbuf` was set).
    pub(crate) fn sndbuf(&self) -> Option<usize> {
        self.sndbuf
    }

    /// GSO in use.
    pub(crate) fn gso(&self) -> bool {
        self.gso
    }

    /// Events so far.
    pub(crate) fn stats(&self) -> TxStats {
        self.stats
    }

    /// See [`TxQueue::reserve`](rtdaq_core::traits::TxQueue::reserve).
    #[inline]
    pub(crate) fn reserve(&mut self, burst: &mut TxBatch<'a, N>, n: usize) -> usize {
        burst.reserve(self.pool, n)
    }

    /// Sends the burst (see the module docs) and empties it; returns datagrams accepted.
    /// Packet `t` of the burst goes out on lane `(next + t) % lanes`, where `next` counts
    /// every packet handed to `send` before (accepted or not). Never allocates, never logs;
    /// waits at most `tx_stall`.
    pub(crate) fn send(&mut self, burst: &mut TxBatch<'a, N>) -> usize {
        self.send_timed(burst, None)
    }

    /// The launch-time clock (`generator.pacing = "txtime"`, armed at open).
    pub(crate) fn launch_clock(&self) -> Option<LaunchClock> {
        self.launch
    }

    /// [`send`](Self::send) with packet `t` leaving at `at_ns[t]` (see
    /// [`TimedTx`](rtdaq_core::traits::TimedTx)); first the qdisc's drop reports are read
    /// and counted. Without launch times armed: `send`. Never allocates, never logs.
    pub(crate) fn send_at(&mut self, burst: &mut TxBatch<'a, N>, at_ns: &[u64]) -> usize {
        if self.errq.is_none() {
            return self.send_timed(burst, None);
        }
        self.collect_reports();
        let times = (at_ns.len() >= burst.len()).then_some(at_ns);
        self.send_timed(burst, times)
    }

    /// Reads the qdisc's drop reports waiting on the sockets' error queues and counts the
    /// new ones as `kernel` drops. Never blocks, never allocates.
    fn collect_reports(&mut self) {
        let Some(errq) = self.errq.as_mut() else {
            return;
        };
        let before = self.txdrops;
        for s in self.socks.iter() {
            errq.drain(s.as_fd(), &mut self.txdrops);
        }
        let (inv, missed) = (
            self.txdrops.invalid - before.invalid,
            self.txdrops.missed - before.missed,
        );
        if inv + missed > 0 {
            self.counters.record_drops(DropReason::Kernel, inv + missed);
            self.stats.txtime_invalid = self.txdrops.invalid;
            self.stats.txtime_missed = self.txdrops.missed;
        }
    }

    /// See [`TimedTx::settle`](rtdaq_core::traits::TimedTx::settle): the sockets' unsent
    /// bytes (`SIOCOUTQ`) tell whether the kernel still holds any of their datagrams; if it
    /// does after `wait_ns`, the launch-time qdiscs' queue lengths say how many (at least
    /// one). Cold path.
    pub(crate) fn settle(&mut self, wait_ns: u64) -> u64 {
        if self.qdisc.is_none() {
            return 0;
        }
        let fds: Vec<_> = self.socks.iter().map(|s| s.as_fd()).collect();
        let left = txtime::wait_unsent(&fds, Duration::from_nanos(wait_ns));
        // The qdisc's reports first: a packet it dropped is counted there, not as held.
        self.collect_reports();
        let held = if left == 0 {
            0
        } else {
            self.qdisc
                .as_ref()
                .map_or(0, |q| qdisc::held(q).unwrap_or(0))
                .max(1)
        };
        self.unsent_at_end = left;
        if held > 0 {
            self.counters.record_drops(DropReason::Kernel, held);
            self.stats.txtime_held += held;
        }
        held
    }

    /// `send`, each packet with its launch time when `at_ns` is given.
    fn send_timed(&mut self, burst: &mut TxBatch<'a, N>, at_ns: Option<&[u64]>) -> usize {
        let total = burst.len();
        if total == 0 {
            return 0;
        }
        let lanes = self.socks.len();
        let next = self.next;
        // The lane rule counts every packet handed over, whatever happens to it below.
        self.next = (next + total % lanes) % lanes;
        let mut deadline: Option<Instant> = None;
        let (mut sent, mut bytes) = (0u64, 0u64);
        for first in 0..lanes.min(total) {
            let lane = (next + first) % lanes;
            let (n, b) = self.send_lane(lane, burst, first, at_ns, &mut deadline);
            sent += n;
            bytes += b;
        }
        self.counters.record_rx_burst(sent, bytes);
        burst.clear();
        sent as usize
    }

    /// Sends the packets `first, first + lanes, ...` of `burst`, in order, on `lane`'s
    /// socket; returns (datagrams accepted, their bytes) and counts the others as drops.
    fn send_lane(
        &mut self,
        lane: usize,
        burst: &TxBatch<'a, N>,
        first: usize,
        times: Option<&[u64]>,
        deadline: &mut Option<Instant>,
    ) -> (u64, u64) {
        let step = self.socks.len();
        let cnt = (burst.len() - first).div_ceil(step);
        // Burst index of the lane's `s`-th packet.
        let at = |s: usize| first + s * step;
        let UdpTx {
            socks,
            counters,
            busy,
            stall,
            gso,
            mmsg,
            pollset,
            stats,
            ..
        } = self;
        let sock = &socks[lane];
        let mut sent = 0u64;
        let mut bytes = 0u64;
        let mut pos = 0;
        'build: while pos < cnt {
            let mut b = mmsg.builder();
            let mut end = pos;
            while end < cnt {
                let size = burst.data(at(end)).len();
                let mut k = 1;
                if *gso && size > 0 {
                    let max_k = GSO_MAX_SEGMENTS.min(GSO_MAX_BYTES / size);
                    while end + k < cnt && k < max_k && burst.data(at(end + k)).len() == size {
                        k += 1;
                    }
                }
                let seg = (k > 1).then_some(size as u16);
                let begun = match times {
                    // `gso` is off with launch times: k = 1.
                    Some(t) => b.begin_at(t[at(end)]),
                    None => b.begin(seg),
                };
                if !begun {
                    break;
                }
                for s in end..end + k {
                    // Cannot fail: the batch has an iovec per burst slot.
                    b.push(burst.data(at(s)));
                }
                end += k;
            }
            let nmsg = b.messages();
            let mut m0 = 0;
            let mut p = pos;
            while m0 < nmsg {
                let d = b.buffers(m0);
                let dropped = match b.send(sock, m0, MSG_DONTWAIT) {
                    Ok(n) if n > 0 => {
                        for m in m0..m0 + n {
                            let d = b.buffers(m);
                            if d > 1 {
                                stats.gso_messages += 1;
                            }
                            for s in p..p + d {
                                bytes += burst.data(at(s)).len() as u64;
                            }
                            sent += d as u64;
                            p += d;
                        }
                        m0 += n;
                        continue;
                    }
                    Ok(_) => EAGAIN,
                    Err(e) => e.raw_os_error().unwrap_or(0),
                };
                match dropped {
                    EINTR => {}
                    EAGAIN | ENOBUFS => {
                        if !wait_writable(sock, pollset, *busy, *stall, deadline, stats) {
                            counters.record_drops(DropReason::RingFull, (cnt - p) as u64);
                            break 'build;
                        }
                    }
                    EIO | EINVAL if d > 1 => {
                        *gso = false;
                        stats.gso_fallback = true;
                        pos = p;
                        continue 'build;
                    }
                    EMSGSIZE => {
                        counters.record_drops(DropReason::TooLarge, d as u64);
                        p += d;
                        m0 += 1;
                    }
                    errno => {
                        stats.errors += 1;
                        stats.last_errno = errno;
                        counters.record_drops(DropReason::Kernel, d as u64);
                        p += d;
                        m0 += 1;
                    }
                }
            }
            pos = end;
        }
        (sent, bytes)
    }
}

/// Waits for room to send until the per-`send` deadline (set on the first stall); false when
/// it passed. Busy-polling queues spin instead of sleeping. Never allocates.
#[inline]
pub(crate) fn wait_writable(
    sock: &Socket,
    pollset: &mut PollSet,
    busy: bool,
    stall: Duration,
    deadline: &mut Option<Instant>,
    stats: &mut TxStats,
) -> bool {
    let now = Instant::now();
    let end = *deadline.get_or_insert_with(|| {
        stats.stalls += 1;
        now + stall
    });
    if now >= end {
        return false;
    }
    if !busy {
        pollset.clear();
        pollset.push(sock, Interest::Write);
        let _ = pollset.wait(end - now);
    }
    true
}

impl<const N: usize> Drop for UdpTx<'_, N> {
    fn drop(&mut self) {
        if self.stats.gso_fallback {
            log::warn!(
                "{} ({} -> {}): the kernel refused UDP GSO; fell back to plain sendmmsg (set engine.socket.gso = false to skip the attempt)",
                self.key,
                self.locals[0],
                self.dest
            );
        }
        if self.txdrops.invalid + self.txdrops.missed > 0 {
            log::warn!(
                "{} ({} -> {}): the qdisc dropped {} datagrams whose launch time had passed when they reached it and {} it could not send in time (counted as kernel drops): raise generator.txtime_lead_us (the sender fell behind) or the etf qdisc's delta (the kernel's timer was late)",
                self.key,
                self.locals[0],
                self.dest,
                self.txdrops.invalid,
                self.txdrops.missed
            );
        }
        if self.stats.txtime_held > 0 {
            log::warn!(
                "{} ({} -> {}): the kernel still held {} datagrams ({} bytes unsent) after their launch times had passed (counted as kernel drops: they leave late or never): the qdisc ({}) did not hand them to the device; check that nothing above it throttles (tc -s qdisc show dev {}) and that its clock is the one the launch times are on; if the qdisc holds none, they wait for the next hop's link address (ip neigh show)",
                self.key,
                self.locals[0],
                self.dest,
                self.stats.txtime_held,
                self.unsent_at_end,
                self.qdisc.as_ref().map_or("", |q| q.by.as_str()),
                self.qdisc.as_ref().map_or("", |q| q.dev.as_str()),
            );
        }
        if self.stats.errors > 0 {
            log::warn!(
                "{} ({} -> {}): {} send errors, last errno {}",
                self.key,
                self.locals[0],
                self.dest,
                self.stats.errors,
                self.stats.last_errno
            );
        }
    }
}
