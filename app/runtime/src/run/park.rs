//! Step 3 of a run: every queue thread starts, pins itself, takes its real-time priority,
//! prefaults its stack and parks on a one-shot channel until its queue arrives. The engine
//! opens (binds sockets, maps rings) only after that (step 4), so the first read follows
//! within microseconds: a sender that is already streaming does not overflow a socket
//! buffer while threads are being created.

use super::prepare::{DoneOnDrop, Prepared};
use super::threads::{join_queue_thread, queue_name, spawn, store_cpu, thread_stack, RaiseOnDrop};
use crate::error::RuntimeError;
use crate::generator::GenTotals;
use crate::queue::consume;
use crate::queue::unwrap::Unwrap;
use crate::stages::chain::{into_validator, QueueStages};
use crate::threads::{self, GenPlan, Placement};
use crate::validator::Validator;
use rtdaq_config::model::{Config, RxMode};
use rtdaq_core::slot_ring::{SlotConsumer, SlotProducer};
use rtdaq_core::traits::{Engine, EngineArgs, RxQueue};
use std::sync::atomic::{AtomicBool, Ordering::Release};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// An RX queue's threads with their names: the I/O thread of an indirect queue, and the
/// consumer (or direct) thread, which hands back the queue's validator.
pub(super) type RxThreads = (
    Option<(String, JoinHandle<()>)>,
    (String, JoinHandle<Validator>),
);

/// Every queue thread started and parked; the engine not yet open.
pub(super) struct Parked<'o, E: Engine<'static>>
where
    <E::Rx as RxQueue>::Burst: 'static,
{
    pub prepared: Prepared<'o>,
    pub rx_handles: Vec<RxThreads>,
    /// Per TX queue: its generator thread (`None`: the queue has no generator).
    pub tx_handles: Vec<Option<(String, JoinHandle<GenTotals>)>>,
    pub rx_feeds: Vec<RxFeed<E::Rx>>,
    pub tx_feeds: Vec<Option<TxFeed<E::Tx>>>,
    /// RX queues are closed together, after every RX thread stopped: closing one socket of
    /// an SO_REUSEPORT group while the others still poll moves its flows to them mid-stream
    /// (seen as sequence gaps of packets that were in fact received by the closed queue).
    pub graveyard: mpsc::Sender<E::Rx>,
    pub closed_rx: mpsc::Receiver<E::Rx>,
    /// Stop flags; they live for the process, like the queues.
    pub tx_stop: &'static AtomicBool,
    pub rx_stop: &'static AtomicBool,
}

impl<'o> Prepared<'o> {
    /// Starts every queue thread and waits until each has reported its real-time set-up;
    /// any refusal (or a thread that cannot be spawned) unwinds and stops the run here.
    pub fn park<E>(mut self) -> Result<Parked<'o, E>, RuntimeError>
    where
        E: Engine<'static, Config = EngineArgs<'static, Config>>,
        <E::Rx as RxQueue>::Burst: 'static,
    {
        let chains = std::mem::take(&mut self.chains);
        let (graveyard, closed_rx) = mpsc::channel::<E::Rx>();
        let mut p = Parked::<E> {
            prepared: self,
            rx_handles: Vec::new(),
            tx_handles: Vec::new(),
            rx_feeds: Vec::new(),
            tx_feeds: Vec::new(),
            graveyard,
            closed_rx,
            tx_stop: Box::leak(Box::new(AtomicBool::new(false))),
            rx_stop: Box::leak(Box::new(AtomicBool::new(false))),
        };
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let mut started = 0;
        let mut spawned = Ok(());
        for (k, (chain, done)) in chains.into_iter().enumerate() {
            match p.spawn_rx(k, chain, done, &ready_tx) {
                Ok(n) => started += n,
                Err(e) => {
                    spawned = Err(e);
                    break;
                }
            }
        }
        if spawned.is_ok() {
            match p.spawn_tx(&ready_tx) {
                Ok(n) => started += n,
                Err(e) => spawned = Err(e),
            }
        }
        drop(ready_tx);
        // Every thread reports its real-time set-up once; any refusal stops the run.
        let mut refused = None;
        for _ in 0..started {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => refused = refused.or(Some(e)),
                Err(_) => break,
            }
        }
        let failed = spawned
            .err()
            .or(refused.map(|message| RuntimeError::Thread {
                queue: "start-up".into(),
                message,
            }));
        match failed {
            Some(e) => {
                p.abort();
                Err(e)
            }
            None => Ok(p),
        }
    }
}

impl<E> Parked<'_, E>
where
    E: Engine<'static, Config = EngineArgs<'static, Config>>,
    <E::Rx as RxQueue>::Burst: 'static,
{
    /// The placement of a thread of RX or TX queue settings `priority` on `core`.
    fn place(&self, core: u32, priority: u8) -> Placement {
        let rt = &self.prepared.plan.config.rt;
        Placement {
            core,
            priority,
            prefault_stack_kib: rt.prefault_stack_kib,
            required: rt.required,
        }
    }

    /// Starts RX queue `k`'s thread (direct) or threads (indirect: I/O and consumer), each
    /// parked until its queue (and ring half) arrives. Returns how many it started.
    fn spawn_rx(
        &mut self,
        k: usize,
        chain: QueueStages,
        done: DoneOnDrop,
        ready: &mpsc::Sender<Result<(), String>>,
    ) -> Result<usize, RuntimeError> {
        let config = self.prepared.plan.config;
        let res = &self.prepared.res;
        let r = &res.rx[k];
        let qc = &config.interfaces[r.interface].rx_queues[r.queue];
        let name = queue_name(config, r.interface, "rx", r.queue);
        let rx_stats = res.rx_stats;
        let stats = &rx_stats[k];
        let stack = thread_stack(config);
        let unwrap = Unwrap::new(E::FRAMES).with_ts_out(&stats.ts_sources);
        let busy = qc.busy_poll;
        let slots = threads::burst_slots(qc.ring_depth, qc.batch_size);
        let rx_stop = self.rx_stop;
        match qc.mode {
            RxMode::Direct => {
                let (feed, parked) = mpsc::sync_channel::<E::Rx>(1);
                let (p, ready) = (self.place(qc.cpu_core, qc.rt_priority), ready.clone());
                let (n, grave) = (name.clone(), self.graveyard.clone());
                let h = spawn(&name, stack, move || {
                    let _done = done;
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
                self.rx_handles.push((None, (name, h)));
                self.rx_feeds.push(RxFeed::Direct(feed));
                Ok(1)
            }
            RxMode::Indirect { consumer_core } => {
                type Prod<Q> = SlotProducer<'static, <Q as RxQueue>::Burst>;
                type Cons<Q> = SlotConsumer<'static, <Q as RxQueue>::Burst>;
                let (feed_io, parked_io) = mpsc::sync_channel::<(E::Rx, Prod<E::Rx>)>(1);
                let (feed_cons, parked_cons) = mpsc::sync_channel::<Cons<E::Rx>>(1);
                let io_done: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
                let (p, ready_io) = (self.place(qc.cpu_core, qc.rt_priority), ready.clone());
                let (n, grave) = (name.clone(), self.graveyard.clone());
                let batching = threads::Batching {
                    batch: qc.batch_size as usize,
                    timeout_ns: u64::from(qc.timeout_us) * 1000,
                };
                let io = spawn(&format!("{name}-io"), stack, move || {
                    // Raised however the thread ends (a panic included).
                    let _done = RaiseOnDrop(io_done);
                    if threads::enter(&n, p, &ready_io) {
                        if let Ok((mut queue, prod)) = parked_io.recv() {
                            threads::rx_indirect(&mut queue, prod, stats, rx_stop, busy, batching);
                            store_cpu(&stats.io_cpu_ns);
                            let _ = grave.send(queue);
                        }
                    }
                })?;
                let (p, ready) = (self.place(consumer_core, qc.rt_priority), ready.clone());
                let n = format!("{name} consumer");
                let c = spawn(&format!("{name}-cons"), stack, move || {
                    let _done = done;
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
                self.rx_handles.push((
                    Some((format!("{name} I/O thread"), io)),
                    (format!("{name} consumer"), c),
                ));
                self.rx_feeds.push(RxFeed::Indirect {
                    io: feed_io,
                    consumer: feed_cons,
                    slots,
                    name,
                });
                Ok(2)
            }
        }
    }

    /// Starts the generator thread of every TX queue that has one, parked until its queue
    /// and plan arrive. Returns how many it started.
    fn spawn_tx(
        &mut self,
        ready: &mpsc::Sender<Result<(), String>>,
    ) -> Result<usize, RuntimeError> {
        let config = self.prepared.plan.config;
        let stack = thread_stack(config);
        let mut started = 0;
        for (k, r) in self.prepared.res.tx.iter().enumerate() {
            let qc = &config.interfaces[r.interface].tx_queues[r.queue];
            let tx_stats = self.prepared.res.tx_stats;
            let stats = &tx_stats[k];
            if super::prepare::generator_of(config, r.interface, r.queue).is_none() {
                self.tx_handles.push(None);
                self.tx_feeds.push(None);
                continue;
            }
            let name = queue_name(config, r.interface, "tx", r.queue);
            let p = self.place(qc.cpu_core, qc.rt_priority);
            let (feed, parked) = mpsc::sync_channel::<(E::Tx, GenPlan)>(1);
            let (ready, n, busy, tx_stop) =
                (ready.clone(), name.clone(), qc.busy_poll, self.tx_stop);
            let h = spawn(&name, stack, move || {
                if !threads::enter(&n, p, &ready) {
                    return GenTotals::default();
                }
                let Ok((queue, plan)) = parked.recv() else {
                    return GenTotals::default();
                };
                let t =
                    crate::launch::tx_thread(queue, plan, E::timed_tx, tx_stop, busy, &stats.stall);
                store_cpu(&stats.io_cpu_ns);
                t
            })?;
            started += 1;
            self.tx_handles.push(Some((format!("{name} generator"), h)));
            self.tx_feeds.push(Some(feed));
        }
        Ok(started)
    }

    /// Unwinds steps 3 and 2: the parked threads are woken (their feeds dropped) and
    /// joined (one that panicked meanwhile is logged), then the writers end and the files
    /// they opened are removed.
    pub fn abort(self) {
        self.tx_stop.store(true, Release);
        self.rx_stop.store(true, Release);
        drop(self.rx_feeds);
        drop(self.tx_feeds);
        let mut failed = Vec::new();
        for (name, h) in self.tx_handles.into_iter().flatten() {
            join_queue_thread(h, &name, GenTotals::default, &mut failed);
        }
        for (io, (name, cons)) in self.rx_handles {
            if let Some((io_name, io)) = io {
                join_queue_thread(io, &io_name, || (), &mut failed);
            }
            join_queue_thread(cons, &name, Validator::new, &mut failed);
        }
        self.prepared.abandon();
    }
}

/// Where a parked RX thread (or pair) gets its queue.
pub(super) enum RxFeed<Q: RxQueue>
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
pub(super) type TxFeed<Q> = mpsc::SyncSender<(Q, GenPlan)>;
