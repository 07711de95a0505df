//! [`AfxdpTx`]: one TX queue, one AF_XDP socket bound to NIC queue = the queue's index.
//!
//! [`reserve`](rtdaq_core::traits::TxQueue::reserve) first returns completed frames (the
//! completion ring) to the pool, then hands out empty pool buffers; the runtime builds
//! whole Ethernet frames in them from offset 0. [`send`](rtdaq_core::traits::TxQueue::send)
//! lends each frame to the kernel as a TX descriptor (no copy), in order, and kicks the
//! kernel (`sendto`, when `need_wakeup` is off or the TX ring asks for it; copy mode always
//! asks). In copy mode one kick sends a bounded batch (32 frames by default) and answers
//! `EAGAIN` for the rest, so `send` kicks until the kernel has taken every descriptor.
//!
//! When the TX ring is full, or the kernel stops taking descriptors, `send` waits (a
//! sleeping queue in `ppoll(POLLOUT)`, a busy one spinning) at most
//! [`AfxdpOptions::tx_stall`](crate::AfxdpOptions::tx_stall) per call in all, then counts
//! the frames it could not place as `ring_full`. Frames shorter than an Ethernet header are
//! counted `malformed`, frames longer than the interface MTU allows `too_large`. Frames
//! placed in the TX ring are counted as accepted with `record_rx_burst` (packets, frame
//! bytes) on the TX queue's counters; the runtime must not count them again.
//!
//! The queue sends one lane: frames leave in the order they are handed to `send`.
//! Nothing here allocates or logs on the hot path.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rtdaq_core::{DropReason, QueueCounters, QueueId};

use crate::burst::TxBatch;
use crate::stats::TxStats;
use crate::sys::consts::{EAGAIN, EBUSY, EINTR, ENOBUFS};
use crate::sys::{ProdRing, XdpDesc, XskSocket};
use crate::umem::Umem;

/// Ethernet header bytes: the shortest frame `send` accepts.
const ETH_HLEN: usize = 14;

/// What `open` hands a new TX queue.
pub(crate) struct TxSetup<'a> {
    pub(crate) sock: XskSocket<'a>,
    pub(crate) ring: ProdRing<XdpDesc>,
    pub(crate) umem: Arc<Umem<'a>>,
    pub(crate) counters: &'a QueueCounters,
    pub(crate) interface: usize,
    pub(crate) queue: usize,
    pub(crate) busy: bool,
    pub(crate) stall: Duration,
    pub(crate) max_frame: usize,
    pub(crate) key: String,
    pub(crate) ifname: String,
}

/// One TX queue of the AF_XDP engine. `Send`; owned by its I/O thread.
pub struct AfxdpTx<'a, const N: usize = { crate::MAX_BATCH }> {
    // Drop order matters: the socket closes before the UMEM (and its frames) go.
    sock: XskSocket<'a>,
    ring: ProdRing<XdpDesc>,
    umem: Arc<Umem<'a>>,
    counters: &'a QueueCounters,
    interface: usize,
    queue: QueueId,
    busy: bool,
    stall: Duration,
    max_frame: usize,
    /// Frames lent through this queue's TX ring and not completed yet.
    inflight: u64,
    stats: TxStats,
    key: String,
    ifname: String,
}

impl<'a, const N: usize> AfxdpTx<'a, N> {
    pub(crate) fn new(s: TxSetup<'a>) -> Self {
        AfxdpTx {
            sock: s.sock,
            ring: s.ring,
            umem: s.umem,
            counters: s.counters,
            interface: s.interface,
            queue: QueueId(s.queue as u16),
            busy: s.busy,
            stall: s.stall,
            max_frame: s.max_frame,
            inflight: 0,
            stats: TxStats::default(),
            key: s.key,
            ifname: s.ifname,
        }
    }

    /// Index of the queue's interface in the config.
    pub fn interface(&self) -> usize {
        self.interface
    }

    /// Index of the queue within its interface's `tx_queues`.
    pub fn queue(&self) -> usize {
        usize::from(self.queue.0)
    }

    /// The netdev name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The NIC queue the socket is bound to (= the queue's index).
    pub fn nic_queue(&self) -> u32 {
        self.umem.nic_queue
    }

    /// Whether the kernel runs the socket in zero-copy mode (false: copy mode).
    pub fn zero_copy(&self) -> bool {
        self.umem.zero_copy
    }

    /// Lanes: always 1 (frames leave in the order given to `send`).
    pub fn lanes(&self) -> usize {
        1
    }

    /// Largest frame `send` accepts (interface MTU + Ethernet header + two VLAN tags,
    /// at most the frame size).
    pub fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// Frames handed to the kernel and not completed yet.
    pub fn in_flight(&self) -> u64 {
        self.inflight
    }

    /// Engine events so far (`tx_invalid_descs` as of the last [`flush`](Self::flush)).
    pub fn stats(&self) -> TxStats {
        self.stats
    }

    /// Returns completed frames to the pool. Never blocks, never allocates.
    #[inline]
    fn complete(&mut self) {
        let (n, bad) = self.umem.complete();
        self.inflight = self.inflight.saturating_sub(u64::from(n));
        self.stats.bad_completions += u64::from(bad);
    }

    /// Kicks the kernel if it wants it; returns false on a hard error.
    #[inline]
    fn kick(&mut self) -> bool {
        if self.umem.need_wakeup && !self.ring.needs_wakeup() {
            return true;
        }
        self.stats.kicks += 1;
        match self.sock.kick_tx() {
            Ok(()) => true,
            Err(e) => match e.raw_os_error().unwrap_or(0) {
                EAGAIN | EBUSY | ENOBUFS | EINTR => true,
                errno => {
                    self.stats.errors += 1;
                    self.stats.last_errno = errno;
                    false
                }
            },
        }
    }

    /// Waits for the kernel to make progress until the per-`send` deadline; false when it
    /// passed. Busy queues spin instead of sleeping. Never allocates.
    fn wait(&mut self, deadline: &mut Option<Instant>) -> bool {
        let now = Instant::now();
        let end = *deadline.get_or_insert_with(|| {
            self.stats.stalls += 1;
            now + self.stall
        });
        if now >= end {
            return false;
        }
        if !self.busy {
            let _ = self
                .sock
                .wait_writable((end - now).min(Duration::from_micros(100)));
        } else {
            std::hint::spin_loop();
        }
        true
    }

    /// See [`TxQueue::reserve`](rtdaq_core::traits::TxQueue::reserve).
    #[inline]
    pub(crate) fn reserve_burst(&mut self, burst: &mut TxBatch<'a, N>, n: usize) -> usize {
        self.complete();
        burst.reserve(self.umem.pool(), n)
    }

    /// Sends the batch (see the module docs) and empties it; returns frames accepted.
    pub(crate) fn send_burst(&mut self, burst: &mut TxBatch<'a, N>) -> usize {
        if burst.is_empty() {
            return 0;
        }
        self.complete();
        let mut deadline: Option<Instant> = None;
        let (mut accepted, mut bytes) = (0u64, 0u64);
        let mut written = 0u32;
        let mut stalled = false;
        // A second handle (two atomic operations per burst) so the ledger can be used while
        // `self` is borrowed mutably.
        let umem = Arc::clone(&self.umem);
        let mut drain = burst.drain();
        for buf in drain.by_ref() {
            let len = buf.len();
            if len < ETH_HLEN {
                self.counters.record_drop(DropReason::Malformed);
                continue;
            }
            if len > self.max_frame {
                self.counters.record_drop(DropReason::TooLarge);
                continue;
            }
            if stalled {
                self.counters.record_drop(DropReason::RingFull);
                continue;
            }
            while self.ring.free(written + 1) <= written {
                // Ring full: publish what we have, let the kernel drain, reclaim completions.
                if written > 0 {
                    self.ring.submit(written);
                    written = 0;
                }
                self.kick();
                self.complete();
                if self.ring.free(1) == 0 && !self.wait(&mut deadline) {
                    stalled = true;
                    break;
                }
            }
            if stalled {
                self.counters.record_drop(DropReason::RingFull);
                continue;
            }
            let addr = umem.lent.lend(buf);
            let desc = XdpDesc {
                addr,
                len: len as u32,
                options: 0,
            };
            if !self.ring.write(written, desc) {
                // Unreachable: room was checked above. Give the frame back, count it.
                drop(umem.lent.reclaim(addr, 0));
                self.counters.record_drop(DropReason::RingFull);
                continue;
            }
            written += 1;
            accepted += 1;
            bytes += len as u64;
        }
        drop(drain);
        if written > 0 {
            self.ring.submit(written);
        }
        self.inflight += accepted;
        self.counters.record_rx_burst(accepted, bytes);
        self.push_out(&mut deadline);
        accepted as usize
    }

    /// Copy mode: kicks until the kernel has taken every TX descriptor, or the deadline
    /// passes with no progress (the rest stays in the ring and goes with the next kick).
    /// Zero-copy: one kick.
    fn push_out(&mut self, deadline: &mut Option<Instant>) {
        if self.umem.zero_copy {
            // The driver sends from its own context; one wake-up (when asked) is enough.
            self.kick();
            return;
        }
        loop {
            let left = self.ring.outstanding();
            if left == 0 || !self.kick() {
                break;
            }
            self.complete();
            let now_left = self.ring.outstanding();
            if now_left != 0 && now_left >= left && !self.wait(deadline) {
                break;
            }
        }
        self.complete();
    }

    /// Sends whatever is still in the TX ring and waits up to `timeout` for every frame in
    /// flight to complete; returns the frames still in flight. Cold path (used on drop).
    pub fn flush(&mut self, timeout: Duration) -> u64 {
        let end = Instant::now() + timeout;
        while (self.inflight > 0 || self.ring.outstanding() > 0) && Instant::now() < end {
            if self.ring.outstanding() > 0 {
                self.kick();
            }
            self.complete();
            if self.inflight > 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        if let Ok(s) = self.sock.stats() {
            self.stats.tx_invalid_descs = s.tx_invalid_descs;
        }
        self.inflight
    }
}

impl<const N: usize> Drop for AfxdpTx<'_, N> {
    fn drop(&mut self) {
        let left = self.flush(Duration::from_millis(200));
        let s = self.stats;
        if s.errors > 0 || s.tx_invalid_descs > 0 || s.bad_completions > 0 || left > 0 {
            log::warn!(
                "{} ({} NIC queue {}): {} send errors (last errno {}), {} invalid TX descriptors, {} bad completions, {} frames still in flight at close",
                self.key,
                self.ifname,
                self.umem.nic_queue,
                s.errors,
                s.last_errno,
                s.tx_invalid_descs,
                s.bad_completions,
                left
            );
        }
    }
}

impl<const N: usize> std::fmt::Debug for AfxdpTx<'_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfxdpTx")
            .field("interface", &self.interface)
            .field("queue", &self.queue.0)
            .field("ifname", &self.ifname)
            .field("nic_queue", &self.umem.nic_queue)
            .field("zero_copy", &self.umem.zero_copy)
            .finish()
    }
}
