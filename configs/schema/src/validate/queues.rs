//! RX and TX queues: ids, thread placement, burst and ring sizes, region references, mode.

use super::{int, rxq, txq, unknown_name, Draft};
use crate::engines::{self, Dir};
use crate::error::Errors;
use crate::model::{EngineKind, RegionId, RegionKind, RxMode, RxQueue, TxQueue};
use crate::schema::{RawConfig, RawInterface, RawRxQueue, RawTxQueue};
use rtdaq_core::MAX_SEGMENTS;

/// Largest `batch_size` (one `recvmmsg`/`sendmmsg` call takes at most 1024 messages).
pub(crate) const MAX_BATCH: i64 = 1024;
/// Largest `ring_depth`.
pub(crate) const MAX_RING: i64 = 1 << 20;

/// Converts one RX queue.
pub(super) fn rx_queue(
    q: &RawRxQueue,
    i: usize,
    n: usize,
    iface: &RawInterface,
    raw: &RawConfig,
    d: &Draft,
    errs: &mut Errors,
) -> Option<RxQueue> {
    let p = rxq(i, n);
    let others: Vec<i64> = iface.rx_queues.iter().map(|x| x.id).collect();
    let id = queue_id(q.id, n, &others, "RX", &iface.name, &p, errs);
    let cpu_core = core(q.cpu_core, &format!("{p}.cpu_core"), errs);
    let rt_priority = priority(q.rt_priority, &p, errs);
    let (batch_size, ring_depth) = batch_and_ring(q.batch_size, q.ring_depth, &p, errs);
    let timeout_us = int::<u32>(
        q.timeout_us,
        0,
        1_000_000,
        &format!("{p}.timeout_us"),
        " µs (0 = hand over whatever one poll returns)",
        errs,
    );
    let regions = region_refs(&q.memory_regions, &p, raw, d, errs);
    if let Some(r) = &regions {
        device_regions_supported(r, Dir::Rx, raw, &p, d, errs);
    }
    let hds_ok = hds_split_matches_regions(q, raw.engine.kind, &p, errs);
    let mode = mode(q, &p, errs);
    let gpu_stage = super::gpu::stage_ref(q.gpu_stage.as_ref(), &p, raw, errs);
    let record = super::record::recorder_refs(&q.record, &p, raw, errs);
    let egress = crate::egress::egress_refs(&q.egress, &p, raw, errs);
    let dada_ring = crate::dada_ring::ring_ref(q.dada_ring.as_ref(), &p, raw, errs);
    let dump = crate::dump::dump_ref(q.dump.as_ref(), &p, raw, errs);
    Some(RxQueue {
        id: id?,
        cpu_core: cpu_core?,
        rt_priority: rt_priority?,
        batch_size: batch_size?,
        timeout_us: timeout_us?,
        ring_depth: ring_depth?,
        memory_regions: regions?,
        hds_split: if hds_ok {
            q.hds_split.map(|h| h as u32)
        } else {
            return None;
        },
        mode: mode?,
        busy_poll: q.busy_poll,
        gpu_stage: gpu_stage?,
        record: record?,
        egress: egress?,
        dada_ring: dada_ring?,
        dump: dump?,
    })
}

/// Converts one TX queue.
pub(super) fn tx_queue(
    q: &RawTxQueue,
    i: usize,
    n: usize,
    iface: &RawInterface,
    raw: &RawConfig,
    d: &Draft,
    errs: &mut Errors,
) -> Option<TxQueue> {
    let p = txq(i, n);
    let others: Vec<i64> = iface.tx_queues.iter().map(|x| x.id).collect();
    let id = queue_id(q.id, n, &others, "TX", &iface.name, &p, errs);
    let cpu_core = core(q.cpu_core, &format!("{p}.cpu_core"), errs);
    let rt_priority = priority(q.rt_priority, &p, errs);
    let (batch_size, ring_depth) = batch_and_ring(q.batch_size, q.ring_depth, &p, errs);
    let regions = region_refs(&q.memory_regions, &p, raw, d, errs);
    if let Some(r) = &regions {
        device_regions_supported(r, Dir::Tx, raw, &p, d, errs);
    }
    let pacing = pacing(q.pacing_gbps, &p, errs);
    Some(TxQueue {
        id: id?,
        cpu_core: cpu_core?,
        rt_priority: rt_priority?,
        batch_size: batch_size?,
        ring_depth: ring_depth?,
        memory_regions: regions?,
        pacing_gbps: pacing?,
        busy_poll: q.busy_poll,
    })
}

/// Queue ids are 0..=65535 and unique per interface and direction.
fn queue_id(
    id: i64,
    n: usize,
    all: &[i64],
    dir: &str,
    iface: &str,
    p: &str,
    errs: &mut Errors,
) -> Option<u16> {
    let path = format!("{p}.id");
    let v = int::<u16>(id, 0, 65535, &path, "", errs)?;
    if let Some(first) = all[..n].iter().position(|&x| x == id) {
        let prefix = p.rsplit_once('[').map_or(p, |(a, _)| a);
        errs.push(
            path,
            format!(
                "duplicate {dir} queue id {id} on interface \"{iface}\" (also {prefix}[{first}]); queue ids are unique per interface and direction"
            ),
        );
        return None;
    }
    Some(v)
}

/// Core numbers fit a `cpu_set_t` (the board limit is checked with the other core rules).
pub(super) fn core(c: i64, path: &str, errs: &mut Errors) -> Option<u32> {
    int::<u32>(c, 0, 1023, path, "", errs)
}

/// `SCHED_FIFO` priorities are 1..=99.
fn priority(v: i64, p: &str, errs: &mut Errors) -> Option<u8> {
    int::<u8>(
        v,
        1,
        99,
        &format!("{p}.rt_priority"),
        " (SCHED_FIFO priorities)",
        errs,
    )
}

/// `batch_size` 1..=1024; `ring_depth` a power of two; a burst fits the ring.
fn batch_and_ring(batch: i64, ring: i64, p: &str, errs: &mut Errors) -> (Option<u32>, Option<u32>) {
    let b = int::<u32>(
        batch,
        1,
        MAX_BATCH,
        &format!("{p}.batch_size"),
        " packets",
        errs,
    );
    let r = int::<u32>(
        ring,
        2,
        MAX_RING,
        &format!("{p}.ring_depth"),
        " packets",
        errs,
    )
    .and_then(|r| ring_power_of_two(r, p, errs));
    if let (Some(bv), Some(rv)) = (b, r) {
        if bv > rv {
            errs.push(
                format!("{p}.batch_size"),
                format!(
                    "batch_size {bv} > ring_depth {rv}: a burst must fit in the ring; lower batch_size or raise ring_depth to {}",
                    bv.next_power_of_two()
                ),
            );
            return (None, r);
        }
    }
    (b, r)
}

/// Rings index with a mask, so their depth is a power of two.
fn ring_power_of_two(r: u32, p: &str, errs: &mut Errors) -> Option<u32> {
    if r.is_power_of_two() {
        return Some(r);
    }
    let up = r.next_power_of_two();
    errs.push(
        format!("{p}.ring_depth"),
        format!(
            "{r} is not a power of two (rings index with a mask); use {} or {up}",
            up / 2
        ),
    );
    None
}

/// Every listed region exists (by name), none twice, 1..=MAX_SEGMENTS of them.
fn region_refs(
    names: &[String],
    p: &str,
    raw: &RawConfig,
    d: &Draft,
    errs: &mut Errors,
) -> Option<Vec<RegionId>> {
    let path = format!("{p}.memory_regions");
    if names.is_empty() || names.len() > MAX_SEGMENTS {
        errs.push(
            path,
            format!(
                "{} regions listed; list 1 (whole packets) or 2..={MAX_SEGMENTS} (header-data split, header region first)",
                names.len()
            ),
        );
        return None;
    }
    let known: Vec<&str> = raw.memory_regions.iter().map(|r| r.name.as_str()).collect();
    let mut ids = Vec::with_capacity(names.len());
    let mut ok = true;
    for (k, name) in names.iter().enumerate() {
        let kp = format!("{path}[{k}]");
        if names[..k].contains(name) {
            errs.push(
                kp,
                format!("region \"{name}\" is listed twice; each segment needs its own region"),
            );
            ok = false;
            continue;
        }
        match d.region_index.get(name) {
            Some(&r) => ids.push(RegionId(r)),
            None => {
                errs.push(kp, unknown_name("memory region", name, &known));
                ok = false;
            }
        }
    }
    ok.then_some(ids)
}

/// GPU memory (`device` regions) only where the NIC writes it and the CPU never reads it:
/// RX queues of the ibverbs engine in RoCE mode (the region is registered through its
/// dma-buf); DPDK RX queues (the region registered as DPDK external memory), whole frames or
/// the data segment of header-data split; ibverbs raw RX queues, whole frames or the data
/// segment of header-data split (a two-SGE receive). `socket`, `afpacket`, `afxdp` and every TX queue
/// refuse it here; what else a device queue needs (no software flow match on whole frames in
/// GPU memory, the format's header inside `hds_split`) is checked in `gpudirect.rs`.
fn device_regions_supported(
    regions: &[RegionId],
    dir: Dir,
    raw: &RawConfig,
    p: &str,
    d: &Draft,
    errs: &mut Errors,
) {
    for (k, r) in regions.iter().enumerate() {
        if let Some(Some(m)) = d.regions.get(r.0) {
            if m.kind != RegionKind::Device {
                continue;
            }
            if let Some(why) = device_refusal(raw, dir, k, regions.len()) {
                errs.push(
                    format!("{p}.memory_regions[{k}]"),
                    format!(
                        "region \"{}\" is kind \"device\" (GPU memory): {why}",
                        m.name
                    ),
                );
            }
        }
    }
}

/// Why the engine cannot use GPU memory as segment `k` of `n` in this direction, with the
/// fix; `None` where it can. The header region of header-data split is CPU memory for every
/// engine that receives into GPU memory; the rest is the engine's own (`engines::*`).
fn device_refusal(raw: &RawConfig, dir: Dir, k: usize, n: usize) -> Option<String> {
    const HEADER: &str = "the header region of header-data split (memory_regions[0]) is read by the CPU (flow match, the format's sequence number), so it must be CPU memory: use a \"host\", \"huge\" or \"host_pinned\" region for it and keep the \"device\" region second, for the payloads";
    if dir == Dir::Rx && n >= 2 && k == 0 && super::caps(raw).device_rx {
        return Some(HEADER.to_owned());
    }
    engines::device_refusal(raw, dir)
}

/// `hds_split` is set exactly when a queue lists two or more regions, and only an engine
/// that can spread a packet over several regions may list two.
fn hds_split_matches_regions(q: &RawRxQueue, kind: EngineKind, p: &str, errs: &mut Errors) -> bool {
    let n = q.memory_regions.len();
    if n >= 2 && !kind.caps(false).multi_region_rx {
        errs.push(
            format!("{p}.memory_regions"),
            format!(
                "{n} regions (header-data split) but the socket engine has no header-data split; list one region, or use a raw engine"
            ),
        );
        return false;
    }
    match (n >= 2, q.hds_split) {
        (true, None) => {
            errs.push(
                format!("{p}.hds_split"),
                format!(
                    "{n} regions means header-data split: set hds_split = <header bytes placed in memory_regions[0]> (e.g. 42 for Ethernet+IPv4+UDP), or list one region"
                ),
            );
            false
        }
        (false, Some(_)) if n == 1 => {
            errs.push(
                format!("{p}.hds_split"),
                "hds_split needs a second (data) region in memory_regions; add one or remove hds_split",
            );
            false
        }
        (true, Some(h)) if !(1..=65535).contains(&h) => {
            errs.push(
                format!("{p}.hds_split"),
                format!("{h} is out of range 1..=65535 (header bytes placed in memory_regions[0])"),
            );
            false
        }
        _ => true,
    }
}

/// Indirect queues name their consumer core; direct queues have none.
fn mode(q: &RawRxQueue, p: &str, errs: &mut Errors) -> Option<RxMode> {
    use crate::schema::RawRxMode;
    let path = format!("{p}.consumer_core");
    match (q.mode, q.consumer_core) {
        (RawRxMode::Indirect, Some(c)) => {
            core(c, &path, errs).map(|c| RxMode::Indirect { consumer_core: c })
        }
        (RawRxMode::Indirect, None) => {
            errs.push(
                path,
                "mode = \"indirect\" (the default) hands bursts to a consumer thread: set consumer_core = <core>, or set mode = \"direct\" to consume in the I/O thread",
            );
            None
        }
        (RawRxMode::Direct, Some(_)) => {
            errs.push(
                path,
                "mode = \"direct\" consumes in the I/O thread (on cpu_core): remove consumer_core, or set mode = \"indirect\"",
            );
            None
        }
        (RawRxMode::Direct, None) => Some(RxMode::Direct),
    }
}

/// TX pacing is a positive, finite rate up to 800 Gb/s.
fn pacing(v: Option<f64>, p: &str, errs: &mut Errors) -> Option<Option<f64>> {
    match v {
        None => Some(None),
        Some(g) if g.is_finite() && g > 0.0 && g <= 800.0 => Some(Some(g)),
        Some(g) => {
            errs.push(
                format!("{p}.pacing_gbps"),
                format!("{g} is not a rate; use Gb/s in (0, 800], or remove the key for no pacing"),
            );
            None
        }
    }
}
