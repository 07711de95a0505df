//! The metrics endpoint (issue #18): Prometheus text exposition at `/metrics` and a JSON
//! status at `/status`, on `run.metrics` / `rtdaq run --metrics ADDR`.
//!
//! A fixed set of threads of normal priority serves it ([`crate::observe::http`]: one acceptor and
//! two workers, spawned by the main thread after it left the queue threads' cores, so they
//! run beside them, never on them, and never more of them). It reads the counters the
//! queue threads already publish for the live line ([`QueueStats`]: relaxed atomics, one
//! writer each; the record sinks' and GPU stages' counters; the validator's stream table):
//! a scrape adds no work, lock or allocation to the hot path. The exposition uses the
//! `prometheus` crate (its registry and text encoder, the format `promtool check metrics`
//! reads), HTTP requests are parsed by the `httparse` crate ([`crate::observe::http`]).
//!
//! Requests: `GET /metrics` (text format 0.0.4), `GET /status` (JSON), `GET /` (an index);
//! another path is `404`, another method `405` (with `Allow: GET, HEAD`). The metrics are
//! assembled under one lock (a scrape updates the registry from the counters), so two
//! scrapes at once are answered one after the other; a flood of scrapes costs those
//! threads' CPU only, and one more connection than they can hold is answered `503`.

use crate::error::RuntimeError;
use crate::queue::stats::QueueStats;
use crate::record::SinkCounters;
use prometheus::{Encoder, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder};
use rtdaq_core::counters::{CounterSnapshot, DropReason};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

/// The validator's counters ([`crate::validator::ValidatorStats::named`]) that have a
/// metric of their own, and that metric; every other one is `rtdaq_rx_checks_total{counter}`.
/// (`seq_gaps` and the others are the consumer's gross live counts: the validator's are net,
/// and a counter may not go down.)
pub const LIVE_ELSEWHERE: [(&str, &str); 6] = [
    ("received", "rtdaq_rx_validated_packets_total"),
    ("seq_gaps", "rtdaq_rx_seq_gaps_total"),
    ("reordered", "rtdaq_rx_reordered_total"),
    ("duplicates", "rtdaq_rx_duplicates_total"),
    ("corrupt", "rtdaq_rx_corrupt_total"),
    ("streams", "rtdaq_rx_streams"),
];

/// What the build and the config say of themselves (`rtdaq_build_info`'s labels).
#[derive(Debug, Clone, Default)]
pub struct BuildInfo {
    /// Package version.
    pub version: String,
    /// Git commit the binary was built from.
    pub commit: String,
    /// Packet engine (`engine-*` feature).
    pub engine: String,
    /// Board (`platform-*` feature).
    pub platform: String,
    /// Config name.
    pub config: String,
    /// SHA-256 of the config text.
    pub config_sha256: String,
}

/// One queue as the metrics name it.
#[derive(Debug, Clone)]
pub struct QueueLabel {
    /// Interface name (`interfaces[].name`).
    pub interface: String,
    /// Queue id.
    pub queue: u16,
    /// RX queue with a GPU stage: its counters are exported.
    pub gpu: bool,
}

/// Everything a scrape reads.
#[derive(Debug, Clone)]
pub struct Source {
    /// Build and config identity.
    pub build: BuildInfo,
    /// RX queues (config order) and their counters.
    pub rx: Vec<(QueueLabel, &'static QueueStats)>,
    /// TX queues (config order) and their counters.
    pub tx: Vec<(QueueLabel, &'static QueueStats)>,
    /// Record sinks: name (as in the live line) and counters.
    pub sinks: Vec<(String, &'static SinkCounters)>,
    /// Egress sinks: name (`lo_udp.rx0 egress spead-out`) and counters.
    pub egress: Vec<(String, &'static crate::egress::EgressCounters)>,
    /// PSRDADA rings: name (`lo_udp.rx0 dada_ring ring`) and counters.
    pub rings: Vec<(String, &'static crate::dada_ring::DadaCounters)>,
    /// The NIC counters of the interfaces' devices, when any is watched ([`crate::observe::nic`]).
    pub nics: Option<crate::observe::nic::Shared>,
    /// The engine's own ports (DPDK), when it has them ([`crate::observe::nic::PortWatch`]).
    pub ports: Option<crate::observe::nic::SharedPorts>,
    /// Monotonic start of the run ([`crate::pacer::now_ns`]).
    pub start_ns: u64,
    /// The triggered dumps' triggers (`POST /trigger`), when the config has dumps.
    pub triggers: Option<crate::dump::Triggers>,
    /// The dumps' histories: name (`lo_udp.rx0 dump candidates`) and counters.
    pub histories: Vec<(String, &'static crate::dump::History)>,
    /// The clock check (`[time]`), when the config has one.
    pub time: Option<&'static crate::observe::time::TimeShared>,
}

/// A bound endpoint, not yet serving ([`Endpoint::bind`] before the queues start, so that a
/// bad address stops the run before any packet moves).
pub struct Endpoint {
    listener: crate::observe::http::Listener,
    addr: SocketAddr,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("addr", &self.addr)
            .finish()
    }
}

/// The serving threads; [`Serving::stop`] ends them.
pub struct Serving {
    server: crate::observe::http::Server,
}

impl std::fmt::Debug for Serving {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serving").finish_non_exhaustive()
    }
}

impl Endpoint {
    /// Binds `addr` (port 0: any free port, see [`addr`](Self::addr)).
    ///
    /// # Errors
    /// [`RuntimeError::Metrics`] naming the address and the reason (in use, not local,
    /// no permission).
    pub fn bind(addr: SocketAddr) -> Result<Self, RuntimeError> {
        let listener = crate::observe::http::Listener::bind(addr).map_err(|e| RuntimeError::Metrics {
            addr: addr.to_string(),
            message: format!(
                "cannot listen there ({e}); give a free local address and port, e.g. 127.0.0.1:9464, in run.metrics or --metrics"
            ),
        })?;
        let addr = listener.addr();
        Ok(Self { listener, addr })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts the serving threads (they inherit the calling thread's CPUs: call it off the
    /// queue cores).
    ///
    /// # Errors
    /// [`RuntimeError::Metrics`] when a thread cannot be spawned.
    pub fn serve(self, source: Source) -> Result<Serving, RuntimeError> {
        let handler = Arc::new(Handler {
            triggers: source.triggers.clone(),
            exporter: Mutex::new(Exporter::new(source)),
        });
        let server =
            crate::observe::http::serve(self.listener, handler, "metrics").map_err(|e| {
                RuntimeError::Metrics {
                    addr: self.addr.to_string(),
                    message: format!("cannot spawn its threads: {e}"),
                }
            })?;
        log::info!(
            "metrics: http://{}/metrics (Prometheus text), http://{}/status (JSON)",
            self.addr,
            self.addr
        );
        Ok(Serving { server })
    }
}

impl Serving {
    /// Stops serving (a scrape in progress is answered first) and joins the threads.
    pub fn stop(self) {
        let refused = self.server.refused();
        if refused > 0 {
            log::warn!("metrics endpoint: {refused} connections answered 503 (every worker busy)");
        }
        self.server.stop();
    }
}

/// The endpoint's handler: `/trigger` goes to the dumps (it waits for the dump, without
/// holding the exporter: scrapes go on), the rest to the exporter.
struct Handler {
    exporter: Mutex<Exporter>,
    triggers: Option<crate::dump::Triggers>,
}

impl crate::observe::http::Handler for Handler {
    fn handle(&self, req: &crate::observe::http::Request<'_>) -> crate::observe::http::Response {
        if req.path == "/trigger" {
            return match &self.triggers {
                Some(t) => t.http(req.method, req.query),
                None => crate::observe::http::Response::text(
                    404,
                    "no [[dumps]] in this config: nothing to trigger\n",
                ),
            };
        }
        // A worker that panicked while holding the lock left consistent counters (each
        // update is a set): go on with them.
        let e = self
            .exporter
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        e.answer(req)
    }
}

/// The registered metrics, updated from the counters at each scrape.
struct Exporter {
    src: Source,
    registry: Registry,
    c: Counters,
    g: Gauges,
}

struct Counters {
    rx_packets: IntCounterVec,
    rx_bytes: IntCounterVec,
    rx_validated: IntCounterVec,
    rx_drops: IntCounterVec,
    rx_gaps: IntCounterVec,
    rx_reordered: IntCounterVec,
    rx_duplicates: IntCounterVec,
    rx_corrupt: IntCounterVec,
    /// The validator's other counters, by name ([`LIVE_ELSEWHERE`] are the dedicated
    /// metrics).
    rx_checks: IntCounterVec,
    /// Seconds (a float counter: Prometheus's base unit).
    rx_ring_wait: prometheus::CounterVec,
    stream_packets: IntCounterVec,
    tx_packets: IntCounterVec,
    tx_bytes: IntCounterVec,
    tx_drops: IntCounterVec,
    gpu_batches: IntCounterVec,
    gpu_packets: IntCounterVec,
    gpu_missing: IntCounterVec,
    gpu_checksum_mismatches: IntCounterVec,
    gpu_errors: IntCounterVec,
    rec_packets: IntCounterVec,
    rec_bytes: IntCounterVec,
    rec_dropped: IntCounterVec,
    egress_payloads: IntCounterVec,
    egress_heaps: IntCounterVec,
    egress_packets: IntCounterVec,
    egress_bytes: IntCounterVec,
    egress_dropped: IntCounterVec,
    egress_reconnects: IntCounterVec,
    ring_payloads: IntCounterVec,
    ring_bytes: IntCounterVec,
    ring_dropped: IntCounterVec,
    ring_readers_left: IntCounterVec,
    time_sync_lost: IntCounterVec,
    ring_readers_followed: IntCounterVec,
    dump_packets: IntCounterVec,
    nic_pause: IntCounterVec,
    nic_dropped: IntCounterVec,
    port_packets: IntCounterVec,
    port_bytes: IntCounterVec,
    port_missed: IntCounterVec,
    port_errors: IntCounterVec,
    port_pause: IntCounterVec,
    io_allocations: prometheus::IntCounter,
}

struct Gauges {
    build_info: IntGaugeVec,
    elapsed: prometheus::Gauge,
    stream_missing: IntGaugeVec,
    streams: IntGaugeVec,
    nic_counter: IntGaugeVec,
    port_counter: IntGaugeVec,
    thread_priority: IntGaugeVec,
    memory_locked: prometheus::IntGauge,
    time_synchronised: IntGaugeVec,
    time_offset: IntGaugeVec,
}

const Q: &[&str] = &["interface", "queue"];
const QR: &[&str] = &["interface", "queue", "reason"];
const QS: &[&str] = &["interface", "queue", "stream"];

impl Gauges {
    /// Every gauge, registered in `registry`.
    fn new(registry: &Registry) -> Gauges {
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            let g = IntGaugeVec::new(Opts::new(name, help), labels)
                .expect("a valid metric name and labels");
            registry
                .register(Box::new(g.clone()))
                .expect("each metric registered once");
            g
        };
        let elapsed = prometheus::Gauge::with_opts(Opts::new(
            "rtdaq_run_elapsed_seconds",
            "Seconds since the queue threads started.",
        ))
        .expect("a valid metric name");
        registry
            .register(Box::new(elapsed.clone()))
            .expect("registered once");
        Gauges {
            build_info: gauge(
                "rtdaq_build_info",
                "The build and config: always 1, the facts are its labels.",
                &[
                    "version",
                    "commit",
                    "engine",
                    "platform",
                    "config",
                    "config_sha256",
                ],
            ),
            elapsed,
            stream_missing: gauge(
                "rtdaq_rx_stream_missing",
                "Packets of one stream missing now.",
                QS,
            ),
            streams: gauge(
                "rtdaq_rx_streams",
                "Streams the RX queue's validator tracks.",
                Q,
            ),
            nic_counter: gauge(
                "rtdaq_nic_counter",
                "A counter of the interface's NIC now, as the driver (source ethtool: ethtool -S; source standard: its standard pause statistics, ethtool -I -a) or the kernel (source kernel: /sys/class/net/DEV/statistics) gives it.",
                &["interface", "netdev", "source", "counter"],
            ),
            port_counter: gauge(
                "rtdaq_port_counter",
                "An extended counter of an engine's own port now (DPDK xstats, non-zero ones).",
                &["interface", "port", "counter"],
            ),
            time_synchronised: gauge(
                "rtdaq_time_synchronised",
                "1 while the clock is synchronised ([time]: ptp4l has a port SLAVE within max_offset_ns of its master), 0 otherwise; asked once a second.",
                &["ptp4l"],
            ),
            time_offset: gauge(
                "rtdaq_time_offset_ns",
                "The clock's last offset from its PTP master in ns, as ptp4l gives it ([time]).",
                &["ptp4l"],
            ),
            thread_priority: gauge(
                "rtdaq_thread_rt_priority",
                "Real-time priority of each thread of the process (0: not real-time), with its scheduling policy and allowed CPUs, as /proc/self/task shows them now.",
                &["thread", "policy", "cpus"],
            ),
            memory_locked: registered(
                registry,
                prometheus::IntGauge::with_opts(Opts::new(
                    "rtdaq_memory_locked_bytes",
                    "Memory of the process locked in RAM (VmLck of /proc/self/status).",
                )),
            ),
        }
    }
}

impl Exporter {
    fn new(src: Source) -> Self {
        let registry = Registry::new();
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels)
                .expect("a valid metric name and labels");
            registry
                .register(Box::new(c.clone()))
                .expect("each metric registered once");
            c
        };
        let c = Counters {
            rx_packets: counter("rtdaq_rx_packets_total", "Packets the engine delivered to the RX queue.", Q),
            rx_bytes: counter("rtdaq_rx_bytes_total", "Bytes the engine delivered to the RX queue (UDP payload, or frame bytes on raw engines).", Q),
            rx_validated: counter("rtdaq_rx_validated_packets_total", "Packets the RX queue's validator checked.", Q),
            rx_drops: counter("rtdaq_rx_drops_total", "Packets the RX queue dropped, by reason.", QR),
            rx_gaps: counter("rtdaq_rx_seq_gaps_total", "Sequence numbers seen missing (gross: late arrivals are not subtracted).", Q),
            rx_reordered: counter("rtdaq_rx_reordered_total", "Packets that arrived after a later one and filled a gap.", Q),
            rx_duplicates: counter("rtdaq_rx_duplicates_total", "Packets seen twice within the sequence window.", Q),
            rx_corrupt: counter("rtdaq_rx_corrupt_total", "Packets whose payload did not match the sender's pattern.", Q),
            rx_checks: counter("rtdaq_rx_checks_total", "The RX queue validator's counters, by name as in the JSON report: bytes (checked), malformed, too_old, unique, streams_overflow (packets of streams beyond the queue's stream table: not checked, counted as lost), negative_latency, in_gpu_memory, invalid, rejects_<reason>, heaps_<state>.", &["interface", "queue", "counter"]),
            rx_ring_wait: registered(
                &registry,
                prometheus::CounterVec::new(
                    Opts::new("rtdaq_rx_ring_wait_seconds_total", "Time the RX I/O thread waited for a free slot of the ring to its consumer, the datagrams held in the socket buffer (socket queues; NIC queues count ring_full drops instead)."),
                    Q,
                ),
            ),
            stream_packets: counter("rtdaq_rx_stream_packets_total", "Packets of one stream (VDIF/CODIF thread, SPEAD sender, counter or eCPRI stream id).", QS),
            tx_packets: counter("rtdaq_tx_packets_total", "Packets the TX queue sent.", Q),
            tx_bytes: counter("rtdaq_tx_bytes_total", "Bytes the TX queue sent.", Q),
            tx_drops: counter("rtdaq_tx_drops_total", "Packets the TX queue dropped, by reason.", QR),
            gpu_batches: counter("rtdaq_gpu_batches_total", "GPU stage batches, by state (submitted, completed, dropped, timed_out).", &["interface", "queue", "state"]),
            gpu_packets: counter("rtdaq_gpu_packets_total", "Packets handed to the GPU stage, by outcome (submitted, dropped, not_in_region, no_slot).", &["interface", "queue", "outcome"]),
            gpu_missing: counter("rtdaq_gpu_missing_slots_total", "Zero-filled output slots of completed GPU batches.", Q),
            gpu_checksum_mismatches: counter("rtdaq_gpu_checksum_mismatches_total", "GPU batches whose checksum differed from the CPU reference.", Q),
            gpu_errors: counter("rtdaq_gpu_errors_total", "CUDA errors of the GPU stage.", Q),
            rec_packets: counter("rtdaq_record_packets_total", "Records (packets, or GPU batches) on disk, per sink.", &["sink"]),
            rec_bytes: counter("rtdaq_record_bytes_total", "Bytes on disk, file headers included, per sink.", &["sink"]),
            rec_dropped: counter("rtdaq_record_dropped_total", "Records not written, by reason (full, tap, error).", &["sink", "reason"]),
            egress_payloads: counter("rtdaq_egress_payloads_total", "Received payloads (a GPU stage's products, for a sink of products) an egress sink took (taken) and sent in heaps that went out whole (sent), per sink.", &["sink", "state"]),
            egress_heaps: counter("rtdaq_egress_heaps_total", "Data heaps (SPEAD) or messages (UCX) an egress sink sent, per sink.", &["sink"]),
            egress_packets: counter("rtdaq_egress_packets_total", "SPEAD packets (descriptors and the end of stream included) or UCX messages (the end of stream included) an egress sink sent, per sink.", &["sink"]),
            egress_bytes: counter("rtdaq_egress_bytes_total", "Bytes of those packets (UDP payload bytes) or messages (header and data), per sink.", &["sink"]),
            egress_reconnects: counter("rtdaq_egress_reconnects_total", "Connections an egress sink made again to a destination whose receiver went away (UCX), per sink.", &["sink"]),
            egress_dropped: counter("rtdaq_egress_dropped_total", "Payloads (GPU products) an egress sink did not send, by reason (egress_full, egress_error, peer_gone, egress_incomplete, egress_foreign), and its SPEAD packets the qdisc dropped (txtime_invalid, txtime_missed, and txtime_held: the kernel still held them at the end; packets, not payloads): lost to the deployment.", &["sink", "reason"]),
            ring_payloads: counter("rtdaq_dada_ring_payloads_total", "Received payloads a queue wrote into its PSRDADA ring, per ring.", &["ring"]),
            ring_bytes: counter("rtdaq_dada_ring_bytes_total", "Bytes a queue wrote into its PSRDADA ring's data blocks, per ring.", &["ring"]),
            time_sync_lost: counter("rtdaq_time_sync_lost_total", "Times the clock stopped being synchronised during the run ([time]: ptp4l's port left SLAVE, the offset went beyond max_offset_ns, or ptp4l stopped answering).", &["ptp4l"]),
            ring_readers_left: counter("rtdaq_dada_ring_readers_left_total", "Readers that left a queue's PSRDADA ring in the middle of the data (killed, or unlocked early), per ring.", &["ring"]),
            ring_readers_followed: counter("rtdaq_dada_ring_readers_followed_total", "Of those, the places readied for the next reader (the block the leaver held, and a header whose OBS_OFFSET says where the next reader starts), per ring.", &["ring"]),
            dump_packets: counter("rtdaq_dump_history_packets_total", "Packets a queue kept in its triggered dump's RAM history (state=kept), or did not (state=not_kept: a dump was writing from the history); received all the same.", &["history", "state"]),
            ring_dropped: counter("rtdaq_dada_ring_dropped_total", "Payloads a queue did not write into its PSRDADA ring, by reason (ring_reader_behind: no clear block, a reader behind; ring_error): lost to the readers.", &["ring", "reason"]),
            nic_pause: counter("rtdaq_nic_pause_frames_total", "Pause frames of the interface's NIC since the run started, by direction (received: the link partner throttled this host's transmit; sent: this NIC throttled the sender). The largest of the driver's pause counters.", &["interface", "netdev", "direction"]),
            nic_dropped: counter("rtdaq_nic_rx_dropped_total", "Frames the NIC or driver dropped before any queue saw them since the run started (the largest of those counters).", &["interface", "netdev"]),
            port_packets: counter("rtdaq_port_packets_total", "Packets of an engine's own port (DPDK: rte_eth_stats), by direction.", &["interface", "port", "direction"]),
            port_bytes: counter("rtdaq_port_bytes_total", "Bytes of an engine's own port, by direction.", &["interface", "port", "direction"]),
            port_missed: counter("rtdaq_port_rx_missed_total", "Frames an engine's own port dropped for lack of receive descriptors (imissed) or mbufs (rx_nombuf), by reason.", &["interface", "port", "reason"]),
            port_errors: counter("rtdaq_port_errors_total", "Errors of an engine's own port, by direction.", &["interface", "port", "direction"]),
            port_pause: counter("rtdaq_port_pause_frames_total", "Pause frames of an engine's own port since it started, by direction (the largest of its extended pause counters).", &["interface", "port", "direction"]),
            io_allocations: registered(
                &registry,
                prometheus::IntCounter::with_opts(Opts::new(
                    "rtdaq_io_thread_allocations_total",
                    "Heap allocations made by queue threads after their set-up (must stay 0).",
                )),
            ),
        };
        let g = Gauges::new(&registry);
        let b = &src.build;
        g.build_info
            .with_label_values(&[
                &b.version,
                &b.commit,
                &b.engine,
                &b.platform,
                &b.config,
                &b.config_sha256,
            ])
            .set(1);
        Self {
            src,
            registry,
            c,
            g,
        }
    }

    /// Brings every metric to the counters' values now.
    fn update(&self) {
        for (l, st) in &self.src.rx {
            self.update_rx(l, st);
        }
        self.update_tx_and_sinks();
        if let Some(nics) = &self.src.nics {
            self.update_nics(nics);
        }
        if let Some(ports) = &self.src.ports {
            self.update_ports(ports);
        }
        if let Some(t) = self.src.time {
            let l = [t.ptp4l.as_str()];
            let synced = t.synchronised.load(Relaxed);
            self.g
                .time_synchronised
                .with_label_values(&l)
                .set(i64::from(synced));
            self.g
                .time_offset
                .with_label_values(&l)
                .set(t.offset_ns.load(Relaxed));
            set_counter(&self.c.time_sync_lost, &l, t.lost.load(Relaxed));
        }
        self.update_process();
    }

    /// One RX queue: its I/O and consumer counters, checks, ring wait, streams, GPU stage.
    fn update_rx(&self, l: &QueueLabel, st: &QueueStats) {
        let c = &self.c;
        let (i, q) = (l.interface.as_str(), l.queue.to_string());
        let (io, cons) = (st.io.snapshot(), st.consumer.snapshot());
        let lq = [i, q.as_str()];
        set_counter(&c.rx_packets, &lq, io.packets);
        set_counter(&c.rx_bytes, &lq, io.bytes);
        set_counter(&c.rx_validated, &lq, cons.packets);
        set_drops(&c.rx_drops, i, &q, &[io, cons]);
        set_counter(&c.rx_gaps, &lq, cons.seq_gaps);
        set_counter(&c.rx_reordered, &lq, cons.reordered);
        set_counter(&c.rx_duplicates, &lq, cons.duplicates);
        set_counter(&c.rx_corrupt, &lq, cons.corrupt);
        for (name, v) in st.checks.get() {
            if !LIVE_ELSEWHERE.iter().any(|(n, _)| *n == name) {
                set_counter(&c.rx_checks, &[i, q.as_str(), name], v);
            }
        }
        let waited = c.rx_ring_wait.with_label_values(&lq);
        let secs = st.ring_wait_ns.load(Relaxed) as f64 / 1e9;
        if secs > waited.get() {
            waited.inc_by(secs - waited.get());
        }
        let streams = st.streams.entries();
        self.g
            .streams
            .with_label_values(&lq)
            .set(streams.len() as i64);
        for (id, packets, missing) in streams {
            let s = format!("{id:#x}");
            let ls = [i, q.as_str(), s.as_str()];
            set_counter(&c.stream_packets, &ls, packets);
            self.g
                .stream_missing
                .with_label_values(&ls)
                .set(i64::try_from(missing).unwrap_or(i64::MAX));
        }
        if l.gpu {
            self.update_gpu(i, &q, &st.gpu);
        }
    }

    /// A queue's GPU stage: batches, packets, missing, checksum mismatches, CUDA errors.
    fn update_gpu(&self, i: &str, q: &str, g: &crate::observe::gpu_report::GpuCounters) {
        let c = &self.c;
        let lq = [i, q];
        let v = |a: &std::sync::atomic::AtomicU64| a.load(Relaxed);
        for (state, n) in [
            ("submitted", v(&g.batches_submitted)),
            ("completed", v(&g.batches_completed)),
            ("dropped", v(&g.batches_dropped)),
            ("timed_out", v(&g.batches_timed_out)),
        ] {
            set_counter(&c.gpu_batches, &[i, q, state], n);
        }
        for (outcome, n) in [
            ("submitted", v(&g.packets)),
            ("dropped", v(&g.packets_dropped)),
            ("not_in_region", v(&g.not_in_region)),
            ("no_slot", v(&g.no_slot)),
        ] {
            set_counter(&c.gpu_packets, &[i, q, outcome], n);
        }
        set_counter(&c.gpu_missing, &lq, v(&g.missing));
        set_counter(&c.gpu_checksum_mismatches, &lq, v(&g.checksum_mismatch));
        set_counter(&c.gpu_errors, &lq, v(&g.errors));
    }

    /// TX queues and record sinks.
    fn update_tx_and_sinks(&self) {
        let c = &self.c;
        for (l, st) in &self.src.tx {
            let (i, q) = (l.interface.as_str(), l.queue.to_string());
            let io = st.io.snapshot();
            set_counter(&c.tx_packets, &[i, &q], io.packets);
            set_counter(&c.tx_bytes, &[i, &q], io.bytes);
            set_drops(&c.tx_drops, i, &q, &[io]);
        }
        for (name, s) in &self.src.sinks {
            let v = |a: &std::sync::atomic::AtomicU64| a.load(Relaxed);
            set_counter(&c.rec_packets, &[name], v(&s.written));
            set_counter(&c.rec_bytes, &[name], v(&s.bytes));
            for (reason, n) in [
                ("full", v(&s.dropped_full)),
                ("tap", v(&s.dropped_tap)),
                ("error", v(&s.dropped_error) + v(&s.dropped_error_writer)),
            ] {
                set_counter(&c.rec_dropped, &[name, reason], n);
            }
        }
        for (name, e) in &self.src.egress {
            let v = |a: &std::sync::atomic::AtomicU64| a.load(Relaxed);
            let taken = e.taken();
            set_counter(&c.egress_payloads, &[name, "taken"], taken);
            set_counter(&c.egress_payloads, &[name, "sent"], v(&e.payloads_sent));
            set_counter(&c.egress_heaps, &[name], v(&e.heaps));
            set_counter(&c.egress_packets, &[name], v(&e.datagrams));
            set_counter(&c.egress_bytes, &[name], v(&e.bytes));
            set_counter(&c.egress_reconnects, &[name], v(&e.reconnects));
            for (reason, n) in [
                ("egress_full", v(&e.dropped_full)),
                (
                    "egress_error",
                    v(&e.dropped_error) + v(&e.dropped_too_large),
                ),
                ("peer_gone", v(&e.dropped_peer_gone)),
                ("egress_incomplete", v(&e.dropped_incomplete)),
                ("egress_foreign", v(&e.dropped_foreign)),
                // SPEAD packets, not payloads: the qdisc dropped them after the send.
                ("txtime_invalid", v(&e.txtime_invalid)),
                ("txtime_missed", v(&e.txtime_missed)),
                ("txtime_held", v(&e.txtime_held)),
            ] {
                set_counter(&c.egress_dropped, &[name, reason], n);
            }
        }
        for (name, h) in &self.src.histories {
            set_counter(&c.dump_packets, &[name, "kept"], h.kept.load(Relaxed));
            set_counter(
                &c.dump_packets,
                &[name, "not_kept"],
                h.not_kept.load(Relaxed),
            );
        }
        for (name, r) in &self.src.rings {
            let v = |a: &std::sync::atomic::AtomicU64| a.load(Relaxed);
            set_counter(&c.ring_payloads, &[name], v(&r.payloads));
            set_counter(&c.ring_bytes, &[name], v(&r.bytes));
            for (reason, n) in [
                ("ring_reader_behind", v(&r.dropped_behind)),
                ("ring_error", v(&r.dropped_error)),
            ] {
                set_counter(&c.ring_dropped, &[name, reason], n);
            }
            set_counter(&c.ring_readers_left, &[name], v(&r.readers_left));
            set_counter(&c.ring_readers_followed, &[name], v(&r.readers_followed));
        }
    }

    /// The interfaces' NIC counters (pause frames, drops, every counter by source).
    fn update_nics(&self, nics: &crate::observe::nic::Shared) {
        let c = &self.c;
        let now = nics.lock().map(|g| g.clone()).unwrap_or_default();
        for n in &now {
            let (i, d) = (n.interface.as_str(), n.sample.netdev.as_str());
            set_counter(
                &c.nic_pause,
                &[i, d, "received"],
                rtdaq_platform::nic::Biggest::delta_of(&n.change.pause_received),
            );
            set_counter(
                &c.nic_pause,
                &[i, d, "sent"],
                rtdaq_platform::nic::Biggest::delta_of(&n.change.pause_sent),
            );
            set_counter(
                &c.nic_dropped,
                &[i, d],
                rtdaq_platform::nic::Biggest::delta_of(&n.change.rx_dropped),
            );
            for (source, list) in [
                ("ethtool", &n.sample.ethtool),
                ("kernel", &n.sample.kernel),
                ("standard", &n.sample.standard),
            ] {
                for (name, v) in list {
                    self.g
                        .nic_counter
                        .with_label_values(&[i, d, source, name])
                        .set(i64::try_from(*v).unwrap_or(i64::MAX));
                }
            }
        }
    }

    /// An engine's own ports (DPDK).
    fn update_ports(&self, ports: &crate::observe::nic::SharedPorts) {
        let c = &self.c;
        let now = ports.lock().map(|g| g.clone()).unwrap_or_default();
        for (i, p, change) in &now {
            let (i, n) = (i.as_str(), p.port.as_str());
            for (dir, packets, bytes, errors) in [
                ("rx", p.ipackets, p.ibytes, p.ierrors),
                ("tx", p.opackets, p.obytes, p.oerrors),
            ] {
                set_counter(&c.port_packets, &[i, n, dir], packets);
                set_counter(&c.port_bytes, &[i, n, dir], bytes);
                set_counter(&c.port_errors, &[i, n, dir], errors);
            }
            set_counter(&c.port_missed, &[i, n, "imissed"], p.imissed);
            set_counter(&c.port_missed, &[i, n, "rx_nombuf"], p.rx_nombuf);
            set_counter(
                &c.port_pause,
                &[i, n, "received"],
                rtdaq_platform::nic::Biggest::delta_of(&change.pause_received),
            );
            set_counter(
                &c.port_pause,
                &[i, n, "sent"],
                rtdaq_platform::nic::Biggest::delta_of(&change.pause_sent),
            );
            for (name, v) in &p.xstats {
                self.g
                    .port_counter
                    .with_label_values(&[i, n, name])
                    .set(i64::try_from(*v).unwrap_or(i64::MAX));
            }
        }
    }

    /// The process: allocations after set-up, each thread's priority, locked memory, age.
    fn update_process(&self) {
        let c = &self.c;
        set_total(
            &c.io_allocations,
            rtdaq_platform::alloc_audit::armed_allocations(),
        );
        self.g.thread_priority.reset();
        for t in crate::observe::procfs::threads() {
            self.g
                .thread_priority
                .with_label_values(&[&t.name, &t.policy, &t.cpus])
                .set(i64::from(t.rt_priority));
        }
        if let Some(b) = crate::observe::procfs::locked_bytes() {
            self.g
                .memory_locked
                .set(i64::try_from(b).unwrap_or(i64::MAX));
        }
        let secs = crate::pacer::now_ns().saturating_sub(self.src.start_ns) as f64 / 1e9;
        self.g.elapsed.set(secs);
    }
}

/// Raises counter `c{labels}` to `v` (a Prometheus counter only goes up; the source
/// counters never go down).
fn set_counter(c: &IntCounterVec, labels: &[&str], v: u64) {
    let m = c.with_label_values(labels);
    let old = m.get();
    if v > old {
        m.inc_by(v - old);
    }
}

/// Every drop reason of interface `i` queue `q`, summed over the snapshots `s`.
fn set_drops(c: &IntCounterVec, i: &str, q: &str, s: &[CounterSnapshot]) {
    for (k, r) in DropReason::ALL.iter().enumerate() {
        let n = s.iter().map(|x| x.drops[k]).sum();
        set_counter(c, &[i, q, r.as_str()], n);
    }
}

/// `metric` (built from a valid name) registered in `registry`.
fn registered<M: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    metric: prometheus::Result<M>,
) -> M {
    let m = metric.expect("a valid metric name");
    registry
        .register(Box::new(m.clone()))
        .expect("each metric registered once");
    m
}

/// An empty histogram family `name`.
fn histogram_family(name: &str, help: &str) -> prometheus::proto::MetricFamily {
    let mut fam = prometheus::proto::MetricFamily::default();
    fam.set_name(name.into());
    fam.set_help(help.into());
    fam.set_field_type(prometheus::proto::MetricType::HISTOGRAM);
    fam
}

/// One histogram of `fam`: `labels`, cumulative `buckets` as (upper bound ns, count), the
/// total `count` and `sum_ns`.
fn push_histogram(
    fam: &mut prometheus::proto::MetricFamily,
    labels: &[(&str, String)],
    buckets: &[(u64, u64)],
    count: u64,
    sum_ns: u64,
) {
    use prometheus::proto::{Bucket, LabelPair, Metric};
    let mut h = prometheus::proto::Histogram::default();
    h.set_bucket(
        buckets
            .iter()
            .map(|&(bound, n)| {
                let mut b = Bucket::default();
                b.set_upper_bound(bound as f64 / 1e9);
                b.set_cumulative_count(n);
                b
            })
            .collect(),
    );
    h.set_sample_count(count);
    h.set_sample_sum(sum_ns as f64 / 1e9);
    let mut m = Metric::default();
    m.set_label(
        labels
            .iter()
            .map(|(k, v)| {
                let mut l = LabelPair::default();
                l.set_name((*k).to_owned());
                l.set_value(v.clone());
                l
            })
            .collect(),
    );
    m.set_histogram(h);
    fam.mut_metric().push(m);
}

/// Brings a plain counter to `v` (counters only go up).
fn set_total(c: &prometheus::IntCounter, v: u64) {
    let old = c.get();
    if v > old {
        c.inc_by(v - old);
    }
}

impl Exporter {
    /// The text exposition of every metric.
    fn metrics_text(&self) -> Vec<u8> {
        self.update();
        let mut out = Vec::new();
        // Encoding into a Vec cannot fail for valid metrics (the registry checked them).
        let mut families = self.registry.gather();
        if !self.src.rx.is_empty() {
            families.push(self.latency_family());
        }
        // A family without a metric is left out (the text format has no empty families).
        families.extend(
            self.jitter_families()
                .into_iter()
                .filter(|f| !f.get_metric().is_empty()),
        );
        let _ = TextEncoder::new().encode(&families, &mut out);
        out
    }

    /// `rtdaq_rx_latency_seconds`, a histogram per RX queue built from the buckets its
    /// consumer publishes (the `prometheus` crate's own histogram is fed one value at a
    /// time; this one is read from counters another thread keeps, so it is assembled as a
    /// metric family of its own).
    fn latency_family(&self) -> prometheus::proto::MetricFamily {
        let mut fam = histogram_family(
            "rtdaq_rx_latency_seconds",
            "One-way latency of received packets (receive time minus the sender's timestamp in rtdaq's header; CLOCK_REALTIME of both hosts), published by the queue's consumer every 16 bursts.",
        );
        for (l, st) in &self.src.rx {
            let c = st.latency.load();
            let mut cumulative = 0u64;
            let buckets = crate::latency::LIVE_BOUNDS_NS
                .iter()
                .zip(c.counts)
                .map(|(b, n)| {
                    cumulative += n;
                    (*b, cumulative)
                });
            let buckets: Vec<(u64, u64)> = buckets.collect();
            let count = cumulative + c.counts[crate::latency::LIVE_BUCKETS - 1];
            let labels = [
                ("interface", l.interface.clone()),
                ("queue", l.queue.to_string()),
            ];
            push_histogram(&mut fam, &labels, &buckets, count, c.sum_ns);
        }
        fam
    }

    /// `rtdaq_loop_turn_seconds` and `rtdaq_wake_latency_seconds`: every queue thread's
    /// loop turns and, for one that sleeps until a deadline, how late it woke
    /// ([`crate::stall`]), by interface, queue and thread (`io`, `consumer`).
    fn jitter_families(&self) -> [prometheus::proto::MetricFamily; 2] {
        let mut turns = histogram_family(
            "rtdaq_loop_turn_seconds",
            "Loop turns of each queue thread (the time between two successive clock reads of its loop, its own bounded waits included): every turn, by direction, interface, queue and thread.",
        );
        let mut wakes = histogram_family(
            "rtdaq_wake_latency_seconds",
            "How late a queue thread that sleeps until a deadline (a paced generator or replay) ran after it: every such sleep (what cyclictest measures).",
        );
        let threads = self.src.rx.iter().flat_map(|(l, st)| {
            [
                ("rx", l, "io", &st.stall),
                ("rx", l, "consumer", &st.consumer_stall),
            ]
        });
        let threads = threads.chain(self.src.tx.iter().map(|(l, st)| ("tx", l, "io", &st.stall)));
        for (dir, l, thread, w) in threads {
            let labels = [
                ("direction", dir.to_owned()),
                ("interface", l.interface.clone()),
                ("queue", l.queue.to_string()),
                ("thread", thread.to_owned()),
            ];
            for (fam, h) in [(&mut turns, &w.turns), (&mut wakes, &w.wakes)] {
                let (le, count, sum) = h.octaves();
                if count > 0 {
                    let buckets: Vec<(u64, u64)> = crate::latency::OCTAVE_BOUNDS_NS
                        .iter()
                        .copied()
                        .zip(le)
                        .collect();
                    push_histogram(fam, &labels, &buckets, count, sum);
                }
            }
        }
        [turns, wakes]
    }

    fn answer(&self, req: &crate::observe::http::Request<'_>) -> crate::observe::http::Response {
        use crate::observe::http::Response;
        if !matches!(req.method, "GET" | "HEAD") {
            let mut r = Response::text(405, "only GET and HEAD\n");
            r.headers.push("Allow: GET, HEAD");
            return r;
        }
        match req.path {
            "/metrics" => Response {
                status: 200,
                content_type: "text/plain; version=0.0.4; charset=utf-8",
                headers: Vec::new(),
                body: self.metrics_text(),
            },
            "/status" => Response {
                status: 200,
                content_type: "application/json",
                headers: Vec::new(),
                body: status_json(&self.src),
            },
            "/" => Response::text(
                200,
                "rtdaq: /metrics (Prometheus text format), /status (JSON)\n",
            ),
            _ => Response::text(404, "not found: /metrics or /status\n"),
        }
    }
}

/// The JSON status (`/status`, `rtdaq run --status-file`): the report's counters so far.
pub fn status_json(src: &Source) -> Vec<u8> {
    let q = |l: &QueueLabel, st: &QueueStats| {
        let (io, cons) = (st.io.snapshot(), st.consumer.snapshot());
        let mut drops = serde_json::Map::new();
        for (k, r) in DropReason::ALL.iter().enumerate() {
            drops.insert(r.as_str().into(), (io.drops[k] + cons.drops[k]).into());
        }
        serde_json::json!({
            "interface": l.interface,
            "queue": l.queue,
            "packets": io.packets,
            "bytes": io.bytes,
            "validated": cons.packets,
            "seq_gaps": cons.seq_gaps,
            "reordered": cons.reordered,
            "duplicates": cons.duplicates,
            "corrupt": cons.corrupt,
            "drops": drops,
        })
    };
    let b = &src.build;
    let v = serde_json::json!({
        "config": b.config,
        "config_sha256": b.config_sha256,
        "engine": b.engine,
        "platform": b.platform,
        "version": b.version,
        "elapsed_s": crate::pacer::now_ns().saturating_sub(src.start_ns) as f64 / 1e9,
        "rx": src.rx.iter().map(|(l, s)| q(l, s)).collect::<Vec<_>>(),
        "tx": src.tx.iter().map(|(l, s)| q(l, s)).collect::<Vec<_>>(),
    });
    serde_json::to_vec_pretty(&v).unwrap_or_default()
}

/// Writes [`status_json`] to `path` atomically (a temporary file beside it, then a rename):
/// a reader sees the previous status or this one, never a part.
///
/// # Errors
/// The I/O error, for the caller to report (once).
pub fn write_status_file(path: &std::path::Path, src: &Source) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, status_json(src))?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn leak<T>(t: T) -> &'static T {
        Box::leak(Box::new(t))
    }

    fn get(addr: SocketAddr, req: &str) -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    /// The endpoint serves the counters as they are now, by name and label, answers
    /// `/status`, refuses other paths and methods with HTTP errors, and a busy address is a
    /// clear error.
    #[test]
    fn endpoint_serves_the_counters_now() {
        let rx = leak(QueueStats::new_for_tests());
        let tx = leak(QueueStats::new_for_tests());
        rx.io.record_rx_burst(10, 14_000);
        rx.consumer.record_rx_burst(10, 14_000);
        rx.consumer.add_seq_gaps(3);
        rx.io.record_drops(DropReason::RingFull, 2);
        rx.streams.store(0, 0x105c800, 10, 3);
        let mut lat = crate::latency::Coarse::default();
        lat.record(1_500);
        lat.record(3_000_000_000);
        rx.latency.store(&lat);
        tx.io.record_rx_burst(12, 16_800);
        // Loop turns of the RX I/O thread (1.5 µs, 3 µs) and a TX wake-up 40 µs late.
        rx.stall.turns.record(1_500);
        rx.stall.turns.record(3_000);
        tx.stall.wakes.record(40_000);
        let sink = leak(SinkCounters::default());
        SinkCounters::add(&sink.written, 7);
        rx.ring_wait_ns.store(2_500_000, Relaxed);
        let every = crate::observe::report::tests::every_counter_set().named();
        rx.checks.store(&every);
        let egress: &'static crate::egress::EgressCounters = leak(Default::default());
        egress.payloads_in.store(9, Relaxed);
        egress.dropped_full.store(2, Relaxed);
        egress.payloads_sent.store(6, Relaxed);
        egress.dropped_peer_gone.store(3, Relaxed);
        egress.datagrams.store(9, Relaxed);
        let ep = Endpoint::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = ep.addr();
        let label = |gpu| QueueLabel {
            interface: "lo_udp".into(),
            queue: 0,
            gpu,
        };
        let serving = ep
            .serve(Source {
                build: BuildInfo {
                    version: "0.1.0".into(),
                    config: "test".into(),
                    ..BuildInfo::default()
                },
                rx: vec![(label(false), rx)],
                tx: vec![(label(false), tx)],
                sinks: vec![("lo_udp.rx0 pcap".into(), sink)],
                egress: vec![("lo_udp.rx0 egress spead-out".into(), egress)],
                rings: Vec::new(),
                nics: None,
                ports: None,
                start_ns: crate::pacer::now_ns(),
                triggers: None,
                histories: Vec::new(),
                time: None,
            })
            .unwrap();
        let m = get(addr, "GET /metrics HTTP/1.0\r\n\r\n");
        assert!(
            m.starts_with("HTTP/1.0 200") || m.starts_with("HTTP/1.1 200"),
            "{m}"
        );
        for want in [
            "rtdaq_rx_packets_total{interface=\"lo_udp\",queue=\"0\"} 10",
            "rtdaq_rx_seq_gaps_total{interface=\"lo_udp\",queue=\"0\"} 3",
            "rtdaq_rx_ring_wait_seconds_total{interface=\"lo_udp\",queue=\"0\"} 0.0025",
            "rtdaq_rx_drops_total{interface=\"lo_udp\",queue=\"0\",reason=\"ring_full\"} 2",
            "rtdaq_rx_stream_missing{interface=\"lo_udp\",queue=\"0\",stream=\"0x105c800\"} 3",
            "rtdaq_tx_packets_total{interface=\"lo_udp\",queue=\"0\"} 12",
            "rtdaq_record_packets_total{sink=\"lo_udp.rx0 pcap\"} 7",
            "rtdaq_egress_payloads_total{sink=\"lo_udp.rx0 egress spead-out\",state=\"taken\"} 11",
            "rtdaq_egress_payloads_total{sink=\"lo_udp.rx0 egress spead-out\",state=\"sent\"} 6",
            "rtdaq_egress_packets_total{sink=\"lo_udp.rx0 egress spead-out\"} 9",
            "rtdaq_egress_dropped_total{reason=\"egress_full\",sink=\"lo_udp.rx0 egress spead-out\"} 2",
            "rtdaq_egress_dropped_total{reason=\"peer_gone\",sink=\"lo_udp.rx0 egress spead-out\"} 3",
            "rtdaq_build_info{commit=\"\",config=\"test\"",
            "# TYPE rtdaq_rx_packets_total counter",
            "# TYPE rtdaq_rx_latency_seconds histogram",
            "rtdaq_rx_latency_seconds_bucket{interface=\"lo_udp\",queue=\"0\",le=\"0.000002\"} 1",
            "rtdaq_rx_latency_seconds_bucket{interface=\"lo_udp\",queue=\"0\",le=\"+Inf\"} 2",
            "rtdaq_rx_latency_seconds_count{interface=\"lo_udp\",queue=\"0\"} 2",
            "# TYPE rtdaq_loop_turn_seconds histogram",
            "rtdaq_loop_turn_seconds_bucket{direction=\"rx\",interface=\"lo_udp\",queue=\"0\",thread=\"io\",le=\"0.000002047\"} 1",
            "rtdaq_loop_turn_seconds_bucket{direction=\"rx\",interface=\"lo_udp\",queue=\"0\",thread=\"io\",le=\"0.000004095\"} 2",
            "rtdaq_loop_turn_seconds_sum{direction=\"rx\",interface=\"lo_udp\",queue=\"0\",thread=\"io\"} 0.0000045",
            "rtdaq_wake_latency_seconds_count{direction=\"tx\",interface=\"lo_udp\",queue=\"0\",thread=\"io\"} 1",
            "rtdaq_thread_rt_priority{",
            "rtdaq_io_thread_allocations_total ",
        ] {
            assert!(m.contains(want), "{want} in:\n{m}");
        }
        // Issue #29: every counter the validator keeps is exported, by name or by its own
        // metric (those are the consumer's live counts, set above).
        for (name, v) in every {
            let own = LIVE_ELSEWHERE.iter().find(|(n, _)| *n == name);
            let want = match own {
                Some((_, metric)) => format!("{metric}{{interface=\"lo_udp\",queue=\"0\"}}"),
                None => format!(
                    "rtdaq_rx_checks_total{{counter=\"{name}\",interface=\"lo_udp\",queue=\"0\"}} {v}"
                ),
            };
            assert!(m.contains(&want), "{name}: {want} in:\n{m}");
        }
        // The next scrape sees what moved since.
        rx.io.record_rx_burst(5, 7_000);
        let m = get(addr, "GET /metrics HTTP/1.0\r\n\r\n");
        assert!(
            m.contains("rtdaq_rx_packets_total{interface=\"lo_udp\",queue=\"0\"} 15"),
            "{m}"
        );
        let s = get(addr, "GET /status HTTP/1.0\r\n\r\n");
        let body = &s[s.find("\r\n\r\n").unwrap() + 4..];
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["rx"][0]["packets"], 15);
        assert_eq!(v["rx"][0]["drops"]["ring_full"], 2);
        assert_eq!(v["config"], "test");
        assert!(get(addr, "GET /nope HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 404"));
        let post = get(addr, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
        assert!(
            post.starts_with("HTTP/1.0 405") && post.contains("Allow: GET, HEAD"),
            "{post}"
        );
        let e = Endpoint::bind(addr).unwrap_err().to_string();
        assert!(
            e.contains(&addr.to_string()) && e.contains("cannot listen"),
            "{e}"
        );
        serving.stop();
    }
}
