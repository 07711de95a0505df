//! eCPRI common header (eCPRI specification v2.0, section 3.1.3.1), over Ethernet
//! (EtherType `0xAEFE`) or over UDP (on a configured port, see
//! [`ParseOptions`](super::ParseOptions)).
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | revision (bits 7..4, must be 1), reserved (bits 3..1), C (bit 0: concatenated) |
//! | 1 | 1 | message type |
//! | 2 | 2 | payload size in bytes (after this 4-byte header) |
//!
//! Only the common header of the first message is parsed; with the C bit set, more
//! messages follow (each aligned to 4 bytes) and are left to the consumer.

use super::{get_u16, get_u8, put_bytes, put_u16};
use crate::error::ParseError;

/// The only eCPRI protocol revision rtdaq accepts.
pub const ECPRI_REVISION: u8 = 1;

/// eCPRI message types (section 3.2.4 of the specification).
pub mod msg_type {
    /// IQ data.
    pub const IQ_DATA: u8 = 0;
    /// Bit sequence.
    pub const BIT_SEQUENCE: u8 = 1;
    /// Real-time control data.
    pub const RT_CONTROL: u8 = 2;
    /// Generic data transfer.
    pub const GENERIC_DATA: u8 = 3;
    /// Remote memory access.
    pub const REMOTE_MEMORY_ACCESS: u8 = 4;
    /// One-way delay measurement.
    pub const ONE_WAY_DELAY: u8 = 5;
    /// Remote reset.
    pub const REMOTE_RESET: u8 = 6;
    /// Event indication.
    pub const EVENT_INDICATION: u8 = 7;
}

/// The eCPRI common header as plain data (revision is always [`ECPRI_REVISION`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EcpriHeader {
    /// C bit: another eCPRI message follows this one in the same frame.
    pub concatenated: bool,
    /// Message type (see [`msg_type`]).
    pub msg_type: u8,
    /// Payload size in bytes, not counting this header.
    pub payload_size: u16,
}

impl EcpriHeader {
    /// Header length in bytes.
    pub const LEN: usize = 4;

    /// Parses the common header at the start of `buf`.
    ///
    /// - fewer than 4 bytes, or fewer than `4 + payload_size`: [`ParseError::Truncated`];
    /// - revision ≠ 1: [`ParseError::Malformed`].
    ///
    /// Reserved bits are ignored.
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        Self::parse_within(buf, buf.len())
    }

    /// [`parse`](Self::parse) of a message of `total` bytes (header included) of which
    /// `buf` holds only the first ones (the first segment of a multi-buffer frame, the CPU
    /// part of a header-data split): the header must lie in `buf`, the payload size is
    /// checked against `total`.
    pub fn parse_within(buf: &[u8], total: usize) -> Result<Self, ParseError> {
        if buf.len() < Self::LEN || total < Self::LEN {
            return Err(ParseError::Truncated);
        }
        let b0 = get_u8(buf, 0)?;
        if b0 >> 4 != ECPRI_REVISION {
            return Err(ParseError::Malformed);
        }
        let h = Self {
            concatenated: b0 & 1 != 0,
            msg_type: get_u8(buf, 1)?,
            payload_size: get_u16(buf, 2)?,
        };
        if total - Self::LEN < usize::from(h.payload_size) {
            return Err(ParseError::Truncated);
        }
        Ok(h)
    }

    /// The payload of the first message in `buf` (bytes 4..4+payload_size).
    pub fn payload<'a>(&self, buf: &'a [u8]) -> Option<&'a [u8]> {
        buf.get(Self::LEN..Self::LEN + usize::from(self.payload_size))
    }

    /// Writes the 4 header bytes into the start of `buf`; returns 4. The payload is not
    /// touched.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, ParseError> {
        if buf.len() < Self::LEN {
            return Err(ParseError::Truncated);
        }
        put_bytes(
            buf,
            0,
            &[
                (ECPRI_REVISION << 4) | u8::from(self.concatenated),
                self.msg_type,
            ],
        )?;
        put_u16(buf, 2, self.payload_size)?;
        Ok(Self::LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_emit() {
        let h = EcpriHeader {
            concatenated: true,
            msg_type: msg_type::RT_CONTROL,
            payload_size: 3,
        };
        let mut b = [0u8; 7];
        assert_eq!(h.emit(&mut b), Ok(4));
        assert_eq!(&b[..4], &[0x11, 0x02, 0x00, 0x03]);
        assert_eq!(EcpriHeader::parse(&b), Ok(h));
        assert_eq!(EcpriHeader::parse(&b[..6]), Err(ParseError::Truncated));
        assert_eq!(EcpriHeader::parse(&b[..3]), Err(ParseError::Truncated));
        b[0] = 0x20;
        assert_eq!(EcpriHeader::parse(&b), Err(ParseError::Malformed));
    }

    /// The head of a longer message: the payload size is checked against the message's
    /// whole length, the header against the bytes at hand.
    #[test]
    fn parse_within_checks_the_size_against_the_whole_message() {
        let h = EcpriHeader {
            concatenated: false,
            msg_type: msg_type::IQ_DATA,
            payload_size: 8000,
        };
        let mut b = [0u8; 64];
        h.emit(&mut b).unwrap();
        assert_eq!(EcpriHeader::parse(&b), Err(ParseError::Truncated));
        assert_eq!(EcpriHeader::parse_within(&b, 8004), Ok(h));
        assert_eq!(
            EcpriHeader::parse_within(&b, 8003),
            Err(ParseError::Truncated)
        );
        assert_eq!(
            EcpriHeader::parse_within(&b[..3], 8004),
            Err(ParseError::Truncated)
        );
    }
}
