//! Recording sinks (`[[recorders]]`): what a queue's `record` stage writes, where, and how.

/// Index of a recorder in [`Config::recorders`](crate::Config::recorders).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecorderId(pub usize);

/// File format of a recorder (`format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordFormat {
    /// Classic pcap, nanosecond timestamps (magic `a1b23c4d`), link type Ethernet: raw
    /// engines write their frames; the socket engine writes each datagram behind IPv4/UDP
    /// headers built from its real source and destination.
    Pcap,
    /// The UDP payloads (raw engines: the UDP payload of each frame) back to back, less the
    /// first `strip_bytes` of each.
    Raw,
    /// [`Raw`](Self::Raw) behind a 4096-byte PSRDADA ASCII header.
    Dada,
}

impl RecordFormat {
    /// Every format, in the order error messages list them.
    pub const ALL: [RecordFormat; 3] = [RecordFormat::Pcap, RecordFormat::Raw, RecordFormat::Dada];

    /// The format spelled `s` in a config.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == s)
    }

    /// What it holds, in a few words (error messages).
    pub fn what(self) -> &'static str {
        match self {
            RecordFormat::Pcap => "packets, for tcpdump/Wireshark",
            RecordFormat::Raw => "payloads back to back",
            RecordFormat::Dada => "payloads behind a PSRDADA header",
        }
    }

    /// Its records carry each packet's real sender (pcap rebuilds a socket datagram's
    /// IPv4/UDP headers): a socket engine must report source addresses.
    pub fn needs_source_address(self) -> bool {
        matches!(self, RecordFormat::Pcap)
    }

    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordFormat::Pcap => "pcap",
            RecordFormat::Raw => "raw",
            RecordFormat::Dada => "dada",
        }
    }

    /// Default file-name extension.
    pub fn extension(self) -> &'static str {
        match self {
            RecordFormat::Pcap => "pcap",
            RecordFormat::Raw => "raw",
            RecordFormat::Dada => "dada",
        }
    }
}

/// What a DADA header says about the samples (`[recorders.dada]`).
#[derive(Debug, Clone, PartialEq)]
pub struct DadaParams {
    /// Bits per sample (`NBIT`).
    pub nbit: u32,
    /// 1 = real, 2 = complex samples (`NDIM`).
    pub ndim: u32,
    /// Polarisations (`NPOL`).
    pub npol: u32,
    /// Channels (`NCHAN`).
    pub nchan: u32,
    /// Sample interval in µs (`TSAMP`).
    pub tsamp_us: f64,
    /// Centre frequency in MHz (`FREQ`), if known.
    pub freq_mhz: Option<f64>,
    /// Bandwidth in MHz (`BW`), if known.
    pub bw_mhz: Option<f64>,
    /// `SOURCE`.
    pub source: String,
    /// `TELESCOPE`.
    pub telescope: String,
    /// `INSTRUMENT`.
    pub instrument: String,
}

impl Default for DadaParams {
    fn default() -> Self {
        DadaParams {
            nbit: 8,
            ndim: 1,
            npol: 1,
            nchan: 1,
            tsamp_us: 1.0,
            freq_mhz: None,
            bw_mhz: None,
            source: "unset".into(),
            telescope: "unset".into(),
            instrument: "rtdaq".into(),
        }
    }
}

/// Where a recorder's writer thread runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterPlacement {
    /// Core it is pinned to.
    pub core: u32,
    /// `SCHED_FIFO` priority, `None` = the normal scheduler on that core.
    pub priority: Option<u8>,
}

/// One recorder (`[[recorders]]`). Every RX queue naming it gets its own files, buffers
/// and writer thread, or (`shared`) the queues of one interface share them.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorder {
    /// Unique name (queues refer to it in `record`).
    pub name: String,
    /// File format.
    pub format: RecordFormat,
    /// Output directory (`directory`, default `recordings`, relative to the working
    /// directory); `rtdaq run --output-dir DIR` replaces it.
    pub directory: String,
    /// File-name pattern with `{config}`, `{recorder}`, `{interface}`, `{queue}`,
    /// `{start}` (UTC start of the run, `20261201T125309Z`) and `{index}` (file number).
    pub file_name: String,
    /// Start a new file after this many bytes (`rotate_mib`), if set.
    pub rotate_bytes: Option<u64>,
    /// Start a new file after this many ns (`rotate_s`), if set.
    pub rotate_ns: Option<u64>,
    /// pcap: bytes kept of each packet (`snaplen`).
    pub snaplen: u32,
    /// raw/dada: bytes skipped at the start of each payload (`strip_bytes`, e.g. an
    /// instrument header).
    pub strip_bytes: u32,
    /// Bytes per buffer (`buffer_mib`).
    pub buffer_bytes: usize,
    /// Buffers between the consumer and the writer (`buffers`, power of two).
    pub buffers: u32,
    /// A partly filled buffer goes to the writer after this many ns (`flush_ms`).
    pub flush_ns: u64,
    /// Writer thread placement (`writer_core`, `writer_priority`), `None`: unpinned (any
    /// CPU), normal scheduler.
    pub writer: Option<WriterPlacement>,
    /// Write with `O_DIRECT` where the file system supports it (`direct_io`).
    pub direct_io: bool,
    /// One sink per interface for all its queues naming the recorder, packets in the order
    /// their consumers took them (`shared`); else one sink per queue.
    pub shared: bool,
    /// DADA header values (format `dada`).
    pub dada: DadaParams,
}

/// Placeholders a recorder's `file_name` may use.
pub const FILE_NAME_FIELDS: [&str; 6] =
    ["config", "recorder", "interface", "queue", "start", "index"];
