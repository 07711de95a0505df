//! GPU tests: each needs the CUDA driver and, without it, skips (recorded by
//! `rtdaq_testbed::require::skip_gpu`: the one skip `scripts/test.sh` expects off the GPU host). On a GPU host they check every kernel against the CPU reference byte for byte,
//! the pipeline's drop-when-behind, the FFT/GEMM workloads against CPU results and the
//! dma-buf export.

use rtdaq_core::traits::{DmaTarget, MemKind, MemoryRegion};
use rtdaq_gpu::reference::{self, RefPacket, FFT_LEN, GEMM_DIM};
use rtdaq_gpu::{
    BatchLayout, Conversion, DeviceMem, FloatFormat, Gpu, GpuError, HostPinned, IntFormat, Mode,
    PacketDesc, Pipeline, PipelineConfig, Product, SlotMode, Staging, Stream, Workload,
    DEVICE_ALIGN,
};

fn gpu() -> Option<Gpu> {
    if !rtdaq_gpu::driver_present() {
        rtdaq_testbed::require::skip_gpu("no CUDA driver");
        return None;
    }
    Some(Gpu::open(0).expect("the driver is present, GPU 0 must open"))
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

#[test]
fn open_without_driver_says_so() {
    if rtdaq_gpu::driver_present() {
        println!("driver present: checking Gpu::open(0) succeeds instead");
        let g = Gpu::open(0).unwrap();
        assert!(!g.name().unwrap().is_empty());
        let e = Gpu::open(999).unwrap_err();
        assert!(matches!(e, GpuError::NoSuchGpu { id: 999, .. }), "{e}");
        return;
    }
    let e = Gpu::open(0).unwrap_err();
    assert!(matches!(e, GpuError::NoDriver));
    assert!(
        e.to_string()
            .starts_with("no CUDA driver found (libcuda.so)"),
        "{e}"
    );
    println!("no CUDA driver: checked the error ({e})");
}

/// One batch's packets in pinned memory: returns descriptors; `blob` holds the bytes.
struct Batch {
    descs: Vec<PacketDesc>,
    /// (offset in the region, len, seq) per descriptor
    spans: Vec<(usize, usize, u32)>,
}

const STRIDE: usize = 1024;

/// Random batch: permutation, losses, duplicates (with other bytes), foreign packets,
/// random lengths, 1/4 of the packets at a misaligned address.
fn random_batch(rng: &mut Rng, region: &mut HostPinned, layout: &BatchLayout, batch: u32) -> Batch {
    let ppb = layout.packets_per_batch as usize;
    let gather = matches!(layout.mode, Mode::Gather);
    let seq_of = |slot: u32, b: u32| match layout.mode {
        Mode::Reorder(SlotMode::BitFields {
            slot_shift,
            batch_shift,
            ..
        }) => (b << batch_shift) | (slot << slot_shift),
        _ => b * layout.packets_per_batch + slot,
    };
    let mut seqs: Vec<u32> = (0..ppb as u32).map(|s| seq_of(s, batch)).collect();
    rng.shuffle(&mut seqs);
    let lost = rng.below(ppb / 4 + 1).min(ppb - 1);
    seqs.truncate(ppb - lost);
    if !gather {
        let extra = rng.below(ppb / 4 + 1).min(ppb - seqs.len());
        for k in 0..extra {
            let seq = if k % 2 == 0 {
                seqs[rng.below(seqs.len())]
            } else {
                seq_of(rng.below(ppb) as u32, batch + 1)
            };
            let at = 1 + rng.below(seqs.len());
            seqs.insert(at, seq);
        }
    }
    let mut b = Batch {
        descs: vec![],
        spans: vec![],
    };
    let max_len = (layout.payload_offset + layout.max_payload) as usize + 16;
    for (i, seq) in seqs.into_iter().enumerate() {
        let mis = if i % 4 == 3 { 1 + rng.below(3) } else { 0 };
        let off = i * STRIDE + mis;
        let len = if rng.below(3) == 0 {
            rng.below(max_len)
        } else {
            max_len - 16
        };
        assert!(mis + len <= STRIDE);
        for x in &mut region.as_mut_slice()[off..off + len] {
            *x = rng.next() as u8;
        }
        b.descs.push(PacketDesc {
            addr: region.device_addr_of(ptr_at(region, off)).unwrap(),
            seq,
            len: len as u32,
            offset: 0,
        });
        b.spans.push((off, len, seq));
    }
    b
}

fn ptr_at(region: &HostPinned, off: usize) -> *const u8 {
    region.host_ptr().wrapping_add(off).cast_const()
}

fn reference_of(
    region: &HostPinned,
    layout: &BatchLayout,
    b: &Batch,
) -> (Vec<u8>, reference::BatchStats) {
    let pkts: Vec<RefPacket<'_>> = b
        .spans
        .iter()
        .map(|&(off, len, seq)| RefPacket {
            data: &region.as_slice()[off..off + len],
            seq,
            offset: 0,
        })
        .collect();
    let mut out = vec![0u8; layout.out_batch_bytes()];
    let st = reference::run_batch(layout, &pkts, &mut out).unwrap();
    (out, st)
}

/// The batch geometry of the kernel tests (61 packets, payload at 32, up to 512 bytes) and a
/// pipeline for it (depth 2, no workload, with checksum).
fn test_pipeline(
    gpu: &Gpu,
    conversion: Conversion,
    mode: Mode,
    staging: Staging,
) -> (BatchLayout, Pipeline) {
    let layout = BatchLayout {
        packets_per_batch: 61,
        payload_offset: 32,
        max_payload: 512,
        conversion,
        mode,
    };
    let cfg = PipelineConfig {
        layout,
        staging,
        depth: 2,
        workload: Workload::None,
        checksum: true,
        product: Product::None,
    };
    (layout, Pipeline::new(gpu, cfg).unwrap())
}

fn all_conversions() -> Vec<Conversion> {
    let mut v = vec![Conversion::Copy];
    for from in [
        IntFormat::I8,
        IntFormat::I16Le,
        IntFormat::I16Be,
        IntFormat::I4,
    ] {
        for to in [FloatFormat::F16, FloatFormat::Bf16, FloatFormat::F32] {
            v.push(Conversion::Convert { from, to });
        }
    }
    v
}

/// Waits for the oldest batch and checks it against the CPU reference (`want`, `st`): mask,
/// counts, batch id, checksum and every output byte. Its token.
fn expect_batch(
    pipe: &mut Pipeline,
    layout: &BatchLayout,
    want: &[u8],
    st: &reference::BatchStats,
    what: &str,
) -> u64 {
    let done = pipe.wait_completed().unwrap().unwrap();
    let token = done.token;
    assert_eq!(done.valid, &st.valid[..], "{what}");
    assert_eq!(
        (
            done.placed,
            done.missing,
            done.duplicates,
            done.foreign,
            done.batch_id
        ),
        (
            st.placed,
            st.missing,
            st.duplicates,
            st.foreign,
            st.batch_id
        ),
        "{what}"
    );
    assert_eq!(done.checksum, Some(reference::checksum(want)), "{what}");
    let out = done.output;
    let mut got = vec![0u8; want.len()];
    pipe.copy_to_host(out, &mut got).unwrap();
    if got != want {
        let i = got.iter().zip(want).position(|(a, b)| a != b).unwrap();
        panic!(
            "{what}: first difference at byte {i} (slot {}): gpu {:#x} cpu {:#x}",
            i / layout.out_slot_bytes(),
            got[i],
            want[i]
        );
    }
    token
}

#[test]
fn kernels_match_cpu_reference_bit_for_bit() {
    let Some(gpu) = gpu() else { return };
    let mut region = HostPinned::new(&gpu, 64 * STRIDE).unwrap();
    let mut rng = Rng(0xDEAD_BEEF_1234_5678);
    let modes = [
        Mode::Reorder(SlotMode::Modulo),
        Mode::Reorder(SlotMode::BitFields {
            slot_shift: 3,
            slot_bits: 6,
            batch_shift: 12,
            batch_bits: 16,
        }),
        Mode::Gather,
    ];
    let mut checked = 0;
    for conversion in all_conversions() {
        for mode in modes {
            for staging in [
                Staging::Mapped,
                Staging::CopyPerPacket,
                Staging::CopyBatched,
            ] {
                let (layout, mut pipe) = test_pipeline(&gpu, conversion, mode, staging);
                for round in 0..2u32 {
                    let b = random_batch(&mut rng, &mut region, &layout, 77 + round);
                    let (want, st) = reference_of(&region, &layout, &b);
                    pipe.submit(&b.descs).unwrap();
                    let what = format!("{conversion:?} {mode:?} {staging:?} round {round}");
                    let token = expect_batch(&mut pipe, &layout, &want, &st, &what);
                    assert_eq!(token, u64::from(round), "{what}");
                    checked += 1;
                }
            }
        }
    }
    println!("{checked} batches identical to the CPU reference");
}

/// Pieces mode (SPEAD heap assembly): random heaps cut as spead2 cuts them (a first piece of
/// its own size, then equal pieces, a last piece of any length), some heaps and pieces lost,
/// pieces shuffled, at misaligned addresses, plus pieces that must not be placed (another
/// batch key, an offset not on a word, past the heap's end). For every conversion and both
/// slot modes the scatter kernel's batch equals the CPU reference byte for byte, with its
/// counts and checksum. Staging copies are refused for pieces.
#[test]
fn scatter_kernel_assembles_heaps_like_the_reference() {
    let Some(gpu) = gpu() else { return };
    const HEAPS: u32 = 12;
    const HEAP_BYTES: u32 = 2000;
    let mut region = HostPinned::new(&gpu, 256 * STRIDE).unwrap();
    let mut rng = Rng(0x5EAD_0000_0000_0017);
    let mut checked = 0;
    let modes = [
        SlotMode::Modulo,
        SlotMode::BitFields {
            slot_shift: 0,
            slot_bits: 4,
            batch_shift: 4,
            batch_bits: 20,
        },
    ];
    for conversion in all_conversions() {
        for slots in modes {
            let layout = BatchLayout {
                packets_per_batch: HEAPS,
                payload_offset: 5,
                max_payload: HEAP_BYTES,
                conversion,
                mode: Mode::Pieces {
                    slots,
                    max_packets: 256,
                },
            };
            let heap_seq = |slot: u32, batch: u32| match slots {
                SlotMode::Modulo => batch * HEAPS + slot,
                SlotMode::BitFields { .. } => batch << 4 | slot,
            };
            let cfg = PipelineConfig {
                layout,
                staging: Staging::Mapped,
                depth: 2,
                workload: Workload::None,
                checksum: true,
                product: Product::None,
            };
            let mut pipe = Pipeline::new(&gpu, cfg).unwrap();
            for round in 0..2u32 {
                let batch = 40 + round;
                // (seq, offset, piece length) of every descriptor
                let mut pieces = Vec::new();
                for slot in 0..HEAPS {
                    if rng.below(6) == 0 {
                        continue; // heap lost
                    }
                    let len = HEAP_BYTES as usize - rng.below(300);
                    let first = 4 * (20 + rng.below(60));
                    let full = 4 * (60 + rng.below(90));
                    let mut at = 0;
                    while at < len {
                        let n = (if at == 0 { first } else { full }).min(len - at);
                        if rng.below(10) != 0 {
                            pieces.push((heap_seq(slot, batch), at as u32, n));
                        }
                        at += n;
                    }
                }
                let start = pieces.len().min(1);
                rng.shuffle(&mut pieces[start..]);
                for bad in [
                    (heap_seq(1, batch + 1), 0, 64),
                    (heap_seq(2, batch), 6, 64),
                    (heap_seq(3, batch), HEAP_BYTES - 8, 12),
                ] {
                    let at = 1 + rng.below(pieces.len());
                    pieces.insert(at, bad);
                }
                let mut descs = Vec::new();
                let mut spans = Vec::new();
                for (i, &(seq, offset, n)) in pieces.iter().enumerate() {
                    let mis = rng.below(4);
                    let off = i * 1024 * 3 / 2 % (255 * STRIDE - 4096) + mis;
                    let len = 5 + n;
                    for x in &mut region.as_mut_slice()[off..off + len] {
                        *x = rng.next() as u8;
                    }
                    descs.push(PacketDesc {
                        addr: region.device_addr_of(ptr_at(&region, off)).unwrap(),
                        seq,
                        len: len as u32,
                        offset,
                    });
                    spans.push((off, len, seq, offset));
                }
                let pkts: Vec<RefPacket<'_>> = spans
                    .iter()
                    .map(|&(off, len, seq, offset)| RefPacket {
                        data: &region.as_slice()[off..off + len],
                        seq,
                        offset,
                    })
                    .collect();
                let mut want = vec![0u8; layout.out_batch_bytes()];
                let st = reference::run_batch(&layout, &pkts, &mut want).unwrap();
                assert_eq!(st.foreign, 3);
                pipe.submit(&descs).unwrap();
                let what = format!("pieces {conversion:?} {slots:?} round {round}");
                expect_batch(&mut pipe, &layout, &want, &st, &what);
                checked += 1;
            }
        }
    }
    let layout = BatchLayout {
        packets_per_batch: 4,
        payload_offset: 0,
        max_payload: 64,
        conversion: Conversion::Copy,
        mode: Mode::Pieces {
            slots: SlotMode::Modulo,
            max_packets: 16,
        },
    };
    let e = Pipeline::new(
        &gpu,
        PipelineConfig {
            layout,
            staging: Staging::CopyPerPacket,
            depth: 1,
            workload: Workload::None,
            checksum: false,
            product: Product::None,
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("staging must be Mapped"), "{e}");
    println!("{checked} heap batches identical to the CPU reference");
}

/// GPUDirect input: the packets lie in device memory (where a NIC writes a `device` region
/// through its dma-buf; here `cuMemcpyHtoD` puts them there) and the descriptors carry their
/// device addresses. Every mode and staging path gives the CPU reference's batch.
#[test]
fn kernels_read_packets_in_device_memory() {
    let Some(gpu) = gpu() else { return };
    let mut region = HostPinned::new(&gpu, 64 * STRIDE).unwrap();
    let mut dev = DeviceMem::new(&gpu, 64 * STRIDE).unwrap();
    let mut rng = Rng(0x0DEC_0DE5_5EED_0001);
    let mut checked = 0;
    let conversions = [
        Conversion::Copy,
        Conversion::Convert {
            from: IntFormat::I16Le,
            to: FloatFormat::F32,
        },
        Conversion::Convert {
            from: IntFormat::I4,
            to: FloatFormat::F16,
        },
    ];
    for conversion in conversions {
        for mode in [Mode::Reorder(SlotMode::Modulo), Mode::Gather] {
            for staging in [
                Staging::Mapped,
                Staging::CopyPerPacket,
                Staging::CopyBatched,
            ] {
                let (layout, mut pipe) = test_pipeline(&gpu, conversion, mode, staging);
                let mut b = random_batch(&mut rng, &mut region, &layout, 5);
                let (want, st) = reference_of(&region, &layout, &b);
                dev.copy_from_host(0, region.as_slice()).unwrap();
                for d in &mut b.descs {
                    d.addr = d.addr - region.device_ptr() + dev.device_ptr();
                }
                // The pinned copy is scrambled: a kernel reading it instead of the device
                // copy cannot match the reference.
                region.as_mut_slice().fill(0xA5);
                pipe.submit(&b.descs).unwrap();
                let done = pipe.wait_completed().unwrap().unwrap();
                let what = format!("device input {conversion:?} {mode:?} {staging:?}");
                assert_eq!(done.valid, &st.valid[..], "{what}");
                assert_eq!(
                    (done.placed, done.missing, done.duplicates, done.foreign),
                    (st.placed, st.missing, st.duplicates, st.foreign),
                    "{what}"
                );
                assert_eq!(done.checksum, Some(reference::checksum(&want)), "{what}");
                let out = done.output;
                let mut got = vec![0u8; want.len()];
                pipe.copy_to_host(out, &mut got).unwrap();
                assert!(got == want, "{what}: output differs from the CPU reference");
                checked += 1;
            }
        }
    }
    println!("{checked} batches read from device memory identical to the CPU reference");
}

#[test]
fn every_int16_converts_like_the_reference() {
    let Some(gpu) = gpu() else { return };
    // 65536 int16 samples (LE) in 64 packets of 2048 bytes, gather -> f16, bf16, f32
    let mut region = HostPinned::new(&gpu, 64 * 2048).unwrap();
    for (i, c) in region.as_mut_slice().chunks_exact_mut(2).enumerate() {
        c.copy_from_slice(&(i as u16).to_le_bytes());
    }
    let descs: Vec<PacketDesc> = (0..64)
        .map(|i| PacketDesc {
            addr: region.device_ptr() + i * 2048,
            seq: 0,
            len: 2048,
            offset: 0,
        })
        .collect();
    for to in [FloatFormat::F16, FloatFormat::Bf16, FloatFormat::F32] {
        let layout = BatchLayout {
            packets_per_batch: 64,
            payload_offset: 0,
            max_payload: 2048,
            conversion: Conversion::Convert {
                from: IntFormat::I16Le,
                to,
            },
            mode: Mode::Gather,
        };
        let cfg = PipelineConfig {
            layout,
            staging: Staging::Mapped,
            depth: 1,
            workload: Workload::None,
            checksum: false,
            product: Product::None,
        };
        let mut pipe = Pipeline::new(&gpu, cfg).unwrap();
        pipe.submit(&descs).unwrap();
        let out = pipe.wait_completed().unwrap().unwrap().output;
        let mut got = vec![0u8; layout.out_batch_bytes()];
        pipe.copy_to_host(out, &mut got).unwrap();
        let size = to.size() as usize;
        for (i, c) in got.chunks_exact(size).enumerate() {
            let mut w = [0u8; 4];
            w[..size].copy_from_slice(c);
            let v = i32::from(i as u16 as i16);
            assert_eq!(
                u32::from_le_bytes(w),
                reference::convert_sample(v, to),
                "{to:?} {v}"
            );
        }
    }
}

#[test]
fn large_aligned_batch_fast_path() {
    let Some(gpu) = gpu() else { return };
    let layout = BatchLayout {
        packets_per_batch: 1024,
        payload_offset: 32,
        max_payload: 8000,
        conversion: Conversion::Convert {
            from: IntFormat::I8,
            to: FloatFormat::F32,
        },
        mode: Mode::Reorder(SlotMode::Modulo),
    };
    let stride = 8192;
    let mut region = HostPinned::new(&gpu, 1024 * stride).unwrap();
    let mut rng = Rng(42);
    for x in region.as_mut_slice() {
        *x = rng.next() as u8;
    }
    let mut order: Vec<usize> = (0..1024).collect();
    rng.shuffle(&mut order);
    order.truncate(1000);
    let descs: Vec<PacketDesc> = order
        .iter()
        .map(|&s| PacketDesc {
            addr: region.device_ptr() + (s * stride) as u64,
            seq: 5 * 1024 + s as u32,
            len: 8032,
            offset: 0,
        })
        .collect();
    let pkts: Vec<RefPacket<'_>> = order
        .iter()
        .map(|&s| RefPacket {
            data: &region.as_slice()[s * stride..s * stride + 8032],
            seq: 5 * 1024 + s as u32,
            offset: 0,
        })
        .collect();
    let mut want = vec![0u8; layout.out_batch_bytes()];
    let st = reference::run_batch(&layout, &pkts, &mut want).unwrap();
    for staging in [Staging::Mapped, Staging::CopyBatched] {
        let cfg = PipelineConfig {
            layout,
            staging,
            depth: 1,
            workload: Workload::None,
            checksum: true,
            product: Product::None,
        };
        let mut pipe = Pipeline::new(&gpu, cfg).unwrap();
        pipe.submit(&descs).unwrap();
        let done = pipe.wait_completed().unwrap().unwrap();
        assert_eq!(
            (done.placed, done.missing, done.batch_id),
            (1000, 24, Some(5))
        );
        assert_eq!(done.valid, &st.valid[..]);
        assert_eq!(done.checksum, Some(reference::checksum(&want)));
        let out = done.output;
        let mut got = vec![0u8; want.len()];
        pipe.copy_to_host(out, &mut got).unwrap();
        assert!(
            got == want,
            "{staging:?}: 32 MB batch differs from the reference"
        );
    }
}

#[test]
fn pipeline_refuses_batches_when_behind() {
    let Some(gpu) = gpu() else { return };
    let layout = BatchLayout {
        packets_per_batch: 8,
        payload_offset: 0,
        max_payload: 64,
        conversion: Conversion::Copy,
        mode: Mode::Gather,
    };
    let region = HostPinned::new(&gpu, 8 * 64).unwrap();
    let descs: Vec<PacketDesc> = (0..8)
        .map(|i| PacketDesc {
            addr: region.device_ptr() + i * 64,
            seq: i as u32,
            len: 64,
            offset: 0,
        })
        .collect();
    let cfg = PipelineConfig {
        layout,
        staging: Staging::Mapped,
        depth: 2,
        workload: Workload::None,
        checksum: false,
        product: Product::None,
    };
    let mut pipe = Pipeline::new(&gpu, cfg).unwrap();
    let mut accepted = vec![];
    let mut busy = 0;
    for _ in 0..5 {
        match pipe.submit(&descs) {
            Ok(s) => accepted.push(s.token),
            Err(GpuError::Busy { depth: 2 }) => busy += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(accepted, [0, 1]);
    assert_eq!(busy, 3);
    assert_eq!(pipe.in_flight(), 2);
    let mut done = vec![];
    while let Some(c) = pipe.wait_completed().unwrap() {
        assert_eq!(c.placed, 8);
        done.push(c.token);
    }
    assert_eq!(done, [0, 1]);
    assert_eq!(pipe.submit(&descs).unwrap().token, 2);
    let many: Vec<PacketDesc> = (0..9).map(|_| descs[0]).collect();
    assert!(matches!(
        pipe.submit(&many),
        Err(GpuError::TooManyPackets { got: 9, max: 8 })
    ));
}

fn int8_batch(
    gpu: &Gpu,
    ppb: u32,
    payload: u32,
    seed: u64,
) -> (HostPinned, Vec<PacketDesc>, BatchLayout) {
    let layout = BatchLayout {
        packets_per_batch: ppb,
        payload_offset: 0,
        max_payload: payload,
        conversion: Conversion::Convert {
            from: IntFormat::I8,
            to: FloatFormat::F32,
        },
        mode: Mode::Gather,
    };
    let mut region = HostPinned::new(gpu, (ppb * payload) as usize).unwrap();
    let mut rng = Rng(seed);
    for x in region.as_mut_slice() {
        *x = rng.next() as u8;
    }
    let descs = (0..ppb)
        .map(|i| PacketDesc {
            addr: region.device_ptr() + u64::from(i * payload),
            seq: i,
            len: payload,
            offset: 0,
        })
        .collect();
    (region, descs, layout)
}

#[test]
fn fft_workload_matches_cpu_dft() {
    let Some(gpu) = gpu() else { return };
    // 16 slots of 2048 int8 -> 8192 B of f32 = one length-1024 complex transform per slot
    let (region, descs, layout) = int8_batch(&gpu, 16, 2048, 7);
    let cfg = PipelineConfig {
        layout,
        staging: Staging::Mapped,
        depth: 1,
        workload: Workload::Fft,
        checksum: false,
        product: Product::None,
    };
    let mut pipe = Pipeline::new(&gpu, cfg).unwrap();
    pipe.submit(&descs).unwrap();
    pipe.wait_completed().unwrap().unwrap();
    let (ptr, len) = pipe.workload_output().unwrap();
    assert_eq!(len, 16 * FFT_LEN * 8);
    let mut raw = vec![0u8; len];
    pipe.copy_to_host(ptr, &mut raw).unwrap();
    let got: Vec<f32> = raw
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    for t in [0usize, 5, 15] {
        let x: Vec<[f32; 2]> = region.as_slice()[t * 2048..(t + 1) * 2048]
            .chunks_exact(2)
            .map(|c| [f32::from(c[0] as i8), f32::from(c[1] as i8)])
            .collect();
        let want = reference::dft(&x);
        let scale = want.iter().map(|c| c[0].hypot(c[1])).fold(0.0, f64::max);
        let mut worst = 0f64;
        for (k, w) in want.iter().enumerate() {
            let g = &got[(t * FFT_LEN + k) * 2..(t * FFT_LEN + k) * 2 + 2];
            worst = worst
                .max((f64::from(g[0]) - w[0]).abs())
                .max((f64::from(g[1]) - w[1]).abs());
        }
        println!("fft transform {t}: max |gpu - cpu| = {worst:.3e} (max |X| = {scale:.1})");
        assert!(
            worst <= 1e-4 * scale,
            "transform {t}: error {worst} vs scale {scale}"
        );
    }
}

#[test]
fn gemm_workload_is_exact() {
    let Some(gpu) = gpu() else { return };
    // 512 slots of 2048 int8 -> 4 MiB of f32 = A (1024 x 1024, column-major)
    let (region, descs, layout) = int8_batch(&gpu, 512, 2048, 11);
    let cfg = PipelineConfig {
        layout,
        staging: Staging::Mapped,
        depth: 1,
        workload: Workload::Gemm,
        checksum: false,
        product: Product::None,
    };
    let mut pipe = Pipeline::new(&gpu, cfg).unwrap();
    pipe.submit(&descs).unwrap();
    pipe.wait_completed().unwrap().unwrap();
    let (ptr, len) = pipe.workload_output().unwrap();
    let mut raw = vec![0u8; GEMM_DIM * GEMM_DIM * 4];
    assert!(len >= raw.len());
    pipe.copy_to_host(ptr, &mut raw).unwrap();
    let c: Vec<f32> = raw
        .chunks_exact(4)
        .map(|x| f32::from_le_bytes(x.try_into().unwrap()))
        .collect();
    let a: Vec<f32> = region
        .as_slice()
        .iter()
        .map(|&b| f32::from(b as i8))
        .collect();
    let b = reference::gemm_b();
    let mut rng = Rng(3);
    for _ in 0..256 {
        let (row, col) = (rng.below(GEMM_DIM), rng.below(GEMM_DIM));
        let want = reference::gemm_element(&a, &b, row, col);
        assert_eq!(f64::from(c[col * GEMM_DIM + row]), want, "C[{row},{col}]");
    }
}

#[test]
fn footprint_check_names_needed_and_free() {
    let Some(gpu) = gpu() else { return };
    let layout = BatchLayout {
        packets_per_batch: 1 << 20,
        payload_offset: 0,
        max_payload: 1 << 20,
        conversion: Conversion::Copy,
        mode: Mode::Gather,
    };
    let cfg = PipelineConfig {
        layout,
        staging: Staging::Mapped,
        depth: 2,
        workload: Workload::None,
        checksum: false,
        product: Product::None,
    };
    let e = Pipeline::new(&gpu, cfg).unwrap_err();
    assert!(matches!(e, GpuError::InsufficientMemory { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("needs") && msg.contains("free"), "{msg}");
    println!("{msg}");
    let e = DeviceMem::new(&gpu, 1 << 50).unwrap_err();
    assert!(matches!(e, GpuError::InsufficientMemory { .. }), "{e}");
}

#[test]
fn memory_regions_round_trip() {
    let Some(gpu) = gpu() else { return };
    let mut host = HostPinned::new(&gpu, 1 << 20).unwrap();
    assert_eq!(host.kind(), MemKind::HostPinned);
    assert_eq!(MemoryRegion::len(&host), 1 << 20);
    assert_eq!(host.dma(), DmaTarget::VirtAddr(host.host_ptr()));
    assert_eq!(host.host_ptr() as usize % 4096, 0);
    assert_eq!(
        host.device_addr_of(host.host_ptr().wrapping_add(10)),
        Some(host.device_ptr() + 10)
    );
    assert_eq!(
        host.device_addr_of(host.host_ptr().wrapping_add(1 << 20)),
        None
    );
    for (i, x) in host.as_mut_slice().iter_mut().enumerate() {
        *x = (i * 7) as u8;
    }
    let dev = DeviceMem::new(&gpu, 1 << 20).unwrap();
    assert_eq!(dev.device_ptr() % DEVICE_ALIGN as u64, 0);
    let stream = Stream::new(&gpu).unwrap();
    stream.copy_to_device(&dev, 0, &host, 0, 1 << 20).unwrap();
    stream.synchronize().unwrap();
    let mut back = vec![0u8; 1 << 20];
    dev.copy_to_host(0, &mut back).unwrap();
    assert!(back == host.as_slice());
    assert!(matches!(
        stream.copy_to_device(&dev, 1, &host, 0, 1 << 20),
        Err(GpuError::OutOfRange { .. })
    ));
}

#[test]
fn dmabuf_export_gives_an_fd() {
    let Some(gpu) = gpu() else { return };
    let dev = DeviceMem::new(&gpu, 4 << 20).unwrap();
    if !gpu.dma_buf_supported().unwrap() {
        let e = dev.export_dmabuf(0, 4 << 20).unwrap_err();
        assert!(matches!(e, GpuError::DmaBufUnsupported(_)), "{e}");
        println!("dma-buf not supported on this GPU/driver: {e}");
        return;
    }
    let buf = dev.export_dmabuf(0, 2 << 20).unwrap();
    use std::os::fd::AsRawFd;
    let fd = buf.fd.as_raw_fd();
    assert!(fd >= 0);
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
    println!("dma-buf fd {fd} -> {}", link.display());
    assert!(
        link.to_string_lossy().contains("dmabuf"),
        "{}",
        link.display()
    );
    assert_eq!(buf.len, 2 << 20);
    assert!(matches!(
        dev.export_dmabuf(4096, 2 << 20),
        Err(GpuError::DmaBufUnsupported(_))
    ));
}

/// `product`: each batch's result reaches pinned host memory on the pipeline's stream. With
/// three batches in flight on one stream, each completed batch carries its own spectra (the
/// next batch's FFT, enqueued before the first completes, does not overwrite them), equal to
/// the CPU DFT of that batch's samples; `Product::Batch` carries the converted samples,
/// equal to the CPU reference bit for bit.
#[test]
fn products_reach_host_memory_batch_by_batch() {
    let Some(gpu) = gpu() else { return };
    let depth = 3;
    let batches: Vec<_> = (0..depth as u64)
        .map(|k| int8_batch(&gpu, 4, 2048, 100 + k))
        .collect();
    let layout = batches[0].2;
    for product in [Product::Workload, Product::Batch] {
        let cfg = PipelineConfig {
            layout,
            staging: Staging::Mapped,
            depth,
            workload: Workload::Fft,
            checksum: false,
            product,
        };
        let want_len = match product {
            Product::Batch => layout.out_batch_bytes(),
            _ => 4 * FFT_LEN * 8,
        };
        assert_eq!(cfg.product_bytes(), want_len);
        assert_eq!(Pipeline::host_footprint(&cfg), depth * want_len);
        let mut pipe = Pipeline::new(&gpu, cfg).unwrap();
        for (_, descs, _) in &batches {
            pipe.submit(descs).unwrap();
        }
        for (region, descs, _) in &batches {
            let done = pipe.wait_completed().unwrap().unwrap();
            let got = done.product.expect("a product per batch");
            assert_eq!(got.len(), want_len);
            if product == Product::Batch {
                let refs: Vec<RefPacket<'_>> = descs
                    .iter()
                    .enumerate()
                    .map(|(i, d)| RefPacket {
                        data: &region.as_slice()[i * 2048..(i + 1) * 2048],
                        seq: d.seq,
                        offset: 0,
                    })
                    .collect();
                let mut want = vec![0u8; want_len];
                reference::run_batch(&layout, &refs, &mut want).unwrap();
                assert!(
                    got == want.as_slice(),
                    "batch product differs from the reference"
                );
                continue;
            }
            let spectra: Vec<f32> = got
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            for t in 0..4 {
                let x: Vec<[f32; 2]> = region.as_slice()[t * 2048..(t + 1) * 2048]
                    .chunks_exact(2)
                    .map(|c| [f32::from(c[0] as i8), f32::from(c[1] as i8)])
                    .collect();
                let want = reference::dft(&x);
                let scale = want.iter().map(|c| c[0].hypot(c[1])).fold(0.0, f64::max);
                for (k, w) in want.iter().enumerate() {
                    let g = &spectra[(t * FFT_LEN + k) * 2..(t * FFT_LEN + k) * 2 + 2];
                    let err = (f64::from(g[0]) - w[0])
                        .abs()
                        .max((f64::from(g[1]) - w[1]).abs());
                    assert!(
                        err <= 1e-4 * scale,
                        "transform {t} bin {k}: {err} vs {scale}"
                    );
                }
            }
        }
        println!("{product:?}: {depth} batches in flight, each product equals its CPU reference");
    }
    let bad = PipelineConfig {
        layout,
        staging: Staging::Mapped,
        depth: 1,
        workload: Workload::None,
        checksum: false,
        product: Product::Workload,
    };
    assert!(matches!(
        Pipeline::new(&gpu, bad),
        Err(GpuError::InvalidLayout(m)) if m.contains("workload")
    ));
}
