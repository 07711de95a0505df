//! The socket engine (`engine.kind = "socket"`): kernel UDP/TCP sockets.
//!
//! Everything about `[engine.socket]` lives here: the serde table as written
//! ([`RawSocket`], its defaults), the typed settings ([`SocketEngine`], [`RxTimestamps`],
//! [`Sockopt`]), their validation, the engine's capability row, and the rules that tie the
//! table to the interfaces (`SO_REUSEPORT` for several RX queues on one UDP port).

use super::{Capabilities, Dir, Steering};
use crate::error::Errors;
use crate::schema::{yes, RawConfig};
use crate::validate::int;
use serde::Deserialize;

/// What the socket engine can do: datagrams and TCP records, not Ethernet frames; one
/// region per packet; the kernel steers by address and port.
pub(super) const CAPS: Capabilities = Capabilities {
    frames: false,
    multi_region_rx: false,
    steering: Steering::Kernel,
    ..Capabilities::RAW_FRAMES
};

/// `[engine.socket]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SocketEngine {
    /// `SO_RCVBUF` in bytes; `None` keeps the kernel default.
    pub rcvbuf: Option<u32>,
    /// `SO_SNDBUF` in bytes; `None` keeps the kernel default.
    pub sndbuf: Option<u32>,
    /// `UDP_GRO` on RX sockets.
    pub gro: bool,
    /// UDP GSO (`UDP_SEGMENT`) on TX sockets.
    pub gso: bool,
    /// `SO_REUSEPORT` so several RX queues share one UDP port.
    pub reuseport: bool,
    /// Where UDP receive timestamps come from.
    pub rx_timestamps: RxTimestamps,
    /// Receive interrupt moderation, µs (0 = off): after a read that emptied its socket, a
    /// sleeping UDP RX queue waits this long before reading again, so datagrams arrive in
    /// larger batches (fewer system calls and wake-ups per datagram; up to this much more
    /// latency).
    pub rx_coalesce_us: u32,
    /// Extra integer `setsockopt` calls, applied in order after the ones above.
    pub sockopts: Vec<Sockopt>,
}

/// Where UDP receive timestamps come from (`engine.socket.rx_timestamps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RxTimestamps {
    /// `SO_TIMESTAMPNS`: the kernel stamps each datagram when it arrives (default; one
    /// control message per datagram).
    #[default]
    Kernel,
    /// One `clock_gettime(CLOCK_REALTIME)` after each `recvmmsg`, shared by the datagrams
    /// of that call: cheaper, later by the time the datagram waited in the socket.
    Batch,
    /// No timestamps (`rx_timestamp_ns` = 0; the validator reports no latency).
    Off,
    /// The NIC's own receive time (`SO_TIMESTAMPING` raw hardware stamps; the device's
    /// receive stamping is switched on with `SIOCSHWTSTAMP`, which needs `CAP_NET_ADMIN`),
    /// the kernel's software stamp for a datagram the NIC left unstamped. The start fails
    /// (exit 2) on a device without hardware receive stamps (`ethtool -T`).
    Hardware,
}

impl RxTimestamps {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RxTimestamps::Kernel => "kernel",
            RxTimestamps::Batch => "batch",
            RxTimestamps::Off => "off",
            RxTimestamps::Hardware => "hardware",
        }
    }
}

/// One integer `setsockopt(level, option, &value)` passthrough.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sockopt {
    /// Protocol level (`SOL_SOCKET` = 1, `IPPROTO_UDP` = 17, ...).
    pub level: i32,
    /// Option name (`SO_PRIORITY` = 12, ...).
    pub option: i32,
    /// Integer value.
    pub value: i32,
}

/// `[engine.socket]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSocket {
    #[serde(default)]
    pub rcvbuf: Option<i64>,
    #[serde(default)]
    pub sndbuf: Option<i64>,
    #[serde(default)]
    pub gro: bool,
    #[serde(default)]
    pub gso: bool,
    #[serde(default = "yes")]
    pub reuseport: bool,
    #[serde(default)]
    pub rx_timestamps: RxTimestamps,
    #[serde(default)]
    pub rx_coalesce_us: i64,
    #[serde(default)]
    pub sockopts: Vec<RawSockopt>,
}

impl Default for RawSocket {
    fn default() -> Self {
        RawSocket {
            rcvbuf: None,
            sndbuf: None,
            gro: false,
            gso: false,
            reuseport: true,
            rx_timestamps: RxTimestamps::Kernel,
            rx_coalesce_us: 0,
            sockopts: Vec::new(),
        }
    }
}

/// One `engine.socket.sockopts` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSockopt {
    pub level: i64,
    pub option: i64,
    pub value: i64,
}

/// Largest `engine.socket.rx_coalesce_us` (10 ms).
const MAX_RX_COALESCE_US: u32 = 10_000;

const SOL_SOCKET: i64 = 1;
const IPPROTO_UDP: i64 = 17;

/// `[engine.socket]`: buffer sizes in range; sockopts fit `int` and do not shadow typed keys.
pub(super) fn validate(raw: &RawSocket, errs: &mut Errors) -> Option<SocketEngine> {
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

/// `reuseport = false` but an interface has several RX queues on one UDP port: they need
/// `SO_REUSEPORT` to share it.
pub(super) fn vs_interfaces(raw: &RawConfig, errs: &mut Errors) {
    let reuse = raw.engine.socket.as_ref().is_none_or(|s| s.reuseport);
    for (i, iface) in raw.interfaces.iter().enumerate() {
        let n = iface.rx_queues.len();
        if n < 2 {
            continue;
        }
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
}

/// Why a socket queue cannot use GPU memory: the kernel copies with the CPU.
pub(super) fn device_refusal(dir: Dir) -> String {
    match dir {
        Dir::Rx => format!(
            "the socket engine receives through the kernel, which cannot write GPU memory; use a \"host\" or \"host_pinned\" region (a gpu_stage reads \"host_pinned\" memory in place), or {}",
            super::ROCE_RX
        ),
        Dir::Tx => "the socket engine sends through the kernel, which cannot read GPU memory; use a \"host\" or \"host_pinned\" region".to_owned(),
    }
}
