//! Egress sinks (`[[egress]]`): where a queue's `egress` stage forwards what it receives,
//! in one file: the table as written, the typed settings and their rules with key paths.
//!
//! ```toml
//! [[egress]]
//! name = "spead-out"
//! protocol = "spead"                 # SPEAD heaps over UDP (spead2, CASPER/MeerKAT)
//! destinations = ["127.0.0.1:7149"]  # IPv4 host:port, unicast or multicast; heaps round-robin
//! packets_per_heap = 1               # received payloads per heap
//! max_packet = 1472                  # bytes of a SPEAD packet, header included (<= path MTU - 28)
//! rate_gbps = 1.0                    # paced (0: as fast as the socket takes them)
//! pacing = "txtime"                  # "software" (default) | "txtime": SO_TXTIME + etf or fq qdisc
//! txtime_lead_us = 1000              # "txtime" on etf: handed over this far ahead (> its delta)
//!
//! [[egress]]
//! name = "ucx-out"
//! protocol = "ucx"                   # tagged UCX messages (TCP, RDMA) to a UCP listener
//! destinations = ["127.0.0.1:13337"] # the listener's IPv4 host:port; messages round-robin
//! packets_per_heap = 64              # received payloads per message
//! ucx_transports = "tcp"             # UCX_TLS for this sink (default: UCX's own choice)
//!
//! [[interfaces.rx_queues]]
//! egress = ["spead-out", "ucx-out"]
//!
//! [[gpu_stages]]                     # or: a GPU stage's products, one heap/message each
//! egress = ["products-out"]          # (a sink sends payloads or products, not both)
//! ```

pub use crate::egress_unit::{EgressUnits, DEFAULT_OPEN_UNITS, MAX_OPEN_UNITS};
use crate::egress_unit::{RawUnit, UnitCtx};
use crate::error::Errors;
use crate::model::{RegionKind, WriterPlacement, DEFAULT_TXTIME_LEAD_US};
use crate::schema::RawConfig;
use crate::validate::generator::txtime_lead_us;
use crate::validate::{capacity::largest_frame, int, item_name, rxq, Draft};
use rtdaq_core::format::UnitKind;
use serde::Deserialize;
use std::net::SocketAddrV4;

/// Index of an egress sink in [`Config::egress`](crate::Config::egress).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EgressId(pub usize);

/// How an egress sink sends (`protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressProtocol {
    /// SPEAD heaps over UDP, the CASPER/MeerKAT convention (`spead`): each heap carries a
    /// heap counter, a timestamp item, a packet-count item and the data item; item
    /// descriptors at the start and every `descriptors_every` heaps; an end-of-stream heap
    /// when the run stops.
    Spead,
    /// Tagged UCX messages (`ucx`, the binary's `ucx` feature): a 40-byte header
    /// (`rtdaq_core::format::egress_msg`) and the payloads back to back, sent with
    /// `ucp_tag_send_nbx` over whatever transport UCX picks (TCP, RDMA, shared memory).
    Ucx,
}

impl EgressProtocol {
    /// Every protocol, in the order error messages list them.
    pub const ALL: [EgressProtocol; 2] = [EgressProtocol::Spead, EgressProtocol::Ucx];

    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EgressProtocol::Spead => "spead",
            EgressProtocol::Ucx => "ucx",
        }
    }
}

/// What an egress sink sends: the payloads of the RX queues that name it, or the products
/// of the GPU stages that name it (never both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressFeed {
    /// Received payloads (less `strip_bytes`), `packets_per_heap` to a heap.
    Payloads,
    /// Each batch's product of the GPU stages naming the sink (pinned host memory the
    /// stage copies back), one product per heap or message.
    Products,
}

/// What only a `ucx` sink has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UcxEgress {
    /// The tag of every message (`ucx_tag`); a receiver posts its receives with it.
    pub tag: u64,
    /// `UCX_TLS` for this sink's UCX context (`ucx_transports`, e.g. `"tcp"`,
    /// `"rc_verbs,ud_verbs"`, `"tcp,cuda_copy"`); `None`: UCX's own choice.
    pub transports: Option<String>,
    /// How long the start waits for a destination's listener (`connect_wait_ms`); 0: a
    /// destination that does not answer stops the start (exit 2).
    pub connect_wait_ms: u64,
    /// How often a sender tries to reconnect to a destination that went away
    /// (`reconnect_ms`).
    pub reconnect_ms: u64,
}

/// UCX messages one sink has in flight at most: as many spare buffers (at most
/// `heap_buffers`) are allocated and registered besides the ring's.
pub const UCX_MAX_IN_FLIGHT: u32 = 64;

/// Default `ucx_tag`: "RTDQ" in the high 32 bits.
pub const DEFAULT_UCX_TAG: i64 = 0x5254_4451_0000_0000;
/// Default `reconnect_ms`.
pub const DEFAULT_RECONNECT_MS: i64 = 500;

/// One egress sink (`[[egress]]`). Every RX queue naming it gets its own heap buffers and
/// egress thread, which send to the same destinations.
#[derive(Debug, Clone, PartialEq)]
pub struct Egress {
    /// Unique name (queues refer to it in `egress`).
    pub name: String,
    /// How it sends.
    pub protocol: EgressProtocol,
    /// Where heaps go, in turn (`destinations`): unicast or multicast IPv4 addresses.
    pub destinations: Vec<SocketAddrV4>,
    /// SPEAD heap-address bits (`flavour`: `"64-48"` → 48, `"64-40"` → 40).
    pub heap_address_bits: u8,
    /// Received payloads per heap (`packets_per_heap`); a heap also closes early when the
    /// next payload does not fit its buffer, or after `flush_ms`.
    pub packets_per_heap: u32,
    /// Bytes of one SPEAD packet, header and item pointers included (`max_packet`).
    pub max_packet: u32,
    /// Data heaps between repeated item descriptors (`descriptors_every`; 0: only at the
    /// start).
    pub descriptors_every: u32,
    /// Paced send rate in bits per second (`rate_gbps`), `None`: as fast as the socket
    /// takes them.
    pub rate_bps: Option<f64>,
    /// `pacing = "txtime"`: each SPEAD packet carries its departure time (`SO_TXTIME`) and
    /// the `etf` qdisc (on its clock) or `fq` (`CLOCK_MONOTONIC`) of the interface it leaves
    /// by holds it until then; the value is `txtime_lead_us`, on `etf` the least time in µs
    /// between handing a packet to the kernel and its departure (its `delta` must be
    /// less). `None` (`"software"`, the default): the sender sleeps between batches.
    pub txtime: Option<u32>,
    /// Heap buffers between the queue's consumer and the egress thread (`heap_buffers`,
    /// power of two).
    pub heap_buffers: u32,
    /// Bytes of one heap buffer (`max_heap_kib`).
    pub max_heap_bytes: usize,
    /// A partly filled heap goes out after this many ns (`flush_ms`).
    pub flush_ns: u64,
    /// Bytes skipped at the start of each payload (`strip_bytes`).
    pub strip_bytes: u32,
    /// Multicast TTL (`ttl`).
    pub ttl: u8,
    /// The address of the interface multicast heaps go out of (`multicast_interface`);
    /// `None`: the kernel's route to the group.
    pub multicast_interface: Option<std::net::Ipv4Addr>,
    /// The egress thread's placement (`egress_core`, `egress_priority`); `None`: unpinned,
    /// normal scheduler.
    pub thread: Option<WriterPlacement>,
    /// The UCX settings of a `ucx` sink (`None` for `spead`).
    pub ucx: Option<UcxEgress>,
    /// Payloads or GPU products.
    pub feed: EgressFeed,
    /// Whole units (`unit = "heap"` or `"time_slot"`, a sink of payloads): one unit a UCX
    /// message or SPEAD heap (a heap forwarded as it arrived); `None`: payloads,
    /// `packets_per_heap` to a message.
    pub units: Option<EgressUnits>,
}

/// `[[egress]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEgress {
    pub name: String,
    pub protocol: String,
    pub destinations: Vec<String>,
    #[serde(default)]
    pub flavour: Option<String>,
    #[serde(default)]
    pub packets_per_heap: Option<i64>,
    #[serde(default)]
    pub max_packet: Option<i64>,
    #[serde(default)]
    pub descriptors_every: Option<i64>,
    #[serde(default)]
    pub rate_gbps: f64,
    #[serde(default)]
    pub pacing: Option<String>,
    #[serde(default)]
    pub txtime_lead_us: Option<i64>,
    #[serde(default = "default_heap_buffers")]
    pub heap_buffers: i64,
    #[serde(default)]
    pub max_heap_kib: Option<i64>,
    #[serde(default = "default_flush_ms")]
    pub flush_ms: i64,
    #[serde(default)]
    pub strip_bytes: i64,
    #[serde(default)]
    pub ttl: Option<i64>,
    #[serde(default)]
    pub multicast_interface: Option<String>,
    #[serde(default)]
    pub egress_core: Option<i64>,
    #[serde(default)]
    pub egress_priority: Option<i64>,
    #[serde(default)]
    pub ucx_tag: Option<i64>,
    #[serde(default)]
    pub ucx_transports: Option<String>,
    #[serde(default)]
    pub connect_wait_ms: Option<i64>,
    #[serde(default)]
    pub reconnect_ms: Option<i64>,
    #[serde(default)]
    pub unit: Option<String>,
    #[serde(default)]
    pub open_units: Option<i64>,
    #[serde(default)]
    pub unit_frames: Option<i64>,
}

/// Default `max_packet`: spead2's default, an Ethernet MTU of 1500 less IPv4 and UDP.
pub const DEFAULT_MAX_PACKET: i64 = 1472;
/// Default `heap_buffers`.
pub const DEFAULT_HEAP_BUFFERS: i64 = 256;
/// Largest heap buffer, KiB.
pub const MAX_HEAP_KIB: i64 = 65_536;
/// Default `flush_ms`.
pub const DEFAULT_FLUSH_MS: i64 = 10;

fn default_heap_buffers() -> i64 {
    DEFAULT_HEAP_BUFFERS
}
fn default_flush_ms() -> i64 {
    DEFAULT_FLUSH_MS
}

/// Resolves an RX queue's `egress` names (to indices in `[[egress]]`).
pub(crate) fn egress_refs(
    names: &[String],
    p: &str,
    raw: &RawConfig,
    errs: &mut Errors,
) -> Option<Vec<EgressId>> {
    let known: Vec<&str> = raw.egress.iter().map(|e| e.name.as_str()).collect();
    let ids = crate::validate::name_refs(
        names,
        (p, "egress"),
        ("egress", "egress sink ([[egress]])"),
        &known,
        errs,
    )?;
    Some(ids.into_iter().map(EgressId).collect())
}

/// Converts every egress sink; reports each field that breaks its rule, an unused sink and
/// a queue that cannot feed one.
pub(crate) fn egress(raw: &RawConfig, d: &Draft, errs: &mut Errors) -> Vec<Option<Egress>> {
    let out = raw
        .egress
        .iter()
        .enumerate()
        .map(|(k, e)| one_egress(raw, d, k, e, errs))
        .collect();
    queues_fit_egress(raw, d, errs);
    out
}

fn one_egress(
    raw: &RawConfig,
    d: &Draft,
    k: usize,
    e: &RawEgress,
    errs: &mut Errors,
) -> Option<Egress> {
    let p = format!("egress[{k}]");
    let names: Vec<&str> = raw.egress.iter().map(|x| x.name.as_str()).collect();
    let mut ok = item_name(&names, k, "egress sink", "egress", &p, errs);
    let by_queues = raw
        .interfaces
        .iter()
        .any(|i| i.rx_queues.iter().any(|q| q.egress.contains(&e.name)));
    let by_stages: Vec<usize> = (0..raw.gpu_stages.len())
        .filter(|&s| raw.gpu_stages[s].egress.contains(&e.name))
        .collect();
    if !by_queues && by_stages.is_empty() && ok {
        errs.push(
            p.clone(),
            format!("egress sink \"{}\" is not used by any RX queue or GPU stage; add egress = [\"{}\"] to a queue (its payloads) or to a [[gpu_stages]] entry (its products), or remove it", e.name, e.name),
        );
        ok = false;
    }
    if by_queues && !by_stages.is_empty() {
        errs.push(
            p.clone(),
            format!("egress sink \"{}\" is named by RX queues (it would send their payloads) and by GPU stage \"{}\" (its products): one sink sends one kind of stream; define a second [[egress]] entry", e.name, raw.gpu_stages[by_stages[0]].name),
        );
        ok = false;
    }
    let feed = if by_stages.is_empty() {
        EgressFeed::Payloads
    } else {
        ok &= products_fit(e, &p, errs);
        EgressFeed::Products
    };
    let protocol = protocol(&e.protocol, &p, errs);
    if let Some(proto) = protocol {
        ok &= keys_fit_protocol(e, proto, &p, errs);
    }
    let destinations = destinations(&e.destinations, &p, errs);
    if protocol == Some(EgressProtocol::Ucx) {
        ok &= ucx_unicast(destinations.as_deref(), &p, errs);
    }
    let ucx = match protocol {
        Some(EgressProtocol::Ucx) => ucx_settings(e, &p, errs).map(Some),
        _ => Some(None),
    };
    let heap_address_bits = match e.flavour.as_deref() {
        None | Some("64-48") => Some(48),
        Some("64-40") => Some(40),
        Some(f) => {
            errs.push(
                format!("{p}.flavour"),
                format!(
                    "unknown SPEAD flavour {f:?}; use \"64-48\" (spead2's default) or \"64-40\""
                ),
            );
            None
        }
    };
    let largest = match feed {
        EgressFeed::Payloads => largest_payload(raw, d, &e.name),
        EgressFeed::Products => largest_product(d, &by_stages),
    };
    let units = crate::egress_unit::units(
        raw,
        d,
        &RawUnit {
            unit: e.unit.as_deref(),
            open_units: e.open_units,
            unit_frames: e.unit_frames,
        },
        &UnitCtx {
            name: &e.name,
            protocol,
            feed,
            packets_per_heap: e.packets_per_heap,
            strip_bytes: e.strip_bytes,
            max_heap_kib: e.max_heap_kib,
            descriptors_every: e.descriptors_every,
            max_packet: e.max_packet,
            largest: largest.as_ref(),
        },
        &p,
        errs,
    );
    // A time slot's default heap buffer holds its frames.
    let per_unit = match units {
        Some(Some(EgressUnits {
            kind: UnitKind::VdifSlot { frames } | UnitKind::CodifSlot { frames },
            ..
        })) => Some(frames),
        _ => None,
    };
    let unit = match feed {
        EgressFeed::Payloads => "payload",
        EgressFeed::Products => "product",
    };
    let sizes = sizes(e, (largest.clone(), unit), per_unit, &p, errs);
    // The default heap buffer is capped at the largest; a product larger than that cannot go.
    if let (EgressFeed::Products, None, Some((_, _, _, heap)), Some((n, why))) =
        (feed, e.max_heap_kib, sizes, &largest)
    {
        if heap < *n as usize {
            errs.push(
                format!("{p}.max_heap_kib"),
                format!("a heap buffer of {} KiB holds no product of {n} bytes ({why}), and the largest is {MAX_HEAP_KIB} KiB; make the stage's product smaller (packets_per_batch, max_payload)", heap >> 10),
            );
            ok = false;
        }
    }
    let rate_bps = rate(e.rate_gbps, &p, errs);
    let multicast_interface = multicast_interface(e, destinations.as_deref(), &p, errs);
    let thread = crate::validate::pinned_thread(
        raw,
        d,
        (e.egress_core, e.egress_priority),
        (&format!("{p}.egress_core"), &format!("{p}.egress_priority")),
        ("egress thread", "an egress thread"),
        errs,
    );
    let (packets_per_heap, max_packet, heap_buffers, max_heap_bytes) = sizes?;
    if let Some(Some(u)) = units.filter(|u| u.is_some_and(|u| heap_buffers <= u.open)) {
        errs.push(
            format!("{p}.heap_buffers"),
            format!("{heap_buffers} heap buffers leave none for the sender while open_units = {} units are assembled; give heap_buffers of at least {} (a power of two), or fewer open_units", u.open, (2 * u.open).next_power_of_two()),
        );
        ok = false;
    }
    Some(Egress {
        name: e.name.clone(),
        protocol: protocol?,
        destinations: destinations?,
        heap_address_bits: heap_address_bits?,
        packets_per_heap,
        max_packet,
        descriptors_every: int(
            e.descriptors_every.unwrap_or(0),
            0,
            1_000_000,
            &format!("{p}.descriptors_every"),
            " data heaps between item descriptors (0: only at the start)",
            errs,
        )?,
        txtime: pacing(e, &p, errs)?,
        rate_bps: rate_bps?,
        heap_buffers,
        max_heap_bytes,
        flush_ns: int::<u64>(e.flush_ms, 1, 10_000, &format!("{p}.flush_ms"), " ms", errs)?
            * 1_000_000,
        strip_bytes: int(
            e.strip_bytes,
            0,
            65_535,
            &format!("{p}.strip_bytes"),
            " bytes skipped at the start of each payload",
            errs,
        )?,
        ttl: int(
            e.ttl.unwrap_or(1),
            1,
            255,
            &format!("{p}.ttl"),
            " (multicast hops)",
            errs,
        )?,
        multicast_interface: multicast_interface?,
        thread: thread?,
        ucx: ucx?,
        feed,
        units: units?,
    })
    .filter(|_| ok)
}

/// A sink of GPU products sends each product whole as one heap: no `packets_per_heap` above
/// 1, no `strip_bytes`.
fn products_fit(e: &RawEgress, p: &str, errs: &mut Errors) -> bool {
    let mut ok = true;
    if e.packets_per_heap.is_some_and(|n| n != 1) {
        errs.push(
            format!("{p}.packets_per_heap"),
            "this sink sends a GPU stage's products, one product per heap (or message); remove packets_per_heap",
        );
        ok = false;
    }
    if e.strip_bytes != 0 {
        errs.push(
            format!("{p}.strip_bytes"),
            "this sink sends a GPU stage's products whole; strip_bytes applies to received payloads; remove it",
        );
        ok = false;
    }
    ok
}

/// The largest product of the GPU stages `stages` (indices in `[[gpu_stages]]`), with which
/// stage makes it; `None` when no stage converted.
fn largest_product(d: &Draft, stages: &[usize]) -> Option<(u32, String)> {
    stages
        .iter()
        .filter_map(|&s| d.gpu_stages.get(s)?.as_ref())
        .map(|st| {
            let n = u32::try_from(st.product_bytes()).unwrap_or(u32::MAX);
            let what = st.product.map_or("", |x| x.as_str());
            (
                n,
                format!("GPU stage \"{}\": product \"{what}\" of {n} bytes", st.name),
            )
        })
        .max_by_key(|(n, _)| *n)
}

/// The keys of one protocol given to a sink of the other: each is an error naming it.
fn keys_fit_protocol(e: &RawEgress, proto: EgressProtocol, p: &str, errs: &mut Errors) -> bool {
    let spead_only = [
        ("flavour", e.flavour.is_some()),
        ("max_packet", e.max_packet.is_some()),
        ("descriptors_every", e.descriptors_every.is_some()),
        ("ttl", e.ttl.is_some()),
        ("multicast_interface", e.multicast_interface.is_some()),
        ("pacing", e.pacing.is_some()),
    ];
    let ucx_only = [
        ("ucx_tag", e.ucx_tag.is_some()),
        ("ucx_transports", e.ucx_transports.is_some()),
        ("connect_wait_ms", e.connect_wait_ms.is_some()),
        ("reconnect_ms", e.reconnect_ms.is_some()),
    ];
    let (foreign, owner): (&[(&str, bool)], &str) = match proto {
        EgressProtocol::Spead => (&ucx_only, "ucx"),
        EgressProtocol::Ucx => (&spead_only, "spead"),
    };
    let mut ok = true;
    for (key, given) in foreign {
        if *given {
            errs.push(
                format!("{p}.{key}"),
                format!(
                    "`{key}` is a setting of protocol \"{owner}\", not of \"{}\"; remove it",
                    proto.as_str()
                ),
            );
            ok = false;
        }
    }
    ok
}

/// A UCX destination is one listener: no multicast group.
fn ucx_unicast(dests: Option<&[SocketAddrV4]>, p: &str, errs: &mut Errors) -> bool {
    let Some(dests) = dests else { return true };
    let mut ok = true;
    for (k, a) in dests.iter().enumerate() {
        if a.ip().is_multicast() {
            errs.push(
                format!("{p}.destinations[{k}]"),
                format!("{a} is a multicast group; a UCX destination is one receiver's listener (host:port), or use protocol \"spead\" for multicast"),
            );
            ok = false;
        }
    }
    ok
}

/// `ucx_tag`, `ucx_transports`, `connect_wait_ms`, `reconnect_ms`.
fn ucx_settings(e: &RawEgress, p: &str, errs: &mut Errors) -> Option<UcxEgress> {
    let tag = e.ucx_tag.unwrap_or(DEFAULT_UCX_TAG);
    let transports = match e.ucx_transports.as_deref().map(str::trim) {
        None => Some(None),
        Some(t)
            if !t.is_empty()
                && t.split(',').all(|x| {
                    let x = x.trim();
                    !x.is_empty()
                        && x.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'^')
                }) =>
        {
            Some(Some(t.to_owned()))
        }
        Some(t) => {
            errs.push(
                format!("{p}.ucx_transports"),
                format!("{t:?} is not a UCX transport list; give UCX_TLS's comma-separated names, e.g. \"tcp\", \"rc_verbs,ud_verbs\" or \"tcp,cuda_copy\" (`ucx_info -d` lists this host's)"),
            );
            None
        }
    };
    let wait = int::<u64>(
        e.connect_wait_ms.unwrap_or(0),
        0,
        600_000,
        &format!("{p}.connect_wait_ms"),
        " ms the start waits for a destination's listener (0: it must answer at once)",
        errs,
    );
    let reconnect = int::<u64>(
        e.reconnect_ms.unwrap_or(DEFAULT_RECONNECT_MS),
        10,
        600_000,
        &format!("{p}.reconnect_ms"),
        " ms between reconnection attempts to a destination that went away",
        errs,
    );
    if tag < 0 {
        errs.push(
            format!("{p}.ucx_tag"),
            format!("{tag} is negative; give a tag in 0..=0x7fffffffffffffff"),
        );
        return None;
    }
    Some(UcxEgress {
        tag: tag as u64,
        transports: transports?,
        connect_wait_ms: wait?,
        reconnect_ms: reconnect?,
    })
}

fn protocol(s: &str, p: &str, errs: &mut Errors) -> Option<EgressProtocol> {
    let found = EgressProtocol::ALL.into_iter().find(|x| x.as_str() == s);
    if found.is_none() {
        errs.push(
            format!("{p}.protocol"),
            format!("unknown protocol {s:?}; use \"spead\" (SPEAD heaps over UDP, read by spead2) or \"ucx\" (tagged UCX messages to a UCP listener; a binary built with --features ucx)"),
        );
    }
    found
}

/// `destinations`: one or more `a.b.c.d:port`, unicast or multicast, no wildcard address.
fn destinations(list: &[String], p: &str, errs: &mut Errors) -> Option<Vec<SocketAddrV4>> {
    if list.is_empty() {
        errs.push(
            format!("{p}.destinations"),
            "no destination; give one or more \"host:port\" (IPv4, unicast or a multicast group)",
        );
        return None;
    }
    let mut out = Vec::with_capacity(list.len());
    let mut ok = true;
    for (k, s) in list.iter().enumerate() {
        let path = format!("{p}.destinations[{k}]");
        match s.parse::<SocketAddrV4>() {
            Ok(a) if a.port() == 0 => {
                errs.push(path, format!("{s:?} has port 0; give the receiver's port"));
                ok = false;
            }
            Ok(a) if a.ip().is_unspecified() || a.ip().is_broadcast() => {
                errs.push(
                    path,
                    format!("{s:?} is not one host or group; give the receiver's address"),
                );
                ok = false;
            }
            Ok(a) if out.contains(&a) => {
                errs.push(path, format!("{s:?} is listed twice; list it once"));
                ok = false;
            }
            Ok(a) => out.push(a),
            Err(_) => {
                errs.push(path, format!("{s:?} is not an IPv4 \"host:port\" (e.g. \"127.0.0.1:7149\" or \"239.9.0.1:7149\")"));
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

/// The largest payload the queues naming egress sink `name` receive (the largest frame or
/// message of their interfaces), with how it was derived; `None` when unknown.
fn largest_payload(raw: &RawConfig, d: &Draft, name: &str) -> Option<(u32, String)> {
    raw.interfaces
        .iter()
        .enumerate()
        .filter(|(_, i)| {
            i.rx_queues
                .iter()
                .any(|q| q.egress.iter().any(|n| n == name))
        })
        .filter_map(|(i, _)| {
            let di = d.interfaces.get(i)?;
            let (n, why) = largest_frame(d.kind, di)?;
            Some((n, format!("interface \"{}\": {why}", di.name)))
        })
        .max_by_key(|(n, _)| *n)
}

/// `packets_per_heap`, `max_packet`, `heap_buffers`, `max_heap_kib` (default: room for
/// `packets_per_heap` of the largest payload the queues receive, or the largest product:
/// `largest`, a `unit`).
fn sizes(
    e: &RawEgress,
    (largest, unit): (Option<(u32, String)>, &str),
    per_unit: Option<u32>,
    p: &str,
    errs: &mut Errors,
) -> Option<(u32, u32, u32, usize)> {
    let per_heap = int::<u32>(
        e.packets_per_heap.unwrap_or(1),
        1,
        65_536,
        &format!("{p}.packets_per_heap"),
        " received payloads per heap",
        errs,
    );
    // Room for the header, the first packet's item pointers and some data.
    let max_packet = int::<u32>(
        e.max_packet.unwrap_or(DEFAULT_MAX_PACKET),
        128,
        65_507,
        &format!("{p}.max_packet"),
        " bytes of a SPEAD packet (at most the path MTU less 28 bytes of IPv4 and UDP)",
        errs,
    );
    let buffers = int::<u32>(
        e.heap_buffers,
        2,
        65_536,
        &format!("{p}.heap_buffers"),
        " heap buffers",
        errs,
    )
    .filter(|b| {
        let pow2 = b.is_power_of_two();
        if !pow2 {
            errs.push(
                format!("{p}.heap_buffers"),
                format!(
                    "{b} is not a power of two; use e.g. {}",
                    b.next_power_of_two()
                ),
            );
        }
        pow2
    });
    let largest_n = largest.as_ref().map_or(65_536, |(n, _)| *n as usize);
    let heap = match e.max_heap_kib {
        None => per_heap
            .map(|k| per_unit.unwrap_or(k))
            .map(|k| (largest_n * k as usize).min((MAX_HEAP_KIB as usize) << 10)),
        Some(kib) => int::<usize>(
            kib,
            1,
            MAX_HEAP_KIB,
            &format!("{p}.max_heap_kib"),
            " KiB per heap buffer",
            errs,
        )
        .map(|k| k << 10)
        .filter(|&b| {
            let fits = b >= largest_n;
            if let (false, Some((n, why))) = (fits, &largest) {
                let need = i64::from(n.div_ceil(1024));
                let fix = if need > MAX_HEAP_KIB {
                    format!("no heap buffer can: the largest is {MAX_HEAP_KIB} KiB; make it smaller")
                } else {
                    format!("raise it to at least {need}, or leave it out (room for packets_per_heap of them)")
                };
                errs.push(
                    format!("{p}.max_heap_kib"),
                    format!("{} KiB holds no {unit} of {n} bytes ({why}); {fix}", b >> 10),
                );
            }
            fits || largest.is_none()
        }),
    };
    Some((per_heap?, max_packet?, buffers?, heap?))
}

/// `multicast_interface`: an IPv4 address (of this host's interface), only with a multicast
/// destination.
fn multicast_interface(
    e: &RawEgress,
    dests: Option<&[SocketAddrV4]>,
    p: &str,
    errs: &mut Errors,
) -> Option<Option<std::net::Ipv4Addr>> {
    let Some(s) = &e.multicast_interface else {
        return Some(None);
    };
    let path = format!("{p}.multicast_interface");
    let Ok(ip) = s.parse::<std::net::Ipv4Addr>() else {
        errs.push(path, format!("{s:?} is not an IPv4 address (the address of the interface to send multicast from, e.g. \"169.254.77.1\")"));
        return None;
    };
    if dests.is_some_and(|d| !d.iter().any(|a| a.ip().is_multicast())) {
        errs.push(
            path,
            "no destination is a multicast group; remove it (unicast heaps follow the route)",
        );
        return None;
    }
    Some(Some(ip))
}

/// `rate_gbps`: 0 = unpaced.
fn rate(gbps: f64, p: &str, errs: &mut Errors) -> Option<Option<f64>> {
    if !(0.0..=400.0).contains(&gbps) || gbps.is_nan() {
        errs.push(
            format!("{p}.rate_gbps"),
            format!("{gbps} is out of range 0..=400 Gb/s (0: as fast as the socket takes them)"),
        );
        return None;
    }
    Some((gbps > 0.0).then_some(gbps * 1e9))
}

/// `pacing`: `"software"` (the default) or `"txtime"` (needs `rate_gbps`), with its
/// `txtime_lead_us`: `Some(None)` for the software pacer, `Some(Some(lead µs))` for launch
/// times.
fn pacing(e: &RawEgress, p: &str, errs: &mut Errors) -> Option<Option<u32>> {
    let lead = e
        .txtime_lead_us
        .map(|v| txtime_lead_us(v, &format!("{p}.txtime_lead_us"), errs));
    match e.pacing.as_deref() {
        None | Some("software") => {
            if lead.is_some() {
                errs.push(
                    format!("{p}.txtime_lead_us"),
                    "only with pacing = \"txtime\"",
                );
                return None;
            }
            Some(None)
        }
        Some("txtime") if e.rate_gbps > 0.0 => match lead {
            Some(l) => Some(Some(l?)),
            None => Some(Some(DEFAULT_TXTIME_LEAD_US)),
        },
        Some("txtime") => {
            errs.push(
                format!("{p}.pacing"),
                "pacing = \"txtime\" spaces the packets at rate_gbps, which is 0 (unpaced); give rate_gbps (e.g. 1.0), or remove pacing",
            );
            None
        }
        Some(other) => {
            errs.push(
                format!("{p}.pacing"),
                format!("unknown pacing {other:?}; use \"software\" (the default: the sender sleeps between batches) or \"txtime\" (each packet's departure time for the etf or fq qdisc, SO_TXTIME)"),
            );
            None
        }
    }
}

/// What an egress sink needs from the queues that name it: payloads the CPU can read.
fn queues_fit_egress(raw: &RawConfig, d: &Draft, errs: &mut Errors) {
    for (i, iface) in raw.interfaces.iter().enumerate() {
        for (q, rq) in iface.rx_queues.iter().enumerate() {
            if rq.egress.is_empty() {
                continue;
            }
            let p = rxq(i, q);
            let device = rq.memory_regions.iter().any(|n| {
                d.region_index
                    .get(n)
                    .and_then(|&k| d.regions[k].as_ref())
                    .is_some_and(|r| r.kind == RegionKind::Device)
            });
            if device {
                errs.push(format!("{p}.egress"), "this queue receives into GPU memory (a \"device\" region), which the CPU cannot read to send on; use a \"host_pinned\" region");
            }
        }
    }
}
