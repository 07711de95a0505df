//! The small traits between the engines, the platforms and the runtime.
//!
//! Static dispatch only: the appliance names one concrete engine and one platform type,
//! chosen by cargo features. Optional abilities (flow steering in hardware, hardware
//! timestamps, pacing) are separate traits an engine implements or does not; there are no
//! "not supported" stubs.

use crate::counters::QueueCounters;
use crate::meta::PacketMeta;
use crate::pool::BufferPool;

/// Where the bytes of one segment live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment<'b> {
    /// CPU-addressable memory.
    Host(&'b [u8]),
    /// GPU memory: not dereferenceable by the CPU.
    Device {
        /// Device address.
        ptr: u64,
        /// Bytes.
        len: u32,
    },
}

impl Segment<'_> {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Segment::Host(b) => b.len(),
            Segment::Device { len, .. } => *len as usize,
        }
    }
    /// True when the segment holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A received burst. Dropping it returns every buffer it holds; freeing cannot be forgotten.
pub trait RxBurst {
    /// Packets in the burst.
    fn len(&self) -> usize;
    /// True when the burst holds no packet.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Number of segments of packet `pkt` (1 without header-data split).
    fn segments(&self, pkt: usize) -> usize;
    /// Segment `seg` of packet `pkt`. Panics when out of range (a caller bug, not input).
    fn segment(&self, pkt: usize, seg: usize) -> Segment<'_>;
    /// True when segment 0 of packet `pkt` lies in device (GPU) memory: what
    /// [`segment`](Self::segment) would say, for a consumer that only counts. An engine that
    /// knows it without building the segment (a queue's memory is one kind) overrides it.
    /// Panics when out of range.
    fn head_in_device(&self, pkt: usize) -> bool {
        matches!(self.segment(pkt, 0), Segment::Device { .. })
    }
    /// Metadata of packet `pkt`.
    fn meta(&self, pkt: usize) -> PacketMeta;
    /// Returns every buffer to its pool and empties the burst (it is reused in place).
    fn clear(&mut self);
}

/// One receive queue, owned by exactly one thread (its pinned I/O thread).
///
/// Bursts are filled **in place**: the runtime keeps a fixed set of preallocated bursts
/// (in a [`SlotRing`](crate::slot_ring::SlotRing) between the I/O and the consumer thread) and
/// hands one to [`poll`](Self::poll); nothing is moved or allocated per burst.
pub trait RxQueue: Send {
    /// The burst type this queue fills. Dropping or clearing it returns its buffers.
    type Burst: RxBurst + Send;
    /// An empty burst able to hold this queue's batch size. Cold path (may allocate).
    fn new_burst(&self) -> Self::Burst;
    /// Appends ready packets to `burst` (at most its free capacity) and returns how many.
    /// Never allocates or logs; drops are counted in the queue's counters. A queue configured
    /// to sleep (not busy-poll) may wait up to its `timeout_us` for the first packet.
    fn poll(&mut self, burst: &mut Self::Burst) -> usize;
    /// True when packets this queue is not polled for wait in a buffer of its own (a kernel
    /// socket buffer; a TCP window, which stops the sender) that counts per packet whatever
    /// overflows it. While the ring to its consumer is full the RX thread then stops polling,
    /// and that buffer absorbs the consumer's stall. False (the default): the RX thread keeps
    /// draining the queue and counts the packets it cannot hand over as `ring_full`, because
    /// a NIC ring that overflowed would count them, if at all, per port. Read once per run.
    fn holds_backlog(&self) -> bool {
        false
    }
}

/// A transmit burst being filled.
pub trait TxBurst {
    /// Packets in the burst.
    fn len(&self) -> usize;
    /// True when the burst holds no packet.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Writable buffer of packet `i` (its full capacity); `None` when the buffer is not
    /// CPU-accessible (GPU memory).
    fn packet_mut(&mut self, i: usize) -> Option<&mut [u8]>;
    /// Sets the length of packet `i`. Panics above the buffer capacity (a caller bug).
    fn set_len(&mut self, i: usize, len: usize);
}

/// One transmit queue, owned by exactly one thread.
pub trait TxQueue: Send {
    /// The burst type this queue sends from.
    type Burst: TxBurst + Send;
    /// An empty burst able to hold this queue's batch size. Cold path (may allocate).
    fn new_burst(&self) -> Self::Burst;
    /// Adds up to `n` empty packet buffers to `burst`; returns how many it now holds. Fewer
    /// than asked means the pool is short (back-pressure). Never blocks, never allocates.
    fn reserve(&mut self, burst: &mut Self::Burst, n: usize) -> usize;
    /// Sends every packet of `burst` and empties it (buffers return to their pool). Returns
    /// how many were accepted; the rest are counted as drops with their reason.
    fn send(&mut self, burst: &mut Self::Burst) -> usize;
}

/// The clock a launch time is read on ([`TimedTx`]): the clock the kernel's queueing
/// discipline compares it with (`fq`: `CLOCK_MONOTONIC`; `etf`: its `clockid`, usually
/// `CLOCK_TAI`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchClock {
    /// `CLOCK_MONOTONIC`.
    Monotonic,
    /// `CLOCK_TAI`.
    Tai,
    /// `CLOCK_REALTIME`.
    Realtime,
    /// `CLOCK_BOOTTIME`.
    Boottime,
}

impl LaunchClock {
    /// The name of the clock as `clock_gettime` knows it (`CLOCK_TAI`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            LaunchClock::Monotonic => "CLOCK_MONOTONIC",
            LaunchClock::Tai => "CLOCK_TAI",
            LaunchClock::Realtime => "CLOCK_REALTIME",
            LaunchClock::Boottime => "CLOCK_BOOTTIME",
        }
    }

    /// The Linux `clockid_t` (`CLOCK_REALTIME` 0, `CLOCK_MONOTONIC` 1, `CLOCK_BOOTTIME` 7,
    /// `CLOCK_TAI` 11: the kernel's ABI).
    pub const fn linux_clockid(self) -> i32 {
        match self {
            LaunchClock::Realtime => 0,
            LaunchClock::Monotonic => 1,
            LaunchClock::Boottime => 7,
            LaunchClock::Tai => 11,
        }
    }

    /// The clock of a Linux `clockid_t`; `None` for the others (CPU-time clocks, ...).
    pub const fn from_linux_clockid(id: i32) -> Option<LaunchClock> {
        match id {
            0 => Some(LaunchClock::Realtime),
            1 => Some(LaunchClock::Monotonic),
            7 => Some(LaunchClock::Boottime),
            11 => Some(LaunchClock::Tai),
            _ => None,
        }
    }
}

/// Optional ability of a TX queue: each packet of a burst leaves at its own **launch time**,
/// held until then by the kernel (`SO_TXTIME` with the `etf` or `fq` queueing discipline) or
/// the NIC, instead of when the sender hands it over. A sender that knows when each packet
/// is due stamps it ahead of time and sleeps in between: its own wake-up latency no longer
/// moves the packets. Queues that cannot do it do not implement the trait (the runtime asks
/// the engine with [`Engine::timed_tx`]).
pub trait TimedTx: TxQueue {
    /// The clock of launch times when the queue was opened for timed sends (the config
    /// asked for it and the host can do it); `None` otherwise: [`send_at`](Self::send_at)
    /// then sends at once, like [`TxQueue::send`]. Cold path.
    fn launch_clock(&self) -> Option<LaunchClock>;
    /// [`TxQueue::send`] with packet `i` leaving at `at_ns[i]` (ns on
    /// [`launch_clock`](Self::launch_clock); `at_ns` holds at least the burst's length,
    /// non-decreasing, all in the future). Packets the kernel refused or could not send in
    /// time, when it says so, are counted as `kernel` drops when the queue learns of it (a
    /// later call; one with an empty burst only collects what the kernel said). Never
    /// allocates, never blocks longer than `send` does.
    fn send_at(&mut self, burst: &mut Self::Burst, at_ns: &[u64]) -> usize;
    /// At the end of timed sends, once the last launch time has passed: waits up to
    /// `wait_ns` for the kernel to let go of every packet the queue handed over, reads its
    /// drop reports one last time, and counts each packet still held then (by the qdisc or
    /// the device: it leaves late, or never) as a `kernel` drop. Returns that count (0
    /// without launch times armed). Cold path: may sleep up to `wait_ns`.
    fn settle(&mut self, wait_ns: u64) -> u64;
}

/// Optional ability of a TX queue: the **NIC paces it**, at a rate the queue is given (a
/// per-queue rate limit in hardware: DPDK's `rte_eth_set_queue_rate_limit`), spacing the
/// frames of a burst instead of sending them back to back. The sender still keeps the
/// average rate itself; queues whose device cannot do it do not implement the trait, and a
/// device that refuses says why (the runtime asks the engine with
/// [`Engine::rate_limit_tx`]).
pub trait RateLimitTx: TxQueue {
    /// Limits the queue to `mbps` megabits per second of frames (what of a frame counts is
    /// the device's; pass the frame bits plus what it may add). Cold path (at start).
    ///
    /// # Errors
    /// The `errno` the device answered (`ENOTSUP` where it has no per-queue rate limit,
    /// `EINVAL` for a rate it cannot take).
    fn limit_rate(&mut self, mbps: u32) -> Result<(), i32>;
}

/// What the runtime hands an engine for one queue: where its buffers come from and where it
/// counts. Everything is preallocated before the engine opens.
#[derive(Debug, Clone, Copy)]
pub struct QueueResources<'a> {
    /// Index of the queue's interface in the deployment config.
    pub interface: usize,
    /// Index of the queue within its interface and direction (config order).
    pub queue: usize,
    /// One pool per segment: 1 without header-data split, 2+ with it (header pool first).
    pub pools: &'a [&'a BufferPool<'a>],
    /// The queue's counters; written only by the thread that owns the queue.
    pub counters: &'a QueueCounters,
    /// What the queue's stages ask of the engine besides the packets (RX; TX: none).
    pub wants: RxWants,
}

/// What the stages of an RX queue ask its engine to deliver besides each packet's bytes,
/// length and receive time: the queue's plan, so an engine needs to know nothing about the
/// stages. An engine fills what it can; a request that means nothing to it (a raw engine
/// delivers whole frames, headers included) is ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxWants {
    /// Each packet's source IPv4 address and port in its [`PacketMeta`] (a pcap recorder of
    /// a socket queue rebuilds the IPv4/UDP headers from them).
    pub source_addresses: bool,
}

/// Arguments of [`Engine::open`]: the validated deployment config (`C` is
/// `rtdaq_config::Config` in the appliance) and the per-queue resources, in config order.
#[derive(Debug, Clone, Copy)]
pub struct EngineArgs<'a, C> {
    /// The deployment config.
    pub config: &'a C,
    /// RX queues, interface by interface, queue by queue.
    pub rx: &'a [QueueResources<'a>],
    /// TX queues, in the same order.
    pub tx: &'a [QueueResources<'a>],
}

/// A packet engine (sockets, AF_PACKET, AF_XDP, DPDK, ibverbs). Exactly one per binary.
///
/// `'a` is the lifetime of the preallocated memory and counters the runtime owns (the run).
pub trait Engine<'a>: Sized {
    /// Short name, as in the `engine-*` cargo feature (`"socket"`, `"dpdk"`, ...).
    const NAME: &'static str;
    /// `true` for raw engines: RX segments start at the Ethernet header (whole frames) and TX
    /// packets must be whole frames (the runtime's generator builds the headers). `false`
    /// (socket engine): RX segments and TX packets are UDP payloads / TCP records.
    const FRAMES: bool;
    /// What [`open`](Self::open) needs (in the appliance: `EngineArgs<'a, rtdaq_config::Config>`).
    type Config;
    /// Receive queue type.
    type Rx: RxQueue + 'a;
    /// Transmit queue type.
    type Tx: TxQueue + 'a;
    /// The engine's error type (a `thiserror` enum in the engine crate).
    type Error: core::error::Error;
    /// Opens the engine: registers memory, opens sockets/devices, creates queues. Cold path.
    fn open(cfg: Self::Config) -> Result<Self, Self::Error>;
    /// The MAC address interface `interface` (config index) sends from, when the engine
    /// knows it itself (a DPDK port has no Linux network device to read it from). The default,
    /// `None`, lets the runtime read the Linux network device's address. Cold path.
    fn interface_mac(&self, interface: usize) -> Option<[u8; 6]> {
        let _ = interface;
        None
    }
    /// The [`TimedTx`] ability of this engine's TX queues: `Some(queue)` where the engine
    /// implements it, `None` (the default) elsewhere; the runtime's generator asks before
    /// it sends with launch times. Cold path (called at start, before the queue's thread
    /// loops).
    fn timed_tx(
        tx: &mut Self::Tx,
    ) -> Option<&mut dyn TimedTx<Burst = <Self::Tx as TxQueue>::Burst>> {
        let _ = tx;
        None
    }

    /// The [`RateLimitTx`] ability of this engine's TX queues: `Some(queue)` where the
    /// engine implements it, `None` (the default) elsewhere; the runtime asks before it
    /// gives a generator's queue to the NIC to pace (`generator.pacing = "nic"`). Cold path.
    fn rate_limit_tx(
        tx: &mut Self::Tx,
    ) -> Option<&mut dyn RateLimitTx<Burst = <Self::Tx as TxQueue>::Burst>> {
        let _ = tx;
        None
    }
    /// Consumes the engine and hands out its queues in config order (interface by interface,
    /// queue by queue), each to be moved to its own thread. Cold path.
    fn split(self, rx: &mut dyn FnMut(Self::Rx), tx: &mut dyn FnMut(Self::Tx));
}

/// Memory kinds, as in the deployment config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemKind {
    /// Ordinary pages, aligned and locked.
    Host,
    /// Hugepages (2 MB or 1 GB).
    Huge,
    /// CUDA pinned host memory.
    HostPinned,
    /// GPU device memory.
    Device,
}

/// How a NIC reaches a memory region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaTarget {
    /// A CPU virtual address.
    VirtAddr(*mut u8),
    /// A DMA-BUF file descriptor and offset (GPU memory).
    DmaBuf {
        /// File descriptor.
        fd: i32,
        /// Offset into the buffer.
        offset: u64,
    },
}

/// A preallocated memory region.
///
/// # Safety
/// Implementors guarantee that [`dma`](Self::dma) stays valid, pinned and unmoved for as
/// long as `self` lives (a NIC may write through it at any time).
#[allow(unsafe_code)]
pub unsafe trait MemoryRegion: Send + Sync {
    /// Kind of memory.
    fn kind(&self) -> MemKind;
    /// Length in bytes.
    fn len(&self) -> usize;
    /// True when the region is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// How a device reaches it.
    fn dma(&self) -> DmaTarget;
}

/// How a board moves NIC data into GPU-visible memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuDirect {
    /// The NIC writes GPU memory exported as DMA-BUF.
    DmaBuf,
    /// The NIC writes GPU memory through nvidia-peermem.
    PeerMem,
    /// Integrated GPU or no GPUDirect: receive into pinned host memory, then copy/map.
    HostStaging,
    /// No GPU on this board.
    None,
}

/// A board (hardware platform). Exactly one per binary.
pub trait Platform {
    /// Short name, as in the `platform-*` cargo feature (`"host"`, `"igx-thor"`, ...).
    const NAME: &'static str;
    /// The board's GPU data path.
    const GPU_DIRECT: GpuDirect;
}

// --- Optional ability: per-port counters and state for the report (std only). ---

/// Link state of a port when the engine read it.
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkInfo {
    /// Link up.
    pub up: bool,
    /// Speed in Mb/s (0 when unknown).
    pub speed_mbps: u32,
    /// Full duplex.
    pub full_duplex: bool,
}

/// Counters and state of one port (a NIC port or a virtual device) of an engine, read
/// after the run. Hardware/driver counters, not the queues' own: they include what the
/// queues never saw (`imissed`: frames the NIC dropped for lack of descriptors).
#[cfg(feature = "std")]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortStats {
    /// Index of the port's interface in the deployment config.
    pub interface: usize,
    /// The engine's name for the port (a DPDK port name, a PCI address, ...).
    pub port: String,
    /// Its driver (`net_ring`, `mlx5_pci`, ...).
    pub driver: String,
    /// MAC address, when known.
    pub mac: Option<[u8; 6]>,
    /// Link state, when the driver reports one.
    pub link: Option<LinkInfo>,
    /// Packets received.
    pub ipackets: u64,
    /// Packets sent.
    pub opackets: u64,
    /// Bytes received.
    pub ibytes: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// Received packets dropped by the hardware (no free descriptor).
    pub imissed: u64,
    /// Receive errors.
    pub ierrors: u64,
    /// Transmit errors.
    pub oerrors: u64,
    /// Receive buffer allocation failures.
    pub rx_nombuf: u64,
    /// The driver's extended counters that are not zero, by name, in its order.
    pub xstats: std::vec::Vec<(std::string::String, u64)>,
}

/// Optional ability of an engine with ports of its own (DPDK): a handle, taken before
/// [`Engine::split`] and kept past the run, that reads every port's counters for the report.
/// Engines without one simply do not implement it. Cold path.
#[cfg(feature = "std")]
pub trait EngineStats: Send {
    /// Every port's counters and state now, in interface order.
    fn port_stats(&self) -> std::vec::Vec<PortStats>;
}
