//! GPUDirect receive on raw Ethernet (issue #19): what an RX queue whose NIC writes GPU
//! memory (`device` regions on engine `dpdk`, and as the data segment of header-data split
//! on ibverbs raw queues) needs beyond the region rules of `queues.rs`.
//!
//! - **Whole frames in GPU memory** (one `device` region): the CPU reads no byte of a
//!   frame, so nothing may need to: on `dpdk` (which matches flows in software, always) the
//!   interface has no `[[flows]]` and its `default_action` delivers; on ibverbs raw queues
//!   the NIC steers by the flow rules (`ibv_create_flow`) and drops the unmatched, so they
//!   stay. The frames are counted as received in GPU memory, not checked.
//! - **Header-data split into GPU memory** (`hds_split`, a CPU header region, a `device`
//!   data region): the CPU reads the first `hds_split` bytes only. With `run.validate` other
//!   than `"count"` they must hold the Ethernet/IPv4/UDP headers and the bytes of the
//!   format's header the receiver reads (rtdaq's 32-byte sequence header, VDIF's 32, CODIF's
//!   64, a counter's fields); `validate = "full"` on rtdaq's format reads every payload byte
//!   and is refused; SPEAD (item pointers of varying number) and eCPRI (messages may be
//!   concatenated) have headers no fixed split can hold.

use super::{rxq, Draft};
use crate::error::Errors;
use crate::model::{EngineKind, RegionKind, StreamFormat, Validation};
use crate::schema::RawConfig;
use rtdaq_core::flow::DefaultAction;

/// Ethernet + IPv4 (no options) + UDP.
pub(crate) const FRAME_HEADERS: u32 = 14 + 20 + 8;

/// How an RX queue's frames reach GPU memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeviceRx {
    /// One `device` region: whole frames.
    Whole,
    /// Header-data split at this many bytes: headers in CPU memory, the rest in a `device`
    /// region.
    Split(u32),
}

/// How RX queue `q` of interface `i` uses GPU memory, `None` when it does not.
pub(crate) fn device_rx(raw: &RawConfig, d: &Draft, i: usize, q: usize) -> Option<DeviceRx> {
    let rq = raw.interfaces.get(i)?.rx_queues.get(q)?;
    let kind = |name: &String| {
        let k = *d.region_index.get(name)?;
        Some(d.regions.get(k)?.as_ref()?.kind)
    };
    let kinds: Vec<Option<RegionKind>> = rq.memory_regions.iter().map(kind).collect();
    match kinds.as_slice() {
        [Some(RegionKind::Device)] => Some(DeviceRx::Whole),
        [_, rest @ ..] if rest.contains(&Some(RegionKind::Device)) => {
            Some(DeviceRx::Split(u32::try_from(rq.hds_split?).ok()?))
        }
        _ => None,
    }
}

/// The payload bytes the receiver reads for the sequence number of `format` (`None`: no
/// fixed number: SPEAD, eCPRI).
pub(crate) const fn header_reads(format: &StreamFormat) -> Option<u32> {
    match format {
        StreamFormat::Rtdaq | StreamFormat::Vdif(_) => Some(32),
        StreamFormat::Codif(_) => Some(64),
        StreamFormat::Counter(_) => Some(format.min_payload()),
        StreamFormat::Spead(_) | StreamFormat::Ecpri => None,
    }
}

/// The rules of the module docs, for the raw engines that receive into GPU memory (RoCE
/// queues have their own, in `gpu.rs`).
pub(super) fn device_queues(raw: &RawConfig, d: &Draft, errs: &mut Errors) {
    let caps = super::caps(raw);
    if !caps.device_rx || caps.messages {
        return;
    }
    let validate = raw.run.validate;
    for (i, iface) in raw.interfaces.iter().enumerate() {
        let Some(di) = d.interfaces.get(i) else {
            continue;
        };
        for q in 0..iface.rx_queues.len() {
            let p = rxq(i, q);
            match device_rx(raw, d, i, q) {
                None => {}
                // ibverbs raw: flows are NIC rules; nothing reads a frame on the CPU.
                Some(DeviceRx::Whole) if d.kind == EngineKind::Ibverbs => {}
                Some(DeviceRx::Whole) => {
                    if let Some(k) = raw.flows.iter().position(|f| f.interface == iface.name) {
                        errs.push(
                            format!("flows[{k}]"),
                            format!(
                                "{p} receives whole frames into GPU memory (a \"device\" region), so the CPU cannot read their headers to match flows on interface \"{}\"; remove the interface's flows (one queue, or RSS in the NIC), or split headers into CPU memory: hds_split = {FRAME_HEADERS} (+ the format's header) with a host region first",
                                iface.name
                            ),
                        );
                    } else if di.default_action == Some(DefaultAction::Drop) {
                        errs.push(
                            format!("interfaces[{i}].default_action"),
                            format!(
                                "\"drop\" with no flows drops every frame after reading its headers, but {p} receives whole frames into GPU memory the CPU cannot read; set default_action to the queue's id"
                            ),
                        );
                    }
                }
                Some(DeviceRx::Split(h)) => {
                    let format = di.format.unwrap_or_default();
                    split_rules(h, &format, validate, &p, errs);
                }
            }
        }
    }
}

/// A queue splitting at `h` bytes, the rest in GPU memory.
fn split_rules(h: u32, format: &StreamFormat, validate: Validation, p: &str, errs: &mut Errors) {
    if validate == Validation::Count {
        return;
    }
    let why = "the payloads after hds_split lie in GPU memory, which the CPU cannot read";
    if validate == Validation::Full && matches!(format, StreamFormat::Rtdaq) {
        errs.push(
            "run.validate",
            format!(
                "\"full\" checks every payload byte's pattern on the CPU, but {p} splits its frames at hds_split = {h}: {why}; use validate = \"sequence\" (sequence numbers and latency from the headers) or \"count\""
            ),
        );
        return;
    }
    match header_reads(format) {
        None => errs.push(
            format!("{p}.hds_split"),
            format!(
                "format \"{}\" has no header of fixed size ({}), so no hds_split can keep every one the receiver reads in CPU memory; use run.validate = \"count\", or a host region for the data",
                format.kind(),
                if matches!(format, StreamFormat::Spead(_)) {
                    "SPEAD packets carry a varying number of item pointers"
                } else {
                    "eCPRI frames may concatenate several messages"
                }
            ),
        ),
        Some(n) if h < FRAME_HEADERS + n => errs.push(
            format!("{p}.hds_split"),
            format!(
                "{h} B of each frame reach CPU memory, but the receiver reads the {FRAME_HEADERS} B of Ethernet/IPv4/UDP headers and {n} B of the \"{}\" header for each sequence number ({why}); set hds_split = {} (add 4 per VLAN tag), or run.validate = \"count\"",
                format.kind(),
                FRAME_HEADERS + n
            ),
        ),
        Some(_) => {}
    }
}
