//! The crate's one error type.
//!
//! Variants that the hot path ([`Pipeline::submit`](crate::Pipeline::submit),
//! [`Pipeline::poll_completed`](crate::Pipeline::poll_completed)) can return carry only
//! `Copy` data (no allocation); the others are built at start-up.

use cudarc::cublas::result::CublasError;
use cudarc::cufft::result::CufftError;
use cudarc::driver::DriverError;

/// `Result` with [`GpuError`].
pub type Result<T, E = GpuError> = std::result::Result<T, E>;

/// Everything that can go wrong in `rtdaq-gpu`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// `libcuda.so` cannot be loaded: no NVIDIA driver on this host.
    #[error(
        "no CUDA driver found (libcuda.so); install the NVIDIA driver (or put the directory \
         holding libcuda.so.1 on LD_LIBRARY_PATH), or run a config without host_pinned/device \
         memory regions"
    )]
    NoDriver,
    /// A CUDA library other than the driver cannot be loaded.
    #[error(
        "no {name} library found ({soname}); install the CUDA {what} runtime library (CUDA 13) \
         or put its directory on LD_LIBRARY_PATH"
    )]
    NoLibrary {
        /// Display name ("NVRTC", "cuFFT", "cuBLAS").
        name: &'static str,
        /// Library file name ("libnvrtc.so", ...).
        soname: &'static str,
        /// What it is for.
        what: &'static str,
    },
    /// The GPU id does not exist.
    #[error("GPU {id} not found: this host has {count} CUDA device(s) (ids 0..{count})")]
    NoSuchGpu {
        /// Requested id.
        id: u32,
        /// Devices present.
        count: u32,
    },
    /// Not enough free GPU memory for what init wants to allocate.
    #[error(
        "GPU {gpu}: {what} needs {needed} bytes ({needed_mib} MiB) of GPU memory but only {free} \
         bytes ({free_mib} MiB) of {total} are free; shrink buffer counts/sizes or free the GPU",
        needed_mib = needed >> 20, free_mib = free >> 20
    )]
    InsufficientMemory {
        /// GPU id.
        gpu: u32,
        /// What was being sized.
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes free (`cuMemGetInfo`).
        free: usize,
        /// Bytes total.
        total: usize,
    },
    /// A batch layout or pipeline setting is invalid.
    #[error("invalid GPU batch layout: {0}")]
    InvalidLayout(String),
    /// Backpressure, not a fault: `depth` batches are already in flight, the batch was
    /// refused and nothing was enqueued. The caller counts its packets as dropped.
    #[error("GPU pipeline busy: {depth} batches in flight (batch dropped)")]
    Busy {
        /// The pipeline's depth.
        depth: usize,
    },
    /// More descriptors than `packets_per_batch`.
    #[error("{got} packets submitted in one batch, packets_per_batch is {max}")]
    TooManyPackets {
        /// Descriptors given.
        got: usize,
        /// The layout's `packets_per_batch`.
        max: usize,
    },
    /// A range lies outside its memory region.
    #[error("{what}: range {offset}+{len} exceeds the region's {size} bytes")]
    OutOfRange {
        /// Operation.
        what: &'static str,
        /// Offset into the region.
        offset: usize,
        /// Length.
        len: usize,
        /// Region size.
        size: usize,
    },
    /// A CUDA driver call failed.
    #[error("CUDA {op} failed: {source}")]
    Cuda {
        /// The driver call.
        op: &'static str,
        /// The driver's error code.
        #[source]
        source: DriverError,
    },
    /// NVRTC could not compile the kernels (the log says why).
    #[error("NVRTC failed to compile the rtdaq kernels for {arch}: {log}")]
    Compile {
        /// Target architecture (e.g. `sm_90`).
        arch: String,
        /// Compiler log or error.
        log: String,
    },
    /// A cuFFT call failed.
    #[error("cuFFT {op} failed: {source}")]
    Cufft {
        /// The call.
        op: &'static str,
        /// cuFFT status.
        #[source]
        source: CufftError,
    },
    /// A cuBLAS call failed.
    #[error("cuBLAS {op} failed: {source}")]
    Cublas {
        /// The call.
        op: &'static str,
        /// cuBLAS status.
        #[source]
        source: CublasError,
    },
    /// The device cannot export this memory as a dma-buf.
    #[error("dma-buf export not possible: {0}")]
    DmaBufUnsupported(&'static str),
}

/// Maps a driver error of call `op`.
pub(crate) fn cuda(op: &'static str) -> impl FnOnce(DriverError) -> GpuError {
    move |source| GpuError::Cuda { op, source }
}
