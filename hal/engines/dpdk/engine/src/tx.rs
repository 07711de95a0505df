//! [`DpdkTx`]: one TX queue of a DPDK port.
//!
//! [`reserve`](rtdaq_core::traits::TxQueue::reserve) allocates mbufs in bulk
//! (`rte_pktmbuf_alloc_bulk`, one by one for the rest when the pool has fewer than asked)
//! from the mempool of the queue's memory region; the runtime builds whole Ethernet frames
//! in their data room. [`send`](rtdaq_core::traits::TxQueue::send) applies each frame's
//! length, counts frames shorter than an Ethernet header `malformed` and longer than the
//! MTU allows `too_large`, and hands the rest to `rte_eth_tx_burst`; what the PMD does not
//! take is retried (spinning) for at most [`DpdkOptions::tx_stall`](crate::DpdkOptions)
//! per call, then freed and counted `ring_full`.
//!
//! Frames the PMD accepted are counted with `record_rx_burst` (packets, frame bytes) on the
//! TX queue's counters; the runtime must not count them again. Nothing here allocates or
//! logs on the hot path.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rtdaq_core::traits::{LaunchClock, RateLimitTx, TimedTx, TxBurst};
use rtdaq_core::{DropReason, QueueCounters, QueueId};
use rtdaq_dpdk_sys::{MbufBurst, Mempool, TxQueue as PortTxQueue};

use crate::burst::DpdkTxBurst;
use crate::launch::TxLaunch;

/// Ethernet header bytes: the shortest frame `send` accepts.
const ETH_HLEN: usize = 14;

/// Events of one TX queue that are not drops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TxStats {
    /// `rte_eth_tx_burst` calls.
    pub tx_calls: u64,
    /// Sends that had to retry because the PMD took only part of the frames.
    pub stalls: u64,
    /// `reserve` calls the pool could not satisfy in full.
    pub short_reserves: u64,
}

/// What `open` hands a new TX queue.
pub(crate) struct TxSetup<'a> {
    pub(crate) q: PortTxQueue,
    pub(crate) pool: Arc<Mempool>,
    pub(crate) counters: &'a QueueCounters,
    pub(crate) interface: usize,
    pub(crate) queue: usize,
    pub(crate) batch: usize,
    pub(crate) stall: Duration,
    pub(crate) max_frame: usize,
    pub(crate) port: String,
    /// Armed for launch times (`generator.pacing = "txtime"` on a PMD that has them).
    pub(crate) launch: Option<TxLaunch>,
}

/// One TX queue of the DPDK engine. `Send`; owned by its I/O thread.
pub struct DpdkTx<'a> {
    q: PortTxQueue,
    pool: Arc<Mempool>,
    staging: MbufBurst,
    counters: &'a QueueCounters,
    interface: usize,
    queue: QueueId,
    batch: usize,
    stall: Duration,
    max_frame: usize,
    stats: TxStats,
    port: String,
    launch: Option<TxLaunch>,
}

impl<'a> DpdkTx<'a> {
    pub(crate) fn new(s: TxSetup<'a>) -> Self {
        let batch = s.batch.clamp(1, usize::from(u16::MAX));
        DpdkTx {
            q: s.q,
            pool: s.pool,
            staging: MbufBurst::with_capacity(batch),
            counters: s.counters,
            interface: s.interface,
            queue: QueueId(s.queue as u16),
            batch,
            stall: s.stall,
            max_frame: s.max_frame,
            stats: TxStats::default(),
            port: s.port,
            launch: s.launch,
        }
    }

    /// Index of the queue's interface in the config.
    pub fn interface(&self) -> usize {
        self.interface
    }

    /// Index of the queue within its interface's `tx_queues` (= the DPDK queue id).
    pub fn queue(&self) -> usize {
        usize::from(self.queue.0)
    }

    /// The DPDK port name.
    pub fn port_name(&self) -> &str {
        &self.port
    }

    /// The mbuf pool `reserve` allocates from (the TX queue's memory region).
    pub fn mempool(&self) -> &Arc<Mempool> {
        &self.pool
    }

    /// Burst capacity of [`new_burst`](rtdaq_core::traits::TxQueue::new_burst)
    /// (`batch_size`).
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Longest frame `send` accepts (MTU + Ethernet header and two VLAN tags, bounded by
    /// the mbuf room).
    pub fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// Events so far.
    pub fn stats(&self) -> TxStats {
        self.stats
    }

    /// See [`TxQueue::reserve`](rtdaq_core::traits::TxQueue::reserve). Never allocates.
    pub(crate) fn reserve_burst(&mut self, burst: &mut DpdkTxBurst, n: usize) -> usize {
        let want = n.min(burst.room());
        let from = burst.len();
        if want > 0 && !self.pool.alloc_bulk(burst.mbufs_mut(), want) {
            self.stats.short_reserves += 1;
            for _ in 0..want {
                let Some(m) = self.pool.alloc() else { break };
                if burst.mbufs_mut().push(m).is_err() {
                    break;
                }
            }
        }
        burst.init_from(from);
        burst.len()
    }

    /// See [`TxQueue::send`](rtdaq_core::traits::TxQueue::send). Never allocates.
    pub(crate) fn send_burst(&mut self, burst: &mut DpdkTxBurst) -> usize {
        let n = burst.len();
        let mut accepted = 0usize;
        for k in 0..n {
            let Some((mut m, len)) = burst.pop_front(k) else {
                break;
            };
            if len < ETH_HLEN {
                self.counters.record_drop(DropReason::Malformed);
                continue;
            }
            if len > self.max_frame || m.set_len(len).is_err() {
                self.counters.record_drop(DropReason::TooLarge);
                continue;
            }
            if let Err(m) = self.staging.push(m) {
                accepted += self.flush();
                if self.staging.push(m).is_err() {
                    // Unreachable: the flush emptied the staging burst.
                    self.counters.record_drop(DropReason::RingFull);
                }
            }
        }
        accepted += self.flush();
        burst.clear();
        accepted
    }

    /// Hands the staged frames to the PMD, retrying up to the stall bound; frees and counts
    /// the rest as `ring_full`. Returns the frames accepted.
    fn flush(&mut self) -> usize {
        let mut accepted = 0usize;
        let mut deadline: Option<Instant> = None;
        while !self.staging.is_empty() {
            let bytes_before: u64 = self.staging.iter().map(|m| m.len() as u64).sum();
            self.stats.tx_calls += 1;
            let sent = self.q.tx_from(&mut self.staging);
            let bytes_after: u64 = self.staging.iter().map(|m| m.len() as u64).sum();
            if sent > 0 {
                self.counters
                    .record_rx_burst(sent as u64, bytes_before - bytes_after);
                accepted += sent;
            }
            if self.staging.is_empty() {
                break;
            }
            let now = Instant::now();
            let end = *deadline.get_or_insert_with(|| {
                self.stats.stalls += 1;
                now + self.stall
            });
            if now >= end {
                self.counters
                    .record_drops(DropReason::RingFull, self.staging.len() as u64);
                self.staging.clear();
                break;
            }
            std::hint::spin_loop();
        }
        accepted
    }
}

impl TimedTx for DpdkTx<'_> {
    /// `CLOCK_TAI` when the queue was armed at open (the `launch` module): the queue moves
    /// each time onto the device's clock.
    fn launch_clock(&self) -> Option<LaunchClock> {
        self.launch.as_ref().map(|_| LaunchClock::Tai)
    }

    /// [`send`](rtdaq_core::traits::TxQueue::send) with frame `i` leaving at `at_ns[i]`
    /// (`CLOCK_TAI`): each mbuf's tx-timestamp field is set to that time on the device's
    /// clock. Unarmed: `send`. Never allocates.
    fn send_at(&mut self, burst: &mut DpdkTxBurst, at_ns: &[u64]) -> usize {
        if let Some(l) = self.launch.as_mut() {
            if at_ns.len() >= burst.len() {
                l.refresh(&self.q, TxLaunch::now_tai());
                for (m, &t) in burst.mbufs_mut().iter_mut().zip(at_ns) {
                    l.ts.set(m, l.clock.at(t));
                }
            }
        }
        self.send_burst(burst)
    }

    /// The NIC keeps its frames in its descriptor ring, which DPDK does not count: nothing
    /// is waited for and 0 is returned (a frame the NIC sends late is the NIC's; the
    /// receiver counts what never came).
    fn settle(&mut self, _wait_ns: u64) -> u64 {
        0
    }
}

impl RateLimitTx for DpdkTx<'_> {
    /// `rte_eth_set_queue_rate_limit` on this queue; the errno of the PMD's refusal
    /// (`ENOTSUP`: it has none). Cold path.
    fn limit_rate(&mut self, mbps: u32) -> Result<(), i32> {
        self.q.set_rate_limit(mbps).map_err(|e| match e {
            rtdaq_dpdk_sys::DpdkError::Port { errno, .. } => errno,
            // No other error comes from this call; EINVAL if one did.
            _ => 22,
        })
    }
}

impl std::fmt::Debug for DpdkTx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpdkTx")
            .field("interface", &self.interface)
            .field("queue", &self.queue.0)
            .field("port", &self.port)
            .finish()
    }
}
