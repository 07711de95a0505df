//! Consumer workloads run on the pipeline's stream after each batch: a batched complex FP32
//! FFT of length 1024 (cuFFT) or an FP32 SGEMM 1024 x 1024 (cuBLAS). They stand in for the
//! real signal processing of a deployment and load the GPU for the benchmark.

use cudarc::cublas::CudaBlas;

use crate::device::{require_cublas, require_cufft, Stream};
use crate::error::{GpuError, Result};
use crate::layout::{BatchLayout, Conversion, FloatFormat};
use crate::memory::DEVICE_ALIGN;
use crate::reference::{gemm_b, FFT_LEN, GEMM_DIM};
use crate::sys;

/// What runs on each completed batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Workload {
    /// Nothing.
    #[default]
    None,
    /// Forward complex FP32 FFTs of length [`FFT_LEN`] over the batch output read as
    /// interleaved `(re, im)` pairs: `out_batch_bytes / 8192` transforms, out of place (the
    /// batch output stays intact). The plan is made at init.
    Fft,
    /// `C = A * B`, FP32, [`GEMM_DIM`]² column-major: `A` = the first 4 MiB of the batch
    /// output, `B` = [`gemm_b`](crate::reference::gemm_b) (uploaded at init).
    Gemm,
}

impl Workload {
    /// Checks the layout suits the workload; returns the extra device bytes it needs.
    pub fn footprint(self, layout: &BatchLayout) -> Result<usize> {
        let out = layout.out_batch_bytes();
        let f32_out = matches!(
            layout.conversion,
            Conversion::Copy
                | Conversion::Convert {
                    to: FloatFormat::F32,
                    ..
                }
        );
        let bad = |m: String| Err(GpuError::InvalidLayout(m));
        match self {
            Workload::None => Ok(0),
            _ if !f32_out => bad(format!(
                "workload {self:?} reads the batch as FP32: use an f32 output conversion (or copy)"
            )),
            Workload::Fft => {
                let n = out / (FFT_LEN * 8);
                if n == 0 {
                    return bad(format!(
                        "workload fft needs a batch output of at least {} bytes, the layout has {out}",
                        FFT_LEN * 8
                    ));
                }
                // output + cuFFT work area (at most the size of the data for C2C)
                Ok(2 * round(n * FFT_LEN * 8))
            }
            Workload::Gemm => {
                let m = GEMM_DIM * GEMM_DIM * 4;
                if out < m {
                    return bad(format!(
                        "workload gemm needs a batch output of at least {m} bytes (a {GEMM_DIM}x{GEMM_DIM} FP32 matrix), the layout has {out}"
                    ));
                }
                Ok(2 * round(m) + (32 << 20)) // B, C, cuBLAS work space
            }
        }
    }
}

impl Workload {
    /// Bytes of the workload's result per batch: the FFT output (`out_batch_bytes / 8192`
    /// spectra of 1024 complex FP32 values), the GEMM `C` matrix (4 MiB); 0 for none.
    pub fn output_bytes(self, layout: &BatchLayout) -> usize {
        match self {
            Workload::None => 0,
            Workload::Fft => layout.out_batch_bytes() / (FFT_LEN * 8) * FFT_LEN * 8,
            Workload::Gemm => GEMM_DIM * GEMM_DIM * 4,
        }
    }
}

fn round(n: usize) -> usize {
    n.div_ceil(DEVICE_ALIGN) * DEVICE_ALIGN
}

pub(crate) enum WorkloadState {
    None,
    Fft {
        plan: sys::FftPlan,
        out: sys::DeviceAlloc,
    },
    Gemm {
        blas: CudaBlas,
        b: sys::DeviceAlloc,
        c: sys::DeviceAlloc,
    },
}

impl WorkloadState {
    pub(crate) fn new(kind: Workload, layout: &BatchLayout, stream: &Stream) -> Result<Self> {
        let ctx = stream.gpu().ctx();
        Ok(match kind {
            Workload::None => WorkloadState::None,
            Workload::Fft => {
                require_cufft()?;
                let n = layout.out_batch_bytes() / (FFT_LEN * 8);
                let out = sys::DeviceAlloc::new(ctx, n * FFT_LEN * 8, DEVICE_ALIGN)?;
                let plan = sys::FftPlan::new(FFT_LEN as i32, n as i32, stream.raw())?;
                WorkloadState::Fft { plan, out }
            }
            Workload::Gemm => {
                require_cublas()?;
                let m = GEMM_DIM * GEMM_DIM * 4;
                let blas = CudaBlas::new(stream.cuda_stream().clone()).map_err(|source| {
                    GpuError::Cublas {
                        op: "cublasCreate",
                        source,
                    }
                })?;
                let b = sys::DeviceAlloc::new(ctx, m, DEVICE_ALIGN)?;
                let bytes: Vec<u8> = gemm_b().iter().flat_map(|x| x.to_le_bytes()).collect();
                sys::copy_htod_sync(&b, 0, &bytes)?;
                let c = sys::DeviceAlloc::new(ctx, m, DEVICE_ALIGN)?;
                WorkloadState::Gemm { blas, b, c }
            }
        })
    }

    /// Enqueues the workload on the batch output at `input`. Never allocates.
    pub(crate) fn run(&self, input: u64) -> Result<()> {
        match self {
            WorkloadState::None => Ok(()),
            WorkloadState::Fft { plan, out } => plan.forward(input, out.ptr()),
            WorkloadState::Gemm { blas, b, c } => {
                sys::sgemm(blas, GEMM_DIM as i32, input, b.ptr(), c.ptr())
            }
        }
    }

    /// `(device address, bytes)` of the workload's result.
    pub(crate) fn output(&self) -> Option<(u64, usize)> {
        match self {
            WorkloadState::None => None,
            WorkloadState::Fft { out, .. } => Some((out.ptr(), out.len())),
            WorkloadState::Gemm { c, .. } => Some((c.ptr(), c.len())),
        }
    }
}
