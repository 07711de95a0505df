//! TCP receive queue: the byte streams of its connections cut into fixed-size records, each
//! record in one pool slot.
//!
//! Every connection has a current slot; one vectored read (`recvmsg`, `MSG_DONTWAIT`) fills
//! the rest of it and then whole fresh slots, so records land in place with no copy, and a
//! record cut across reads simply stays in its slot until complete. Complete records go to
//! the burst with `PacketMeta::conn` = the connection id (1..) and `rx_timestamp_ns` = the
//! `CLOCK_REALTIME` of the read that completed them.
//!
//! When no buffer is free the queue stops reading: TCP flow control then holds the sender
//! back, so nothing is lost (and nothing is counted). A peer that closes (or resets) is
//! counted in [`RxStats::closed`]; a record it left incomplete is counted as `truncated`; its
//! slot is freed for the next peer (same connection id), which this queue takes over.
//!
//! Sleeping queues wait up to `timeout_us` in `ppoll` on their connections (and, on the
//! accepting queue, the listener).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rtdaq_config::model::RxQueue as RxQueueConfig;
use rtdaq_core::{
    Buf, BufferPool, Burst, ConnId, DropReason, FlowId, Packet, PacketMeta, QueueCounters, QueueId,
};

use crate::ctx::QueueRes;
use crate::stats::RxStats;
use crate::sys::consts::{EAGAIN, EINTR};
use crate::sys::socket::Interest;
use crate::sys::{IoVecs, PollSet, Socket};
use crate::tcp_conn::{Acceptor, ConnTable};

/// Polls between two non-blocking `accept` tries while a server still waits for peers (a
/// sleeping queue also accepts as soon as `ppoll` reports the listener).
pub(crate) const ACCEPT_EVERY: usize = 64;

/// One connection being read.
struct Conn<'a> {
    sock: Option<Socket>,
    id: ConnId,
    cur: Option<Buf<'a>>,
    filled: usize,
}

/// What a TCP RX queue is built from.
pub(crate) struct TcpRxSetup<'a> {
    pub(crate) table: Arc<ConnTable>,
    pub(crate) acceptor: Option<Acceptor>,
    pub(crate) queue: usize,
    pub(crate) queues: usize,
    pub(crate) connections: u32,
    pub(crate) message: usize,
    pub(crate) res: QueueRes<'a>,
    pub(crate) key: String,
}

/// One TCP RX queue.
pub(crate) struct TcpRx<'a, const N: usize> {
    table: Arc<ConnTable>,
    acceptor: Option<Acceptor>,
    /// Table epoch of the last look for new connections.
    seen: u32,
    /// A connection closed since the last housekeeping.
    lost: bool,
    q: usize,
    nq: usize,
    conns: Vec<Conn<'a>>,
    pool: &'a BufferPool<'a>,
    counters: &'a QueueCounters,
    queue: QueueId,
    message: usize,
    batch: usize,
    busy: bool,
    timeout: Duration,
    iov: IoVecs,
    /// Free buffers for the next read; iovec `1 + t` is `cache[len - 1 - t]`.
    cache: Vec<Buf<'a>>,
    pollset: PollSet,
    rotate: usize,
    stats: RxStats,
    key: String,
}

impl<'a, const N: usize> TcpRx<'a, N> {
    /// Builds the queue. Cold path.
    pub(crate) fn new(s: TcpRxSetup<'a>, q: &RxQueueConfig) -> Self {
        let per_queue = (s.connections as usize).div_ceil(s.queues.max(1)).max(1);
        let batch = (q.batch_size as usize).clamp(1, N.max(1)).min(1023);
        TcpRx {
            table: s.table,
            acceptor: s.acceptor,
            seen: 0,
            lost: false,
            q: s.queue,
            nq: s.queues,
            conns: Vec::with_capacity(per_queue),
            pool: s.res.pool,
            counters: s.res.counters,
            queue: QueueId(s.queue as u16),
            message: s.message,
            batch,
            busy: q.busy_poll,
            timeout: Duration::from_micros(u64::from(q.timeout_us)),
            iov: IoVecs::new(batch + 1),
            cache: Vec::with_capacity(batch),
            pollset: PollSet::with_capacity(per_queue + 1),
            rotate: 0,
            stats: RxStats::default(),
            key: s.key,
        }
    }

    /// Bytes per record.
    pub(crate) fn message_size(&self) -> usize {
        self.message
    }

    /// Events so far.
    pub(crate) fn stats(&self) -> RxStats {
        let mut s = self.stats;
        if let Some(a) = &self.acceptor {
            s.accepted = a.accepted();
            s.reaccepted = a.reaccepted;
            s.rejected = a.rejected;
            s.accept_errors = a.errors;
            s.sockopt_errors = a.sockopt_errors;
        }
        s
    }

    /// The first open connection's socket, or the listener.
    pub(crate) fn socket(&self) -> Option<&Socket> {
        self.conns
            .iter()
            .find_map(|c| c.sock.as_ref())
            .or_else(|| self.acceptor.as_ref().and_then(Acceptor::listener))
    }

    /// Accepts pending peers (accepting queue: when `ready`, else every
    /// [`ACCEPT_EVERY`] polls, so a missing peer costs no syscall per poll) and takes over
    /// new connections.
    #[inline]
    fn housekeeping(&mut self, ready: bool) {
        if let Some(a) = &mut self.acceptor {
            if ready || self.rotate % ACCEPT_EVERY == 0 {
                a.accept_pending();
            }
        }
        if self.lost {
            // Peers that left: drop their entries (no allocation), making room for new ones.
            self.conns.retain(|c| c.sock.is_some());
            self.lost = false;
        }
        while self.conns.len() < self.conns.capacity() {
            let Some((k, sock)) = self.table.adopt(&mut self.seen, self.q, self.nq, true) else {
                break;
            };
            self.conns.push(Conn {
                sock: Some(sock),
                id: ConnId(k + 1),
                cur: None,
                filled: 0,
            });
            self.stats.connections += 1;
        }
    }

    /// Appends complete records to `burst`. Never allocates, never logs.
    pub(crate) fn poll(&mut self, burst: &mut Burst<'a, N>) -> usize {
        let before = burst.len();
        self.housekeeping(false);
        if burst.is_full() {
            return 0;
        }
        self.rotate = self.rotate.wrapping_add(1);
        let mut starved = false;
        // At most `batch_size` records per poll, like one `recvmmsg` on UDP.
        let cap = (before + self.batch).min(N);
        let read = self.read_all(burst, cap, &mut starved);
        if !read && !self.busy && !self.timeout.is_zero() {
            self.pollset.clear();
            if !starved {
                for c in &self.conns {
                    if let Some(s) = &c.sock {
                        self.pollset.push(s, Interest::Read);
                    }
                }
            }
            if let Some(l) = self.acceptor.as_ref().and_then(Acceptor::listener) {
                self.pollset.push(l, Interest::Read);
            }
            if let Ok(n) = self.pollset.wait(self.timeout) {
                if n > 0 {
                    self.housekeeping(true);
                    self.read_all(burst, cap, &mut starved);
                }
            }
        }
        burst.len() - before
    }

    /// One pass over the connections (rotating the start for fairness) until the burst holds
    /// `cap` packets; true when anything was read or closed. `starved`: no buffer was free.
    fn read_all(&mut self, burst: &mut Burst<'a, N>, cap: usize, starved: &mut bool) -> bool {
        let n = self.conns.len();
        if n == 0 {
            return false;
        }
        let mut any = false;
        let start = self.rotate % n;
        for t in 0..n {
            if burst.len() >= cap {
                break;
            }
            any |= self.read_conn((start + t) % n, burst, cap, starved);
        }
        any
    }

    /// Reads connection `c` until it has no more data or the burst holds `cap` packets.
    fn read_conn(
        &mut self,
        c: usize,
        burst: &mut Burst<'a, N>,
        cap: usize,
        starved: &mut bool,
    ) -> bool {
        let msg = self.message;
        let mut any = false;
        let TcpRx {
            conns,
            pool,
            counters,
            queue,
            iov,
            cache,
            stats,
            table,
            lost,
            ..
        } = self;
        let conn = &mut conns[c];
        loop {
            let Some(sock) = &conn.sock else { return any };
            let free = cap.saturating_sub(burst.len());
            if free == 0 {
                return any;
            }
            if conn.cur.is_none() {
                conn.cur = cache.pop().or_else(|| pool.get());
                conn.filled = 0;
            }
            let Some(cur) = &mut conn.cur else {
                *starved = true;
                return any;
            };
            // Fresh slots after the current one: up to the free burst room beyond it.
            let extra = (free - 1).min(iov.capacity() - 1).min(cache.capacity());
            while cache.len() < extra {
                match pool.get() {
                    Some(b) => cache.push(b),
                    None => break,
                }
            }
            let k = extra.min(cache.len());
            let len = cache.len();
            let first = &mut cur.slot_mut().unwrap_or_default()[conn.filled..msg];
            let offered = first.len() + k * msg;
            let res = iov.recv(
                sock,
                std::iter::once(first).chain(
                    cache[len - k..]
                        .iter_mut()
                        .rev()
                        .map(|b| &mut b.slot_mut().unwrap_or_default()[..msg]),
                ),
            );
            let got = match res {
                Ok(0) => {
                    // The peer closed: a record it left incomplete is lost.
                    if conn.filled > 0 {
                        counters.record_drop(DropReason::Truncated);
                    }
                    close(conn, stats, table, lost);
                    return true;
                }
                Ok(got) => got,
                Err(e) => match e.raw_os_error() {
                    Some(EAGAIN) => return any,
                    Some(EINTR) => continue,
                    errno => {
                        stats.errors += 1;
                        stats.last_errno = errno.unwrap_or(0);
                        if conn.filled > 0 {
                            counters.record_drop(DropReason::Truncated);
                        }
                        close(conn, stats, table, lost);
                        return true;
                    }
                },
            };
            any = true;
            let ts = now_ns();
            let meta = PacketMeta {
                len: msg as u32,
                flow: FlowId::NONE,
                queue: *queue,
                rx_timestamp_ns: ts,
                ts_source: rtdaq_core::TimestampSource::Poll,
                conn: conn.id,
                ..PacketMeta::default()
            };
            let need = msg - conn.filled;
            if got < need {
                conn.filled += got;
                return any;
            }
            let mut left = got - need;
            let mut packets = 0u64;
            if let Some(mut b) = conn.cur.take() {
                b.set_len(msg);
                let _ = burst.push(Packet::single(b, meta));
                packets += 1;
            }
            conn.filled = 0;
            while left >= msg {
                if let Some(mut b) = cache.pop() {
                    b.set_len(msg);
                    let _ = burst.push(Packet::single(b, meta));
                    packets += 1;
                }
                left -= msg;
            }
            if left > 0 {
                conn.cur = cache.pop();
                conn.filled = left;
            }
            counters.record_rx_burst(packets, packets * msg as u64);
            if got < offered {
                return any;
            }
        }
    }
}

/// Closes a connection (the peer left) and frees its slot for a new peer.
fn close(conn: &mut Conn<'_>, stats: &mut RxStats, table: &ConnTable, lost: &mut bool) {
    conn.sock = None;
    conn.cur = None;
    conn.filled = 0;
    stats.closed += 1;
    table.release(conn.id.0 - 1, true);
    *lost = true;
}

/// `CLOCK_REALTIME` in ns (vDSO; never allocates).
#[inline]
fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl<const N: usize> Drop for TcpRx<'_, N> {
    fn drop(&mut self) {
        let s = self.stats();
        if s.connections > 0 || s.accepted > 0 {
            log::info!(
                "{}: served {} connections, {} closed by the peer{}",
                self.key,
                s.connections,
                s.closed,
                if s.errors > 0 {
                    format!(", {} read errors (last errno {})", s.errors, s.last_errno)
                } else {
                    String::new()
                }
            );
        }
        if s.accept_errors > 0 || s.sockopt_errors > 0 {
            log::warn!(
                "{}: {} accept errors, {} engine.socket.sockopts failures on accepted sockets",
                self.key,
                s.accept_errors,
                s.sockopt_errors
            );
        }
    }
}
