//! The `egress` stage: forwards what an RX queue receives to downstream hosts while it is
//! being acquired, as SPEAD heaps over UDP (read by spead2, a correlator, a beamformer), or
//! (the `ucx` feature) as tagged UCX messages (`UcxSender`, its own module docs, built with the feature). Below,
//! the SPEAD sender; the consumer half and the ring are the same for both.
//!
//! Each RX queue naming an egress sink (`egress = ["name"]`) gets its own ring of
//! preallocated heap buffers ([`HeapBuf`], `heap_buffers` × `max_heap_kib`) between the
//! queue's consumer ([`EgressSink`], hot path) and one **sender thread** ([`Sender`]):
//!
//! - the consumer copies each payload (less `strip_bytes`) into the heap it is filling; a
//!   heap goes to the sender when it holds `packets_per_heap` payloads, when the next
//!   payload does not fit, or `flush_ms` after its first payload. It never waits: a payload
//!   that finds no free heap buffer is counted as `egress_full` (the sender or the network is
//!   behind) and the run counts it lost;
//! - the sender splits each heap into SPEAD packets of at most `max_packet` bytes
//!   (`rtdaq_core::format::spead_tx`), in batches sent by one `sendmmsg` on a connected UDP
//!   socket per destination (heaps go round-robin over `destinations`), paced to `rate_gbps`
//!   when set (sleeping between batches, or, `pacing = "txtime"`, each packet stamped with
//!   its departure time for the interface's `etf` or `fq` qdisc, whose drops the sender
//!   reads from the socket's error queue); item descriptors go to every
//!   destination at the start and every
//!   `descriptors_every` heaps, and the last sender of a sink to finish sends the
//!   end-of-stream heap. A send that fails counts the heaps it held as `egress_error`, or
//!   `peer_gone` when the destination refused them (ICMP port unreachable: no receiver).
//!
//! What a heap holds ([`ITEM_TIMESTAMP`], [`ITEM_PACKETS`], [`ITEM_DATA`]): the heap counter
//! (`n × S + k` for the `k`-th of the `S` queues feeding the sink, so a receiver tells them
//! apart), the receive time of its first payload, how many payloads it holds, and the
//! payloads back to back. A sink of whole units ([`unit`](self) module: `unit = "heap"`
//! or `"time_slot"`) sends a whole time slot as such a heap, and a whole SPEAD heap of the
//! input as the packets it arrived in (a relay: no heap or descriptors of rtdaq's). Nothing
//! here allocates after `prepare`.

mod common;
mod heap;
mod sink;
mod spead;
#[cfg(test)]
mod tests;
#[cfg(feature = "ucx")]
mod ucx;
#[cfg(all(test, feature = "ucx"))]
mod ucx_tests;
mod unit;
#[cfg(test)]
mod unit_tests;

pub use common::{EgressCounters, SinkShared, ITEM_DATA, ITEM_PACKETS, ITEM_TIMESTAMP};
pub use heap::HeapBuf;
pub use sink::EgressSink;
pub use spead::SpeadSender;
#[cfg(feature = "ucx")]
pub use ucx::{
    register as ucx_register, Ready as UcxReady, Registered as UcxRegistered, UcxSender,
};

/// The sender of one queue's egress sink, by protocol; [`run`](Sender::run) is its thread.
pub enum Sender {
    /// SPEAD heaps over UDP.
    Spead(SpeadSender),
    /// Tagged UCX messages.
    #[cfg(feature = "ucx")]
    Ucx(UcxSender),
}

impl Sender {
    /// The sink's name in messages (`lo_udp.rx0 egress spead-out`).
    pub fn label(&self) -> &str {
        match self {
            Sender::Spead(s) => s.label(),
            #[cfg(feature = "ucx")]
            Sender::Ucx(s) => s.label(),
        }
    }

    /// The sender thread; returns its CPU time, ns.
    pub fn run(self) -> u64 {
        match self {
            Sender::Spead(s) => s.run(),
            #[cfg(feature = "ucx")]
            Sender::Ucx(s) => s.run(),
        }
    }
}

use crate::error::RuntimeError;
use crate::memory::Resources;
use rtdaq_config::model::{Config, Egress, EgressProtocol};
use rtdaq_core::SlotRing;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// One queue's egress sink, ready to run: the consumer half (into the queue's chain) and the
/// sender (its own thread).
pub struct EgressParts {
    /// Index in `config.egress`.
    pub egress: usize,
    /// Consumer half.
    pub sink: Option<EgressSink>,
    /// The sender.
    pub sender: Option<Sender>,
    /// Its counters.
    pub counters: &'static EgressCounters,
    /// The sink sends the queue's GPU stage's products (one heap each), not its payloads.
    pub products: bool,
    /// A UCX sender's word that its destinations answered, and how long to wait for it.
    #[cfg(feature = "ucx")]
    pub ready: Option<(std::sync::mpsc::Receiver<ucx::Ready>, std::time::Duration)>,
}

/// The egress sinks one RX queue feeds: its own (`egress`: its payloads), then its GPU
/// stage's (the stage's products), each with `true` for products.
fn queue_sinks(config: &Config, r: &rtdaq_core::traits::QueueResources<'_>) -> Vec<(usize, bool)> {
    let q = &config.interfaces[r.interface].rx_queues[r.queue];
    let stage = q.gpu_stage.map(|s| &config.gpu_stages[s.0]);
    q.egress
        .iter()
        .map(|e| (e.0, false))
        .chain(
            stage
                .into_iter()
                .flat_map(|s| s.egress.iter().map(|e| (e.0, true))),
        )
        .collect()
}

/// The egress sinks of every RX queue (in `res.rx` order): heap buffers allocated, sockets
/// created and connected. A destination that cannot be reached from here (no route) stops
/// the run, naming the key.
pub(crate) fn prepare(
    config: &Config,
    res: &Resources,
) -> Result<Vec<Vec<EgressParts>>, RuntimeError> {
    // Which queues feed each sink, in `res.rx` order: the heap-counter step and residue.
    let mut feeders: Vec<Vec<usize>> = vec![Vec::new(); config.egress.len()];
    for (k, r) in res.rx.iter().enumerate() {
        for (e, _) in queue_sinks(config, r) {
            feeders[e].push(k);
        }
    }
    let shared: Vec<&'static SinkShared> = feeders
        .iter()
        .map(|f| {
            &*Box::leak(Box::new(SinkShared {
                running: AtomicUsize::new(f.len()),
            }))
        })
        .collect();
    let mut out = Vec::with_capacity(res.rx.len());
    for (k, r) in res.rx.iter().enumerate() {
        let iface = &config.interfaces[r.interface];
        let q = &iface.rx_queues[r.queue];
        let sinks = queue_sinks(config, r);
        let mut parts = Vec::with_capacity(sinks.len());
        for (e, products) in sinks {
            let eg = &config.egress[e];
            let step = feeders[e].len() as u64;
            let residue = feeders[e].iter().position(|&x| x == k).unwrap_or(0) as u64;
            let label = format!("{}.rx{} egress {}", iface.name, q.id, eg.name);
            let mut p = one(eg, e, (step, residue), shared[e], label)?;
            p.products = products;
            parts.push(p);
        }
        out.push(parts);
    }
    Ok(out)
}

/// One queue's sink of `eg` (`egress[id]`).
fn one(
    eg: &Egress,
    id: usize,
    (step, residue): (u64, u64),
    shared: &'static SinkShared,
    label: String,
) -> Result<EgressParts, RuntimeError> {
    let counters: &'static EgressCounters = Box::leak(Box::default());
    // A UCX message's header goes in front of its payloads, in the same buffer.
    let head = match eg.protocol {
        EgressProtocol::Spead => 0,
        EgressProtocol::Ucx => rtdaq_core::format::egress_msg::HEADER_LEN,
    };
    #[allow(unused_mut)]
    let mut bufs: Vec<HeapBuf> = (0..eg.heap_buffers)
        .map(|_| HeapBuf::with_headroom(eg.max_heap_bytes, head))
        .collect();
    #[cfg(feature = "ucx")]
    let reg = match eg.protocol {
        EgressProtocol::Ucx => Some(ucx::register(eg, id, &mut bufs)?),
        EgressProtocol::Spead => None,
    };
    let ring =
        SlotRing::new(Box::leak(bufs.into_boxed_slice())).map_err(|e| RuntimeError::Egress {
            key: format!("egress[{id}].heap_buffers"),
            message: e.to_string(),
        })?;
    let (prod, cons) = Box::leak(Box::new(ring)).split();
    #[cfg(feature = "ucx")]
    let mut ready = None;
    let sender = match eg.protocol {
        EgressProtocol::Spead => Sender::Spead(SpeadSender::new(
            eg,
            id,
            cons,
            counters,
            shared,
            (step, residue),
            label,
        )?),
        #[cfg(feature = "ucx")]
        EgressProtocol::Ucx => {
            let reg = reg.ok_or_else(|| RuntimeError::Egress {
                key: format!("egress[{id}]"),
                message: "no UCX registration".into(),
            })?;
            let (s, rx) = UcxSender::new(eg, id, cons, counters, (residue, reg), label)?;
            ready = Some((rx, UcxSender::ready_within(eg)));
            Sender::Ucx(s)
        }
        #[cfg(not(feature = "ucx"))]
        EgressProtocol::Ucx => {
            return Err(RuntimeError::Egress {
                key: format!("egress[{id}].protocol"),
                message: "\"ucx\" needs a binary built with `--features ucx`".into(),
            })
        }
    };
    Ok(EgressParts {
        egress: id,
        sink: Some(EgressSink::new(eg, prod, counters)),
        sender: Some(sender),
        counters,
        products: false,
        #[cfg(feature = "ucx")]
        ready,
    })
}

/// The report of one queue's egress sink.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EgressReport {
    /// Egress sink name.
    pub egress: String,
    /// `spead`.
    pub protocol: String,
    /// Where its heaps went.
    pub destinations: Vec<String>,
    /// What it sent: `payloads` (received payloads), or `batches` (a GPU stage's products,
    /// one heap each); `payloads`, `payloads_sent` and `dropped` count these.
    #[serde(default = "payloads_unit")]
    pub unit: String,
    /// Packets one item not sent stands for when the run judges its loss: 1, or the GPU
    /// stage's `packets_per_batch` (an upper bound: a timed-out batch holds fewer).
    #[serde(default = "one_packet")]
    pub packets_per_item: u64,
    /// Payloads (products) taken from the queue (its GPU stage).
    pub payloads: u64,
    /// Payloads sent, in heaps that went out whole.
    pub payloads_sent: u64,
    /// Data heaps (UCX messages) sent.
    pub heaps: u64,
    /// A sink of whole units (`unit = "heap"`, `"time_slot"`): what each message held,
    /// `heaps` or `time_slots`; `heaps` counts them.
    #[serde(default)]
    pub whole_units: Option<String>,
    /// SPEAD packets sent (descriptors and the end of stream included).
    pub datagrams: u64,
    /// Bytes of those packets.
    pub bytes: u64,
    /// Descriptor heaps sent.
    pub descriptors: u64,
    /// Payloads not sent, by reason: `egress_full` (no free heap buffer: the sender or the
    /// network was behind), `egress_error` (a send failed, or a payload larger than a heap
    /// buffer), `peer_gone` (a destination refused them: no receiver); a sink of whole
    /// units also `egress_incomplete` (the datagrams of units given up before they were
    /// whole) and `egress_foreign` (datagrams not of the units' format).
    pub dropped: BTreeMap<String, u64>,
    /// The first failed send, if any (`ECONNREFUSED`: no receiver at a destination; for
    /// UCX, the status of the first failed send or endpoint).
    #[serde(default)]
    pub error: Option<String>,
    /// Connections made again to a destination that went away (UCX).
    #[serde(default)]
    pub reconnects: u64,
    /// How the sends were paced: `unpaced`, `software` (the sender sleeps between
    /// batches) or `txtime` (each packet's departure time, held by the `etf` or `fq`
    /// qdisc); UCX sinks are not paced.
    #[serde(default)]
    pub pacing: String,
    /// With `txtime`: the qdiscs that kept the launch times, in words (`pA: etf clockid
    /// CLOCK_TAI delta 200000 ns`).
    #[serde(default)]
    pub launch_times: Option<String>,
    /// With `txtime`: SPEAD packets the qdisc dropped, by reason: `invalid` (the launch
    /// time had passed when the packet reached it), `missed` (it could not hand the packet
    /// over in time), and `held` (the kernel still held it at the end, after its launch
    /// time had passed and a wait: it left late or never). Each is a lost packet of the
    /// run: its heap is incomplete at the receiver, though its payloads count as sent.
    #[serde(default)]
    pub txtime_dropped: BTreeMap<String, u64>,
    /// Gb/s of SPEAD packets over the run.
    pub gbps: f64,
    /// CPU time of the sender thread, seconds.
    pub sender_cpu_s: f64,
}

fn payloads_unit() -> String {
    "payloads".into()
}

fn one_packet() -> u64 {
    1
}

impl EgressReport {
    /// Payloads (products) not sent.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.values().sum()
    }

    /// Packets lost with the items not sent, and the SPEAD packets the qdisc dropped.
    pub fn lost_packets(&self) -> u64 {
        self.dropped_total() * self.packets_per_item.max(1)
            + self.txtime_dropped.values().sum::<u64>()
    }

    /// The report of a sink from its counters; `sender_cpu_ns` from its joined thread;
    /// `batch_packets`: `Some(packets_per_batch)` for a sink of GPU-stage products.
    pub fn of(
        eg: &Egress,
        c: &EgressCounters,
        sender_cpu_ns: u64,
        elapsed_s: f64,
        batch_packets: Option<u32>,
    ) -> Self {
        let bytes = c.bytes.load(Relaxed);
        let mut dropped = BTreeMap::from([
            ("egress_full".to_string(), c.dropped_full.load(Relaxed)),
            (
                "egress_error".to_string(),
                c.dropped_error.load(Relaxed) + c.dropped_too_large.load(Relaxed),
            ),
            ("peer_gone".to_string(), c.dropped_peer_gone.load(Relaxed)),
        ]);
        // Reasons only a sink of whole units has.
        if eg.units.is_some() {
            let unit_reasons = [
                ("egress_incomplete", &c.dropped_incomplete),
                ("egress_foreign", &c.dropped_foreign),
            ];
            for (why, n) in unit_reasons {
                dropped.insert(why.to_string(), n.load(Relaxed));
            }
        }
        EgressReport {
            egress: eg.name.clone(),
            protocol: eg.protocol.as_str().to_string(),
            destinations: eg.destinations.iter().map(ToString::to_string).collect(),
            unit: if batch_packets.is_some() {
                "batches"
            } else {
                "payloads"
            }
            .to_string(),
            packets_per_item: batch_packets.map_or(1, u64::from),
            payloads: c.taken(),
            payloads_sent: c.payloads_sent.load(Relaxed),
            heaps: c.heaps.load(Relaxed),
            whole_units: eg.units.map(|u| u.kind.plural().to_string()),
            datagrams: c.datagrams.load(Relaxed),
            bytes,
            descriptors: c.descriptors.load(Relaxed),
            dropped,
            error: match (
                c.first_errno.load(Relaxed),
                c.first_ucx_status.load(Relaxed),
            ) {
                (0, 0) => None,
                (0, s) => Some(ucx_status_text(s)),
                (e, _) => Some(std::io::Error::from_raw_os_error(e).to_string()),
            },
            reconnects: c.reconnects.load(Relaxed),
            pacing: match (eg.protocol, eg.rate_bps, eg.txtime) {
                (EgressProtocol::Spead, Some(_), Some(_)) => "txtime",
                (EgressProtocol::Spead, Some(_), None) => "software",
                _ => "unpaced",
            }
            .to_string(),
            launch_times: c.launch_times.get().cloned(),
            txtime_dropped: if eg.txtime.is_some() {
                BTreeMap::from([
                    ("invalid".to_string(), c.txtime_invalid.load(Relaxed)),
                    ("missed".to_string(), c.txtime_missed.load(Relaxed)),
                    ("held".to_string(), c.txtime_held.load(Relaxed)),
                ])
            } else {
                BTreeMap::new()
            },
            gbps: if elapsed_s > 0.0 {
                bytes as f64 * 8.0 / elapsed_s / 1e9
            } else {
                0.0
            },
            sender_cpu_s: sender_cpu_ns as f64 / 1e9,
        }
    }
}

/// A UCX status code in words.
fn ucx_status_text(s: i32) -> String {
    #[cfg(feature = "ucx")]
    {
        let st = rtdaq_ucx_sys::Status(s as _);
        format!("UCX status {s}: {}", st.text())
    }
    #[cfg(not(feature = "ucx"))]
    format!("UCX status {s}")
}

impl std::fmt::Display for EgressReport {
    /// `egress spead-out (spead to 127.0.0.1:7149): 1000 payloads in 1000 heaps, 2001
    /// packets, 1.5 MB, 0.00 Gb/s · not sent: egress_full=0 egress_error=0 peer_gone=0`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "egress {} ({} to {}): {} of {} {} sent in {} {}, {} packets, {:.1} MB, {:.2} Gb/s{} · not sent:",
            self.egress,
            self.protocol,
            self.destinations.join(", "),
            self.payloads_sent,
            self.payloads,
            if self.unit == "batches" {
                "GPU products"
            } else {
                "payloads"
            },
            self.heaps,
            match &self.whole_units {
                Some(u) => format!("whole {}", u.replace('_', " ")),
                None => "heaps".to_string(),
            },
            self.datagrams,
            self.bytes as f64 / 1e6,
            self.gbps,
            match (self.pacing.as_str(), &self.launch_times) {
                ("" | "unpaced", _) => String::new(),
                (p, Some(by)) => format!(" (paced: {p}, {by})"),
                (p, None) => format!(" (paced: {p})"),
            }
        )?;
        for (why, n) in &self.dropped {
            write!(f, " {why}={n}")?;
        }
        if !self.txtime_dropped.is_empty() {
            write!(f, " · packets the qdisc dropped or held:")?;
            for (why, n) in &self.txtime_dropped {
                write!(f, " {why}={n}")?;
            }
        }
        if self.reconnects > 0 {
            write!(f, " · reconnects {}", self.reconnects)?;
        }
        if let Some(e) = &self.error {
            write!(f, " · first send error: {e}")?;
        }
        Ok(())
    }
}
