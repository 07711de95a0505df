//! The batch pipeline the runtime drives: descriptors of received packets in, a reordered and
//! converted batch in device memory out, at most `depth` batches in flight on one stream.
//!
//! Per batch, on the pipeline's stream: (staging copies) -> descriptor upload -> reset of the
//! result block -> claim kernel (reorder) -> place kernel (pieces mode: output reset ->
//! scatter kernel) -> checksum kernel (optional) ->
//! result block to pinned host memory -> workload (optional) -> product to pinned host
//! memory (optional) -> event. [`Pipeline::submit`]
//! enqueues all of it and returns at once; [`Pipeline::poll_completed`] checks the oldest
//! batch's event without blocking. After construction neither allocates.

use crate::device::{Gpu, Stream};
use crate::error::{GpuError, Result};
use crate::kernels::Kernels;
use crate::layout::{BatchLayout, Mode, PacketDesc, SlotMode};
use crate::memory::DEVICE_ALIGN;
use crate::sys::{self, ClaimArgs, PlaceArgs, ScatterArgs};
use crate::workload::{Workload, WorkloadState};

/// How packet bytes reach the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Staging {
    /// The kernel reads the packets where they are, through their mapped pinned-host (or
    /// device) addresses: no copy, the reads cross PCIe/C2C inside the kernel.
    #[default]
    Mapped,
    /// One `cuMemcpyAsync` per packet (its payload only) into a device staging buffer, then
    /// the kernel reads device memory.
    CopyPerPacket,
    /// Like `CopyPerPacket` with one `cuMemcpyBatchAsync` call per batch (CUDA 12.8+).
    CopyBatched,
}

/// Settings of a [`Pipeline`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PipelineConfig {
    /// Batch geometry, mode and conversion.
    pub layout: BatchLayout,
    /// How packet bytes reach the kernel.
    pub staging: Staging,
    /// Batches in flight at most (>= 1): one device output buffer each.
    pub depth: usize,
    /// Work run on each batch after the reorder.
    pub workload: Workload,
    /// Compute the batch checksum on the GPU ([`crate::reference::checksum`]).
    pub checksum: bool,
    /// What each batch copies back to pinned host memory for the caller
    /// ([`Completed::product`]).
    pub product: Product,
}

/// What a batch copies device -> host at its end (on the pipeline's stream, after the
/// workload), for the caller to keep: a recorder writes it to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Product {
    /// Nothing (the output stays in device memory).
    #[default]
    None,
    /// The batch output (reordered, converted samples): `out_batch_bytes`.
    Batch,
    /// The workload's result: FFT spectra or the GEMM `C` matrix
    /// ([`Workload::output_bytes`]).
    Workload,
}

impl PipelineConfig {
    /// Bytes of one batch's [`Product`] (0 for none).
    pub fn product_bytes(&self) -> usize {
        match self.product {
            Product::None => 0,
            Product::Batch => self.layout.out_batch_bytes(),
            Product::Workload => self.workload.output_bytes(&self.layout),
        }
    }
}

/// A batch accepted by [`Pipeline::submit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submitted {
    /// Submission number, from 0; [`Completed::token`] repeats it. Batches complete in
    /// submission order.
    pub token: u64,
}

/// A finished batch, from [`Pipeline::poll_completed`]. Borrowing the pipeline, it ends
/// before the next `submit` (which may reuse the output buffer).
#[derive(Debug)]
pub struct Completed<'p> {
    /// The [`Submitted::token`].
    pub token: u64,
    /// Descriptors submitted.
    pub packets: u32,
    /// Slots holding a packet.
    pub placed: u32,
    /// Slots zero-filled (`packets_per_batch - placed`).
    pub missing: u32,
    /// Packets that lost their slot to an earlier one (reorder; 0 in the other modes).
    pub duplicates: u32,
    /// Packets of another batch key / slot out of range (reorder, pieces), pieces that do
    /// not fit their slot (pieces).
    pub foreign: u32,
    /// Reorder: batch key of descriptor 0 (`None` for gather or an empty batch).
    pub batch_id: Option<u32>,
    /// GPU checksum of the batch output (when enabled).
    pub checksum: Option<u64>,
    /// Validity mask: bit `slot % 32` of word `slot / 32`.
    pub valid: &'p [u32],
    /// Device address of the batch output (`out_batch_bytes` long), valid until the next
    /// `submit`.
    pub output: u64,
    /// The batch's [`Product`] in pinned host memory (`product_bytes` long), when one was
    /// configured; valid until the next `submit`.
    pub product: Option<&'p [u8]>,
}

struct Flight {
    desc_host: sys::PinnedAlloc,
    desc_dev: sys::DeviceAlloc,
    owner: Option<sys::DeviceAlloc>,
    result_dev: sys::DeviceAlloc,
    result_host: sys::PinnedAlloc,
    out: sys::DeviceAlloc,
    staging: Option<sys::DeviceAlloc>,
    product: Option<sys::PinnedAlloc>,
    event: sys::Event,
    token: u64,
    n: u32,
    mask: Vec<u32>,
}

const RESULT_HEADER: usize = 16;

/// The GPU batch pipeline. See the module docs; `Send`, driven from one thread.
pub struct Pipeline {
    gpu: Gpu,
    cfg: PipelineConfig,
    stream: Stream,
    kernels: Kernels,
    workload: WorkloadState,
    flights: Vec<Flight>,
    head: usize,
    in_flight: usize,
    next_token: u64,
    // cuMemcpyBatchAsync argument arrays (preallocated)
    b_dst: Vec<u64>,
    b_src: Vec<u64>,
    b_len: Vec<usize>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("gpu", &self.gpu.id())
            .field("cfg", &self.cfg)
            .field("in_flight", &self.in_flight)
            .finish()
    }
}

impl Pipeline {
    /// Pinned host bytes a pipeline with `cfg` allocates for its products (`depth` ×
    /// [`PipelineConfig::product_bytes`]).
    pub fn host_footprint(cfg: &PipelineConfig) -> usize {
        cfg.product_bytes() * cfg.depth
    }

    /// Device bytes a pipeline with `cfg` allocates (checked against free memory by `new`).
    pub fn footprint(cfg: &PipelineConfig) -> Result<usize> {
        cfg.layout.validate()?;
        let l = &cfg.layout;
        let r = |n: usize| n.div_ceil(DEVICE_ALIGN) * DEVICE_ALIGN;
        let ppb = l.packets_per_batch as usize;
        let descs = l.descs_per_batch() as usize * PacketDesc::BYTES;
        let mut per = r(descs) + r(RESULT_HEADER + l.mask_words() * 4) + r(l.out_batch_bytes());
        if matches!(l.mode, Mode::Reorder(_)) {
            per += r(ppb * 4);
        }
        if cfg.staging != Staging::Mapped {
            per += r(ppb * l.max_payload as usize);
        }
        Ok(per * cfg.depth + cfg.workload.footprint(l)?)
    }

    /// Builds the pipeline on `gpu`: validates `cfg`, checks the footprint against free GPU
    /// memory, compiles the kernels (NVRTC), allocates every buffer, creates the stream,
    /// events and the workload's plan. Cold path.
    ///
    /// # Errors
    /// [`GpuError::InvalidLayout`], [`GpuError::InsufficientMemory`] (needed vs free),
    /// [`GpuError::NoLibrary`] (NVRTC, cuFFT, cuBLAS), [`GpuError::Compile`], CUDA errors.
    pub fn new(gpu: &Gpu, cfg: PipelineConfig) -> Result<Self> {
        if cfg.depth == 0 {
            return Err(GpuError::InvalidLayout(
                "depth = 0: at least 1 batch in flight".into(),
            ));
        }
        if matches!(cfg.layout.mode, Mode::Pieces { .. }) && cfg.staging != Staging::Mapped {
            return Err(GpuError::InvalidLayout(
                "pieces mode reads packets where they are: staging must be Mapped (a staging \
                 copy has one fixed-size place per packet)"
                    .into(),
            ));
        }
        if cfg.product == Product::Workload && cfg.workload == Workload::None {
            return Err(GpuError::InvalidLayout(
                "product = workload needs a workload (fft or gemm)".into(),
            ));
        }
        let needed = Self::footprint(&cfg)?;
        gpu.check_footprint("GPU pipeline", needed)?;
        let kernels = Kernels::compile(gpu)?;
        let stream = Stream::new(gpu)?;
        let workload = WorkloadState::new(cfg.workload, &cfg.layout, &stream)?;
        let l = &cfg.layout;
        let ppb = l.packets_per_batch as usize;
        let desc_len = l.descs_per_batch() as usize * PacketDesc::BYTES;
        let ctx = gpu.ctx();
        let result_len = RESULT_HEADER + l.mask_words() * 4;
        let mut flights = Vec::with_capacity(cfg.depth);
        for _ in 0..cfg.depth {
            flights.push(Flight {
                desc_host: sys::PinnedAlloc::new(ctx, desc_len)?,
                desc_dev: sys::DeviceAlloc::new(ctx, desc_len, 256)?,
                owner: match l.mode {
                    Mode::Reorder(_) => Some(sys::DeviceAlloc::new(ctx, ppb * 4, 256)?),
                    Mode::Gather | Mode::Pieces { .. } => None,
                },
                result_dev: sys::DeviceAlloc::new(ctx, result_len, 256)?,
                result_host: sys::PinnedAlloc::new(ctx, result_len)?,
                out: sys::DeviceAlloc::new(ctx, l.out_batch_bytes(), DEVICE_ALIGN)?,
                staging: match cfg.staging {
                    Staging::Mapped => None,
                    _ => Some(sys::DeviceAlloc::new(
                        ctx,
                        ppb * l.max_payload as usize,
                        256,
                    )?),
                },
                product: match cfg.product_bytes() {
                    0 => None,
                    n => Some(sys::PinnedAlloc::new(ctx, n)?),
                },
                event: sys::Event::new(ctx, false)?,
                token: 0,
                n: 0,
                mask: vec![0; l.mask_words()],
            });
        }
        let batched = if cfg.staging == Staging::CopyBatched {
            ppb
        } else {
            0
        };
        Ok(Self {
            gpu: gpu.clone(),
            cfg,
            stream,
            kernels,
            workload,
            flights,
            head: 0,
            in_flight: 0,
            next_token: 0,
            b_dst: vec![0; batched],
            b_src: vec![0; batched],
            b_len: vec![0; batched],
        })
    }

    /// The settings.
    pub fn config(&self) -> &PipelineConfig {
        &self.cfg
    }

    /// The GPU.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The architecture the kernels were compiled for.
    pub fn kernel_arch(&self) -> &str {
        self.kernels.arch()
    }

    /// Batches submitted and not yet returned by [`poll_completed`](Self::poll_completed).
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Enqueues one batch of at most [`BatchLayout::descs_per_batch`] descriptors. Never
    /// blocks (the GPU
    /// works asynchronously), never allocates.
    ///
    /// The packets' memory must stay untouched until the batch is returned by
    /// [`poll_completed`](Self::poll_completed) (with [`Staging::Mapped`] the kernel reads it
    /// then; with the copy stagings the copy does): only then release their buffers.
    ///
    /// # Errors
    /// [`GpuError::Busy`] when `depth` batches are in flight: the batch is refused, nothing was
    /// enqueued; the caller counts its packets as dropped and releases them (RX never waits
    /// for the GPU). [`GpuError::TooManyPackets`]; CUDA errors.
    pub fn submit(&mut self, descs: &[PacketDesc]) -> Result<Submitted> {
        let depth = self.flights.len();
        if self.in_flight == depth {
            return Err(GpuError::Busy { depth });
        }
        let l = self.cfg.layout;
        if descs.len() > l.descs_per_batch() as usize {
            return Err(GpuError::TooManyPackets {
                got: descs.len(),
                max: l.descs_per_batch() as usize,
            });
        }
        self.gpu.bind()?;
        let idx = (self.head + self.in_flight) % depth;
        let offset = self.stage(idx, descs)?;
        self.enqueue_kernels(idx, descs.len() as u32, offset)?;
        let s = self.stream.raw();
        let f = &self.flights[idx];
        if self.cfg.checksum {
            let nwords = (l.out_batch_bytes() / 4) as u64;
            let blocks = nwords.div_ceil(256).clamp(1, 1024) as u32;
            sys::launch_checksum(
                &self.kernels.checksum,
                s,
                f.out.ptr(),
                nwords,
                f.result_dev.ptr(),
                blocks,
            )?;
        }
        sys::memcpy_dtoh_async(
            &f.result_host,
            0,
            f.result_dev.ptr(),
            f.result_host.len(),
            s,
        )?;
        self.workload.run(f.out.ptr())?;
        if let Some(p) = &f.product {
            // After the workload on the same stream: the next batch's workload cannot
            // overwrite its result before this copy has read it.
            let src = match self.cfg.product {
                Product::Workload => self.workload.output().map_or(0, |(a, _)| a),
                _ => f.out.ptr(),
            };
            sys::memcpy_dtoh_async(p, 0, src, p.len(), s)?;
        }
        f.event.record(s)?;
        let token = self.next_token;
        let f = &mut self.flights[idx];
        f.token = token;
        f.n = descs.len() as u32;
        self.next_token += 1;
        self.in_flight += 1;
        Ok(Submitted { token })
    }

    /// Writes the descriptors the kernel reads into flight `idx`'s pinned buffer (staging
    /// copies enqueued first when configured) and enqueues their upload. Returns the payload
    /// offset the kernel applies.
    fn stage(&mut self, idx: usize, descs: &[PacketDesc]) -> Result<u32> {
        let l = self.cfg.layout;
        let s = self.stream.raw();
        let f = &mut self.flights[idx];
        let offset = match (self.cfg.staging, &f.staging) {
            (Staging::Mapped, _) | (_, None) => {
                for (i, d) in descs.iter().enumerate() {
                    f.desc_host.write(i * PacketDesc::BYTES, &desc_bytes(d));
                }
                l.payload_offset
            }
            (staging, Some(buf)) => {
                let mp = l.max_payload as u64;
                let mut nb = 0;
                for (i, d) in descs.iter().enumerate() {
                    let avail = l.avail(d.len);
                    let dst = buf.ptr() + i as u64 * mp;
                    if avail > 0 {
                        let src = d.addr + u64::from(l.payload_offset);
                        if staging == Staging::CopyPerPacket {
                            sys::memcpy_async(dst, src, avail as usize, s)?;
                        } else {
                            self.b_dst[nb] = dst;
                            self.b_src[nb] = src;
                            self.b_len[nb] = avail as usize;
                            nb += 1;
                        }
                    }
                    let staged = PacketDesc {
                        addr: dst,
                        seq: d.seq,
                        len: avail,
                        offset: d.offset,
                    };
                    f.desc_host
                        .write(i * PacketDesc::BYTES, &desc_bytes(&staged));
                }
                if nb > 0 {
                    let dev = self.gpu.id() as i32;
                    sys::memcpy_batch_async(
                        &mut self.b_dst[..nb],
                        &mut self.b_src[..nb],
                        &mut self.b_len[..nb],
                        dev,
                        s,
                    )?;
                }
                0
            }
        };
        if !descs.is_empty() {
            let n = descs.len() * PacketDesc::BYTES;
            sys::memcpy_htod_async(f.desc_dev.ptr(), &f.desc_host, 0, n, s)?;
        }
        Ok(offset)
    }

    /// Result-block reset, claim (reorder) and place kernels for flight `idx`; output reset
    /// and scatter kernel in pieces mode.
    fn enqueue_kernels(&self, idx: usize, n: u32, payload_offset: u32) -> Result<()> {
        let l = self.cfg.layout;
        let s = self.stream.raw();
        let f = &self.flights[idx];
        sys::memset_d32_async(f.result_dev.ptr(), 0, f.result_dev.len() / 4, s)?;
        let (mode, ss, sb, bs, bb) = match l.slot_mode() {
            None | Some(SlotMode::Modulo) => (0, 0, 0, 0, 0),
            Some(SlotMode::BitFields {
                slot_shift,
                slot_bits,
                batch_shift,
                batch_bits,
            }) => (1, slot_shift, slot_bits, batch_shift, batch_bits),
        };
        let (in_fmt, out_fmt) = l.conversion.codes();
        let claim = |owner: u64| ClaimArgs {
            desc: f.desc_dev.ptr(),
            n,
            ppb: l.packets_per_batch,
            mode,
            slot_shift: ss.into(),
            slot_bits: sb.into(),
            batch_shift: bs.into(),
            batch_bits: bb.into(),
            owner,
            result: f.result_dev.ptr(),
        };
        if let Mode::Pieces { .. } = l.mode {
            sys::memset_d32_async(f.out.ptr(), 0, l.out_batch_bytes() / 4, s)?;
            if n == 0 {
                return Ok(());
            }
            let args = ScatterArgs {
                claim: claim(0),
                payload_offset,
                words_per_slot: l.max_payload / 4,
                in_fmt,
                out_fmt,
                out_words_per_word: l.conversion.out_bytes_per_word() / 4,
                out: f.out.ptr(),
            };
            return sys::launch_scatter(&self.kernels.scatter, s, &args);
        }
        let owner = match &f.owner {
            Some(o) => {
                sys::memset_d32_async(o.ptr(), u32::MAX, l.packets_per_batch as usize, s)?;
                if n > 0 {
                    sys::launch_claim(&self.kernels.claim, s, &claim(o.ptr()))?;
                }
                o.ptr()
            }
            None => 0,
        };
        let args = PlaceArgs {
            desc: f.desc_dev.ptr(),
            n,
            owner,
            payload_offset,
            words_per_slot: l.max_payload / 4,
            in_fmt,
            out_fmt,
            out_words_per_word: l.conversion.out_bytes_per_word() / 4,
            out: f.out.ptr(),
            result: f.result_dev.ptr(),
        };
        sys::launch_place(&self.kernels.place, s, l.packets_per_batch, &args)
    }

    /// Returns the oldest in-flight batch if the GPU finished it (its event), else `None`.
    /// Never blocks, never allocates. Call it until `None` before each
    /// [`submit`](Self::submit); a returned batch's packet buffers may be released.
    pub fn poll_completed(&mut self) -> Result<Option<Completed<'_>>> {
        if self.in_flight == 0 {
            return Ok(None);
        }
        let idx = self.head;
        if !self.flights[idx].event.query()? {
            return Ok(None);
        }
        self.head = (idx + 1) % self.flights.len();
        self.in_flight -= 1;
        Ok(Some(self.read_result(idx)))
    }

    /// Like [`poll_completed`](Self::poll_completed) but waits for the oldest batch (cold
    /// path: shutdown, tests). `None` when nothing is in flight.
    pub fn wait_completed(&mut self) -> Result<Option<Completed<'_>>> {
        if self.in_flight == 0 {
            return Ok(None);
        }
        self.gpu.bind()?;
        self.flights[self.head].event.synchronize()?;
        self.poll_completed()
    }

    fn read_result(&mut self, idx: usize) -> Completed<'_> {
        let l = self.cfg.layout;
        let checksum_on = self.cfg.checksum;
        let gather = matches!(l.mode, Mode::Gather);
        let pieces = matches!(l.mode, Mode::Pieces { .. });
        let f = &mut self.flights[idx];
        let r = &f.result_host;
        let checksum = u64::from(r.read_u32(0)) | u64::from(r.read_u32(1)) << 32;
        let batch_id = r.read_u32(2);
        let foreign = r.read_u32(3);
        let mut placed = 0;
        for (w, m) in f.mask.iter_mut().enumerate() {
            *m = r.read_u32(RESULT_HEADER / 4 + w);
            placed += m.count_ones();
        }
        Completed {
            token: f.token,
            packets: f.n,
            placed,
            missing: l.packets_per_batch - placed,
            // Pieces: several packets per slot, none a duplicate (see the layout docs).
            duplicates: if pieces { 0 } else { f.n - foreign - placed },
            foreign,
            batch_id: (!gather && f.n > 0).then_some(batch_id),
            checksum: checksum_on.then_some(checksum),
            valid: &f.mask,
            output: f.out.ptr(),
            product: f.product.as_ref().map(sys::PinnedAlloc::as_slice),
        }
    }

    /// `(device address, bytes)` of the workload's result buffer (FFT output, GEMM `C`),
    /// overwritten by every batch.
    pub fn workload_output(&self) -> Option<(u64, usize)> {
        self.workload.output()
    }

    /// Copies `dst.len()` bytes from device-visible address `src` to `dst` after waiting for
    /// the pipeline's stream. Cold path (tests, debugging).
    pub fn copy_to_host(&self, src: u64, dst: &mut [u8]) -> Result<()> {
        self.stream.synchronize()?;
        sys::copy_addr_to_host(dst, src)
    }

    /// Benchmark helper: with nothing in flight, runs the data path of `descs` (staging
    /// copies, when configured, and the kernels; no checksum, workload or result copy)
    /// `iters` times back to back and returns the GPU milliseconds of all of them. Cold path.
    pub fn time_batches(&mut self, descs: &[PacketDesc], iters: u32) -> Result<f32> {
        if self.in_flight != 0 {
            return Err(GpuError::Busy {
                depth: self.flights.len(),
            });
        }
        let max = self.cfg.layout.descs_per_batch() as usize;
        if descs.len() > max {
            return Err(GpuError::TooManyPackets {
                got: descs.len(),
                max,
            });
        }
        self.gpu.bind()?;
        let start = sys::Event::new(self.gpu.ctx(), true)?;
        let end = sys::Event::new(self.gpu.ctx(), true)?;
        let s = self.stream.raw();
        start.record(s)?;
        for _ in 0..iters {
            let off = self.stage(0, descs)?;
            self.enqueue_kernels(0, descs.len() as u32, off)?;
        }
        end.record(s)?;
        end.synchronize()?;
        end.elapsed_ms(&start)
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // Buffers are freed next: wait for the work that uses them.
        let _ = self.stream.synchronize();
    }
}

fn desc_bytes(d: &PacketDesc) -> [u8; PacketDesc::BYTES] {
    let mut b = [0u8; PacketDesc::BYTES];
    b[..8].copy_from_slice(&d.addr.to_le_bytes());
    b[8..12].copy_from_slice(&d.seq.to_le_bytes());
    b[12..16].copy_from_slice(&d.len.to_le_bytes());
    b[16..20].copy_from_slice(&d.offset.to_le_bytes());
    b
}
