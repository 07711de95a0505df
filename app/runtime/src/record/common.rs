//! What a record sink's consumer half and writer half share: counters, file naming, the
//! writer's settings, alignment and the DADA header size (a leaf of `record`).

use rtdaq_config::model::Recorder;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Alignment of buffer memory, write sizes and file offsets for `O_DIRECT` (covers 512- and
/// 4096-byte logical blocks).
pub const ALIGN: usize = 4096;

/// Counters of one sink, shared by its consumer and its writer (one writer per field).
#[derive(Debug, Default)]
pub struct SinkCounters {
    /// Packets not recorded: no free buffer (consumer).
    pub dropped_full: AtomicU64,
    /// Packets not recorded by the taps of a shared sink: no free tap buffer (each tap adds
    /// its own, hence `fetch_add`).
    pub dropped_tap: AtomicU64,
    /// Packets not recorded after a write error (consumer after the writer failed; the
    /// writer counts those of buffers it could not write in `dropped_error_writer`).
    pub dropped_error: AtomicU64,
    /// Packets of buffers the writer could not write.
    pub dropped_error_writer: AtomicU64,
    /// Packets whose records are on disk (writer).
    pub written: AtomicU64,
    /// Bytes on disk, file headers included (writer).
    pub bytes: AtomicU64,
    /// Raised by the writer after a write error: the consumer stops filling buffers.
    pub failed: AtomicBool,
    /// Raised by the consumer after its last buffer went to the writer.
    pub producer_done: AtomicBool,
    /// The writer thread's turns (the systemd watchdog watches them: a write that hangs
    /// stops the pings).
    pub writer_stall: crate::stall::StallWatch,
    /// A shared sink's merger thread's turns.
    pub merger_stall: crate::stall::StallWatch,
}

impl SinkCounters {
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.store(c.load(Relaxed) + n, Relaxed);
    }
}

/// Where a sink's files go and what they are called.
#[derive(Debug, Clone)]
pub struct FileNaming {
    /// Output directory.
    pub dir: PathBuf,
    /// `file_name` with every field but `{index}` filled in.
    pub pattern: String,
}

impl FileNaming {
    /// Path of file number `index`.
    pub fn path(&self, index: u32) -> PathBuf {
        self.dir
            .join(self.pattern.replace("{index}", &format!("{index:04}")))
    }
}

/// What a sink's writer needs besides its buffers (built before the run).
#[derive(Debug, Clone)]
pub struct SinkInfo {
    /// `recorders[k]`.
    pub key: String,
    /// The recorder's config.
    pub recorder: Recorder,
    /// The queue (`lo_udp.rx0`).
    pub queue: String,
    /// File names.
    pub naming: FileNaming,
    /// DADA header values that depend on the run: config name and SHA-256, UTC start.
    pub config_name: String,
    /// SHA-256 of the config text.
    pub config_sha256: String,
    /// Wall-clock start, ns since the epoch.
    pub start_unix_ns: u64,
}

/// The UTC start time as the `{start}` field: `20261201T125309Z`.
pub fn start_field(unix_ns: u64) -> String {
    let t = crate::pacer::rfc3339_utc(unix_ns);
    // 2026-12-01T12:53:09.123456789Z -> 20261201T125309Z
    let date: String = t.get(..10).unwrap_or_default().replace('-', "");
    let time: String = t.get(11..19).unwrap_or_default().replace(':', "");
    format!("{date}T{time}Z")
}

/// Bytes of a DADA header.
pub const DADA_HEADER_LEN: usize = 4096;
