//! eCPRI messages (eCPRI specification v2.0): the sequence id of each PC_ID / RTC_ID.
//!
//! The validator hands this module the eCPRI message: the UDP payload (eCPRI over UDP) or,
//! on a raw engine, the bytes after the Ethernet header of an EtherType `0xAEFE` frame.
//! After the 4-byte common header ([`crate::wire::ecpri`]: revision 1, C bit, message type,
//! payload size):
//!
//! | message types | stream id | sequence id |
//! |---|---|---|
//! | 0 IQ data, 1 bit sequence, 2 real-time control | PC_ID / RTC_ID, bytes 4..6 | SEQ_ID, byte 6 (8 bits); byte 7: E bit (7) and subsequence id (6..0) |
//! | 3 generic data transfer | PC_ID, bytes 4..8 | SEQ_ID, bytes 8..12 (32 bits) |
//!
//! The stream key is `message type << 16 | PC_ID` for types 0–2 and the 32-bit PC_ID for
//! type 3. The sequence id wraps at 2^8 (2^32) and is unwrapped per stream as a
//! [`CounterFormat`] (so at most 127 messages lost in a row are counted right for types
//! 0–2). A message split into subsequences (E bit clear, or a subsequence id ≠ 0) shares one
//! sequence id: only its last piece (E set) is tracked, the others are counted as
//! [`Piece::Fragment`]. Other message types carry no sequence id (`foreign`); a revision
//! other than 1 is `foreign`, a payload size beyond the message `length`, a message shorter
//! than its ids `short`. With the C bit only the first message of a frame is read.

use super::counter::{CounterField, CounterFormat};
use super::Reject;
use crate::wire::ecpri::{msg_type, ECPRI_REVISION};

/// Types 0–2: SEQ_ID (1 byte at 6), PC_ID/RTC_ID (2 bytes at 4).
pub const SEQ8: CounterFormat = CounterFormat {
    counter: CounterField::bytes(6, 1, true),
    step: 1,
    wrap: 0,
    stream: Some(CounterField::bytes(4, 2, true)),
};
/// Type 3: SEQ_ID (4 bytes at 8), PC_ID (4 bytes at 4).
pub const SEQ32: CounterFormat = CounterFormat {
    counter: CounterField::bytes(8, 4, true),
    step: 1,
    wrap: 0,
    stream: Some(CounterField::bytes(4, 4, true)),
};

/// One eCPRI message, as far as sequence tracking goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    /// A whole message (or the last piece of a subsequence): track `raw` in `stream` with
    /// `format`.
    Message {
        /// Stream key (see the module docs).
        stream: u32,
        /// The raw sequence id.
        raw: u64,
        /// [`SEQ8`] or [`SEQ32`]: how the id wraps.
        format: &'static CounterFormat,
    },
    /// A piece of a split message before its last one (not tracked).
    Fragment,
}

/// Reads the eCPRI message at the start of `msg`; see the [module docs](self). Never panics.
pub fn read(msg: &[u8]) -> Result<Piece, Reject> {
    if msg.len() < 4 {
        return Err(Reject::Short);
    }
    if msg[0] >> 4 != ECPRI_REVISION {
        return Err(Reject::Foreign);
    }
    let size = usize::from(u16::from_be_bytes([msg[2], msg[3]]));
    if 4 + size > msg.len() {
        return Err(Reject::Length);
    }
    let t = msg[1];
    let format = match t {
        msg_type::IQ_DATA | msg_type::BIT_SEQUENCE | msg_type::RT_CONTROL => &SEQ8,
        msg_type::GENERIC_DATA => &SEQ32,
        _ => return Err(Reject::Foreign),
    };
    let (id, raw) = format.read(msg)?;
    if format.counter.bytes == 1 {
        // Byte 7: E bit and subsequence id.
        let e = msg.get(7).ok_or(Reject::Short)?;
        if e & 0x80 == 0 {
            return Ok(Piece::Fragment);
        }
        return Ok(Piece::Message {
            stream: u32::from(t) << 16 | id,
            raw,
            format,
        });
    }
    Ok(Piece::Message {
        stream: id,
        raw,
        format,
    })
}

/// Writes an eCPRI IQ data message header (common header with payload size `len − 4`,
/// PC_ID `pc_id`, SEQ_ID `seq`, E bit set, subsequence 0) into `out[..8]`; `false` when
/// `out` is shorter than 8 bytes or `len` is outside `8..=65539`.
pub fn emit_iq(out: &mut [u8], len: usize, pc_id: u16, seq: u8) -> bool {
    let (Some(h), Ok(size)) = (out.get_mut(..8), u16::try_from(len.saturating_sub(4))) else {
        return false;
    };
    if len < 8 {
        return false;
    }
    h[0] = ECPRI_REVISION << 4;
    h[1] = msg_type::IQ_DATA;
    h[2..4].copy_from_slice(&size.to_be_bytes());
    h[4..6].copy_from_slice(&pc_id.to_be_bytes());
    h[6] = seq;
    h[7] = 0x80;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iq_messages_are_placed_per_pc_id_and_fragments_skipped() {
        let mut b = [0u8; 72];
        assert!(emit_iq(&mut b, 72, 0x0102, 9));
        assert_eq!(
            read(&b),
            Ok(Piece::Message {
                stream: 0x0102,
                raw: 9,
                format: &SEQ8
            })
        );
        b[7] = 0x01; // E clear, subsequence 1
        assert_eq!(read(&b), Ok(Piece::Fragment));
        b[7] = 0x81; // last piece of subsequence 1
        assert!(matches!(read(&b), Ok(Piece::Message { raw: 9, .. })));
        assert_eq!(read(&b[..71]), Err(Reject::Length));
        assert_eq!(read(&b[..3]), Err(Reject::Short));
        let mut rev = b;
        rev[0] = 0x20;
        assert_eq!(read(&rev), Err(Reject::Foreign));
        let mut delay = b;
        delay[1] = msg_type::ONE_WAY_DELAY;
        assert_eq!(read(&delay), Err(Reject::Foreign));
        let mut rtc = b;
        rtc[1] = msg_type::RT_CONTROL;
        assert!(matches!(
            read(&rtc),
            Ok(Piece::Message {
                stream: 0x0002_0102,
                ..
            })
        ));
    }

    #[test]
    fn generic_data_has_32_bit_ids() {
        let mut b = [0u8; 16];
        b[0] = 0x10;
        b[1] = msg_type::GENERIC_DATA;
        b[2..4].copy_from_slice(&12u16.to_be_bytes());
        b[4..8].copy_from_slice(&0xdead_beefu32.to_be_bytes());
        b[8..12].copy_from_slice(&70_000u32.to_be_bytes());
        assert_eq!(
            read(&b),
            Ok(Piece::Message {
                stream: 0xdead_beef,
                raw: 70_000,
                format: &SEQ32
            })
        );
        assert_eq!(read(&b[..11]), Err(Reject::Length));
    }
}
