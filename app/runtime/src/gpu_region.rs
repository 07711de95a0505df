//! A GPU memory region as the rest of the runtime sees it: where it lies for the GPU
//! ([`GpuMap`]) and what memory it is ([`GpuRegionMem`]). Plain data, a leaf: allocation
//! (`memory`) and the GPU stage both name it.

/// Where a GPU region lives for the GPU: the device-visible address of its first byte
/// (`host_pinned`: the mapping of its CPU address; `device`: both are the device address).
/// Plain numbers; the region itself lives for the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuMap {
    /// CUDA device ordinal.
    pub gpu: u32,
    /// CPU address of byte 0.
    pub host_base: usize,
    /// Device-visible address of byte 0.
    pub dev_base: u64,
    /// Bytes.
    pub len: usize,
}

impl GpuMap {
    /// Device-visible address of the CPU address `p`, `None` outside the region. Never
    /// allocates.
    #[inline]
    pub fn device_addr(&self, p: *const u8) -> Option<u64> {
        let off = (p as usize).checked_sub(self.host_base)?;
        (off < self.len).then(|| self.dev_base + off as u64)
    }
}

/// The memory of a GPU region (the mapping is the [`GpuMap`] returned next to it); lives
/// for the process.
#[derive(Debug)]
pub enum GpuRegionMem {
    /// `host_pinned`: page-locked CPU memory mapped into the GPU (the buffer pool's bytes).
    Pinned(&'static mut [u8]),
    /// `device`: GPU memory the CPU cannot reach, at `GpuMap::dev_base` (its `host_base` is
    /// the same number), for the ibverbs engine exported whole as the dma-buf `dmabuf_fd`
    /// for the NIC to register (the DPDK engine maps the address for the port's device).
    Device {
        /// The dma-buf file descriptor (kept open for the process), when exported.
        dmabuf_fd: Option<i32>,
    },
}
