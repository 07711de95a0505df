//! The ibverbs engine (`engine.kind = "ibverbs"`): RDMA verbs, raw Ethernet QPs or RoCE.
//!
//! Everything about `[engine.ibverbs]` lives here: the serde table as written
//! ([`RawIbverbs`], its defaults), the typed settings ([`IbverbsEngine`], [`IbMode`],
//! [`RoceOp`], [`RoceReply`], [`StridingRq`]), their validation, the engine's two
//! capability rows (raw and RoCE), and the rules that tie the table to the interfaces
//! (`rdma://` addresses for RoCE, one direction per RoCE interface) and to the memory
//! regions (`reply = "echo"` reads each message with the CPU). The striding receive queue
//! against the buffer sizes is checked with the other buffer sizes (`validate::capacity`,
//! through [`default_stride`] and [`IB_MIN_STRIDES`]).

use super::{Capabilities, Dir, EngineKind, Steering, HOST_KINDS};
use crate::error::Errors;
use crate::model::RegionKind;
use crate::schema::RawConfig;
use crate::validate::{int, roce, rxq, Draft};
use serde::Deserialize;

/// What the ibverbs engine can do. Raw mode: whole frames, received into GPU memory too
/// (registered as a dma-buf), steered by NIC flow rules. RoCE mode: messages over
/// connections, no frames, no flow steering.
pub(super) const fn caps(roce: bool) -> Capabilities {
    let raw = Capabilities {
        device_rx: true,
        dmabuf: true,
        steering: Steering::Nic,
        ..Capabilities::RAW_FRAMES
    };
    if roce {
        Capabilities {
            frames: false,
            messages: true,
            steering: Steering::None,
            ..raw
        }
    } else {
        raw
    }
}

/// The mlx5 striding (multi-packet) receive queue of the raw path
/// (`engine.ibverbs.striding_rq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StridingRq {
    /// Used when the device supports it and the RX buffers hold enough strides; otherwise
    /// one frame per receive, with the reason logged (default).
    #[default]
    Auto,
    /// Required: opening fails with the reason when it cannot be used.
    On,
    /// Never: one frame per receive.
    Off,
}

impl StridingRq {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            StridingRq::Auto => "auto",
            StridingRq::On => "on",
            StridingRq::Off => "off",
        }
    }
}

/// What the ibverbs engine moves (`engine.ibverbs.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IbMode {
    /// Raw Ethernet frames through raw packet QPs with flow steering (default).
    Raw,
    /// RoCE v2 reliable connections through RDMA CM (`rdma://` interfaces).
    Roce,
}

impl IbMode {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            IbMode::Raw => "raw",
            IbMode::Roce => "roce",
        }
    }
}

/// How RoCE messages travel (`engine.ibverbs.op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoceOp {
    /// SEND into receives the receiver pre-posted (default).
    #[default]
    Send,
    /// RDMA WRITE with immediate into the receiver's buffers; the immediate names the slot.
    WriteImm,
    /// Pull mode: the receiver RDMA-READs each message from the sender's buffers (the
    /// sender announces them in descriptor messages).
    Read,
}

impl RoceOp {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RoceOp::Send => "send",
            RoceOp::WriteImm => "write_imm",
            RoceOp::Read => "read",
        }
    }
}

/// What a RoCE receiver sends back for each message of a request/response peer
/// (`engine.ibverbs.reply`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoceReply {
    /// Nothing: rtdaq is a pure sink (default).
    #[default]
    None,
    /// The message itself, up to `reply_bytes` bytes.
    Echo,
    /// A fixed-size acknowledgement of `reply_bytes` bytes: the message's first bytes,
    /// zero-padded.
    Ack,
}

impl RoceReply {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RoceReply::None => "none",
            RoceReply::Echo => "echo",
            RoceReply::Ack => "ack",
        }
    }
}

/// `[engine.ibverbs]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IbverbsEngine {
    /// Raw Ethernet or RoCE.
    pub mode: IbMode,
    /// HCA port number (1-based).
    pub port: u8,
    /// RDMA device (`mlx5_0`); `None` = the device of the interface's netdev / PCI
    /// function (raw) or of the `rdma://` address (RoCE).
    pub device: Option<String>,
    /// RoCE: SEND or WRITE with immediate.
    pub op: RoceOp,
    /// RoCE: receive buffers posted per connection, each one credit of its sender.
    pub credits: u32,
    /// RoCE: one signaled send completion per this many sends (and at the end of a burst).
    pub signal_interval: u32,
    /// RoCE receivers: the reply sent to request/response (non-rtdaq) peers per message.
    pub reply: RoceReply,
    /// RoCE receivers with a reply: bytes of an `ack`, the most bytes of an `echo`.
    pub reply_bytes: u32,
    /// Raw: the mlx5 striding receive queue (multi-packet receive).
    pub striding_rq: StridingRq,
    /// Raw, striding RQ: bytes per stride (a power of two, 64..=8192); `None` = the
    /// largest frame rounded up to a power of two (one frame per stride).
    pub stride_size: Option<u32>,
}

/// `[engine.ibverbs]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawIbverbs {
    #[serde(default = "ib_mode")]
    pub mode: IbMode,
    #[serde(default = "ib_port")]
    pub port: i64,
    /// Parsed only to refuse it with a reason (the engine has no use for it).
    #[serde(default)]
    pub gid_index: Option<i64>,
    #[serde(default)]
    pub device: Option<String>,
    #[serde(default)]
    pub op: Option<RoceOp>,
    #[serde(default)]
    pub credits: Option<i64>,
    #[serde(default)]
    pub signal_interval: Option<i64>,
    #[serde(default)]
    pub reply: Option<RoceReply>,
    #[serde(default)]
    pub reply_bytes: Option<i64>,
    #[serde(default)]
    pub striding_rq: Option<StridingRq>,
    #[serde(default)]
    pub stride_size: Option<i64>,
}

impl Default for RawIbverbs {
    fn default() -> Self {
        RawIbverbs {
            mode: ib_mode(),
            port: ib_port(),
            gid_index: None,
            device: None,
            op: None,
            credits: None,
            signal_interval: None,
            reply: None,
            reply_bytes: None,
            striding_rq: None,
            stride_size: None,
        }
    }
}

fn ib_mode() -> IbMode {
    IbMode::Raw
}
fn ib_port() -> i64 {
    1
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
pub(super) fn validate(raw: &RawIbverbs, errs: &mut Errors) -> Option<IbverbsEngine> {
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
pub(super) fn vs_interfaces(raw: &RawConfig, errs: &mut Errors) {
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
    if !roce(raw) {
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

/// Why an ibverbs queue cannot use GPU memory: RX can (`None`): RoCE messages, raw frames
/// whole (steered by the NIC's flow rules, counted, not read) or as the data segment of a
/// two-SGE split (`validate::gpudirect`); TX sends what the CPU writes.
pub(super) fn device_refusal(raw: &RawConfig, dir: Dir) -> Option<String> {
    match dir {
        Dir::Rx => None,
        Dir::Tx if !roce(raw) => Some(format!(
            "an ibverbs TX queue sends the frames the generator builds with the CPU, which cannot write GPU memory; {HOST_KINDS}; GPU memory is for RoCE receive queues (mode = \"roce\")"
        )),
        Dir::Tx => {
            let op = raw.engine.ibverbs.as_ref().and_then(|v| v.op);
            Some(format!(
                "an ibverbs TX queue sends the messages the generator writes with the CPU, which cannot write GPU memory{}; {HOST_KINDS}; GPU memory is for RoCE receive queues",
                if op == Some(RoceOp::Read) {
                    ", and with op = \"read\" the receiver RDMA-READs each message from these buffers, registered as host memory"
                } else {
                    ""
                }
            ))
        }
    }
}
