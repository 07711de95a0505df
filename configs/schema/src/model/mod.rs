//! The validated, typed deployment model returned by [`load_str`](crate::load_str).
//!
//! Everything here has passed validation: references between items are resolved to
//! indices ([`RegionId`], [`InterfaceId`], [`QueueId`](rtdaq_core::QueueId)), ranges are
//! checked, and numbers fit their use. Fields are public so `app/build.rs` can turn them
//! into constants; the types carry no behaviour beyond small derived quantities.

mod format;
mod gpu;
mod interface;
mod memory;
mod record;
mod run;

// `EngineKind`, `Engine`, `Capabilities`, `SocketEngine`, ...: the list is in
// `engines/mod.rs`, so that a new engine does not touch this file.
pub use crate::dada_ring::{DadaRing, DadaRingId, DadaShape, DEFAULT_BUFSZ_KIB, DEFAULT_NBUFS};
pub use crate::dump::{Dump, DumpId, MAX_HISTORY_PACKETS};
pub use crate::egress::{
    Egress, EgressFeed, EgressId, EgressProtocol, EgressUnits, UcxEgress, DEFAULT_OPEN_UNITS,
    MAX_OPEN_UNITS, UCX_MAX_IN_FLIGHT,
};
pub use crate::engines::exports::*;
pub use crate::time::{TimeSync, DEFAULT_PTP4L};
pub use format::{
    CodifParams, SpeadParams, StreamFormat, VdifParams, SPEAD_FIRST_OVERHEAD, SPEAD_OVERHEAD,
};
pub use gpu::{
    BatchMode, GpuProduct, GpuStage, GpuStageId, GpuStaging, GpuWorkload, SampleConversion,
    SampleIn, SampleOut, FFT_LEN, GEMM_DIM, GPU_ALIGN,
};
pub use interface::{
    Address, FlowControl, Interface, Multicast, PciAddress, RawMulticast, RxMode, RxQueue,
    SocketUri, TcpRole, Transport, TxQueue, DEFAULT_MAX_STREAMS, MAX_STREAMS_LIMIT,
};
pub use memory::{MemoryRegion, PageSize, Placement, RegionKind};
pub use record::{
    DadaParams, RecordFormat, Recorder, RecorderId, WriterPlacement, FILE_NAME_FIELDS,
};
pub use run::{
    GenPacing, Generator, GeneratorLimit, GeneratorRate, Replay, ReplayTiming, Rt, Run, Validation,
    DEFAULT_REPLAY_WINDOW_MIB, DEFAULT_TXTIME_LEAD_US, MAX_REPLAY_LOOPS, MAX_REPLAY_WINDOW_MIB,
    MAX_TXTIME_LEAD_US,
};

use serde::Deserialize;

/// Index of a memory region in [`Config::memory_regions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RegionId(pub usize);

/// Index of an interface in [`Config::interfaces`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InterfaceId(pub usize);

/// The board the appliance runs on (`platform` key): `host` (any Linux machine, no board
/// facts) or one of the boards of `rtdaq_platform::board::BOARDS` by its name (`igx-orin`,
/// `igx-thor`, `dgx-spark`); the name is also the `platform-*` cargo feature's suffix. The
/// boards come from that one table, so a new board is not listed here again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Platform(&'static str);

/// `host` and the boards.
const PLATFORMS: usize = rtdaq_platform::board::BOARDS.len() + 1;

impl Platform {
    /// A development or CI machine (`host`): no board-specific checks.
    pub const HOST: Platform = Platform("host");

    /// Every platform: `host`, then the boards in the table's order.
    pub const ALL: [Platform; PLATFORMS] = {
        let mut all = [Platform::HOST; PLATFORMS];
        let mut i = 0;
        while i < rtdaq_platform::board::BOARDS.len() {
            all[i + 1] = Platform(rtdaq_platform::board::BOARDS[i].name);
            i += 1;
        }
        all
    };

    /// Their names, as a config spells them.
    const NAMES: [&'static str; PLATFORMS] = {
        let mut names = [""; PLATFORMS];
        let mut i = 0;
        while i < PLATFORMS {
            names[i] = Platform::ALL[i].0;
            i += 1;
        }
        names
    };

    /// The platform called `name` (`"igx-thor"`), if there is one.
    pub fn from_name(name: &str) -> Option<Platform> {
        Self::ALL.into_iter().find(|p| p.0 == name)
    }

    /// The config spelling (`"host"`, `"igx-orin"`, ...), also the cargo feature suffix.
    pub fn as_str(self) -> &'static str {
        self.0
    }

    /// The board's facts (cores, isolated cores, NICs, GPU kind, tuning targets) from the one
    /// table in `rtdaq_platform::board`, or `None` for `host`, which knows no board.
    pub fn board(self) -> Option<&'static rtdaq_platform::board::BoardFacts> {
        rtdaq_platform::board::by_name(self.as_str())
    }

    /// Number of CPU cores (numbered `0..n`), or `None` when unknown (`host`).
    pub fn cpu_count(self) -> Option<u32> {
        self.board().map(|b| b.cpus)
    }

    /// Installed memory in bytes, or `None` when unknown (`host`).
    pub fn memory_bytes(self) -> Option<u64> {
        self.board().map(|b| b.memory_bytes)
    }

    /// Number of NUMA nodes, or `None` when unknown (`host`). The boards have one.
    pub fn numa_nodes(self) -> Option<u32> {
        self.board().map(|b| b.numa_nodes)
    }
}

impl<'de> Deserialize<'de> for Platform {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Platform::from_name(&name)
            .ok_or_else(|| serde::de::Error::unknown_variant(&name, &Platform::NAMES))
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A validated deployment config. Build one with [`load_str`](crate::load_str) or
/// [`load_file`](crate::load_file).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Appliance name (`name`).
    pub name: String,
    /// Board (`platform`).
    pub platform: Platform,
    /// Free text (`description`).
    pub description: Option<String>,
    /// Packet engine and its settings (`[engine]`).
    pub engine: Engine,
    /// Memory regions, in file order (`[[memory_regions]]`).
    pub memory_regions: Vec<MemoryRegion>,
    /// Interfaces with their queues, in file order (`[[interfaces]]`).
    pub interfaces: Vec<Interface>,
    /// Flow rules, in file order (`[[flows]]`); first match wins per interface.
    pub flows: Vec<Flow>,
    /// GPU stages, in file order (`[[gpu_stages]]`).
    pub gpu_stages: Vec<GpuStage>,
    /// Recorders, in file order (`[[recorders]]`).
    pub recorders: Vec<Recorder>,
    /// Egress sinks, in file order (`[[egress]]`).
    pub egress: Vec<Egress>,
    /// PSRDADA rings, in file order (`[[dada_rings]]`).
    pub dada_rings: Vec<DadaRing>,
    /// Triggered dumps, in file order (`[[dumps]]`).
    pub dumps: Vec<Dump>,
    /// The PTP check of the clock (`[time]`), if any.
    pub time: Option<TimeSync>,
    /// Traffic generator (`[generator]`).
    pub generator: Option<Generator>,
    /// Run parameters (`[run]`).
    pub run: Run,
    /// Real-time policy (`[rt]`).
    pub rt: Rt,
}

/// One flow rule bound to an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// The interface whose RX traffic it classifies.
    pub interface: InterfaceId,
    /// The rule, with queue ids already translated to queue indices (`QueueId(i)` is
    /// `interfaces[..].rx_queues[i]`).
    pub rule: rtdaq_core::flow::FlowRule,
}

impl Config {
    /// Appliance name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Board the config is for.
    pub fn platform(&self) -> Platform {
        self.platform
    }

    /// What the config's engine can do.
    pub fn engine_caps(&self) -> Capabilities {
        self.engine.caps()
    }

    /// Packet engine the config is for (the binary must be built with `engine-<kind>`).
    pub fn engine_kind(&self) -> EngineKind {
        self.engine.kind()
    }

    /// Index of the interface with this name.
    pub fn interface_by_name(&self, name: &str) -> Option<InterfaceId> {
        self.interfaces
            .iter()
            .position(|i| i.name == name)
            .map(InterfaceId)
    }

    /// Index of the memory region with this name.
    pub fn region_by_name(&self, name: &str) -> Option<RegionId> {
        self.memory_regions
            .iter()
            .position(|r| r.name == name)
            .map(RegionId)
    }

    /// True when the config needs a binary built with the `gpu` feature: a GPU stage or a
    /// `host_pinned` / `device` memory region.
    pub fn uses_gpu(&self) -> bool {
        !self.gpu_stages.is_empty() || self.memory_regions.iter().any(|r| r.kind.is_gpu())
    }

    /// True when a queue writes a PSRDADA ring (the binary's `dada` feature).
    pub fn uses_dada(&self) -> bool {
        !self.dada_rings.is_empty()
    }

    /// True when an egress sink sends over UCX (the binary's `ucx` feature).
    pub fn uses_ucx(&self) -> bool {
        self.egress
            .iter()
            .any(|e| e.protocol == EgressProtocol::Ucx)
    }

    /// The memory region behind an id.
    ///
    /// # Panics
    /// If `id` did not come from this config.
    pub fn region(&self, id: RegionId) -> &MemoryRegion {
        &self.memory_regions[id.0]
    }
}
