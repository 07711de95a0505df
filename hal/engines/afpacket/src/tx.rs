//! TX queue: a `TPACKET_V2` TX ring per queue whose slots are the burst buffers.
//!
//! - `reserve` claims free ring slots in ring order (a slot the kernel still owns ends the
//!   run: back-pressure, fewer than asked);
//! - the generator writes whole Ethernet frames into them (`packet_mut`, `set_len`);
//! - `send` checks each frame (`malformed` below 14 bytes, `too_large` above what the device
//!   takes: MTU + 14, + 4 for an 802.1Q-tagged frame), moves later frames down over any gap
//!   (the kernel stops at the first slot not marked for sending), marks them
//!   `TP_STATUS_SEND_REQUEST` and kicks the kernel with `sendto(fd, NULL, 0, MSG_DONTWAIT)`.
//!   Frames marked are counted as accepted (`record_rx_burst` on the TX counters: the runtime
//!   must not count them again).
//!
//! A kick that leaves frames queued (socket send buffer full, device down) is repeated on the
//! next `reserve` or `send`; a queue that is dropped kicks and waits up to
//! [`AfpacketOptions::tx_drain`](crate::AfpacketOptions::tx_drain) for its ring to empty.
//! `PACKET_LOSS` is on, so a frame the kernel refuses anyway is skipped instead of stalling
//! the ring.

use rtdaq_netsys::OsError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtdaq_config::model::{GenPacing, TxQueue as TxQueueConfig};
use rtdaq_core::traits::{LaunchClock, TimedTx, TxQueue};
use rtdaq_core::wire::ETHERTYPE_VLAN;
use rtdaq_core::{DropReason, QueueCounters, QueueId};
use rtdaq_netsys::txtime::{Dropped, ErrQueue};
use std::os::fd::AsFd;

use crate::ctx::{OpenCtx, QueueRes};
use crate::error::{ring_error, socket_error, AfpacketError, Result};
use crate::iface::NetDev;
use crate::ring::TxRing;
use crate::stats::TxStats;
use crate::sys::consts::{
    tpacket_req, EAGAIN, EINTR, ENOBUFS, PACKET_LOSS, PACKET_QDISC_BYPASS, PACKET_VERSION,
    SOL_SOCKET, SO_SNDBUF, SO_SNDBUFFORCE, TX_DATA_OFFSET,
};
use crate::sys::{MmapRing, PacketSocket, TPACKET_V2};
use crate::tx_burst::AfpacketTxBurst;

/// Ethernet header bytes.
const ETH: usize = 14;

/// TX ring block size: the smallest power of two (at least a page) that holds `frame_size`
/// slots with at most 1/8 wasted, capped at `engine.afpacket.block_size`. The TX ring is
/// sized by the queue's `ring_depth`, so RX-sized blocks (1 MiB by default) would mostly be
/// wasted on it.
pub(crate) fn tx_block_size(frame_size: usize, cap: usize) -> usize {
    let mut b = frame_size.next_power_of_two().max(4096);
    while b < cap && b % frame_size > b / 8 {
        b *= 2;
    }
    b.min(cap).max(frame_size)
}

/// One TX queue of the AF_PACKET engine: a send-only packet socket with a TX ring, bound to
/// the interface.
pub struct AfpacketTx<'a, const N: usize> {
    ring: Arc<TxRing>,
    counters: &'a QueueCounters,
    queue: QueueId,
    interface: usize,
    /// Device MTU (frames up to MTU + 14, + 4 when 802.1Q-tagged).
    mtu: usize,
    kick_pending: bool,
    queued_bytes: u64,
    drain: Duration,
    stats: TxStats,
    netdev: String,
    key: String,
    /// `generator.pacing = "txtime"`: the launch clock, and the qdisc's drop reports.
    launch: Option<Launch>,
}

/// A TX queue armed for launch times (the `txtime` module).
#[derive(Debug)]
struct Launch {
    clock: LaunchClock,
    errq: ErrQueue,
    dropped: Dropped,
    /// The launch time of the last kick: a kick repeated for frames left queued uses it
    /// (never earlier than their own).
    last_at: u64,
}

impl<'a, const N: usize> AfpacketTx<'a, N> {
    /// Opens TX queue `j` of interface `i` on `dev`. Cold path.
    pub(crate) fn open(
        ctx: &OpenCtx<'_, 'a>,
        i: usize,
        j: usize,
        dev: &NetDev,
        q: &TxQueueConfig,
        res: QueueRes<'a>,
    ) -> Result<Self> {
        let addr_key = OpenCtx::addr_key(i);
        let key = format!("interfaces[{i}].tx_queues[{j}]");
        let af = &ctx.af;
        let sock = PacketSocket::new().map_err(|e| socket_error(&addr_key, e))?;
        let opt = |name: &str, option: i32, value: i32, k: &str| {
            sock.set_packet(option, value).map_err(|source| {
                AfpacketError::SetOption(OsError::new(
                    k.to_owned(),
                    format!("setsockopt({name}) failed ({source})"),
                    source,
                ))
            })
        };
        opt("PACKET_VERSION", PACKET_VERSION, TPACKET_V2, &key)?;
        opt("PACKET_LOSS", PACKET_LOSS, 1, &key)?;
        let pacing = ctx
            .cfg
            .generator
            .as_ref()
            .filter(|g| g.interface.0 == i && usize::from(g.tx_queue.0) == j)
            .map(|g| g.pacing);
        let timed = matches!(pacing, Some(GenPacing::Txtime { .. }));
        // Launch times are kept by the qdisc: a timed queue never bypasses it.
        if ctx.opts.qdisc_bypass && !timed {
            opt(
                "PACKET_QDISC_BYPASS",
                PACKET_QDISC_BYPASS,
                1,
                "AfpacketOptions::qdisc_bypass",
            )?;
        }
        let fs = af.frame_size as usize;
        let bs = tx_block_size(fs, af.block_size as usize);
        let per_block = bs / fs;
        let want = (q.ring_depth as usize).max(q.batch_size as usize).max(1);
        let blocks = want.div_ceil(per_block);
        let frames = blocks * per_block;
        let req = tpacket_req {
            tp_block_size: bs as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: fs as u32,
            tp_frame_nr: frames as u32,
        };
        let geometry = format!(
            "({frames} slots of engine.afpacket.frame_size = {fs} B for {key}.ring_depth = {}, {blocks} blocks of {bs} B)",
            q.ring_depth
        );
        sock.set_tx_ring(&req)
            .map_err(|e| ring_error(&format!("the TX ring of {key}"), &geometry, e))?;
        let map = MmapRing::map(&sock, blocks * bs)
            .map_err(|e| ring_error(&format!("mapping the TX ring of {key}"), &geometry, e))?;
        // Let the whole ring be in flight: the skbs of queued frames count against SO_SNDBUF.
        let sndbuf = (frames * fs * 2).min(i32::MAX as usize) as i32;
        if sock.set_int(SOL_SOCKET, SO_SNDBUFFORCE, sndbuf).is_err() {
            let _ = sock.set_int(SOL_SOCKET, SO_SNDBUF, sndbuf);
        }
        sock.bind(dev.ifindex, 0)
            .map_err(|source| AfpacketError::Bind {
                key: addr_key.clone(),
                netdev: dev.name.clone(),
                detail: "the device may have gone away; check `ip link`".to_owned(),
                source,
            })?;
        let launch = match pacing {
            Some(GenPacing::Txtime { lead_us }) => Some(Launch {
                clock: crate::txtime::arm(&sock, &dev.name, u64::from(lead_us) * 1000)?,
                errq: ErrQueue::new(),
                dropped: Dropped::default(),
                last_at: 0,
            }),
            Some(GenPacing::Software) if !ctx.opts.qdisc_bypass => {
                crate::txtime::check_untimed(&dev.name)?;
                None
            }
            _ => None,
        };
        if q.batch_size as usize > N {
            log::warn!(
                "{key}.batch_size = {} exceeds the burst capacity {N} of this build",
                q.batch_size
            );
        }
        Ok(AfpacketTx {
            ring: Arc::new(TxRing::new(sock, map, bs, fs, frames)),
            counters: res.counters,
            queue: QueueId(j as u16),
            interface: i,
            mtu: dev.mtu as usize,
            kick_pending: false,
            queued_bytes: 0,
            drain: ctx.opts.tx_drain,
            stats: TxStats::default(),
            netdev: dev.name.clone(),
            key,
            launch,
        })
    }

    /// Index of the queue's interface in the config.
    pub fn interface(&self) -> usize {
        self.interface
    }

    /// Index of the queue within its interface's `tx_queues`.
    pub fn queue(&self) -> usize {
        usize::from(self.queue.0)
    }

    /// The network device.
    pub fn netdev(&self) -> &str {
        &self.netdev
    }

    /// Slots in the TX ring.
    pub fn slots(&self) -> usize {
        self.ring.frames()
    }

    /// Bytes one slot holds for a frame (`engine.afpacket.frame_size` − 32).
    pub fn slot_capacity(&self) -> usize {
        self.ring.slot_capacity()
    }

    /// Largest untagged frame the device sends (MTU + 14; + 4 for an 802.1Q tag).
    pub fn max_frame(&self) -> usize {
        (self.mtu + ETH).min(self.ring.slot_capacity())
    }

    /// Engine events so far.
    pub fn stats(&self) -> TxStats {
        self.stats
    }

    /// Frames the kernel still holds (queued or being sent). Scans the ring: cold path.
    pub fn in_flight(&self) -> usize {
        self.ring.in_flight()
    }

    /// Kicks the kernel and waits up to `timeout` until it has sent every queued frame;
    /// returns whether it has. Cold path (the hot path never waits).
    pub fn flush(&mut self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        loop {
            self.kick();
            if self.ring.in_flight() == 0 {
                return true;
            }
            let now = Instant::now();
            if now >= end {
                return false;
            }
            let _ = self
                .ring
                .sock()
                .wait_writable((end - now).min(Duration::from_millis(1)));
        }
    }

    /// Asks the kernel to send every marked frame, without waiting (with launch times: at
    /// the last kick's time). Never allocates.
    #[inline]
    fn kick(&mut self) {
        let at = self.launch.as_ref().map(|l| l.last_at);
        self.kick_at(at);
    }

    /// [`kick`](Self::kick) with the frames leaving at `at` (launch clock), if given.
    #[inline]
    fn kick_at(&mut self, at: Option<u64>) {
        self.stats.kicks += 1;
        let sock = self.ring.sock();
        let sent = match at {
            Some(t) => sock.kick_at(t),
            None => sock.kick(),
        };
        match sent {
            Ok(0) => {
                // Nothing (left) marked at the kernel's position.
                self.queued_bytes = 0;
                self.kick_pending = false;
            }
            Ok(sent) if sent as u64 >= self.queued_bytes => {
                self.queued_bytes = 0;
                self.kick_pending = false;
            }
            Ok(sent) => {
                self.queued_bytes -= sent as u64;
                self.kick_pending = true;
                self.stats.partial_kicks += 1;
            }
            Err(e) => {
                let errno = e.raw_os_error().unwrap_or(0);
                if errno != EAGAIN && errno != ENOBUFS && errno != EINTR {
                    self.stats.errors += 1;
                    self.stats.last_errno = errno;
                }
                self.kick_pending = true;
                self.stats.partial_kicks += 1;
            }
        }
    }

    /// Counts and removes the frames of `burst` the device would refuse, moving later ones
    /// down over the gaps; `kept(r, w)` learns that frame `r` is now frame `w`. Returns the
    /// frames kept and their bytes. Never allocates.
    #[inline]
    fn compact(
        &mut self,
        burst: &mut AfpacketTxBurst<N>,
        kept: &mut dyn FnMut(usize, usize),
    ) -> (usize, u64) {
        let total = burst.len();
        let (slots, lens) = burst.parts();
        let (mut w, mut bytes) = (0usize, 0u64);
        for r in 0..total {
            let len = lens[r] as usize;
            if let Some(reason) = self.refusal(slots.data(r, len)) {
                self.counters.record_drop(reason);
                continue;
            }
            if w != r {
                slots.move_frame(r, w, len);
                lens[w] = lens[r];
                self.stats.compactions += 1;
            }
            kept(r, w);
            w += 1;
            bytes += len as u64;
        }
        (w, bytes)
    }

    /// Reads the qdisc's drop reports waiting on the socket's error queue and counts the
    /// new ones as `kernel` drops. Never blocks, never allocates.
    #[inline]
    fn collect_reports(&mut self) {
        let Some(l) = self.launch.as_mut() else {
            return;
        };
        let before = l.dropped;
        l.errq.drain(self.ring.sock().as_fd(), &mut l.dropped);
        let new = (l.dropped.invalid - before.invalid) + (l.dropped.missed - before.missed);
        if new > 0 {
            self.counters.record_drops(DropReason::Kernel, new);
            self.stats.txtime_invalid = l.dropped.invalid;
            self.stats.txtime_missed = l.dropped.missed;
        }
    }

    /// Why the device would refuse `frame` (`len` bytes), if it would.
    #[inline]
    fn refusal(&self, frame: &[u8]) -> Option<DropReason> {
        if frame.len() < ETH {
            return Some(DropReason::Malformed);
        }
        let tagged = frame[12..14] == ETHERTYPE_VLAN.to_be_bytes();
        let max = self.mtu + ETH + if tagged { 4 } else { 0 };
        (frame.len() > max).then_some(DropReason::TooLarge)
    }
}

impl<const N: usize> TxQueue for AfpacketTx<'_, N> {
    type Burst = AfpacketTxBurst<N>;

    fn new_burst(&self) -> AfpacketTxBurst<N> {
        AfpacketTxBurst::new(Arc::clone(&self.ring), self.queue)
    }

    /// Claims up to `n` free ring slots (bounded by the burst's free room); returns how many
    /// packets the burst now holds. Fewer: the kernel still holds the next slots. A burst of
    /// another queue gets nothing. Never blocks, never allocates.
    #[inline]
    fn reserve(&mut self, burst: &mut AfpacketTxBurst<N>, n: usize) -> usize {
        if !burst.is_of(&self.ring) {
            return burst.len();
        }
        if self.kick_pending {
            self.kick();
        }
        let before = burst.len();
        let now = burst.reserve(n);
        if now - before < n.min(N - before) {
            self.stats.backpressure += 1;
        }
        now
    }

    /// Hands the burst's frames to the kernel (see the module docs) and empties the burst.
    /// Returns how many were accepted. Never blocks, never allocates.
    ///
    /// # Panics
    /// When `burst` belongs to another queue (a caller bug).
    #[inline]
    fn send(&mut self, burst: &mut AfpacketTxBurst<N>) -> usize {
        assert!(
            burst.is_of(&self.ring) || burst.is_empty(),
            "AfpacketTx::send: a burst of another queue"
        );
        if burst.is_empty() {
            return 0;
        }
        let (w, bytes) = self.compact(burst, &mut |_, _| {});
        let (slots, lens) = burst.parts();
        let n = slots.submit(&lens[..w]);
        lens.clear();
        self.counters.record_rx_burst(n as u64, bytes);
        if n > 0 {
            self.queued_bytes += bytes;
            self.kick();
        }
        n
    }
}

impl<const N: usize> TimedTx for AfpacketTx<'_, N> {
    fn launch_clock(&self) -> Option<LaunchClock> {
        self.launch.as_ref().map(|l| l.clock)
    }

    /// [`send`](TxQueue::send) with frame `i` leaving at `at_ns[i]`: the qdisc's drop
    /// reports are read and counted first; then each frame the device takes is marked and
    /// kicked on its own, with its time (the `txtime` module). Without launch times
    /// armed: `send`. Never blocks, never allocates.
    ///
    /// # Panics
    /// When `burst` belongs to another queue, or `at_ns` is shorter than the burst.
    #[inline]
    fn send_at(&mut self, burst: &mut AfpacketTxBurst<N>, at_ns: &[u64]) -> usize {
        if self.launch.is_none() {
            return self.send(burst);
        }
        self.collect_reports();
        assert!(
            burst.is_of(&self.ring) || burst.is_empty(),
            "AfpacketTx::send_at: a burst of another queue"
        );
        if burst.is_empty() {
            return 0;
        }
        assert!(at_ns.len() >= burst.len(), "a launch time per frame");
        // Frame `w` after compaction was frame `src[w]`: its time is `at_ns[src[w]]`.
        let mut src = [0u32; N];
        let (w, bytes) = self.compact(burst, &mut |r, w| src[w] = r as u32);
        let (slots, lens) = burst.parts();
        let n = slots.submit_each(&lens[..w], |k| {
            let t = at_ns[src[k] as usize];
            if let Some(l) = self.launch.as_mut() {
                l.last_at = t;
            }
            self.queued_bytes += u64::from(lens[k]);
            self.kick_at(Some(t));
        });
        lens.clear();
        self.counters.record_rx_burst(n as u64, bytes);
        n
    }

    /// See [`TimedTx::settle`]: the TX ring says exactly which frames the kernel still
    /// holds (a frame's slot comes back when its packet is freed), so the count is the
    /// ring's frames in flight after the wait. Cold path.
    fn settle(&mut self, wait_ns: u64) -> u64 {
        if self.launch.is_none() {
            return 0;
        }
        let drained = self.flush(Duration::from_nanos(wait_ns));
        // The qdisc's reports first: a frame it dropped is counted there, not as held.
        self.collect_reports();
        let held = if drained {
            0
        } else {
            self.ring.in_flight() as u64
        };
        if held > 0 {
            self.counters.record_drops(DropReason::Kernel, held);
            self.stats.txtime_held += held;
        }
        held
    }
}

impl<const N: usize> Drop for AfpacketTx<'_, N> {
    fn drop(&mut self) {
        if self.stats.txtime_held > 0 {
            log::warn!(
                "{} ({}): the kernel still held {} frames after their launch times had passed (counted as kernel drops: they leave late or never): the qdisc did not hand them to the device; check that nothing above it throttles (tc -s qdisc show dev {}) and that its clock is the one the launch times are on",
                self.key,
                self.netdev,
                self.stats.txtime_held,
                self.netdev
            );
        }
        let left = if self.ring.in_flight() > 0 {
            let d = self.drain;
            if self.flush(d) {
                0
            } else {
                self.ring.in_flight()
            }
        } else {
            0
        };
        if left > 0 || self.stats.errors > 0 {
            log::warn!(
                "{} ({}): {} frames still queued after {:?} (not sent), {} send errors (last errno {})",
                self.key,
                self.netdev,
                left,
                self.drain,
                self.stats.errors,
                self.stats.last_errno
            );
        }
        let (inv, missed) = (self.stats.txtime_invalid, self.stats.txtime_missed);
        if inv + missed > 0 {
            log::warn!(
                "{} ({}): the qdisc dropped {} frames whose launch time had passed when they reached it and {} it could not send in time (counted as kernel drops); raise generator.txtime_lead_us, or the etf qdisc's delta",
                self.key,
                self.netdev,
                inv,
                missed
            );
        }
    }
}

impl<const N: usize> std::fmt::Debug for AfpacketTx<'_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfpacketTx")
            .field("interface", &self.interface)
            .field("queue", &self.queue.0)
            .field("netdev", &self.netdev)
            .field("slots", &self.ring.frames())
            .finish()
    }
}

/// Offset of frame data in a TX slot (for docs and checks).
pub(crate) const TX_SLOT_OVERHEAD: usize = TX_DATA_OFFSET;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_blocks_fit_the_slots() {
        assert_eq!(tx_block_size(2048, 1 << 20), 4096);
        assert_eq!(tx_block_size(128, 1 << 20), 4096);
        assert_eq!(tx_block_size(9056, 1 << 20), 65536); // 7 slots, 3 % unused
        assert_eq!(tx_block_size(9056, 16384), 16384); // capped
        assert_eq!(tx_block_size(3008, 1 << 20), 16384); // 5 slots of 3008, 8 % unused
        for fs in (128..20_000).step_by(16) {
            let b = tx_block_size(fs, 1 << 22);
            assert!(
                b >= fs && b.is_power_of_two() && b % fs <= b / 8,
                "{fs} -> {b}"
            );
        }
    }
}
