//! An egress sink that forwards whole units (`unit`, `open_units`, `unit_frames`): a SPEAD
//! heap or a VDIF/CODIF time slot goes out whole, or is counted lost. Over UCX a unit is one
//! message; over SPEAD a whole heap goes out as the packets it arrived in (the instrument's
//! heap counter and items: a relay that passes only whole heaps), a time slot as one heap
//! whose data item is its frames.
//!
//! ```toml
//! [[egress]]
//! name = "heaps-out"
//! protocol = "ucx"
//! destinations = ["127.0.0.1:13337"]
//! unit = "heap"          # "payloads" (default) | "heap" (SPEAD) | "time_slot" (VDIF, CODIF)
//! open_units = 8         # units being assembled at once (default 4)
//! max_heap_kib = 64      # room for one unit's datagrams, headers included (needed for "heap")
//! # unit_frames = 4      # "time_slot": frames in a whole slot (threads × stations)
//! ```

use crate::error::Errors;
use crate::model::{EgressFeed, EgressProtocol, StreamFormat};
use crate::schema::RawConfig;
use crate::validate::{int, Draft};
use rtdaq_core::format::UnitKind;

/// How a sink forwards whole units (`None` in [`Egress::units`](crate::model::Egress::units):
/// payloads one by one, `packets_per_heap` to a message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EgressUnits {
    /// What a unit is and when it is whole.
    pub kind: UnitKind,
    /// Units assembled at once (`open_units`): a datagram of a further unit sends the oldest
    /// open unit if it is whole, else counts its datagrams lost (`egress_incomplete`).
    pub open: u32,
}

/// Default `open_units`.
pub const DEFAULT_OPEN_UNITS: i64 = 4;
/// Most `open_units`.
pub const MAX_OPEN_UNITS: i64 = 64;

/// The unit keys as written.
pub(crate) struct RawUnit<'a> {
    pub unit: Option<&'a str>,
    pub open_units: Option<i64>,
    pub unit_frames: Option<i64>,
}

/// What the rest of the sink's settings say, for the rules units add.
pub(crate) struct UnitCtx<'a> {
    pub name: &'a str,
    pub protocol: Option<EgressProtocol>,
    pub feed: EgressFeed,
    pub packets_per_heap: Option<i64>,
    pub strip_bytes: i64,
    pub max_heap_kib: Option<i64>,
    pub descriptors_every: Option<i64>,
    pub max_packet: Option<i64>,
    /// The largest payload the feeding queues receive, and why.
    pub largest: Option<&'a (u32, String)>,
}

/// `unit`, `open_units`, `unit_frames`: `Some(None)` for payloads, `None` on an error
/// (pushed with its key path).
pub(crate) fn units(
    raw: &RawConfig,
    d: &Draft,
    r: &RawUnit<'_>,
    c: &UnitCtx<'_>,
    p: &str,
    errs: &mut Errors,
) -> Option<Option<EgressUnits>> {
    let whole = match r.unit {
        None | Some("payloads") => None,
        Some(u @ ("heap" | "time_slot")) => Some(u),
        Some(u) => {
            errs.push(format!("{p}.unit"), format!("unknown unit {u:?}; use \"payloads\" (the default: received payloads, packets_per_heap to a message), \"heap\" (whole SPEAD heaps) or \"time_slot\" (whole VDIF/CODIF time slots)"));
            return None;
        }
    };
    let Some(unit) = whole else {
        for (key, given) in [
            ("open_units", r.open_units.is_some()),
            ("unit_frames", r.unit_frames.is_some()),
        ] {
            if given {
                errs.push(format!("{p}.{key}"), format!("`{key}` applies to a sink that forwards whole units; set unit = \"heap\" or \"time_slot\", or remove it"));
                return None;
            }
        }
        return Some(None);
    };
    let mut ok = fits_sink(unit, c, p, errs);
    let format = feeding_format(raw, d, c.name, unit, p, errs);
    ok &= format.is_some();
    let open = int::<u32>(
        r.open_units.unwrap_or(DEFAULT_OPEN_UNITS),
        1,
        MAX_OPEN_UNITS,
        &format!("{p}.open_units"),
        " units assembled at once",
        errs,
    );
    let kind = match (unit, format) {
        (_, None) => None,
        ("heap", _) => {
            if let Some(f) = r.unit_frames.filter(|_| unit == "heap") {
                errs.push(format!("{p}.unit_frames"), format!("unit_frames = {f} applies to unit = \"time_slot\"; a SPEAD heap is whole when its heap size has arrived; remove it"));
                None
            } else {
                Some(UnitKind::SpeadHeap)
            }
        }
        (_, Some(fmt)) => slot_kind(fmt, r.unit_frames, p, errs),
    };
    let units = EgressUnits {
        kind: kind?,
        open: open?,
    };
    ok.then_some(Some(units))
}

/// Units come from received payloads, whole: no `packets_per_heap`, no `strip_bytes`; a
/// heap needs `max_heap_kib` (a heap's size is the stream's). A SPEAD sink forwarding heaps
/// sends the instrument's packets as they are: no descriptors of its own, and packets of
/// up to the largest payload.
fn fits_sink(unit: &str, c: &UnitCtx<'_>, p: &str, errs: &mut Errors) -> bool {
    let mut ok = true;
    let mut no = |key: &str, why: String| {
        errs.push(format!("{p}.{key}"), why);
        ok = false;
    };
    if c.protocol == Some(EgressProtocol::Spead) && unit == "heap" {
        if let Some(n) = c.descriptors_every {
            no("descriptors_every", format!("descriptors_every = {n}: a \"spead\" sink with unit = \"heap\" forwards the instrument's heaps as they are, its descriptors too, and adds none of its own; remove it"));
        }
        let max_packet = c.max_packet.unwrap_or(crate::egress::DEFAULT_MAX_PACKET);
        if let Some((n, why)) = c.largest.filter(|(n, _)| i64::from(*n) > max_packet) {
            no("max_packet", format!("max_packet = {max_packet} is shorter than a received packet may be ({n} bytes: {why}); a \"spead\" sink with unit = \"heap\" sends each packet as it arrived: raise max_packet to {n} (at most the path MTU less 28)"));
        }
    }
    if c.feed == EgressFeed::Products {
        no("unit", format!("unit = \"{unit}\" forwards received datagrams; this sink sends a GPU stage's products (each one whole already): remove unit"));
    }
    if c.packets_per_heap.is_some() {
        no("packets_per_heap", format!("a sink with unit = \"{unit}\" sends one unit a message, however many datagrams it has: remove packets_per_heap"));
    }
    if c.strip_bytes != 0 {
        no("strip_bytes", format!("a sink with unit = \"{unit}\" forwards datagrams whole (their headers say which unit they belong to): remove strip_bytes"));
    }
    if unit == "heap" && c.max_heap_kib.is_none() {
        no("max_heap_kib", "a sink with unit = \"heap\" needs room for one heap's packets, SPEAD headers included: give max_heap_kib (e.g. the stream's heap size in KiB + 10 %, rounded up)".to_string());
    }
    ok
}

/// The stream format of the interfaces whose queues name sink `name`: one, and the unit's
/// (SPEAD for heaps, VDIF or CODIF for time slots).
fn feeding_format(
    raw: &RawConfig,
    d: &Draft,
    name: &str,
    unit: &str,
    p: &str,
    errs: &mut Errors,
) -> Option<StreamFormat> {
    let mut found: Option<(StreamFormat, &str)> = None;
    for (i, ri) in raw.interfaces.iter().enumerate() {
        if !ri
            .rx_queues
            .iter()
            .any(|q| q.egress.iter().any(|n| n == name))
        {
            continue;
        }
        let fmt = d.interfaces.get(i).and_then(|di| di.format)?;
        let wants = match unit {
            "heap" => matches!(fmt, StreamFormat::Spead(_)),
            _ => matches!(fmt, StreamFormat::Vdif(_) | StreamFormat::Codif(_)),
        };
        if !wants {
            let need = if unit == "heap" {
                "kind = \"spead\""
            } else {
                "kind = \"vdif\" or \"codif\""
            };
            errs.push(format!("{p}.unit"), format!("unit = \"{unit}\": interface \"{}\" feeds this sink with format \"{}\", whose payloads are no {unit} datagrams; its [interfaces.format] must be {need}, or use unit = \"payloads\"", ri.name, fmt.kind()));
            return None;
        }
        match found {
            Some((f, other)) if f.kind() != fmt.kind() => {
                errs.push(format!("{p}.unit"), format!("interfaces \"{other}\" ({}) and \"{}\" ({}) feed this sink: one sink assembles one format's time slots; define a sink per format", f.kind(), ri.name, fmt.kind()));
                return None;
            }
            _ => found = Some((fmt, &ri.name)),
        }
    }
    found.map(|(f, _)| f)
}

/// A time slot of `fmt` with `unit_frames` frames (required: how many threads send).
fn slot_kind(
    fmt: StreamFormat,
    frames: Option<i64>,
    p: &str,
    errs: &mut Errors,
) -> Option<UnitKind> {
    let Some(n) = frames else {
        errs.push(format!("{p}.unit_frames"), "unit = \"time_slot\" needs unit_frames: the frames of one whole slot (the threads, times the stations, that send each data frame number), e.g. unit_frames = 4");
        return None;
    };
    let frames = int::<u32>(
        n,
        1,
        65_536,
        &format!("{p}.unit_frames"),
        " frames in a whole time slot",
        errs,
    )?;
    match fmt {
        StreamFormat::Codif(_) => Some(UnitKind::CodifSlot { frames }),
        _ => Some(UnitKind::VdifSlot { frames }),
    }
}
