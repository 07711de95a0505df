//! GPU stage counters and their report section (compiled with and without the `gpu`
//! feature: the report format does not depend on it).
//!
//! A queue with `gpu_stage = "name"` gets a `gpu` object in its JSON report entry and a
//! `gpu:` line in the text report:
//!
//! ```text
//! gpu: { stage, gpu, mode, conversion, workload, checksum (bool),
//!        batches_submitted, batches_completed, batches_dropped, batches_timed_out,
//!        packets, packets_dropped, missing, duplicates, foreign,
//!        checksum_ok, checksum_mismatch, errors, not_in_region, no_slot }
//! ```
//! `packets` went to the GPU in accepted batches; `packets_dropped` were in batches the
//! pipeline refused because `depth` batches were in flight (also counted as the queue's
//! `gpu_busy` drops and as lost: they never reached the GPU). `missing` counts output slots
//! zero-filled (a lost packet, or a partial batch handed over at the queue's timeout).
//! `errors` counts CUDA failures (each fails the run, like a checksum mismatch).
//! `not_in_region` and `no_slot` count packets the stage could not take (outside its mapped
//! region; no sequence header in a reorder stage): they count as lost, like
//! `packets_dropped`.

use rtdaq_config::model::{BatchMode, Config};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Live counters of one queue's GPU stage; one writer (the thread that drives the stage).
#[derive(Debug, Default)]
pub struct GpuCounters {
    /// Batches accepted by the pipeline.
    pub batches_submitted: AtomicU64,
    /// Batches the GPU finished.
    pub batches_completed: AtomicU64,
    /// Batches refused (`depth` in flight): dropped.
    pub batches_dropped: AtomicU64,
    /// Batches handed over partial because the queue's timeout passed.
    pub batches_timed_out: AtomicU64,
    /// Packets in accepted batches.
    pub packets: AtomicU64,
    /// Packets in dropped batches.
    pub packets_dropped: AtomicU64,
    /// Zero-filled output slots of completed batches.
    pub missing: AtomicU64,
    /// Packets that lost their slot to an earlier packet (reorder).
    pub duplicates: AtomicU64,
    /// Packets of another batch id (reorder).
    pub foreign: AtomicU64,
    /// Completed batches whose GPU checksum equals the CPU reference.
    pub checksum_ok: AtomicU64,
    /// Completed batches whose GPU checksum differs from the CPU reference.
    pub checksum_mismatch: AtomicU64,
    /// CUDA errors while submitting or polling.
    pub errors: AtomicU64,
    /// Packets the stage could not take because they are not in its mapped region (no
    /// device address): never with a config that passed `config check`, counted if it
    /// happens. Lost to the deployment.
    pub not_in_region: AtomicU64,
    /// Packets a reorder stage could not place: no rtdaq sequence header, so no output slot
    /// (the validator counts them malformed too). Lost to the deployment.
    pub no_slot: AtomicU64,
    /// The stage's progress for the systemd watchdog: "alive" while no batch is in flight or
    /// batches come back; a GPU that holds batches and completes none stops it.
    pub progress: crate::stall::StallWatch,
}

impl GpuCounters {
    /// Adds `n` (single writer: a load and a store, no read-modify-write).
    #[inline]
    pub fn add(c: &AtomicU64, n: u64) {
        c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
    }
}

/// The `gpu` section of an RX queue's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuReport {
    /// Stage name.
    pub stage: String,
    /// CUDA device ordinal.
    pub gpu: u32,
    /// `reorder-modulo`, `reorder-bit-fields` or `gather`.
    pub mode: String,
    /// Conversion (`none`, `int16le_to_fp32`, ...).
    pub conversion: String,
    /// Workload (`none`, `fft`, `gemm`).
    pub workload: String,
    /// Checksums compared.
    pub checksum: bool,
    /// See [`GpuCounters`].
    pub batches_submitted: u64,
    /// See [`GpuCounters`].
    pub batches_completed: u64,
    /// See [`GpuCounters`].
    pub batches_dropped: u64,
    /// See [`GpuCounters`].
    pub batches_timed_out: u64,
    /// See [`GpuCounters`].
    pub packets: u64,
    /// See [`GpuCounters`].
    pub packets_dropped: u64,
    /// See [`GpuCounters`].
    pub missing: u64,
    /// See [`GpuCounters`].
    pub duplicates: u64,
    /// See [`GpuCounters`].
    pub foreign: u64,
    /// See [`GpuCounters`].
    pub checksum_ok: u64,
    /// See [`GpuCounters`].
    pub checksum_mismatch: u64,
    /// See [`GpuCounters`].
    pub errors: u64,
    /// See [`GpuCounters`].
    #[serde(default)]
    pub not_in_region: u64,
    /// See [`GpuCounters`].
    #[serde(default)]
    pub no_slot: u64,
}

impl GpuReport {
    /// The report of RX queue `queue` of interface `interface`, when it has a GPU stage.
    pub fn of(config: &Config, interface: usize, queue: usize, c: &GpuCounters) -> Option<Self> {
        let qc = &config.interfaces[interface].rx_queues[queue];
        let s = &config.gpu_stages[qc.gpu_stage?.0];
        let l = |a: &AtomicU64| a.load(Relaxed);
        Some(GpuReport {
            stage: s.name.clone(),
            gpu: s.gpu,
            mode: match (s.mode, s.max_packets) {
                (BatchMode::ReorderModulo, None) => "reorder-modulo",
                (BatchMode::ReorderBitFields { .. }, None) => "reorder-bit-fields",
                (BatchMode::ReorderModulo, Some(_)) => "heaps-modulo",
                (BatchMode::ReorderBitFields { .. }, Some(_)) => "heaps-bit-fields",
                (BatchMode::Gather, _) => "gather",
            }
            .to_owned(),
            conversion: s.conversion.to_string(),
            workload: s.workload.as_str().to_owned(),
            checksum: s.checksum,
            batches_submitted: l(&c.batches_submitted),
            batches_completed: l(&c.batches_completed),
            batches_dropped: l(&c.batches_dropped),
            batches_timed_out: l(&c.batches_timed_out),
            packets: l(&c.packets),
            packets_dropped: l(&c.packets_dropped),
            missing: l(&c.missing),
            duplicates: l(&c.duplicates),
            foreign: l(&c.foreign),
            checksum_ok: l(&c.checksum_ok),
            checksum_mismatch: l(&c.checksum_mismatch),
            errors: l(&c.errors),
            not_in_region: l(&c.not_in_region),
            no_slot: l(&c.no_slot),
        })
    }

    /// True when the stage failed the run: a checksum mismatch, a CUDA error, or a batch
    /// still in flight at the end.
    pub fn failed(&self) -> bool {
        self.checksum_mismatch > 0
            || self.errors > 0
            || self.batches_completed != self.batches_submitted
    }
}

impl fmt::Display for GpuReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "gpu {} stage {} ({}, {}, workload {}): batches {} submitted, {} completed, {} dropped ({} partial at timeout); packets {} to the GPU, {} dropped; slots missing {}, duplicates {}, foreign {}",
            self.gpu,
            self.stage,
            self.mode,
            self.conversion,
            self.workload,
            self.batches_submitted,
            self.batches_completed,
            self.batches_dropped,
            self.batches_timed_out,
            self.packets,
            self.packets_dropped,
            self.missing,
            self.duplicates,
            self.foreign
        )?;
        if self.checksum {
            write!(
                f,
                "; checksum ok {} mismatch {}",
                self.checksum_ok, self.checksum_mismatch
            )?;
        }
        if self.errors > 0 {
            write!(f, "; CUDA errors {}", self.errors)?;
        }
        if self.not_in_region + self.no_slot > 0 {
            write!(
                f,
                "; packets skipped: not_in_region {}, no_slot {}",
                self.not_in_region, self.no_slot
            )?;
        }
        Ok(())
    }
}
