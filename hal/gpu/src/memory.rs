//! Memory regions: pinned host memory mapped into the GPU, and device memory.

use std::os::fd::OwnedFd;

use crate::device::Gpu;
use crate::error::{GpuError, Result};
use crate::sys;

/// Alignment of [`DeviceMem`] regions (and the granule their length is rounded up to for
/// dma-buf export): 64 KiB, a multiple of every host page size and of the GPU's 256 B.
pub const DEVICE_ALIGN: usize = 64 << 10;

/// Page-locked host memory mapped into the GPU's address space (`cuMemHostAlloc` with
/// `CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE`), zeroed. The config's
/// `host_pinned` region kind.
///
/// The NIC/socket writes packets at [`host_ptr`](Self::host_ptr); a kernel reads the same
/// bytes at [`device_ptr`](Self::device_ptr) (over PCIe/C2C, no copy). Build the runtime's
/// `rtdaq_core::BufferPool` over it with `BufferPool::from_raw(host_ptr(), len(), links,
/// slot, true)`; it implements [`rtdaq_core::traits::MemoryRegion`]
/// (`DmaTarget::VirtAddr(host_ptr)`).
pub struct HostPinned {
    alloc: sys::PinnedAlloc,
    gpu: u32,
}

impl std::fmt::Debug for HostPinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostPinned")
            .field("gpu", &self.gpu)
            .field("len", &self.len())
            .field("host_ptr", &self.host_ptr())
            .field("device_ptr", &format_args!("{:#x}", self.device_ptr()))
            .finish()
    }
}

impl HostPinned {
    /// Allocates `len` bytes of pinned, device-mapped host memory for `gpu`. Cold path.
    ///
    /// # Errors
    /// [`GpuError::Cuda`] when the driver refuses (e.g. `CUDA_ERROR_OUT_OF_MEMORY` beyond the
    /// lockable memory).
    pub fn new(gpu: &Gpu, len: usize) -> Result<Self> {
        Ok(Self {
            alloc: sys::PinnedAlloc::new(gpu.ctx(), len)?,
            gpu: gpu.id(),
        })
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.alloc.len()
    }
    /// True for a zero-length region.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// CPU address of byte 0 (page-aligned).
    pub fn host_ptr(&self) -> *mut u8 {
        self.alloc.host_ptr()
    }
    /// Device-visible address of byte 0.
    pub fn device_ptr(&self) -> u64 {
        self.alloc.dev_ptr()
    }
    /// Device-visible address of the host address `p`, `None` when `p` is outside the
    /// region. Never allocates; use it to fill [`PacketDesc::addr`](crate::PacketDesc::addr).
    #[inline]
    pub fn device_addr_of(&self, p: *const u8) -> Option<u64> {
        let off = (p as usize).checked_sub(self.host_ptr() as usize)?;
        (off < self.len()).then(|| self.device_ptr() + off as u64)
    }
    /// The bytes (CPU view).
    pub fn as_slice(&self) -> &[u8] {
        self.alloc.as_slice()
    }
    /// The bytes (CPU view), mutable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.alloc.as_mut_slice()
    }
    /// GPU id it was allocated for.
    pub fn gpu(&self) -> u32 {
        self.gpu
    }
    pub(crate) fn alloc(&self) -> &sys::PinnedAlloc {
        &self.alloc
    }
}

/// Device memory (`cuMemAlloc`), aligned to [`DEVICE_ALIGN`], zeroed. The config's `device`
/// region kind. The CPU cannot dereference it; use the copy methods.
pub struct DeviceMem {
    gpu: Gpu,
    alloc: sys::DeviceAlloc,
}

impl std::fmt::Debug for DeviceMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceMem")
            .field("gpu", &self.gpu.id())
            .field("len", &self.len())
            .field("device_ptr", &format_args!("{:#x}", self.device_ptr()))
            .finish()
    }
}

impl DeviceMem {
    /// Allocates `len` bytes (rounded up to [`DEVICE_ALIGN`]) after checking them against the
    /// GPU's free memory. Cold path.
    ///
    /// # Errors
    /// [`GpuError::InsufficientMemory`] (needed vs free bytes), [`GpuError::Cuda`].
    pub fn new(gpu: &Gpu, len: usize) -> Result<Self> {
        let len = len.max(1).div_ceil(DEVICE_ALIGN) * DEVICE_ALIGN;
        gpu.check_footprint("device memory region", len)?;
        Ok(Self {
            gpu: gpu.clone(),
            alloc: sys::DeviceAlloc::new(gpu.ctx(), len, DEVICE_ALIGN)?,
        })
    }
    /// Length in bytes (a multiple of [`DEVICE_ALIGN`]).
    pub fn len(&self) -> usize {
        self.alloc.len()
    }
    /// Never true (lengths are rounded up to [`DEVICE_ALIGN`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Device address of byte 0 (aligned to [`DEVICE_ALIGN`]).
    pub fn device_ptr(&self) -> u64 {
        self.alloc.ptr()
    }
    /// The GPU.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }
    /// Copies `src` to byte `offset` (synchronous). Cold path.
    pub fn copy_from_host(&mut self, offset: usize, src: &[u8]) -> Result<()> {
        self.gpu.bind()?;
        sys::copy_htod_sync(&self.alloc, offset, src)
    }
    /// Copies bytes from `offset` into `dst` (synchronous; waits for the default stream's
    /// ordering only, so synchronise the stream that wrote them first). Cold path.
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.gpu.bind()?;
        sys::copy_dtoh_sync(dst, &self.alloc, offset)
    }

    /// Exports `offset..offset + len` as a dma-buf file descriptor
    /// (`cuMemGetHandleForAddressRange`, `CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD`), for a NIC to
    /// register (`ibv_reg_dmabuf_mr`, DPDK external memory). `offset` and `len` must be
    /// multiples of [`DEVICE_ALIGN`]. The fd keeps the GPU pages alive only as far as the
    /// importer's registration does: keep `self` alive while any registration exists.
    ///
    /// # Errors
    /// [`GpuError::DmaBufUnsupported`] when the device lacks dma-buf support or the range is
    /// unaligned; [`GpuError::OutOfRange`]; [`GpuError::Cuda`] (e.g. a kernel without
    /// dma-buf, or the proprietary module without it enabled).
    pub fn export_dmabuf(&self, offset: usize, len: usize) -> Result<DmaBuf> {
        self.check("export_dmabuf", offset, len)?;
        if offset % DEVICE_ALIGN != 0 || len % DEVICE_ALIGN != 0 || len == 0 {
            return Err(GpuError::DmaBufUnsupported(
                "offset and len must be non-zero multiples of DEVICE_ALIGN (64 KiB)",
            ));
        }
        if !self.gpu.dma_buf_supported()? {
            return Err(GpuError::DmaBufUnsupported(
                "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0 on this GPU/driver",
            ));
        }
        let fd = sys::export_dmabuf(self.gpu.ctx(), self.device_ptr() + offset as u64, len)?;
        Ok(DmaBuf {
            fd,
            device_ptr: self.device_ptr() + offset as u64,
            len,
        })
    }

    pub(crate) fn check(&self, what: &'static str, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len() => Ok(()),
            _ => Err(GpuError::OutOfRange {
                what,
                offset,
                len,
                size: self.len(),
            }),
        }
    }
}

/// A dma-buf exported from [`DeviceMem`]: the fd (closed on drop) and the range it covers.
#[derive(Debug)]
pub struct DmaBuf {
    /// The dma-buf file descriptor; offset 0 of it is `device_ptr`.
    pub fd: OwnedFd,
    /// Device address of the range's first byte.
    pub device_ptr: u64,
    /// Bytes covered.
    pub len: usize,
}
