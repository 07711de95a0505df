//! Per-stream live counters of one RX queue, for the live line.
//!
//! The validator tracks up to its interface's `max_streams` streams per queue (VDIF/CODIF threads, SPEAD
//! senders, counter stream ids, eCPRI PC_IDs, rtdaq stream ids). Every
//! [`PUBLISH_EVERY`]th burst (and at the end) it stores each tracked stream's id, packets and
//! missing count here ([`LiveStreams::store`]: single writer, relaxed atomics, no
//! allocation); the stats thread reads them once a second ([`LiveStreams::summary`]) and
//! names the number of streams and the one missing the most: a lossy VDIF thread among
//! sixteen shows while the run goes on, not only in the final report.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Bursts between two publications of the stream table.
pub const PUBLISH_EVERY: u32 = 16;

#[derive(Debug)]
struct Entry {
    id: AtomicU32,
    packets: AtomicU64,
    missing: AtomicU64,
}

/// The stream table of one queue; see the [module docs](self).
#[derive(Debug)]
pub struct LiveStreams {
    len: AtomicUsize,
    /// One per stream the queue's validator can track (its `max_streams`).
    entries: Box<[Entry]>,
}

/// How many counters the validator keeps ([`CHECK_NAMES`]).
pub const NAMED_COUNTERS: usize = 26;

/// The name of every counter the validator keeps, in the order of
/// `ValidatorStats::named` (the latency histogram apart): the list the text report, the JSON
/// report and `/metrics` are checked against, so a new counter cannot be left out of one of
/// them. `rejects_*` and `heaps_*` are the fields of `Rejects` and `HeapCounts`.
pub const CHECK_NAMES: [&str; NAMED_COUNTERS] = [
    "received",
    "bytes",
    "seq_gaps",
    "reordered",
    "duplicates",
    "corrupt",
    "malformed",
    "too_old",
    "unique",
    "streams",
    "streams_overflow",
    "negative_latency",
    "in_gpu_memory",
    "invalid",
    "rejects_short",
    "rejects_length",
    "rejects_foreign",
    "rejects_step",
    "rejects_frame_number",
    "rejects_items",
    "heaps_complete",
    "heaps_incomplete",
    "heaps_missing",
    "heaps_unsized",
    "heaps_missing_bytes",
    "heaps_ends",
];

/// The validator's counters (named by [`CHECK_NAMES`]) as the queue's consumer last
/// published them (every [`PUBLISH_EVERY`]th burst, with the stream table): `/metrics`
/// reads them. Single writer, relaxed atomics, no allocation.
#[derive(Debug, Default)]
pub struct LiveChecks {
    values: [AtomicU64; NAMED_COUNTERS],
}

impl LiveChecks {
    /// Stores `named` (the validator's counters with their names).
    #[inline]
    pub fn store(&self, named: &[(&'static str, u64); NAMED_COUNTERS]) {
        for (a, (_, v)) in self.values.iter().zip(named) {
            a.store(*v, Relaxed);
        }
    }

    /// Every counter with its name, as last stored.
    pub fn get(&self) -> [(&'static str, u64); NAMED_COUNTERS] {
        core::array::from_fn(|i| (CHECK_NAMES[i], self.values[i].load(Relaxed)))
    }
}

/// What the live line shows of a queue's streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamSummary {
    /// Streams tracked so far.
    pub streams: usize,
    /// The stream missing the most packets now: `(id, missing)` (`None` when none misses any).
    pub worst: Option<(u32, u64)>,
}

impl Default for LiveStreams {
    fn default() -> Self {
        Self::new()
    }
}

impl LiveStreams {
    /// An empty table of `max_streams`' default (64) streams.
    pub fn new() -> Self {
        Self::with_capacity(rtdaq_config::model::DEFAULT_MAX_STREAMS as usize)
    }

    /// An empty table of `n` streams (allocated here, never again).
    pub fn with_capacity(n: usize) -> Self {
        Self {
            len: AtomicUsize::new(0),
            entries: (0..n)
                .map(|_| Entry {
                    id: AtomicU32::new(0),
                    packets: AtomicU64::new(0),
                    missing: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    /// Stores stream `k` (in the order streams were first seen) and makes the table `k + 1`
    /// long when it was shorter. One writer (the queue's validator); never allocates.
    #[inline]
    pub fn store(&self, k: usize, id: u32, packets: u64, missing: u64) {
        let Some(e) = self.entries.get(k) else {
            return;
        };
        e.id.store(id, Relaxed);
        e.packets.store(packets, Relaxed);
        e.missing.store(missing, Relaxed);
        if self.len.load(Relaxed) <= k {
            self.len.store(k + 1, Relaxed);
        }
    }

    /// The streams tracked and the one missing the most (read by the stats thread; the
    /// entries may be a burst apart from each other).
    pub fn summary(&self) -> StreamSummary {
        let n = self.len.load(Relaxed).min(self.entries.len());
        let worst = self.entries[..n]
            .iter()
            .map(|e| (e.id.load(Relaxed), e.missing.load(Relaxed)))
            .filter(|&(_, m)| m > 0)
            .max_by_key(|&(id, m)| (m, std::cmp::Reverse(id)));
        StreamSummary { streams: n, worst }
    }

    /// `(id, packets, missing)` of every stream stored so far.
    pub fn entries(&self) -> Vec<(u32, u64, u64)> {
        let n = self.len.load(Relaxed).min(self.entries.len());
        self.entries[..n]
            .iter()
            .map(|e| {
                (
                    e.id.load(Relaxed),
                    e.packets.load(Relaxed),
                    e.missing.load(Relaxed),
                )
            })
            .collect()
    }
}

impl std::fmt::Display for StreamSummary {
    /// `, streams 4 (most missing: 0x105c801, 357)`; empty for a single stream missing
    /// nothing (the queue totals say it all).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.streams > 1 || self.worst.is_some() {
            write!(f, ", streams {}", self.streams)?;
        }
        if let (true, Some((id, m))) = (self.streams > 1, self.worst) {
            write!(f, " (most missing: {id:#x}, {m})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_names_the_stream_missing_most() {
        let t = LiveStreams::new();
        assert_eq!(t.summary().to_string(), "");
        t.store(0, 7, 100, 0);
        assert_eq!(t.summary().to_string(), "", "one stream, nothing missing");
        t.store(1, 0x105c801, 90, 357);
        t.store(2, 0x105c802, 90, 12);
        assert_eq!(
            t.summary(),
            StreamSummary {
                streams: 3,
                worst: Some((0x105c801, 357))
            }
        );
        assert_eq!(
            t.summary().to_string(),
            ", streams 3 (most missing: 0x105c801, 357)"
        );
        t.store(1, 0x105c801, 95, 0);
        assert_eq!(t.summary().worst, Some((0x105c802, 12)));
        assert_eq!(t.entries()[1], (0x105c801, 95, 0));
        // beyond the table: ignored
        t.store(rtdaq_config::model::DEFAULT_MAX_STREAMS as usize, 1, 1, 1);
        assert_eq!(t.summary().streams, 3);
    }
}
