//! GPU consumer stages (`[[gpu_stages]]`): what an RX queue with `gpu_stage = "name"` does
//! with its packets (batch them, reorder or gather them into GPU memory, convert samples, run
//! a workload), and the GPU memory that costs.
//!
//! The types mirror `rtdaq-gpu`'s `BatchLayout` / `PipelineConfig` without depending on it
//! (this crate runs in `build.rs`); the runtime translates them.

/// Index of a GPU stage in [`Config::gpu_stages`](crate::Config::gpu_stages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GpuStageId(pub usize);

/// Integer input sample format (`conversion = "<from>_to_<to>"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SampleIn {
    /// `int8`.
    Int8,
    /// `int16le`.
    Int16Le,
    /// `int16be`.
    Int16Be,
    /// `int4` (two per byte, low nibble first).
    Int4,
}

impl SampleIn {
    /// Every format, in documentation order.
    pub const ALL: [SampleIn; 4] = [
        SampleIn::Int8,
        SampleIn::Int16Le,
        SampleIn::Int16Be,
        SampleIn::Int4,
    ];
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SampleIn::Int8 => "int8",
            SampleIn::Int16Le => "int16le",
            SampleIn::Int16Be => "int16be",
            SampleIn::Int4 => "int4",
        }
    }
    /// Samples per 4 input bytes.
    pub fn samples_per_word(self) -> u32 {
        match self {
            SampleIn::Int8 => 4,
            SampleIn::Int16Le | SampleIn::Int16Be => 2,
            SampleIn::Int4 => 8,
        }
    }
}

/// Float output sample format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SampleOut {
    /// `fp16`.
    Fp16,
    /// `bf16`.
    Bf16,
    /// `fp32`.
    Fp32,
}

impl SampleOut {
    /// Every format, in documentation order.
    pub const ALL: [SampleOut; 3] = [SampleOut::Fp16, SampleOut::Bf16, SampleOut::Fp32];
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SampleOut::Fp16 => "fp16",
            SampleOut::Bf16 => "bf16",
            SampleOut::Fp32 => "fp32",
        }
    }
    /// Bytes per sample.
    pub fn size(self) -> u32 {
        match self {
            SampleOut::Fp16 | SampleOut::Bf16 => 2,
            SampleOut::Fp32 => 4,
        }
    }
}

/// Sample conversion while the batch is built (`conversion`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SampleConversion {
    /// `"none"`: payload bytes copied unchanged.
    None,
    /// `"<from>_to_<to>"`, e.g. `"int16le_to_fp32"`: plain value cast, no scaling.
    Convert {
        /// Input format.
        from: SampleIn,
        /// Output format.
        to: SampleOut,
    },
}

impl SampleConversion {
    /// Output bytes per 4 input bytes.
    pub fn out_bytes_per_word(self) -> u32 {
        match self {
            SampleConversion::None => 4,
            SampleConversion::Convert { from, to } => from.samples_per_word() * to.size(),
        }
    }
    /// True when the output is FP32 words (`none` counts: workloads read it as FP32).
    pub fn fp32_output(self) -> bool {
        matches!(
            self,
            SampleConversion::None
                | SampleConversion::Convert {
                    to: SampleOut::Fp32,
                    ..
                }
        )
    }
}

impl std::fmt::Display for SampleConversion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SampleConversion::None => f.write_str("none"),
            SampleConversion::Convert { from, to } => {
                write!(f, "{}_to_{}", from.as_str(), to.as_str())
            }
        }
    }
}

/// How a packet finds its slot in the batch (`mode`, `slot_mode` and the bit-field keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BatchMode {
    /// `mode = "reorder"`, `slot_mode = "modulo"`: slot `seq % packets_per_batch`, batch id
    /// `seq / packets_per_batch`.
    ReorderModulo,
    /// `mode = "reorder"`, `slot_mode = "bit_fields"`: slot and batch id are bit fields of the
    /// sequence number (bit 0 = LSB).
    ReorderBitFields {
        /// First bit of the slot field.
        slot_shift: u8,
        /// Width of the slot field.
        slot_bits: u8,
        /// First bit of the batch-id field.
        batch_shift: u8,
        /// Width of the batch-id field (0: none).
        batch_bits: u8,
    },
    /// `mode = "gather"`: arrival order.
    Gather,
}

/// How packet bytes reach the kernel (`staging`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GpuStaging {
    /// `"mapped"` (default): the kernel reads the pinned host memory through its mapping.
    #[default]
    Mapped,
    /// `"copy_per_packet"`: one async copy per packet into a device staging buffer.
    CopyPerPacket,
    /// `"copy_batched"`: one batched async copy per batch.
    CopyBatched,
}

impl GpuStaging {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            GpuStaging::Mapped => "mapped",
            GpuStaging::CopyPerPacket => "copy_per_packet",
            GpuStaging::CopyBatched => "copy_batched",
        }
    }
}

/// Work run on each batch on the GPU (`workload`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GpuWorkload {
    /// `"none"`.
    #[default]
    None,
    /// `"fft"`: batched complex FP32 FFTs of length 1024 (cuFFT).
    Fft,
    /// `"gemm"`: FP32 SGEMM 1024 x 1024 (cuBLAS).
    Gemm,
}

impl GpuWorkload {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            GpuWorkload::None => "none",
            GpuWorkload::Fft => "fft",
            GpuWorkload::Gemm => "gemm",
        }
    }
}

/// FFT length of the `fft` workload.
pub const FFT_LEN: u64 = 1024;
/// Matrix dimension of the `gemm` workload.
pub const GEMM_DIM: u64 = 1024;
/// Bytes of one packet descriptor (`rtdaq_gpu::PacketDesc::BYTES`).
pub const DESC_BYTES: u64 = 24;
/// Allocation granule of GPU buffers (64 KiB, `rtdaq_gpu::DEVICE_ALIGN`).
pub const GPU_ALIGN: u64 = 64 << 10;

/// One GPU stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuStage {
    /// Unique name (`gpu_stage` of an RX queue refers to it).
    pub name: String,
    /// CUDA device ordinal.
    pub gpu: u32,
    /// Output slots per batch, also the most packets per batch (except with
    /// [`max_packets`](Self::max_packets)).
    pub packets_per_batch: u32,
    /// Bytes skipped at the start of each received buffer before the payload.
    pub payload_offset: u32,
    /// Payload bytes used per packet at most (a multiple of 4): the bytes of one slot.
    pub max_payload: u32,
    /// SPEAD heap assembly (`mode = "reorder"` on a SPEAD stream): a slot is one heap and
    /// gathers the payloads of its packets at their heap offsets. Then this is the most
    /// packets one batch holds (the config's `packets_per_batch`), `packets_per_batch` the
    /// heaps per batch (`heaps_per_batch`), `max_payload` the bytes of one heap
    /// (`heap_bytes`) and `payload_offset` 0 (each packet's payload follows its item
    /// pointers). `None` for every other stage.
    pub max_packets: Option<u32>,
    /// Reorder (and how) or gather.
    pub mode: BatchMode,
    /// Sample conversion.
    pub conversion: SampleConversion,
    /// Batches in flight on the GPU at most.
    pub depth: u32,
    /// Work per batch.
    pub workload: GpuWorkload,
    /// GPU checksum of every batch, compared with the CPU reference.
    pub checksum: bool,
    /// How packet bytes reach the kernel.
    pub staging: GpuStaging,
    /// Recorders writing each batch's product (`record`), in config order.
    pub record: Vec<crate::model::RecorderId>,
    /// Egress sinks sending each batch's product downstream (`egress`), in config order:
    /// one heap (SPEAD) or message (UCX) per product.
    pub egress: Vec<crate::model::EgressId>,
    /// What those recorders and sinks get (`product`); `None` when `record` and `egress`
    /// are empty.
    pub product: Option<GpuProduct>,
}

/// What a GPU stage copies back to host memory per batch for its recorders and egress sinks
/// (`product`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuProduct {
    /// `"batch"`: the batch output (reordered, converted samples), `out_batch_bytes`.
    Batch,
    /// `"workload"`: the workload's result (FFT spectra, GEMM `C`).
    Workload,
}

impl GpuProduct {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            GpuProduct::Batch => "batch",
            GpuProduct::Workload => "workload",
        }
    }
}

fn round(n: u64) -> u64 {
    n.div_ceil(GPU_ALIGN) * GPU_ALIGN
}

impl GpuStage {
    /// The most packets one batch holds: `packets_per_batch`, or
    /// [`max_packets`](Self::max_packets) for SPEAD heap assembly (the config's
    /// `packets_per_batch` either way).
    pub fn packets_per_batch_max(&self) -> u32 {
        self.max_packets.unwrap_or(self.packets_per_batch)
    }

    /// Output bytes per slot.
    pub fn out_slot_bytes(&self) -> u64 {
        u64::from(self.max_payload / 4) * u64::from(self.conversion.out_bytes_per_word())
    }

    /// Output bytes per batch.
    pub fn out_batch_bytes(&self) -> u64 {
        u64::from(self.packets_per_batch) * self.out_slot_bytes()
    }

    /// Bytes of the workload's result per batch (`rtdaq_gpu::Workload::output_bytes`).
    pub fn workload_output_bytes(&self) -> u64 {
        match self.workload {
            GpuWorkload::None => 0,
            GpuWorkload::Fft => self.out_batch_bytes() / (FFT_LEN * 8) * FFT_LEN * 8,
            GpuWorkload::Gemm => GEMM_DIM * GEMM_DIM * 4,
        }
    }

    /// Bytes of one batch's product (0 without recorders or egress sinks).
    pub fn product_bytes(&self) -> u64 {
        match self.product {
            None => 0,
            Some(GpuProduct::Batch) => self.out_batch_bytes(),
            Some(GpuProduct::Workload) => self.workload_output_bytes(),
        }
    }

    /// Pinned host memory one queue's pipeline allocates for its products (`depth` ×
    /// [`product_bytes`](Self::product_bytes); `rtdaq_gpu::Pipeline::host_footprint`).
    pub fn product_host_bytes(&self) -> u64 {
        self.product_bytes() * u64::from(self.depth)
    }

    /// Device memory one queue's pipeline allocates (the same arithmetic as
    /// `rtdaq_gpu::Pipeline::footprint`; a runtime test keeps them equal).
    pub fn device_bytes(&self) -> u64 {
        let ppb = u64::from(self.packets_per_batch);
        let mask_words = ppb.div_ceil(32);
        let descs = u64::from(self.packets_per_batch_max());
        let mut per = round(descs * DESC_BYTES) + round(16 + mask_words * 4);
        per += round(self.out_batch_bytes());
        if !matches!(self.mode, BatchMode::Gather) && self.max_packets.is_none() {
            // The claim kernel's slot owners (reorder of single packets).
            per += round(ppb * 4);
        }
        if self.staging != GpuStaging::Mapped {
            per += round(ppb * u64::from(self.max_payload));
        }
        let workload = match self.workload {
            GpuWorkload::None => 0,
            GpuWorkload::Fft => {
                let n = self.out_batch_bytes() / (FFT_LEN * 8);
                2 * round(n * FFT_LEN * 8)
            }
            GpuWorkload::Gemm => 2 * round(GEMM_DIM * GEMM_DIM * 4) + (32 << 20),
        };
        per * u64::from(self.depth) + workload
    }
}
