//! Packet engines (`[engine]`) and their settings.

use serde::Deserialize;

/// Which packet engine the binary runs (`engine.kind`); matches the `engine-*` cargo features.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Kernel UDP/TCP sockets (`socket`).
    Socket,
    /// Linux `AF_PACKET` with `TPACKET_V3` rings (`afpacket`).
    Afpacket,
    /// Linux `AF_XDP` sockets (`afxdp`).
    Afxdp,
    /// DPDK poll-mode drivers (`dpdk`).
    Dpdk,
    /// RDMA verbs: raw Ethernet QPs or RoCE (`ibverbs`).
    Ibverbs,
}

impl EngineKind {
    /// Every engine, in documentation order.
    pub const ALL: [EngineKind; 5] = [
        EngineKind::Socket,
        EngineKind::Afpacket,
        EngineKind::Afxdp,
        EngineKind::Dpdk,
        EngineKind::Ibverbs,
    ];

    /// The config spelling (`"socket"`, ...), also the cargo feature suffix (`engine-socket`).
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Socket => "socket",
            EngineKind::Afpacket => "afpacket",
            EngineKind::Afxdp => "afxdp",
            EngineKind::Dpdk => "dpdk",
            EngineKind::Ibverbs => "ibverbs",
        }
    }

    /// True for the engines that see whole Ethernet frames ([`Capabilities::frames`] of the
    /// kind's raw mode; ibverbs in RoCE mode carries messages).
    pub const fn is_raw(self) -> bool {
        self.caps(false).frames
    }
}

/// How an engine steers flows to queues (`[[flows]]`), which decides what a rule may match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steering {
    /// The kernel delivers by address and port (sockets): no Ethernet-level keys.
    Kernel,
    /// rtdaq classifies each frame in software (or an XDP program): any key.
    Software,
    /// NIC rules (rte_flow, ibverbs flow steering): hardware keys, word offsets within the
    /// flex parser's reach.
    Nic,
    /// No flows: connections carry the messages (RoCE).
    None,
}

/// What an engine can do: the one table that config validation, memory planning, the GPU
/// stage's checks and `rtdaq doctor` read, instead of asking which engine it is. A new
/// engine is one more row here ([`EngineKind::caps`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// RX segments and TX buffers are whole Ethernet frames (the raw engines), not
    /// datagrams or messages.
    pub frames: bool,
    /// Messages over connections (`rdma://` addresses): no Ethernet frames on the queues,
    /// no flow steering (ibverbs in RoCE mode).
    pub messages: bool,
    /// One packet may span several memory regions (header-data split, multi-buffer).
    pub multi_region_rx: bool,
    /// RX into GPU `device` memory (GPUDirect).
    pub device_rx: bool,
    /// GPU `device` memory reaches the NIC as a dma-buf (`ibv_reg_dmabuf_mr`); without it,
    /// the engine maps the address for its device (DPDK's `rte_dev_dma_map`, which the
    /// mlx5 PMD pins through nvidia-peermem).
    pub dmabuf: bool,
    /// Received packets lie in the queue's own memory region (a GPU stage can batch them
    /// in place); AF_PACKET delivers in the kernel's mapped ring instead.
    pub buffers_in_region: bool,
    /// How flows reach queues.
    pub steering: Steering,
}

impl EngineKind {
    /// What engine `self` can do (`roce`: the ibverbs engine in RoCE mode).
    pub const fn caps(self, roce: bool) -> Capabilities {
        let raw = Capabilities {
            frames: true,
            messages: false,
            multi_region_rx: true,
            device_rx: false,
            dmabuf: false,
            buffers_in_region: true,
            steering: Steering::Software,
        };
        match self {
            EngineKind::Socket => Capabilities {
                frames: false,
                multi_region_rx: false,
                steering: Steering::Kernel,
                ..raw
            },
            EngineKind::Afpacket => Capabilities {
                buffers_in_region: false,
                ..raw
            },
            EngineKind::Afxdp => raw,
            EngineKind::Dpdk => Capabilities {
                device_rx: true,
                steering: Steering::Nic,
                ..raw
            },
            EngineKind::Ibverbs if roce => Capabilities {
                frames: false,
                messages: true,
                device_rx: true,
                dmabuf: true,
                steering: Steering::None,
                ..raw
            },
            EngineKind::Ibverbs => Capabilities {
                device_rx: true,
                dmabuf: true,
                steering: Steering::Nic,
                ..raw
            },
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The engine with its settings (`[engine]` plus the sub-table named by `kind`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Engine {
    /// `kind = "socket"`, `[engine.socket]`.
    Socket(SocketEngine),
    /// `kind = "afpacket"`, `[engine.afpacket]`.
    Afpacket(AfpacketEngine),
    /// `kind = "afxdp"`, `[engine.afxdp]`.
    Afxdp(AfxdpEngine),
    /// `kind = "dpdk"`, `[engine.dpdk]`.
    Dpdk(DpdkEngine),
    /// `kind = "ibverbs"`, `[engine.ibverbs]`.
    Ibverbs(IbverbsEngine),
}

impl Engine {
    /// What the configured engine can do (its kind, and for ibverbs its mode).
    pub fn caps(&self) -> Capabilities {
        let roce = matches!(self, Engine::Ibverbs(ib) if ib.mode == IbMode::Roce);
        self.kind().caps(roce)
    }

    /// The engine kind.
    pub fn kind(&self) -> EngineKind {
        match self {
            Engine::Socket(_) => EngineKind::Socket,
            Engine::Afpacket(_) => EngineKind::Afpacket,
            Engine::Afxdp(_) => EngineKind::Afxdp,
            Engine::Dpdk(_) => EngineKind::Dpdk,
            Engine::Ibverbs(_) => EngineKind::Ibverbs,
        }
    }
}

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
}

impl RxTimestamps {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RxTimestamps::Kernel => "kernel",
            RxTimestamps::Batch => "batch",
            RxTimestamps::Off => "off",
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

/// `AF_PACKET` fanout mode (`engine.afpacket.fanout`) spreading one port over RX queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FanoutMode {
    /// `PACKET_FANOUT_HASH`: by flow hash (default).
    Hash,
    /// `PACKET_FANOUT_LB`: round robin.
    Lb,
    /// `PACKET_FANOUT_CPU`: by receiving CPU.
    Cpu,
    /// `PACKET_FANOUT_QM`: by NIC RX queue.
    Qm,
    /// `PACKET_FANOUT_ROLLOVER`: fill one socket, then the next.
    Rollover,
    /// No fanout group (only valid with a single RX queue).
    None,
}

impl FanoutMode {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FanoutMode::Hash => "hash",
            FanoutMode::Lb => "lb",
            FanoutMode::Cpu => "cpu",
            FanoutMode::Qm => "qm",
            FanoutMode::Rollover => "rollover",
            FanoutMode::None => "none",
        }
    }
}

/// `[engine.afpacket]` (`TPACKET_V3` ring geometry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfpacketEngine {
    /// Bytes per ring block (power of two, multiple of 4096).
    pub block_size: u32,
    /// Nominal frame slot size (multiple of 16).
    pub frame_size: u32,
    /// Blocks per RX ring.
    pub block_count: u32,
    /// Block retire timeout in ms (0 = kernel default).
    pub block_timeout_ms: u32,
    /// Fanout mode across RX queues.
    pub fanout: FanoutMode,
}

/// `AF_XDP` zero-copy policy (`engine.afxdp.zero_copy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ZeroCopy {
    /// Try zero-copy, fall back to copy mode with a warning (default).
    Auto,
    /// Require zero-copy (`XDP_ZEROCOPY`); fail if the driver lacks it.
    On,
    /// Force copy mode (`XDP_COPY`).
    Off,
}

impl ZeroCopy {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ZeroCopy::Auto => "auto",
            ZeroCopy::On => "on",
            ZeroCopy::Off => "off",
        }
    }
}

/// `[engine.afxdp]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfxdpEngine {
    /// UMEM frame size: 2048 or 4096.
    pub frame_size: u32,
    /// Zero-copy policy.
    pub zero_copy: ZeroCopy,
    /// `XDP_USE_NEED_WAKEUP`.
    pub need_wakeup: bool,
}

/// `[engine.dpdk]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DpdkEngine {
    /// Extra EAL arguments (cores and devices come from the queue and interface tables).
    pub eal_args: Vec<String>,
    /// EAL main lcore (housekeeping); `None` = the lowest core no queue uses.
    pub main_core: Option<u32>,
    /// Whether `[[flows]]` become `rte_flow` rules in the NIC (`engine.dpdk.flow_offload`).
    pub flow_offload: FlowOffload,
}

/// Where the DPDK engine classifies `[[flows]]` (`engine.dpdk.flow_offload`). Software
/// classification always runs (it assigns flow ids and counts drops); offloaded rules also
/// steer frames to their queue (or drop them) in the NIC as `rte_flow` rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlowOffload {
    /// Try `rte_flow`; from the first rule the PMD refuses (or that `rte_flow` cannot
    /// express) on, classify in software only, with one warning naming that rule (default).
    #[default]
    Auto,
    /// Every rule must become an `rte_flow` rule; otherwise opening the engine fails with
    /// an error naming the rule and the PMD's reason.
    Hardware,
    /// No `rte_flow`: software classification only.
    Software,
}

impl FlowOffload {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FlowOffload::Auto => "auto",
            FlowOffload::Hardware => "hardware",
            FlowOffload::Software => "software",
        }
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

#[cfg(test)]
mod caps_tests {
    use super::{EngineKind, Steering};

    /// The capability table, row by row: what validation, memory planning and doctor read.
    #[test]
    fn each_engine_row() {
        let row = |k: EngineKind, roce| {
            let c = k.caps(roce);
            (
                c.frames,
                c.messages,
                c.multi_region_rx,
                c.device_rx,
                c.dmabuf,
                c.buffers_in_region,
                c.steering,
            )
        };
        use EngineKind::*;
        assert_eq!(
            row(Socket, false),
            (false, false, false, false, false, true, Steering::Kernel)
        );
        assert_eq!(
            row(Afpacket, false),
            (true, false, true, false, false, false, Steering::Software)
        );
        assert_eq!(
            row(Afxdp, false),
            (true, false, true, false, false, true, Steering::Software)
        );
        assert_eq!(
            row(Dpdk, false),
            (true, false, true, true, false, true, Steering::Nic)
        );
        assert_eq!(
            row(Ibverbs, false),
            (true, false, true, true, true, true, Steering::Nic)
        );
        assert_eq!(
            row(Ibverbs, true),
            (false, true, true, true, true, true, Steering::None)
        );
        for k in EngineKind::ALL {
            assert_eq!(k.is_raw(), k != Socket);
            assert_eq!(
                k.caps(true),
                if k == Ibverbs {
                    k.caps(true)
                } else {
                    k.caps(false)
                }
            );
        }
    }
}
