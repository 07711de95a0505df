//! [`Summary`]: what a config asks of the machine — threads, cores, memory, hugepages.

use crate::model::{
    Config, EgressProtocol, EngineKind, GeneratorLimit, GeneratorRate, PageSize, Placement,
    Platform, RegionKind, RxMode,
};
use crate::validate::human_bytes;
use rtdaq_core::flow::DefaultAction;
use rtdaq_core::format::UnitKind;
use std::fmt;

/// Queue direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Receive.
    Rx,
    /// Transmit.
    Tx,
}

impl Direction {
    /// `"rx"` or `"tx"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Rx => "rx",
            Direction::Tx => "tx",
        }
    }
}

/// One interface in a [`Summary`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceSummary {
    /// Name.
    pub name: String,
    /// Address as written back (`udp://127.0.0.1:5000`, `0000:17:00.0`, `eth0`).
    pub address: String,
    /// MTU.
    pub mtu: u32,
    /// Number of RX queues.
    pub rx_queues: usize,
    /// Number of TX queues.
    pub tx_queues: usize,
    /// Number of flow rules.
    pub flows: usize,
    /// Unmatched traffic: `"rx queue <id>"` or `"drop"`.
    pub default_action: String,
    /// Stream format: `rtdaq`, `counter u64be@0 step 1, stream u16be@8`, `vdif 1600/s`.
    pub format: String,
}

/// One queue (one I/O thread, plus a consumer thread for indirect RX) in a [`Summary`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSummary {
    /// Interface name.
    pub interface: String,
    /// Direction.
    pub direction: Direction,
    /// Queue id.
    pub id: u16,
    /// Core of the I/O thread.
    pub cpu_core: u32,
    /// Core of the consumer thread (indirect RX only).
    pub consumer_core: Option<u32>,
    /// `SCHED_FIFO` priority.
    pub rt_priority: u8,
    /// Packets per burst.
    pub batch_size: u32,
    /// Ring depth.
    pub ring_depth: u32,
    /// Region names, in segment order.
    pub regions: Vec<String>,
    /// Busy-polling.
    pub busy_poll: bool,
}

/// One memory region's footprint in a [`Summary`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionSummary {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: RegionKind,
    /// Bytes per buffer as configured.
    pub buf_size: u32,
    /// Number of buffers.
    pub buf_count: u32,
    /// Bytes per buffer after alignment.
    pub stride: u64,
    /// Bytes allocated: `stride × buf_count` rounded up to the page / granule.
    pub bytes: u64,
    /// Hugepage size (`huge` only).
    pub page_size: Option<PageSize>,
    /// Hugepages needed (`huge` only, else 0).
    pub hugepages: u64,
}

/// GPU memory one GPU needs in a [`Summary`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuSummary {
    /// CUDA device ordinal.
    pub gpu: u32,
    /// Device memory of the GPU stages' pipelines (one per queue using a stage): batch
    /// buffers, descriptors, results, staging and workload buffers.
    pub pipeline_bytes: u64,
    /// `device` regions placed on this GPU.
    pub device_region_bytes: u64,
    /// `host_pinned` regions mapped for this GPU (host memory, page-locked).
    pub pinned_bytes: u64,
    /// `"stage on interface rx queue id"` per pipeline.
    pub pipelines: Vec<String>,
}

impl GpuSummary {
    /// Device memory in total (checked against free GPU memory when the run starts).
    pub fn device_bytes(&self) -> u64 {
        self.pipeline_bytes + self.device_region_bytes
    }
}

/// What a config needs: threads, cores, memory. Displays as a human-readable report.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Appliance name.
    pub name: String,
    /// Platform.
    pub platform: Platform,
    /// Engine.
    pub engine: EngineKind,
    /// Interfaces in file order.
    pub interfaces: Vec<InterfaceSummary>,
    /// Every queue (RX then TX per interface).
    pub queues: Vec<QueueSummary>,
    /// Cores used by any queue thread, ascending, without repeats.
    pub cores: Vec<u32>,
    /// Per-region footprint in file order.
    pub regions: Vec<RegionSummary>,
    /// Sum of all region bytes.
    pub total_bytes: u64,
    /// 2 MiB hugepages needed.
    pub hugepages_2m: u64,
    /// 1 GiB hugepages needed.
    pub hugepages_1g: u64,
    /// GPU memory per GPU (GPUs with a stage or a GPU region only), ascending by id.
    pub gpus: Vec<GpuSummary>,
    /// One line per record sink (queue × recorder): format, where, buffer memory.
    pub sinks: Vec<String>,
    /// Buffer memory of every record sink (locked with the rest).
    pub sink_bytes: u64,
    /// One line per egress sink (queue × egress): protocol, destinations, heap memory.
    pub egress: Vec<String>,
    /// One line per triggered dump: its queues, history memory, directory, triggers.
    pub dumps: Vec<String>,
    /// The PTP check (`[time]`), if any.
    pub time: Option<String>,
    /// One line describing the generator, if any.
    pub generator: Option<String>,
    /// Run length in seconds (0 = until stopped).
    pub duration_s: f64,
}

impl Config {
    /// Summarizes the threads, cores and memory this config needs.
    pub fn summary(&self) -> Summary {
        let region_name = |r: &crate::model::RegionId| self.memory_regions[r.0].name.clone();
        let mut queues = Vec::new();
        let mut interfaces = Vec::new();
        for (i, iface) in self.interfaces.iter().enumerate() {
            for q in &iface.rx_queues {
                queues.push(QueueSummary {
                    interface: iface.name.clone(),
                    direction: Direction::Rx,
                    id: q.id,
                    cpu_core: q.cpu_core,
                    consumer_core: match q.mode {
                        RxMode::Indirect { consumer_core } => Some(consumer_core),
                        RxMode::Direct => None,
                    },
                    rt_priority: q.rt_priority,
                    batch_size: q.batch_size,
                    ring_depth: q.ring_depth,
                    regions: q.memory_regions.iter().map(region_name).collect(),
                    busy_poll: q.busy_poll,
                });
            }
            for q in &iface.tx_queues {
                queues.push(QueueSummary {
                    interface: iface.name.clone(),
                    direction: Direction::Tx,
                    id: q.id,
                    cpu_core: q.cpu_core,
                    consumer_core: None,
                    rt_priority: q.rt_priority,
                    batch_size: q.batch_size,
                    ring_depth: q.ring_depth,
                    regions: q.memory_regions.iter().map(region_name).collect(),
                    busy_poll: q.busy_poll,
                });
            }
            interfaces.push(InterfaceSummary {
                name: iface.name.clone(),
                address: iface.address.to_string(),
                mtu: iface.mtu,
                rx_queues: iface.rx_queues.len(),
                tx_queues: iface.tx_queues.len(),
                flows: self.flows.iter().filter(|f| f.interface.0 == i).count(),
                default_action: match iface.default_action {
                    DefaultAction::Queue(q) => iface
                        .rx_queues
                        .get(usize::from(q.0))
                        .map_or_else(|| "drop".to_owned(), |r| format!("rx queue {}", r.id)),
                    DefaultAction::Drop => "drop".to_owned(),
                },
                format: describe_format(&iface.format),
            });
        }
        let mut cores: Vec<u32> = queues
            .iter()
            .flat_map(|q| std::iter::once(q.cpu_core).chain(q.consumer_core))
            .collect();
        cores.sort_unstable();
        cores.dedup();
        let regions: Vec<RegionSummary> = self
            .memory_regions
            .iter()
            .map(|r| RegionSummary {
                name: r.name.clone(),
                kind: r.kind,
                buf_size: r.buf_size,
                buf_count: r.buf_count,
                stride: r.stride(),
                bytes: r.footprint(),
                page_size: r.page_size,
                hugepages: r.hugepages(),
            })
            .collect();
        let pages = |p: PageSize| {
            regions
                .iter()
                .filter(|r| r.page_size == Some(p))
                .map(|r| r.hugepages)
                .sum()
        };
        Summary {
            name: self.name.clone(),
            platform: self.platform,
            engine: self.engine_kind(),
            interfaces,
            queues,
            cores,
            total_bytes: regions.iter().map(|r| r.bytes).sum(),
            hugepages_2m: pages(PageSize::Size2M),
            hugepages_1g: pages(PageSize::Size1G),
            regions,
            gpus: self.gpu_summary(),
            sinks: self.sink_lines(),
            egress: self.egress_lines(),
            dumps: self.dump_lines(),
            time: self.time.as_ref().map(|t| {
                format!(
                    "ptp4l at {} (domain {}): synchronised = a port SLAVE within {} ns of the master; {}",
                    t.ptp4l.display(),
                    t.domain,
                    t.max_offset_ns,
                    if t.require_sync {
                        "required to start (exit 2 otherwise), watched once a second"
                    } else {
                        "watched once a second (not required to start)"
                    }
                )
            }),
            sink_bytes: self.sink_bytes(),
            generator: self.generator.as_ref().map(|g| self.describe_generator(g)),
            duration_s: self.run.duration_s,
        }
    }

    /// Record sinks: every queue × each recorder it names, then every queue with a GPU
    /// stage × each recorder of the stage (its products).
    fn sinks(
        &self,
    ) -> impl Iterator<
        Item = (
            &str,
            u16,
            &crate::model::Recorder,
            Option<&crate::model::GpuStage>,
        ),
    > + '_ {
        self.interfaces.iter().flat_map(move |i| {
            i.rx_queues.iter().flat_map(move |q| {
                let stage = q.gpu_stage.map(|s| &self.gpu_stages[s.0]);
                let packets = q
                    .record
                    .iter()
                    .filter(|r| !self.recorders[r.0].shared)
                    .map(move |r| (i.name.as_str(), q.id, &self.recorders[r.0], None));
                let products = stage.into_iter().flat_map(move |st| {
                    st.record
                        .iter()
                        .map(move |r| (i.name.as_str(), q.id, &self.recorders[r.0], Some(st)))
                });
                packets.chain(products)
            })
        })
    }

    /// Shared record sinks: every interface × each shared recorder its queues name, with
    /// those queues' ids.
    fn shared_sinks(&self) -> Vec<(&str, Vec<u16>, &crate::model::Recorder)> {
        let mut out = Vec::new();
        for i in &self.interfaces {
            for (k, r) in self.recorders.iter().enumerate() {
                let queues: Vec<u16> = i
                    .rx_queues
                    .iter()
                    .filter(|q| r.shared && q.record.iter().any(|x| x.0 == k))
                    .map(|q| q.id)
                    .collect();
                if !queues.is_empty() {
                    out.push((i.name.as_str(), queues, r));
                }
            }
        }
        out
    }

    fn sink_bytes(&self) -> u64 {
        let ring = |r: &crate::model::Recorder| r.buffer_bytes as u64 * u64::from(r.buffers);
        self.sinks().map(|(_, _, r, _)| ring(r)).sum::<u64>()
            + self
                .shared_sinks()
                .iter()
                .map(|(_, q, r)| ring(r) * (q.len() as u64 + 1))
                .sum::<u64>()
    }

    fn dump_lines(&self) -> Vec<String> {
        self.dumps
            .iter()
            .enumerate()
            .map(|(k, d)| {
                let queues: Vec<String> = self
                    .interfaces
                    .iter()
                    .flat_map(|i| {
                        i.rx_queues
                            .iter()
                            .filter(|q| q.dump.map(|x| x.0) == Some(k))
                            .map(move |q| format!("{} rx{}", i.name, q.id))
                    })
                    .collect();
                let mut triggers = Vec::new();
                if let Some(m) = self.run.metrics {
                    triggers.push(format!("POST http://{m}/trigger"));
                }
                if let Some(u) = d.udp_trigger {
                    triggers.push(format!("udp {u}"));
                }
                triggers.push(match d.signal_window_ms {
                    Some(ms) => format!("SIGUSR1 (last {ms} ms)"),
                    None => "SIGUSR1 (all it holds)".into(),
                });
                format!(
                    "{} ({}): the last {} packets x {} B = {} per queue, to {}/; triggers: {}",
                    d.name,
                    queues.join(", "),
                    d.history_packets,
                    d.slot_bytes,
                    human_bytes(d.history_bytes()),
                    d.directory.display(),
                    triggers.join(", ")
                )
            })
            .collect()
    }

    fn egress_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for i in &self.interfaces {
            for q in &i.rx_queues {
                let stage = q.gpu_stage.map(|s| &self.gpu_stages[s.0]);
                let own = q.egress.iter().map(|e| (e, None));
                let products = stage
                    .into_iter()
                    .flat_map(|s| s.egress.iter().map(move |e| (e, Some(s))));
                for (e, stage) in own.chain(products) {
                    let e = &self.egress[e.0];
                    let dests: Vec<String> =
                        e.destinations.iter().map(ToString::to_string).collect();
                    let what = match stage {
                        None => match e.units {
                            None => format!("{} payload(s) per heap", e.packets_per_heap),
                            Some(u) => format!(
                                "whole {}, {}, {} assembled at once",
                                u.kind.plural().replace('_', " "),
                                match (e.protocol, u.kind) {
                                    (EgressProtocol::Ucx, _) => "one a message",
                                    (_, UnitKind::SpeadHeap) => "forwarded as they arrived",
                                    _ => "one a heap",
                                },
                                u.open
                            ),
                        },
                        Some(s) => format!(
                            "GPU stage {}'s products ({}, {} B), one a heap",
                            s.name,
                            s.product.map_or("", |p| p.as_str()),
                            s.product_bytes()
                        ),
                    };
                    // A UCX sink also has spare buffers for the messages in flight.
                    let (bufs, layout) = match e.protocol {
                        EgressProtocol::Spead => (
                            e.heap_buffers,
                            format!(
                                "packets of {} B, {} heap buffers",
                                e.max_packet, e.heap_buffers
                            ),
                        ),
                        EgressProtocol::Ucx => {
                            let spares = e.heap_buffers.min(crate::model::UCX_MAX_IN_FLIGHT);
                            (
                                e.heap_buffers + spares,
                                format!(
                                    "({} message buffers + {spares} spares for messages in flight)",
                                    e.heap_buffers
                                ),
                            )
                        }
                    };
                    out.push(format!(
                        "{} rx queue {} -> {} ({} to {}): {}, {layout} x {} = {}",
                        i.name,
                        q.id,
                        e.name,
                        e.protocol.as_str(),
                        dests.join(", "),
                        what,
                        human_bytes(e.max_heap_bytes as u64),
                        human_bytes(e.max_heap_bytes as u64 * u64::from(bufs))
                    ));
                }
            }
        }
        // A queue's PSRDADA ring: what it writes to, and the shared memory a ring it creates
        // takes.
        for i in &self.interfaces {
            for q in &i.rx_queues {
                let Some(r) = q.dada_ring.map(|r| &self.dada_rings[r.0]) else {
                    continue;
                };
                let shape = match r.create {
                    Some(c) => format!(
                        "created: {} x {} = {}, {} reader(s){}",
                        c.nbufs,
                        human_bytes(c.bufsz),
                        human_bytes(c.bufsz * u64::from(c.nbufs)),
                        c.readers,
                        if c.lock { ", locked" } else { "" }
                    ),
                    None => "attached (dada_db's)".to_string(),
                };
                out.push(format!(
                    "{} rx queue {} -> PSRDADA ring {} (key {:x}, header {:x}): {shape}",
                    i.name,
                    q.id,
                    r.name,
                    r.key,
                    r.key + 1
                ));
            }
        }
        out
    }

    fn sink_lines(&self) -> Vec<String> {
        self.sinks()
            .map(|(iface, q, r, stage)| {
                let bytes = r.buffer_bytes as u64 * u64::from(r.buffers);
                let what = match stage {
                    None => String::new(),
                    Some(st) => format!(
                        " GPU stage {} {} ({} per batch)",
                        st.name,
                        match st.product {
                            Some(crate::model::GpuProduct::Workload) => "results",
                            _ => "batches",
                        },
                        human_bytes(st.product_bytes())
                    ),
                };
                format!(
                    "{iface} rx queue {q}{what} -> {} ({}) in {}: {} buffers x {} = {}",
                    r.name,
                    r.format.as_str(),
                    r.directory,
                    r.buffers,
                    human_bytes(r.buffer_bytes as u64),
                    human_bytes(bytes)
                )
            })
            .chain(self.shared_sinks().into_iter().map(|(iface, q, r)| {
                let ring = r.buffer_bytes as u64 * u64::from(r.buffers);
                let ids: Vec<String> = q.iter().map(u16::to_string).collect();
                format!(
                    "{iface} rx queues {} -> {} ({}, shared: one file in arrival order) in {}: {} taps + the sink, {} buffers x {} each = {}",
                    ids.join(","),
                    r.name,
                    r.format.as_str(),
                    r.directory,
                    q.len(),
                    r.buffers,
                    human_bytes(r.buffer_bytes as u64),
                    human_bytes(ring * (q.len() as u64 + 1))
                )
            }))
            .collect()
    }

    fn gpu_summary(&self) -> Vec<GpuSummary> {
        let mut gpus: Vec<GpuSummary> = Vec::new();
        fn entry(gpus: &mut Vec<GpuSummary>, id: u32) -> &mut GpuSummary {
            let k = match gpus.iter().position(|g| g.gpu == id) {
                Some(k) => k,
                None => {
                    gpus.push(GpuSummary {
                        gpu: id,
                        pipeline_bytes: 0,
                        device_region_bytes: 0,
                        pinned_bytes: 0,
                        pipelines: Vec::new(),
                    });
                    gpus.len() - 1
                }
            };
            &mut gpus[k]
        }
        let mut pending = Vec::new();
        for r in &self.memory_regions {
            if let Placement::Gpu(g) = r.placement {
                pending.push((g, r.kind, r.footprint()));
            }
        }
        for (g, kind, bytes) in pending {
            let e = entry(&mut gpus, g);
            match kind {
                RegionKind::Device => e.device_region_bytes += bytes,
                _ => e.pinned_bytes += bytes,
            }
        }
        for iface in &self.interfaces {
            for q in &iface.rx_queues {
                if let Some(s) = q.gpu_stage {
                    let stage = &self.gpu_stages[s.0];
                    let e = entry(&mut gpus, stage.gpu);
                    e.pipeline_bytes += stage.device_bytes();
                    e.pinned_bytes += stage.product_host_bytes();
                    let heaps = stage.max_packets.map_or_else(String::new, |n| {
                        format!(
                            " (SPEAD heap assembly: {} heaps of {} B a batch, at most {n} packets)",
                            stage.packets_per_batch, stage.max_payload
                        )
                    });
                    e.pipelines.push(format!(
                        "{}{heaps} on {} rx queue {}",
                        stage.name, iface.name, q.id
                    ));
                }
            }
        }
        gpus.sort_by_key(|g| g.gpu);
        gpus
    }

    fn describe_generator(&self, g: &crate::model::Generator) -> String {
        let iface = &self.interfaces[g.interface.0];
        let q = &iface.tx_queues[usize::from(g.tx_queue.0)];
        let mut rate = match g.rate {
            GeneratorRate::Gbps(r) => format!("{r} Gb/s"),
            GeneratorRate::Pps(p) => format!("{p} packets/s"),
            GeneratorRate::Unpaced => "unpaced".to_owned(),
        };
        match g.pacing {
            crate::model::GenPacing::Txtime { lead_us } => rate.push_str(&format!(
                " (launch times, up to {lead_us} µs ahead: the interface needs the etf or fq qdisc)"
            )),
            crate::model::GenPacing::Nic => rate.push_str(
                " (the NIC paces the queue where its PMD has a per-queue rate limit, else software: see the report)",
            ),
            crate::model::GenPacing::Software => {}
        }
        let limit = match g.limit {
            GeneratorLimit::Duration(s) => format!("for {s} s"),
            GeneratorLimit::Count(c) => format!("{c} packets"),
            GeneratorLimit::Run => "until the run ends".to_owned(),
        };
        let to = g
            .destination
            .map_or_else(|| "its connections".to_owned(), |d| d.to_string());
        if let Some(r) = &g.replay {
            let timing = match r.timing {
                crate::model::ReplayTiming::Recorded { speed } => {
                    format!("at the recorded timing x {speed}")
                }
                crate::model::ReplayTiming::Rate => format!("at {rate}"),
            };
            return format!(
                "replays {} {timing}, {} loop(s), on {} tx queue {} to {to}, {limit}",
                r.path.display(),
                r.loops,
                iface.name,
                q.id
            );
        }
        format!(
            "{} B payloads at {rate} on {} tx queue {} to {to}, {limit}, {}",
            g.payload_size,
            iface.name,
            q.id,
            if g.streams > 1 {
                format!(
                    "streams {}..={}",
                    g.stream_id,
                    u32::from(g.stream_id) + g.streams - 1
                )
            } else {
                format!("stream {}", g.stream_id)
            }
        )
    }
}

/// A stream format in a few words (`config check`).
fn describe_format(f: &crate::model::StreamFormat) -> String {
    use crate::model::StreamFormat;
    let field = |c: &rtdaq_core::format::CounterField| {
        let e = if c.big_endian { "be" } else { "le" };
        let bits = if c.shift == 0 && c.bits == c.bytes * 8 {
            String::new()
        } else {
            format!("[{}..{}]", c.shift, c.shift + c.bits)
        };
        format!("u{}{e}@{}{bits}", c.bytes * 8, c.offset)
    };
    match f {
        StreamFormat::Rtdaq => "rtdaq".to_owned(),
        StreamFormat::Counter(c) => {
            let mut s = format!("counter {} step {}", field(&c.counter), c.step);
            if c.wrap != 0 {
                s.push_str(&format!(" wrap {}", c.wrap));
            }
            if let Some(st) = &c.stream {
                s.push_str(&format!(", stream {}", field(st)));
            }
            s
        }
        StreamFormat::Vdif(v) => match v.frames_per_second {
            Some(r) => format!("vdif {r} frames/s"),
            None => "vdif (frames/s learned)".to_owned(),
        },
        StreamFormat::Spead(sp) => {
            let fl = match sp.flavour {
                Some(f) => format!("64-{}", f.heap_address_bits),
                None => "64-48/64-40".to_owned(),
            };
            let step = if sp.heap_step > 1 {
                format!(" heap_step {}", sp.heap_step)
            } else {
                String::new()
            };
            format!("spead {fl}{step}")
        }
        StreamFormat::Ecpri => "ecpri".to_owned(),
        StreamFormat::Codif(c) => match c.frames_per_period {
            Some(r) => format!("codif {r} frames/period"),
            None => "codif (frames/period learned)".to_owned(),
        },
    }
}

fn table(f: &mut fmt::Formatter<'_>, rows: &[Vec<String>]) -> fmt::Result {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in rows {
        let mut line = String::from("  ");
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == r.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[c]));
            }
        }
        writeln!(f, "{}", line.trim_end())?;
    }
    Ok(())
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "config \"{}\": engine {}, platform {}",
            self.name, self.engine, self.platform
        )?;
        writeln!(f, "interfaces:")?;
        let mut rows = vec![[
            "name",
            "address",
            "mtu",
            "rx",
            "tx",
            "flows",
            "unmatched",
            "format",
        ]
        .map(String::from)
        .to_vec()];
        for i in &self.interfaces {
            rows.push(vec![
                i.name.clone(),
                i.address.clone(),
                i.mtu.to_string(),
                i.rx_queues.to_string(),
                i.tx_queues.to_string(),
                i.flows.to_string(),
                i.default_action.clone(),
                i.format.clone(),
            ]);
        }
        table(f, &rows)?;
        writeln!(f, "queues:")?;
        let mut rows = vec![[
            "interface",
            "dir",
            "id",
            "core",
            "consumer",
            "prio",
            "batch",
            "ring",
            "poll",
            "regions",
        ]
        .map(String::from)
        .to_vec()];
        for q in &self.queues {
            rows.push(vec![
                q.interface.clone(),
                q.direction.as_str().to_owned(),
                q.id.to_string(),
                q.cpu_core.to_string(),
                q.consumer_core
                    .map_or_else(|| "-".to_owned(), |c| c.to_string()),
                q.rt_priority.to_string(),
                q.batch_size.to_string(),
                q.ring_depth.to_string(),
                if q.busy_poll { "busy" } else { "sleep" }.to_owned(),
                q.regions.join(", "),
            ]);
        }
        table(f, &rows)?;
        let cores: Vec<String> = self.cores.iter().map(u32::to_string).collect();
        writeln!(f, "cores used: {}", cores.join(", "))?;
        writeln!(f, "memory:")?;
        let mut rows = vec![
            ["region", "kind", "buf_size x buf_count", "stride", "bytes"]
                .map(String::from)
                .to_vec(),
        ];
        for r in &self.regions {
            let kind = match r.page_size {
                Some(p) => format!("{} ({})", r.kind.as_str(), p.as_str()),
                None => r.kind.as_str().to_owned(),
            };
            rows.push(vec![
                r.name.clone(),
                kind,
                format!("{} x {}", r.buf_size, r.buf_count),
                r.stride.to_string(),
                format!("{} ({})", r.bytes, human_bytes(r.bytes)),
            ]);
        }
        table(f, &rows)?;
        writeln!(
            f,
            "  total {} ({}); hugepages: {} x 2M, {} x 1G",
            self.total_bytes,
            human_bytes(self.total_bytes),
            self.hugepages_2m,
            self.hugepages_1g
        )?;
        for g in &self.gpus {
            writeln!(
                f,
                "gpu {}: device memory {} ({}): pipelines {} + device regions {}; pinned host memory {} ({}){}",
                g.gpu,
                g.device_bytes(),
                human_bytes(g.device_bytes()),
                human_bytes(g.pipeline_bytes),
                human_bytes(g.device_region_bytes),
                g.pinned_bytes,
                human_bytes(g.pinned_bytes),
                if g.pipelines.is_empty() {
                    String::new()
                } else {
                    format!("; stages: {}", g.pipelines.join(", "))
                }
            )?;
        }
        for s in &self.sinks {
            writeln!(f, "record: {s}")?;
        }
        if self.sink_bytes > 0 {
            writeln!(
                f,
                "  record buffers {} ({}), locked besides the regions",
                self.sink_bytes,
                human_bytes(self.sink_bytes)
            )?;
        }
        for e in &self.egress {
            writeln!(f, "egress: {e}")?;
        }
        for d in &self.dumps {
            writeln!(f, "dump: {d}")?;
        }
        if let Some(t) = &self.time {
            writeln!(f, "time: {t}")?;
        }
        if let Some(g) = &self.generator {
            writeln!(f, "generator: {g}")?;
        }
        if self.duration_s > 0.0 {
            writeln!(f, "run: {} s", self.duration_s)
        } else {
            writeln!(f, "run: until stopped")
        }
    }
}
