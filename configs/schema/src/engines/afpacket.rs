//! The AF_PACKET engine (`engine.kind = "afpacket"`): Linux `AF_PACKET` sockets with
//! `TPACKET_V3` rings.
//!
//! Everything about `[engine.afpacket]` lives here: the serde table as written
//! ([`RawAfpacket`], its defaults), the typed ring geometry ([`AfpacketEngine`],
//! [`FanoutMode`]), its validation, the engine's capability row, and the rule that ties the
//! table to the interfaces (a fanout group for several RX queues). The ring against the
//! largest frame is checked with the other buffer sizes (`validate::capacity`).

use super::{Capabilities, Dir, HOST_KINDS, ROCE_RX};
use crate::error::Errors;
use crate::schema::RawConfig;
use crate::validate::int;
use serde::Deserialize;

/// What the AF_PACKET engine can do: whole frames, delivered in the kernel's mapped ring
/// (not in the queue's own region), classified in software.
pub(super) const CAPS: Capabilities = Capabilities {
    buffers_in_region: false,
    ..Capabilities::RAW_FRAMES
};

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

/// Defaults of `[engine.afpacket]`.
pub(crate) mod afpacket_defaults {
    /// 1 MiB blocks.
    pub const BLOCK_SIZE: i64 = 1 << 20;
    /// 2 KiB nominal frames.
    pub const FRAME_SIZE: i64 = 2048;
    /// 64 blocks (64 MiB per RX queue).
    pub const BLOCK_COUNT: i64 = 64;
    /// Retire a partly filled block after 1 ms.
    pub const BLOCK_TIMEOUT_MS: i64 = 1;
}

/// `[engine.afpacket]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAfpacket {
    #[serde(default = "af_block_size")]
    pub block_size: i64,
    #[serde(default = "af_frame_size")]
    pub frame_size: i64,
    #[serde(default = "af_block_count")]
    pub block_count: i64,
    #[serde(default = "af_block_timeout")]
    pub block_timeout_ms: i64,
    #[serde(default = "af_fanout")]
    pub fanout: FanoutMode,
}

impl Default for RawAfpacket {
    fn default() -> Self {
        RawAfpacket {
            block_size: af_block_size(),
            frame_size: af_frame_size(),
            block_count: af_block_count(),
            block_timeout_ms: af_block_timeout(),
            fanout: af_fanout(),
        }
    }
}

fn af_block_size() -> i64 {
    afpacket_defaults::BLOCK_SIZE
}
fn af_frame_size() -> i64 {
    afpacket_defaults::FRAME_SIZE
}
fn af_block_count() -> i64 {
    afpacket_defaults::BLOCK_COUNT
}
fn af_block_timeout() -> i64 {
    afpacket_defaults::BLOCK_TIMEOUT_MS
}
fn af_fanout() -> FanoutMode {
    FanoutMode::Hash
}

/// `[engine.afpacket]`: `TPACKET_V3` geometry the kernel accepts.
pub(super) fn validate(raw: &RawAfpacket, errs: &mut Errors) -> Option<AfpacketEngine> {
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

/// `fanout = "none"` but an interface has several RX queues: a fanout group spreads a port
/// over them.
pub(super) fn vs_interfaces(raw: &RawConfig, errs: &mut Errors) {
    let fanout = raw
        .engine
        .afpacket
        .as_ref()
        .map_or(FanoutMode::Hash, |a| a.fanout);
    if fanout != FanoutMode::None {
        return;
    }
    for (i, iface) in raw.interfaces.iter().enumerate() {
        let n = iface.rx_queues.len();
        if n >= 2 {
            errs.push(
                "engine.afpacket.fanout",
                format!(
                    "fanout = \"none\" but interfaces[{i}] has {n} RX queues; a fanout group spreads a port over queues: use \"hash\""
                ),
            );
        }
    }
}

/// Why an AF_PACKET queue cannot use GPU memory: the ring is host memory, copied by the CPU.
pub(super) fn device_refusal(dir: Dir) -> String {
    match dir {
        Dir::Rx => format!(
            "AF_PACKET frames arrive in a kernel ring in host memory and the afpacket engine copies them out with the CPU, which cannot write GPU memory; {HOST_KINDS} (a gpu_stage reads \"host_pinned\" memory in place), or {ROCE_RX}"
        ),
        Dir::Tx => format!(
            "the afpacket engine copies each frame into a kernel ring in host memory with the CPU, which cannot read GPU memory; {HOST_KINDS}"
        ),
    }
}
