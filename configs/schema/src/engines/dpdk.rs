//! The DPDK engine (`engine.kind = "dpdk"`): DPDK poll-mode drivers.
//!
//! Everything about `[engine.dpdk]` lives here: the serde table as written ([`RawDpdk`]),
//! the typed settings ([`DpdkEngine`], [`FlowOffload`]), their validation and the engine's
//! capability row. (Rules about the config as a whole that read these settings stay with
//! their subject: `main_core` in `validate::cores`, `flow_offload = "hardware"` in
//! `validate::flows`.)

use super::{Capabilities, Dir, Steering, HOST_KINDS};
use crate::error::Errors;
use crate::validate::int;
use serde::Deserialize;

/// What the DPDK engine can do: whole frames, received into GPU memory too (GPUDirect, the
/// region mapped for the device), steered by NIC rules (`rte_flow`).
pub(super) const CAPS: Capabilities = Capabilities {
    device_rx: true,
    steering: Steering::Nic,
    ..Capabilities::RAW_FRAMES
};

/// `[engine.dpdk]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DpdkEngine {
    /// Extra EAL arguments (cores and devices come from the queue and interface tables).
    pub eal_args: Vec<String>,
    /// EAL main lcore (housekeeping); `None` = the lowest core no queue uses.
    pub main_core: Option<u32>,
    /// Whether `[[flows]]` become `rte_flow` rules in the NIC (`engine.dpdk.flow_offload`).
    pub flow_offload: FlowOffload,
}

/// Where the DPDK engine classifies `[[flows]]` (`engine.dpdk.flow_offload`). Software
/// classification always runs (it assigns flow ids and counts drops); offloaded rules also
/// steer frames to their queue (or drop them) in the NIC as `rte_flow` rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlowOffload {
    /// Try `rte_flow`; from the first rule the PMD refuses (or that `rte_flow` cannot
    /// express) on, classify in software only, with one warning naming that rule (default).
    #[default]
    Auto,
    /// Every rule must become an `rte_flow` rule; otherwise opening the engine fails with
    /// an error naming the rule and the PMD's reason.
    Hardware,
    /// No `rte_flow`: software classification only.
    Software,
}

impl FlowOffload {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FlowOffload::Auto => "auto",
            FlowOffload::Hardware => "hardware",
            FlowOffload::Software => "software",
        }
    }
}

/// `[engine.dpdk]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDpdk {
    #[serde(default)]
    pub eal_args: Vec<String>,
    #[serde(default)]
    pub main_core: Option<i64>,
    #[serde(default)]
    pub flow_offload: FlowOffload,
}

/// EAL flags rtdaq derives from the config itself.
const OWNED_EAL_FLAGS: &[(&str, &str)] = &[
    ("-l", "cores come from the queues' cpu_core"),
    ("-c", "cores come from the queues' cpu_core"),
    ("--lcores", "cores come from the queues' cpu_core"),
    ("--main-lcore", "set engine.dpdk.main_core instead"),
    ("-a", "devices come from interfaces[].address"),
    ("--allow", "devices come from interfaces[].address"),
    ("-b", "devices come from interfaces[].address"),
    ("--block", "devices come from interfaces[].address"),
];

/// `[engine.dpdk]`: no empty EAL args, none that rtdaq sets itself.
pub(super) fn validate(raw: &RawDpdk, errs: &mut Errors) -> Option<DpdkEngine> {
    let mut ok = true;
    for (k, a) in raw.eal_args.iter().enumerate() {
        let p = format!("engine.dpdk.eal_args[{k}]");
        if a.trim().is_empty() {
            errs.push(p, "empty EAL argument; remove it");
            ok = false;
            continue;
        }
        let owned = OWNED_EAL_FLAGS.iter().find(|(f, _)| {
            a == f
                || a.starts_with(&format!("{f}="))
                || (f.len() == 2 && !a.starts_with("--") && a.starts_with(f))
        });
        if let Some((f, why)) = owned {
            errs.push(
                p,
                format!("EAL flag {f} is set by rtdaq ({why}); remove it"),
            );
            ok = false;
        }
    }
    let main_core = match raw.main_core {
        None => Some(None),
        Some(c) => int::<u32>(c, 0, 1023, "engine.dpdk.main_core", "", errs).map(Some),
    };
    if !ok {
        return None;
    }
    Some(DpdkEngine {
        eal_args: raw.eal_args.clone(),
        main_core: main_core?,
        flow_offload: raw.flow_offload,
    })
}

/// Why a DPDK queue cannot use GPU memory: RX can (`None`); TX sends what the CPU writes.
pub(super) fn device_refusal(dir: Dir) -> Option<String> {
    match dir {
        Dir::Rx => None,
        Dir::Tx => Some(format!(
            "a DPDK TX queue sends the frames the generator (or replay) writes with the CPU, which cannot write GPU memory; {HOST_KINDS}"
        )),
    }
}
