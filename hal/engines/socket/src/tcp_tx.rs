//! TCP transmit queue: records written round robin over the queue's connections.
//!
//! Record `r` of a burst goes to open connection `(rr + r) mod m` (`rr` carries over between
//! bursts), so a generator's records are spread evenly. Each connection's records go out in
//! one vectored `sendmsg` (`MSG_DONTWAIT | MSG_NOSIGNAL`), straight from the pool slots.
//!
//! A stream must never carry half a record followed by the next one, so when the kernel takes
//! only part of a record, the rest is **copied** into the connection's tail buffer (one
//! record, allocated at open) and finished before anything else is written to that
//! connection ([`TxStats::partial_copies`]). When the kernel takes nothing more
//! (`EAGAIN`) the queue waits for room at most `tx_stall` per `send`, then counts the
//! records left as `ring_full`. A failed connection (peer closed, reset) is closed and its
//! records counted as `kernel`; with no open connection every record is `kernel`.

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

/// One connection being written.
struct TxConn {
    sock: Option<Socket>,
    /// The unsent rest of a record the kernel took only partly.
    tail: Box<[u8]>,
    tail_off: usize,
    tail_len: usize,
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
    seen: u32,
    q: usize,
    nq: usize,
    conns: Vec<TxConn>,
    spare_tails: Vec<Box<[u8]>>,
    rr: usize,
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
    /// Builds the queue; allocates one tail buffer per connection it may serve. Cold path.
    pub(crate) fn new(s: TcpTxSetup<'a>, q: &TxQueueConfig) -> Self {
        let per_queue = (s.connections as usize).div_ceil(s.queues.max(1)).max(1);
        let slot = s.res.pool.slot_size();
        TcpTx {
            table: s.table,
            acceptor: s.acceptor,
            seen: 0,
            q: s.queue,
            nq: s.queues,
            conns: Vec::with_capacity(per_queue),
            spare_tails: (0..per_queue)
                .map(|_| vec![0u8; slot].into_boxed_slice())
                .collect(),
            rr: 0,
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
        while self.conns.len() < self.conns.capacity() {
            let Some((_, sock)) = self.table.adopt(&mut self.seen, self.q, self.nq, false) else {
                break;
            };
            let Some(tail) = self.spare_tails.pop() else {
                break;
            };
            self.conns.push(TxConn {
                sock: Some(sock),
                tail,
                tail_off: 0,
                tail_len: 0,
            });
            self.stats.connections += 1;
        }
    }

    /// See [`TxQueue::reserve`](rtdaq_core::traits::TxQueue::reserve).
    #[inline]
    pub(crate) fn reserve(&mut self, burst: &mut TxBatch<'a, N>, n: usize) -> usize {
        burst.reserve(self.pool, n)
    }

    /// Sends the records of `burst` round robin and empties it; returns records accepted.
    /// Never allocates, never logs; waits at most `tx_stall`.
    pub(crate) fn send(&mut self, burst: &mut TxBatch<'a, N>) -> usize {
        self.housekeeping();
        let total = burst.len();
        if total == 0 {
            return 0;
        }
        let m = self.open_connections();
        if m == 0 {
            self.counters.record_drops(DropReason::Kernel, total as u64);
            burst.clear();
            return 0;
        }
        let mut deadline = None;
        let mut sent = 0u64;
        let mut bytes = 0u64;
        let rr = self.rr % m;
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
        for (o, conn) in conns.iter_mut().filter(|c| c.sock.is_some()).enumerate() {
            let first = (o + m - rr) % m;
            let w = Writer {
                burst,
                first,
                step: m,
                iov,
                pollset,
                stats,
                counters,
                busy: *busy,
                stall: *stall,
            };
            let (n, b) = w.run(conn, &mut deadline);
            sent += n;
            bytes += b;
        }
        self.rr = (rr + total) % m;
        self.counters.record_rx_burst(sent, bytes);
        burst.clear();
        sent as usize
    }
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
            // Empty records need no bytes on the stream.
            while r < total && self.burst.data(r).is_empty() {
                sent += 1;
                r += step;
            }
            let Some(sock) = &conn.sock else {
                self.counters
                    .record_drops(DropReason::Kernel, remaining(r) as u64);
                return (sent, bytes);
            };
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
