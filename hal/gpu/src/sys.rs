//! Every `unsafe` block of the crate: raw CUDA calls through cudarc's `result`/`sys` layers,
//! behind small safe types and crate-internal functions.
//!
//! Contract of the crate-internal functions here: device addresses (`u64`) passed in come
//! from live allocations of this crate ([`DeviceAlloc`], [`PinnedAlloc`]) or from the caller's
//! [`PacketDesc`](crate::PacketDesc)s, and every stream a call enqueues on is synchronised
//! before those allocations are freed ([`crate::Pipeline`]'s `Drop`, [`crate::Stream`]'s
//! docs). A bad *device* address makes the GPU fault (a CUDA error on a later call), it cannot
//! corrupt host memory: host memory is only reached through [`PinnedAlloc`] ranges that are
//! bounds-checked here, or through mapped pinned memory that stays mapped while allocated.

#![allow(unsafe_code)]

use std::ffi::c_void;
use std::os::fd::{FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::cublas::{result as blas_result, sys as blas_sys, CudaBlas};
use cudarc::cufft::{result as fft_result, sys as fft_sys};
use cudarc::driver::{result as dr, sys as ds, CudaContext, CudaFunction, DriverError};

use crate::error::{cuda, GpuError, Result};
use crate::memory::HostPinned;

/// True when `libcuda.so` (the driver) can be loaded.
pub(crate) fn driver_present() -> bool {
    // SAFETY: only tries `dlopen` on cudarc's candidate names and closes the handle again; no
    // CUDA function is called.
    unsafe { ds::is_culib_present() }
}

/// True when `libnvrtc.so` can be loaded.
pub(crate) fn nvrtc_present() -> bool {
    // SAFETY: as in `driver_present` (dlopen/dlclose only).
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// True when `libcufft.so` can be loaded.
pub(crate) fn cufft_present() -> bool {
    // SAFETY: as in `driver_present` (dlopen/dlclose only).
    unsafe { fft_sys::is_culib_present() }
}

/// True when `libcublas.so` can be loaded.
pub(crate) fn cublas_present() -> bool {
    // SAFETY: as in `driver_present` (dlopen/dlclose only).
    unsafe { blas_sys::is_culib_present() }
}

fn check_range(what: &'static str, offset: usize, len: usize, size: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(GpuError::OutOfRange {
            what,
            offset,
            len,
            size,
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// Pinned host memory

/// Page-locked host memory mapped into the device address space (`cuMemHostAlloc` with
/// `DEVICEMAP | PORTABLE`), zeroed at allocation.
pub(crate) struct PinnedAlloc {
    ctx: Arc<CudaContext>,
    ptr: NonNull<u8>,
    len: usize,
    dev: u64,
}

// SAFETY: the allocation is owned exclusively by this value; pinned memory may be used from any
// thread (PORTABLE), and CPU access goes through `&`/`&mut` borrows of it.
unsafe impl Send for PinnedAlloc {}
// SAFETY: shared access only reads (`as_slice`, `read_u32`).
unsafe impl Sync for PinnedAlloc {}

impl PinnedAlloc {
    pub(crate) fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<Self> {
        ctx.bind_to_thread().map_err(cuda("cuCtxSetCurrent"))?;
        let alloc_len = len.max(1);
        let flags = ds::CU_MEMHOSTALLOC_DEVICEMAP | ds::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: plain allocation call with a non-zero size; a context is current.
        let p = unsafe { dr::malloc_host(alloc_len, flags) }.map_err(cuda("cuMemHostAlloc"))?;
        let Some(ptr) = NonNull::new(p.cast::<u8>()) else {
            return Err(GpuError::Cuda {
                op: "cuMemHostAlloc",
                source: DriverError(ds::CUresult::CUDA_ERROR_OUT_OF_MEMORY),
            });
        };
        // SAFETY: `ptr` is valid for writes of `alloc_len` bytes (just allocated, unshared).
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, alloc_len) };
        let mut dev: ds::CUdeviceptr = 0;
        // SAFETY: `p` was returned by cuMemHostAlloc with DEVICEMAP in the current context;
        // `dev` is a valid out-pointer.
        let r = unsafe { ds::cuMemHostGetDevicePointer_v2(&mut dev, p, 0) }.result();
        let me = Self {
            ctx: ctx.clone(),
            ptr,
            len,
            dev,
        };
        r.map_err(cuda("cuMemHostGetDevicePointer"))?; // `me` drops and frees on error
        Ok(me)
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
    pub(crate) fn host_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    pub(crate) fn dev_ptr(&self) -> u64 {
        self.dev
    }
    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` initialised (zeroed at allocation) bytes for the
        // life of `self`; GPU writes into it are only enqueued by this crate into regions it
        // reads after the writing work completed (events), never while a slice is borrowed.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
    /// Reads `u32` number `idx` (little-endian host), bounds-checked, volatile (the GPU wrote
    /// it through an async copy that completed).
    pub(crate) fn read_u32(&self, idx: usize) -> u32 {
        assert!((idx + 1) * 4 <= self.len, "read_u32 out of range");
        // SAFETY: in bounds (checked above); cuMemHostAlloc memory is page-aligned, so word
        // `idx` is 4-byte aligned.
        unsafe { std::ptr::read_volatile(self.ptr.as_ptr().cast::<u32>().add(idx)) }
    }
    /// Writes `bytes` at `offset` (bounds-checked).
    pub(crate) fn write(&mut self, offset: usize, bytes: &[u8]) {
        self.as_mut_slice()[offset..offset + bytes.len()].copy_from_slice(bytes);
    }
}

impl Drop for PinnedAlloc {
    fn drop(&mut self) {
        // Errors are ignored: the only failures are a broken (sticky-error) context or a
        // driver being torn down, where the memory goes with the process anyway.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: `ptr` came from cuMemHostAlloc and is freed once; users synchronise their
        // streams before dropping (module contract).
        let _ = unsafe { dr::free_host(self.ptr.as_ptr().cast::<c_void>()) };
    }
}

// SAFETY: `HostPinned` owns a `PinnedAlloc`, whose host address is fixed, page-locked and
// valid until `HostPinned` is dropped.
unsafe impl rtdaq_core::traits::MemoryRegion for HostPinned {
    fn kind(&self) -> rtdaq_core::traits::MemKind {
        rtdaq_core::traits::MemKind::HostPinned
    }
    fn len(&self) -> usize {
        HostPinned::len(self)
    }
    fn dma(&self) -> rtdaq_core::traits::DmaTarget {
        rtdaq_core::traits::DmaTarget::VirtAddr(self.host_ptr())
    }
}

// ---------------------------------------------------------------------------------------------
// Device memory

/// Device memory (`cuMemAlloc`), aligned to `align` bytes, zeroed at allocation.
pub(crate) struct DeviceAlloc {
    ctx: Arc<CudaContext>,
    base: u64,
    ptr: u64,
    len: usize,
}

impl DeviceAlloc {
    pub(crate) fn new(ctx: &Arc<CudaContext>, len: usize, align: usize) -> Result<Self> {
        debug_assert!(align.is_power_of_two());
        ctx.bind_to_thread().map_err(cuda("cuCtxSetCurrent"))?;
        let extra = if align > 256 { align } else { 0 };
        let alloc_len = len.max(1) + extra;
        // SAFETY: plain allocation call in the current context.
        let base = unsafe { dr::malloc_sync(alloc_len) }.map_err(cuda("cuMemAlloc"))?;
        let ptr = (base + align as u64 - 1) & !(align as u64 - 1);
        let me = Self {
            ctx: ctx.clone(),
            base,
            ptr,
            len,
        };
        // SAFETY: `base..base + alloc_len` is the allocation just made.
        unsafe { dr::memset_d8_sync(base, 0, alloc_len) }.map_err(cuda("cuMemsetD8"))?;
        Ok(me)
    }
    pub(crate) fn ptr(&self) -> u64 {
        self.ptr
    }
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for DeviceAlloc {
    fn drop(&mut self) {
        // Errors ignored, as for `PinnedAlloc`.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: `base` came from cuMemAlloc and is freed once; streams were synchronised
        // (module contract).
        let _ = unsafe { dr::free_sync(self.base) };
    }
}

/// Copies `src` to device address `dst` (synchronous).
pub(crate) fn copy_htod_sync(dst: &DeviceAlloc, offset: usize, src: &[u8]) -> Result<()> {
    check_range("copy to device", offset, src.len(), dst.len())?;
    // SAFETY: the device range lies inside `dst` (checked); `src` is a valid host slice and
    // the call returns after the copy.
    unsafe { dr::memcpy_htod_sync(dst.ptr() + offset as u64, src) }.map_err(cuda("cuMemcpyHtoD"))
}

/// Copies device bytes at `src + offset` to `dst` (synchronous).
pub(crate) fn copy_dtoh_sync(dst: &mut [u8], src: &DeviceAlloc, offset: usize) -> Result<()> {
    check_range("copy to host", offset, dst.len(), src.len())?;
    // SAFETY: the device range lies inside `src` (checked); `dst` is a valid exclusive host
    // slice and the call returns after the copy.
    unsafe { dr::memcpy_dtoh_sync(dst, src.ptr() + offset as u64) }.map_err(cuda("cuMemcpyDtoH"))
}

/// Copies `len` bytes from any device-visible address to `dst` (synchronous).
pub(crate) fn copy_addr_to_host(dst: &mut [u8], src: u64) -> Result<()> {
    // SAFETY: `dst` is a valid exclusive host slice; a bad device address is a CUDA error.
    unsafe { dr::memcpy_dtoh_sync(dst, src) }.map_err(cuda("cuMemcpyDtoH"))
}

/// Copies `src` to any device-visible address `dst` (synchronous).
pub(crate) fn copy_host_to_addr(dst: u64, src: &[u8]) -> Result<()> {
    // SAFETY: `src` is a valid host slice read until the call returns; a bad device address
    // is a CUDA error.
    unsafe { dr::memcpy_htod_sync(dst, src) }.map_err(cuda("cuMemcpyHtoD"))
}

// ---------------------------------------------------------------------------------------------
// Stream operations (all asynchronous)

/// `cuMemcpyAsync` between device-visible addresses (device memory or mapped pinned memory).
pub(crate) fn memcpy_async(dst: u64, src: u64, len: usize, stream: ds::CUstream) -> Result<()> {
    // SAFETY: device addresses only (module contract); the driver checks them.
    unsafe { ds::cuMemcpyAsync(dst, src, len, stream) }
        .result()
        .map_err(cuda("cuMemcpyAsync"))
}

/// `cuMemcpyHtoDAsync` from a pinned range to a device address.
pub(crate) fn memcpy_htod_async(
    dst: u64,
    src: &PinnedAlloc,
    offset: usize,
    len: usize,
    stream: ds::CUstream,
) -> Result<()> {
    check_range("async copy to device", offset, len, src.len())?;
    // SAFETY: the host range lies inside the pinned allocation (checked), which outlives the
    // copy (module contract).
    unsafe {
        ds::cuMemcpyHtoDAsync_v2(
            dst,
            src.host_ptr().add(offset).cast::<c_void>().cast_const(),
            len,
            stream,
        )
    }
    .result()
    .map_err(cuda("cuMemcpyHtoDAsync"))
}

/// `cuMemcpyDtoHAsync` from a device address into a pinned range.
pub(crate) fn memcpy_dtoh_async(
    dst: &PinnedAlloc,
    offset: usize,
    src: u64,
    len: usize,
    stream: ds::CUstream,
) -> Result<()> {
    check_range("async copy to host", offset, len, dst.len())?;
    // SAFETY: the host range lies inside the pinned allocation (checked); it is only read
    // after the stream passed the copy (an event), and it outlives the copy (module contract).
    unsafe {
        ds::cuMemcpyDtoHAsync_v2(
            dst.host_ptr().add(offset).cast::<c_void>(),
            src,
            len,
            stream,
        )
    }
    .result()
    .map_err(cuda("cuMemcpyDtoHAsync"))
}

/// `cuMemsetD32Async`.
pub(crate) fn memset_d32_async(
    dst: u64,
    value: u32,
    count: usize,
    stream: ds::CUstream,
) -> Result<()> {
    // SAFETY: device address only (module contract).
    unsafe { ds::cuMemsetD32Async(dst, value, count, stream) }
        .result()
        .map_err(cuda("cuMemsetD32Async"))
}

/// One `cuMemcpyBatchAsync` (CUDA 12.8+) of `dsts.len()` host->device copies; `srcs` are
/// device-visible addresses of pinned host memory.
pub(crate) fn memcpy_batch_async(
    dsts: &mut [u64],
    srcs: &mut [u64],
    sizes: &mut [usize],
    device: i32,
    stream: ds::CUstream,
) -> Result<()> {
    assert!(dsts.len() == srcs.len() && srcs.len() == sizes.len());
    if dsts.is_empty() {
        return Ok(());
    }
    let mut attrs = ds::CUmemcpyAttributes {
        srcAccessOrder: ds::CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
        srcLocHint: ds::CUmemLocation {
            type_: ds::CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST,
            id: 0,
        },
        dstLocHint: ds::CUmemLocation {
            type_: ds::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: device,
        },
        flags: 0,
    };
    let mut attr_idx: usize = 0;
    // SAFETY: the three arrays have `len` valid entries (asserted); one attribute applies from
    // index 0; addresses are device-visible (module contract).
    unsafe {
        ds::cuMemcpyBatchAsync_v2(
            dsts.as_mut_ptr(),
            srcs.as_mut_ptr(),
            sizes.as_mut_ptr(),
            dsts.len(),
            &mut attrs,
            &mut attr_idx,
            1,
            stream,
        )
    }
    .result()
    .map_err(cuda("cuMemcpyBatchAsync"))
}

// ---------------------------------------------------------------------------------------------
// Events

/// A CUDA event (timing disabled unless asked for).
pub(crate) struct Event {
    ctx: Arc<CudaContext>,
    ev: ds::CUevent,
}

// SAFETY: an event handle may be used from any thread with its context bound (we bind).
unsafe impl Send for Event {}
// SAFETY: `query`/`synchronize` are thread-safe driver calls.
unsafe impl Sync for Event {}

impl Event {
    pub(crate) fn new(ctx: &Arc<CudaContext>, timing: bool) -> Result<Self> {
        ctx.bind_to_thread().map_err(cuda("cuCtxSetCurrent"))?;
        let flags = if timing {
            ds::CUevent_flags::CU_EVENT_DEFAULT
        } else {
            ds::CUevent_flags::CU_EVENT_DISABLE_TIMING
        };
        let ev = dr::event::create(flags).map_err(cuda("cuEventCreate"))?;
        Ok(Self {
            ctx: ctx.clone(),
            ev,
        })
    }
    pub(crate) fn record(&self, stream: ds::CUstream) -> Result<()> {
        // SAFETY: `ev` is a live event of this context; `stream` a live stream of it.
        unsafe { dr::event::record(self.ev, stream) }.map_err(cuda("cuEventRecord"))
    }
    /// `Ok(true)` when the work before the record completed. Never blocks.
    pub(crate) fn query(&self) -> Result<bool> {
        // SAFETY: `ev` is a live event.
        match unsafe { ds::cuEventQuery(self.ev) } {
            ds::CUresult::CUDA_SUCCESS => Ok(true),
            ds::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            e => Err(GpuError::Cuda {
                op: "cuEventQuery",
                source: DriverError(e),
            }),
        }
    }
    pub(crate) fn synchronize(&self) -> Result<()> {
        // SAFETY: `ev` is a live event.
        unsafe { dr::event::synchronize(self.ev) }.map_err(cuda("cuEventSynchronize"))
    }
    /// Milliseconds from `start` to `self` (both recorded with timing).
    pub(crate) fn elapsed_ms(&self, start: &Event) -> Result<f32> {
        // SAFETY: both are live timing events.
        unsafe { dr::event::elapsed(start.ev, self.ev) }.map_err(cuda("cuEventElapsedTime"))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: destroyed once; pending work referencing it is allowed by CUDA.
        let _ = unsafe { dr::event::destroy(self.ev) };
    }
}

// ---------------------------------------------------------------------------------------------
// Kernel launches (argument lists match kernels/batch.cu exactly)

/// Arguments of `rtdaq_claim`.
pub(crate) struct ClaimArgs {
    pub desc: u64,
    pub n: u32,
    pub ppb: u32,
    pub mode: u32,
    pub slot_shift: u32,
    pub slot_bits: u32,
    pub batch_shift: u32,
    pub batch_bits: u32,
    pub owner: u64,
    pub result: u64,
}

/// Arguments of `rtdaq_place`.
pub(crate) struct PlaceArgs {
    pub desc: u64,
    pub n: u32,
    /// 0 (null) for gather.
    pub owner: u64,
    pub payload_offset: u32,
    pub words_per_slot: u32,
    pub in_fmt: u32,
    pub out_fmt: u32,
    pub out_words_per_word: u32,
    pub out: u64,
    pub result: u64,
}

/// Arguments of `rtdaq_scatter` (pieces mode).
pub(crate) struct ScatterArgs {
    pub claim: ClaimArgs,
    pub payload_offset: u32,
    pub words_per_slot: u32,
    pub in_fmt: u32,
    pub out_fmt: u32,
    pub out_words_per_word: u32,
    pub out: u64,
}

fn launch(
    f: &CudaFunction,
    grid: u32,
    block: u32,
    stream: ds::CUstream,
    params: &mut [*mut c_void],
) -> Result<()> {
    // SAFETY: `f` is a function of a loaded module; `params` point at locals of the exact
    // types of the kernel's parameters (the typed wrappers below), which cuLaunchKernel copies
    // before returning.
    unsafe {
        dr::launch_kernel(
            f.cu_function(),
            (grid, 1, 1),
            (block, 1, 1),
            0,
            stream,
            params,
        )
    }
    .map_err(cuda("cuLaunchKernel"))
}

fn p<T>(x: &mut T) -> *mut c_void {
    (x as *mut T).cast::<c_void>()
}

/// Launches `rtdaq_claim` (one thread per descriptor).
pub(crate) fn launch_claim(f: &CudaFunction, stream: ds::CUstream, a: &ClaimArgs) -> Result<()> {
    let (mut desc, mut n, mut ppb, mut mode) = (a.desc, a.n, a.ppb, a.mode);
    let (mut ss, mut sb, mut bs, mut bb) = (a.slot_shift, a.slot_bits, a.batch_shift, a.batch_bits);
    let (mut owner, mut result) = (a.owner, a.result);
    let mut params = [
        p(&mut desc),
        p(&mut n),
        p(&mut ppb),
        p(&mut mode),
        p(&mut ss),
        p(&mut sb),
        p(&mut bs),
        p(&mut bb),
        p(&mut owner),
        p(&mut result),
    ];
    launch(f, a.n.div_ceil(256).max(1), 256, stream, &mut params)
}

/// Launches `rtdaq_place` (one block per slot).
pub(crate) fn launch_place(
    f: &CudaFunction,
    stream: ds::CUstream,
    slots: u32,
    a: &PlaceArgs,
) -> Result<()> {
    let (mut desc, mut n, mut owner, mut off) = (a.desc, a.n, a.owner, a.payload_offset);
    let (mut wps, mut inf, mut outf, mut owpw) =
        (a.words_per_slot, a.in_fmt, a.out_fmt, a.out_words_per_word);
    let (mut out, mut result) = (a.out, a.result);
    let mut params = [
        p(&mut desc),
        p(&mut n),
        p(&mut owner),
        p(&mut off),
        p(&mut wps),
        p(&mut inf),
        p(&mut outf),
        p(&mut owpw),
        p(&mut out),
        p(&mut result),
    ];
    launch(f, slots, 256, stream, &mut params)
}

/// Launches `rtdaq_scatter` (one block per descriptor).
pub(crate) fn launch_scatter(
    f: &CudaFunction,
    stream: ds::CUstream,
    a: &ScatterArgs,
) -> Result<()> {
    let c = &a.claim;
    let (mut desc, mut n, mut ppb, mut mode) = (c.desc, c.n, c.ppb, c.mode);
    let (mut ss, mut sb, mut bs, mut bb) = (c.slot_shift, c.slot_bits, c.batch_shift, c.batch_bits);
    let (mut off, mut wps, mut inf, mut outf, mut owpw) = (
        a.payload_offset,
        a.words_per_slot,
        a.in_fmt,
        a.out_fmt,
        a.out_words_per_word,
    );
    let (mut out, mut result) = (a.out, c.result);
    let mut params = [
        p(&mut desc),
        p(&mut n),
        p(&mut ppb),
        p(&mut mode),
        p(&mut ss),
        p(&mut sb),
        p(&mut bs),
        p(&mut bb),
        p(&mut off),
        p(&mut wps),
        p(&mut inf),
        p(&mut outf),
        p(&mut owpw),
        p(&mut out),
        p(&mut result),
    ];
    launch(f, c.n.max(1), 256, stream, &mut params)
}

/// Launches `rtdaq_checksum` over `nwords` words at `words`.
pub(crate) fn launch_checksum(
    f: &CudaFunction,
    stream: ds::CUstream,
    words: u64,
    nwords: u64,
    result: u64,
    blocks: u32,
) -> Result<()> {
    let (mut w, mut nw, mut r) = (words, nwords, result);
    let mut params = [p(&mut w), p(&mut nw), p(&mut r)];
    launch(f, blocks, 256, stream, &mut params)
}

// ---------------------------------------------------------------------------------------------
// cuFFT / cuBLAS

/// A cuFFT plan: `batch` complex-to-complex FP32 transforms of length `n`, on `stream`.
pub(crate) struct FftPlan {
    handle: fft_sys::cufftHandle,
}

// SAFETY: a plan handle may be used from any thread (the caller serialises use: `&mut`).
unsafe impl Send for FftPlan {}

impl FftPlan {
    pub(crate) fn new(n: i32, batch: i32, stream: ds::CUstream) -> Result<Self> {
        let handle =
            fft_result::plan_1d(n, fft_sys::cufftType::CUFFT_C2C, batch).map_err(|source| {
                GpuError::Cufft {
                    op: "cufftPlan1d",
                    source,
                }
            })?;
        let me = Self { handle };
        // SAFETY: live plan; the stream handle comes from a live cudarc stream.
        unsafe { fft_result::set_stream(handle, stream.cast()) }.map_err(|source| {
            GpuError::Cufft {
                op: "cufftSetStream",
                source,
            }
        })?;
        Ok(me)
    }
    /// Forward transform from `input` to `output` (device addresses, `n * batch * 8` bytes).
    pub(crate) fn forward(&self, input: u64, output: u64) -> Result<()> {
        // SAFETY: live plan; addresses are device allocations of the plan's size (callers
        // size them from the same `n * batch`), module contract otherwise.
        unsafe {
            fft_result::exec_c2c(
                self.handle,
                input as *mut fft_sys::cufftComplex,
                output as *mut fft_sys::cufftComplex,
                -1, // CUFFT_FORWARD
            )
        }
        .map_err(|source| GpuError::Cufft {
            op: "cufftExecC2C",
            source,
        })
    }
}

impl Drop for FftPlan {
    fn drop(&mut self) {
        // SAFETY: destroyed once.
        let _ = unsafe { fft_result::destroy(self.handle) };
    }
}

/// `C = A * B` for square `n x n` FP32 column-major matrices at device addresses.
pub(crate) fn sgemm(blas: &CudaBlas, n: i32, a: u64, b: u64, c: u64) -> Result<()> {
    let (alpha, beta) = (1.0f32, 0.0f32);
    // SAFETY: live handle bound to the pipeline's stream; `a`, `b`, `c` are device
    // allocations of at least `n * n * 4` bytes (the caller sizes them); alpha/beta are host
    // scalars (default pointer mode).
    unsafe {
        blas_result::sgemm(
            *blas.handle(),
            blas_sys::cublasOperation_t::CUBLAS_OP_N,
            blas_sys::cublasOperation_t::CUBLAS_OP_N,
            n,
            n,
            n,
            &alpha,
            a as *const f32,
            n,
            b as *const f32,
            n,
            &beta,
            c as *mut f32,
            n,
        )
    }
    .map_err(|source| GpuError::Cublas {
        op: "cublasSgemm",
        source,
    })
}

// ---------------------------------------------------------------------------------------------
// dma-buf

/// `cuMemGetHandleForAddressRange(DMA_BUF_FD)` for `ptr..ptr + len` of device memory.
pub(crate) fn export_dmabuf(ctx: &CudaContext, ptr: u64, len: usize) -> Result<OwnedFd> {
    ctx.bind_to_thread().map_err(cuda("cuCtxSetCurrent"))?;
    let mut fd: i32 = -1;
    // SAFETY: `fd` is a valid out-pointer for the int the driver writes for DMA_BUF_FD; the
    // range is checked by the caller to lie inside a live `DeviceAlloc`.
    unsafe {
        ds::cuMemGetHandleForAddressRange(
            (&mut fd as *mut i32).cast::<c_void>(),
            ptr,
            len,
            ds::CUmemRangeHandleType::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
            0,
        )
    }
    .result()
    .map_err(cuda("cuMemGetHandleForAddressRange"))?;
    if fd < 0 {
        return Err(GpuError::DmaBufUnsupported(
            "the driver returned no file descriptor",
        ));
    }
    // SAFETY: the driver returned a new file descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
