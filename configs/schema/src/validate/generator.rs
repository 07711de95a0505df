//! `[generator]`: references, one rate, one stop condition, sizes, endpoints per engine.

use super::capacity::largest_frame;
use super::interfaces::{no_interface, tx_queue_index};
use super::{int, Draft};
use crate::error::Errors;
use crate::model::StreamFormat;
use crate::model::{
    Address, EngineKind, GenPacing, Generator, GeneratorLimit, GeneratorRate, IbMode, InterfaceId,
    Replay, SocketUri, Transport, DEFAULT_TXTIME_LEAD_US, MAX_REPLAY_LOOPS, MAX_TXTIME_LEAD_US,
};
use crate::parse;
use crate::schema::generator_defaults::MIN_PAYLOAD;
use crate::schema::{RawConfig, RawGenerator};
use rtdaq_core::QueueId;

const P: &str = "generator";

/// Converts `[generator]`.
pub(super) fn generator(
    g: &RawGenerator,
    raw: &RawConfig,
    d: &Draft,
    errs: &mut Errors,
) -> Option<Generator> {
    let iface = d.interface_index.get(&g.interface).copied();
    if iface.is_none() {
        errs.push(format!("{P}.interface"), no_interface(raw, &g.interface));
    }
    let tx_queue = iface.and_then(|i| tx_queue_ref(raw, i, g, errs));
    let rate = rate(g, errs);
    let limit = limit(g, raw, errs);
    let transport = iface.and_then(|i| match &d.interfaces[i].address {
        Some(Address::Socket(u)) => Some(Some(u.transport)),
        Some(_) => Some(None),
        None => None,
    });
    // RoCE payloads travel as messages on connections: endpoints as for TCP, no frames.
    let frames_kind = if roce(raw) {
        EngineKind::Socket
    } else {
        raw.engine.kind
    };
    let endpoints = transport.and_then(|t| endpoints(g, frames_kind, t, iface, d, errs));
    let payload = iface.and_then(|i| payload(g, d, i, errs));
    let stream_id = int::<u16>(
        g.stream_id,
        0,
        65535,
        &format!("{P}.stream_id"),
        " (16-bit stream id of the sequence header)",
        errs,
    );
    let streams = iface.and_then(|i| streams(g, d, i, errs));
    if let (Some(i), Some(id), Some(n)) = (iface, stream_id, streams) {
        if let Some(StreamFormat::Spead(sp)) = d.interfaces[i].format {
            if n > sp.heap_step {
                errs.push(
                    format!("{P}.streams"),
                    format!("{n} SPEAD streams need heap_step ≥ {n} in interfaces[{i}].format (stream k sends heap counters ≡ stream_id + k mod heap_step; with a smaller step two streams would send the same heaps)"),
                );
            }
        }
        let vdif = matches!(d.interfaces[i].format, Some(StreamFormat::Vdif(_)));
        if vdif && u32::from(id) + n > 1024 {
            errs.push(
                format!("{P}.stream_id"),
                format!("VDIF thread ids are 10 bits: stream_id {id} + {n} streams go past 1023; lower stream_id or streams"),
            );
        }
    }
    if let (Some(i), Some(q), Some(GeneratorRate::Gbps(r))) = (iface, tx_queue, rate) {
        within_pacing(d, i, q, r, errs);
    }
    let replay = replay(g, errs);
    let window = int::<u32>(
        g.replay_window_mib
            .unwrap_or(i64::from(crate::model::DEFAULT_REPLAY_WINDOW_MIB)),
        1,
        i64::from(crate::model::MAX_REPLAY_WINDOW_MIB),
        &format!("{P}.replay_window_mib"),
        " MiB (the window a replay reads its file through: its whole footprint; each of its 8 chunks must hold the largest record)",
        errs,
    );
    let pacing = pacing(g, raw, transport.flatten(), rate, errs);
    let (destination, dst_mac, source) = endpoints?;
    Some(Generator {
        interface: InterfaceId(iface?),
        tx_queue: QueueId(tx_queue? as u16),
        destination,
        dst_mac,
        source,
        payload_size: payload?,
        rate: rate?,
        limit: limit?,
        stream_id: stream_id?,
        streams: streams?,
        replay: replay?,
        replay_window_mib: window?,
        pacing: pacing?,
    })
}

/// `replay`, `replay_timing`, `replay_speed`, `replay_loops`.
fn replay(g: &RawGenerator, errs: &mut Errors) -> Option<Option<Replay>> {
    let Some(path) = &g.replay else {
        for (key, set) in [
            ("replay_timing", g.replay_timing.is_some()),
            ("replay_speed", g.replay_speed.is_some()),
            ("replay_loops", g.replay_loops.is_some()),
        ] {
            if set {
                errs.push(
                    format!("{P}.{key}"),
                    "only with replay = \"FILE.pcap\" (or rtdaq run --replay FILE)",
                );
                return None;
            }
        }
        return Some(None);
    };
    if path.is_empty() {
        errs.push(format!("{P}.replay"), "empty; name a pcap file");
        return None;
    }
    let timing = match Replay::timing_from(g.replay_timing.as_deref(), g.replay_speed) {
        Ok(t) => Some(t),
        Err(e) => {
            errs.push(format!("{P}.replay_timing"), e);
            None
        }
    };
    let loops = int::<u32>(
        g.replay_loops.unwrap_or(1),
        1,
        i64::from(MAX_REPLAY_LOOPS),
        &format!("{P}.replay_loops"),
        " (times the file is sent)",
        errs,
    );
    Some(Some(Replay {
        path: path.into(),
        timing: timing?,
        loops: loops?,
    }))
}

/// Most generator streams (the receiver tracks up to 64 streams per queue).
pub(crate) const MAX_STREAMS: i64 = 64;

/// `streams`: 1..=64 and within the 16-bit stream ids; on TCP one per connection.
fn streams(g: &RawGenerator, d: &Draft, i: usize, errs: &mut Errors) -> Option<u32> {
    let tcp = matches!(&d.interfaces[i].address, Some(Address::Socket(u)) if matches!(u.transport, Transport::Tcp | Transport::Rdma));
    let conns = i64::from(d.interfaces[i].connections.unwrap_or(1).max(1));
    let path = format!("{P}.streams");
    let n = match (g.streams, tcp) {
        (None, true) => conns,
        (None, false) => 1,
        (Some(n), true) if n != conns => {
            errs.push(
                path,
                format!(
                    "{n} streams on a TCP interface with {conns} connections: each connection \
                     carries one stream; remove `streams` (it defaults to the connection count) \
                     or set it to {conns}"
                ),
            );
            return None;
        }
        (Some(n), _) => n,
    };
    if !(1..=MAX_STREAMS).contains(&n) {
        errs.push(path, format!("{n} is out of range 1..={MAX_STREAMS} (independent sequence streams, one per source port or connection)"));
        return None;
    }
    if g.stream_id + n - 1 > 65535 {
        errs.push(
            path,
            format!(
                "stream ids {}..={} exceed the 16-bit range; lower stream_id or streams",
                g.stream_id,
                g.stream_id + n - 1
            ),
        );
        return None;
    }
    Some(n as u32)
}

/// RoCE (`engine.ibverbs.mode = "roce"`) sends the generator's payloads as RDMA messages
/// on the interface's connections (like TCP records): no frames are built.
fn roce(raw: &RawConfig) -> bool {
    raw.engine.kind == EngineKind::Ibverbs
        && raw.engine.ibverbs.as_ref().map(|v| v.mode) == Some(IbMode::Roce)
}

/// `tx_queue` is a TX queue id of the interface.
fn tx_queue_ref(raw: &RawConfig, i: usize, g: &RawGenerator, errs: &mut Errors) -> Option<usize> {
    let ifc = &raw.interfaces[i];
    let q = tx_queue_index(ifc, g.tx_queue);
    if q.is_none() {
        let ids: Vec<String> = ifc.tx_queues.iter().map(|q| q.id.to_string()).collect();
        errs.push(
            format!("{P}.tx_queue"),
            format!(
                "interface \"{}\" has no TX queue with id {} (TX queue ids: {}); add a [[interfaces.tx_queues]] table or fix the id",
                ifc.name,
                g.tx_queue,
                if ids.is_empty() { "none".into() } else { ids.join(", ") }
            ),
        );
    }
    q
}

/// A `txtime_lead_us` (the generator's, an egress sink's) at `path`, in range.
pub(crate) fn txtime_lead_us(v: i64, path: &str, errs: &mut Errors) -> Option<u32> {
    int::<u32>(
        v,
        10,
        i64::from(MAX_TXTIME_LEAD_US),
        path,
        " µs (how far ahead of its launch time a packet goes to the kernel; more than an etf qdisc's delta)",
        errs,
    )
}

/// `pacing` and `txtime_lead_us`: the NIC's rate limit (`"nic"`) needs the dpdk engine and a
/// rate; launch times (`"txtime"`) need an engine whose TX queues
/// can send at a time (the socket engine's UDP queues, the afpacket engine's) and times to keep: a rate, or a
/// replay at its recorded times.
fn pacing(
    g: &RawGenerator,
    raw: &RawConfig,
    transport: Option<Transport>,
    rate: Option<GeneratorRate>,
    errs: &mut Errors,
) -> Option<GenPacing> {
    let lead = g
        .txtime_lead_us
        .map(|v| txtime_lead_us(v, &format!("{P}.txtime_lead_us"), errs));
    match g.pacing.as_deref() {
        None | Some("software") => {
            if lead.is_some() {
                errs.push(
                    format!("{P}.txtime_lead_us"),
                    "only with pacing = \"txtime\"",
                );
                return None;
            }
            Some(GenPacing::Software)
        }
        Some("txtime") => {
            let lead = match lead {
                Some(l) => l?,
                None => DEFAULT_TXTIME_LEAD_US,
            };
            // A replay at its recorded times has times to keep whatever the rate.
            let recorded = g.replay.is_some() && g.replay_timing.as_deref() != Some("rate");
            let timed_engine = matches!(
                raw.engine.kind,
                EngineKind::Socket | EngineKind::Afpacket | EngineKind::Dpdk
            );
            let why = if !timed_engine || roce(raw) {
                Some(format!("the {} engine's TX queues cannot send at a launch time (the socket engine's UDP queues and the afpacket engine's can: SO_TXTIME; the dpdk engine's where the PMD can: RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP)", raw.engine.kind.as_str()))
            } else if transport.is_some_and(|t| t != Transport::Udp) {
                Some("TCP has no launch times; the generator's interface must be UDP".to_owned())
            } else if matches!(rate, Some(GeneratorRate::Unpaced)) && !recorded {
                Some(if g.replay.is_some() {
                    "a replay with timing \"rate\" and unpaced = true has no times to keep; set rate_gbps or rate_pps, or replay_timing = \"recorded\"".to_owned()
                } else {
                    "unpaced = true has no times to keep; set rate_gbps or rate_pps".to_owned()
                })
            } else {
                None
            };
            refuse_or(errs, "txtime", why, GenPacing::Txtime { lead_us: lead })
        }
        Some("nic") => {
            if lead.is_some() {
                errs.push(
                    format!("{P}.txtime_lead_us"),
                    "only with pacing = \"txtime\"",
                );
                return None;
            }
            let why = if raw.engine.kind != EngineKind::Dpdk {
                Some(format!("the {} engine's queues have no NIC rate limit (the dpdk engine's have, where the PMD does: rte_eth_set_queue_rate_limit)", raw.engine.kind.as_str()))
            } else if !matches!(rate, Some(GeneratorRate::Gbps(_) | GeneratorRate::Pps(_))) {
                Some("the NIC needs a rate to keep; set rate_gbps or rate_pps".to_owned())
            } else if g.replay.is_some() {
                Some("a replay keeps its times in software (or with \"txtime\" on the socket and afpacket engines)".to_owned())
            } else {
                None
            };
            refuse_or(errs, "nic", why, GenPacing::Nic)
        }
        Some(other) => {
            errs.push(
                format!("{P}.pacing"),
                format!("{other:?} is not a pacing; use \"software\" (sleep until each packet is due, the default), \"txtime\" (launch times kept by the etf or fq qdisc) or \"nic\" (the NIC's per-queue rate limit, dpdk engine)"),
            );
            None
        }
    }
}

/// `pacing`: `ok`, or the error naming why `name` cannot be (`why`).
fn refuse_or(
    errs: &mut Errors,
    name: &str,
    why: Option<String>,
    ok: GenPacing,
) -> Option<GenPacing> {
    match why {
        None => Some(ok),
        Some(why) => {
            errs.push(
                format!("{P}.pacing"),
                format!("\"{name}\": {why}; or use pacing = \"software\""),
            );
            None
        }
    }
}

/// Exactly one of `rate_gbps`, `rate_pps`, `unpaced = true`.
fn rate(g: &RawGenerator, errs: &mut Errors) -> Option<GeneratorRate> {
    if g.unpaced == Some(false) {
        errs.push(
            format!("{P}.unpaced"),
            "unpaced = false is not a rate; remove it and set rate_gbps or rate_pps",
        );
        return None;
    }
    let set: Vec<&str> = [
        ("rate_gbps", g.rate_gbps.is_some()),
        ("rate_pps", g.rate_pps.is_some()),
        ("unpaced", g.unpaced.is_some()),
    ]
    .into_iter()
    .filter_map(|(k, s)| s.then_some(k))
    .collect();
    if set.len() != 1 {
        let what = if set.is_empty() {
            "no rate set".to_owned()
        } else {
            format!(
                "{} are {} set",
                set.join(" and "),
                if set.len() == 2 { "both" } else { "all" }
            )
        };
        errs.push(
            P,
            format!("{what}; set exactly one of rate_gbps = <Gb/s>, rate_pps = <packets/s>, unpaced = true"),
        );
        return None;
    }
    if let Some(r) = g.rate_gbps {
        if !(r.is_finite() && r > 0.0 && r <= 800.0) {
            errs.push(
                format!("{P}.rate_gbps"),
                format!("{r} is not a rate; use Gb/s in (0, 800]"),
            );
            return None;
        }
        return Some(GeneratorRate::Gbps(r));
    }
    if let Some(r) = g.rate_pps {
        return int::<u64>(
            r,
            1,
            1_000_000_000,
            &format!("{P}.rate_pps"),
            " packets/s",
            errs,
        )
        .map(GeneratorRate::Pps);
    }
    Some(GeneratorRate::Unpaced)
}

/// At most one of `duration_s` and `count`; a duration fits in the run.
fn limit(g: &RawGenerator, raw: &RawConfig, errs: &mut Errors) -> Option<GeneratorLimit> {
    match (g.duration_s, g.count) {
        (Some(_), Some(_)) => {
            errs.push(
                P,
                "duration_s and count are both set; set at most one (neither = until the run ends)",
            );
            None
        }
        (Some(s), None) => {
            if !(s.is_finite() && s > 0.0) {
                errs.push(
                    format!("{P}.duration_s"),
                    format!("{s} is not a duration; use seconds > 0"),
                );
                return None;
            }
            let run = raw.run.duration_s;
            if run > 0.0 && s > run {
                errs.push(
                    format!("{P}.duration_s"),
                    format!(
                        "duration_s {s} > run.duration_s {run}: the run would cut the generator off; shorten it or lengthen the run"
                    ),
                );
                return None;
            }
            Some(GeneratorLimit::Duration(s))
        }
        (None, Some(c)) => int::<u64>(c, 1, i64::MAX, &format!("{P}.count"), " packets", errs)
            .map(GeneratorLimit::Count),
        (None, None) => Some(GeneratorLimit::Run),
    }
}

type Endpoints = (Option<SocketUri>, Option<[u8; 6]>, Option<SocketUri>);

/// Endpoints by engine: sockets send to a `udp://` destination (default: the interface's own
/// address, a loopback self-test) and TCP sends on its connections; raw engines need a UDP
/// destination, a destination MAC (derived for a multicast group) and a source.
fn endpoints(
    g: &RawGenerator,
    kind: EngineKind,
    transport: Option<Transport>,
    iface: Option<usize>,
    d: &Draft,
    errs: &mut Errors,
) -> Option<Endpoints> {
    let uri = |key: &str, v: &str, errs: &mut Errors| -> Option<SocketUri> {
        match parse::socket_uri(v) {
            Ok(u) if u.transport == Transport::Udp => Some(u),
            Ok(_) => {
                errs.push(
                    format!("{P}.{key}"),
                    format!("{v:?}: the generator sends UDP; write \"udp://a.b.c.d:port\""),
                );
                None
            }
            Err(m) => {
                errs.push(format!("{P}.{key}"), m);
                None
            }
        }
    };
    let forbid = |key: &str, set: bool, why: &str, errs: &mut Errors| -> bool {
        if set {
            errs.push(format!("{P}.{key}"), format!("{key} {why}; remove it"));
        }
        !set
    };
    if kind.is_raw() {
        let dest = match &g.destination {
            Some(v) => uri("destination", v, errs),
            None => {
                errs.push(format!("{P}.destination"), format!("engine \"{kind}\" builds whole frames: set destination = \"udp://a.b.c.d:port\""));
                None
            }
        };
        // A multicast group's frames go to its MAC (RFC 1112: 01:00:5e and the group's low
        // 23 bits), which receivers' NIC filters accept once they joined the group.
        let group_mac = dest.filter(|d| d.ip.is_multicast()).map(|d| {
            let o = d.ip.octets();
            (d.ip, [0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]])
        });
        let mac = match (&g.dst_mac, group_mac) {
            (Some(v), group) => parse::mac(v)
                .map_err(|m| errs.push(format!("{P}.dst_mac"), m))
                .ok()
                .filter(|m| match group {
                    Some((ip, want)) if *m != want => {
                        errs.push(
                            format!("{P}.dst_mac"),
                            format!(
                                "{v} is not the MAC of group {ip} ({}): receivers that joined the group drop other MACs; remove dst_mac (a group's MAC is derived from it)",
                                fmt_mac(&want)
                            ),
                        );
                        false
                    }
                    _ => true,
                }),
            (None, Some((_, m))) => Some(m),
            (None, None) => {
                errs.push(format!("{P}.dst_mac"), format!("engine \"{kind}\" builds whole frames: set dst_mac = \"aa:bb:cc:dd:ee:ff\" (the receiver's MAC; a multicast destination needs none)"));
                None
            }
        };
        let src = match &g.source {
            Some(v) => uri("source", v, errs),
            None => {
                errs.push(format!("{P}.source"), format!("engine \"{kind}\" builds whole frames: set source = \"udp://<this port's IPv4>:<port>\""));
                None
            }
        };
        return Some((Some(dest?), Some(mac?), Some(src?)));
    }
    let a = forbid(
        "dst_mac",
        g.dst_mac.is_some(),
        "is for raw engines (the kernel resolves MACs for sockets)",
        errs,
    );
    let b = forbid(
        "source",
        g.source.is_some(),
        "is for raw engines (sockets send from the interface's socket)",
        errs,
    );
    let dest = match transport {
        Some(Transport::Tcp | Transport::Rdma) => {
            if !forbid(
                "destination",
                g.destination.is_some(),
                "does not apply to TCP, which sends on the interface's connections",
                errs,
            ) {
                return None;
            }
            None
        }
        _ => match &g.destination {
            Some(v) => Some(uri("destination", v, errs)?),
            None => iface.and_then(|i| match &d.interfaces[i].address {
                Some(Address::Socket(u)) => Some(*u),
                _ => None,
            }),
        },
    };
    (a && b).then_some((dest, None, None))
}

/// The payload holds the sequence header and fits one datagram or frame.
fn payload(g: &RawGenerator, d: &Draft, i: usize, errs: &mut Errors) -> Option<u32> {
    let path = format!("{P}.payload_size");
    let (max, why) = match largest_frame(d.kind, &d.interfaces[i]) {
        Some((m, _)) if d.kind.is_raw() => {
            (m - 22 - 28, format!("mtu {} − 20 IPv4 − 8 UDP", m - 22))
        }
        Some((m, why)) => (m, why),
        None => (65507, "largest UDP payload".to_owned()),
    };
    let format = d.interfaces[i].format.unwrap_or_default();
    let (min, what) = match format {
        StreamFormat::Rtdaq => (MIN_PAYLOAD, "the rtdaq sequence header".to_owned()),
        f => (
            f.min_payload(),
            format!("the {} format of interfaces[{i}].format", f.kind()),
        ),
    };
    let size = int::<u32>(
        g.payload_size,
        i64::from(min),
        i64::from(max),
        &path,
        &format!(" bytes (at least {min} for {what}; at most {max}: {why})"),
        errs,
    )?;
    if let StreamFormat::Codif(c) = format {
        if (size - 64) % 8 != 0 {
            errs.push(
                &path,
                format!("{size} is not a CODIF frame: a CODIF frame is the 64-byte header and data of a multiple of 8 bytes; use {}", 64 + (size - 64) / 8 * 8),
            );
            return None;
        }
        if c.frames_per_period.is_none() {
            errs.push(
                format!("interfaces[{i}].format.frames_per_period"),
                "missing: the generator numbers CODIF frames within each period and needs the rate (e.g. frames_per_period = 1000; send rate_pps = frames_per_period / period × streams for real-time stamps)",
            );
            return None;
        }
    }
    if let StreamFormat::Vdif(v) = format {
        if size % 8 != 0 {
            errs.push(
                &path,
                format!("{size} is not a VDIF frame length: VDIF frames are multiples of 8 bytes (header included); use {}", size / 8 * 8),
            );
            return None;
        }
        if v.frames_per_second.is_none() {
            errs.push(
                format!("interfaces[{i}].format.frames_per_second"),
                "missing: the generator numbers VDIF frames within each second and needs the rate (e.g. frames_per_second = 10000; send rate_pps = frames_per_second × streams for real-time stamps)",
            );
            return None;
        }
    }
    Some(size)
}

/// A generator rate above the TX queue's pacing could never be reached.
fn within_pacing(d: &Draft, i: usize, q: usize, rate: f64, errs: &mut Errors) {
    let Some(Some(tx)) = d.interfaces[i].tx.get(q) else {
        return;
    };
    if let Some(p) = tx.pacing_gbps {
        if rate > p {
            errs.push(
                format!("{P}.rate_gbps"),
                format!(
                    "rate_gbps {rate} > pacing_gbps {p} of interfaces[{i}].tx_queues[{q}]; lower the rate or raise the pacing"
                ),
            );
        }
    }
}

/// `aa:bb:cc:dd:ee:ff`.
fn fmt_mac(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}
