//! The AF_XDP engine (`engine.kind = "afxdp"`): Linux `AF_XDP` sockets on a UMEM.
//!
//! Everything about `[engine.afxdp]` lives here: the serde table as written ([`RawAfxdp`],
//! its defaults), the typed settings ([`AfxdpEngine`], [`ZeroCopy`]), their validation, the
//! engine's capability row, and the rules only this engine has: buffers are UMEM frames.
//!
//! The AF_XDP engine registers each region a queue uses as the UMEM of the NIC queue the
//! queue's socket binds, one buffer = one UMEM frame, so:
//! - every region an AF_XDP queue uses has `buf_size = engine.afxdp.frame_size`;
//! - a frame lands whole in one UMEM frame: no header-data split;
//! - sockets bound to one NIC queue share one UMEM, so they use the same region. RX queue `j`
//!   binds NIC queue `j`, except on an interface with flow rules (or `default_action =
//!   "drop"`), where every RX queue binds NIC queue 0 and the XDP program picks the queue;
//!   TX queue `j` binds NIC queue `j`.
//!
//! (Frames against the UMEM frame size: `validate::capacity`.)

use super::{Capabilities, Dir, HOST_KINDS, ROCE_RX};
use crate::error::Errors;
use crate::model::{Engine, RegionId};
use crate::schema::yes;
use crate::validate::{rxq, txq, Draft};
use rtdaq_core::flow::DefaultAction;
use serde::Deserialize;
use std::collections::BTreeSet;

/// What the AF_XDP engine can do: whole frames in the queue's own region (the UMEM),
/// classified in software (its XDP program).
pub(super) const CAPS: Capabilities = Capabilities::RAW_FRAMES;

/// `AF_XDP` zero-copy policy (`engine.afxdp.zero_copy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ZeroCopy {
    /// Try zero-copy, fall back to copy mode with a warning (default).
    Auto,
    /// Require zero-copy (`XDP_ZEROCOPY`); fail if the driver lacks it.
    On,
    /// Force copy mode (`XDP_COPY`).
    Off,
}

impl ZeroCopy {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ZeroCopy::Auto => "auto",
            ZeroCopy::On => "on",
            ZeroCopy::Off => "off",
        }
    }
}

/// `[engine.afxdp]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfxdpEngine {
    /// UMEM frame size: 2048 or 4096.
    pub frame_size: u32,
    /// Zero-copy policy.
    pub zero_copy: ZeroCopy,
    /// `XDP_USE_NEED_WAKEUP`.
    pub need_wakeup: bool,
}

/// `[engine.afxdp]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAfxdp {
    #[serde(default = "xdp_frame_size")]
    pub frame_size: i64,
    #[serde(default = "xdp_zero_copy")]
    pub zero_copy: ZeroCopy,
    #[serde(default = "yes")]
    pub need_wakeup: bool,
}

impl Default for RawAfxdp {
    fn default() -> Self {
        RawAfxdp {
            frame_size: xdp_frame_size(),
            zero_copy: xdp_zero_copy(),
            need_wakeup: true,
        }
    }
}

fn xdp_frame_size() -> i64 {
    4096
}
fn xdp_zero_copy() -> ZeroCopy {
    ZeroCopy::Auto
}

/// `[engine.afxdp]`: UMEM frames are 2048 or 4096 bytes (aligned mode).
pub(super) fn validate(raw: &RawAfxdp, errs: &mut Errors) -> Option<AfxdpEngine> {
    if raw.frame_size != 2048 && raw.frame_size != 4096 {
        errs.push(
            "engine.afxdp.frame_size",
            format!(
                "{} is not an AF_XDP frame size; use 2048 or 4096 (aligned UMEM chunks)",
                raw.frame_size
            ),
        );
        return None;
    }
    Some(AfxdpEngine {
        frame_size: raw.frame_size as u32,
        zero_copy: raw.zero_copy,
        need_wakeup: raw.need_wakeup,
    })
}

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

/// Why an AF_XDP queue cannot use GPU memory: the UMEM is host memory.
pub(super) fn device_refusal(dir: Dir) -> String {
    match dir {
        Dir::Rx => format!(
            "AF_XDP's UMEM must be host memory (the kernel maps its pages for the driver and the XDP program), so frames cannot be received into GPU memory; {HOST_KINDS} (a gpu_stage reads \"host_pinned\" memory in place), or {ROCE_RX}"
        ),
        Dir::Tx => format!(
            "AF_XDP's UMEM must be host memory (the kernel maps its pages for the driver and the XDP program), so frames cannot be sent from GPU memory; {HOST_KINDS}"
        ),
    }
}
