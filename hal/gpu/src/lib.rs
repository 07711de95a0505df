//! # rtdaq-gpu: the GPU data path (CUDA through cudarc)
//!
//! Layer: a HAL crate under the runtime, next to the engines. It owns GPU memory regions,
//! the reorder/gather/convert kernels, the staging pipeline that moves received packets into
//! device batch buffers, the FFT/GEMM workloads and the dma-buf export for GPUDirect. It does
//! not read config files, spawn threads or count drops: the runtime does that and calls this
//! API.
//!
//! CUDA is loaded at run time (cudarc `dynamic-loading`): the crate builds on hosts without
//! CUDA, and before the first CUDA call every entry point checks that the library it needs
//! can be loaded. Without a driver, [`Gpu::open`] returns [`GpuError::NoDriver`], whose
//! message starts with `no CUDA driver found (libcuda.so)`; nothing panics.
//!
//! ## Pieces
//! - [`Gpu`]: an opened device (primary context), [`Gpu::check_footprint`] against
//!   `cuMemGetInfo`. [`Stream`]: copies and timing outside a pipeline.
//! - [`HostPinned`] (`host_pinned` regions: `cuMemHostAlloc` DEVICEMAP|PORTABLE, mapped) and
//!   [`DeviceMem`] (`device` regions: `cuMemAlloc`, 64 KiB aligned), [`DeviceMem::export_dmabuf`].
//! - [`BatchLayout`] / [`PacketDesc`]: what a batch is (reorder by sequence number, modulo or
//!   bit fields, or arrival-order gather; payload offset; int8/int16 LE/BE/int4 to
//!   fp16/bf16/fp32 conversion; missing packets zero-filled and reported in a validity mask).
//!   The exact rules are in [`layout`].
//! - [`mod@reference`]: the CPU implementation of every kernel (runs everywhere; the GPU tests
//!   compare the kernels against it byte for byte).
//! - [`Kernels`]: `kernels/batch.cu`, compiled once by NVRTC for the device.
//! - [`Pipeline`]: `submit` / `poll_completed` with at most `depth` batches in flight, CUDA
//!   events for completion, [`Workload`] (cuFFT / cuBLAS) after each batch.
//!
//! ## Example: the runtime's consumer loop
//! ```no_run
//! use rtdaq_gpu::{BatchLayout, Conversion, FloatFormat, Gpu, GpuError, HostPinned, IntFormat,
//!                 Mode, PacketDesc, Pipeline, PipelineConfig, Product, SlotMode, Staging,
//!                 Workload};
//!
//! # fn main() -> Result<(), GpuError> {
//! let gpu = Gpu::open(0)?;                        // GpuError::NoDriver without libcuda.so
//! let mut rx_region = HostPinned::new(&gpu, 64 << 20)?; // the RX pool lives here
//! let cfg = PipelineConfig {
//!     layout: BatchLayout {
//!         packets_per_batch: 1024,
//!         payload_offset: 32,                     // skip the rtdaq sequence header
//!         max_payload: 8000,
//!         conversion: Conversion::Convert { from: IntFormat::I8, to: FloatFormat::F32 },
//!         mode: Mode::Reorder(SlotMode::Modulo),
//!     },
//!     staging: Staging::Mapped,
//!     depth: 4,
//!     workload: Workload::None,
//!     checksum: true,
//!     product: Product::None,                  // or Batch / Workload: copied back to host
//! };
//! let mut pipe = Pipeline::new(&gpu, cfg)?;       // footprint check, NVRTC, allocations
//!
//! // Per batch (consumer thread; no allocation from here on):
//! let mut descs = [PacketDesc::default(); 1024];
//! let (mut dropped, mut missing) = (0u64, 0u64);
//! # let bufs: Vec<(*const u8, u32, u32)> = Vec::new();
//! for (d, (ptr, len, seq)) in descs.iter_mut().zip(&bufs) {
//!     *d = PacketDesc { addr: rx_region.device_addr_of(*ptr).unwrap(), seq: *seq, len: *len, offset: 0 };
//! }
//! while let Some(done) = pipe.poll_completed()? {
//!     missing += u64::from(done.missing);
//!     // release the packet buffers of batch `done.token` here
//! }
//! match pipe.submit(&descs[..bufs.len()]) {
//!     Ok(_submitted) => {}                        // keep the buffers until completed
//!     Err(GpuError::Busy { .. }) => dropped += bufs.len() as u64, // release them now
//!     Err(e) => return Err(e),
//! }
//! # let _ = (&mut rx_region, dropped, missing);
//! # Ok(())
//! # }
//! ```
//!
//! ## What ran where
//! Everything builds and the CPU-reference tests run on any host. The GPU tests
//! (`tests/gpu.rs`) skip where `libcuda.so` is missing, each skip recorded and named in
//! `scripts/test.sh`'s summary; on
//! the GPU host (H200, CUDA 13.0) they ran and their results are in `docs/gpu.md`.
//!
//! ## Thread safety and cleanup
//! [`Gpu`] is `Clone + Send + Sync`; every call binds the context to the calling thread.
//! A [`Pipeline`] is `Send` and driven from one thread (`&mut self`). Drop frees everything;
//! a pipeline or stream waits for its in-flight work first. Errors while freeing (possible
//! only after a sticky CUDA error) are ignored rather than panicking.

#![deny(unsafe_code)]
#![deny(missing_docs)]

mod device;
pub mod error;
mod kernels;
pub mod layout;
mod memory;
mod pipeline;
pub mod reference;
mod sys;
mod workload;

pub use device::{
    driver_present, require_cublas, require_cufft, require_driver, require_nvrtc, Gpu, Stream,
};
pub use error::{GpuError, Result};
pub use kernels::{Kernels, BATCH_KERNELS_CU};
pub use layout::{
    BatchLayout, Conversion, FloatFormat, IntFormat, Mode, PacketDesc, SlotMode,
    MAX_PACKETS_PER_BATCH, MAX_PAYLOAD,
};
pub use memory::{DeviceMem, DmaBuf, HostPinned, DEVICE_ALIGN};
pub use pipeline::{Completed, Pipeline, PipelineConfig, Product, Staging, Submitted};
pub use workload::Workload;
