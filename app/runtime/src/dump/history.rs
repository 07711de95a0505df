//! One queue's history (the packets it received last, as pcap records in preallocated
//! slots) and the `dump` stage that keeps it.
//!
//! The history is a ring of `history_packets` slots of `slot_bytes`, each holding one pcap
//! record (its 16-byte header, the rebuilt IPv4/UDP headers of a socket payload or the
//! frame of a raw engine, the data), its length and its receive time; the newest packet
//! takes the oldest slot. It sits behind a `Mutex` that only two threads touch: the queue's
//! consumer (the stage) and its dump's thread. The stage never waits: it takes the lock
//! with `try_lock` (an atomic, uncontended but while a dump reads) and, when the dump
//! thread holds it, counts the packet **not kept** instead. The dump thread holds it while
//! it writes a window to its file; packets that arrive meanwhile are not in the history
//! (counted, and a later window over that time says `complete: false`). Hot path: no
//! allocation, no logging, no blocking.

use crate::record::format::{pcap::Pcap, Format, Out};
use crate::stages::Packet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// The slots of one history.
pub struct Ring {
    data: Box<[u8]>,
    slot: usize,
    lens: Box<[u32]>,
    times: Box<[u64]>,
    /// Records ever written; record `n` is in slot `n % slots`.
    head: u64,
}

impl Ring {
    /// `slots` slots of `slot` bytes, allocated now (a failure is an error, not an abort).
    pub fn new(slots: usize, slot: usize) -> Result<Self, std::collections::TryReserveError> {
        let mut data = Vec::new();
        data.try_reserve_exact(slots * slot)?;
        data.resize(slots * slot, 0u8);
        Ok(Ring {
            data: data.into_boxed_slice(),
            slot,
            lens: vec![0; slots].into_boxed_slice(),
            times: vec![0; slots].into_boxed_slice(),
            head: 0,
        })
    }

    fn slots(&self) -> u64 {
        self.lens.len() as u64
    }

    /// Indices of the records it holds, oldest first.
    pub fn held(&self) -> std::ops::Range<u64> {
        self.head.saturating_sub(self.slots())..self.head
    }

    /// Receive time of record `n` (one it holds).
    pub fn time(&self, n: u64) -> u64 {
        self.times[(n % self.slots()) as usize]
    }

    /// The pcap record `n` (one it holds).
    pub fn record(&self, n: u64) -> &[u8] {
        let k = (n % self.slots()) as usize;
        &self.data[k * self.slot..k * self.slot + self.lens[k] as usize]
    }
}

/// A record being written into one slot.
struct SlotOut<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Out for SlotOut<'_> {
    fn admit(&mut self, total: usize, _ts_ns: u64) -> bool {
        total <= self.buf.len()
    }
    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }
}

/// One queue's history and its counters.
pub struct History {
    /// The slots.
    pub ring: Mutex<Ring>,
    /// Packets kept.
    pub kept: AtomicU64,
    /// Packets not kept: the dump thread held the history (it was writing a dump).
    pub not_kept: AtomicU64,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History")
            .field("kept", &self.kept)
            .field("not_kept", &self.not_kept)
            .finish_non_exhaustive()
    }
}

/// The `dump` stage of one queue: keeps every packet in its history.
pub struct DumpStage {
    history: &'static History,
    format: Pcap,
    kept: u64,
    not_kept: u64,
}

impl DumpStage {
    /// The stage keeping `history`, its records in `format`.
    pub fn new(history: &'static History, format: Pcap) -> Self {
        DumpStage {
            history,
            format,
            kept: 0,
            not_kept: 0,
        }
    }

    /// Keeps one packet (see the [module docs](self)).
    #[inline]
    pub fn on_packet(&mut self, p: &Packet<'_>) {
        let Ok(mut ring) = self.history.ring.try_lock() else {
            self.not_kept += 1;
            return;
        };
        let k = (ring.head % ring.slots()) as usize;
        let slot = ring.slot;
        let mut out = SlotOut {
            buf: &mut ring.data[k * slot..(k + 1) * slot],
            len: 0,
        };
        // A record that does not fit its slot cannot arrive (the slot holds the largest
        // packet the queue can receive): counted as not kept all the same.
        if self.format.record(p, &mut out).is_none() {
            self.not_kept += 1;
            return;
        }
        let len = out.len as u32;
        ring.lens[k] = len;
        ring.times[k] = p.rx_ns;
        ring.head += 1;
        self.kept += 1;
    }

    /// Publishes the counts (after each burst and when idle).
    pub fn tick(&mut self, _now_ns: u64) {
        self.history.kept.store(self.kept, Relaxed);
        self.history.not_kept.store(self.not_kept, Relaxed);
    }

    /// End of the run: the last counts.
    pub fn finish(&mut self) {
        self.tick(0);
    }
}
