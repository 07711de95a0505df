//! rtdaq's egress message: what a `ucx` egress sink sends in each tagged UCX message (and
//! what a receiver parses): a 40-byte little-endian header, then the payloads back to back.
//!
//! | bytes | field | |
//! |---|---|---|
//! | 0..4 | magic | `b"RTDQ"` |
//! | 4 | version | 1 |
//! | 5 | flags | bit 0: end of stream (no payloads follow; the sender is done); bit 1: one whole unit (a sink with `unit = "heap"` or `"time_slot"`: the data is the unit's datagrams, each whole, back to back in arrival order) |
//! | 6..8 | header length | 40 (a receiver skips this many bytes to reach the data) |
//! | 8..12 | stream | which sender of the sink (the `k`-th of the queues feeding it) |
//! | 12..16 | payloads | received payloads in the message |
//! | 16..24 | sequence | the sender's message counter, 0, 1, 2, ... per stream (a gap is a message not sent: counted by the sender, seen by the receiver) |
//! | 24..32 | time | receive time of the first payload, ns since the Unix epoch (0 in the end-of-stream message) |
//! | 32..40 | data length | bytes of payload data after the header |
//!
//! A receiver knows every message was sent whole (UCX delivers a message or fails it); the
//! sequence tells it which messages it did not get, the data length where the next begins.

/// The header's magic.
pub const MAGIC: [u8; 4] = *b"RTDQ";
/// The header version written here.
pub const VERSION: u8 = 1;
/// Bytes of the header.
pub const HEADER_LEN: usize = 40;
/// Flag bit: end of stream.
pub const FLAG_END: u8 = 1;
/// Flag bit: the data is one whole unit's datagrams.
pub const FLAG_UNIT: u8 = 2;

/// One message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MsgHeader {
    /// End of stream: the sender is done (no payloads).
    pub end: bool,
    /// The data is one whole unit (a SPEAD heap's packets, a time slot's frames).
    pub unit: bool,
    /// Which sender of the sink.
    pub stream: u32,
    /// Payloads in the message.
    pub payloads: u32,
    /// The sender's message counter.
    pub seq: u64,
    /// Receive time of the first payload, ns since the Unix epoch.
    pub time_ns: u64,
    /// Bytes of payload data after the header.
    pub data_len: u64,
}

/// Why bytes are not a message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsgError {
    /// Fewer than [`HEADER_LEN`] bytes (or fewer than the header's own length).
    Short,
    /// Not `RTDQ`, or a version this code does not read.
    Foreign,
    /// The data length runs past the message.
    Length,
}

impl MsgHeader {
    /// Writes the header into `out[..HEADER_LEN]`; `None` when `out` is shorter.
    pub fn emit(&self, out: &mut [u8]) -> Option<()> {
        let h = out.get_mut(..HEADER_LEN)?;
        h[0..4].copy_from_slice(&MAGIC);
        h[4] = VERSION;
        h[5] = if self.end { FLAG_END } else { 0 } | if self.unit { FLAG_UNIT } else { 0 };
        h[6..8].copy_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        h[8..12].copy_from_slice(&self.stream.to_le_bytes());
        h[12..16].copy_from_slice(&self.payloads.to_le_bytes());
        h[16..24].copy_from_slice(&self.seq.to_le_bytes());
        h[24..32].copy_from_slice(&self.time_ns.to_le_bytes());
        h[32..40].copy_from_slice(&self.data_len.to_le_bytes());
        Some(())
    }

    /// Parses the header of a whole message `msg`; returns it and the data it describes.
    pub fn parse(msg: &[u8]) -> Result<(MsgHeader, &[u8]), MsgError> {
        let h = msg.get(..HEADER_LEN).ok_or(MsgError::Short)?;
        if h[0..4] != MAGIC || h[4] != VERSION {
            return Err(MsgError::Foreign);
        }
        let le64 = |a: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[a..a + 8]);
            u64::from_le_bytes(b)
        };
        let le32 = |a: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&h[a..a + 4]);
            u32::from_le_bytes(b)
        };
        let hlen = usize::from(u16::from_le_bytes([h[6], h[7]]));
        if hlen < HEADER_LEN {
            return Err(MsgError::Foreign);
        }
        let header = MsgHeader {
            end: h[5] & FLAG_END != 0,
            unit: h[5] & FLAG_UNIT != 0,
            stream: le32(8),
            payloads: le32(12),
            seq: le64(16),
            time_ns: le64(24),
            data_len: le64(32),
        };
        let rest = msg.get(hlen..).ok_or(MsgError::Short)?;
        let len = usize::try_from(header.data_len).map_err(|_| MsgError::Length)?;
        let data = rest.get(..len).ok_or(MsgError::Length)?;
        Ok((header, data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_round_trips_with_its_data() {
        let mut m = [0u8; HEADER_LEN + 5];
        let h = MsgHeader {
            end: false,
            unit: true,
            stream: 3,
            payloads: 2,
            seq: 1 << 40,
            time_ns: 1_700_000_000_000_000_000,
            data_len: 5,
        };
        h.emit(&mut m).unwrap();
        m[HEADER_LEN..].copy_from_slice(b"hello");
        assert_eq!(&m[..4], b"RTDQ");
        let (back, data) = MsgHeader::parse(&m).unwrap();
        assert_eq!(back, h);
        assert_eq!(data, b"hello");
    }

    #[test]
    fn bad_messages_name_what_is_wrong() {
        let mut m = [0u8; HEADER_LEN];
        assert_eq!(MsgHeader::parse(&m[..10]), Err(MsgError::Short));
        assert_eq!(MsgHeader::parse(&m), Err(MsgError::Foreign));
        MsgHeader {
            data_len: 1,
            ..MsgHeader::default()
        }
        .emit(&mut m)
        .unwrap();
        assert_eq!(MsgHeader::parse(&m), Err(MsgError::Length));
        assert!(MsgHeader::default().emit(&mut m[..39]).is_none());
    }
}
