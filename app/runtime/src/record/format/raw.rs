//! `raw`: the payloads back to back, less the first `strip_bytes` of each (raw engines: the
//! UDP payload of each frame). No header of any kind.

use super::api::{Format, Out, Recorded};
use crate::stages::Packet;
use rtdaq_config::model::Recorder;

/// The `raw` format (also the stream of [`Dada`](super::dada::Dada)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raw {
    strip: usize,
}

impl Raw {
    /// The format of `rec`.
    pub fn new(rec: &Recorder) -> Self {
        Raw {
            strip: rec.strip_bytes as usize,
        }
    }
}

impl Format for Raw {
    #[inline]
    fn record(&mut self, p: &Packet<'_>, out: &mut impl Out) -> Option<Recorded> {
        let data = p.payload.get(self.strip..).unwrap_or_default();
        if !out.admit(data.len(), p.rx_ns) {
            return None;
        }
        out.put(data);
        Some(Recorded {
            total: data.len(),
            data: data.len(),
        })
    }
}
