//! Validation: turns a [`RawConfig`] into a [`Config`], collecting every problem.
//!
//! Each item (region, interface, queue, flow, ...) is converted on its own; a field that fails
//! its rule is reported and the item is left out of the draft (`None`), so that rules across
//! items only see sound items and one mistake does not cascade into many. Every rule is a
//! function in one of the submodules, or, for an engine's own `[engine.<name>]` table and the
//! rules only that engine has, in its module under `engines`; each reports errors with the
//! key path they are about.

mod board;
pub(crate) mod capacity;
pub(crate) mod cores;
mod flows;
mod format;
pub(crate) mod generator;
mod gpu;
mod gpudirect;
mod interfaces;
mod multicast;
mod queues;
pub(crate) mod record;
mod regions;
mod top;
pub(crate) use cores::pinned_thread;
pub use record::{DEFAULT_DIRECTORY, DEFAULT_FLUSH_MS, DEFAULT_SNAPLEN};
pub use top::{check_run_duration, parse_metrics_addr, MAX_RUN_DURATION_S};

use crate::engines;
use crate::error::{ConfigError, ConfigErrors, Errors};
use crate::model::{
    Address, Config, Engine, EngineKind, Flow, Generator, GpuStage, IbMode, Interface,
    MemoryRegion, Recorder, Rt, Run, RxQueue, TcpRole, TxQueue,
};
use crate::schema::RawConfig;
use rtdaq_core::flow::DefaultAction;
use std::collections::HashMap;

/// Most flow rules per interface (size `FlowTable<N>` with at least this `N`).
pub const MAX_FLOWS_PER_INTERFACE: usize = 64;

/// An interface as far as it validated.
#[derive(Debug)]
pub(crate) struct DraftInterface {
    pub name: String,
    pub address: Option<Address>,
    pub mtu: Option<u32>,
    pub role: Option<TcpRole>,
    pub connections: Option<u32>,
    pub max_message_size: Option<Option<u32>>,
    pub rx: Vec<Option<RxQueue>>,
    pub tx: Vec<Option<TxQueue>>,
    pub default_action: Option<DefaultAction>,
    pub format: Option<crate::model::StreamFormat>,
    pub multicast: Option<Option<crate::model::Multicast>>,
    pub raw_multicast: Option<Option<crate::model::RawMulticast>>,
    pub flow_control: Option<crate::model::FlowControl>,
    pub max_streams: Option<u32>,
}

/// Everything as far as it validated; `None` marks an item with an error.
#[derive(Debug)]
pub(crate) struct Draft {
    pub kind: EngineKind,
    pub engine: Option<Engine>,
    pub regions: Vec<Option<MemoryRegion>>,
    /// First index of each region name (from the raw names, valid or not).
    pub region_index: HashMap<String, usize>,
    pub interfaces: Vec<DraftInterface>,
    /// First index of each interface name.
    pub interface_index: HashMap<String, usize>,
    pub flows: Vec<Option<Flow>>,
    /// `[[gpu_stages]]` in file order.
    pub gpu_stages: Vec<Option<GpuStage>>,
    /// `[[recorders]]` in file order.
    pub recorders: Vec<Option<Recorder>>,
    /// `[[egress]]` in file order.
    pub egress: Vec<Option<crate::model::Egress>>,
    /// `[[dada_rings]]` in file order.
    pub dada_rings: Vec<Option<crate::model::DadaRing>>,
    /// `[[dumps]]` in file order.
    pub dumps: Vec<Option<crate::model::Dump>>,
    /// `[time]`.
    pub time: Option<Option<crate::model::TimeSync>>,
    pub generator: Option<Option<Generator>>,
    pub run: Option<Run>,
    pub rt: Option<Rt>,
}

/// Validates a deserialized document.
pub(crate) fn validate(raw: &RawConfig) -> Result<Config, ConfigErrors> {
    let mut errs = Errors::default();
    top::name(raw, &mut errs);
    let run = top::run(raw, &mut errs);
    let rt = top::rt(raw, &mut errs);
    let engine = engines::engine(&raw.engine, &mut errs);
    let kind = raw.engine.kind;
    let (regions, region_index) = regions::regions(raw, &mut errs);
    let mut draft = Draft {
        kind,
        engine,
        regions,
        region_index,
        interfaces: Vec::new(),
        interface_index: HashMap::new(),
        flows: Vec::new(),
        gpu_stages: Vec::new(),
        recorders: Vec::new(),
        egress: Vec::new(),
        dada_rings: Vec::new(),
        dumps: Vec::new(),
        time: crate::time::time(raw.time.as_ref(), &mut errs),
        generator: None,
        run,
        rt,
    };
    interfaces::interfaces(raw, &mut draft, &mut errs);
    regions::unused(raw, &mut errs);
    regions::footprint(raw.platform, &draft, &mut errs);
    engines::engine_vs_interfaces(raw, &mut errs);
    capacity::frames_fit_buffers(&draft, &mut errs);
    capacity::enough_buffers(&draft, &mut errs);
    capacity::engine_frames(&draft, &mut errs);
    cores::cores_exist(raw, &draft, &mut errs);
    board::memory_kinds(raw, &draft, &mut errs);
    cores::busy_poll_cores(&draft, &mut errs);
    flows::flows(raw, &mut draft, &mut errs);
    engines::engine_vs_queues(raw, &draft, &mut errs);
    gpudirect::device_queues(raw, &draft, &mut errs);
    draft.gpu_stages = gpu::stages(raw, &draft, &mut errs);
    gpu::queues_fit_stages(raw, &draft, &mut errs);
    draft.recorders = record::recorders(raw, &draft, &mut errs);
    draft.egress = crate::egress::egress(raw, &draft, &mut errs);
    draft.dada_rings = crate::dada_ring::dada_rings(raw, &draft, &mut errs);
    draft.dumps = crate::dump::dumps(raw, &draft, &mut errs);
    draft.generator = raw
        .generator
        .as_ref()
        .map(|g| generator::generator(g, raw, &draft, &mut errs));

    if !errs.is_empty() {
        return Err(ConfigErrors(errs.into_inner()));
    }
    build(raw, draft).ok_or_else(|| {
        ConfigErrors(vec![ConfigError::new(
            "<config>",
            "internal error: a validated item is missing (this is a bug in rtdaq-config)",
        )])
    })
}

/// Assembles the [`Config`] from a draft without errors.
fn build(raw: &RawConfig, d: Draft) -> Option<Config> {
    let interfaces = d
        .interfaces
        .into_iter()
        .map(|i| {
            Some(Interface {
                name: i.name,
                address: i.address?,
                mtu: i.mtu?,
                role: i.role,
                connections: i.connections?,
                max_message_size: i.max_message_size?,
                rx_queues: i.rx.into_iter().collect::<Option<_>>()?,
                tx_queues: i.tx.into_iter().collect::<Option<_>>()?,
                default_action: i.default_action?,
                format: i.format?,
                multicast: i.multicast?,
                raw_multicast: i.raw_multicast?,
                flow_control: i.flow_control,
                max_streams: i.max_streams?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Config {
        name: raw.name.clone(),
        platform: raw.platform,
        description: raw.description.clone(),
        engine: d.engine?,
        memory_regions: d.regions.into_iter().collect::<Option<_>>()?,
        interfaces,
        flows: d.flows.into_iter().collect::<Option<_>>()?,
        gpu_stages: d.gpu_stages.into_iter().collect::<Option<_>>()?,
        recorders: d.recorders.into_iter().collect::<Option<_>>()?,
        egress: d.egress.into_iter().collect::<Option<_>>()?,
        dada_rings: d.dada_rings.into_iter().collect::<Option<_>>()?,
        dumps: d.dumps.into_iter().collect::<Option<_>>()?,
        time: d.time?,
        generator: match d.generator {
            None => None,
            Some(g) => Some(g?),
        },
        run: d.run?,
        rt: d.rt?,
    })
}

/// Checks `lo <= v <= hi` and converts; reports `path: {v} is out of range lo..=hi{why}`.
pub(crate) fn int<T: TryFrom<i64>>(
    v: i64,
    lo: i64,
    hi: i64,
    path: &str,
    why: &str,
    errs: &mut Errors,
) -> Option<T> {
    if v < lo || v > hi {
        errs.push(path, format!("{v} is out of range {lo}..={hi}{why}"));
        return None;
    }
    T::try_from(v).ok()
}

/// Checks the `name` of item `k` of a list of named items (`what`: "GPU stage"; `key`:
/// "gpu_stages"): a plain identifier, not used by an earlier item. Reports at `{p}.name`.
/// Resolves a reference to a named table entry (`name` among `names`): `Some(None)` when
/// there is none, `None` (an error at `at`, worded by `unknown(name, names)`) when no entry
/// has that name.
pub(crate) fn name_ref(
    name: Option<&String>,
    names: &[&str],
    at: String,
    unknown: impl FnOnce(&str, &[&str]) -> String,
    errs: &mut Errors,
) -> Option<Option<usize>> {
    let Some(name) = name else {
        return Some(None);
    };
    match names.iter().position(|n| n == name) {
        Some(k) => Some(Some(k)),
        None => {
            errs.push(at, unknown(name, names));
            None
        }
    }
}

pub(crate) fn item_name(
    names: &[&str],
    k: usize,
    what: &str,
    key: &str,
    p: &str,
    errs: &mut Errors,
) -> bool {
    let name = names[k];
    if !crate::parse::is_identifier(name) {
        errs.push(
            format!("{p}.name"),
            format!("{name:?} is not a plain name; use 1..=64 letters, digits, '_' or '-'"),
        );
        return false;
    }
    if let Some(first) = names[..k].iter().position(|x| *x == name) {
        errs.push(
            format!("{p}.name"),
            format!(
                "duplicate {what} name \"{name}\" (first defined at {key}[{first}]); rename one"
            ),
        );
        return false;
    }
    true
}

/// `"a", "b"` list of quoted names for messages.
pub(crate) fn quoted<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let v: Vec<String> = names.into_iter().map(|n| format!("\"{n}\"")).collect();
    if v.is_empty() {
        "none".to_owned()
    } else {
        v.join(", ")
    }
}

/// Resolves a list of names (a queue's `record` or `egress`: `{p}.{key}[k]`) to the indices
/// of the `known` items they name; each name once (`noun` in the message), each known
/// (`what`, with its table, in the message). `None` after reporting every bad one.
pub(crate) fn name_refs(
    names: &[String],
    (p, key): (&str, &str),
    (noun, what): (&str, &str),
    known: &[&str],
    errs: &mut Errors,
) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    let mut ok = true;
    for (k, name) in names.iter().enumerate() {
        match known.iter().position(|n| n == name) {
            Some(_) if names[..k].contains(name) => {
                errs.push(
                    format!("{p}.{key}[{k}]"),
                    format!("{noun} \"{name}\" is named twice; list it once"),
                );
                ok = false;
            }
            Some(i) => out.push(i),
            None => {
                errs.push(format!("{p}.{key}[{k}]"), unknown_name(what, name, known));
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

/// Message for a name that refers to nothing: suggestion when one is close, plus the list.
pub(crate) fn unknown_name(what: &str, name: &str, known: &[&str]) -> String {
    let hint = crate::suggest::closest(name, known)
        .map(|c| format!("; did you mean \"{c}\"?"))
        .unwrap_or_default();
    format!(
        "no {what} named \"{name}\"{hint} (known: {})",
        quoted(known.iter().copied())
    )
}

/// `engine.ibverbs.mode` when `engine.kind = "ibverbs"` (read from the document, so it is
/// known even when another `[engine.ibverbs]` key is wrong); `None` for other engines.
pub(crate) fn ib_mode(raw: &RawConfig) -> Option<IbMode> {
    (raw.engine.kind == EngineKind::Ibverbs)
        .then(|| raw.engine.ibverbs.as_ref().map_or(IbMode::Raw, |v| v.mode))
}

/// True for the ibverbs engine in RoCE mode, the one engine whose RX queues receive into
/// GPU memory (`device` regions, registered through their dma-buf).
pub(crate) fn roce(raw: &RawConfig) -> bool {
    ib_mode(raw) == Some(IbMode::Roce)
}

/// What the document's engine can do (its kind and, for ibverbs, its mode).
pub(crate) fn caps(raw: &RawConfig) -> crate::model::Capabilities {
    raw.engine.kind.caps(roce(raw))
}

/// Path of an RX queue.
pub(crate) fn rxq(i: usize, q: usize) -> String {
    format!("interfaces[{i}].rx_queues[{q}]")
}

/// Path of a TX queue.
pub(crate) fn txq(i: usize, q: usize) -> String {
    format!("interfaces[{i}].tx_queues[{q}]")
}

/// Bytes as a short human string (`1.5 GiB`).
pub(crate) fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
