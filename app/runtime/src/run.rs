//! One run of the appliance: preallocate, open the engine, start one pinned thread per queue
//! (plus a consumer per indirect RX queue), print live counters, stop on the configured
//! duration or SIGINT/SIGTERM, drain, and report.

use crate::error::RuntimeError;
use crate::generator::GenTotals;
use crate::memory::{self, Resources};
use crate::pacer::{now_ns, PaceRate, Pacer};
use crate::queue::consume;
use crate::queue::unwrap::Unwrap;
use crate::stages::chain::{into_validator, queue_stages};
use crate::stages::validate::Validate;
use crate::stats::Live;
use crate::threads::{self, GenPlan, Placement};
use crate::validator::{PayloadGen, Validator};
use rtdaq_config::model::{Address, Config, Generator, GeneratorLimit, RxMode, Transport};
use rtdaq_core::slot_ring::{SlotConsumer, SlotProducer};
use rtdaq_core::traits::{Engine, EngineArgs, EngineStats, RxQueue};
use rtdaq_core::wire::{UdpChecksumMode, UdpFrameSpec};
use rtdaq_core::SlotRing;
use rtdaq_platform::{alloc_audit, netdev, rt};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Release};
use std::sync::{mpsc, Arc};
use std::thread::{self as std_thread, JoinHandle};
use std::time::Duration;

/// What identifies the binary in the report.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Engine compiled in.
    pub engine: &'static str,
    /// Platform compiled in.
    pub platform: &'static str,
    /// rtdaq version.
    pub version: &'static str,
    /// SHA-256 of the config text.
    pub config_sha256: String,
}

/// Command-line overrides of `[run]`, and what the run needs from the binary.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Overrides `run.duration_s` (0 = until SIGINT/SIGTERM).
    pub duration_s: Option<f64>,
    /// Overrides every recorder's `directory` (`rtdaq run --output-dir DIR`).
    pub output_dir: Option<std::path::PathBuf>,
    /// SHA-256 of the config text (written into DADA headers and indexes).
    pub config_sha256: String,
    /// Serve `/metrics` and `/status` there (`run.metrics`, `rtdaq run --metrics`).
    pub metrics: Option<std::net::SocketAddr>,
    /// The binary's version, commit, engine and platform (`rtdaq_build_info`; the config's
    /// name and SHA-256 are filled in by the run).
    pub build: crate::metrics::BuildInfo,
    /// Write the JSON status there every second, atomically (`rtdaq run --status-file`).
    pub status_file: Option<std::path::PathBuf>,
}

/// Raw results of the run, before the report is built.
#[derive(Debug)]
pub struct RunResults {
    /// Wall time from the start of the queue threads to their stop, seconds.
    pub elapsed_s: f64,
    /// Monotonic start of the run ([`crate::pacer::now_ns`]): stall times are given from it.
    pub start_ns: u64,
    /// CPU steal during the run on each queue core, seconds by core number
    /// ([`crate::stall::cpu_steal`]; empty when `/proc/stat` has none).
    pub cpu_steal_s: std::collections::BTreeMap<String, f64>,
    /// Validators of the RX queues (config order).
    pub validators: Vec<Validator>,
    /// The record sinks of each RX queue (config order; empty for queues that record
    /// nothing).
    pub record: Vec<Vec<crate::record::SinkReport>>,
    /// Generator totals per TX queue (config order; zero for queues without a generator).
    pub generated: Vec<GenTotals>,
    /// Allocations made by I/O and consumer threads after their set-up.
    pub io_thread_allocations: u64,
    /// True when SIGINT/SIGTERM ended the run early.
    pub interrupted: bool,
    /// Wall-clock start of the run, ns since the Unix epoch.
    pub started_at_unix_ns: u64,
    /// Resources (counters) of the run.
    pub resources: Resources,
    /// The engine moves whole Ethernet frames (`Engine::FRAMES`): byte counts are frame bytes.
    pub frames: bool,
    /// Per-port driver counters read after the queues stopped (engines with an
    /// [`EngineStats`] handle, see [`run_with_stats`]; empty otherwise).
    pub ports: Vec<rtdaq_core::traits::PortStats>,
    /// NIC counters of the interfaces' kernel network devices over the run ([`crate::nic`]).
    pub nics: Vec<crate::nic::NicReport>,
    /// Queue threads that panicked (each fails the run: its counts are incomplete).
    pub failed_threads: Vec<ThreadFailure>,
}

pub use crate::report::ThreadFailure;

/// The message of a thread's panic payload (`panic!("...")` gives a `&str` or a `String`).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// Joins a queue thread: its result, or `fallback` and a [`ThreadFailure`] naming the thread
/// and its panic.
fn join_queue_thread<T>(
    h: JoinHandle<T>,
    thread: &str,
    fallback: impl FnOnce() -> T,
    failed: &mut Vec<ThreadFailure>,
) -> T {
    match h.join() {
        Ok(v) => v,
        Err(payload) => {
            let panic = panic_message(payload.as_ref());
            log::error!("queue thread {thread} panicked: {panic}; the run fails");
            failed.push(ThreadFailure {
                thread: thread.to_string(),
                panic,
            });
            fallback()
        }
    }
}

/// Sets a flag when dropped: the I/O thread's `io_done` is raised also when it panics, so
/// its consumer drains the ring and ends instead of waiting forever.
struct RaiseOnDrop(&'static AtomicBool);

impl Drop for RaiseOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Release);
    }
}

// --- Port stats seam (optional engine ability, rtdaq_core::traits::EngineStats) ---

/// How the app takes an engine's [`EngineStats`] handle: called once on the opened engine,
/// before its queues are handed out; the handle is read after every queue thread ended.
pub type StatsHook<E> = fn(&E) -> Box<dyn EngineStats>;

/// [`run`] for an engine with port counters of its own: `stats` takes its handle, whose
/// [`EngineStats::port_stats`] fills [`RunResults::ports`] (and the report's `ports`).
pub fn run_with_stats<E>(
    config: &'static Config,
    opts: &RunOptions,
    stats: StatsHook<E>,
) -> Result<RunResults, RuntimeError>
where
    E: Engine<'static, Config = EngineArgs<'static, Config>>,
    <E::Rx as RxQueue>::Burst: 'static,
{
    run_inner::<E>(config, opts, Some(stats))
}
// --- end of the port stats seam ---

fn queue_name(config: &Config, interface: usize, dir: &str, q: usize) -> String {
    format!("{}.{dir}{q}", config.interfaces[interface].name)
}

/// Header bytes of an Ethernet frame around one payload, which a TX queue's `pacing_gbps`
/// counts: Ethernet 14 + IPv4 20 + UDP 8 (or TCP 20).
fn frame_overhead(address: &Address) -> usize {
    match address {
        Address::Socket(u) if u.transport == Transport::Tcp => 54,
        _ => 42,
    }
}

/// Runs `config` with engine `E` until the duration passes or a signal arrives.
pub fn run<E>(config: &'static Config, opts: &RunOptions) -> Result<RunResults, RuntimeError>
where
    E: Engine<'static, Config = EngineArgs<'static, Config>>,
    <E::Rx as RxQueue>::Burst: 'static,
{
    run_inner::<E>(config, opts, None)
}

fn run_inner<E>(
    config: &'static Config,
    opts: &RunOptions,
    stats: Option<StatsHook<E>>,
) -> Result<RunResults, RuntimeError>
where
    E: Engine<'static, Config = EngineArgs<'static, Config>>,
    <E::Rx as RxQueue>::Burst: 'static,
{
    let signalled = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&signalled)).map_err(RuntimeError::Signals)?;
    }
    // The metrics address is bound first: one in use stops the run before anything else.
    let endpoint = opts
        .metrics
        .or(config.run.metrics)
        .map(crate::metrics::Endpoint::bind)
        .transpose()?;
    // NIC counters: start values read before the engine opens its devices.
    let mut nics = crate::nic::NicWatch::start(config);
    if config.rt.lock_memory {
        rt::lock_memory(config.rt.required)?;
    }
    let res = memory::allocate(config, config.rt.required && config.rt.lock_memory)?;
    // GPU stages (feature `gpu`): pipelines built before any thread starts.
    let mut gpu_stages = crate::gpu_hook::prepare(config, &res.gpu_maps, res.rx, res.rx_stats)?;
    // Record sinks: directories created, first files opened, buffers allocated.
    let mut sinks = crate::record::prepare(
        config,
        &res,
        opts.output_dir.as_deref(),
        &opts.config_sha256,
        E::FRAMES,
    )?;
    // The main thread leaves the queue threads' cores (where it can) before it spawns the
    // writers: an unpinned writer inherits that CPU set and so stays off the queue cores.
    keep_main_thread_off_queue_cores(config);
    // Replay: its first window is read (and checked) before any thread starts; the reader
    // thread that streams the rest runs off the queue cores.
    let (replay, replay_reader) = match open_replay::<E>(config)? {
        Some((mut stream, rp)) => {
            let reader = stream.start_reader()?;
            (Some((stream, rp)), reader)
        }
        None => (None, None),
    };
    let mut writers: Vec<WriterThread> = Vec::new();
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
            let enter = move |what: &str| {
                if let Some(p) = placement {
                    let req = rt::RtRequest {
                        core: Some(p.core as usize),
                        priority: p.priority,
                        prefault_stack_kib: 0,
                        required: false,
                    };
                    if let Err(e) = rt::enter_thread(&req) {
                        log::warn!("recorder {what}: {e}; it runs unpinned");
                    }
                }
            };
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
    // Stop flags live for the process, like the queues.
    let tx_stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
    let rx_stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let mut threads_started = 0usize;
    // Each RX queue's threads with their names: (I/O thread of an indirect queue, consumer
    // or direct thread).
    type RxThreads = (
        Option<(String, JoinHandle<()>)>,
        (String, JoinHandle<Validator>),
    );
    let mut rx_handles: Vec<RxThreads> = Vec::new();
    let mut tx_handles: Vec<Option<(String, JoinHandle<GenTotals>)>> = Vec::new();
    let duration_s = opts.duration_s.unwrap_or(config.run.duration_s);
    let stack = thread_stack(config);

    // 1. Every queue thread starts first: it pins itself, takes its real-time priority,
    //    prefaults its stack and then parks on a one-shot channel until its queue arrives.
    //    The engine opens (binds sockets, maps rings) only after that, so the first read
    //    follows within microseconds: a sender that is already streaming does not overflow
    //    a socket buffer while threads are being created.
    let mut rx_feeds: Vec<RxFeed<E::Rx>> = Vec::new();
    // RX queues are closed together, after every RX thread stopped: closing one socket of an
    // SO_REUSEPORT group while the others still poll moves its flows to them mid-stream
    // (seen as sequence gaps of packets that were in fact received by the closed queue).
    let (graveyard, closed_rx) = mpsc::channel::<E::Rx>();
    for r in res.rx.iter() {
        let qc = &config.interfaces[r.interface].rx_queues[r.queue];
        let name = queue_name(config, r.interface, "rx", r.queue);
        let stats = &res.rx_stats[rx_feeds.len()];
        let place = |core: u32| Placement {
            core,
            priority: qc.rt_priority,
            prefault_stack_kib: config.rt.prefault_stack_kib,
            required: config.rt.required,
        };
        let k = rx_feeds.len();
        let (products, record): (Vec<_>, Vec<_>) = sinks[k]
            .iter_mut()
            .filter_map(|p| p.sink.take().map(|s| (p.products, s)))
            .partition(|(products, _)| *products);
        let record: Vec<_> = record.into_iter().map(|(_, s)| s).collect();
        let products: Vec<_> = products.into_iter().map(|(_, s)| s).collect();
        let taps: Vec<_> = sinks[k].iter_mut().filter_map(|p| p.tap.take()).collect();
        let done_guard = DoneOnDrop(
            record
                .iter()
                .chain(products.iter())
                .map(|s| s.counters())
                .collect(),
            taps.iter().map(|t| t.tap_counters()).collect(),
        );
        let validator = Validator::with_streams(
            config.run.validate,
            config.interfaces[r.interface].format,
            config.interfaces[r.interface].max_streams as usize,
        );
        let mut gpu = gpu_stages[k].take();
        crate::gpu_hook::attach_products(&mut gpu, products);
        let chain = queue_stages(Validate::new(validator, stats), record, taps, gpu);
        let unwrap = Unwrap::new(E::FRAMES);
        let busy = qc.busy_poll;
        let slots = threads::burst_slots(qc.ring_depth, qc.batch_size);
        match qc.mode {
            RxMode::Direct => {
                let (feed, parked) = mpsc::sync_channel::<E::Rx>(1);
                let (p, ready) = (place(qc.cpu_core), ready_tx.clone());
                let n = name.clone();
                let grave = graveyard.clone();
                let h = spawn(&name, stack, move || {
                    let _done = done_guard;
                    if !threads::enter(&n, p, &ready) {
                        return into_validator(chain);
                    }
                    let Ok(mut queue) = parked.recv() else {
                        return into_validator(chain);
                    };
                    let chain =
                        consume::rx_direct(&mut queue, chain, slots, stats, rx_stop, busy, unwrap);
                    store_cpu(&stats.io_cpu_ns);
                    let _ = grave.send(queue);
                    into_validator(chain)
                })?;
                threads_started += 1;
                rx_handles.push((None, (name.clone(), h)));
                rx_feeds.push(RxFeed::Direct(feed));
            }
            RxMode::Indirect { consumer_core } => {
                type Prod<Q> = SlotProducer<'static, <Q as RxQueue>::Burst>;
                type Cons<Q> = SlotConsumer<'static, <Q as RxQueue>::Burst>;
                let (feed_io, parked_io) = mpsc::sync_channel::<(E::Rx, Prod<E::Rx>)>(1);
                let (feed_cons, parked_cons) = mpsc::sync_channel::<Cons<E::Rx>>(1);
                let io_done: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
                let (p, ready) = (place(qc.cpu_core), ready_tx.clone());
                let n = name.clone();
                let grave = graveyard.clone();
                let batching = threads::Batching {
                    batch: qc.batch_size as usize,
                    timeout_ns: u64::from(qc.timeout_us) * 1000,
                };
                let io = spawn(&format!("{name}-io"), stack, move || {
                    // Raised however the thread ends (a panic included).
                    let _done = RaiseOnDrop(io_done);
                    if threads::enter(&n, p, &ready) {
                        if let Ok((mut queue, prod)) = parked_io.recv() {
                            threads::rx_indirect(&mut queue, prod, stats, rx_stop, busy, batching);
                            store_cpu(&stats.io_cpu_ns);
                            let _ = grave.send(queue);
                        }
                    }
                })?;
                let (p, ready) = (place(consumer_core), ready_tx.clone());
                let n = format!("{name} consumer");
                let c = spawn(&format!("{name}-cons"), stack, move || {
                    let _done = done_guard;
                    if !threads::enter(&n, p, &ready) {
                        return into_validator(chain);
                    }
                    let Ok(cons) = parked_cons.recv() else {
                        return into_validator(chain);
                    };
                    let chain = consume::rx_consumer(cons, chain, stats, io_done, busy, unwrap);
                    store_cpu(&stats.consumer_cpu_ns);
                    into_validator(chain)
                })?;
                threads_started += 2;
                rx_handles.push((
                    Some((format!("{name} I/O thread"), io)),
                    (format!("{name} consumer"), c),
                ));
                rx_feeds.push(RxFeed::Indirect {
                    io: feed_io,
                    consumer: feed_cons,
                    slots,
                    name,
                });
            }
        }
    }
    let mut tx_feeds: Vec<Option<TxFeed<E::Tx>>> = Vec::new();
    for (k, r) in res.tx.iter().enumerate() {
        let qc = &config.interfaces[r.interface].tx_queues[r.queue];
        let stats = &res.tx_stats[k];
        if generator_of(config, r.interface, r.queue).is_none() {
            tx_handles.push(None);
            tx_feeds.push(None);
            continue;
        }
        let name = queue_name(config, r.interface, "tx", r.queue);
        let p = Placement {
            core: qc.cpu_core,
            priority: qc.rt_priority,
            prefault_stack_kib: config.rt.prefault_stack_kib,
            required: config.rt.required,
        };
        let (feed, parked) = mpsc::sync_channel::<(E::Tx, GenPlan)>(1);
        let (ready, n, busy) = (ready_tx.clone(), name.clone(), qc.busy_poll);
        let h = spawn(&name, stack, move || {
            if !threads::enter(&n, p, &ready) {
                return GenTotals::default();
            }
            let Ok((queue, plan)) = parked.recv() else {
                return GenTotals::default();
            };
            let t = threads::tx_generator(queue, plan, tx_stop, busy, &stats.stall);
            store_cpu(&stats.io_cpu_ns);
            t
        })?;
        threads_started += 1;
        tx_handles.push(Some((format!("{name} generator"), h)));
        tx_feeds.push(Some(feed));
    }
    drop(ready_tx);

    // Every thread reports its real-time set-up once; any refusal stops the run.
    let mut startup_error = None;
    for _ in 0..threads_started {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => startup_error = startup_error.or(Some(e)),
            Err(_) => break,
        }
    }

    // 2. Join the raw interfaces' multicast groups (held until the run ends), open the
    //    engine and hand each parked thread its queue (RX first, then the generators). A
    //    failure drops the feeds: parked threads wake up and return.
    let mut _memberships = None;
    let opened = match startup_error {
        None => match crate::membership::join(config) {
            Ok(m) => {
                _memberships = Some(m);
                open_and_feed::<E>(config, &res, rx_feeds, tx_feeds, stats, replay)
            }
            Err(e) => Err(e),
        },
        Some(message) => Err(RuntimeError::Thread {
            queue: "start-up".into(),
            message,
        }),
    };
    let start_ns = match &opened {
        Ok((t, _)) => *t,
        Err(_) => now_ns(),
    };
    let steal_before = crate::stall::cpu_steal();
    let started_at_unix_ns = crate::pacer::wall_clock_ns();
    if opened.is_ok() {
        // Tests and scripts wait for this line before they start a peer.
        log::info!(
            "queues running: {} RX, {} TX (engine {})",
            res.rx.len(),
            res.tx.len(),
            E::NAME
        );
    }
    let (opened, port_stats) = match opened {
        Ok((t, p)) => (Ok(t), p),
        Err(e) => (Err(e), None),
    };
    // An engine's own ports (DPDK): read once a second for /metrics and the live warnings.
    let mut port_watch = port_stats.map(|s| {
        crate::nic::PortWatch::new(
            s,
            config.interfaces.iter().map(|i| i.name.clone()).collect(),
        )
    });
    if let Err(e) = opened {
        tx_stop.store(true, Release);
        rx_stop.store(true, Release);
        // The run never started; a thread that panicked meanwhile is logged by the join.
        let mut failed = Vec::new();
        for (name, h) in tx_handles.into_iter().flatten() {
            join_queue_thread(h, &name, GenTotals::default, &mut failed);
        }
        for (io, (name, cons)) in rx_handles {
            if let Some((io_name, io)) = io {
                join_queue_thread(io, &io_name, || (), &mut failed);
            }
            join_queue_thread(cons, &name, Validator::new, &mut failed);
        }
        // The sinks never got a packet: remove the files they opened.
        for w in writers {
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
        return Err(e);
    }
    let mut live = Live::new(
        res.rx
            .iter()
            .map(|r| queue_name(config, r.interface, "rx", r.queue))
            .collect(),
        res.tx
            .iter()
            .map(|r| queue_name(config, r.interface, "tx", r.queue))
            .collect(),
        start_ns,
    )
    .with_sinks(
        writers
            .iter()
            .map(|w| {
                let unit = if w.batch_packets.is_some() {
                    "batches"
                } else {
                    "pkts"
                };
                (w.name.clone(), unit, w.counters)
            })
            .collect(),
    );
    let watched = (endpoint.is_some() || opts.status_file.is_some()).then(|| {
        let label = |interface: usize, id: u16, gpu: bool| crate::metrics::QueueLabel {
            interface: config.interfaces[interface].name.clone(),
            queue: id,
            gpu,
        };
        crate::metrics::Source {
            build: crate::metrics::BuildInfo {
                config: config.name.clone(),
                config_sha256: opts.config_sha256.clone(),
                ..opts.build.clone()
            },
            rx: res
                .rx
                .iter()
                .zip(res.rx_stats)
                .map(|(r, st)| {
                    let q = &config.interfaces[r.interface].rx_queues[r.queue];
                    (label(r.interface, q.id, q.gpu_stage.is_some()), st)
                })
                .collect(),
            tx: res
                .tx
                .iter()
                .zip(res.tx_stats)
                .map(|(r, st)| {
                    let q = &config.interfaces[r.interface].tx_queues[r.queue];
                    (label(r.interface, q.id, false), st)
                })
                .collect(),
            sinks: writers
                .iter()
                .map(|w| (w.name.clone(), w.counters))
                .collect(),
            nics: (!nics.is_empty()).then(|| nics.shared()),
            ports: port_watch.as_ref().map(crate::nic::PortWatch::shared),
            start_ns,
        }
    });
    // Metrics are for watching the run, not part of it: a thread that cannot start is
    // reported and the run goes on.
    let serving = endpoint.zip(watched.clone()).and_then(|(ep, source)| {
        ep.serve(source)
            .map_err(|e| log::error!("{e}; the run goes on without the endpoint"))
            .ok()
    });
    let mut status = opts.status_file.as_deref().zip(watched.as_ref());
    let mut write_status = move |final_one: bool| {
        if let Some((path, source)) = status {
            if let Err(e) = crate::metrics::write_status_file(path, source) {
                log::error!(
                    "--status-file {}: {e}; no more status is written",
                    path.display()
                );
                status = None;
            } else if final_one {
                log::info!("status written to {}", path.display());
            }
        }
    };
    // systemd (Type=notify): every queue thread has its queue now.
    let mut notifier = crate::notify::Notifier::from_env();
    notifier.ready(&format!(
        "{} RX, {} TX queues running (engine {})",
        res.rx.len(),
        res.tx.len(),
        config.engine_kind().as_str()
    ));
    #[cfg(feature = "test-hooks")]
    crate::test_hooks::arm(start_ns);
    let rx_names: Vec<String> = res
        .rx
        .iter()
        .map(|r| queue_name(config, r.interface, "rx", r.queue))
        .collect();
    let tx_names: Vec<String> = res
        .tx
        .iter()
        .map(|r| queue_name(config, r.interface, "tx", r.queue))
        .collect();
    // What the systemd watchdog watches besides the generators: every thread that can stall
    // the data (RX I/O, consumers, record writers and mergers) and every GPU stage's
    // completions. A watch that never turned (a consumer of a direct queue, a stage of a
    // queue without one) is not watched.
    let watched = watched_threads(config, &res, &rx_names, &writers);
    let deadline = (duration_s > 0.0).then(|| start_ns + (duration_s * 1e9) as u64);
    let mut next_tick = start_ns + 1_000_000_000;
    let mut crashed = false;
    let mut failed_threads = Vec::new();
    let mut generated = vec![GenTotals::default(); tx_handles.len()];
    loop {
        let now = now_ns();
        if signalled.load(std::sync::atomic::Ordering::Relaxed)
            || deadline.is_some_and(|d| now >= d)
        {
            break;
        }
        // An RX thread ends only when told to: one that ended by itself panicked. Stop the
        // run now (its join below names the thread and the panic).
        if rx_handles.iter().any(|(io, (_, c))| {
            c.is_finished() || io.as_ref().is_some_and(|(_, h)| h.is_finished())
        }) {
            log::error!("an RX queue thread ended during the run: stopping the run");
            crashed = true;
            break;
        }
        // A generator may end by itself (a count or duration limit): join it now, so that
        // one that panicked stops the run at once.
        for (slot, totals) in tx_handles.iter_mut().zip(generated.iter_mut()) {
            if slot.as_ref().is_some_and(|(_, h)| h.is_finished()) {
                if let Some((name, h)) = slot.take() {
                    let before = failed_threads.len();
                    *totals = join_queue_thread(h, &name, GenTotals::default, &mut failed_threads);
                    crashed |= failed_threads.len() > before;
                }
            }
        }
        if crashed {
            break;
        }
        // The watchdog sees every watched thread and every generator still running.
        let running_tx = tx_handles.iter().map(Option::is_some);
        notifier.watchdog(
            now,
            watched.iter().map(|(n, s)| (n.as_str(), *s)).chain(
                tx_names
                    .iter()
                    .zip(res.tx_stats)
                    .zip(running_tx)
                    .filter(|(_, running)| *running)
                    .map(|((n, s), _)| (n.as_str(), &s.stall)),
            ),
        );
        if now >= next_tick {
            let line = live.tick(
                res.rx_stats,
                res.tx_stats,
                now,
                (now - start_ns) as f64 / 1e9,
            );
            notifier.status(line.trim());
            nics.poll();
            if let Some(p) = port_watch.as_mut() {
                p.poll();
            }
            write_status(false);
            next_tick += 1_000_000_000;
        }
        // Wake at the deadline itself (not up to 20 ms past it): the generators stop on time.
        let nap = deadline.map_or(20_000_000, |d| d.saturating_sub(now).clamp(1, 20_000_000));
        std_thread::sleep(Duration::from_nanos(nap));
    }
    // Stop the senders, let the receivers drain what is in flight, then stop them.
    notifier.stopping();
    tx_stop.store(true, Release);
    for (slot, totals) in tx_handles.into_iter().zip(generated.iter_mut()) {
        if let Some((name, h)) = slot {
            *totals = join_queue_thread(h, &name, GenTotals::default, &mut failed_threads);
        }
    }
    // The replay's reader ends with its generator; a file it could not read fails the run.
    if let Some(h) = replay_reader {
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
    rx_stop.store(true, Release);
    let mut validators = Vec::new();
    for (k, (io, (name, cons))) in rx_handles.into_iter().enumerate() {
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
    // Every consumer has handed its last buffer over: the writers finish their files.
    let writer_elapsed = (now_ns() - start_ns) as f64 / 1e9;
    let mut record: Vec<Vec<crate::record::SinkReport>> =
        res.rx.iter().map(|_| Vec::new()).collect();
    for w in writers {
        let rec = &config.recorders[w.recorder];
        // A shared sink: its merger ends once every tap is done and drained.
        if let Some(m) = w.merger {
            join_queue_thread(m, &format!("{} merger", w.name), || (), &mut failed_threads);
        }
        let out = join_queue_thread(w.handle, &w.name, Default::default, &mut failed_threads);
        record[w.queue].push(
            crate::record::SinkReport::of(rec, w.counters, out, writer_elapsed, w.batch_packets)
                .shared_by(w.shared_by),
        );
    }
    // Every RX thread has stopped: close the RX queues together.
    drop(graveyard);
    drop(closed_rx.try_iter().collect::<Vec<_>>());
    let end_ns = now_ns();
    // The queues are closed (an XDP program detached): the NIC counters' end values.
    let nics = nics.finish();
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
    write_status(true);
    if let Some(s) = serving {
        s.stop();
    }
    Ok(RunResults {
        elapsed_s: (end_ns - start_ns) as f64 / 1e9,
        start_ns,
        cpu_steal_s,
        validators,
        record,
        generated,
        io_thread_allocations: alloc_audit::armed_allocations(),
        interrupted: signalled.load(std::sync::atomic::Ordering::Relaxed),
        started_at_unix_ns,
        resources: res,
        frames: E::FRAMES,
        // After every queue thread ended (the handle kept the ports open for this read).
        ports: port_watch
            .map(|p| p.into_stats().port_stats())
            .unwrap_or_default(),
        nics,
        failed_threads,
    })
}

/// The threads (and GPU stages) the systemd watchdog watches, by name: every RX queue's I/O
/// thread, consumer and GPU stage, and every record sink's writer and merger.
fn watched_threads(
    config: &Config,
    res: &Resources,
    rx_names: &[String],
    writers: &[WriterThread],
) -> Vec<(String, &'static crate::stall::StallWatch)> {
    let mut w = Vec::new();
    for (k, (name, st)) in rx_names.iter().zip(res.rx_stats).enumerate() {
        w.push((name.clone(), &st.stall));
        w.push((format!("{name} consumer"), &st.consumer_stall));
        let r = &res.rx[k];
        if config.interfaces[r.interface].rx_queues[r.queue]
            .gpu_stage
            .is_some()
        {
            w.push((format!("{name} GPU stage (completions)"), &st.gpu.progress));
        }
    }
    for s in writers {
        w.push((format!("{} writer", s.name), &s.counters.writer_stall));
        w.push((format!("{} merger", s.name), &s.counters.merger_stall));
    }
    w
}

/// A recorder's writer thread.
struct WriterThread {
    name: String,
    handle: JoinHandle<crate::record::WriterOutcome>,
    /// Index of the RX queue in `res.rx`.
    queue: usize,
    /// Index in `config.recorders`.
    recorder: usize,
    /// `Some(packets_per_batch)`: the sink writes a GPU stage's products.
    batch_packets: Option<u32>,
    /// A shared sink's merger thread (joined before the writer).
    merger: Option<JoinHandle<()>>,
    /// A shared sink: the queues feeding it.
    shared_by: Vec<String>,
    counters: &'static crate::record::SinkCounters,
}

/// Tells a queue's writers that no more buffers come, however its consumer thread ends (a
/// panic or a run that never started included), so they close their files and end.
struct DoneOnDrop(
    Vec<&'static crate::record::SinkCounters>,
    Vec<&'static crate::record::shared::TapCounters>,
);

impl Drop for DoneOnDrop {
    fn drop(&mut self) {
        for c in &self.0 {
            c.producer_done.store(true, Release);
        }
        for t in &self.1 {
            t.done.store(true, Release);
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

/// Stores the calling thread's CPU time so far (its total, when called as it ends).
fn store_cpu(slot: &AtomicU64) {
    slot.store(rt::thread_cpu_ns().unwrap_or(0), Release);
}

/// Where a parked RX thread (or pair) gets its queue.
enum RxFeed<Q: RxQueue>
where
    Q::Burst: 'static,
{
    Direct(mpsc::SyncSender<Q>),
    Indirect {
        io: mpsc::SyncSender<(Q, SlotProducer<'static, Q::Burst>)>,
        consumer: mpsc::SyncSender<SlotConsumer<'static, Q::Burst>>,
        /// Burst slots of the ring between them.
        slots: usize,
        /// Queue name, for errors.
        name: String,
    },
}

/// Where a parked generator thread gets its queue and plan.
type TxFeed<Q> = mpsc::SyncSender<(Q, GenPlan)>;

/// The generator of TX queue `queue` of interface `interface`, if it has one.
fn generator_of(config: &Config, interface: usize, queue: usize) -> Option<&Generator> {
    config
        .generator
        .as_ref()
        .filter(|g| g.interface.0 == interface && g.tx_queue.0 as usize == queue)
}

/// Opens the engine, splits it into queues and hands each to its parked thread (RX queues
/// first, so that they read before any generator sends). Returns the start time of the run
/// (the generators' pacing origin).
fn open_and_feed<E>(
    config: &'static Config,
    res: &Resources,
    rx_feeds: Vec<RxFeed<E::Rx>>,
    tx_feeds: Vec<Option<TxFeed<E::Tx>>>,
    stats: Option<StatsHook<E>>,
    mut replay: Option<(crate::replay::ReplayStream, rtdaq_config::model::Replay)>,
) -> Result<(u64, Option<Box<dyn EngineStats>>), RuntimeError>
where
    E: Engine<'static, Config = EngineArgs<'static, Config>>,
    <E::Rx as RxQueue>::Burst: 'static,
{
    let engine = E::open(EngineArgs {
        config,
        rx: res.rx,
        tx: res.tx,
    })
    .map_err(|e| RuntimeError::Engine(e.to_string()))?;
    let macs: Vec<Option<[u8; 6]>> = (0..config.interfaces.len())
        .map(|i| engine.interface_mac(i))
        .collect();
    let port_stats = stats.map(|f| f(&engine));
    let (mut rxq, mut txq) = (Vec::new(), Vec::new());
    engine.split(&mut |q| rxq.push(q), &mut |q| txq.push(q));
    let parked_gone = |queue: String| RuntimeError::Thread {
        queue,
        message: "its thread ended before it got its queue".into(),
    };
    for (queue, feed) in rxq.into_iter().zip(rx_feeds) {
        match feed {
            RxFeed::Direct(f) => f.send(queue).map_err(|_| parked_gone("rx".into()))?,
            RxFeed::Indirect {
                io,
                consumer,
                slots,
                name,
            } => {
                let bursts: Vec<_> = (0..slots).map(|_| queue.new_burst()).collect();
                let ring = Box::leak(Box::new(
                    SlotRing::new(Box::leak(bursts.into_boxed_slice())).map_err(|e| {
                        RuntimeError::Thread {
                            queue: name.clone(),
                            message: e.to_string(),
                        }
                    })?,
                ));
                let (prod, cons) = ring.split();
                consumer
                    .send(cons)
                    .map_err(|_| parked_gone(format!("{name} consumer")))?;
                io.send((queue, prod)).map_err(|_| parked_gone(name))?;
            }
        }
    }
    let start_ns = now_ns();
    for ((queue, feed), r) in txq.into_iter().zip(tx_feeds).zip(res.tx.iter()) {
        let (Some(feed), Some(g)) = (feed, generator_of(config, r.interface, r.queue)) else {
            continue; // no generator: the queue is dropped (closed) here
        };
        let qc = &config.interfaces[r.interface].tx_queues[r.queue];
        let plan = GenPlan {
            gens: (0..g.streams)
                .map(|k| {
                    PayloadGen::for_format(
                        g.stream_id + k as u16,
                        g.payload_size as usize,
                        config.interfaces[r.interface].format,
                        crate::pacer::wall_clock_ns() / 1_000_000_000,
                    )
                })
                .collect(),
            pacer: Pacer::from_config(&g.rate, start_ns),
            cap: qc
                .pacing_gbps
                .map(|gbps| Pacer::new(PaceRate::from_gbps(gbps), start_ns)),
            frame_overhead: frame_overhead(&config.interfaces[r.interface].address),
            batch: qc.batch_size as usize,
            count: match g.limit {
                GeneratorLimit::Count(c) => Some(c),
                _ => None,
            },
            until_ns: match g.limit {
                GeneratorLimit::Duration(s) => Some(start_ns + (s * 1e9) as u64),
                _ => None,
            },
            frame: if E::FRAMES && replay.is_none() {
                Some(frame_spec(config, r.interface, g, macs[r.interface])?)
            } else {
                None
            },
            // One generator: it takes the replay.
            replay: replay.take().map(|(stream, rp)| crate::replay::ReplayPlan {
                stream,
                timing: rp.timing,
                pacer: Pacer::from_config(&g.rate, start_ns),
                batch: qc.batch_size as usize,
                until_ns: match g.limit {
                    GeneratorLimit::Duration(s) => Some(start_ns + (s * 1e9) as u64),
                    _ => None,
                },
                start_ns,
            }),
        };
        feed.send((queue, plan))
            .map_err(|_| parked_gone(queue_name(config, r.interface, "tx", r.queue)))?;
    }
    Ok((start_ns, port_stats))
}

/// The MAC address of interface `interface`'s Linux network device (sysfs). Cold path.
fn netdev_mac(
    config: &Config,
    interface: usize,
    root: &std::path::Path,
) -> Result<[u8; 6], RuntimeError> {
    let netdev = match &config.interfaces[interface].address {
        Address::Netdev(n) => n.clone(),
        Address::Pci(bdf) => netdev::netdev_of_pci(root, &bdf.to_string())?.ok_or_else(|| {
            RuntimeError::Generator(format!(
                "PCI function {bdf} (interfaces[{interface}].address) has no Linux network device to read its MAC from"
            ))
        })?,
        Address::Socket(_) => {
            return Err(RuntimeError::Generator(format!(
                "interfaces[{interface}].address is a socket address: a raw engine needs a network device"
            )))
        }
    };
    Ok(netdev::mac_address(root, &netdev)?)
}

/// The Ethernet/IPv4/UDP headers a raw engine's generator wraps each payload in: from this
/// interface's MAC (the engine's when it knows it, e.g. a DPDK port, else sysfs) and `generator.source` to `generator.dst_mac` and
/// `generator.destination`. No UDP checksum (0: allowed on IPv4; the sequence header and
/// payload pattern protect the payload). Cold path.
fn frame_spec(
    config: &Config,
    interface: usize,
    g: &Generator,
    engine_mac: Option<[u8; 6]>,
) -> Result<UdpFrameSpec, RuntimeError> {
    let root = std::path::Path::new("/");
    let src_mac = match engine_mac {
        Some(m) => m,
        None => netdev_mac(config, interface, root)?,
    };
    let missing = |key: &str| {
        RuntimeError::Generator(format!(
            "generator.{key} is required with a raw engine (the config check enforces it)"
        ))
    };
    let dst = g.destination.ok_or_else(|| missing("destination"))?;
    let src = g.source.ok_or_else(|| missing("source"))?;
    Ok(UdpFrameSpec {
        dst_mac: g.dst_mac.ok_or_else(|| missing("dst_mac"))?,
        src_mac,
        src_ip: src.ip.octets(),
        dst_ip: dst.ip.octets(),
        src_port: src.port,
        dst_port: dst.port,
        checksum: UdpChecksumMode::None,
        ..UdpFrameSpec::default()
    })
}

/// Stack of a queue thread: 1 MiB (a burst of 1024 packets on the stack is ~100 KiB) plus
/// the part `rt.prefault_stack_kib` touches. Kept small on purpose: with `mlockall(MCL_FUTURE)`
/// the kernel populates and locks the whole stack when the thread is created, and RX
/// sockets are already bound then (a 4 MiB stack took ~15 ms to populate here: datagrams
/// arriving meanwhile can overflow the socket buffer before the first read).
fn thread_stack(config: &Config) -> usize {
    (1 << 20) + config.rt.prefault_stack_kib as usize * 1024
}

fn spawn<T: Send + 'static>(
    name: &str,
    stack: usize,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, RuntimeError> {
    std_thread::Builder::new()
        .name(name.chars().take(15).collect())
        .stack_size(stack)
        .spawn(f)
        .map_err(|e| RuntimeError::Thread {
            queue: name.to_string(),
            message: format!("cannot spawn its thread: {e}"),
        })
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
