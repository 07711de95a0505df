//! `[[gpu_stages]]` and the RX queues that name one (`gpu_stage`): batch geometry, slot
//! fields, conversion, workload, and what the stage needs from its queue (a `host_pinned`
//! region on the same GPU, or on ibverbs RoCE a `device` region there with a stage that
//! never reads packets on the CPU; enough buffers and ring slots so RX never starves while
//! batches are on the GPU).

use super::capacity::largest_frame;
use super::gpudirect::{device_rx, DeviceRx, FRAME_HEADERS};
use super::{int, quoted, rxq, unknown_name, Draft};
use crate::error::Errors;
use crate::model::StreamFormat;
use crate::model::{
    BatchMode, GpuProduct, GpuStage, GpuStageId, GpuStaging, GpuWorkload, MemoryRegion, Placement,
    RegionKind, SampleConversion, SampleIn, SampleOut, Validation, FFT_LEN, GEMM_DIM,
};
use crate::schema::{
    RawBatchMode, RawConfig, RawGpuStage, RawProduct, RawSlotMode, RawStaging, RawWorkload,
};
use rtdaq_core::wire::SeqHeader;

/// Most packets per batch (`rtdaq_gpu::MAX_PACKETS_PER_BATCH`).
pub(crate) const MAX_PACKETS_PER_BATCH: i64 = 1 << 20;
/// Largest `max_payload` (`rtdaq_gpu::MAX_PAYLOAD`).
pub(crate) const MAX_PAYLOAD: i64 = 1 << 20;
/// Most batches in flight.
pub(crate) const MAX_DEPTH: i64 = 64;

/// Resolves an RX queue's `gpu_stage` name (to its index in `[[gpu_stages]]`).
pub(super) fn stage_ref(
    name: Option<&String>,
    p: &str,
    raw: &RawConfig,
    errs: &mut Errors,
) -> Option<Option<GpuStageId>> {
    let names: Vec<&str> = raw.gpu_stages.iter().map(|s| s.name.as_str()).collect();
    let unknown =
        |name: &str, known: &[&str]| unknown_name("GPU stage ([[gpu_stages]])", name, known);
    super::name_ref(name, &names, format!("{p}.gpu_stage"), unknown, errs)
        .map(|k| k.map(GpuStageId))
}

/// The queues (interface index, queue index) whose `gpu_stage` is stage `k`, from the raw
/// document (valid or not).
fn users(raw: &RawConfig, k: usize) -> Vec<(usize, usize)> {
    let name = &raw.gpu_stages[k].name;
    let mut out = Vec::new();
    for (i, iface) in raw.interfaces.iter().enumerate() {
        for (q, rq) in iface.rx_queues.iter().enumerate() {
            if rq.gpu_stage.as_ref() == Some(name) {
                out.push((i, q));
            }
        }
    }
    out
}

/// Converts every stage; reports each field that breaks its rule.
pub(super) fn stages(raw: &RawConfig, d: &Draft, errs: &mut Errors) -> Vec<Option<GpuStage>> {
    raw.gpu_stages
        .iter()
        .enumerate()
        .map(|(k, s)| stage(raw, d, k, s, errs))
        .collect()
}

fn stage(
    raw: &RawConfig,
    d: &Draft,
    k: usize,
    s: &RawGpuStage,
    errs: &mut Errors,
) -> Option<GpuStage> {
    let p = format!("gpu_stages[{k}]");
    let names: Vec<&str> = raw.gpu_stages.iter().map(|x| x.name.as_str()).collect();
    let mut ok = super::item_name(&names, k, "GPU stage", "gpu_stages", &p, errs);
    let users = users(raw, k);
    if users.is_empty() && ok {
        errs.push(
            p.clone(),
            format!(
                "GPU stage \"{}\" is not used by any RX queue; set gpu_stage = \"{}\" on a queue or remove it",
                s.name, s.name
            ),
        );
        ok = false;
    }
    let gpu = int::<u32>(
        s.gpu,
        0,
        15,
        &format!("{p}.gpu"),
        " (CUDA device ordinal)",
        errs,
    );
    let ppb = int::<u32>(
        s.packets_per_batch,
        1,
        MAX_PACKETS_PER_BATCH,
        &format!("{p}.packets_per_batch"),
        " packets (output slots per batch)",
        errs,
    );
    // The users' stream format (of the first user's interface): its header is skipped by
    // default, and reorder places by its sequence.
    let format = users
        .first()
        .and_then(|&(i, _)| d.interfaces.get(i))
        .and_then(|i| i.format)
        .unwrap_or_default();
    let header = match format {
        StreamFormat::Rtdaq => SeqHeader::LEN as u32,
        StreamFormat::Vdif(_) => 32,
        StreamFormat::Codif(_) => 64,
        StreamFormat::Ecpri => 8,
        StreamFormat::Counter(_) | StreamFormat::Spead(_) => 0,
    };
    // Header-data split into GPU memory: the stage's buffers are the data segments (what
    // follows hds_split), all of one split (the default offset skips nothing of them).
    let splits: Vec<Option<u32>> = users
        .iter()
        .map(|&(i, q)| match device_rx(raw, d, i, q) {
            Some(DeviceRx::Split(h)) => Some(h),
            _ => None,
        })
        .collect();
    let split = splits.first().copied().flatten();
    if splits.iter().any(|h| *h != split) {
        errs.push(
            p.clone(),
            format!(
                "GPU stage \"{}\" is used by queues whose packets reach it differently (hds_split {}): a stage's buffers are all whole packets, or all the data segments of one header-data split into a \"device\" region; give each kind of queue its own stage",
                s.name,
                splits
                    .iter()
                    .map(|h| h.map_or("none (whole packets)".to_owned(), |h| h.to_string()))
                    .collect::<Vec<_>>()
                    .join(" / ")
            ),
        );
        ok = false;
    }
    // RoCE delivers messages (the payload first), the other raw paths whole frames.
    let default_offset = if split.is_some() {
        0
    } else if d.kind.is_raw() && !super::roce(raw) {
        FRAME_HEADERS + header
    } else {
        header
    };
    let payload_offset = match s.payload_offset {
        None => Some(default_offset),
        Some(v) => int::<u32>(
            v,
            0,
            65535,
            &format!("{p}.payload_offset"),
            " bytes skipped at the start of each packet",
            errs,
        ),
    };
    let heaps = heap_assembly(s, format, ppb, &p, errs);
    let (payload_offset, max_payload, slots, max_packets) = match heaps {
        // SPEAD heap assembly: a slot is one heap (see GpuStage::max_packets).
        Some(Some((heaps_per_batch, heap_bytes))) => (
            Some(0),
            Some(heap_bytes),
            Some(heaps_per_batch),
            ppb.map(Some),
        ),
        Some(None) => (
            payload_offset,
            max_payload(
                s,
                &users,
                payload_offset.map(|o| o + split.unwrap_or(0)),
                d,
                &p,
                errs,
            ),
            ppb,
            Some(None),
        ),
        None => {
            ok = false;
            (payload_offset, None, None, None)
        }
    };
    let mode = mode(s, slots, &p, errs);
    if matches!(s.mode, RawBatchMode::Reorder) && raw.run.validate == Validation::Count {
        errs.push(
            format!("{p}.mode"),
            "mode = \"reorder\" takes each packet's sequence number from its rtdaq sequence header or its stream format, but run.validate = \"count\" reads neither; use mode = \"gather\", or run.validate = \"sequence\"/\"full\"",
        );
        ok = false;
    }
    let conversion = conversion(&s.conversion, &format!("{p}.conversion"), errs);
    let depth = int::<u32>(
        s.depth,
        1,
        MAX_DEPTH,
        &format!("{p}.depth"),
        " batches in flight",
        errs,
    );
    let workload = match s.workload {
        RawWorkload::None => GpuWorkload::None,
        RawWorkload::Fft => GpuWorkload::Fft,
        RawWorkload::Gemm => GpuWorkload::Gemm,
    };
    let staging = match s.staging {
        RawStaging::Mapped => GpuStaging::Mapped,
        RawStaging::CopyPerPacket => GpuStaging::CopyPerPacket,
        RawStaging::CopyBatched => GpuStaging::CopyBatched,
    };
    let record = super::record::recorder_refs(&s.record, &p, raw, errs);
    let egress = crate::egress::egress_refs(&s.egress, &p, raw, errs);
    let product = product(s, workload, &p, errs);
    let stage = GpuStage {
        name: s.name.clone(),
        gpu: gpu?,
        packets_per_batch: slots?,
        payload_offset: payload_offset?,
        max_payload: max_payload?,
        max_packets: max_packets?,
        mode: mode?,
        conversion: conversion?,
        depth: depth?,
        workload,
        checksum: s.checksum,
        staging,
        record: record?,
        egress: egress?,
        product: product?,
    };
    ok &= workload_fits(&stage, &p, errs);
    ok.then_some(stage)
}

/// SPEAD heap assembly (`mode = "reorder"` on a SPEAD stream): `Some(Some((heaps_per_batch,
/// heap_bytes)))`; `Some(None)` for every other stage (which must not set those keys); `None`
/// after an error.
fn heap_assembly(
    s: &RawGpuStage,
    format: StreamFormat,
    ppb: Option<u32>,
    p: &str,
    errs: &mut Errors,
) -> Option<Option<(u32, u32)>> {
    let spead = matches!(format, StreamFormat::Spead(_));
    if !(spead && matches!(s.mode, RawBatchMode::Reorder)) {
        let set = [
            ("heaps_per_batch", s.heaps_per_batch),
            ("heap_bytes", s.heap_bytes),
        ]
        .into_iter()
        .find(|(_, v)| v.is_some());
        if let Some((key, _)) = set {
            let why = if spead {
                "mode = \"gather\" places packets in arrival order"
            } else {
                "the stage's queues do not receive SPEAD (interfaces.format.kind = \"spead\")"
            };
            errs.push(
                format!("{p}.{key}"),
                format!(
                    "heaps_per_batch and heap_bytes shape SPEAD heap assembly (mode = \"reorder\" on a SPEAD stream), but {why}; remove them"
                ),
            );
            return None;
        }
        return Some(None);
    }
    let mut ok = true;
    let mut refuse = |errs: &mut Errors, key: &str, msg: &str| {
        errs.push(format!("{p}.{key}"), msg.to_string());
        ok = false;
    };
    if s.max_payload.is_some() {
        refuse(
            errs,
            "max_payload",
            "SPEAD heap assembly puts one heap in a slot of heap_bytes bytes; remove max_payload",
        );
    }
    if s.payload_offset.is_some() {
        refuse(
            errs,
            "payload_offset",
            "SPEAD heap assembly places each packet's payload where its item pointers end (they vary per packet); remove payload_offset",
        );
    }
    if s.staging != RawStaging::Mapped {
        refuse(
            errs,
            "staging",
            "SPEAD heap assembly reads each packet where it lies (staging = \"mapped\"): a staging copy has one fixed-size place per packet; remove staging",
        );
    }
    let need = "a SPEAD stage in mode = \"reorder\" assembles heaps: one slot per heap, each packet's payload at its heap offset; set heaps_per_batch = <heaps per batch> and heap_bytes = <payload bytes of one heap> (packets_per_batch is then the most packets one batch holds), or use mode = \"gather\"";
    let heaps = match s.heaps_per_batch {
        None => {
            refuse(errs, "heaps_per_batch", need);
            None
        }
        Some(v) => int::<u32>(
            v,
            1,
            MAX_PACKETS_PER_BATCH,
            &format!("{p}.heaps_per_batch"),
            " heaps (slots per batch)",
            errs,
        ),
    };
    let bytes = match s.heap_bytes {
        None => {
            refuse(errs, "heap_bytes", need);
            None
        }
        Some(v) => {
            let path = format!("{p}.heap_bytes");
            int::<u32>(v, 4, MAX_PAYLOAD, &path, " payload bytes of one heap", errs).filter(|&b| {
                let four = b % 4 == 0;
                if !four {
                    errs.push(
                        path.clone(),
                        format!(
                            "{b} is not a multiple of 4 (the kernels move 4-byte words); use {}",
                            b.div_ceil(4) * 4
                        ),
                    );
                }
                four
            })
        }
    };
    if let (Some(h), Some(n)) = (heaps, ppb) {
        if n < h {
            errs.push(
                format!("{p}.packets_per_batch"),
                format!(
                    "packets_per_batch = {n} is the most packets a batch of heaps_per_batch = {h} heaps holds: at least one per heap; raise it to heaps_per_batch x packets per heap"
                ),
            );
            ok = false;
        }
    }
    let (heaps, bytes) = (heaps?, bytes?);
    ok.then_some(Some((heaps, bytes)))
}

/// `product`: what the stage's recorders write and its egress sinks send; by default the
/// workload's result when the stage has a workload, else the batch.
fn product(
    s: &RawGpuStage,
    workload: GpuWorkload,
    p: &str,
    errs: &mut Errors,
) -> Option<Option<GpuProduct>> {
    if s.record.is_empty() && s.egress.is_empty() {
        if s.product.is_some() {
            errs.push(
                format!("{p}.product"),
                "product says what the stage's recorders write and its egress sinks send, but record and egress are empty; add record = [\"<recorder>\"] or egress = [\"<egress sink>\"], or remove product",
            );
            return None;
        }
        return Some(None);
    }
    let product = match (s.product, workload) {
        (Some(RawProduct::Batch), _) | (None, GpuWorkload::None) => GpuProduct::Batch,
        (Some(RawProduct::Workload) | None, _) => GpuProduct::Workload,
    };
    if product == GpuProduct::Workload && workload == GpuWorkload::None {
        errs.push(
            format!("{p}.product"),
            "product = \"workload\" records the workload's result, but workload = \"none\"; set workload = \"fft\" or \"gemm\", or product = \"batch\" (the converted samples)",
        );
        return None;
    }
    Some(Some(product))
}

/// `max_payload`: as given (a multiple of 4), or the largest packet of the queues using the
/// stage minus `payload_offset`, rounded down to a multiple of 4.
fn max_payload(
    s: &RawGpuStage,
    users: &[(usize, usize)],
    offset: Option<u32>,
    d: &Draft,
    p: &str,
    errs: &mut Errors,
) -> Option<u32> {
    let path = format!("{p}.max_payload");
    if let Some(v) = s.max_payload {
        let m = int::<u32>(v, 4, MAX_PAYLOAD, &path, " payload bytes per packet", errs)?;
        if m % 4 != 0 {
            errs.push(
                path,
                format!(
                    "{m} is not a multiple of 4 (the kernels move 4-byte words); use {} or {}",
                    m / 4 * 4,
                    m.div_ceil(4) * 4
                ),
            );
            return None;
        }
        return Some(m);
    }
    let offset = offset?;
    let largest = users
        .iter()
        .filter_map(|&(i, _)| d.interfaces.get(i))
        .filter_map(|i| largest_frame(d.kind, i))
        .map(|(m, _)| m)
        .max()?;
    let m = largest.saturating_sub(offset) / 4 * 4;
    if m == 0 {
        errs.push(
            path,
            format!(
                "the queues using this stage receive at most {largest} B, not more than payload_offset {offset}: no payload is left; lower payload_offset or raise the interface's mtu/max_message_size"
            ),
        );
        return None;
    }
    Some(m.min(MAX_PAYLOAD as u32))
}

/// `mode`, `slot_mode` and the bit-field keys.
fn mode(s: &RawGpuStage, ppb: Option<u32>, p: &str, errs: &mut Errors) -> Option<BatchMode> {
    let bit_keys = [
        ("slot_bits", s.slot_bits),
        ("slot_shift", s.slot_shift),
        ("batch_bits", s.batch_bits),
        ("batch_shift", s.batch_shift),
    ];
    let set: Vec<&str> = bit_keys
        .iter()
        .filter(|(_, v)| v.is_some())
        .map(|(k, _)| *k)
        .collect();
    match (s.mode, s.slot_mode.unwrap_or(RawSlotMode::Modulo)) {
        (RawBatchMode::Gather, _) => {
            if s.slot_mode.is_some() || !set.is_empty() {
                let key = if s.slot_mode.is_some() {
                    "slot_mode"
                } else {
                    set[0]
                };
                errs.push(
                    format!("{p}.{key}"),
                    "mode = \"gather\" places packets in arrival order: remove slot_mode and the bit-field keys, or set mode = \"reorder\"",
                );
                return None;
            }
            Some(BatchMode::Gather)
        }
        (RawBatchMode::Reorder, RawSlotMode::Modulo) => {
            if let Some(k) = set.first() {
                errs.push(
                    format!("{p}.{k}"),
                    format!(
                        "{k} applies to slot_mode = \"bit_fields\" only (slot_mode is \"modulo\": slot = seq % packets_per_batch); remove {} or set slot_mode = \"bit_fields\"",
                        set.join(", ")
                    ),
                );
                return None;
            }
            Some(BatchMode::ReorderModulo)
        }
        (RawBatchMode::Reorder, RawSlotMode::BitFields) => bit_fields(s, ppb, p, errs),
    }
}

fn bit_fields(s: &RawGpuStage, ppb: Option<u32>, p: &str, errs: &mut Errors) -> Option<BatchMode> {
    let Some(slot_bits) = s.slot_bits else {
        errs.push(
            format!("{p}.slot_bits"),
            "slot_mode = \"bit_fields\" needs slot_bits = <width of the slot field in the sequence number> (e.g. 8 for 256 packets per batch)",
        );
        return None;
    };
    let slot_bits = int::<u8>(slot_bits, 1, 31, &format!("{p}.slot_bits"), " bits", errs)?;
    let slot_shift = int::<u8>(
        s.slot_shift.unwrap_or(0),
        0,
        31,
        &format!("{p}.slot_shift"),
        " (first bit of the slot field, LSB = 0)",
        errs,
    )?;
    if u32::from(slot_shift) + u32::from(slot_bits) > 32 {
        errs.push(
            format!("{p}.slot_bits"),
            format!(
                "slot field of {slot_bits} bits at bit {slot_shift} ends past bit 31 of the 32-bit sequence number; lower slot_shift or slot_bits"
            ),
        );
        return None;
    }
    if let Some(ppb) = ppb {
        if (1u64 << slot_bits) < u64::from(ppb) {
            errs.push(
                format!("{p}.slot_bits"),
                format!(
                    "a slot field of {slot_bits} bits addresses {} slots, fewer than packets_per_batch = {ppb}; use slot_bits = {}",
                    1u64 << slot_bits,
                    32 - (ppb - 1).leading_zeros()
                ),
            );
            return None;
        }
    }
    let default_shift = i64::from(slot_shift) + i64::from(slot_bits);
    let batch_shift = int::<u8>(
        s.batch_shift.unwrap_or(default_shift),
        0,
        32,
        &format!("{p}.batch_shift"),
        " (first bit of the batch-id field)",
        errs,
    )?;
    let batch_bits = int::<u8>(
        s.batch_bits.unwrap_or(32 - i64::from(batch_shift)),
        0,
        32,
        &format!("{p}.batch_bits"),
        " bits (0: no batch-id field)",
        errs,
    )?;
    if u32::from(batch_shift) + u32::from(batch_bits) > 32 {
        errs.push(
            format!("{p}.batch_bits"),
            format!(
                "batch-id field of {batch_bits} bits at bit {batch_shift} ends past bit 31 of the 32-bit sequence number; lower batch_shift or batch_bits"
            ),
        );
        return None;
    }
    Some(BatchMode::ReorderBitFields {
        slot_shift,
        slot_bits,
        batch_shift,
        batch_bits,
    })
}

/// `"none"` or `"<int8|int16le|int16be|int4>_to_<fp16|bf16|fp32>"`.
pub(crate) fn conversion(s: &str, path: &str, errs: &mut Errors) -> Option<SampleConversion> {
    if s == "none" {
        return Some(SampleConversion::None);
    }
    let parsed = s.split_once("_to_").and_then(|(a, b)| {
        let from = SampleIn::ALL.into_iter().find(|f| f.as_str() == a)?;
        let to = SampleOut::ALL.into_iter().find(|t| t.as_str() == b)?;
        Some(SampleConversion::Convert { from, to })
    });
    if parsed.is_none() {
        let ins: Vec<&str> = SampleIn::ALL.iter().map(|f| f.as_str()).collect();
        let outs: Vec<&str> = SampleOut::ALL.iter().map(|f| f.as_str()).collect();
        errs.push(
            path,
            format!(
                "{s:?} is not a conversion; write \"none\" or \"<from>_to_<to>\" with from one of {} and to one of {} (e.g. \"int16le_to_fp32\")",
                quoted(ins),
                quoted(outs)
            ),
        );
    }
    parsed
}

/// FFT and GEMM read the batch output as FP32 and need enough of it.
fn workload_fits(s: &GpuStage, p: &str, errs: &mut Errors) -> bool {
    let w = s.workload;
    if w == GpuWorkload::None {
        return true;
    }
    let path = format!("{p}.workload");
    if !s.conversion.fp32_output() {
        errs.push(
            path,
            format!(
                "workload \"{}\" reads the batch as FP32 but conversion = \"{}\" writes {}; use conversion = \"none\" or \"<from>_to_fp32\", or workload = \"none\"",
                w.as_str(),
                s.conversion,
                match s.conversion {
                    SampleConversion::Convert { to, .. } => to.as_str(),
                    SampleConversion::None => "bytes",
                }
            ),
        );
        return false;
    }
    let need = match w {
        GpuWorkload::Fft => FFT_LEN * 8,
        GpuWorkload::Gemm => GEMM_DIM * GEMM_DIM * 4,
        GpuWorkload::None => 0,
    };
    if s.out_batch_bytes() < need {
        errs.push(
            path,
            format!(
                "workload \"{}\" needs a batch output of at least {need} B, this stage makes {} B (packets_per_batch {} x {} B per slot); raise packets_per_batch",
                w.as_str(),
                s.out_batch_bytes(),
                s.packets_per_batch,
                s.out_slot_bytes()
            ),
        );
        return false;
    }
    true
}

/// What a stage needs from each queue using it: one region on the stage's GPU, either
/// `host_pinned` or `device` (RoCE, or raw whole frames) with a gather stage without checksum,
/// or the `device` data region of a header-data split; with
/// buffers for `depth + 1` batches plus two bursts, and a ring deep enough to hold the bursts
/// of `depth + 1` batches while they are on the GPU.
pub(super) fn queues_fit_stages(raw: &RawConfig, d: &Draft, errs: &mut Errors) {
    let roce = super::roce(raw);
    let kinds = if super::caps(raw).device_rx {
        "\"host_pinned\" or \"device\""
    } else {
        "\"host_pinned\""
    };
    for (i, iface) in d.interfaces.iter().enumerate() {
        for (q, rq) in iface.rx.iter().enumerate() {
            let Some(rq) = rq else { continue };
            let Some(sid) = rq.gpu_stage else { continue };
            let Some(Some(stage)) = d.gpu_stages.get(sid.0) else {
                continue;
            };
            let p = rxq(i, q);
            let split = rq.memory_regions.len() == 2
                && matches!(device_rx(raw, d, i, q), Some(DeviceRx::Split(_)));
            if rq.memory_regions.len() != 1 && !split {
                errs.push(
                    format!("{p}.gpu_stage"),
                    format!(
                        "a GPU stage reads whole packets from one region, or the data segments of a header-data split into a \"device\" region (two regions: CPU headers, then the device region; engines dpdk and ibverbs raw), but this queue lists {}; list one {kinds} region",
                        rq.memory_regions.len()
                    ),
                );
                continue;
            }
            // AF_PACKET hands out packets where the kernel wrote them, in its mapped ring,
            // never in the queue's region: the GPU could read none of them (issue #22).
            if !super::caps(raw).buffers_in_region {
                errs.push(
                    format!("{p}.gpu_stage"),
                    format!(
                        "engine afpacket delivers packets in the kernel's mapped ring, not in the queue's region, so GPU stage \"{}\" could read none of them; use engine afxdp (its UMEM is the region), dpdk, socket or ibverbs for a GPU queue (header-data split, which copies into the pools, needs two regions, and a GPU stage reads one)",
                        stage.name
                    ),
                );
                continue;
            }
            // AF_XDP multi-buffer: a jumbo frame lies in several UMEM frames, and a GPU stage
            // takes one buffer per packet.
            if let (Some(crate::model::Engine::Afxdp(x)), Some((max, _))) =
                (&d.engine, super::capacity::largest_frame(d.kind, iface))
            {
                let room = x.frame_size.saturating_sub(256);
                if max > room {
                    errs.push(
                        format!("{p}.gpu_stage"),
                        format!(
                            "frames of up to {max} B arrive in several AF_XDP frames of {room} B (multi-buffer: engine.afxdp.frame_size {} − 256 B headroom), but GPU stage \"{}\" takes one buffer per packet; lower the interface's mtu to {} or less for a GPU queue, or use engine socket (8000 B datagrams in one buffer) or dpdk",
                            x.frame_size,
                            stage.name,
                            room - 22
                        ),
                    );
                    continue;
                }
            }
            let rid = rq.memory_regions[usize::from(split)];
            let Some(Some(region)) = d.regions.get(rid.0) else {
                continue;
            };
            match region.kind {
                RegionKind::HostPinned => {}
                // RoCE messages and raw whole frames (DPDK, ibverbs) in GPU memory: nothing
                // on the CPU.
                RegionKind::Device if roce || !split => {
                    if !device_stage(stage, sid.0, region, &p, true, errs) {
                        continue;
                    }
                }
                // Payloads in GPU memory, headers on the CPU: reorder takes the sequence
                // number from the header.
                RegionKind::Device if split => {
                    if !device_stage(stage, sid.0, region, &p, false, errs) {
                        continue;
                    }
                }
                kind => {
                    let device = if roce {
                        format!(
                            ", or kind = \"device\" and gpu = {} (the NIC writes GPU memory; the stage then needs mode = \"gather\" and checksum = false)",
                            stage.gpu
                        )
                    } else if super::caps(raw).device_rx {
                        format!(
                            ", or kind = \"device\" and gpu = {} (GPUDirect: the NIC writes GPU memory, whole frames with mode = \"gather\", or the payloads of a header-data split)",
                            stage.gpu
                        )
                    } else {
                        String::new()
                    };
                    errs.push(
                        format!("{p}.gpu_stage"),
                        format!(
                            "GPU stage \"{}\" reads packets through their mapped pinned addresses, but memory_regions[0] \"{}\" is kind \"{}\"; use a region with kind = \"host_pinned\" and gpu = {}{device}",
                            stage.name,
                            region.name,
                            kind.as_str(),
                            stage.gpu
                        ),
                    );
                    continue;
                }
            }
            if region.placement != Placement::Gpu(stage.gpu) {
                let g = match region.placement {
                    Placement::Gpu(g) | Placement::Numa(g) => g,
                };
                let on = if region.kind == RegionKind::Device {
                    "is memory of"
                } else {
                    "is pinned for"
                };
                errs.push(
                    format!("{p}.gpu_stage"),
                    format!(
                        "GPU stage \"{}\" runs on gpu {} but the queue's region \"{}\" {on} gpu {g}; set the region's gpu = {} or the stage's gpu = {g}",
                        stage.name, stage.gpu, region.name, stage.gpu
                    ),
                );
                continue;
            }
            pool_fits(d, stage, sid.0, rid.0, rq.batch_size, errs);
            let batch = u64::from(rq.batch_size);
            let per_batch = u64::from(stage.packets_per_batch_max()).div_ceil(batch) + 2;
            let need = (u64::from(stage.depth) + 1) * per_batch * batch;
            if u64::from(rq.ring_depth) < need {
                errs.push(
                    format!("{p}.ring_depth"),
                    format!(
                        "ring_depth {} cannot hold the bursts of GPU stage \"{}\" while its batches are on the GPU: (depth {} + 1) x (packets_per_batch {} / batch_size {batch}, rounded up, + 2) bursts x {batch} = {need} packets; raise ring_depth to {}, or lower depth or packets_per_batch",
                        rq.ring_depth,
                        stage.name,
                        stage.depth,
                        stage.packets_per_batch_max(),
                        need.next_power_of_two()
                    ),
                );
            }
        }
    }
}

/// A stage fed from a `device` region (the NIC writes GPU memory) must never read the
/// packets on the CPU: `checksum = false` (the reference checksum is computed on the CPU),
/// and where no header reaches the CPU (`whole`: RoCE messages, DPDK whole frames)
/// `mode = "gather"` (reorder takes each packet's sequence number on the CPU). Errors at the
/// stage's key, naming the queue `p` and its region.
fn device_stage(
    s: &GpuStage,
    k: usize,
    region: &MemoryRegion,
    p: &str,
    whole: bool,
    errs: &mut Errors,
) -> bool {
    let mut ok = true;
    let why = format!(
        "{p} receives into region \"{}\" of kind \"device\", GPU memory the CPU cannot read",
        region.name
    );
    if whole && s.mode != BatchMode::Gather {
        errs.push(
            format!("gpu_stages[{k}].mode"),
            format!(
                "mode = \"reorder\" needs each packet's sequence number on the CPU to form batches, but {why}; use mode = \"gather\", or a \"host_pinned\" region for that queue, or (engines dpdk, ibverbs raw) split the headers into CPU memory with hds_split"
            ),
        );
        ok = false;
    }
    if s.checksum {
        errs.push(
            format!("gpu_stages[{k}].checksum"),
            format!(
                "checksum = true compares each batch's GPU checksum with a reference the CPU computes over its packets, but {why}; set checksum = false, or use a \"host_pinned\" region for that queue"
            ),
        );
        ok = false;
    }
    ok
}

/// The region of a GPU queue keeps `(depth + 1) x packets_per_batch` buffers on the GPU side
/// and needs `2 x batch_size` more for RX, per queue sharing it.
fn pool_fits(d: &Draft, stage: &GpuStage, k: usize, r: usize, batch: u32, errs: &mut Errors) {
    let Some(Some(region)) = d.regions.get(r) else {
        return;
    };
    let id = crate::model::RegionId(r);
    let rx = d
        .interfaces
        .iter()
        .flat_map(|i| i.rx.iter().flatten())
        .filter(|q| q.memory_regions.contains(&id))
        .count();
    let tx = d
        .interfaces
        .iter()
        .flat_map(|i| i.tx.iter().flatten())
        .filter(|q| q.memory_regions.contains(&id))
        .count();
    let sharing = (rx + tx).max(1) as u64;
    let share = u64::from(region.buf_count) / sharing;
    let held = (u64::from(stage.depth) + 1) * u64::from(stage.packets_per_batch_max());
    let need = held + 2 * u64::from(batch);
    if need > share {
        let per = if sharing > 1 {
            format!(
                " (its share: {} buffers / {sharing} queues)",
                region.buf_count
            )
        } else {
            String::new()
        };
        errs.push(
            format!("gpu_stages[{k}].packets_per_batch"),
            format!(
                "packets_per_batch {} with depth {} keeps up to (depth + 1) x {} = {held} buffers of region \"{}\" on the GPU side, plus 2 x batch_size {batch} for RX = {need}, but the queue gets {share}{per}: RX would starve; lower packets_per_batch to {} or depth, or raise buf_count to {}",
                stage.packets_per_batch_max(),
                stage.depth,
                stage.packets_per_batch_max(),
                region.name,
                share.saturating_sub(2 * u64::from(batch)) / (u64::from(stage.depth) + 1),
                need * sharing
            ),
        );
    }
}
