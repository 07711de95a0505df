//! `[[recorders]]` and the RX queues that name them (`record = [...]`): format, file names,
//! rotation, buffers, writer placement, DADA header values, and what a recorder needs from
//! its queues (packets the CPU can read; IPv4/UDP for pcap of socket traffic).

use super::{int, rxq, Draft};
use crate::error::Errors;
use crate::model::{
    Address, DadaParams, GpuStage, RecordFormat, Recorder, RecorderId, RegionKind, Transport,
    FILE_NAME_FIELDS,
};
use crate::schema::{RawConfig, RawDada, RawRecorder};

/// Default `directory`.
pub const DEFAULT_DIRECTORY: &str = "recordings";
/// Default `snaplen` (tcpdump's).
pub const DEFAULT_SNAPLEN: u32 = 262_144;
/// Default `flush_ms`.
pub const DEFAULT_FLUSH_MS: i64 = 100;

/// Resolves an RX queue's `record` names (to indices in `[[recorders]]`).
pub(super) fn recorder_refs(
    names: &[String],
    p: &str,
    raw: &RawConfig,
    errs: &mut Errors,
) -> Option<Vec<RecorderId>> {
    let known: Vec<&str> = raw.recorders.iter().map(|r| r.name.as_str()).collect();
    let ids = super::name_refs(
        names,
        (p, "record"),
        ("recorder", "recorder ([[recorders]])"),
        &known,
        errs,
    )?;
    Some(ids.into_iter().map(RecorderId).collect())
}

/// The queues (interface index, queue index) whose `record` names recorder `k`.
fn users(raw: &RawConfig, k: usize) -> Vec<(usize, usize)> {
    let name = &raw.recorders[k].name;
    let mut out = Vec::new();
    for (i, iface) in raw.interfaces.iter().enumerate() {
        for (q, rq) in iface.rx_queues.iter().enumerate() {
            if rq.record.contains(name) {
                out.push((i, q));
            }
        }
    }
    out
}

/// The GPU stages whose `record` names recorder `k`, and the queues (interface index, queue
/// index) those stages run on.
fn stage_users(raw: &RawConfig, k: usize) -> (Vec<usize>, Vec<(usize, usize)>) {
    let name = &raw.recorders[k].name;
    let mut stages = Vec::new();
    let mut queues = Vec::new();
    for (s, st) in raw.gpu_stages.iter().enumerate() {
        if !st.record.contains(name) {
            continue;
        }
        stages.push(s);
        for (i, iface) in raw.interfaces.iter().enumerate() {
            for (q, rq) in iface.rx_queues.iter().enumerate() {
                if rq.gpu_stage.as_ref() == Some(&st.name) {
                    queues.push((i, q));
                }
            }
        }
    }
    (stages, queues)
}

/// Converts every recorder; reports each field that breaks its rule.
pub(super) fn recorders(raw: &RawConfig, d: &Draft, errs: &mut Errors) -> Vec<Option<Recorder>> {
    let recs = raw
        .recorders
        .iter()
        .enumerate()
        .map(|(k, r)| recorder(raw, d, k, r, errs))
        .collect();
    queues_fit_recorders(raw, d, errs);
    recs
}

fn format_of(s: &str, p: &str, errs: &mut Errors) -> Option<RecordFormat> {
    let f = RecordFormat::from_name(s);
    if f.is_none() {
        let mut each: Vec<String> = RecordFormat::ALL
            .iter()
            .map(|f| format!("{:?} ({})", f.as_str(), f.what()))
            .collect();
        let last = each.pop().unwrap_or_default();
        errs.push(
            format!("{p}.format"),
            format!("unknown format {s:?}; use {} or {last}", each.join(", ")),
        );
    }
    f
}

/// Checks a `file_name` pattern: a plain file name whose `{...}` fields are known.
fn file_name(
    pattern: &str,
    p: &str,
    rotates: bool,
    users: &[(usize, usize)],
    shared: bool,
    errs: &mut Errors,
) -> bool {
    let key = format!("{p}.file_name");
    if pattern.is_empty() || pattern.contains('/') || pattern.contains('\0') {
        errs.push(
            key,
            format!(
                "{pattern:?} is not a file name (no '/', not empty); the directory is `directory`"
            ),
        );
        return false;
    }
    let mut fields = Vec::new();
    let mut rest = pattern;
    while let Some(open) = rest.find('{') {
        let Some(len) = rest[open..].find('}') else {
            errs.push(key, format!("{pattern:?} has a '{{' without its '}}'"));
            return false;
        };
        let f = &rest[open + 1..open + len];
        if !FILE_NAME_FIELDS.contains(&f) {
            errs.push(
                key,
                format!(
                    "unknown field {{{f}}} in {pattern:?}; the fields are {}",
                    FILE_NAME_FIELDS.map(|x| format!("{{{x}}}")).join(", ")
                ),
            );
            return false;
        }
        fields.push(f);
        rest = &rest[open + len + 1..];
    }
    if rotates && !fields.contains(&"index") {
        errs.push(
            key,
            format!("{pattern:?} has no {{index}}, but the recorder rotates files (rotate_mib / rotate_s): every file would get the same name"),
        );
        return false;
    }
    let interfaces = {
        let mut v: Vec<usize> = users.iter().map(|u| u.0).collect();
        v.dedup();
        v.len()
    };
    if shared {
        if fields.contains(&"queue") {
            errs.push(
                key,
                format!("{pattern:?} has {{queue}}, but the recorder is shared: one file holds the packets of every queue of the interface; remove {{queue}}"),
            );
            return false;
        }
        if interfaces > 1 && !fields.contains(&"interface") {
            errs.push(
                key,
                format!("{pattern:?} gives the {interfaces} interfaces that record here the same file name; add {{interface}}"),
            );
            return false;
        }
        return true;
    }
    if users.len() > 1 && !fields.contains(&"queue")
        || interfaces > 1 && !fields.contains(&"interface")
    {
        errs.push(
            key,
            format!("{pattern:?} gives the {} queues that record here the same file name; add {{interface}} and {{queue}}", users.len()),
        );
        return false;
    }
    true
}

/// A DADA header value: one ASCII word (the header is `KEY value` lines).
fn header_word(v: &Option<String>, default: &str, p: &str, errs: &mut Errors) -> Option<String> {
    match v {
        None => Some(default.to_owned()),
        Some(s) if !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_graphic()) => {
            Some(s.clone())
        }
        Some(s) => {
            errs.push(p, format!("{s:?} is not one word of 1..=64 printable ASCII characters (a DADA header line is `KEY value`)"));
            None
        }
    }
}

/// `[recorders.dada]` / `[dada_rings.dada]` (prefix `p`): what a DADA header says.
pub(crate) fn dada(raw: &RawDada, p: &str, errs: &mut Errors) -> Option<DadaParams> {
    let d = DadaParams::default();
    let nbit = match raw.nbit {
        None => Some(d.nbit),
        Some(n @ (1 | 2 | 4 | 8 | 16 | 32)) => Some(n as u32),
        Some(n) => {
            errs.push(
                format!("{p}.nbit"),
                format!("{n} bits per sample; use 1, 2, 4, 8, 16 or 32"),
            );
            None
        }
    };
    let ndim = match raw.ndim {
        None => Some(d.ndim),
        Some(n @ (1 | 2)) => Some(n as u32),
        Some(n) => {
            errs.push(
                format!("{p}.ndim"),
                format!("{n}; use 1 (real samples) or 2 (complex)"),
            );
            None
        }
    };
    let npol = match raw.npol {
        None => Some(d.npol),
        Some(n @ (1 | 2)) => Some(n as u32),
        Some(n) => {
            errs.push(
                format!("{p}.npol"),
                format!("{n} polarisations; use 1 or 2"),
            );
            None
        }
    };
    let nchan = match raw.nchan {
        None => Some(d.nchan),
        Some(n) => int::<u32>(n, 1, 1 << 20, &format!("{p}.nchan"), " channels", errs),
    };
    let tsamp_us = match raw.tsamp_us {
        None => Some(d.tsamp_us),
        Some(t) if t.is_finite() && t > 0.0 => Some(t),
        Some(t) => {
            errs.push(
                format!("{p}.tsamp_us"),
                format!("{t}; the sample interval must be > 0 µs"),
            );
            None
        }
    };
    let finite = |v: Option<f64>, key: &str, errs: &mut Errors| match v {
        Some(x) if !x.is_finite() => {
            errs.push(format!("{p}.{key}"), format!("{x} is not a number"));
            None
        }
        v => Some(v),
    };
    let freq_mhz = finite(raw.freq_mhz, "freq_mhz", errs);
    let bw_mhz = finite(raw.bw_mhz, "bw_mhz", errs);
    let source = header_word(&raw.source, &d.source, &format!("{p}.source"), errs);
    let telescope = header_word(
        &raw.telescope,
        &d.telescope,
        &format!("{p}.telescope"),
        errs,
    );
    let instrument = header_word(
        &raw.instrument,
        &d.instrument,
        &format!("{p}.instrument"),
        errs,
    );
    Some(DadaParams {
        nbit: nbit?,
        ndim: ndim?,
        npol: npol?,
        nchan: nchan?,
        tsamp_us: tsamp_us?,
        freq_mhz: freq_mhz?,
        bw_mhz: bw_mhz?,
        source: source?,
        telescope: telescope?,
        instrument: instrument?,
    })
}

fn recorder(
    raw: &RawConfig,
    d: &Draft,
    k: usize,
    r: &RawRecorder,
    errs: &mut Errors,
) -> Option<Recorder> {
    let p = format!("recorders[{k}]");
    let names: Vec<&str> = raw.recorders.iter().map(|x| x.name.as_str()).collect();
    let mut ok = super::item_name(&names, k, "recorder", "recorders", &p, errs);
    let (stages, stage_queues) = stage_users(raw, k);
    let queue_users = users(raw, k);
    if queue_users.is_empty() && stages.is_empty() && ok {
        errs.push(
            p.clone(),
            format!("recorder \"{}\" is not used by any RX queue or GPU stage; add record = [\"{}\"] to a queue (its packets) or to a [[gpu_stages]] entry (its products), or remove it", r.name, r.name),
        );
        ok = false;
    }
    if !queue_users.is_empty() && !stages.is_empty() {
        errs.push(
            p.clone(),
            format!("recorder \"{}\" is named by RX queues (it would write their packets) and by GPU stage \"{}\" (its products): one recorder writes one kind of stream; define a second [[recorders]] entry", r.name, raw.gpu_stages[stages[0]].name),
        );
        ok = false;
    }
    let users = if stages.is_empty() {
        queue_users
    } else {
        stage_queues
    };
    let format = format_of(&r.format, &p, errs);
    ok &= products_fit(raw, d, &stages, r, format, &p, errs);
    let directory = match &r.directory {
        None => Some(DEFAULT_DIRECTORY.to_owned()),
        Some(s) if !s.is_empty() && !s.contains('\0') => Some(s.clone()),
        Some(_) => {
            errs.push(
                format!("{p}.directory"),
                "empty; leave it out for \"recordings\" (rtdaq run --output-dir DIR overrides it)",
            );
            None
        }
    };
    let rotate_bytes = int::<u64>(
        r.rotate_mib,
        0,
        1 << 24,
        &format!("{p}.rotate_mib"),
        " MiB (0 = one file)",
        errs,
    )
    .map(|m| (m > 0).then_some(m << 20));
    let rotate_ns = if r.rotate_s.is_finite() && (0.0..=86_400.0 * 7.0).contains(&r.rotate_s) {
        Some((r.rotate_s > 0.0).then_some((r.rotate_s * 1e9) as u64))
    } else {
        errs.push(
            format!("{p}.rotate_s"),
            format!(
                "{} is out of range 0..=604800 s (0 = no time rotation)",
                r.rotate_s
            ),
        );
        None
    };
    let rotates = matches!(rotate_bytes, Some(Some(_))) || matches!(rotate_ns, Some(Some(_)));
    let ext = format.map_or("bin", RecordFormat::extension);
    let pattern = r.file_name.clone().unwrap_or_else(|| {
        if r.shared {
            format!("{{config}}-{{interface}}-{{start}}-{{index}}.{ext}")
        } else {
            format!("{{config}}-{{interface}}-rx{{queue}}-{{start}}-{{index}}.{ext}")
        }
    });
    ok &= file_name(&pattern, &p, rotates, &users, r.shared, errs);
    if r.shared && !stages.is_empty() {
        errs.push(
            format!("{p}.shared"),
            "a GPU stage's products are recorded per queue; remove shared (it joins the packets of several queues)",
        );
        ok = false;
    }
    let snaplen = match (r.snaplen, format) {
        (None, _) => Some(DEFAULT_SNAPLEN),
        (Some(s), Some(RecordFormat::Pcap)) => int::<u32>(
            s,
            64,
            262_144,
            &format!("{p}.snaplen"),
            " bytes kept of each packet",
            errs,
        ),
        (Some(_), _) => {
            errs.push(format!("{p}.snaplen"), "only a \"pcap\" recorder has a snap length; remove it (raw/dada keep whole payloads, less strip_bytes)");
            None
        }
    };
    let strip_bytes = match (r.strip_bytes, format) {
        (None, _) => Some(0),
        (Some(s), Some(RecordFormat::Raw | RecordFormat::Dada)) => int::<u32>(
            s,
            0,
            65_535,
            &format!("{p}.strip_bytes"),
            " bytes skipped at the start of each payload",
            errs,
        ),
        (Some(_), _) => {
            errs.push(format!("{p}.strip_bytes"), "a \"pcap\" recorder keeps whole packets; strip_bytes is for \"raw\" and \"dada\" recorders");
            None
        }
    };
    let buffer_bytes = int::<usize>(
        r.buffer_mib,
        1,
        1024,
        &format!("{p}.buffer_mib"),
        " MiB per buffer",
        errs,
    )
    .map(|m| m << 20);
    let buffers = match int::<u32>(
        r.buffers,
        2,
        1024,
        &format!("{p}.buffers"),
        " buffers",
        errs,
    ) {
        Some(b) if b.is_power_of_two() => Some(b),
        Some(b) => {
            errs.push(
                format!("{p}.buffers"),
                format!("{b} is not a power of two (e.g. {})", b.next_power_of_two()),
            );
            None
        }
        None => None,
    };
    let flush_ns = int::<u64>(
        r.flush_ms.unwrap_or(DEFAULT_FLUSH_MS),
        1,
        60_000,
        &format!("{p}.flush_ms"),
        " ms (a partly filled buffer goes to disk after this long)",
        errs,
    )
    .map(|m| m * 1_000_000);
    let writer = super::cores::pinned_thread(
        raw,
        d,
        (r.writer_core, r.writer_priority),
        (&format!("{p}.writer_core"), &format!("{p}.writer_priority")),
        ("writer thread", "a writer"),
        errs,
    );
    let dada = match (&r.dada, format) {
        (None, _) => Some(DadaParams::default()),
        (Some(t), Some(RecordFormat::Dada)) => dada(t, &format!("{p}.dada"), errs),
        (Some(_), Some(f)) => {
            errs.push(
                format!("{p}.dada"),
                format!(
                    "[recorders.dada] is for format = \"dada\"; this recorder writes \"{}\"",
                    f.as_str()
                ),
            );
            None
        }
        (Some(_), None) => None,
    };
    if !ok {
        return None;
    }
    Some(Recorder {
        name: r.name.clone(),
        format: format?,
        directory: directory?,
        file_name: pattern,
        rotate_bytes: rotate_bytes?,
        rotate_ns: rotate_ns?,
        snaplen: snaplen?,
        strip_bytes: strip_bytes?,
        buffer_bytes: buffer_bytes?,
        buffers: buffers?,
        flush_ns: flush_ns?,
        writer: writer?,
        direct_io: r.direct_io,
        shared: r.shared,
        dada: dada?,
    })
}

/// What a recorder of GPU-stage products needs: a stream format (raw/dada; no packets, so
/// no pcap and nothing to strip) and buffers that hold two products.
fn products_fit(
    raw: &RawConfig,
    d: &Draft,
    stages: &[usize],
    r: &RawRecorder,
    format: Option<RecordFormat>,
    p: &str,
    errs: &mut Errors,
) -> bool {
    let Some(&first) = stages.first() else {
        return true;
    };
    let stage = &raw.gpu_stages[first].name;
    if format == Some(RecordFormat::Pcap) {
        errs.push(
            format!("{p}.format"),
            format!("GPU stage \"{stage}\" records its products (whole batches, not packets) here: use format = \"raw\" or \"dada\""),
        );
        return false;
    }
    if r.strip_bytes.is_some_and(|b| b != 0) {
        errs.push(
            format!("{p}.strip_bytes"),
            format!("GPU stage \"{stage}\" records its products here, which have no instrument header to strip; remove strip_bytes"),
        );
        return false;
    }
    let need = stages
        .iter()
        .filter_map(|&s| d.gpu_stages.get(s).and_then(Option::as_ref))
        .map(GpuStage::product_bytes)
        .max()
        .unwrap_or(0);
    let have = u64::try_from(r.buffer_mib)
        .unwrap_or(0)
        .saturating_mul(u64::try_from(r.buffers).unwrap_or(0))
        << 20;
    if need > 0 && have < 2 * need {
        errs.push(
            format!("{p}.buffer_mib"),
            format!(
                "buffers x buffer_mib = {} MiB holds less than two products of GPU stage \"{stage}\" ({} bytes each): the writer could never write one while the next arrives; raise buffer_mib or buffers to at least {} MiB in all",
                have >> 20,
                need,
                (2 * need).div_ceil(1 << 20)
            ),
        );
        return false;
    }
    true
}

/// What a recorder needs from the queues that name it.
fn queues_fit_recorders(raw: &RawConfig, d: &Draft, errs: &mut Errors) {
    for (i, iface) in raw.interfaces.iter().enumerate() {
        for (q, rq) in iface.rx_queues.iter().enumerate() {
            if rq.record.is_empty() {
                continue;
            }
            let p = rxq(i, q);
            let device = rq.memory_regions.iter().any(|n| {
                d.region_index
                    .get(n)
                    .and_then(|&k| d.regions[k].as_ref())
                    .is_some_and(|r| r.kind == RegionKind::Device)
            });
            if device {
                errs.push(format!("{p}.record"), "this queue receives into GPU memory (a \"device\" region), which the CPU cannot read to record; record a GPU stage's products or use a \"host_pinned\" region");
            }
            let tcp = matches!(
                d.interfaces.get(i).and_then(|x| x.address.as_ref()),
                Some(Address::Socket(u)) if u.transport == Transport::Tcp
            );
            for (k, name) in rq.record.iter().enumerate() {
                let pcap = raw
                    .recorders
                    .iter()
                    .find(|r| &r.name == name)
                    .is_some_and(|r| r.format == "pcap");
                if tcp && pcap {
                    errs.push(format!("{p}.record[{k}]"), format!("recorder \"{name}\" writes pcap, which needs each packet's IPv4/UDP headers; a TCP interface delivers a byte stream of records: record it with a \"raw\" or \"dada\" recorder"));
                }
            }
        }
    }
}
