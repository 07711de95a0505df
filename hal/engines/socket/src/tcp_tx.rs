//! TCP transmit queue: each connection of the queue is one lane.
//!
//! Connection `k` of the interface (accept order on a server, connect order on a client)
//! is written by TX queue `k mod n_tx`, as its lane `k / n_tx`; with one TX queue connection
//! `k` is lane `k` and the queue has `connections` lanes. The j-th record handed to `send`
//! since open (accepted or not) goes to lane `j % lanes` (see
//! [`SocketTx::lanes`](crate::SocketTx::lanes)), so each connection carries every
//! `lanes`-th record, in order. A record whose lane has no connection (not accepted yet,
//! or failed) counts as a `kernel` drop. Each lane's records of a burst go out in one
//! vectored `sendmsg` (`MSG_DONTWAIT | MSG_NOSIGNAL`), straight from the pool slots.
//!
//! A stream must never carry half a record followed by the next one, so when the kernel takes
//! only part of a record, the rest is **copied** into the connection's tail buffer (one
//! record, allocated at open) and finished before anything else is written to that
//! connection ([`TxStats::partial_copies`]). When the kernel takes nothing more
//! (`EAGAIN`) the queue waits for room at most `tx_stall` per `send` (all lanes together),
//! then counts that lane's records left as `ring_full`. A failed connection (peer closed,
//! reset) is closed and its records counted as `kernel`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rtdaq_config::model::TxQueue as TxQueueConfig;
use rtdaq_core::{BufferPool, DropReason, QueueCounters};

use crate::ctx::QueueRes;
use crate::stats::TxStats;
use crate::sys::consts::{EAGAIN, EINTR, ENOBUFS};
use crate::sys::{IoVecs, PollSet, Socket};
use crate::tcp_conn::{Acceptor, ConnTable};
use crate::tcp_rx::ACCEPT_EVERY;
use crate::tx_burst::TxBatch;
use crate::udp_tx::wait_writable;

/// One lane: the connection being written (none before it is taken over, or after it
/// failed).
struct TxConn {
    sock: Option<Socket>,
    /// The unsent rest of a record the kernel took only partly.
    tail: Box<[u8]>,
    tail_off: usize,
    tail_len: usize,
    /// The connection failed since the last housekeeping (its slot is to be freed).
    lost: bool,
}

/// What a TCP TX queue is built from.
pub(crate) struct TcpTxSetup<'a> {
    pub(crate) table: Arc<ConnTable>,
    pub(crate) acceptor: Option<Acceptor>,
    pub(crate) queue: usize,
    pub(crate) queues: usize,
    pub(crate) connections: u32,
    pub(crate) res: QueueRes<'a>,
    pub(crate) key: String,
    pub(crate) stall: Duration,
}

/// One TCP TX queue.
pub(crate) struct TcpTx<'a, const N: usize> {
    table: Arc<ConnTable>,
    acceptor: Option<Acceptor>,
    /// Table epoch of the last look for new connections.
    seen: u32,
    q: usize,
    nq: usize,
    /// One entry per lane (at least one).
    conns: Box<[TxConn]>,
    /// Lane of the next record handed to `send` (records so far, mod lanes).
    next: usize,
    sends: usize,
    pool: &'a BufferPool<'a>,
    counters: &'a QueueCounters,
    busy: bool,
    stall: Duration,
    iov: IoVecs,
    pollset: PollSet,
    stats: TxStats,
    key: String,
}

impl<'a, const N: usize> TcpTx<'a, N> {
    /// Builds the queue; allocates one tail buffer per lane. Cold path.
    pub(crate) fn new(s: TcpTxSetup<'a>, q: &TxQueueConfig) -> Self {
        let lanes = lanes(s.connections, s.queue, s.queues);
        let slot = s.res.pool.slot_size();
        TcpTx {
            table: s.table,
            acceptor: s.acceptor,
            seen: 0,
            q: s.queue,
            nq: s.queues,
            conns: (0..lanes)
                .map(|_| TxConn {
                    sock: None,
                    tail: vec![0u8; slot].into_boxed_slice(),
                    tail_off: 0,
                    tail_len: 0,
                    lost: false,
                })
                .collect(),
            next: 0,
            sends: 0,
            pool: s.res.pool,
            counters: s.res.counters,
            busy: q.busy_poll,
            stall: s.stall,
            iov: IoVecs::new(N.clamp(1, 1024)),
            pollset: PollSet::with_capacity(1),
            stats: TxStats::default(),
            key: s.key,
        }
    }

    /// Events so far.
    pub(crate) fn stats(&self) -> TxStats {
        let mut s = self.stats;
        if let Some(a) = &self.acceptor {
            s.accepted = a.accepted();
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

    /// Open connections.
    pub(crate) fn open_connections(&self) -> usize {
        self.conns.iter().filter(|c| c.sock.is_some()).count()
    }

    /// Lanes (connections this queue writes, open or not).
    pub(crate) fn lanes(&self) -> usize {
        self.conns.len()
    }

    /// The connection socket of `lane`, when open.
    pub(crate) fn lane_socket(&self, lane: usize) -> Option<&Socket> {
        self.conns.get(lane).and_then(|c| c.sock.as_ref())
    }

    /// Accepts pending peers (accepting queue, every [`ACCEPT_EVERY`] sends) and takes over
    /// new connections.
    #[inline]
    fn housekeeping(&mut self) {
        if let Some(a) = &mut self.acceptor {
            if self.sends % ACCEPT_EVERY == 0 {
                a.accept_pending();
            }
            self.sends = self.sends.wrapping_add(1);
        }
        let nq = self.nq.max(1);
        for (lane, c) in self.conns.iter_mut().enumerate() {
            if c.lost {
                // Without RX queues this side owns the connection: free its slot.
                c.lost = false;
                self.table.release((lane * nq + self.q) as u32, false);
            }
        }
        while let Some((k, sock)) = self.table.adopt(&mut self.seen, self.q, self.nq, false) {
            // Connection k is this queue's (k ≡ q mod nq) lane k / nq; a new peer in a slot
            // replaces the old one's socket.
            if let Some(c) = self.conns.get_mut(k as usize / self.nq.max(1)) {
                c.sock = Some(sock);
                c.tail_off = 0;
                c.tail_len = 0;
                self.stats.connections += 1;
            }
        }
    }

    /// See [`TxQueue::reserve`](rtdaq_core::traits::TxQueue::reserve).
    #[inline]
    pub(crate) fn reserve(&mut self, burst: &mut TxBatch<'a, N>, n: usize) -> usize {
        burst.reserve(self.pool, n)
    }

    /// Sends the records of `burst` by the lane rule and empties it: record `t` goes to lane
    /// `(next + t) % lanes`, where `next` counts every record handed to `send` before
    /// (accepted or not). Returns records accepted. Never allocates, never logs; waits at
    /// most `tx_stall`.
    pub(crate) fn send(&mut self, burst: &mut TxBatch<'a, N>) -> usize {
        self.housekeeping();
        let total = burst.len();
        if total == 0 {
            return 0;
        }
        let lanes = self.conns.len();
        let next = self.next;
        // The lane rule counts every record handed over, whatever happens to it below.
        self.next = (next + total % lanes) % lanes;
        let mut deadline = None;
        let mut sent = 0u64;
        let mut bytes = 0u64;
        let TcpTx {
            conns,
            counters,
            iov,
            pollset,
            stats,
            busy,
            stall,
            ..
        } = self;
        // Every lane, even one with no record in this burst: it may have a tail to finish.
        for first in 0..lanes {
            let w = Writer {
                burst,
                first,
                step: lanes,
                iov,
                pollset,
                stats,
                counters,
                busy: *busy,
                stall: *stall,
            };
            let (n, b) = w.run(&mut conns[(next + first) % lanes], &mut deadline);
            sent += n;
            bytes += b;
        }
        self.counters.record_rx_burst(sent, bytes);
        burst.clear();
        sent as usize
    }
}

/// Lanes of TX queue `q` of `nq` on an interface with `connections` connections: the
/// connections `k` with `k mod nq = q` (at least one lane, which stays without a connection
/// when there are fewer connections than queues).
pub(crate) fn lanes(connections: u32, q: usize, nq: usize) -> usize {
    (connections as usize)
        .saturating_sub(q)
        .div_ceil(nq.max(1))
        .max(1)
}

/// Writes the records `first, first + step, ...` of a burst to one connection.
struct Writer<'r, 'a, const N: usize> {
    burst: &'r TxBatch<'a, N>,
    first: usize,
    step: usize,
    iov: &'r mut IoVecs,
    pollset: &'r mut PollSet,
    stats: &'r mut TxStats,
    counters: &'r QueueCounters,
    busy: bool,
    stall: Duration,
}

impl<const N: usize> Writer<'_, '_, N> {
    /// Returns (records accepted, their bytes); counts the others as drops.
    fn run(self, conn: &mut TxConn, deadline: &mut Option<Instant>) -> (u64, u64) {
        let total = self.burst.len();
        let (mut sent, mut bytes) = (0u64, 0u64);
        let step = self.step;
        let mut r = self.first;
        let remaining = |r: usize| {
            if r < total {
                (total - r).div_ceil(step)
            } else {
                0
            }
        };
        loop {
            let Some(sock) = &conn.sock else {
                // No connection on this lane (yet, or any more).
                if r < total {
                    self.counters
                        .record_drops(DropReason::Kernel, remaining(r) as u64);
                }
                return (sent, bytes);
            };
            // Empty records need no bytes on the stream.
            while r < total && self.burst.data(r).is_empty() {
                sent += 1;
                r += step;
            }
            let res = if conn.tail_len > conn.tail_off {
                self.iov.send(
                    sock,
                    std::iter::once(&conn.tail[conn.tail_off..conn.tail_len]),
                )
            } else if r < total {
                self.iov.send(
                    sock,
                    (r..total).step_by(self.step).map(|t| self.burst.data(t)),
                )
            } else {
                return (sent, bytes);
            };
            let errno = match res {
                Ok(n) if n > 0 => {
                    if conn.tail_len > conn.tail_off {
                        conn.tail_off += n;
                        continue;
                    }
                    let mut n = n;
                    while r < total {
                        let d = self.burst.data(r);
                        if n < d.len() {
                            if n > 0 {
                                // Partly taken: keep the rest aside, finish it first.
                                let rest = &d[n..];
                                conn.tail[..rest.len()].copy_from_slice(rest);
                                conn.tail_off = 0;
                                conn.tail_len = rest.len();
                                self.stats.partial_copies += 1;
                                sent += 1;
                                bytes += d.len() as u64;
                                r += self.step;
                            }
                            break;
                        }
                        n -= d.len();
                        sent += 1;
                        bytes += d.len() as u64;
                        r += self.step;
                    }
                    continue;
                }
                Ok(_) => EAGAIN,
                Err(e) => e.raw_os_error().unwrap_or(0),
            };
            match errno {
                EINTR => {}
                EAGAIN | ENOBUFS => {
                    if r >= total {
                        // Only a tail from an earlier burst is pending: finish it later.
                        return (sent, bytes);
                    }
                    if !wait_writable(
                        sock,
                        self.pollset,
                        self.busy,
                        self.stall,
                        deadline,
                        self.stats,
                    ) {
                        self.counters
                            .record_drops(DropReason::RingFull, remaining(r) as u64);
                        return (sent, bytes);
                    }
                }
                errno => {
                    self.stats.errors += 1;
                    self.stats.last_errno = errno;
                    self.stats.closed += 1;
                    conn.sock = None;
                    conn.tail_len = 0;
                    conn.tail_off = 0;
                    conn.lost = true;
                }
            }
        }
    }
}

impl<const N: usize> Drop for TcpTx<'_, N> {
    fn drop(&mut self) {
        let s = self.stats();
        if s.connections > 0 {
            log::info!(
                "{}: wrote to {} connections ({} failed, {} partial records finished from the tail buffer)",
                self.key,
                s.connections,
                s.closed,
                s.partial_copies
            );
        }
        if s.errors > 0 {
            log::warn!(
                "{}: {} send errors, last errno {} (connection ids 1..)",
                self.key,
                s.errors,
                s.last_errno
            );
        }
    }
}
