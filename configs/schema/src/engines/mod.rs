//! Packet engines (`[engine]`): what is common to them, and one module per engine.
//!
//! Each engine's config lives in one file, `engines/<name>.rs`: its serde sub-table
//! (`[engine.<name>]` as written, with defaults), its typed settings and their enums, the
//! validation of that table (errors at `engine.<name>.*`), its capability row
//! ([`Capabilities`]) and the rules only it has against the rest of the config. This
//! module holds what they share: [`EngineKind`], [`Capabilities`], [`Steering`], the
//! [`Engine`] enum, the raw `[engine]` table (its `kind` and one optional sub-table per
//! engine, of which only the matching one may be present) and the dispatch from the
//! validator to the engine modules.
//!
//! Adding an engine: write `engines/<name>.rs` (as the others: `Raw<Name>`, `<Name>Engine`,
//! `CAPS`, `validate`, `device_refusal`, and what rules it needs), then add it here: `mod`,
//! `pub use` and [`exports`], a variant of [`EngineKind`] (with [`EngineKind::ALL`],
//! [`EngineKind::as_str`], [`EngineKind::caps`]) and of [`Engine`], a field of
//! [`RawEngine`], and an arm in each dispatch function below (the compiler points at each).
//! Generic rules elsewhere read [`Capabilities`], not the kind. (The public paths are
//! `rtdaq_config::model::*`, re-exported from [`exports`] here.)

mod afpacket;
mod afxdp;
mod dpdk;
pub(crate) mod ibverbs;
mod socket;

pub use afpacket::{AfpacketEngine, FanoutMode};
pub use afxdp::{AfxdpEngine, ZeroCopy};
pub use dpdk::{DpdkEngine, FlowOffload};
pub use ibverbs::{IbMode, IbverbsEngine, RoceOp, RoceReply, StridingRq};
pub use socket::{RxTimestamps, SocketEngine, Sockopt};

/// The public engine types, re-exported as `rtdaq_config::model::*` (by a glob, so that a
/// new engine's types are listed here only).
pub(crate) mod exports {
    pub use super::{
        AfpacketEngine, AfxdpEngine, Capabilities, DpdkEngine, Engine, EngineKind, FanoutMode,
        FlowOffload, IbMode, IbverbsEngine, RoceOp, RoceReply, RxTimestamps, SocketEngine, Sockopt,
        Steering, StridingRq, ZeroCopy,
    };
}

use crate::error::Errors;
use crate::schema::RawConfig;
use crate::validate::Draft;
use afpacket::RawAfpacket;
use afxdp::RawAfxdp;
use dpdk::RawDpdk;
use ibverbs::RawIbverbs;
use serde::Deserialize;
use socket::RawSocket;

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
/// engine is one more row (its module's `CAPS`, dispatched by [`EngineKind::caps`]).
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

impl Capabilities {
    /// The row of an engine of whole Ethernet frames, classified in software, into the
    /// queue's own region (host memory only); each engine's row starts from it.
    pub(crate) const RAW_FRAMES: Capabilities = Capabilities {
        frames: true,
        messages: false,
        multi_region_rx: true,
        device_rx: false,
        dmabuf: false,
        buffers_in_region: true,
        steering: Steering::Software,
    };
}

impl EngineKind {
    /// What engine `self` can do (`roce`: the ibverbs engine in RoCE mode); each engine's
    /// row is in its module.
    pub const fn caps(self, roce: bool) -> Capabilities {
        match self {
            EngineKind::Socket => socket::CAPS,
            EngineKind::Afpacket => afpacket::CAPS,
            EngineKind::Afxdp => afxdp::CAPS,
            EngineKind::Dpdk => dpdk::CAPS,
            EngineKind::Ibverbs => ibverbs::caps(roce),
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

/// `[engine]`: the kind plus at most the one sub-table matching it (checked in validation).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEngine {
    pub kind: EngineKind,
    #[serde(default)]
    pub socket: Option<RawSocket>,
    #[serde(default)]
    pub afpacket: Option<RawAfpacket>,
    #[serde(default)]
    pub afxdp: Option<RawAfxdp>,
    #[serde(default)]
    pub dpdk: Option<RawDpdk>,
    #[serde(default)]
    pub ibverbs: Option<RawIbverbs>,
}

/// Converts `[engine]`, reporting a sub-table for another engine and bad settings.
pub(crate) fn engine(raw: &RawEngine, errs: &mut Errors) -> Option<Engine> {
    only_matching_table(raw, errs);
    match raw.kind {
        EngineKind::Socket => {
            let t = raw.socket.as_ref();
            socket::validate(t.unwrap_or(&RawSocket::default()), errs).map(Engine::Socket)
        }
        EngineKind::Afpacket => {
            let t = raw.afpacket.as_ref();
            afpacket::validate(t.unwrap_or(&RawAfpacket::default()), errs).map(Engine::Afpacket)
        }
        EngineKind::Afxdp => {
            let t = raw.afxdp.as_ref();
            afxdp::validate(t.unwrap_or(&RawAfxdp::default()), errs).map(Engine::Afxdp)
        }
        EngineKind::Dpdk => {
            let t = raw.dpdk.as_ref();
            dpdk::validate(t.unwrap_or(&RawDpdk::default()), errs).map(Engine::Dpdk)
        }
        EngineKind::Ibverbs => {
            let t = raw.ibverbs.as_ref();
            ibverbs::validate(t.unwrap_or(&RawIbverbs::default()), errs).map(Engine::Ibverbs)
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

/// The engine's settings against the interfaces (checked on the document, after the
/// interfaces converted): AF_PACKET fanout and the socket engine's `SO_REUSEPORT` for
/// several RX queues; RoCE's `rdma://` addresses and one direction per interface.
pub(crate) fn engine_vs_interfaces(raw: &RawConfig, errs: &mut Errors) {
    match raw.engine.kind {
        EngineKind::Socket => socket::vs_interfaces(raw, errs),
        EngineKind::Afpacket => afpacket::vs_interfaces(raw, errs),
        EngineKind::Afxdp | EngineKind::Dpdk => {}
        EngineKind::Ibverbs => ibverbs::vs_interfaces(raw, errs),
    }
}

/// The engine's rules against the validated queues and regions (after the flows): AF_XDP's
/// UMEM rules; the ibverbs `reply = "echo"` against GPU memory.
pub(crate) fn engine_vs_queues(raw: &RawConfig, d: &Draft, errs: &mut Errors) {
    match raw.engine.kind {
        EngineKind::Socket | EngineKind::Afpacket | EngineKind::Dpdk => {}
        EngineKind::Afxdp => afxdp::umem(d, errs),
        EngineKind::Ibverbs => ibverbs::reply_reads_messages(raw, d, errs),
    }
}

/// Queue direction, for the wording of the memory rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Rx,
    Tx,
}

/// The engines that receive into GPU memory, for the fix of a refusal.
const ROCE_RX: &str =
    "engine ibverbs (RoCE, or raw Ethernet) or engine dpdk to receive into GPU memory (GPUDirect)";
/// The CPU-memory region kinds, for the fix of a refusal.
const HOST_KINDS: &str = "use a \"host\", \"huge\" or \"host_pinned\" region";

/// Why the engine cannot use a `device` (GPU memory) region for a queue of this direction,
/// with the fix; `None` where it can. (The header region of a header-data split, which the
/// CPU reads, is refused before this, in `validate::queues`.)
pub(crate) fn device_refusal(raw: &RawConfig, dir: Dir) -> Option<String> {
    match raw.engine.kind {
        EngineKind::Socket => Some(socket::device_refusal(dir)),
        EngineKind::Afpacket => Some(afpacket::device_refusal(dir)),
        EngineKind::Afxdp => Some(afxdp::device_refusal(dir)),
        EngineKind::Dpdk => dpdk::device_refusal(dir),
        EngineKind::Ibverbs => ibverbs::device_refusal(raw, dir),
    }
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
