//! Traffic generator (`[generator]`), run parameters (`[run]`), real-time policy (`[rt]`).

use super::{InterfaceId, SocketUri};
use rtdaq_core::QueueId;
use std::path::PathBuf;

/// Generator send rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GeneratorRate {
    /// `rate_gbps`: Gb/s of payload bytes.
    Gbps(f64),
    /// `rate_pps`: packets per second.
    Pps(u64),
    /// `unpaced = true`: as fast as the queue takes them.
    Unpaced,
}

/// When the generator stops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GeneratorLimit {
    /// `duration_s`: after this many seconds.
    Duration(f64),
    /// `count`: after this many packets.
    Count(u64),
    /// Neither set: at the end of the run.
    Run,
}

/// `[generator]`: synthetic traffic on one TX queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Generator {
    /// Interface of the TX queue.
    pub interface: InterfaceId,
    /// TX queue index on that interface.
    pub tx_queue: QueueId,
    /// Where packets go: a UDP endpoint (`None` on TCP interfaces, which send on their
    /// connections).
    pub destination: Option<SocketUri>,
    /// Raw engines: destination MAC address.
    pub dst_mac: Option<[u8; 6]>,
    /// Raw engines: source IPv4 address and UDP port written into each packet.
    pub source: Option<SocketUri>,
    /// UDP payload bytes per packet (includes the rtdaq sequence header).
    pub payload_size: u32,
    /// Send rate.
    pub rate: GeneratorRate,
    /// Stop condition.
    pub limit: GeneratorLimit,
    /// Stream id written into the sequence header of the first stream's packets.
    pub stream_id: u16,
    /// Independent sequence streams (ids `stream_id .. stream_id + streams`), one per TX lane:
    /// UDP sends each from its own source port (so SO_REUSEPORT receivers spread them), TCP
    /// sends each on its own connection (`streams` = `connections` there).
    pub streams: u32,
    /// Send the packets of a pcap file instead of generated ones (`replay`), if set.
    pub replay: Option<Replay>,
    /// MiB of the window a replay reads its file through (`replay_window_mib`, default
    /// [`DEFAULT_REPLAY_WINDOW_MIB`]; also for `rtdaq run --replay`): the replay's whole
    /// footprint, whatever the file's size.
    pub replay_window_mib: u32,
    /// How the sending times are kept (`pacing`, `txtime_lead_us`).
    pub pacing: GenPacing,
}

/// `generator.pacing`: how the generator keeps its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GenPacing {
    /// The generator sleeps until packets are due and hands them over then (`"software"`,
    /// the default).
    #[default]
    Software,
    /// Each packet goes to the kernel up to `lead_us` µs ahead with its own launch time
    /// (`SO_TXTIME`), which the interface's `etf` or `fq` qdisc keeps (`"txtime"`).
    Txtime {
        /// `txtime_lead_us`: how far ahead of its launch time a packet is handed over.
        lead_us: u32,
    },
    /// The NIC paces the queue at the generator's rate (a per-queue rate limit in
    /// hardware: DPDK's `rte_eth_set_queue_rate_limit`), spacing the frames of each burst;
    /// the software pacer still keeps the average, and alone where the PMD has no limit,
    /// said in the report (`"nic"`).
    Nic,
}

/// Default `generator.txtime_lead_us`.
pub const DEFAULT_TXTIME_LEAD_US: u32 = 1000;
/// Largest `generator.txtime_lead_us`.
pub const MAX_TXTIME_LEAD_US: u32 = 1_000_000;

/// Default `generator.replay_window_mib`.
pub const DEFAULT_REPLAY_WINDOW_MIB: u32 = 64;
/// Largest `generator.replay_window_mib`.
pub const MAX_REPLAY_WINDOW_MIB: u32 = 65_536;

/// When a replayed packet is sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReplayTiming {
    /// As recorded: the gaps between the file's timestamps, divided by `speed`
    /// (`replay_timing = "recorded"`, `replay_speed`).
    Recorded {
        /// 2.0 replays twice as fast as recorded.
        speed: f64,
    },
    /// At the generator's rate (`rate_gbps` / `rate_pps` / `unpaced`), ignoring the file's
    /// timestamps (`replay_timing = "rate"`).
    Rate,
}

/// `[generator] replay = "FILE.pcap"` (or `rtdaq run --replay FILE`): the generator sends
/// the packets of a pcap file. The socket engine sends each frame's UDP payload to
/// `destination`; raw engines send the frames as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// The pcap file (streamed through `replay_window_mib`).
    pub path: PathBuf,
    /// Timing.
    pub timing: ReplayTiming,
    /// Times the file is sent (`replay_loops`, default 1).
    pub loops: u32,
}

/// Most `replay_loops`.
pub const MAX_REPLAY_LOOPS: u32 = 1_000_000;

impl Replay {
    /// Parses a `replay_timing` spelling with its `replay_speed`.
    pub fn timing_from(timing: Option<&str>, speed: Option<f64>) -> Result<ReplayTiming, String> {
        let speed_ok = |s: f64| s.is_finite() && s > 0.0 && s <= 1e6;
        match (timing.unwrap_or("recorded"), speed) {
            ("recorded", None) => Ok(ReplayTiming::Recorded { speed: 1.0 }),
            ("recorded", Some(s)) if speed_ok(s) => Ok(ReplayTiming::Recorded { speed: s }),
            ("recorded", Some(s)) => Err(format!("replay speed {s} is out of range (0, 1e6] (2.0 = twice as fast as recorded)")),
            ("rate", None) => Ok(ReplayTiming::Rate),
            ("rate", Some(_)) => Err("a replay speed scales the recorded timing; with timing \"rate\" the generator's rate applies: remove the speed".into()),
            (t, _) => Err(format!("unknown replay timing {t:?}; use \"recorded\" (the file's timestamps, scaled by the speed) or \"rate\" (the generator's rate_gbps / rate_pps / unpaced)")),
        }
    }
}

/// What the RX side checks in each received payload (`run.validate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Validation {
    /// Sequence header, sequence numbers, latency and every payload byte's pattern (default).
    #[default]
    Full,
    /// Sequence header, sequence numbers and latency; the payload pattern is not read.
    Sequence,
    /// Count packets and bytes only (traffic that carries no rtdaq sequence header).
    Count,
}

impl Validation {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Validation::Full => "full",
            Validation::Sequence => "sequence",
            Validation::Count => "count",
        }
    }
}

/// `[run]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Run length in seconds; 0 = until SIGINT/SIGTERM.
    pub duration_s: f64,
    /// Where to write the JSON report.
    pub report_json: Option<PathBuf>,
    /// Packets that may be lost before the run counts as failed.
    pub loss_tolerance: u64,
    /// How long RX keeps draining after TX stops, in ms.
    pub drain_ms: u32,
    /// What the RX side checks in each payload.
    pub validate: Validation,
    /// Where the metrics endpoint listens (`/metrics`, `/status`); `None`: no endpoint.
    pub metrics: Option<std::net::SocketAddr>,
}

/// `[rt]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rt {
    /// Refuse to start without real-time privileges (else degrade with a warning).
    pub required: bool,
    /// `mlockall(MCL_CURRENT | MCL_FUTURE)` at start.
    pub lock_memory: bool,
    /// Stack bytes (KiB) each queue thread touches at start.
    pub prefault_stack_kib: u32,
}
