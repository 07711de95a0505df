//! The `record` stage: writes what an RX queue receives to files (pcap, raw payloads, DADA),
//! at disk speed, without ever blocking the queue.
//!
//! Each RX queue naming a recorder (`record = ["name", ...]`) gets one **sink** per
//! recorder: a ring of large, preallocated, page-aligned buffers ([`RecBuf`], `buffers` ×
//! `buffer_mib`) between the queue's consumer ([`RecordSink`], this module, hot path) and
//! one writer thread ([`writer`], cold side):
//!
//! - the consumer appends each packet's record (pcap: a 16-byte record header, for the
//!   socket engine Ethernet/IPv4/UDP headers rebuilt from the datagram's real source and
//!   the queue's address, then the bytes; raw/DADA: the payload less `strip_bytes`) to the
//!   buffer it is filling. The byte stream runs across buffers (a record may start in one
//!   buffer and end in the next), so every full buffer is a whole, aligned block for an
//!   `O_DIRECT` write. A partly filled buffer goes to the writer after `flush_ms`: its
//!   4 KiB-aligned part, the rest carried into the next buffer;
//! - it never waits: a packet whose record does not fit into the free buffers is counted
//!   as `record_full` (the writer is behind) and the run fails its loss tolerance; after a
//!   write error every further packet counts as `record_error`;
//! - rotation (`rotate_mib`, `rotate_s`) happens at a packet boundary: the buffer holding a
//!   file's end is handed over marked so, and the next one starts the next file.
//!
//! The writer ([`writer`]) writes buffers in order (`O_DIRECT` where the file system has
//! it), rewrites a DADA header with the file's final size, writes each file's sidecar index
//! (`FILE.index.json`: packets, bytes, first/last sequence number and timestamp, gaps) when
//! the file is closed, and on a write error truncates the file to its last complete record.
//!
//! Nothing here allocates, logs or blocks after `prepare`: the buffers, the sinks and the
//! first file of each sink (so a bad directory fails the start, exit 2) exist before the
//! queue threads start.

mod common;
pub mod format;
pub mod shared;
mod sink;
pub mod writer;

pub use common::{start_field, FileNaming, SinkCounters, SinkInfo, ALIGN, DADA_HEADER_LEN};
pub use format::{AnyFormat, Format, Link};
pub use shared::{Merger, Tap};
pub use sink::{RecBuf, RecordSink};
pub use writer::{FileReport, WriterOutcome};

use crate::error::RuntimeError;
use crate::memory::Resources;
use rtdaq_config::model::{Address, Config, Recorder};
use rtdaq_core::SlotRing;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;

/// One sink of one RX queue, ready to run: the consumer half, the writer's half and the
/// first file (opened by `prepare`). Each half is taken by the thread that runs it. For a
/// shared recorder every queue gets a tap; the first queue's parts also carry the merger
/// and the writer of the interface's one sink.
pub struct SinkParts {
    /// Index in `config.recorders`.
    pub recorder: usize,
    /// The sink writes the products of the queue's GPU stage (one record per batch), not
    /// its packets.
    pub products: bool,
    /// The sink's counters (of the shared sink, for a tap).
    pub counters: &'static SinkCounters,
    /// Consumer half (goes into the queue's pipeline); `None` for a shared recorder.
    pub sink: Option<RecordSink>,
    /// Writer half; `None` for a shared recorder's taps but the first.
    pub writer: Option<writer::Writer>,
    /// A shared recorder: this queue's tap (goes into the queue's pipeline).
    pub tap: Option<Tap>,
    /// A shared recorder, first queue: the merger of every tap into the sink.
    pub merger: Option<Merger>,
    /// A shared recorder, first queue: the queues whose taps feed the sink.
    pub shared_by: Vec<String>,
}

/// The sinks of every RX queue (in `res.rx` order): directories created, each sink's first
/// file opened (`O_DIRECT` where the file system supports it), buffers allocated. A
/// directory or file that cannot be created stops the run here, naming the path and key.
pub(crate) fn prepare(
    config: &Config,
    res: &Resources,
    output_dir: Option<&Path>,
    config_sha256: &str,
    frames: bool,
) -> Result<Vec<Vec<SinkParts>>, RuntimeError> {
    let start_unix_ns = crate::pacer::wall_clock_ns();
    let open = Opener {
        config,
        output_dir,
        config_sha256,
        frames,
        start_unix_ns,
        start: start_field(start_unix_ns),
    };
    let mut out: Vec<Vec<SinkParts>> = Vec::new();
    // Shared recorders, one group per (interface, recorder): where its writer's parts are
    // (queue index in `out`, part index), the sink, the taps' consumer ends.
    struct Group {
        key: (usize, usize),
        owner: (usize, usize),
        sink: RecordSink,
        taps: Vec<(
            rtdaq_core::slot_ring::SlotConsumer<'static, RecBuf>,
            &'static shared::TapCounters,
        )>,
    }
    let mut groups: Vec<Group> = Vec::new();
    for r in res.rx.iter() {
        let iface = &config.interfaces[r.interface];
        let qc = &iface.rx_queues[r.queue];
        let mut sinks = Vec::new();
        let stage = qc.gpu_stage.map(|s| &config.gpu_stages[s.0]);
        let products = stage.map(|s| s.record.as_slice()).unwrap_or_default();
        let queue = format!("{}.rx{}", iface.name, r.queue);
        for (rid, is_product) in qc
            .record
            .iter()
            .map(|r| (r, false))
            .chain(products.iter().map(|r| (r, true)))
        {
            let rec = &config.recorders[rid.0];
            if !rec.shared {
                let label = match (is_product, stage) {
                    (true, Some(st)) => format!("{queue} gpu_stage {}", st.name),
                    _ => queue.clone(),
                };
                let (sink, w, counters) =
                    open.sink(r.interface, &qc.id.to_string(), rid.0, label)?;
                sinks.push(SinkParts {
                    recorder: rid.0,
                    products: is_product,
                    counters,
                    sink: Some(sink),
                    writer: Some(w),
                    tap: None,
                    merger: None,
                    shared_by: Vec::new(),
                });
                continue;
            }
            let gk = (r.interface, rid.0);
            let (g, created) = match groups.iter().position(|g| g.key == gk) {
                Some(g) => (g, false),
                None => {
                    let (sink, w, counters) = open.sink(
                        r.interface,
                        "all",
                        rid.0,
                        format!("{} (shared)", iface.name),
                    )?;
                    groups.push(Group {
                        key: gk,
                        owner: (out.len(), sinks.len()),
                        sink,
                        taps: Vec::new(),
                    });
                    sinks.push(SinkParts {
                        recorder: rid.0,
                        products: false,
                        counters,
                        sink: None,
                        writer: Some(w),
                        tap: None,
                        merger: None,
                        shared_by: Vec::new(),
                    });
                    (groups.len() - 1, true)
                }
            };
            let counters = groups[g].sink.counters();
            let tc: &'static shared::TapCounters = Box::leak(Box::default());
            // The tap's memory (`buffers` x `buffer_mib`) in small slots: a tap hands a partly
            // filled slot over every 2 ms, and each hand-over takes a whole slot.
            let largest: usize = qc
                .memory_regions
                .iter()
                .map(|r| config.memory_regions[r.0].buf_size as usize)
                .sum();
            let slot = shared::slot_bytes(largest, rec.buffer_bytes);
            let slots = shared::slot_count(rec.buffer_bytes * rec.buffers as usize, slot);
            let (prod, cons) = open.ring_of(slots, slot, rid.0)?.split();
            groups[g].taps.push((cons, tc));
            let tap = Tap::new(prod, tc, counters, slot, frames);
            let (qi, pi) = groups[g].owner;
            let owner = if qi == out.len() {
                &mut sinks[pi]
            } else {
                &mut out[qi][pi]
            };
            owner.shared_by.push(queue.clone());
            if created {
                // The queue that opened the shared sink carries its tap in the same parts.
                owner.tap = Some(tap);
            } else {
                sinks.push(SinkParts {
                    recorder: rid.0,
                    products: false,
                    counters,
                    sink: None,
                    writer: None,
                    tap: Some(tap),
                    merger: None,
                    shared_by: Vec::new(),
                });
            }
        }
        out.push(sinks);
    }
    for g in groups {
        let (qi, pi) = g.owner;
        out[qi][pi].merger = Some(Merger::new(g.taps, g.sink));
    }
    Ok(out)
}

/// Opens sinks for `prepare`: directories, first files, buffer rings.
struct Opener<'a> {
    config: &'a Config,
    output_dir: Option<&'a Path>,
    config_sha256: &'a str,
    frames: bool,
    start_unix_ns: u64,
    start: String,
}

impl Opener<'_> {
    /// A ring of the recorder's buffers.
    fn ring(
        &self,
        rec: &Recorder,
        rid: usize,
    ) -> Result<&'static mut SlotRing<'static, RecBuf>, RuntimeError> {
        self.ring_of(rec.buffers as usize, rec.buffer_bytes, rid)
    }

    /// A ring of `n` buffers of `bytes` (recorder `rid`).
    fn ring_of(
        &self,
        n: usize,
        bytes: usize,
        rid: usize,
    ) -> Result<&'static mut SlotRing<'static, RecBuf>, RuntimeError> {
        let bufs: Vec<RecBuf> = (0..n).map(|_| RecBuf::new(bytes)).collect();
        let ring = SlotRing::new(Box::leak(bufs.into_boxed_slice())).map_err(|e| {
            RuntimeError::Record {
                key: format!("recorders[{rid}].buffers"),
                path: String::new(),
                message: e.to_string(),
            }
        })?;
        Ok(Box::leak(Box::new(ring)))
    }

    /// The sink of recorder `rid` on interface `i` (`queue`: the `{queue}` field): the
    /// directory created, the first file opened, the buffers allocated.
    fn sink(
        &self,
        i: usize,
        queue: &str,
        rid: usize,
        label: String,
    ) -> Result<(RecordSink, writer::Writer, &'static SinkCounters), RuntimeError> {
        let config = self.config;
        let iface = &config.interfaces[i];
        let rec = &config.recorders[rid];
        let key = format!("recorders[{rid}]");
        let dir = self
            .output_dir
            .map_or_else(|| PathBuf::from(&rec.directory), Path::to_path_buf);
        let dir_key = if self.output_dir.is_some() {
            "--output-dir".to_string()
        } else {
            format!("{key}.directory")
        };
        std::fs::create_dir_all(&dir).map_err(|e| RuntimeError::Record {
            key: dir_key.clone(),
            path: dir.display().to_string(),
            message: format!("cannot create the output directory: {e}"),
        })?;
        let pattern = rec
            .file_name
            .replace("{config}", &config.name)
            .replace("{recorder}", &rec.name)
            .replace("{interface}", &iface.name)
            .replace("{queue}", queue)
            .replace("{start}", &self.start);
        let dst = match &iface.address {
            Address::Socket(u) => (u.ip.octets(), u.port),
            _ => ([0; 4], 0),
        };
        let format = AnyFormat::new(
            rec,
            Link {
                frames: self.frames,
                dst,
            },
        );
        let info = SinkInfo {
            key: key.clone(),
            recorder: rec.clone(),
            queue: label,
            naming: FileNaming { dir, pattern },
            config_name: config.name.clone(),
            config_sha256: self.config_sha256.to_string(),
            start_unix_ns: self.start_unix_ns,
        };
        let counters: &'static SinkCounters = Box::leak(Box::default());
        let (prod, cons) = self.ring(rec, rid)?.split();
        let w =
            writer::Writer::open(info, format.clone(), cons, counters).map_err(|(path, e)| {
                RuntimeError::Record {
                    key: dir_key.clone(),
                    path,
                    message: e,
                }
            })?;
        Ok((RecordSink::new(rec, format, prod, counters), w, counters))
    }
}

/// The report of one sink.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SinkReport {
    /// Recorder name.
    pub recorder: String,
    /// `pcap`, `raw` or `dada`.
    pub format: String,
    /// What one record is: `packets` (a queue's packets), or `batches` (a GPU stage's
    /// products, one record per batch).
    #[serde(default = "packets_unit")]
    pub unit: String,
    /// Packets one unrecorded record stands for when the run judges its loss: 1, or the GPU
    /// stage's `packets_per_batch` (an upper bound: a timed-out batch holds fewer).
    #[serde(default = "one")]
    pub packets_per_record: u64,
    /// Files written, in order.
    pub files: Vec<FileReport>,
    /// Records on disk (packets, or batches of a GPU stage's products).
    pub packets: u64,
    /// Bytes on disk (file headers included).
    pub bytes: u64,
    /// Records not written, by reason: `record_full` (no free buffer: the writer was
    /// behind), `record_error` (a write error; see `error`).
    pub dropped: std::collections::BTreeMap<String, u64>,
    /// The first write error (path and reason), if any.
    pub error: Option<String>,
    /// Files were written with `O_DIRECT`.
    pub direct_io: bool,
    /// MB/s (10^6 bytes) while writing: bytes over the time spent in write calls.
    pub write_mb_s: f64,
    /// MB/s over the run.
    pub mb_s: f64,
    /// A shared sink (`shared = true`): the queues whose packets it holds, in arrival order
    /// (the report lists it under the first); empty for a queue's own sink.
    #[serde(default)]
    pub shared_by: Vec<String>,
    /// CPU time of the sink's writer thread, seconds.
    pub writer_cpu_s: f64,
}

fn one() -> u64 {
    1
}

fn packets_unit() -> String {
    "packets".into()
}

impl SinkReport {
    /// Records not written.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.values().sum()
    }

    /// Packets lost with the records not written.
    pub fn lost_packets(&self) -> u64 {
        self.dropped_total() * self.packets_per_record.max(1)
    }

    /// Builds the report of a sink from its counters and its writer's outcome;
    /// `batch_packets`: `Some(packets_per_batch)` for a sink of GPU-stage products.
    pub fn of(
        recorder: &Recorder,
        c: &SinkCounters,
        w: WriterOutcome,
        elapsed_s: f64,
        batch_packets: Option<u32>,
    ) -> SinkReport {
        let bytes = c.bytes.load(Relaxed);
        let mut dropped = std::collections::BTreeMap::new();
        dropped.insert(
            "record_full".to_string(),
            c.dropped_full.load(Relaxed) + c.dropped_tap.load(Relaxed),
        );
        dropped.insert(
            "record_error".to_string(),
            c.dropped_error.load(Relaxed) + c.dropped_error_writer.load(Relaxed),
        );
        SinkReport {
            recorder: recorder.name.clone(),
            format: recorder.format.as_str().to_string(),
            unit: if batch_packets.is_some() {
                "batches"
            } else {
                "packets"
            }
            .to_string(),
            packets_per_record: batch_packets.map_or(1, u64::from),
            files: w.files,
            packets: c.written.load(Relaxed),
            bytes,
            dropped,
            error: w.error,
            direct_io: w.direct_io,
            write_mb_s: if w.write_ns > 0 {
                bytes as f64 / (w.write_ns as f64 / 1e9) / 1e6
            } else {
                0.0
            },
            writer_cpu_s: w.cpu_ns as f64 / 1e9,
            mb_s: if elapsed_s > 0.0 {
                bytes as f64 / elapsed_s / 1e6
            } else {
                0.0
            },
            shared_by: Vec::new(),
        }
    }

    /// Names the queues of a shared sink.
    pub fn shared_by(mut self, queues: Vec<String>) -> Self {
        self.shared_by = queues;
        self
    }
}

impl std::fmt::Display for SinkReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "record {} ({}): {} {}, {} bytes in {} file{}, {:.1} MB/s ({:.0} MB/s writing{})",
            self.recorder,
            self.format,
            self.packets,
            self.unit,
            self.bytes,
            self.files.len(),
            if self.files.len() == 1 { "" } else { "s" },
            self.mb_s,
            self.write_mb_s,
            if self.direct_io {
                ", O_DIRECT"
            } else {
                ", buffered"
            }
        )?;
        let why: Vec<String> = self
            .dropped
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        if !why.is_empty() {
            write!(f, " · not recorded: {}", why.join(" "))?;
        }
        if !self.shared_by.is_empty() {
            write!(f, " · shared by {}", self.shared_by.join(", "))?;
        }
        if let Some(e) = &self.error {
            write!(f, " · error: {e}")?;
        }
        for file in &self.files {
            write!(f, "\n          {}", file.path)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
