//! The stream format of an interface (`[interfaces.format]`): what its RX queues expect in
//! each payload and what a generator on it sends.

use rtdaq_core::format::{CounterFormat, Flavour};

/// `interfaces[].format`; see `docs/formats.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamFormat {
    /// rtdaq's own 32-byte sequence header (`kind = "rtdaq"`, the default).
    #[default]
    Rtdaq,
    /// A sequence counter at an offset (`kind = "counter"`).
    Counter(CounterFormat),
    /// VDIF frames, one per datagram (`kind = "vdif"`).
    Vdif(VdifParams),
    /// SPEAD packets of heaps (`kind = "spead"`).
    Spead(SpeadParams),
    /// CODIF (v3) frames, one per datagram (`kind = "codif"`).
    Codif(CodifParams),
    /// eCPRI messages: a sequence id per PC_ID / RTC_ID (`kind = "ecpri"`), over UDP or,
    /// on a raw engine, over Ethernet (EtherType 0xAEFE).
    Ecpri,
}

impl StreamFormat {
    /// The config spelling of the kind.
    pub const fn kind(&self) -> &'static str {
        match self {
            StreamFormat::Rtdaq => "rtdaq",
            StreamFormat::Counter(_) => "counter",
            StreamFormat::Vdif(_) => "vdif",
            StreamFormat::Spead(_) => "spead",
            StreamFormat::Codif(_) => "codif",
            StreamFormat::Ecpri => "ecpri",
        }
    }

    /// Smallest payload the format can describe (the generator's `payload_size` floor).
    pub const fn min_payload(&self) -> u32 {
        match self {
            StreamFormat::Rtdaq => 32,
            StreamFormat::Counter(c) => {
                let a = c.counter.end();
                let b = match &c.stream {
                    Some(s) => s.end(),
                    None => 0,
                };
                (if a > b { a } else { b }) as u32
            }
            StreamFormat::Vdif(_) => 40,
            // Header, the 6 item pointers of a heap's first packet, one payload byte.
            StreamFormat::Spead(_) => SPEAD_FIRST_OVERHEAD + 1,
            // The 64-byte header and 8 data bytes.
            StreamFormat::Codif(_) => 72,
            // Common header, PC_ID, SEQ_ID, E bit / subsequence id.
            StreamFormat::Ecpri => 8,
        }
    }
}

/// `kind = "vdif"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VdifParams {
    /// Data frames per second per thread (`frames_per_second`); `None`: the receiver learns
    /// it at the first second boundary (the generator needs it).
    pub frames_per_second: Option<u32>,
    /// Station id the generator writes (`station`: a number or two ASCII characters).
    pub station: u16,
    /// Bits per sample the generator writes (`bits_per_sample`, 1..=32).
    pub bits_per_sample: u8,
    /// log2 of the channel count the generator writes (`log2_channels`, 0..=31).
    pub log2_channels: u8,
}

/// Bytes before the payload in the first packet of a heap rtdaq's generator sends: the
/// SPEAD header and 6 item pointers (heap counter, heap size, heap offset, payload length,
/// timestamp, data).
pub const SPEAD_FIRST_OVERHEAD: u32 = 8 + 6 * 8;
/// Bytes before the payload in the other packets: header and 4 item pointers.
pub const SPEAD_OVERHEAD: u32 = 8 + 4 * 8;

/// `kind = "spead"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpeadParams {
    /// `flavour = "64-48"` or `"64-40"`: packets of another flavour are `foreign`; `None`
    /// (absent): either is accepted, and the generator sends 64-48.
    pub flavour: Option<Flavour>,
    /// `heap_step`: the heap counter's step within one stream (≥ 1); the stream of a heap
    /// is `heap counter % heap_step`, so senders that interleave their counters are
    /// tracked one by one.
    pub heap_step: u32,
    /// `heap_bytes`: payload bytes of each heap the generator sends (its data item).
    pub heap_bytes: u32,
}

/// `kind = "codif"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodifParams {
    /// Data frames per period per thread (`frames_per_period`); `None`: the receiver learns
    /// it at the first period boundary (the generator needs it).
    pub frames_per_period: Option<u32>,
    /// Generator: the period in seconds (`period`, 1..=65535).
    pub period: u16,
    /// Generator: the station id (`station`).
    pub station: u16,
    /// Generator: bits per sample (`bits_per_sample`, 1..=32).
    pub bits_per_sample: u8,
    /// Generator: channels (`channels`, 1..=65535).
    pub channels: u16,
}
