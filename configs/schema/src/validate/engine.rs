//! `[engine]`: the sub-table matching `kind`, and each engine's own settings.

use super::{int, rxq, Draft};
use crate::error::Errors;
use crate::model::{
    AfpacketEngine, AfxdpEngine, DpdkEngine, Engine, EngineKind, FanoutMode, IbMode, IbverbsEngine,
    RegionKind, RoceOp, RoceReply, SocketEngine, Sockopt, StridingRq,
};
use crate::schema::{RawAfpacket, RawAfxdp, RawConfig, RawDpdk, RawEngine, RawIbverbs, RawSocket};

/// Converts `[engine]`, reporting a sub-table for another engine and bad settings.
pub(super) fn engine(raw: &RawEngine, errs: &mut Errors) -> Option<Engine> {
    only_matching_table(raw, errs);
    match raw.kind {
        EngineKind::Socket => {
            socket(raw.socket.as_ref().unwrap_or(&RawSocket::default()), errs).map(Engine::Socket)
        }
        EngineKind::Afpacket => afpacket(
            raw.afpacket.as_ref().unwrap_or(&RawAfpacket::default()),
            errs,
        )
        .map(Engine::Afpacket),
        EngineKind::Afxdp => {
            afxdp(raw.afxdp.as_ref().unwrap_or(&RawAfxdp::default()), errs).map(Engine::Afxdp)
        }
        EngineKind::Dpdk => {
            dpdk(raw.dpdk.as_ref().unwrap_or(&RawDpdk::default()), errs).map(Engine::Dpdk)
        }
        EngineKind::Ibverbs => {
            ibverbs(raw.ibverbs.as_ref().unwrap_or(&RawIbverbs::default()), errs)
                .map(Engine::Ibverbs)
        }
    }
}

/// Only the sub-table named by `engine.kind` may be present.
fn only_matching_table(raw: &RawEngine, errs: &mut Errors) {
    let present = [
        (EngineKind::Socket, raw.socket.is_some()),
        (EngineKind::Afpacket, raw.afpacket.is_some()),
        (EngineKind::Afxdp, raw.afxdp.is_some()),
        (EngineKind::Dpdk, raw.dpdk.is_some()),
        (EngineKind::Ibverbs, raw.ibverbs.is_some()),
    ];
    for (k, is) in present {
        if is && k != raw.kind {
            errs.push(
                format!("engine.{k}"),
                format!(
                    "[engine.{k}] is present but engine.kind = \"{}\"; remove the table or set kind = \"{k}\"",
                    raw.kind
                ),
            );
        }
    }
}

/// Largest `engine.socket.rx_coalesce_us` (10 ms).
const MAX_RX_COALESCE_US: u32 = 10_000;

const SOL_SOCKET: i64 = 1;
const IPPROTO_UDP: i64 = 17;

/// `[engine.socket]`: buffer sizes in range; sockopts fit `int` and do not shadow typed keys.
fn socket(raw: &RawSocket, errs: &mut Errors) -> Option<SocketEngine> {
    let why = " bytes (the kernel doubles it and caps at net.core.*mem_max unless CAP_NET_ADMIN)";
    let rcvbuf = raw
        .rcvbuf
        .map(|v| int::<u32>(v, 1024, 1 << 30, "engine.socket.rcvbuf", why, errs));
    let sndbuf = raw
        .sndbuf
        .map(|v| int::<u32>(v, 1024, 1 << 30, "engine.socket.sndbuf", why, errs));
    let mut ok = true;
    let mut sockopts = Vec::new();
    for (k, o) in raw.sockopts.iter().enumerate() {
        let p = format!("engine.socket.sockopts[{k}]");
        let lo = i64::from(i32::MIN);
        let hi = i64::from(i32::MAX);
        let level = int::<i32>(o.level, lo, hi, &format!("{p}.level"), " (C int)", errs);
        let option = int::<i32>(o.option, lo, hi, &format!("{p}.option"), " (C int)", errs);
        let value = int::<i32>(o.value, lo, hi, &format!("{p}.value"), " (C int)", errs);
        let typed = match (o.level, o.option) {
            (SOL_SOCKET, 8) => Some("rcvbuf (SO_RCVBUF)"),
            (SOL_SOCKET, 7) => Some("sndbuf (SO_SNDBUF)"),
            (SOL_SOCKET, 15) => Some("reuseport (SO_REUSEPORT)"),
            (IPPROTO_UDP, 104) => Some("gro (UDP_GRO)"),
            (IPPROTO_UDP, 103) => Some("gso (UDP_SEGMENT)"),
            _ => None,
        };
        if let Some(key) = typed {
            errs.push(
                format!("{p}.option"),
                format!("this option has a typed key; set engine.socket.{key} instead"),
            );
            ok = false;
        }
        match (level, option, value) {
            (Some(level), Some(option), Some(value)) => sockopts.push(Sockopt {
                level,
                option,
                value,
            }),
            _ => ok = false,
        }
    }
    let coalesce = int::<u32>(
        raw.rx_coalesce_us,
        0,
        i64::from(MAX_RX_COALESCE_US),
        "engine.socket.rx_coalesce_us",
        " µs (a longer wait lets more datagrams pile up in the socket buffer; 0 = off)",
        errs,
    );
    let rcvbuf = rcvbuf.map_or(Some(None), |v| v.map(Some))?;
    let sndbuf = sndbuf.map_or(Some(None), |v| v.map(Some))?;
    let rx_coalesce_us = coalesce?;
    ok.then_some(SocketEngine {
        rcvbuf,
        sndbuf,
        gro: raw.gro,
        gso: raw.gso,
        rx_timestamps: raw.rx_timestamps,
        rx_coalesce_us,
        reuseport: raw.reuseport,
        sockopts,
    })
}

/// `[engine.afpacket]`: `TPACKET_V3` geometry the kernel accepts.
fn afpacket(raw: &RawAfpacket, errs: &mut Errors) -> Option<AfpacketEngine> {
    let block_size = int::<u32>(
        raw.block_size,
        4096,
        1 << 30,
        "engine.afpacket.block_size",
        " bytes",
        errs,
    );
    if let Some(b) = block_size {
        if !b.is_power_of_two() {
            errs.push(
                "engine.afpacket.block_size",
                format!(
                    "{b} is not a power of two (blocks are page-order allocations); use {}",
                    b.next_power_of_two()
                ),
            );
        }
    }
    let frame_size = int::<u32>(
        raw.frame_size,
        128,
        1 << 30,
        "engine.afpacket.frame_size",
        " bytes (room for the tpacket3 header)",
        errs,
    );
    if let Some(f) = frame_size {
        if f % 16 != 0 {
            errs.push(
                "engine.afpacket.frame_size",
                format!(
                    "{f} is not a multiple of 16 (TPACKET_ALIGNMENT); use {}",
                    f.div_ceil(16) * 16
                ),
            );
        }
        if let Some(b) = block_size {
            if f > b {
                errs.push(
                    "engine.afpacket.frame_size",
                    format!("frame_size {f} > block_size {b}; a block holds at least one frame"),
                );
            }
        }
    }
    let block_count = int::<u32>(
        raw.block_count,
        1,
        65536,
        "engine.afpacket.block_count",
        " blocks per RX ring",
        errs,
    );
    let block_timeout_ms = int::<u32>(
        raw.block_timeout_ms,
        0,
        60_000,
        "engine.afpacket.block_timeout_ms",
        " ms (0 = kernel default)",
        errs,
    );
    let (b, f) = (block_size?, frame_size?);
    if !b.is_power_of_two() || f % 16 != 0 || f > b {
        return None;
    }
    Some(AfpacketEngine {
        block_size: b,
        frame_size: f,
        block_count: block_count?,
        block_timeout_ms: block_timeout_ms?,
        fanout: raw.fanout,
    })
}

/// `[engine.afxdp]`: UMEM frames are 2048 or 4096 bytes (aligned mode).
fn afxdp(raw: &RawAfxdp, errs: &mut Errors) -> Option<AfxdpEngine> {
    if raw.frame_size != 2048 && raw.frame_size != 4096 {
        errs.push(
            "engine.afxdp.frame_size",
            format!(
                "{} is not an AF_XDP frame size; use 2048 or 4096 (aligned UMEM chunks)",
                raw.frame_size
            ),
        );
        return None;
    }
    Some(AfxdpEngine {
        frame_size: raw.frame_size as u32,
        zero_copy: raw.zero_copy,
        need_wakeup: raw.need_wakeup,
    })
}

/// EAL flags rtdaq derives from the config itself.
const OWNED_EAL_FLAGS: &[(&str, &str)] = &[
    ("-l", "cores come from the queues' cpu_core"),
    ("-c", "cores come from the queues' cpu_core"),
    ("--lcores", "cores come from the queues' cpu_core"),
    ("--main-lcore", "set engine.dpdk.main_core instead"),
    ("-a", "devices come from interfaces[].address"),
    ("--allow", "devices come from interfaces[].address"),
    ("-b", "devices come from interfaces[].address"),
    ("--block", "devices come from interfaces[].address"),
];

/// `[engine.dpdk]`: no empty EAL args, none that rtdaq sets itself.
fn dpdk(raw: &RawDpdk, errs: &mut Errors) -> Option<DpdkEngine> {
    let mut ok = true;
    for (k, a) in raw.eal_args.iter().enumerate() {
        let p = format!("engine.dpdk.eal_args[{k}]");
        if a.trim().is_empty() {
            errs.push(p, "empty EAL argument; remove it");
            ok = false;
            continue;
        }
        let owned = OWNED_EAL_FLAGS.iter().find(|(f, _)| {
            a == f
                || a.starts_with(&format!("{f}="))
                || (f.len() == 2 && !a.starts_with("--") && a.starts_with(f))
        });
        if let Some((f, why)) = owned {
            errs.push(
                p,
                format!("EAL flag {f} is set by rtdaq ({why}); remove it"),
            );
            ok = false;
        }
    }
    let main_core = match raw.main_core {
        None => Some(None),
        Some(c) => int::<u32>(c, 0, 1023, "engine.dpdk.main_core", "", errs).map(Some),
    };
    if !ok {
        return None;
    }
    Some(DpdkEngine {
        eal_args: raw.eal_args.clone(),
        main_core: main_core?,
        flow_offload: raw.flow_offload,
    })
}

/// Default `engine.ibverbs.credits`.
pub(crate) const IB_CREDITS: i64 = 128;
/// Default `engine.ibverbs.signal_interval`.
pub(crate) const IB_SIGNAL_INTERVAL: i64 = 16;

/// Default `engine.ibverbs.reply_bytes`.
pub(crate) const IB_REPLY_BYTES: i64 = 64;
/// Largest `engine.ibverbs.reply_bytes` (one send per reply, from preallocated buffers).
pub(crate) const IB_REPLY_BYTES_MAX: i64 = 4096;

/// `[engine.ibverbs]`: port 1..=255; no `gid_index` (unused: RDMA CM picks the GID); `op`, `credits`, `signal_interval`,
/// `reply`, `reply_bytes` only for RoCE; `signal_interval ≤ credits`; `reply_bytes`
/// 1..=4096 and only with a reply; a reply only with `op = "send"` (its peers are
/// request/response peers without the rtdaq hello, accepted only for SEND).
fn ibverbs(raw: &RawIbverbs, errs: &mut Errors) -> Option<IbverbsEngine> {
    let port = int::<u8>(
        raw.port,
        1,
        255,
        "engine.ibverbs.port",
        " (HCA ports count from 1)",
        errs,
    );
    let roce = raw.mode == IbMode::Roce;
    let mut ok = true;
    for (key, set) in [
        ("gid_index", raw.gid_index.is_some()),
        ("op", raw.op.is_some()),
        ("credits", raw.credits.is_some()),
        ("signal_interval", raw.signal_interval.is_some()),
        ("reply", raw.reply.is_some()),
        ("reply_bytes", raw.reply_bytes.is_some()),
    ] {
        if set && !roce {
            errs.push(
                format!("engine.ibverbs.{key}"),
                format!("{key} applies to mode = \"roce\" only; remove it"),
            );
            ok = false;
        }
    }
    // Not used by the engine (RDMA CM resolves the GID from the interface's address), so
    // refused rather than silently ignored.
    if raw.gid_index.is_some() && roce {
        errs.push(
            "engine.ibverbs.gid_index",
            "is not used: RDMA CM picks the GID of the interface's rdma:// address (RoCE v2 \
             for an IPv4 address); remove the key and give the interface the address whose GID \
             you want",
        );
        ok = false;
    }
    let device = match &raw.device {
        Some(d) if d.is_empty() || d.len() > 63 || d.contains(['/', ' ', '\0']) => {
            errs.push(
                "engine.ibverbs.device",
                format!("{d:?} is not an RDMA device name (1..=63 bytes, no '/' or spaces, e.g. \"mlx5_0\", \"rxe0\")"),
            );
            None
        }
        d => Some(d.clone()),
    };
    let credits = int::<u32>(
        raw.credits.unwrap_or(IB_CREDITS),
        1,
        16384,
        "engine.ibverbs.credits",
        " receive buffers per connection",
        errs,
    );
    let signal_interval = int::<u32>(
        raw.signal_interval.unwrap_or(IB_SIGNAL_INTERVAL),
        1,
        16384,
        "engine.ibverbs.signal_interval",
        " sends per signaled completion",
        errs,
    );
    if let (Some(c), Some(s)) = (credits, signal_interval) {
        if roce && s > c {
            errs.push(
                "engine.ibverbs.signal_interval",
                format!("{s} > credits {c}: a sender never has more than credits sends in flight, so it would never signal; set signal_interval ≤ {c}"),
            );
            ok = false;
        }
    }
    let reply = raw.reply.unwrap_or_default();
    let reply_bytes = int::<u32>(
        raw.reply_bytes.unwrap_or(IB_REPLY_BYTES),
        1,
        IB_REPLY_BYTES_MAX,
        "engine.ibverbs.reply_bytes",
        " bytes per reply",
        errs,
    );
    if roce && reply == RoceReply::None && raw.reply_bytes.is_some() {
        errs.push(
            "engine.ibverbs.reply_bytes",
            "reply_bytes sizes the reply of reply = \"echo\" or \"ack\"; set reply or remove reply_bytes",
        );
        ok = false;
    }
    if roce && reply != RoceReply::None && raw.op.unwrap_or_default() != RoceOp::Send {
        errs.push(
            "engine.ibverbs.reply",
            format!("reply = \"{}\" answers request/response peers (no rtdaq hello, e.g. rdma_client), which rtdaq accepts only with op = \"send\"; set op = \"send\" or remove reply", reply.as_str()),
        );
        ok = false;
    }
    let striding = striding_rq(raw, roce, errs);
    if !ok {
        return None;
    }
    let (striding_rq, stride_size) = striding?;
    Some(IbverbsEngine {
        mode: raw.mode,
        port: port?,
        device: device?,
        op: raw.op.unwrap_or_default(),
        credits: credits?,
        signal_interval: signal_interval?,
        reply,
        reply_bytes: reply_bytes?,
        striding_rq,
        stride_size,
    })
}

/// Smallest `engine.ibverbs.stride_size` (mlx5: 2^6).
pub(crate) const IB_STRIDE_MIN: u32 = 64;
/// Largest `engine.ibverbs.stride_size` (mlx5: 2^13).
pub(crate) const IB_STRIDE_MAX: u32 = 8192;
/// Fewest strides per WQE any ConnectX allows (2^3); devices may need more (checked when
/// the engine opens).
pub(crate) const IB_MIN_STRIDES: u32 = 8;

/// The stride a raw RX queue gets without `stride_size`: its largest frame rounded up to a
/// power of two (one frame per stride), within 64..=8192.
pub(crate) fn default_stride(largest_frame: u32) -> u32 {
    largest_frame
        .next_power_of_two()
        .clamp(IB_STRIDE_MIN, IB_STRIDE_MAX)
}

/// `striding_rq` and `stride_size` apply to raw mode only; `stride_size` is a power of two
/// in 64..=8192 and needs `striding_rq` "auto" or "on". (Buffers against strides:
/// `capacity::striding_fits`.)
fn striding_rq(
    raw: &RawIbverbs,
    roce: bool,
    errs: &mut Errors,
) -> Option<(StridingRq, Option<u32>)> {
    let mut ok = true;
    for (key, set) in [
        ("striding_rq", raw.striding_rq.is_some()),
        ("stride_size", raw.stride_size.is_some()),
    ] {
        if set && roce {
            errs.push(
                format!("engine.ibverbs.{key}"),
                format!("{key} applies to mode = \"raw\" only (the receive queue of raw packet QPs); remove it"),
            );
            ok = false;
        }
    }
    let mode = raw.striding_rq.unwrap_or_default();
    let stride = match raw.stride_size {
        None => None,
        Some(s) => {
            let v = int::<u32>(
                s,
                i64::from(IB_STRIDE_MIN),
                i64::from(IB_STRIDE_MAX),
                "engine.ibverbs.stride_size",
                " bytes per stride",
                errs,
            );
            match v {
                Some(v) if !v.is_power_of_two() => {
                    errs.push(
                        "engine.ibverbs.stride_size",
                        format!(
                            "{v} is not a power of two; use {} or {}",
                            v.next_power_of_two() / 2,
                            v.next_power_of_two()
                        ),
                    );
                    ok = false;
                }
                None => ok = false,
                _ => {}
            }
            if mode == StridingRq::Off {
                errs.push(
                    "engine.ibverbs.stride_size",
                    "stride_size sizes the strides of the striding receive queue, and striding_rq = \"off\"; remove stride_size or set striding_rq = \"auto\" or \"on\"",
                );
                ok = false;
            }
            v
        }
    };
    ok.then_some((mode, stride))
}

/// `engine.ibverbs.mode`: RoCE interfaces are `rdma://` endpoints that either receive or
/// send (one direction per interface: the receiving end grants credits to the sending
/// end); raw interfaces are netdevs or PCI functions.
fn ibverbs_vs_interfaces(raw: &RawConfig, errs: &mut Errors) {
    if raw.engine.kind != EngineKind::Ibverbs {
        return;
    }
    let roce = raw.engine.ibverbs.as_ref().map(|v| v.mode) == Some(IbMode::Roce);
    let reply = raw
        .engine
        .ibverbs
        .as_ref()
        .and_then(|v| v.reply)
        .unwrap_or_default();
    if roce && reply != RoceReply::None && raw.interfaces.iter().all(|i| i.rx_queues.is_empty()) {
        errs.push(
            "engine.ibverbs.reply",
            format!("reply = \"{}\" is sent by the RX queues of a receiving interface, and no interface has rx_queues; remove reply", reply.as_str()),
        );
    }
    for (i, iface) in raw.interfaces.iter().enumerate() {
        let rdma = iface.address.starts_with("rdma://");
        if roce && !rdma {
            errs.push(
                format!("interfaces[{i}].address"),
                format!("engine.ibverbs.mode = \"roce\" connects through RDMA CM: write the address as \"rdma://a.b.c.d:port\" (the listening or the peer's address), not {:?}", iface.address),
            );
        } else if !roce && rdma {
            errs.push(
                format!("interfaces[{i}].address"),
                "rdma:// addresses need engine.ibverbs.mode = \"roce\"; raw mode takes a netdev or PCI address",
            );
        }
        if roce && !iface.rx_queues.is_empty() && !iface.tx_queues.is_empty() {
            errs.push(
                format!("interfaces[{i}].tx_queues"),
                "a RoCE interface either receives (rx_queues) or sends (tx_queues): its connections carry one direction; use two interfaces (two ports) for both",
            );
        }
    }
}

/// `engine.ibverbs.reply = "echo"` copies each received message into its reply with the
/// CPU, which cannot read GPU memory: no RoCE RX queue may then receive into a `device`
/// region (reported once, at the first such queue).
pub(super) fn reply_reads_messages(raw: &RawConfig, d: &Draft, errs: &mut Errors) {
    if !super::roce(raw) {
        return;
    }
    let reply = raw.engine.ibverbs.as_ref().and_then(|v| v.reply);
    if reply != Some(RoceReply::Echo) {
        return;
    }
    for (i, iface) in d.interfaces.iter().enumerate() {
        for (q, rq) in iface.rx.iter().enumerate() {
            let Some(rq) = rq else { continue };
            let device = rq
                .memory_regions
                .iter()
                .filter_map(|r| d.regions.get(r.0)?.as_ref())
                .find(|m| m.kind == RegionKind::Device);
            if let Some(m) = device {
                errs.push(
                    "engine.ibverbs.reply",
                    format!(
                        "reply = \"echo\" copies each message into its reply with the CPU, but {} receives into region \"{}\" of kind \"device\" (GPU memory the CPU cannot read); use reply = \"ack\" or \"none\", or a \"host\" or \"host_pinned\" region",
                        rxq(i, q),
                        m.name
                    ),
                );
                return;
            }
        }
    }
}

/// Engine settings that depend on the interfaces: `AF_PACKET` fanout must be on when one
/// interface has several RX queues; the socket engine needs `SO_REUSEPORT` for that.
pub(super) fn engine_vs_interfaces(raw: &RawConfig, errs: &mut Errors) {
    ibverbs_vs_interfaces(raw, errs);
    for (i, iface) in raw.interfaces.iter().enumerate() {
        let n = iface.rx_queues.len();
        if n < 2 {
            continue;
        }
        match raw.engine.kind {
            EngineKind::Afpacket => {
                let fanout = raw
                    .engine
                    .afpacket
                    .as_ref()
                    .map_or(FanoutMode::Hash, |a| a.fanout);
                if fanout == FanoutMode::None {
                    errs.push(
                        "engine.afpacket.fanout",
                        format!(
                            "fanout = \"none\" but interfaces[{i}] has {n} RX queues; a fanout group spreads a port over queues: use \"hash\""
                        ),
                    );
                }
            }
            EngineKind::Socket => {
                let reuse = raw.engine.socket.as_ref().is_none_or(|s| s.reuseport);
                let udp = iface.address.starts_with("udp://");
                if udp && !reuse {
                    errs.push(
                        "engine.socket.reuseport",
                        format!(
                            "reuseport = false but interfaces[{i}] has {n} RX queues on one UDP port; set reuseport = true (SO_REUSEPORT) or use one RX queue"
                        ),
                    );
                }
            }
            _ => {}
        }
    }
}
