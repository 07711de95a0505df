//! Step 4 of a run: join the raw interfaces' multicast groups (held until the run ends),
//! open the engine and hand each parked thread its queue (RX first, then the generators),
//! then start watching: the live line, `/metrics` and `/status`, systemd's notifications.

use super::park::{Parked, RxFeed, TxFeed};
use super::prepare::{generator_of, EgressThread, Replay, WriterThread};
use super::results::StatsHook;
use super::threads::queue_name;
use crate::error::RuntimeError;
use crate::memory::Resources;
use crate::observe::stats::Live;
use crate::pacer::{now_ns, PaceRate, Pacer};
use crate::threads::GenPlan;
use crate::validator::PayloadGen;
use rtdaq_config::model::{Address, Config, GenPacing, Generator, GeneratorLimit, Transport};
use rtdaq_core::traits::{Engine, EngineArgs, EngineStats, RxQueue};
use rtdaq_core::wire::{UdpChecksumMode, UdpFrameSpec};
use rtdaq_core::SlotRing;
use rtdaq_platform::netdev;

/// The run, running: every queue thread has its queue.
pub(super) struct Running<'o, E: Engine<'static>>
where
    <E::Rx as RxQueue>::Burst: 'static,
{
    pub parked: Parked<'o, E>,
    /// Held until the run ends.
    pub _memberships: crate::membership::Memberships,
    /// Monotonic start (the generators' pacing origin).
    pub start_ns: u64,
    pub started_at_unix_ns: u64,
    pub steal_before: std::collections::BTreeMap<u32, u64>,
    /// An engine's own ports (DPDK): read once a second for `/metrics` and the live warnings.
    pub port_watch: Option<crate::observe::nic::PortWatch>,
    pub live: Live,
    /// What `/metrics`, `/status` and `--status-file` read.
    pub source: Option<crate::observe::metrics::Source>,
    pub serving: Option<crate::observe::metrics::Serving>,
    pub notifier: crate::observe::notify::Notifier,
    /// What the systemd watchdog watches besides the generators.
    pub watched: Vec<(String, &'static crate::stall::StallWatch)>,
    pub tx_names: Vec<String>,
}

impl<'o, E> Parked<'o, E>
where
    E: Engine<'static, Config = EngineArgs<'static, Config>>,
    <E::Rx as RxQueue>::Burst: 'static,
{
    /// Joins the multicast groups, opens the engine and feeds the parked threads; on an
    /// error every thread is woken and joined and the sinks' files removed (steps 3 and 2
    /// unwind).
    pub fn start(mut self, stats: Option<StatsHook<E>>) -> Result<Running<'o, E>, RuntimeError> {
        let config = self.prepared.plan.config;
        let memberships = match crate::membership::join(config) {
            Ok(m) => m,
            Err(e) => {
                self.abort();
                return Err(e);
            }
        };
        let rx_feeds = std::mem::take(&mut self.rx_feeds);
        let tx_feeds = std::mem::take(&mut self.tx_feeds);
        let replay = self.prepared.replay.take();
        let (start_ns, port_stats) = match open_and_feed::<E>(
            config,
            &self.prepared.res,
            rx_feeds,
            tx_feeds,
            stats,
            replay,
        ) {
            Ok(v) => v,
            Err(e) => {
                self.abort();
                return Err(e);
            }
        };
        let res = &self.prepared.res;
        // Tests and scripts wait for this line before they start a peer.
        log::info!(
            "queues running: {} RX, {} TX (engine {})",
            res.rx.len(),
            res.tx.len(),
            E::NAME
        );
        let steal_before = crate::stall::cpu_steal();
        let started_at_unix_ns = crate::pacer::wall_clock_ns();
        let port_watch = port_stats.map(|s| {
            crate::observe::nic::PortWatch::new(
                s,
                config.interfaces.iter().map(|i| i.name.clone()).collect(),
            )
        });
        Ok(Running::watching(
            self,
            memberships,
            start_ns,
            started_at_unix_ns,
            steal_before,
            port_watch,
        ))
    }
}

impl<'o, E> Running<'o, E>
where
    E: Engine<'static, Config = EngineArgs<'static, Config>>,
    <E::Rx as RxQueue>::Burst: 'static,
{
    /// The watchers of a run that just started: the live line, the metrics endpoint and
    /// status file (a thread that cannot start is reported and the run goes on: they are
    /// for watching the run, not part of it), systemd's READY.
    fn watching(
        mut parked: Parked<'o, E>,
        memberships: crate::membership::Memberships,
        start_ns: u64,
        started_at_unix_ns: u64,
        steal_before: std::collections::BTreeMap<u32, u64>,
        port_watch: Option<crate::observe::nic::PortWatch>,
    ) -> Self {
        let plan = &mut parked.prepared.plan;
        let (config, opts) = (plan.config, plan.opts);
        let endpoint = plan.endpoint.take();
        let res = &parked.prepared.res;
        let writers = &parked.prepared.writers;
        let nics = &plan.nics;
        let live = live(config, res, writers, start_ns);
        let source = (endpoint.is_some() || opts.status_file.is_some()).then(|| {
            let label =
                |interface: usize, id: u16, gpu: bool| crate::observe::metrics::QueueLabel {
                    interface: config.interfaces[interface].name.clone(),
                    queue: id,
                    gpu,
                };
            crate::observe::metrics::Source {
                build: crate::observe::metrics::BuildInfo {
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
                egress: parked
                    .prepared
                    .egress
                    .iter()
                    .map(|e| (e.name.clone(), e.counters))
                    .collect(),
                rings: ring_sources(config, res, &parked.prepared.rings),
                nics: (!nics.is_empty()).then(|| nics.shared()),
                ports: port_watch
                    .as_ref()
                    .map(crate::observe::nic::PortWatch::shared),
                start_ns,
                triggers: parked.prepared.dumps.triggers(),
                histories: parked.prepared.dumps.histories(config),
                time: plan
                    .time
                    .as_ref()
                    .map(crate::observe::time::TimeWatch::shared),
            }
        });
        let serving = endpoint.zip(source.clone()).and_then(|(ep, source)| {
            ep.serve(source)
                .map_err(|e| log::error!("{e}; the run goes on without the endpoint"))
                .ok()
        });
        // systemd (Type=notify): every queue thread has its queue now.
        let mut notifier = crate::observe::notify::Notifier::from_env();
        notifier.ready(&format!(
            "{} RX, {} TX queues running (engine {})",
            res.rx.len(),
            res.tx.len(),
            config.engine_kind().as_str()
        ));
        #[cfg(feature = "test-hooks")]
        crate::test_hooks::arm(start_ns);
        let name = |r: &rtdaq_core::traits::QueueResources<'_>, dir| {
            queue_name(config, r.interface, dir, r.queue)
        };
        let rx_names: Vec<String> = res.rx.iter().map(|r| name(r, "rx")).collect();
        let tx_names: Vec<String> = res.tx.iter().map(|r| name(r, "tx")).collect();
        let watched = watched_threads(config, res, &rx_names, (writers, &parked.prepared.egress));
        Running {
            parked,
            _memberships: memberships,
            start_ns,
            started_at_unix_ns,
            steal_before,
            port_watch,
            live,
            source,
            serving,
            notifier,
            watched,
            tx_names,
        }
    }
}

/// The live line's queues and sinks.
fn live(config: &Config, res: &Resources, writers: &[WriterThread], start_ns: u64) -> Live {
    Live::new(
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
    )
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
    replay: Option<Replay>,
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
    feed_generators::<E>(config, res, txq, tx_feeds, &macs, replay, start_ns)?;
    Ok((start_ns, port_stats))
}

/// Hands each parked generator its TX queue and plan; the TX queues without a generator are
/// dropped (closed) here.
fn feed_generators<E>(
    config: &'static Config,
    res: &Resources,
    txq: Vec<E::Tx>,
    tx_feeds: Vec<Option<TxFeed<E::Tx>>>,
    macs: &[Option<[u8; 6]>],
    mut replay: Option<Replay>,
    start_ns: u64,
) -> Result<(), RuntimeError>
where
    E: Engine<'static, Config = EngineArgs<'static, Config>>,
{
    for (k, ((mut queue, feed), r)) in txq.into_iter().zip(tx_feeds).zip(res.tx.iter()).enumerate()
    {
        let (Some(feed), Some(g)) = (feed, generator_of(config, r.interface, r.queue)) else {
            continue;
        };
        let plan = gen_plan::<E>(config, r.interface, r.queue, g, macs, &mut replay, start_ns)?;
        let launch = E::timed_tx(&mut queue).and_then(|q| q.launch_clock());
        let (code, detail) = match g.pacing {
            GenPacing::Nic => nic_pacing::<E>(config, g, r.interface, &mut queue),
            // The engine could not arm the queue (a DPDK PMD without launch times; it
            // logged why): the software pacer keeps the times, and the report says so.
            GenPacing::Txtime { .. } if launch.is_none() => {
                (crate::queue::stats::Pacing::TXTIME_REFUSED, 0)
            }
            _ => (crate::queue::stats::Pacing::code(launch), 0),
        };
        let ts = &res.tx_stats[k];
        ts.pacing_detail
            .store(detail, std::sync::atomic::Ordering::Release);
        ts.pacing.store(code, std::sync::atomic::Ordering::Release);
        feed.send((queue, plan)).map_err(|_| RuntimeError::Thread {
            queue: queue_name(config, r.interface, "tx", r.queue),
            message: "its thread ended before it got its queue".into(),
        })?;
    }
    Ok(())
}

/// `generator.pacing = "nic"`: asks the engine to have the NIC pace `queue` at the
/// generator's rate (frames on the wire, rounded up: the software pacer keeps the average,
/// the NIC spaces each burst). Returns the [`Pacing`](crate::queue::stats::Pacing) code and
/// detail: the NIC's rate, or the software pacer alone with the device's refusal (logged).
/// Cold path.
fn nic_pacing<E>(config: &Config, g: &Generator, interface: usize, queue: &mut E::Tx) -> (u8, u32)
where
    E: Engine<'static, Config = EngineArgs<'static, Config>>,
{
    use crate::queue::stats::Pacing;
    let headers = frame_overhead(&config.interfaces[interface].address);
    let Some(mbps) = PaceRate::from(g.rate).wire_mbps(g.payload_size as usize, headers) else {
        return (Pacing::code(None), 0);
    };
    let name = &config.interfaces[interface].name;
    // An engine without the ability: as a device without a rate limit.
    match E::rate_limit_tx(queue).map_or(Err(libc::ENOTSUP), |q| q.limit_rate(mbps)) {
        Ok(()) => {
            log::info!(
                "generator on {name}:{}: the NIC paces the queue at {mbps} Mb/s (frames on the wire)",
                g.tx_queue.0
            );
            (Pacing::NIC, mbps)
        }
        Err(errno) => {
            log::warn!(
                "generator on {name}:{}: pacing = \"nic\", but the {} engine's device refused a per-queue rate limit of {mbps} Mb/s ({}): the software pacer keeps the rate alone",
                g.tx_queue.0,
                E::NAME,
                std::io::Error::from_raw_os_error(errno)
            );
            (Pacing::NIC_REFUSED, errno as u32)
        }
    }
}

/// What generator `g` on TX queue `queue` of `interface` sends, paced from `start_ns`.
fn gen_plan<E>(
    config: &Config,
    interface: usize,
    queue: usize,
    g: &Generator,
    macs: &[Option<[u8; 6]>],
    replay: &mut Option<Replay>,
    start_ns: u64,
) -> Result<GenPlan, RuntimeError>
where
    E: Engine<'static, Config = EngineArgs<'static, Config>>,
{
    let r = (interface, queue);
    let qc = &config.interfaces[r.0].tx_queues[r.1];
    Ok(GenPlan {
        gens: (0..g.streams)
            .map(|k| {
                PayloadGen::for_format(
                    g.stream_id + k as u16,
                    g.payload_size as usize,
                    config.interfaces[r.0].format,
                    crate::pacer::wall_clock_ns() / 1_000_000_000,
                )
            })
            .collect(),
        pacer: Pacer::from_config(&g.rate, start_ns),
        cap: qc
            .pacing_gbps
            .map(|gbps| Pacer::new(PaceRate::from_gbps(gbps), start_ns)),
        frame_overhead: frame_overhead(&config.interfaces[r.0].address),
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
            Some(frame_spec(config, r.0, g, macs[r.0])?)
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
        launch_lead_ns: match g.pacing {
            GenPacing::Txtime { lead_us } => Some(u64::from(lead_us) * 1000),
            GenPacing::Software | GenPacing::Nic => None,
        },
    })
}

/// Header bytes of an Ethernet frame around one payload, which a TX queue's `pacing_gbps`
/// counts: Ethernet 14 + IPv4 20 + UDP 8 (or TCP 20).
fn frame_overhead(address: &Address) -> usize {
    match address {
        Address::Socket(u) if u.transport == Transport::Tcp => 54,
        _ => 42,
    }
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

/// The threads (and GPU stages) the systemd watchdog watches, by name: every RX queue's I/O
/// thread, consumer and GPU stage, and every record sink's writer and merger.
pub(super) fn watched_threads(
    config: &Config,
    res: &Resources,
    rx_names: &[String],
    (writers, egress): (&[WriterThread], &[EgressThread]),
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
    for e in egress {
        w.push((format!("{} sender", e.name), &e.counters.stall));
    }
    w
}

/// Each queue's PSRDADA ring for `/metrics`: `lo_udp.rx0 dada_ring ring` and its counters.
fn ring_sources(
    config: &rtdaq_config::model::Config,
    res: &crate::memory::Resources,
    rings: &crate::dada_ring::Rings,
) -> Vec<(String, &'static crate::dada_ring::DadaCounters)> {
    res.rx
        .iter()
        .zip(&rings.queues)
        .filter_map(|(r, q)| {
            let (id, c, _) = (*q)?;
            let iface = &config.interfaces[r.interface];
            let name = format!(
                "{}.rx{} dada_ring {}",
                iface.name, iface.rx_queues[r.queue].id, config.dada_rings[id].name
            );
            Some((name, c))
        })
        .collect()
}
