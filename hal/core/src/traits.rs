//! The small traits between the engines, the platforms and the runtime.
//!
//! Static dispatch only: the appliance names one concrete engine and one platform type,
//! chosen by cargo features. Optional abilities (flow steering in hardware, hardware
//! timestamps, pacing) are separate traits an engine implements or does not; there are no
//! "not supported" stubs.

use crate::meta::PacketMeta;
use crate::TxError;

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
    /// Metadata of packet `pkt`.
    fn meta(&self, pkt: usize) -> PacketMeta;
}

/// One receive queue, owned by exactly one thread.
pub trait RxQueue: Send {
    /// The burst type handed out by [`poll`](Self::poll).
    type Burst<'q>: RxBurst
    where
        Self: 'q;
    /// Returns a burst when one is ready. Never blocks, never allocates, never logs.
    fn poll(&mut self) -> Option<Self::Burst<'_>>;
}

/// A transmit burst being filled. Dropping it without [`send`](Self::send) cancels it.
pub trait TxBurst {
    /// Packets reserved.
    fn len(&self) -> usize;
    /// True when nothing was reserved.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Writable buffer of packet `i` (its full capacity).
    fn packet_mut(&mut self, i: usize) -> &mut [u8];
    /// Sets the length of packet `i` (at most the buffer capacity).
    fn set_len(&mut self, i: usize, len: usize);
    /// Hands the packets to the engine; returns how many were accepted.
    fn send(self) -> Result<usize, TxError>;
}

/// One transmit queue, owned by exactly one thread.
pub trait TxQueue: Send {
    /// The burst type handed out by [`reserve`](Self::reserve).
    type Burst<'q>: TxBurst
    where
        Self: 'q;
    /// Reserves `n` packet buffers. Never blocks, never allocates.
    fn reserve(&mut self, n: usize) -> Result<Self::Burst<'_>, TxError>;
}

/// A packet engine (sockets, AF_PACKET, AF_XDP, DPDK, ibverbs). Exactly one per binary.
pub trait Engine: Sized {
    /// Short name, as in the `engine-*` cargo feature (`"socket"`, `"dpdk"`, ...).
    const NAME: &'static str;
    /// The engine's own configuration (from the deployment config).
    type Config;
    /// Receive queue type.
    type Rx: RxQueue;
    /// Transmit queue type.
    type Tx: TxQueue;
    /// The engine's error type (a `thiserror` enum in the engine crate).
    type Error: core::error::Error;
    /// Opens the engine: allocates and registers memory, creates queues. Cold path.
    fn open(cfg: &Self::Config) -> Result<Self, Self::Error>;
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
