//! Turns the raw results of a run into its [`RunReport`]: per-queue figures, totals, the loss
//! verdict and the exit code.

use crate::observe::report::{
    loss_exit_code, rfc3339_utc, DirectionReport, QueueReport, RunReport,
};
use crate::run::{Identity, RunResults};
use crate::validator::Validator;
use rtdaq_config::model::{Config, Validation};
use std::sync::atomic::Ordering::Acquire;

/// Builds the report of a finished run.
///
/// Loss: when the run's own generator sent the traffic, every sequence number it used must
/// arrive (`lost = max(gaps, generated − unique received)`, which also catches tail loss);
/// for traffic from an external sender, `lost` is the sequence gaps left at the end (loss after
/// the last received packet of a stream is invisible then). Either way, packets of streams
/// beyond a queue's stream table (`streams_overflow`) count as lost: nothing checked them. A run without RX queues (a pure
/// sender) reports `lost = 0`: its traffic is judged by the receiver's report.
pub fn build(config: &Config, id: &Identity, r: &RunResults) -> RunReport {
    let elapsed = r.elapsed_s;
    let mut merged = Validator::new();
    let mut rx = Vec::new();
    for (k, q) in r.resources.rx.iter().enumerate() {
        let iface = &config.interfaces[q.interface];
        let qc = &iface.rx_queues[q.queue];
        let v = &r.validators[k];
        merged.merge(v);
        let rs = &r.resources.rx_stats[k];
        let mut snap = rs.io.snapshot();
        let consumer = r.resources.rx_stats[k].consumer.snapshot();
        for reason in rtdaq_core::DropReason::ALL {
            snap.drops[reason.index()] += consumer.drop_count(reason);
        }
        let stats = v.finish();
        rx.push(
            QueueReport::rx(
                iface.name.clone(),
                qc.id,
                Some(qc.cpu_core),
                &snap,
                elapsed,
                Some(&stats),
            )
            .with_cpu(rs.io_cpu_ns.load(Acquire), rs.consumer_cpu_ns.load(Acquire))
            .with_stall(rs.stall.summary(r.start_ns))
            .with_jitter(&rs.stall, Some(&rs.consumer_stall))
            .with_ring_wait(rs.ring_wait_ns.load(Acquire))
            .with_timestamps(rs.ts_sources.load(Acquire))
            .with_gpu(crate::observe::gpu_report::GpuReport::of(
                config,
                q.interface,
                q.queue,
                &rs.gpu,
            ))
            .with_record(r.record.get(k).cloned().unwrap_or_default())
            .with_egress(r.egress.get(k).cloned().unwrap_or_default())
            .with_dada_ring(r.dada.get(k).cloned().flatten())
            .with_streams(v),
        );
    }
    let mut tx = Vec::new();
    for (k, q) in r.resources.tx.iter().enumerate() {
        let iface = &config.interfaces[q.interface];
        let qc = &iface.tx_queues[q.queue];
        let ts = &r.resources.tx_stats[k];
        let snap = ts.io.snapshot();
        tx.push(
            QueueReport::tx(iface.name.clone(), qc.id, Some(qc.cpu_core), &snap, elapsed)
                .with_cpu(ts.io_cpu_ns.load(Acquire), 0)
                .with_stall(ts.stall.summary(r.start_ns))
                .with_jitter(&ts.stall, None)
                .with_pacing(ts.pacing.load(Acquire), ts.pacing_detail.load(Acquire)),
        );
    }
    let total = merged.finish();
    let generated: u64 = r.generated.iter().map(|g| g.generated).sum();
    let lost = match (config.run.validate, generated > 0) {
        // Nothing received here (a TX-only deployment such as a generator feeding another
        // host): loss is judged by the receiver's report, not this one.
        _ if r.resources.rx.is_empty() => 0,
        // Nothing was sequence-checked: only the count against what was sent tells loss.
        (Validation::Count, true) => generated.saturating_sub(total.received),
        (Validation::Count, false) => 0,
        (_, true) => total.lost_against(generated),
        // An external sender: the gaps, and the packets of streams beyond the table (their
        // completeness is unknown).
        (_, false) => total.lost_against(0),
    };
    // Packets a GPU stage dropped never reached the GPU: lost to the deployment.
    let (lost, gpu_failed) = judge(&rx, lost);
    // Packets a record sink could not write are lost to the deployment too.
    let lost = lost + not_recorded(&rx);
    // So are payloads an egress sink could not send, or a PSRDADA ring could not take.
    let lost = lost + not_sent(&rx) + not_in_ring(&rx);
    let loss_tolerance = config.run.loss_tolerance;
    RunReport {
        engine: id.engine.to_string(),
        platform: id.platform.to_string(),
        config_name: config.name.clone(),
        config_sha256: id.config_sha256.clone(),
        rtdaq_version: id.version.to_string(),
        started_at: rfc3339_utc(r.started_at_unix_ns),
        started_at_unix_ns: r.started_at_unix_ns,
        duration_s: elapsed,
        stopped_by_signal: r.interrupted,
        bytes_are: if r.frames { "frame" } else { "payload" }.to_string(),
        // A panicked queue thread fails the run whatever its counts say.
        exit_code: loss_exit_code(lost, loss_tolerance)
            .max(u8::from(gpu_failed || !r.failed_threads.is_empty())),
        loss_tolerance,
        lost,
        io_thread_allocations: r.io_thread_allocations,
        rx: DirectionReport::rx(rx, elapsed, Some(total.latency)),
        tx: DirectionReport::tx(tx, elapsed),
        ports: r
            .ports
            .iter()
            .map(|p| {
                let name = config
                    .interfaces
                    .get(p.interface)
                    .map_or_else(|| p.port.clone(), |i| i.name.clone());
                crate::observe::report::PortReport::from_stats(name, p)
            })
            .collect(),
        nics: r.nics.clone(),
        time: r.time.clone(),
        cpu_steal_s: r.cpu_steal_s.clone(),
        failed_threads: r.failed_threads.clone(),
        dumps: r.dumps.clone(),
    }
}

/// `(lost + packets the GPU stages dropped or skipped, any stage failed)` over the RX queue
/// reports: a packet that never reached the GPU is lost to the deployment.
pub(crate) fn judge(rx: &[QueueReport], lost: u64) -> (u64, bool) {
    let gpus = || rx.iter().filter_map(|q| q.gpu.as_ref());
    (
        lost + gpus()
            .map(|g| g.packets_dropped + g.not_in_region + g.no_slot)
            .sum::<u64>(),
        gpus().any(crate::observe::gpu_report::GpuReport::failed),
    )
}

/// Payloads the queues' PSRDADA rings did not take: lost to their readers.
fn not_in_ring(rx: &[QueueReport]) -> u64 {
    rx.iter()
        .filter_map(|q| q.dada_ring.as_ref())
        .map(crate::dada_ring::DadaReport::dropped_total)
        .sum()
}

/// Packets the queues' egress sinks did not send: lost to the deployment (a GPU product not
/// sent counts as its stage's `packets_per_batch`).
fn not_sent(rx: &[QueueReport]) -> u64 {
    rx.iter()
        .flat_map(|q| q.egress.iter())
        .map(crate::egress::EgressReport::lost_packets)
        .sum()
}

/// Packets the queues' sinks did not record: lost to the deployment (a GPU product not
/// written counts as its stage's `packets_per_batch`).
fn not_recorded(rx: &[QueueReport]) -> u64 {
    rx.iter()
        .flat_map(|q| q.record.iter())
        .map(crate::record::SinkReport::lost_packets)
        .sum()
}
