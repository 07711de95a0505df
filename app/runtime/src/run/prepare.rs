//! Step 2 of a run: everything the queue threads will use, made before any of them starts
//! (after this step nothing on the data path allocates).

use super::plan::Plan;
use super::threads::{queue_name, spawn};
use crate::egress::EgressParts;
use crate::error::RuntimeError;
use crate::memory::{self, Resources};
use crate::record::SinkParts;
use crate::stages::chain::{queue_stages, QueueStages};
use crate::stages::validate::Validate;
use crate::validator::Validator;
use rtdaq_config::model::{Config, Generator, RxMode};
use rtdaq_core::traits::{Engine, EngineArgs};
use rtdaq_platform::rt;
use std::sync::atomic::Ordering::Release;
use std::thread::JoinHandle;

/// The replay file and how to send it (`[generator] replay`), its first window read.
pub(super) type Replay = (crate::replay::ReplayStream, rtdaq_config::model::Replay);

/// The run with its memory, stages and sinks made; no queue thread yet.
pub(super) struct Prepared<'o> {
    pub plan: Plan<'o>,
    pub res: Resources,
    /// Per RX queue (`res.rx` order): its chain of stages, and the guard that tells the
    /// queue's writers that no more buffers come when the chain is dropped.
    pub chains: Vec<(QueueStages, DoneOnDrop)>,
    /// Every record sink's writer (and a shared sink's merger), running.
    pub writers: Vec<WriterThread>,
    /// The PSRDADA rings: those rtdaq created (removed at the end), each queue's counters.
    pub rings: crate::dada_ring::Rings,
    /// Every egress sink's sender, running.
    pub egress: Vec<EgressThread>,
    /// The triggered dumps' histories (their threads start with the run).
    pub dumps: crate::dump::Dumps,
    /// The replay, its first window read.
    pub replay: Option<Replay>,
    /// The thread that streams the rest of the replay file.
    pub replay_reader: Option<JoinHandle<Result<(), RuntimeError>>>,
}

impl<'o> Plan<'o> {
    /// Locks memory, allocates every region, pool and counter, builds the GPU stages'
    /// pipelines, opens the record sinks' first files and starts their writers, builds each
    /// RX queue's chain of stages and reads the replay's first window.
    pub fn prepare<E>(self) -> Result<Prepared<'o>, RuntimeError>
    where
        E: Engine<'static, Config = EngineArgs<'static, Config>>,
    {
        let config = self.config;
        if config.rt.lock_memory {
            rt::lock_memory(config.rt.required)?;
        }
        let res = memory::allocate(config, config.rt.required && config.rt.lock_memory)?;
        // GPU stages (feature `gpu`): pipelines built before any thread starts.
        let gpu = crate::gpu_hook::prepare(config, &res.gpu_maps, res.rx, res.rx_stats)?;
        // Egress sinks: heap buffers allocated, sockets connected (before any file exists).
        let mut egress = crate::egress::prepare(config, &res)?;
        // PSRDADA rings: created (or found), locked for writing, headers written. Declared
        // in this order so that, when a later step fails, the writers (in `rings_sinks`) let
        // go of their rings before the rings rtdaq created are removed.
        let rings: crate::dada_ring::Rings;
        let rings_sinks;
        (rings_sinks, rings) = crate::dada_ring::prepare(config, &res, &self.opts.config_sha256)?;
        // Record sinks: directories created, first files opened, buffers allocated.
        let mut sinks = crate::record::prepare(
            config,
            &res,
            self.opts.output_dir.as_deref(),
            &self.opts.config_sha256,
            E::FRAMES,
        )?;
        // Triggered dumps: each queue's history allocated, the directories made.
        let (dump_stages, dumps) =
            crate::dump::prepare(config, &res, self.opts.output_dir.as_deref(), E::FRAMES)?;
        // The main thread leaves the queue threads' cores (where it can) before it spawns
        // the writers: an unpinned writer inherits that CPU set and so stays off them.
        keep_main_thread_off_queue_cores(config);
        let chains = chains(
            config,
            &res,
            &mut sinks,
            (rings_sinks, dump_stages, &mut egress),
            gpu,
        );
        let mut p = Prepared {
            plan: self,
            res,
            chains,
            writers: Vec::new(),
            rings,
            egress: Vec::new(),
            dumps,
            replay: None,
            replay_reader: None,
        };
        if let Err(e) = p
            .start_writers(&mut sinks)
            .and_then(|()| p.start_egress(&mut egress))
            .and_then(|()| p.dumps.start(config).map(drop))
            .and_then(|()| p.open_replay::<E>())
        {
            p.abandon();
            return Err(e);
        }
        Ok(p)
    }
}

/// Each RX queue's PSRDADA ring writer, dump stage (taken into its chain) and egress sinks.
type QueueSinks<'a> = (
    Vec<Option<crate::dada_ring::DadaSink>>,
    Vec<Option<crate::dump::DumpStage>>,
    &'a mut [Vec<EgressParts>],
);

/// Each RX queue's chain: validate, its record sinks and taps, its GPU stage (which gets
/// the sinks of its products).
fn chains(
    config: &Config,
    res: &Resources,
    sinks: &mut [Vec<SinkParts>],
    (mut rings, mut dumps, egress): QueueSinks<'_>,
    mut gpu: Vec<Option<crate::stages::chain::GpuStage>>,
) -> Vec<(QueueStages, DoneOnDrop)> {
    let mut out = Vec::with_capacity(res.rx.len());
    for (k, r) in res.rx.iter().enumerate() {
        let ring = rings.get_mut(k).and_then(Option::take);
        let dump = dumps.get_mut(k).and_then(Option::take);
        let (products, record) = by_products(
            sinks[k]
                .iter_mut()
                .filter_map(|p| p.sink.take().map(|s| (p.products, s))),
        );
        let taps: Vec<_> = sinks[k].iter_mut().filter_map(|p| p.tap.take()).collect();
        let (out_products, out_sinks) = by_products(
            egress[k]
                .iter_mut()
                .filter_map(|p| p.sink.take().map(|s| (p.products, s))),
        );
        let done = DoneOnDrop(
            record
                .iter()
                .chain(products.iter())
                .map(|s| s.counters())
                .collect(),
            taps.iter().map(|t| t.tap_counters()).collect(),
            out_sinks
                .iter()
                .chain(out_products.iter())
                .map(|s| s.counters())
                .collect(),
        );
        let iface = &config.interfaces[r.interface];
        let validator = Validator::with_streams(
            config.run.validate,
            iface.format,
            iface.max_streams as usize,
        );
        let mut stage = gpu[k].take();
        crate::gpu_hook::attach_products(
            &mut stage,
            crate::product_sinks::ProductSinks {
                record: products,
                egress: out_products,
            },
        );
        let validate = Validate::new(validator, &res.rx_stats[k]);
        out.push((
            queue_stages(validate, record, taps, (ring, dump, out_sinks), stage),
            done,
        ));
    }
    out
}

/// Splits a queue's sinks into those of its GPU stage's products (`true`) and its own.
fn by_products<T>(sinks: impl Iterator<Item = (bool, T)>) -> (Vec<T>, Vec<T>) {
    let (mut products, mut own) = (Vec::new(), Vec::new());
    for (is_product, s) in sinks {
        if is_product {
            products.push(s);
        } else {
            own.push(s);
        }
    }
    (products, own)
}

impl Prepared<'_> {
    /// Starts every sink's writer thread (and a shared sink's merger).
    fn start_writers(&mut self, sinks: &mut [Vec<SinkParts>]) -> Result<(), RuntimeError> {
        let (config, res) = (self.plan.config, &self.res);
        let writers = &mut self.writers;
        for (k, queue_sinks) in sinks.iter_mut().enumerate() {
            for parts in queue_sinks.iter_mut() {
                let r = &res.rx[k];
                let rec = &config.recorders[parts.recorder];
                let qc = &config.interfaces[r.interface].rx_queues[r.queue];
                let stage = qc
                    .gpu_stage
                    .filter(|_| parts.products)
                    .map(|s| &config.gpu_stages[s.0]);
                // A shared recorder's taps other than the first have no writer.
                let Some(w) = parts.writer.take() else {
                    continue;
                };
                let name = if rec.shared {
                    format!(
                        "{} record {} (shared by {})",
                        config.interfaces[r.interface].name,
                        rec.name,
                        parts.shared_by.join(", ")
                    )
                } else {
                    format!(
                        "{}{} record {}",
                        queue_name(config, r.interface, "rx", r.queue),
                        stage.map_or(String::new(), |s| format!(" gpu_stage {}", s.name)),
                        rec.name
                    )
                };
                let placement = rec.writer;
                let enter = move |what: &str| pin(placement, &format!("recorder {what}"));
                let h = spawn(&format!("rec-{}", rec.name), 1 << 20, move || {
                    enter("writer");
                    w.run()
                })?;
                // A shared sink's merger: on the writer's core and priority.
                let merger = match parts.merger.take() {
                    Some(m) => Some(spawn(&format!("mrg-{}", rec.name), 1 << 20, move || {
                        enter("merger");
                        m.run();
                    })?),
                    None => None,
                };
                writers.push(WriterThread {
                    name,
                    handle: h,
                    merger,
                    queue: k,
                    recorder: parts.recorder,
                    batch_packets: stage.map(|s| s.packets_per_batch_max()),
                    shared_by: parts.shared_by.clone(),
                    counters: parts.counters,
                });
            }
        }
        Ok(())
    }

    /// Starts every egress sink's sender thread (pinned when `egress_core` says so).
    fn start_egress(&mut self, egress: &mut [Vec<EgressParts>]) -> Result<(), RuntimeError> {
        let config = self.plan.config;
        for (k, queue_parts) in egress.iter_mut().enumerate() {
            for parts in queue_parts.iter_mut() {
                let Some(s) = parts.sender.take() else {
                    continue;
                };
                let eg = &config.egress[parts.egress];
                let name = s.label().to_string();
                let placement = eg.thread;
                let what = format!("{name} sender");
                let handle = spawn(&format!("egr-{}", eg.name), 1 << 20, move || {
                    pin(placement, &what);
                    s.run()
                })?;
                // A UCX sender connects on its own thread: the start waits for its word.
                #[cfg(feature = "ucx")]
                if let Some((rx, within)) = parts.ready.take() {
                    let heard = rx.recv_timeout(within);
                    let failed = match heard {
                        Ok(Ok(())) => None,
                        Ok(Err((key, message))) => Some((key, message)),
                        Err(_) => Some((
                            format!("egress[{}]", parts.egress),
                            format!("the UCX sender did not connect within {within:?}"),
                        )),
                    };
                    if let Some((key, message)) = failed {
                        let _ = handle.join();
                        return Err(RuntimeError::Egress { key, message });
                    }
                }
                let r = &self.res.rx[k];
                let stage = config.interfaces[r.interface].rx_queues[r.queue]
                    .gpu_stage
                    .filter(|_| parts.products)
                    .map(|s| &config.gpu_stages[s.0]);
                self.egress.push(EgressThread {
                    name,
                    handle,
                    queue: k,
                    egress: parts.egress,
                    batch_packets: stage.map(|s| s.packets_per_batch_max()),
                    counters: parts.counters,
                });
            }
        }
        Ok(())
    }

    /// Replay: its first window is read (and checked) before any thread starts; the reader
    /// thread that streams the rest runs off the queue cores.
    fn open_replay<E>(&mut self) -> Result<(), RuntimeError>
    where
        E: Engine<'static, Config = EngineArgs<'static, Config>>,
    {
        if let Some((mut stream, rp)) = open_replay::<E>(self.plan.config)? {
            self.replay_reader = stream.start_reader()?;
            self.replay = Some((stream, rp));
        }
        Ok(())
    }

    /// Unwinds the step: the chains are dropped (their `DoneOnDrop` guards tell the writers
    /// and mergers that no buffer comes), the writers and mergers end and are joined, and the files they opened are removed
    /// (they never got a packet).
    pub fn abandon(self) {
        drop(self.chains);
        for w in self.writers {
            if let Some(m) = w.merger {
                let _ = m.join();
            }
            if let Ok(out) = w.handle.join() {
                for f in out.files {
                    let _ = std::fs::remove_file(&f.path);
                    let _ = std::fs::remove_file(format!("{}.index.json", f.path));
                }
            }
        }
        for e in self.egress {
            let _ = e.handle.join();
        }
        self.rings.finish();
        drop(self.dumps.finish());
        // The replay's reader ends once its chunks' channels close (not waited for).
        drop(self.replay);
        drop(self.replay_reader);
    }
}

/// A recorder's writer thread.
pub(super) struct WriterThread {
    pub name: String,
    pub handle: JoinHandle<crate::record::WriterOutcome>,
    /// Index of the RX queue in `res.rx`.
    pub queue: usize,
    /// Index in `config.recorders`.
    pub recorder: usize,
    /// `Some(packets_per_batch)`: the sink writes a GPU stage's products.
    pub batch_packets: Option<u32>,
    /// A shared sink's merger thread (joined before the writer).
    pub merger: Option<JoinHandle<()>>,
    /// A shared sink: the queues feeding it.
    pub shared_by: Vec<String>,
    pub counters: &'static crate::record::SinkCounters,
}

/// Pins the calling helper thread (a writer, a merger, a sender) where `placement` says, at
/// its priority; without the privilege it warns, naming `what`, and runs unpinned.
fn pin(placement: Option<rtdaq_config::model::WriterPlacement>, what: &str) {
    let Some(p) = placement else { return };
    let req = rt::RtRequest {
        core: Some(p.core as usize),
        priority: p.priority,
        prefault_stack_kib: 0,
        required: false,
    };
    if let Err(e) = rt::enter_thread(&req) {
        log::warn!("{what}: {e}; it runs unpinned");
    }
}

/// An egress sink's sender thread (its result: its CPU time, ns).
pub(super) struct EgressThread {
    pub name: String,
    pub handle: JoinHandle<u64>,
    /// Index of the RX queue in `res.rx`.
    pub queue: usize,
    /// Index in `config.egress`.
    pub egress: usize,
    /// `Some(packets_per_batch)`: the sink sends a GPU stage's products.
    pub batch_packets: Option<u32>,
    pub counters: &'static crate::egress::EgressCounters,
}

/// Tells a queue's writers and senders that no more buffers come, however its consumer
/// thread ends (a panic or a run that never started included), so they close their files,
/// send what they have and end.
pub(super) struct DoneOnDrop(
    Vec<&'static crate::record::SinkCounters>,
    Vec<&'static crate::record::shared::TapCounters>,
    Vec<&'static crate::egress::EgressCounters>,
);

impl Drop for DoneOnDrop {
    fn drop(&mut self) {
        for c in &self.0 {
            c.producer_done.store(true, Release);
        }
        for t in &self.1 {
            t.done.store(true, Release);
        }
        for e in &self.2 {
            e.producer_done.store(true, Release);
        }
    }
}

/// The generator's replay file (`[generator] replay`), its first window read, or `None`.
fn open_replay<E>(
    config: &Config,
) -> Result<Option<(crate::replay::ReplayStream, rtdaq_config::model::Replay)>, RuntimeError>
where
    E: Engine<'static, Config = EngineArgs<'static, Config>>,
{
    let Some(g) = config.generator.as_ref() else {
        return Ok(None);
    };
    let Some(rp) = g.replay.clone() else {
        return Ok(None);
    };
    let q = &config.interfaces[g.interface.0].tx_queues[g.tx_queue.0 as usize];
    let max_len = q
        .memory_regions
        .iter()
        .map(|r| config.region(*r).buf_size as usize)
        .sum::<usize>();
    let window = g.replay_window_mib as usize * (1 << 20);
    let stream = crate::replay::open(&rp.path, E::FRAMES, max_len, rp.loops, window)?;
    log::info!(
        "replay {}: {}, {} loop(s), timing {:?}, through a {} MiB window",
        stream.path,
        stream.packets_per_pass.map_or_else(
            || "more than the window holds".to_string(),
            |n| format!("{n} packets")
        ),
        rp.loops,
        rp.timing,
        g.replay_window_mib
    );
    Ok(Some((stream, rp)))
}

/// Moves the main thread (and the helper threads it starts, which inherit its CPU mask; the
/// queue threads pin themselves) off every queue and consumer core. On a PREEMPT_RT kernel
/// the main thread's sleep would otherwise wait for a `SCHED_FIFO` 1 timer thread on a core
/// a busy queue thread never yields (see [`rt::keep_off_cores`]). When every allowed CPU is a
/// queue core, nothing changes.
fn keep_main_thread_off_queue_cores(config: &Config) {
    let mut cores = Vec::new();
    for i in &config.interfaces {
        for q in &i.rx_queues {
            cores.push(q.cpu_core);
            if let RxMode::Indirect { consumer_core } = q.mode {
                cores.push(consumer_core);
            }
        }
        cores.extend(i.tx_queues.iter().map(|q| q.cpu_core));
    }
    match rt::keep_off_cores(&cores) {
        Ok(Some(cpus)) => log::debug!("main thread runs on CPUs {cpus} (off the queue cores)"),
        Ok(None) => {}
        Err(e) => log::warn!("main thread stays where it is: {e}"),
    }
}

/// The generator of TX queue `queue` of interface `interface`, if it has one.
pub(super) fn generator_of(config: &Config, interface: usize, queue: usize) -> Option<&Generator> {
    config
        .generator
        .as_ref()
        .filter(|g| g.interface.0 == interface && g.tx_queue.0 as usize == queue)
}
