//! UDP transmit queue: `sendmmsg` straight from pool slots, with optional GSO.
//!
//! Destination: the generator's `destination` when `[generator]` targets this queue, else the
//! interface's own address (`0.0.0.0` is sent to `127.0.0.1`); the runtime may change it with
//! [`SocketTx::set_destination`](crate::SocketTx::set_destination).
//!
//! `send` gathers the burst into one `sendmmsg` (several when it exceeds one call). With
//! `engine.socket.gso = true` (and a kernel with `UDP_SEGMENT`) runs of equal-size datagrams
//! become one message with a segment-size control message, which the kernel (or NIC) cuts
//! back into datagrams; `EIO`/`EINVAL` on such a message switches the queue to plain
//! `sendmmsg` for good ([`TxStats::gso_fallback`]). `MSG_DONTWAIT` always: when the kernel
//! takes no more (`EAGAIN`/`ENOBUFS`) the queue waits for room at most
//! [`SocketOptions::tx_stall`](crate::SocketOptions::tx_stall) per `send`, then counts the rest
//! of the burst as `ring_full` drops (the kernel's transmit queue is the ring that was full).
//! `EMSGSIZE` → `too_large`; any other error → `kernel`.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use rtdaq_config::model::{SocketUri, TxQueue as TxQueueConfig};
use rtdaq_core::{BufferPool, DropReason, QueueCounters};

use crate::ctx::{OpenCtx, QueueRes};
use crate::error::{explain_bind, Result, SocketError};
use crate::sockopt::{apply_sockopts, enable_feature, set_buffer, BufDir};
use crate::stats::TxStats;
use crate::sys::consts::{
    EAGAIN, EINTR, EINVAL, EIO, EMSGSIZE, ENOBUFS, MSG_DONTWAIT, SOL_UDP, UDP_SEGMENT,
};
use crate::sys::socket::Interest;
use crate::sys::{PollSet, SendBatch, Socket};
use crate::tx_burst::TxBatch;

/// Most datagrams in one GSO message (`UDP_MAX_SEGMENTS` of older kernels).
pub const GSO_MAX_SEGMENTS: usize = 64;
/// Most payload bytes in one GSO message (the largest IPv4 UDP payload).
const GSO_MAX_BYTES: usize = 65_507;

/// One UDP TX queue.
pub(crate) struct UdpTx<'a, const N: usize> {
    sock: Socket,
    local: SocketAddrV4,
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
}

impl<'a, const N: usize> UdpTx<'a, N> {
    /// Opens TX queue `j` of UDP interface `i`. Cold path.
    pub(crate) fn open(
        ctx: &mut OpenCtx<'_, 'a>,
        i: usize,
        j: usize,
        uri: SocketUri,
        q: &TxQueueConfig,
        res: QueueRes<'a>,
    ) -> Result<Self> {
        let key = OpenCtx::addr_key(i);
        let sock = Socket::udp().map_err(|source| SocketError::Create {
            key: key.clone(),
            uri: uri.to_string(),
            source,
        })?;
        let sndbuf = match ctx.sock.sndbuf {
            Some(b) => Some(set_buffer(
                &sock,
                BufDir::Snd,
                b,
                ctx.opts.force_buffers,
                &mut ctx.warned_snd,
            )?),
            None => None,
        };
        let gso = ctx.sock.gso
            && enable_feature(
                &sock,
                SOL_UDP,
                UDP_SEGMENT,
                0,
                "UDP_SEGMENT (GSO)",
                "engine.socket.gso",
            )?;
        apply_sockopts(&sock, &ctx.sock.sockopts)?;
        if !uri.ip.is_unspecified() {
            let addr = SocketAddrV4::new(uri.ip, 0);
            sock.bind(&addr).map_err(|source| SocketError::Bind {
                detail: explain_bind(&source, &key, &uri, false),
                key: key.clone(),
                uri: uri.to_string(),
                source,
            })?;
        }
        let local = sock.local_addr().map_err(|source| SocketError::Query {
            key: key.clone(),
            detail: format!("getsockname failed ({source})"),
            source,
        })?;
        let target = ctx
            .cfg
            .generator
            .as_ref()
            .filter(|g| g.interface.0 == i && usize::from(g.tx_queue.0) == j)
            .and_then(|g| g.destination)
            .unwrap_or(uri);
        let ip = if target.ip.is_unspecified() {
            Ipv4Addr::LOCALHOST
        } else {
            target.ip
        };
        let dest = SocketAddrV4::new(ip, target.port);
        let cap = N.max(1);
        let mut mmsg = SendBatch::new(cap.min(1024), cap);
        mmsg.set_dest(Some(dest));
        let mut pollset = PollSet::with_capacity(1);
        pollset.push(&sock, Interest::Write);
        if q.batch_size as usize > N {
            log::warn!(
                "interfaces[{i}].tx_queues[{j}].batch_size = {} exceeds the burst capacity {N} of this build",
                q.batch_size
            );
        }
        Ok(UdpTx {
            sock,
            local,
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

    /// The local (source) address.
    pub(crate) fn local_addr(&self) -> SocketAddrV4 {
        self.local
    }

    /// The socket.
    pub(crate) fn socket(&self) -> &Socket {
        &self.sock
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
    /// Never allocates, never logs; waits at most `tx_stall`.
    pub(crate) fn send(&mut self, burst: &mut TxBatch<'a, N>) -> usize {
        let total = burst.len();
        if total == 0 {
            return 0;
        }
        let UdpTx {
            sock,
            counters,
            busy,
            stall,
            gso,
            mmsg,
            pollset,
            stats,
            ..
        } = self;
        let mut sent = 0u64;
        let mut bytes = 0u64;
        let mut deadline: Option<Instant> = None;
        let mut pos = 0;
        'build: while pos < total {
            let mut b = mmsg.builder();
            let mut end = pos;
            while end < total {
                let size = burst.data(end).len();
                let mut k = 1;
                if *gso && size > 0 {
                    let max_k = GSO_MAX_SEGMENTS.min(GSO_MAX_BYTES / size);
                    while end + k < total && k < max_k && burst.data(end + k).len() == size {
                        k += 1;
                    }
                }
                let seg = (k > 1).then_some(size as u16);
                if !b.begin(seg) {
                    break;
                }
                for t in end..end + k {
                    // Cannot fail: the batch has an iovec per burst slot.
                    b.push(burst.data(t));
                }
                end += k;
            }
            let nmsg = b.messages();
            let mut first = 0;
            let mut p = pos;
            while first < nmsg {
                let d = b.buffers(first);
                let dropped = match b.send(sock, first, MSG_DONTWAIT) {
                    Ok(n) if n > 0 => {
                        for m in first..first + n {
                            let d = b.buffers(m);
                            if d > 1 {
                                stats.gso_messages += 1;
                            }
                            for t in p..p + d {
                                bytes += burst.data(t).len() as u64;
                            }
                            sent += d as u64;
                            p += d;
                        }
                        first += n;
                        continue;
                    }
                    Ok(_) => EAGAIN,
                    Err(e) => e.raw_os_error().unwrap_or(0),
                };
                match dropped {
                    EINTR => {}
                    EAGAIN | ENOBUFS => {
                        if !wait_writable(sock, pollset, *busy, *stall, &mut deadline, stats) {
                            counters.record_drops(DropReason::RingFull, (total - p) as u64);
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
                        first += 1;
                    }
                    errno => {
                        stats.errors += 1;
                        stats.last_errno = errno;
                        counters.record_drops(DropReason::Kernel, d as u64);
                        p += d;
                        first += 1;
                    }
                }
            }
            pos = end;
        }
        counters.record_rx_burst(sent, bytes);
        burst.clear();
        sent as usize
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
                self.local,
                self.dest
            );
        }
        if self.stats.errors > 0 {
            log::warn!(
                "{} ({} -> {}): {} send errors, last errno {}",
                self.key,
                self.local,
                self.dest,
                self.stats.errors,
                self.stats.last_errno
            );
        }
    }
}
