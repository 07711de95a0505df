//! The CUDA C kernels (`kernels/*.cu`, embedded), compiled once by NVRTC for the device.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};

use crate::device::{require_nvrtc, Gpu};
use crate::error::{cuda, GpuError, Result};

/// CUDA C source of the batch kernels (reorder claim, place/convert, pieces scatter,
/// checksum).
pub const BATCH_KERNELS_CU: &str = include_str!("../kernels/batch.cu");

/// The compiled kernels of one GPU.
pub struct Kernels {
    _module: Arc<CudaModule>,
    pub(crate) claim: CudaFunction,
    pub(crate) place: CudaFunction,
    pub(crate) checksum: CudaFunction,
    pub(crate) scatter: CudaFunction,
    arch: String,
}

impl std::fmt::Debug for Kernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernels").field("arch", &self.arch).finish()
    }
}

impl Kernels {
    /// Compiles [`BATCH_KERNELS_CU`] with NVRTC for `gpu`'s compute capability
    /// (`--gpu-architecture=sm_XY`) and loads it. Cold path (tens of milliseconds).
    ///
    /// # Errors
    /// [`GpuError::NoLibrary`] without `libnvrtc.so`; [`GpuError::Compile`] with the log.
    pub fn compile(gpu: &Gpu) -> Result<Self> {
        require_nvrtc()?;
        let (major, minor) = gpu.compute_capability()?;
        let arch = format!("sm_{major}{minor}");
        let opts = CompileOptions {
            options: vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()],
            name: Some("rtdaq_batch.cu".into()),
            ..Default::default()
        };
        let ptx = compile_ptx_with_opts(BATCH_KERNELS_CU, opts).map_err(|e| GpuError::Compile {
            arch: arch.clone(),
            log: match e {
                CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
                other => other.to_string(),
            },
        })?;
        gpu.bind()?;
        let module = gpu
            .ctx()
            .load_module(ptx)
            .map_err(cuda("cuModuleLoadData"))?;
        let f = |name| {
            module
                .load_function(name)
                .map_err(cuda("cuModuleGetFunction"))
        };
        Ok(Self {
            claim: f("rtdaq_claim")?,
            place: f("rtdaq_place")?,
            checksum: f("rtdaq_checksum")?,
            scatter: f("rtdaq_scatter")?,
            _module: module,
            arch,
        })
    }

    /// The architecture compiled for (`sm_90` on an H200).
    pub fn arch(&self) -> &str {
        &self.arch
    }
}
