//! Board rules: the memory kinds of the regions suit the board's GPU (facts from
//! `rtdaq_platform::board`). That queue cores exist is a core rule (`cores.rs`); that they
//! are among the board's isolated cores is a warning ([`Config::warnings`](crate::Config::warnings)).

use super::Draft;
use crate::error::Errors;
use crate::model::RegionKind;
use crate::schema::RawConfig;
use rtdaq_platform::board::GpuKind;

/// `device` memory needs a discrete GPU the NIC can write (GPUDirect); GPU kinds need a GPU.
pub(super) fn memory_kinds(raw: &RawConfig, d: &Draft, errs: &mut Errors) {
    let Some(board) = raw.platform.board() else {
        return;
    };
    for (k, r) in d.regions.iter().enumerate() {
        let Some(r) = r else { continue };
        let path = format!("memory_regions[{k}].kind");
        match (board.gpu, r.kind) {
            (GpuKind::Unified, RegionKind::Device) => errs.push(
                path,
                format!(
                    "\"device\" memory does not suit {}: its integrated GPU shares the CPU's \
                     unified memory and cannot export device memory to the NIC (no DMA-BUF \
                     GPUDirect); use kind = \"host_pinned\", which the GPU reads in place",
                    board.name
                ),
            ),
            (GpuKind::None, kind) if kind.is_gpu() => errs.push(
                path,
                format!(
                    "\"{}\" memory needs a GPU and {} has none; use \"host\" or \"huge\"",
                    kind.as_str(),
                    board.name
                ),
            ),
            _ => {}
        }
    }
}
