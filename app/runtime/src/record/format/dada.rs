//! `dada`: the [`raw`](super::raw) stream behind a 4096-byte PSRDADA ASCII header that the
//! writer puts at the head of each file and rewrites with the file's final size when the file
//! closes (a reader trusts `FILE_SIZE`).

use super::api::{FileFacts, Format, Out, Recorded};
use super::raw::Raw;
use crate::record::common::{start_field, DADA_HEADER_LEN};
use crate::stages::Packet;
use rtdaq_config::model::{DadaParams, Recorder};

/// The `dada` format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dada {
    raw: Raw,
}

impl Dada {
    /// The format of `rec`.
    pub fn new(rec: &Recorder) -> Self {
        Dada { raw: Raw::new(rec) }
    }
}

impl Format for Dada {
    fn file_header_len(&self) -> u64 {
        DADA_HEADER_LEN as u64
    }

    fn file_header(&self, f: &FileFacts<'_>) -> Option<Vec<u8>> {
        Some(header(f))
    }

    #[inline]
    fn record(&mut self, p: &Packet<'_>, out: &mut impl Out) -> Option<Recorded> {
        self.raw.record(p, out)
    }
}

/// The header lines that say what the samples are (`[recorders.dada]`,
/// `[dada_rings.dada]`): SOURCE, TELESCOPE, INSTRUMENT, RECEIVER, NBIT, NDIM, NPOL, NCHAN,
/// TSAMP, and FREQ / BW when given. A file's and a ring's header share them.
pub(crate) fn observation_lines(d: &DadaParams) -> Vec<(&'static str, String)> {
    let mut lines = vec![
        ("SOURCE", d.source.clone()),
        ("TELESCOPE", d.telescope.clone()),
        ("INSTRUMENT", d.instrument.clone()),
        ("RECEIVER", "unset".into()),
        ("NBIT", d.nbit.to_string()),
        ("NDIM", d.ndim.to_string()),
        ("NPOL", d.npol.to_string()),
        ("NCHAN", d.nchan.to_string()),
        ("TSAMP", d.tsamp_us.to_string()),
    ];
    if let Some(v) = d.freq_mhz {
        lines.push(("FREQ", v.to_string()));
    }
    if let Some(v) = d.bw_mhz {
        lines.push(("BW", v.to_string()));
    }
    lines
}

/// The 4096-byte DADA header of a file (`f.last`: the file is complete, sizes are final).
fn header(f: &FileFacts<'_>) -> Vec<u8> {
    let r = &f.info.recorder;
    let d = &r.dada;
    let start = f.obs_start_ns;
    let utc = crate::pacer::rfc3339_utc(start);
    // 2026-12-01T12:53:09.123456789Z -> 2026-12-01-12:53:09 (DADA's UTC_START)
    let utc_start = format!(
        "{}-{}",
        utc.get(..10).unwrap_or_default(),
        utc.get(11..19).unwrap_or_default()
    );
    let size = if f.last {
        f.bytes.saturating_sub(DADA_HEADER_LEN as u64)
    } else {
        r.rotate_bytes
            .map_or(0, |b| b.saturating_sub(DADA_HEADER_LEN as u64))
    };
    let mut lines = vec![
        ("HEADER", "DADA".to_string()),
        ("HDR_VERSION", "1.0".into()),
        ("HDR_SIZE", DADA_HEADER_LEN.to_string()),
        ("DADA_VERSION", "1.0".into()),
        (
            "OBS_ID",
            format!(
                "{}_{}",
                f.info.config_name,
                start_field(f.info.start_unix_ns)
            ),
        ),
        (
            "FILE_NAME",
            f.path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        ),
        ("FILE_SIZE", size.to_string()),
        ("FILE_NUMBER", f.number.to_string()),
        ("OBS_OFFSET", f.obs_offset.to_string()),
        ("OBS_OVERLAP", "0".into()),
        ("UTC_START", utc_start),
        ("MJD_START", mjd(start)),
    ];
    lines.extend(observation_lines(d));
    lines.extend([
        ("RTDAQ_CONFIG", f.info.config_name.clone()),
        ("RTDAQ_CONFIG_SHA256", f.info.config_sha256.clone()),
        ("RTDAQ_QUEUE", f.info.queue.clone()),
        ("RTDAQ_RECORDER", r.name.clone()),
        ("STRIP_BYTES", r.strip_bytes.to_string()),
    ]);
    if f.last {
        lines.push(("PACKETS", f.packets.to_string()));
        if f.first_len > 0 {
            lines.push(("PKT_SIZE", f.first_len.to_string()));
        }
        if let Some((sid, s)) = f.first_seq {
            lines.push(("FIRST_SEQ", s.to_string()));
            lines.push(("SEQ_STREAM", sid.to_string()));
        }
    }
    let mut text = String::new();
    for (k, v) in lines {
        text.push_str(&format!("{k:<20}{v}\n"));
    }
    text.push_str("# end of header\n");
    let mut h = text.into_bytes();
    h.resize(DADA_HEADER_LEN, 0);
    h
}

/// `MJD_START` of a Unix time in ns: days since 1858-11-17 as `"61010.123456789012345"`.
pub fn mjd(unix_ns: u64) -> String {
    const DAY_NS: u128 = 86_400 * 1_000_000_000;
    let ns = u128::from(unix_ns);
    let days = ns / DAY_NS + 40_587;
    let frac = (ns % DAY_NS) * 1_000_000_000_000_000 / DAY_NS;
    format!("{days:05}.{frac:015}")
}

#[cfg(test)]
mod tests {
    use super::mjd;

    #[test]
    fn mjd_of_known_dates() {
        assert_eq!(mjd(0), "40587.000000000000000");
        // 2000-01-01T12:00:00Z is MJD 51544.5
        assert_eq!(mjd(946_728_000 * 1_000_000_000), "51544.500000000000000");
    }
}
