//! The final report of a run: JSON (`[run] report_json`, `--report-json`) and human text.
//!
//! [`RunReport`] is the JSON document, field for field (the `schema_pinned` test pins the
//! names and shape). **Byte counts and rates are what the engine moves, as `bytes_are`
//! says:** `"payload"` for the socket engine (the UDP payload or TCP record, rtdaq
//! sequence header included; no Ethernet/IP/UDP headers) and `"frame"` for the raw engines
//! (the whole Ethernet frame without FCS). Neither counts preamble or inter-frame gap;
//! `gbps` is those bits per second / 1e9 and `mpps` packets per second / 1e6, both over the
//! run's elapsed time.
//!
//! ```text
//! { engine, platform, config_name, config_sha256, rtdaq_version,
//!   started_at ("2025-01-31T12:00:00.000000000Z"), started_at_unix_ns, duration_s,
//!   stopped_by_signal (SIGINT/SIGTERM ended the run early), bytes_are,
//!   exit_code, loss_tolerance, lost, io_thread_allocations,
//!   cpu_steal_s: { "<core>": seconds }   (hypervisor steal on the queue cores, crate::stall)
//!   rx: { totals: Q, queues: [Q] }, tx: { totals: Q, queues: [Q] } }
//! Q = { interface, queue, core, packets, bytes, gbps, mpps, drops_total,
//!       io_cpu_s, consumer_cpu_s,     (CPU seconds of the I/O / consumer thread; null
//!                                      when the queue has no such thread)
//!       longest_stall_us, longest_stall_at_s (the I/O thread's longest loop turn and when
//!                                      it ended, s into the run: crate::stall; null without
//!                                      a thread)
//!       ring_wait_s (RX only: the I/O thread waited for a free ring slot, packets left in
//!                    a socket's buffer; RxQueue::holds_backlog)
//!       timestamps (RX only: the receive-time sources seen: hardware, kernel, poll,
//!                   consumer; absent when no packet was read)
//!       drops: { ring_full, pool_empty, too_large, malformed, no_flow, flow_drop,
//!                kernel, truncated, gpu_busy } (every DropReason, always all keys)
//!       rx only: seq_gaps, reordered, duplicates, corrupt, malformed, too_old,
//!                checked, checked_bytes (what the validator looked at), unique,
//!                streams_tracked, max_streams (the stream table's size),
//!                streams_overflow (packets of streams beyond it: not checked, lost),
//!                negative_latency (rx before tx: clock skew),
//!                latency_ns: { p50, p99, p999, max, count, min },
//!                in_gpu_memory (packets in a `device` region: counted, not checked),
//!                invalid (VDIF invalid bit), rejects: { short, length, foreign, step,
//!                frame_number, items } (instrument-format payloads without a position),
//!                heaps: { complete, incomplete, missing, unsized_heaps, missing_bytes,
//!                ends }      (SPEAD only; open heaps counted as they stand at the end)
//!                streams: [{ id, packets, missing, reordered, duplicates, too_old,
//!                invalid, heaps (SPEAD) }]   (per stream; absent when none was tracked)
//!                format: { kind, frames_per_second, learned }  (instrument formats only;
//!                for CODIF frames_per_second is frames per period),
//!                gpu: { ... }                 (queues with a GPU stage: crate::observe::gpu_report) }
//! ```
//! In `totals`, `interface` is `"total"` and `queue`/`core` are `null`; `core` is also
//! `null` for a queue without a pinned core.
//!
//! Builders: [`QueueReport::rx`] / [`QueueReport::tx`] from a [`CounterSnapshot`] and the
//! elapsed time (+ [`ValidatorStats`] on RX), [`DirectionReport::rx`] /
//! [`DirectionReport::tx`] sum the totals. `Display` prints the human-readable report.
//! Built once at the end of a run, off the hot path (it allocates freely).

use crate::latency::LatencySummary;
pub use crate::pacer::rfc3339_utc;
use crate::validator::ValidatorStats;
use rtdaq_core::counters::{CounterSnapshot, DropReason};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// Exit code of a run whose loss is within tolerance.
pub const EXIT_OK: u8 = 0;
/// Exit code of a run that lost more than `loss_tolerance` packets.
pub const EXIT_LOSS: u8 = 1;

/// `EXIT_OK` when `lost ≤ tolerance`, else `EXIT_LOSS`.
pub const fn loss_exit_code(lost: u64, tolerance: u64) -> u8 {
    if lost <= tolerance {
        EXIT_OK
    } else {
        EXIT_LOSS
    }
}

/// The JSON report of one run; see the [module docs](self).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Packet engine compiled in (`"socket"`, ...).
    pub engine: String,
    /// Platform compiled in (`"host"`, ...).
    pub platform: String,
    /// Name of the embedded deployment config.
    pub config_name: String,
    /// SHA-256 of the config text, lowercase hex.
    pub config_sha256: String,
    /// rtdaq version.
    pub rtdaq_version: String,
    /// Start of the run, RFC 3339 UTC with ns ([`rfc3339_utc`]).
    pub started_at: String,
    /// Start of the run, ns since the Unix epoch.
    pub started_at_unix_ns: u64,
    /// Elapsed run time in seconds (queue threads start to stop, drain included).
    pub duration_s: f64,
    /// The run was stopped before its duration by SIGINT or SIGTERM (`systemctl stop`,
    /// Ctrl-C): queues drained, files closed, this report complete, for a shorter run.
    #[serde(default)]
    pub stopped_by_signal: bool,
    /// What `bytes` (and `gbps`) count: `"payload"` (socket engine: the UDP payload or TCP
    /// record) or `"frame"` (raw engines: the Ethernet frame, headers included, no FCS).
    pub bytes_are: String,
    /// Process exit code (0 ok, 1 loss beyond tolerance, 2 config/environment).
    pub exit_code: u8,
    /// `[run] loss_tolerance`.
    pub loss_tolerance: u64,
    /// Packets lost (sequence gaps at the end of the run, tail loss included when known).
    pub lost: u64,
    /// Allocations on I/O and consumer threads after their set-up (must be 0).
    pub io_thread_allocations: u64,
    /// Receive side.
    pub rx: DirectionReport,
    /// Transmit side.
    pub tx: DirectionReport,
    /// Per-port driver counters, link and MAC, for engines with ports of their own
    /// (DPDK; absent from the JSON for the others). See [`PortReport`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<PortReport>,
    /// NIC counters of the interfaces' kernel network devices: what changed during the run,
    /// pause frames, drops before the queues, warnings (absent from the JSON when no
    /// interface is on a NIC). See [`crate::observe::nic::NicReport`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nics: Vec<crate::observe::nic::NicReport>,
    /// The clock check (`[time]`): synchronised at start and at the end, losses of sync
    /// (absent from the JSON without `[time]`). See [`crate::observe::time`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<crate::observe::time::TimeReport>,
    /// CPU steal during the run on each core a queue thread used, seconds by core number
    /// (`/proc/stat`: time the hypervisor gave this vCPU's host CPU to something else;
    /// no priority inside the guest prevents it). Empty when the kernel reports none.
    #[serde(default)]
    pub cpu_steal_s: BTreeMap<String, f64>,
    /// Queue threads that panicked during the run (absent from the JSON when none did). Any
    /// entry fails the run (exit code 1): that thread's counts end at its panic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_threads: Vec<ThreadFailure>,
    /// Triggered dumps written during the run, in order (absent from the JSON when none;
    /// [`crate::dump`]): each one's window, trigger and files, also in its JSON index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dumps: Vec<crate::dump::DumpReport>,
}

/// A queue thread that panicked: `{ thread, panic }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadFailure {
    /// The thread (`lo_udp.rx0 consumer`, `lo_udp.tx0 generator`, ...).
    pub thread: String,
    /// Its panic message.
    pub panic: String,
}

// --- Per-port counters (engines implementing rtdaq_core::traits::EngineStats) ---

/// One port's driver counters after the run (`rte_eth_stats` on DPDK), its non-zero
/// extended counters by name, and its link state and MAC:
/// `{ interface, port, driver, mac, link: { up, speed_mbps, full_duplex } | null,
///    ipackets, opackets, ibytes, obytes, imissed, ierrors, oerrors, rx_nombuf,
///    xstats: { name: value } }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortReport {
    /// The config's interface name.
    pub interface: String,
    /// The engine's port name (`net_ring0`, a PCI address, ...).
    pub port: String,
    /// The driver (`net_ring`, `mlx5_pci`, ...).
    pub driver: String,
    /// MAC address (`02:00:00:00:00:01`), `null` when unknown.
    pub mac: Option<String>,
    /// Link state when the run ended, `null` when the driver reports none.
    pub link: Option<LinkReport>,
    /// Packets received by the port.
    pub ipackets: u64,
    /// Packets sent.
    pub opackets: u64,
    /// Bytes received.
    pub ibytes: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// Received packets the hardware dropped (no free descriptor): loss the queues never saw.
    pub imissed: u64,
    /// Receive errors.
    pub ierrors: u64,
    /// Transmit errors.
    pub oerrors: u64,
    /// Receive buffer (mbuf) allocation failures.
    pub rx_nombuf: u64,
    /// The driver's non-zero extended counters.
    pub xstats: BTreeMap<String, u64>,
    /// Pause frames and drops before the queues that the extended counters show (a DPDK
    /// port counts from its start, so these are the run's): see [`crate::observe::nic`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Link state of a [`PortReport`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkReport {
    /// Link up.
    pub up: bool,
    /// Speed in Mb/s (0 unknown).
    pub speed_mbps: u32,
    /// Full duplex.
    pub full_duplex: bool,
}

impl PortReport {
    /// From the engine's [`PortStats`](rtdaq_core::traits::PortStats); `interface` is the
    /// config's name of its interface.
    pub fn from_stats(interface: String, s: &rtdaq_core::traits::PortStats) -> Self {
        // The same warnings, from the same counters, as the live ones (crate::observe::nic::PortWatch).
        let warnings = crate::observe::nic::warnings(
            &interface,
            &s.port,
            &crate::observe::nic::port_change(s),
            &mut [false; 3],
        );
        PortReport {
            interface,
            port: s.port.clone(),
            driver: s.driver.clone(),
            mac: s.mac.map(|m| {
                m.iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(":")
            }),
            link: s.link.map(|l| LinkReport {
                up: l.up,
                speed_mbps: l.speed_mbps,
                full_duplex: l.full_duplex,
            }),
            ipackets: s.ipackets,
            opackets: s.opackets,
            ibytes: s.ibytes,
            obytes: s.obytes,
            imissed: s.imissed,
            ierrors: s.ierrors,
            oerrors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
            xstats: s.xstats.iter().cloned().collect(),
            warnings,
        }
    }
}

impl fmt::Display for PortReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let link = match &self.link {
            Some(l) => format!(
                "link {} {} Mb/s {}",
                if l.up { "up" } else { "down" },
                l.speed_mbps,
                if l.full_duplex { "full" } else { "half" }
            ),
            None => "link unknown".into(),
        };
        write!(
            f,
            "  {} = {} ({}) MAC {} · {link} · rx {} pkts {} B · tx {} pkts {} B · imissed {} ierrors {} oerrors {} rx_nombuf {}",
            self.interface,
            self.port,
            self.driver,
            self.mac.as_deref().unwrap_or("?"),
            self.ipackets,
            self.ibytes,
            self.opackets,
            self.obytes,
            self.imissed,
            self.ierrors,
            self.oerrors,
            self.rx_nombuf
        )?;
        if !self.xstats.is_empty() {
            let x: Vec<String> = self
                .xstats
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            write!(f, "\n    xstats: {}", x.join(" "))?;
        }
        for w in &self.warnings {
            write!(f, "\n    WARNING: {w}")?;
        }
        Ok(())
    }
}

/// One direction: the sum over its queues, and each queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionReport {
    /// Sum over `queues` (`interface = "total"`, `queue` and `core` null).
    pub totals: QueueReport,
    /// Each queue, in config order.
    pub queues: Vec<QueueReport>,
}

/// One queue (or the totals of a direction). Bytes and rates count what
/// [`RunReport::bytes_are`] says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueReport {
    /// Interface name (`"total"` in totals).
    pub interface: String,
    /// Queue index on the interface (null in totals).
    pub queue: Option<u16>,
    /// Core the queue's I/O thread was pinned to (null in totals or when unpinned).
    pub core: Option<u32>,
    /// Packets delivered (RX) or sent (TX).
    pub packets: u64,
    /// Application payload (UDP payload) bytes of those packets.
    pub bytes: u64,
    /// Payload Gb/s over the run (`bytes · 8 / duration_s / 1e9`).
    pub gbps: f64,
    /// Million packets per second over the run.
    pub mpps: f64,
    /// Sum of `drops`.
    pub drops_total: u64,
    /// CPU time (user + system) the queue's I/O thread used over the run, seconds; `null`
    /// for a TX queue without a generator (no thread).
    pub io_cpu_s: Option<f64>,
    /// CPU time of the RX consumer thread (indirect mode), seconds; `null` otherwise (in
    /// direct mode the consumer runs in the I/O thread and is part of `io_cpu_s`).
    pub consumer_cpu_s: Option<f64>,
    /// The longest loop turn of the queue's I/O thread, µs ([`crate::stall`]: its own
    /// bounded waits included, so a few hundred µs is normal; far more is a stall: the thread
    /// was off its core). `null` without a thread; in totals the longest of the queues.
    pub longest_stall_us: Option<f64>,
    /// When that turn ended, seconds into the run (`null` with `longest_stall_us`).
    pub longest_stall_at_s: Option<f64>,
    /// The I/O thread's loop turns, every one (ns: p50, p99, p999, max, count, min; 1.6 %
    /// resolution; [`crate::stall`]); absent without a thread and in totals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_turns_ns: Option<LatencySummary>,
    /// RX in indirect mode: the consumer thread's loop turns (one per burst or idle wait).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_loop_turns_ns: Option<LatencySummary>,
    /// TX with a paced generator or replay that sleeps between packets: how late the thread
    /// ran after each time it asked to wake at (ns; what `cyclictest` measures). Absent when
    /// it never slept (busy-polling, unpaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_latency_ns: Option<LatencySummary>,
    /// RX only: seconds the I/O thread waited for a free ring slot because the consumer was
    /// behind, the packets left in the queue's own buffer (a socket: see
    /// `RxQueue::holds_backlog`); other queues drain and count `ring_full` instead (0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring_wait_s: Option<f64>,
    /// RX only: where the packets' receive times came from (`hardware`: the NIC; `kernel`:
    /// the kernel's stamp; `poll`: the engine's I/O thread after its receive call;
    /// `consumer`: none given, stamped by the consumer), each source seen at least once.
    /// The latency histogram measures from these times.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timestamps: Vec<String>,
    /// TX with a generator: how it kept its times: `software` (the thread slept until
    /// packets were due and handed them over then) or `txtime CLOCK_...` (each packet went
    /// ahead with its launch time, kept by the qdisc or NIC on that clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing: Option<String>,
    /// Drops by [`DropReason::as_str`]; every reason is present, 0 included.
    pub drops: BTreeMap<String, u64>,
    /// RX only: sequence, integrity and latency checks.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub rx: Option<RxChecks>,
    /// RX queues with a GPU stage: its counters ([`crate::observe::gpu_report`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<crate::observe::gpu_report::GpuReport>,
    /// RX queues that record: one entry per sink ([`crate::record`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub record: Vec<crate::record::SinkReport>,
    /// RX queues that forward: one entry per egress sink ([`crate::egress`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<crate::egress::EgressReport>,
    /// RX queues that write a PSRDADA ring ([`crate::dada_ring`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dada_ring: Option<crate::dada_ring::DadaReport>,
    /// RX queues of an interface with an instrument format (`[interfaces.format]`): the
    /// format and its learned parameters (absent for rtdaq's own header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<FormatReport>,
    /// RX queues: each stream's counters (by stream id; at most 64 streams per queue).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<crate::validator::StreamStats>,
}

/// The stream format of an RX queue: `{ kind, frames_per_second, learned }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormatReport {
    /// `counter` or `vdif`.
    pub kind: String,
    /// VDIF: the frame rate in use (configured or learned; `null` if never learned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames_per_second: Option<u32>,
    /// VDIF: the rate was learned from the stream, not configured.
    #[serde(default)]
    pub learned: bool,
}

/// The RX-only fields of a [`QueueReport`] (from the validator).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RxChecks {
    /// Sequence numbers missing at the end (net of late arrivals): lost.
    pub seq_gaps: u64,
    /// Late arrivals that filled a hole.
    pub reordered: u64,
    /// Duplicate packets.
    pub duplicates: u64,
    /// Payload pattern mismatches.
    pub corrupt: u64,
    /// Payloads without a valid rtdaq sequence header.
    pub malformed: u64,
    /// Sequence numbers too far behind to judge.
    pub too_old: u64,
    /// Payloads the validator looked at (malformed ones included).
    #[serde(default)]
    pub checked: u64,
    /// Their bytes (the application payload; frames' bytes when nothing parsed them).
    #[serde(default)]
    pub checked_bytes: u64,
    /// Distinct sequence numbers delivered intact.
    #[serde(default)]
    pub unique: u64,
    /// Streams the queue tracked (VDIF/CODIF threads, SPEAD senders, stream ids).
    #[serde(default)]
    pub streams_tracked: u64,
    /// The size of the queue's stream table (`interfaces[].max_streams`).
    #[serde(default)]
    pub max_streams: u64,
    /// Intact payloads of streams beyond the table: not sequence-tracked, counted as lost.
    #[serde(default)]
    pub streams_overflow: u64,
    /// Packets whose rx time was before their tx time (clock skew; latency recorded as 0).
    #[serde(default)]
    pub negative_latency: u64,
    /// One-way latency (tx timestamp to rx timestamp), ns.
    pub latency_ns: LatencySummary,
    /// Packets received into GPU memory (a `device` region): counted, not read by the CPU,
    /// so not in the checks above.
    #[serde(default)]
    pub in_gpu_memory: u64,
    /// Payloads the sender flagged invalid (VDIF): arrived, tracked, counted here.
    #[serde(default)]
    pub invalid: u64,
    /// Instrument-format payloads without a position, by reason (in `malformed` too).
    #[serde(default)]
    pub rejects: crate::validator::Rejects,
    /// SPEAD heaps (`spead` format only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heaps: Option<crate::validator::HeapCounts>,
}

impl From<&ValidatorStats> for RxChecks {
    fn from(s: &ValidatorStats) -> Self {
        RxChecks {
            seq_gaps: s.seq_gaps,
            reordered: s.reordered,
            duplicates: s.duplicates,
            corrupt: s.corrupt,
            malformed: s.malformed,
            too_old: s.too_old,
            checked: s.received,
            checked_bytes: s.bytes,
            unique: s.unique,
            streams_tracked: s.streams,
            max_streams: 0,
            streams_overflow: s.streams_overflow,
            negative_latency: s.negative_latency,
            latency_ns: s.latency,
            in_gpu_memory: s.in_gpu_memory,
            invalid: s.invalid,
            rejects: s.rejects,
            heaps: s.heaps,
        }
    }
}

/// `(gbps, mpps)` of `bytes` / `packets` over `secs` (0 when `secs ≤ 0` or not finite).
pub fn rates(bytes: u64, packets: u64, secs: f64) -> (f64, f64) {
    if !(secs.is_finite() && secs > 0.0) {
        return (0.0, 0.0);
    }
    (bytes as f64 * 8.0 / secs / 1e9, packets as f64 / secs / 1e6)
}

fn drop_map(counts: impl Fn(DropReason) -> u64) -> BTreeMap<String, u64> {
    DropReason::ALL
        .into_iter()
        .map(|r| (r.as_str().to_owned(), counts(r)))
        .collect()
}

impl QueueReport {
    /// Sets the queue's GPU section (its stage's report).
    pub fn with_gpu(mut self, gpu: Option<crate::observe::gpu_report::GpuReport>) -> Self {
        self.gpu = gpu;
        self
    }

    /// The queue's record sinks.
    pub fn with_record(mut self, record: Vec<crate::record::SinkReport>) -> Self {
        self.record = record;
        self
    }

    /// The queue's egress sinks.
    pub fn with_egress(mut self, egress: Vec<crate::egress::EgressReport>) -> Self {
        self.egress = egress;
        self
    }

    /// The queue's PSRDADA ring.
    pub fn with_dada_ring(mut self, ring: Option<crate::dada_ring::DadaReport>) -> Self {
        self.dada_ring = ring;
        self
    }

    /// A TX queue from its counters and the run's elapsed seconds.
    pub fn tx(
        interface: impl Into<String>,
        queue: u16,
        core: Option<u32>,
        snap: &CounterSnapshot,
        elapsed_s: f64,
    ) -> Self {
        let (gbps, mpps) = rates(snap.bytes, snap.packets, elapsed_s);
        QueueReport {
            interface: interface.into(),
            queue: Some(queue),
            core,
            packets: snap.packets,
            bytes: snap.bytes,
            gbps,
            mpps,
            drops_total: snap.total_drops(),
            drops: drop_map(|r| snap.drop_count(r)),
            io_cpu_s: None,
            consumer_cpu_s: None,
            longest_stall_us: None,
            longest_stall_at_s: None,
            loop_turns_ns: None,
            consumer_loop_turns_ns: None,
            wake_latency_ns: None,
            ring_wait_s: None,
            timestamps: Vec::new(),
            pacing: None,
            rx: None,
            gpu: None,
            record: Vec::new(),
            egress: Vec::new(),
            dada_ring: None,
            format: None,
            streams: Vec::new(),
        }
    }

    /// Sets the threads' CPU times (ns; 0 = no such thread).
    pub fn with_cpu(mut self, io_ns: u64, consumer_ns: u64) -> Self {
        let s = |ns: u64| (ns > 0).then(|| ns as f64 / 1e9);
        self.io_cpu_s = s(io_ns);
        self.consumer_cpu_s = s(consumer_ns);
        self
    }

    /// Sets the stream format (instrument formats only) and each stream's counters from the
    /// queue's validator.
    pub fn with_streams(mut self, v: &crate::validator::Validator) -> Self {
        use rtdaq_config::model::StreamFormat;
        let (format, fps, learned) = v.format();
        self.format = match format {
            StreamFormat::Rtdaq => None,
            f => Some(FormatReport {
                kind: f.kind().to_owned(),
                frames_per_second: fps,
                learned,
            }),
        };
        self.streams = v.streams();
        if let Some(c) = self.rx.as_mut() {
            c.max_streams = v.max_streams() as u64;
        }
        self
    }

    /// Sets an RX queue's time waiting for a free ring slot (ns).
    pub fn with_ring_wait(mut self, ns: u64) -> Self {
        if self.ring_wait_s.is_some() {
            self.ring_wait_s = Some(ns as f64 / 1e9);
        }
        self
    }

    /// Sets a TX queue's pacing (a [`Pacing`](crate::queue::stats::Pacing) code and its
    /// detail).
    pub fn with_pacing(mut self, code: u8, detail: u32) -> Self {
        self.pacing = crate::queue::stats::Pacing::words(code, detail);
        self
    }

    /// Sets an RX queue's receive-time sources (one bit per source seen, `TsSeen`).
    pub fn with_timestamps(mut self, bits: u8) -> Self {
        self.timestamps = crate::queue::unwrap::TsSeen::names(bits);
        self
    }

    /// Sets the I/O thread's longest loop turn (`(µs, seconds into the run)`, see
    /// [`crate::stall::StallWatch::summary`]).
    pub fn with_stall(mut self, stall: Option<(f64, f64)>) -> Self {
        self.longest_stall_us = stall.map(|s| s.0);
        self.longest_stall_at_s = stall.map(|s| s.1);
        self
    }

    /// Sets the loop turns and wake-up latencies of the I/O thread (`io`) and, in indirect
    /// mode, the consumer's turns (`consumer`).
    pub fn with_jitter(
        mut self,
        io: &crate::stall::StallWatch,
        consumer: Option<&crate::stall::StallWatch>,
    ) -> Self {
        (self.loop_turns_ns, self.wake_latency_ns) = io.jitter();
        self.consumer_loop_turns_ns = consumer.and_then(|c| c.jitter().0);
        self
    }

    /// An RX queue: packets, bytes and drops from `snap` (the I/O thread's counters),
    /// checks from `checks` (the queue's validator) or, without one, the sequence
    /// counters of `snap` (malformed 0, no latency).
    pub fn rx(
        interface: impl Into<String>,
        queue: u16,
        core: Option<u32>,
        snap: &CounterSnapshot,
        elapsed_s: f64,
        checks: Option<&ValidatorStats>,
    ) -> Self {
        let mut q = Self::tx(interface, queue, core, snap, elapsed_s);
        q.ring_wait_s = Some(0.0);
        q.rx = Some(checks.map_or(
            RxChecks {
                seq_gaps: snap.seq_gaps,
                reordered: snap.reordered,
                duplicates: snap.duplicates,
                corrupt: snap.corrupt,
                ..RxChecks::default()
            },
            RxChecks::from,
        ));
        q
    }

    /// The sum of `queues` (`interface = "total"`). Rates are recomputed over
    /// `elapsed_s`. RX checks are present when `rx` is true: counters are summed;
    /// latency is `latency` (the merged histogram's summary, exact) or, when `None`, an
    /// upper bound from the queues (max of each percentile, counts summed).
    pub fn totals(
        queues: &[QueueReport],
        elapsed_s: f64,
        rx: bool,
        latency: Option<LatencySummary>,
    ) -> Self {
        let packets = queues.iter().map(|q| q.packets).sum();
        let bytes = queues.iter().map(|q| q.bytes).sum();
        let (gbps, mpps) = rates(bytes, packets, elapsed_s);
        let drops = drop_map(|r| {
            queues
                .iter()
                .map(|q| q.drops.get(r.as_str()).copied().unwrap_or(0))
                .sum()
        });
        let rx = rx.then(|| {
            let mut t = RxChecks::default();
            let mut lat = LatencySummary::default();
            for c in queues.iter().filter_map(|q| q.rx.as_ref()) {
                t.seq_gaps += c.seq_gaps;
                t.reordered += c.reordered;
                t.duplicates += c.duplicates;
                t.corrupt += c.corrupt;
                t.malformed += c.malformed;
                t.too_old += c.too_old;
                t.checked += c.checked;
                t.checked_bytes = t.checked_bytes.wrapping_add(c.checked_bytes);
                t.unique += c.unique;
                t.streams_tracked += c.streams_tracked;
                t.max_streams += c.max_streams;
                t.streams_overflow += c.streams_overflow;
                t.negative_latency += c.negative_latency;
                t.in_gpu_memory += c.in_gpu_memory;
                t.invalid += c.invalid;
                t.rejects.merge(&c.rejects);
                if let Some(h) = &c.heaps {
                    t.heaps.get_or_insert_default().merge(h);
                }
                let l = &c.latency_ns;
                if l.count > 0 {
                    lat.min = if lat.count == 0 {
                        l.min
                    } else {
                        lat.min.min(l.min)
                    };
                    lat.count += l.count;
                    lat.p50 = lat.p50.max(l.p50);
                    lat.p99 = lat.p99.max(l.p99);
                    lat.p999 = lat.p999.max(l.p999);
                    lat.max = lat.max.max(l.max);
                }
            }
            t.latency_ns = latency.unwrap_or(lat);
            t
        });
        let sum =
            |f: fn(&QueueReport) -> Option<f64>| queues.iter().filter_map(f).reduce(|a, b| a + b);
        let worst = queues
            .iter()
            .filter_map(|q| Some((q.longest_stall_us?, q)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, q)| q);
        QueueReport {
            interface: "total".to_owned(),
            queue: None,
            core: None,
            packets,
            bytes,
            gbps,
            mpps,
            drops_total: drops.values().sum(),
            drops,
            io_cpu_s: sum(|q| q.io_cpu_s),
            consumer_cpu_s: sum(|q| q.consumer_cpu_s),
            longest_stall_us: worst.and_then(|q| q.longest_stall_us),
            longest_stall_at_s: worst.and_then(|q| q.longest_stall_at_s),
            loop_turns_ns: None,
            consumer_loop_turns_ns: None,
            wake_latency_ns: None,
            ring_wait_s: if rx.is_some() {
                Some(sum(|q| q.ring_wait_s).unwrap_or(0.0))
            } else {
                None
            },
            timestamps: Vec::new(),
            pacing: None,
            rx,
            gpu: None,
            record: Vec::new(),
            egress: Vec::new(),
            dada_ring: None,
            format: None,
            streams: Vec::new(),
        }
    }

    fn label(&self) -> String {
        match self.queue {
            Some(q) => format!("{}:{q}", self.interface),
            None => self.interface.clone(),
        }
    }
}

impl DirectionReport {
    /// RX queues and their totals (`latency`: see [`QueueReport::totals`]).
    pub fn rx(queues: Vec<QueueReport>, elapsed_s: f64, latency: Option<LatencySummary>) -> Self {
        let totals = QueueReport::totals(&queues, elapsed_s, true, latency);
        DirectionReport { totals, queues }
    }

    /// TX queues and their totals.
    pub fn tx(queues: Vec<QueueReport>, elapsed_s: f64) -> Self {
        let totals = QueueReport::totals(&queues, elapsed_s, false, None);
        DirectionReport { totals, queues }
    }
}

impl RunReport {
    /// True when `lost ≤ loss_tolerance`.
    pub const fn loss_ok(&self) -> bool {
        self.lost <= self.loss_tolerance
    }

    /// Writes the report as pretty-printed JSON (with a final newline) to `path`.
    pub fn write_json(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        let mut text = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        text.push(b'\n');
        std::fs::write(path, text)
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// `µs` as "412 µs" or, from 1 ms, "22.9 ms".
/// A thread's label suffix (`""`, `" consumer"`) and its summary, if it has one.
type Labelled<'a> = (&'static str, Option<&'a LatencySummary>);

/// `p50/p99/p99.9/max µs` of a summary in ns.
fn fmt_pcts(l: &LatencySummary) -> String {
    let us = |ns: u64| ns as f64 / 1e3;
    format!(
        "{:.1}/{:.1}/{:.1}/{:.1} µs",
        us(l.p50),
        us(l.p99),
        us(l.p999),
        us(l.max)
    )
}

/// The loop-turn and wake-up latency lines of the text report (absent when no thread had
/// any).
fn write_jitter(
    f: &mut fmt::Formatter<'_>,
    rx: &DirectionReport,
    tx: &DirectionReport,
) -> fmt::Result {
    let pick = |get: fn(&QueueReport) -> [Labelled<'_>; 2]| {
        let mut out = Vec::new();
        for (dir, d) in [("rx", rx), ("tx", tx)] {
            for q in &d.queues {
                for (who, l) in get(q) {
                    if let Some(l) = l {
                        out.push(format!("{dir} {}{who} {}", q.label(), fmt_pcts(l)));
                    }
                }
            }
        }
        out
    };
    let turns = pick(|q| {
        [
            ("", q.loop_turns_ns.as_ref()),
            (" consumer", q.consumer_loop_turns_ns.as_ref()),
        ]
    });
    if !turns.is_empty() {
        writeln!(f, "loop turns p50/p99/p99.9/max: {}", turns.join(", "))?;
    }
    let wakes = pick(|q| [("", q.wake_latency_ns.as_ref()), ("", None)]);
    if !wakes.is_empty() {
        writeln!(
            f,
            "wake-up latency after a timed sleep p50/p99/p99.9/max: {}",
            wakes.join(", ")
        )?;
    }
    Ok(())
}

fn fmt_us(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

fn write_table(f: &mut fmt::Formatter<'_>, name: &str, d: &DirectionReport) -> fmt::Result {
    writeln!(
        f,
        "{name:<3} {:<18} {:>4} {:>14} {:>16} {:>9} {:>9} {:>10}{}",
        "queue",
        "core",
        "packets",
        "bytes",
        "Gb/s",
        "Mpps",
        "drops",
        if d.totals.rx.is_some() {
            "       gaps   reorder       dup   corrupt malformed   p50 µs   p99 µs p99.9 µs   max µs"
        } else {
            ""
        }
    )?;
    for q in d.queues.iter().chain(std::iter::once(&d.totals)) {
        let core = q.core.map_or_else(|| "-".to_owned(), |c| c.to_string());
        write!(
            f,
            "    {:<18} {core:>4} {:>14} {:>16} {:>9.3} {:>9.3} {:>10}",
            q.label(),
            q.packets,
            q.bytes,
            q.gbps,
            q.mpps,
            q.drops_total
        )?;
        if let Some(c) = &q.rx {
            let l = &c.latency_ns;
            write!(
                f,
                " {:>10} {:>9} {:>9} {:>9} {:>9} {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
                c.seq_gaps,
                c.reordered,
                c.duplicates,
                c.corrupt,
                c.malformed,
                us(l.p50),
                us(l.p99),
                us(l.p999),
                us(l.max)
            )?;
        }
        writeln!(f)?;
        if q.drops_total > 0 {
            let why: Vec<String> = q
                .drops
                .iter()
                .filter(|(_, &n)| n > 0)
                .map(|(k, n)| format!("{k}={n}"))
                .collect();
            writeln!(f, "        drops: {}", why.join(" "))?;
        }
        if let Some(c) = &q.rx {
            write_checks(f, q, c)?;
        }
        if let Some(c) = q.rx.as_ref().filter(|c| c.in_gpu_memory > 0) {
            writeln!(
                f,
                "        in GPU memory: {} packets (counted; the CPU cannot read them, so no sequence or content checks)",
                c.in_gpu_memory
            )?;
        }
        if let Some(g) = &q.gpu {
            writeln!(f, "        {g}{}", if g.failed() { " · FAIL" } else { "" })?;
        }
        for r in &q.record {
            writeln!(f, "        {r}")?;
        }
        for e in &q.egress {
            writeln!(f, "        {e}")?;
        }
        if let Some(d) = &q.dada_ring {
            writeln!(f, "        {d}")?;
        }
        write_format(f, q)?;
    }
    Ok(())
}

/// An RX queue's checks besides the table's columns: what the validator looked at, the
/// stream table, and packets it could not track (counted as lost, said why).
fn write_checks(f: &mut fmt::Formatter<'_>, q: &QueueReport, c: &RxChecks) -> fmt::Result {
    writeln!(
        f,
        "        checked {} ({} bytes) · unique {} · too old {} · streams {} of {} · overflow {} · negative latency {}",
        c.checked,
        c.checked_bytes,
        c.unique,
        c.too_old,
        c.streams_tracked,
        c.max_streams,
        c.streams_overflow,
        c.negative_latency
    )?;
    if c.streams_overflow > 0 {
        writeln!(
            f,
            "        {} packets of streams beyond the table of {} were not sequence-checked: counted as lost; raise max_streams of interface {}",
            c.streams_overflow, c.max_streams, q.interface
        )?;
    }
    Ok(())
}

/// An instrument-format queue: the format, rejects, invalid and each stream (at most 16
/// lines; the JSON has them all).
fn write_format(f: &mut fmt::Formatter<'_>, q: &QueueReport) -> fmt::Result {
    let Some(fr) = &q.format else {
        return Ok(());
    };
    let unit = if fr.kind == "codif" { "period" } else { "s" };
    let rate = match (fr.frames_per_second, fr.learned) {
        (Some(r), true) => format!(" · {r} frames/{unit} (learned)"),
        (Some(r), false) => format!(" · {r} frames/{unit}"),
        (None, _) if fr.kind == "vdif" || fr.kind == "codif" => {
            format!(" · frames/{unit} not learned (no boundary seen)")
        }
        _ => String::new(),
    };
    let (inv, rej) = q.rx.as_ref().map_or((0, String::new()), |c| {
        let r = &c.rejects;
        let parts: Vec<String> = r
            .by_reason()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        (c.invalid, parts.join(" "))
    });
    writeln!(
        f,
        "        format {}{rate} · {} streams · invalid {inv}{}",
        fr.kind,
        q.streams.len(),
        if rej.is_empty() {
            String::new()
        } else {
            format!(" · malformed: {rej}")
        }
    )?;
    if let Some(h) = q.rx.as_ref().and_then(|c| c.heaps.as_ref()) {
        writeln!(
            f,
            "        heaps: {} complete, {} incomplete, {} missing, {} unsized · {} bytes missing · {} end-of-stream",
            h.complete, h.incomplete, h.missing, h.unsized_heaps, h.missing_bytes, h.ends
        )?;
    }
    for s in q.streams.iter().take(16) {
        writeln!(
            f,
            "          stream {:#x}: {} packets, {} missing, {} reordered, {} duplicates, {} too old, {} invalid",
            s.id, s.packets, s.missing, s.reordered, s.duplicates, s.too_old, s.invalid
        )?;
        if let Some(h) = &s.heaps {
            writeln!(
                f,
                "            heaps {} complete, {} incomplete, {} missing",
                h.complete, h.incomplete, h.missing
            )?;
        }
    }
    if q.streams.len() > 16 {
        writeln!(
            f,
            "          ... {} more streams in the JSON report",
            q.streams.len() - 16
        )?;
    }
    Ok(())
}

impl fmt::Display for RunReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sha = self.config_sha256.get(..12).unwrap_or(&self.config_sha256);
        writeln!(
            f,
            "rtdaq {} · engine {} · platform {} · config {} (sha256 {sha}…)",
            self.rtdaq_version, self.engine, self.platform, self.config_name
        )?;
        writeln!(
            f,
            "started {} · ran {:.3} s{} · bytes are {}",
            self.started_at,
            self.duration_s,
            if self.stopped_by_signal {
                " (stopped early by SIGINT/SIGTERM)"
            } else {
                ""
            },
            if self.bytes_are == "frame" {
                "Ethernet frame bytes (headers included, no FCS)"
            } else {
                "UDP payload / TCP record bytes"
            }
        )?;
        write_table(f, "RX", &self.rx)?;
        write_table(f, "TX", &self.tx)?;
        if !self.ports.is_empty() {
            writeln!(f, "ports (driver counters at the end of the run):")?;
            for p in &self.ports {
                writeln!(f, "{p}")?;
            }
        }
        if !self.nics.is_empty() {
            writeln!(
                f,
                "NIC counters (change during the run: ethtool -S and /sys/class/net/DEV/statistics):"
            )?;
            for n in &self.nics {
                writeln!(f, "{n}")?;
            }
        }
        if let Some(t) = &self.time {
            writeln!(f, "{t}")?;
        }
        for d in &self.dumps {
            let packets: u64 = d.queues.iter().map(|q| q.packets).sum();
            writeln!(
                f,
                "dump {} #{} ({} trigger): {packets} packets received {:.3} s long from {} ns, {}{}",
                d.dump,
                d.number,
                d.trigger,
                d.end_ns.saturating_sub(d.start_ns) as f64 / 1e9,
                d.start_ns,
                d.index,
                if d.complete { "" } else { " (incomplete: see the index)" }
            )?;
        }
        writeln!(
            f,
            "I/O-thread allocations after set-up: {}",
            self.io_thread_allocations
        )?;
        let turns: Vec<String> = [("rx", &self.rx), ("tx", &self.tx)]
            .into_iter()
            .flat_map(|(dir, d)| {
                d.queues.iter().filter_map(move |q| {
                    let (us, at) = (q.longest_stall_us?, q.longest_stall_at_s?);
                    Some(format!("{dir} {} {} at {at:.2} s", q.label(), fmt_us(us)))
                })
            })
            .collect();
        if !turns.is_empty() || !self.cpu_steal_s.is_empty() {
            let steal: Vec<String> = self
                .cpu_steal_s
                .iter()
                .map(|(c, s)| format!("core {c} {s:.2} s"))
                .collect();
            writeln!(
                f,
                "longest loop turn per queue thread: {} · CPU steal (hypervisor) during the run: {}",
                if turns.is_empty() { "-".to_owned() } else { turns.join(", ") },
                if steal.is_empty() { "not reported".to_owned() } else { steal.join(", ") }
            )?;
        }
        write_jitter(f, &self.rx, &self.tx)?;
        let stamps: Vec<String> = self
            .rx
            .queues
            .iter()
            .filter(|q| !q.timestamps.is_empty())
            .map(|q| format!("{} {}", q.label(), q.timestamps.join("+")))
            .collect();
        if !stamps.is_empty() {
            writeln!(f, "receive times from: {}", stamps.join(", "))?;
        }
        let paced: Vec<String> = self
            .tx
            .queues
            .iter()
            .filter_map(|q| Some(format!("{} {}", q.label(), q.pacing.as_deref()?)))
            .collect();
        if !paced.is_empty() {
            writeln!(f, "send times kept by: {}", paced.join(", "))?;
        }
        let waits: Vec<String> = self
            .rx
            .queues
            .iter()
            .filter_map(|q| {
                let s = q.ring_wait_s.filter(|&s| s > 0.0)?;
                Some(format!("{} {:.1} ms", q.label(), s * 1e3))
            })
            .collect();
        if !waits.is_empty() {
            writeln!(
                f,
                "consumer behind: the RX I/O thread waited for a free ring slot, packets held in the socket buffer: {}",
                waits.join(", ")
            )?;
        }
        for t in &self.failed_threads {
            writeln!(
                f,
                "FAILED: queue thread {} panicked: {} (its counts end there)",
                t.thread, t.panic
            )?;
        }
        if self.rx.queues.is_empty() {
            return write!(
                f,
                "loss: not judged here (no RX queue: the receiver's report counts it) · exit code {}",
                self.exit_code
            );
        }
        let verdict = if self.loss_ok() && self.failed_threads.is_empty() {
            "PASS"
        } else {
            "FAIL"
        };
        write!(
            f,
            "loss: {} lost (tolerance {}): {verdict} · exit code {}",
            self.lost, self.loss_tolerance, self.exit_code
        )
    }
}

#[cfg(test)]
#[path = "report_tests.rs"]
pub(crate) mod tests;
