//! Step 5 of a run: watch it until the duration passes, a signal arrives or a queue thread
//! fails; then stop the generators, let the receivers drain, stop and join every thread,
//! close the files and collect what the report needs.

use super::prepare::{EgressThread, WriterThread};
use super::results::{RunResults, ThreadFailure};
use super::start::Running;
use super::threads::join_queue_thread;
use crate::generator::GenTotals;
use crate::memory::Resources;
use crate::pacer::now_ns;
use crate::validator::Validator;
use rtdaq_config::model::Config;
use rtdaq_core::traits::{Engine, EngineArgs, RxQueue};
use rtdaq_platform::alloc_audit;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::thread as std_thread;
use std::time::Duration;

/// A run whose watch ended: what it saw before the stop.
pub(super) struct Ending<'o, E: Engine<'static>>
where
    <E::Rx as RxQueue>::Burst: 'static,
{
    run: Running<'o, E>,
    /// A queue thread failed (the run stops without draining).
    crashed: bool,
    /// Per TX queue: its generator's totals (those that ended during the run).
    generated: Vec<GenTotals>,
    failed_threads: Vec<ThreadFailure>,
}

impl<'o, E> Running<'o, E>
where
    E: Engine<'static, Config = EngineArgs<'static, Config>>,
    <E::Rx as RxQueue>::Burst: 'static,
{
    /// Watches the run once every 20 ms (the live line, NIC and port counters and the
    /// status file once a second; the systemd watchdog every turn) until the duration
    /// passes, a signal arrives or a queue thread fails.
    pub fn watch(mut self) -> Ending<'o, E> {
        let duration_s = self.parked.prepared.plan.duration_s;
        let start_ns = self.start_ns;
        let deadline = (duration_s > 0.0).then(|| start_ns + (duration_s * 1e9) as u64);
        let mut next_tick = start_ns + 1_000_000_000;
        let mut crashed = false;
        let mut failed_threads = Vec::new();
        let mut generated = vec![GenTotals::default(); self.parked.tx_handles.len()];
        loop {
            let now = now_ns();
            if self.parked.prepared.plan.signalled.load(Relaxed)
                || deadline.is_some_and(|d| now >= d)
            {
                break;
            }
            // An RX thread ends only when told to: one that ended by itself panicked. Stop the
            // run now (its join below names the thread and the panic).
            if self.parked.rx_handles.iter().any(|(io, (_, c))| {
                c.is_finished() || io.as_ref().is_some_and(|(_, h)| h.is_finished())
            }) {
                log::error!("an RX queue thread ended during the run: stopping the run");
                crashed = true;
                break;
            }
            // A generator may end by itself (a count or duration limit): join it now, so that
            // one that panicked stops the run at once.
            for (slot, totals) in self.parked.tx_handles.iter_mut().zip(generated.iter_mut()) {
                if slot.as_ref().is_some_and(|(_, h)| h.is_finished()) {
                    if let Some((name, h)) = slot.take() {
                        let before = failed_threads.len();
                        *totals =
                            join_queue_thread(h, &name, GenTotals::default, &mut failed_threads);
                        crashed |= failed_threads.len() > before;
                    }
                }
            }
            if crashed {
                break;
            }
            // The watchdog sees every watched thread and every generator still running.
            let running_tx = self.parked.tx_handles.iter().map(Option::is_some);
            self.notifier.watchdog(
                now,
                self.watched.iter().map(|(n, s)| (n.as_str(), *s)).chain(
                    self.tx_names
                        .iter()
                        .zip(self.parked.prepared.res.tx_stats)
                        .zip(running_tx)
                        .filter(|(_, running)| *running)
                        .map(|((n, s), _)| (n.as_str(), &s.stall)),
                ),
            );
            if now >= next_tick {
                self.tick(now);
                next_tick += 1_000_000_000;
            }
            // Wake at the deadline itself (not up to 20 ms past it): the generators stop on time.
            let nap = deadline.map_or(20_000_000, |d| d.saturating_sub(now).clamp(1, 20_000_000));
            std_thread::sleep(Duration::from_nanos(nap));
        }
        Ending {
            run: self,
            crashed,
            generated,
            failed_threads,
        }
    }

    /// Once a second: the live line (and systemd's STATUS=), the NIC and port counters,
    /// the status file.
    fn tick(&mut self, now: u64) {
        let res = &self.parked.prepared.res;
        let line = self.live.tick(
            res.rx_stats,
            res.tx_stats,
            now,
            (now - self.start_ns) as f64 / 1e9,
        );
        self.notifier.status(line.trim());
        self.parked.prepared.plan.nics.poll();
        if let Some(t) = self.parked.prepared.plan.time.as_mut() {
            t.poll();
        }
        if let Some(p) = self.port_watch.as_mut() {
            p.poll();
        }
        let prepared = &mut self.parked.prepared;
        prepared.rings.log_readers(prepared.plan.config);
        self.write_status(false);
    }

    /// `--status-file`, once a second.
    fn write_status(&mut self, final_one: bool) {
        let path = self.parked.prepared.plan.opts.status_file.as_deref();
        write_status(path, &mut self.source, final_one);
    }
}

impl<E> Ending<'_, E>
where
    E: Engine<'static, Config = EngineArgs<'static, Config>>,
    <E::Rx as RxQueue>::Burst: 'static,
{
    /// Stops the senders, lets the receivers drain what is in flight (`run.drain_ms`, not
    /// after a crash), stops and joins every queue thread, lets the writers finish their
    /// files, closes the RX queues together and reads the end values of every counter.
    pub fn stop(self) -> RunResults {
        let Ending {
            run,
            crashed,
            mut generated,
            mut failed_threads,
        } = self;
        let Running {
            parked,
            _memberships,
            start_ns,
            started_at_unix_ns,
            steal_before,
            port_watch,
            mut live,
            mut source,
            serving,
            mut notifier,
            ..
        } = run;
        let mut prepared = parked.prepared;
        let (config, res) = (prepared.plan.config, prepared.res);
        notifier.stopping();
        parked.tx_stop.store(true, Release);
        for (slot, totals) in parked.tx_handles.into_iter().zip(generated.iter_mut()) {
            if let Some((name, h)) = slot {
                *totals = join_queue_thread(h, &name, GenTotals::default, &mut failed_threads);
            }
        }
        // The replay's reader ends with its generator; a file it could not read fails the run.
        if let Some(h) = prepared.replay_reader {
            let read = join_queue_thread(h, "replay reader", || Ok(()), &mut failed_threads);
            if let Err(e) = read {
                log::error!("{e}: the replay stopped there; the run fails");
                failed_threads.push(ThreadFailure {
                    thread: "replay reader".into(),
                    panic: e.to_string(),
                });
            }
        }
        if !crashed {
            std_thread::sleep(Duration::from_millis(u64::from(config.run.drain_ms)));
        }
        parked.rx_stop.store(true, Release);
        let mut validators = Vec::new();
        for (k, (io, (name, cons))) in parked.rx_handles.into_iter().enumerate() {
            let format = config.interfaces[res.rx[k].interface].format;
            if let Some((io_name, io)) = io {
                join_queue_thread(io, &io_name, || (), &mut failed_threads);
            }
            let validator = join_queue_thread(
                cons,
                &name,
                || Validator::with_format(config.run.validate, format),
                &mut failed_threads,
            );
            validators.push(validator);
        }
        // The consumers keep no more history: the dumps in progress finish, the triggers stop.
        let dumps = prepared.dumps.finish();
        // Every consumer has handed its last buffer over: the writers finish their files.
        let writer_elapsed = (now_ns() - start_ns) as f64 / 1e9;
        let record = finish_writers(
            config,
            &res,
            prepared.writers,
            writer_elapsed,
            &mut failed_threads,
        );
        // ... and the senders send their last heaps (and the end of stream).
        let egress = finish_egress(
            config,
            &res,
            prepared.egress,
            writer_elapsed,
            &mut failed_threads,
        );
        // The consumers ended their rings' data: the reports, then the rings rtdaq created
        // go (after their readers drained them).
        let dada = prepared
            .rings
            .queues
            .iter()
            .map(|q| {
                q.map(|(id, c, err)| {
                    let e = err.lock().ok().and_then(|g| g.clone());
                    crate::dada_ring::DadaReport::of(&config.dada_rings[id], c, e)
                })
            })
            .collect();
        prepared.rings.finish();
        // Every RX thread has stopped: close the RX queues together.
        drop(parked.graveyard);
        drop(parked.closed_rx.try_iter().collect::<Vec<_>>());
        let end_ns = now_ns();
        // The queues are closed (an XDP program detached): the NIC counters' end values.
        let nics = prepared.plan.nics.finish();
        let time = prepared
            .plan
            .time
            .take()
            .map(crate::observe::time::TimeWatch::finish);
        let queue_cores: std::collections::BTreeSet<u32> = config
            .interfaces
            .iter()
            .flat_map(|i| {
                let rx = i.rx_queues.iter().map(|q| q.cpu_core);
                rx.chain(i.tx_queues.iter().map(|q| q.cpu_core))
            })
            .collect();
        let cpu_steal_s =
            crate::stall::steal_between(&steal_before, &crate::stall::cpu_steal(), queue_cores);
        live.tick(
            res.rx_stats,
            res.tx_stats,
            end_ns,
            (end_ns - start_ns) as f64 / 1e9,
        );
        live.finish();
        write_status(prepared.plan.opts.status_file.as_deref(), &mut source, true);
        if let Some(s) = serving {
            s.stop();
        }
        RunResults {
            elapsed_s: (end_ns - start_ns) as f64 / 1e9,
            start_ns,
            cpu_steal_s,
            validators,
            record,
            egress,
            dada,
            dumps,
            generated,
            io_thread_allocations: alloc_audit::armed_allocations(),
            interrupted: prepared.plan.signalled.load(Relaxed),
            started_at_unix_ns,
            resources: res,
            frames: E::FRAMES,
            // After every queue thread ended (the handle kept the ports open for this read).
            ports: port_watch
                .map(|p| p.into_stats().port_stats())
                .unwrap_or_default(),
            nics,
            time,
            failed_threads,
        }
    }
}

/// `--status-file`: the JSON status of `source`, written atomically; after an error it is
/// dropped, so no more status is written.
fn write_status(
    path: Option<&std::path::Path>,
    source: &mut Option<crate::observe::metrics::Source>,
    final_one: bool,
) {
    let (Some(path), Some(src)) = (path, source.as_ref()) else {
        return;
    };
    if let Err(e) = crate::observe::metrics::write_status_file(path, src) {
        log::error!(
            "--status-file {}: {e}; no more status is written",
            path.display()
        );
        *source = None;
    } else if final_one {
        log::info!("status written to {}", path.display());
    }
}

/// Joins every egress sink's sender: each sink's report, per RX queue.
fn finish_egress(
    config: &Config,
    res: &Resources,
    senders: Vec<EgressThread>,
    elapsed_s: f64,
    failed: &mut Vec<ThreadFailure>,
) -> Vec<Vec<crate::egress::EgressReport>> {
    let mut out: Vec<Vec<crate::egress::EgressReport>> =
        res.rx.iter().map(|_| Vec::new()).collect();
    for s in senders {
        let cpu_ns = join_queue_thread(s.handle, &format!("{} sender", s.name), || 0, failed);
        let report = crate::egress::EgressReport::of(
            &config.egress[s.egress],
            s.counters,
            cpu_ns,
            elapsed_s,
            s.batch_packets,
        );
        if let Some(e) = &report.error {
            log::warn!(
                "{}: a send failed ({e}); its heaps are counted as not sent",
                s.name
            );
        }
        out[s.queue].push(report);
    }
    out
}

/// Joins every sink's merger and writer: each sink's report, per RX queue.
fn finish_writers(
    config: &Config,
    res: &Resources,
    writers: Vec<WriterThread>,
    elapsed_s: f64,
    failed: &mut Vec<ThreadFailure>,
) -> Vec<Vec<crate::record::SinkReport>> {
    let mut record: Vec<Vec<crate::record::SinkReport>> =
        res.rx.iter().map(|_| Vec::new()).collect();
    for w in writers {
        let rec = &config.recorders[w.recorder];
        // A shared sink: its merger ends once every tap is done and drained.
        if let Some(m) = w.merger {
            join_queue_thread(m, &format!("{} merger", w.name), || (), failed);
        }
        let out = join_queue_thread(w.handle, &w.name, Default::default, failed);
        record[w.queue].push(
            crate::record::SinkReport::of(rec, w.counters, out, elapsed_s, w.batch_packets)
                .shared_by(w.shared_by),
        );
    }
    record
}
