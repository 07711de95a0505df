//! Rules that only `engine.kind = "afxdp"` has: buffers are UMEM frames.
//!
//! The AF_XDP engine registers each region a queue uses as the UMEM of the NIC queue the
//! queue's socket binds, one buffer = one UMEM frame, so:
//! - every region an AF_XDP queue uses has `buf_size = engine.afxdp.frame_size`;
//! - a frame lands whole in one UMEM frame: no header-data split;
//! - sockets bound to one NIC queue share one UMEM, so they use the same region. RX queue `j`
//!   binds NIC queue `j`, except on an interface with flow rules (or `default_action =
//!   "drop"`), where every RX queue binds NIC queue 0 and the XDP program picks the queue;
//!   TX queue `j` binds NIC queue `j`.

use super::{rxq, txq, Draft};
use crate::error::Errors;
use crate::model::{Engine, RegionId};
use rtdaq_core::flow::DefaultAction;
use std::collections::BTreeSet;

/// Checks the AF_XDP memory rules (no-op for other engines).
pub(super) fn umem(d: &Draft, errs: &mut Errors) {
    let Some(Engine::Afxdp(x)) = &d.engine else {
        return;
    };
    let mut wrong_size = BTreeSet::new();
    for (i, iface) in d.interfaces.iter().enumerate() {
        let steered = d.flows.iter().flatten().any(|f| f.interface.0 == i)
            || matches!(iface.default_action, Some(DefaultAction::Drop));
        // NIC queue -> (config path of the first queue there, its region)
        let mut on_nic: Vec<(usize, String, RegionId)> = Vec::new();
        let mut share = |nic: usize, path: String, region: RegionId, errs: &mut Errors| {
            match on_nic.iter().find(|(n, _, _)| *n == nic) {
                Some((_, first, r)) if *r != region => errs.push(
                    format!("{path}.memory_regions"),
                    format!(
                        "uses region \"{}\" but {first} uses \"{}\" on the same NIC queue {nic}: AF_XDP sockets of one NIC queue share one UMEM, so give them the same region{}",
                        name(d, region),
                        name(d, *r),
                        if steered {
                            " (with flow rules or default_action = \"drop\" every RX queue binds NIC queue 0)"
                        } else {
                            ""
                        }
                    ),
                ),
                Some(_) => {}
                None => on_nic.push((nic, path, region)),
            }
        };
        for (n, q) in iface.rx.iter().enumerate() {
            let Some(q) = q else { continue };
            if q.hds_split.is_some() {
                errs.push(
                    format!("{}.hds_split", rxq(i, n)),
                    "AF_XDP receives each frame whole into one UMEM frame: remove hds_split (header-data split needs afpacket or dpdk)",
                );
            }
            wrong_size.extend(q.memory_regions.iter().copied());
            if let Some(&r) = q.memory_regions.first() {
                share(if steered { 0 } else { n }, rxq(i, n), r, errs);
            }
        }
        for (n, q) in iface.tx.iter().enumerate() {
            let Some(q) = q else { continue };
            wrong_size.extend(q.memory_regions.iter().copied());
            if let Some(&r) = q.memory_regions.first() {
                share(n, txq(i, n), r, errs);
            }
        }
    }
    for r in wrong_size {
        let Some(Some(region)) = d.regions.get(r.0) else {
            continue;
        };
        if region.buf_size != x.frame_size {
            let or = if matches!(region.buf_size, 2048 | 4096) {
                format!(" (or engine.afxdp.frame_size = {})", region.buf_size)
            } else {
                String::new()
            };
            errs.push(
                format!("memory_regions[{}].buf_size", r.0),
                format!(
                    "{} but engine.afxdp.frame_size = {}: AF_XDP registers each buffer as one UMEM frame, so set buf_size = {}{or}",
                    region.buf_size, x.frame_size, x.frame_size
                ),
            );
        }
    }
}

fn name(d: &Draft, r: RegionId) -> String {
    d.regions
        .get(r.0)
        .and_then(Option::as_ref)
        .map_or_else(|| format!("#{}", r.0), |m| m.name.clone())
}
