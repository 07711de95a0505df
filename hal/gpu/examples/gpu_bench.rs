//! GPU data-path benchmark, all in one run (so the numbers share one machine state):
//! 1. pinned -> device copy peak (`cuMemcpyHtoDAsync`, 8 MiB .. 1 GiB), the ceiling of any
//!    host-staging path;
//! 2. device -> device copy bandwidth vs the reorder kernel over device-resident packets
//!    (1024 packets x 8000 B payload, shuffled) for several conversions;
//! 3. staging from pinned host memory: kernel reading mapped memory vs per-packet async
//!    copies vs one batched copy, each followed by the kernel;
//! 4. the full pipeline (submit/poll, depth 4, checksum) with workloads none / fft / gemm.
//!
//! `cargo run --release -p rtdaq-gpu --example gpu_bench [-- GPU_ID]`. Prints one line per
//! measurement; GB/s are 1e9 bytes per second.

use std::time::Instant;

use rtdaq_gpu::{
    BatchLayout, Conversion, DeviceMem, FloatFormat, Gpu, GpuError, HostPinned, IntFormat, Mode,
    PacketDesc, Pipeline, PipelineConfig, SlotMode, Staging, Stream, Workload,
};

const PPB: u32 = 1024;
const PAYLOAD: u32 = 8000;
const HDR: u32 = 32;
const STRIDE: u64 = 8192;

fn shuffled_descs(base: u64, seed: u64) -> Vec<PacketDesc> {
    let mut order: Vec<u32> = (0..PPB).collect();
    let mut x = seed;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
        .iter()
        .map(|&s| PacketDesc {
            addr: base + u64::from(s) * STRIDE,
            seq: 3 * PPB + s,
            len: HDR + PAYLOAD,
            offset: 0,
        })
        .collect()
}

fn layout(conversion: Conversion) -> BatchLayout {
    BatchLayout {
        packets_per_batch: PPB,
        payload_offset: HDR,
        max_payload: PAYLOAD,
        conversion,
        mode: Mode::Reorder(SlotMode::Modulo),
    }
}

fn gbps(bytes: f64, ms: f32) -> f64 {
    bytes / (f64::from(ms) * 1e-3) / 1e9
}

fn main() {
    if let Err(e) = run() {
        eprintln!("gpu_bench: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), GpuError> {
    let id: u32 = std::env::args()
        .nth(1)
        .map_or(0, |s| s.parse().expect("GPU id"));
    let gpu = Gpu::open(id)?;
    let (free, total) = gpu.mem_info()?;
    let cc = gpu.compute_capability()?;
    println!(
        "gpu {id}: {} sm_{}{} free {} MiB / {} MiB, dma-buf {}",
        gpu.name()?,
        cc.0,
        cc.1,
        free >> 20,
        total >> 20,
        gpu.dma_buf_supported()?
    );
    let stream = Stream::new(&gpu)?;

    // 1. pinned -> device peak
    let gib = 1usize << 30;
    let host = HostPinned::new(&gpu, gib)?;
    let dev = DeviceMem::new(&gpu, gib)?;
    let dev2 = DeviceMem::new(&gpu, gib)?;
    for size in [8usize << 20, 64 << 20, 256 << 20, 1 << 30] {
        let reps = ((4usize << 30) / size).clamp(4, 64);
        stream.copy_to_device(&dev, 0, &host, 0, size)?; // warm-up
        let ms = stream.time_ms(|s| {
            for _ in 0..reps {
                s.copy_to_device(&dev, 0, &host, 0, size)?;
            }
            Ok(())
        })?;
        println!(
            "h2d_copy size_mib={} reps={reps} gbps={:.1}",
            size >> 20,
            gbps((size * reps) as f64, ms)
        );
    }
    // 2a. device -> device
    for size in [64usize << 20, 1 << 30] {
        let reps = 16;
        let ms = stream.time_ms(|s| {
            for _ in 0..reps {
                s.copy_device_to_device(&dev2, 0, &dev, 0, size)?;
            }
            Ok(())
        })?;
        let g = gbps((size * reps) as f64, ms);
        println!(
            "d2d_copy size_mib={} gbps_copied={g:.1} gbps_read_plus_write={:.1}",
            size >> 20,
            2.0 * g
        );
    }
    drop(dev2);

    // 2b. reorder kernel over device-resident packets (descriptors point into `dev`)
    let conversions = [
        ("copy", Conversion::Copy),
        (
            "i8->f32",
            Conversion::Convert {
                from: IntFormat::I8,
                to: FloatFormat::F32,
            },
        ),
        (
            "i16be->f16",
            Conversion::Convert {
                from: IntFormat::I16Be,
                to: FloatFormat::F16,
            },
        ),
        (
            "i4->bf16",
            Conversion::Convert {
                from: IntFormat::I4,
                to: FloatFormat::Bf16,
            },
        ),
    ];
    let in_bytes = f64::from(PPB) * f64::from(PAYLOAD);
    let dev_descs = shuffled_descs(dev.device_ptr(), 1);
    for (name, conversion) in conversions {
        let l = layout(conversion);
        let cfg = PipelineConfig {
            layout: l,
            staging: Staging::Mapped,
            depth: 1,
            workload: Workload::None,
            checksum: false,
            product: rtdaq_gpu::Product::None,
        };
        let mut pipe = Pipeline::new(&gpu, cfg)?;
        pipe.time_batches(&dev_descs, 5)?;
        let iters = 200;
        let ms = pipe.time_batches(&dev_descs, iters)?;
        let per = f64::from(ms) / f64::from(iters);
        let out_bytes = l.out_batch_bytes() as f64;
        println!(
            "reorder_kernel src=device conv={name} us_per_batch={:.1} gbps_in={:.1} gbps_in_plus_out={:.1}",
            per * 1e3,
            in_bytes / (per * 1e-3) / 1e9,
            (in_bytes + out_bytes) / (per * 1e-3) / 1e9
        );
    }

    // 2c. batch-size dependence: the same copy reorder with 8x larger batches (64 MB), to
    // separate the fixed per-batch cost (descriptor upload, memsets, 2-3 launches) from the
    // kernel's bandwidth
    {
        let big = 8 * PPB;
        let l = BatchLayout {
            packets_per_batch: big,
            ..layout(Conversion::Copy)
        };
        let descs: Vec<PacketDesc> = (0..big)
            .map(|s| PacketDesc {
                addr: dev.device_ptr() + u64::from((s * 7919) % big) * STRIDE,
                seq: s,
                len: HDR + PAYLOAD,
                offset: 0,
            })
            .collect();
        let cfg = PipelineConfig {
            layout: l,
            staging: Staging::Mapped,
            depth: 1,
            workload: Workload::None,
            checksum: false,
            product: rtdaq_gpu::Product::None,
        };
        let mut pipe = Pipeline::new(&gpu, cfg)?;
        pipe.time_batches(&descs, 3)?;
        let iters = 50;
        let ms = pipe.time_batches(&descs, iters)?;
        let per = f64::from(ms) / f64::from(iters);
        let bytes = f64::from(big) * f64::from(PAYLOAD);
        println!(
            "reorder_kernel src=device conv=copy ppb={big} us_per_batch={:.1} gbps_in={:.1} gbps_in_plus_out={:.1}",
            per * 1e3,
            bytes / (per * 1e-3) / 1e9,
            2.0 * bytes / (per * 1e-3) / 1e9
        );
    }

    // 3. staging from pinned host memory (descriptors point into `host`)
    let host_descs = shuffled_descs(host.device_ptr(), 2);
    for staging in [
        Staging::Mapped,
        Staging::CopyPerPacket,
        Staging::CopyBatched,
    ] {
        let l = layout(Conversion::Convert {
            from: IntFormat::I8,
            to: FloatFormat::F32,
        });
        let cfg = PipelineConfig {
            layout: l,
            staging,
            depth: 1,
            workload: Workload::None,
            checksum: false,
            product: rtdaq_gpu::Product::None,
        };
        let mut pipe = Pipeline::new(&gpu, cfg)?;
        pipe.time_batches(&host_descs, 3)?;
        let iters = 100;
        let wall = Instant::now();
        let ms = pipe.time_batches(&host_descs, iters)?;
        let wall_ms = wall.elapsed().as_secs_f64() * 1e3;
        println!(
            "staging src=pinned mode={staging:?} conv=i8->f32 us_per_batch={:.1} gbps_payload={:.1} cpu_wall_us_per_batch={:.1}",
            f64::from(ms) / f64::from(iters) * 1e3,
            gbps(in_bytes * f64::from(iters), ms),
            wall_ms / f64::from(iters) * 1e3
        );
    }

    // 4. full pipeline, submit/poll as the runtime drives it
    for workload in [Workload::None, Workload::Fft, Workload::Gemm] {
        let l = layout(Conversion::Convert {
            from: IntFormat::I8,
            to: FloatFormat::F32,
        });
        let cfg = PipelineConfig {
            layout: l,
            staging: Staging::Mapped,
            depth: 4,
            workload,
            checksum: true,
            product: rtdaq_gpu::Product::None,
        };
        let mut pipe = Pipeline::new(&gpu, cfg)?;
        let batches = 400u64;
        let (mut accepted, mut busy, mut missing) = (0u64, 0u64, 0u64);
        let t = Instant::now();
        while accepted < batches {
            while let Some(c) = pipe.poll_completed()? {
                missing += u64::from(c.missing);
            }
            match pipe.submit(&host_descs) {
                Ok(_) => accepted += 1,
                Err(GpuError::Busy { .. }) => busy += 1,
                Err(e) => return Err(e),
            }
        }
        while let Some(c) = pipe.wait_completed()? {
            missing += u64::from(c.missing);
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "pipeline workload={workload:?} staging=Mapped batches={accepted} busy_spins={busy} missing_slots={missing} batches_per_s={:.0} gbps_payload={:.1}",
            accepted as f64 / s,
            in_bytes * accepted as f64 / s / 1e9
        );
    }
    Ok(())
}
