//! Interfaces (`[[interfaces]]`), their addresses and their RX/TX queues.

use super::RegionId;
use rtdaq_core::flow::DefaultAction;
use serde::Deserialize;
use std::fmt;
use std::net::Ipv4Addr;

/// A PCI address `domain:bus:device.function`, e.g. `0000:17:00.0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddress {
    /// PCI domain (segment).
    pub domain: u16,
    /// Bus number.
    pub bus: u8,
    /// Device number, 0..=0x1f.
    pub device: u8,
    /// Function number, 0..=7.
    pub function: u8,
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

/// Socket transport of a [`SocketUri`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// `udp://`
    Udp,
    /// `tcp://`
    Tcp,
    /// `rdma://`: an RDMA CM endpoint (engine `ibverbs`, `mode = "roce"`).
    Rdma,
}

impl Transport {
    /// The URI scheme.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
            Transport::Rdma => "rdma",
        }
    }
}

/// A socket endpoint `udp://a.b.c.d:port` or `tcp://a.b.c.d:port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SocketUri {
    /// Transport.
    pub transport: Transport,
    /// IPv4 address.
    pub ip: Ipv4Addr,
    /// Port (non-zero).
    pub port: u16,
}

impl fmt::Display for SocketUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}:{}", self.transport.as_str(), self.ip, self.port)
    }
}

/// Where an interface is (`interfaces[].address`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Address {
    /// A Linux network device name (`eth0`, `enp23s0f0np0`); raw engines.
    Netdev(String),
    /// A PCI address; raw engines.
    Pci(PciAddress),
    /// A socket endpoint; socket engine.
    Socket(SocketUri),
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Netdev(n) => f.write_str(n),
            Address::Pci(p) => p.fmt(f),
            Address::Socket(u) => u.fmt(f),
        }
    }
}

/// TCP role of a socket interface (`interfaces[].role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TcpRole {
    /// Listen on the address and accept `connections` peers.
    Server,
    /// Open `connections` connections to the address.
    Client,
}

impl TcpRole {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TcpRole::Server => "server",
            TcpRole::Client => "client",
        }
    }
}

/// How an RX queue delivers bursts (`rx_queues[].mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RxMode {
    /// The I/O thread hands bursts over an SPSC ring to a consumer thread on `consumer_core`.
    Indirect {
        /// Core of the consumer thread.
        consumer_core: u32,
    },
    /// The consumer runs inside the I/O thread.
    Direct,
}

/// One RX queue: an I/O thread pinned to `cpu_core` at `SCHED_FIFO` `rt_priority`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RxQueue {
    /// Queue id, unique per interface (flows and `default_action` refer to it).
    pub id: u16,
    /// Core of the I/O thread.
    pub cpu_core: u32,
    /// `SCHED_FIFO` priority, 1..=99.
    pub rt_priority: u8,
    /// Most packets per burst.
    pub batch_size: u32,
    /// Longest wait for a full burst before handing over a partial one, in µs (0 = never wait).
    pub timeout_us: u32,
    /// Ring depth in packets (power of two).
    pub ring_depth: u32,
    /// Regions receiving the segments of each packet (header first when split).
    pub memory_regions: Vec<RegionId>,
    /// Header-data split: header bytes placed in `memory_regions[0]`.
    pub hds_split: Option<u32>,
    /// Delivery mode.
    pub mode: RxMode,
    /// Busy-poll (the I/O thread, and the consumer thread in indirect mode, never sleep).
    pub busy_poll: bool,
    /// GPU stage that consumes this queue's packets (`gpu_stage`), if any.
    pub gpu_stage: Option<super::GpuStageId>,
    /// Recorders this queue's `record` stage writes to (`record`), in order.
    pub record: Vec<super::RecorderId>,
    /// Egress sinks this queue's `egress` stage forwards to (`egress`), in order.
    pub egress: Vec<super::EgressId>,
    /// The PSRDADA ring this queue's `dada_ring` stage writes (`dada_ring`), if any.
    pub dada_ring: Option<super::DadaRingId>,
    /// The triggered dump whose history this queue's `dump` stage keeps (`dump`), if any.
    pub dump: Option<super::DumpId>,
}

/// One TX queue: an I/O thread pinned to `cpu_core` at `SCHED_FIFO` `rt_priority`.
#[derive(Debug, Clone, PartialEq)]
pub struct TxQueue {
    /// Queue id, unique per interface (the generator refers to it).
    pub id: u16,
    /// Core of the I/O thread.
    pub cpu_core: u32,
    /// `SCHED_FIFO` priority, 1..=99.
    pub rt_priority: u8,
    /// Most packets per burst.
    pub batch_size: u32,
    /// Ring depth in packets (power of two).
    pub ring_depth: u32,
    /// Regions the segments of each packet come from (gathered in order).
    pub memory_regions: Vec<RegionId>,
    /// Rate limit in Gb/s of Ethernet frame bytes; `None` = unpaced.
    pub pacing_gbps: Option<f64>,
    /// Busy-poll (the I/O thread never sleeps).
    pub busy_poll: bool,
}

/// One interface: an address plus its queues.
#[derive(Debug, Clone, PartialEq)]
pub struct Interface {
    /// Unique name.
    pub name: String,
    /// Where it is.
    pub address: Address,
    /// Link MTU (IP packet bytes).
    pub mtu: u32,
    /// TCP role (`Some` exactly for `tcp://` addresses).
    pub role: Option<TcpRole>,
    /// TCP connections accepted (server) or opened (client); 0 for UDP and raw interfaces.
    pub connections: u32,
    /// Socket engine: largest message the interface receives, if set explicitly.
    pub max_message_size: Option<u32>,
    /// RX queues in file order (index = `QueueId`).
    pub rx_queues: Vec<RxQueue>,
    /// TX queues in file order (index = `QueueId`).
    pub tx_queues: Vec<TxQueue>,
    /// What happens to RX traffic no flow matched (queue index, or drop).
    pub default_action: DefaultAction,
    /// The stream format of its payloads (`[interfaces.format]`): what its RX queues track
    /// and what a generator on it sends.
    pub format: super::StreamFormat,
    /// A `udp://` address in 224.0.0.0/4: the group and how to join and send to it.
    pub multicast: Option<Multicast>,
    /// Raw engines: the IPv4 multicast groups whose kernel membership the run holds
    /// (`multicast_groups`), so that the NIC's filter and the switches (IGMP) deliver them.
    pub raw_multicast: Option<RawMulticast>,
    /// The pause (802.3x flow control) setting this interface's NIC must have
    /// (`flow_control`); `rtdaq doctor` checks it. `None`: not stated (doctor warns when
    /// flow control is on).
    pub flow_control: Option<FlowControl>,
    /// Streams each RX queue tracks (`max_streams`, default [`DEFAULT_MAX_STREAMS`]): the
    /// size of its validator's preallocated stream table. Packets of streams beyond it are
    /// counted (`streams_overflow`) and count as lost: nothing says whether they are whole.
    pub max_streams: u32,
}

/// Default `interfaces[].max_streams`.
pub const DEFAULT_MAX_STREAMS: u32 = 64;
/// Largest `interfaces[].max_streams`.
pub const MAX_STREAMS_LIMIT: u32 = 4096;

/// The NIC's pause setting a deployment expects (`interfaces[].flow_control`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlowControl {
    /// Neither obeys nor sends pause frames: a receiver that falls behind drops (and counts)
    /// instead of throttling the sender.
    Off,
    /// Obeys received pause frames only (its transmit may be throttled).
    Rx,
    /// Sends pause frames only (throttles the sender when its buffer fills).
    Tx,
    /// Both.
    On,
}

impl FlowControl {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FlowControl::Off => "off",
            FlowControl::Rx => "rx",
            FlowControl::Tx => "tx",
            FlowControl::On => "on",
        }
    }

    /// `(rx pause, tx pause)` as `ethtool -a` shows them.
    pub fn rx_tx(self) -> (bool, bool) {
        match self {
            FlowControl::Off => (false, false),
            FlowControl::Rx => (true, false),
            FlowControl::Tx => (false, true),
            FlowControl::On => (true, true),
        }
    }
}

/// `multicast_groups` of a raw-engine interface (netdev or PCI address).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RawMulticast {
    /// The groups (224.0.0.0/4, distinct).
    pub groups: Vec<Ipv4Addr>,
    /// Local IPv4 address of the netdev that joins (`multicast_interface`); `0.0.0.0`: the
    /// kernel picks the interface by route.
    pub interface: Ipv4Addr,
}

/// An IPv4 multicast group of a socket UDP interface (`address = "udp://239.x.y.z:port"`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Multicast {
    /// The group (the address's IP).
    pub group: Ipv4Addr,
    /// Local IPv4 address of the network interface that joins (RX) and sends (TX)
    /// (`multicast_interface`); `0.0.0.0`: the kernel picks it by route.
    pub interface: Ipv4Addr,
    /// Source-specific multicast: only these senders (`multicast_sources`); empty: any
    /// source.
    pub sources: Vec<Ipv4Addr>,
    /// TTL of sent datagrams (`multicast_ttl`, default 1: this link only).
    pub ttl: u8,
    /// Sent datagrams loop back to receivers on this host (`multicast_loop`, default true).
    pub loopback: bool,
}
