//! Opening a GPU: library presence checks, the CUDA context, memory info, and a stream type.

use std::sync::Arc;

use cudarc::driver::{sys as ds, CudaContext, CudaStream};

use crate::error::{cuda, GpuError, Result};
use crate::memory::{DeviceMem, HostPinned};
use crate::sys;

/// True when the CUDA driver library (`libcuda.so`) can be loaded on this host.
pub fn driver_present() -> bool {
    sys::driver_present()
}

/// `Ok` when the CUDA driver library can be loaded, else [`GpuError::NoDriver`]
/// (`"no CUDA driver found (libcuda.so); ..."`). No CUDA function is called.
pub fn require_driver() -> Result<()> {
    if driver_present() {
        Ok(())
    } else {
        Err(GpuError::NoDriver)
    }
}

/// `Ok` when NVRTC (`libnvrtc.so`) can be loaded.
pub fn require_nvrtc() -> Result<()> {
    if sys::nvrtc_present() {
        Ok(())
    } else {
        Err(GpuError::NoLibrary {
            name: "NVRTC",
            soname: "libnvrtc.so",
            what: "runtime compiler (kernels are compiled at start-up)",
        })
    }
}

/// `Ok` when cuFFT (`libcufft.so`) can be loaded.
pub fn require_cufft() -> Result<()> {
    if sys::cufft_present() {
        Ok(())
    } else {
        Err(GpuError::NoLibrary {
            name: "cuFFT",
            soname: "libcufft.so",
            what: "FFT (workload fft)",
        })
    }
}

/// `Ok` when cuBLAS (`libcublas.so`) can be loaded.
pub fn require_cublas() -> Result<()> {
    if sys::cublas_present() {
        Ok(())
    } else {
        Err(GpuError::NoLibrary {
            name: "cuBLAS",
            soname: "libcublas.so",
            what: "BLAS (workload gemm)",
        })
    }
}

/// An opened GPU (its primary CUDA context). Cheap to clone; usable from any thread (every
/// call binds the context to the calling thread first).
#[derive(Clone)]
pub struct Gpu {
    ctx: Arc<CudaContext>,
    id: u32,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu").field("id", &self.id).finish()
    }
}

impl Gpu {
    /// Opens GPU `id` (CUDA device ordinal). Checks for the driver library before any CUDA
    /// call.
    ///
    /// # Errors
    /// [`GpuError::NoDriver`] without `libcuda.so`; [`GpuError::NoSuchGpu`] for an id the host
    /// does not have; [`GpuError::Cuda`] when the driver fails (e.g. no device at all).
    pub fn open(id: u32) -> Result<Self> {
        require_driver()?;
        cudarc::driver::result::init().map_err(cuda("cuInit"))?;
        let count =
            cudarc::driver::result::device::get_count().map_err(cuda("cuDeviceGetCount"))?;
        if id as i32 >= count {
            return Err(GpuError::NoSuchGpu {
                id,
                count: count.max(0) as u32,
            });
        }
        let ctx = CudaContext::new(id as usize).map_err(cuda("cuDevicePrimaryCtxRetain"))?;
        Ok(Self { ctx, id })
    }

    /// The CUDA device ordinal.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The device name (e.g. `"NVIDIA H200"`).
    pub fn name(&self) -> Result<String> {
        self.ctx.name().map_err(cuda("cuDeviceGetName"))
    }

    /// `(major, minor)` compute capability.
    pub fn compute_capability(&self) -> Result<(i32, i32)> {
        self.ctx
            .compute_capability()
            .map_err(cuda("cuDeviceGetAttribute"))
    }

    /// `(free, total)` device memory in bytes (`cuMemGetInfo`).
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.ctx.bind_to_thread().map_err(cuda("cuCtxSetCurrent"))?;
        self.ctx.mem_get_info().map_err(cuda("cuMemGetInfo"))
    }

    /// Checks that `needed` bytes of device memory are free for `what`.
    ///
    /// # Errors
    /// [`GpuError::InsufficientMemory`] naming needed and free bytes.
    pub fn check_footprint(&self, what: &'static str, needed: usize) -> Result<()> {
        let (free, total) = self.mem_info()?;
        if needed > free {
            return Err(GpuError::InsufficientMemory {
                gpu: self.id,
                what,
                needed,
                free,
                total,
            });
        }
        Ok(())
    }

    /// True when the device and driver can export device memory as dma-buf
    /// (`CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`).
    pub fn dma_buf_supported(&self) -> Result<bool> {
        let v = self
            .ctx
            .attribute(ds::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)
            .map_err(cuda("cuDeviceGetAttribute"))?;
        Ok(v != 0)
    }

    /// Copies `src` to the device-visible address `dst` (synchronous; cold path: tools and
    /// tests, e.g. writing packets into a `device` region the way a NIC does). An address
    /// outside this GPU's memory is a CUDA error.
    pub fn copy_to_addr(&self, dst: u64, src: &[u8]) -> Result<()> {
        self.bind()?;
        sys::copy_host_to_addr(dst, src)
    }

    /// Copies bytes at the device-visible address `src` into `dst` (synchronous; cold
    /// path).
    pub fn copy_from_addr(&self, src: u64, dst: &mut [u8]) -> Result<()> {
        self.bind()?;
        sys::copy_addr_to_host(dst, src)
    }

    /// Waits for all work on this GPU's context.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(cuda("cuCtxSetCurrent"))?;
        self.ctx.synchronize().map_err(cuda("cuCtxSynchronize"))
    }

    pub(crate) fn ctx(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(cuda("cuCtxSetCurrent"))
    }
}

/// A CUDA stream (non-blocking) of one GPU, for copies and timing outside a
/// [`Pipeline`](crate::Pipeline) (benchmarks, set-up).
///
/// Asynchronous methods only enqueue: keep the memory they touch alive until
/// [`synchronize`](Self::synchronize) (dropping a [`HostPinned`]/[`DeviceMem`] with copies in
/// flight is a use-after-free on the GPU side).
pub struct Stream {
    gpu: Gpu,
    inner: Arc<CudaStream>,
}

impl Stream {
    /// A new stream on `gpu`.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        gpu.bind()?;
        let inner = gpu.ctx.new_stream().map_err(cuda("cuStreamCreate"))?;
        Ok(Self {
            gpu: gpu.clone(),
            inner,
        })
    }

    pub(crate) fn raw(&self) -> ds::CUstream {
        self.inner.cu_stream()
    }

    pub(crate) fn cuda_stream(&self) -> &Arc<CudaStream> {
        &self.inner
    }

    /// The GPU.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Enqueues a host->device copy (`cuMemcpyHtoDAsync`) of `len` bytes.
    pub fn copy_to_device(
        &self,
        dst: &DeviceMem,
        dst_offset: usize,
        src: &HostPinned,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        self.gpu.bind()?;
        dst.check("copy_to_device", dst_offset, len)?;
        sys::memcpy_htod_async(
            dst.device_ptr() + dst_offset as u64,
            src.alloc(),
            src_offset,
            len,
            self.raw(),
        )
    }

    /// Enqueues a device->device copy (`cuMemcpyAsync`) of `len` bytes.
    pub fn copy_device_to_device(
        &self,
        dst: &DeviceMem,
        dst_offset: usize,
        src: &DeviceMem,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        self.gpu.bind()?;
        dst.check("copy_device_to_device (dst)", dst_offset, len)?;
        src.check("copy_device_to_device (src)", src_offset, len)?;
        sys::memcpy_async(
            dst.device_ptr() + dst_offset as u64,
            src.device_ptr() + src_offset as u64,
            len,
            self.raw(),
        )
    }

    /// Waits until everything enqueued so far completed.
    pub fn synchronize(&self) -> Result<()> {
        self.gpu.bind()?;
        self.inner
            .synchronize()
            .map_err(cuda("cuStreamSynchronize"))
    }

    /// Runs `enqueue` (which enqueues work on this stream) between two timing events, waits,
    /// and returns the GPU time in milliseconds. Cold path (creates two events).
    pub fn time_ms(&self, enqueue: impl FnOnce(&Stream) -> Result<()>) -> Result<f32> {
        self.gpu.bind()?;
        let start = sys::Event::new(self.gpu.ctx(), true)?;
        let end = sys::Event::new(self.gpu.ctx(), true)?;
        start.record(self.raw())?;
        enqueue(self)?;
        end.record(self.raw())?;
        end.synchronize()?;
        end.elapsed_ms(&start)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // Work still in flight may touch memory the caller frees next: wait for it.
        let _ = self.synchronize();
    }
}
