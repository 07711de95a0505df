//! `[interfaces.format]`: the stream format of an interface (`rtdaq`, `counter`, `vdif`,
//! `spead`, `codif`, `ecpri`).

use super::int;
use crate::error::Errors;
use crate::model::{CodifParams, SpeadParams, StreamFormat, VdifParams};
use crate::schema::{IntOrStr, RawField, RawFormat};
use rtdaq_core::format::vdif::MAX_FRAMES_PER_SECOND;
use rtdaq_core::format::{CounterField, CounterFormat, Flavour};

/// The kinds, as written.
const KINDS: [&str; 6] = ["rtdaq", "counter", "vdif", "spead", "codif", "ecpri"];
/// Keys only `kind = "counter"` takes.
const COUNTER_KEYS: [&str; 8] = [
    "offset", "bytes", "endian", "shift", "bits", "step", "wrap", "stream",
];
/// Keys only `kind = "vdif"` takes.
const VDIF_KEYS: [&str; 4] = [
    "frames_per_second",
    "station",
    "bits_per_sample",
    "log2_channels",
];
/// Keys only `kind = "spead"` takes.
const SPEAD_KEYS: [&str; 3] = ["flavour", "heap_step", "heap_bytes"];
/// Keys `kind = "codif"` takes.
const CODIF_KEYS: [&str; 5] = [
    "frames_per_period",
    "period",
    "station",
    "bits_per_sample",
    "channels",
];

/// The format of interface `p` (`interfaces[i]`); `rtdaq` when the table is absent.
pub(super) fn format(raw: Option<&RawFormat>, p: &str, errs: &mut Errors) -> Option<StreamFormat> {
    let Some(f) = raw else {
        return Some(StreamFormat::Rtdaq);
    };
    let p = format!("{p}.format");
    let given = given_keys(f);
    let foreign = |own: &[&str]| -> Vec<&'static str> {
        given.iter().copied().filter(|k| !own.contains(k)).collect()
    };
    let misplaced = match f.kind.as_str() {
        "rtdaq" | "ecpri" => foreign(&[]),
        "counter" => foreign(&COUNTER_KEYS),
        "vdif" => foreign(&VDIF_KEYS),
        "spead" => foreign(&SPEAD_KEYS),
        "codif" => foreign(&CODIF_KEYS),
        other => {
            let hint = crate::suggest::closest(other, &KINDS)
                .map(|k| format!("did you mean {k:?}? "))
                .unwrap_or_default();
            errs.push(
                format!("{p}.kind"),
                format!("{other:?} is not a stream format; {hint}use \"rtdaq\" (rtdaq's sequence header, the default), \"counter\" (a counter at an offset), \"vdif\" (VDIF frames), \"codif\" (CODIF frames), \"spead\" (SPEAD heaps) or \"ecpri\" (eCPRI sequence ids)"),
            );
            return None;
        }
    };
    if !misplaced.is_empty() {
        for k in &misplaced {
            let owner = if COUNTER_KEYS.contains(k) {
                "counter"
            } else if SPEAD_KEYS.contains(k) {
                "spead"
            } else if CODIF_KEYS.contains(k) && !VDIF_KEYS.contains(k) {
                "codif"
            } else {
                "vdif"
            };
            errs.push(
                format!("{p}.{k}"),
                format!(
                    "is a key of kind = \"{owner}\", not of kind = {:?}; remove it or change the kind",
                    f.kind
                ),
            );
        }
        return None;
    }
    match f.kind.as_str() {
        "counter" => counter(f, &p, errs).map(StreamFormat::Counter),
        "vdif" => vdif(f, &p, errs).map(StreamFormat::Vdif),
        "spead" => spead(f, &p, errs).map(StreamFormat::Spead),
        "codif" => codif(f, &p, errs).map(StreamFormat::Codif),
        "ecpri" => Some(StreamFormat::Ecpri),
        _ => Some(StreamFormat::Rtdaq),
    }
}

fn given_keys(f: &RawFormat) -> Vec<&'static str> {
    let mut k = Vec::new();
    let mut add = |present: bool, name: &'static str| {
        if present {
            k.push(name);
        }
    };
    add(f.offset.is_some(), "offset");
    add(f.bytes.is_some(), "bytes");
    add(f.endian.is_some(), "endian");
    add(f.shift.is_some(), "shift");
    add(f.bits.is_some(), "bits");
    add(f.step.is_some(), "step");
    add(f.wrap.is_some(), "wrap");
    add(f.stream.is_some(), "stream");
    add(f.frames_per_second.is_some(), "frames_per_second");
    add(f.station.is_some(), "station");
    add(f.bits_per_sample.is_some(), "bits_per_sample");
    add(f.log2_channels.is_some(), "log2_channels");
    add(f.flavour.is_some(), "flavour");
    add(f.heap_step.is_some(), "heap_step");
    add(f.heap_bytes.is_some(), "heap_bytes");
    add(f.frames_per_period.is_some(), "frames_per_period");
    add(f.period.is_some(), "period");
    add(f.channels.is_some(), "channels");
    k
}

/// One integer field (`offset`, `bytes`, `endian`, `shift`, `bits` at `p`).
fn field(
    offset: Option<i64>,
    bytes: Option<i64>,
    endian: Option<&str>,
    shift: Option<i64>,
    bits: Option<i64>,
    p: &str,
    errs: &mut Errors,
) -> Option<CounterField> {
    let Some(offset) = offset else {
        errs.push(
            format!("{p}.offset"),
            "missing: the byte offset of the field in the UDP payload (e.g. offset = 0)",
        );
        return None;
    };
    let offset = int::<u16>(
        offset,
        0,
        65_535,
        &format!("{p}.offset"),
        " (bytes into the payload)",
        errs,
    );
    let bytes = int::<u8>(
        bytes.unwrap_or(8),
        1,
        8,
        &format!("{p}.bytes"),
        " (the field is read as 1 to 8 bytes)",
        errs,
    );
    let big_endian = match endian.unwrap_or("big") {
        "big" => Some(true),
        "little" => Some(false),
        other => {
            errs.push(
                format!("{p}.endian"),
                format!("{other:?} is not a byte order; use \"big\" (network order, the default) or \"little\""),
            );
            None
        }
    };
    let (offset, bytes, big_endian) = (offset?, bytes?, big_endian?);
    let width = i64::from(bytes) * 8;
    let shift = int::<u8>(
        shift.unwrap_or(0),
        0,
        width - 1,
        &format!("{p}.shift"),
        &format!(" (bits below the field, within the {bytes} bytes read)"),
        errs,
    )?;
    let bits = int::<u8>(
        bits.unwrap_or(width - i64::from(shift)),
        1,
        width - i64::from(shift),
        &format!("{p}.bits"),
        &format!(" (shift {shift} + bits must fit the {width} bits read)"),
        errs,
    )?;
    let f = CounterField {
        offset,
        bytes,
        big_endian,
        shift,
        bits,
    };
    debug_assert!(f.is_valid());
    Some(f)
}

fn counter(f: &RawFormat, p: &str, errs: &mut Errors) -> Option<CounterFormat> {
    let c = field(
        f.offset,
        f.bytes,
        f.endian.as_deref(),
        f.shift,
        f.bits,
        p,
        errs,
    );
    let stream = f.stream.as_ref().map(|s: &RawField| {
        field(
            Some(s.offset),
            Some(s.bytes),
            s.endian.as_deref(),
            s.shift,
            s.bits,
            &format!("{p}.stream"),
            errs,
        )
    });
    let step = int::<u64>(
        f.step.unwrap_or(1),
        1,
        i64::MAX,
        &format!("{p}.step"),
        " (counter increment per packet)",
        errs,
    );
    let (c, step) = (c?, step?);
    let stream = match stream {
        Some(s) => Some(s?),
        None => None,
    };
    let modulus = if c.bits >= 64 {
        u128::MAX
    } else {
        1u128 << c.bits
    };
    let wrap = match f.wrap {
        None => 0,
        Some(w) => {
            let w = int::<u64>(
                w,
                2,
                i64::MAX,
                &format!("{p}.wrap"),
                " (the counter's modulus: values run 0..wrap)",
                errs,
            )?;
            if u128::from(w) > modulus {
                errs.push(
                    format!("{p}.wrap"),
                    format!(
                        "{w} does not fit the {} bits of the counter; use at most 2^{}",
                        c.bits, c.bits
                    ),
                );
                return None;
            }
            w
        }
    };
    let m = if wrap == 0 { modulus } else { u128::from(wrap) };
    if m != u128::MAX && m % u128::from(step) != 0 {
        errs.push(
            format!("{p}.step"),
            format!("{step} does not divide the counter's modulus {m} (wrap, or 2^bits): the count could not continue across the wrap"),
        );
        return None;
    }
    Some(CounterFormat {
        counter: c,
        step,
        wrap,
        stream,
    })
}

fn codif(f: &RawFormat, p: &str, errs: &mut Errors) -> Option<CodifParams> {
    let fpp = match f.frames_per_period {
        None => Some(None),
        Some(v) => int::<u32>(
            v,
            1,
            i64::from(u32::MAX),
            &format!("{p}.frames_per_period"),
            " (data frames per period per thread; CODIF frame numbers have 32 bits)",
            errs,
        )
        .map(Some),
    };
    let period = int::<u16>(
        f.period.unwrap_or(1),
        1,
        65_535,
        &format!("{p}.period"),
        " (seconds; CODIF's period field has 16 bits)",
        errs,
    );
    let station = station(f, p, errs);
    let bps = int::<u8>(
        f.bits_per_sample.unwrap_or(8),
        1,
        32,
        &format!("{p}.bits_per_sample"),
        "",
        errs,
    );
    let channels = int::<u16>(
        f.channels.unwrap_or(1),
        1,
        65_535,
        &format!("{p}.channels"),
        "",
        errs,
    );
    Some(CodifParams {
        frames_per_period: fpp?,
        period: period?,
        station: station?,
        bits_per_sample: bps?,
        channels: channels?,
    })
}

/// `station`: two ASCII characters or a 16-bit number (VDIF, CODIF); 0 when absent.
fn station(f: &RawFormat, p: &str, errs: &mut Errors) -> Option<u16> {
    match &f.station {
        None => Some(0),
        Some(IntOrStr::Int(v)) => int::<u16>(
            *v,
            0,
            65_535,
            &format!("{p}.station"),
            " (16-bit station id)",
            errs,
        ),
        Some(IntOrStr::Str(s)) if s.len() == 2 && s.is_ascii() => {
            let b = s.as_bytes();
            Some(u16::from_be_bytes([b[0], b[1]]))
        }
        Some(IntOrStr::Str(s)) => {
            errs.push(
                format!("{p}.station"),
                format!("{s:?} is not a station id; use two ASCII characters (\"Ef\") or a number 0..=65535"),
            );
            None
        }
    }
}

fn vdif(f: &RawFormat, p: &str, errs: &mut Errors) -> Option<VdifParams> {
    let fps = match f.frames_per_second {
        None => Some(None),
        Some(v) => int::<u32>(
            v,
            1,
            i64::from(MAX_FRAMES_PER_SECOND),
            &format!("{p}.frames_per_second"),
            " (data frames per second per thread; VDIF frame numbers have 24 bits)",
            errs,
        )
        .map(Some),
    };
    let station = station(f, p, errs);
    let bps = int::<u8>(
        f.bits_per_sample.unwrap_or(2),
        1,
        32,
        &format!("{p}.bits_per_sample"),
        "",
        errs,
    );
    let lg = int::<u8>(
        f.log2_channels.unwrap_or(0),
        0,
        31,
        &format!("{p}.log2_channels"),
        "",
        errs,
    );
    Some(VdifParams {
        frames_per_second: fps?,
        station: station?,
        bits_per_sample: bps?,
        log2_channels: lg?,
    })
}

fn spead(f: &RawFormat, p: &str, errs: &mut Errors) -> Option<SpeadParams> {
    let flavour = match f.flavour.as_deref() {
        None => Some(None),
        Some("64-48") => Some(Some(Flavour::F64_48)),
        Some("64-40") => Some(Some(Flavour::F64_40)),
        Some(other) => {
            errs.push(
                format!("{p}.flavour"),
                format!("{other:?} is not a SPEAD flavour rtdaq reads; use \"64-48\" (spead2's default) or \"64-40\", or leave it out to accept both"),
            );
            None
        }
    };
    let step = int::<u32>(
        f.heap_step.unwrap_or(1),
        1,
        i64::from(u32::MAX),
        &format!("{p}.heap_step"),
        " (the heap counter's step within one stream; streams are heap counter % heap_step)",
        errs,
    );
    let bytes = int::<u32>(
        f.heap_bytes.unwrap_or(8192),
        1,
        1 << 30,
        &format!("{p}.heap_bytes"),
        " (payload bytes of each heap the generator sends)",
        errs,
    );
    Some(SpeadParams {
        flavour: flavour?,
        heap_step: step?,
        heap_bytes: bytes?,
    })
}
