//! Triggered dumps (`[[dumps]]`): each RX queue naming a dump keeps the last
//! `history_packets` packets it received in RAM (preallocated), and a trigger writes those
//! of a time window to pcap files with an index, as pulsar/FRB systems do on a candidate.
//! In one file: the table as written, the typed settings and their rules with key paths.
//!
//! ```toml
//! [[dumps]]
//! name = "candidates"
//! history_packets = 1048576      # packets kept per queue (the last N; memory: N x slot)
//! directory = "dumps"            # where the pcap files and their JSON index go
//! udp_trigger = "127.0.0.1:7300" # a datagram "last_ms=500" or "start_ns=..&end_ns=.." dumps
//! signal_window_ms = 1000        # SIGUSR1 dumps the last 1000 ms (default: all it holds)
//!
//! [[interfaces.rx_queues]]
//! dump = "candidates"
//! ```
//!
//! The metrics endpoint (`run.metrics`) also takes `POST /trigger?dump=NAME&last_ms=500`.

use crate::error::Errors;
use crate::schema::RawConfig;
use crate::validate::{capacity::largest_frame, int, item_name, Draft};
use serde::Deserialize;
use std::net::SocketAddrV4;
use std::path::PathBuf;

/// Index of a dump in [`Config::dumps`](crate::Config::dumps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DumpId(pub usize);

/// One triggered dump (`[[dumps]]`). Every RX queue naming it keeps its own history.
#[derive(Debug, Clone, PartialEq)]
pub struct Dump {
    /// Unique name (queues and triggers refer to it).
    pub name: String,
    /// Packets each queue keeps (`history_packets`): the newest replace the oldest.
    pub history_packets: u32,
    /// Bytes of one kept packet's slot: a pcap record header, the IPv4/UDP headers the
    /// socket engine's payloads get, and the largest packet the queues can receive.
    pub slot_bytes: u32,
    /// Where the files go (`directory`, relative to the working directory; `rtdaq run
    /// --output-dir` overrides it as it does a recorder's).
    pub directory: PathBuf,
    /// Where a trigger datagram is received (`udp_trigger`), if anywhere.
    pub udp_trigger: Option<SocketAddrV4>,
    /// The window SIGUSR1 dumps: the last this many ms (`signal_window_ms`); `None`: all a
    /// history holds.
    pub signal_window_ms: Option<u64>,
}

impl Dump {
    /// Bytes of one queue's history.
    pub fn history_bytes(&self) -> u64 {
        u64::from(self.history_packets) * u64::from(self.slot_bytes)
    }
}

/// `[[dumps]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDump {
    pub name: String,
    pub history_packets: i64,
    #[serde(default)]
    pub directory: Option<String>,
    #[serde(default)]
    pub udp_trigger: Option<String>,
    #[serde(default)]
    pub signal_window_ms: Option<i64>,
}

/// A pcap record header (16) and the IPv4/UDP headers rebuilt for a payload (42).
const SLOT_OVERHEAD: u32 = 16 + 42;
/// Most `history_packets`.
pub const MAX_HISTORY_PACKETS: i64 = 1 << 26;

/// Resolves a queue's `dump` name.
pub(crate) fn dump_ref(
    name: Option<&String>,
    p: &str,
    raw: &RawConfig,
    errs: &mut Errors,
) -> Option<Option<DumpId>> {
    let names: Vec<&str> = raw.dumps.iter().map(|r| r.name.as_str()).collect();
    let unknown = |name: &str, known: &[&str]| {
        let have = if known.is_empty() {
            "there is no [[dumps]] entry".to_string()
        } else {
            format!("the dumps are {}", known.join(", "))
        };
        format!("no dump named {name:?}: {have}; define it under [[dumps]]")
    };
    crate::validate::name_ref(name, &names, format!("{p}.dump"), unknown, errs)
        .map(|k| k.map(DumpId))
}

/// Converts every dump.
pub(crate) fn dumps(raw: &RawConfig, d: &Draft, errs: &mut Errors) -> Vec<Option<Dump>> {
    for (i, iface) in raw.interfaces.iter().enumerate() {
        for (q, rq) in iface.rx_queues.iter().enumerate() {
            if rq.dump.is_some() && crate::dada_ring::payloads_in_gpu(rq, d) {
                errs.push(format!("{}.dump", crate::validate::rxq(i, q)), "this queue puts payload bytes in GPU memory (a \"device\" region or hds_split), which the CPU cannot keep in a dump's history; use a \"host\" or \"host_pinned\" region without hds_split");
            }
        }
    }
    let out: Vec<Option<Dump>> = raw
        .dumps
        .iter()
        .enumerate()
        .map(|(k, r)| one_dump(raw, d, k, r, errs))
        .collect();
    fits_board(raw, d, &out, errs);
    out
}

/// On a board of known memory, the histories (each dump's, times the queues keeping one)
/// and the regions fit in it.
fn fits_board(raw: &RawConfig, d: &Draft, dumps: &[Option<Dump>], errs: &mut Errors) {
    let Some(limit) = raw.platform.memory_bytes() else {
        return;
    };
    let regions: u64 = d
        .regions
        .iter()
        .flatten()
        .map(crate::model::MemoryRegion::footprint)
        .sum();
    let queues = |name: &str| {
        raw.interfaces
            .iter()
            .flat_map(|i| &i.rx_queues)
            .filter(|q| q.dump.as_deref() == Some(name))
            .count() as u64
    };
    let histories: u64 = dumps
        .iter()
        .flatten()
        .map(|x| x.history_bytes() * queues(&x.name))
        .sum();
    if histories > 0 && regions + histories > limit {
        errs.push(
            "dumps[0].history_packets",
            format!(
                "the dumps' histories need {} and the regions {}, more than {}'s {}; keep fewer history_packets",
                crate::validate::human_bytes(histories),
                crate::validate::human_bytes(regions),
                raw.platform,
                crate::validate::human_bytes(limit)
            ),
        );
    }
}

fn one_dump(raw: &RawConfig, d: &Draft, k: usize, r: &RawDump, errs: &mut Errors) -> Option<Dump> {
    let p = format!("dumps[{k}]");
    let names: Vec<&str> = raw.dumps.iter().map(|x| x.name.as_str()).collect();
    let mut ok = item_name(&names, k, "dump", "dump", &p, errs);
    // The largest packet of the queues naming it.
    let mut used = false;
    let mut largest = 0u32;
    for (i, iface) in raw.interfaces.iter().enumerate() {
        if !iface
            .rx_queues
            .iter()
            .any(|q| q.dump.as_ref() == Some(&r.name))
        {
            continue;
        }
        used = true;
        let n = d
            .interfaces
            .get(i)
            .and_then(|di| largest_frame(d.kind, di))
            .map_or(65_535, |(n, _)| n);
        largest = largest.max(n);
    }
    if !used && ok {
        errs.push(p.clone(), format!("dump \"{}\" is not named by any RX queue; add dump = \"{}\" to a queue, or remove it", r.name, r.name));
        ok = false;
    }
    let history = int::<u32>(
        r.history_packets,
        16,
        MAX_HISTORY_PACKETS,
        &format!("{p}.history_packets"),
        " packets kept per queue",
        errs,
    );
    let udp_trigger = match r.udp_trigger.as_deref() {
        None => Some(None),
        Some(s) => match s.parse::<SocketAddrV4>() {
            Ok(a) if a.port() != 0 => Some(Some(a)),
            _ => {
                errs.push(format!("{p}.udp_trigger"), format!("{s:?} is not an IPv4 address and port to receive trigger datagrams on, e.g. \"127.0.0.1:7300\""));
                None
            }
        },
    };
    let signal_window_ms = match r.signal_window_ms {
        None => Some(None),
        Some(ms) => int::<u64>(
            ms,
            1,
            86_400_000,
            &format!("{p}.signal_window_ms"),
            " ms before SIGUSR1 that it dumps",
            errs,
        )
        .map(Some),
    };
    Some(Dump {
        name: r.name.clone(),
        history_packets: history?,
        slot_bytes: largest + SLOT_OVERHEAD,
        directory: PathBuf::from(r.directory.as_deref().unwrap_or("dumps")),
        udp_trigger: udp_trigger?,
        signal_window_ms: signal_window_ms?,
    })
    .filter(|_| ok)
}
