//! Live counters, once a second: one refreshing status line on a terminal, plain log lines
//! (`RUST_LOG`) otherwise. Runs on the main thread; reads the queue counters, never writes.

use crate::queue::stats::QueueStats;
use rtdaq_core::counters::CounterSnapshot;
use rtdaq_core::DropReason;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::sync::atomic::Ordering::Relaxed;

/// Per-queue previous snapshots, to print rates.
#[derive(Debug)]
pub struct Live {
    rx_prev: Vec<(CounterSnapshot, CounterSnapshot)>,
    tx_prev: Vec<CounterSnapshot>,
    rx_names: Vec<String>,
    tx_names: Vec<String>,
    tty: bool,
    last_ns: u64,
    /// Record sinks: `lo_udp.rx0 record pcap`, what their records are (`pkts`, `batches`)
    /// and their counters.
    sinks: Vec<(String, &'static str, &'static crate::record::SinkCounters)>,
}

fn rate(bytes: u64, pkts: u64, secs: f64) -> (f64, f64) {
    if secs <= 0.0 {
        return (0.0, 0.0);
    }
    (bytes as f64 * 8.0 / secs / 1e9, pkts as f64 / secs / 1e6)
}

fn drops_text(s: &CounterSnapshot) -> String {
    let mut t = String::new();
    for r in DropReason::ALL {
        let n = s.drop_count(r);
        if n > 0 {
            let _ = write!(t, " {}={n}", r.as_str());
        }
    }
    if t.is_empty() {
        t.push_str(" none");
    }
    t
}

impl Live {
    /// Starts the live view for queues with these names.
    pub fn new(rx_names: Vec<String>, tx_names: Vec<String>, now_ns: u64) -> Self {
        Live {
            rx_prev: vec![Default::default(); rx_names.len()],
            tx_prev: vec![Default::default(); tx_names.len()],
            rx_names,
            tx_names,
            tty: std::io::stderr().is_terminal(),
            last_ns: now_ns,
            sinks: Vec::new(),
        }
    }

    /// Adds the record sinks' progress to every update.
    pub fn with_sinks(
        mut self,
        sinks: Vec<(String, &'static str, &'static crate::record::SinkCounters)>,
    ) -> Self {
        self.sinks = sinks;
        self
    }

    /// Prints one update (rates since the previous one); returns its one-line summary (the
    /// terminal's status line: totals, rates, drops, gaps).
    pub fn tick(
        &mut self,
        rx: &[QueueStats],
        tx: &[QueueStats],
        now_ns: u64,
        elapsed_s: f64,
    ) -> String {
        let secs = (now_ns - self.last_ns) as f64 / 1e9;
        self.last_ns = now_ns;
        let mut lines = Vec::new();
        let (mut rg, mut rm, mut tg, mut tm, mut drops, mut gaps) = (0.0, 0.0, 0.0, 0.0, 0, 0);
        for (i, q) in rx.iter().enumerate() {
            let (io, cons) = (q.io.snapshot(), q.consumer.snapshot());
            let d = io.delta(&self.rx_prev[i].0);
            let (g, m) = rate(d.bytes, d.packets, secs);
            rg += g;
            rm += m;
            // Packets a GPU stage could not take (gpu_report::GpuCounters): counted as lost.
            let skipped = (
                q.gpu.not_in_region.load(Relaxed),
                q.gpu.no_slot.load(Relaxed),
            );
            drops += io.total_drops() + cons.total_drops() + skipped.0 + skipped.1;
            gaps += cons.seq_gaps;
            let gpu = if skipped.0 + skipped.1 > 0 {
                format!(
                    ", gpu stage skipped: not_in_region={} no_slot={}",
                    skipped.0, skipped.1
                )
            } else {
                String::new()
            };
            lines.push(format!(
                "{} rx {:.3} Gb/s {:.3} Mpps total {} pkts, gaps {} reordered {} dup {} corrupt {}{}, drops:{}{gpu}",
                self.rx_names[i], g, m, io.packets, cons.seq_gaps, cons.reordered, cons.duplicates,
                cons.corrupt, q.streams.summary(), drops_text(&io)
            ));
            self.rx_prev[i] = (io, cons);
        }
        for (i, q) in tx.iter().enumerate() {
            let io = q.io.snapshot();
            let d = io.delta(&self.tx_prev[i]);
            let (g, m) = rate(d.bytes, d.packets, secs);
            tg += g;
            tm += m;
            drops += io.total_drops();
            lines.push(format!(
                "{} tx {:.3} Gb/s {:.3} Mpps total {} pkts, drops:{}",
                self.tx_names[i],
                g,
                m,
                io.packets,
                drops_text(&io)
            ));
            self.tx_prev[i] = io;
        }
        let mut on_disk = 0;
        for (name, unit, c) in &self.sinks {
            let (full, error) = (
                c.dropped_full.load(Relaxed) + c.dropped_tap.load(Relaxed),
                c.dropped_error.load(Relaxed) + c.dropped_error_writer.load(Relaxed),
            );
            let bytes = c.bytes.load(Relaxed);
            on_disk += bytes;
            drops += full + error;
            lines.push(format!(
                "{name}: {} {unit} written, {:.1} MB on disk, not recorded: record_full={full} record_error={error}{}",
                c.written.load(Relaxed),
                bytes as f64 / 1e6,
                if c.failed.load(Relaxed) { " (FAILED: see the error above)" } else { "" }
            ));
        }
        let rec = if self.sinks.is_empty() {
            String::new()
        } else {
            format!(" | recorded {:.1} MB", on_disk as f64 / 1e6)
        };
        let summary = format!(
            "[{elapsed_s:6.1} s] rx {rg:.3} Gb/s {rm:.3} Mpps | tx {tg:.3} Gb/s {tm:.3} Mpps | drops {drops} | gaps {gaps}{rec}"
        );
        if self.tty {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{summary}");
            let _ = err.flush();
        } else {
            for l in lines {
                log::info!("[{elapsed_s:.1} s] {l}");
            }
        }
        summary
    }

    /// Ends the status line (terminal) before the final report.
    pub fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}
