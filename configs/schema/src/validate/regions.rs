//! `[[memory_regions]]`: names, sizes, placement keys per kind, use, total footprint.

use super::{human_bytes, int, Draft};
use crate::error::Errors;
use crate::model::{MemoryRegion, Placement, Platform, RegionKind};
use crate::parse::is_identifier;
use crate::schema::{RawConfig, RawRegion};
use std::collections::HashMap;

/// Largest single region (1 TiB); beyond this is certainly a typo.
const MAX_REGION_BYTES: u64 = 1 << 40;

/// Converts every region; reports bad and duplicate names, sizes and placement keys.
pub(super) fn regions(
    raw: &RawConfig,
    errs: &mut Errors,
) -> (Vec<Option<MemoryRegion>>, HashMap<String, usize>) {
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (r, reg) in raw.memory_regions.iter().enumerate() {
        let p = format!("memory_regions[{r}]");
        let mut ok = unique_name(reg, r, &index, &p, errs);
        index.entry(reg.name.clone()).or_insert(r);
        let placement = placement(raw.platform, reg, &p, errs);
        ok &= page_size_only_for_huge(reg, &p, errs);
        let buf_size = int::<u32>(
            reg.buf_size,
            1,
            1 << 30,
            &format!("{p}.buf_size"),
            " bytes per buffer",
            errs,
        );
        let buf_count = int::<u32>(
            reg.buf_count,
            1,
            i64::from(u32::MAX),
            &format!("{p}.buf_count"),
            " buffers",
            errs,
        );
        let region = match (ok, placement, buf_size, buf_count) {
            (true, Some(placement), Some(buf_size), Some(buf_count)) => Some(MemoryRegion {
                name: reg.name.clone(),
                kind: reg.kind,
                buf_size,
                buf_count,
                placement,
                page_size: (reg.kind == RegionKind::Huge)
                    .then(|| reg.page_size.unwrap_or_default()),
            }),
            _ => None,
        };
        let region = region.filter(|m| size_fits(m, &p, errs));
        out.push(region);
    }
    (out, index)
}

/// Region names are plain identifiers and unique.
fn unique_name(
    reg: &RawRegion,
    r: usize,
    index: &HashMap<String, usize>,
    p: &str,
    errs: &mut Errors,
) -> bool {
    if !is_identifier(&reg.name) {
        errs.push(
            format!("{p}.name"),
            format!(
                "{:?} is not a plain name; use 1..=64 letters, digits, '_' or '-'",
                reg.name
            ),
        );
        return false;
    }
    if let Some(first) = index.get(&reg.name).filter(|&&f| f != r) {
        errs.push(
            format!("{p}.name"),
            format!(
                "duplicate memory region name \"{}\" (first defined at memory_regions[{first}]); rename one",
                reg.name
            ),
        );
        return false;
    }
    true
}

/// CPU kinds take `numa_node`, GPU kinds take `gpu`; never the other one.
fn placement(platform: Platform, reg: &RawRegion, p: &str, errs: &mut Errors) -> Option<Placement> {
    let kind = reg.kind.as_str();
    if reg.kind.is_gpu() {
        if reg.numa_node.is_some() {
            errs.push(
                format!("{p}.numa_node"),
                format!(
                    "a \"{kind}\" region is placed by GPU; replace numa_node with gpu = <CUDA device ordinal>"
                ),
            );
            return None;
        }
        let g = reg.gpu.unwrap_or(0);
        int::<u32>(
            g,
            0,
            15,
            &format!("{p}.gpu"),
            " (CUDA device ordinal)",
            errs,
        )
        .map(Placement::Gpu)
    } else {
        if reg.gpu.is_some() {
            errs.push(
                format!("{p}.gpu"),
                format!(
                    "a \"{kind}\" region is CPU memory placed by NUMA node; replace gpu with numa_node, or use kind = \"device\"/\"host_pinned\""
                ),
            );
            return None;
        }
        let n = reg.numa_node.unwrap_or(0);
        let max = platform.numa_nodes().map_or(63, |c| i64::from(c) - 1);
        let why = match platform.numa_nodes() {
            Some(c) => format!(
                " ({platform} has {c} NUMA node{})",
                if c == 1 { "" } else { "s" }
            ),
            None => String::new(),
        };
        int::<u32>(n, 0, max, &format!("{p}.numa_node"), &why, errs).map(Placement::Numa)
    }
}

/// `page_size` is for `huge` regions only.
fn page_size_only_for_huge(reg: &RawRegion, p: &str, errs: &mut Errors) -> bool {
    if reg.page_size.is_some() && reg.kind != RegionKind::Huge {
        errs.push(
            format!("{p}.page_size"),
            format!(
                "page_size applies to kind = \"huge\" only (this region is \"{}\"); remove it or set kind = \"huge\"",
                reg.kind.as_str()
            ),
        );
        return false;
    }
    true
}

/// One region stays below 1 TiB.
fn size_fits(m: &MemoryRegion, p: &str, errs: &mut Errors) -> bool {
    let bytes = m.stride().saturating_mul(u64::from(m.buf_count));
    if bytes > MAX_REGION_BYTES {
        errs.push(
            format!("{p}.buf_count"),
            format!(
                "{} buffers of {} B is {}, more than 1 TiB; lower buf_count or buf_size",
                m.buf_count,
                m.stride(),
                human_bytes(bytes)
            ),
        );
        return false;
    }
    true
}

/// Every region is used by at least one queue (an unused region is memory locked for nothing).
pub(super) fn unused(raw: &RawConfig, errs: &mut Errors) {
    let names: Vec<&str> = raw.memory_regions.iter().map(|r| r.name.as_str()).collect();
    // A misspelt reference is already reported with this region as suggestion; do not also
    // call the region unused.
    let misspelt: Vec<&str> = raw
        .interfaces
        .iter()
        .flat_map(|i| {
            let rx = i.rx_queues.iter().flat_map(|q| &q.memory_regions);
            let tx = i.tx_queues.iter().flat_map(|q| &q.memory_regions);
            rx.chain(tx)
        })
        .filter(|n| !names.contains(&n.as_str()))
        .filter_map(|n| crate::suggest::closest(n, &names))
        .collect();
    for (r, reg) in raw.memory_regions.iter().enumerate() {
        if misspelt.contains(&reg.name.as_str()) {
            continue;
        }
        let used = raw.interfaces.iter().any(|i| {
            i.rx_queues
                .iter()
                .any(|q| q.memory_regions.contains(&reg.name))
                || i.tx_queues
                    .iter()
                    .any(|q| q.memory_regions.contains(&reg.name))
        });
        if !used {
            errs.push(
                format!("memory_regions[{r}]"),
                format!(
                    "region \"{}\" is not used by any queue; list it in a queue's memory_regions or remove it",
                    reg.name
                ),
            );
        }
    }
}

/// The regions together fit the board's memory (unknown for `host`).
pub(super) fn footprint(platform: Platform, d: &Draft, errs: &mut Errors) {
    let Some(limit) = platform.memory_bytes() else {
        return;
    };
    let total: u64 = d
        .regions
        .iter()
        .flatten()
        .map(MemoryRegion::footprint)
        .sum();
    if total > limit {
        errs.push(
            "memory_regions",
            format!(
                "the regions need {} in total, more than {platform}'s {}; lower buf_count or buf_size",
                human_bytes(total),
                human_bytes(limit)
            ),
        );
    }
}
