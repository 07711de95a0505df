//! PSRDADA rings (`[[dada_rings]]`): a queue's `dada_ring` stage writes what it receives into
//! a PSRDADA header + data ring that local readers (dspsr, heimdall, psrdada's own clients,
//! Python) attach to, in one file: the table as written, the typed settings, their rules.
//!
//! ```toml
//! [[dada_rings]]
//! name = "ring"
//! key = "dada"              # hexadecimal, as dada_db -k takes it (the header block: key + 1)
//! create = true             # rtdaq creates the ring (and removes it at the end); false: a
//!                           # ring dada_db made, which rtdaq only writes
//! nbufs = 16                # data buffers (create)
//! bufsz_kib = 4096          # KiB of a data buffer (create)
//! readers = 1               # readers that each read every buffer (create)
//! lock = false              # lock the ring's pages in memory (create; CAP_IPC_LOCK)
//! numa_node = 0             # the data block's pages on this NUMA node (create)
//! strip_bytes = 0           # bytes skipped at the start of each payload
//! [dada_rings.dada]         # what the header says of the samples, as [recorders.dada]
//! nbit = 8
//! tsamp_us = 0.008
//! source = "J0437-4715"
//!
//! [[interfaces.rx_queues]]
//! dada_ring = "ring"
//! ```

use crate::error::Errors;
use crate::schema::RawConfig;
use crate::validate::{int, item_name};
use serde::Deserialize;

/// Index of a ring in [`Config::dada_rings`](crate::Config::dada_rings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DadaRingId(pub usize);

/// The shape of a ring rtdaq creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DadaShape {
    /// Data buffers (`nbufs`).
    pub nbufs: u32,
    /// Bytes of a data buffer (`bufsz_kib` × 1024).
    pub bufsz: u64,
    /// Readers (`readers`).
    pub readers: u32,
    /// Lock the pages (`lock`).
    pub lock: bool,
    /// Bind the data block's pages to this NUMA node (`numa_node`).
    pub numa_node: Option<u32>,
}

/// One ring (`[[dada_rings]]`).
#[derive(Debug, Clone, PartialEq)]
pub struct DadaRing {
    /// Unique name (a queue's `dada_ring` refers to it).
    pub name: String,
    /// The data block's key (`key`); the header block is at key + 1.
    pub key: i32,
    /// `Some`: rtdaq creates the ring with this shape and removes it at the end; `None`:
    /// it writes a ring that exists (`create = false`).
    pub create: Option<DadaShape>,
    /// Bytes skipped at the start of each payload (`strip_bytes`).
    pub strip_bytes: u32,
    /// What the ring's DADA header says of the samples (`[dada_rings.dada]`, as a DADA
    /// recorder's `[recorders.dada]`; defaults when absent).
    pub header: crate::model::DadaParams,
}

/// `[[dada_rings]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDadaRing {
    pub name: String,
    pub key: String,
    #[serde(default = "yes")]
    pub create: bool,
    #[serde(default)]
    pub nbufs: Option<i64>,
    #[serde(default)]
    pub bufsz_kib: Option<i64>,
    #[serde(default)]
    pub readers: Option<i64>,
    #[serde(default)]
    pub lock: Option<bool>,
    #[serde(default)]
    pub numa_node: Option<i64>,
    #[serde(default)]
    pub strip_bytes: i64,
    #[serde(default)]
    pub dada: Option<crate::schema::RawDada>,
}

fn yes() -> bool {
    true
}

/// Default `nbufs`.
pub const DEFAULT_NBUFS: i64 = 16;
/// Default `bufsz_kib`.
pub const DEFAULT_BUFSZ_KIB: i64 = 4096;

/// Resolves a queue's `dada_ring` name.
pub(crate) fn ring_ref(
    name: Option<&String>,
    p: &str,
    raw: &RawConfig,
    errs: &mut Errors,
) -> Option<Option<DadaRingId>> {
    let names: Vec<&str> = raw.dada_rings.iter().map(|r| r.name.as_str()).collect();
    let unknown = |name: &str, known: &[&str]| {
        let have = if known.is_empty() {
            "there is no [[dada_rings]] entry".to_string()
        } else {
            format!("the rings are {}", known.join(", "))
        };
        format!("no PSRDADA ring named {name:?}: {have}; define it under [[dada_rings]]")
    };
    crate::validate::name_ref(name, &names, format!("{p}.dada_ring"), unknown, errs)
        .map(|k| k.map(DadaRingId))
}

/// Converts every ring; each is written by exactly one queue (a ring has one writer),
/// which can read its payloads.
pub(crate) fn dada_rings(
    raw: &RawConfig,
    d: &crate::validate::Draft,
    errs: &mut Errors,
) -> Vec<Option<DadaRing>> {
    queues_fit_rings(raw, d, errs);
    raw.dada_rings
        .iter()
        .enumerate()
        .map(|(k, r)| one_ring(raw, k, r, errs))
        .collect()
}

/// The queue puts payload bytes where the CPU cannot read them: a `device` region or
/// `hds_split`.
pub(crate) fn payloads_in_gpu(rq: &crate::schema::RawRxQueue, d: &crate::validate::Draft) -> bool {
    let device = rq.memory_regions.iter().any(|n| {
        d.region_index
            .get(n)
            .and_then(|&k| d.regions[k].as_ref())
            .is_some_and(|r| r.kind == crate::model::RegionKind::Device)
    });
    device || rq.hds_split.is_some()
}

/// A queue writing a ring receives into memory the CPU reads whole: no `device` region, no
/// `hds_split` (the ring gets every payload byte, or the payload is not written).
fn queues_fit_rings(raw: &RawConfig, d: &crate::validate::Draft, errs: &mut Errors) {
    for (i, iface) in raw.interfaces.iter().enumerate() {
        for (q, rq) in iface.rx_queues.iter().enumerate() {
            if rq.dada_ring.is_none() {
                continue;
            }
            let p = crate::validate::rxq(i, q);
            if payloads_in_gpu(rq, d) {
                errs.push(format!("{p}.dada_ring"), "this queue puts payload bytes in GPU memory (a \"device\" region or hds_split), which the CPU cannot copy into a PSRDADA ring; use a \"host\" or \"host_pinned\" region without hds_split for the queue that writes the ring");
            }
        }
    }
}

fn one_ring(raw: &RawConfig, k: usize, r: &RawDadaRing, errs: &mut Errors) -> Option<DadaRing> {
    let p = format!("dada_rings[{k}]");
    let names: Vec<&str> = raw.dada_rings.iter().map(|x| x.name.as_str()).collect();
    let mut ok = item_name(&names, k, "PSRDADA ring", "dada_ring", &p, errs);
    let users: Vec<String> = raw
        .interfaces
        .iter()
        .flat_map(|i| {
            i.rx_queues
                .iter()
                .filter(|q| q.dada_ring.as_ref() == Some(&r.name))
                .map(move |q| format!("{}.rx{}", i.name, q.id))
        })
        .collect();
    if users.is_empty() && ok {
        errs.push(p.clone(), format!("PSRDADA ring \"{}\" is not written by any RX queue; add dada_ring = \"{}\" to one queue, or remove it", r.name, r.name));
        ok = false;
    }
    if users.len() > 1 {
        errs.push(p.clone(), format!("PSRDADA ring \"{}\" is named by queues {}: a ring has one writer; give each queue its own ring (another key)", r.name, users.join(", ")));
        ok = false;
    }
    let key = key(&r.key, &p, errs);
    let taken = raw.dada_rings[..k]
        .iter()
        .filter_map(|o| parse_key(&o.key))
        .collect::<Vec<_>>();
    if let Some(kv) = key.filter(|kv| taken.iter().any(|t| t.abs_diff(*kv) <= 1)) {
        errs.push(format!("{p}.key"), format!("key {kv:x} (and its header block, {:x}) overlaps another ring's keys: a ring takes its key and the key + 1", kv + 1));
        ok = false;
    }
    let create = if r.create {
        shape(r, &p, errs).map(Some)
    } else {
        for (name, given) in [
            ("nbufs", r.nbufs.is_some()),
            ("bufsz_kib", r.bufsz_kib.is_some()),
            ("readers", r.readers.is_some()),
            ("lock", r.lock.is_some()),
            ("numa_node", r.numa_node.is_some()),
        ] {
            if given {
                errs.push(format!("{p}.{name}"), format!("`{name}` shapes a ring rtdaq creates; with create = false the ring is dada_db's (its -n/-b/-r/-l): remove it"));
                ok = false;
            }
        }
        Some(None)
    };
    let strip_bytes = int(
        r.strip_bytes,
        0,
        65_535,
        &format!("{p}.strip_bytes"),
        " bytes skipped at the start of each payload",
        errs,
    );
    let header = crate::validate::record::dada(
        r.dada.as_ref().unwrap_or(&Default::default()),
        &format!("{p}.dada"),
        errs,
    );
    Some(DadaRing {
        name: r.name.clone(),
        key: key?,
        create: create?,
        strip_bytes: strip_bytes?,
        header: header?,
    })
    .filter(|_| ok)
}

/// A hexadecimal key below `i32::MAX` (its header block at key + 1 must fit too).
fn parse_key(s: &str) -> Option<i32> {
    let t = s.trim();
    let hex = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    match u32::from_str_radix(hex, 16) {
        Ok(k) if !hex.is_empty() && k > 0 && k < i32::MAX as u32 => Some(k as i32),
        _ => None,
    }
}

fn key(s: &str, p: &str, errs: &mut Errors) -> Option<i32> {
    let k = parse_key(s);
    if k.is_none() {
        errs.push(format!("{p}.key"), format!("{s:?} is not a PSRDADA key: give it in hexadecimal as dada_db -k takes it, e.g. \"dada\" (1..7ffffffe; the header block takes the key + 1)"));
    }
    k
}

fn shape(r: &RawDadaRing, p: &str, errs: &mut Errors) -> Option<DadaShape> {
    let nbufs = int::<u32>(
        r.nbufs.unwrap_or(DEFAULT_NBUFS),
        2,
        65_536,
        &format!("{p}.nbufs"),
        " data buffers",
        errs,
    );
    let kib = int::<u64>(
        r.bufsz_kib.unwrap_or(DEFAULT_BUFSZ_KIB),
        4,
        1 << 20,
        &format!("{p}.bufsz_kib"),
        " KiB of a data buffer (at least the largest payload)",
        errs,
    );
    let readers = int::<u32>(
        r.readers.unwrap_or(1),
        1,
        8,
        &format!("{p}.readers"),
        " readers (psrdada's limit is 8)",
        errs,
    );
    let numa_node = match r.numa_node {
        None => Some(None),
        Some(n) => int::<u32>(
            n,
            0,
            1023,
            &format!("{p}.numa_node"),
            " (the NUMA node of the data block's pages)",
            errs,
        )
        .map(Some),
    };
    Some(DadaShape {
        nbufs: nbufs?,
        bufsz: kib? << 10,
        readers: readers?,
        lock: r.lock.unwrap_or(false),
        numa_node: numa_node?,
    })
}
