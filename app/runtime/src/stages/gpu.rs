//! The GPU consumer stage (feature `gpu`): `host_pinned` regions and, for each RX queue with
//! `gpu_stage = "name"`, a [`GpuStage`] that batches the queue's packets into an
//! `rtdaq_gpu::Pipeline`. It is the chain's last [`Stage`]: the consumer loop
//! (`queue::consume`) hands it each packet after validate and record, polls it
//! every turn and releases only the ring slots below [`Stage::holds_from`].
//!
//! ## What the stage does per packet (no copy, no allocation)
//! The consumer (the indirect queue's consumer thread, or the direct queue's I/O thread)
//! validates each packet on the CPU (stage 1), then this stage adds a descriptor (device address of the
//! packet in the mapped pinned region, the low 32 bits of its sequence number, its length)
//! to the batch being built. The packet's buffer stays where the engine put it: the stage
//! keeps the **ring slot** holding its burst ([`Stage::holds_from`]) until every batch that
//! refers to the burst came back from the GPU ([`Pipeline::poll_completed`]); only then does
//! the loop clear the burst (its buffers return to the pool) and release the slot.
//!
//! A batch is handed to the GPU when it holds `packets_per_batch` packets, when (reorder
//! mode) a packet of another batch id arrives, or when the queue's `timeout_us` passed since
//! its first packet. When the pipeline already has `depth` batches in flight it refuses the
//! batch ([`GpuError::Busy`]): the batch is dropped and counted (`gpu_busy`, lost), and RX
//! goes on. When the GPU holds every ring slot, the I/O thread counts `ring_full` drops
//! (indirect) or this stage counts `gpu_busy` drops (direct): RX never waits for the GPU.
//!
//! With `checksum = true` the stage computes the batch checksum on the CPU as the packets
//! are added, with the same rules as the kernels ([`rtdaq_gpu::reference`]: slot claims in
//! descriptor order, conversion, zero fill) from the same bytes the GPU reads, and compares
//! it with the GPU's checksum when the batch completes.

use crate::error::RuntimeError;
use crate::gpu_region::{GpuMap, GpuRegionMem};
use crate::observe::gpu_report::GpuCounters;
use crate::pacer::now_ns;
use crate::product_sinks::ProductSinks;
use crate::queue::stats::QueueStats;
use crate::stages::{Drain, HeapPiece, Notes, Packet, Stage};
use rtdaq_config::model::{
    BatchMode, Config, GpuProduct, GpuStage as StageConfig, GpuStaging, GpuWorkload, MemoryRegion,
    Placement, RegionKind, SampleConversion, SampleIn, SampleOut, StreamFormat,
};
use rtdaq_core::traits::QueueResources;
use rtdaq_core::traits::Segment;
use rtdaq_core::wire::SeqHeader;
use rtdaq_core::DropReason;
use rtdaq_gpu::{
    reference, BatchLayout, Conversion, DeviceMem, FloatFormat, Gpu, GpuError, HostPinned,
    IntFormat, Mode, PacketDesc, Pipeline, PipelineConfig, Product, SlotMode, Staging, Workload,
};
use std::collections::VecDeque;
use std::os::fd::AsRawFd;

fn gpu_err(e: GpuError) -> RuntimeError {
    RuntimeError::Gpu(e.to_string())
}

/// The `rtdaq_gpu` pipeline settings of a configured stage.
pub fn pipeline_config(s: &StageConfig) -> PipelineConfig {
    let conversion = match s.conversion {
        SampleConversion::None => Conversion::Copy,
        SampleConversion::Convert { from, to } => Conversion::Convert {
            from: match from {
                SampleIn::Int8 => IntFormat::I8,
                SampleIn::Int16Le => IntFormat::I16Le,
                SampleIn::Int16Be => IntFormat::I16Be,
                SampleIn::Int4 => IntFormat::I4,
            },
            to: match to {
                SampleOut::Fp16 => FloatFormat::F16,
                SampleOut::Bf16 => FloatFormat::Bf16,
                SampleOut::Fp32 => FloatFormat::F32,
            },
        },
    };
    let slots = match s.mode {
        BatchMode::ReorderModulo => Some(SlotMode::Modulo),
        BatchMode::ReorderBitFields {
            slot_shift,
            slot_bits,
            batch_shift,
            batch_bits,
        } => Some(SlotMode::BitFields {
            slot_shift,
            slot_bits,
            batch_shift,
            batch_bits,
        }),
        BatchMode::Gather => None,
    };
    let mode = match (slots, s.max_packets) {
        (None, _) => Mode::Gather,
        (Some(m), None) => Mode::Reorder(m),
        // SPEAD heap assembly: one slot per heap (config rule: reorder on a SPEAD stream).
        (Some(slots), Some(max_packets)) => Mode::Pieces { slots, max_packets },
    };
    PipelineConfig {
        layout: BatchLayout {
            packets_per_batch: s.packets_per_batch,
            payload_offset: s.payload_offset,
            max_payload: s.max_payload,
            conversion,
            mode,
        },
        staging: match s.staging {
            GpuStaging::Mapped => Staging::Mapped,
            GpuStaging::CopyPerPacket => Staging::CopyPerPacket,
            GpuStaging::CopyBatched => Staging::CopyBatched,
        },
        depth: s.depth as usize,
        workload: match s.workload {
            GpuWorkload::None => Workload::None,
            GpuWorkload::Fft => Workload::Fft,
            GpuWorkload::Gemm => Workload::Gemm,
        },
        checksum: s.checksum,
        product: match s.product {
            None => Product::None,
            Some(GpuProduct::Batch) => Product::Batch,
            Some(GpuProduct::Workload) => Product::Workload,
        },
    }
}

/// Start-up checks of a config that uses a GPU: the driver (`no CUDA driver found
/// (libcuda.so)` without one), each GPU, NVRTC / cuFFT / cuBLAS as the stages need them, and
/// the device memory of each GPU (stages' pipelines) against its free memory.
pub(crate) fn check(config: &Config) -> Result<(), RuntimeError> {
    rtdaq_gpu::require_driver().map_err(gpu_err)?;
    if !config.gpu_stages.is_empty() {
        rtdaq_gpu::require_nvrtc().map_err(gpu_err)?;
    }
    if config
        .gpu_stages
        .iter()
        .any(|s| s.workload == GpuWorkload::Fft)
    {
        rtdaq_gpu::require_cufft().map_err(gpu_err)?;
    }
    if config
        .gpu_stages
        .iter()
        .any(|s| s.workload == GpuWorkload::Gemm)
    {
        rtdaq_gpu::require_cublas().map_err(gpu_err)?;
    }
    if !config.engine_caps().device_rx {
        if let Some(r) = config
            .memory_regions
            .iter()
            .find(|r| r.kind == RegionKind::Device)
        {
            return Err(RuntimeError::Gpu(format!(
                "memory region `{}` is kind \"device\": the {} engine does not receive into GPU memory (the ibverbs engine does, registering the region's dma-buf, and the DPDK engine, mapping it for the port's device); use kind = \"host_pinned\" with a gpu_stage",
                r.name,
                config.engine_kind().as_str()
            )));
        }
    }
    for g in config.summary().gpus {
        let gpu = Gpu::open(g.gpu).map_err(gpu_err)?;
        gpu.check_footprint("the config's GPU stages", g.device_bytes() as usize)
            .map_err(gpu_err)?;
    }
    Ok(())
}

/// Allocates a GPU region; lives for the process. `host_pinned`: page-locked, mapped into
/// its GPU. `device`: GPU memory (64 KiB aligned), with `dmabuf` exported whole as a dma-buf,
/// which a NIC registers (`ibv_reg_dmabuf_mr`); an export the GPU or driver refuses is an
/// error here, before any engine opens. Without `dmabuf` (DPDK) the engine maps the address
/// for its port's device.
pub(crate) fn alloc_region(
    r: &MemoryRegion,
    size: usize,
    dmabuf: bool,
) -> Result<(GpuRegionMem, GpuMap), RuntimeError> {
    let Placement::Gpu(id) = r.placement else {
        return Err(RuntimeError::Gpu(format!(
            "memory region `{}` is not placed on a GPU",
            r.name
        )));
    };
    let gpu = Gpu::open(id).map_err(gpu_err)?;
    if r.kind == RegionKind::Device {
        let mem = DeviceMem::new(&gpu, size).map_err(|e| {
            RuntimeError::Gpu(format!(
                "memory region `{}`: cannot allocate {size} bytes of device memory on GPU {id}: {e}",
                r.name
            ))
        })?;
        let map = GpuMap {
            gpu: id,
            host_base: mem.device_ptr() as usize,
            dev_base: mem.device_ptr(),
            len: mem.len(),
        };
        let dmabuf_fd = if dmabuf {
            let buf = mem.export_dmabuf(0, mem.len()).map_err(|e| {
                RuntimeError::Gpu(format!(
                    "memory region `{}` (device memory on GPU {id}): the NIC reaches it through a dma-buf, and exporting one failed: {e}; GPUDirect RDMA needs a discrete GPU with dma-buf support (open kernel modules, CUDA >= 11.7, Linux >= 5.12); otherwise use kind = \"host_pinned\"",
                    r.name
                ))
            })?;
            let fd = buf.fd.as_raw_fd();
            // Lives for the process: the NIC's registration uses it until exit.
            Box::leak(Box::new(buf));
            Some(fd)
        } else {
            None
        };
        log::info!(
            "memory region `{}`: {} bytes of device memory on GPU {id} at {:#x}{}",
            r.name,
            map.len,
            map.dev_base,
            match dmabuf_fd {
                Some(fd) => format!(", exported as dma-buf fd {fd} for the NIC"),
                None => ", mapped by the engine for the NIC (GPU pages of 64 KiB)".to_owned(),
            }
        );
        // Lives for the process: the pool, the NIC and the GPU stage use the memory until
        // it exits.
        Box::leak(Box::new(mem));
        return Ok((GpuRegionMem::Device { dmabuf_fd }, map));
    }
    let pinned = HostPinned::new(&gpu, size).map_err(|e| {
        RuntimeError::Gpu(format!(
            "memory region `{}`: cannot allocate {size} bytes of pinned host memory for GPU {id}: {e}",
            r.name
        ))
    })?;
    let pinned: &'static mut HostPinned = Box::leak(Box::new(pinned));
    let map = GpuMap {
        gpu: id,
        host_base: pinned.host_ptr() as usize,
        dev_base: pinned.device_ptr(),
        len: pinned.len(),
    };
    Ok((GpuRegionMem::Pinned(pinned.as_mut_slice()), map))
}

/// Builds the stage of every RX queue with `gpu_stage` (in `res.rx` order). Cold path.
pub(crate) fn prepare(
    config: &Config,
    gpu_maps: &[Option<GpuMap>],
    rx: &[QueueResources<'static>],
    rx_stats: &'static [QueueStats],
) -> Result<Vec<Option<GpuStage>>, RuntimeError> {
    let mut out = Vec::with_capacity(rx.len());
    for (k, r) in rx.iter().enumerate() {
        let qc = &config.interfaces[r.interface].rx_queues[r.queue];
        let Some(sid) = qc.gpu_stage else {
            out.push(None);
            continue;
        };
        let sc = &config.gpu_stages[sid.0];
        let name = format!("{}.rx{}", config.interfaces[r.interface].name, r.queue);
        let map = gpu_maps[qc.memory_regions[0].0].ok_or_else(|| {
            RuntimeError::Gpu(format!(
                "{name}: GPU stage \"{}\" needs a host_pinned or device region",
                sc.name
            ))
        })?;
        let gpu = Gpu::open(sc.gpu).map_err(gpu_err)?;
        let pipe = Pipeline::new(&gpu, pipeline_config(sc))
            .map_err(|e| RuntimeError::Gpu(format!("{name}: GPU stage \"{}\": {e}", sc.name)))?;
        let mut pipe = pipe;
        warm_up(&mut pipe, &map).map_err(|e| {
            RuntimeError::Gpu(format!(
                "{name}: GPU stage \"{}\": warm-up batch: {e}",
                sc.name
            ))
        })?;
        log::info!(
            "{name}: GPU stage \"{}\" on GPU {} ({}): kernels for {}, {} batches of {} packets in flight",
            sc.name,
            sc.gpu,
            gpu.name().unwrap_or_default(),
            pipe.kernel_arch(),
            sc.depth,
            sc.packets_per_batch_max()
        );
        let rtdaq_format = matches!(config.interfaces[r.interface].format, StreamFormat::Rtdaq);
        out.push(Some(GpuStage::new(
            pipe,
            map,
            u64::from(qc.timeout_us) * 1000,
            &rx_stats[k],
            rtdaq_format,
        )));
    }
    Ok(out)
}

/// Runs one batch of one empty packet through the pipeline and waits for it. Cold path:
/// cudarc resolves each CUDA entry point on its first call (a small allocation each), so
/// every function the data path calls (copies, memsets, launches, event record/query, the
/// workload's cuFFT/cuBLAS call) is called once here, before any queue thread arms the
/// allocation audit.
fn warm_up(pipe: &mut Pipeline, map: &GpuMap) -> Result<(), GpuError> {
    let d = PacketDesc {
        addr: map.dev_base,
        seq: 0,
        len: 0,
        offset: 0,
    };
    pipe.submit(&[d])?;
    while pipe.in_flight() > 0 {
        let _ = pipe.poll_completed()?;
        let _ = pipe.wait_completed()?;
    }
    Ok(())
}

/// A batch on the GPU: its token, the first ring slot it refers to, its CPU checksum, its
/// number (batches built, dropped ones included) and its first packet's receive time.
#[derive(Debug, Clone, Copy)]
struct Flight {
    token: u64,
    first_slot: u64,
    cpu_checksum: u64,
    batch: u64,
    first_rx_ns: u64,
}

/// The batch being built and the CPU reference checksum of it.
struct Building {
    descs: Box<[PacketDesc]>,
    n: usize,
    /// Batch id (reorder): key of descriptor 0.
    key: u32,
    first_ns: u64,
    /// Receive time of the first packet (ns since the epoch).
    first_rx_ns: u64,
    /// Ring slot (number) of the first packet.
    first_slot: u64,
    /// Slots claimed so far (CPU reference), one bit each.
    claimed: Box<[u32]>,
    /// One converted output slot (CPU reference).
    scratch: Box<[u8]>,
    /// CPU checksum so far.
    acc: u64,
}

/// One queue's GPU stage. Built by `prepare`; driven by the queue's consumer loop.
pub struct GpuStage {
    pipe: Pipeline,
    layout: BatchLayout,
    map: GpuMap,
    checksum: bool,
    timeout_ns: u64,
    /// The queue's counters: `gpu`, and the consumer's drops (`gpu_busy`).
    stats: &'static QueueStats,
    /// The stream is rtdaq's own format: the stage reads the sequence header itself (also
    /// when the validator only counts).
    rtdaq_format: bool,
    /// Ring slot of the packet being added.
    slot: u64,
    /// End of the run: when the stage stops waiting for the batches in flight.
    deadline_ns: Option<u64>,
    b: Building,
    flights: VecDeque<Flight>,
    /// Batches built so far (submitted or dropped): the next batch's number.
    built: u64,
    /// Sinks of each completed batch's product (`[[gpu_stages]] record` and `egress`).
    products: ProductSinks,
}

impl std::fmt::Debug for GpuStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuStage")
            .field("layout", &self.layout)
            .field("in_flight", &self.flights.len())
            .finish()
    }
}

/// `sum w[j] * (2 (base + j) + 1)` over the little-endian `u32` words `w` of `bytes`, mod
/// 2^64: the contribution of one output slot starting at word `base` to
/// [`reference::checksum`] of the whole batch. Never allocates.
pub fn slot_checksum(bytes: &[u8], base: u64) -> u64 {
    let mut acc = 0u64;
    let mut i = base.wrapping_mul(2).wrapping_add(1);
    for c in bytes.chunks_exact(4) {
        let w = u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        acc = acc.wrapping_add(w.wrapping_mul(i));
        i = i.wrapping_add(2);
    }
    acc
}

/// Pieces mode: the share of one piece (`bytes` = its payload; `payload_offset` is 0 there)
/// in [`reference::checksum`] of the batch of key `key`: converted into `scratch` (at least
/// one output slot long), summed at its place in its slot. A piece of another batch key, or
/// one that does not fit its slot, is foreign and adds 0, as on the GPU. Never allocates.
pub fn piece_checksum(
    l: &BatchLayout,
    key: u32,
    bytes: &[u8],
    seq: u32,
    offset: u32,
    scratch: &mut [u8],
) -> u64 {
    let Some((k, slot)) = l.key_slot(seq) else {
        return 0;
    };
    let avail = l.piece_avail(bytes.len() as u32);
    if k != key || slot >= l.packets_per_batch || !l.piece_fits(offset, avail) {
        return 0;
    }
    let ratio = l.conversion.out_bytes_per_word() as usize;
    let out = &mut scratch[..(avail as usize).div_ceil(4) * ratio];
    let start = l.payload_offset as usize;
    reference::convert_into_slot(l.conversion, &bytes[start..start + avail as usize], out);
    let words_per_slot = (l.out_slot_bytes() / 4) as u64;
    let base = u64::from(slot) * words_per_slot + u64::from(offset / 4) * (ratio / 4) as u64;
    slot_checksum(out, base)
}

impl GpuStage {
    fn new(
        pipe: Pipeline,
        map: GpuMap,
        timeout_ns: u64,
        stats: &'static QueueStats,
        rtdaq_format: bool,
    ) -> Self {
        let cfg = *pipe.config();
        let layout = cfg.layout;
        let descs = layout.descs_per_batch() as usize;
        GpuStage {
            layout,
            map,
            checksum: cfg.checksum,
            timeout_ns,
            stats,
            rtdaq_format,
            slot: 0,
            deadline_ns: None,
            b: Building {
                descs: vec![PacketDesc::default(); descs].into_boxed_slice(),
                n: 0,
                key: 0,
                first_ns: 0,
                first_rx_ns: 0,
                first_slot: 0,
                claimed: vec![0u32; layout.mask_words()].into_boxed_slice(),
                scratch: vec![
                    0u8;
                    if cfg.checksum {
                        layout.out_slot_bytes()
                    } else {
                        0
                    }
                ]
                .into_boxed_slice(),
                acc: 0,
            },
            flights: VecDeque::with_capacity(cfg.depth),
            built: 0,
            products: ProductSinks::default(),
            pipe,
        }
    }

    /// The sinks of the stage's products (built by `record::prepare` and
    /// `egress::prepare`); cold path.
    pub(crate) fn attach_products(&mut self, sinks: ProductSinks) {
        self.products = sinks;
    }

    /// Adds one packet (validated by stage 1, which left its sequence number or heap piece
    /// in `notes`) to the batch being built; its buffer stays where the engine put it.
    #[inline]
    fn add_packet(&mut self, p: &Packet<'_>, notes: &Notes) {
        self.slot = p.slot;
        match p.data {
            // GPU memory (a NIC wrote it): the whole packet (the CPU reads none of it: no
            // sequence number, no CPU reference; the stage gathers in arrival order, a config
            // rule), or the data segment of a header-data split, placed by the sequence number
            // the validator read in the headers.
            Segment::Device { ptr, len } => {
                let seq = notes.seq.map(|s| s as u32);
                self.add(ptr as usize as *const u8, len as usize, None, seq, p.rx_ns);
            }
            // Whole packets in the queue's one GPU region (config rule).
            Segment::Host(bytes) => {
                if matches!(self.layout.mode, Mode::Pieces { .. }) {
                    self.add_piece(p.payload, notes.piece, p.rx_ns);
                    return;
                }
                // rtdaq's header even when the validator counts only (validate = "count" is
                // refused with reorder, but gather takes it too); an instrument format: the
                // sequence number the validator just placed the payload at.
                let seq = if self.rtdaq_format {
                    SeqHeader::parse(p.payload).ok().map(|h| h.seq as u32)
                } else {
                    notes.seq.map(|s| s as u32)
                };
                self.add(bytes.as_ptr(), bytes.len(), Some(bytes), seq, p.rx_ns);
            }
        }
    }

    /// SPEAD heap assembly: adds the new bytes of a heap (where the validator placed them)
    /// as one piece; repeats and packets of no data are counted, never placed.
    fn add_piece(&mut self, payload: &[u8], piece: HeapPiece, rx_ns: u64) {
        let g = &self.stats.gpu;
        match piece {
            HeapPiece::Data {
                heap_cnt,
                offset,
                start,
                len,
            } => {
                let bytes = &payload[start..start + len];
                // A heap offset beyond 32 bits cannot be in a slot (heap_bytes <= 1 MiB).
                let offset = u32::try_from(offset).unwrap_or(u32::MAX);
                self.add_at(bytes, heap_cnt as u32, offset, rx_ns);
            }
            // The validator counted it in `duplicates`; the GPU stage too.
            HeapPiece::Duplicate => GpuCounters::add(&g.duplicates, 1),
            // The validator counted it in `too_old`; its heap left the batch: foreign.
            HeapPiece::TooOld => GpuCounters::add(&g.foreign, 1),
            // End of stream, no payload bytes: nothing to place (counted by the validator).
            HeapPiece::Control => {}
            // Malformed (counted by the validator): no heap, no slot.
            HeapPiece::None => GpuCounters::add(&g.no_slot, 1),
        }
    }

    /// Adds one piece (`bytes` at input byte `offset` of heap `seq`'s slot) to the batch, as
    /// [`add`](Self::add) does a packet.
    fn add_at(&mut self, bytes: &[u8], seq: u32, offset: u32, rx_ns: u64) {
        let stats = self.stats;
        let Some(addr) = self.map.device_addr(bytes.as_ptr()) else {
            GpuCounters::add(&stats.gpu.not_in_region, 1);
            return;
        };
        let Some((key, _)) = self.layout.key_slot(seq) else {
            GpuCounters::add(&stats.gpu.no_slot, 1);
            return;
        };
        self.push(
            PacketDesc {
                addr,
                seq,
                len: bytes.len() as u32,
                offset,
            },
            key,
            Some(bytes),
            rx_ns,
        );
    }

    /// Adds one packet to the batch (handing over the batch first when the packet belongs
    /// to another batch id, and after it when the batch is full). `p` is its address in the
    /// region (CPU address of a `host_pinned` packet, device address of a `device` one);
    /// `bytes` its contents when the CPU can read them (for the CPU reference).
    fn add(
        &mut self,
        p: *const u8,
        len: usize,
        bytes: Option<&[u8]>,
        seq: Option<u32>,
        rx_ns: u64,
    ) {
        let stats = self.stats;
        // `config check` refuses queues whose packets lie outside their region (AF_PACKET);
        // should one arrive anyway, it is counted, never skipped silently.
        let Some(addr) = self.map.device_addr(p) else {
            GpuCounters::add(&stats.gpu.not_in_region, 1);
            return;
        };
        let key_slot = match (self.layout.mode, seq) {
            (Mode::Gather, s) => Some((0, s.unwrap_or(0))),
            (_, Some(s)) => self.layout.key_slot(s).map(|(k, _)| (k, s)),
            // No sequence header: the validator counts it malformed; it has no slot.
            (_, None) => None,
        };
        let Some((key, seq)) = key_slot else {
            GpuCounters::add(&stats.gpu.no_slot, 1);
            return;
        };
        let d = PacketDesc {
            addr,
            seq,
            len: len as u32,
            offset: 0,
        };
        self.push(d, key, bytes, rx_ns);
    }

    /// Puts descriptor `d` of batch key `key` in the batch: hands over the batch being
    /// built first when `key` is another, and after it when it is full.
    fn push(&mut self, d: PacketDesc, key: u32, bytes: Option<&[u8]>, rx_ns: u64) {
        if self.b.n > 0 && key != self.b.key {
            self.submit(false);
        }
        if self.b.n == 0 {
            self.b.key = key;
            self.b.first_ns = now_ns();
            self.b.first_rx_ns = rx_ns;
            self.b.first_slot = self.slot;
        }
        let i = self.b.n;
        self.b.descs[i] = d;
        self.b.n += 1;
        if let (true, Some(bytes)) = (self.checksum, bytes) {
            if let Mode::Pieces { .. } = self.layout.mode {
                self.cpu_piece(bytes, d.seq, d.offset);
            } else {
                self.cpu_place(i, bytes, d.seq);
            }
        }
        if self.b.n == self.b.descs.len() {
            self.submit(false);
        }
    }

    /// The CPU reference of descriptor `i`: claims its slot (first in descriptor order wins,
    /// other batch ids are foreign), converts its payload into the slot and adds the slot's
    /// share of the checksum. Zero-filled slots add 0.
    fn cpu_place(&mut self, i: usize, bytes: &[u8], seq: u32) {
        let l = &self.layout;
        let slot = match l.key_slot(seq) {
            None => i as u32,
            Some((k, s)) if k == self.b.key && s < l.packets_per_batch => s,
            Some(_) => return,
        };
        let (w, bit) = ((slot / 32) as usize, 1u32 << (slot % 32));
        if self.b.claimed[w] & bit != 0 {
            return;
        }
        self.b.claimed[w] |= bit;
        let avail = l.avail(bytes.len() as u32) as usize;
        let off = l.payload_offset as usize;
        let payload = if avail == 0 {
            &[][..]
        } else {
            &bytes[off..off + avail]
        };
        reference::convert_into_slot(l.conversion, payload, &mut self.b.scratch);
        let base = u64::from(slot) * (l.out_slot_bytes() / 4) as u64;
        self.b.acc = self
            .b
            .acc
            .wrapping_add(slot_checksum(&self.b.scratch, base));
    }

    /// The CPU reference of one piece (`bytes` = its payload, `payload_offset` is 0 in pieces
    /// mode): converts it and adds its share of the checksum at its place in its slot. A
    /// piece of another batch id, or one that does not fit, is foreign (adds 0).
    fn cpu_piece(&mut self, bytes: &[u8], seq: u32, offset: u32) {
        let sum = piece_checksum(
            &self.layout,
            self.b.key,
            bytes,
            seq,
            offset,
            &mut self.b.scratch,
        );
        self.b.acc = self.b.acc.wrapping_add(sum);
    }

    /// Hands the batch being built to the GPU, or drops it when `depth` batches are in
    /// flight (counted, RX goes on).
    fn submit(&mut self, timed_out: bool) {
        let n = self.b.n;
        if n == 0 {
            return;
        }
        self.poll_done();
        let stats = self.stats;
        let g = &stats.gpu;
        let add = crate::observe::gpu_report::GpuCounters::add;
        // The product's number in its file's index: the batch key (reorder: sequence number /
        // packets_per_batch) or the batch count (gather); a dropped batch leaves a gap.
        let batch = match self.layout.mode {
            Mode::Gather => self.built,
            Mode::Reorder(_) | Mode::Pieces { .. } => u64::from(self.b.key),
        };
        self.built += 1;
        match self.pipe.submit(&self.b.descs[..n]) {
            Ok(s) => {
                self.flights.push_back(Flight {
                    token: s.token,
                    first_slot: self.b.first_slot,
                    cpu_checksum: self.b.acc,
                    batch,
                    first_rx_ns: self.b.first_rx_ns,
                });
                add(&g.batches_submitted, 1);
                add(&g.packets, n as u64);
                if timed_out {
                    add(&g.batches_timed_out, 1);
                }
            }
            Err(GpuError::Busy { .. }) => {
                add(&g.batches_dropped, 1);
                add(&g.packets_dropped, n as u64);
                stats.consumer.record_drops(DropReason::GpuBusy, n as u64);
            }
            Err(_) => {
                add(&g.errors, 1);
                add(&g.batches_dropped, 1);
                add(&g.packets_dropped, n as u64);
            }
        }
        self.b.n = 0;
        self.b.acc = 0;
        self.b.claimed.fill(0);
    }

    /// Takes every finished batch: counts it, compares the checksums and hands its product
    /// to the product sinks. Never blocks.
    fn poll_done(&mut self) {
        let g = &self.stats.gpu;
        let add = crate::observe::gpu_report::GpuCounters::add;
        let now = now_ns();
        #[cfg(feature = "test-hooks")]
        if crate::test_hooks::gpu_frozen(now) {
            return;
        }
        // The watchdog's sign of GPU progress: nothing waits for the GPU, or a batch came
        // back (below).
        if self.flights.is_empty() {
            g.progress.progressed(now);
        }
        loop {
            match self.pipe.poll_completed() {
                Ok(Some(done)) => {
                    g.progress.progressed(now);
                    let f = self.flights.pop_front();
                    add(&g.batches_completed, 1);
                    add(&g.missing, u64::from(done.missing));
                    add(&g.duplicates, u64::from(done.duplicates));
                    add(&g.foreign, u64::from(done.foreign));
                    match f {
                        Some(f) if f.token == done.token => {
                            if let Some(sum) = done.checksum {
                                if sum == f.cpu_checksum {
                                    add(&g.checksum_ok, 1);
                                } else {
                                    add(&g.checksum_mismatch, 1);
                                }
                            }
                            if let Some(bytes) = done.product {
                                for sink in &mut self.products.record {
                                    sink.on_block(bytes, f.batch, f.first_rx_ns);
                                }
                                for sink in &mut self.products.egress {
                                    sink.on_block(bytes, f.first_rx_ns);
                                }
                            }
                        }
                        _ => add(&g.errors, 1),
                    }
                }
                Ok(None) => break,
                Err(_) => {
                    // A CUDA error (sticky): nothing in flight will come back.
                    add(&g.errors, 1);
                    self.flights.clear();
                    break;
                }
            }
        }
    }
}

impl Stage for GpuStage {
    /// Ring slots wait for the GPU; a direct queue whose every slot is held counts the
    /// packets it must drain as `gpu_busy`.
    fn holds(&self) -> Option<DropReason> {
        Some(DropReason::GpuBusy)
    }
    #[inline]
    fn on_packet(&mut self, p: &Packet<'_>, notes: &mut Notes) {
        self.add_packet(p, notes);
    }
    /// Completions, the batch timeout, the product sinks' timers.
    #[inline]
    fn poll(&mut self) {
        self.poll_done();
        let now = now_ns();
        if self.b.n > 0 && now.saturating_sub(self.b.first_ns) >= self.timeout_ns {
            self.submit(true);
        }
        for sink in &mut self.products.record {
            sink.tick(now);
        }
        for sink in &mut self.products.egress {
            sink.tick(now);
        }
    }
    /// The first slot of the oldest batch in flight, or of the batch being built.
    #[inline]
    fn holds_from(&self) -> u64 {
        let mut lim = u64::MAX;
        if let Some(f) = self.flights.front() {
            lim = f.first_slot;
        }
        if self.b.n > 0 {
            lim = lim.min(self.b.first_slot);
        }
        lim
    }
    /// Hands the last partial batch over, then waits (up to 10 s) for the batches in
    /// flight; past that the GPU did not finish: counted as an error, and its buffers are
    /// never reused.
    fn ending(&mut self) -> Drain {
        let deadline = match self.deadline_ns {
            Some(d) => d,
            None => {
                self.submit(false);
                *self.deadline_ns.insert(now_ns() + 10_000_000_000)
            }
        };
        self.poll_done();
        if self.flights.is_empty() {
            Drain::Done
        } else if now_ns() > deadline {
            GpuCounters::add(&self.stats.gpu.errors, 1);
            // Nothing in flight is waited for again.
            self.flights.clear();
            Drain::Abandoned
        } else {
            Drain::Pending
        }
    }
    /// What the product sinks hold goes to disk and downstream (also after an abandoned
    /// end).
    fn finish(&mut self) {
        for sink in &mut self.products.record {
            sink.finish();
        }
        for sink in &mut self.products.egress {
            sink.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::unwrap::{feed_burst, Unwrap};
    use crate::stages::validate::Validate;
    use crate::test_support::shipped_config;
    use crate::validator::Validator;
    use rtdaq_core::traits::RxBurst;
    use rtdaq_gpu::reference::{run_batch, RefPacket};

    /// `burst` (ring slot 0) through the chain validate -> `stage`, as the consumer loop
    /// hands it over.
    fn through_chain<B: RxBurst>(
        burst: &B,
        stage: GpuStage,
        stats: &'static QueueStats,
    ) -> (Validate, GpuStage) {
        let mut chain = (Validate::new(Validator::new(), stats), stage);
        feed_burst(burst, &mut chain, &mut Unwrap::new(false), 0, true, || 0);
        chain
    }

    /// The per-slot checksum summed over the slots equals the reference checksum of the
    /// whole batch output.
    #[test]
    fn slot_checksums_add_up_to_the_reference() {
        let layout = BatchLayout {
            packets_per_batch: 8,
            payload_offset: 32,
            max_payload: 64,
            conversion: Conversion::Convert {
                from: IntFormat::I16Le,
                to: FloatFormat::F32,
            },
            mode: Mode::Reorder(SlotMode::Modulo),
        };
        let pkts: Vec<Vec<u8>> = (0..8u32)
            .map(|k| (0..96u32).map(|b| (b * 7 + k * 13) as u8).collect())
            .collect();
        // seq 8..16 shuffled, one missing, one duplicate
        let seqs = [9u32, 8, 12, 11, 11, 15, 10, 13];
        let refs: Vec<RefPacket<'_>> = pkts
            .iter()
            .zip(seqs)
            .map(|(d, seq)| RefPacket {
                data: d,
                seq,
                offset: 0,
            })
            .collect();
        let mut out = vec![0u8; layout.out_batch_bytes()];
        run_batch(&layout, &refs, &mut out).unwrap();
        let want = reference::checksum(&out);
        let slot = layout.out_slot_bytes();
        let got = (0..8)
            .map(|s| slot_checksum(&out[s * slot..(s + 1) * slot], (s * slot / 4) as u64))
            .fold(0u64, u64::wrapping_add);
        assert_eq!(got, want);
    }

    /// Pieces mode: the pieces' checksum shares (as the stage adds them while a batch is
    /// built) add up to the reference checksum of the assembled batch, foreign pieces
    /// adding nothing.
    #[test]
    fn piece_checksums_add_up_to_the_reference() {
        let layout = BatchLayout {
            packets_per_batch: 4,
            payload_offset: 0,
            max_payload: 64,
            conversion: Conversion::Convert {
                from: IntFormat::I8,
                to: FloatFormat::F16,
            },
            mode: Mode::Pieces {
                slots: SlotMode::Modulo,
                max_packets: 32,
            },
        };
        let heap = |n: u32| -> Vec<u8> { (0..61u32).map(|j| (j * 5 + n * 3) as u8).collect() };
        let heaps: Vec<Vec<u8>> = (8..12).map(heap).collect();
        // (heap, offset, len): first pieces of 12 bytes, then 20, the last of what is left;
        // heap 10 misses a piece; two foreign pieces (other key, misaligned).
        let mut spec = Vec::new();
        for n in 8..12u32 {
            for (off, len) in [(0, 12), (12, 20), (32, 20), (52, 9)] {
                if !(n == 10 && off == 12) {
                    spec.push((n, off, len));
                }
            }
        }
        spec.push((13, 0, 8));
        spec.push((9, 2, 8));
        let refs: Vec<RefPacket<'_>> = spec
            .iter()
            .map(|&(n, off, len)| RefPacket {
                data: &heaps[(n as usize % 4).min(3)][off..off + len],
                seq: n,
                offset: off as u32,
            })
            .collect();
        let mut out = vec![0u8; layout.out_batch_bytes()];
        let st = run_batch(&layout, &refs, &mut out).unwrap();
        assert_eq!((st.placed, st.foreign), (4, 2));
        let mut scratch = vec![0u8; layout.out_slot_bytes()];
        let got = refs
            .iter()
            .map(|p| piece_checksum(&layout, 2, p.data, p.seq, p.offset, &mut scratch))
            .fold(0u64, u64::wrapping_add);
        assert_eq!(got, reference::checksum(&out));
    }

    /// `config check`'s GPU memory (rtdaq-config, no CUDA dependency) is the pipeline's
    /// real footprint.
    #[test]
    fn config_estimate_equals_pipeline_footprint() {
        let text = std::fs::read_to_string(shipped_config("host-loopback-udp-gpu.toml")).unwrap();
        for (from, to) in [
            ("", ""),
            ("workload = \"none\"", "workload = \"fft\""),
            ("workload = \"none\"", "workload = \"gemm\""),
            ("mode = \"reorder\"", "mode = \"gather\""),
            ("depth = 4 ", "staging = \"copy_batched\"\ndepth = 3 "),
        ] {
            let mut t = text.clone();
            if !from.is_empty() {
                assert!(t.contains(from), "{from}");
                t = t.replace(from, to);
            }
            if to.contains("gemm") {
                t = t.replace("max_payload = 7968", "max_payload = 8940");
            }
            if to.contains("gather") {
                t = t.replace("slot_mode = \"modulo\"", "");
            }
            let c = rtdaq_config::load_str(&t).unwrap();
            let s = &c.gpu_stages[0];
            let want = Pipeline::footprint(&pipeline_config(s)).unwrap() as u64;
            assert_eq!(s.device_bytes(), want, "{from} -> {to}");
        }
        // The products' pinned host memory, for both products.
        let text =
            std::fs::read_to_string(shipped_config("host-loopback-udp-gpu-record.toml")).unwrap();
        for t in [
            text.clone(),
            text.replace("product = \"workload\"", "product = \"batch\""),
        ] {
            let c = rtdaq_config::load_str(&t).unwrap();
            let s = &c.gpu_stages[0];
            let cfg = pipeline_config(s);
            assert_eq!(s.product_bytes(), cfg.product_bytes() as u64);
            assert_eq!(
                s.product_host_bytes(),
                Pipeline::host_footprint(&cfg) as u64
            );
            assert!(s.product_bytes() > 0);
        }
    }

    /// GPUDirect RX without an RDMA NIC (the GPU host has none): the shipped RoCE GPUDirect
    /// config's `device` region is allocated in GPU memory and exported whole as a dma-buf
    /// (what the ibverbs engine registers with `ibv_reg_dmabuf_mr`); its pool hands out
    /// device addresses the CPU never touches. Packets written at those addresses (by
    /// `cuMemcpyHtoD`, standing in for the NIC's RDMA writes) go through the queue's GPU
    /// stage: the validator counts them as in GPU memory, the stage's descriptors carry the
    /// buffers' device addresses, and the batch the GPU builds from them equals the CPU
    /// reference of the same bytes.
    #[test]
    fn device_region_is_a_dmabuf_and_feeds_the_stage() {
        use rtdaq_core::traits::DmaTarget;
        use rtdaq_core::{Burst, ConnId, PacketMeta, QueueId};
        if !rtdaq_gpu::driver_present() {
            rtdaq_testbed::require::skip_gpu("no CUDA driver");
            return;
        }
        let c = rtdaq_config::load_file(&shipped_config("host-roce-gpudirect.toml")).unwrap();
        let res = crate::memory::allocate(&c, false).unwrap();
        let rid = c.interfaces[0].rx_queues[0].memory_regions[0].0;
        let pool = res.pools[rid];
        assert!(!pool.is_cpu_accessible());
        let DmaTarget::DmaBuf { fd, offset } = pool.dma_target() else {
            panic!("a device pool is exported as a dma-buf: {pool:?}");
        };
        assert_eq!(offset, 0);
        let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        assert!(
            link.to_string_lossy().contains("dmabuf"),
            "{}",
            link.display()
        );
        let map = res.gpu_maps[rid].unwrap();
        assert_eq!(
            (map.dev_base, map.host_base as u64),
            (pool.base_addr(), pool.base_addr())
        );

        let mut stages = prepare(&c, &res.gpu_maps, res.rx, res.rx_stats).unwrap();
        let stage = stages[0].take().expect("the queue has a GPU stage");
        let layout = stage.layout;
        assert_eq!(layout.mode, Mode::Gather);
        let gpu = Gpu::open(map.gpu).unwrap();
        let n = (layout.packets_per_batch as usize).min(16);
        let len = (layout.payload_offset + layout.max_payload) as usize;
        let mut burst: Burst<'static, 64> = Burst::new(QueueId(0));
        let mut sent = Vec::new();
        for k in 0..n {
            let mut b = pool.get().unwrap();
            let bytes: Vec<u8> = (0..len).map(|j| (j * 31 + k * 7 + 1) as u8).collect();
            gpu.copy_to_addr(b.addr(), &bytes).unwrap();
            b.set_len(len);
            let meta = PacketMeta {
                len: len as u32,
                conn: ConnId(1),
                ..PacketMeta::default()
            };
            assert!(burst.push_single(b, meta).is_ok());
            sent.push(bytes);
        }
        let stats = &res.rx_stats[0];
        let (v, mut stage) = through_chain(&burst, stage, stats);
        assert_eq!(v.validator.stats().in_gpu_memory, n as u64);
        assert_eq!(
            (v.validator.stats().received, v.validator.stats().malformed),
            (n as u64, 0)
        );
        assert_eq!(stage.b.n, n);
        for (k, d) in stage.b.descs[..n].iter().enumerate() {
            assert_eq!(
                (d.addr, d.len as usize),
                (burst.packet(k).unwrap().segments()[0].addr(), len)
            );
        }
        stage.submit(true);
        let done = stage.pipe.wait_completed().unwrap().unwrap();
        assert_eq!(done.placed as usize, n);
        let out = done.output;
        let refs: Vec<RefPacket<'_>> = sent
            .iter()
            .map(|d| RefPacket {
                data: d,
                seq: 0,
                offset: 0,
            })
            .collect();
        let mut want = vec![0u8; layout.out_batch_bytes()];
        run_batch(&layout, &refs, &mut want).unwrap();
        let mut got = vec![0u8; want.len()];
        stage.pipe.copy_to_host(out, &mut got).unwrap();
        assert!(
            got == want,
            "the batch built from device memory differs from the CPU reference"
        );
        println!("{n} packets in the dma-buf region -> GPU stage: batch equals the CPU reference");
    }

    /// Issue #22: a packet the stage cannot take is counted, never skipped silently. A
    /// packet outside the queue's pinned region (a buffer of an ordinary heap pool, as
    /// AF_PACKET's ring would be) counts as `not_in_region`; an in-region packet without a
    /// sequence header counts as `no_slot` in this reorder stage; both show in the report's
    /// `gpu` section and count as lost. A good packet goes into the batch.
    #[test]
    fn packets_the_stage_cannot_take_are_counted() {
        use rtdaq_core::{BufferPool, Burst, PacketMeta, QueueId};
        use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
        if !rtdaq_gpu::driver_present() {
            rtdaq_testbed::require::skip_gpu("no CUDA driver");
            return;
        }
        let c = rtdaq_config::load_file(&shipped_config("host-loopback-udp-gpu.toml")).unwrap();
        let res = crate::memory::allocate(&c, false).unwrap();
        let rid = c.interfaces[0].rx_queues[0].memory_regions[0].0;
        let pinned = res.pools[rid];
        let mut stages = prepare(&c, &res.gpu_maps, res.rx, res.rx_stats).unwrap();
        let stage = stages[0].take().expect("the queue has a GPU stage");
        assert!(matches!(stage.layout.mode, Mode::Reorder(_)));
        // A pool over ordinary heap memory: not mapped into the GPU.
        let mem: &'static mut [u8] = Box::leak(vec![0u8; 4 * 2048].into_boxed_slice());
        let links: &'static mut [AtomicU32] =
            Box::leak((0..4).map(|_| AtomicU32::new(0)).collect::<Box<[_]>>());
        let heap: &'static BufferPool<'static> =
            Box::leak(Box::new(BufferPool::new(mem, links, 2048).unwrap()));
        let mut gen = crate::validator::PayloadGen::new(1, 1400);
        let mut burst: Burst<'static, 64> = Burst::new(QueueId(0));
        let meta = |len: usize| PacketMeta {
            len: len as u32,
            ..PacketMeta::default()
        };
        // 1: a good packet in the region; 2: a good packet outside it; 3: no header.
        for (pool, header) in [(pinned, true), (heap, true), (pinned, false)] {
            let mut b = pool.get().unwrap();
            let len = if header {
                gen.fill(b.slot_mut().unwrap(), 0)
            } else {
                b.slot_mut().unwrap()[..16].fill(0xab);
                16
            };
            b.set_len(len);
            assert!(burst.push_single(b, meta(len)).is_ok());
        }
        let stats = &res.rx_stats[0];
        let (v, mut stage) = through_chain(&burst, stage, stats);
        assert_eq!(v.validator.stats().received, 3, "stage 1 saw every packet");
        assert_eq!(
            stage.b.n, 1,
            "only the good in-region packet is in the batch"
        );
        assert_eq!(stats.gpu.not_in_region.load(Relaxed), 1);
        assert_eq!(stats.gpu.no_slot.load(Relaxed), 1);
        let report = crate::observe::gpu_report::GpuReport::of(&c, 0, 0, &stats.gpu).unwrap();
        assert_eq!((report.not_in_region, report.no_slot), (1, 1));
        assert!(
            report.to_string().contains("not_in_region 1, no_slot 1"),
            "{report}"
        );
        let q =
            crate::observe::report::QueueReport::rx("lo", 0, None, &Default::default(), 1.0, None)
                .with_gpu(Some(report));
        assert_eq!(crate::observe::outcome::judge(&[q], 0), (2, false));
        stage.submit(true);
        let _ = stage.pipe.wait_completed();
        drop(burst);
    }
}
